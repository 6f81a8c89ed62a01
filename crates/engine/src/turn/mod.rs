//! The turn loop (BPMN `bpmn_ms_agente`): build context → call the model → `end_turn` answers,
//! `tool_use` runs tools → model again; deterministic skills run their action without a model.
#![warn(clippy::too_many_lines)] // on the main path: see clippy.toml

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::{Map, Value};
use vt_contract::context::Extensions;
use vt_contract::{ActionContext, ActionError, ActionResponse};
use vt_domain::vt::card::mask_cards_in;

use super::conversation::{
    Conversation, ExecutionRecord, ExecutionStatus, InnerRuns, ModelCallRecord, Reply, StageOutput,
    TurnEvent, TurnOutcome,
};
use super::retry::{RetryPolicy, retry};
use super::skills::{AgentDef, SkillDef};
use super::{Engine, EngineError};
use crate::llm::{ChatMessage, ToolCall};
use crate::telemetry::spans;
use tracing::Instrument as _;

mod dispatch;
mod guard;
use dispatch::{AfterCall, Arguments, panic_message};
mod request;

/// Told to the user when the model stays down after every retry.
pub(crate) const LLM_DOWN_REPLY: &str =
    "Desculpe, estou com uma instabilidade para responder agora. Por favor, tente de novo em alguns minutos.";
/// Told to the user when a turn hits the model-call bound.
pub(crate) const LOOP_BOUND_REPLY: &str =
    "Desculpe, não consegui concluir o seu pedido desta vez. Pode reformular ou tentar de novo?";
/// Told to the user when a step without a model cannot go on.
pub(crate) const STEP_FAILED_REPLY: &str =
    "Desculpe, não consegui concluir esta etapa agora. Tente novamente mais tarde.";
const EMPTY_ANSWER_REPLY: &str = "Desculpe, não consegui formular uma resposta. Pode repetir?";

enum Step {
    Continue,
    Done,
}

/// A conversation's state and memory as its actions see them, shared until an update.
type SharedMaps = (Arc<Map<String, Value>>, Arc<Map<String, Value>>);

fn shared_maps(conv: &Conversation) -> SharedMaps {
    (Arc::new(conv.state.clone()), Arc::new(conv.memory.clone()))
}

impl Engine {
    /// What an action may know about `conv` during a turn; `maps` is the turn's shared copy of its
    /// state and memory (`None`: copied here).
    pub fn action_context(
        &self,
        conv: &Conversation,
        skill: &str,
        user_message: &str,
        turn_id: &str,
        maps: Option<SharedMaps>,
    ) -> ActionContext {
        let mut ctx = ActionContext::new(&conv.agent_id, &conv.id, self.clock.now())
            .with_extensions(self.extensions.clone());
        ctx.user_id = conv.user_id.clone();
        ctx.user_login = conv.user_login.clone();
        ctx.channel = conv.channel.clone();
        ctx.skill = skill.to_owned();
        ctx.user_message = user_message.to_owned();
        ctx.turn_id = turn_id.to_owned();
        let (state, memory) = maps.unwrap_or_else(|| shared_maps(conv));
        ctx.state = state;
        ctx.memory = memory;
        ctx
    }

    /// Calls one action with the engine's safety net: retries only for retry-safe actions, a timeout,
    /// and a panic turned into an error.
    pub async fn invoke(
        &self,
        action: &std::sync::Arc<dyn vt_contract::DynAction>,
        ctx: &ActionContext,
        name: &str,
        args: Value,
    ) -> Result<ActionResponse, ActionError> {
        let policy = if action.retry_safe() {
            self.config.tool_retry
        } else {
            RetryPolicy::new(1, 0)
        };
        let timeout = Duration::from_millis(self.config.tool_timeout_ms);
        let retried = retry(
            policy,
            ActionError::is_retryable,
            |_| None,
            |_| {
                let call = AssertUnwindSafe(action.call_json(ctx, args.clone())).catch_unwind();
                async move {
                    match tokio::time::timeout(timeout, call).await {
                        Err(_) => Err(ActionError::failed(
                            format!("a ferramenta {name} não respondeu a tempo"),
                            format!("action {name} timed out after {} ms", timeout.as_millis()),
                        )),
                        Ok(Err(panic)) => Err(ActionError::failed(
                            format!("a ferramenta {name} falhou"),
                            format!("action {name} panicked: {}", panic_message(&panic)),
                        )),
                        Ok(Ok(result)) => result,
                    }
                }
            },
        )
        .await;
        if let Err(e) = &retried.result {
            tracing::warn!(action = name, error = %mask_cards_in(&e.operator_message()), "action failed");
        }
        retried.result
    }

