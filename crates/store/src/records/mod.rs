//! What the store keeps and hands back: its records, their statuses and its error.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use vt_domain::journal::{AttemptStatus, RechargeAttempt};

use vt_engine::llm::ChatMessage;
use vt_engine::{Conversation, ExecutionRecord, TurnEvent};

use super::*;

mod cases;
mod charges;
mod outcomes;
mod recurrences;
mod review;

pub use cases::*;
pub use charges::*;
pub use outcomes::*;
pub use recurrences::*;
pub use review::*;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("erro do banco de dados: {0}")]
    Database(#[from] sqlx::Error),
    #[error("a migração falhou: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("um JSON guardado é inválido: {0}")]
    Json(#[from] serde_json::Error),
    #[error("não foi possível criar a pasta de dados {path}")]
    DataDir { path: String, source: std::io::Error },
    #[error(transparent)]
    Sealed(#[from] seal::SealError),
    #[error("{0}")]
    Invalid(String),
}

/// An inbound message to accept ([`ConversationStore::accept_message`]).
#[derive(Debug, Clone, Copy)]
pub struct Accepting<'a> {
    pub conversation: &'a Conversation,
    /// The conversation's row is written too (a new conversation).
    pub new_conversation: bool,
    /// The channel's id of the message: a redelivery is not stored again.
    pub channel_message_id: Option<&'a str>,
    pub message: &'a ChatMessage,
    /// For a channel that keeps each contact's last message (WhatsApp's 24-hour window): whose, and
    /// when they wrote — written with the message.
    pub contact_seen: Option<(&'a str, DateTime<Utc>)>,
    /// A media message's handle at its channel (a voice note, a photo): kept to fetch it while its turn
    /// runs, never its bytes.
    pub media: Option<&'a Media>,
    pub now: DateTime<Utc>,
}

impl<'a> Accepting<'a> {
    /// `message` in an existing conversation, with no channel id and no contact to note.
    pub fn plain(conversation: &'a Conversation, message: &'a ChatMessage, now: DateTime<Utc>) -> Self {
        Self {
            conversation,
            new_conversation: false,
            channel_message_id: None,
            message,
            contact_seen: None,
            media: None,
            now,
        }
    }
}

/// A message as stored, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    pub id: i64,
    pub conversation_id: String,
    pub execucao_id: Option<String>,
    pub message: ChatMessage,
    pub created_at: DateTime<Utc>,
}

/// Where a flow run stands on record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Started and not finished: still running, or its process was killed.
    EmAndamento,
    Concluido,
    Pendente,
    Falhou,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EmAndamento => "em_andamento",
            Self::Concluido => "concluido",
            Self::Pendente => "pendente",
            Self::Falhou => "falhou",
        }
    }

    /// A status as a row holds it.
    pub fn from_row(text: &str) -> Result<Self, StoreError> {
        [Self::EmAndamento, Self::Concluido, Self::Pendente, Self::Falhou]
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| StoreError::Invalid(format!("status de execução de fluxo desconhecido: {text:?}")))
    }
}

/// Where a batch line ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LineStatus {
    Concluido,
    Pendente,
    Falhou,
    /// The line is not a valid flow input: nothing ran.
    Invalida,
    /// The line could not run (the engine failed): rerunning the job runs it again.
    Erro,
}

impl LineStatus {
    pub const ALL: [Self; 5] = [
        Self::Concluido,
        Self::Pendente,
        Self::Falhou,
        Self::Invalida,
        Self::Erro,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Concluido => "concluido",
            Self::Pendente => "pendente",
            Self::Falhou => "falhou",
            Self::Invalida => "invalida",
            Self::Erro => "erro",
        }
    }

    /// A status as a row holds it.
    pub fn from_row(text: &str) -> Result<Self, StoreError> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| StoreError::Invalid(format!("status de linha de lote desconhecido: {text:?}")))
    }
}

/// An attempt's status as a row holds it.
pub fn attempt_status(text: &str) -> Result<AttemptStatus, StoreError> {
    AttemptStatus::parse(text)
        .ok_or_else(|| StoreError::Invalid(format!("status de tentativa de recarga desconhecido: {text:?}")))
}

