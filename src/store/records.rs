//! What the store keeps and hands back: its records, their statuses and its error.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use vt_actions::journal::{AttemptStatus, RechargeAttempt};

use crate::engine::{Conversation, ExecutionRecord, TurnEvent};
use crate::llm::ChatMessage;

use super::*;

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

/// Where a case stands ([`CaseStore`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseState {
    /// Opened, waiting for someone to claim it.
    #[default]
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
            .ok_or_else(|| StoreError::Invalid(format!("estado de atendimento desconhecido: {text:?}")))
    }

    /// A person has the conversation (or is about to): the bot stays silent.
    pub(crate) fn is_open(self) -> bool {
        matches!(self, Self::Aguardando | Self::EmAtendimento)
    }
}

/// A case to open for a conversation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewCase {
    pub id: String,
    pub conversation_id: String,
    pub tenant_id: String,
    pub channel: String,
    pub reason: String,
    /// Built by code when the case opens: what a support agent needs to pick the conversation up.
    pub case_file: Value,
    /// `AAAAMMDD-NNNNNN`, taken before the case is written ([`CaseStore::next_protocol`]).
    pub protocol: String,
    /// The team whose queue it joins.
    pub team: String,
    pub motivo: vt_actions::HandoffReason,
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
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
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
    /// Said to the card holder at opening (cases opened before protocols have none).
    pub protocol: Option<String>,
    /// The team whose queue it is in.
    pub team: String,
    pub motivo: vt_actions::HandoffReason,
    /// The agent it is offered to, until `offer_due_at`.
    pub offered_to: Option<String>,
    pub offer_due_at: Option<DateTime<Utc>>,
    /// The last SLA warning sent (clock and cycle).
    pub sla_warned: Option<String>,
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
            .ok_or_else(|| StoreError::Invalid(format!("status de linha de lote desconhecido: {text:?}")))
    }
}

/// An attempt's status as a row holds it.
pub(crate) fn attempt_status(text: &str) -> Result<AttemptStatus, StoreError> {
    AttemptStatus::parse(text)
        .ok_or_else(|| StoreError::Invalid(format!("status de tentativa de recarga desconhecido: {text:?}")))
}

/// Whether an attempt put on record has been sent.
#[derive(Clone, Copy)]
pub(crate) enum Sent {
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

impl PixCharge {
    /// The payment codes this charge put in its conversation — the txid, the copia-e-cola (a card
    /// checkout's link), the payment's id and a refund's — which the person the conversation belongs
    /// to is shown whole ([`vt_actions::vt::card::mask_cards_except`]).
    pub fn codes(&self) -> Vec<String> {
        let mut codes = vec![self.txid.clone(), self.copia_e_cola.clone()];
        codes.extend(self.end_to_end_id.clone());
        codes.extend(self.refund.as_ref().map(|r| r.end_to_end_id.clone()));
        codes
    }
}

/// How a charge is paid ([`PixCharge::meio`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChargeMeans {
    /// A Pix code (the API Pix).
    Pix,
    /// A card, on the card provider's hosted checkout.
    CartaoCredito,
}

impl ChargeMeans {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pix => "pix",
            Self::CartaoCredito => "cartao_credito",
        }
    }

    pub(crate) fn from_row(s: &str) -> Result<Self, StoreError> {
        match s {
            "pix" => Ok(Self::Pix),
            "cartao_credito" => Ok(Self::CartaoCredito),
            _ => Err(StoreError::Invalid(format!("meio de cobrança desconhecido: {s}"))),
        }
    }
}

/// Where a Pix charge stands ([`PixStore`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChargeStatus {
    /// Issued, waiting to be paid.
    Ativa,
    /// Paid (its payment claimed): the recharge is on its way.
    Paga,
    /// Paid and credited: the receipt was sent.
    Creditada,
    /// Paid and sent; the recharge system has not said yet: its late outcome is followed up as any
    /// recharge's is (`[recargas]`).
    Enviada,
    /// Paid, not credited (the recharge system refused it): the money goes back.
    Devolvida,
    /// Expired unpaid and withdrawn at the provider.
    Expirada,
}

