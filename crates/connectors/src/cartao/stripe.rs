//! Stripe Checkout Sessions as the card provider (chosen over Mercado Pago's Checkout Pro because its
//! API is one object with a status, an amount and an expiry of the caller's choosing — 30 minutes to
//! 24 hours, so `[cartao] expiracao_minutos` is honoured by the provider itself — every write takes an
//! `Idempotency-Key`, and its notices are signed over the raw body with a timestamp and a five-minute
//! tolerance, which is all a notice needs to be a safe hint). Form-encoded requests, JSON answers,
//! amounts in cents; authenticated as `[cartao.auth]` says (the secret key as a bearer token).
//!
//! The wire types stay here: what leaves this file is the port's `Link` and `Estorno`.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use reqwest::Method;
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use serde::Deserialize;
use sha2::Sha256;

use vt_domain::cartao::{
    AvisoInvalido, CartaoError, Checkouts, Estorno, EstornoStatus, Link, LinkStatus, PedidoLink,
};

use super::CartaoConfig;
use crate::auth::{Credentials, CredentialsBuilder};
use crate::exchange::{Failure, Local, Peer, Request, Retry, Transport};

/// How old a notice's timestamp may be (Stripe's own default tolerance).
pub const TOLERANCIA_SEGUNDOS: i64 = 300;
/// The header Stripe signs its notices in.
pub const ASSINATURA: &str = "stripe-signature";

/// A Checkout Session as Stripe answers it (the fields the product reads).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Session {
    pub id: String,
    #[serde(default)]
    pub url: Option<String>,
    /// `open`, `complete` or `expired`.
    pub status: String,
    /// `paid`, `unpaid` or `no_payment_required`.
    pub payment_status: String,
    #[serde(default)]
    pub amount_total: Option<i64>,
    #[serde(default)]
    pub currency: Option<String>,
    pub expires_at: i64,
    #[serde(default)]
    pub payment_intent: Option<String>,
}

/// A Refund as Stripe answers it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Refund {
    pub id: String,
    /// `pending`, `requires_action`, `succeeded`, `failed` or `canceled`.
    pub status: String,
}

/// A list as Stripe answers it (newest first).
#[derive(Debug, Deserialize)]
struct List<T> {
    data: Vec<T>,
}

/// A notice (an Event), as far as the product reads it: which checkout it is about.
#[derive(Debug, Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    data: EventData,
}

#[derive(Debug, Deserialize)]
struct EventData {
    object: EventObject,
}

#[derive(Debug, Deserialize)]
struct EventObject {
    id: String,
}

/// An error as Stripe answers it.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
struct ErrorDetail {
    #[serde(default)]
    code: Option<String>,
    #[serde(rename = "type", default)]
    kind: Option<String>,
}

impl Session {
    pub(crate) fn link(&self) -> Result<Link, CartaoError> {
        let status = match (self.status.as_str(), self.payment_status.as_str()) {
            ("complete", "paid") => LinkStatus::Pago,
            ("expired", _) => LinkStatus::Expirado,
            _ => LinkStatus::Aberto,
        };
        let cents = self
            .amount_total
            .ok_or_else(|| CartaoError::Body("sessão sem amount_total".into()))?;
        if self
            .currency
            .as_deref()
            .is_some_and(|c| !c.eq_ignore_ascii_case("brl"))
        {
            return Err(CartaoError::Body("sessão em outra moeda".into()));
        }
        Ok(Link {
            id: self.id.clone(),
            url: self.url.clone().unwrap_or_default(),
            status,
            valor: Decimal::new(cents, 2),
            pagamento: self.payment_intent.clone().filter(|_| status == LinkStatus::Pago),
            expira_em: DateTime::from_timestamp(self.expires_at, 0).unwrap_or_default(),
        })
    }
}

impl Refund {
    pub(crate) fn estorno(&self) -> Estorno {
        Estorno {
            id: self.id.clone(),
            status: match self.status.as_str() {
                "succeeded" => EstornoStatus::Devolvido,
                "failed" | "canceled" => EstornoStatus::NaoRealizado,
                _ => EstornoStatus::EmProcessamento,
            },
        }
    }
}

