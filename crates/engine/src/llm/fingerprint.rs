//! What identifies a model request: the same function for a cassette (`vt-agent test --record`) and
//! for the fingerprint each stored model call keeps, which `vt-agent replay` matches a candidate's
//! requests against. Taken over the redacted form (cards masked, keys removed), so it names no secret.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;
use sha2::{Digest, Sha256};
use vt_domain::vt::card::mask_cards_in;

use super::CompletionRequest;

static SECRET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(sk-[A-Za-z0-9_\-]{8,}|sk-ant-[A-Za-z0-9_\-]{8,}|Bearer [A-Za-z0-9._\-]{8,})")
        .expect("secret regex")
});

/// Masks card numbers and removes anything that looks like a key.
pub fn redact(text: &str) -> String {
    SECRET
        .replace_all(&mask_cards_in(text), "<redigido>")
        .into_owned()
}

/// What identifies a request: prompt, messages, tools (names and schemas) and the token limit, redacted
/// — [`summary_text`] as a value (a cassette keeps it so).
pub fn summary(request: &CompletionRequest) -> Value {
    vt_contract::json::from_text(&summary_text(request)).unwrap_or(Value::Null)
}

pub fn fingerprint(summary: &Value) -> String {
    of_text(&summary.to_string())
}

/// What identifies a request, as JSON text: `{"system", "context", "messages", "tools": [{"name",
/// "parameters"}], "max_tokens"}`, cards masked and keys removed. Written straight, not built as a
/// value: every model call pays it (its stored fingerprint), and the value's round trips — to a
/// value, to text, back to a value, to text again — were 14 % of the agent loop's CPU. Messages whose
/// redacted text is no longer JSON are `null`, as they were then.
pub fn summary_text(request: &CompletionRequest) -> String {
    #[derive(serde::Serialize)]
    struct Tool<'a> {
        name: &'a str,
        parameters: &'a Value,
    }
    let text = |t: &str| Value::String(redact(t)).to_string();
    let messages = vt_contract::json::to_text(&request.messages)
        .map(|m| redact(&m))
        .ok()
        .filter(|m| vt_contract::json::from_text::<serde::de::IgnoredAny>(m).is_ok())
        .unwrap_or_else(|| "null".to_owned());
    let tools: Vec<Tool<'_>> = request
        .tools
        .iter()
        .map(|t| Tool {
            name: &t.name,
            parameters: &t.parameters,
        })
        .collect();
    let tools = vt_contract::json::to_text(&tools).unwrap_or_else(|_| "[]".to_owned());
    let max_tokens = request.max_tokens.map_or("null".to_owned(), |n| n.to_string());
    format!(
        r#"{{"system":{},"context":{},"messages":{messages},"tools":{tools},"max_tokens":{max_tokens}}}"#,
        text(&request.system),
        text(&request.context),
    )
}

/// The fingerprint of a summary written as JSON text.
pub fn of_text(summary: &str) -> String {
    hex::encode(Sha256::digest(summary.as_bytes()))[..16].to_owned()
}

/// `request`'s fingerprint, as a stored model call keeps it.
pub fn of(request: &CompletionRequest) -> String {
    of_text(&summary_text(request))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use vt_contract::ToolSpec;

    use super::*;
    use crate::llm::{ChatMessage, ToolCall};

    fn request(messages: Vec<ChatMessage>, max_tokens: Option<u32>) -> CompletionRequest {
        CompletionRequest {
            system: "Você é o assistente. Chave sk-abcdefghijklmnop \"aspas\" e\nlinhas".into(),
            context: "Cartão do usuário: 1234567890123456; hoje 28/11/2026".into(),
            messages,
            tools: vec![Arc::new(ToolSpec {
                name: "consultar_saldo".into(),
                description: "Consulta o saldo.".into(),
                parameters: json!({"type": "object", "properties": {"cartao": {"type": "string"}},
                    "required": ["cartao"], "additionalProperties": false}),
            })],
            cache_key: None,
            max_tokens,
            choice: None,
            text_only: false,
        }
    }

    /// The text and its value say the same, and the fingerprints are those stored before the text was
    /// written straight.
    #[test]
    fn the_summary_text_is_the_summary_values_text() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "consultar_saldo".into(),
            arguments: json!({"cartao": "1234567890", "valor": 50.5, "dias": 22, "nada": null}).to_string(),
        };
        let cases = [
            request(Vec::new(), None),
            request(
                vec![
                    ChatMessage::user("saldo do 1234 5678 90 e Bearer abcdefghijk123 — é \u{1F68C}?"),
                    ChatMessage::Assistant {
                        content: None,
                        tool_calls: vec![call.clone()],
                    },
                    ChatMessage::Tool {
                        call_id: "call_1".into(),
                        name: "consultar_saldo".into(),
                        content: "{\"saldo\": \"BRL 12,50\", \"cartao\": \"1234567890\"}".into(),
                        is_error: false,
                    },
                    ChatMessage::assistant("O saldo é R$ 12,50.\t\u{0007}"),
                ],
                Some(300),
            ),
        ];
        for r in &cases {
            assert_eq!(summary_text(r), summary(r).to_string());
            assert_eq!(of(r), fingerprint(&summary(r)));
        }
        // What the value-built summary of step 30 gave for these requests: stored fingerprints match.
        assert_eq!(of(&cases[0]), "d621fdb898a1816d");
        assert_eq!(of(&cases[1]), "812483bdc5a8ed77");
        assert!(!summary_text(&cases[1]).contains("1234567890"));
    }
}
