//! The conversation service: the one path every inbound message takes, whatever channel brought it.
//! Each step is a named function a reader (and a trace span) can point at:
//!
//! 1. **accept** ([`accept`]) — the channel's message id is checked for a redelivery and the message is
//!    stored *before* anything acts on it (the conversation's row too, when it is new);
//! 2. **route** ([`route`]) — the router (zero tokens, or a micro call) decides how the turn starts;
//! 3. **run** — [`Engine::run_turn`];
//! 4. **commit** ([`commit`]) — one transaction: conversation, messages, execution, events, usage,
//!    compressed context, the flow runs the turn's tools started, and one outbox item per reply;
//! 5. **deliver** — replies to the terminal and HTTP go back in the answer itself (their outbox items
//!    are written as delivered); channels that send on their own are served by the outbox worker
//!    ([`crate::outbox`]).
//!
//! Turns of one conversation run one at a time, under the store's turn lock, in the order their
//! messages were stored. [`Messages::handle`] (terminal, HTTP) holds the lock from accept
//! to commit. Webhooks must acknowledge fast, so [`Messages::receive`] accepts outside the
//! lock and a task per message calls [`Messages::process`]; those tasks may take the lock
//! in any order, so the holder first processes the conversation's earlier unprocessed messages (by
//! stored id), then its own ([`inbox`] carries the channel's details and outcomes between tasks).
#![warn(clippy::too_many_lines)] // on the main path: see clippy.toml

mod accept;
pub(crate) mod budgets;
mod bursts;
pub(crate) mod audit;
mod channel;
pub(crate) use channel::ChannelBook;
pub use channel::ChannelRules;
pub(crate) mod board;
pub(crate) mod cases;
pub(crate) mod proposal;
mod consent;
mod figures;
pub(crate) mod followups;
mod hearing;
pub(crate) mod hours;
pub(crate) mod calendar;
pub(crate) mod teams;
pub(crate) mod sla;
mod assignment;
pub(crate) mod automatico;
pub(crate) mod queue;
pub(crate) mod replies;
pub(crate) mod review;
pub(crate) mod suggestions;
mod offers;
mod outcomes;
pub(crate) use automatico::port as automatic_port;
pub(crate) use board::state_line;
pub(crate) use board::{BOARD, BoardKind};
pub(crate) use budgets::Orcamento;
pub(crate) use budgets::problem as budget_problem;
pub(crate) use calendar::Calendar;
pub(crate) use cases::{CaseError, HandoffConfig, RESOLUTIONS, SupportAgent};
pub(crate) use consent::OptIn;
pub(crate) use consent::QuietHours;
pub(crate) use figures::CaseFigures;
pub(crate) use figures::percentile;
pub(crate) use hearing::{Hearing, MediaError, MediaSource, VOICE_MARK};
pub(crate) use hours::Hours;
pub(crate) use outcomes::ResultadosConfig;
pub(crate) use outcomes::late_choices;
pub(crate) use proposal::Proposal;
pub(crate) use queue::{QueueEntry, Report, ReportLine};
pub(crate) use review::{ReviewSettings, RevisaoConfig};
pub(crate) use sla::{Clocks, SlaStatus};
pub(crate) use teams::{Desk, Equipe, SlaPolicy, Team, teams_problem};
mod commit;
pub(crate) mod complaints;
pub(crate) mod jobs;
pub(crate) use jobs::{Cases, Contacts, Flows, FollowUps, Messages, Spending};
mod speaker;
pub(crate) mod payments;
pub(crate) use payments::{CardSetup, PixSetup, card_port, pix_port};
mod question;
mod inbox;
mod route;
mod messages;
mod flows;

use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use tracing::Instrument as _;

