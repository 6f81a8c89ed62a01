//! A provider that plays back a script: for tests and transcripts, and to check what the engine sent.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::Value;

use super::{Completion, CompletionRequest, LlmError, LlmProvider, StopReason, ToolCall, Usage};

/// One scripted model reply.
#[derive(Debug, Clone)]
pub enum Scripted {
    Reply(Completion),
    Fail(LlmError),
}

impl Scripted {
    /// A final text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Reply(Completion {
            model: "scripted".into(),
            text: Some(text.into()),
            tool_calls: Vec::new(),
            stop_reason: StopReason::EndTurn,
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                ..Usage::default()
            },
        })
    }

    /// One tool call with JSON arguments.
    pub fn tool(name: &str, arguments: Value) -> Self {
        Self::tools(&[(name, arguments)])
    }

    /// Several tool calls in one completion.
    pub fn tools(calls: &[(&str, Value)]) -> Self {
        Self::raw_tools(calls.iter().map(|(n, a)| (*n, a.to_string())).collect())
    }

    /// Tool calls whose arguments are raw text (to script malformed JSON).
    pub fn raw_tools(calls: Vec<(&str, String)>) -> Self {
        Self::Reply(Completion {
            model: "scripted".into(),
            text: None,
            tool_calls: calls
                .into_iter()
                .map(|(name, arguments)| ToolCall {
                    id: String::new(),
                    name: name.to_owned(),
                    arguments,
                })
                .collect(),
            stop_reason: StopReason::ToolUse,
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                ..Usage::default()
            },
        })
    }

    pub fn fail(error: LlmError) -> Self {
        Self::Fail(error)
    }

    /// A 500 from the provider.
    pub fn server_error() -> Self {
        Self::Fail(LlmError::Transient {
            status: Some(500),
            message: "internal error".into(),
            retry_after: None,
        })
    }
}

/// Plays back [`Scripted`] replies in order and records every request.
#[derive(Default)]
pub struct ScriptedProvider {
    script: Mutex<VecDeque<Scripted>>,
    requests: Mutex<Vec<CompletionRequest>>,
    counter: Mutex<u64>,
}

impl ScriptedProvider {
    pub fn new(script: impl IntoIterator<Item = Scripted>) -> Self {
        Self {
            script: Mutex::new(script.into_iter().collect()),
            ..Self::default()
        }
    }

    /// Appends replies to the script.
    pub fn push(&self, more: impl IntoIterator<Item = Scripted>) {
        lock(&self.script).extend(more);
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<CompletionRequest> {
        lock(&self.requests).clone()
    }

    /// Replies not consumed yet.
    pub fn remaining(&self) -> usize {
        lock(&self.script).len()
    }

    /// Drops the replies not consumed yet: how many there were.
    pub fn discard(&self) -> usize {
        let mut script = lock(&self.script);
        let left = script.len();
        script.clear();
        left
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere must not hide the script from the assertion that follows.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[async_trait]
impl LlmProvider for ScriptedProvider {
    fn model(&self) -> &str {
        "scripted"
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        lock(&self.requests).push(request.clone());
        let next = lock(&self.script).pop_front();
        match next {
            Some(Scripted::Reply(mut c)) => {
                let mut counter = lock(&self.counter);
                for call in &mut c.tool_calls {
                    if call.id.is_empty() {
                        *counter += 1;
                        call.id = format!("call_{}", *counter);
                    }
                }
                Ok(c)
            }
            Some(Scripted::Fail(e)) => Err(e),
            None => Err(LlmError::Rejected {
                status: 400,
                message: "scripted provider: script exhausted".into(),
            }),
        }
    }
}