    /// Calls an action of `conv`'s active skill outside a turn (the planner's deterministic steps).
    /// Its state and memory updates are not applied: the caller decides what to keep.
    pub async fn call_action(
        &self,
        conv: &Conversation,
        name: &str,
        args: Value,
        user_message: &str,
    ) -> Result<ActionResponse, ActionError> {
        let exposed = self
            .catalog
            .agent(&conv.agent_id)
            .and_then(|a| a.skill(&conv.active_skill))
            .is_some_and(|s| s.actions.iter().any(|a| a == name));
        let action = exposed
            .then(|| self.registry.get(name))
            .flatten()
            .ok_or_else(|| {
                ActionError::failed(
                    format!("ferramenta desconhecida: {name}"),
                    format!("{name} is not exposed by {}", conv.active_skill),
                )
            })?;
        let ctx = self.action_context(
            conv,
            &conv.active_skill,
            user_message,
            &self.ids.next("plan"),
            None,
        );
        self.invoke(action, &ctx, name, args).await
    }

    /// Runs one turn of `conv`: the user's text, started as `input` says. The conversation is changed
    /// in place (active skill, window, state, memory); the outcome says what to store and what to send.
    /// The turn's `run` span holds its model calls and actions.
    pub async fn run_turn<'a>(
        &self,
        conv: &mut Conversation,
        input: impl Into<TurnInput<'a>>,
    ) -> Result<TurnOutcome, EngineError> {
        let input = input.into();
        let execucao_id = input.execucao_id.clone().unwrap_or_else(|| self.ids.next("exec"));
        let span = spans::step("run");
        let outcome = self
            .run_turn_traced(conv, input, execucao_id)
            .instrument(span.clone())
            .await;
        run_span_status(&span, &outcome);
        outcome
    }

    async fn run_turn_traced(
        &self,
        conv: &mut Conversation,
        input: TurnInput<'_>,
        execucao_id: String,
    ) -> Result<TurnOutcome, EngineError> {
        let agent = self.agent_for(conv)?;
        let started_at = self.clock.now();
        conv.window.push(input.opening_message());
        let mut turn = Turn::new(self, agent, conv, &input, execucao_id);
        turn.run(input.start).await;
        Ok(turn.finish(started_at))
    }

    /// The conversation's agent, with the conversation set to start over from its entry skill when
    /// the active skill is deterministic (those never hold a conversation between turns).
    fn agent_for(&self, conv: &mut Conversation) -> Result<&AgentDef, EngineError> {
        let agent = self
            .catalog
            .agent(&conv.agent_id)
            .ok_or_else(|| EngineError::UnknownAgent(conv.agent_id.clone()))?;
        let active = agent
            .skill(&conv.active_skill)
            .ok_or_else(|| EngineError::UnknownSkill {
                agent: agent.id.clone(),
                skill: conv.active_skill.clone(),
            })?;
        if active.deterministic {
            conv.active_skill = agent.entry().name.clone();
            conv.handoff = None;
            conv.window.clear();
        }
        Ok(agent)
    }
}

/// What a turn runs on: the user's text and how the turn begins, with the ids the caller already has.
#[derive(Debug, Clone)]
pub struct TurnInput<'a> {
    pub text: &'a str,
    pub start: TurnStart,
    /// The execution id to run under (a flow run is put on record under its id before it runs);
    /// `None`: a new one.
    pub execucao_id: Option<String>,
    /// The stored id of the user's message, which actions see ([`ActionContext::message_id`]).
    pub message_id: Option<String>,
    /// The conversation's compressed context, shown to the model in place of the older history.
    pub context: Option<CompressedContext>,
    /// Typed values the caller parsed already, which the turn's actions read by type (a flow's input:
    /// parsed once where it entered, never re-read from text).
    pub data: Extensions,
    /// The message that opens the turn when it is not the user's (a support agent's proposal); `None`:
    /// the user's `text`.
    pub opening: Option<ChatMessage>,
}

/// A conversation's compressed context: a summary and the turns' facts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompressedContext {
    pub summary: Option<String>,
    pub facts: Vec<String>,
}

impl CompressedContext {
    /// As the system prompt shows it.
    fn render(&self) -> String {
        let mut out = String::from("\n\n## Contexto da conversa");
        if let Some(resumo) = self.summary.as_deref().filter(|r| !r.is_empty()) {
            out.push_str(&format!("\nResumo: {resumo}"));
        }
        for f in &self.facts {
            out.push_str(&format!("\n- {f}"));
        }
        out
    }
}