use crate::flow::{FlowError, FlowMode, FlowOutput, FlowRequest, PreparedFlow, flow_output};
use crate::router::Router;
use vt_engine::llm::ChatMessage;
use vt_engine::telemetry::spans::{self, Scope};
use vt_engine::{
    CompressedContext, Conversation, DEFAULT_TENANT, Engine, EngineError, ExecutionRecord, ExecutionStatus,
    OLD_CONTEXT_MEMORY_KEY, Participant, Reply, RetryPolicy, TurnInput, TurnOutcome,
};
use vt_store::{FlowRunRecord, StoreError, TurnReads, TurnRecord, UnprocessedMessage, UsageRecord};

use commit::Ran;
pub(crate) use route::Routing;

/// Longer messages are answered with a clear refusal instead of being processed.
pub(crate) const MAX_MESSAGE_CHARS: usize = 4_000;

/// How a channel gets its replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Delivery {
    /// In the answer to the request itself (terminal, HTTP): the outbox item is written as delivered.
    #[default]
    Inline,
    /// By the outbox worker, through the channel's sender (Mattermost, WhatsApp).
    Outbox,
}

/// An inbound message, already free of any channel's wire format.
#[derive(Debug, Clone, Default)]
pub struct Inbound {
    pub agent_id: String,
    /// `None` starts a new conversation; an unknown id starts one with that id.
    pub conversation_id: Option<String>,
    /// The tenant a new conversation belongs to (an API key's); the terminal's is `default`.
    pub tenant_id: Option<String>,
    pub user: Participant,
    pub text: String,
    /// The channel's own id of this message: a redelivery with the same id is not processed twice.
    pub channel_message_id: Option<String>,
    pub delivery: Delivery,
    /// A message of a kind the agent does not read (an image, a sticker…), named: it is stored as
    /// such and answered politely, never processed.
    pub unsupported: Option<String>,
    /// A media message's handle at its channel (a voice note, a photo): heard or read under the turn
    /// lock, before its turn ([`hearing`]). Without a way to, it is answered as `unsupported` is.
    pub media: Option<vt_store::Media>,
    /// This message stands for a burst ([`bursts`]): the first stored message of it, which the turn
    /// answers too (and marks processed in its commit).
    pub joined_from: Option<i64>,
    /// Where the channel should put the replies (a thread's root), if anywhere in particular.
    pub thread: Option<String>,
    /// A tap on one of our confirm / cancel buttons (`text` is then left to the service): the
    /// service reads, with the conversation it reads for the turn, whether the recharge it names is
    /// the one waiting for this user, and makes it "sim" / "não" — a confirm tap also names that
    /// request as the question answered, even when other answers of ours came after it.
    pub tap: Option<Tap>,
    /// A pick from a list of cards we offered (WhatsApp's list message): the offered card's index.
    /// The service makes it the card itself, written out, while the offer is still the
    /// conversation's ([`offers`]); otherwise words saying the list is gone.
    pub pick: Option<usize>,
    /// When the person wrote, for a channel that keeps each contact's last message (WhatsApp's
    /// 24-hour window): written with the message, in accept's transaction.
    pub contact_seen_at: Option<DateTime<Utc>>,
}

/// A tap on a recharge's confirm or cancel button.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tap {
    /// The recharge the button belongs to.
    pub recharge: String,
    pub confirm: bool,
    /// What a tap that names nothing waiting (an old, foreign or forged button) becomes.
    pub otherwise: NotWaiting,
}

/// What a channel makes of a tap on a button whose request is not the one waiting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotWaiting {
    /// Nothing is stored; the tap is refused ([`ServiceError::TapNotWaiting`]): the clicker alone is
    /// told (Mattermost).
    Refuse,
    /// The tap is a message of the chat, stored and answered as these words (WhatsApp, the web
    /// chat: [`NotWaiting::stale`]).
    Say(String),
}

impl NotWaiting {
    /// A tap on a button whose request no longer waits, said as what it is: the chat answers it, and
    /// it confirms nothing.
    pub(crate) fn stale() -> Self {
        Self::Say("(toque em um botão de um pedido que não está mais esperando confirmação)".into())
    }
}