impl ChargeStatus {
    pub const ALL: [Self; 6] = [
        Self::Ativa,
        Self::Paga,
        Self::Creditada,
        Self::Enviada,
        Self::Devolvida,
        Self::Expirada,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ativa => "ativa",
            Self::Paga => "paga",
            Self::Creditada => "creditada",
            Self::Enviada => "enviada",
            Self::Devolvida => "devolvida",
            Self::Expirada => "expirada",
        }
    }

    /// A status as a row holds it.
    pub fn from_row(text: &str) -> Result<Self, StoreError> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| StoreError::Invalid(format!("status de cobrança Pix desconhecido: {text:?}")))
    }
}

/// A charge issued at the payment provider for a confirmed chat recharge: the code the card holder
/// pays, and the recharge to send once they have.
#[derive(Debug, Clone, PartialEq)]
pub struct PixCharge {
    /// The provider's charge id: a Pix charge's derived from the recharge's key and `n`
    /// ([`vt_actions::pix::txid`]); a card checkout's the provider's own (`cs_…`).
    pub txid: String,
    /// How it is paid: a Pix code, or a card on the provider's checkout page.
    pub meio: ChargeMeans,
    /// The recharge it pays (its idempotency key): every code of one recharge shares it.
    pub recharge_key: String,
    /// Which of the recharge's codes this is (0, then one more per "novo código").
    pub n: i64,
    pub conversation_id: String,
    /// The recharge to send once paid (card, amount, tenant…), sealed.
    pub request: Value,
    pub amount: rust_decimal::Decimal,
    /// The BR Code the card holder copies (checked before it was stored); a card checkout's link.
    pub copia_e_cola: String,
    pub status: ChargeStatus,
    pub expires_at: DateTime<Utc>,
    /// The payment that paid it (its Banco Central id; the card provider's payment id), once claimed.
    pub end_to_end_id: Option<String>,
    pub paid_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// The payment it returned, when one was ([`PixStore::record_refund`]).
    pub refund: Option<PixRefund>,
    /// The flow run that sent its recharge once paid ([`PixStore::note_credit_run`]).
    pub execucao_id: Option<String>,
}

/// The provider's status of a refund it has not settled yet: read back until it has.
pub const REFUND_IN_PROGRESS: &str = "EM_PROCESSAMENTO";

/// A payment a charge returned to its payer, and the provider's word on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PixRefund {
    /// The payment returned: the charge's own, or a second code's for a recharge paid already.
    pub end_to_end_id: String,
    /// `EM_PROCESSAMENTO` (read back until final), `DEVOLVIDO` or `NAO_REALIZADO`.
    pub status: String,
}

/// What claiming a payment found ([`PixStore::claim_payment`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaymentClaim {
    /// This call claimed it: its recharge is to be sent, by this caller alone.
    First,
    /// The same payment was claimed before (a second webhook, a follow-up, another process).
    Again,
    /// Another code of the same recharge was paid and claimed first: this payment goes back.
    OtherCodePaid,
    /// The charge was claimed by another payment (a provider that reports two for one charge).
    OtherPayment,
    /// No such charge on record.
    Unknown,
}

/// How a stretch of a conversation ended (issue "Step 22"), computed by code when it went quiet or
/// ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Desfecho {
    /// A balance read or a recharge credited, and no case.
    ResolvidaPeloBot,
    /// A case closed or handed back.
    ResolvidaPorPessoa,
    /// A question of ours left unanswered, a recharge never confirmed or never paid.
    Abandonada,
    /// None of the above.
    SemObjetivo,
}

impl Desfecho {
    pub const ALL: [Self; 4] = [
        Self::ResolvidaPeloBot,
        Self::ResolvidaPorPessoa,
        Self::Abandonada,
        Self::SemObjetivo,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ResolvidaPeloBot => "resolvida_pelo_bot",
            Self::ResolvidaPorPessoa => "resolvida_por_pessoa",
            Self::Abandonada => "abandonada",
            Self::SemObjetivo => "sem_objetivo",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == s)
    }

    /// Resolved, by the bot or by a person.
    pub fn resolved(self) -> bool {
        matches!(self, Self::ResolvidaPeloBot | Self::ResolvidaPorPessoa)
    }
}

