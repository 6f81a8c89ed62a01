//! Low-balance notices to WhatsApp recipients, sent by the product itself (RF5 for a `destinatario` of
//! `tipo: "whatsapp"`) — and recharge results (RF10), under the same consent and quiet hours: only to a user with a recorded opt-in, one per card per crossing of the limit
//! and at most one per `[notificacoes] intervalo_minimo_horas`, never in the quiet hours
//! (`[notificacoes] silencio`, deferred to their end by the outbox item's due time — durable, so a
//! restart loses none). The item carries the text and the `saldo_baixo` template: the sender picks by
//! the 24-hour window when it goes.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;
use vt_domain::stages::channel_notices::{ChannelNotices, EnvioNotificacao, LowBalance, RechargeResult};
use vt_domain::vt::Destinatario;
use vt_domain::vt::timezone::Timezone;

use super::{CHANNEL, conversation_id};
use crate::outbox::{ReplyPayload, TemplateUse};
use crate::service::QuietHours;
use vt_store::{ContactStore, NewOutboxItem, OutboxStatus, OutboxStore, Stores};

/// `[notificacoes]`: restraint in what the product sends on its own.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct NoticesConfig {
    /// At most one low-balance notice per card in this many hours (default 24).
    pub intervalo_minimo_horas: u32,
    /// When nothing is sent, in the policy's time zone (default `"21:00-08:00"`; `""`: never quiet).
    #[schemars(with = "String")]
    pub silencio: QuietHours,
}

impl Default for NoticesConfig {
    fn default() -> Self {
        Self {
            intervalo_minimo_horas: 24,
            silencio: QuietHours::parse("21:00-08:00").unwrap_or_default(),
        }
    }
}

/// The WhatsApp side of [`ChannelNotices`].
pub struct WhatsAppNotices {
    /// Consent and the low-balance notices' bookkeeping.
    contacts: Arc<dyn ContactStore>,
    /// Where a notice is queued for the sender.
    outbox: Arc<dyn OutboxStore>,
    phone_number_id: String,
    config: NoticesConfig,
    tz: Timezone,
    clock: Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>,
}

impl WhatsAppNotices {
    pub fn new(stores: &Stores, phone_number_id: &str, config: NoticesConfig, tz: Timezone) -> Self {
        Self {
            contacts: stores.contacts.clone(),
            outbox: stores.outbox.clone(),
            phone_number_id: phone_number_id.to_owned(),
            config,
            tz,
            clock: Arc::new(Utc::now),
        }
    }

    /// With another clock (tests).
    pub fn with_clock(mut self, clock: Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>) -> Self {
        self.clock = clock;
        self
    }

    async fn send(
        &self,
        wa_id: &str,
        card: &str,
        notice: &LowBalance,
    ) -> Result<EnvioNotificacao, vt_store::StoreError> {
        let person = self.person(wa_id).await?;
        let wa_id = person.as_str();
        if let Some(refused) = self.without_consent(wa_id).await? {
            return Ok(refused);
        }
        let now = (self.clock)();
        let interval = Duration::hours(i64::from(self.config.intervalo_minimo_horas));
        let hash = vt_store::seal::card_index(card);
        if !self
            .contacts
            .take_low_balance_notice(&hash, now - interval, now)
            .await?
        {
            return Ok(EnvioNotificacao::not_sent(
                "ja_avisado_nesta_queda_ou_no_intervalo",
            ));
        }
        let due = self.config.silencio.release(now, &self.tz);
        let template = TemplateUse {
            purpose: "saldo_baixo".into(),
            parameters: [
                ("cartao_final".to_owned(), vt_domain::vt::card::last_four(card)),
                ("saldo".to_owned(), notice.saldo.clone()),
            ]
            .into(),
        };
        let item = self.item(
            wa_id,
            ("aviso_saldo_baixo", notice.execucao_id.as_deref()),
            &notice.mensagem,
            template,
            due,
        );
        self.outbox.enqueue(&item, now).await?;
        Ok(queued(now, due))
    }
}

impl WhatsAppNotices {
    /// A notice of `kind` for flow run `fluxo` as an outbox item due at `due`: its text (cards masked)
    /// and, for outside the window, its template.
    fn item(
        &self,
        wa_id: &str,
        (kind, fluxo): (&str, Option<&str>),
        text: &str,
        template: TemplateUse,
        due: DateTime<Utc>,
    ) -> NewOutboxItem {
        let conversation = conversation_id(&self.phone_number_id, wa_id);
        NewOutboxItem {
            kind: kind.into(),
            destination: CHANNEL.into(),
            payload: ReplyPayload {
                conversation_id: conversation.clone(),
                user_id: wa_id.to_owned(),
                text: vt_domain::vt::card::mask_cards_in(text),
                files: Vec::new(),
                reply_to: None,
                thread: None,
                confirmation: None,
                choices: Vec::new(),
                trace: None,
                template: Some(template),
                fluxo: fluxo.map(str::to_owned),
            }
            .to_value(),
            max_attempts: 5,
            next_attempt_at: due,
            conversation_id: Some(conversation),
            status: OutboxStatus::Pending,
        }
    }
}

