//! Support lookups on record: when a support agent (Mattermost's `support_users`, the console's
//! `support`/`admin` keys) asks for a card's balance, who, when, where, the masked card, a keyed hash of
//! it (every lookup of one card can be found without keeping the number) and how it went go to the
//! audit table. Other turns write nothing here.

use super::{Cases, Handled};
use vt_store::AuditRecord;

/// Who looked a card up, and where.
pub(crate) struct Lookup<'a> {
    pub support_user: &'a str,
    pub tenant: &'a str,
    pub channel: &'a str,
}

/// The audit line of the turn that handled `text`, if it was a balance lookup of a card; `hash` keys
/// the card's hash. Returns the outcome written.
pub(crate) async fn record_lookup(
    cases: Cases<'_>,
    who: Lookup<'_>,
    text: &str,
    handled: &Handled,
    hash: impl Fn(&str) -> String,
) -> Option<&'static str> {
    if handled.intent.as_deref() != Some("consultar_saldo") {
        return None;
    }
    let card = vt_domain::vt::parse::cards(text).into_iter().next()?;
    let outcome = if handled.reply_text().contains("O saldo do cartão") {
        "saldo_informado"
    } else {
        "sem_saldo"
    };
    let record = AuditRecord {
        at: chrono::Utc::now(),
        support_user: who.support_user.to_owned(),
        tenant_id: who.tenant.to_owned(),
        channel: who.channel.to_owned(),
        cartao: vt_domain::vt::mask_card(&card),
        cartao_hash: hash(&card),
        outcome: outcome.into(),
        conversation_id: Some(handled.conversation_id.clone()),
    };
    if let Err(e) = cases.audited(&record).await {
        tracing::error!(error = %e, "support lookup could not be audited");
    }
    Some(outcome)
}
