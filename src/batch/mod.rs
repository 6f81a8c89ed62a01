//! Batch jobs: the ten-stage flow for every line of an input (`vt-agent batch`, `POST /v1/batches`).
//!
//! A job has an id (given, or derived from its input). Each line that ends is recorded under the job, so
//! a rerun of the same job skips it; a line in flight when the job stopped runs again with the same
//! recharge key (`lote:{job}:{line}`), which the recharge system answers from its idempotency store
//! instead of charging again. A rerun of an id with another input is refused: its keys would name other
//! requests.

pub(crate) mod background;
pub(crate) mod progress;
mod shared;
pub(crate) mod source;

use std::collections::{BTreeMap, HashSet};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use futures::StreamExt as _;
use serde_json::json;
use tokio::sync::{mpsc, watch};

use crate::flow::{FlowError, FlowMode};
use crate::service::{FlowOptions, FlowRan, Recording, ServiceError, Services};
pub(crate) use source::{Format, LineDefaults, SourceLine};
use vt_store::{BatchJob, BatchLine, FlowRunRecord, LineStatus, StoreError};

/// How a job runs.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Flows at once.
    pub concurrency: usize,
    /// Flows started per second at most (the external systems have limits).
    pub rate: Option<NonZeroU32>,
    pub mode: FlowMode,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            concurrency: 8,
            rate: None,
            mode: FlowMode::Full,
        }
    }
}

/// A job to run: its record and its lines.
pub struct Job {
    pub record: BatchJob,
    pub lines: Vec<SourceLine>,
}

impl Job {
    /// A job over `lines` read from `bytes`.
    pub fn new(id: String, tenant_id: &str, bytes: &[u8], lines: Vec<SourceLine>, mode: FlowMode) -> Self {
        Self {
            record: BatchJob {
                id,
                tenant_id: tenant_id.to_owned(),
                digest: source::digest(bytes),
                total: lines.len() as i64,
                dry_run: mode == FlowMode::DryRun,
                source: None,
                created_at: Utc::now(),
                finished_at: None,
            },
            lines,
        }
    }
}

/// The id of a job that was given none: from its input (and whose it is, and whether it charges), so
/// running the same file again continues it instead of charging it again.
pub fn derived_id(tenant: Option<&str>, bytes: &[u8], mode: FlowMode) -> String {
    let mut material = Vec::with_capacity(bytes.len() + 64);
    if let Some(tenant) = tenant {
        material.extend_from_slice(tenant.as_bytes());
        material.push(0);
    }
    material.extend_from_slice(bytes);
    let hash = source::digest(&material);
    match mode {
        FlowMode::Full => format!("lote-{}", &hash[..16]),
        FlowMode::DryRun => format!("simulacao-{}", &hash[..16]),
    }
}

/// Whether a job id is usable: it goes into recharge keys and URLs.
pub(crate) fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error(
        "o lote {0} já existe com outra entrada: rodar de novo um lote reusa as chaves de recarga de cada linha, \
         então só a mesma entrada pode continuar (use outro --job para uma entrada nova)"
    )]
    OtherInput(String),
    #[error("o lote {id} foi iniciado {}; rode-o do mesmo jeito ou use outro --job", if *.dry_run { "com --dry-run" } else { "sem --dry-run" })]
    OtherMode { id: String, dry_run: bool },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a job did: counts by status over all its lines (those of earlier runs included), how long each
/// flow of this run took, and whether it stopped before the end.
#[derive(Debug, Default)]
pub struct Summary {
    pub total: usize,
    pub counts: BTreeMap<String, usize>,
    /// Lines recorded by an earlier run of the job.
    pub skipped: usize,
    /// Per flow run now.
    pub durations: Vec<Duration>,
    pub elapsed: Duration,
    /// Lines that did not run because the job was stopped.
    pub not_run: usize,
    /// Results that could not be recorded (a rerun runs those lines again, with the same keys).
    pub unrecorded: usize,
}

impl Summary {
    /// Every line ended `concluido`.
    pub(crate) fn all_concluded(&self) -> bool {
        self.not_run == 0 && self.counts.get("concluido").copied().unwrap_or(0) == self.total
    }

    pub fn ended(&self) -> usize {
        self.counts.values().sum()
    }

