//! The data of a conversation and of one turn: what the engine reads, changes and reports.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use vt_contract::{EndChat, FileContent, ResponseStatus, TransferToHuman};

use super::Participant;
use crate::llm::ChatMessage;

/// A conversation as the engine needs it between turns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    pub id: String,
    pub agent_id: String,
    /// Whose conversation it is: an API key reaches only its tenant's conversations.
    #[serde(default = "default_tenant")]
    pub tenant_id: String,
    pub user_id: String,
    pub user_login: String,
    pub channel: String,
    pub active_skill: String,
    pub state: Map<String, Value>,
    pub memory: Map<String, Value>,
    /// What the active skill's model sees: the messages since that skill became active. Earlier
    /// skills' messages stay in the stored log but never reach a later skill's model.
    pub window: Vec<ChatMessage>,
    /// The previous skill's response, the only thing of it the active skill may see.
    pub handoff: Option<Handoff>,
    pub ended: bool,
}

/// The tenant of everything that comes with no API key (the terminal, a `serve` without keys).
pub const DEFAULT_TENANT: &str = "default";

/// The terminal's channel name (`vt-agent chat`, and a transcript that names no channel).
pub const TERMINAL: &str = "terminal";

fn default_tenant() -> String {
    DEFAULT_TENANT.to_owned()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Handoff {
    pub from_skill: String,
    pub response: String,
}

impl Conversation {
    /// Who a trace of this conversation is about.
    pub fn scope(&self) -> crate::telemetry::spans::Scope<'_> {
        crate::telemetry::spans::Scope {
            agent: &self.agent_id,
            session: &self.id,
            user: &self.user_id,
        }
    }

    pub fn new(id: String, agent_id: &str, entry_skill: String, who: Participant) -> Self {
        Self {
            id,
            agent_id: agent_id.to_owned(),
            tenant_id: default_tenant(),
            user_id: who.user_id,
            user_login: who.user_login,
            channel: who.channel,
            active_skill: entry_skill,
            state: Map::new(),
            memory: Map::new(),
            window: Vec::new(),
            handoff: None,
            ended: false,
        }
    }
}

/// One model call, as recorded on the execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCallRecord {
    pub skill: String,
    pub model: String,
    /// Every input token, the cached ones included.
    pub tokens_input: u64,
    pub tokens_output: u64,
    /// Of `tokens_input`, those read from the provider's prompt cache.
    #[serde(default)]
    pub tokens_cached: u64,
    /// Of `tokens_input`, those written to the provider's prompt cache (Anthropic bills them apart).
    #[serde(default)]
    pub tokens_cache_write: u64,
    pub latencia_ms: u64,
    pub stop_reason: String,
    /// Tries it took (retries included); a failed call records the error instead of a stop reason.
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The request's fingerprint (`llm::fingerprint`): what `vt-agent replay` matches a candidate's
    /// request against to give this call's recorded answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionStatus {
    Concluido,
    Falhou,
}

impl ExecutionStatus {
    /// From its stored form; anything unknown reads as failed.
    pub fn parse(s: &str) -> Self {
        if s == Self::Concluido.as_str() {
            Self::Concluido
        } else {
            Self::Falhou
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Concluido => "concluido",
            Self::Falhou => "falhou",
        }
    }
}

/// The persisted record of a turn (`execucao_id`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionRecord {
    pub execucao_id: String,
    pub conversation_id: String,
    pub agent_id: String,
    pub status: ExecutionStatus,
    pub error: Option<String>,
    pub model_calls: Vec<ModelCallRecord>,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
}

impl ExecutionRecord {
    pub fn tokens(&self) -> (u64, u64) {
        self.model_calls
            .iter()
            .fold((0, 0), |(i, o), c| (i + c.tokens_input, o + c.tokens_output))
    }

    /// Of [`Self::tokens`]' input, those read from the provider's prompt cache.
    pub fn cached_tokens(&self) -> u64 {
        self.model_calls.iter().map(|c| c.tokens_cached).sum()
    }
}

/// A message for the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileContent>,
}

