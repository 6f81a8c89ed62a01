//! `vt-agent serve`: the HTTP API (axum) over the conversation pipeline and the flow, with API keys,
//! limits (body size, rate per key, request time, turns in flight), health, metrics and an OpenAPI
//! document generated from the same Rust types the handlers use.
//!
//! HTTP JSON stops here: handlers turn it into [`crate::service::Inbound`] and flow inputs, and the
//! service's answers back into JSON. A turn runs in its own task, so a client that goes away, or a
//! request that times out, never cuts a turn (or a charge) in half: the turn ends and is stored, and
//! the conversation shows it.

pub(crate) mod auth;
mod batches;
pub(crate) mod config;
pub(crate) mod console;
mod conversations;
mod error;
mod flows;
mod json;
mod metrics;
mod ops;
mod optins;
mod rejections;
pub(crate) mod state;
mod subjects;
pub(crate) mod webhooks;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

pub(crate) use config::HttpConfig;
pub(crate) use error::ApiError;
pub(crate) use state::AppState;

/// The API's OpenAPI 3.1 document (`GET /v1/openapi.json`, `vt-agent openapi`).
pub fn openapi() -> serde_json::Value {
    ops::document()
}

/// The API's routes.
pub(crate) fn router(state: AppState) -> Router {
    let limit = state.config.body_limit_bytes;
    // The channels' webhooks have their own auth (signatures) and body limits.
    let mut channels = Router::new();
    for (_, path, handlers) in &state.channel_routes {
        channels = channels.route(path, handlers.clone());
    }
    Router::new()
        .route("/v1/conversations", post(conversations::create))
        .route("/v1/conversations/{id}", get(conversations::show))
        .route("/v1/conversations/{id}/messages", post(conversations::message))
        .route("/v1/conversations/{id}/events", get(webhooks::events))
        .route("/v1/flows/vt", post(flows::run))
        .route("/v1/batches", post(batches::create))
        .route("/v1/batches/{id}", get(batches::show))
        .route("/v1/batches/{id}/results", get(batches::results))
        .route("/v1/optins", post(optins::import))
        .route("/v1/titulares/exportar", post(subjects::export))
        .route("/v1/titulares/apagar", post(subjects::erase))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/v1/openapi.json", get(ops::openapi))
        .merge(console::router())
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(state.clone(), log_request))
        .with_state(state)
        .merge(channels)
        // Last, so that it reaches every route merged above: axum keeps its `Allow` header.
        .method_not_allowed_fallback(method_not_allowed)
        // Outermost: whatever a route or the framework rejects leaves in the API's error shape.
        .layer(middleware::from_fn(rejections::as_api_errors))
}

async fn not_found() -> ApiError {
    ApiError::not_found("esta rota")
}

async fn method_not_allowed(method: axum::http::Method) -> ApiError {
    ApiError::method_not_allowed(&method)
}

/// One line per request at debug, one at warn for a 5xx; never the body.
async fn log_request(State(_): State<AppState>, req: Request, next: Next) -> Response {
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let started = std::time::Instant::now();
    let response = next.run(req).await.into_response();
    let status = response.status().as_u16();
    let ms = started.elapsed().as_millis() as u64;
    if status >= 500 {
        tracing::warn!(%method, %path, status, ms, "request failed");
    } else {
        tracing::debug!(%method, %path, status, ms, "request");
    }
    response
}

/// Serves `state` on `listener` until `shutdown` resolves, then stops accepting, lets requests in
/// flight finish (their turns are stored and their callers answered) and returns.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // The peer's address is kept for the limits that count per address (the web chat's).
    let app = router(state).into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}