/// Whether an attempt put on record has been sent.
#[derive(Clone, Copy)]
pub enum Sent {
    /// Not yet (a consumed confirmation): a row already there under the key is left as it is.
    NotYet,
    /// It is being sent now: once more when a row is already there.
    Now,
}

/// A flow execution and the output of each stage: the one place a stage's output is kept (the
/// flow's output is built from it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowRunRecord {
    pub execucao_id: String,
    /// The chat turn whose tool started it; `None` for a `run-flow`.
    #[serde(default)]
    pub parent_execucao_id: Option<String>,
    pub status: RunStatus,
    pub input: Value,
    /// `(etapa, saida)` in order.
    pub stages: Vec<(String, Value)>,
    pub created_at: DateTime<Utc>,
}

/// A flow run as an operator lists it: `em_andamento` for one that started and never finished (still
/// running, or its process was killed).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowRunSummary {
    pub execucao_id: String,
    pub status: RunStatus,
    pub input: Value,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// What one tenant spent over a period, summed ([`ReportStore::spending_by_tenant_since`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenantSpending {
    /// `None`: flow runs written before runs kept their tenant.
    pub tenant_id: Option<String>,
    /// Conversations with a turn or a paid message.
    pub conversations: i64,
    /// Turns and paid messages with a price, in millionths of a real.
    pub known_micro_brl: i64,
    /// Turns and paid messages without a price.
    pub unknown: i64,
    /// Flow runs started on their own (a chat turn's are the turn's).
    pub flows: i64,
    /// Of `known_micro_brl`, flows' paid notices.
    pub flow_known_micro_brl: i64,
    /// Flows' paid notices without a price.
    pub flow_unknown: i64,
}

/// When a flow run started, and for which tenant (`None`: a run written before runs kept theirs).
#[derive(Debug, Clone, PartialEq)]
pub struct FlowRunAt {
    pub tenant_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// A recharge attempt on record, with where it stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RechargeAttemptRecord {
    pub attempt: RechargeAttempt,
    pub status: AttemptStatus,
    /// How many times it was sent with this key.
    pub sends: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Where a planner task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Pending,
    Running,
    Completed,
    Failed,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Result<Self, StoreError> {
        Ok(match s {
            "pending" => Self::Pending,
            "running" => Self::Running,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            other => {
                return Err(StoreError::Invalid(format!(
                    "status de tarefa desconhecido {other:?}"
                )));
            }
        })
    }
}

/// One planner task and its steps (hybrid intents).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRun {
    pub id: String,
    pub conversation_id: String,
    pub user_id: String,
    pub intent_key: String,
    pub status: TaskStatus,
    pub plan: Option<Value>,
    pub steps: Value,
    pub final_result: Option<String>,
    pub tokens_used: i64,
    pub error_message: Option<String>,
    pub created_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
}

/// One turn's cost, for the usage summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageRecord {
    pub conversation_id: String,
    pub intent_key: String,
    /// `deterministic`, `reasoning` or `hybrid`.
    pub action_type: String,
    pub tokens_input: i64,
    pub tokens_output: i64,
    pub execution_time_ms: i64,
    pub was_keyword_matched: bool,
    pub created_at: DateTime<Utc>,
    /// Milliseconds of audio the turn transcribed (a voice note).
    pub audio_ms: i64,
    /// Of `tokens_input`, those the provider read from its prompt cache.
    pub tokens_cached: i64,
    /// The tenant of the turn's conversation (kept here: the figure outlives the conversation).
    pub tenant_id: String,
    /// What the turn cost, in millionths of a real at the `[custos]` prices it ran under; `None`
    /// when a price was missing (unknown, never zero).
    pub custo_micro_brl: Option<i64>,
    /// What the turn achieved, comma-separated (`saldo`, `creditada`…; see `service::outcomes`): a
    /// stretch's outcome is computed from them.
    pub marcas: String,
}

