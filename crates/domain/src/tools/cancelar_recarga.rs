//! `cancelar_recarga`: drops the pending recharge; nothing is charged.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::pendente::{RecargaPendente, STATE_PENDENTE};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, ResponseToUser};

pub struct CancelarRecarga;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Args {}

#[async_trait]
impl Action for CancelarRecarga {
    type Args = Args;

    const NAME: &'static str = "cancelar_recarga";
    const DESCRIPTION: &'static str = "Cancela a recarga que aguarda confirmação. Nada é cobrado.";

    fn offered(&self, state: &serde_json::Map<String, Value>, _: &vt_contract::context::Extensions) -> bool {
        state.get(STATE_PENDENTE).is_some_and(|v| !v.is_null())
    }

    async fn call(&self, ctx: &ActionContext, _args: Args) -> Result<ActionResponse, ActionError> {
        Ok(match RecargaPendente::from_state(ctx) {
            Some(p) => ResponseToUser::new(
                format!(
                    "Tudo bem, a recarga de {} foi cancelada. Nada foi cobrado.",
                    p.describe()
                ),
                format!(
                    "Recarga pendente {} cancelada pelo usuário; nada foi cobrado.",
                    p.id
                ),
            )
            .with_state(STATE_PENDENTE, Value::Null),
            None => ResponseToUser::new(
                "Não há nenhuma recarga esperando confirmação, então não há nada para cancelar.",
                "Pedido de cancelamento sem recarga pendente: nada foi feito.",
            ),
        }
        .into())
    }
}
