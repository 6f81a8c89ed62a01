//! Per-conversation turn locks, in two halves:
//!
//! - in one process, a map of async mutexes ([`LocalLocks`]), so turns of a conversation queue without
//!   touching the database;
//! - across processes, what suits the backend:
//!   - PostgreSQL (instances on several hosts): a **lease row** (`conversation_leases`), taken with one
//!     conditional write, renewed in the background while the turn runs, deleted when it ends; a
//!     process killed mid-turn leaves a lease that expires after [`LEASE`]. A lease holds no database
//!     connection while the turn runs, so any number of conversations can be in flight on a pool of
//!     ten (an advisory lock held a pooled connection for the whole turn and starved the pool);
//!   - SQLite (processes on one host, one file): an exclusive **file lock** on one of [`BUCKETS`] files
//!     beside the database ([`FileLocks`]). The kernel drops it the instant a process dies, and it
//!     costs no database write (two lease writes were two more fsynced commits per turn).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::sync::OwnedMutexGuard;

use super::StoreError;

/// How long a lease lives without renewal: the longest a conversation stays blocked after its
/// process was killed mid-turn.
pub(super) const LEASE: Duration = Duration::from_secs(30);
/// How long a turn waits for another process's turn of the same conversation before giving up.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(90);

/// The database half, implemented by each store.
#[async_trait]
pub trait Leases: Clone + Send + Sync + 'static {
    /// Takes the lease unless a live one (expiring after `now`) is held by someone else.
    async fn try_take(
        &self,
        conversation_id: &str,
        owner: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
    /// Extends a lease `owner` holds; `false` when it is no longer theirs.
    async fn renew(
        &self,
        conversation_id: &str,
        owner: &str,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
    async fn release(&self, conversation_id: &str, owner: &str) -> Result<(), StoreError>;
}

/// Held while a turn runs. [`TurnLock::release`] gives the cross-process half back at once; dropping
/// the lock (a cancelled turn) gives it back in the background (a file lock: at once).
pub struct TurnLock {
    lease: Option<Box<dyn Releasable>>,
    _local: OwnedMutexGuard<()>,
}

impl TurnLock {
    /// Only the in-process half (an in-memory database: one process by definition).
    pub fn local(local: OwnedMutexGuard<()>) -> Self {
        Self {
            lease: None,
            _local: local,
        }
    }

    /// Releases the lease before the local mutex, so the next turn in this process finds it free.
    pub async fn release(mut self) {
        if let Some(lease) = self.lease.take() {
            lease.release_now().await;
        }
    }
}

#[async_trait]
trait Releasable: Send {
    async fn release_now(self: Box<Self>);
}

struct LeaseGuard<L: Leases> {
    leases: L,
    conversation_id: String,
    owner: String,
    renewal: tokio::task::JoinHandle<()>,
    released: bool,
}

#[async_trait]
impl<L: Leases> Releasable for LeaseGuard<L> {
    async fn release_now(mut self: Box<Self>) {
        self.renewal.abort();
        self.released = true;
        if let Err(e) = self.leases.release(&self.conversation_id, &self.owner).await {
            tracing::warn!(error = %e, "turn lease could not be released; it will expire");
        }
    }
}

impl<L: Leases> Drop for LeaseGuard<L> {
    fn drop(&mut self) {
        self.renewal.abort();
        if self.released {
            return;
        }
        let (leases, id, owner) = (
            self.leases.clone(),
            self.conversation_id.clone(),
            self.owner.clone(),
        );
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = leases.release(&id, &owner).await;
            });
        }
    }
}

/// Polls `take` (the cross-process half of a lock) until it succeeds, with a doubling wait and jitter,
/// for at most [`ACQUIRE_TIMEOUT`]. The one waiting loop of both backends.
async fn wait_for<F, Fut>(conversation_id: &str, mut take: F) -> Result<(), StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, StoreError>>,
{
    let started = std::time::Instant::now();
    let mut wait = Duration::from_millis(1);
    while !take().await? {
        if started.elapsed() > ACQUIRE_TIMEOUT {
            return Err(StoreError::Invalid(format!(
                "a conversa {conversation_id} está ocupada em outro processo"
            )));
        }
        // Jitter keeps processes that wait for the same conversation from polling in step.
        let jitter = Duration::from_micros(u64::from(uuid::Uuid::new_v4().as_u128() as u16) % 1_000);
        tokio::time::sleep(wait + jitter).await;
        wait = (wait * 2).min(Duration::from_millis(20));
    }
    Ok(())
}

