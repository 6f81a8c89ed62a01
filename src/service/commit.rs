//! Step 4, **commit**: everything the turn changed is written in one transaction — the conversation,
//! the turn's messages, the execution with its events, usage, the compressed context, the flow runs its
//! tools started and one outbox item per reply — with the BPMN's persist retries. A record that cannot
//! be written does not withhold the reply (it is logged and reported as `persisted: false`).

use std::time::Instant;

use chrono::{DateTime, Utc};
use vt_domain::vt::card::mask_cards_in;

use super::{Delivery, Handled, Inbound, IntentTag, Messages, Routing, ServiceConfig};
use crate::outbox::{DeliveryTrace, ReplyPayload};
use vt_engine::llm::{ChatMessage, CompletionRequest};
use vt_engine::retry::retry;
use vt_engine::{Conversation, TurnEvent, TurnOutcome};
use vt_store::{
    CaseWrite, ConversationContext, ConversationStore, NewOutboxItem, OutboxStatus, StoreError, TurnRecord,
};

/// Facts kept in the compressed context.
const MAX_FACTS: usize = 10;
/// A model-written summary every this many turns (when a model is configured).
const SUMMARY_EVERY: i64 = 5;
/// Attempts the outbox worker makes for a reply (BPMN: channel send 5×).
pub(super) const REPLY_ATTEMPTS: i32 = 5;

/// A turn that ran: what commit writes besides the conversation and the message.
pub(super) struct Ran {
    pub outcome: TurnOutcome,
    pub routing: Routing,
    /// The compressed context read before the turn.
    pub context: Option<ConversationContext>,
    pub started: Instant,
    pub now: DateTime<Utc>,
    /// The stored user message the turn handled.
    pub accepted_message: i64,
    /// The turn happened in an open case (a message held for a person, the card holder's answer to a
    /// recharge, an agent's proposal): what it writes in the case.
    pub held: Option<CaseWrite>,
    /// What hearing the message cost (a voice note).
    pub listened: super::hearing::Listened,
}

/// Every token a turn cost: its model calls, those around them (the router's micro call, the
/// summary), the transcription.
fn turn_tokens(spent: &Spent<'_>) -> (u64, u64) {
    let (tokens_in, tokens_out) = spent.outcome.execution.tokens();
    (
        tokens_in + spent.around.0 + spent.listened.tokens.0,
        tokens_out + spent.around.1 + spent.listened.tokens.1,
    )
}

/// What a turn spent: its outcome (the model calls of its loop), the tokens of the calls around the
/// loop (the router's micro call, the summary), what hearing cost.
struct Spent<'a> {
    outcome: &'a TurnOutcome,
    around: (u64, u64),
    listened: super::hearing::Listened,
}

impl Messages<'_> {
    /// A turn's usage record: its classification, its tokens (every one; the cached ones of its model
    /// calls apart), its time, the audio it heard, and what all of it cost at the `[custos]` prices:
    /// the loop's calls at the model that answered each, the calls around it at the configured
    /// model, the transcription at its model.
    fn usage_record(
        &self,
        (tag, conv): (&IntentTag, &Conversation),
        spent: Spent<'_>,
        (started, now): (Instant, DateTime<Utc>),
    ) -> vt_store::UsageRecord {
        let tokens = turn_tokens(&spent);
        let Spent {
            outcome,
            around,
            listened,
        } = spent;
        let model = self
            .engine
            .llm()
            .map(|l| l.model().to_owned())
            .unwrap_or_default();
        let transcription = self.hearing.hearing_model();
        let mut calls: Vec<_> = outcome
            .execution
            .model_calls
            .iter()
            .map(|c| crate::costs::Call {
                model: &c.model,
                input: c.tokens_input,
                cached: c.tokens_cached,
                written: c.tokens_cache_write,
                output: c.tokens_output,
            })
            .collect();
        calls.push(crate::costs::Call::plain(&model, around));
        calls.push(crate::costs::Call::plain(
            transcription.unwrap_or_default(),
            listened.tokens,
        ));
        // A provider that bills the transcription by token reported tokens: its minutes are not
        // priced again.
        let by_minute = listened.tokens == (0, 0);
        let used = crate::costs::Used {
            calls,
            audio: transcription
                .filter(|_| by_minute)
                .map(|t| (t, listened.audio_ms)),
        };
        vt_store::UsageRecord {
            audio_ms: listened.audio_ms,
            tokens_cached: outcome.execution.cached_tokens() as i64,
            custo_micro_brl: self.spending.costs.brl(&used).map(crate::costs::micro_brl),
            marcas: super::outcomes::marks(outcome, conv),
            ..tag.usage(conv, tokens, started.elapsed().as_millis(), now)
        }
    }
}

