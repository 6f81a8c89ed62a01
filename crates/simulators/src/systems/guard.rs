//! The simulator asking for what real systems ask for (`vt-agent simulator --auth …`): a bearer token,
//! a key in a header, or OAuth2 client credentials with its own token endpoint (`POST /oauth/token`,
//! RFC 6749 §4.4, the client's credentials in Basic auth or in the form). A request without a good
//! credential gets a 401 and reaches nothing, so the product's whole authenticated path can be shown
//! and tested offline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Form, Json, Router};
use serde_json::json;

/// What the simulator asks of its callers.
#[derive(Clone, PartialEq, Eq)]
pub enum SimulatorAuth {
    None,
    Bearer {
        token: String,
    },
    Header {
        header: String,
        token: String,
    },
    Oauth2 {
        client_id: String,
        client_secret: String,
        token_ttl: Duration,
    },
}

impl std::fmt::Debug for SimulatorAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::None => "None",
            Self::Bearer { .. } => "Bearer",
            Self::Header { .. } => "Header",
            Self::Oauth2 { .. } => "Oauth2",
        })
    }
}

struct Guard {
    auth: SimulatorAuth,
    /// Tokens the token endpoint issued, with their expiry.
    issued: Mutex<HashMap<String, Instant>>,
    next: std::sync::atomic::AtomicU64,
}

/// `systems` behind `auth` (and, for OAuth2, with the token endpoint beside them).
pub(crate) fn guarded(systems: Router, auth: SimulatorAuth) -> Router {
    if auth == SimulatorAuth::None {
        return systems;
    }
    let guard = Arc::new(Guard {
        auth,
        issued: Mutex::new(HashMap::new()),
        next: std::sync::atomic::AtomicU64::new(1),
    });
    let systems = systems.layer(axum::middleware::from_fn_with_state(guard.clone(), require));
    Router::new()
        .route("/oauth/token", axum::routing::post(token))
        .with_state(guard)
        .merge(systems)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn require(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    if accepted(&guard, request.headers()) {
        next.run(request).await
    } else {
        (StatusCode::UNAUTHORIZED, Json(json!({"erro": "nao_autorizado"}))).into_response()
    }
}

fn accepted(guard: &Guard, headers: &HeaderMap) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let bearer = header("authorization").and_then(|v| v.strip_prefix("Bearer "));
    match &guard.auth {
        SimulatorAuth::None => true,
        SimulatorAuth::Bearer { token } => bearer == Some(token.as_str()),
        SimulatorAuth::Header { header: name, token } => header(name) == Some(token.as_str()),
        SimulatorAuth::Oauth2 { .. } => bearer.is_some_and(|t| {
            lock(&guard.issued)
                .get(t)
                .is_some_and(|until| Instant::now() < *until)
        }),
    }
}

/// The token endpoint: client credentials in Basic auth or in the form.
async fn token(
    State(guard): State<Arc<Guard>>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let SimulatorAuth::Oauth2 {
        client_id,
        client_secret,
        token_ttl,
    } = &guard.auth
    else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let basic = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.decode(b).ok()
        })
        .and_then(|b| String::from_utf8(b).ok());
    let expected = format!("{client_id}:{client_secret}");
    let by_basic = basic.as_deref() == Some(expected.as_str());
    let by_form =
        form.get("client_id") == Some(client_id) && form.get("client_secret") == Some(client_secret);
    if form.get("grant_type").map(String::as_str) != Some("client_credentials") || !(by_basic || by_form) {
        return (StatusCode::UNAUTHORIZED, Json(json!({"error": "invalid_client"}))).into_response();
    }
    let n = guard.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let token = format!("simulador-{n}-{}", uuid::Uuid::new_v4().simple());
    lock(&guard.issued).insert(token.clone(), Instant::now() + *token_ttl);
    Json(json!({"access_token": token, "token_type": "Bearer", "expires_in": token_ttl.as_secs()}))
        .into_response()
}
