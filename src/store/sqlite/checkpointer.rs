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

use std::sync::Weak;
use std::time::Duration;

use sqlx::SqlitePool;

/// How often: at ~1,300 turns a second this keeps the WAL to a few megabytes.
pub(super) const EVERY: Duration = Duration::from_millis(500);

/// Starts the task; it stops once `alive` (the store's) is gone.
pub(super) fn start(readers: SqlitePool, alive: Weak<()>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if alive.upgrade().is_none() {
                return;
            }
            if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                .execute(&readers)
                .await
            {
                tracing::warn!(error = %e, "the WAL could not be checkpointed; trying again shortly");
            }
        }
    });
}
