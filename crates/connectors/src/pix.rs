//! The operator's payment provider, through the API Pix: create, read and withdraw an immediate
//! charge, ask for a refund; and Pix Automático's recurrences and their charges. Authenticated as
//! `[pix.auth]` says (OAuth2 client credentials at every PSP) over `[pix.tls]`'s client certificate.
//! Most calls are idempotent by the API's own rules (`PUT` with the caller's txid or refund id,
//! `GET`, `PATCH` to a status), so one that got no answer may be sent again; the few `POST`s
//! (`/locrec`, `/rec`, a retry) are sent once. A refused token is renewed once.

use std::time::Duration;

use std::collections::BTreeMap;
use std::sync::Arc;

use reqwest::Method;
use rust_decimal::Decimal;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use vt_domain::pix::api::{Cob, CobPedido, CobStatus, Devolucao, DevolucaoPedido, Pix};
use vt_domain::pix::automatico::{AutomaticoConfig, Cancelamento, CobR, CobRPedido, LocRec, Rec, RecPedido};

use crate::auth::{AuthConfig, AuthError, Credentials, CredentialsBuilder};
use crate::exchange::{Local, Peer, Request, Retry, Transport};
use crate::tls::{TlsConfig, TlsError};

/// `[pix]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct PixConfig {
    /// The provider's API Pix base (`https://pix.banco.example.com/api/v2`).
    pub api_url: String,
    /// The operator's Pix key, where payments land.
    pub chave: String,
    /// How long a code can be paid for.
    pub expiracao_minutos: u32,
    /// How many new codes a card holder may ask for one recharge.
    pub novos_codigos_max: u32,
    /// Send WhatsApp's native `order_details` (accounts Meta enabled for payments).
    pub whatsapp_order_details: bool,
    /// The longest a call to the provider may take.
    pub timeout_ms: u64,
    /// How long after its payment a charge still not credited is taken for one whose credit a stop
    /// interrupted, and credited again under the same key: longer than the recharge system's slowest
    /// answer.
    pub retomar_credito_segundos: u32,
    /// How often `serve` reads open charges back (a notice missed, a code expired, a credit resumed).
    pub varredura_segundos: u32,
    pub auth: AuthConfig,
    pub tls: TlsConfig,
    /// Pix Automático (`[pix.automatico]`); alone, with no provider, it serves the embedded simulator.
    pub automatico: AutomaticoConfig,
}

impl Default for PixConfig {
    fn default() -> Self {
        Self {
            api_url: String::new(),
            chave: String::new(),
            expiracao_minutos: 15,
            novos_codigos_max: 3,
            whatsapp_order_details: false,
            timeout_ms: 10_000,
            retomar_credito_segundos: 120,
            varredura_segundos: 30,
            auth: AuthConfig::None,
            tls: TlsConfig::default(),
            automatico: vt_domain::pix::automatico::AutomaticoConfig::default(),
        }
    }
}

impl PixConfig {
    /// The first field that cannot serve, with its whole path (`pix.auth.client_secret`), and why
    /// (checked when the configuration loads).
    pub fn problem(&self) -> Option<(String, &'static str)> {
        let field = |f: &str| Some(format!("pix.{f}"));
        if let Some((f, why)) = self.automatico.problem() {
            return Some((format!("pix.automatico.{f}"), why));
        }
        if self.simulated() {
            return None;
        }
        match reqwest::Url::parse(&self.api_url) {
            Ok(u) if u.scheme() == "https" || crate::auth::is_loopback(&u) => {}
            Ok(_) => return field("api_url").map(|f| (f, "deve ser https (http só em loopback)")),
            Err(_) => return field("api_url").map(|f| (f, "precisa ser uma URL")),
        }
        let problem = if self.chave.trim().is_empty() {
            Some(("chave", "não pode ser vazia"))
        } else if !(1..=24 * 60).contains(&self.expiracao_minutos) {
            Some(("expiracao_minutos", "precisa estar entre 1 e 1440"))
        } else if self.novos_codigos_max > 10 {
            Some(("novos_codigos_max", "precisa estar entre 0 e 10"))
        } else if !(1_000..=60_000).contains(&self.timeout_ms) {
            Some(("timeout_ms", "precisa estar entre 1000 e 60000"))
        } else if !(1..=3_600).contains(&self.retomar_credito_segundos) {
            Some(("retomar_credito_segundos", "precisa estar entre 1 e 3600"))
        } else if !(1..=600).contains(&self.varredura_segundos) {
            Some(("varredura_segundos", "precisa estar entre 1 e 600"))
        } else {
            None
        };
        if let Some((f, why)) = problem {
            return field(f).map(|f| (f, why));
        }
        self.auth.problem().map(|(f, why)| match f {
            "client_secret" => (
                "pix.auth.client_secret".to_owned(),
                "está faltando (ou defina VT_PIX_CLIENT_SECRET)",
            ),
            "token" => (
                "pix.auth.token".to_owned(),
                "está faltando (ou defina VT_PIX_TOKEN)",
            ),
            other => (format!("pix.auth.{other}"), why),
        })
    }

