//! `POST /v1/flows/vt`: the ten-stage flow for one input, the same JSON in and out as `run-flow`.
//!
//! With an `Idempotency-Key` header (as payment APIs take one), the same key with the same body gets
//! the stored response (`Idempotent-Replayed: true`) and runs nothing; the same key with another body,
//! or while the first request still runs, gets 409. The key also scopes the recharge: it becomes the
//! input's `recarga.idempotency_key` when the body has none.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde_json::{Value, json};
use vt_domain::vt::input::MAX_IDEMPOTENCY_KEY_CHARS;

use super::auth::Caller;
use super::error::{ApiError, ErrorBody};
use super::json::{Body, digest};
use super::state::AppState;
use crate::flow::FlowOutput;
use crate::service::{FlowOptions, FlowRan};
use vt_store::{IdempotencyPut, IdempotencyRecord};

/// How long a key keeps its response.
const KEY_TTL: chrono::Duration = chrono::Duration::hours(24);
/// What a record holds while its request runs.
const IN_PROGRESS: &str = "em_andamento";

fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(raw) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let key = raw
        .to_str()
        .ok()
        .map(str::trim)
        .filter(|k| !k.is_empty() && k.chars().count() <= MAX_IDEMPOTENCY_KEY_CHARS)
        .ok_or_else(|| {
            ApiError::invalid(
                "Idempotency-Key",
                format!("use de 1 a {MAX_IDEMPOTENCY_KEY_CHARS} caracteres visíveis"),
            )
        })?;
    Ok(Some(key.to_owned()))
}

/// Run the ten-stage VT flow.
#[utoipa::path(post, path = "/v1/flows/vt",
    request_body(content = Object, description = "The flow input (components.schemas.FlowInput)"),
    params(("Idempotency-Key" = Option<String>, Header, description = "Same key + same body: the stored response")),
    responses((status = 200, body = FlowOutput), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 429, body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn run(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Body(text): Body,
) -> Result<Response, ApiError> {
    let key = idempotency_key(&headers)?;
    // Invalid input (or another tenant's) is refused before anything is stored, naming the field.
    let mut input = crate::flow::parse_input(state.service.engine(), &text, Some(&caller.tenant))?;
    if let Some(key) = key.as_deref() {
        input = input.with_request_key(key)?;
    }
    let Some(key) = key else {
        let output = execute(&state, input, caller.tenant).await?;
        return Ok(Json(output).into_response());
    };
    let store = state.stores.reports.clone();
    let now = Utc::now();
    let record = IdempotencyRecord {
        key: format!("flow:{}:{key}", caller.tenant),
        scope: "flows".into(),
        request_hash: digest(&text),
        response: json!(IN_PROGRESS),
        created_at: now,
        expires_at: now + KEY_TTL,
    };
    match store
        .put_idempotency(&record, now)
        .await
        .map_err(|e| ApiError::internal("idempotency record could not be written", &e))?
    {
        IdempotencyPut::Existing(existing) if existing.request_hash != record.request_hash => Err(
            ApiError::conflict("esta Idempotency-Key já foi usada com outro corpo"),
        ),
        IdempotencyPut::Existing(existing) if existing.response == json!(IN_PROGRESS) => Err(
            ApiError::conflict("uma requisição com esta Idempotency-Key ainda está em andamento"),
        ),
        IdempotencyPut::Existing(existing) => {
            let mut response = Json(existing.response).into_response();
            response
                .headers_mut()
                .insert("idempotent-replayed", HeaderValue::from_static("true"));
            Ok(response)
        }
        IdempotencyPut::Inserted => match execute(&state, input, caller.tenant.clone()).await {
            Ok(output) => {
                let value = vt_contract::json::to_value(&output).unwrap_or(Value::Null);
                if let Err(e) = store.settle_idempotency(&record.key, Some(&value)).await {
                    tracing::error!(error = %e, "idempotency response could not be stored");
                }
                Ok(Json(output).into_response())
            }
            Err(e) => {
                // Nothing to replay: the key is free for a new attempt.
                if let Err(e) = store.settle_idempotency(&record.key, None).await {
                    tracing::error!(error = %e, "idempotency record could not be released");
                }
                Err(e)
            }
        },
    }
}

async fn execute(
    state: &AppState,
    input: vt_domain::vt::FlowInput,
    tenant: String,
) -> Result<FlowOutput, ApiError> {
    let service = state.service.clone();
    let FlowRan {
        output, persisted, ..
    } = state
        .run(async move {
            service
                .flows()
                .run_flow(
                    input,
                    FlowOptions {
                        tenant: Some(&tenant),
                        ..FlowOptions::default()
                    },
                )
                .await
        })
        .await?
        .map_err(ApiError::from)?;
    if !persisted {
        tracing::warn!(execucao_id = %output.execucao_id, "flow run could not be stored");
    }
    state.metrics.flow(output.status);
    Ok(output.for_caller())
}
