//! `[http]`: where `serve` listens, its limits and its API keys.

use std::net::SocketAddr;

use serde::Deserialize;

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
    pub(crate) fn validate(&self) -> Result<(), (String, &'static str)> {
        if self.addr.parse::<SocketAddr>().is_err() {
            return Err(("http.addr".into(), "deve ser um endereço como 127.0.0.1:8080"));
        }
        for (field, zero) in [
            ("http.body_limit_bytes", self.body_limit_bytes == 0),
            ("http.rate_per_minute", self.rate_per_minute == 0),
            ("http.request_timeout_ms", self.request_timeout_ms == 0),
            ("http.max_turns_in_flight", self.max_turns_in_flight == 0),
            ("http.batch_body_limit_bytes", self.batch_body_limit_bytes == 0),
        ] {
            if zero {
                return Err((field.into(), "deve ser pelo menos 1"));
            }
        }
        let mut names = std::collections::HashSet::new();
        for (i, k) in self.api_keys.iter().enumerate() {
            if k.sha256.len() != 64 || !k.sha256.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err((
                    format!("http.api_keys[{i}].sha256"),
                    "deve ter 64 dígitos hexadecimais (um SHA-256)",
                ));
            }
            if k.name.trim().is_empty() || !names.insert(k.name.clone()) {
                return Err((
                    format!("http.api_keys[{i}].name"),
                    "deve estar presente e ser único",
                ));
            }
            if k.tenant.trim().is_empty() {
                return Err((format!("http.api_keys[{i}].tenant"), "deve estar presente"));
            }
        }
        Ok(())
    }
}

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A company's system: its own tenant's conversations and flows.
    Client,
    /// A support agent: besides the client's, looks cards up (next steps).
    Support,
    /// An operator: everything, the outbox and the console included.
    Admin,
}

/// A key as configured: `[[http.api_keys]] name = "…", sha256 = "…", tenant = "…", role = "…"`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    pub name: String,
    /// Hex SHA-256 of the key: `printf %s "$KEY" | sha256sum`.
    pub sha256: String,
    pub tenant: String,
    pub role: Role,
}