    /// Flows per second of this run.
    pub fn rate(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.durations.len() as f64 / secs
        } else {
            0.0
        }
    }

    /// The `q` quantile (0..=1) of this run's flow durations.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let mut d = self.durations.clone();
        d.sort_unstable();
        let last = d.len().checked_sub(1)?;
        Some(d[((last as f64) * q).round() as usize])
    }
}

/// Runs `job` on `service`: lines recorded by an earlier run are handed to `on_line` first (from the
/// store), then each line as it ends, in any order. `stop` turning true starts no more flows; those in
/// flight finish and are recorded.
pub async fn run(
    service: &Arc<Services>,
    job: &Job,
    options: Options,
    stop: watch::Receiver<bool>,
    mut on_line: impl FnMut(&BatchLine, Option<Duration>),
) -> Result<Summary, BatchError> {
    let store = service.stores().batches.clone();
    let id = &job.record.id;
    open(store.as_ref(), job).await?;
    let mut summary = Summary {
        total: job.lines.len(),
        ..Summary::default()
    };
    let earlier = store.batch_lines(id).await?;
    let done: HashSet<i64> = earlier.iter().map(|l| l.line).collect();
    for line in &earlier {
        *summary.counts.entry(line.status.as_str().to_owned()).or_default() += 1;
        on_line(line, None);
    }
    summary.skipped = earlier.len();
    drop(earlier);

    // Results are recorded by one task, as many per transaction as have ended meanwhile.
    let (tx, rx) = mpsc::channel::<Ended>(1024);
    let recorder = tokio::spawn(record(store.clone(), id.clone(), rx));
    let started = Instant::now();
    let todo: Vec<SourceLine> = job
        .lines
        .iter()
        .filter(|l| !done.contains(&l.line))
        .cloned()
        .collect();
    let mut results = flows(service, todo, options, stop);
    while let Some(next) = results.next().await {
        let Some((Ended { line, run }, took)) = next else {
            summary.not_run += 1;
            continue;
        };
        *summary.counts.entry(line.status.as_str().to_owned()).or_default() += 1;
        if line.status != LineStatus::Invalida {
            summary.durations.push(took);
        }
        on_line(&line, Some(took));
        if line.status != LineStatus::Erro {
            // The recorder only stops when the channel closes.
            let _ = tx.send(Ended { line, run }).await;
        }
    }
    summary.elapsed = started.elapsed();
    drop(tx);
    summary.unrecorded = recorder.await.unwrap_or(0);
    if summary.not_run == 0
        && summary.unrecorded == 0
        && !summary.counts.contains_key(LineStatus::Erro.as_str())
    {
        store.finish_batch(id, Utc::now()).await?;
    }
    Ok(summary)
}

/// Puts the job on record unless it is there, and checks that a job already there is of the same input
/// and mode.
async fn open(store: &dyn vt_store::BatchStore, job: &Job) -> Result<(), BatchError> {
    let id = &job.record.id;
    let stored = store.open_batch(&job.record).await?;
    if stored.digest != job.record.digest {
        return Err(BatchError::OtherInput(id.clone()));
    }
    if stored.dry_run != job.record.dry_run {
        return Err(BatchError::OtherMode {
            id: id.clone(),
            dry_run: stored.dry_run,
        });
    }
    Ok(())
}

/// The flows of `todo`, each line a task of its own (so the runtime spreads them over its threads),
/// at most `options.concurrency` at once and `options.rate` started a second: each line's result with
/// how long it took, or `None` for a line not started because `stop` turned true.
fn flows(
    service: &Arc<Services>,
    todo: Vec<SourceLine>,
    options: Options,
    stop: watch::Receiver<bool>,
) -> impl futures::Stream<Item = Option<(Ended, Duration)>> + Send + 'static {
    let limiter = options
        .rate
        .map(|r| Arc::new(governor::RateLimiter::direct(governor::Quota::per_second(r))));
    let service = service.clone();
    futures::stream::iter(todo)
        .map(move |line: SourceLine| {
            let (service, limiter, stop) = (service.clone(), limiter.clone(), stop.clone());
            tokio::spawn(async move {
                if let Some(limiter) = limiter {
                    limiter.until_ready().await;
                }
                // A line reads the flag when its turn to start comes: after a stop the rest end at
                // once, unrun.
                if *stop.borrow() {
                    return None;
                }
                let t = Instant::now();
                let result = run_line(&service, &line, options.mode).await;
                Some((result, t.elapsed()))
            })
        })
        .buffer_unordered(options.concurrency.max(1))
        .map(|joined| joined.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic())))
}

