//! A batch job shared by every `serve` instance on one store. The job's lines are cut into chunks of
//! [`CHUNK_LINES`]; an instance takes one chunk at a time under a lease it renews while the chunk's
//! flows run (on PostgreSQL with `FOR UPDATE SKIP LOCKED`, so instances never wait on each other), and
//! gives it back done once the chunk's lines are recorded. Whichever instance is free takes the next
//! chunk, so N instances share a job; one that dies leaves its chunk to the others when the lease runs
//! out — they skip the lines it recorded and run the rest again with the same recharge keys
//! (`lote:{job}:{line}`), which the recharge system answers from its idempotency store.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use futures::StreamExt as _;
use tokio::sync::watch;

use super::{BatchError, Ended, Job, Options, SourceLine, Summary};
use crate::service::Services;
use vt_store::{BatchStore, LineStatus};

/// Lines per chunk: what one instance takes at a time (and records in one transaction).
pub(crate) const CHUNK_LINES: usize = 32;
/// How long a chunk stays an instance's without a renewal.
const LEASE: chrono::Duration = chrono::Duration::seconds(15);
/// How often the instance running a chunk renews its lease.
const RENEW_EVERY: Duration = Duration::from_secs(5);
/// How long a chunk with a line that could not run waits before an instance tries it again.
const RETRY_AFTER: chrono::Duration = chrono::Duration::seconds(60);

/// Runs the chunks of `job` this instance (`owner`) can take until none is left or `stop`; the last
/// instance to find every chunk done marks the job finished.
pub(super) async fn run(
    service: &Arc<Services>,
    job: &Job,
    options: Options,
    stop: watch::Receiver<bool>,
    owner: &str,
) -> Result<Summary, BatchError> {
    let store = service.stores().batches.clone();
    let id = &job.record.id;
    super::open(store.as_ref(), job).await?;
    store
        .share_batch(id, job.lines.len().div_ceil(CHUNK_LINES) as i64)
        .await?;
    let mut summary = Summary {
        total: job.lines.len(),
        ..Summary::default()
    };
    let started = Instant::now();
    while !*stop.borrow() {
        let now = Utc::now();
        let Some(chunk) = store.claim_batch_chunk(id, owner, now, now + LEASE).await? else {
            break;
        };
        let from = usize::try_from(chunk)
            .unwrap_or(usize::MAX)
            .saturating_mul(CHUNK_LINES);
        let lines = job
            .lines
            .get(from..(from + CHUNK_LINES).min(job.lines.len()))
            .unwrap_or_default();
        let ran = Chunk {
            store: &store,
            id,
            chunk,
            owner,
        }
        .run(service, lines, options, stop.clone(), &mut summary)
        .await;
        let not_before = match ran {
            Ran::Complete | Ran::Stopped => Utc::now(),
            Ran::Unfinished => Utc::now() + RETRY_AFTER,
        };
        store
            .release_batch_chunk(id, chunk, owner, ran == Ran::Complete, not_before)
            .await?;
    }
    summary.elapsed = started.elapsed();
    if store.batch_chunks_open(id, Utc::now()).await?.0 == 0 {
        store.finish_batch(id, Utc::now()).await?;
    }
    Ok(summary)
}

/// How a chunk's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ran {
    /// Every line recorded.
    Complete,
    /// The instance is stopping: lines left unrun, for another instance at once.
    Stopped,
    /// A line could not run or be recorded: tried again later.
    Unfinished,
}

/// One chunk this instance holds.
struct Chunk<'a> {
    store: &'a Arc<dyn BatchStore>,
    id: &'a str,
    chunk: i64,
    owner: &'a str,
}

impl Chunk<'_> {
    /// Runs the chunk's lines not recorded yet and records them in one transaction, renewing the lease
    /// meanwhile.
    async fn run(
        &self,
        service: &Arc<Services>,
        lines: &[SourceLine],
        options: Options,
        stop: watch::Receiver<bool>,
        summary: &mut Summary,
    ) -> Ran {
        let (Some(first), Some(last)) = (lines.first(), lines.last()) else {
            return Ran::Complete;
        };
        let ended: HashSet<i64> = match self.store.ended_lines(self.id, first.line, last.line).await {
            Ok(ended) => ended.into_iter().collect(),
            Err(e) => {
                tracing::error!(job = %self.id, chunk = self.chunk, error = %e, "batch chunk could not be read");
                return Ran::Unfinished;
            }
        };
        summary.skipped += ended.len();
        let todo: Vec<SourceLine> = lines
            .iter()
            .filter(|l| !ended.contains(&l.line))
            .cloned()
            .collect();
        let renewing = tokio::spawn(self.renewal());
        let mut flows = super::flows(service, todo, options, stop);
        let mut ran = Ran::Complete;
        let mut done = Vec::new();
        while let Some(next) = flows.next().await {
            let Some((ended, took)) = next else {
                summary.not_run += 1;
                ran = Ran::Stopped;
                continue;
            };
            *summary
                .counts
                .entry(ended.line.status.as_str().to_owned())
                .or_default() += 1;
            if ended.line.status != LineStatus::Invalida {
                summary.durations.push(took);
            }
            if ended.line.status == LineStatus::Erro {
                ran = Ran::Unfinished;
            } else {
                done.push(ended);
            }
        }
        renewing.abort();
        if self.record(done).await.is_err() {
            return Ran::Unfinished;
        }
        ran
    }

    /// Renews the lease until aborted (or until the chunk is no longer this instance's).
    fn renewal(&self) -> impl Future<Output = ()> + Send + 'static {
        let (store, id, chunk, owner) = (
            self.store.clone(),
            self.id.to_owned(),
            self.chunk,
            self.owner.to_owned(),
        );
        async move {
            loop {
                tokio::time::sleep(RENEW_EVERY).await;
                match store
                    .renew_batch_chunk(&id, chunk, &owner, Utc::now() + LEASE)
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(job = %id, chunk, "batch chunk lease lost: another instance may run its lines (same keys)");
                        return;
                    }
                    Err(e) => tracing::warn!(job = %id, chunk, error = %e, "batch chunk lease not renewed"),
                }
            }
        }
    }

    async fn record(&self, done: Vec<Ended>) -> Result<(), ()> {
        if done.is_empty() {
            return Ok(());
        }
        let (lines, runs): (Vec<_>, Vec<_>) = done.into_iter().map(|e| (e.line, e.run)).unzip();
        let runs: Vec<_> = runs.into_iter().flatten().collect();
        self.store
            .save_batch_lines(self.id, &lines, &runs, Utc::now())
            .await
            .map_err(|e| {
                tracing::error!(job = %self.id, chunk = self.chunk, error = %e, "batch results could not be recorded");
            })
    }
}
