//! How the product proves who it is to the external systems (`[systems.auth]`, or one system's own
//! `[systems.saldo.auth]`…): nothing (the simulator), a bearer token, a key in a header of the
//! operator's choosing, or OAuth2 client credentials (RFC 6749 §4.4, through the `oauth2` crate with
//! our own HTTP client). A fetched token is shared by every task of the process, refreshed before it
//! expires, fetched by one task when many need it at once, and dropped when a system answers 401.
//! Every secret — configured or fetched — is registered with `redact` the moment it is known, so no
//! log line, error or stored record carries it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

/// How a system is authenticated.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum AuthConfig {
    /// Anonymous requests (the simulator).
    #[default]
    None,
    /// `Authorization: Bearer <token>` (`VT_SYSTEMS_TOKEN`).
    Bearer {
        #[serde(default)]
        token: String,
    },
    /// `<header>: <token>`, e.g. `x-api-key` (`VT_SYSTEMS_TOKEN`).
    Header {
        header: String,
        #[serde(default)]
        token: String,
    },
    /// OAuth2 client credentials (`VT_SYSTEMS_CLIENT_SECRET`).
    Oauth2 {
        token_url: String,
        client_id: String,
        #[serde(default)]
        client_secret: String,
        #[serde(default)]
        scope: Option<String>,
        /// `basic` (`client_secret_basic`, the default) or `post` (the secret in the body).
        #[serde(default)]
        auth_method: AuthMethod,
    },
}

/// Where OAuth2 client credentials go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    /// HTTP Basic (`client_secret_basic`).
    #[default]
    Basic,
    /// In the form body (`client_secret_post`).
    Post,
}

impl std::fmt::Debug for AuthConfig {
    /// Names the kind and the non-secret fields: a token or client secret never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::None => f.write_str("None"),
            Self::Bearer { .. } => f.write_str("Bearer { token: [redigido] }"),
            Self::Header { header, .. } => write!(f, "Header {{ header: {header:?}, token: [redigido] }}"),
            Self::Oauth2 {
                token_url,
                client_id,
                scope,
                auth_method,
                ..
            } => write!(
                f,
                "Oauth2 {{ token_url: {token_url:?}, client_id: {client_id:?}, scope: {scope:?}, auth_method: {auth_method:?}, client_secret: [redigido] }}"
            ),
        }
    }
}

impl AuthConfig {
    /// Fills an empty secret from the environment's value (`VT_SYSTEMS_TOKEN`,
    /// `VT_SYSTEMS_CLIENT_SECRET`).
    pub fn with_secrets(mut self, token: Option<&str>, client_secret: Option<&str>) -> Self {
        match &mut self {
            Self::Bearer { token: t } | Self::Header { token: t, .. } => {
                if t.is_empty() {
                    token.unwrap_or_default().clone_into(t);
                }
            }
            Self::Oauth2 { client_secret: s, .. } => {
                if s.is_empty() {
                    client_secret.unwrap_or_default().clone_into(s);
                }
            }
            Self::None => {}
        }
        self
    }

    /// What is wrong with it, as `(field, reason)` for the operator (in English, as every configuration
    /// error): a kind without its secret, a header name HTTP refuses, a token endpoint that is not
    /// `https` (loopback aside: a test's or a sidecar's).
    pub fn problem(&self) -> Option<(&'static str, &'static str)> {
        match self {
            Self::None => None,
            Self::Bearer { token } if token.is_empty() => {
                Some(("token", "está faltando (ou defina VT_SYSTEMS_TOKEN)"))
            }
            Self::Header { token, .. } if token.is_empty() => {
                Some(("token", "está faltando (ou defina VT_SYSTEMS_TOKEN)"))
            }
            Self::Header { header, .. } if HeaderName::from_bytes(header.as_bytes()).is_err() => {
                Some(("header", "não é um nome de cabeçalho HTTP válido"))
            }
            Self::Bearer { token } | Self::Header { token, .. } if HeaderValue::from_str(token).is_err() => {
                Some(("token", "tem caracteres que um cabeçalho HTTP não aceita"))
            }
            Self::Oauth2 { client_secret, .. } if client_secret.is_empty() => Some((
                "client_secret",
                "está faltando (ou defina VT_SYSTEMS_CLIENT_SECRET)",
            )),
            Self::Oauth2 { client_id, .. } if client_id.is_empty() => Some(("client_id", "está faltando")),
            Self::Oauth2 { token_url, .. } => match reqwest::Url::parse(token_url) {
                Err(_) => Some(("token_url", "não é uma URL")),
                Ok(u) if u.scheme() == "https" || is_loopback(&u) => None,
                Ok(_) => Some(("token_url", "deve ser https (http só em loopback)")),
            },
            _ => None,
        }
    }

