//! Fallback across providers (`[[llm.fallback]]`): when the configured model cannot answer for a
//! reason another model would not share — rate limit, quota, unavailable or overloaded, a timeout,
//! a context too long for it — the next one in the list is asked, in order. Never on a bad request
//! or a refusal: another model would be asked the same wrong thing. Each provider keeps its own
//! circuit breaker; the completion names the model that actually answered, which is what the turn
//! records (usage, cost, the generation span).

use std::sync::Arc;

use async_trait::async_trait;

use super::{Completion, CompletionRequest, LlmError, LlmProvider};

pub struct Fallback {
    /// The primary first, then the fallbacks in their configured order.
    chain: Vec<Arc<dyn LlmProvider>>,
}

impl Fallback {
    /// `primary`, then `fallbacks`; with no fallback, `primary` itself.
    pub fn wrap(primary: Arc<dyn LlmProvider>, fallbacks: Vec<Arc<dyn LlmProvider>>) -> Arc<dyn LlmProvider> {
        if fallbacks.is_empty() {
            return primary;
        }
        let mut chain = vec![primary];
        chain.extend(fallbacks);
        Arc::new(Self { chain })
    }
}

/// Whether another provider may succeed where this one failed.
pub(crate) fn warrants_fallback(e: &LlmError) -> bool {
    match e {
        // 429, 408, 5xx (overloaded included), timeouts, refused connections; an open circuit.
        LlmError::Transient { .. } | LlmError::Unavailable(_) => true,
        // A context too long for this model, or its quota spent: another model may take it.
        LlmError::Rejected { status, message } => {
            let m = message.to_ascii_lowercase();
            let context = [
                "context_length",
                "context length",
                "too long",
                "maximum context",
                "too many tokens",
            ]
            .iter()
            .any(|w| m.contains(w));
            let quota = ["quota", "billing", "credit balance"]
                .iter()
                .any(|w| m.contains(w));
            (matches!(status, 400 | 413) && context) || (matches!(status, 400 | 402 | 403) && quota)
        }
        LlmError::Malformed(_) => false,
    }
}

#[async_trait]
impl LlmProvider for Fallback {
    fn model(&self) -> &str {
        self.chain[0].model()
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let mut last = None;
        for (i, provider) in self.chain.iter().enumerate() {
            match provider.complete(request).await {
                Ok(c) => {
                    if i > 0 {
                        tracing::warn!(model = %provider.model(), position = i, "answered by a fallback model");
                    }
                    return Ok(c);
                }
                Err(e) if warrants_fallback(&e) => {
                    tracing::warn!(model = %provider.model(), error = %e, "model failed; trying the next one");
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| LlmError::Unavailable("nenhum modelo configurado".into())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_another_model_may_not_share_falls_back() {
        let t = |status| LlmError::from_status(status, String::new(), None);
        assert!(warrants_fallback(&t(429)));
        assert!(warrants_fallback(&t(503)));
        assert!(warrants_fallback(&t(529)));
        assert!(warrants_fallback(&LlmError::Unavailable("open".into())));
        assert!(!warrants_fallback(&t(400)));
        assert!(!warrants_fallback(&t(401)));
        let long = LlmError::Rejected {
            status: 400,
            message: "This model's maximum context length is 8192 tokens".into(),
        };
        assert!(warrants_fallback(&long));
        let quota = LlmError::Rejected {
            status: 403,
            message: "You exceeded your current quota".into(),
        };
        assert!(warrants_fallback(&quota));
        assert!(!warrants_fallback(&LlmError::Malformed("x".into())));
    }
}
