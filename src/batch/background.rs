//! Batch jobs running inside `serve` (`POST /v1/batches`): started in the background, one task per
//! job, stopped with the server (flows in flight finish and are recorded). Every instance on the store
//! joins every unfinished job (`join`, at start and every few seconds): the job's input is stored with
//! it, and its lines are shared out in chunks (`shared`), so N instances share a job without running a
//! line twice, and a job interrupted on one instance is finished by another or at the next start.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::{BatchError, Format, Job, LineDefaults, Options, source};
use crate::flow::FlowMode;
use crate::service::Services;
use vt_store::BatchJob;

pub struct Background {
    service: Arc<Services>,
    /// Policies for lines that bring none (`[vt.politicas]`).
    politicas: vt_domain::vt::input::Politicas,
    running: Mutex<HashSet<String>>,
    tasks: tokio::sync::Mutex<JoinSet<()>>,
    stop: watch::Receiver<bool>,
    /// This instance, as the owner of the chunks it takes.
    owner: String,
}

/// A job as a request described it.
pub struct Submission {
    pub tenant_id: String,
    pub text: String,
    pub options: Options,
}

impl Background {
    pub fn new(
        service: Arc<Services>,
        politicas: vt_domain::vt::input::Politicas,
        stop: watch::Receiver<bool>,
    ) -> Arc<Self> {
        Arc::new(Self {
            service,
            politicas,
            running: Mutex::default(),
            tasks: tokio::sync::Mutex::new(JoinSet::new()),
            stop,
            owner: uuid::Uuid::new_v4().to_string(),
        })
    }

    /// Puts the job on record and starts it unless it is running here already or has finished; the
    /// job's id is derived from its tenant and input, so sending the same input again names the same
    /// job. Returns the job as stored.
    pub async fn submit(self: &Arc<Self>, s: Submission) -> Result<BatchJob, SubmitError> {
        let id = super::derived_id(Some(&s.tenant_id), s.text.as_bytes(), s.options.mode);
        let job = self.job(id, &s.tenant_id, s.text, s.options.mode)?;
        let stored = self.service.stores().batches.open_batch(&job.record).await?;
        if stored.digest != job.record.digest || stored.dry_run != job.record.dry_run {
            return Err(SubmitError::Batch(BatchError::OtherInput(stored.id)));
        }
        if stored.finished_at.is_none() {
            self.spawn(job, s.options).await;
        }
        Ok(stored)
    }

    /// Whether the job runs in this process now.
    pub(crate) fn is_running(&self, id: &str) -> bool {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(id)
    }

    /// Joins the unfinished jobs with work this instance could take now — interrupted by a stop, or
    /// running on another instance — unless they run here already. Returns how many it joined.
    pub async fn join(self: &Arc<Self>) -> usize {
        let store = &self.service.stores().batches;
        let ids = match store.claimable_batches(chrono::Utc::now()).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::error!(error = %e, "unfinished batches could not be read");
                return 0;
            }
        };
        let mut joined = 0;
        for id in ids.into_iter().filter(|id| !self.is_running(id)) {
            let stored = match store.batch(&id).await {
                Ok(Some(stored)) => stored,
                Ok(None) => continue,
                Err(e) => {
                    tracing::error!(job = %id, error = %e, "stored batch could not be read");
                    continue;
                }
            };
            let Some(text) = stored.source.clone() else {
                continue;
            };
            let mode = if stored.dry_run {
                FlowMode::DryRun
            } else {
                FlowMode::Full
            };
            match self.job(stored.id.clone(), &stored.tenant_id, text, mode) {
                Ok(job) => {
                    let options = Options {
                        mode,
                        ..Options::default()
                    };
                    self.spawn(job, options).await;
                    joined += 1;
                }
                Err(e) => tracing::error!(job = %stored.id, error = %e, "stored batch could not be read"),
            }
        }
        joined
    }

    /// Waits for the jobs to stop (after the stop signal, each finishes its flows in flight).
    pub async fn wait(&self) {
        let mut tasks = self.tasks.lock().await;
        while tasks.join_next().await.is_some() {}
    }

    fn job(&self, id: String, tenant: &str, text: String, mode: FlowMode) -> Result<Job, SubmitError> {
        let defaults = LineDefaults {
            job_id: id.clone(),
            politicas: self.politicas.clone(),
            tenant: Some(tenant.to_owned()),
        };
        let lines = source::read(text.as_bytes(), Format::Jsonl, &defaults)?;
        let mut job = Job::new(id, tenant, text.as_bytes(), lines, mode);
        job.record.source = Some(text);
        Ok(job)
    }

    async fn spawn(self: &Arc<Self>, job: Job, options: Options) {
        let id = job.record.id.clone();
        if !self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone())
        {
            return;
        }
        let this = self.clone();
        let mut tasks = self.tasks.lock().await;
        // Finished jobs' handles go.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(async move {
            let result =
                super::shared::run(&this.service, &job, options, this.stop.clone(), &this.owner).await;
            match result {
                Ok(summary) => tracing::info!(
                    job = %id,
                    ended = summary.ended(),
                    total = summary.total,
                    not_run = summary.not_run,
                    "batch stopped"
                ),
                Err(e) => tracing::error!(job = %id, error = %e, "batch failed"),
            }
            this.running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
        });
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error(transparent)]
    Source(#[from] source::SourceError),
    #[error(transparent)]
    Batch(#[from] BatchError),
}

impl From<vt_store::StoreError> for SubmitError {
    fn from(e: vt_store::StoreError) -> Self {
        Self::Batch(BatchError::Store(e))
    }
}
