//! A request that changes a card — a block, a second copy — waiting in conversation state for the
//! card holder's own "sim" (and, for a card the conversation has no record of, for the check the
//! operator configures). It stands for the next message only: the service drops it after any turn that
//! neither asked it nor answered it, so a "sim" said later to something else never blocks a card.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::systems::contract::MotivoBloqueio;
use crate::vt::{Idioma, mask_card, money_for_people};
use vt_contract::context::ActionContext;

/// The state key.
pub const STATE_PEDIDO_CARTAO: &str = "pedido_cartao";
/// State key: the last request that changed a card, as the card system answered it
/// (`{"acao", "protocolo", "cartao"}`, the card masked).
pub const STATE_ULTIMO_PEDIDO: &str = "ultimo_pedido_cartao";

/// What the request does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "acao", rename_all = "snake_case")]
pub enum AcaoCartao {
    Bloqueio {
        motivo: MotivoBloqueio,
    },
    SegundaVia {
        /// The fee the card system quoted.
        #[serde(with = "crate::vt::input::money_serde")]
        taxa: Decimal,
        /// The balance and the pending credits that move to the new card, as quoted.
        #[serde(with = "crate::vt::input::money_serde")]
        saldo: Decimal,
        #[serde(with = "crate::vt::input::money_serde")]
        creditos: Decimal,
        /// How the fee is paid (`pix`, `boleto`, `cartao_credito`), where one is due.
        #[serde(default)]
        meio: Option<String>,
    },
}

impl AcaoCartao {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Bloqueio { .. } => "bloqueio",
            Self::SegundaVia { .. } => "segunda_via",
        }
    }
}

/// The request waiting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PedidoCartao {
    pub id: String,
    pub cartao: String,
    #[serde(flatten)]
    pub acao: AcaoCartao,
    /// The card holder was checked (the card on record, or the operator's check passed); until then
    /// the next message is read as the answer to the check, never as a yes.
    pub verificado: bool,
    /// The turn that asked: the answer must come in a later message, the very next one.
    pub perguntado_no_turno: String,
    pub expira_em: DateTime<Utc>,
}

impl PedidoCartao {
    pub fn new(ctx: &ActionContext, cartao: &str, acao: AcaoCartao, verificado: bool) -> Self {
        let ttl = super::VtSettings::of(ctx).confirmation_ttl_secs;
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            cartao: cartao.to_owned(),
            acao,
            verificado,
            perguntado_no_turno: ctx.turn_id.clone(),
            expira_em: ctx.now + chrono::Duration::seconds(ttl),
        }
    }

    pub(crate) fn from_state(ctx: &ActionContext) -> Option<Self> {
        Self::in_state(&ctx.state)
    }

    /// The request waiting in a conversation's `state`, if one is.
    pub fn in_state(state: &serde_json::Map<String, Value>) -> Option<Self> {
        state
            .get(STATE_PEDIDO_CARTAO)
            .filter(|v| !v.is_null())
            .and_then(|v| vt_contract::json::from_ref(v).ok())
    }

    pub fn to_value(&self) -> Value {
        vt_contract::json::to_value(self).unwrap_or(Value::Null)
    }

    /// Whether the request still stands once turn `turn_id` has answered: only when that turn asked
    /// it (again).
    pub fn stands_after(state: &serde_json::Map<String, Value>, turn_id: &str) -> bool {
        Self::in_state(state).is_some_and(|p| p.perguntado_no_turno == turn_id)
    }

    /// The `x-idempotency-key` the card system is sent: this request's, so a request confirmed and
    /// sent again (a kill, another process) changes the card once.
    pub fn key(&self) -> String {
        format!("{}:{}", self.acao.name(), self.id)
    }

    pub fn masked(&self) -> String {
        mask_card(&self.cartao)
    }

    /// The question the card holder answers with a yes.
    pub fn question(&self) -> String {
        let masked = self.masked();
        match &self.acao {
            AcaoCartao::Bloqueio { motivo } => format!(
                "Confirma o bloqueio do cartão {masked} por {}? Depois de bloqueado ele não passa mais na catraca, e o saldo fica guardado para a segunda via. Responda *sim* para bloquear ou *não* para desistir.",
                motivo.said()
            ),
            AcaoCartao::SegundaVia {
                taxa,
                saldo,
                creditos,
                meio,
            } => {
                let moves = money_for_people("BRL", *saldo + *creditos, Idioma::PtBr);
                let fee = if taxa.is_zero() {
                    "sem taxa".to_owned()
                } else {
                    format!(
                        "com taxa de {}{}",
                        money_for_people("BRL", *taxa, Idioma::PtBr),
                        meio.as_deref()
                            .map(|m| format!(" paga por {}", said_means(m)))
                            .unwrap_or_default()
                    )
                };
                format!(
                    "Confirma o pedido da segunda via do cartão {masked}, {fee}? O saldo de {moves} passa para o cartão novo, e o cartão {masked} é cancelado. Responda *sim* para pedir ou *não* para desistir."
                )
            }
        }
    }
}

/// A means of payment in the card holder's words.
pub(crate) fn said_means(meio: &str) -> &'static str {
    match meio {
        "pix" => "Pix",
        "boleto" => "boleto",
        _ => "cartão de crédito",
    }
}

/// How the card holder of a card the conversation has no record of is checked before it is blocked
/// or replaced (`[autoatendimento]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verificacao {
    /// Only a card the conversation has on record (one the person gave in an earlier message): any
    /// other is refused, with the way to a person.
    #[default]
    CartaoLembrado,
    /// The last three digits of the holder's CPF, asked and checked by the card system (never kept).
    CpfFinal,
}

/// `[autoatendimento]`: what the card holder may do to their card alone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Autoatendimento {
    /// How a card not on record is checked: `cartao_lembrado` (refused) or `cpf_final`.
    pub verificacao: Verificacao,
}

impl Autoatendimento {
    /// The settings the engine was given, or the defaults.
    pub fn of(ctx: &ActionContext) -> Self {
        ctx.get::<Self>().cloned().unwrap_or_default()
    }
}
