//! The conversation service: what every channel calls. It serialises turns per conversation, stores
//! the user's message *before* anything else happens, runs the engine and stores the turn (BPMN
//! "Persistir": retried, non-critical — a reply is not withheld because its record failed, but the
//! failure is logged and reported).

use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use vt_actions::vt::card::mask_cards_in;

use crate::engine::retry::retry;
use crate::engine::{
    CONTEXT_MEMORY_KEY, Conversation, Engine, EngineError, Participant, Reply, TurnEvent, TurnOutcome,
    TurnStart,
};
use crate::flow::{FlowError, FlowOutput, PreparedFlow, flow_output};
use crate::llm::{ChatMessage, CompletionRequest};
use crate::router::{Route, Router, STATE_AGUARDANDO};
use crate::store::{ConversationContext, FlowRunRecord, Store, StoreError, TurnRecord, UsageRecord};

/// Longer messages are answered with a clear refusal instead of being processed.
pub const MAX_MESSAGE_CHARS: usize = 4_000;

/// An inbound message, already free of any channel's wire format.
#[derive(Debug, Clone)]
pub struct Inbound {
    pub agent_id: String,
    /// `None` starts a new conversation; an unknown id starts one with that id.
    pub conversation_id: Option<String>,
    pub user: Participant,
    pub text: String,
}

/// How the router classified a turn, for the usage metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentTag {
    pub intent_key: String,
    pub action_type: String,
    pub keyword_matched: bool,
}

impl IntentTag {
    pub fn new(intent_key: &str, action_type: &str, keyword_matched: bool) -> Self {
        Self {
            intent_key: intent_key.into(),
            action_type: action_type.into(),
            keyword_matched,
        }
    }

    /// The usage record of a turn with this classification.
    fn usage(
        &self,
        conversation_id: &str,
        tokens: (u64, u64),
        time_ms: u128,
        at: DateTime<Utc>,
    ) -> UsageRecord {
        UsageRecord {
            conversation_id: conversation_id.to_owned(),
            intent_key: self.intent_key.clone(),
            action_type: self.action_type.clone(),
            tokens_input: tokens.0 as i64,
            tokens_output: tokens.1 as i64,
            execution_time_ms: time_ms as i64,
            was_keyword_matched: self.keyword_matched,
            created_at: at,
        }
    }
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
}

impl Handled {
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
}

pub struct ConversationService {
    engine: Arc<Engine>,
    store: Arc<dyn Store>,
    router: Option<Router>,
}

/// Facts kept in the compressed context.
const MAX_FACTS: usize = 10;
/// A model-written summary every this many turns (when a model is configured).
const SUMMARY_EVERY: i64 = 5;

impl ConversationService {
    pub fn new(engine: Arc<Engine>, store: Arc<dyn Store>) -> Self {
        Self {
            engine,
            store,
            router: None,
        }
    }

