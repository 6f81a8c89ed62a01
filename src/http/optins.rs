//! `POST /v1/optins`: a company's import of the WhatsApp users who agreed to receive notices — every
//! row checked before any is recorded, each recorded with the key that imported it. A person's own
//! PARAR given after the import's date wins.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::auth::Caller;
use super::error::{ApiError, ErrorBody};
use super::json::ApiJson;
use super::state::AppState;
use crate::service::OptIn;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct OptInsRequest {
    pub optins: Vec<OptIn>,
}

/// Records opt-ins.
#[utoipa::path(post, path = "/v1/optins", request_body = OptInsRequest,
    responses((status = 200, body = Object), (status = 400, body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn import(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<OptInsRequest>,
) -> Result<Json<Value>, ApiError> {
    let changes = OptIn::changes(&body.optins, &format!("api:{}", caller.name), chrono::Utc::now())
        .map_err(|e| ApiError::invalid(&e.field, e.why))?;
    let recorded = state
        .service
        .contacts()
        .import_opt_ins(&changes)
        .await
        .map_err(|e| ApiError::internal("opt-ins could not be recorded", &e))?;
    tracing::info!(key = %caller.name, recorded, "opt-ins imported");
    Ok(Json(json!({"registrados": recorded, "recebidos": changes.len()})))
}
