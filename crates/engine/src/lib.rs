//! `vt-engine`: the conversation engine — one turn of one conversation, from the user's text to the
//! replies — and what it runs on: the model providers ([`llm`]), logs and traces ([`telemetry`]) and
//! background passes ([`periodic`]). It knows the action contract (`vt-contract`) and the domain's
//! masking rules (`vt-domain`), never the store, the service or a channel.
//!
//! The engine builds the active skill's context, calls the model, runs the tools the model asks for
//! and follows what the actions answer (`ResponseToUser` ends the turn, `ResponseToAgent` loops,
//! `RedirectToSkill` switches skills). It holds no conversations and does no storage: the caller hands
//! it a [`Conversation`] and persists the [`TurnOutcome`] it gets back. Its only I/O is what the model
//! provider and the actions do.

#![cfg_attr(test, allow(clippy::disallowed_methods))] // tests convert JSON freely; see `vt_contract::json`

pub mod conversation;
pub mod llm;
pub mod periodic;
pub mod prompts;
pub mod retry;
pub mod skills;
pub mod telemetry;
mod turn;

pub use turn::{CompressedContext, TurnInput, TurnStart};

/// Where conversations stored before the compressed context became a turn input kept a copy of it in
/// memory; the service drops that copy when it loads one.
pub const OLD_CONTEXT_MEMORY_KEY: &str = "contexto";
pub use conversation::{
    Conversation, DEFAULT_TENANT, ExecutionRecord, ExecutionStatus, InnerRun, InnerRuns, Reply, TERMINAL,
    TurnEvent, TurnOutcome,
};
pub use prompts::Prompts;
pub use retry::RetryPolicy;
pub use skills::Catalog;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vt_contract::ActionRegistry;
use vt_contract::context::Extensions;

use crate::llm::LlmProvider;

/// Limits and retry policies of a turn. Defaults follow the BPMN error-handling table; tests shorten
/// the backoffs.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// Model calls allowed in one turn before the loop is cut with a polite message.
    pub max_model_calls: u32,
    /// Deterministic skill steps allowed in one turn (guards against a cycle of `next` links).
    pub max_deterministic_steps: u32,
    pub llm_retry: RetryPolicy,
    /// Applies only to actions that declare themselves retry-safe.
    pub tool_retry: RetryPolicy,
    /// Milliseconds one action may take before it is cut and reported to the model as failed.
    pub tool_timeout_ms: u64,
    /// Messages of the active skill's window sent to the model; older ones live in the compressed
    /// context.
    pub context_messages: usize,
    pub context_retry: RetryPolicy,
    /// The model calls of one turn, retries and their backoffs included, end by this deadline and the
    /// user gets an apology: a person waiting in a chat is not kept in silence for a background task's
    /// 30 s backoffs. Actions are never cut by it (a recharge being sent runs to its own timeout).
    pub turn_timeout_ms: u64,
    /// Runs a model's call again when this turn already ran the very same call (tool and arguments).
    /// Off by default: the model is told it has the result and its next request is text only (a small
    /// model otherwise asks again up to `max_model_calls`). On for tools whose answer changes from one
    /// call to the next — and for the peer benchmark's contract, whose fake model asks the same call
    /// three times (`examples/peer_bench.rs`).
    pub run_repeated_calls: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            max_model_calls: 10,
            max_deterministic_steps: 32,
            llm_retry: RetryPolicy::new(3, 30_000),
            tool_retry: RetryPolicy::new(2, 10_000),
            tool_timeout_ms: 60_000,
            context_messages: 12,
            context_retry: RetryPolicy::new(3, 60_000),
            turn_timeout_ms: 15_000,
            run_repeated_calls: false,
        }
    }
}

/// Where the engine's time comes from: the system clock, a fixed instant, or a clock a test (or a
/// transcript) moves by hand between turns.
#[derive(Debug, Clone)]
pub enum Clock {
    System,
    Fixed(DateTime<Utc>),
    Manual(ManualClock),
}

impl Clock {
    pub fn now(&self) -> DateTime<Utc> {
        match self {
            Self::System => Utc::now(),
            Self::Fixed(t) => *t,
            Self::Manual(m) => m.now(),
        }
    }
}

/// A clock set by hand; clones share the time.
#[derive(Debug, Clone)]
pub struct ManualClock(std::sync::Arc<std::sync::RwLock<DateTime<Utc>>>);

impl ManualClock {
    pub fn new(t: DateTime<Utc>) -> Self {
        Self(std::sync::Arc::new(std::sync::RwLock::new(t)))
    }