/// How the router classified a turn, for the usage metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IntentTag {
    pub intent_key: String,
    pub action_type: String,
    pub keyword_matched: bool,
}

impl IntentTag {
    pub(crate) fn new(intent_key: &str, action_type: &str, keyword_matched: bool) -> Self {
        Self {
            intent_key: intent_key.into(),
            action_type: action_type.into(),
            keyword_matched,
        }
    }

    /// The usage record of a turn of `conv` with this classification: the conversation's tenant's.
    fn usage(
        &self,
        conv: &Conversation,
        tokens: (u64, u64),
        time_ms: u128,
        at: DateTime<Utc>,
    ) -> UsageRecord {
        UsageRecord {
            conversation_id: conv.id.clone(),
            intent_key: self.intent_key.clone(),
            action_type: self.action_type.clone(),
            tokens_input: tokens.0 as i64,
            tokens_output: tokens.1 as i64,
            execution_time_ms: time_ms as i64,
            was_keyword_matched: self.keyword_matched,
            created_at: at,
            audio_ms: 0,
            tokens_cached: 0,
            tenant_id: conv.tenant_id.clone(),
            custo_micro_brl: Some(0),
            marcas: String::new(),
        }
    }
}

/// A message [`Messages::receive`] stored, waiting for [`Messages::process`].
#[derive(Debug, Clone)]
pub struct Received {
    pub conversation_id: String,
    pub message_id: i64,
    /// The conversation the message opened, as written — the person's first message on this channel
    /// (a channel may greet them, [`Messages::greet`]); `None` for a conversation already there.
    pub opened: Option<Box<Conversation>>,
    /// The message as stored (a tap made the words it stands for).
    pub message: Inbound,
    /// Messages of the conversation that arrive within this time of each other are answered as one
    /// turn ([`bursts`]); zero: each alone.
    pub join_within: std::time::Duration,
}

/// How [`Flows::run_flow`] runs a flow.
#[derive(Debug, Clone, Copy, Default)]
pub struct FlowOptions<'a> {
    pub mode: FlowMode,
    /// The caller's tenant (an API key's); `None` for the operator's own commands.
    pub tenant: Option<&'a str>,
    pub recording: Recording,
}

/// Who puts a flow run on record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Recording {
    /// The service: on record as started before the first external call, completed at the end.
    #[default]
    Here,
    /// The caller, from [`FlowRan::record`] (a batch, many runs to a transaction).
    ByCaller,
}

/// A flow that ran.
#[derive(Debug, Clone)]
pub struct FlowRan {
    pub output: FlowOutput,
    /// Whether the service stored the run (`false` when its record could not be written, already
    /// logged, or when the caller records it).
    pub persisted: bool,
    /// The run's record, for a caller that records it ([`Recording::ByCaller`]).
    pub record: Option<FlowRunRecord>,
}

/// What the channel sends back.
#[derive(Debug, Clone, PartialEq)]
pub struct Handled {
    pub conversation_id: String,
    pub replies: Vec<Reply>,
    pub execucao_id: Option<String>,
    pub ended: bool,
    /// `false` when the turn ran but its record could not be written (already logged).
    pub persisted: bool,
    /// The router's intent, when the agent is routed.
    pub intent: Option<String>,
    /// Everything this turn cost, routing and summary included: `(input, output)`.
    pub tokens: (u64, u64),
    /// The channel delivered this message before: it was not processed again.
    pub duplicate: bool,
    /// The id of the recharge waiting for this user's confirmation after the turn, if any: channels
    /// offer "confirm / cancel" buttons for it.
    pub awaiting_confirmation: Option<String>,
    /// What the last reply offers to choose from (masked cards), in order: a channel that can shows
    /// a list whose pick comes back as its place ([`Inbound::pick`]).
    pub choices: Vec<String>,
}

