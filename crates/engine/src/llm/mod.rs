//! Language-model providers behind one trait.
//!
//! The engine speaks [`CompletionRequest`] / [`Completion`]; each provider module converts them to and
//! from its own wire format (private structs), so provider JSON never crosses into the engine. Retries
//! are not done here: the engine owns the retry policy so that it is the same for every provider.

pub mod anthropic;
mod breaker;
mod fallback;
pub mod fingerprint;
pub mod openai;
pub mod redacted;
pub mod scripted;
pub mod transcription;

pub use anthropic::parse_response as parse_anthropic;
pub use anthropic::{AnthropicProvider, DEFAULT_BASE_URL as ANTHROPIC_DEFAULT_BASE_URL};
pub use breaker::{BreakerConfig, CircuitBreaker};
pub use fallback::Fallback;
pub use openai::parse_response as parse_openai;
pub use openai::{DEFAULT_BASE_URL as OPENAI_DEFAULT_BASE_URL, OpenAiProvider};
pub use redacted::RedactedProvider;
pub use scripted::{Scripted, ScriptedProvider};
pub use transcription::{Transcriber, TranscricaoConfig};

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use vt_contract::ToolSpec;

/// One entry of the history a model sees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    User {
        content: String,
    },
    Assistant {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        call_id: String,
        name: String,
        content: String,
        #[serde(default)]
        is_error: bool,
    },
    /// What a support agent wrote to the card holder while they had the conversation (a case).
    HumanAgent {
        /// The support agent's display name.
        name: String,
        content: String,
    },
}

impl ChatMessage {
    pub fn user(content: impl Into<String>) -> Self {
        Self::User {
            content: content.into(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self::Assistant {
            content: Some(content.into()),
            tool_calls: Vec::new(),
        }
    }

    /// The message's text, if it has one.
    pub fn text(&self) -> Option<&str> {
        match self {
            Self::User { content } | Self::Tool { content, .. } | Self::HumanAgent { content, .. } => {
                Some(content)
            }
            Self::Assistant { content, .. } => content.as_deref(),
        }
    }
}

/// A tool call as the model asked for it. `arguments` is the raw JSON text: it is parsed only at
/// dispatch, so malformed arguments become an error tool result instead of a provider error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// Everything one model call needs. The fixed part comes first — `system`, then `tools` — and is the
/// same for every conversation of a skill and prompt version, so the provider can cache it; the
/// conversation's own part (`context`: who, when, its state) is sent after it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompletionRequest {
    /// The fixed instructions.
    pub system: String,
    /// The instructions of this conversation and moment, sent after the fixed part (and, where the
    /// wire allows, after the messages).
    pub context: String,
    pub messages: Vec<ChatMessage>,
    /// Shared with the registry: a model call copies no schema.
    pub tools: Vec<Arc<ToolSpec>>,
    /// Names the fixed part (agent, skill, prompt version) for the provider's prompt cache
    /// (OpenAI's `prompt_cache_key`).
    pub cache_key: Option<String>,
    /// Overrides the provider's configured maximum (the router's micro calls use a small one).
    pub max_tokens: Option<u32>,
    /// The answer must be one of these labels, constrained the way the provider constrains it
    /// (OpenAI: a JSON-schema enum in structured outputs; Anthropic: a forced tool with an enum).
    /// Read back with [`Completion::choice`]. Sent with no `tools`.
    pub choice: Option<Choice>,
    /// The model may write text only, no tool call (OpenAI-compatible: the tools left out; Anthropic,
    /// which needs them listed beside earlier tool calls: `tool_choice: none`).
    pub text_only: bool,
}

/// A label to choose: the field's name and the values it may take.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// The JSON field (and the tool's name, where a tool carries it).
    pub field: String,
    pub options: Vec<String>,
}

impl Choice {
    /// The JSON schema of the answer: `{field: one of options}`, nothing else.
    pub fn schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {&self.field: {"type": "string", "enum": self.options}},
            "required": [&self.field],
            "additionalProperties": false,
        })
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    Other(String),
}

impl StopReason {
    pub fn as_str(&self) -> &str {
        match self {
            Self::EndTurn => "end_turn",
            Self::ToolUse => "tool_use",
            Self::MaxTokens => "max_tokens",
            Self::Other(s) => s,
        }
    }
}

/// What a call cost in tokens. `input_tokens` counts every input token, cached ones included;
/// `cached_input_tokens` those read from the provider's prompt cache, `cache_write_tokens` those
/// written to it (Anthropic bills them apart).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cached_input_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
}

/// A model's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub model: String,
    pub text: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub stop_reason: StopReason,
    pub usage: Usage,
}

impl Completion {
    /// The label of a [`Choice`] request: the field of the JSON answer (text, or a tool call's
    /// arguments), else the first word of the text that is one of `options` — a model that ignores
    /// the constraint still gets a chance to be read. `None` when no option is found.
    pub fn choice(&self, choice: &Choice) -> Option<String> {
        let known = |w: &str| choice.options.iter().find(|o| o.as_str() == w).cloned();
        let from_json = |text: &str| {
            vt_contract::json::from_text::<serde_json::Value>(text.trim())
                .ok()
                .and_then(|v| v.get(&choice.field).and_then(|f| f.as_str()).and_then(known))
        };
        self.tool_calls
            .iter()
            .find_map(|c| from_json(&c.arguments))
            .or_else(|| self.text.as_deref().and_then(from_json))
            .or_else(|| {
                self.text.as_deref().and_then(|t| {
                    t.split(|ch: char| !(ch.is_alphanumeric() || ch == '_'))
                        .find_map(known)
                })
            })
    }
}