/// An amount in reais as Stripe's integer cents; `None` for what no payment can be.
pub(crate) fn cents(valor: Decimal) -> Option<i64> {
    (valor * Decimal::ONE_HUNDRED).round().to_i64().filter(|c| *c > 0)
}

/// The provider.
#[derive(Debug, Clone)]
pub struct Stripe {
    base: String,
    peer: Peer,
    timeout: Duration,
    retorno_url: String,
    webhook_secret: String,
}

/// The base a provider in this process is called at.
const IN_PROCESS_BASE: &str = "http://simulador.local/stripe/v1";

impl Stripe {
    pub fn new(config: &CartaoConfig) -> Result<Self, CartaoError> {
        if let Some((field, why)) = config.problem() {
            return Err(CartaoError::Config(field, why));
        }
        let http = crate::tls::client(reqwest::Client::builder(), &config.tls)
            .map_err(|e| CartaoError::Tls(e.to_string()))?;
        let credentials = CredentialsBuilder::default()
            .build(&config.auth, &http)
            .map_err(|e| CartaoError::Unauthenticated(e.to_string()))?;
        Ok(Self {
            base: config.api_url.trim_end_matches('/').to_owned(),
            peer: Peer {
                transport: Transport::Http(http),
                credentials,
            },
            timeout: Duration::from_millis(config.timeout_ms),
            retorno_url: config.retorno_url.clone(),
            webhook_secret: config.webhook_secret.clone().unwrap_or_default(),
        })
    }

    /// The provider `local` serves (the embedded simulator's), called in this process with no network
    /// and no credentials; its notices signed with `webhook_secret`.
    pub fn in_process(local: std::sync::Arc<dyn Local>, webhook_secret: &str) -> Self {
        Self {
            base: IN_PROCESS_BASE.to_owned(),
            peer: Peer {
                transport: Transport::Local(local),
                credentials: Credentials::None,
            },
            timeout: Duration::from_millis(CartaoConfig::default().timeout_ms),
            retorno_url: "http://simulador.local/_simulador/checkout/pago".into(),
            webhook_secret: webhook_secret.to_owned(),
        }
    }

    async fn call<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        form: Option<Vec<(String, String)>>,
        idempotency_key: Option<&str>,
    ) -> Result<T, CartaoError> {
        let body = form
            .map(|f| serde_urlencoded::to_string(f).map_err(|e| CartaoError::Body(e.to_string())))
            .transpose()?;
        let mut headers = BTreeMap::new();
        if body.is_some() {
            headers.insert(
                "content-type".to_owned(),
                "application/x-www-form-urlencoded".to_owned(),
            );
        }
        if let Some(key) = idempotency_key {
            headers.insert("idempotency-key".to_owned(), key.to_owned());
        }
        let url = reqwest::Url::parse(&format!("{}{path}", self.base))
            .map_err(|_| CartaoError::Unanswered("falha de conexão"))?;
        let request = Request {
            method,
            url: &url,
            headers: &headers,
            body: body.map(bytes::Bytes::from),
            timeout: self.timeout,
        };
        // Every write carries its idempotency key, so a second send is the same request.
        let answer = self
            .peer
            .send(&request, &Retry::PROVIDER)
            .await
            .map_err(|f| match f {
                Failure::Unauthenticated(e) => CartaoError::Unauthenticated(e.to_string()),
                other => CartaoError::Unanswered(other.words()),
            })?;
        let bytes = answer.body.map_err(|f| CartaoError::Unanswered(f.words()))?;
        if !(200..300).contains(&answer.status) {
            return Err(CartaoError::Refused {
                status: answer.status,
                code: error_code(&bytes),
            });
        }
        vt_contract::json::from_bytes(&bytes)
            .map_err(|e| CartaoError::Body(vt_contract::redact::serde_message(&e.to_string())))
    }
}