impl Handled {
    /// A message that was handled before: nothing ran now.
    pub(crate) fn duplicate(conversation_id: String) -> Self {
        Self {
            conversation_id,
            replies: Vec::new(),
            execucao_id: None,
            ended: false,
            persisted: true,
            intent: None,
            tokens: (0, 0),
            duplicate: true,
            awaiting_confirmation: None,
            choices: Vec::new(),
        }
    }

    pub fn reply_text(&self) -> String {
        Reply::join(&self.replies)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The user's message could not be stored, so it was not processed: the user must be told.
    #[error("não foi possível registrar sua mensagem agora; nada foi feito. Tente de novo em instantes")]
    NotRecorded(#[source] StoreError),
    #[error(transparent)]
    Flow(#[from] FlowError),
    #[error("a conversa {id} pertence ao agente {agent}, não a {requested}")]
    AgentMismatch {
        id: String,
        agent: String,
        requested: String,
    },
    /// The conversation belongs to another tenant (said as "not found" by the HTTP layer).
    #[error("a conversa {0} não existe")]
    NotFound(String),
    /// A tap on a button whose request is not the one waiting for this user ([`NotWaiting::Refuse`]).
    #[error("este pedido já foi respondido ou não é seu: nada foi feito")]
    TapNotWaiting,
}

/// `[service]`: how the service writes what a turn did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceConfig {
    /// Tries of a turn's commit (the BPMN's persistence row: 3 tries, 5 s apart).
    pub persist_retry: RetryPolicy,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            persist_retry: RetryPolicy::new(3, 5_000),
        }
    }
}

/// Everything the service is set up with, filled once by `app` from the configuration (and by a test
/// with what it needs): one value, in place of a builder a setting.
#[derive(Default)]
pub struct ServicesConfig {
    /// `[service]`: how a turn's commit is retried.
    pub service: ServiceConfig,
    /// Routes the chat agent's messages before any model (zero tokens, or a micro call).
    pub router: Option<Router>,
    /// `[handoff]`: the rules for cases.
    pub handoff: HandoffConfig,
    /// `[recargas]`: how recharges whose outcome came late are followed up.
    pub recargas: vt_store::RecargasConfig,
    /// `[custos]`: the prices turns and paid messages are costed at.
    pub costs: crate::costs::CustosConfig,
    /// `[[orcamentos]]`: each tenant's model calls stop when its month's budget is spent.
    pub budgets: Vec<Orcamento>,
    /// `[resultados]`: when a stretch is over, and the satisfaction question.
    pub resultados: ResultadosConfig,
    /// The payment provider, when chat recharges are paid by Pix ([`Payments`](jobs::Payments)).
    pub pix: Option<payments::PixSetup>,
    /// The card provider, when chat recharges are paid by card on its hosted checkout.
    pub card: Option<payments::CardSetup>,
    /// Each channel's rules ([`ChannelRules`]), declared by the channels.
    pub channels: ChannelBook,
    /// `(channel, tenant)` whose late messages a worker pushes although the channel's people read
    /// replies in the conversation (a tenant's HTTP webhook).
    pub pushed: std::collections::HashSet<(String, String)>,
    /// Voice notes transcribed by this (`[transcricao]`; none: the text-only answer).
    pub transcriber: Option<vt_engine::llm::Transcriber>,
    /// Card photos read by this, of at most so many bytes each (`[fotos]`; none: the text-only
    /// answer).
    pub photos: Option<(Arc<dyn crate::ocr::PhotoReader>, u64)>,
    /// `[notificacoes] silencio`: notices the product sends on its own wait for the quiet hours' end.
    pub quiet: QuietHours,
    /// `[revisao]`: the review queue's tests folder and categories, the FAQ's suggestions.
    pub review: ReviewSettings,
}

