//! RF2 — calls the balance API with RF1's payload, within its retry policy. An invalid payload
//! (`x-validation-error`, or no card) is never sent; a transport error or timeout is recorded and not
//! re-sent.

use async_trait::async_trait;

use super::rf01_preparar_consulta::ConsultaPayload;
use crate::systems::{HttpResult, Systems, SystemsPort};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::ActionResponse;

/// The rule function (with the one I/O it needs).
pub(crate) async fn executar_consulta(systems: &dyn Systems, payload: &ConsultaPayload) -> HttpResult {
    let invalid = payload.headers.get("x-validation-error");
    let cartao = match (&payload.query.cartao, invalid) {
        (Some(c), None) => c,
        (_, code) => {
            let code = code.map_or("cartao_invalido", String::as_str);
            return HttpResult::not_sent(
                "validacao",
                Some(code),
                "payload inválido: a consulta não foi enviada",
            );
        }
    };
    let mut headers = payload.headers.clone();
    headers.remove("x-validation-error");
    let attempts = payload.retry_policy.max_attempts.clamp(1, 2);
    let backoff = payload
        .retry_policy
        .backoff_ms
        .unwrap_or(0)
        .max(super::rf01_preparar_consulta::BACKOFF_MS);
    systems
        .consultar_saldo(cartao, &headers, payload.timeout_ms, attempts, backoff)
        .await
}

pub(crate) struct Rf02;

#[async_trait]
impl Action for Rf02 {
    type Args = ConsultaPayload;

    const NAME: &'static str = "rf02_executar_consulta";
    const DESCRIPTION: &'static str =
        "RF2: executa a consulta de saldo na API do sistema de VT respeitando a política de retry.";

    async fn call(
        &self,
        ctx: &ActionContext,
        payload: ConsultaPayload,
    ) -> Result<ActionResponse, ActionError> {
        let out = executar_consulta(ctx.require::<SystemsPort>()?.get(), &payload).await;
        Ok(super::pass(&out)?.into())
    }
}
