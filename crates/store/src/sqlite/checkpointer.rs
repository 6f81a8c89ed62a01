//! A service's WAL checkpoints, beside its commits instead of inside them.
//!
//! SQLite checkpoints by default in the commit that takes the WAL past 1,000 pages: that commit — and
//! every turn queued behind the one writer — waits while the pages are copied into the database and
//! synced twice (at 200 conversations at once it was 7.5 % of `serve`'s CPU). Checkpointing less
//! often in the commit saved CPU (a page rewritten many times is copied once) but made that one
//! commit long: the open loop's p99 doubled. So a service's connections never checkpoint
//! (`wal_autocheckpoint = 0`) and this task runs a `PASSIVE` checkpoint on a reading connection every
//! [`EVERY`]: it copies what no reader still needs, never takes the write lock, and the writer goes on
//! committing meanwhile; SQLite starts the WAL over once a checkpoint has copied all of it.

use std::time::Duration;

use sqlx::SqlitePool;
use tokio_util::sync::{CancellationToken, DropGuard};

/// How often: at ~1,300 turns a second this keeps the WAL to a few megabytes.
pub(super) const EVERY: Duration = Duration::from_millis(500);

/// Starts the passes; they stop when the guard (the store's) is dropped.
pub(super) fn start(readers: SqlitePool) -> DropGuard {
    let token = CancellationToken::new();
    let stop = token.clone().cancelled_owned();
    tokio::spawn(vt_engine::periodic::every(EVERY, stop, async move || {
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&readers)
            .await
        {
            tracing::warn!(error = %e, "the WAL could not be checkpointed; trying again shortly");
        }
    }));
    token.drop_guard()
}
