//! HTTP client of the external systems. It follows the retry policy a stage's payload carries: only
//! 5xx and 429 are retried (waiting at least `backoff_ms`, or `Retry-After` when longer); a transport
//! error or timeout is recorded and never re-sent, since the request may have reached the server.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use vt_domain::systems::{
    EXTRATO_ENDPOINT, ExtratoPedido, HttpResult, NOTIFICACAO_ENDPOINT, OrdemCartao, RECARGA_ENDPOINT,
    ReadPolicy, SALDO_ENDPOINT, SEGUNDA_VIA_ENDPOINT, SITUACAO_ENDPOINT, Systems,
};

use crate::auth::{AuthConfig, AuthError, Credentials, CredentialsBuilder};
use crate::exchange::{Failure, Local, Peer, Request, Retry, Transport};
use crate::tls::{TlsConfig, TlsError};

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

/// The systems' HTTP client: the implementation of the stages' port ([`Systems`]).
#[derive(Debug, Clone)]
pub struct VtSystems {
    config: SystemsConfig,
    /// Each system's transport and credentials, in [`System::ALL`]'s order.
    peers: [Peer; 3],
}

/// Why the systems' client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SystemsError {
    #[error("{0}")]
    Auth(#[from] AuthError),
    #[error("TLS do sistema {system}: {error}")]
    Tls { system: &'static str, error: TlsError },
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

impl VtSystems {
    pub fn new(config: SystemsConfig) -> Result<Self, SystemsError> {
        // One HTTP client per distinct TLS setting: the systems that share one share a client (its
        // connections and, for OAuth2 on the same host, the token endpoint's); one token source per
        // OAuth2 client likewise.
        let mut clients: Vec<(TlsConfig, reqwest::Client)> = Vec::new();
        let mut credentials = CredentialsBuilder::default();
        let mut part = |system: System| -> Result<Peer, SystemsError> {
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
            let credentials = credentials.build(config.auth_of(system), &client)?;
            Ok(Peer {
                transport: Transport::Http(client),
                credentials,
            })
        };
        Ok(Self {
            peers: [
                part(System::Saldo)?,
                part(System::Recarga)?,
                part(System::Notificacao)?,
            ],
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
        crate::tls::client(builder, tls)
    }

    /// A client whose systems are `local`, called in this process (the embedded simulator, a
    /// replay's recorded world): the same requests and answers as over HTTP, without the socket.
    pub fn in_process(local: Arc<dyn Local>) -> Self {
        let peer = Peer {
            transport: Transport::Local(local),
            credentials: Credentials::None,
        };
        Self {
            config: SystemsConfig::single(IN_PROCESS_BASE),
            peers: [peer.clone(), peer.clone(), peer],
        }
    }

    pub fn config(&self) -> &SystemsConfig {
        &self.config
    }

    /// The endpoint of `system` (with the balance's `cartao` query); why not, when a base URL makes
    /// no URL.
    pub(crate) fn url_of(&self, system: System, cartao: Option<&str>) -> Result<reqwest::Url, String> {
        let path = match system {
            System::Saldo => SALDO_ENDPOINT,
            System::Recarga => RECARGA_ENDPOINT,
            System::Notificacao => NOTIFICACAO_ENDPOINT,
        };
        let query: Vec<(&str, &str)> = cartao.map(|c| ("cartao", c)).into_iter().collect();
        self.url_at(system, path, &query)
    }

    /// The card's situation on the balance system (`systems check`).
    pub(crate) fn desk_url(&self, cartao: &str) -> Result<reqwest::Url, String> {
        self.url_at(System::Saldo, SITUACAO_ENDPOINT, &[("cartao", cartao)])
    }

    /// `path` on `system`'s base URL, with `query`.
    fn url_at(&self, system: System, path: &str, query: &[(&str, &str)]) -> Result<reqwest::Url, String> {
        let base = match system {
            System::Saldo => &self.config.saldo_url,
            System::Recarga => &self.config.recarga_url,
            System::Notificacao => &self.config.notificacao_url,
        };
        reqwest::Url::parse_with_params(&format!("{base}{path}"), query)
            .map_err(|e| format!("URL inválida: {e}"))
    }

    /// A read of the card system (the balance system's base URL and credentials) at `path`.
    async fn read_card(
        &self,
        path: &str,
        query: &[(&str, &str)],
        headers: &BTreeMap<String, String>,
        read: ReadPolicy,
    ) -> HttpResult {
        let url = match self.url_at(System::Saldo, path, query) {
            Ok(u) => u,
            Err(why) => return HttpResult::not_sent("conexao", None, why),
        };
        self.send(Call {
            system: System::Saldo,
            method: reqwest::Method::GET,
            url,
            headers,
            body: None,
            timeout_ms: read.timeout_ms,
            attempts: read.attempts,
            backoff_ms: read.backoff_ms,
        })
        .await
    }

    /// How `system` is reached.
    pub(crate) fn peer(&self, system: System) -> &crate::exchange::Peer {
        &self.peers[system as usize]
    }

    pub(crate) fn timeout(&self, timeout_ms: u64) -> Duration {
        let ms = self
            .config
            .timeout_cap_ms
            .map_or(timeout_ms, |cap| timeout_ms.min(cap));
        Duration::from_millis(ms.max(1))
    }

    async fn send(&self, call: Call<'_>) -> HttpResult {
        let result = self.exchange(&call).await;
        crate::tape::Tape::record(|| crate::tape::Exchange {
            system: call.system.name().to_owned(),
            method: call.method.as_str().to_owned(),
            path: match call.url.query() {
                Some(q) => format!("{}?{q}", call.url.path()),
                None => call.url.path().to_owned(),
            },
            body: call.body.map(crate::tape::normalized),
            status: result.status,
            answer: result.body.clone(),
            erro: result.erro.as_ref().map(|e| e.tipo.clone()),
            replayed: result.replayed,
        });
        result
    }

    /// The call and its retries (5xx and 429 only: a request that got no answer may have reached the
    /// system, so it is never sent again): the final answer.
    async fn exchange(&self, call: &Call<'_>) -> HttpResult {
        let path = call.url.path();
        let timeout = self.timeout(call.timeout_ms);
        let body = match call.body.map(vt_contract::json::to_bytes).transpose() {
            Ok(b) => b.map(bytes::Bytes::from),
            Err(e) => return HttpResult::not_sent("validacao", None, format!("corpo inválido: {e}")),
        };
        let request = Request {
            method: call.method.clone(),
            url: &call.url,
            headers: call.headers,
            body,
            timeout,
        };
        let retry = Retry {
            attempts: call.attempts,
            unanswered: false,
            backoff: Duration::from_millis(call.backoff_ms),
            growing: false,
            retry_after: true,
            cap: Duration::from_millis(self.config.max_retry_wait_ms),
        };
        let answer = match self.peer(call.system).send(&request, &retry).await {
            Ok(a) => a,
            Err(failure) => return unanswered(failure, path, 1, timeout),
        };
        let attempt = answer.attempt;
        let Ok(body) = read_body(answer.body) else {
            return HttpResult::not_sent("timeout", None, "a resposta não chegou completa a tempo");
        };
        tracing::info!(%path, status = answer.status, attempt, "external system answered");
        HttpResult {
            status: Some(answer.status),
            body,
            erro: None,
            replayed: answer.replayed,
        }
    }
}

#[async_trait]
impl Systems for VtSystems {
    async fn consultar_saldo(
        &self,
        cartao: &str,
        headers: &BTreeMap<String, String>,
        timeout_ms: u64,
        attempts: u32,
        backoff_ms: u64,
    ) -> HttpResult {
        let read = ReadPolicy {
            timeout_ms,
            attempts,
            backoff_ms,
        };
        self.read_card(SALDO_ENDPOINT, &[("cartao", cartao)], headers, read)
            .await
    }

    async fn recarregar(
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

    async fn consultar_situacao(
        &self,
        cartao: &str,
        headers: &BTreeMap<String, String>,
        read: ReadPolicy,
    ) -> HttpResult {
        self.read_card(SITUACAO_ENDPOINT, &[("cartao", cartao)], headers, read)
            .await
    }

    async fn extrato(
        &self,
        pedido: &ExtratoPedido,
        headers: &BTreeMap<String, String>,
        read: ReadPolicy,
    ) -> HttpResult {
        let (de, ate, pagina) = (
            pedido.de.format("%Y-%m-%d").to_string(),
            pedido.ate.format("%Y-%m-%d").to_string(),
            pedido.pagina.to_string(),
        );
        let query = [
            ("cartao", pedido.cartao.as_str()),
            ("de", de.as_str()),
            ("ate", ate.as_str()),
            ("pagina", pagina.as_str()),
        ];
        self.read_card(EXTRATO_ENDPOINT, &query, headers, read).await
    }

    async fn cotar_segunda_via(
        &self,
        cartao: &str,
        headers: &BTreeMap<String, String>,
        read: ReadPolicy,
    ) -> HttpResult {
        self.read_card(SEGUNDA_VIA_ENDPOINT, &[("cartao", cartao)], headers, read)
            .await
    }

    async fn ordem_cartao(
        &self,
        ordem: OrdemCartao,
        body: &Value,
        headers: &BTreeMap<String, String>,
        timeout_ms: u64,
    ) -> HttpResult {
        let url = match self.url_at(System::Saldo, ordem.path(), &[]) {
            Ok(u) => u,
            Err(why) => return HttpResult::not_sent("conexao", None, why),
        };
        self.send(Call {
            system: System::Saldo,
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

    async fn notificar(
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

/// An answer's body as JSON (or its first 500 characters as text); `Err` when the timeout cut it
/// short.
fn read_body(body: Result<bytes::Bytes, Failure>) -> Result<Option<Value>, Failure> {
    match body {
        Ok(bytes) if bytes.is_empty() => Ok(None),
        // A server may echo a credential it refused: what it says is scrubbed of secrets before it
        // becomes part of any output or record.
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let clean = vt_contract::redact::secrets(&text);
            Ok(Some(vt_contract::json::from_text(&clean).unwrap_or_else(|_| {
                Value::String(clean.chars().take(500).collect())
            })))
        }
        Err(Failure::Timeout) => Err(Failure::Timeout),
        Err(Failure::Connection | Failure::Unauthenticated(_)) => Ok(None),
    }
}
