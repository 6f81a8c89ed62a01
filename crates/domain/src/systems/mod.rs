//! The three external systems of the VT flow (balance, recharge, notification) as the stages see
//! them: a port ([`Systems`]) with what a call gave ([`HttpResult`]), the endpoints as the PRD names
//! them, and the published contract of the calls ([`contract`]). The balance system is the card
//! system: it also answers a card's situation and statement, and blocks a card or orders its second
//! copy (the card holder's service desk). The HTTP client that implements the port is `vt-connectors`' `VtSystems`; the simulator that stands in for the systems is
//! `vt-simulators`'. A stage never sees either: it takes the port from its context.

pub mod contract;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Endpoints, as the PRD names them.
pub const SALDO_ENDPOINT: &str = "/api/v1/saldos/consultar";
pub const RECARGA_ENDPOINT: &str = "/api/v1/recargas";
pub const NOTIFICACAO_ENDPOINT: &str = "/api/v1/notificacoes";
/// A card's situation (active, blocked, a credit waiting to be validated on board, a limit reached),
/// on the balance system.
pub const SITUACAO_ENDPOINT: &str = "/api/v1/cartoes/situacao";
/// A card's statement (credits and uses over a period, paged), on the balance system.
pub const EXTRATO_ENDPOINT: &str = "/api/v1/cartoes/extrato";

/// A second copy's quote (`GET`) and order (`POST`), on the balance system.
pub const SEGUNDA_VIA_ENDPOINT: &str = "/api/v1/cartoes/segunda-via";

/// How long the card system has to answer a request that changes a card (it is never sent twice on
/// its own: the same key asked again, by a person, is answered once).
pub const ORDEM_TIMEOUT_MS: u64 = 8000;

/// A request that changes a card, on the balance system: sent once per idempotency key, never retried
/// automatically.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrdemCartao {
    /// `POST /api/v1/cartoes/bloqueio`.
    Bloqueio,
    /// `POST /api/v1/cartoes/desbloqueio`.
    Desbloqueio,
    /// `POST /api/v1/cartoes/segunda-via`.
    SegundaVia,
    /// `POST /api/v1/cartoes/titular/verificacao`: whether the CPF's last digits are the holder's — a
    /// check that changes nothing, posted so the digits never travel in a URL.
    Titular,
}

impl OrdemCartao {
    pub fn path(self) -> &'static str {
        match self {
            Self::Bloqueio => "/api/v1/cartoes/bloqueio",
            Self::Desbloqueio => "/api/v1/cartoes/desbloqueio",
            Self::SegundaVia => SEGUNDA_VIA_ENDPOINT,
            Self::Titular => "/api/v1/cartoes/titular/verificacao",
        }
    }
}

/// How a read of the card system is made: its timeout, and how often a 5xx or 429 is tried (a read
/// moves nothing, so it may be tried again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadPolicy {
    pub timeout_ms: u64,
    pub attempts: u32,
    pub backoff_ms: u64,
}

impl Default for ReadPolicy {
    /// The balance read's policy, as RF1 sets it for the flow: one card read, one rule.
    fn default() -> Self {
        use crate::stages::rf01_preparar_consulta::{BACKOFF_MS, MAX_ATTEMPTS, TIMEOUT_MS};
        Self {
            timeout_ms: TIMEOUT_MS,
            attempts: MAX_ATTEMPTS,
            backoff_ms: BACKOFF_MS,
        }
    }
}

/// The statement asked for: a card, a period of days (both included, the operator's time zone) and a
/// page (from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtratoPedido {
    pub cartao: String,
    pub de: chrono::NaiveDate,
    pub ate: chrono::NaiveDate,
    pub pagina: u32,
}

/// The three systems, as the stages call them. Each call carries the retry policy its stage's
/// payload names; only 5xx and 429 are retried, and a recharge is sent exactly once.
#[async_trait]
pub trait Systems: Send + Sync + std::fmt::Debug {
    /// `GET {saldo}/api/v1/saldos/consultar?cartao=`.
    async fn consultar_saldo(
        &self,
        cartao: &str,
        headers: &BTreeMap<String, String>,
        timeout_ms: u64,
        attempts: u32,
        backoff_ms: u64,
    ) -> HttpResult;

    /// `POST {recarga}/api/v1/recargas`, exactly once.
    async fn recarregar(
        &self,
        body: &Value,
        headers: &BTreeMap<String, String>,
        timeout_ms: u64,
    ) -> HttpResult;

    /// `GET {saldo}/api/v1/cartoes/situacao?cartao=`.
    async fn consultar_situacao(
        &self,
        cartao: &str,
        headers: &BTreeMap<String, String>,
        read: ReadPolicy,
    ) -> HttpResult;

    /// `GET {saldo}/api/v1/cartoes/extrato?cartao=&de=&ate=&pagina=`.
    async fn extrato(
        &self,
        pedido: &ExtratoPedido,
        headers: &BTreeMap<String, String>,
        read: ReadPolicy,
    ) -> HttpResult;

    /// `GET {saldo}/api/v1/cartoes/segunda-via?cartao=`: what a second copy costs and how it comes.
    async fn cotar_segunda_via(
        &self,
        cartao: &str,
        headers: &BTreeMap<String, String>,
        read: ReadPolicy,
    ) -> HttpResult;

    /// `POST {saldo}{ordem.path()}` with `headers` (the idempotency key among them), exactly once.
    async fn ordem_cartao(
        &self,
        ordem: OrdemCartao,
        body: &Value,
        headers: &BTreeMap<String, String>,
        timeout_ms: u64,
    ) -> HttpResult;

    /// `POST {notificacao}/api/v1/notificacoes`, retried on 5xx/429 (the dedup key makes it safe).
    async fn notificar(
        &self,
        body: &Value,
        headers: &BTreeMap<String, String>,
        timeout_ms: u64,
        attempts: u32,
        backoff_ms: u64,
    ) -> HttpResult;
}

/// The systems as a turn's context carries them ([`vt_contract::context::Extensions`]): what a stage
/// takes with `ctx.require::<SystemsPort>()`.
#[derive(Debug, Clone)]
pub struct SystemsPort(Arc<dyn Systems>);

impl SystemsPort {
    pub fn new(systems: impl Systems + 'static) -> Self {
        Self(Arc::new(systems))
    }

    /// The systems it holds, as a stage calls them.
    pub fn get(&self) -> &dyn Systems {
        &*self.0
    }
}

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
    /// A call that got no HTTP answer: `tipo` says why ([`Erro::tipo`]).
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
