//! Retry policies (the BPMN error-handling table) and the one helper that applies them.

use std::future::Future;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `attempts` counts every try, the first included; `backoff_ms` is the wait between two tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub backoff_ms: u64,
}

impl RetryPolicy {
    pub const fn new(attempts: u32, backoff_ms: u64) -> Self {
        Self { attempts, backoff_ms }
    }

    pub fn backoff(&self) -> Duration {
        Duration::from_millis(self.backoff_ms)
    }
}

/// The outcome of [`retry`], with the number of tries it took.
pub struct Retried<T, E> {
    pub result: Result<T, E>,
    pub attempts: u32,
}

/// Runs `op` until it succeeds, fails with an error `should_retry` refuses, or runs out of attempts.
/// The wait between tries is the policy's backoff, or the server's `Retry-After` when that is longer
/// (capped at ten times the backoff, so a hostile header cannot park a turn for an hour).
pub async fn retry<T, E, F, Fut>(
    policy: RetryPolicy,
    should_retry: impl Fn(&E) -> bool,
    retry_after: impl Fn(&E) -> Option<Duration>,
    mut op: F,
) -> Retried<T, E>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let attempts = policy.attempts.max(1);
    let mut attempt = 1;
    loop {
        let result = op(attempt).await;
        match result {
            Err(e) if attempt < attempts && should_retry(&e) => {
                let base = policy.backoff();
                let wait = retry_after(&e).map_or(base, |ra| ra.max(base).min(base * 10));
                tracing::warn!(
                    attempt,
                    wait_ms = wait.as_millis() as u64,
                    "retrying after a transient failure"
                );
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
            result => {
                return Retried {
                    result,
                    attempts: attempt,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn stops_after_the_configured_attempts() {
        let calls = AtomicU32::new(0);
        let out: Retried<(), &str> = retry(
            RetryPolicy::new(3, 1),
            |_| true,
            |_| None,
            |_| {
                calls.fetch_add(1, Ordering::SeqCst);
                async { Err("down") }
            },
        )
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(out.attempts, 3);
        assert!(out.result.is_err());
    }

    #[tokio::test]
    async fn does_not_retry_what_should_not_be_retried() {
        let calls = AtomicU32::new(0);
        let out: Retried<(), &str> = retry(
            RetryPolicy::new(3, 1),
            |_| false,
            |_| None,
            |_| {
                calls.fetch_add(1, Ordering::SeqCst);
                async { Err("rejected") }
            },
        )
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(out.result.is_err());
    }

    #[tokio::test]
    async fn succeeds_on_a_later_attempt() {
        let out: Retried<u32, &str> = retry(
            RetryPolicy::new(3, 1),
            |_| true,
            |_| None,
            |n| async move { if n < 2 { Err("once") } else { Ok(n) } },
        )
        .await;
        assert_eq!(out.result.ok(), Some(2));
        assert_eq!(out.attempts, 2);
    }
}
