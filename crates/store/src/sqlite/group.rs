//! Group commit of the writes a message costs on SQLite: accepting it, and its turn's transaction.
//! Each of them used to be a transaction of its own and a sync of the WAL (`synchronous = FULL`): two
//! syncs a turn, and with many conversations at once the disk's sync was the pace. Here the writes that
//! come while a group transaction is open run inside it, and one commit — one sync — carries them all:
//!
//! - a writer runs its statements in its own task, on the open transaction (opening one if none is);
//! - with no other writer waiting for the lock, it commits at once (one conversation pays nothing for
//!   the grouping); else it leaves the commit to the committer, which waits its turn for the same lock
//!   — behind the writers that queued meanwhile, which therefore join the group — and commits;
//! - each writer is answered only after the commit that holds its write: nothing is acknowledged
//!   before it is on disk, as before.
//!
//! A write that fails (or whose task is dropped half-way) spoils the group: the committer rolls it
//! back and every writer of it writes again on its own, so one bad write fails alone.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use sqlx::{Sqlite, SqlitePool, Transaction};
use tokio::sync::{Mutex, MutexGuard, Notify, oneshot};

pub(super) struct Group {
    inner: Arc<Inner>,
}

struct Inner {
    writer: SqlitePool,
    state: Mutex<State>,
    wake: Arc<Notify>,
    /// Writers waiting for the lock: none, and the one holding it commits at once (one conversation
    /// pays no hand-over to the committer).
    wanting: AtomicUsize,
    /// A group transaction is open.
    open: AtomicBool,
    /// Single statements running outside any group ([`Group::alone`]).
    alone: AtomicUsize,
}

#[derive(Default)]
struct State {
    tx: Option<Transaction<'static, Sqlite>>,
    /// The writers of the open group, told whether it committed.
    waiting: Vec<oneshot::Sender<bool>>,
    /// A write of the open group failed or was cut short: it is rolled back.
    spoilt: bool,
}

/// A writer inside the open group, holding its lock: its statements go to [`Member::tx`]. Dropped
/// before [`Member::written`] (a failed write, or a task cut short), it spoils the group and wakes the
/// committer to roll it back; the writers that come meanwhile write on their own, once the connection
/// is free again.
pub(super) struct Member<'a> {
    state: MutexGuard<'a, State>,
    inner: &'a Inner,
    written: bool,
}

impl Member<'_> {
    pub(super) fn tx(&mut self) -> &mut Transaction<'static, Sqlite> {
        self.state
            .tx
            .as_mut()
            .expect("a member exists only while its group's transaction is open")
    }

    /// The write is done. With no other writer waiting for the lock the group commits now; else the
    /// lock goes to the next writer and the committer commits after them. Whether the transaction
    /// holding the write committed (else the caller writes on its own).
    pub(super) async fn committed(mut self) -> bool {
        self.written = true;
        if self.inner.wanting.load(Ordering::Acquire) == 0
            && let Some(tx) = self.state.tx.take()
        {
            self.inner.open.store(false, Ordering::Release);
            let waiting = std::mem::take(&mut self.state.waiting);
            let committed = commit(tx).await;
            for writer in waiting {
                let _ = writer.send(committed);
            }
            return committed;
        }
        let (told, committed) = oneshot::channel();
        self.state.waiting.push(told);
        self.inner.wake.notify_one();
        drop(self);
        committed.await.unwrap_or(false)
    }
}

impl Drop for Member<'_> {
    fn drop(&mut self) {
        if !self.written {
            self.state.spoilt = true;
            self.inner.wake.notify_one();
        }
    }
}

/// A single statement running outside the group ([`Group::alone`]).
pub(super) struct Alone<'a>(&'a AtomicUsize);

impl Drop for Alone<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Commits a group's transaction: whether it is on disk.
async fn commit(tx: Transaction<'static, Sqlite>) -> bool {
    match tx.commit().await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "a group of turns could not be committed; each is written alone");
            false
        }
    }
}

impl Group {
    pub(super) fn start(writer: SqlitePool) -> Self {
        let wake = Arc::new(Notify::new());
        let inner = Arc::new(Inner {
            writer,
            state: Mutex::new(State::default()),
            wake: wake.clone(),
            wanting: AtomicUsize::new(0),
            open: AtomicBool::new(false),
            alone: AtomicUsize::new(0),
        });
        tokio::spawn(commit_loop(Arc::downgrade(&inner), wake));
        Self { inner }
    }

    /// Whether other writes are under way (a group open, or writers waiting for it): a write that is a
    /// single statement joins the group only then, and alone runs as one statement (a transaction of
    /// its own would cost two more hops to SQLite's thread).
    pub(super) fn busy(&self) -> bool {
        self.inner.open.load(Ordering::Acquire)
            || self.inner.wanting.load(Ordering::Acquire) > 0
            || self.inner.alone.load(Ordering::Acquire) > 0
    }

    /// Marks a single statement running outside the group until the guard goes: writes that come
    /// meanwhile see the store busy and group.
    pub(super) fn alone(&self) -> Alone<'_> {
        self.inner.alone.fetch_add(1, Ordering::AcqRel);
        Alone(&self.inner.alone)
    }

    /// Joins the open group transaction (opening one if none is); `None` when the open group is being
    /// rolled back or no transaction could be opened — then the caller writes on its own.
    pub(super) async fn enter(&self) -> Option<Member<'_>> {
        self.inner.wanting.fetch_add(1, Ordering::AcqRel);
        let mut state = self.inner.state.lock().await;
        self.inner.wanting.fetch_sub(1, Ordering::AcqRel);
        if state.spoilt {
            return None;
        }
        if state.tx.is_none() {
            state.tx = Some(self.inner.writer.begin().await.ok()?);
            self.inner.open.store(true, Ordering::Release);
        }
        Some(Member {
            state,
            inner: &self.inner,
            written: false,
        })
    }
}

/// Commits (or rolls back) each group once its writers have had their turn; ends with the store.
async fn commit_loop(inner: Weak<Inner>, wake: Arc<Notify>) {
    loop {
        wake.notified().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        // Behind the writers already queued for the lock: they join this group.
        let mut state = inner.state.lock().await;
        let Some(tx) = state.tx.take() else {
            continue;
        };
        inner.open.store(false, Ordering::Release);
        let waiting = std::mem::take(&mut state.waiting);
        let committed = if std::mem::take(&mut state.spoilt) {
            let _ = tx.rollback().await;
            false
        } else {
            commit(tx).await
        };
        drop(state);
        for writer in waiting {
            let _ = writer.send(committed);
        }
    }
}