/// A failed model call, classified for the retry policy.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LlmError {
    /// Worth retrying: 429, 5xx, timeouts, refused connections.
    #[error("erro passageiro do provedor do modelo: {message}")]
    Transient {
        status: Option<u16>,
        message: String,
        retry_after: Option<Duration>,
    },
    /// Not worth retrying: bad request, bad key, unknown model.
    #[error("o provedor do modelo recusou o pedido (status {status}): {message}")]
    Rejected { status: u16, message: String },
    /// The provider answered something we could not read.
    #[error("resposta ilegível do provedor do modelo: {0}")]
    Malformed(String),
    /// Not called: the provider failed too often just now (its circuit is open). Not retried.
    #[error("provedor do modelo indisponível: {0}")]
    Unavailable(String),
}

impl LlmError {
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Transient { .. })
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Transient { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Classifies an HTTP error status the way every provider here needs it.
    pub fn from_status(status: u16, message: String, retry_after: Option<Duration>) -> Self {
        if status == 429 || status == 408 || status >= 500 {
            Self::Transient {
                status: Some(status),
                message,
                retry_after,
            }
        } else {
            Self::Rejected { status, message }
        }
    }

    /// Connection and timeout failures are worth another try. Only the kind of failure is kept:
    /// reqwest errors print their URL, which may carry a key in a query string.
    pub fn from_reqwest(e: &reqwest::Error) -> Self {
        let message = if e.is_timeout() {
            "timeout"
        } else if e.is_connect() {
            "connection failed"
        } else if e.is_decode() {
            "o corpo da resposta não pôde ser decodificado"
        } else {
            "request failed"
        };
        Self::Transient {
            status: None,
            message: message.to_owned(),
            retry_after: None,
        }
    }
}

/// A model behind an API.
#[async_trait]
pub trait LlmProvider: Send + Sync {
    /// The configured model name (recorded on every call).
    fn model(&self) -> &str;
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError>;
}

/// Reads `Retry-After` in seconds (the form the providers use).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// Sends a JSON request and turns HTTP failures into [`LlmError`]s; the provider reads the body.
pub async fn post_json(
    request: reqwest::RequestBuilder,
    body: &impl Serialize,
) -> Result<bytes::Bytes, LlmError> {
    let response = request
        .json(body)
        .send()
        .await
        .map_err(|e| LlmError::from_reqwest(&e))?;
    let status = response.status().as_u16();
    let wait = retry_after(response.headers());
    // The body as it came: a success is parsed from these bytes once (no text copy of it first).
    let body = response.bytes().await.map_err(|e| LlmError::from_reqwest(&e))?;
    if !(200..300).contains(&status) {
        // Providers echo the key back in 401 bodies: what we keep of the body is scrubbed first.
        let text = String::from_utf8_lossy(&body);
        let message = vt_contract::redact::secrets(&error_message(&text)).into_owned();
        return Err(LlmError::from_status(status, message, wait));
    }
    Ok(body)
}

/// The provider's own error message, from the `{"error": {"message": ...}}` shape both APIs use.
fn error_message(body: &str) -> String {
    vt_contract::json::from_text::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(|m| m.as_str())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| body.chars().take(200).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified_for_retry() {
        assert!(LlmError::from_status(429, String::new(), None).is_transient());
        assert!(LlmError::from_status(503, String::new(), None).is_transient());
        assert!(!LlmError::from_status(400, String::new(), None).is_transient());
        assert!(!LlmError::from_status(401, String::new(), None).is_transient());
    }

    #[test]
    fn provider_error_message_is_extracted() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key","type":"x"}}"#),
            "bad key"
        );
        assert_eq!(error_message("plain"), "plain");
    }
}

/// What a real provider needs to talk to its API.
#[derive(Clone)]
pub struct ProviderSettings {
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub temperature: Option<f32>,
    pub max_tokens: u32,
    pub timeout: Duration,
}

impl std::fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key never reaches a log line.
        f.debug_struct("ProviderSettings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl ProviderSettings {
    /// Makes the key one of the secrets every log line, error and record is scrubbed of.
    pub fn register_secret(&self) {
        if let Some(key) = &self.api_key {
            vt_contract::redact::register_secret(key);
        }
    }

    /// The HTTP client for this provider's API.
    pub fn http_client(&self) -> Result<reqwest::Client, LlmError> {
        let mut builder = reqwest::Client::builder().timeout(self.timeout);
        // A plain-HTTP endpoint (a local model server, a fake in tests and benches) needs no root
        // certificates: reading the system's CA bundle opened some 150 files at every start.
        if self.base_url.starts_with("http://") {
            builder = builder.tls_certs_only([]);
        }
        builder
            .build()
            .map_err(|e| LlmError::Malformed(format!("http client: {e}")))
    }
}
