//! Recharges that happen by themselves (Pix Automático), as the tools see them: a port the service
//! implements (the recurrence created at the provider, its authorisation code checked, put on record;
//! listed; cancelled), and the terms a card holder sets — below a threshold, or on a day of the month —
//! with the words that describe them. Without the port (no provider takes Pix Automático here), the
//! tool says so and does nothing.

use std::sync::Arc;

use async_trait::async_trait;
use rust_decimal::Decimal;

use crate::pix::automatico::AutomaticoConfig;
use crate::vt::FlowInput;
use crate::vt::input::Idioma;
use crate::vt::money::money_for_people;
use vt_contract::action::ActionError;
use vt_contract::context::ActionContext;

/// When an automatic recharge happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gatilho {
    /// When the balance falls below this (checked daily; at most once per period).
    Limite(Decimal),
    /// On this day of the month (a month without it: its last day).
    Dia(u32),
}

/// What a card holder asked for: when, and how much each time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Termos {
    pub gatilho: Gatilho,
    pub valor: Decimal,
}

impl Termos {
    /// "quando o saldo ficar abaixo de R$ 20,00, R$ 50,00 por vez" / "R$ 100,00 todo dia 5".
    pub fn describe(&self) -> String {
        match self.gatilho {
            Gatilho::Limite(l) => format!(
                "{} sempre que o saldo ficar abaixo de {}",
                brl(self.valor),
                brl(l)
            ),
            Gatilho::Dia(d) => format!("{} todo dia {d}", brl(self.valor)),
        }
    }
}

pub(crate) fn brl(v: Decimal) -> String {
    money_for_people("BRL", v, Idioma::PtBr)
}

/// A recurrence waiting for the card holder's authorisation in their bank app.
#[derive(Debug, Clone, PartialEq)]
pub struct Autorizacao {
    /// Our id for it.
    pub id: String,
    /// The line before the code: what it authorises, where.
    pub texto: String,
    /// The BR Code the bank app reads, checked.
    pub copia_e_cola: String,
}

/// One of the card holder's automatic recharges, as they read it in a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Resumo {
    /// The card, masked.
    pub cartao: String,
    /// "R$ 50,00 sempre que o saldo ficar abaixo de R$ 20,00 — ativa; próxima cobrança em 05/12".
    pub linha: String,
}

#[async_trait]
pub trait RecargasAutomaticas: Send + Sync {
    /// The operator's settings: limits, and the offer's terms.
    fn config(&self) -> &AutomaticoConfig;

    /// Creates the recurrence of `termos` for the recharge `input` (card, tenant, policy) at the
    /// provider, in the calling turn's conversation, and gives the code that authorises it. A change of
    /// terms is a new authorisation; the old one ends when the new one is approved.
    async fn autorizar(
        &self,
        ctx: &ActionContext,
        input: &FlowInput,
        termos: Termos,
    ) -> Result<Autorizacao, ActionError>;

    /// The calling user's automatic recharges (live or waiting for authorisation).
    async fn listar(&self, ctx: &ActionContext) -> Result<Vec<Resumo>, ActionError>;

    /// Cancels the calling user's automatic recharges (of `cartao` only, when given) at the provider;
    /// what was cancelled.
    async fn cancelar(&self, ctx: &ActionContext, cartao: Option<&str>) -> Result<Vec<Resumo>, ActionError>;
}

/// How tools find the port in their context.
pub type SharedRecargasAutomaticas = Arc<dyn RecargasAutomaticas>;

/// Where a conversation keeps the offer of an automatic recharge it was made, for its next message:
/// `{"cartao": "****7890"}`.
pub const STATE_OFERTA_AUTOMATICA: &str = "oferta_automatica";

/// The words that start the offer (after a receipt, with a low balance): a plain "sim" after them
/// accepts its terms for the card they name.
pub const OFERTA: &str = "Quer que eu recarregue sozinho o cartão";

/// The offer of an automatic recharge for `cartao` (masked), on the operator's default terms.
pub fn oferta(cartao: &str, config: &AutomaticoConfig) -> String {
    format!(
        "{OFERTA} {cartao} quando o saldo ficar abaixo de {}, com {} por vez? Responda *sim*, ou diga como prefere (por exemplo: \"recarrega 100 todo dia 5\").",
        brl(config.limite_padrao),
        brl(config.valor_padrao)
    )
}

/// The offer for card `masked`, where recharges can happen by themselves here and the user has none
/// live for that card.
pub(crate) async fn offer_for(ctx: &ActionContext, masked: &str) -> Option<String> {
    let port = ctx.get::<SharedRecargasAutomaticas>()?;
    if !port.config().ativo {
        return None;
    }
    let mine = port.listar(ctx).await.ok()?;
    (!mine.iter().any(|r| r.cartao == masked)).then(|| oferta(masked, port.config()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offer_names_its_card_and_terms() {
        let config = AutomaticoConfig::default();
        let text = oferta("****7890", &config);
        assert!(
            text.contains("abaixo de R$ 20,00, com R$ 50,00 por vez"),
            "{text}"
        );
        assert!(text.starts_with(OFERTA) && text.contains("****7890"), "{text}");
        let t = Termos {
            gatilho: Gatilho::Dia(5),
            valor: Decimal::new(100, 0),
        };
        assert_eq!(t.describe(), "R$ 100,00 todo dia 5");
    }
}
