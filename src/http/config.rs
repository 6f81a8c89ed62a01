//! `[http]`: where `serve` listens, its limits and its API keys.

use std::net::SocketAddr;

use serde::Deserialize;

/// `[http]` in the configuration file.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Where `serve` listens (`--addr`, `VT_HTTP_ADDR`).
    pub addr: String,
    /// Larger request bodies get 413.
    pub body_limit_bytes: usize,
    /// Requests per minute per API key before 429 (with no key configured — open, on loopback only —
    /// there is no key to count against).
    pub rate_per_minute: u32,
    /// A request that takes longer gets 504 (its turn goes on and is stored).
    pub request_timeout_ms: u64,
    /// Turns and flows running at once before 503.
    pub max_turns_in_flight: usize,
    /// Larger `POST /v1/batches` bodies get 413.
    pub batch_body_limit_bytes: usize,
    pub api_keys: Vec<ApiKeyConfig>,
    /// `[[http.webhooks]]`: where a tenant's HTTP conversations get their late messages pushed.
    pub webhooks: Vec<WebhookConfig>,
}

/// A tenant's webhook: `[[http.webhooks]] tenant = "…", url = "https://…", secrets = ["whsec_…"]`.
/// Deliveries are signed as Standard Webhooks says, with every secret listed (the new one first during
/// a rotation: a receiver that knows either checks them).
#[derive(Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// The tenant whose conversations' messages are pushed.
    pub tenant: String,
    /// Where they are posted (HTTPS, or loopback HTTP for tests).
    pub url: String,
    /// `whsec_` and the base64 of the key's bytes (what Standard Webhooks' libraries take), or any
    /// other text, whose bytes are the key.
    pub secrets: Vec<String>,
}

impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookConfig")
            .field("tenant", &self.tenant)
            .field("url", &self.url)
            .field("secrets", &format_args!("[{} ocultos]", self.secrets.len()))
            .finish()
    }
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
            webhooks: Vec::new(),
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
        let mut tenants = std::collections::HashSet::new();
        for (i, w) in self.webhooks.iter().enumerate() {
            let field = |f: &str| format!("http.webhooks[{i}].{f}");
            if w.tenant.trim().is_empty() || !tenants.insert(w.tenant.clone()) {
                return Err((field("tenant"), "deve estar presente e ser único"));
            }
            match reqwest::Url::parse(&w.url) {
                Ok(u) if u.scheme() == "https" || vt_connectors::auth::is_loopback(&u) => {}
                _ => return Err((field("url"), "deve ser uma URL https (http só em loopback)")),
            }
            if w.secrets.is_empty() || w.secrets.iter().any(|s| key_of(s).is_none()) {
                return Err((
                    field("secrets"),
                    "precisa de ao menos um segredo, e whsec_ seguido de base64",
                ));
            }
        }
        Ok(())
    }

    /// Registers the webhooks' secrets, so that none reaches a log line or an error.
    pub(crate) fn register_secrets(&self) {
        for secret in self.webhooks.iter().flat_map(|w| &w.secrets) {
            vt_contract::redact::register_secret(secret);
        }
    }
}

/// A secret's key bytes: `whsec_` and base64, as Standard Webhooks' libraries take it; any other
/// non-empty text, its own bytes. `None`: no key in it.
pub(crate) fn key_of(secret: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    match secret.strip_prefix("whsec_") {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .filter(|k| !k.is_empty()),
        None => (!secret.is_empty()).then(|| secret.as_bytes().to_vec()),
    }
}

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// Who holds the key, for logs and the console (never the key).
    pub name: String,
    /// Hex SHA-256 of the key: `printf %s "$KEY" | sha256sum`.
    pub sha256: String,
    /// The tenant the key's conversations and flows belong to.
    pub tenant: String,
    pub role: Role,
}