impl Reply {
    /// Several replies as one text, the way a terminal (and a transcript) shows them.
    pub fn join(replies: &[Reply]) -> String {
        replies
            .iter()
            .map(|r| r.text.as_str())
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// What happened during a turn, in order: for tests, transcripts, traces and the stored log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum TurnEvent {
    ModelCall(ModelCallRecord),
    ToolCall {
        call_id: String,
        skill: String,
        name: String,
        arguments: String,
        deterministic: bool,
    },
    ToolResult {
        call_id: String,
        name: String,
        status: ResponseStatus,
        content: String,
        to_user: bool,
    },
    ToolSkipped {
        call_id: String,
        name: String,
    },
    SkillChanged {
        from: String,
        to: String,
        reason: String,
    },
    StateUpdated {
        updates: Map<String, Value>,
    },
    MemoryUpdated {
        updates: Map<String, Value>,
    },
    EndChat(EndChat),
    TransferToHuman(TransferToHuman),
    Reply(Reply),
    /// What a system answered a request of this turn (added by the service from its tape), for a
    /// replay's world.
    Exchanged(vt_connectors::tape::Exchange),
    Error {
        message: String,
    },
    /// How the router decided this turn (added by the service; the engine never routes).
    Routed {
        intent: String,
        keyword_matched: bool,
        classified: bool,
    },
}

impl TurnEvent {
    /// `transfer_to_human` or `end_chat` for a system function, as transcripts name them.
    pub fn system_function(&self) -> Option<&'static str> {
        match self {
            Self::TransferToHuman(_) => Some("transfer_to_human"),
            Self::EndChat(_) => Some("end_chat"),
            _ => None,
        }
    }

    /// The name and raw JSON arguments of a tool call the model made (a deterministic step's is not).
    pub fn model_tool_call(&self) -> Option<(&str, &str)> {
        match self {
            Self::ToolCall {
                name,
                arguments,
                deterministic: false,
                ..
            } => Some((name, arguments)),
            _ => None,
        }
    }
}

/// Everything a turn produced. The caller stores `messages` (the full log of the turn, user message
/// first), the execution and the conversation the engine changed, and sends `replies`.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub execution: ExecutionRecord,
    pub replies: Vec<Reply>,
    pub events: Vec<TurnEvent>,
    pub messages: Vec<ChatMessage>,
    /// What each deterministic skill answered, in order, as a value (a flow's `etapas`).
    pub stages: Vec<StageOutput>,
    /// The turns the actions ran on the same engine (a chat tool's flow run), in the order they
    /// ran: the caller stores them with this turn.
    pub inner_runs: Vec<InnerRun>,
}

/// A turn an action ran on the same engine, handed back with the turn whose action ran it.
#[derive(Debug, Clone, PartialEq)]
pub struct InnerRun {
    /// Its input as stored (sanitised).
    pub input: Value,
    pub outcome: TurnOutcome,
    pub at: DateTime<Utc>,
}

/// Where a turn's actions put the runs they start: one per turn, in its actions' context
/// ([`vt_contract::ActionContext::get`]), emptied into [`TurnOutcome::inner_runs`] when the turn ends.
#[derive(Debug, Clone, Default)]
pub struct InnerRuns(std::sync::Arc<std::sync::Mutex<Vec<InnerRun>>>);

impl InnerRuns {
    pub fn push(&self, run: InnerRun) {
        self.lock().push(run);
    }

    pub fn take(&self) -> Vec<InnerRun> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<InnerRun>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One deterministic skill's answer: the value it handed on, or its text read as JSON when it gave
/// no value (a string when it is not JSON, as an error result is).
#[derive(Debug, Clone, PartialEq)]
pub struct StageOutput {
    pub skill: String,
    pub output: Value,
}

impl TurnOutcome {
    /// `line` on a line of its own at the end of the last reply — one message — in what is sent and in
    /// what the history keeps of it alike; `false` when the turn said nothing.
    pub fn append_to_last_reply(&mut self, line: &str) -> bool {
        let Some(last) = self.replies.len().checked_sub(1) else {
            return false;
        };
        self.rewrite_reply(last, |said| format!("{said}\n{line}"));
        true
    }

    /// `lead` on lines of its own before the first reply — one message — in what is sent and in what
    /// the history keeps of it alike; `false` when the turn said nothing.
    pub fn prepend_to_first_reply(&mut self, lead: &str) -> bool {
        if self.replies.is_empty() {
            return false;
        }
        self.rewrite_reply(0, |said| format!("{lead}\n\n{said}"));
        true
    }

    /// Reply `i` rewritten by `new`, and the assistant message the history keeps of it alike.
    fn rewrite_reply(&mut self, i: usize, new: impl Fn(&str) -> String) {
        let Some(reply) = self.replies.get_mut(i) else {
            return;
        };
        let said = std::mem::take(&mut reply.text);
        reply.text = new(&said);
        let kept = self.messages.iter_mut().rev().find_map(|m| match m {
            ChatMessage::Assistant {
                content: Some(content),
                ..
            } if *content == said => Some(content),
            _ => None,
        });
        if let Some(content) = kept {
            *content = new(&said);
        }
    }

    /// The replies joined, as a terminal shows them.
    pub fn reply_text(&self) -> String {
        Reply::join(&self.replies)
    }

    pub fn model_calls(&self) -> usize {
        self.execution.model_calls.len()
    }
}
