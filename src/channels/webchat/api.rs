//! The widget's file and its API. Every API request must come from a page of one of the tenant's
//! origins (`Origin`, checked here, and the CORS answers only for listed origins), within the rate of
//! its visitor and of its address; a post must also carry the session's CSRF token. Errors are
//! `{"error": {"code", "message", "field"?}}` as the rest of the API's, in pt-BR, never echoing a value.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, DefaultBodyLimit, FromRequestParts, Query, State};
use axum::http::header::{self, HeaderName, HeaderValue};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::broadcast;

use super::events::{self, Sources};
use super::session::{COOKIE, Session, Sessions, verify_user};
use super::{CHANNEL, WebchatConfig, WebchatTenant};
use crate::service::{Handled, Inbound, NotWaiting, ServiceError, Services, Tap};
use vt_engine::Participant;

/// The widget, served from the binary.
const WIDGET: &str = include_str!("widget.js");
/// A post's body: a message and its id.
const BODY_LIMIT: usize = 16 * 1024;
/// The longest message a person may send.
const MAX_TEXT_CHARS: usize = 4096;
/// The longest id a widget gives its message.
const MAX_ID_CHARS: usize = 64;
/// The CSRF token's header.
const CSRF_HEADER: &str = "x-csrf-token";
/// Nothing the chat serves loads, runs or frames anything: it is data and a script for another page.
const CSP: &str = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'";

/// What the widget's API needs.
pub(super) struct WebchatState {
    service: Arc<Services>,
    agent: String,
    config: WebchatConfig,
    sessions: Sessions,
    per_visitor: DefaultKeyedRateLimiter<String>,
    per_address: DefaultKeyedRateLimiter<String>,
    address_header: Option<HeaderName>,
    /// Tells this instance's streams of a conversation whose turn just ended.
    wake: broadcast::Sender<String>,
    sources: Sources,
}

impl WebchatState {
    pub(super) fn new(config: &WebchatConfig, wiring: &crate::channels::Wiring) -> Self {
        let per_minute = |n: u32| Quota::per_minute(NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN));
        let stores = wiring.service.stores();
        Self {
            service: wiring.service.clone(),
            agent: wiring.agent.clone(),
            sessions: Sessions::new(config.segredo.as_deref(), config.sessao_dias),
            per_visitor: RateLimiter::keyed(per_minute(config.mensagens_por_minuto)),
            per_address: RateLimiter::keyed(per_minute(config.pedidos_por_ip_por_minuto)),
            address_header: config
                .cabecalho_ip
                .as_deref()
                .and_then(|h| HeaderName::try_from(h).ok()),
            wake: broadcast::channel(256).0,
            sources: Sources {
                conversations: stores.conversations.clone(),
                pix: stores.pix.clone(),
            },
            config: config.clone(),
        }
    }
}

/// The channel's routes: the widget, and its API behind CORS for the tenants' origins.
pub(super) fn routes(state: Arc<WebchatState>) -> Vec<(&'static str, MethodRouter)> {
    let origins: Vec<HeaderValue> = state
        .config
        .clientes
        .iter()
        .flat_map(|c| c.origens.iter())
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    let cors = tower_http::cors::CorsLayer::new()
        .allow_origin(origins)
        .allow_credentials(true)
        .allow_methods([Method::GET, Method::POST])
        .allow_headers([header::CONTENT_TYPE, HeaderName::from_static(CSRF_HEADER)])
        .max_age(std::time::Duration::from_secs(600));
    // A preflight reaches the CORS layer only on a route that takes OPTIONS: it answers it there.
    let api = |router: MethodRouter<Arc<WebchatState>>| -> MethodRouter {
        router
            .options(|| async { StatusCode::NO_CONTENT })
            .layer::<_, std::convert::Infallible>(DefaultBodyLimit::max(BODY_LIMIT))
            .layer::<_, std::convert::Infallible>(cors.clone())
            .with_state(state.clone())
    };
    vec![
        ("/webchat/widget.js", get(widget)),
        ("/webchat/api/sessao", api(post(open_session))),
        ("/webchat/api/mensagens", api(post(message))),
        ("/webchat/api/eventos", api(get(stream))),
    ]
}