/// What the service settles once a turn has answered: the routing decision as its first event, which
/// question a "sim" answers now, the cards it offered, and the line the answer ends with for someone
/// who wrote in English or Spanish (in what is sent and in what is kept of it alike).
fn after_turn(conv: &mut Conversation, outcome: &mut TurnOutcome, routing: &Routing) {
    if let Some(t) = &routing.tag {
        outcome.events.insert(
            0,
            TurnEvent::Routed {
                intent: t.intent_key.clone(),
                keyword_matched: t.keyword_matched,
                classified: routing.classified,
            },
        );
    }
    super::question::settle(conv, &outcome.execution.execucao_id, routing.restated.as_deref());
    super::offers::settle(conv, routing.offer.as_ref());
    if let Some(note) = routing.note {
        outcome.append_to_last_reply(note);
    }
    if let Some(lead) = &routing.lead {
        outcome.prepend_to_first_reply(lead);
    }
}

/// The protocol a person is given stays with the conversation: "qual o protocolo?" is answered from
/// it, with zero tokens, however long after.
fn keep_protocol(conv: &mut Conversation, case: Option<&vt_store::CaseWrite>, now: DateTime<Utc>) {
    if let Some(vt_store::CaseWrite::Open(new)) = case
        && !new.protocol.is_empty()
    {
        conv.state.insert(
            crate::router::STATE_PROTOCOLO.into(),
            serde_json::json!({"protocolo": new.protocol, "aberto_em": now}),
        );
    }
}

/// Input and output tokens of two calls together.
fn tokens_plus(a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
    (a.0 + b.0, a.1 + b.1)
}

impl Messages<'_> {
    /// Writes the turn and says what the channel sends back.
    pub(super) async fn commit(&self, conv: &mut Conversation, msg: &Inbound, ran: Ran) -> Handled {
        let Ran {
            mut outcome,
            routing,
            context,
            started,
            now,
            accepted_message,
            held,
            listened,
        } = ran;
        after_turn(conv, &mut outcome, &routing);
        let routed_intent = routing.tag.as_ref().map(|t| t.intent_key.clone());
        let tag = routing.tag.unwrap_or_else(|| default_tag(&outcome));
        let (context, summary_tokens) = self.next_context(conv, context, &tag.intent_key, &outcome).await;
        let around = tokens_plus(routing.tokens, summary_tokens);
        let spent = Spent {
            outcome: &outcome,
            around,
            listened,
        };
        let usage = self.usage_record((&tag, conv), spent, (started, now));
        let flow_runs = crate::flow::inner_records(&outcome);
        let case = self
            .case_write(held, conv, &mut outcome, (&context, &tag.intent_key))
            .await;
        keep_protocol(conv, case.as_ref(), now);
        let choices = super::offers::Offer::titles_of(routing.offer.as_ref());
        let mut outbox = replies_outbox(conv, msg, &outcome, &choices);
        outbox.extend(self.board.board_items(&conv.tenant_id, case.as_ref(), &outcome));
        let record = TurnRecord {
            conversation: conv,
            messages: &outcome.messages[1..],
            execution: &outcome.execution,
            events: &outcome.events,
            usage: Some(&usage),
            flow_runs: &flow_runs,
            context: Some(&context),
            outbox: &outbox,
            // Only a channel's message is stored unprocessed (see `ConversationStore::accept_message`).
            accepted_message: msg
                .channel_message_id
                .is_some()
                .then(|| (msg.joined_from.unwrap_or(accepted_message), accepted_message)),
            case: case.as_ref(),
        };
        let persisted = self.persist(record).await;
        Handled {
            conversation_id: conv.id.clone(),
            replies: outcome.replies,
            execucao_id: Some(outcome.execution.execucao_id),
            ended: conv.ended,
            persisted,
            intent: routed_intent,
            tokens: (usage.tokens_input as u64, usage.tokens_output as u64),
            duplicate: false,
            awaiting_confirmation: vt_domain::tools::RecargaPendente::id_in(&conv.state),
            choices,
        }
    }

    /// This turn's fact appended to the compressed context (no model) and, every few turns with a
    /// model, a new summary. Returns the context and the tokens the summary cost.
    async fn next_context(
        &self,
        conv: &Conversation,
        previous: Option<ConversationContext>,
        intent: &str,
        outcome: &TurnOutcome,
    ) -> (ConversationContext, (u64, u64)) {
        let mut ctx = previous
            .unwrap_or_else(|| ConversationContext::empty(&conv.id, &conv.user_id, self.engine.now()));
        // A turn that said nothing (a message held for a person) adds nothing to remember.
        if outcome.replies.is_empty() {
            return (ctx, (0, 0));
        }
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
            && self.spending.standing(&conv.tenant_id).await.model_allowed()
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
                max_tokens: Some(150),
                ..Default::default()
            };
            match vt_engine::telemetry::spans::complete("resumir_contexto", llm.as_ref(), &request).await {
                Ok(c) => {
                    ctx.summary = c.text.map(|t| mask_cards_in(&t));
                    tokens = (c.usage.input_tokens, c.usage.output_tokens);
                }
                Err(e) => tracing::warn!(error = %e, "context summary failed; keeping the previous one"),
            }
        }
        (ctx, tokens)
    }

    /// Writes a turn with the configured retries ([`save_turn`]); the month's spending this process
    /// knows grows by the turn's cost.
    pub(super) async fn persist(&self, record: TurnRecord<'_>) -> bool {
        let saved = save_turn(self.conversations, self.config, self.engine.now(), record).await;
        if let (true, Some(u)) = (saved, record.usage) {
            self.spending.spent(&u.tenant_id, u.created_at, u.custo_micro_brl);
        }
        saved
    }
}

