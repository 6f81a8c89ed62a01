//! Persistence: one [`Store`] trait, two implementations through sqlx — SQLite (default, a file under
//! the data directory, or `:memory:` for tests) and PostgreSQL (several instances sharing state). Each
//! backend has its own migrations, run at connect; there is no `sqlx::Any`. Both pass one conformance
//! suite (`tests/it/store.rs`).
//!
//! A turn is written in one transaction ([`ConversationStore::save_turn`]), so a crash leaves either the whole turn
//! or none of it — except the user's message, which is written on its own *before* the turn runs.

mod followup;
mod journal;
mod locks;
mod postgres;
mod rows;
mod sql;
pub mod seal;
mod sqlite;
mod writes;

pub use followup::{Checked, FollowUp, FollowUpView, NewFollowUp, OUTCOME_CASE, RecargasConfig};
pub use journal::StoreJournal;
pub use locks::{LocalLocks, TurnLock};
pub use postgres::PgStore;
pub use sqlite::SqliteStore;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use vt_actions::journal::{AttemptStatus, Confirmation, Consumption, RechargeAttempt};

use crate::engine::{Conversation, ExecutionRecord, TurnEvent};
use crate::llm::ChatMessage;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored JSON is invalid: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot create the data directory {path}: {source}")]
    DataDir { path: String, source: std::io::Error },
    #[error(transparent)]
    Sealed(#[from] seal::SealError),
    #[error("{0}")]
    Invalid(String),
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
            .ok_or_else(|| StoreError::Invalid(format!("a flow run's status is unknown: {text:?}")))
    }
}

/// Where a case stands ([`CaseStore`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseState {
    /// Opened, waiting for someone to claim it.
    Aguardando,
    /// Claimed by one support agent, its owner.
    EmAtendimento,
    /// Handed back to the bot.
    Devolvido,
    /// Closed with the conversation.
    Encerrado,
}

impl CaseState {
    const ALL: [Self; 4] = [
        Self::Aguardando,
        Self::EmAtendimento,
        Self::Devolvido,
        Self::Encerrado,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Aguardando => "aguardando",
            Self::EmAtendimento => "em_atendimento",
            Self::Devolvido => "devolvido",
            Self::Encerrado => "encerrado",
        }
    }

    /// A state as a row holds it.
    pub fn from_row(text: &str) -> Result<Self, StoreError> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| StoreError::Invalid(format!("a case's state is unknown: {text:?}")))
    }

    /// A person has the conversation (or is about to): the bot stays silent.
    pub fn is_open(self) -> bool {
        matches!(self, Self::Aguardando | Self::EmAtendimento)
    }
}

/// A case to open for a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct NewCase {
    pub id: String,
    pub conversation_id: String,
    pub tenant_id: String,
    pub channel: String,
    pub reason: String,
    /// Built by code when the case opens: what a support agent needs to pick the conversation up.
    pub case_file: Value,
    /// When the card holder is told nobody has claimed it yet, unless someone has.
    pub notice_due_at: Option<DateTime<Utc>>,
}

/// When a case was opened, claimed and closed, and where it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseTimes {
    pub state: CaseState,
    pub opened_at: DateTime<Utc>,
    pub claimed_at: Option<DateTime<Utc>>,
    pub closed_at: Option<DateTime<Utc>>,
}

/// A case on record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Case {
    pub id: String,
    pub conversation_id: String,
    pub tenant_id: String,
    pub channel: String,
    pub reason: String,
    pub state: CaseState,
    /// The support agent who claimed it.
    pub owner: Option<String>,
    pub opened_at: DateTime<Utc>,
    pub claimed_at: Option<DateTime<Utc>>,
    pub closed_at: Option<DateTime<Utc>>,
    /// Whether the card holder was told, once, that their messages are passed on.
    pub acknowledged: bool,
    pub case_file: Value,
    pub notice_due_at: Option<DateTime<Utc>>,
    /// Whether the unclaimed-case notice went.
    pub noticed: bool,
    /// The case's root post on the support board, once posted.
    pub board_post: Option<String>,
}

impl CaseEvent {
    fn of(case_id: &str, conversation_id: &str, at: DateTime<Utc>, who: &str, what: &str) -> Self {
        Self {
            case_id: case_id.to_owned(),
            conversation_id: conversation_id.to_owned(),
            at,
            who: who.to_owned(),
            what: what.to_owned(),
            detail: None,
        }
    }
}

impl Case {
    /// A line of this case's log.
    pub fn event(&self, at: DateTime<Utc>, who: &str, what: &str, detail: Option<String>) -> CaseEvent {
        CaseEvent {
            detail,
            ..CaseEvent::of(&self.id, &self.conversation_id, at, who, what)
        }
    }
}

impl NewCase {
    /// The `aberto` line of its log.
    pub(crate) fn opened(&self, at: DateTime<Utc>) -> CaseEvent {
        CaseEvent::of(&self.id, &self.conversation_id, at, "sistema", "aberto")
    }
}

/// What a turn writes about a case, in its own commit.
#[derive(Debug, Clone, PartialEq)]
pub enum CaseWrite {
    /// The turn's transfer opens this case (unless the conversation has one open).
    Open(NewCase),
    /// The turn's message arrived while a case is open: its line in the case's log and, for the first
    /// one while the case waits, the mark that the acknowledgement went.
    Held { line: CaseEvent, acknowledged: bool },
}

/// What opening a case did.
#[derive(Debug, Clone, PartialEq)]
pub enum CaseOpened {
    Opened(Case),
    /// The conversation has an open case already: that one.
    AlreadyOpen(Case),
}

/// What a claim did: one conditional update, so of two agents claiming at once exactly one wins.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    Claimed(Box<Case>),
    /// Someone has it: who.
    TakenBy(String),
    /// It is closed.
    Closed(CaseState),
    NotFound,
}