impl<'a> TurnInput<'a> {
    /// `text`, begun as `start` says.
    pub fn new(text: &'a str, start: TurnStart) -> Self {
        Self {
            text,
            start,
            execucao_id: None,
            message_id: None,
            context: None,
            data: Extensions::default(),
            opening: None,
        }
    }

    /// Opened by `message` instead of the user's text (which the actions still read).
    pub fn opened_by(mut self, message: ChatMessage) -> Self {
        self.opening = Some(message);
        self
    }

    /// The message the turn's history starts with.
    fn opening_message(&self) -> ChatMessage {
        self.opening
            .clone()
            .unwrap_or_else(|| ChatMessage::user(self.text))
    }

    /// With `value` for the turn's actions to read by type ([`Self::data`]).
    pub fn with_data<T: std::any::Any + Send + Sync>(mut self, value: T) -> Self {
        self.data.insert(value);
        self
    }

    /// With the conversation's compressed context.
    pub fn with_context(mut self, context: Option<CompressedContext>) -> Self {
        self.context = context;
        self
    }

    /// Under the execution id `id`.
    pub fn under(mut self, id: String) -> Self {
        self.execucao_id = Some(id);
        self
    }

    /// Answering the stored message `id`.
    pub fn answering(mut self, id: String) -> Self {
        self.message_id = Some(id);
        self
    }
}

/// The user's text, for the model (or the active deterministic skill) to decide.
impl<'a> From<&'a str> for TurnInput<'a> {
    fn from(text: &'a str) -> Self {
        Self::new(text, TurnStart::Model)
    }
}

impl<'a> From<&'a String> for TurnInput<'a> {
    fn from(text: &'a String) -> Self {
        Self::new(text, TurnStart::Model)
    }
}

/// How a turn begins.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnStart {
    /// The model decides (or the active deterministic skill runs).
    Model,
    /// The router already knows the action and its arguments: it runs first, with no model call.
    Action { name: String, arguments: Value },
    /// The router already knows the answer (asking for a missing parameter, help).
    Reply(String),
    /// The active deterministic chain runs as with `Model`, and the turn ends after skill `last` (a
    /// batch's dry run stops before the recharge is sent).
    ChainUntil { last: String },
}

/// The `run` span's status: the turn's recorded error, or the engine's.
fn run_span_status(span: &tracing::Span, outcome: &Result<TurnOutcome, EngineError>) {
    match outcome {
        Ok(o) if o.execution.error.is_some() => {
            spans::failed(span, o.execution.error.as_deref().unwrap_or_default());
        }
        Ok(_) => {}
        Err(e) => spans::failed(span, &e.to_string()),
    }
}

struct Turn<'a> {
    engine: &'a Engine,
    agent: &'a AgentDef,
    conv: &'a mut Conversation,
    turn_id: String,
    /// The stored id of the user's message ([`vt_contract::ActionContext::message_id`]).
    message_id: Option<String>,
    user_text: String,
    events: Vec<TurnEvent>,
    messages: Vec<ChatMessage>,
    replies: Vec<Reply>,
    model_calls: Vec<ModelCallRecord>,
    error: Option<String>,
    /// When the model part of the turn must be over ([`super::EngineConfig::turn_timeout_ms`]).
    deadline: Instant,
    /// The span of the action running now: its updates are recorded as its events.
    tool_span: tracing::Span,
    /// The conversation's state and memory shared with this turn's actions; dropped on an update.
    /// (A mutex only to be `Sync`: the turn is borrowed across awaits.)
    maps: std::sync::Mutex<Option<SharedMaps>>,
    /// The deterministic skill after which the turn ends ([`TurnStart::ChainUntil`]).
    stop_after: Option<String>,
    /// Shown to the model after the skill's prompt ([`TurnInput::context`]).
    context: Option<CompressedContext>,
    /// What the turn's actions read by type ([`TurnInput::data`]).
    data: Extensions,
    /// The caller handed the turn's input typed ([`TurnInput::with_data`]): the first deterministic
    /// skill reads it by type and gets no text to parse.
    typed_input: bool,
    /// The last deterministic skill's output, the next one's arguments: handed on as a value.
    handed_on: Option<Value>,
    /// The model asked again for a call whose result it already has: a small model stuck in a loop.
    /// Its next request lets it write text only.
    text_only: bool,
    /// The deterministic skills' outputs, in the order they ran ([`TurnOutcome::stages`]).
    stages: Vec<StageOutput>,
    /// The runs this turn's actions started, also in [`Self::data`] for them to reach.
    inner_runs: InnerRuns,
    /// A tool's replies to the user, sent once the rest of its batch is answered as skipped.
    held_replies: Vec<Reply>,
}

