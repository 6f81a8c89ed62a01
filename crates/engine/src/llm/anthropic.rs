//! Anthropic Messages API.
//!
//! Tool results travel as `tool_result` blocks inside a user message; consecutive blocks of one role
//! are merged because the API expects user and assistant turns to alternate.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    ChatMessage, Completion, CompletionRequest, LlmError, LlmProvider, ProviderSettings, StopReason,
    ToolCall, Usage, post_json,
};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
const API_VERSION: &str = "2023-06-01";

pub struct AnthropicProvider {
    settings: ProviderSettings,
    client: reqwest::Client,
}

impl AnthropicProvider {
    pub fn new(settings: ProviderSettings) -> Result<Self, LlmError> {
        settings.register_secret();
        let client = settings.http_client()?;
        Ok(Self { settings, client })
    }

    fn body(&self, request: &CompletionRequest) -> WireRequest {
        let mut messages: Vec<(String, Vec<Value>)> = Vec::new();
        let mut push = |role: &str, block: Value| match messages.last_mut() {
            Some((last, blocks)) if last == role => blocks.push(block),
            _ => messages.push((role.to_owned(), vec![block])),
        };
        for m in &request.messages {
            match m {
                ChatMessage::User { content } => push("user", json!({"type": "text", "text": content})),
                // The model reads a support agent's words as the assistant side of the conversation.
                ChatMessage::HumanAgent { content, .. } => {
                    push("assistant", json!({"type": "text", "text": content}));
                }
                ChatMessage::Assistant { content, tool_calls } => {
                    if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                        push("assistant", json!({"type": "text", "text": text}));
                    }
                    for c in tool_calls {
                        // Anthropic wants an object; arguments that are not one are sent as an empty
                        // object (the engine has already answered such a call with an error result).
                        let input = vt_contract::json::from_text::<Value>(&c.arguments)
                            .ok()
                            .filter(Value::is_object)
                            .unwrap_or_else(|| json!({}));
                        push(
                            "assistant",
                            json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                        );
                    }
                }
                ChatMessage::Tool {
                    call_id,
                    content,
                    is_error,
                    ..
                } => push(
                    "user",
                    json!({"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}),
                ),
            }
        }
        WireRequest {
            model: self.settings.model.clone(),
            max_tokens: request.max_tokens.unwrap_or(self.settings.max_tokens),
            system: system_blocks(request),
            messages: messages
                .into_iter()
                .map(|(role, content)| json!({"role": role, "content": content}))
                .collect(),
            tools: tool_blocks(request),
            // A label to choose: a tool whose input is the enum, and the model made to call it.
            tool_choice: match (&request.choice, request.text_only && !request.tools.is_empty()) {
                (Some(c), _) => Some(json!({"type": "tool", "name": c.field})),
                (None, true) => Some(json!({"type": "none"})),
                (None, false) => None,
            },
            temperature: self.settings.temperature,
        }
    }
}

/// A cache breakpoint: what comes before it, in Anthropic's order (tools, system, messages), is
/// cached.
fn breakpoint() -> Value {
    json!({"type": "ephemeral"})
}

/// The tools, the last one a cache breakpoint: the tool list is cached on its own, whatever comes
/// after it.
fn tool_blocks(request: &CompletionRequest) -> Vec<Value> {
    if let Some(c) = &request.choice {
        return vec![
            json!({"name": c.field, "description": "A resposta: um dos valores permitidos.", "input_schema": c.schema()}),
        ];
    }
    let last = request.tools.len().saturating_sub(1);
    request
        .tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut tool =
                json!({"name": t.name, "description": t.description, "input_schema": t.parameters});
            if i == last {
                tool["cache_control"] = breakpoint();
            }
            tool
        })
        .collect()
}

/// The system prompt as text blocks: the fixed instructions, a cache breakpoint, then the
/// conversation's own (not cached: they change from call to call).
fn system_blocks(request: &CompletionRequest) -> Vec<Value> {
    let mut blocks = Vec::with_capacity(2);
    if !request.system.is_empty() {
        blocks.push(json!({"type": "text", "text": request.system, "cache_control": breakpoint()}));
    }
    if !request.context.is_empty() {
        blocks.push(json!({"type": "text", "text": request.context}));
    }
    blocks
}

/// Fields in the order they are written: what is the same from call to call first.
#[derive(Serialize)]
struct WireRequest {
    model: String,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<Value>,
    messages: Vec<Value>,
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    model: Option<String>,
    content: Vec<WireBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: WireUsage,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    #[serde(other)]
    Other,
}

/// Anthropic counts the tokens read from and written to the cache apart from `input_tokens`.
#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
}

#[async_trait]
impl LlmProvider for AnthropicProvider {
    fn model(&self) -> &str {
        &self.settings.model
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let url = format!("{}/v1/messages", self.settings.base_url.trim_end_matches('/'));
        let mut builder = self.client.post(url).header("anthropic-version", API_VERSION);
        if let Some(key) = &self.settings.api_key {
            builder = builder.header("x-api-key", key);
        }
        let body = post_json(builder, &self.body(request)).await?;
        parse_response(body, &self.settings.model)
    }
}

/// Reads a response body of this API (also used to script replies from real provider JSON).
pub fn parse_response(body: impl AsRef<[u8]>, model: &str) -> Result<Completion, LlmError> {
    let wire: WireResponse = vt_contract::json::from_bytes(body.as_ref())
        .map_err(|e| LlmError::Malformed(format!("message: {e}")))?;
    let mut texts = Vec::new();
    let mut tool_calls = Vec::new();
    for block in wire.content {
        match block {
            WireBlock::Text { text } => texts.push(text),
            WireBlock::ToolUse { id, name, input } => {
                tool_calls.push(ToolCall {
                    id,
                    name,
                    arguments: input.to_string(),
                });
            }
            WireBlock::Other => {}
        }
    }
    let stop_reason = match wire.stop_reason.as_deref() {
        Some("end_turn" | "stop_sequence") | None => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some(other) => StopReason::Other(other.to_owned()),
    };
    let text = texts.join("\n");
    Ok(Completion {
        model: wire.model.unwrap_or_else(|| model.to_owned()),
        text: (!text.is_empty()).then_some(text),
        tool_calls,
        stop_reason,
        usage: Usage {
            // Every input token, as OpenAI counts them: the cached ones are a part.
            input_tokens: wire.usage.input_tokens
                + wire.usage.cache_read_input_tokens
                + wire.usage.cache_creation_input_tokens,
            output_tokens: wire.usage.output_tokens,
            cached_input_tokens: wire.usage.cache_read_input_tokens,
            cache_write_tokens: wire.usage.cache_creation_input_tokens,
        },
    })
}
