//! Paying a recharge by card without a card number ever entering a chat (PCI DSS): the card holder
//! pays on a payment provider's **hosted checkout**, reached by a link. This module is the port the
//! service charges through ([`Checkouts`]: create a link for an amount and a reference, read it back,
//! withdraw it, refund its payment, verify a provider's notice) and the texts a card holder reads of
//! it. One real provider's adapter (Stripe Checkout Sessions) and `[cartao]`'s configuration are in
//! `vt-connectors`' `cartao`; the embedded simulator's provider (the same API, with a checkout page of
//! its own) is in `vt-simulators`. Another provider is one file beside Stripe's implementing
//! [`Checkouts`].

pub mod textos;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

/// A checkout link as the provider has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The provider's id of the checkout (Stripe's `cs_…`).
    pub id: String,
    /// Where the card holder pays.
    pub url: String,
    pub status: LinkStatus,
    /// The amount to pay (or paid), in reais.
    pub valor: Decimal,
    /// The payment that paid it, once paid (Stripe's PaymentIntent, `pi_…`).
    pub pagamento: Option<String>,
    pub expira_em: DateTime<Utc>,
}

/// Where a checkout stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkStatus {
    /// Waiting for the card holder.
    Aberto,
    /// Paid in full.
    Pago,
    /// Expired or withdrawn unpaid.
    Expirado,
}

/// A link to create: the amount, the reference that names the recharge (never the card), the masked
/// card for the checkout page's line, how long it can be paid for, and the key under which the same
/// request is the same link.
#[derive(Debug, Clone)]
pub struct PedidoLink {
    pub valor: Decimal,
    pub referencia: String,
    pub descricao: String,
    pub expira_em: DateTime<Utc>,
    pub chave: String,
}

/// A refund of a card payment, and the provider's word on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Estorno {
    pub id: String,
    pub status: EstornoStatus,
}

/// Where a refund stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EstornoStatus {
    EmProcessamento,
    Devolvido,
    NaoRealizado,
}

/// Why a call to the card provider did not give its answer. No secret and no body is in the text.
#[derive(Debug, thiserror::Error)]
pub enum CartaoError {
    #[error("configuração do provedor de cartão inválida: {0} {1}")]
    Config(String, &'static str),
    /// The provider's client certificate could not be loaded (the connector's words).
    #[error("certificado do provedor de cartão: {0}")]
    Tls(String),
    /// The provider's credentials could not be had (the connector's words, no secret in them).
    #[error("{0}")]
    Unauthenticated(String),
    /// No answer: the request may or may not have reached the provider (it may be sent again).
    #[error("o provedor de cartão não respondeu ({0})")]
    Unanswered(&'static str),
    /// The provider answered with an error: its status and error code (scrubbed).
    #[error("o provedor de cartão recusou a chamada ({status}: {code})")]
    Refused { status: u16, code: String },
    /// A 2xx whose body is not what the provider's API says.
    #[error("resposta do provedor de cartão fora do padrão: {0}")]
    Body(String),
}

/// Why a provider's notice is not taken. Nothing of the notice is in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AvisoInvalido {
    #[error("aviso sem assinatura")]
    SemAssinatura,
    #[error("assinatura do aviso não confere")]
    Assinatura,
    #[error("aviso fora da janela de tempo aceita")]
    Expirado,
    #[error("corpo do aviso fora do padrão")]
    Corpo,
}

/// The card provider, as the service charges through it.
#[async_trait]
pub trait Checkouts: Send + Sync + std::fmt::Debug {
    /// A checkout for `pedido`; the same `pedido.chave` is the same checkout.
    async fn criar(&self, pedido: &PedidoLink) -> Result<Link, CartaoError>;
    /// Checkout `id` as the provider has it now.
    async fn ler(&self, id: &str) -> Result<Link, CartaoError>;
    /// Checkout `id` withdrawn unpaid; one paid meanwhile comes back paid.
    async fn expirar(&self, id: &str) -> Result<Link, CartaoError>;
    /// `valor` of payment `pagamento` returned to the card; the same `chave` is the same refund.
    async fn estornar(&self, pagamento: &str, valor: Decimal, chave: &str) -> Result<Estorno, CartaoError>;
    /// The refund of payment `pagamento` as it stands, if one was made.
    async fn estorno(&self, pagamento: &str) -> Result<Option<Estorno>, CartaoError>;
    /// The checkouts a provider's notice names, once its signature is checked at `agora`: a hint,
    /// read back before anything happens. `assinatura` is the signature header's value.
    fn aviso(
        &self,
        assinatura: Option<&str>,
        corpo: &[u8],
        agora: DateTime<Utc>,
    ) -> Result<Vec<String>, AvisoInvalido>;
}
