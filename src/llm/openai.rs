//! OpenAI-compatible Chat Completions (OpenAI, Azure-compatible gateways, vLLM, Ollama...).
//!
//! Wire structs are private; only [`CompletionRequest`] and [`Completion`] cross this module's edge.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    ChatMessage, Completion, CompletionRequest, LlmError, LlmProvider, ProviderSettings, StopReason,
    ToolCall, Usage, http_client, post_json,
};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

pub struct OpenAiProvider {
    settings: ProviderSettings,
    client: reqwest::Client,
    /// OpenAI's own API wants `max_completion_tokens`; compatible servers still read `max_tokens`.
    use_max_completion_tokens: bool,
}

impl OpenAiProvider {
    pub fn new(settings: ProviderSettings) -> Result<Self, LlmError> {
        settings.register_secret();
        let client = http_client(settings.timeout)?;
        let use_max_completion_tokens = settings.base_url.contains("api.openai.com");
        Ok(Self {
            settings,
            client,
            use_max_completion_tokens,
        })
    }

    fn body(&self, request: &CompletionRequest) -> WireRequest {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if !request.system.is_empty() {
            messages.push(json!({"role": "system", "content": request.system}));
        }
        for m in &request.messages {
            messages.push(match m {
                ChatMessage::User { content } => json!({"role": "user", "content": content}),
                ChatMessage::Assistant { content, tool_calls } => {
                    let mut v = json!({"role": "assistant", "content": content});
                    if !tool_calls.is_empty() {
                        v["tool_calls"] = tool_calls
                            .iter()
                            .map(|c| {
                                json!({"id": c.id, "type": "function",
                                       "function": {"name": c.name, "arguments": c.arguments}})
                            })
                            .collect();
                    }
                    v
                }
                ChatMessage::Tool { call_id, content, .. } => {
                    json!({"role": "tool", "tool_call_id": call_id, "content": content})
                }
            });
        }
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters, "strict": true}})
            })
            .collect();
        let max = request.max_tokens.unwrap_or(self.settings.max_tokens);
        WireRequest {
            model: self.settings.model.clone(),
            messages,
            tool_choice: (!tools.is_empty()).then(|| "auto".to_owned()),
            tools,
            temperature: self.settings.temperature,
            max_tokens: (!self.use_max_completion_tokens).then_some(max),
            max_completion_tokens: self.use_max_completion_tokens.then_some(max),
        }
    }
}

#[derive(Serialize)]
struct WireRequest {
    model: String,
    messages: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    model: Option<String>,
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: WireMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Deserialize)]
struct WireToolCall {
    id: String,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

#[async_trait]
impl LlmProvider for OpenAiProvider {
    fn model(&self) -> &str {
        &self.settings.model
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let url = format!(
            "{}/chat/completions",
            self.settings.base_url.trim_end_matches('/')
        );
        let mut builder = self.client.post(url);
        if let Some(key) = &self.settings.api_key {
            builder = builder.bearer_auth(key);
        }
        let text = post_json(builder, &self.body(request)).await?;
        parse_response(&text, &self.settings.model)
    }
}

/// Reads a response body of this API (also used to script replies from real provider JSON).
pub fn parse_response(text: &str, model: &str) -> Result<Completion, LlmError> {
    let wire: WireResponse =
        serde_json::from_str(text).map_err(|e| LlmError::Malformed(format!("chat completion: {e}")))?;
    let choice = wire
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| LlmError::Malformed("chat completion without choices".into()))?;
    let tool_calls: Vec<ToolCall> = choice
        .message
        .tool_calls
        .into_iter()
        .map(|c| ToolCall {
            id: c.id,
            name: c.function.name,
            arguments: c.function.arguments,
        })
        .collect();
    let stop_reason = match choice.finish_reason.as_deref() {
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        Some("stop") | None => {
            if tool_calls.is_empty() {
                StopReason::EndTurn
            } else {
                StopReason::ToolUse
            }
        }
        Some(other) => StopReason::Other(other.to_owned()),
    };
    let usage = wire
        .usage
        .map(|u| Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
        })
        .unwrap_or_default();
    Ok(Completion {
        model: wire.model.unwrap_or_else(|| model.to_owned()),
        text: choice.message.content.filter(|t| !t.is_empty()),
        tool_calls,
        stop_reason,
        usage,
    })
}
