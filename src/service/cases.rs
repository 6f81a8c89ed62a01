//! A transfer to a person (SPEC's `TransferToHuman`): the case a turn's transfer opens, with a case
//! file built by code (no model), and the conversation's messages while a person has it — stored as
//! every message is, kept in the case's log, never answered by the router or the model; the first one
//! while the case waits gets one short acknowledgement.

use std::time::Instant;

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use vt_actions::tools::{RecargaPendente, STATE_PENDENTE};
use vt_actions::vt::card::{mask_card, mask_cards_in};

use super::commit::Ran;
use super::{ConversationService, Handled, Inbound, IntentTag, Routing, ServiceError};
use crate::engine::{Conversation, ExecutionRecord, ExecutionStatus, Reply, TurnEvent, TurnOutcome};
use crate::llm::ChatMessage;
use crate::store::{Case, CaseEvent, CaseState, ConversationContext, NewCase};

/// The one acknowledgement of a message that waits for a person.
pub(crate) const ACK_TEXT: &str = "Sua mensagem foi encaminhada a um atendente. Assim que alguém assumir o \
                                   atendimento, a conversa continua por aqui.";

/// How far back the case file quotes the conversation.
const LAST_MESSAGES: usize = 6;

/// How long WhatsApp lets a business answer freely after the user's last message.
const WHATSAPP_WINDOW_HOURS: i64 = 24;

impl ConversationService {
    /// The case a turn opens: the first `TransferToHuman` among its events, with its case file.
    pub(super) fn case_to_open(
        &self,
        conv: &Conversation,
        outcome: &TurnOutcome,
        context: &ConversationContext,
    ) -> Option<NewCase> {
        let reason = outcome.events.iter().find_map(|e| match e {
            TurnEvent::TransferToHuman(t) => Some(mask_cards_in(&t.reason)),
            _ => None,
        })?;
        let now = self.engine.now();
        Some(NewCase {
            id: self.engine.next_id("caso"),
            conversation_id: conv.id.clone(),
            tenant_id: conv.tenant_id.clone(),
            channel: conv.channel.clone(),
            case_file: case_file(conv, &reason, context, now),
            reason,
        })
    }

    /// A message that arrived while `case` is open: kept in the case's log and committed as a turn
    /// of its own with no model and no router — silent, but for the one acknowledgement while the
    /// case waits.
    pub(super) async fn held_for_case(
        &self,
        conv: &mut Conversation,
        msg: &Inbound,
        case: Case,
        ran_at: (DateTime<Utc>, Instant, i64),
        context: Option<ConversationContext>,
    ) -> Result<Handled, ServiceError> {
        let (now, started, accepted_message) = ran_at;
        let relayed = CaseEvent {
            case_id: case.id.clone(),
            conversation_id: conv.id.clone(),
            at: now,
            who: "cliente".into(),
            what: "mensagem_cliente".into(),
            detail: Some(msg.text.clone()),
        };
        self.store
            .record_case_event(&relayed)
            .await
            .map_err(ServiceError::NotRecorded)?;
        let acknowledge = case.state == CaseState::Aguardando
            && self
                .store
                .acknowledge_case(&case.id)
                .await
                .map_err(ServiceError::NotRecorded)?;
        let outcome = self.held_outcome(conv, &msg.text, acknowledge.then(|| ACK_TEXT.to_owned()));
        let ran = Ran {
            outcome,
            routing: Routing {
                tag: Some(IntentTag::new("atendimento_humano", "deterministic", false)),
                classified: false,
                tokens: (0, 0),
            },
            context,
            started,
            now,
            accepted_message,
        };
        let deliver = msg.delivery == super::Delivery::Inline;
        Ok(self.commit_traced(conv, msg, ran, deliver).await)
    }

    /// A turn that ran no model and no action: the user's message and, when there is one, the reply.
    fn held_outcome(&self, conv: &Conversation, user_text: &str, reply: Option<String>) -> TurnOutcome {
        let now = self.engine.now();
        let mut messages = vec![ChatMessage::user(user_text)];
        messages.extend(reply.iter().map(ChatMessage::assistant));
        TurnOutcome {
            execution: ExecutionRecord {
                execucao_id: self.engine.next_id("exec"),
                conversation_id: conv.id.clone(),
                agent_id: conv.agent_id.clone(),
                status: ExecutionStatus::Concluido,
                error: None,
                model_calls: Vec::new(),
                started_at: now,
                finished_at: now,
            },
            replies: reply
                .into_iter()
                .map(|text| Reply {
                    text,
                    files: Vec::new(),
                })
                .collect(),
            events: Vec::new(),
            messages,
            stages: Vec::new(),
        }
    }
}

/// What a support agent needs to pick the conversation up, built by code: every card masked.
fn case_file(conv: &Conversation, reason: &str, context: &ConversationContext, now: DateTime<Utc>) -> Value {
    let cards: Vec<String> = vt_actions::tools::cartao::cards_held(&conv.state, &conv.memory)
        .iter()
        .map(|c| mask_card(c))
        .collect();
    let pending = conv
        .state
        .get(STATE_PENDENTE)
        .cloned()
        .and_then(|v| vt_actions::json::from_value::<RecargaPendente>(v).ok())
        .map(|p| {
            json!({
                "cartao": mask_card(&p.cartao),
                "valor": p.valor.to_string(),
                "moeda": p.moeda,
                "meio_pagamento": p.meio_pagamento,
                "expira_em": p.expira_em,
            })
        });
    let last: Vec<Value> = conv
        .window
        .iter()
        .filter_map(|m| match m {
            ChatMessage::User { content } => Some(("cliente", content.as_str())),
            ChatMessage::Assistant {
                content: Some(text), ..
            } => Some(("bot", text.as_str())),
            _ => None,
        })
        .rev()
        .take(LAST_MESSAGES)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .map(|(who, text)| json!({"de": who, "texto": mask_cards_in(text)}))
        .collect();
    let mut file = json!({
        "motivo": reason,
        "canal": conv.channel,
        "cartoes": cards,
        "recarga_pendente": pending,
        "contexto": {
            "resumo": context.summary.as_deref().map(mask_cards_in),
            "fatos": context.key_facts,
        },
        "ultimas_mensagens": last,
    });
    if conv.channel == "whatsapp" {
        // The transfer came with the user's message: the window is whole.
        file["janela_whatsapp_ate"] = json!(now + Duration::hours(WHATSAPP_WINDOW_HOURS));
    }
    file
}
