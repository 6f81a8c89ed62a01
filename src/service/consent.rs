//! Consent to business-initiated messages on WhatsApp (notices, templates), in the user's own words:
//! "PARAR" or "SAIR" opts out at once, "VOLTAR" or "quero receber avisos" opts (back) in. Answered in
//! one line with no router and no model (zero tokens), and recorded with who, when and through what.

use std::time::Instant;

use chrono::{DateTime, Utc};

use super::commit::Ran;
use super::{ConversationService, Handled, Inbound, IntentTag, Routing, ServiceError};
use crate::engine::Conversation;
use crate::store::{ConsentChange, ConversationContext};

/// The only channel whose business-initiated messages need a recorded consent.
const CHANNEL: &str = "whatsapp";

pub(super) const OPTED_OUT: &str =
    "Pronto: você não vai mais receber avisos por aqui. Para voltar a recebê-los, escreva VOLTAR.";
pub(super) const OPTED_IN: &str =
    "Pronto: você vai receber por aqui os avisos de saldo baixo e de recargas. Para parar, escreva PARAR.";

/// What the user's words say of their consent, if anything: `Some(true)` in, `Some(false)` out.
pub(super) fn consent_words(conv: &Conversation, text: &str) -> Option<bool> {
    if conv.channel != CHANNEL {
        return None;
    }
    let words = vt_actions::vt::parse::normalize(text);
    let words = words
        .trim_matches(|c: char| !c.is_alphanumeric() && c != ' ')
        .trim();
    match words {
        "parar" | "sair" | "pare" | "stop" => Some(false),
        "voltar" | "quero receber avisos" | "receber avisos" => Some(true),
        _ => None,
    }
}

impl ConversationService {
    /// Records the user's answer and confirms it in one line.
    pub(super) async fn consent_turn(
        &self,
        conv: &mut Conversation,
        msg: &Inbound,
        opted_in: bool,
        ran_at: (DateTime<Utc>, Instant, i64),
        context: Option<ConversationContext>,
    ) -> Result<Handled, ServiceError> {
        let (now, started, accepted_message) = ran_at;
        let change = ConsentChange {
            wa_id: conv.user_id.clone(),
            opted_in,
            source: "chat".into(),
            who: conv.user_id.clone(),
            at: now,
        };
        // In force at once: the next notice reads it.
        self.store
            .record_consent(&change)
            .await
            .map_err(ServiceError::NotRecorded)?;
        let reply = if opted_in { OPTED_IN } else { OPTED_OUT };
        let ran = Ran {
            outcome: self.without_engine(conv, &msg.text, Some(reply.to_owned())),
            routing: Routing {
                tag: Some(IntentTag::new("consentimento", "deterministic", true)),
                classified: false,
                tokens: (0, 0),
            },
            context,
            started,
            now,
            accepted_message,
            held: None,
        };
        let deliver = msg.delivery == super::Delivery::Inline;
        Ok(self.commit_traced(conv, msg, ran, deliver).await)
    }
}
