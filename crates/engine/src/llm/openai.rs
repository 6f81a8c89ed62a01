//! OpenAI-compatible Chat Completions (OpenAI, Azure-compatible gateways, vLLM, Ollama...).
//!
//! Wire structs are private; only [`CompletionRequest`] and [`Completion`] cross this module's edge.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    ChatMessage, Completion, CompletionRequest, LlmError, LlmProvider, ProviderSettings, StopReason,
    ToolCall, Usage, post_json,
};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

pub struct OpenAiProvider {
    settings: ProviderSettings,
    client: reqwest::Client,
    /// `{base_url}/chat/completions`, parsed once (it was parsed again on every call).
    endpoint: reqwest::Url,
    /// OpenAI's own API wants `max_completion_tokens`; compatible servers still read `max_tokens`.
    use_max_completion_tokens: bool,
}

impl OpenAiProvider {
    pub fn new(settings: ProviderSettings) -> Result<Self, LlmError> {
        settings.register_secret();
        let client = settings.http_client()?;
        let endpoint = reqwest::Url::parse(&format!(
            "{}/chat/completions",
            settings.base_url.trim_end_matches('/')
        ))
        .map_err(|e| LlmError::Malformed(format!("base_url: {e}")))?;
        let use_max_completion_tokens = settings.base_url.contains("api.openai.com");
        Ok(Self {
            settings,
            client,
            endpoint,
            use_max_completion_tokens,
        })
    }

    /// The request body, borrowing the request's texts: nothing is copied into JSON values first.
    fn body<'a>(&'a self, request: &'a CompletionRequest) -> WireRequest<'a> {
        let mut messages = Vec::with_capacity(request.messages.len() + 2);
        if !request.system.is_empty() {
            messages.push(WireMessageOut::System {
                content: &request.system,
            });
        }
        messages.extend(request.messages.iter().map(|m| {
            match m {
                ChatMessage::User { content } => WireMessageOut::User { content },
                ChatMessage::Assistant { content, tool_calls } => WireMessageOut::Assistant {
                    content: content.as_deref(),
                    tool_calls: tool_calls
                        .iter()
                        .map(|c| WireToolCallOut {
                            id: &c.id,
                            kind: "function",
                            function: WireFunctionOut {
                                name: &c.name,
                                arguments: &c.arguments,
                            },
                        })
                        .collect(),
                },
                // The model reads a support agent's words as the assistant side of the conversation.
                ChatMessage::HumanAgent { content, .. } => WireMessageOut::Assistant {
                    content: Some(content),
                    tool_calls: Vec::new(),
                },
                ChatMessage::Tool { call_id, content, .. } => WireMessageOut::Tool {
                    tool_call_id: call_id,
                    content,
                },
            }
        }));
        // The conversation's own instructions last: the system prompt, the tools and the history
        // before them stay one prefix from call to call, which OpenAI caches.
        if !request.context.is_empty() {
            messages.push(WireMessageOut::System {
                content: &request.context,
            });
        }
        let offered = if request.text_only {
            &[][..]
        } else {
            &request.tools[..]
        };
        let tools: Vec<WireTool<'a>> = offered
            .iter()
            .map(|t| WireTool {
                kind: "function",
                function: WireToolFunction {
                    name: &t.name,
                    description: &t.description,
                    parameters: &t.parameters,
                    strict: true,
                },
            })
            .collect();
        let max = request.max_tokens.unwrap_or(self.settings.max_tokens);
        // A label to choose: structured outputs hold the answer to the schema's enum.
        let response_format = request.choice.as_ref().map(|c| {
            serde_json::json!({
                "type": "json_schema",
                "json_schema": {"name": c.field, "strict": true, "schema": c.schema()},
            })
        });
        WireRequest {
            response_format,
            model: &self.settings.model,
            prompt_cache_key: request.cache_key.as_deref(),
            messages,
            tool_choice: (!tools.is_empty()).then_some("auto"),
            tools,
            temperature: self.settings.temperature,
            max_tokens: (!self.use_max_completion_tokens).then_some(max),
            max_completion_tokens: self.use_max_completion_tokens.then_some(max),
        }
    }
}

/// Fields in the order they are written: what is the same from call to call first, the messages
/// last.
#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Value>,
    messages: Vec<WireMessageOut<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessageOut<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCallOut<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct WireToolCallOut<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionOut<'a>,
}

