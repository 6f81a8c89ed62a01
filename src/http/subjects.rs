//! `/v1/titulares`: a data subject's rights over HTTP, for administrators — everything kept about a
//! person (`exportar`), or its erasure (`apagar`), as `vt-agent titular` does. The person is named in
//! the body, never in the URL (URLs reach access logs).

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::auth::Caller;
use super::config::Role;
use super::error::{ApiError, ErrorBody};
use super::json::ApiJson;
use super::state::AppState;

/// Whose data: one of `usuario` or `cartao`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SubjectRequest {
    pub usuario: Option<String>,
    pub cartao: Option<String>,
}

fn subject(caller: &Caller, body: &SubjectRequest) -> Result<vt_store::Subject, ApiError> {
    if caller.role != Role::Admin {
        return Err(ApiError::forbidden(
            "os direitos do titular exigem uma chave de papel admin",
        ));
    }
    crate::retention::subject(body.usuario.as_deref(), body.cartao.as_deref())
        .map_err(|why| ApiError::invalid("corpo", why))
}

/// Everything kept about a person, in clear.
#[utoipa::path(post, path = "/v1/titulares/exportar", request_body = SubjectRequest,
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn export(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<SubjectRequest>,
) -> Result<Json<Value>, ApiError> {
    let subject = subject(&caller, &body)?;
    crate::retention::export(&state.stores, &subject)
        .await
        .map(Json)
        .map_err(|e| ApiError::internal("data subject export failed", &e))
}

/// Erases everything kept about a person.
#[utoipa::path(post, path = "/v1/titulares/apagar", request_body = SubjectRequest,
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn erase(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<SubjectRequest>,
) -> Result<Json<Value>, ApiError> {
    let subject = subject(&caller, &body)?;
    let gone = crate::retention::erase(
        &state.stores,
        &subject,
        (&caller.name, &caller.tenant),
        state.simulator_book.as_deref(),
    )
    .await
    .map_err(|e| ApiError::internal("data subject erasure failed", &e))?;
    Ok(Json(json!({
        "conversas_apagadas": gone.conversations.len(),
        "execucoes_apagadas": gone.flow_runs.len(),
    })))
}