/// A line that ended, with its flow run when it ran one.
struct Ended {
    line: BatchLine,
    run: Option<FlowRunRecord>,
}

/// Records ended lines with their runs, as many per transaction as ended meanwhile (one commit for
/// many flows: a commit per flow would make the disk's sync the batch's pace). Returns how many lines
/// could not be recorded.
async fn record(store: Arc<dyn vt_store::BatchStore>, id: String, mut rx: mpsc::Receiver<Ended>) -> usize {
    let mut lost = 0;
    let mut buf = Vec::with_capacity(512);
    while rx.recv_many(&mut buf, 512).await > 0 {
        let (lines, runs): (Vec<BatchLine>, Vec<Option<FlowRunRecord>>) =
            buf.drain(..).map(|e| (e.line, e.run)).unzip();
        let runs: Vec<FlowRunRecord> = runs.into_iter().flatten().collect();
        if let Err(e) = store.save_batch_lines(&id, &lines, &runs, Utc::now()).await {
            tracing::error!(job = %id, lines = lines.len(), error = %e, "batch results could not be recorded");
            lost += lines.len();
        }
    }
    lost
}

/// One line: its flow run, or why it did not run.
async fn run_line(service: &Services, line: &SourceLine, mode: FlowMode) -> Ended {
    let text = match &line.input {
        Ok(text) => text,
        Err(why) => return invalid(line.line, why),
    };
    let options = FlowOptions {
        mode,
        tenant: None,
        recording: Recording::ByCaller,
    };
    match service.flows().run_flow(text, options).await {
        Ok(FlowRan { output, record, .. }) => {
            let output = output.for_caller();
            let status = LineStatus::from(output.status).as_str();
            let resultado = output.resultado;
            Ended {
                line: BatchLine {
                    line: line.line,
                    status: output.status.into(),
                    result: json!({"line": line.line, "execucao_id": output.execucao_id, "status": status, "resultado": resultado}),
                },
                run: record,
            }
        }
        Err(ServiceError::Flow(FlowError::Input(e))) => invalid(line.line, &e.to_string()),
        Err(e) => {
            tracing::error!(line = line.line, error = %e, "batch line could not run");
            Ended {
                line: BatchLine {
                    line: line.line,
                    status: LineStatus::Erro,
                    result: json!({"line": line.line, "status": LineStatus::Erro.as_str(), "error": format!("a linha não pôde rodar: {e}")}),
                },
                run: None,
            }
        }
    }
}

fn invalid(line: i64, why: &str) -> Ended {
    Ended {
        line: BatchLine {
            line,
            status: LineStatus::Invalida,
            result: json!({"line": line, "status": LineStatus::Invalida.as_str(), "error": why}),
        },
        run: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_derive_from_the_input_tenant_and_mode() {
        let a = derived_id(None, b"x", FlowMode::Full);
        assert_eq!(a, derived_id(None, b"x", FlowMode::Full));
        assert!(a.starts_with("lote-") && valid_id(&a));
        assert_ne!(a, derived_id(None, b"y", FlowMode::Full));
        assert_ne!(a, derived_id(Some("t"), b"x", FlowMode::Full));
        assert!(derived_id(None, b"x", FlowMode::DryRun).starts_with("simulacao-"));
        assert!(!valid_id("a:b") && !valid_id("") && !valid_id(&"a".repeat(65)));
    }

    #[test]
    fn quantiles_of_durations() {
        let s = Summary {
            durations: (1..=100).map(Duration::from_millis).collect(),
            ..Summary::default()
        };
        assert_eq!(s.quantile(0.5), Some(Duration::from_millis(51)));
        assert_eq!(s.quantile(0.99), Some(Duration::from_millis(99)));
        assert_eq!(Summary::default().quantile(0.5), None);
    }
}
