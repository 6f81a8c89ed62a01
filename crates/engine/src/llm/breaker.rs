//! A circuit breaker around a provider. With the model down every turn used to wait for its retries
//! up to the whole turn budget (15 s) before apologising. After `[llm] circuit_failures` failures in a
//! row (5xx, 429, timeouts, unreadable answers — a 4xx is the request's fault, not the provider's) the
//! circuit opens: calls fail at once with [`LlmError::Unavailable`], which is not retried, and the turn
//! answers with what the router does without a model. After `[llm] circuit_open_secs` one call goes
//! through as a probe (the others still fail fast): an answer closes the circuit, a failure opens it
//! again. A call cut short by the turn's deadline counts as a failure.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::{Completion, CompletionRequest, LlmError, LlmProvider};

/// When the circuit opens and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Failures in a row that open the circuit.
    pub failures: u32,
    /// How long it stays open before a probe.
    pub open_for: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            failures: 5,
            open_for: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum State {
    Closed {
        failures: u32,
    },
    Open {
        until: Instant,
    },
    /// One call is finding out whether the provider is back.
    Probing,
}

pub struct CircuitBreaker {
    inner: Arc<dyn LlmProvider>,
    config: BreakerConfig,
    state: Mutex<State>,
}

impl CircuitBreaker {
    pub fn wrap(inner: Arc<dyn LlmProvider>, config: BreakerConfig) -> Arc<dyn LlmProvider> {
        Arc::new(Self {
            inner,
            config,
            state: Mutex::new(State::Closed { failures: 0 }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a call may go to the provider now.
    fn admit(&self) -> Result<(), LlmError> {
        let mut state = self.state();
        match *state {
            State::Closed { .. } => Ok(()),
            State::Open { until } if Instant::now() >= until => {
                *state = State::Probing;
                Ok(())
            }
            State::Open { until } => Err(LlmError::Unavailable(format!(
                "circuit open after {} failures in a row; next try in {} s",
                self.config.failures,
                until.saturating_duration_since(Instant::now()).as_secs().max(1)
            ))),
            State::Probing => Err(LlmError::Unavailable(
                "circuit open; a probe call is finding out whether the provider is back".into(),
            )),
        }
    }

    /// What a call's outcome does to the circuit: `true` for an answer (or a refusal of the request,
    /// which the provider was up to give).
    fn settle(&self, answered: bool) {
        let mut state = self.state();
        *state = match (*state, answered) {
            (_, true) => State::Closed { failures: 0 },
            (State::Closed { failures }, false) if failures + 1 < self.config.failures => State::Closed {
                failures: failures + 1,
            },
            (_, false) => {
                tracing::warn!(
                    model = %self.inner.model(),
                    open_secs = self.config.open_for.as_secs(),
                    "model provider failing: circuit open, calls fail fast until a probe succeeds"
                );
                State::Open {
                    until: Instant::now() + self.config.open_for,
                }
            }
        };
    }
}

/// Settles a call that never finished (the turn's deadline dropped it) as a failure.
struct InFlight<'a> {
    breaker: &'a CircuitBreaker,
    settled: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.breaker.settle(false);
        }
    }
}

#[async_trait]
impl LlmProvider for CircuitBreaker {
    fn model(&self) -> &str {
        self.inner.model()
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        self.admit()?;
        let mut call = InFlight {
            breaker: self,
            settled: false,
        };
        let result = self.inner.complete(request).await;
        call.settled = true;
        self.settle(matches!(&result, Ok(_) | Err(LlmError::Rejected { .. })));
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Scripted, ScriptedProvider};

    fn down() -> Scripted {
        Scripted::Fail(LlmError::Transient {
            status: Some(503),
            message: "indisponível".into(),
            retry_after: None,
        })
    }

    fn request() -> CompletionRequest {
        CompletionRequest::default()
    }

    #[tokio::test]
    async fn repeated_failures_open_the_circuit_and_a_probe_closes_it() {
        let mut script: Vec<Scripted> = (0..3).map(|_| down()).collect();
        script.push(down());
        script.push(Scripted::text("de volta"));
        let inner = Arc::new(ScriptedProvider::new(script));
        let config = BreakerConfig {
            failures: 3,
            open_for: Duration::from_millis(100),
        };
        let breaker = CircuitBreaker::wrap(inner.clone(), config);
        for _ in 0..3 {
            assert!(
                breaker
                    .complete(&request())
                    .await
                    .expect_err("down")
                    .is_transient()
            );
        }
        assert_eq!(inner.requests().len(), 3);
        let fast = breaker.complete(&request()).await.expect_err("open");
        assert!(matches!(fast, LlmError::Unavailable(_)), "{fast}");
        assert!(!fast.is_transient(), "never retried");
        assert_eq!(inner.requests().len(), 3, "the provider was not called");

        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(breaker.complete(&request()).await.is_err(), "the probe fails");
        assert_eq!(inner.requests().len(), 4);
        assert!(matches!(
            breaker.complete(&request()).await,
            Err(LlmError::Unavailable(_))
        ));
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(breaker.complete(&request()).await.is_ok(), "the provider is back");
        assert_eq!(inner.requests().len(), 5);
    }
}