impl WhatsAppNotices {
    /// The person a recipient's phone (or BSUID) is on this number — whose conversation, consent and
    /// window a notice goes by; the recipient itself when no one wrote from it yet.
    async fn person(&self, recipient: &str) -> Result<String, vt_store::StoreError> {
        Ok(self
            .contacts
            .whatsapp_person_of(&self.phone_number_id, recipient)
            .await?
            .unwrap_or_else(|| recipient.to_owned()))
    }

    /// Why nothing may be sent to `wa_id` on the business's initiative, if so.
    async fn without_consent(&self, wa_id: &str) -> Result<Option<EnvioNotificacao>, vt_store::StoreError> {
        Ok(match self.contacts.consent(wa_id).await? {
            Some(c) if c.opted_in => None,
            Some(_) => Some(EnvioNotificacao::not_sent("cliente_pediu_parar")),
            None => Some(EnvioNotificacao::not_sent("sem_opt_in")),
        })
    }

    async fn send_result(
        &self,
        wa_id: &str,
        notice: &RechargeResult,
    ) -> Result<EnvioNotificacao, vt_store::StoreError> {
        let person = self.person(wa_id).await?;
        let wa_id = person.as_str();
        if let Some(refused) = self.without_consent(wa_id).await? {
            return Ok(refused);
        }
        let now = (self.clock)();
        let due = self.config.silencio.release(now, &self.tz);
        let template = TemplateUse {
            purpose: "resultado_recarga".into(),
            parameters: [
                (
                    "cartao_final".to_owned(),
                    vt_domain::vt::card::last_four(&notice.cartao),
                ),
                ("valor".to_owned(), notice.valor.clone()),
                ("resultado".to_owned(), notice.resultado.clone()),
            ]
            .into(),
        };
        let item = self.item(
            wa_id,
            ("aviso_recarga", notice.execucao_id.as_deref()),
            &notice.mensagem,
            template,
            due,
        );
        self.outbox.enqueue(&item, now).await?;
        Ok(queued(now, due))
    }
}

/// What RF5/RF10 report of a notice put in the outbox, due at `due`.
fn queued(now: DateTime<Utc>, due: DateTime<Utc>) -> EnvioNotificacao {
    EnvioNotificacao {
        enviado: true,
        status: None,
        body: None,
        motivo: (due > now).then(|| format!("adiado_para_o_fim_do_silencio:{}", due.to_rfc3339())),
        erro: None,
    }
}

#[async_trait]
impl ChannelNotices for WhatsAppNotices {
    fn delivers_to(&self, destinatario: &Destinatario) -> bool {
        destinatario.tipo == CHANNEL && !destinatario.id.trim().is_empty()
    }

    async fn low_balance(
        &self,
        to: &Destinatario,
        card: &str,
        notice: Option<&LowBalance>,
    ) -> EnvioNotificacao {
        let digits: String = card.chars().filter(char::is_ascii_digit).collect();
        let Some(notice) = notice else {
            if let Err(e) = self
                .contacts
                .balance_recovered(&vt_store::seal::card_index(&digits))
                .await
            {
                tracing::warn!(error = %e, "a card's recovered balance could not be recorded");
            }
            return EnvioNotificacao::not_sent("saldo_acima_do_limite");
        };
        let wa_id: String = to.id.chars().filter(char::is_ascii_digit).collect();
        match self.send(&wa_id, &digits, notice).await {
            Ok(out) => out,
            Err(e) => {
                tracing::error!(error = %e, "a WhatsApp notice could not be recorded");
                EnvioNotificacao::not_sent("falha_ao_registrar")
            }
        }
    }

    async fn recharge_result(&self, to: &Destinatario, notice: &RechargeResult) -> EnvioNotificacao {
        let wa_id: String = to.id.chars().filter(char::is_ascii_digit).collect();
        match self.send_result(&wa_id, notice).await {
            Ok(out) => out,
            Err(e) => {
                tracing::error!(error = %e, "a WhatsApp notice could not be recorded");
                EnvioNotificacao::not_sent("falha_ao_registrar")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_hours_defer_to_their_end_in_the_policys_time_zone() {
        let q = QuietHours::parse("21:00-08:00").expect("quiet");
        let tz = Timezone::sao_paulo();
        // 03:00 in São Paulo (UTC-3) is 06:00 UTC: released at 08:00 local, 11:00 UTC.
        let night: DateTime<Utc> = "2026-11-24T06:00:00Z".parse().expect("t");
        assert_eq!(
            q.release(night, &tz),
            "2026-11-24T11:00:00Z".parse::<DateTime<Utc>>().expect("t")
        );
        // 22:00 local the day before: the same morning's end.
        let evening: DateTime<Utc> = "2026-11-24T01:00:00Z".parse().expect("t");
        assert_eq!(
            q.release(evening, &tz),
            "2026-11-24T11:00:00Z".parse::<DateTime<Utc>>().expect("t")
        );
        let noon: DateTime<Utc> = "2026-11-24T15:00:00Z".parse().expect("t");
        assert_eq!(q.release(noon, &tz), noon);
        assert_eq!(QuietHours::parse("").expect("off").release(night, &tz), night);
        assert!(QuietHours::parse("21h-8h").is_err());
    }
}
