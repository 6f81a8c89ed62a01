//! Per-conversation turn locks. In one process a map of async mutexes; across instances the
//! PostgreSQL store adds a transaction-scoped advisory lock held by the returned guard.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

/// Held while a turn runs; dropping it releases every lock it holds.
pub struct TurnLock {
    _local: OwnedMutexGuard<()>,
    _remote: Option<Box<dyn Send>>,
}

impl TurnLock {
    pub(crate) fn new(local: OwnedMutexGuard<()>, remote: Option<Box<dyn Send>>) -> Self {
        Self {
            _local: local,
            _remote: remote,
        }
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