/// A paid message a channel sent (a WhatsApp template outside the 24-hour window) and its cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageCost {
    pub tenant_id: String,
    pub conversation_id: Option<String>,
    pub channel: String,
    /// The message's pricing category (`utility`, `marketing`, `authentication`).
    pub category: String,
    /// Millionths of a real at the `[custos]` price when it was sent; `None`: no price (unknown).
    pub custo_micro_brl: Option<i64>,
    pub created_at: DateTime<Utc>,
    /// The flow run it was a notice of (RF5/RF10 told on the channel), when it was one.
    pub execucao_id: Option<String>,
}

/// A row of the 7-day usage view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageSummaryRow {
    pub intent_key: String,
    pub action_type: String,
    pub turns: i64,
    pub tokens_input: i64,
    pub tokens_output: i64,
    pub zero_token_turns: i64,
    pub keyword_matched: i64,
    pub mean_time_ms: f64,
    /// Of `tokens_input`, those read from the provider's prompt cache.
    pub tokens_cached: i64,
}

/// Compressed context of a conversation (instead of its full history).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationContext {
    pub conversation_id: String,
    pub user_id: String,
    pub summary: Option<String>,
    pub key_facts: Vec<String>,
    pub last_intent: Option<String>,
    pub turn_count: i64,
    pub updated_at: DateTime<Utc>,
}

impl ConversationContext {
    /// A conversation's context before its first turn.
    pub fn empty(conversation_id: &str, user_id: &str, now: DateTime<Utc>) -> Self {
        Self {
            conversation_id: conversation_id.to_owned(),
            user_id: user_id.to_owned(),
            summary: None,
            key_facts: Vec::new(),
            last_intent: None,
            turn_count: 0,
            updated_at: now,
        }
    }
}

/// An intent of the router, as data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntentRecord {
    pub intent_key: String,
    pub description: String,
    pub action_type: String,
    pub required_params: Vec<String>,
    pub optional_params: Vec<String>,
    pub prompt_template: Option<String>,
    pub max_tokens: i64,
    pub is_active: bool,
}

/// A stored answer to a request that must not be executed twice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    pub key: String,
    pub scope: String,
    pub request_hash: String,
    pub response: Value,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// What happened to an idempotency `put`.
#[derive(Debug, Clone, PartialEq)]
pub enum IdempotencyPut {
    Inserted,
    /// A live record already holds the key; nothing was written.
    Existing(IdempotencyRecord),
}

/// Where an outbox item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutboxStatus {
    /// Waiting for its next attempt.
    Pending,
    /// Claimed by a worker until its lease ends.
    InFlight,
    /// Delivered (for the terminal and HTTP, in the answer to the request itself).
    Done,
    /// Dead-lettered: its attempts are spent or its error is final; `last_error` says why.
    Failed,
    /// Waiting, by rule, for its user to write (outside a messaging window); it holds back every later
    /// item of its conversation, and goes out when released.
    Held,
}

impl OutboxStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::InFlight => "in_flight",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Held => "held",
        }
    }

    pub fn parse(s: &str) -> Result<Self, StoreError> {
        Ok(match s {
            "pending" => Self::Pending,
            "in_flight" => Self::InFlight,
            "done" => Self::Done,
            "held" => Self::Held,
            "failed" => Self::Failed,
            other => {
                return Err(StoreError::Invalid(format!(
                    "status de saída desconhecido {other:?}"
                )));
            }
        })
    }
}

/// Something to send (a channel reply), retried until acknowledged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewOutboxItem {
    pub kind: String,
    pub destination: String,
    pub payload: Value,
    pub max_attempts: i32,
    pub next_attempt_at: DateTime<Utc>,
    /// Items of one conversation go out in order.
    pub conversation_id: Option<String>,
    /// `Pending` for the worker; `Done` for a reply already delivered in the request's own answer.
    pub status: OutboxStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboxItem {
    pub id: i64,
    pub kind: String,
    pub destination: String,
    pub payload: Value,
    pub conversation_id: Option<String>,
    pub status: OutboxStatus,
    /// Claims so far, this one included.
    pub attempts: i32,
    pub max_attempts: i32,
    pub next_attempt_at: DateTime<Utc>,
    pub last_error: Option<String>,
    /// The stored message of its conversation this item carries (a late message), whose id and time
    /// it is known by wherever it is read.
    pub message_id: Option<i64>,
}