#[derive(Serialize)]
struct WireFunctionOut<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireToolFunction<'a>,
}

#[derive(Serialize)]
struct WireToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
    strict: bool,
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
    #[serde(default)]
    prompt_tokens_details: Option<WirePromptDetails>,
}

/// `usage.prompt_tokens_details`: of the prompt's tokens, those read from the cache.
#[derive(Deserialize)]
struct WirePromptDetails {
    #[serde(default)]
    cached_tokens: u64,
}

#[async_trait]
impl LlmProvider for OpenAiProvider {
    fn model(&self) -> &str {
        &self.settings.model
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let mut builder = self.client.post(self.endpoint.clone());
        if let Some(key) = &self.settings.api_key {
            builder = builder.bearer_auth(key);
        }
        let body = post_json(builder, &self.body(request)).await?;
        parse_response(body, &self.settings.model)
    }
}

/// Reads a response body of this API (also used to script replies from real provider JSON).
pub fn parse_response(body: impl AsRef<[u8]>, model: &str) -> Result<Completion, LlmError> {
    let wire: WireResponse = vt_contract::json::from_bytes(body.as_ref())
        .map_err(|e| LlmError::Malformed(format!("chat completion: {e}")))?;
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
            cached_input_tokens: u.prompt_tokens_details.map_or(0, |d| d.cached_tokens),
            cache_write_tokens: 0,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;
    use serde_json::json;

    #[test]
    fn a_body_that_is_not_utf8_json_is_a_clear_error_not_a_guess() {
        // Parsed from the bytes as they came: no lossy text copy that would turn bad bytes into
        // replacement characters the model never sent.
        let bad = b"{\"choices\":[{\"message\":{\"content\":\"saldo \xff\"}}]}";
        match parse_response(bad, "m") {
            Err(LlmError::Malformed(why)) => assert!(why.starts_with("chat completion:"), "{why}"),
            other => panic!("expected a malformed-body error, got {other:?}"),
        }
        let good = br#"{"choices":[{"message":{"content":"R$ 50,00"},"finish_reason":"stop"}]}"#;
        let completion = parse_response(good, "m").expect("parsed");
        assert_eq!(completion.text.as_deref(), Some("R$ 50,00"));
    }

    #[test]
    fn the_request_body_has_the_chat_completions_shape() {
        let provider = OpenAiProvider::new(ProviderSettings {
            base_url: "http://127.0.0.1:1/v1/".into(),
            model: "m".into(),
            api_key: None,
            temperature: None,
            max_tokens: 100,
            timeout: std::time::Duration::from_secs(1),
        })
        .expect("provider");
        assert_eq!(
            provider.endpoint.as_str(),
            "http://127.0.0.1:1/v1/chat/completions"
        );
        let request = CompletionRequest {
            system: "sys".into(),
            messages: vec![
                ChatMessage::user("oi"),
                ChatMessage::Assistant {
                    content: None,
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "consultar_saldo".into(),
                        arguments: "{\"cartao\":\"1\"}".into(),
                    }],
                },
                ChatMessage::Tool {
                    call_id: "c1".into(),
                    name: "consultar_saldo".into(),
                    content: "R$ 50,00".into(),
                    is_error: false,
                },
                ChatMessage::Assistant {
                    content: Some("pronto".into()),
                    tool_calls: vec![],
                },
            ],
            tools: vec![std::sync::Arc::new(vt_contract::ToolSpec {
                name: "consultar_saldo".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            })],
            max_tokens: None,
            ..Default::default()
        };
        let body = vt_contract::json::to_value(provider.body(&request)).expect("json");
        assert_eq!(
            body,
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "sys"},
                    {"role": "user", "content": "oi"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "consultar_saldo", "arguments": "{\"cartao\":\"1\"}"}}
                    ]},
                    {"role": "tool", "tool_call_id": "c1", "content": "R$ 50,00"},
                    {"role": "assistant", "content": "pronto"}
                ],
                "tools": [{"type": "function", "function": {
                    "name": "consultar_saldo", "description": "d", "parameters": {"type": "object"}, "strict": true}}],
                "tool_choice": "auto",
                "max_tokens": 100
            })
        );
    }
}
