//! Consent to business-initiated messages on WhatsApp (notices, templates), in the user's own words:
//! "PARAR" or "SAIR" opts out at once, "VOLTAR" or "quero receber avisos" opts (back) in. Answered in
//! one line with no router and no model (zero tokens), and recorded with who, when and through what.

use super::Contacts;
use std::time::Instant;

use chrono::{DateTime, Duration, NaiveTime, Utc};
use serde::Deserialize;
use vt_domain::vt::timezone::Timezone;

use super::commit::Ran;
use super::{ChannelRules, Handled, Inbound, Messages, Routing, ServiceError};
use vt_engine::Conversation;
use vt_store::{ConsentChange, ConversationContext, StoreError};

pub(super) const OPTED_OUT: &str =
    "Pronto: você não vai mais receber avisos por aqui. Para voltar a recebê-los, escreva VOLTAR.";
pub(super) const OPTED_IN: &str =
    "Pronto: você vai receber por aqui os avisos de saldo baixo e de recargas. Para parar, escreva PARAR.";

/// What the user's words say of their consent, if anything: `Some(true)` in, `Some(false)` out. Only
/// a windowed channel's business-initiated messages need a recorded consent ([`ChannelRules`]).
pub(super) fn consent_words(channel: &ChannelRules, text: &str) -> Option<bool> {
    channel.window?;
    consent_word(text)
}

/// What `text` says of notices when it is one of the consent words, on any channel.
pub(super) fn consent_word(text: &str) -> Option<bool> {
    let words = vt_domain::vt::parse::normalize(text);
    let words = words
        .trim_matches(|c: char| !c.is_alphanumeric() && c != ' ')
        .trim();
    match words {
        "parar" | "sair" | "pare" | "stop" => Some(false),
        "voltar" | "quero receber avisos" | "receber avisos" => Some(true),
        _ => None,
    }
}

impl Messages<'_> {
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
        self.contacts
            .record_consent(&change)
            .await
            .map_err(ServiceError::NotRecorded)?;
        let reply = if opted_in { OPTED_IN } else { OPTED_OUT };
        let ran = Ran {
            outcome: self.without_engine(conv, &msg.text, Some(reply.to_owned())),
            routing: Routing::deterministic("consentimento", true),
            context,
            started,
            now,
            accepted_message,
            held: None,
            listened: super::hearing::Listened::default(),
        };
        let deliver = msg.delivery == super::Delivery::Inline;
        Ok(self.commit_traced(conv, msg, ran, deliver).await)
    }
}

/// One opt-in a company imports (`POST /v1/optins`, `vt-agent optins import`): whose WhatsApp number,
/// through what it was given, and when.
#[derive(Debug, Clone, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OptIn {
    /// The WhatsApp number (wa_id): digits, country code first, e.g. 5511999990000.
    pub telefone: String,
    /// Where the person agreed: a form, a contract, a call…
    pub origem: String,
    /// When they agreed (RFC 3339), never in the future.
    pub em: DateTime<Utc>,
}

/// Why an import was refused: the field (`optins[3].telefone`) and what is wrong — never its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {why}")]
pub(crate) struct OptInError {
    pub field: String,
    pub why: &'static str,
}

/// Most opt-ins one import takes.
const MAX_OPT_INS: usize = 10_000;