/// A stretch's outcome on record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeRecord {
    pub id: String,
    pub conversation_id: String,
    pub tenant_id: String,
    pub channel: String,
    /// The previous outcome's end (`None`: the conversation's start).
    pub desde: Option<DateTime<Utc>>,
    /// The conversation's last activity in the stretch.
    pub ate: DateTime<Utc>,
    pub desfecho: Desfecho,
    /// The stretch's main intent.
    pub intencao: String,
    /// What the person came for: a return on the same subject within 7 days reopens the stretch.
    pub assunto: String,
    pub caso_id: Option<String>,
    /// Its turns and paid messages, in millionths of a real; `None`: a price was missing.
    pub custo_micro_brl: Option<i64>,
    /// The same person came back on the same subject within 7 days.
    pub reaberta: bool,
    /// The earlier outcome this one reopened.
    pub reabre: Option<String>,
    /// When the satisfaction question went.
    pub pesquisa_em: Option<DateTime<Utc>>,
    /// The 1–5 answer.
    pub nota: Option<i32>,
    pub created_at: DateTime<Utc>,
}

/// A conversation whose stretch may be over: quiet since `ate`, or ended then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StretchHead {
    pub conversation_id: String,
    pub tenant_id: String,
    pub channel: String,
    pub user_id: String,
    pub desde: Option<DateTime<Utc>>,
    pub ate: DateTime<Utc>,
}

/// One turn of a stretch, as its usage row keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StretchTurn {
    pub intent_key: String,
    /// What the turn achieved (`saldo`, `creditada`, …; see `service::outcomes`).
    pub marcas: Vec<String>,
    pub custo_micro_brl: Option<i64>,
    pub at: DateTime<Utc>,
}

/// What happened in a stretch, read for its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stretch {
    pub turns: Vec<StretchTurn>,
    /// The case opened in it, with its state.
    pub case: Option<(String, CaseState)>,
    /// Its Pix charges' statuses (`ativa`, `paga`, `creditada`…).
    pub pix: Vec<String>,
    /// Its paid messages' costs (`None`: unknown).
    pub paid_messages: Vec<Option<i64>>,
}

/// When an automatic recharge happens ([`Recurrence`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecurrenceKind {
    /// When the balance is below this, read once a day.
    Limite(rust_decimal::Decimal),
    /// On this day of the month (its last day in a month without it).
    Dia(u32),
}

/// Where a recurrence stands: the provider's status, or `falhou` (never created there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecurrenceStatus {
    /// Created at the provider, waiting for the card holder's authorisation in their bank.
    Criada,
    /// Authorised (read back from the provider): it charges.
    Aprovada,
    Rejeitada,
    Expirada,
    /// Cancelled by the card holder (in the chat or in their bank) or replaced by a new one.
    Cancelada,
    /// The provider did not create it (nothing to authorise).
    Falhou,
}

impl RecurrenceStatus {
    pub const ALL: [Self; 6] = [
        Self::Criada,
        Self::Aprovada,
        Self::Rejeitada,
        Self::Expirada,
        Self::Cancelada,
        Self::Falhou,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Criada => "criada",
            Self::Aprovada => "aprovada",
            Self::Rejeitada => "rejeitada",
            Self::Expirada => "expirada",
            Self::Cancelada => "cancelada",
            Self::Falhou => "falhou",
        }
    }

    pub fn from_row(text: &str) -> Result<Self, StoreError> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| StoreError::Invalid(format!("status de recorrência desconhecido: {text:?}")))
    }

    /// Whether it may still charge (or will, once authorised).
    pub fn live(self) -> bool {
        matches!(self, Self::Criada | Self::Aprovada)
    }
}

