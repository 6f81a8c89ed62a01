//! `vt-agent serve`: the HTTP API (axum) over the conversation pipeline and the flow, with API keys,
//! limits (body size, rate per key, request time, turns in flight), health, metrics and an OpenAPI
//! document generated from the same Rust types the handlers use.
//!
//! HTTP JSON stops here: handlers turn it into [`crate::service::Inbound`] and flow inputs, and the
//! service's answers back into JSON. A turn runs in its own task, so a client that goes away, or a
//! request that times out, never cuts a turn (or a charge) in half: the turn ends and is stored, and
//! the conversation shows it.

mod auth;
mod batches;
mod conversations;
mod error;
mod flows;
mod json;
mod metrics;
mod ops;
mod subjects;

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde::Deserialize;
use tokio::sync::Semaphore;

pub use auth::{ApiKeyConfig, Caller, Role, hash as key_hash};
pub use error::ApiError;
pub use metrics::Metrics;

use crate::service::ConversationService;

/// `[http]` in the configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Where `serve` listens (`--addr`, `VT_HTTP_ADDR`).
    pub addr: String,
    /// Larger request bodies get 413.
    pub body_limit_bytes: usize,
    /// Requests per minute per API key before 429.
    pub rate_per_minute: u32,
    /// A request that takes longer gets 504 (its turn goes on and is stored).
    pub request_timeout_ms: u64,
    /// Turns and flows running at once before 503.
    pub max_turns_in_flight: usize,
    /// Larger `POST /v1/batches` bodies get 413.
    pub batch_body_limit_bytes: usize,
    pub api_keys: Vec<ApiKeyConfig>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            addr: "127.0.0.1:8080".into(),
            body_limit_bytes: 64 * 1024,
            rate_per_minute: 600,
            request_timeout_ms: 30_000,
            max_turns_in_flight: 256,
            batch_body_limit_bytes: 16 * 1024 * 1024,
            api_keys: Vec::new(),
        }
    }
}

impl HttpConfig {
    /// Checks what parsing cannot; the error is `(field, why)`.
    pub fn validate(&self) -> Result<(), (String, &'static str)> {
        if self.addr.parse::<SocketAddr>().is_err() {
            return Err(("http.addr".into(), "must be an address like 127.0.0.1:8080"));
        }
        for (field, zero) in [
            ("http.body_limit_bytes", self.body_limit_bytes == 0),
            ("http.rate_per_minute", self.rate_per_minute == 0),
            ("http.request_timeout_ms", self.request_timeout_ms == 0),
            ("http.max_turns_in_flight", self.max_turns_in_flight == 0),
            ("http.batch_body_limit_bytes", self.batch_body_limit_bytes == 0),
        ] {
            if zero {
                return Err((field.into(), "must be at least 1"));
            }
        }
        let mut names = std::collections::HashSet::new();
        for (i, k) in self.api_keys.iter().enumerate() {
            if k.sha256.len() != 64 || !k.sha256.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err((
                    format!("http.api_keys[{i}].sha256"),
                    "must be 64 hex digits (a SHA-256)",
                ));
            }
            if k.name.trim().is_empty() || !names.insert(k.name.clone()) {
                return Err((format!("http.api_keys[{i}].name"), "must be present and unique"));
            }
            if k.tenant.trim().is_empty() {
                return Err((format!("http.api_keys[{i}].tenant"), "must be present"));
            }
        }
        Ok(())
    }
}

/// Everything a handler may use; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub service: Arc<ConversationService>,
    pub config: Arc<HttpConfig>,
    keys: Arc<auth::ApiKeys>,
    limiter: Arc<DefaultKeyedRateLimiter<String>>,
    turns: Arc<Semaphore>,
    pub metrics: Arc<Metrics>,
    /// The WhatsApp channel's webhook, when the channel is on.
    whatsapp: Option<Arc<crate::channels::whatsapp::WhatsAppConfig>>,
    /// The Mattermost channel's routes and the tenant its support agents look cards up in.
    mattermost: Option<(Arc<crate::channels::mattermost::MattermostConfig>, String)>,
    /// Batch jobs in the background (`/v1/batches`).
    batches: Option<Arc<crate::batch::background::Background>>,
    /// The web console's keys.
    pub(crate) console: Arc<crate::console::Console>,
}

impl AppState {
    pub fn new(service: Arc<ConversationService>, config: HttpConfig) -> Self {
        let per_minute = NonZeroU32::new(config.rate_per_minute).unwrap_or(NonZeroU32::MIN);
        Self {
            service,
            keys: Arc::new(auth::ApiKeys::new(&config.api_keys)),
            limiter: Arc::new(RateLimiter::keyed(Quota::per_minute(per_minute))),
            turns: Arc::new(Semaphore::new(config.max_turns_in_flight)),
            metrics: Arc::new(Metrics::default()),
            config: Arc::new(config),
            whatsapp: None,
            mattermost: None,
            batches: None,
            console: Arc::new(crate::console::Console::new(
                &crate::console::ConsoleConfig::default(),
            )),
        }
    }

