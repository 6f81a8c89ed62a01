//! The desk's log as it grows, read once per process: one reader follows the cases' log by sequence
//! ([`vt_store::DeskStore::desk_lines`]) while a console listens (the live pages), so a line written
//! by any instance on the same database reaches every console within a poll. PostgreSQL may commit a
//! line after one with a higher sequence, so each poll reads back [`LOOKBACK`] lines before the newest
//! seen and drops the ones already told.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use vt_store::{DeskLine, DeskStore};

/// How often the log is read while a console listens.
const POLL: Duration = Duration::from_millis(300);
/// Lines read again behind the newest seen (a late commit on PostgreSQL).
const LOOKBACK: i64 = 32;

/// The process's reader of the desk's log and the pages listening to it.
pub(crate) struct Feed {
    lines: broadcast::Sender<Arc<DeskLine>>,
    started: std::sync::Once,
}

impl Default for Feed {
    fn default() -> Self {
        Self {
            lines: broadcast::channel(1024).0,
            started: std::sync::Once::new(),
        }
    }
}

impl Feed {
    /// The lines from now on; the reader starts with the first listener.
    pub(super) fn listen(&self, store: Arc<dyn DeskStore>) -> broadcast::Receiver<Arc<DeskLine>> {
        let lines = self.lines.clone();
        self.started.call_once(|| {
            tokio::spawn(follow(store, lines));
        });
        self.lines.subscribe()
    }
}

/// Reads the log after the newest line seen, while anyone listens.
async fn follow(store: Arc<dyn DeskStore>, lines: broadcast::Sender<Arc<DeskLine>>) {
    let mut head = None;
    let mut told = BTreeSet::new();
    loop {
        if lines.receiver_count() == 0 {
            // Nobody listens: nothing is read, and a new listener starts from the log's end.
            head = None;
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        let after = match head {
            Some(h) => h,
            None => match store.desk_head().await {
                Ok(h) => {
                    head = Some(h);
                    h
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the desk's log could not be read");
                    tokio::time::sleep(POLL * 10).await;
                    continue;
                }
            },
        };
        match store.desk_lines(after.saturating_sub(LOOKBACK), 500).await {
            Ok(read) => {
                for line in read {
                    if told.insert(line.seq) {
                        head = Some(head.unwrap_or(0).max(line.seq));
                        let _ = lines.send(Arc::new(line));
                    }
                }
                let floor = head.unwrap_or(0).saturating_sub(LOOKBACK);
                told = told.split_off(&floor);
            }
            Err(e) => tracing::warn!(error = %e, "the desk's log could not be read"),
        }
        tokio::time::sleep(POLL).await;
    }
}
