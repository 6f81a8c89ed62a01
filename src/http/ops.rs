//! What operators and tools read: liveness, readiness (the store answers and is migrated), metrics in
//! Prometheus text, and the OpenAPI document — generated from the handlers' own types, plus the flow
//! input's JSON Schema from the type the flow parses.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde_json::{Value, json};
use utoipa::OpenApi;

use super::auth::Caller;
use super::config::Role;
use super::conversations::{
    Button, CartaoOut, ConversationView, Created, MessageRequest, MessageResponse, MessageView,
    NewConversation, PixOut, ReplyOut, User,
};
use super::error::{ApiError, ErrorBody, ErrorDetail};
use super::state::AppState;
use crate::flow::{Etapa, FlowOutput, FlowStatus};

/// Alive.
#[utoipa::path(get, path = "/healthz", responses((status = 200, description = "The process answers")))]
pub(super) async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Ready: the store answers and its schema is migrated.
#[utoipa::path(get, path = "/readyz", responses((status = 200), (status = 503, body = ErrorBody)))]
pub(super) async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    // A table of the newest migration: reachable *and* migrated.
    match state.stores.flows.flow_runs(1).await {
        Ok(_) => Ok(Json(json!({"status": "ready", "store": state.stores.backend}))),
        Err(e) => {
            tracing::warn!(error = %e, "store not ready");
            Err(ApiError {
                retry_after: Some(1),
                ..ApiError::new(
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    "not_ready",
                    "o banco de dados não está disponível",
                )
            })
        }
    }
}

/// Prometheus text (an `admin` key when keys are configured).
#[utoipa::path(get, path = "/metrics", responses((status = 200, content_type = "text/plain"), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn metrics(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<impl IntoResponse, ApiError> {
    if caller.role != Role::Admin {
        return Err(ApiError::forbidden("as métricas exigem uma chave de papel admin"));
    }
    state.metrics.refresh_outbox(&state.service).await;
    Ok((
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        state.metrics.render(),
    ))
}

#[derive(OpenApi)]
#[openapi(
    info(title = "vt-agent", description = "Vale-transporte agent: conversations and the ten-stage flow"),
    paths(
        super::conversations::create,
        super::conversations::message,
        super::conversations::show,
        super::webhooks::events,
        super::flows::run,
        super::batches::create,
        super::batches::show,
        super::batches::results,
        super::subjects::export,
        super::subjects::erase,
        super::optins::import,
        healthz,
        readyz,
        metrics
    ),
    components(schemas(
        NewConversation, User, Created, MessageRequest, MessageResponse, ReplyOut, PixOut, CartaoOut, Button, ConversationView,
        MessageView, ErrorBody, ErrorDetail, FlowOutput, Etapa, FlowStatus,
        super::batches::BatchAccepted, super::batches::BatchView, super::subjects::SubjectRequest,
        super::optins::OptInsRequest, crate::service::OptIn
    )),
    modifiers(&BearerAuth)
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The document: utoipa's, with the flow input's schema (JSON Schema 2020-12, which OpenAPI 3.1 uses)
/// from the very type `run-flow` parses.
pub(super) fn document() -> Value {
    let mut doc = vt_contract::json::to_value(ApiDoc::openapi()).unwrap_or(Value::Null);
    let input =
        vt_contract::json::to_value(schemars::schema_for!(vt_domain::vt::FlowInput)).unwrap_or(Value::Null);
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        schemas.insert("FlowInput".into(), input);
    }
    doc
}

/// OpenAPI 3.1.
#[utoipa::path(get, path = "/v1/openapi.json", responses((status = 200)))]
pub(super) async fn openapi() -> Json<Value> {
    Json(document())
}