pub struct Services {
    engine: Arc<Engine>,
    /// The store, one concern a handle: each job's view takes the concerns it uses.
    stores: vt_store::Stores,
    /// The turns run in tasks of their own (a webhook's, a timed-out request's): the server waits for
    /// them before it stops, so none is cut short or left detached.
    turns: tokio_util::task::TaskTracker,
    router: Option<Router>,
    inbox: inbox::Inbox,
    config: ServiceConfig,
    handoff: HandoffConfig,
    recargas: vt_store::RecargasConfig,
    /// The payment provider, when chat recharges are paid by Pix.
    pix: Option<payments::PixSetup>,
    /// The card provider, when chat recharges are paid by card on its hosted checkout.
    card: Option<payments::CardSetup>,
    /// How voice notes are heard (`[transcricao]`, each channel's media).
    hearing: hearing::Hearing,
    /// What a turn costs (`[custos]`).
    costs: crate::costs::CustosConfig,
    /// Each tenant's monthly budget (`[[orcamentos]]`) and what it spent.
    budgets: budgets::Budgets,
    /// When a conversation's stretch is over, and the satisfaction question (`[resultados]`).
    resultados: ResultadosConfig,
    /// What this process says in a conversation outside a turn, as it says it (a terminal prints it).
    said: tokio::sync::broadcast::Sender<Said>,
    /// `(channel, tenant)` whose late messages a worker pushes although the channel is read in the
    /// conversation (a tenant's HTTP webhook).
    pushed: std::collections::HashSet<(String, String)>,
    /// Each channel's rules (its window, native orders), declared by the channel.
    channels: ChannelBook,
    /// When notices the product sends on its own wait (`[notificacoes] silencio`).
    quiet: QuietHours,
    /// `[revisao]`.
    review: review::ReviewSettings,
    /// The review queue's last sweep in this process: the next reads only what came since.
    review_swept: std::sync::Mutex<Option<DateTime<Utc>>>,
}

/// Something said in a conversation outside a turn: a Pix receipt, a late recharge's outcome, a
/// person's reply to a case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Said {
    pub conversation_id: String,
    pub text: String,
}

impl Services {
    pub fn new(engine: Arc<Engine>, stores: impl Into<vt_store::Stores>, config: ServicesConfig) -> Self {
        let ServicesConfig {
            service,
            router,
            handoff,
            recargas,
            costs,
            budgets,
            resultados,
            pix,
            card,
            channels,
            pushed,
            transcriber,
            photos,
            quiet,
            review,
        } = config;
        let mut handoff = handoff;
        // The teams' calendars, in the policy's time zone; with no teams, `[handoff]`'s hours.
        handoff.desk = Desk::new(
            &handoff.equipes,
            handoff.hours.as_ref(),
            &handoff.feriados,
            policy_timezone(&engine),
        );
        Self {
            engine,
            stores: stores.into(),
            turns: tokio_util::task::TaskTracker::new(),
            router,
            inbox: inbox::Inbox::default(),
            config: service,
            handoff,
            recargas,
            pix,
            card,
            pushed,
            channels,
            hearing: hearing::Hearing::new(transcriber, photos),
            costs,
            budgets: budgets::Budgets::new(&budgets),
            resultados,
            said: tokio::sync::broadcast::channel(64).0,
            quiet,
            review,
            review_swept: std::sync::Mutex::new(None),
        }
    }

    /// What this process says from now on in conversations outside their turns (stored before it is
    /// told here). Reading channels (the terminal) print it; the others get it from their outbox.
    pub fn said(&self) -> tokio::sync::broadcast::Receiver<Said> {
        self.said.subscribe()
    }