#[async_trait]
impl Checkouts for Stripe {
    async fn criar(&self, pedido: &PedidoLink) -> Result<Link, CartaoError> {
        let cents = cents(pedido.valor).ok_or_else(|| CartaoError::Body("valor inválido".into()))?;
        let form = vec![
            ("mode".into(), "payment".into()),
            ("success_url".into(), self.retorno_url.clone()),
            ("client_reference_id".into(), pedido.referencia.clone()),
            ("expires_at".into(), pedido.expira_em.timestamp().to_string()),
            ("payment_method_types[0]".into(), "card".into()),
            ("line_items[0][quantity]".into(), "1".into()),
            ("line_items[0][price_data][currency]".into(), "brl".into()),
            ("line_items[0][price_data][unit_amount]".into(), cents.to_string()),
            (
                "line_items[0][price_data][product_data][name]".into(),
                pedido.descricao.clone(),
            ),
            ("metadata[referencia]".into(), pedido.referencia.clone()),
        ];
        let session: Session = self
            .call(
                Method::POST,
                "/checkout/sessions",
                Some(form),
                Some(&pedido.chave),
            )
            .await?;
        session.link()
    }

    async fn ler(&self, id: &str) -> Result<Link, CartaoError> {
        let session: Session = self
            .call(Method::GET, &format!("/checkout/sessions/{id}"), None, None)
            .await?;
        session.link()
    }

    async fn expirar(&self, id: &str) -> Result<Link, CartaoError> {
        let expired = self
            .call::<Session>(
                Method::POST,
                &format!("/checkout/sessions/{id}/expire"),
                Some(Vec::new()),
                None,
            )
            .await;
        match expired {
            Ok(session) => session.link(),
            // Only an open session can be expired: one completed meanwhile is read back as it is.
            Err(CartaoError::Refused { status: 400, .. }) => self.ler(id).await,
            Err(e) => Err(e),
        }
    }

    async fn estornar(&self, pagamento: &str, valor: Decimal, chave: &str) -> Result<Estorno, CartaoError> {
        let cents = cents(valor).ok_or_else(|| CartaoError::Body("valor inválido".into()))?;
        let form = vec![
            ("payment_intent".into(), pagamento.to_owned()),
            ("amount".into(), cents.to_string()),
            ("reason".into(), "requested_by_customer".into()),
        ];
        let refund: Refund = self
            .call(Method::POST, "/refunds", Some(form), Some(chave))
            .await?;
        Ok(refund.estorno())
    }

    async fn estorno(&self, pagamento: &str) -> Result<Option<Estorno>, CartaoError> {
        let refunds: List<Refund> = self
            .call(
                Method::GET,
                &format!("/refunds?payment_intent={pagamento}&limit=1"),
                None,
                None,
            )
            .await?;
        Ok(refunds.data.first().map(Refund::estorno))
    }

    fn aviso(
        &self,
        assinatura: Option<&str>,
        corpo: &[u8],
        agora: DateTime<Utc>,
    ) -> Result<Vec<String>, AvisoInvalido> {
        verificar(assinatura, corpo, &self.webhook_secret, agora)?;
        let event: Event = vt_contract::json::from_bytes(corpo).map_err(|_| AvisoInvalido::Corpo)?;
        // Every checkout event names its session; which one it is matters not: the session is read
        // back, and its status decides.
        Ok(if event.kind.starts_with("checkout.session.") {
            vec![event.data.object.id]
        } else {
            Vec::new()
        })
    }
}

/// `Stripe-Signature`'s value for `corpo` at `t` under `secret`: `t=<t>,v1=<hex HMAC-SHA256 of
/// "t.corpo">` (what the simulator sends, and what tests forge with the wrong secret).
pub fn assinar(secret: &str, t: i64, corpo: &[u8]) -> String {
    format!("t={t},v1={}", hex::encode(mac(secret, t, corpo)))
}

fn mac(secret: &str, t: i64, corpo: &[u8]) -> Vec<u8> {
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(corpo);
    mac.finalize().into_bytes().to_vec()
}

