//! The recharge waiting for the user's confirmation, kept in conversation state.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::vt::{Idioma, MeioPagamento, Recarga, mask_card, money_for_people};
use vt_contract::context::ActionContext;

/// The state key.
pub const STATE_PENDENTE: &str = "recarga_pendente";
/// State key: the recharge whose question was the last thing said to the user, with the turn that
/// said it. A typed "sim" confirms only this recharge: the service clears the mark after every turn
/// that did not set it (`Perguntada::stands_after`), so a question followed by any other answer of
/// ours no longer stands, and "sim" then gets the question again instead of a charge.
pub const STATE_PERGUNTADA: &str = "recarga_perguntada";

/// Which recharge was asked last, and in which turn ([`STATE_PERGUNTADA`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Perguntada {
    /// The pending recharge's id.
    pub id: String,
    /// The turn that asked (a tap on a button of the request says [`Perguntada::TAP`]).
    pub turno: String,
}

impl Perguntada {
    /// The turn of a mark a tap on the request's own button leaves: the tap names its request.
    pub const TAP: &'static str = "botao";

    /// The mark that recharge `id` was asked in turn `turno`, as the state holds it.
    pub fn mark(id: &str, turno: &str) -> Value {
        vt_contract::json::to_value(Self {
            id: id.to_owned(),
            turno: turno.to_owned(),
        })
        .unwrap_or(Value::Null)
    }

    /// The mark in a conversation's `state`, if one is.
    pub fn in_state(state: &serde_json::Map<String, Value>) -> Option<Self> {
        state
            .get(STATE_PERGUNTADA)
            .and_then(|v| vt_contract::json::from_ref(v).ok())
    }

    /// Whether the mark still stands once turn `turn_id` has answered: only when that turn said the
    /// question (again) and the recharge it names is still the one waiting.
    pub fn stands_after(state: &serde_json::Map<String, Value>, turn_id: &str) -> bool {
        let pending = RecargaPendente::id_in(state);
        Self::in_state(state).is_some_and(|a| a.turno == turn_id && pending.as_deref() == Some(a.id.as_str()))
    }
}

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
            .and_then(|v| vt_contract::json::from_value(v).ok())
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
        vt_contract::json::to_value(self).unwrap_or(Value::Null)
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

    /// Whether the user's last sight of us was this recharge's question ([`STATE_PERGUNTADA`]).
    pub(crate) fn was_asked_last(&self, ctx: &ActionContext) -> bool {
        Perguntada::in_state(&ctx.state).is_some_and(|a| a.id == self.id)
    }

    /// The question again, when the user answers something else or a "sim" that no longer follows it.
    pub fn restated(&self) -> String {
        format!(
            "A recarga de {} ainda espera a sua confirmação. Responda *sim* para confirmar ou *não* para cancelar.",
            self.describe()
        )
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
            money_for_people(&self.moeda, self.valor, Idioma::PtBr),
            mask_card(&self.cartao)
        )
    }
}