/// Writes a turn with the configured retries; a final failure is logged and reported, not raised.
pub(super) async fn save_turn(
    store: &dyn ConversationStore,
    config: &ServiceConfig,
    now: DateTime<Utc>,
    record: TurnRecord<'_>,
) -> bool {
    let out = retry(
        config.persist_retry,
        |_: &StoreError| true,
        |_| None,
        |_| store.save_turn(record, now),
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

/// One outbox item per reply, addressed to the channel the message came from; the last one carries
/// the cards the answer offers to choose from (`choices`).
fn replies_outbox(
    conv: &Conversation,
    msg: &Inbound,
    outcome: &TurnOutcome,
    choices: &[String],
) -> Vec<NewOutboxItem> {
    let status = match msg.delivery {
        Delivery::Inline => OutboxStatus::Done,
        Delivery::Outbox => OutboxStatus::Pending,
    };
    // The last reply of a turn that leaves a recharge waiting carries its id: channels turn it into
    // confirm / cancel buttons.
    let pending = vt_domain::tools::RecargaPendente::id_in(&conv.state);
    // The worker's `deliver` span joins this turn's trace.
    let trace = (status == OutboxStatus::Pending)
        .then(vt_engine::telemetry::spans::trace_context)
        .flatten()
        .map(|context| DeliveryTrace {
            context,
            agent: conv.agent_id.clone(),
        });
    let last = outcome.replies.len().saturating_sub(1);
    outcome
        .replies
        .iter()
        .enumerate()
        .map(|(i, r)| NewOutboxItem {
            kind: "reply".into(),
            destination: msg.user.channel.clone(),
            payload: ReplyPayload {
                conversation_id: conv.id.clone(),
                user_id: msg.user.user_id.clone(),
                text: r.text.clone(),
                files: r.files.clone(),
                reply_to: msg.channel_message_id.clone(),
                thread: msg.thread.clone(),
                confirmation: if i == last { pending.clone() } else { None },
                choices: if i == last { choices.to_vec() } else { Vec::new() },
                trace: trace.clone(),
                template: None,
                fluxo: None,
            }
            .to_value(),
            max_attempts: REPLY_ATTEMPTS,
            // Due at once by the worker's clock, the wall clock (a test's engine clock may be elsewhere).
            next_attempt_at: chrono::Utc::now(),
            conversation_id: Some(conv.id.clone()),
            status,
        })
        .collect()
}

fn default_tag(outcome: &TurnOutcome) -> IntentTag {
    if outcome.model_calls() > 0 {
        IntentTag::new("general_chat", "reasoning", false)
    } else {
        IntentTag::new("ajuda", "deterministic", false)
    }
}
