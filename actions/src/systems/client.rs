//! HTTP client of the external systems. It follows the retry policy a stage's payload carries: only
//! 5xx and 429 are retried (waiting at least `backoff_ms`, or `Retry-After` when longer); a transport
//! error or timeout is recorded and never re-sent, since the request may have reached the server.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use reqwest::header::{HeaderName, HeaderValue};

use super::auth::{AuthConfig, AuthError, Credentials, CredentialsBuilder};
use super::tls::{TlsConfig, TlsError};

/// What a call to an external system gave: the HTTP status and body, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HttpResult {
    pub status: Option<u16>,
    pub body: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erro: Option<Erro>,
    /// The system answered from its idempotency store (`Idempotent-Replayed: true`): nothing new was
    /// done, this is the answer to an earlier request with the same key.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
}

/// The header payment APIs use to mark an answer replayed from their idempotency store.
pub(crate) const REPLAYED_HEADER: &str = "idempotent-replayed";

/// Why a call has no HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Erro {
    /// `timeout`, `conexao`, `validacao` (the payload was invalid and never sent) or `nao_enviado` (the
    /// attempt could not be put on record, so it was not sent).
    pub tipo: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codigo: Option<String>,
    pub mensagem: String,
}

impl HttpResult {
    pub(crate) fn not_sent(tipo: &str, codigo: Option<&str>, mensagem: impl Into<String>) -> Self {
        Self {
            status: None,
            body: None,
            replayed: false,
            erro: Some(Erro {
                tipo: tipo.into(),
                codigo: codigo.map(str::to_owned),
                mensagem: mensagem.into(),
            }),
        }
    }

    pub fn is_success(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// Where the systems are and how long we wait for them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SystemsConfig {
    /// The balance system (`VT_SYSTEMS_URL` sets all three).
    pub saldo_url: String,
    /// The recharge system.
    pub recarga_url: String,
    /// The notification system.
    pub notificacao_url: String,
    /// Caps every payload's `timeout_ms` (tests use a few hundred ms).
    pub timeout_cap_ms: Option<u64>,
    /// Caps any wait between retries, `Retry-After` included.
    pub max_retry_wait_ms: u64,
    /// How the three systems are authenticated (`[systems.auth]`).
    pub auth: AuthConfig,
    /// Client certificate and extra CA for the three systems (`[systems.tls]`).
    pub tls: TlsConfig,
    /// The balance system's own settings, where they differ (`[systems.saldo.auth]`).
    pub saldo: SystemSettings,
    /// The recharge system's own settings (`[systems.recarga.auth]`).
    pub recarga: SystemSettings,
    /// The notification system's own settings (`[systems.notificacao.auth]`).
    pub notificacao: SystemSettings,
}

/// What one system sets for itself instead of the `[systems]` defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SystemSettings {
    pub auth: Option<AuthConfig>,
    pub tls: Option<TlsConfig>,
}

/// One of the three systems.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum System {
    Saldo,
    Recarga,
    Notificacao,
}

impl System {
    pub(crate) const ALL: [Self; 3] = [Self::Saldo, Self::Recarga, Self::Notificacao];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Saldo => "saldo",
            Self::Recarga => "recarga",
            Self::Notificacao => "notificacao",
        }
    }
}

impl Default for SystemsConfig {
    fn default() -> Self {
        Self::single("http://127.0.0.1:8090")
    }
}

impl SystemsConfig {
    /// All three systems behind one base URL (the simulator).
    pub fn single(base: &str) -> Self {
        let base = base.trim_end_matches('/').to_owned();
        Self {
            saldo_url: base.clone(),
            recarga_url: base.clone(),
            notificacao_url: base,
            timeout_cap_ms: None,
            max_retry_wait_ms: 5_000,
            auth: AuthConfig::None,
            tls: TlsConfig::default(),
            saldo: SystemSettings::default(),
            recarga: SystemSettings::default(),
            notificacao: SystemSettings::default(),
        }
    }

    /// What `system` sets for itself.
    fn own(&self, system: System) -> &SystemSettings {
        match system {
            System::Saldo => &self.saldo,
            System::Recarga => &self.recarga,
            System::Notificacao => &self.notificacao,
        }
    }

    /// How `system` is authenticated: its own `auth`, else the shared one.
    pub(crate) fn auth_of(&self, system: System) -> &AuthConfig {
        self.own(system).auth.as_ref().unwrap_or(&self.auth)
    }

