//! `/v1/batches`: the ten-stage flow for every line of a JSON Lines body, as a background job.
//!
//! `POST` answers 202 with the job's id at once; the id is derived from the caller's tenant and the body,
//! so sending the same body again names the same job (and charges nothing again). `GET /v1/batches/{id}`
//! tells progress and counts; `GET /v1/batches/{id}/results` gives the result lines recorded so far.
//! A job belongs to the tenant of the key that sent it; another tenant's job is "not found".

use std::collections::BTreeMap;
use std::num::NonZeroU32;

use axum::Json;
use axum::extract::{Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::Caller;
use super::error::{ApiError, ErrorBody};
use super::state::AppState;
use crate::batch::Options;
use crate::batch::background::{Submission, SubmitError};
use crate::batch::source::SourceError;
use crate::flow::FlowMode;
use vt_store::BatchJob;

#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct BatchParams {
    /// RF1–RF6 only: nothing charged.
    #[serde(default)]
    pub dry_run: bool,
    /// Flows at once (1–64, default 8).
    #[serde(default)]
    pub concurrency: Option<usize>,
    /// Flows started per second at most.
    #[serde(default)]
    #[param(value_type = Option<u32>, minimum = 1)]
    pub rate: Option<NonZeroU32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct BatchAccepted {
    pub id: String,
    /// Lines read from the body.
    pub total: i64,
    /// Where its progress is.
    pub status_url: String,
    pub results_url: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct BatchView {
    pub id: String,
    /// `em_andamento`, `concluido` (every line ended) or `interrompido` (stopped with the server; it
    /// resumes when the server starts again).
    pub status: String,
    pub dry_run: bool,
    pub total: i64,
    /// Lines that ended.
    pub done: i64,
    /// Ended lines by status (`concluido`, `pendente`, `falhou`, `invalida`).
    pub counts: BTreeMap<String, i64>,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// Start a batch job from a JSON Lines body (one flow input a line).
#[utoipa::path(post, path = "/v1/batches", params(BatchParams),
    request_body(content = String, content_type = "application/x-ndjson", description = "One flow input (components.schemas.FlowInput) a line"),
    responses((status = 202, body = BatchAccepted), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 429, body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<BatchParams>, axum::extract::rejection::QueryRejection>,
    req: Request,
) -> Result<Response, ApiError> {
    let Query(params) = query.map_err(|e| ApiError::invalid("query", query_error(&e)))?;
    let concurrency = params.concurrency.unwrap_or(8);
    if !(1..=64).contains(&concurrency) {
        return Err(ApiError::invalid("concurrency", "use de 1 a 64"));
    }
    let limit = state.config.batch_body_limit_bytes;
    let bytes = axum::body::to_bytes(req.into_body(), limit)
        .await
        .map_err(|_| ApiError::too_large(limit))?;
    let text = String::from_utf8(bytes.to_vec())
        .map_err(|_| ApiError::invalid("corpo", "o corpo não é texto UTF-8 válido"))?;
    let background = state.batches.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "lotes não estão disponíveis neste serviço",
        )
    })?;
    let options = Options {
        concurrency,
        rate: params.rate,
        mode: if params.dry_run {
            FlowMode::DryRun
        } else {
            FlowMode::Full
        },
    };
    let submission = Submission {
        tenant_id: caller.tenant.clone(),
        text,
        options,
    };
    let job = background.submit(submission).await.map_err(|e| match e {
        SubmitError::Source(SourceError::Empty) => ApiError::invalid("corpo", e.to_string()),
        SubmitError::Source(e) => ApiError::invalid("corpo", e.to_string()),
        SubmitError::Batch(crate::batch::BatchError::Store(e)) => {
            ApiError::internal("batch job could not be recorded", &e)
        }
        SubmitError::Batch(e) => ApiError::conflict(e.to_string()),
    })?;
    let accepted = BatchAccepted {
        status_url: format!("/v1/batches/{}", job.id),
        results_url: format!("/v1/batches/{}/results", job.id),
        id: job.id,
        total: job.total,
    };
    Ok((StatusCode::ACCEPTED, Json(accepted)).into_response())
}

/// A batch job's progress.
#[utoipa::path(get, path = "/v1/batches/{id}",
    responses((status = 200, body = BatchView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<BatchView>, ApiError> {
    let job = owned_job(&state, &caller, &id).await?;
    let counts: BTreeMap<String, i64> = state
        .stores
        .batches
        .batch_counts(&id)
        .await
        .map_err(|e| ApiError::internal("batch counts could not be read", &e))?
        .into_iter()
        .map(|(status, n)| (status.as_str().to_owned(), n))
        .collect();
    // Running here, or a chunk leased by another instance.
    let running = state.batches.as_ref().is_some_and(|b| b.is_running(&id))
        || state
            .stores
            .batches
            .batch_chunks_open(&id, Utc::now())
            .await
            .is_ok_and(|(_, leased)| leased > 0);
    let status = match (job.finished_at, running) {
        (Some(_), _) => "concluido",
        (None, true) => "em_andamento",
        (None, false) => "interrompido",
    };
    Ok(Json(BatchView {
        id: job.id,
        status: status.into(),
        dry_run: job.dry_run,
        total: job.total,
        done: counts.values().sum(),
        counts,
        created_at: job.created_at,
        finished_at: job.finished_at,
    }))
}

/// The result lines recorded so far, by line number (JSON Lines: line, execucao_id, status, resultado
/// or error).
#[utoipa::path(get, path = "/v1/batches/{id}/results",
    responses((status = 200, content_type = "application/x-ndjson", body = String), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn results(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    owned_job(&state, &caller, &id).await?;
    let lines = state
        .stores
        .batches
        .batch_lines(&id)
        .await
        .map_err(|e| ApiError::internal("batch results could not be read", &e))?;
    let mut body = String::new();
    for line in lines {
        body.push_str(&line.result.to_string());
        body.push('\n');
    }
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response())
}

/// The job, if it exists and is the caller's tenant's.
async fn owned_job(state: &AppState, caller: &Caller, id: &str) -> Result<BatchJob, ApiError> {
    let job = if crate::batch::valid_id(id) {
        state
            .stores
            .batches
            .batch(id)
            .await
            .map_err(|e| ApiError::internal("batch could not be read", &e))?
    } else {
        None
    };
    job.filter(|j| j.tenant_id == caller.tenant)
        .ok_or_else(|| ApiError::not_found("o lote"))
}

/// serde's query error names the parameter and the type, and quotes no value.
fn query_error(e: &axum::extract::rejection::QueryRejection) -> String {
    vt_contract::redact::serde_message(&e.body_text())
}
