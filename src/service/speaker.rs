//! The [`Speaker`]: what is said in a conversation outside its turns (a Pix receipt, a late recharge's
//! outcome, a person's reply to a case), as the conversation's channel takes it ([`ChannelRules`]):
//! stored, queued for the channel's worker where one sends there, told to this process's listeners.

use super::jobs::Speaker;
use super::{ChannelRules, Said};
use vt_engine::Conversation;

impl Speaker<'_> {
    /// The rules of `channel` (a conversation's).
    pub(crate) fn channel(&self, channel: &str) -> &ChannelRules {
        self.channels.of(channel)
    }

    /// Whether what is said late in `conv` is sent by a worker: its channel sends on its own, or is
    /// read in the conversation but the tenant has its late messages pushed ([`ServicesConfig::pushed`](super::ServicesConfig::pushed)).
    pub(crate) fn sends_late(&self, conv: &Conversation) -> bool {
        !self.channel(&conv.channel).read_in_conversation
            || self
                .pushed
                .contains(&(conv.channel.clone(), conv.tenant_id.clone()))
    }

    /// The outbox item that carries `text` (with `files`, and `choices` to pick from) to the card
    /// holder of `conv`, said outside a turn, as the conversation's channel takes it
    /// ([`ChannelRules`]): with `template` only where the channel has a window
    /// (it stands in for the text outside it); sent by a worker where one sends there, else (the
    /// terminal, HTTP, read in the conversation) on record as delivered.
    pub(super) fn late_reply(
        &self,
        conv: &Conversation,
        text: String,
        template: Option<crate::outbox::TemplateUse>,
        (files, choices): (Vec<vt_contract::FileContent>, Vec<String>),
    ) -> vt_store::NewOutboxItem {
        let template = template.filter(|_| self.channel(&conv.channel).window.is_some());
        reply_item(conv, text, template, (files, choices), self.sends_late(conv))
    }

    /// Says `text` in `conv` outside any turn (a late outcome, a receipt): kept in its history and sent
    /// through the outbox (as `template` where the channel needs one), with `files` after it.
    pub(super) async fn say_now(
        &self,
        conv: &Conversation,
        text: String,
        template: Option<crate::outbox::TemplateUse>,
        files: Vec<vt_contract::FileContent>,
    ) -> Result<(), vt_store::StoreError> {
        self.say_at(conv, (text, template), files, None).await
    }

    /// [`Self::say_now`], sent no sooner than `due` (a notice the quiet hours hold until their end):
    /// kept in the history at once, the outbox item due then.
    pub(super) async fn say_at(
        &self,
        conv: &Conversation,
        (text, template): (String, Option<crate::outbox::TemplateUse>),
        files: Vec<vt_contract::FileContent>,
        due: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<(), vt_store::StoreError> {
        let text = vt_domain::vt::reais_in(&text).into_owned();
        let mut item = self.late_reply(conv, text.clone(), template, (files, Vec::new()));
        if let Some(due) = due {
            item.next_attempt_at = due;
        }
        let message = vt_engine::llm::ChatMessage::assistant(text);
        self.cases
            .say_in_case(&conv.id, &message, &[item], None, self.engine.now())
            .await?;
        self.tell_listeners(&conv.id, &message);
        Ok(())
    }

    /// Tells this process's listeners ([`Services::said`](super::Services::said)) what was just stored as said in
    /// `conversation_id` outside a turn. Nobody listening is the usual case (a server: the outbox
    /// sends it).
    pub(super) fn tell_listeners(&self, conversation_id: &str, message: &vt_engine::llm::ChatMessage) {
        if let Some(text) = message.text() {
            let _ = self.said.send(Said {
                conversation_id: conversation_id.to_owned(),
                text: text.to_owned(),
            });
        }
    }
}

/// [`Speaker::late_reply`]'s item, the channel's rules applied.
fn reply_item(
    conv: &Conversation,
    text: String,
    template: Option<crate::outbox::TemplateUse>,
    (files, choices): (Vec<vt_contract::FileContent>, Vec<String>),
    sends_itself: bool,
) -> vt_store::NewOutboxItem {
    vt_store::NewOutboxItem {
        kind: "reply".into(),
        destination: conv.channel.clone(),
        payload: crate::outbox::ReplyPayload {
            conversation_id: conv.id.clone(),
            user_id: conv.user_id.clone(),
            text,
            files,
            reply_to: None,
            thread: None,
            confirmation: None,
            choices,
            trace: None,
            template,
            fluxo: None,
        }
        .to_value(),
        max_attempts: super::commit::REPLY_ATTEMPTS,
        next_attempt_at: chrono::Utc::now(),
        conversation_id: Some(conv.id.clone()),
        status: if sends_itself {
            vt_store::OutboxStatus::Pending
        } else {
            vt_store::OutboxStatus::Done
        },
    }
}
