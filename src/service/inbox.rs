//! What this process's channels said of the messages they received, from `receive` until their turns
//! ran: the task that holds a conversation's turn lock may process a message another task received
//! (it came earlier), and takes that message's channel details (its thread, its kind) from here, and
//! leaves the outcome here for the task that received it. When each message arrived is kept with it:
//! a conversation's last arrival, for bursts, is read off the messages still waiting.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{Handled, Inbound, ServiceError};

enum Held {
    Received {
        msg: Box<Inbound>,
        conversation: String,
        at: Instant,
    },
    Processed(Result<Handled, ServiceError>),
}

#[derive(Default)]
pub(super) struct Inbox {
    held: Mutex<HashMap<i64, Held>>,
}

/// A steady stream of messages is answered after this many join windows all the same.
const LONGEST_WAIT_WINDOWS: u32 = 10;

impl Inbox {
    fn with<R>(&self, f: impl FnOnce(&mut HashMap<i64, Held>) -> R) -> R {
        f(&mut self.held.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Waits until no message of `conversation` arrived for `window` (at most
    /// [`LONGEST_WAIT_WINDOWS`] windows).
    pub(super) async fn quiet(&self, conversation: &str, window: Duration) {
        let deadline = Instant::now() + window * LONGEST_WAIT_WINDOWS;
        loop {
            let last = self.with(|held| {
                held.values()
                    .filter_map(|h| match h {
                        Held::Received {
                            conversation: c, at, ..
                        } if c == conversation => Some(*at),
                        _ => None,
                    })
                    .max()
            });
            let Some(quiet_at) = last.map(|at| at + window).filter(|at| *at > Instant::now()) else {
                return;
            };
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(quiet_at.min(deadline).into()).await;
        }
    }

    /// Message `id` was stored by `receive`; its task will call `process`.
    pub(super) fn hold(&self, id: i64, conversation: &str, msg: Inbound) {
        let held = Held::Received {
            msg: Box::new(msg),
            conversation: conversation.to_owned(),
            at: Instant::now(),
        };
        self.with(|h| h.insert(id, held));
    }

    /// The channel's message `id`, for the task that processes it ahead of its own task. `None` for a
    /// message this process did not receive (another instance's, or one from before a restart).
    pub(super) fn take_received(&self, id: i64) -> Option<Inbound> {
        self.with(|held| match held.remove(&id) {
            Some(Held::Received { msg, .. }) => Some(*msg),
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
