//! HTTP client of the external systems. It follows the retry policy a stage's payload carries: only
//! 5xx and 429 are retried (waiting at least `backoff_ms`, or `Retry-After` when longer); a transport
//! error or timeout is recorded and never re-sent, since the request may have reached the server.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

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
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

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
    pub fn not_sent(tipo: &str, codigo: Option<&str>, mensagem: impl Into<String>) -> Self {
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SystemsConfig {
    pub saldo_url: String,
    pub recarga_url: String,
    pub notificacao_url: String,
    /// Caps every payload's `timeout_ms` (tests use a few hundred ms).
    pub timeout_cap_ms: Option<u64>,
    /// Caps any wait between retries, `Retry-After` included.
    pub max_retry_wait_ms: u64,
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
        }
    }
}

/// The client the stages take from their context.
#[derive(Debug, Clone)]
pub struct VtSystems {
    client: reqwest::Client,
    config: SystemsConfig,
}

impl VtSystems {
    pub fn new(config: SystemsConfig) -> Result<Self, reqwest::Error> {
        let mut builder = reqwest::Client::builder();
        // Plain HTTP only (the simulator): no root certificates to load. Reading the system's CA bundle
        // and every file of its certificate directory was about a tenth of a one-shot `run-flow`'s CPU.
        let urls = [&config.saldo_url, &config.recarga_url, &config.notificacao_url];
        if urls.iter().all(|u| u.starts_with("http://")) {
            builder = builder.tls_certs_only([]);
        }
        Ok(Self {
            client: builder.build()?,
            config,
        })
    }

    pub fn config(&self) -> &SystemsConfig {
        &self.config
    }

    fn timeout(&self, timeout_ms: u64) -> Duration {
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
        let base = format!("{}{}", self.config.saldo_url, super::SALDO_ENDPOINT);
        let url = match reqwest::Url::parse_with_params(&base, &[("cartao", cartao)]) {
            Ok(u) => u,
            Err(e) => return HttpResult::not_sent("conexao", None, format!("URL inválida: {e}")),
        };
        self.send(
            reqwest::Method::GET,
            url,
            headers,
            None,
            timeout_ms,
            attempts,
            backoff_ms,
        )
        .await
    }

    /// `POST {recarga}/api/v1/recargas`, exactly once.
    pub async fn recarregar(
        &self,
        body: &Value,
        headers: &BTreeMap<String, String>,
        timeout_ms: u64,
    ) -> HttpResult {
        let url =
            match reqwest::Url::parse(&format!("{}{}", self.config.recarga_url, super::RECARGA_ENDPOINT)) {
                Ok(u) => u,
                Err(e) => return HttpResult::not_sent("conexao", None, format!("URL inválida: {e}")),
            };
        self.send(reqwest::Method::POST, url, headers, Some(body), timeout_ms, 1, 0)
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
        let url = match reqwest::Url::parse(&format!(
            "{}{}",
            self.config.notificacao_url,
            super::NOTIFICACAO_ENDPOINT
        )) {
            Ok(u) => u,
            Err(e) => return HttpResult::not_sent("conexao", None, format!("URL inválida: {e}")),
        };
        self.send(
            reqwest::Method::POST,
            url,
            headers,
            Some(body),
            timeout_ms,
            attempts,
            backoff_ms,
        )
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn send(
        &self,
        method: reqwest::Method,
        url: reqwest::Url,
        headers: &BTreeMap<String, String>,
        body: Option<&Value>,
        timeout_ms: u64,
        attempts: u32,
        backoff_ms: u64,
    ) -> HttpResult {
        let path = url.path().to_owned();
        let attempts = attempts.max(1);
        let mut attempt = 1;
        loop {
            let mut request = self
                .client
                .request(method.clone(), url.clone())
                .timeout(self.timeout(timeout_ms));
            for (k, v) in headers {
                request = request.header(k, v);
            }
            if let Some(b) = body {
                request = request.json(b);
            }
            let response = match request.send().await {
                Ok(r) => r,
                Err(e) => {
                    let (tipo, mensagem) = if e.is_timeout() {
                        (
                            "timeout",
                            format!("sem resposta em {} ms", self.timeout(timeout_ms).as_millis()),
                        )
                    } else {
                        ("conexao", "falha de conexão".to_owned())
                    };
                    tracing::warn!(%path, tipo, attempt, "external system unreachable");
                    return HttpResult::not_sent(tipo, None, mensagem);
                }
            };
            let status = response.status().as_u16();
            let replayed = response
                .headers()
                .get(REPLAYED_HEADER)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let body = match response.text().await {
                Ok(text) if text.is_empty() => None,
                Ok(text) => Some(
                    serde_json::from_str(&text).unwrap_or(Value::String(text.chars().take(500).collect())),
                ),
                Err(e) if e.is_timeout() => {
                    return HttpResult::not_sent("timeout", None, "a resposta não chegou completa a tempo");
                }
                Err(_) => None,
            };
            tracing::info!(%path, status, attempt, "external system answered");
            let retryable = status == 429 || status >= 500;
            if retryable && attempt < attempts {
                let base = Duration::from_millis(backoff_ms);
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
}