/// Headers every answer of the chat carries.
fn hardened(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

async fn widget() -> Response {
    hardened(
        (
            [
                (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
                (header::CACHE_CONTROL, "public, max-age=300"),
                // Another site's page loads it.
                (
                    HeaderName::from_static("cross-origin-resource-policy"),
                    "cross-origin",
                ),
            ],
            WIDGET,
        )
            .into_response(),
    )
}

/// An error as the API says them.
fn refused(status: StatusCode, code: &str, message: &str, field: Option<&str>) -> Response {
    let mut error = json!({"code": code, "message": message});
    if let Some(f) = field {
        error["field"] = json!(f);
    }
    hardened((status, Json(json!({ "error": error }))).into_response())
}

fn too_many() -> Response {
    let mut r = refused(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        "muitas mensagens em pouco tempo; espere um instante e tente de novo",
        None,
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("10"));
    r
}

fn forbidden_origin() -> Response {
    refused(
        StatusCode::FORBIDDEN,
        "origin_not_allowed",
        "esta página não pode usar o chat deste cliente",
        Some("Origin"),
    )
}

fn no_session() -> Response {
    refused(
        StatusCode::UNAUTHORIZED,
        "no_session",
        "a sessão do chat acabou; recarregue a página",
        None,
    )
}

/// The connection's address, when the server keeps it (`serve` does).
struct Peer(Option<SocketAddr>);

impl<S: Send + Sync> FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Self(
            parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0),
        ))
    }
}

/// Whether a request is within its address's rate; the address is the connection's, or the first of
/// the configured proxy header.
fn address_ok(state: &WebchatState, headers: &HeaderMap, peer: Option<SocketAddr>) -> bool {
    let from_proxy = state.address_header.as_ref().and_then(|h| {
        headers
            .get(h)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(',').next())
            .map(|v| v.trim().to_owned())
    });
    let address = from_proxy
        .or_else(|| peer.map(|p| p.ip().to_string()))
        .unwrap_or_default();
    state.per_address.check_key(&address).is_ok()
}

/// The tenant whose listed origins hold the request's `Origin`.
fn tenant_for<'a>(state: &'a WebchatState, tenant: &str, headers: &HeaderMap) -> Option<&'a WebchatTenant> {
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok())?;
    state.config.tenant(tenant).filter(|t| t.allows(origin))
}

/// The request's session, when its cookie is this server's and unexpired.
fn session_of(state: &WebchatState, headers: &HeaderMap) -> Option<Session> {
    crate::channels::cookie(headers, COOKIE).and_then(|v| state.sessions.read(v))
}

/// The session a request of a page may use, within its address's rate: its cookie's, from one of
/// that tenant's origins.
#[allow(clippy::result_large_err)]
fn visitor(state: &WebchatState, headers: &HeaderMap, peer: Option<SocketAddr>) -> Result<Session, Response> {
    if !address_ok(state, headers, peer) {
        return Err(too_many());
    }
    let session = session_of(state, headers).ok_or_else(no_session)?;
    tenant_for(state, &session.ten, headers).ok_or_else(forbidden_origin)?;
    Ok(session)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionRequest {
    tenant: String,
    /// The operator's signed user token, on a signed-in page.
    #[serde(default)]
    token: Option<String>,
    /// The page that opened the session renews it (a stream reconnecting): whoever it is keeps it,
    /// a signed-in person too, whose token may have expired since the page loaded.
    #[serde(default)]
    renovar: bool,
}

/// The body as JSON of `T`, or a 400 that names the field (never its value).
#[allow(clippy::result_large_err)]
fn parse<T: serde::de::DeserializeOwned>(headers: &HeaderMap, body: &Bytes) -> Result<T, Response> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json {
        return Err(refused(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "envie JSON (Content-Type: application/json)",
            None,
        ));
    }
    let text = std::str::from_utf8(body).map_err(|_| {
        refused(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "o corpo não é texto UTF-8 válido",
            Some("corpo"),
        )
    })?;
    vt_contract::json::from_text_naming(text).map_err(|e| {
        refused(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            &e.message,
            Some(&e.field),
        )
    })
}