    /// Only `[pix.automatico]` was written (no provider): the embedded simulator is the provider.
    pub fn simulated(&self) -> bool {
        self.api_url.is_empty() && self.chave.is_empty()
    }

    /// With the secrets the environment gives (`VT_PIX_TOKEN`, `VT_PIX_CLIENT_SECRET`), never written
    /// in the file.
    #[must_use]
    pub fn with_secrets(mut self, token: Option<&str>, client_secret: Option<&str>) -> Self {
        self.auth = self.auth.with_secrets(token, client_secret);
        self
    }
}

/// Why a call to the provider did not give its answer. No secret and no body is in the text.
#[derive(Debug, thiserror::Error)]
pub enum PixError {
    #[error("configuração do provedor Pix inválida: {0} {1}")]
    Config(String, &'static str),
    #[error("certificado do provedor Pix: {0}")]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Unauthenticated(#[from] AuthError),
    /// No answer: the request may or may not have reached the provider (it may be sent again).
    #[error("o provedor Pix não respondeu ({0})")]
    Unanswered(&'static str),
    /// The provider answered with an error: its status and the problem's `title` (scrubbed).
    #[error("o provedor Pix recusou a chamada ({status}: {title})")]
    Refused { status: u16, title: String },
    /// A 2xx whose body is not what the API says.
    #[error("resposta do provedor Pix fora do padrão da API Pix: {0}")]
    Body(String),
}

impl PixError {
    /// Not found (a charge the provider does not know).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Refused { status: 404, .. })
    }
}

/// The provider's API Pix.
#[derive(Debug, Clone)]
pub struct Psp {
    base: String,
    peer: Peer,
    timeout: Duration,
}

/// The base a provider in this process is called at.
const IN_PROCESS_BASE: &str = "http://simulador.local/pix/v2";

#[derive(Serialize)]
struct Remocao {
    status: CobStatus,
}

impl Psp {
    pub fn new(config: &PixConfig) -> Result<Self, PixError> {
        if let Some((field, why)) = config.problem() {
            return Err(PixError::Config(field, why));
        }
        let http = crate::tls::client(reqwest::Client::builder(), &config.tls)?;
        let credentials = CredentialsBuilder::default().build(&config.auth, &http)?;
        Ok(Self {
            base: config.api_url.trim_end_matches('/').to_owned(),
            peer: Peer {
                transport: Transport::Http(http),
                credentials,
            },
            timeout: Duration::from_millis(config.timeout_ms),
        })
    }

    /// The provider `local` serves (the embedded simulator's), called in this process with no network
    /// and no credentials.
    pub fn in_process(local: Arc<dyn Local>) -> Self {
        Self {
            base: IN_PROCESS_BASE.to_owned(),
            peer: Peer {
                transport: Transport::Local(local),
                credentials: Credentials::None,
            },
            timeout: Duration::from_millis(PixConfig::default().timeout_ms),
        }
    }

    /// `PUT /cob/{txid}`: the charge, created — or, for a txid the provider knows already, as it is.
    pub async fn criar_cob(&self, txid: &str, pedido: &CobPedido) -> Result<Cob, PixError> {
        self.call(Method::PUT, &format!("/cob/{txid}"), Some(pedido))
            .await
    }

    /// `GET /cob/{txid}`: the charge as the provider has it, with the payments it received.
    pub async fn cob(&self, txid: &str) -> Result<Cob, PixError> {
        self.call::<(), _>(Method::GET, &format!("/cob/{txid}"), None)
            .await
    }

    /// `PATCH /cob/{txid}`: an unpaid charge withdrawn (`REMOVIDA_PELO_USUARIO_RECEBEDOR`).
    pub async fn remover_cob(&self, txid: &str) -> Result<Cob, PixError> {
        let body = Remocao {
            status: CobStatus::RemovidaPeloUsuarioRecebedor,
        };
        self.call(Method::PATCH, &format!("/cob/{txid}"), Some(&body))
            .await
    }

    /// `GET /pix/{e2eid}`: a payment received, with its refunds as they stand.
    pub async fn pix(&self, e2eid: &str) -> Result<Pix, PixError> {
        self.call::<(), _>(Method::GET, &format!("/pix/{e2eid}"), None)
            .await
    }

    /// `PUT /pix/{e2eid}/devolucao/{id}`: `valor` of payment `e2eid` returned to its payer; the same
    /// `id` is the same refund.
    pub async fn devolver(&self, e2eid: &str, id: &str, valor: Decimal) -> Result<Devolucao, PixError> {
        let body = DevolucaoPedido {
            valor,
            descricao: Some("Recarga de vale-transporte não creditada".into()),
        };
        self.call(Method::PUT, &format!("/pix/{e2eid}/devolucao/{id}"), Some(&body))
            .await
    }

