//! Notices the product delivers itself, on a channel it serves (WhatsApp), instead of handing them to
//! the notification system: a port the application fills (`ChannelNoticesPort` in the extensions).
//! RF5 asks it for a recipient it delivers to; everything else goes to the notification system as the
//! PRD says.

use std::sync::Arc;

use async_trait::async_trait;

pub use super::EnvioNotificacao;
use crate::vt::Destinatario;

/// A low balance to tell a card holder about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LowBalance {
    /// The card's digits (the port keeps only a keyed hash of it).
    pub cartao: String,
    /// The balance as people read it (`BRL 12,50`).
    pub saldo: String,
    /// The notice's text, as the notification system would get it.
    pub mensagem: String,
    /// The flow run that sends it (`execucao_id`): what the notice costs is that run's.
    pub execucao_id: Option<String>,
}

/// A recharge's outcome to tell a card holder about (RF10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RechargeResult {
    /// The card's digits.
    pub cartao: String,
    /// The amount as people read it (`BRL 50,00`).
    pub valor: String,
    /// What became of it, in a few words (`aprovada`, `negada`…).
    pub resultado: String,
    /// The notice's text, as the notification system would get it.
    pub mensagem: String,
    /// The flow run that sends it (`execucao_id`): what the notice costs is that run's.
    pub execucao_id: Option<String>,
}

#[async_trait]
pub trait ChannelNotices: Send + Sync {
    /// Whether this port delivers to `destinatario`.
    fn delivers_to(&self, destinatario: &Destinatario) -> bool;

    /// RF5 for `destinatario`: `card`'s balance is low (`Some`) — send or schedule the notice, or say
    /// why not — or back above the limit (`None`), which arms the next notice.
    async fn low_balance(
        &self,
        destinatario: &Destinatario,
        card: &str,
        notice: Option<&LowBalance>,
    ) -> EnvioNotificacao;

    /// RF10 for `destinatario`: send or schedule the recharge's outcome, or say why not.
    async fn recharge_result(&self, destinatario: &Destinatario, notice: &RechargeResult)
    -> EnvioNotificacao;
}

/// The port as the extensions carry it.
#[derive(Clone)]
pub struct ChannelNoticesPort(pub Arc<dyn ChannelNotices>);
