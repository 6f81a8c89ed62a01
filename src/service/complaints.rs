//! A complaint about a payment, as the tools see it ([`vt_domain::tools::Pagamentos`]): the calling
//! turn's conversation's charges — Pix codes and card checkouts — read from the store as the
//! complaint's rules read them (`verificar_pagamento`). Only the conversation's own charges: what
//! another conversation paid is never told here.

use std::sync::Arc;

use vt_contract::{ActionContext, ActionError};
use vt_domain::tools::{PagamentoVisto, Pagamentos, SharedPagamentos, Situacao};
use vt_domain::vt::FlowInput;

use vt_store::{ChargeMeans, ChargeStatus, PixCharge, PixStore};

struct ChargeHistory {
    store: Arc<dyn PixStore>,
}

/// A stored charge as a complaint reads it; `None` for one whose recharge cannot be read.
fn seen(charge: &PixCharge) -> Option<PagamentoVisto> {
    let recharge = FlowInput::from_value(&charge.request).ok()?;
    Some(PagamentoVisto {
        cartao: recharge.cartao,
        valor: charge.amount,
        meio: match charge.meio {
            ChargeMeans::Pix => "pix",
            ChargeMeans::CartaoCredito => "cartao_credito",
        },
        situacao: match charge.status {
            ChargeStatus::Ativa => Situacao::Aguardando,
            ChargeStatus::Paga => Situacao::Paga,
            ChargeStatus::Enviada => Situacao::Enviada,
            ChargeStatus::Creditada => Situacao::Creditada,
            ChargeStatus::Devolvida => Situacao::Devolvida,
            ChargeStatus::Expirada => Situacao::Expirada,
        },
        criado_em: charge.created_at,
        expira_em: charge.expires_at,
        pago_em: charge.paid_at,
        devolucao: charge.refund.as_ref().map(|r| r.status.clone()),
    })
}

#[async_trait::async_trait]
impl Pagamentos for ChargeHistory {
    async fn da_conversa(&self, ctx: &ActionContext) -> Result<Vec<PagamentoVisto>, ActionError> {
        let mut charges = self
            .store
            .conversation_charges(&ctx.conversation_id)
            .await
            .map_err(|e| ActionError::failed("não foi possível consultar os pagamentos", e.to_string()))?;
        charges.sort_by_key(|c| c.created_at);
        Ok(charges.iter().filter_map(seen).collect())
    }
}

/// The port `verificar_pagamento` reads a conversation's charges through.
pub fn payments_port(store: Arc<dyn PixStore>) -> SharedPagamentos {
    Arc::new(ChargeHistory { store })
}