/// Takes the local mutex, then the lease, waiting (with backoff) while another process holds it.
pub async fn acquire<L: Leases>(
    leases: &L,
    local: &LocalLocks,
    conversation_id: &str,
) -> Result<TurnLock, StoreError> {
    let local = local.lock(conversation_id).await;
    let owner = uuid::Uuid::new_v4().simple().to_string();
    let lease = chrono::Duration::from_std(LEASE).unwrap_or_else(|_| chrono::Duration::seconds(30));
    wait_for(conversation_id, || async {
        let now = Utc::now();
        leases.try_take(conversation_id, &owner, now + lease, now).await
    })
    .await?;
    let renewal = tokio::spawn({
        let (leases, id, owner) = (leases.clone(), conversation_id.to_owned(), owner.clone());
        async move {
            loop {
                tokio::time::sleep(LEASE / 3).await;
                match leases.renew(&id, &owner, Utc::now() + lease).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::error!(conversation = %id, "turn lease lost: another process may run this conversation");
                        return;
                    }
                    Err(e) => tracing::warn!(error = %e, "turn lease could not be renewed"),
                }
            }
        }
    });
    Ok(TurnLock {
        lease: Some(Box::new(LeaseGuard {
            leases: leases.clone(),
            conversation_id: conversation_id.to_owned(),
            owner,
            renewal,
            released: false,
        })),
        _local: local,
    })
}

/// Conversations share this many lock files (two conversations in one bucket wait for each other's
/// turns; with a thousand buckets that is rare and short).
pub(super) const BUCKETS: u64 = 1024;

/// The cross-process half on SQLite: `<database>.locks/<bucket>.lock`, locked exclusively. In the
/// process, turns queue on their bucket's mutex (not their conversation's): conversations that share a
/// bucket would otherwise meet at the file lock and poll for it — with 200 conversations at once some
/// twenty pairs share one, and their polling waits were the slowest 1 % of turns.
#[derive(Clone)]
pub struct FileLocks {
    dir: std::path::PathBuf,
    buckets: LocalLocks,
}

struct FileGuard(std::fs::File);

#[async_trait]
impl Releasable for FileGuard {
    async fn release_now(self: Box<Self>) {
        let _ = self.0.unlock();
    }
}

impl FileLocks {
    /// The lock folder beside `database` (created if missing).
    pub fn beside(database: &std::path::Path) -> Result<Self, StoreError> {
        let dir = std::path::PathBuf::from(format!("{}.locks", database.display()));
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::DataDir {
            path: dir.display().to_string(),
            source,
        })?;
        Ok(Self {
            dir,
            buckets: LocalLocks::default(),
        })
    }

    /// The bucket of `conversation_id`.
    fn bucket(conversation_id: &str) -> u64 {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(conversation_id.as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(first) % BUCKETS
    }

    /// Takes the bucket's mutex in the process (which holds the conversation's turn too), then the
    /// bucket's file lock, polling (never blocking a thread) while another process holds it.
    pub async fn acquire(&self, conversation_id: &str) -> Result<TurnLock, StoreError> {
        let bucket = Self::bucket(conversation_id);
        let local = self.buckets.lock(&bucket.to_string()).await;
        let path = self.dir.join(format!("{bucket}.lock"));
        let io = |source| StoreError::DataDir {
            path: path.display().to_string(),
            source,
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io)?;
        wait_for(conversation_id, || async {
            match file.try_lock() {
                Ok(()) => Ok(true),
                Err(std::fs::TryLockError::WouldBlock) => Ok(false),
                Err(std::fs::TryLockError::Error(e)) => Err(io(e)),
            }
        })
        .await?;
        Ok(TurnLock {
            lease: Some(Box::new(FileGuard(file))),
            _local: local,
        })
    }
}

/// The in-process half: one async mutex per conversation id.
#[derive(Default, Clone)]
pub struct LocalLocks {
    map: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl LocalLocks {
    pub async fn lock(&self, id: &str) -> OwnedMutexGuard<()> {
        let mutex = {
            let mut map = self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // Forget mutexes nobody holds or waits for, so the map does not grow forever.
            map.retain(|_, m| Arc::strong_count(m) > 1);
            map.entry(id.to_owned()).or_default().clone()
        };
        mutex.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two conversations of one bucket in one process: the second's turn starts the moment the
    /// first's ends — it waits on the bucket's mutex, woken by the release, not by polling the file
    /// lock (a polling waiter sleeps at least a millisecond, and a few yields take microseconds).
    #[tokio::test(flavor = "current_thread")]
    async fn a_shared_bucket_hands_the_turn_over_without_polling() {
        let dir = tempfile::tempdir().expect("tmp");
        let files = FileLocks::beside(&dir.path().join("db")).expect("locks");
        let second = (1..)
            .map(|i| format!("c-{i}"))
            .find(|id| FileLocks::bucket(id) == FileLocks::bucket("c-0"))
            .expect("a conversation in the same bucket");
        let held = files.acquire("c-0").await.expect("first");
        let waiter = tokio::spawn({
            let files = files.clone();
            async move { files.acquire(&second).await.expect("second") }
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(
            !waiter.is_finished(),
            "the second waits while the first holds the bucket"
        );
        held.release().await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(waiter.is_finished(), "handed over at once, no polling wait");
        let lock = waiter.await.expect("join");
        lock.release().await;
    }
}