    /// The console signs its sessions with `config`'s secret (else a random one of this process's).
    pub fn with_console(mut self, config: &crate::console::ConsoleConfig) -> Self {
        self.console = Arc::new(crate::console::Console::new(config));
        self
    }

    /// The caller of the configured key named `name`.
    pub(crate) fn caller_named(&self, name: &str) -> Option<Caller> {
        self.keys.by_name(name)
    }

    /// The caller of an API key typed into the console's sign-in form.
    pub(crate) fn caller_of_key(&self, key: &str) -> Result<Caller, ApiError> {
        self.keys.by_key(key)
    }

    /// Serves the Mattermost routes too; `tenant` is where its users' conversations belong.
    pub fn with_mattermost(
        mut self,
        config: crate::channels::mattermost::MattermostConfig,
        tenant: &str,
    ) -> Self {
        self.mattermost = Some((Arc::new(config), tenant.to_owned()));
        self
    }

    /// Runs batch jobs (`/v1/batches`) on `background`.
    pub fn with_batches(mut self, background: Arc<crate::batch::background::Background>) -> Self {
        self.batches = Some(background);
        self
    }

    /// Serves the WhatsApp webhook too.
    pub fn with_whatsapp(mut self, config: crate::channels::whatsapp::WhatsAppConfig) -> Self {
        self.whatsapp = Some(Arc::new(config));
        self
    }

    /// Whether the service is open (no API key configured).
    pub fn is_open(&self) -> bool {
        self.keys.is_open()
    }

    /// Counts a request against its key's rate.
    fn limit(&self, caller: &Caller) -> Result<(), ApiError> {
        self.limit_named(&caller.name)
    }

    /// Counts a request against the rate of `name` (a key's name, or the console's sign-in form).
    pub(crate) fn limit_named(&self, name: &str) -> Result<(), ApiError> {
        self.limiter.check_key(&name.to_owned()).map_err(|not_until| {
            let wait = not_until.wait_time_from(governor::clock::Clock::now(
                &governor::clock::DefaultClock::default(),
            ));
            ApiError::rate_limited(wait.as_secs() + 1)
        })
    }

    /// Runs `work` (a turn or a flow) in its own task, within the bound of work in flight and the
    /// request timeout. The task is not cancelled when the caller goes away or time runs out.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Result<T, ApiError> {
        let permit = self
            .turns
            .clone()
            .try_acquire_owned()
            .map_err(|_| ApiError::busy())?;
        let task = tokio::spawn(async move {
            let out = work.await;
            drop(permit);
            out
        });
        let timeout = Duration::from_millis(self.config.request_timeout_ms);
        match tokio::time::timeout(timeout, task).await {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(join)) => Err(ApiError::internal("request task failed", &join)),
            Err(_) => Err(ApiError::timeout()),
        }
    }
}

/// The API's routes.
pub fn router(state: AppState) -> Router {
    let limit = state.config.body_limit_bytes;
    let channels = match &state.whatsapp {
        // The webhooks have their own auth (signatures) and body limits.
        Some(config) => crate::channels::whatsapp::router(crate::channels::whatsapp::WebhookState {
            service: state.service.clone(),
            config: config.clone(),
        }),
        None => Router::new(),
    };
    let channels = match &state.mattermost {
        Some((config, tenant)) => channels.merge(crate::channels::mattermost::router(
            crate::channels::mattermost::MattermostState {
                service: state.service.clone(),
                config: config.clone(),
                tenant: tenant.clone(),
                client: reqwest::Client::new(),
            },
        )),
        None => channels,
    };
    Router::new()
        .route("/v1/conversations", post(conversations::create))
        .route("/v1/conversations/{id}", get(conversations::show))
        .route("/v1/conversations/{id}/messages", post(conversations::message))
        .route("/v1/flows/vt", post(flows::run))
        .route("/v1/batches", post(batches::create))
        .route("/v1/batches/{id}", get(batches::show))
        .route("/v1/batches/{id}/results", get(batches::results))
        .route("/v1/titulares/exportar", post(subjects::export))
        .route("/v1/titulares/apagar", post(subjects::erase))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/v1/openapi.json", get(ops::openapi))
        .merge(crate::console::router())
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(state.clone(), log_request))
        .with_state(state)
        .merge(channels)
        // Last, so that it reaches every route merged above: axum keeps its `Allow` header.
        .method_not_allowed_fallback(method_not_allowed)
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
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}