    /// `system`'s TLS settings: its own `tls`, else the shared one.
    pub(crate) fn tls_of(&self, system: System) -> &TlsConfig {
        self.own(system).tls.as_ref().unwrap_or(&self.tls)
    }

    /// Each system's auth with its secrets filled from the environment's (`VT_SYSTEMS_TOKEN`,
    /// `VT_SYSTEMS_CLIENT_SECRET`) where the file leaves them empty.
    #[must_use]
    pub fn with_secrets(mut self, token: Option<&str>, client_secret: Option<&str>) -> Self {
        self.auth = self.auth.with_secrets(token, client_secret);
        for own in [&mut self.saldo, &mut self.recarga, &mut self.notificacao] {
            own.auth = own.auth.take().map(|a| a.with_secrets(token, client_secret));
        }
        self
    }

    /// The first problem of the systems' auth, as `(field, reason)` with the field's whole path
    /// (`systems.recarga.auth.client_secret`).
    pub fn problem(&self) -> Option<(String, &'static str)> {
        let sections = [
            ("systems.auth", Some(&self.auth)),
            ("systems.saldo.auth", self.saldo.auth.as_ref()),
            ("systems.recarga.auth", self.recarga.auth.as_ref()),
            ("systems.notificacao.auth", self.notificacao.auth.as_ref()),
        ];
        sections.into_iter().find_map(|(path, auth)| {
            auth.and_then(AuthConfig::problem)
                .map(|(field, why)| (format!("{path}.{field}"), why))
        })
    }
}

/// The client the stages take from their context.
#[derive(Debug, Clone)]
pub struct VtSystems {
    transport: Transport,
    config: SystemsConfig,
    /// Each system's credentials, in [`System::ALL`]'s order.
    credentials: [Credentials; 3],
}

/// Why the systems' client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SystemsError {
    #[error("{0}")]
    Auth(#[from] AuthError),
    #[error("TLS do sistema {system}: {error}")]
    Tls { system: &'static str, error: TlsError },
}

/// How a request reaches the systems.
#[derive(Debug, Clone)]
enum Transport {
    /// A client per system, in [`System::ALL`]'s order (the same one where their TLS is the same).
    Http([reqwest::Client; 3]),
    /// The embedded simulator, called through its router in this process: the same requests, headers
    /// and answers as over HTTP, without the socket. Loopback HTTP to a simulator in the same process
    /// cost both ends of every exchange (three a flow) in system calls and thread wake-ups.
    InProcess(axum::Router),
}

/// One request to a system, as a stage asks for it.
pub(crate) struct Call<'a> {
    pub(crate) system: System,
    pub(crate) method: reqwest::Method,
    pub(crate) url: reqwest::Url,
    pub(crate) headers: &'a BTreeMap<String, String>,
    pub(crate) body: Option<&'a Value>,
    pub(crate) timeout_ms: u64,
    pub(crate) attempts: u32,
    pub(crate) backoff_ms: u64,
}

/// The base URL the in-process simulator's requests are built against (only path and query are used).
const IN_PROCESS_BASE: &str = "http://simulador.embutido";

/// An exchange's answer, whichever way it travelled.
pub(crate) struct Answer {
    pub(crate) status: u16,
    /// `Idempotent-Replayed: true`.
    replayed: bool,
    retry_after: Option<Duration>,
    /// Why the body could not be read, when it could not.
    pub(crate) body: Result<axum::body::Bytes, Failure>,
}

impl Answer {
    /// Reads the two headers the client acts on, so neither transport keeps or copies the rest; the
    /// body is read next.
    fn new(status: u16, headers: &reqwest::header::HeaderMap) -> Self {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
        Self {
            status,
            replayed: header(REPLAYED_HEADER).is_some_and(|v| v.eq_ignore_ascii_case("true")),
            retry_after: header(reqwest::header::RETRY_AFTER.as_str())
                .and_then(|v| v.parse::<u64>().ok())
                .map(Duration::from_secs),
            body: Ok(axum::body::Bytes::new()),
        }
    }
}

/// Why an exchange has no answer (or no whole body).
pub(crate) enum Failure {
    Timeout,
    Connection,
    /// The system's credentials could not be had (a token endpoint refused or unreachable): the
    /// request was not sent.
    Unauthenticated(AuthError),
}