/// A card holder's automatic recharge: a Pix Automático recurrence and its terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Recurrence {
    /// Ours: the contract the provider's recurrence carries (`vinculo.contrato`).
    pub id: String,
    /// The provider's `idRec`, once created.
    pub id_rec: Option<String>,
    pub tenant_id: String,
    /// Where it was asked for: its notices and receipts are said there.
    pub conversation_id: String,
    pub user_id: String,
    /// The card's blind index: one charge per cycle and card.
    pub card_index: String,
    pub card_masked: String,
    /// The recharge to send each time (card, tenant, policy), sealed at rest.
    pub request: Value,
    pub kind: RecurrenceKind,
    pub amount: rust_decimal::Decimal,
    /// `MENSAL`, `SEMANAL`… (the provider's).
    pub periodicidade: String,
    pub status: RecurrenceStatus,
    /// The BR Code that authorises it, while it waits.
    pub copia_e_cola: Option<String>,
    /// The local day a threshold's balance was last read.
    pub checked_on: Option<String>,
    /// The last thing that happened, as the operator reads it.
    pub last_outcome: Option<String>,
    pub created_at: DateTime<Utc>,
    pub approved_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
}

impl Recurrence {
    /// Its terms, as the tools and the card holder read them.
    pub fn termos(&self) -> vt_actions::tools::Termos {
        let gatilho = match self.kind {
            RecurrenceKind::Limite(l) => vt_actions::tools::Gatilho::Limite(l),
            RecurrenceKind::Dia(d) => vt_actions::tools::Gatilho::Dia(d),
        };
        vt_actions::tools::Termos {
            gatilho,
            valor: self.amount,
        }
    }
}

/// A recurrence as the operator lists it ([`RecurrenceStore::recurrence_listing`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RecurrenceListed {
    pub recurrence: Recurrence,
    /// `YYYY-MM-DD` of the next debit, when one is scheduled.
    pub next_debit: Option<String>,
    /// How many of its charges were credited.
    pub credited: i64,
}

/// Where a recurring charge stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecurringChargeStatus {
    /// On record, not yet created at the provider (or its answer not yet seen).
    Nova,
    /// Created at the provider: debited on its date (the card holder told the date).
    Agendada,
    /// Debited (its payment claimed): the recharge is on its way.
    Paga,
    /// Debited and credited: the receipt was sent.
    Creditada,
    /// Debited and sent; the recharge system has not said yet.
    Enviada,
    /// Debited, not credited: the money went back.
    Devolvida,
    /// Not debited: the attempts failed, or the provider refused it.
    Falhou,
    /// Cancelled before its date (with its recurrence).
    Cancelada,
}

impl RecurringChargeStatus {
    pub const ALL: [Self; 8] = [
        Self::Nova,
        Self::Agendada,
        Self::Paga,
        Self::Creditada,
        Self::Enviada,
        Self::Devolvida,
        Self::Falhou,
        Self::Cancelada,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Nova => "nova",
            Self::Agendada => "agendada",
            Self::Paga => "paga",
            Self::Creditada => "creditada",
            Self::Enviada => "enviada",
            Self::Devolvida => "devolvida",
            Self::Falhou => "falhou",
            Self::Cancelada => "cancelada",
        }
    }

    pub fn from_row(text: &str) -> Result<Self, StoreError> {
        Self::ALL.into_iter().find(|s| s.as_str() == text).ok_or_else(|| {
            StoreError::Invalid(format!("status de cobrança recorrente desconhecido: {text:?}"))
        })
    }
}

/// One cycle's charge of a recurrence.
#[derive(Debug, Clone, PartialEq)]
pub struct RecurringCharge {
    /// From the recurrence and the cycle ([`vt_actions::pix::automatico::txid_ciclo`]).
    pub txid: String,
    pub recurrence_id: String,
    pub tenant_id: String,
    pub card_index: String,
    /// `2026-12` (monthly), `2026-W49` (weekly)…
    pub cycle: String,
    /// `YYYY-MM-DD`: when it is debited.
    pub due_on: String,
    pub amount: rust_decimal::Decimal,
    pub status: RecurringChargeStatus,
    /// Retries asked of the provider.
    pub retries: i64,
    /// Whether the card holder was told an attempt failed for funds (once).
    pub funds_told: bool,
    pub end_to_end_id: Option<String>,
    pub paid_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}