impl OptIn {
    /// The import as consent changes by `who`, every row checked first (nothing is recorded from a
    /// file with a bad row).
    pub(crate) fn changes(
        rows: &[Self],
        who: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<ConsentChange>, OptInError> {
        if rows.is_empty() || rows.len() > MAX_OPT_INS {
            return Err(OptInError {
                field: "optins".into(),
                why: "de 1 a 10.000 registros",
            });
        }
        rows.iter()
            .enumerate()
            .map(|(i, r)| {
                let field = |name: &str| format!("optins[{i}].{name}");
                let digits = r.telefone.trim().trim_start_matches('+');
                if !(10..=15).contains(&digits.len()) || !digits.chars().all(|c| c.is_ascii_digit()) {
                    return Err(OptInError {
                        field: field("telefone"),
                        why: "o número do WhatsApp com o código do país, só dígitos (10 a 15)",
                    });
                }
                let origem = r.origem.trim();
                if origem.is_empty() || origem.chars().count() > 100 {
                    return Err(OptInError {
                        field: field("origem"),
                        why: "onde a pessoa autorizou, em até 100 caracteres",
                    });
                }
                if r.em > now {
                    return Err(OptInError {
                        field: field("em"),
                        why: "no futuro",
                    });
                }
                Ok(ConsentChange {
                    wa_id: digits.to_owned(),
                    opted_in: true,
                    source: origem.to_owned(),
                    who: who.to_owned(),
                    at: r.em,
                })
            })
            .collect()
    }
}

impl Contacts<'_> {
    /// Records imported opt-ins, except where the person said PARAR later than the import's date (their
    /// own word wins). Returns how many were recorded.
    pub(crate) async fn import_opt_ins(
        self,
        changes: &[ConsentChange],
    ) -> Result<usize, vt_store::StoreError> {
        let mut recorded = 0;
        for change in changes {
            let current = self.contacts.consent(&change.wa_id).await?;
            if current.is_some_and(|c| !c.opted_in && c.at > change.at) {
                continue;
            }
            self.contacts.record_consent(change).await?;
            recorded += 1;
        }
        Ok(recorded)
    }
}

impl Contacts<'_> {
    /// A template's lifecycle as Meta reports it: a paused, disabled, rejected or re-categorised
    /// template is not used until approved again.
    pub(crate) async fn template_changed(self, state: &vt_store::TemplateState) -> Result<(), StoreError> {
        self.contacts.set_template_state(state).await
    }

    /// What the platform reports of a message we sent; `false` when the message is not ours.
    pub(crate) async fn delivery_status(
        self,
        external_id: &str,
        status: &str,
        error_code: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.outbox
            .record_delivery_status(external_id, status, error_code, at)
            .await
    }
}

/// A daily quiet period `HH:MM-HH:MM` (it may cross midnight).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuietHours(pub(crate) Option<(NaiveTime, NaiveTime)>);

impl QuietHours {
    pub fn parse(text: &str) -> Result<Self, &'static str> {
        if text.trim().is_empty() {
            return Ok(Self(None));
        }
        let (from, to) = text
            .trim()
            .split_once('-')
            .ok_or("use HH:MM-HH:MM, e.g. 21:00-08:00")?;
        let time = |t: &str| {
            NaiveTime::parse_from_str(t.trim(), "%H:%M").map_err(|_| "use HH:MM-HH:MM, e.g. 21:00-08:00")
        };
        let (from, to) = (time(from)?, time(to)?);
        if from == to {
            return Err("o início e o fim devem ser diferentes");
        }
        Ok(Self(Some((from, to))))
    }

    /// When a notice due at `now` may go: `now`, or the end of the quiet period `now` falls in.
    pub fn release(&self, now: DateTime<Utc>, tz: &Timezone) -> DateTime<Utc> {
        let Some((from, to)) = self.0 else { return now };
        let local = tz.local(now);
        let t = local.time();
        let quiet = if from < to {
            t >= from && t < to
        } else {
            t >= from || t < to
        };
        if !quiet {
            return now;
        }
        let mut end = local.date_naive().and_time(to);
        if end <= local.naive_local() {
            end += Duration::days(1);
        }
        end.and_local_timezone(*local.offset())
            .single()
            .map_or(now, |e| e.with_timezone(&Utc))
    }
}

impl<'de> Deserialize<'de> for QuietHours {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        // The error names the field: serde's own would not, for a value read from a string.
        Self::parse(&text).map_err(|why| serde::de::Error::custom(format!("notificacoes.silencio: {why}")))
    }
}
