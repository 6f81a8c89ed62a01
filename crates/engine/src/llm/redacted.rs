//! A provider that redacts every request before the model sees it: the system prompt (with the
//! conversation state it renders), every message, every earlier tool call's arguments. The product
//! wraps whatever model is configured in it (`app::engine`) with its card masking, so no call
//! site — turn, router, planner, summary — can send a full card number to a model by forgetting to.

use std::sync::Arc;

use async_trait::async_trait;

use super::{ChatMessage, Completion, CompletionRequest, LlmError, LlmProvider};

/// How text is redacted.
pub(super) type Redact = fn(&str) -> String;

pub struct RedactedProvider {
    inner: Arc<dyn LlmProvider>,
    redact: Redact,
}

impl RedactedProvider {
    pub fn wrap(inner: Arc<dyn LlmProvider>, redact: Redact) -> Arc<dyn LlmProvider> {
        Arc::new(Self { inner, redact })
    }

    fn message(&self, m: &ChatMessage) -> ChatMessage {
        let r = self.redact;
        match m {
            ChatMessage::User { content } => ChatMessage::User { content: r(content) },
            ChatMessage::HumanAgent { name, content } => ChatMessage::HumanAgent {
                name: name.clone(),
                content: r(content),
            },
            ChatMessage::Assistant { content, tool_calls } => ChatMessage::Assistant {
                content: content.as_deref().map(r),
                tool_calls: tool_calls
                    .iter()
                    .map(|c| super::ToolCall {
                        arguments: r(&c.arguments),
                        ..c.clone()
                    })
                    .collect(),
            },
            ChatMessage::Tool {
                call_id,
                name,
                content,
                is_error,
            } => ChatMessage::Tool {
                call_id: call_id.clone(),
                name: name.clone(),
                content: r(content),
                is_error: *is_error,
            },
        }
    }
}

#[async_trait]
impl LlmProvider for RedactedProvider {
    fn model(&self) -> &str {
        self.inner.model()
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let redacted = CompletionRequest {
            system: (self.redact)(&request.system),
            // The conversation's state and summary are in it: masked like the messages.
            context: (self.redact)(&request.context),
            messages: request.messages.iter().map(|m| self.message(m)).collect(),
            tools: request.tools.clone(),
            cache_key: request.cache_key.clone(),
            max_tokens: request.max_tokens,
            choice: request.choice.clone(),
            text_only: request.text_only,
        };
        self.inner.complete(&redacted).await
    }
}