    /// `POST /locrec`: a location for a recurrence's payload. Not idempotent: sent once (a location
    /// left unused costs nothing).
    pub async fn criar_locrec(&self) -> Result<LocRec, PixError> {
        self.call_once::<(), _>(Method::POST, "/locrec", None).await
    }

    /// `POST /rec`: the recurrence the payer will authorise. Not idempotent: sent once — one that got
    /// no answer is never authorised by anyone, and expires at the provider.
    pub async fn criar_rec(&self, pedido: &RecPedido) -> Result<Rec, PixError> {
        self.call_once(Method::POST, "/rec", Some(pedido)).await
    }

    /// `GET /rec/{idRec}`: the recurrence as the provider has it (with its code while unauthorised).
    pub async fn rec(&self, id_rec: &str) -> Result<Rec, PixError> {
        self.call::<(), _>(Method::GET, &format!("/rec/{id_rec}"), None)
            .await
    }

    /// `PATCH /rec/{idRec}`: cancelled by the receiver (the card holder asked).
    pub async fn cancelar_rec(&self, id_rec: &str) -> Result<Rec, PixError> {
        let body = Cancelamento::new();
        self.call(Method::PATCH, &format!("/rec/{id_rec}"), Some(&body))
            .await
    }

    /// `PUT /cobr/{txid}`: a cycle's charge — or, for a txid the provider knows, the one it has.
    pub async fn criar_cobr(&self, txid: &str, pedido: &CobRPedido) -> Result<CobR, PixError> {
        self.call(Method::PUT, &format!("/cobr/{txid}"), Some(pedido))
            .await
    }

    /// `GET /cobr/{txid}`: the charge with its attempts and the payment that settled it.
    pub async fn cobr(&self, txid: &str) -> Result<CobR, PixError> {
        self.call::<(), _>(Method::GET, &format!("/cobr/{txid}"), None)
            .await
    }

    /// `PATCH /cobr/{txid}`: a charge not yet attempted, cancelled.
    pub async fn cancelar_cobr(&self, txid: &str) -> Result<CobR, PixError> {
        let body = Cancelamento::new();
        self.call(Method::PATCH, &format!("/cobr/{txid}"), Some(&body))
            .await
    }

    /// `POST /cobr/{txid}/retentativa/{data}`: a failed charge tried again on `data` (`YYYY-MM-DD`).
    /// Sent once: the provider refuses a second attempt for a date (or while one is under way), and the
    /// charge read back says which happened.
    pub async fn retentativa(&self, txid: &str, data: &str) -> Result<CobR, PixError> {
        self.call_once::<(), _>(Method::POST, &format!("/cobr/{txid}/retentativa/{data}"), None)
            .await
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, PixError> {
        self.exchange(method, path, body, &Retry::PROVIDER).await
    }

    /// A call that is not idempotent: one attempt, whatever happens.
    async fn call_once<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, PixError> {
        self.exchange(method, path, body, &Retry::ONCE).await
    }

    async fn exchange<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
        retry: &Retry,
    ) -> Result<T, PixError> {
        let body = body
            .map(|b| vt_contract::json::to_bytes(b).map_err(|e| PixError::Body(e.to_string())))
            .transpose()?;
        let url = reqwest::Url::parse(&format!("{}{path}", self.base))
            .map_err(|_| PixError::Unanswered("falha de conexão"))?;
        let request = Request {
            method,
            url: &url,
            headers: &BTreeMap::new(),
            body: body.map(bytes::Bytes::from),
            timeout: self.timeout,
        };
        let answer = self.peer.send(&request, retry).await.map_err(|f| match f {
            crate::exchange::Failure::Unauthenticated(e) => PixError::Unauthenticated(e),
            other => PixError::Unanswered(other.words()),
        })?;
        let bytes = answer.body.map_err(|f| PixError::Unanswered(f.words()))?;
        if !(200..300).contains(&answer.status) {
            return Err(PixError::Refused {
                status: answer.status,
                title: problem_title(&bytes),
            });
        }
        vt_contract::json::from_bytes(&bytes)
            .map_err(|e| PixError::Body(vt_contract::redact::serde_message(&e.to_string())))
    }
}

/// The problem's `title` (RFC 7807, as the API Pix answers errors), scrubbed of secrets and cut short;
/// nothing else of the body.
fn problem_title(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Problem {
        title: Option<String>,
    }
    let title = vt_contract::json::from_bytes::<Problem>(body)
        .ok()
        .and_then(|p| p.title)
        .unwrap_or_else(|| "sem detalhe".to_owned());
    vt_contract::redact::secrets(&title).chars().take(120).collect()
}
