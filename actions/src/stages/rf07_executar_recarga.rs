//! RF7 — posts the recharge, exactly once. An invalid payload is never sent; a transport error or
//! timeout is recorded and never re-sent (the charge may have happened: RF8 treats it as unknown).

use async_trait::async_trait;

use super::rf06_preparar_recarga::RecargaPayload;
use crate::action::{Action, ActionError};
use crate::context::ActionContext;
use crate::response::ActionResponse;
use crate::systems::{HttpResult, VtSystems};

/// The rule function (with the one I/O it needs).
pub async fn executar_recarga(systems: &VtSystems, payload: &RecargaPayload) -> HttpResult {
    let errors = payload.validation_errors();
    if !errors.is_empty() {
        return HttpResult::not_sent(
            "validacao",
            Some(&errors.join(",")),
            "payload inválido: a recarga não foi enviada",
        );
    }
    if payload.body.as_object().is_none_or(|b| b.is_empty()) {
        return HttpResult::not_sent(
            "validacao",
            Some("payload_vazio"),
            "payload vazio: a recarga não foi enviada",
        );
    }
    systems
        .recarregar(&payload.body, &payload.headers, payload.timeout_ms)
        .await
}

pub struct Rf07;

#[async_trait]
impl Action for Rf07 {
    type Args = RecargaPayload;

    fn name(&self) -> &'static str {
        "rf07_executar_recarga"
    }

    fn description(&self) -> &'static str {
        "RF7: envia a recarga uma única vez, com a chave de idempotência; nunca reenvia."
    }

    async fn call(
        &self,
        ctx: &ActionContext,
        payload: RecargaPayload,
    ) -> Result<ActionResponse, ActionError> {
        let out = executar_recarga(ctx.require::<VtSystems>()?, &payload).await;
        Ok(super::pass(&out)?.into())
    }
}