    /// Every channel's rules.
    pub(crate) fn channels(&self) -> &ChannelBook {
        &self.channels
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Waits for every turn [`Messages::spawn`] started; none is started after.
    pub async fn stopped(&self) {
        self.turns.close();
        self.turns.wait().await;
    }

    /// The support desk: its teams with their calendars and SLA.
    pub(crate) fn desk(&self) -> &Desk {
        &self.handoff.desk
    }

    /// The time zone of the policy (`[vt.politicas] timezone`): what people read times in.
    pub(crate) fn policy_timezone(&self) -> vt_domain::vt::timezone::Timezone {
        policy_timezone(&self.engine)
    }

    /// How voice notes and photos are heard (`[transcricao]`, `[fotos]`, each channel's media).
    pub fn hearing(&self) -> &Hearing {
        &self.hearing
    }

    /// The store's concerns as narrow traits, for the composition to hand to what reads them.
    pub(crate) fn stores(&self) -> &vt_store::Stores {
        &self.stores
    }
}

/// Runs a message's turn as its own trace; the replies become the trace's output, an error its
/// status.
async fn traced(
    scope: &Scope<'_>,
    msg: &Inbound,
    turn: impl std::future::Future<Output = Result<Handled, ServiceError>>,
) -> Result<Handled, ServiceError> {
    let span = &spans::turn(scope, &msg.user.channel, &msg.text);
    let result = spans::in_trace(span, scope, turn).await;
    match &result {
        Ok(h) => spans::output(span, || {
            serde_json::json!(h.replies.iter().map(|r| r.text.as_str()).collect::<Vec<_>>())
        }),
        Err(e) => spans::failed(span, &e.to_string()),
    }
    result
}

/// A reply for messages that are not processed at all.
pub(super) fn refusal(msg: &Inbound) -> Option<String> {
    if msg.unsupported.is_some() || msg.media.is_some() {
        return Some(
            "Por enquanto eu só leio mensagens de texto. Como posso ajudar com o seu vale-transporte?".into(),
        );
    }
    let text = msg.text.as_str();
    let chars = text.chars().count();
    if text.trim().is_empty() {
        return Some("Não recebi nenhum texto. Como posso ajudar com o seu vale-transporte?".into());
    }
    // Channels decode bytes that are not UTF-8 into U+FFFD: acting on a message with unreadable
    // characters could read a card or an amount wrong.
    if text.contains(char::REPLACEMENT_CHARACTER) {
        return Some(
            "Não consegui ler parte da sua mensagem (caracteres inválidos). Pode escrever de novo?".into(),
        );
    }
    (chars > MAX_MESSAGE_CHARS).then(|| {
        format!(
            "Sua mensagem tem {chars} caracteres e o limite é {MAX_MESSAGE_CHARS}. Pode resumir o que precisa em uma mensagem mais curta?"
        )
    })
}

/// A message the store kept, as its channel would have handed it: what `recover` and the turn of a
/// later message process when the task that received it is gone.
fn inbound_of(conv: &Conversation, m: &UnprocessedMessage) -> Inbound {
    Inbound {
        agent_id: conv.agent_id.clone(),
        conversation_id: Some(conv.id.clone()),
        tenant_id: Some(conv.tenant_id.clone()),
        user: Participant {
            user_id: conv.user_id.clone(),
            user_login: conv.user_login.clone(),
            channel: conv.channel.clone(),
        },
        text: m.text.clone(),
        channel_message_id: Some(m.channel_message_id.clone()),
        delivery: Delivery::Outbox,
        media: m.media.clone(),
        ..Default::default()
    }
}

/// What the prompt carries of the older history.
fn compressed(c: &vt_store::ConversationContext) -> CompressedContext {
    CompressedContext {
        summary: c.summary.clone(),
        facts: c.key_facts.clone(),
    }
}

/// The tenant of a new conversation.
fn tenant_of(msg: &Inbound) -> String {
    msg.tenant_id.clone().unwrap_or_else(|| DEFAULT_TENANT.to_owned())
}

/// The time zone of the policy (`[vt.politicas] timezone`): what people read times in.
pub(crate) fn policy_timezone(engine: &Engine) -> vt_domain::vt::timezone::Timezone {
    engine
        .extensions()
        .get::<vt_domain::tools::VtSettings>()
        .map_or_else(vt_domain::vt::timezone::Timezone::sao_paulo, |s| {
            s.politicas.timezone.clone()
        })
}
