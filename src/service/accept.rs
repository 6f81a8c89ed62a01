//! Step 1, **accept**: the conversation is found (or opened), the channel's message id checked against
//! what was accepted before, and the message stored — all before anything acts on it. A message that
//! cannot be stored is not processed, and the caller is told.

use chrono::{DateTime, Utc};

use super::{ConversationService, Inbound, ServiceError, tenant_of};
use crate::engine::Conversation;
use crate::llm::ChatMessage;

impl ConversationService {
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
                c
            }
        };
        let stored = self
            .store
            .accept_message(
                &conv,
                new,
                msg.channel_message_id.as_deref(),
                &ChatMessage::user(stored_text(msg)),
                now,
            )
            .await
            .map_err(ServiceError::NotRecorded)?;
        if stored.is_none() {
            tracing::info!(conversation = %id, "redelivered message ignored");
        }
        Ok(stored.map(|message_id| (conv, message_id)))
    }
}

/// What is stored of the message: its text, or what kind of message it was.
fn stored_text(msg: &Inbound) -> String {
    match &msg.unsupported {
        Some(kind) => format!("[mensagem do tipo {kind}]"),
        None => msg.text.clone(),
    }
}