    /// Routes the router's agent's messages before any model.
    pub fn with_router(mut self, router: Router) -> Self {
        self.router = Some(router);
        self
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Handles one user message end to end.
    #[tracing::instrument(name = "inbound", skip_all, fields(agent = %msg.agent_id, channel = %msg.user.channel))]
    pub async fn handle(&self, msg: Inbound, intent: Option<IntentTag>) -> Result<Handled, ServiceError> {
        if self.engine.catalog().agent(&msg.agent_id).is_none() {
            return Err(EngineError::UnknownAgent(msg.agent_id).into());
        }
        let id = msg
            .conversation_id
            .clone()
            .unwrap_or_else(|| self.engine.next_id("conv"));
        let lock = self
            .store
            .lock_conversation(&id)
            .await
            .map_err(ServiceError::NotRecorded)?;
        let mut conv = match self
            .store
            .conversation(&id)
            .await
            .map_err(ServiceError::NotRecorded)?
        {
            Some(c) if c.agent_id != msg.agent_id => {
                return Err(ServiceError::AgentMismatch {
                    id,
                    agent: c.agent_id,
                    requested: msg.agent_id,
                });
            }
            Some(c) => c,
            None => {
                let mut c = self.engine.start_conversation(&msg.agent_id, msg.user.clone())?;
                c.id = id.clone();
                c
            }
        };
        let now = self.engine.now();
        // The message is safe on disk before anything acts on it.
        self.store
            .save_conversation(&conv, now)
            .await
            .map_err(ServiceError::NotRecorded)?;
        self.store
            .append_message(&id, None, &ChatMessage::user(&msg.text), now)
            .await
            .map_err(ServiceError::NotRecorded)?;

        if let Some(refusal) = refusal(&msg.text) {
            let reply = ChatMessage::assistant(refusal.clone());
            let usage = IntentTag::new("recusa", "deterministic", false).usage(&id, (0, 0), 0, now);
            let persisted = self.store.append_message(&id, None, &reply, now).await.is_ok()
                && self.store.record_usage(&usage).await.is_ok();
            lock.release().await;
            return Ok(Handled {
                conversation_id: id,
                replies: vec![Reply {
                    text: refusal,
                    files: Vec::new(),
                }],
                execucao_id: None,
                ended: conv.ended,
                persisted,
                intent: None,
                tokens: (0, 0),
            });
        }

        let started = Instant::now();
        let context = self.store.context(&id).await.ok().flatten();
        if let Some(c) = &context {
            conv.memory.insert(
                CONTEXT_MEMORY_KEY.into(),
                json!({"resumo": c.summary, "fatos": c.key_facts}),
            );
        }
        let mut extra = (0u64, 0u64);
        let mut classified = false;
        let (start, tag) = match self.router.as_ref().filter(|r| r.agent() == conv.agent_id) {
            Some(router) => {
                let decision = router.route(&msg.text, &conv).await;
                extra = decision.tokens;
                classified = decision.classified;
                let tag = IntentTag::new(&decision.intent, &decision.action_type, decision.keyword_matched);
                let start = match decision.route {
                    Route::Ask { question, awaiting } => {
                        conv.state.insert(
                            STATE_AGUARDANDO.into(),
                            serde_json::to_value(awaiting).unwrap_or(Value::Null),
                        );
                        TurnStart::Reply(question)
                    }
                    route => {
                        conv.state.remove(STATE_AGUARDANDO);
                        match route {
                            Route::Action { action, arguments } => TurnStart::Action {
                                name: action,
                                arguments,
                            },
                            Route::Reply { text } => TurnStart::Reply(text),
                            Route::Plan => {
                                let (reply, used) =
                                    self.plan(&conv, &msg.text, router, &decision.intent).await;
                                extra = (extra.0 + used.0, extra.1 + used.1);
                                TurnStart::Reply(reply)
                            }
                            Route::Model | Route::Ask { .. } => TurnStart::Model,
                        }
                    }
                };
                (start, Some(tag))
            }
            None => (TurnStart::Model, intent),
        };
        let mut outcome = self.engine.run_turn_from(&mut conv, &msg.text, start).await?;
        if let Some(t) = &tag {
            outcome.events.insert(
                0,
                TurnEvent::Routed {
                    intent: t.intent_key.clone(),
                    keyword_matched: t.keyword_matched,
                    classified,
                },
            );
        }
        let tag = tag.unwrap_or_else(|| default_tag(&outcome));
        let summary_tokens = self
            .update_context(&conv, context, &tag.intent_key, &outcome)
            .await;
        let (tokens_in, tokens_out) = outcome.execution.tokens();
        let (tokens_in, tokens_out) = (
            tokens_in + extra.0 + summary_tokens.0,
            tokens_out + extra.1 + summary_tokens.1,
        );
        let routed_intent = self
            .router
            .as_ref()
            .filter(|r| r.agent() == conv.agent_id)
            .map(|_| tag.intent_key.clone());
        let usage = tag.usage(&id, (tokens_in, tokens_out), started.elapsed().as_millis(), now);
        let record = TurnRecord {
            conversation: &conv,
            messages: &outcome.messages[1..],
            execution: &outcome.execution,
            events: &outcome.events,
            usage: Some(&usage),
            flow_run: None,
        };
        let persisted = self.persist(record).await;
        lock.release().await;
        Ok(Handled {
            conversation_id: id,
            replies: outcome.replies,
            execucao_id: Some(outcome.execution.execucao_id),
            ended: conv.ended,
            persisted,
            intent: routed_intent,
            tokens: (tokens_in, tokens_out),
        })
    }

    /// Runs the ten-stage flow for one input and stores the run with its stage outputs. Input errors
    /// come back before anything is written.
    pub async fn run_flow(&self, text: &str) -> Result<(FlowOutput, bool), ServiceError> {
        let PreparedFlow {
            conversation: mut conv,
            input: sanitized,
            text,
        } = crate::flow::prepare(&self.engine, text)?;
        let now = self.engine.now();
        // A flow's conversation is new and its own: no other turn can race it, no lock is needed.
        self.store
            .save_conversation(&conv, now)
            .await
            .map_err(ServiceError::NotRecorded)?;
        self.store
            .append_message(&conv.id, None, &ChatMessage::user(&text), now)
            .await
            .map_err(ServiceError::NotRecorded)?;
        // On record as started before the first external call: a killed run stays visible.
        let execucao_id = self.engine.next_id("exec");
        self.store
            .begin_flow_run(&execucao_id, &sanitized, now)
            .await
            .map_err(ServiceError::NotRecorded)?;
        let started = Instant::now();
        let outcome = self
            .engine
            .run_turn_as(&mut conv, &text, TurnStart::Model, execucao_id)
            .await?;
        let output = flow_output(&outcome);
        let usage = IntentTag::new(crate::flow::FLOW_AGENT, "deterministic", false).usage(
            &conv.id,
            (0, 0),
            started.elapsed().as_millis(),
            now,
        );
        let flow_run = FlowRunRecord {
            execucao_id: output.execucao_id.clone(),
            status: output.status.as_str().to_owned(),
            input: sanitized,
            output: serde_json::to_value(&output).unwrap_or(Value::Null),
            stages: output
                .etapas
                .iter()
                .map(|e| (e.etapa.clone(), e.saida.clone()))
                .collect(),
            created_at: now,
        };
        let record = TurnRecord {
            conversation: &conv,
            messages: &outcome.messages[1..],
            execution: &outcome.execution,
            events: &outcome.events,
            usage: Some(&usage),
            flow_run: Some(&flow_run),
        };
        let persisted = self.persist(record).await;
        Ok((output, persisted))
    }

    /// Plans and executes a hybrid request; the task run is stored (non-critical).
    async fn plan(
        &self,
        conv: &Conversation,
        text: &str,
        router: &Router,
        intent: &str,
    ) -> (String, (u64, u64)) {
        let (Some(llm), Some(record)) = (self.engine.llm(), router.intent(intent)) else {
            return (crate::planner::PLAN_FAILED_REPLY.into(), (0, 0));
        };
        let outcome = crate::planner::run(
            &self.engine,
            llm.as_ref(),
            conv,
            text,
            record,
            self.engine.next_id("task"),
        )
        .await;
        if let Err(e) = self.store.save_task_run(&outcome.task).await {
            tracing::error!(error = %e, task = %outcome.task.id, "task run could not be stored");
        }
        (outcome.reply, outcome.tokens)
    }

    /// Appends this turn's fact to the compressed context (no model) and, every few turns with a model,
    /// rewrites the summary. Returns the tokens the summary cost. Failures are logged, never raised.
    async fn update_context(
        &self,
        conv: &Conversation,
        previous: Option<ConversationContext>,
        intent: &str,
        outcome: &TurnOutcome,
    ) -> (u64, u64) {
        let mut ctx = previous.unwrap_or_else(|| ConversationContext {
            conversation_id: conv.id.clone(),
            user_id: conv.user_id.clone(),
            summary: None,
            key_facts: Vec::new(),
            last_intent: None,
            turn_count: 0,
            updated_at: self.engine.now(),
        });
        let reply: String = mask_cards_in(&outcome.reply_text()).chars().take(160).collect();
        ctx.key_facts.push(format!("{intent}: {reply}"));
        let excess = ctx.key_facts.len().saturating_sub(MAX_FACTS);
        ctx.key_facts.drain(..excess);
        ctx.last_intent = Some(intent.to_owned());
        ctx.turn_count += 1;
        ctx.updated_at = self.engine.now();
        let mut tokens = (0, 0);
        if let Some(llm) = self.engine.llm()
            && ctx.turn_count % SUMMARY_EVERY == 0
        {
            let request = CompletionRequest {
                system: "Resuma em 2 ou 3 frases, em português, o contexto desta conversa de atendimento de vale-transporte. \
                         Nunca escreva números de cartão completos."
                    .into(),
                messages: vec![ChatMessage::user(format!(
                    "Resumo anterior: {}\nFatos recentes:\n{}",
                    ctx.summary.as_deref().unwrap_or("nenhum"),
                    ctx.key_facts.join("\n")
                ))],
                tools: Vec::new(),
                max_tokens: Some(150),
            };
            match llm.complete(&request).await {
                Ok(c) => {
                    ctx.summary = c.text.map(|t| mask_cards_in(&t));
                    tokens = (c.usage.input_tokens, c.usage.output_tokens);
                }
                Err(e) => tracing::warn!(error = %e, "context summary failed; keeping the previous one"),
            }
        }
        if let Err(e) = self.store.save_context(&ctx).await {
            tracing::error!(error = %e, "conversation context could not be stored");
        }
        tokens
    }

    /// Writes a turn with the configured retries; a final failure is logged and reported, not raised.
    async fn persist(&self, record: TurnRecord<'_>) -> bool {
        let policy = self.engine.config().persist_retry;
        let now = self.engine.now();
        let out = retry(
            policy,
            |_: &StoreError| true,
            |_| None,
            |_| self.store.save_turn(record, now),
        )
        .await;
        if let Err(e) = &out.result {
            tracing::error!(
                execucao_id = %record.execution.execucao_id,
                attempts = out.attempts,
                error = %e,
                "turn could not be persisted"
            );
        }
        out.result.is_ok()
    }
}

/// A reply for messages that are not processed at all.
fn refusal(text: &str) -> Option<String> {
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

fn default_tag(outcome: &TurnOutcome) -> IntentTag {
    if outcome.model_calls() > 0 {
        IntentTag::new("general_chat", "reasoning", false)
    } else {
        IntentTag::new("ajuda", "deterministic", false)
    }
}