impl<'a> Turn<'a> {
    fn new(
        engine: &'a Engine,
        agent: &'a AgentDef,
        conv: &'a mut Conversation,
        input: &TurnInput<'_>,
        turn_id: String,
    ) -> Self {
        let inner_runs = InnerRuns::default();
        Self {
            engine,
            agent,
            conv,
            turn_id,
            message_id: input.message_id.clone(),
            user_text: input.text.to_owned(),
            events: Vec::new(),
            messages: vec![input.opening_message()],
            replies: Vec::new(),
            model_calls: Vec::new(),
            error: None,
            deadline: Instant::now() + Duration::from_millis(engine.config.turn_timeout_ms),
            tool_span: tracing::Span::none(),
            maps: std::sync::Mutex::default(),
            stop_after: None,
            context: input.context.clone(),
            data: input.data.clone().with(inner_runs.clone()),
            typed_input: !input.data.is_empty(),
            handed_on: None,
            text_only: false,
            stages: Vec::new(),
            inner_runs,
            held_replies: Vec::new(),
        }
    }

    /// What the turn did, as the engine hands it back; the window trimmed to what the model is shown.
    fn finish(self, started_at: chrono::DateTime<chrono::Utc>) -> TurnOutcome {
        let status = if self.error.is_some() {
            ExecutionStatus::Falhou
        } else {
            ExecutionStatus::Concluido
        };
        let execution = ExecutionRecord {
            execucao_id: self.turn_id,
            conversation_id: self.conv.id.clone(),
            agent_id: self.conv.agent_id.clone(),
            status,
            error: self.error,
            model_calls: self.model_calls,
            started_at,
            finished_at: self.engine.clock.now(),
        };
        tracing::info!(execucao_id = %execution.execucao_id, status = status.as_str(), "turn finished");
        // The window is what the model is shown, and it is shown only the last `context_messages`: the
        // rest is in the stored log and the compressed context. Kept whole, it grew with every turn and
        // made each turn's write cost grow with the conversation.
        let window = std::mem::take(&mut self.conv.window);
        self.conv.window = recent(&window, self.engine.config.context_messages);
        TurnOutcome {
            execution,
            replies: self.replies,
            events: self.events,
            messages: self.messages,
            stages: self.stages,
            inner_runs: self.inner_runs.take(),
        }
    }

    /// The turn's loop: how it begins, then a step at a time (a deterministic skill, or a model call
    /// with its tools) until one ends the turn.
    async fn run(&mut self, start: TurnStart) {
        if let Step::Done = self.begin(start).await {
            return;
        }
        let mut deterministic_steps = 0;
        loop {
            let agent = self.agent;
            let Some(skill) = agent.skill(&self.conv.active_skill) else {
                let message = format!(
                    "skill {:?} não existe no agente {:?}",
                    self.conv.active_skill, self.agent.id
                );
                self.fail(STEP_FAILED_REPLY, message);
                return;
            };
            let step = if skill.deterministic {
                deterministic_steps += 1;
                self.bounded_deterministic_step(skill, deterministic_steps).await
            } else {
                self.bounded_model_step(skill).await
            };
            if let Step::Done = step {
                return;
            }
        }
    }

    /// What the turn does before its loop: nothing (the model decides), a fixed answer, or the action
    /// the router chose.
    async fn begin(&mut self, start: TurnStart) -> Step {
        match start {
            TurnStart::Model => Step::Continue,
            TurnStart::ChainUntil { last } => {
                self.stop_after = Some(last);
                Step::Continue
            }
            TurnStart::Reply(text) => {
                self.answer(text);
                Step::Done
            }
            TurnStart::Action { name, arguments } => {
                let agent = self.agent;
                let Some(skill) = agent.skill(&self.conv.active_skill) else {
                    self.fail(
                        STEP_FAILED_REPLY,
                        format!("skill {:?} não existe", self.conv.active_skill),
                    );
                    return Step::Done;
                };
                let call = ToolCall {
                    id: self.engine.ids.next("route"),
                    name,
                    arguments: vt_contract::json::text(&arguments),
                };
                self.push(ChatMessage::Assistant {
                    content: None,
                    tool_calls: vec![call.clone()],
                });
                // The router's arguments go to the action as they are; the text is the record.
                match self.tool_call(skill, &call, Arguments::Value(arguments)).await {
                    AfterCall::Next => Step::Continue,
                    AfterCall::Ends(step) => {
                        self.close_batch(&[]);
                        step
                    }
                }
            }
        }
    }