/// One line of a case's log: who did what, when.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseEvent {
    pub case_id: String,
    pub conversation_id: String,
    pub at: DateTime<Utc>,
    /// A support agent's login, `cliente`, or `sistema`.
    pub who: String,
    /// `aberto`, `assumido`, `devolvido`, `encerrado`, `mensagem_cliente`, `mensagem_atendente`, …
    pub what: String,
    /// A note, or the text relayed (sealed at rest).
    pub detail: Option<String>,
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
    pub(crate) const ALL: [Self; 5] = [
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
            .ok_or_else(|| StoreError::Invalid(format!("a batch line's status is unknown: {text:?}")))
    }
}

/// An attempt's status as a row holds it.
fn attempt_status(text: &str) -> Result<AttemptStatus, StoreError> {
    AttemptStatus::parse(text)
        .ok_or_else(|| StoreError::Invalid(format!("a recharge attempt's status is unknown: {text:?}")))
}

/// Whether an attempt put on record has been sent.
#[derive(Clone, Copy)]
enum Sent {
    /// Not yet (a consumed confirmation): a row already there under the key is left as it is.
    NotYet,
    /// It is being sent now: once more when a row is already there.
    Now,
}

/// A flow execution and the output of each stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowRunRecord {
    pub execucao_id: String,
    /// The chat turn whose tool started it; `None` for a `run-flow`.
    #[serde(default)]
    pub parent_execucao_id: Option<String>,
    pub status: RunStatus,
    pub input: Value,
    pub output: Value,
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
            other => return Err(StoreError::Invalid(format!("unknown task status {other:?}"))),
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
            other => return Err(StoreError::Invalid(format!("unknown outbox status {other:?}"))),
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
    /// The stored id of the user's message this turn handled: marked processed.
    pub accepted_message: Option<i64>,
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
}

/// Conversations and what a turn writes: the conversation row, its messages (accepted once per
/// channel id, processed in stored order), its executions, its compressed context, its planner
/// tasks, the console's list and the per-conversation turn lock.
#[async_trait]
pub trait ConversationStore: Send + Sync {
    async fn save_conversation(&self, conv: &Conversation, now: DateTime<Utc>) -> Result<(), StoreError>;

    async fn conversation(&self, id: &str) -> Result<Option<Conversation>, StoreError>;

    /// The last conversation (most recently updated) of `conv`'s user with the same agent, on the
    /// same channel and tenant, other than `conv` itself: where what they told us before is found.
    async fn previous_conversation(&self, conv: &Conversation) -> Result<Option<Conversation>, StoreError>;

    /// Accepts an inbound message in one transaction: the conversation's row when it is new, then the
    /// message — unless `channel_message_id` was accepted before in this conversation (a channel's
    /// redelivery), in which case nothing is written and `None` comes back. A message with a channel id
    /// is stored as not yet processed until its turn commits (see [`TurnRecord::accepted_message`]).
    /// `new_conversation`: the row is written too (else one statement, no transaction: the hot path).
    async fn accept_message(
        &self,
        conversation: &Conversation,
        new_conversation: bool,
        channel_message_id: Option<&str>,
        message: &ChatMessage,
        now: DateTime<Utc>,
    ) -> Result<Option<i64>, StoreError>;

    /// Stores one message on its own.
    async fn append_message(
        &self,
        conversation_id: &str,
        execucao_id: Option<&str>,
        message: &ChatMessage,
        now: DateTime<Utc>,
    ) -> Result<i64, StoreError>;

    async fn messages(&self, conversation_id: &str) -> Result<Vec<StoredMessage>, StoreError>;

    /// Accepted channel messages whose turn never committed, oldest first: every conversation's, or
    /// with `through = Some((conversation, id))` that conversation's up to message `id` included.
    async fn unprocessed_messages(
        &self,
        through: Option<(&str, i64)>,
        limit: i64,
    ) -> Result<Vec<UnprocessedMessage>, StoreError>;

    /// Conversation state, messages, execution, events, usage, context, flow runs and outbox items of a
    /// turn, in one transaction.
    async fn save_turn(&self, turn: TurnRecord<'_>, now: DateTime<Utc>) -> Result<(), StoreError>;

    async fn execution(
        &self,
        execucao_id: &str,
    ) -> Result<Option<(ExecutionRecord, Vec<TurnEvent>)>, StoreError>;

    /// Every execution of a conversation with its events, in order (one query for a whole transcript).
    async fn executions(
        &self,
        conversation_id: &str,
    ) -> Result<Vec<(ExecutionRecord, Vec<TurnEvent>)>, StoreError>;

    async fn save_task_run(&self, task: &TaskRun) -> Result<(), StoreError>;

    async fn task_runs(&self, conversation_id: &str) -> Result<Vec<TaskRun>, StoreError>;

    async fn save_context(&self, context: &ConversationContext) -> Result<(), StoreError>;

    async fn context(&self, conversation_id: &str) -> Result<Option<ConversationContext>, StoreError>;

    /// Conversations matching `query`, most recently updated first.
    async fn conversation_list(
        &self,
        query: &ConversationQuery,
    ) -> Result<Vec<ConversationListing>, StoreError>;

    /// Serialises turns of one conversation: in this process, and across processes and instances
    /// through a lease row in the database ([`locks`]).
    async fn lock_conversation(&self, conversation_id: &str) -> Result<TurnLock, StoreError>;
}

/// Flow runs: on record before they run, with their input, output and stages.
#[async_trait]
pub trait FlowStore: Send + Sync {
    async fn save_flow_run(&self, run: &FlowRunRecord) -> Result<(), StoreError>;

    async fn flow_run(&self, execucao_id: &str) -> Result<Option<FlowRunRecord>, StoreError>;