impl Failure {
    fn of(e: &reqwest::Error) -> Self {
        if e.is_timeout() {
            Self::Timeout
        } else {
            Self::Connection
        }
    }
}

impl VtSystems {
    pub fn new(config: SystemsConfig) -> Result<Self, SystemsError> {
        // One HTTP client per distinct TLS setting: the systems that share one share a client (its
        // connections and, for OAuth2 on the same host, the token endpoint's); one token source per
        // OAuth2 client likewise.
        let mut clients: Vec<(TlsConfig, reqwest::Client)> = Vec::new();
        let mut credentials = CredentialsBuilder::default();
        let mut part = |system: System| -> Result<(reqwest::Client, Credentials), SystemsError> {
            let tls = config.tls_of(system);
            let client = match clients.iter().find(|(t, _)| t == tls) {
                Some((_, c)) => c.clone(),
                None => {
                    let c = Self::client(&config, tls).map_err(|error| SystemsError::Tls {
                        system: system.name(),
                        error,
                    })?;
                    clients.push((tls.clone(), c.clone()));
                    c
                }
            };
            let creds = credentials.build(config.auth_of(system), &client)?;
            Ok((client, creds))
        };
        let (saldo, saldo_creds) = part(System::Saldo)?;
        let (recarga, recarga_creds) = part(System::Recarga)?;
        let (notificacao, notificacao_creds) = part(System::Notificacao)?;
        Ok(Self {
            transport: Transport::Http([saldo, recarga, notificacao]),
            credentials: [saldo_creds, recarga_creds, notificacao_creds],
            config,
        })
    }

    /// The HTTP client of a system with `tls`.
    fn client(config: &SystemsConfig, tls: &TlsConfig) -> Result<reqwest::Client, TlsError> {
        let mut builder = reqwest::Client::builder();
        // Plain HTTP only (the simulator): no root certificates to load. Reading the system's CA bundle
        // and every file of its certificate directory was about a tenth of a one-shot `run-flow`'s CPU.
        let urls = [&config.saldo_url, &config.recarga_url, &config.notificacao_url];
        if urls.iter().all(|u| u.starts_with("http://")) && !tls.is_set() {
            builder = builder.tls_certs_only([]);
        }
        super::tls::client(builder, tls)
    }

    /// The client of an embedded simulator, which it calls in this process (see `Transport`).
    pub fn in_process(simulator: &super::Simulator) -> Self {
        Self::over_router(simulator.router())
    }

    /// A client whose systems are `router`, called in this process: a replay's recorded world.
    pub fn over_router(router: axum::Router) -> Self {
        Self {
            transport: Transport::InProcess(router),
            config: SystemsConfig::single(IN_PROCESS_BASE),
            credentials: [Credentials::None, Credentials::None, Credentials::None],
        }
    }

    pub fn config(&self) -> &SystemsConfig {
        &self.config
    }

    /// The endpoint of `system` (with the balance's `cartao` query); why not, when a base URL makes
    /// no URL.
    pub(crate) fn url_of(&self, system: System, cartao: Option<&str>) -> Result<reqwest::Url, String> {
        let (base, path) = match system {
            System::Saldo => (&self.config.saldo_url, super::SALDO_ENDPOINT),
            System::Recarga => (&self.config.recarga_url, super::RECARGA_ENDPOINT),
            System::Notificacao => (&self.config.notificacao_url, super::NOTIFICACAO_ENDPOINT),
        };
        let url = format!("{base}{path}");
        match cartao {
            Some(c) => reqwest::Url::parse_with_params(&url, &[("cartao", c)]),
            None => reqwest::Url::parse(&url),
        }
        .map_err(|e| format!("URL inválida: {e}"))
    }

    pub(crate) fn timeout(&self, timeout_ms: u64) -> Duration {
        let ms = self
            .config
            .timeout_cap_ms
            .map_or(timeout_ms, |cap| timeout_ms.min(cap));
        Duration::from_millis(ms.max(1))
    }

    /// `GET {saldo}/api/v1/saldos/consultar?cartao=`.
    pub async fn consultar_saldo(
        &self,
        cartao: &str,
        headers: &BTreeMap<String, String>,
        timeout_ms: u64,
        attempts: u32,
        backoff_ms: u64,
    ) -> HttpResult {
        let url = match self.url_of(System::Saldo, Some(cartao)) {
            Ok(u) => u,
            Err(why) => return HttpResult::not_sent("conexao", None, why),
        };
        self.send(Call {
            system: System::Saldo,
            method: reqwest::Method::GET,
            url,
            headers,
            body: None,
            timeout_ms,
            attempts,
            backoff_ms,
        })
        .await
    }

