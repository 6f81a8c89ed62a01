//! What this process's channels said of the messages they received, from `receive` until their turns
//! ran: the task that holds a conversation's turn lock may process a message another task received
//! (it came earlier), and takes that message's channel details (its thread, its kind) from here, and
//! leaves the outcome here for the task that received it.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{Handled, Inbound, ServiceError};

enum Held {
    Received(Box<Inbound>),
    Processed(Result<Handled, ServiceError>),
}

#[derive(Default)]
pub(super) struct Inbox {
    held: Mutex<HashMap<i64, Held>>,
    /// When each conversation's last message arrived here, for bursts.
    arrivals: Mutex<HashMap<String, Instant>>,
}

/// A steady stream of messages is answered after this many join windows all the same.
const LONGEST_WAIT_WINDOWS: u32 = 10;

impl Inbox {
    fn with<R>(&self, f: impl FnOnce(&mut HashMap<i64, Held>) -> R) -> R {
        f(&mut self.held.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A message of `conversation` was stored now.
    pub(super) fn arrived(&self, conversation: &str) {
        self.arrivals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(conversation.to_owned(), Instant::now());
    }

    /// Waits until no message of `conversation` arrived for `window` (at most
    /// [`LONGEST_WAIT_WINDOWS`] windows).
    pub(super) async fn quiet(&self, conversation: &str, window: Duration) {
        let deadline = Instant::now() + window * LONGEST_WAIT_WINDOWS;
        loop {
            let now = Instant::now();
            let quiet_at = {
                let mut arrivals = self.arrivals.lock().unwrap_or_else(PoisonError::into_inner);
                match arrivals.get(conversation).map(|last| *last + window) {
                    Some(at) if at > now => at,
                    // Quiet: forgotten, so the map holds only conversations in a burst.
                    _ => {
                        arrivals.remove(conversation);
                        return;
                    }
                }
            };
            if now >= deadline {
                return;
            }
            tokio::time::sleep_until(quiet_at.min(deadline).into()).await;
        }
    }

    /// Message `id` was stored by `receive`; its task will call `process`.
    pub(super) fn hold(&self, id: i64, msg: Inbound) {
        self.with(|held| held.insert(id, Held::Received(Box::new(msg))));
    }

    /// The channel's message `id`, for the task that processes it ahead of its own task. `None` for a
    /// message this process did not receive (another instance's, or one from before a restart).
    pub(super) fn take_received(&self, id: i64) -> Option<Inbound> {
        self.with(|held| match held.remove(&id) {
            Some(Held::Received(msg)) => Some(*msg),
            Some(other) => {
                held.insert(id, other);
                None
            }
            None => None,
        })
    }

    /// The outcome of message `id`, processed ahead of its own task, left for that task.
    pub(super) fn leave(&self, id: i64, outcome: Result<Handled, ServiceError>) {
        self.with(|held| held.insert(id, Held::Processed(outcome)));
    }

    /// Message `id`'s task is done with it: what another task left for it, if anything.
    pub(super) fn release(&self, id: i64) -> Option<Result<Handled, ServiceError>> {
        self.with(|held| match held.remove(&id) {
            Some(Held::Processed(outcome)) => Some(outcome),
            _ => None,
        })
    }
}