    /// Puts a flow run on record as `em_andamento` before it makes its first external call, in one
    /// transaction with its conversation (new: a flow's conversation is its own) and the input
    /// `message`; the turn's record later completes the same row.
    async fn begin_flow_run(
        &self,
        conversation: &Conversation,
        message: &ChatMessage,
        execucao_id: &str,
        input: &Value,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// The newest `limit` flow runs, newest first.
    async fn flow_runs(&self, limit: i64) -> Result<Vec<FlowRunSummary>, StoreError>;

    /// A run's outcome learnt after it ended (a recharge's follow-up): its status and output, and one
    /// more stage after the last, in one transaction.
    async fn settle_flow_run(
        &self,
        execucao_id: &str,
        status: RunStatus,
        output: &Value,
        stage: (&str, &Value),
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// Flow runs started since `since`, counted by status (`em_andamento` for one never finished).
    async fn flow_outcomes_since(&self, since: DateTime<Utc>) -> Result<Vec<(String, i64)>, StoreError>;
}

/// The money trail: confirmations consumed once, recharge attempts on record before they are sent
/// and resolved when answered.
#[async_trait]
pub trait RechargeStore: Send + Sync {
    /// Marks a pending confirmation used by `confirmation.consumer` and, in the same transaction, puts
    /// `attempt` on record as `enviando` with no send yet (an attempt already on record under its key
    /// is left as it is). A confirmation already used says whether by the same consumer.
    async fn consume_confirmation(
        &self,
        confirmation: Confirmation<'_>,
        attempt: Option<&RechargeAttempt>,
        now: DateTime<Utc>,
    ) -> Result<Consumption, StoreError>;

    /// Who consumed the confirmation `pending_id` (`Some("")` for one consumed before consumers were
    /// recorded).
    async fn confirmation_consumer(&self, pending_id: &str) -> Result<Option<String>, StoreError>;

    /// Records a recharge attempt as `enviando` (again, with one more send, for a key sent before) and,
    /// the first time, its follow-up: the request kept sealed while the outcome is unknown.
    async fn begin_recharge(
        &self,
        attempt: &RechargeAttempt,
        follow_up: Option<&NewFollowUp>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// Records how the attempt ended; an outcome that is known settles its follow-up (its request is
    /// dropped).
    async fn resolve_recharge(
        &self,
        idempotency_key: &str,
        status: AttemptStatus,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// The key of the newest attempt of `scope` with `fingerprint` whose outcome is unknown.
    async fn unresolved_recharge(&self, scope: &str, fingerprint: &str)
    -> Result<Option<String>, StoreError>;

    /// The newest `limit` recharge attempts, newest first.
    async fn recharge_attempts(&self, limit: i64) -> Result<Vec<RechargeAttemptRecord>, StoreError>;

    /// Takes up to `limit` follow-ups due by `now` (unknown outcome, not leased) and leases them until
    /// `lease_until`: among several processes and instances each is taken by one (on PostgreSQL with
    /// `FOR UPDATE SKIP LOCKED`), and one whose process died is taken again once its lease ran out.
    async fn claim_followups(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<FollowUp>, StoreError>;

    /// What the check of `idempotency_key`'s follow-up left (the lease is released).
    async fn followup_checked(
        &self,
        idempotency_key: &str,
        checked: &Checked,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// Follow-ups, those still unknown first (soonest check first), then the settled ones, newest
    /// first; only the unknown ones with `pending_only`.
    async fn followups(&self, pending_only: bool, limit: i64) -> Result<Vec<FollowUpView>, StoreError>;
}

/// The outbox: replies and notices waiting to go out, claimed by one sender at a time, with their
/// delivery statuses.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    async fn enqueue(&self, item: &NewOutboxItem, now: DateTime<Utc>) -> Result<i64, StoreError>;

    /// Takes up to `limit` due items (pending, or in flight past their lease) and leases them until
    /// `now + lease`. Two callers never get the same item.
    async fn claim(
        &self,
        limit: i64,
        now: DateTime<Utc>,
        lease: chrono::Duration,
    ) -> Result<Vec<OutboxItem>, StoreError>;

    async fn ack(&self, id: i64) -> Result<(), StoreError>;

    /// Gives the item back for another attempt at `next_attempt_at`, or marks it `failed` when its
    /// attempts are spent. Returns the new status.
    async fn retry_later(
        &self,
        id: i64,
        error: &str,
        next_attempt_at: DateTime<Utc>,
    ) -> Result<OutboxStatus, StoreError>;

    /// Remembers the id the channel gave a sent item, for the statuses it reports later.
    async fn record_sent(&self, id: i64, external_id: &str) -> Result<(), StoreError>;

    /// Records a status the channel reported for one of our messages (once per status); `false` when
    /// the message is not ours.
    async fn record_delivery_status(
        &self,
        external_id: &str,
        status: &str,
        error_code: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// The statuses reported for one of our messages, in the order they came.
    async fn delivery_statuses(&self, external_id: &str)
    -> Result<Vec<(String, Option<String>)>, StoreError>;

    /// Dead-letters an item at once (an error no retry can fix).
    async fn dead_letter(&self, id: i64, error: &str) -> Result<(), StoreError>;

    /// Holds an item until its conversation's user writes ([`OutboxStatus::Held`]), saying why.
    async fn hold(&self, id: i64, why: &str) -> Result<(), StoreError>;

    /// The user of `conversation_id` wrote: its held items are due now, with fresh attempts. Returns
    /// how many.
    async fn release_held(&self, conversation_id: &str, now: DateTime<Utc>) -> Result<u64, StoreError>;

    async fn outbox_item(&self, id: i64) -> Result<Option<OutboxItem>, StoreError>;

    /// How many items are in `status`.
    async fn outbox_count(&self, status: OutboxStatus) -> Result<i64, StoreError>;

    /// Items in `status`, oldest first.
    async fn outbox_items(&self, status: OutboxStatus, limit: i64) -> Result<Vec<OutboxItem>, StoreError>;

    /// Gives a dead-lettered item a fresh set of attempts; `false` when it is not dead-lettered.
    async fn requeue(&self, id: i64, now: DateTime<Utc>) -> Result<bool, StoreError>;
}

/// Batch jobs and their ended lines (with the lines' flow runs, a group per transaction).
#[async_trait]
pub trait BatchStore: Send + Sync {
    /// Puts a batch job on record unless a job with its id is there; returns the job as stored (the
    /// caller checks that a rerun is of the same input).
    async fn open_batch(&self, job: &BatchJob) -> Result<BatchJob, StoreError>;

    async fn batch(&self, id: &str) -> Result<Option<BatchJob>, StoreError>;

    /// Records lines that ended with their flow runs, in one transaction (a line recorded again is
    /// replaced).
    async fn save_batch_lines(
        &self,
        job_id: &str,
        lines: &[BatchLine],
        runs: &[FlowRunRecord],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// The job's recorded lines, by line number.
    async fn batch_lines(&self, job_id: &str) -> Result<Vec<BatchLine>, StoreError>;

    /// How many recorded lines the job has per status.
    async fn batch_counts(&self, job_id: &str) -> Result<Vec<(LineStatus, i64)>, StoreError>;

    /// Marks the job finished; its input, kept only to resume it, is not kept any longer.
    async fn finish_batch(&self, job_id: &str, now: DateTime<Utc>) -> Result<(), StoreError>;

    /// Jobs sent over HTTP that have not finished, oldest first.
    async fn unfinished_batches(&self) -> Result<Vec<BatchJob>, StoreError>;

    /// Batch jobs, newest first; only `tenant_id`'s when given.
    async fn batches(&self, tenant_id: Option<&str>, limit: i64) -> Result<Vec<BatchJob>, StoreError>;

    /// Splits the job into `chunks` chunks that `serve` instances share (the first call does; later
    /// ones change nothing).
    async fn share_batch(&self, job_id: &str, chunks: i64) -> Result<(), StoreError>;

    /// Takes one chunk of the job that is not done and not leased (or whose lease ran out) for `owner`
    /// until `lease_until`: of several instances each chunk goes to one (on PostgreSQL `FOR UPDATE
    /// SKIP LOCKED`).
    async fn claim_batch_chunk(
        &self,
        job_id: &str,
        owner: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<Option<i64>, StoreError>;

    /// Keeps `owner`'s lease on the chunk until `lease_until`; `false` when it is no longer theirs.
    async fn renew_batch_chunk(
        &self,
        job_id: &str,
        chunk: i64,
        owner: &str,
        lease_until: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// `owner` gives the chunk back: done, or to be taken again from `not_before`.
    async fn release_batch_chunk(
        &self,
        job_id: &str,
        chunk: i64,
        owner: &str,
        done: bool,
        not_before: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// The job's chunks not done, and of those, how many are leased past `now`.
    async fn batch_chunks_open(&self, job_id: &str, now: DateTime<Utc>) -> Result<(i64, i64), StoreError>;

    /// Unfinished jobs sent over HTTP with work an instance could take now — not split yet, a chunk
    /// free, or every chunk done and the job not marked finished (its last instance died in between) —
    /// oldest first.
    async fn claimable_batches(&self, now: DateTime<Utc>) -> Result<Vec<String>, StoreError>;

    /// The numbers of the job's recorded lines in `from..=to`.
    async fn ended_lines(&self, job_id: &str, from: i64, to: i64) -> Result<Vec<i64>, StoreError>;
}

/// What operators read and the router's data: token usage, the audit trail, the intents, HTTP
/// idempotency records.
#[async_trait]
pub trait ReportStore: Send + Sync {
    async fn record_usage(&self, usage: &UsageRecord) -> Result<(), StoreError>;

    /// The last 7 days, per intent and action type.
    async fn usage_summary(&self) -> Result<Vec<UsageSummaryRow>, StoreError>;

    async fn upsert_intent(&self, intent: &IntentRecord, now: DateTime<Utc>) -> Result<(), StoreError>;

    async fn intents(&self) -> Result<Vec<IntentRecord>, StoreError>;

    /// Inserts unless a live (unexpired at `now`) record holds the key.
    async fn put_idempotency(
        &self,
        record: &IdempotencyRecord,
        now: DateTime<Utc>,
    ) -> Result<IdempotencyPut, StoreError>;

    async fn idempotency(
        &self,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>, StoreError>;

    /// Settles a record put as "in progress": stores the final response, or (`None`) removes the
    /// record so the request can be made again.
    async fn settle_idempotency(&self, key: &str, response: Option<&Value>) -> Result<(), StoreError>;

    /// Every turn's usage record since `since`, oldest first (the console's dashboard).
    async fn usage_since(&self, since: DateTime<Utc>) -> Result<Vec<UsageRecord>, StoreError>;

    async fn record_audit(&self, record: &AuditRecord) -> Result<(), StoreError>;

    /// The newest `limit` support lookups, newest first.
    async fn audit_records(&self, limit: i64) -> Result<Vec<AuditRecord>, StoreError>;
}

/// What the product keeps and forgets: the sealing keys' secrets, re-sealing under a new key, a
/// data subject's records and their erasure.
#[async_trait]
pub trait KeepingStore: Send + Sync {
    /// The store's own secrets by name, opened (the index key; the mark that older rows are sealed).
    async fn store_secrets(&self) -> Result<HashMap<String, String>, StoreError>;

    /// Keeps `value` sealed under `name` unless a value is there already; returns the value kept.
    async fn put_store_secret(&self, name: &str, value: &str) -> Result<String, StoreError>;

    /// Seals every value of the [`SEALED`] columns that is not sealed under the current key: values
    /// written in clear before sealing existed, and values under an older key (a rotation). A batch at a
    /// time, each its own transaction, so it can be stopped anywhere and run again; `progress` is told
    /// each batch (`table.column`, values so far). Returns how many values it sealed.
    async fn reseal(
        &self,
        progress: &(dyn for<'p> Fn(&'p str, u64) + Send + Sync),
    ) -> Result<u64, StoreError>;

    /// The conversations and flow runs of `subject`: a user's (by user id), a card's (by its blind
    /// index), or everything not touched since a date (retention). A conversation's flow runs come
    /// with it.
    async fn subject_records(&self, subject: &Subject) -> Result<Records, StoreError>;

    /// Deletes `records` and everything that hangs on them, in one transaction ([`forget`]).
    async fn forget(&self, records: &Records) -> Result<(), StoreError>;
}

/// Cases: a conversation handed to a person — opened once, claimed by one support agent, handed back
/// or closed — every transition one conditional update, written with its line in the case's log.
#[async_trait]
pub trait CaseStore: Send + Sync {
    /// Opens `case` unless its conversation has an open case (then that one comes back).
    async fn open_case(&self, case: &NewCase, now: DateTime<Utc>) -> Result<CaseOpened, StoreError>;

    async fn case(&self, id: &str) -> Result<Option<Case>, StoreError>;

    /// The conversation's open case, if any.
    async fn open_case_of(&self, conversation_id: &str) -> Result<Option<Case>, StoreError>;

    /// How many cases are open (waiting or claimed), every tenant's.
    async fn open_case_count(&self) -> Result<i64, StoreError>;

    /// The times of the cases opened since `since` and of every case still waiting, `tenant`'s only
    /// when given: what the case figures are made of (no sealed column is read).
    async fn case_times(
        &self,
        tenant: Option<&str>,
        since: DateTime<Utc>,
    ) -> Result<Vec<CaseTimes>, StoreError>;

    /// Cases, `tenant`'s only when given: open ones first (waiting, then claimed; oldest first), then
    /// the closed ones, newest first.
    async fn cases(&self, tenant: Option<&str>, limit: i64) -> Result<Vec<Case>, StoreError>;

    /// `owner` claims a waiting case.
    async fn claim_case(&self, id: &str, owner: &str, now: DateTime<Utc>) -> Result<Claim, StoreError>;

    /// Closes an open case as `to` (`Devolvido` or `Encerrado`) for `who`, with an optional note;
    /// `None` when it was not open.
    async fn close_case(
        &self,
        id: &str,
        who: &str,
        to: CaseState,
        note: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Option<Case>, StoreError>;

    /// The case's log, oldest first.
    async fn case_events(&self, case_id: &str) -> Result<Vec<CaseEvent>, StoreError>;

    /// Takes one waiting case whose notice is due by `now` and marks its notice sent: one conditional
    /// update, so among several processes each notice is taken once.
    async fn take_due_notice(&self, now: DateTime<Utc>) -> Result<Option<Case>, StoreError>;

    /// What a person says to the card holder in a case, in one transaction: the message in the
    /// conversation, its outbox items (to the card holder, to the support board) and, when given, its
    /// line in the case's log.
    async fn say_in_case(
        &self,
        conversation_id: &str,
        message: &ChatMessage,
        outbox: &[NewOutboxItem],
        event: Option<&CaseEvent>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// A line in a case's log that says nothing to the card holder (an internal note), with the board
    /// items that show it — one transaction.
    async fn note_case(
        &self,
        event: &CaseEvent,
        outbox: &[NewOutboxItem],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// The case's root post on the support board is `post`.
    async fn set_board_post(&self, case_id: &str, post: &str) -> Result<(), StoreError>;

    /// The case whose root post on the support board is `post`.
    async fn case_of_board_post(&self, post: &str) -> Result<Option<Case>, StoreError>;
}

/// A WhatsApp template's state as Meta last reported it (its lifecycle webhooks, or a send's error).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TemplateState {
    pub name: String,
    pub language: String,
    /// `None`: not reported (a category change alone).
    pub status: Option<String>,
    pub category: Option<String>,
    pub reason: Option<String>,
    pub updated_at: DateTime<Utc>,
}

/// WhatsApp's contacts and templates: when each user last wrote (the 24-hour window is counted from
/// it) and what Meta said of each template.
#[async_trait]
pub trait ContactStore: Send + Sync {
    /// `wa_id` wrote at `at` (kept when later than what is on record).
    async fn touch_contact(&self, wa_id: &str, at: DateTime<Utc>) -> Result<(), StoreError>;

    /// When `wa_id` last wrote.
    async fn last_inbound(&self, wa_id: &str) -> Result<Option<DateTime<Utc>>, StoreError>;

    /// Records what Meta said of a template: a status, a category, or both (what is `None` stays).
    async fn set_template_state(&self, state: &TemplateState) -> Result<(), StoreError>;

    async fn template_states(&self) -> Result<Vec<TemplateState>, StoreError>;

    /// A user's answer on business-initiated messages changes: their current answer and the change's
    /// line, in one transaction.
    async fn record_consent(&self, change: &ConsentChange) -> Result<(), StoreError>;

    /// A user's current answer (`None`: never given).
    async fn consent(&self, wa_id: &str) -> Result<Option<ConsentChange>, StoreError>;

    /// Every change of a user's answer, oldest first.
    async fn consent_events(&self, wa_id: &str) -> Result<Vec<ConsentChange>, StoreError>;

    /// Takes the low-balance notice of the card `card_hash` if one is due: it is not below the limit
    /// since its last notice, and none went since `not_before`. One conditional write, so of several
    /// flows at once one takes it. Returns whether this call took it.
    async fn take_low_balance_notice(
        &self,
        card_hash: &str,
        not_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// The card's balance was read above the limit: its next low balance is a new crossing.
    async fn balance_recovered(&self, card_hash: &str) -> Result<(), StoreError>;
}

/// A change of a user's consent to business-initiated messages: who made it, when, through what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConsentChange {
    pub wa_id: String,
    pub opted_in: bool,
    /// Through what: `chat` (the user's own words), `importacao`, `api`…
    pub source: String,
    /// Who made it: the user, or the key or command that imported it.
    pub who: String,
    pub at: DateTime<Utc>,
}

/// The whole store, one trait per concern above: what the product keeps, on SQLite or PostgreSQL.
/// A `dyn Store` reaches every concern's methods; a test double implements the concerns one by one.
#[async_trait]
pub trait Store:
    ConversationStore
    + FlowStore
    + RechargeStore
    + OutboxStore
    + BatchStore
    + ReportStore
    + KeepingStore
    + CaseStore
    + ContactStore
{
    /// `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;

    /// Write transactions committed through this handle, where the backend counts them (SQLite: each
    /// one a sync of the WAL). For the benches.
    fn commits(&self) -> Option<u64> {
        None
    }

    /// What a turn reads before it runs, at once: concurrently (one round trip of waiting), or — on
    /// SQLite — in one query (one hop to a reader thread).
    async fn turn_reads(&self, conversation_id: &str) -> Result<TurnReads, StoreError> {
        let (conversation, context, open_case) = tokio::join!(
            self.conversation(conversation_id),
            self.context(conversation_id),
            self.open_case_of(conversation_id)
        );
        Ok(TurnReads {
            conversation: conversation?,
            context: context?,
            open_case: open_case?,
        })
    }
}

/// What a turn reads of its conversation before it runs.
#[derive(Debug, Default)]
pub struct TurnReads {
    /// The conversation (`None`: a new one).
    pub conversation: Option<Conversation>,
    /// The compressed context: it stands in for the older history in the prompt.
    pub context: Option<ConversationContext>,
    /// The case open for the conversation ([`CaseStore::open_case_of`]).
    pub open_case: Option<Case>,
}

/// Opens the configured store: PostgreSQL when `database_url` is `postgres://…`, else SQLite in
/// `data_dir` (created on first use). `sqlite::memory:` opens an in-memory database.
pub async fn open(
    database_url: Option<&str>,
    data_dir: &Path,
    usage: Usage,
) -> Result<Arc<dyn Store>, StoreError> {
    match database_url {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            Ok(Arc::new(PgStore::connect(url).await?))
        }
        Some(url) if url.starts_with("sqlite:") => Ok(Arc::new(SqliteStore::connect_for(url, usage).await?)),
        Some(other) => Err(StoreError::Invalid(format!(
            "database_url {:?} is not supported: use postgres://… or sqlite:…",
            other.split('@').next_back().unwrap_or_default()
        ))),
        None => {
            std::fs::create_dir_all(data_dir).map_err(|source| StoreError::DataDir {
                path: data_dir.display().to_string(),
                source,
            })?;
            let path = data_dir.join("vt-agent.db");
            Ok(Arc::new(
                SqliteStore::connect_for(&format!("sqlite://{}", path.display()), usage).await?,
            ))
        }
    }
}

/// The sealed columns: `(table, column, JSON)`; a JSON column holds a sealed JSON text, a text column
/// a sealed text ([`seal`]). Everything a person said or that was done for them; the ids, statuses,
/// times, masked cards and hashes beside them stay clear for lookups.
pub const SEALED: &[(&str, &str, bool)] = &[
    ("conversations", "state", true),
    ("conversations", "memory", true),
    ("conversations", "skill_window", true),
    ("conversations", "handoff", true),
    ("messages", "body", true),
    ("executions", "model_calls", true),
    ("executions", "events", true),
    ("flow_runs", "input", true),
    ("flow_runs", "output", true),
    ("flow_stages", "saida", true),
    ("task_runs", "plan", true),
    ("task_runs", "steps", true),
    ("task_runs", "final_result", false),
    ("conversation_context", "summary", false),
    ("conversation_context", "key_facts", true),
    ("outbox", "payload", true),
    ("idempotency_records", "response", true),
    ("batch_lines", "result", true),
    ("batch_jobs", "source", false),
    ("store_secrets", "value", false),
    ("cases", "reason", false),
    ("cases", "case_file", true),
    ("case_events", "detail", false),
    ("recharge_followups", "request", false),
];

/// Rows a [`KeepingStore::reseal`] batch handles in one transaction.
const RESEAL_BATCH: i64 = 500;

/// Names in `store_secrets`.
const SECRET_INDEX_KEY: &str = "chave_indice";
const SECRET_SEALED: &str = "selado";

/// Seals what an older version wrote in clear (once: the store remembers it did), then hands the
/// payment tokens' fingerprints and the blind indexes the store's index key — random, made at the
/// first start, kept sealed in the store: stable across key rotations, useless without the data key.
/// Returns the index key, which the key file keeps once this has run, so later starts need not ask
/// the store ([`use_index_key`]).
pub async fn prepare_sealing(store: &dyn Store) -> Result<[u8; 32], StoreError> {
    let secrets = store.store_secrets().await?;
    if !secrets.contains_key(SECRET_SEALED) {
        let sealed = store.reseal(&|_, _| {}).await?;
        if sealed > 0 {
            tracing::info!(values = sealed, "values written before sealing are now sealed");
        }
        store.put_store_secret(SECRET_SEALED, "1").await?;
    }
    let index = match secrets.get(SECRET_INDEX_KEY) {
        Some(k) => k.clone(),
        None => {
            let key = seal::DataKey::generate();
            store.put_store_secret(SECRET_INDEX_KEY, &key.to_base64()).await?
        }
    };
    let key = seal::decode_key(&index)
        .ok_or_else(|| StoreError::Invalid("the stored index key is damaged".into()))?;
    use_index_key(key);
    Ok(key)
}

/// Keys the payment tokens' fingerprints and the blind indexes with the store's index key.
pub(crate) fn use_index_key(key: [u8; 32]) {
    vt_actions::vt::secret::set_index_key(key);
}

/// Whose records: a data subject (by user id or card) or, for retention, everything older than a date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    User(String),
    /// A card's digits (the store looks it up by its blind index).
    Card(String),
    OlderThan(DateTime<Utc>),
}

/// The records a [`Subject`] has: conversations (with their messages, executions, context, tasks,
/// outbox items) and flow runs (with their stages).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Records {
    pub conversations: Vec<String>,
    pub flow_runs: Vec<String>,
}

impl Records {
    pub fn is_empty(&self) -> bool {
        self.conversations.is_empty() && self.flow_runs.is_empty()
    }
}

/// A blind-index row: the card's keyed hash, what holds it (`conversa`, `fluxo`), its id.
pub(crate) type CardRef = (String, &'static str, String);

/// The blind-index rows of the cards a conversation holds ([`vt_actions::tools::cartao::cards_held`]).
pub(crate) fn conversation_card_refs(c: &Conversation) -> Vec<CardRef> {
    vt_actions::tools::cartao::cards_held(&c.state, &c.memory)
        .into_iter()
        .map(|card| (seal::card_index(&card), "conversa", c.id.clone()))
        .collect()
}

/// The keyed hash of a flow run's card, kept on its row (`flow_runs.card_hash`) from its start.
pub(crate) fn flow_card_hash(input: &Value) -> Option<String> {
    let card = input.get("cartao").and_then(Value::as_str).unwrap_or_default();
    vt_actions::vt::card::card_numbers_in(card)
        .first()
        .map(|digits| seal::card_index(digits))
}

/// The blind-index rows a store wrote, once their transaction committed: a conversation holds the same
/// cards turn after turn, and its rows need writing once. Bounded; [`forget`] empties it.
#[derive(Debug, Default)]
pub(crate) struct Indexed(std::sync::Mutex<std::collections::HashSet<CardRef>>);

const INDEXED_AT_MOST: usize = 100_000;

impl Indexed {
    fn known(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<CardRef>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `refs` as written, once their transaction committed.
    pub(crate) fn committed(&self, refs: Vec<CardRef>) {
        let mut known = self.known();
        if known.len() + refs.len() > INDEXED_AT_MOST {
            known.clear();
        }
        known.extend(refs);
    }

    pub(crate) fn clear(&self) {
        self.known().clear();
    }

    /// Those of `refs` not known to be written, each once.
    pub(crate) fn unknown(&self, refs: &[CardRef]) -> Vec<CardRef> {
        let known = self.known();
        let mut new: Vec<CardRef> = refs.iter().filter(|r| !known.contains(*r)).cloned().collect();
        new.sort();
        new.dedup();
        new
    }
}

/// Writes the blind-index rows the store has not written yet (a card once indexed stays indexed);
/// returns them, for [`Indexed::committed`] once the transaction commits.
pub(crate) async fn insert_card_refs<DB>(
    conn: &mut DB::Connection,
    indexed: &Indexed,
    refs: &[CardRef],
) -> Result<Vec<CardRef>, StoreError>
where
    DB: sqlx::Database + sqlx::database::HasStatementCache,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> &'q String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'static str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    StoreError: From<sqlx::Error>,
{
    let new = indexed.unknown(refs);
    if !new.is_empty() {
        for chunk in new.chunks(ROWS_PER_INSERT) {
            let mut q = sqlx::QueryBuilder::<DB>::new("");
            card_ref_rows(&mut q, chunk);
            q.build().persistent(false).execute(&mut *conn).await?;
        }
    }
    Ok(new)
}

/// The blind-index rows `refs`, in one insert that skips those already there.
pub(crate) fn card_ref_rows<DB>(q: &mut sqlx::QueryBuilder<DB>, refs: &[CardRef])
where
    DB: sqlx::Database,
    for<'q> &'q String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'static str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    q.push("INSERT INTO card_refs (card_hash, kind, ref_id) ");
    q.push_values(refs, |mut b, (hash, kind, id)| {
        b.push_bind(hash).push_bind(*kind).push_bind(id);
    });
    q.push(" ON CONFLICT DO NOTHING");
}

/// `head` (ending in `IN (`) with `ids` bound as the list, closed.
fn in_list<DB>(head: &str, ids: &[String]) -> sqlx::QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let mut q = sqlx::QueryBuilder::<DB>::new(head);
    let mut list = q.separated(", ");
    for id in ids {
        list.push_bind(id.clone());
    }
    // Every parenthesis the head opened (a subquery's too) is closed.
    q.push(")".repeat(head.matches('(').count() - head.matches(')').count()));
    q
}

/// The flow runs the executions of `conversations` ran (their own, and the sub-runs of their tools).
pub(crate) async fn flow_runs_of<DB>(
    conn: &mut DB::Connection,
    conversations: &[String],
) -> Result<Vec<String>, StoreError>
where
    DB: sqlx::Database + sqlx::database::HasStatementCache,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Decode<'q, DB> + sqlx::Type<DB>,
    (String,): for<'r> sqlx::FromRow<'r, DB::Row>,
    usize: sqlx::ColumnIndex<DB::Row>,
    StoreError: From<sqlx::Error>,
{
    let mut runs = Vec::new();
    for chunk in conversations.chunks(ROWS_PER_INSERT) {
        // A run a kill interrupted has no execution: its row names its conversation.
        for head in [
            "SELECT f.execucao_id FROM flow_runs f JOIN executions e
               ON f.execucao_id = e.execucao_id OR f.parent_execucao_id = e.execucao_id
             WHERE e.conversation_id IN (",
            "SELECT execucao_id FROM flow_runs WHERE conversation_id IN (",
        ] {
            let ids: Vec<String> = in_list::<DB>(head, chunk)
                .build_query_scalar()
                .fetch_all(&mut *conn)
                .await?;
            runs.extend(ids);
        }
    }
    Ok(runs)
}

/// Deletes `records` with everything that hangs on them, in the caller's transaction. The usage
/// figures and the recharge attempts (masked card, value, key, outcome: the trail of money movements)
/// stay, no longer tied to the conversation or its user.
pub(crate) async fn forget<DB>(
    conn: &mut DB::Connection,
    indexed: &Indexed,
    records: &Records,
) -> Result<(), StoreError>
where
    DB: sqlx::Database + sqlx::database::HasStatementCache,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    StoreError: From<sqlx::Error>,
{
    const OF_FLOWS: &[&str] = &[
        "DELETE FROM flow_stages WHERE execucao_id IN (",
        "DELETE FROM flow_runs WHERE execucao_id IN (",
        "DELETE FROM card_refs WHERE ref_id IN (",
        "UPDATE recharge_attempts SET scope = 'apagado', origin = 'apagada' WHERE execucao_id IN (",
    ];
    const OF_CONVERSATIONS: &[&str] = &[
        "DELETE FROM messages WHERE conversation_id IN (",
        "DELETE FROM executions WHERE conversation_id IN (",
        "DELETE FROM conversation_context WHERE conversation_id IN (",
        "DELETE FROM task_runs WHERE conversation_id IN (",
        "DELETE FROM outbox WHERE conversation_id IN (",
        // The support board's items are keyed by their case (`caso:ID`, see `service::cases`).
        "DELETE FROM outbox WHERE conversation_id IN (SELECT 'caso:' || id FROM cases WHERE conversation_id IN (",
        // A WhatsApp user's last-message time and consent go with their conversation.
        "DELETE FROM whatsapp_contacts WHERE wa_id IN (SELECT user_id FROM conversations WHERE channel = 'whatsapp' AND id IN (",
        "DELETE FROM whatsapp_consent WHERE wa_id IN (SELECT user_id FROM conversations WHERE channel = 'whatsapp' AND id IN (",
        "DELETE FROM whatsapp_consent_events WHERE wa_id IN (SELECT user_id FROM conversations WHERE channel = 'whatsapp' AND id IN (",
        "DELETE FROM conversation_leases WHERE conversation_id IN (",
        "DELETE FROM case_events WHERE conversation_id IN (",
        "DELETE FROM cases WHERE conversation_id IN (",
        "DELETE FROM consumed_confirmations WHERE origin IN (",
        "DELETE FROM card_refs WHERE ref_id IN (",
        "UPDATE usage_metrics SET conversation_id = 'apagada' WHERE conversation_id IN (",
        "UPDATE recharge_attempts SET scope = 'apagado', origin = 'apagada' WHERE origin IN (",
        "DELETE FROM conversations WHERE id IN (",
    ];
    indexed.clear();
    for (ids, statements) in [
        (&records.flow_runs, OF_FLOWS),
        (&records.conversations, OF_CONVERSATIONS),
    ] {
        for chunk in ids.chunks(ROWS_PER_INSERT) {
            for head in statements {
                in_list::<DB>(head, chunk)
                    .build()
                    .persistent(false)
                    .execute(&mut *conn)
                    .await?;
            }
        }
    }
    Ok(())
}

/// Rows to one multi-row INSERT: well under SQLite's limit of 32,766 parameters (PostgreSQL's is 65,535).
pub(crate) const ROWS_PER_INSERT: usize = 500;

/// Flow runs to one PostgreSQL query of [`writes::Writes`]: with their stages (a dozen at most each)
/// well under PostgreSQL's 65,535 parameters for the whole statement (SQLite's limit is per statement:
/// a group's runs go in one query there).
pub(crate) const RUNS_PER_QUERY: usize = 40;

/// `head VALUES (…), (…) tail` for `rows`, [`ROWS_PER_INSERT`] to a statement, on either backend: every
/// statement is a round trip (to sqlx's SQLite worker thread, or over the network to PostgreSQL), and a
/// turn or a batch group writes many rows of a kind. Not kept in the statement cache (each row count
/// is another text).
pub(crate) async fn insert_rows<DB, T>(
    conn: &mut DB::Connection,
    head: &str,
    rows: &[T],
    tail: &str,
    mut bind: impl FnMut(&mut sqlx::query_builder::Separated<'_, DB, &'static str>, &T),
) -> Result<(), StoreError>
where
    DB: sqlx::Database + sqlx::database::HasStatementCache,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    StoreError: From<sqlx::Error>,
{
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let mut q = sqlx::QueryBuilder::<DB>::new(head);
        q.push_values(chunk, |mut b, row| bind(&mut b, row));
        q.push(tail);
        q.build().persistent(false).execute(&mut *conn).await?;
    }
    Ok(())
}

/// What the process opening the store will do with it, which decides how many connections it opens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Usage {
    /// Serve many at once (`serve`, `chat`, `batch`, tests): on SQLite a writer and a pool of readers.
    #[default]
    Service,
    /// One command that does one thing and exits: on SQLite one connection reads and writes.
    OneShot,
}

/// What writing a conversation's row does to a row that is already there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Existing {
    /// Replace its state (a turn's commit).
    Update,
    /// Leave it alone (accepting a message into a conversation that may already exist).
    Keep,
}

/// The role column of a message.
pub(crate) fn role(m: &ChatMessage) -> &'static str {
    match m {
        ChatMessage::User { .. } => "user",
        ChatMessage::Assistant { .. } => "assistant",
        ChatMessage::Tool { .. } => "tool",
        ChatMessage::HumanAgent { .. } => "human_agent",
    }
}

/// What the console's search reads of a message: its text with cards masked and secrets out (the
/// body itself is sealed).
/// What people read is searched — the user's words and the assistant's answers; a tool's traffic is
/// not (empty), which also keeps a flow's stage-by-stage messages from being written twice.
pub(crate) fn search_text(message: &ChatMessage) -> String {
    let text = match message {
        ChatMessage::User { content } | ChatMessage::HumanAgent { content, .. } => content.as_str(),
        ChatMessage::Assistant {
            content: Some(content),
            ..
        } => content.as_str(),
        ChatMessage::Assistant { content: None, .. } | ChatMessage::Tool { .. } => return String::new(),
    };
    vt_actions::redact::secrets(&vt_actions::vt::card::mask_cards_in(text)).into_owned()
}