    /// `POST {recarga}/api/v1/recargas`, exactly once.
    pub async fn recarregar(
        &self,
        body: &Value,
        headers: &BTreeMap<String, String>,
        timeout_ms: u64,
    ) -> HttpResult {
        let url = match self.url_of(System::Recarga, None) {
            Ok(u) => u,
            Err(why) => return HttpResult::not_sent("conexao", None, why),
        };
        self.send(Call {
            system: System::Recarga,
            method: reqwest::Method::POST,
            url,
            headers,
            body: Some(body),
            timeout_ms,
            attempts: 1,
            backoff_ms: 0,
        })
        .await
    }

    /// `POST {notificacao}/api/v1/notificacoes`, retried on 5xx/429 (the dedup key makes it safe).
    pub async fn notificar(
        &self,
        body: &Value,
        headers: &BTreeMap<String, String>,
        timeout_ms: u64,
        attempts: u32,
        backoff_ms: u64,
    ) -> HttpResult {
        let url = match self.url_of(System::Notificacao, None) {
            Ok(u) => u,
            Err(why) => return HttpResult::not_sent("conexao", None, why),
        };
        self.send(Call {
            system: System::Notificacao,
            method: reqwest::Method::POST,
            url,
            headers,
            body: Some(body),
            timeout_ms,
            attempts,
            backoff_ms,
        })
        .await
    }

    async fn send(&self, call: Call<'_>) -> HttpResult {
        let result = self.exchange(&call).await;
        super::tape::Tape::record(|| super::tape::Exchange {
            system: call.system.name().to_owned(),
            method: call.method.as_str().to_owned(),
            path: match call.url.query() {
                Some(q) => format!("{}?{q}", call.url.path()),
                None => call.url.path().to_owned(),
            },
            body: call.body.map(super::tape::normalized),
            status: result.status,
            answer: result.body.clone(),
            erro: result.erro.as_ref().map(|e| e.tipo.clone()),
            replayed: result.replayed,
        });
        result
    }

    /// The call and its retries: the final answer.
    async fn exchange(&self, call: &Call<'_>) -> HttpResult {
        let path = call.url.path().to_owned();
        let timeout = self.timeout(call.timeout_ms);
        let body = match call.body.map(crate::json::to_bytes).transpose() {
            Ok(b) => b.map(axum::body::Bytes::from),
            Err(e) => return HttpResult::not_sent("validacao", None, format!("corpo inválido: {e}")),
        };
        let attempts = call.attempts.max(1);
        let mut attempt = 1;
        loop {
            let answer = match self.authorized(call, body.clone(), timeout).await {
                Ok(a) => a,
                Err(failure) => return unanswered(failure, &path, attempt, timeout),
            };
            let Answer {
                status,
                replayed,
                retry_after,
                body,
            } = answer;
            let Ok(body) = read_body(body) else {
                return HttpResult::not_sent("timeout", None, "a resposta não chegou completa a tempo");
            };
            tracing::info!(%path, status, attempt, "external system answered");
            let retryable = status == 429 || status >= 500;
            if retryable && attempt < attempts {
                let base = Duration::from_millis(call.backoff_ms);
                let wait = retry_after.map_or(base, |ra| ra.max(base));
                tokio::time::sleep(wait.min(Duration::from_millis(self.config.max_retry_wait_ms))).await;
                attempt += 1;
                continue;
            }
            return HttpResult {
                status: Some(status),
                body,
                erro: None,
                replayed,
            };
        }
    }

    /// One attempt with the call's system's credentials. A 401 to a fetched token drops it, and the
    /// request goes once more with a new one: the refused request was not processed, so even a
    /// recharge is sent at most once in effect, under its same idempotency key.
    pub(crate) async fn authorized(
        &self,
        call: &Call<'_>,
        body: Option<axum::body::Bytes>,
        timeout: Duration,
    ) -> Result<Answer, Failure> {
        let credentials = &self.credentials[call.system as usize];
        let mut renewed = false;
        loop {
            let auth = credentials.header().await.map_err(Failure::Unauthenticated)?;
            let answer = self.transmit(call, auth.as_ref(), body.clone(), timeout).await?;
            if answer.status == 401
                && !renewed
                && let Some((_, sent)) = &auth
                && credentials.refused(sent).await
            {
                renewed = true;
                continue;
            }
            return Ok(answer);
        }
    }