/// `POST /webchat/api/sessao`: the visitor's session, renewed with a new id — a signed-in person's
/// when the page passes their token; the same one when the page renews what it opened; the same
/// visitor's when a page loads with their cookie of this tenant (but a signed-in person's cookie on a
/// page without a token — they signed out, or another person uses the computer — starts a new
/// visitor); else a new visitor's.
async fn open_session(
    State(state): State<Arc<WebchatState>>,
    Peer(peer): Peer,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !address_ok(&state, &headers, peer) {
        return too_many();
    }
    let request: SessionRequest = match parse(&headers, &body) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let Some(tenant) = tenant_for(&state, &request.tenant, &headers) else {
        return forbidden_origin();
    };
    let now = chrono::Utc::now().timestamp();
    let who = match request.token.as_deref().filter(|t| !t.is_empty()) {
        Some(token) => match verify_user(token, tenant.chave_usuario.as_deref(), &tenant.tenant, now) {
            Ok(who) => Some(who),
            Err(e) => {
                tracing::warn!(tenant = %tenant.tenant, error = %e, "web chat user token refused");
                return refused(
                    StatusCode::UNAUTHORIZED,
                    "invalid_token",
                    &e.to_string(),
                    Some("token"),
                );
            }
        },
        None => session_of(&state, &headers)
            .filter(|s| s.ten == tenant.tenant && (request.renovar || s.sub.is_none()))
            .map(|s| (s.who, s.sub, s.name)),
    };
    let (session, value) = state.sessions.issue(&tenant.tenant, who, now);
    let body = json!({
        "csrf": state.sessions.csrf(&session),
        "nome": tenant.nome,
        "logo": tenant.logo,
        "cor": tenant.cor,
        "cor_texto": tenant.cor_texto,
        "identificado": session.sub.is_some(),
    });
    let mut response = hardened(Json(body).into_response());
    if let Ok(cookie) = HeaderValue::from_str(&state.sessions.set_cookie(&value)) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// A confirm or cancel button's tap: the recharge it was offered for.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TapRequest {
    recarga: String,
    confirmar: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageRequest {
    /// The widget's id of this message: a post sent again (a dropped answer) is not processed twice.
    id: String,
    /// What the person wrote (a button's or a list item's title, for a tap or a pick).
    #[serde(default)]
    texto: String,
    #[serde(default)]
    toque: Option<TapRequest>,
    /// An item of the list the last answer offered, by its place.
    #[serde(default)]
    escolha: Option<usize>,
}

/// `POST /webchat/api/mensagens`: the message is stored first (a post is answered only once it is);
/// a person's first message gets the privacy notice; then its turn runs, in a task of the service's
/// own, so a page closed mid-turn cuts nothing. The answers arrive by the event stream; this answer
/// says what to offer under them (confirm / cancel, a list) and the language the message was in.
async fn message(
    State(state): State<Arc<WebchatState>>,
    Peer(peer): Peer,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let session = match visitor(&state, &headers, peer) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let csrf = headers
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !crate::channels::same_secret(csrf, &state.sessions.csrf(&session)) {
        return refused(
            StatusCode::FORBIDDEN,
            "csrf",
            "o pedido não traz o token desta sessão; recarregue a página",
            Some(CSRF_HEADER),
        );
    }
    let request: MessageRequest = match parse(&headers, &body) {
        Ok(r) => r,
        Err(r) => return r,
    };
    if let Err(r) = check(&request) {
        return r;
    }
    let conversation_id = session.conversation_id();
    if state.per_visitor.check_key(&conversation_id).is_err() {
        return too_many();
    }
    let inbound = inbound(&state, &session, request);
    let language = crate::router::language_of(&inbound.text);
    let answer = match run(&state, inbound).await {
        Ok(handled) => hardened(Json(offer(&handled, language)).into_response()),
        Err(r) => r,
    };
    // Whatever happened, what was stored is for this conversation's streams to show now.
    let _ = state.wake.send(conversation_id);
    answer
}

#[allow(clippy::result_large_err)]
fn check(request: &MessageRequest) -> Result<(), Response> {
    let invalid = |field: &str, message: &str| {
        Err(refused(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            message,
            Some(field),
        ))
    };
    if request.id.is_empty()
        || request.id.chars().count() > MAX_ID_CHARS
        || !request.id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return invalid("id", "use até 64 letras, dígitos ou '-'");
    }
    if request.texto.chars().count() > MAX_TEXT_CHARS {
        return Err(refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_long",
            "a mensagem passa de 4096 caracteres",
            Some("texto"),
        ));
    }
    if request.texto.trim().is_empty() && request.toque.is_none() && request.escolha.is_none() {
        return invalid("texto", "escreva uma mensagem");
    }
    Ok(())
}

