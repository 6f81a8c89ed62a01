//! The one exchange every connector makes with a provider: a request sent over HTTP (or to a server in
//! this process), with the provider's credentials, a 401 to a fetched token renewing it once, and the
//! retries the caller's policy allows. The systems' client, the Pix PSP's and the card provider's
//! differ only in their URLs, their bodies and how they read an answer.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use reqwest::header::{HeaderName, HeaderValue};

use crate::auth::{AuthError, Credentials};

/// The header payment APIs use to mark an answer replayed from their idempotency store.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// A server in this process that answers as a provider would over HTTP: the embedded simulators'
/// routers (`vt-simulators`), called without a socket.
#[async_trait]
pub trait Local: Send + Sync + fmt::Debug {
    /// `request`'s answer; `None` when it could not be had (as a connection failure over HTTP).
    async fn call(&self, request: http::Request<Bytes>) -> Option<http::Response<Bytes>>;
}

/// How requests reach a provider.
#[derive(Debug, Clone)]
pub(crate) enum Transport {
    Http(reqwest::Client),
    /// The same requests, headers and answers as over HTTP, without the socket. Loopback HTTP to a
    /// simulator in the same process cost both ends of every exchange in system calls and wake-ups.
    Local(Arc<dyn Local>),
}

/// A provider as a connector reaches it: a transport and the credentials every request carries.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    pub(crate) transport: Transport,
    pub(crate) credentials: Credentials,
}

/// One request, as a connector asks for it.
pub(crate) struct Request<'a> {
    pub(crate) method: reqwest::Method,
    pub(crate) url: &'a reqwest::Url,
    pub(crate) headers: &'a BTreeMap<String, String>,
    pub(crate) body: Option<Bytes>,
    pub(crate) timeout: Duration,
}

/// When an exchange is sent again, and how long it waits first.
pub(crate) struct Retry {
    /// How many times it is sent in all (1: once).
    pub(crate) attempts: u32,
    /// Whether a request that got no answer is sent again. Not for a system whose request may have
    /// reached it (a recharge); a provider's idempotent call may.
    pub(crate) unanswered: bool,
    /// The wait before the second attempt.
    pub(crate) backoff: Duration,
    /// Each later attempt waits one `backoff` more than the one before.
    pub(crate) growing: bool,
    /// The provider's `Retry-After` is waited for where it is longer than the backoff.
    pub(crate) retry_after: bool,
    /// No wait is longer.
    pub(crate) cap: Duration,
}

impl Retry {
    /// A provider's idempotent call: three attempts, 200 ms more before each, an unanswered one too.
    pub(crate) const PROVIDER: Self = Self {
        attempts: 3,
        unanswered: true,
        backoff: Duration::from_millis(200),
        growing: true,
        retry_after: false,
        cap: Duration::MAX,
    };

    /// Sent once, whatever happens.
    pub(crate) const ONCE: Self = Self {
        attempts: 1,
        ..Self::PROVIDER
    };

    /// The wait before attempt `n + 1`.
    fn wait(&self, n: u32, retry_after: Option<Duration>) -> Duration {
        let base = if self.growing {
            self.backoff * n
        } else {
            self.backoff
        };
        let wait = match retry_after {
            Some(asked) if self.retry_after => asked.max(base),
            _ => base,
        };
        wait.min(self.cap)
    }
}

/// An exchange's answer, whichever way it travelled.
pub(crate) struct Answer {
    pub(crate) status: u16,
    /// `Idempotent-Replayed: true`.
    pub(crate) replayed: bool,
    pub(crate) retry_after: Option<Duration>,
    /// The body, or why it did not arrive whole.
    pub(crate) body: Result<Bytes, Failure>,
    /// Which attempt this answer is to.
    pub(crate) attempt: u32,
}

impl Answer {
    /// Reads the two headers the connectors act on, so neither transport keeps or copies the rest.
    fn new(status: u16, headers: &reqwest::header::HeaderMap, body: Result<Bytes, Failure>) -> Self {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
        Self {
            status,
            replayed: header(REPLAYED_HEADER).is_some_and(|v| v.eq_ignore_ascii_case("true")),
            retry_after: header(reqwest::header::RETRY_AFTER.as_str())
                .and_then(|v| v.parse::<u64>().ok())
                .map(Duration::from_secs),
            body,
            attempt: 1,
        }
    }
}

/// Why an exchange has no answer (or no whole body).
#[derive(Debug)]
pub(crate) enum Failure {
    Timeout,
    Connection,
    /// The provider's credentials could not be had (a token endpoint refused or unreachable): the
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

    /// The words a connector's error says of it: no address, no secret.
    pub(crate) fn words(&self) -> &'static str {
        match self {
            Self::Timeout => "tempo esgotado",
            Self::Connection | Self::Unauthenticated(_) => "falha de conexão",
        }
    }
}

