//! The 24-hour window: Meta delivers free text only within 24 hours of the user's last message (any
//! type, taps included); after that only an approved template goes through. Every send decides by the
//! time on record ([`vt_store::ContactStore`]): inside, the text as always; outside, the template
//! of the item's purpose with its parameters checked — or, when none fits or it is not usable now
//! (paused, disabled, rejected, moved to another category), the item is dead-lettered with that
//! reason before anything is sent.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::sender::GraphFailure;
use super::templates::{Template, Templates};
use crate::outbox::{ReplyPayload, SendError};
use vt_store::{ContactStore, TemplateState};

/// Template states that stop its sends until Meta approves it again.
const STOPPED: [&str; 4] = ["PAUSED", "DISABLED", "REJECTED", "INEXISTENTE"];

/// The purpose whose template stands in for the message it carries: the message itself waits for the
/// user's answer (a support agent's late reply).
pub(super) const HOLDS_THE_MESSAGE: &str = "retomar_atendimento";

pub(super) struct Window {
    pub store: Arc<dyn ContactStore>,
    pub templates: Arc<Templates>,
}

/// How a reply goes out.
pub(super) enum Decision {
    FreeForm,
    Template { template: Box<Template>, body: Value },
}

fn unavailable() -> SendError {
    SendError::Retry {
        reason: "store unavailable".into(),
        after: None,
    }
}

impl Window {
    /// Free text inside the window; else the reply's template, checked, or the reason it cannot go.
    pub(super) async fn decide(
        &self,
        to: &str,
        reply: &ReplyPayload,
        now: DateTime<Utc>,
    ) -> Result<Decision, SendError> {
        let last = self.store.last_inbound(to).await.map_err(|_| unavailable())?;
        if last.is_some_and(|t| now - t < super::WINDOW) {
            return Ok(Decision::FreeForm);
        }
        let purpose = reply.template.as_ref().map_or("resposta", |t| t.purpose.as_str());
        let no_template =
            || SendError::Permanent(format!("fora da janela de 24 h e sem modelo para '{purpose}'"));
        let (Some(wanted), Some(template)) = (&reply.template, self.templates.for_purpose(purpose)) else {
            return Err(no_template());
        };
        // Anything sent as a template is business-initiated: only with the user's recorded opt-in.
        match self.store.consent(to).await.map_err(|_| unavailable())? {
            Some(c) if c.opted_in => {}
            Some(_) => {
                return Err(SendError::Permanent(
                    "fora da janela de 24 h e o cliente pediu para não receber avisos (PARAR)".into(),
                ));
            }
            None => {
                return Err(SendError::Permanent(
                    "fora da janela de 24 h e sem opt-in registrado para avisos".into(),
                ));
            }
        }
        let states = self.store.template_states().await.map_err(|_| unavailable())?;
        if let Some(why) = states
            .iter()
            .find(|s| s.name == template.name && s.language == template.language)
            .and_then(|s| stopped(s, template))
        {
            return Err(SendError::Permanent(format!(
                "fora da janela de 24 h e o modelo '{}' {why}",
                template.name
            )));
        }
        let body = template.message(&wanted.parameters).map_err(|(parameter, why)| {
            SendError::Permanent(format!(
                "parâmetro '{parameter}' do modelo '{}': {why}",
                template.name
            ))
        })?;
        Ok(Decision::Template {
            template: Box::new(template.clone()),
            body,
        })
    }

    /// A send of `template` failed: Meta's template errors stop it until it is approved again (132001
    /// no such template in that language, 132015 paused, 132016 disabled).
    pub(super) async fn template_refused(&self, template: &Template, failure: &GraphFailure) {
        let status = match failure.code {
            Some(132_001) => "INEXISTENTE",
            Some(132_015) => "PAUSED",
            Some(132_016) => "DISABLED",
            _ => return,
        };
        let state = TemplateState {
            name: template.name.clone(),
            language: template.language.clone(),
            status: Some(status.into()),
            category: None,
            reason: failure.code.map(|code| format!("erro {code} no envio")),
            updated_at: Utc::now(),
        };
        if let Err(e) = self.store.set_template_state(&state).await {
            tracing::warn!(error = %e, "a template's state could not be recorded");
        }
    }
}

/// Why a template must not be used now, if it must not.
fn stopped(state: &TemplateState, template: &Template) -> Option<String> {
    if let Some(status) = state.status.as_deref().filter(|s| STOPPED.contains(s)) {
        return Some(format!("está {status}: não é usado até voltar a APPROVED"));
    }
    state
        .category
        .as_deref()
        .filter(|c| *c != template.category)
        .map(|c| format!("passou para a categoria {c}: não é usado até ser revisto"))
}
