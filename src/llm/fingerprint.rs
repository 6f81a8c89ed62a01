//! What identifies a model request: the same function for a cassette (`vt-agent test --record`) and
//! for the fingerprint each stored model call keeps, which `vt-agent replay` matches a candidate's
//! requests against. Taken over the redacted form (cards masked, keys removed), so it names no secret.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use vt_actions::vt::card::mask_cards_in;

use super::CompletionRequest;

static SECRET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(sk-[A-Za-z0-9_\-]{8,}|sk-ant-[A-Za-z0-9_\-]{8,}|Bearer [A-Za-z0-9._\-]{8,})")
        .expect("secret regex")
});

/// Masks card numbers and removes anything that looks like a key.
pub(crate) fn redact(text: &str) -> String {
    SECRET
        .replace_all(&mask_cards_in(text), "<redigido>")
        .into_owned()
}

/// What identifies a request: prompt, messages, tools (names and schemas) and the token limit, redacted.
pub(crate) fn summary(request: &CompletionRequest) -> Value {
    let messages = vt_actions::json::to_value(&request.messages).unwrap_or(Value::Null);
    json!({
        "system": redact(&request.system),
        "context": redact(&request.context),
        "messages": vt_actions::json::from_text::<Value>(&redact(&messages.to_string())).unwrap_or(Value::Null),
        "tools": request.tools.iter().map(|t| json!({"name": t.name, "parameters": t.parameters})).collect::<Vec<_>>(),
        "max_tokens": request.max_tokens,
    })
}

pub(crate) fn fingerprint(summary: &Value) -> String {
    of_text(&summary.to_string())
}

/// The fingerprint of a summary written as JSON text.
pub(crate) fn of_text(summary: &str) -> String {
    hex::encode(Sha256::digest(summary.as_bytes()))[..16].to_owned()
}

/// `request`'s fingerprint, as a stored model call keeps it.
pub(crate) fn of(request: &CompletionRequest) -> String {
    fingerprint(&summary(request))
}