    /// The `n`th deterministic step of the turn, within the engine's bound.
    async fn bounded_deterministic_step(&mut self, skill: &SkillDef, n: u32) -> Step {
        let limit = self.engine.config.max_deterministic_steps;
        if n > limit {
            self.fail(
                STEP_FAILED_REPLY,
                format!("limite de {limit} etapas determinísticas por turno atingido"),
            );
            return Step::Done;
        }
        self.deterministic_step(skill).await
    }

    /// A model step, when there is a model and the turn has calls left.
    async fn bounded_model_step(&mut self, skill: &SkillDef) -> Step {
        if self.engine.llm.is_none() {
            self.answer(self.engine.no_model_reply.clone());
            return Step::Done;
        }
        let limit = self.engine.config.max_model_calls;
        if self.model_calls.len() >= limit as usize {
            self.fail(
                LOOP_BOUND_REPLY,
                format!("limite de {limit} chamadas ao modelo por turno atingido"),
            );
            return Step::Done;
        }
        self.model_step(skill).await
    }

    fn push(&mut self, message: ChatMessage) {
        self.conv.window.push(message.clone());
        self.messages.push(message);
    }

    /// Ends the turn with an assistant message.
    fn answer(&mut self, text: String) {
        let text = vt_domain::vt::reais_in(&text).into_owned();
        self.push(ChatMessage::assistant(text.clone()));
        let reply = Reply {
            text,
            files: Vec::new(),
        };
        self.events.push(TurnEvent::Reply(reply.clone()));
        self.replies.push(reply);
    }

    /// Ends the turn with an apology to the user and an error on the execution.
    fn fail(&mut self, reply: &str, error: String) {
        tracing::warn!(error = %mask_cards_in(&error), "turn failed");
        self.events.push(TurnEvent::Error {
            message: error.clone(),
        });
        self.error = Some(error);
        self.answer(reply.to_owned());
    }
}

/// The mutex's value, also after a panic elsewhere left it poisoned (the maps it guards are copies).
fn locked<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The last `max` messages of a window, starting at a user message so no tool result is left without
/// the call it answers. Older messages are represented by the compressed context instead.
fn recent(window: &[ChatMessage], max: usize) -> Vec<ChatMessage> {
    if window.len() <= max {
        return window.to_vec();
    }
    let is_user = |i: &usize| matches!(window[*i], ChatMessage::User { .. });
    let from = window.len() - max;
    // The first user message inside the tail; if a single turn is longer than the tail, that turn's
    // own user message, so the model never sees a tool result without its call.
    let start = (from..window.len())
        .find(is_user)
        .or_else(|| (0..from).rev().find(is_user))
        .unwrap_or(0);
    window[start..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(n: usize) -> [ChatMessage; 2] {
        [
            ChatMessage::Assistant {
                content: None,
                tool_calls: vec![ToolCall {
                    id: format!("c{n}"),
                    name: "x".into(),
                    arguments: "{}".into(),
                }],
            },
            ChatMessage::Tool {
                call_id: format!("c{n}"),
                name: "x".into(),
                content: "ok".into(),
                is_error: false,
            },
        ]
    }

    #[test]
    fn the_tail_starts_at_a_user_message() {
        let mut w = vec![
            ChatMessage::user("1"),
            ChatMessage::assistant("a"),
            ChatMessage::user("2"),
        ];
        w.extend(tool(1));
        w.push(ChatMessage::assistant("b"));
        let tail = recent(&w, 4);
        assert_eq!(tail.first(), Some(&ChatMessage::user("2")));
        assert_eq!(recent(&w, 10).len(), w.len(), "short windows are kept whole");
    }

    #[test]
    fn a_turn_longer_than_the_tail_keeps_its_user_message() {
        let mut w = vec![
            ChatMessage::user("antigo"),
            ChatMessage::assistant("a"),
            ChatMessage::user("agora"),
        ];
        for n in 0..8 {
            w.extend(tool(n));
        }
        let tail = recent(&w, 4);
        assert_eq!(tail.first(), Some(&ChatMessage::user("agora")));
        assert!(
            matches!(tail[1], ChatMessage::Assistant { .. }),
            "no orphan tool result"
        );
    }
}