    /// One attempt, over HTTP or to the embedded simulator in this process.
    async fn transmit(
        &self,
        call: &Call<'_>,
        auth: Option<&(HeaderName, HeaderValue)>,
        body: Option<axum::body::Bytes>,
        timeout: Duration,
    ) -> Result<Answer, Failure> {
        match &self.transport {
            Transport::Http(clients) => {
                let client = &clients[call.system as usize];
                let mut request = client.request(call.method.clone(), call.url.clone());
                if let Some((name, value)) = auth {
                    request = request.header(name, value);
                }
                over_http(request, call.headers, body, timeout).await
            }
            Transport::InProcess(router) => {
                in_process(
                    router,
                    call.method.clone(),
                    &call.url,
                    call.headers,
                    body,
                    timeout,
                )
                .await
            }
        }
    }
}

/// What a call that got no answer reports: a timeout or a connection failure (the request may have
/// reached the system), or credentials that could not be had (nothing was sent).
fn unanswered(failure: Failure, path: &str, attempt: u32, timeout: Duration) -> HttpResult {
    let (tipo, mensagem) = match failure {
        Failure::Timeout => ("timeout", format!("sem resposta em {} ms", timeout.as_millis())),
        Failure::Connection => ("conexao", "falha de conexão".to_owned()),
        Failure::Unauthenticated(e) => {
            tracing::warn!(%path, "external system not authenticated");
            return HttpResult::not_sent("nao_enviado", Some("autenticacao"), e.to_string());
        }
    };
    tracing::warn!(%path, tipo, attempt, "external system unreachable");
    HttpResult::not_sent(tipo, None, mensagem)
}

/// One request over HTTP, `headers` and a JSON `body` added, within `timeout` (the payment provider's
/// client uses it too).
pub(crate) async fn over_http(
    request: reqwest::RequestBuilder,
    headers: &BTreeMap<String, String>,
    body: Option<axum::body::Bytes>,
    timeout: Duration,
) -> Result<Answer, Failure> {
    let mut request = request.timeout(timeout);
    for (k, v) in headers {
        request = request.header(k, v);
    }
    // JSON unless the caller named its body's type (a provider's form-encoded API).
    if let Some(b) = body {
        if !headers.contains_key("content-type") {
            request = request.header(reqwest::header::CONTENT_TYPE, "application/json");
        }
        request = request.body(b);
    }
    let response = request.send().await.map_err(|e| Failure::of(&e))?;
    let mut answer = Answer::new(response.status().as_u16(), response.headers());
    answer.body = response.bytes().await.map_err(|e| Failure::of(&e));
    Ok(answer)
}

/// One request to `router` in this process (the embedded simulator), as [`over_http`] would send it.
pub(crate) async fn in_process(
    router: &axum::Router,
    method: reqwest::Method,
    url: &reqwest::Url,
    headers: &BTreeMap<String, String>,
    body: Option<axum::body::Bytes>,
    timeout: Duration,
) -> Result<Answer, Failure> {
    use tower::ServiceExt as _;
    let target = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };
    let mut request = axum::http::Request::builder().method(method).uri(target);
    for (k, v) in headers {
        request = request.header(k, v);
    }
    if body.is_some() && !headers.contains_key("content-type") {
        request = request.header(reqwest::header::CONTENT_TYPE, "application/json");
    }
    // A header the HTTP client would refuse is refused here too, as a connection failure.
    let request = request
        .body(body.map_or_else(axum::body::Body::empty, axum::body::Body::from))
        .map_err(|_| Failure::Connection)?;
    let exchange = async {
        let response = router.clone().oneshot(request).await.map_err(|e| match e {})?;
        let (parts, body) = response.into_parts();
        let mut answer = Answer::new(parts.status.as_u16(), &parts.headers);
        answer.body = axum::body::to_bytes(body, usize::MAX)
            .await
            .map_err(|_| Failure::Connection);
        Ok(answer)
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| Failure::Timeout)?
}