    pub fn now(&self) -> DateTime<Utc> {
        *self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn set(&self, t: DateTime<Utc>) {
        *self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner) = t;
    }
}

/// Where ids come from: random UUIDs, or a counter for reproducible tests.
#[derive(Debug)]
pub enum IdSource {
    Random,
    Seeded(AtomicU64),
}

impl IdSource {
    pub fn seeded(start: u64) -> Self {
        Self::Seeded(AtomicU64::new(start))
    }

    pub fn next(&self, prefix: &str) -> String {
        match self {
            Self::Random => format!("{prefix}_{}", uuid::Uuid::new_v4().simple()),
            Self::Seeded(n) => format!("{prefix}_{:04}", n.fetch_add(1, Ordering::Relaxed)),
        }
    }
}

/// Errors that stop a turn before it starts. Everything after the start ends in a reply instead.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("agente não encontrado: {0}")]
    UnknownAgent(String),
    #[error("skill {skill:?} não existe no agente {agent:?}")]
    UnknownSkill { agent: String, skill: String },
}

/// Who is talking, over which channel.
#[derive(Debug, Clone, Default)]
pub struct Participant {
    pub user_id: String,
    pub user_login: String,
    pub channel: String,
}

/// The engine: catalog, actions, an optional model and the turn's limits. Cheap to share behind `Arc`.
pub struct Engine {
    catalog: Catalog,
    prompts: Prompts,
    registry: ActionRegistry,
    llm: Option<Arc<dyn LlmProvider>>,
    config: EngineConfig,
    extensions: Extensions,
    clock: Clock,
    ids: IdSource,
    no_model_reply: String,
}

/// What a user is told when a skill needs a model and none is configured, unless the product sets its
/// own text ([`Engine::with_no_model_reply`]).
pub const NO_MODEL_REPLY: &str =
    "Não consigo responder a isso agora: este atendimento não tem um modelo de linguagem configurado.";

impl Engine {
    pub fn new(catalog: Catalog, prompts: Prompts, registry: ActionRegistry, config: EngineConfig) -> Self {
        Self {
            catalog,
            prompts,
            registry,
            llm: None,
            config,
            extensions: Extensions::default(),
            clock: Clock::System,
            ids: IdSource::Random,
            no_model_reply: NO_MODEL_REPLY.to_owned(),
        }
    }

    pub fn with_llm(mut self, llm: Option<Arc<dyn LlmProvider>>) -> Self {
        self.llm = llm;
        self
    }

    /// Services handed to every action through its context.
    pub fn with_extensions(mut self, extensions: Extensions) -> Self {
        self.extensions = extensions;
        self
    }

    /// A service the actions are handed, if the engine has one.
    pub fn extension<T: std::any::Any + Send + Sync>(&self) -> Option<&T> {
        self.extensions.get::<T>()
    }

    /// Adds one service for actions (used to hand actions a handle back to this engine).
    pub fn extensions_mut(&mut self) -> &mut Extensions {
        &mut self.extensions
    }

    /// The services actions are given.
    pub fn extensions(&self) -> &Extensions {
        &self.extensions
    }

    pub fn prompts(&self) -> &Prompts {
        &self.prompts
    }

    pub fn llm(&self) -> Option<&std::sync::Arc<dyn LlmProvider>> {
        self.llm.as_ref()
    }

    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The answer for turns that would need a model when none is configured (the product's help text).
    pub fn with_no_model_reply(mut self, text: impl Into<String>) -> Self {
        self.no_model_reply = text.into();
        self
    }

    pub fn with_ids(mut self, ids: IdSource) -> Self {
        self.ids = ids;
        self
    }

    pub fn has_model(&self) -> bool {
        self.llm.is_some()
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn registry(&self) -> &ActionRegistry {
        &self.registry
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Where the engine's time comes from (shared: a manual clock's clone moves with it).
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    pub fn next_id(&self, prefix: &str) -> String {
        self.ids.next(prefix)
    }

    /// A new conversation with `agent_id`, on its entry skill. Unknown agents are refused here, before
    /// anything is created.
    pub fn start_conversation(&self, agent_id: &str, who: Participant) -> Result<Conversation, EngineError> {
        let agent = self
            .catalog
            .agent(agent_id)
            .ok_or_else(|| EngineError::UnknownAgent(agent_id.to_owned()))?;
        Ok(Conversation::new(
            self.ids.next("conv"),
            agent_id,
            agent.entry().name.clone(),
            who,
        ))
    }
}