/// Everything a turn changes, written at once.
#[derive(Clone, Copy)]
pub struct TurnRecord<'a> {
    pub conversation: &'a Conversation,
    /// The messages of the turn after the user's (already stored).
    pub messages: &'a [ChatMessage],
    pub execution: &'a ExecutionRecord,
    pub events: &'a [TurnEvent],
    pub usage: Option<&'a UsageRecord>,
    /// The flow runs of the turn: a `run-flow` turn's own, or those its chat tools started.
    pub flow_runs: &'a [FlowRunRecord],
    /// The compressed context after the turn.
    pub context: Option<&'a ConversationContext>,
    /// One item per reply.
    pub outbox: &'a [NewOutboxItem],
    /// The stored ids of the user's messages this turn handled (one, or a burst's): marked processed.
    /// (first, last), both included.
    pub accepted_message: Option<(i64, i64)>,
    /// What the turn writes about a case: the one its transfer opens, or its message's line in the
    /// open one.
    pub case: Option<&'a CaseWrite>,
}

/// What a support agent did that is kept on record: a card looked up, or a conversation's transcript
/// downloaded from the console (no card then: `cartao` and `cartao_hash` are empty).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditRecord {
    pub at: DateTime<Utc>,
    pub support_user: String,
    pub tenant_id: String,
    pub channel: String,
    /// Masked (`****7890`).
    pub cartao: String,
    /// A keyed hash of the full number: every lookup of one card, without keeping the number.
    pub cartao_hash: String,
    pub outcome: String,
    /// The conversation it is about.
    pub conversation_id: Option<String>,
}

/// A batch job: its id, whose it is, what it read (the digest and line count of its input) and whether
/// it charges.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchJob {
    pub id: String,
    pub tenant_id: String,
    /// SHA-256 of the input bytes.
    pub digest: String,
    pub total: i64,
    pub dry_run: bool,
    /// The input, for a job sent over HTTP (so `serve` can resume it after a restart).
    #[serde(skip)]
    pub source: Option<String>,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// One input line of a batch that ended: its status and its result line, as output.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchLine {
    pub line: i64,
    pub status: LineStatus,
    pub result: Value,
}

/// What the console's conversation list asks for.
#[derive(Debug, Clone, Default)]
pub struct ConversationQuery {
    /// Only this tenant's conversations (a support agent's); `None`: every tenant's.
    pub tenant_id: Option<String>,
    /// Only this channel's (`terminal`, `http`, `mattermost`, `whatsapp`, `console`…).
    pub channel: Option<String>,
    /// Part of the conversation's id, of its user's id or login, or of any of its messages
    /// (case-insensitive).
    pub text: Option<String>,
    /// Only those whose last turn had this intent (`general_chat`: what no rule and no FAQ entry
    /// answered).
    pub intent: Option<String>,
    pub limit: i64,
}

/// A conversation as the console lists it, most recent first.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationListing {
    pub id: String,
    pub tenant_id: String,
    pub channel: String,
    pub user_id: String,
    pub user_login: String,
    pub last_message: Option<ChatMessage>,
    /// The router's intent of its last turn, from the compressed context.
    pub last_intent: Option<String>,
    pub ended: bool,
    /// A person has it: the conversation has an open case (not a skill redirect).
    pub handed_over: bool,
    pub updated_at: DateTime<Utc>,
}

/// A message accepted from a channel and not yet processed (its process stopped in between).
#[derive(Debug, Clone, PartialEq)]
pub struct UnprocessedMessage {
    pub id: i64,
    pub conversation_id: String,
    pub channel_message_id: String,
    pub text: String,
    /// What its channel holds of a media message, to fetch while its turn runs.
    pub media: Option<Media>,
}

/// A media message's handle at its channel: what to fetch, never the bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Media {
    pub kind: MediaKind,
    /// The channel's id of the media (WhatsApp's media id; it expires after 7 days).
    pub id: String,
    /// The type the channel announced (`audio/ogg; codecs=opus`, `image/jpeg`).
    pub mime: String,
}

/// What a media message carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaKind {
    /// A voice note or an audio file: heard through `[transcricao]`.
    Audio,
    /// A photo.
    Image,
}