/// The message as the service takes it: the session's conversation and person.
fn inbound(state: &WebchatState, session: &Session, request: MessageRequest) -> Inbound {
    let user_id = session.user_id();
    Inbound {
        agent_id: state.agent.clone(),
        conversation_id: Some(session.conversation_id()),
        tenant_id: Some(session.ten.clone()),
        user: Participant {
            user_login: session.name.clone().unwrap_or_else(|| user_id.clone()),
            user_id,
            channel: CHANNEL.into(),
        },
        channel_message_id: Some(format!("{}:{}", session.who, request.id)),
        tap: request.toque.map(|t| Tap {
            recharge: t.recarga,
            confirm: t.confirmar,
            otherwise: NotWaiting::stale(),
        }),
        pick: request.escolha,
        text: request.texto,
        ..Default::default()
    }
}

/// Stores `inbound`, greets a first message, and runs its turn in the service's own task.
#[allow(clippy::result_large_err)]
async fn run(state: &WebchatState, inbound: Inbound) -> Result<Handled, Response> {
    let messages = state.service.messages();
    let Some(received) = messages.receive(&inbound).await.map_err(|e| service_failed(&e))? else {
        // Sent before: its answers are in the conversation already.
        return Ok(Handled::duplicate(inbound.conversation_id.unwrap_or_default()));
    };
    let notice = state.config.aviso_privacidade.trim();
    if !notice.is_empty()
        && let Err(e) = messages.greet(&received, notice).await
    {
        tracing::error!(error = %e, "the web chat's privacy notice could not be said");
    }
    let service = state.service.clone();
    match messages
        .spawn(async move { service.messages().process(received).await })
        .await
    {
        Ok(handled) => handled.map_err(|e| service_failed(&e)),
        Err(e) => {
            // The message is stored: `recover` answers it at the next start.
            tracing::error!(error = %e, "a web chat turn's task failed");
            Err(internal())
        }
    }
}

/// What to offer under the turn's answers.
fn offer(handled: &Handled, language: &str) -> serde_json::Value {
    let buttons = handled
        .awaiting_confirmation
        .as_deref()
        .map_or_else(|| json!([]), super::events::confirm_buttons);
    json!({
        "botoes": buttons,
        "escolhas": handled.choices,
        "idioma": language,
        "encerrada": handled.ended,
        "repetida": handled.duplicate,
    })
}

fn service_failed(e: &ServiceError) -> Response {
    match e {
        ServiceError::NotRecorded(source) => {
            tracing::error!(error = %source, "a web chat message could not be stored");
            let mut r = refused(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_recorded",
                &e.to_string(),
                None,
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            r
        }
        other => {
            tracing::error!(error = %other, "a web chat turn failed");
            internal()
        }
    }
}

fn internal() -> Response {
    refused(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "não foi possível responder agora; tente de novo em instantes",
        None,
    )
}

#[derive(Debug, Deserialize)]
struct StreamQuery {
    /// The last event the widget has, when the browser's `Last-Event-ID` is not there (a stream the
    /// widget opened anew).
    #[serde(default)]
    ultimo: Option<i64>,
}

/// `GET /webchat/api/eventos`: the session's conversation as Server-Sent Events.
async fn stream(
    State(state): State<Arc<WebchatState>>,
    Peer(peer): Peer,
    headers: HeaderMap,
    Query(query): Query<StreamQuery>,
) -> Response {
    let session = match visitor(&state, &headers, peer) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok())
        .or(query.ultimo);
    let events = events::stream(
        state.sources.clone(),
        session.conversation_id(),
        resume,
        (state.wake.subscribe(), state.service.said()),
    );
    hardened(Sse::new(events).keep_alive(KeepAlive::default()).into_response())
}