/// Checks a notice's `Stripe-Signature` against `secret`: one of its `v1` signatures (several during
/// a secret's rotation) must be the body's, in constant time, and its timestamp within
/// [`TOLERANCIA_SEGUNDOS`] of `agora`.
pub fn verificar(
    assinatura: Option<&str>,
    corpo: &[u8],
    secret: &str,
    agora: DateTime<Utc>,
) -> Result<(), AvisoInvalido> {
    let header = assinatura.ok_or(AvisoInvalido::SemAssinatura)?;
    let mut t = None;
    let mut v1 = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", value)) => t = value.parse::<i64>().ok(),
            Some(("v1", value)) => v1.extend(hex::decode(value).ok()),
            _ => {}
        }
    }
    let t = t.ok_or(AvisoInvalido::SemAssinatura)?;
    if v1.is_empty() || secret.is_empty() {
        return Err(AvisoInvalido::SemAssinatura);
    }
    let signed = v1.iter().any(|sig| {
        let mut m =
            <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
        m.update(t.to_string().as_bytes());
        m.update(b".");
        m.update(corpo);
        m.verify_slice(sig).is_ok()
    });
    if !signed {
        return Err(AvisoInvalido::Assinatura);
    }
    if (agora.timestamp() - t).abs() > TOLERANCIA_SEGUNDOS {
        return Err(AvisoInvalido::Expirado);
    }
    Ok(())
}

/// The error's `code` (or `type`), scrubbed of secrets and cut short; nothing else of the body.
fn error_code(body: &[u8]) -> String {
    let code = vt_contract::json::from_bytes::<ErrorBody>(body)
        .ok()
        .and_then(|b| b.error.code.or(b.error.kind))
        .unwrap_or_else(|| "sem detalhe".to_owned());
    vt_contract::redact::secrets(&code).chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_is_taken_only_signed_with_the_secret_and_in_time() {
        let body = br#"{"type":"checkout.session.completed","data":{"object":{"id":"cs_1"}}}"#;
        let now = Utc::now();
        let t = now.timestamp();
        let good = assinar("whsec_a", t, body);
        assert_eq!(verificar(Some(&good), body, "whsec_a", now), Ok(()));
        // During a rotation the provider signs with both secrets: either one is enough.
        let both = format!("{good},v1={}", hex::encode(mac("whsec_b", t, body)));
        assert_eq!(verificar(Some(&both), body, "whsec_b", now), Ok(()));
        assert_eq!(
            verificar(Some(&good), body, "whsec_b", now),
            Err(AvisoInvalido::Assinatura)
        );
        assert_eq!(
            verificar(Some(&good), b"{\"type\":\"x\"}", "whsec_a", now),
            Err(AvisoInvalido::Assinatura),
            "another body"
        );
        let old = assinar("whsec_a", t - TOLERANCIA_SEGUNDOS - 1, body);
        assert_eq!(
            verificar(Some(&old), body, "whsec_a", now),
            Err(AvisoInvalido::Expirado)
        );
        assert_eq!(
            verificar(None, body, "whsec_a", now),
            Err(AvisoInvalido::SemAssinatura)
        );
        assert_eq!(
            verificar(Some("t=1"), body, "whsec_a", now),
            Err(AvisoInvalido::SemAssinatura)
        );
    }

    #[test]
    fn a_session_is_paid_only_complete_and_paid_in_reais() {
        let session = |status: &str, paid: &str, currency: &str| Session {
            id: "cs_1".into(),
            url: Some("https://checkout.example/cs_1".into()),
            status: status.into(),
            payment_status: paid.into(),
            amount_total: Some(5000),
            currency: Some(currency.into()),
            expires_at: 1_800_000_000,
            payment_intent: Some("pi_1".into()),
        };
        let paid = session("complete", "paid", "brl").link().expect("link");
        assert_eq!(
            (paid.status, paid.valor, paid.pagamento.as_deref()),
            (LinkStatus::Pago, Decimal::new(5000, 2), Some("pi_1"))
        );
        let waiting = session("complete", "unpaid", "brl").link().expect("link");
        assert_eq!(
            (waiting.status, waiting.pagamento),
            (LinkStatus::Aberto, None),
            "a delayed method not yet paid"
        );
        assert_eq!(
            session("expired", "unpaid", "brl").link().expect("link").status,
            LinkStatus::Expirado
        );
        assert!(session("complete", "paid", "usd").link().is_err());
        assert_eq!(cents(Decimal::new(1005, 1)), Some(10050));
        assert_eq!(cents(Decimal::ZERO), None);
    }
}
