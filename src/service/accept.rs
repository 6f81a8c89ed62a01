//! Step 1, **accept**: the conversation is found (or opened), the channel's message id checked against
//! what was accepted before, and the message stored — all before anything acts on it. A message that
//! cannot be stored is not processed, and the caller is told.

use chrono::{DateTime, Utc};

use super::{Inbound, Messages, ServiceError, tenant_of};
use vt_domain::tools::cartao::MEMORY_CARTOES;

use vt_engine::Conversation;
use vt_engine::llm::ChatMessage;
use vt_store::Accepting;

impl Messages<'_> {
    /// The conversation the message belongs to (`stored`: as read, `None` when there is none yet) and
    /// the stored message's id; `None` when the channel delivered this message before (it was not
    /// stored again and must not be processed again).
    pub(super) async fn accept(
        &self,
        id: &str,
        stored: Option<Conversation>,
        msg: &Inbound,
        now: DateTime<Utc>,
    ) -> Result<Option<(Conversation, i64)>, ServiceError> {
        let mut new = false;
        let conv = match stored {
            Some(c) if c.agent_id != msg.agent_id => {
                return Err(ServiceError::AgentMismatch {
                    id: id.to_owned(),
                    agent: c.agent_id,
                    requested: msg.agent_id.clone(),
                });
            }
            Some(c) if msg.tenant_id.as_ref().is_some_and(|t| *t != c.tenant_id) => {
                return Err(ServiceError::NotFound(id.to_owned()));
            }
            Some(c) => c,
            None => {
                new = true;
                let mut c = self.engine.start_conversation(&msg.agent_id, msg.user.clone())?;
                c.id = id.to_owned();
                c.tenant_id = tenant_of(msg);
                self.carry_cards(&mut c).await;
                c
            }
        };
        let stored = self
            .conversations
            .accept_message(Accepting {
                conversation: &conv,
                new_conversation: new,
                channel_message_id: msg.channel_message_id.as_deref(),
                message: &ChatMessage::user(stored_text(msg)),
                contact_seen: msg.contact_seen_at.map(|at| (msg.user.user_id.as_str(), at)),
                media: msg.media.as_ref(),
                now,
            })
            .await
            .map_err(ServiceError::NotRecorded)?;
        if stored.is_none() {
            tracing::info!(conversation = %id, "redelivered message ignored");
        }
        Ok(stored.map(|message_id| (conv, message_id)))
    }
}

impl Messages<'_> {
    /// A new conversation of a routed agent starts with the cards its user gave in their last one on
    /// the same channel and tenant, so tomorrow's "saldo" just works. Unreadable, it starts with none
    /// (logged): the person is asked for the card, as before.
    async fn carry_cards(&self, conv: &mut Conversation) {
        if self.router.as_ref().is_none_or(|r| r.agent() != conv.agent_id) {
            return;
        }
        match self.conversations.previous_conversation(conv).await {
            Ok(Some(previous)) => {
                if let Some(cards) = previous.memory.get(MEMORY_CARTOES).filter(|v| !v.is_null()) {
                    conv.memory.insert(MEMORY_CARTOES.into(), cards.clone());
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the previous conversation could not be read; no card carried over")
            }
        }
    }
}

/// What is stored of the message: its text, or what kind of message it was (a voice note's transcript
/// replaces this once heard).
fn stored_text(msg: &Inbound) -> String {
    match (&msg.unsupported, &msg.media) {
        (Some(kind), _) => format!("[mensagem do tipo {kind}]"),
        (None, Some(media)) => match media.kind {
            vt_store::MediaKind::Audio => format!("{} [áudio]", super::VOICE_MARK),
            vt_store::MediaKind::Image => "[foto]".to_owned(),
        },
        (None, None) => msg.text.clone(),
    }
}
