//! The recharge waiting for the user's confirmation, kept in conversation state.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::ActionContext;
use crate::vt::{Idioma, MeioPagamento, Recarga, format_money, mask_card};

/// The state key.
pub const STATE_PENDENTE: &str = "recarga_pendente";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecargaPendente {
    pub id: String,
    pub cartao: String,
    #[serde(with = "crate::vt::input::money_serde")]
    pub valor: Decimal,
    pub moeda: String,
    pub meio_pagamento: String,
    #[serde(default)]
    pub token: Option<crate::vt::PaymentToken>,
    /// The idempotency key the recharge will carry: derived from this confirmation ([`Self::request_key`]),
    /// so confirming it twice is one charge and a new confirmed request is a new charge.
    pub idempotency_key: String,
    /// The turn that asked for confirmation: a confirmation must come in a later user message.
    pub criada_no_turno: String,
    pub expira_em: DateTime<Utc>,
}

impl RecargaPendente {
    pub(crate) fn from_state(ctx: &ActionContext) -> Option<Self> {
        ctx.state
            .get(STATE_PENDENTE)
            .cloned()
            .and_then(|v| crate::json::from_value(v).ok())
    }

    /// The id of the recharge waiting in a conversation's `state`, if one is.
    pub fn id_in(state: &serde_json::Map<String, Value>) -> Option<String> {
        state
            .get(STATE_PENDENTE)
            .and_then(|v| v.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    }

    pub fn to_value(&self) -> Value {
        crate::json::to_value(self).unwrap_or(Value::Null)
    }

    /// The request key RF6 derives the idempotency key from: this confirmation's id.
    pub(crate) fn request_key(id: &str) -> String {
        format!("confirmacao:{id}")
    }

    pub fn recarga(&self) -> Recarga {
        Recarga {
            valor: Some(self.valor),
            moeda: Some(self.moeda.clone()),
            meio_pagamento: MeioPagamento {
                tipo: self.meio_pagamento.clone(),
                token: self.token.clone(),
            },
            idempotency_key: Some(Self::request_key(&self.id)),
        }
    }

    /// `BRL 50,00 no cartão ****7890 via PIX`, for messages.
    pub fn describe(&self) -> String {
        let meio = match self.meio_pagamento.as_str() {
            "pix" => "PIX",
            "boleto" => "boleto",
            _ => "cartão de crédito",
        };
        format!(
            "{} no cartão {} via {meio}",
            format_money(&self.moeda, self.valor, Idioma::PtBr),
            mask_card(&self.cartao)
        )
    }
}