impl Peer {
    /// `request` sent, and sent again as `retry` allows: a 5xx or 429 answer, or no answer where
    /// `retry.unanswered`. Credentials that cannot be had are never retried (nothing was sent).
    pub(crate) async fn send(&self, request: &Request<'_>, retry: &Retry) -> Result<Answer, Failure> {
        let attempts = retry.attempts.max(1);
        let mut attempt = 1;
        loop {
            let outcome = self.authorized(request).await;
            let again = attempt < attempts
                && match &outcome {
                    // A body that did not arrive whole is no answer.
                    Ok(a) if a.body.is_err() => retry.unanswered,
                    Ok(a) => a.status == 429 || a.status >= 500,
                    Err(Failure::Unauthenticated(_)) => false,
                    Err(_) => retry.unanswered,
                };
            if !again {
                return outcome.map(|a| Answer { attempt, ..a });
            }
            let retry_after = outcome.as_ref().ok().and_then(|a| a.retry_after);
            tracing::warn!(
                path = request.url.path(),
                attempt,
                "provider call to be sent again"
            );
            tokio::time::sleep(retry.wait(attempt, retry_after)).await;
            attempt += 1;
        }
    }

    /// One attempt with the credentials. A 401 to a fetched token drops it, and the request goes once
    /// more with a new one: the refused request was not processed, so even a recharge is sent at most
    /// once in effect, under its same idempotency key.
    async fn authorized(&self, request: &Request<'_>) -> Result<Answer, Failure> {
        let mut renewed = false;
        loop {
            let auth = self
                .credentials
                .header()
                .await
                .map_err(Failure::Unauthenticated)?;
            let answer = self.transmit(request, auth.as_ref()).await?;
            if answer.status == 401
                && !renewed
                && let Some((_, sent)) = &auth
                && self.credentials.refused(sent).await
            {
                renewed = true;
                continue;
            }
            return Ok(answer);
        }
    }

    /// One attempt, over HTTP or to the server in this process, within the request's timeout.
    async fn transmit(
        &self,
        request: &Request<'_>,
        auth: Option<&(HeaderName, HeaderValue)>,
    ) -> Result<Answer, Failure> {
        match &self.transport {
            Transport::Http(client) => over_http(client, request, auth).await,
            Transport::Local(local) => in_process(local.as_ref(), request).await,
        }
    }
}

/// JSON unless the caller named its body's type (a provider's form-encoded API).
fn content_type(request: &Request<'_>) -> Option<&'static str> {
    (request.body.is_some() && !request.headers.contains_key("content-type")).then_some("application/json")
}

async fn over_http(
    client: &reqwest::Client,
    request: &Request<'_>,
    auth: Option<&(HeaderName, HeaderValue)>,
) -> Result<Answer, Failure> {
    let mut builder = client
        .request(request.method.clone(), request.url.clone())
        .timeout(request.timeout);
    if let Some((name, value)) = auth {
        builder = builder.header(name, value);
    }
    for (k, v) in request.headers {
        builder = builder.header(k, v);
    }
    if let Some(kind) = content_type(request) {
        builder = builder.header(reqwest::header::CONTENT_TYPE, kind);
    }
    if let Some(b) = &request.body {
        builder = builder.body(b.clone());
    }
    let response = builder.send().await.map_err(|e| Failure::of(&e))?;
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    let body = response.bytes().await.map_err(|e| Failure::of(&e));
    Ok(Answer::new(status, &headers, body))
}

/// One request to a server in this process, as [`over_http`] would send it (its path and query; no
/// credentials: a local server has none to check).
async fn in_process(local: &dyn Local, request: &Request<'_>) -> Result<Answer, Failure> {
    let target = match request.url.query() {
        Some(q) => format!("{}?{q}", request.url.path()),
        None => request.url.path().to_owned(),
    };
    let mut builder = http::Request::builder()
        .method(request.method.clone())
        .uri(target);
    for (k, v) in request.headers {
        builder = builder.header(k, v);
    }
    if let Some(kind) = content_type(request) {
        builder = builder.header(reqwest::header::CONTENT_TYPE, kind);
    }
    // A header the HTTP client would refuse is refused here too, as a connection failure.
    let built = builder
        .body(request.body.clone().unwrap_or_default())
        .map_err(|_| Failure::Connection)?;
    let response = tokio::time::timeout(request.timeout, local.call(built))
        .await
        .map_err(|_| Failure::Timeout)?
        .ok_or(Failure::Connection)?;
    let (parts, body) = response.into_parts();
    Ok(Answer::new(parts.status.as_u16(), &parts.headers, Ok(body)))
}