/// An answer's body as JSON (or its first 500 characters as text); `Err` when the timeout cut it
/// short.
fn read_body(body: Result<axum::body::Bytes, Failure>) -> Result<Option<Value>, Failure> {
    match body {
        Ok(bytes) if bytes.is_empty() => Ok(None),
        // A server may echo a credential it refused: what it says is scrubbed of secrets before it
        // becomes part of any output or record.
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let clean = crate::redact::secrets(&text);
            Ok(Some(crate::json::from_text(&clean).unwrap_or_else(|_| {
                Value::String(clean.chars().take(500).collect())
            })))
        }
        Err(Failure::Timeout) => Err(Failure::Timeout),
        Err(Failure::Connection | Failure::Unauthenticated(_)) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::systems::{Simulator, SimulatorConfig};
    use serde_json::json;

    fn simulator() -> Simulator {
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-22T12:00:00Z")
            .expect("time")
            .to_utc();
        Simulator::new(SimulatorConfig {
            slow: Duration::from_millis(400),
            notifications_per_second: 1,
            now: Some(std::sync::Arc::new(move || at)),
            ..SimulatorConfig::default()
        })
    }

    /// The same calls, in the same order, against a fresh simulator.
    async fn exchanges(client: &VtSystems) -> Vec<HttpResult> {
        let key = |k: &str| BTreeMap::from([("x-idempotency-key".to_owned(), k.to_owned())]);
        let none = BTreeMap::new();
        let recharge = |card: &str| json!({"cartao": card, "valor": 30.0, "moeda": "BRL", "meio_pagamento": {"tipo": "pix"}});
        let notice = json!({"canal": "email", "destinatario": "a@b.c", "mensagem": "oi", "metadados": {"cartao": "1234567890"}});
        let mut out = Vec::new();
        for card in ["1111111111", "2222222222", "3333333333", "5555555555", "123"] {
            out.push(client.consultar_saldo(card, &none, 1_000, 2, 1).await);
        }
        // Never answers: the client's timeout, not the server's.
        out.push(client.consultar_saldo("4444444444", &none, 50, 1, 0).await);
        for card in ["1234567890", "6666666666", "7777777777", "8888888888"] {
            out.push(client.recarregar(&recharge(card), &key(card), 1_000).await);
        }
        // Charged, then never answers: the client gives up; the charge stays on the ledger.
        out.push(
            client
                .recarregar(&recharge("9999999999"), &key("9999999999"), 50)
                .await,
        );
        // The same key and body again: the stored answer, marked replayed.
        out.push(
            client
                .recarregar(&recharge("1234567890"), &key("1234567890"), 1_000)
                .await,
        );
        // One notification a second: the second gets a 429 (with Retry-After, not waited for here).
        out.push(client.notificar(&notice, &key("n1"), 1_000, 1, 0).await);
        out.push(client.notificar(&notice, &key("n2"), 1_000, 1, 0).await);
        out
    }

    #[tokio::test]
    async fn the_embedded_simulator_answers_in_process_as_it_does_over_http() {
        // Each simulator is made just before its calls: its notification window starts then.
        let over_http = simulator().spawn(0).await.expect("simulator");
        let http = VtSystems::new(SystemsConfig::single(&over_http.url)).expect("client");
        let a = exchanges(&http).await;
        let embedded = simulator();
        let in_process = VtSystems::in_process(&embedded);
        let b = exchanges(&in_process).await;
        assert_eq!(a.len(), b.len());
        for (i, (a, b)) in a.iter().zip(&b).enumerate() {
            assert_eq!(a, b, "exchange {i}");
        }
        // What the comparison covers: answers, server errors, timeouts, replays and limits.
        let statuses: Vec<Option<u16>> = b.iter().map(|r| r.status).collect();
        assert_eq!(
            statuses,
            [
                Some(200),
                Some(200),
                Some(500),
                Some(200),
                Some(400),
                None,
                Some(201),
                Some(202),
                Some(402),
                Some(500),
                None,
                Some(201),
                Some(202),
                Some(429)
            ]
        );
        assert_eq!(b[5].erro.as_ref().map(|e| e.tipo.as_str()), Some("timeout"));
        assert_eq!(b[10].erro.as_ref().map(|e| e.tipo.as_str()), Some("timeout"));
        assert!(b[11].replayed && !b[6].replayed);
        // A call the client gave up on still did what it did before: both simulators charged the card
        // that times out after charging, once.
        for card in ["9999999999", "1234567890"] {
            assert_eq!(over_http.simulator.charges(card), 1, "{card} over HTTP");
            assert_eq!(embedded.charges(card), 1, "{card} in process");
        }
    }
}
