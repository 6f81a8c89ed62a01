//! The ten stages of the VT flow (PRD §6, RF1..RF10), one file each. Every stage is a pure rule
//! function (unit-tested rule by rule) plus a thin [`Action`](vt_contract::Action) that the engine runs as a
//! deterministic skill: it receives the previous stage's output as its arguments and answers with its
//! own output as a value ([`ResponseToAgent::with_output`]), which is all the next stage sees.
//!
//! The flow input is parsed once where it enters and travels typed with the turn ([`entrada`]); RF3's
//! normalised balance travels in memory under [`MEMORY_SALDO`] for RF5's summary and RF8's
//! `saldo_anterior`.
#![warn(clippy::too_many_lines)] // on run-flow's path: see clippy.toml

pub mod acompanhamento;
pub mod channel_notices;
mod conclusao;
mod notificacao;
pub mod rf01_preparar_consulta;
pub mod rf02_executar_consulta;
pub mod rf03_normalizar_saldo;
pub mod rf04_decidir_notificacao;
pub mod rf05_enviar_notificacao;
pub mod rf06_preparar_recarga;
pub mod rf07_executar_recarga;
pub mod rf08_conciliar_recarga;
pub mod rf09_preparar_notificacao_recarga;
pub mod rf10_enviar_notificacao_recarga;

pub use conclusao::{Conclusao, conclusao, novo_saldo, saldo_lido};
pub use notificacao::{DecisaoNotificacao, EnvioNotificacao, NotificacaoPayload};

use crate::vt::timezone::Timezone;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::vt::FlowInput;
use vt_contract::action::{ActionError, ActionRegistry, DuplicateAction};
use vt_contract::context::ActionContext;
use vt_contract::response::ResponseToAgent;

/// The stage ids, in order. They are also the skill and action names.
pub const STAGES: [&str; 10] = [
    "rf01_preparar_consulta",
    "rf02_executar_consulta",
    "rf03_normalizar_saldo",
    "rf04_decidir_notificacao",
    "rf05_enviar_notificacao",
    "rf06_preparar_recarga",
    "rf07_executar_recarga",
    "rf08_conciliar_recarga",
    "rf09_preparar_notificacao_recarga",
    "rf10_enviar_notificacao_recarga",
];

pub(crate) const MEMORY_SALDO: &str = "saldo";

/// Registers the ten stage actions.
pub fn register(registry: &mut ActionRegistry) -> Result<(), DuplicateAction> {
    registry.register(rf01_preparar_consulta::Rf01)?;
    registry.register(rf02_executar_consulta::Rf02)?;
    registry.register(rf03_normalizar_saldo::Rf03)?;
    registry.register(rf04_decidir_notificacao::Rf04)?;
    registry.register(rf05_enviar_notificacao::Rf05)?;
    registry.register(rf06_preparar_recarga::Rf06)?;
    registry.register(rf07_executar_recarga::Rf07)?;
    registry.register(rf08_conciliar_recarga::Rf08)?;
    registry.register(rf09_preparar_notificacao_recarga::Rf09)?;
    registry.register(rf10_enviar_notificacao_recarga::Rf10)?;
    Ok(())
}

/// The flow input, parsed and checked once where it entered: the flow's turn carries it typed
/// (`TurnInput::with_data` in the engine), and every stage reads it here.
pub(crate) fn entrada(ctx: &ActionContext) -> Result<&FlowInput, ActionError> {
    ctx.get::<FlowInput>().ok_or_else(|| {
        ActionError::failed(
            "entrada do fluxo ausente",
            "the turn carries no flow input: a flow runs through the service or flow::run_flow",
        )
    })
}

/// A stage's output as the value handed to the next stage.
pub(crate) fn saida<T: Serialize>(out: &T) -> Result<Value, ActionError> {
    vt_contract::json::to_value(out)
        .map_err(|e| ActionError::failed("falha ao serializar a saída da etapa", e.to_string()))
}

/// Hands `out` to the next stage (the skill's `next`), as a value.
pub(crate) fn pass<T: Serialize>(out: &T) -> Result<ResponseToAgent, ActionError> {
    Ok(ResponseToAgent::new(String::new()).with_output(saida(out)?))
}

/// ISO 8601 with the policy timezone's offset, to the second.
pub(crate) fn iso_local(t: DateTime<Utc>, tz: &Timezone) -> String {
    tz.local(t).to_rfc3339_opts(chrono::SecondsFormat::Secs, false)
}