    /// Its kind, as the configuration names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Bearer { .. } => "bearer",
            Self::Header { .. } => "header",
            Self::Oauth2 { .. } => "oauth2",
        }
    }

    /// The secrets it holds, for `redact` to take out of every text.
    fn secrets(&self) -> Vec<&str> {
        match self {
            Self::None => Vec::new(),
            Self::Bearer { token } | Self::Header { token, .. } => vec![token.as_str()],
            Self::Oauth2 { client_secret, .. } => vec![client_secret.as_str()],
        }
    }
}

/// Whether `url` names this machine (`localhost`, `127.0.0.0/8`, `::1`): where plain `http` is allowed.
pub fn is_loopback(url: &reqwest::Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Why a request could not be authenticated (no secret in the text).
#[derive(Debug, thiserror::Error)]
#[error("autenticação no sistema falhou: {0}")]
pub struct AuthError(String);

/// A system's credentials, ready to go on a request.
#[derive(Debug, Clone)]
pub(crate) enum Credentials {
    None,
    Static(HeaderName, HeaderValue),
    Oauth2(Arc<TokenSource>),
}

impl Credentials {
    /// The header to send, fetching a token when there is none yet or it is about to expire.
    pub(crate) async fn header(&self) -> Result<Option<(HeaderName, HeaderValue)>, AuthError> {
        match self {
            Self::None => Ok(None),
            Self::Static(name, value) => Ok(Some((name.clone(), value.clone()))),
            Self::Oauth2(source) => Ok(Some((AUTHORIZATION, source.token().await?))),
        }
    }

    /// A system answered 401 to `sent`: a fetched token is dropped (the next request fetches a new
    /// one). `true` when trying again can help.
    pub(crate) async fn refused(&self, sent: &HeaderValue) -> bool {
        match self {
            Self::Oauth2(source) => {
                source.forget(sent).await;
                true
            }
            _ => false,
        }
    }
}

/// Builds each system's credentials; systems with the same token endpoint, client and scope share
/// one token source (one token for the process).
#[derive(Default)]
pub(crate) struct CredentialsBuilder {
    sources: HashMap<(String, String, Option<String>), Arc<TokenSource>>,
}

impl CredentialsBuilder {
    pub(crate) fn build(
        &mut self,
        config: &AuthConfig,
        http: &reqwest::Client,
    ) -> Result<Credentials, AuthError> {
        if let Some((field, why)) = config.problem() {
            return Err(AuthError(format!("{field} {why}")));
        }
        for secret in config.secrets() {
            vt_contract::redact::register_secret(secret);
        }
        Ok(match config {
            AuthConfig::None => Credentials::None,
            AuthConfig::Bearer { token } => {
                Credentials::Static(AUTHORIZATION, header_value(&format!("Bearer {token}"))?)
            }
            AuthConfig::Header { header, token } => Credentials::Static(
                HeaderName::from_bytes(header.as_bytes()).map_err(|_| AuthError("header inválido".into()))?,
                header_value(token)?,
            ),
            AuthConfig::Oauth2 {
                token_url,
                client_id,
                client_secret,
                scope,
                auth_method,
            } => {
                let key = (token_url.clone(), client_id.clone(), scope.clone());
                let source = self.sources.entry(key).or_insert_with(|| {
                    Arc::new(TokenSource {
                        token_url: token_url.clone(),
                        client_id: client_id.clone(),
                        client_secret: client_secret.clone(),
                        scope: scope.clone(),
                        auth_method: *auth_method,
                        http: http.clone(),
                        slot: tokio::sync::Mutex::new(None),
                    })
                });
                Credentials::Oauth2(source.clone())
            }
        })
    }
}

fn header_value(text: &str) -> Result<HeaderValue, AuthError> {
    let mut value =
        HeaderValue::from_str(text).map_err(|_| AuthError("credencial inválida para um cabeçalho".into()))?;
    value.set_sensitive(true);
    Ok(value)
}

/// How long before its expiry a token is renewed.
const RENEW_BEFORE: Duration = Duration::from_secs(30);
/// A token whose answer gave no `expires_in` is used this long.
const UNSTATED_LIFETIME: Duration = Duration::from_secs(300);

/// An OAuth2 client's token, cached for the whole process.
pub(crate) struct TokenSource {
    token_url: String,
    client_id: String,
    client_secret: String,
    scope: Option<String>,
    auth_method: AuthMethod,
    http: reqwest::Client,
    /// Held while a token is fetched: the tasks that need it meanwhile wait for that one fetch.
    slot: tokio::sync::Mutex<Option<(HeaderValue, Instant)>>,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSource")
            .field("token_url", &self.token_url)
            .field("client_id", &self.client_id)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl TokenSource {
    async fn token(&self) -> Result<HeaderValue, AuthError> {
        let mut slot = self.slot.lock().await;
        if let Some((value, until)) = slot.as_ref()
            && Instant::now() < *until
        {
            return Ok(value.clone());
        }
        let (value, lifetime) = self.fetch().await?;
        let until = Instant::now() + lifetime.saturating_sub(RENEW_BEFORE.min(lifetime / 2));
        *slot = Some((value.clone(), until));
        Ok(value)
    }

    /// Drops the cached token if it is still the one that was refused.
    async fn forget(&self, refused: &HeaderValue) {
        let mut slot = self.slot.lock().await;
        if slot.as_ref().is_some_and(|(value, _)| value == refused) {
            *slot = None;
        }
    }

    /// One token request (RFC 6749 §4.4), through the `oauth2` crate over our HTTP client.
    async fn fetch(&self) -> Result<(HeaderValue, Duration), AuthError> {
        use oauth2::TokenResponse as _;
        let token_url = oauth2::TokenUrl::new(self.token_url.clone())
            .map_err(|_| AuthError("token_url inválida".into()))?;
        let client = oauth2::basic::BasicClient::new(oauth2::ClientId::new(self.client_id.clone()))
            .set_client_secret(oauth2::ClientSecret::new(self.client_secret.clone()))
            .set_token_uri(token_url)
            .set_auth_type(match self.auth_method {
                AuthMethod::Basic => oauth2::AuthType::BasicAuth,
                AuthMethod::Post => oauth2::AuthType::RequestBody,
            });
        let mut request = client.exchange_client_credentials();
        if let Some(scope) = &self.scope {
            for s in scope.split_whitespace() {
                request = request.add_scope(oauth2::Scope::new(s.to_owned()));
            }
        }
        let http = TokenHttp(self.http.clone());
        let answer = request.request_async(&http).await.map_err(|e| {
            // The error may quote the endpoint's body, which may echo what we sent: scrubbed.
            AuthError(vt_contract::redact::secrets(&token_error(&e)).into_owned())
        })?;
        let secret = answer.access_token().secret();
        vt_contract::redact::register_secret(secret);
        let lifetime = answer.expires_in().unwrap_or(UNSTATED_LIFETIME);
        Ok((header_value(&format!("Bearer {secret}"))?, lifetime))
    }
}

/// The token endpoint's HTTP client for the `oauth2` crate: the systems' own reqwest client.
struct TokenHttp(reqwest::Client);

type TokenFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<oauth2::HttpResponse, TokenHttpError>> + Send>>;

impl<'c> oauth2::AsyncHttpClient<'c> for TokenHttp {
    type Error = TokenHttpError;
    type Future = TokenFuture;

    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        Box::pin(exchange(self.0.clone(), request))
    }
}

/// One exchange with the token endpoint.
async fn exchange(
    http: reqwest::Client,
    req: oauth2::HttpRequest,
) -> Result<oauth2::HttpResponse, TokenHttpError> {
    let (parts, body) = req.into_parts();
    let url = reqwest::Url::parse(&parts.uri.to_string()).map_err(|_| TokenHttpError)?;
    let response = http
        .request(parts.method, url)
        .headers(parts.headers)
        .body(body)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|_| TokenHttpError)?;
    let mut out = oauth2::http::Response::builder().status(response.status());
    for (k, v) in response.headers() {
        out = out.header(k, v);
    }
    let bytes = response.bytes().await.map_err(|_| TokenHttpError)?;
    out.body(bytes.to_vec()).map_err(|_| TokenHttpError)
}

/// The token endpoint could not be reached or answered something unreadable.
#[derive(Debug, thiserror::Error)]
#[error("o servidor de tokens não respondeu")]
struct TokenHttpError;

fn token_error(e: &oauth2::RequestTokenError<TokenHttpError, oauth2::basic::BasicErrorResponse>) -> String {
    match e {
        oauth2::RequestTokenError::ServerResponse(r) => {
            format!("o servidor de tokens recusou as credenciais ({})", r.error())
        }
        oauth2::RequestTokenError::Request(_) => "o servidor de tokens não respondeu".into(),
        oauth2::RequestTokenError::Parse(_, _) => "a resposta do servidor de tokens não é um token".into(),
        oauth2::RequestTokenError::Other(_) => "o servidor de tokens respondeu algo inesperado".into(),
    }
}
