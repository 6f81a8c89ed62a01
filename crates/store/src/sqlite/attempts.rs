//! Group commit of recharge attempts on SQLite. Each attempt must be on disk before its recharge is
//! sent, and SQLite has one writing connection per process: one transaction (one sync of the WAL) per
//! attempt made the disk's sync time the pace of every flow in the process. Here the writes that wait
//! while a transaction commits go together in the next one; each caller still returns only after the
//! transaction holding its write has committed. A group that fails is retried write by write, so one
//! bad write fails alone.

use chrono::{DateTime, Utc};
use sqlx::SqlitePool;
use tokio::sync::{mpsc, oneshot};
use vt_domain::journal::{AttemptStatus, RechargeAttempt};

use super::{insert_attempt, insert_followup, settle_followup};
use crate::{NewFollowUp, Sent, StoreError};

/// Writes waiting at most, per transaction.
const GROUP: usize = 256;

pub(super) enum Write {
    Begin(Box<(RechargeAttempt, Option<NewFollowUp>)>, DateTime<Utc>),
    Resolve {
        key: String,
        status: AttemptStatus,
        now: DateTime<Utc>,
    },
}

type Request = (Write, oneshot::Sender<Result<(), StoreError>>);

/// The handle writers use; the committing task ends when the last handle goes.
#[derive(Clone)]
pub(super) struct Attempts {
    tx: mpsc::Sender<Request>,
}

impl Attempts {
    pub(super) fn start(writer: SqlitePool) -> Self {
        let (tx, rx) = mpsc::channel(4 * GROUP);
        tokio::spawn(commit_loop(writer, rx));
        Self { tx }
    }

    /// Returns once `write` is committed.
    pub(super) async fn write(&self, write: Write) -> Result<(), StoreError> {
        let (done, committed) = oneshot::channel();
        let gone = || StoreError::Invalid("the recharge-attempt writer stopped".into());
        self.tx.send((write, done)).await.map_err(|_| gone())?;
        committed.await.map_err(|_| gone())?
    }
}

async fn commit_loop(writer: SqlitePool, mut rx: mpsc::Receiver<Request>) {
    let mut group: Vec<Request> = Vec::with_capacity(GROUP);
    while rx.recv_many(&mut group, GROUP).await > 0 {
        if commit(&writer, group.iter().map(|(w, _)| w)).await.is_ok() {
            for (_, done) in group.drain(..) {
                let _ = done.send(Ok(()));
            }
        } else {
            for (write, done) in group.drain(..) {
                let _ = done.send(commit(&writer, std::iter::once(&write)).await);
            }
        }
    }
}

async fn commit(writer: &SqlitePool, writes: impl Iterator<Item = &Write>) -> Result<(), StoreError> {
    let mut tx = writer.begin().await?;
    for write in writes {
        match write {
            Write::Begin(begun, now) => {
                let (a, follow_up) = &**begun;
                insert_attempt(a, *now, Sent::Now).execute(&mut *tx).await?;
                if let Some(f) = follow_up {
                    insert_followup(&a.idempotency_key, f, *now)?
                        .execute(&mut *tx)
                        .await?;
                }
            }
            Write::Resolve { key, status, now } => {
                sqlx::query(
                    "UPDATE recharge_attempts SET status = ?, updated_at = ? WHERE idempotency_key = ?",
                )
                .bind(status.as_str())
                .bind(now.timestamp_millis())
                .bind(key)
                .execute(&mut *tx)
                .await?;
                if !status.is_unknown() {
                    settle_followup(key, status.as_str(), *now)
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }
    }
    tx.commit().await?;
    Ok(())
}
