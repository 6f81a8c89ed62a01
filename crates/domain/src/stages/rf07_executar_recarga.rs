//! RF7 — posts the recharge, exactly once. An invalid payload is never sent; a transport error or
//! timeout is recorded and never re-sent here (the charge may have happened: RF8 treats it as unknown).
//!
//! Before sending, the attempt (key, masked card, value) and the request itself are put in the
//! recharge journal, so a process killed mid-request leaves a trace an operator can see, and a
//! follow-up (`stages::acompanhamento`, run by `serve`) can send the same request under the same key
//! until the recharge system says what became of it; if they cannot be put there, nothing is sent.
//! The key goes to memory for RF8, which records how the attempt ended.

use async_trait::async_trait;

use super::rf06_preparar_recarga::{RecargaPayload, escopo, impressao};
use crate::journal::{RechargeAttempt, RechargeRequest, SharedJournal};
use crate::systems::{HttpResult, Systems, SystemsPort};
use crate::vt::{FlowInput, PaymentToken, decimal_from_json, mask_card};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::ActionResponse;

/// Memory key: the idempotency key of the attempt RF7 sent, for RF8.
pub(crate) const MEMORY_CHAVE: &str = "recarga_chave";
/// Memory key: RF6's observations about the key, carried into RF8's.
pub(crate) const MEMORY_OBSERVACOES_RF6: &str = "recarga_observacoes";

/// What the journal records of a valid payload sent from conversation `origin` by run `execucao_id`.
pub fn tentativa(
    payload: &RecargaPayload,
    input: &FlowInput,
    origin: &str,
    execucao_id: &str,
) -> Option<RechargeAttempt> {
    if !payload.validation_errors().is_empty() {
        return None;
    }
    let body = payload.body.as_object()?;
    Some(RechargeAttempt {
        idempotency_key: payload.idempotency_key().to_owned(),
        fingerprint: impressao(payload)?,
        scope: escopo(input),
        origin: origin.to_owned(),
        execucao_id: execucao_id.to_owned(),
        cartao_mascarado: mask_card(body.get("cartao")?.as_str()?),
        valor: body.get("valor").and_then(decimal_from_json)?,
        moeda: body.get("moeda")?.as_str()?.to_owned(),
    })
}

/// The request RF7 sends for `payload`, the payment token's value in its body; `Err` with what RF8
/// reads when nothing may be sent.
pub(crate) fn pedido(payload: &RecargaPayload) -> Result<RechargeRequest, Box<HttpResult>> {
    let errors = payload.validation_errors();
    if !errors.is_empty() {
        return Err(Box::new(HttpResult::not_sent(
            "validacao",
            Some(&errors.join(",")),
            "payload inválido: a recarga não foi enviada",
        )));
    }
    if payload.body.as_object().is_none_or(|b| b.is_empty()) {
        return Err(Box::new(HttpResult::not_sent(
            "validacao",
            Some("payload_vazio"),
            "payload vazio: a recarga não foi enviada",
        )));
    }
    // The payload carries the token's fingerprint; the request alone carries its value.
    let mut body = payload.body.clone();
    if PaymentToken::reveal_in(&mut body).is_err() {
        return Err(Box::new(HttpResult::not_sent(
            "validacao",
            Some("token_indisponivel"),
            "o token de pagamento não está disponível: a recarga não foi enviada",
        )));
    }
    Ok(RechargeRequest {
        body,
        headers: payload.headers.clone(),
        timeout_ms: payload.timeout_ms,
    })
}

/// Sends `request`, once (a follow-up sends the same request again, under the same key).
pub(crate) async fn enviar(systems: &dyn Systems, request: &RechargeRequest) -> HttpResult {
    systems
        .recarregar(&request.body, &request.headers, request.timeout_ms)
        .await
}

/// Puts the attempt and its request on record, when there is a journal: `Err` with what RF8 reads
/// when it could not be (then nothing is sent).
async fn on_record(
    ctx: &ActionContext,
    payload: &RecargaPayload,
    request: &RechargeRequest,
) -> Result<(), ActionError> {
    let Some(journal) = ctx.get::<SharedJournal>() else {
        return Ok(());
    };
    let input = super::entrada(ctx)?;
    let recorded = match tentativa(payload, input, &ctx.conversation_id, &ctx.turn_id) {
        Some(a) => journal.begin(&a, request).await.map_err(|e| e.to_string()),
        None => Err("payload without card, value or currency".to_owned()),
    };
    recorded.map_err(|why| {
        tracing::error!(error = %why, "recharge attempt could not be recorded; not sent");
        ActionError::failed("registro_indisponivel", why)
    })
}

pub(crate) struct Rf07;

#[async_trait]
impl Action for Rf07 {
    type Args = RecargaPayload;

    const NAME: &'static str = "rf07_executar_recarga";
    const DESCRIPTION: &'static str =
        "RF7: envia a recarga uma única vez, com a chave de idempotência; nunca reenvia.";

    async fn call(
        &self,
        ctx: &ActionContext,
        payload: RecargaPayload,
    ) -> Result<ActionResponse, ActionError> {
        let out = match pedido(&payload) {
            Err(not_sent) => *not_sent,
            Ok(request) => match on_record(ctx, &payload, &request).await {
                Ok(()) => enviar(ctx.require::<SystemsPort>()?.get(), &request).await,
                Err(_) => HttpResult::not_sent(
                    "nao_enviado",
                    Some("registro_indisponivel"),
                    "a tentativa não pôde ser registrada: a recarga não foi enviada",
                ),
            },
        };
        Ok(super::pass(&out)?
            .with_memory(MEMORY_CHAVE, payload.idempotency_key())
            .with_memory(MEMORY_OBSERVACOES_RF6, serde_json::json!(payload.observacoes))
            .into())
    }
}
