//! Cassettes: a real model's replies recorded once (`vt-agent test --record`) and replayed by request
//! fingerprint. Requests are stored redacted (card numbers masked, keys removed) and the fingerprint is
//! taken over the redacted form, so a cassette never holds a secret and still matches on replay. A
//! replay that finds no recording for a request fails loudly, naming what changed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use vt_engine::llm::fingerprint::{fingerprint, redact, summary};
use vt_engine::llm::{Completion, CompletionRequest, LlmError, LlmProvider, StopReason, ToolCall, Usage};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Cassette {
    pub entries: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub fingerprint: String,
    pub request: Value,
    pub response: Recorded,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Recorded {
    pub model: String,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<RecordedCall>,
    pub stop_reason: String,
    pub usage: Usage,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RecordedCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl Recorded {
    fn from_completion(c: &Completion) -> Self {
        Self {
            model: c.model.clone(),
            text: c.text.as_deref().map(redact),
            tool_calls: c
                .tool_calls
                .iter()
                .map(|t| RecordedCall {
                    id: t.id.clone(),
                    name: t.name.clone(),
                    arguments: redact(&t.arguments),
                })
                .collect(),
            stop_reason: c.stop_reason.as_str().to_owned(),
            usage: c.usage,
        }
    }

    fn to_completion(&self) -> Completion {
        Completion {
            model: self.model.clone(),
            text: self.text.clone(),
            tool_calls: self
                .tool_calls
                .iter()
                .map(|t| ToolCall {
                    id: t.id.clone(),
                    name: t.name.clone(),
                    arguments: t.arguments.clone(),
                })
                .collect(),
            stop_reason: match self.stop_reason.as_str() {
                "end_turn" => StopReason::EndTurn,
                "tool_use" => StopReason::ToolUse,
                "max_tokens" => StopReason::MaxTokens,
                other => StopReason::Other(other.to_owned()),
            },
            usage: self.usage,
        }
    }
}

impl Cassette {
    pub(crate) fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read cassette {}: {e}", path.display()))?;
        serde_yaml::from_str(&text).map_err(|e| format!("cassette {} is invalid: {e}", path.display()))
    }

    pub(crate) fn save(&self, path: &Path) -> Result<(), String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let text = serde_yaml::to_string(self).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("cannot write cassette {}: {e}", path.display()))
    }
}

/// Replays a cassette; misses are kept so the runner can fail the turn with the explanation.
pub(crate) struct ReplayProvider {
    cassette: Cassette,
    next: Mutex<usize>,
    misses: Mutex<Vec<String>>,
}

impl ReplayProvider {
    pub(crate) fn new(cassette: Cassette) -> Self {
        Self {
            cassette,
            next: Mutex::new(0),
            misses: Mutex::new(Vec::new()),
        }
    }

    /// Misses since the last call.
    pub(crate) fn take_misses(&self) -> Vec<String> {
        std::mem::take(
            &mut *self
                .misses
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// What differs between the request and the recording expected at this point.
    fn explain(&self, now: &Value, position: usize) -> String {
        let Some(expected) = self
            .cassette
            .entries
            .get(position)
            .or(self.cassette.entries.last())
        else {
            return "the cassette is empty".into();
        };
        let was = &expected.request;
        let mut diffs = Vec::new();
        if was["system"] != now["system"] {
            diffs.push(format!(
                "system prompt changed (recorded {} chars, now {})",
                was["system"].as_str().map_or(0, str::len),
                now["system"].as_str().map_or(0, str::len)
            ));
        }
        if was["context"] != now["context"] {
            diffs.push("the conversation's instructions changed (who, when, its state)".into());
        }
        if was["tools"] != now["tools"] {
            let names = |v: &Value| {
                v.as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|t| t["name"].as_str())
                            .map(str::to_owned)
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default()
            };
            diffs.push(format!(
                "tools changed (recorded {:?}, now {:?})",
                names(&was["tools"]),
                names(&now["tools"])
            ));
        }
        if was["max_tokens"] != now["max_tokens"] {
            diffs.push(format!(
                "max_tokens changed ({} → {})",
                was["max_tokens"], now["max_tokens"]
            ));
        }
        let (a, b) = (
            was["messages"].as_array().cloned().unwrap_or_default(),
            now["messages"].as_array().cloned().unwrap_or_default(),
        );
        if a.len() != b.len() {
            diffs.push(format!("{} messages recorded, {} now", a.len(), b.len()));
        }
        if let Some(i) = a.iter().zip(&b).position(|(x, y)| x != y) {
            diffs.push(format!("messages[{i}] changed: recorded {} / now {}", a[i], b[i]));
        }
        format!(
            "no recording for request {} (entry {position}): {}",
            fingerprint(now),
            diffs.join("; ")
        )
    }
}

#[async_trait]
impl LlmProvider for ReplayProvider {
    fn model(&self) -> &str {
        "cassette"
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let summary = summary(request);
        let fp = fingerprint(&summary);
        let mut next = self
            .next
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(entry) = self.cassette.entries.iter().find(|e| e.fingerprint == fp) {
            *next += 1;
            return Ok(entry.response.to_completion());
        }
        let why = self.explain(&summary, *next);
        self.misses
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(why.clone());
        Err(LlmError::Rejected {
            status: 404,
            message: format!("cassette miss: {why}"),
        })
    }
}

/// Passes requests to a real provider and records its replies.
pub(crate) struct RecordingProvider {
    inner: Arc<dyn LlmProvider>,
    path: PathBuf,
    recorded: Mutex<Cassette>,
}

impl RecordingProvider {
    pub(crate) fn new(inner: Arc<dyn LlmProvider>, path: PathBuf) -> Self {
        Self {
            inner,
            path,
            recorded: Mutex::new(Cassette::default()),
        }
    }

    pub(crate) fn save(&self) -> Result<(), String> {
        self.recorded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .save(&self.path)
    }
}

#[async_trait]
impl LlmProvider for RecordingProvider {
    fn model(&self) -> &str {
        self.inner.model()
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let completion = self.inner.complete(request).await?;
        let summary = summary(request);
        let entry = Entry {
            fingerprint: fingerprint(&summary),
            request: summary,
            response: Recorded::from_completion(&completion),
        };
        self.recorded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entries
            .push(entry);
        // What the run sees is the redacted reply, exactly what a replay will give.
        Ok(Recorded::from_completion(&completion).to_completion())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_masks_cards_and_keys() {
        let r = redact("cartão 1234 5678-90, chave sk-abc123def456ghi e Bearer abcdefghijkl");
        assert!(!r.contains("1234 5678-90") && r.contains("****7890"), "{r}");
        assert!(!r.contains("sk-abc123") && !r.contains("abcdefghijkl"), "{r}");
    }
}
