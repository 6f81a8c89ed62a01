//! The simulator as the card provider: the subset of Stripe's API the product uses (Checkout
//! Sessions created, read and expired; refunds made and read; webhook endpoints registered), served
//! under `/stripe/v1` beside the simulated VT systems, and the hosted checkout itself: `GET
//! /_simulador/checkout/{id}` is the page a card holder opens (amount, masked VT card, a button),
//! `POST /_simulador/checkout/{id}/pagar` pays it as the card holder would there. A payment is told
//! as Stripe tells it — an Event signed with the endpoint's secret (`Stripe-Signature`) — to every
//! registered endpoint and to the product in this process when it listens ([`CheckoutSimulado::notices`]).
//! Set to pay by itself, it pays each checkout after a while (the magic cards' holders say whether they
//! pay at all, and whether the notice comes, as for Pix). Its checkouts are kept in the simulator's
//! book, so one created by a `chat --message` is paid in the next process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::systems::book::Book;
use crate::systems::cards::PixPayer;

/// Where a checkout is paid, as the card holder would on the provider's page.
pub const PAY_PATH: &str = "/_simulador/checkout/{id}/pagar";
/// The provider's hosted page of a checkout.
pub const PAGE_PATH: &str = "/_simulador/checkout/{id}";

type NowFn = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// A checkout session as the simulated provider keeps it (and the book, across processes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Sessao {
    pub id: String,
    pub url: String,
    /// `open`, `complete`, `expired`.
    pub status: String,
    /// `unpaid`, `paid`.
    pub payment_status: String,
    pub amount_total: i64,
    pub currency: String,
    pub expires_at: i64,
    pub payment_intent: Option<String>,
    pub client_reference_id: Option<String>,
    /// The line's name (the masked VT card is in it).
    pub descricao: String,
    /// The `Idempotency-Key` it was created under.
    pub chave: Option<String>,
    #[serde(default)]
    pub refunds: Vec<Reembolso>,
}

/// A refund of a checkout's payment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Reembolso {
    pub id: String,
    pub status: String,
    pub amount: i64,
    pub chave: Option<String>,
}

#[derive(Default)]
struct Estado {
    sessoes: HashMap<String, Sessao>,
    /// Registered webhook endpoints' URLs.
    endpoints: Vec<String>,
    /// Products in this process told of every event: `(Stripe-Signature, body)`.
    listeners: Vec<tokio::sync::mpsc::UnboundedSender<(String, Vec<u8>)>>,
    /// Checkouts it will pay by itself.
    scheduled: std::collections::HashSet<String>,
    /// Checkout lines of the book read so far.
    book_lines: u64,
    /// Refunds stay `pending` until [`CheckoutSimulado::finish_refunds`]; else `succeeded` at once.
    refunds_later: bool,
}

/// The simulated card provider; cheap to clone.
#[derive(Clone)]
pub struct CheckoutSimulado {
    state: Arc<Mutex<Estado>>,
    now: NowFn,
    http: reqwest::Client,
    /// Where the card holder reaches the hosted page (the base of [`PAGE_PATH`]).
    base_url: Arc<Mutex<String>>,
    /// The secret its notices are signed with.
    secret: Arc<str>,
    autopay: Option<(std::time::Duration, Arc<HashMap<String, PixPayer>>)>,
    book: Arc<std::sync::OnceLock<Arc<Book>>>,
}

impl std::fmt::Debug for CheckoutSimulado {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckoutSimulado").finish_non_exhaustive()
    }
}

impl CheckoutSimulado {
    /// A provider whose notices are signed with `secret`.
    pub fn new(now: Option<NowFn>, secret: &str) -> Self {
        Self {
            state: Arc::default(),
            now: now.unwrap_or_else(|| Arc::new(Utc::now)),
            http: reqwest::Client::new(),
            base_url: Arc::new(Mutex::new("http://127.0.0.1:8080".into())),
            secret: Arc::from(secret),
            autopay: None,
            book: Arc::default(),
        }
    }

    /// The secret its notices are signed with (the product checks them with it).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The hosted pages are reached at `base` (the server that serves [`PAGE_PATH`]).
    pub fn served_at(&self, base: &str) {
        *self
            .base_url
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = base.trim_end_matches('/').to_owned();
    }

    /// Keeps its checkouts in `book`, with the other processes' on the same data directory.
    pub(crate) fn keep_in(&self, book: Arc<Book>) {
        let _ = self.book.set(book);
    }

    fn keep(&self, sessao: &Sessao) {
        if let Some(book) = self.book.get() {
            book.keep_checkout(sessao);
        }
    }

    /// Paying by itself `after` each checkout is created (`None`: never), as the holders of `cards` do.
    #[must_use]
    pub fn paying<'a>(
        mut self,
        after: Option<std::time::Duration>,
        cards: impl Iterator<Item = (&'a str, PixPayer)>,
    ) -> Self {
        self.autopay = after.map(|after| {
            let payers = cards
                .filter(|(_, payer)| *payer != PixPayer::Paga)
                .map(|(card, payer)| (vt_domain::vt::card::last_four(card), payer))
                .collect();
            (after, Arc::new(payers))
        });
        self
    }

    /// Every event from now on, signed, as an endpoint would get it: the embedded simulator's product
    /// listens here, as it has no URL to register.
    pub fn notices(&self) -> tokio::sync::mpsc::UnboundedReceiver<(String, Vec<u8>)> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.lock().listeners.push(tx);
        rx
    }

    /// The Stripe routes, to be nested under `/stripe/v1`.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/checkout/sessions", post(criar))
            .route("/checkout/sessions/{id}", get(ler))
            .route("/checkout/sessions/{id}/expire", post(expirar))
            .route("/refunds", post(estornar).get(listar_estornos))
            .route("/webhook_endpoints", post(registrar))
            .with_state(self.clone())
    }

    /// The hosted checkout: its page and its pay route.
    pub fn page_router(&self) -> Router {
        Router::new()
            .route(PAGE_PATH, self.page_route())
            .route(PAY_PATH, self.pay_route())
    }

    /// [`PAGE_PATH`]'s handler, for a server of the product's own (`serve` with the embedded simulator).
    pub fn page_route(&self) -> axum::routing::MethodRouter {
        get(pagina).with_state(self.clone())
    }

    /// [`PAY_PATH`]'s handler, for a server of the product's own.
    pub fn pay_route(&self) -> axum::routing::MethodRouter {
        post(pagar_http).with_state(self.clone())
    }

    /// Whether checkout `id` is paid, or will be by itself.
    pub fn paid_or_paying(&self, id: &str) -> bool {
        let state = self.lock();
        state.scheduled.contains(id) || state.sessoes.get(id).is_some_and(|s| s.payment_status == "paid")
    }

    /// The checkouts created so far, by id: their status and whether paid.
    pub fn checkout(&self, id: &str) -> Option<(String, bool)> {
        self.lock()
            .sessoes
            .get(id)
            .map(|s| (s.status.clone(), s.payment_status == "paid"))
    }

    /// How many refunds were made of every checkout, in all.
    pub fn refunds(&self) -> usize {
        self.lock().sessoes.values().map(|s| s.refunds.len()).sum()
    }

    /// From now on refunds stay `pending` until [`Self::finish_refunds`].
    pub fn refunding_later(&self) {
        self.lock().refunds_later = true;
    }

    /// Refunds still pending settled: `succeeded`, or `failed`.
    pub fn finish_refunds(&self, succeeded: bool) {
        let mut state = self.lock();
        let changed: Vec<Sessao> = state
            .sessoes
            .values_mut()
            .filter_map(|s| {
                let mut touched = false;
                for r in s.refunds.iter_mut().filter(|r| r.status == "pending") {
                    r.status = if succeeded { "succeeded" } else { "failed" }.into();
                    touched = true;
                }
                touched.then(|| s.clone())
            })
            .collect();
        drop(state);
        for s in &changed {
            self.keep(s);
        }
    }

    /// Pays checkout `id` in full, as its holder would on the page, and tells the endpoints (`notify:
    /// false` for a notice that never comes). `None`: no such checkout, or it cannot be paid.
    pub fn pay(&self, id: &str, notify: bool) -> Option<String> {
        let (sessao, endpoints) = {
            let mut state = self.lock();
            let now = (self.now)().timestamp();
            let sessao = state.sessoes.get_mut(id)?;
            if sessao.status != "open" || now >= sessao.expires_at {
                return None;
            }
            sessao.status = "complete".into();
            sessao.payment_status = "paid".into();
            sessao.payment_intent = Some(format!("pi_{}", uuid::Uuid::new_v4().simple()));
            let sessao = sessao.clone();
            self.keep(&sessao);
            (sessao, state.endpoints.clone())
        };
        if notify {
            self.tell("checkout.session.completed", &sessao, &endpoints);
        }
        sessao.payment_intent
    }

    /// Event `kind` about `sessao`, signed, to the listeners in this process and every endpoint.
    fn tell(&self, kind: &str, sessao: &Sessao, endpoints: &[String]) {
        let event = json!({
            "id": format!("evt_{}", uuid::Uuid::new_v4().simple()),
            "object": "event",
            "type": kind,
            "created": (self.now)().timestamp(),
            "data": {"object": wire(sessao)},
        });
        let Ok(body) = vt_contract::json::to_bytes(&event) else {
            return;
        };
        let signature = vt_connectors::cartao::stripe::assinar(&self.secret, (self.now)().timestamp(), &body);
        self.lock()
            .listeners
            .retain(|l| l.send((signature.clone(), body.clone())).is_ok());
        for url in endpoints {
            let (http, url, signature, body) =
                (self.http.clone(), url.clone(), signature.clone(), body.clone());
            tokio::spawn(async move {
                let sent = http
                    .post(&url)
                    .header("content-type", "application/json")
                    .header(vt_connectors::cartao::stripe::ASSINATURA, signature)
                    .body(body)
                    .send()
                    .await;
                if let Err(e) = sent {
                    tracing::warn!(error = %e, "simulated card provider: notice not delivered");
                }
            });
        }
    }

    /// After a new checkout: its payment scheduled, if this provider pays by itself and its payer pays.
    fn schedule(&self, sessao: &Sessao) {
        let Some((after, payers)) = &self.autopay else {
            return;
        };
        let card = vt_domain::vt::card::last_four(&sessao.descricao);
        let payer = payers.get(&card).copied().unwrap_or_default();
        if payer == PixPayer::NuncaPaga {
            return;
        }
        let (provider, id, after) = (self.clone(), sessao.id.clone(), *after);
        self.lock().scheduled.insert(id.clone());
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            provider.pay(&id, payer != PixPayer::PagaSemAviso);
            provider.lock().scheduled.remove(&id);
        });
    }

    /// The checkouts, caught up with what other processes wrote in the book.
    fn lock(&self) -> std::sync::MutexGuard<'_, Estado> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(book) = self.book.get() {
            let (lines, sessoes) = book.checkouts_since(state.book_lines);
            state.sessoes.extend(sessoes.unwrap_or_default());
            state.book_lines = lines;
        }
        state
    }
}

/// A session as Stripe's API answers it.
fn wire(s: &Sessao) -> serde_json::Value {
    json!({
        "id": s.id,
        "object": "checkout.session",
        "url": (s.status == "open").then_some(&s.url),
        "status": s.status,
        "payment_status": s.payment_status,
        "amount_total": s.amount_total,
        "currency": s.currency,
        "expires_at": s.expires_at,
        "payment_intent": s.payment_intent,
        "client_reference_id": s.client_reference_id,
        "mode": "payment",
    })
}

/// An error as Stripe answers it.
fn error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = json!({"error": {"type": "invalid_request_error", "code": code, "message": message}});
    (status, Json(body)).into_response()
}

fn idempotency(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

async fn criar(
    State(provider): State<CheckoutSimulado>,
    headers: axum::http::HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    let amount = field("line_items[0][price_data][unit_amount]")
        .parse::<i64>()
        .unwrap_or(0);
    let expires_at = field("expires_at").parse::<i64>().unwrap_or(0);
    let now = (provider.now)().timestamp();
    if field("mode") != "payment" || amount <= 0 || field("success_url").is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "parameter_invalid",
            "Invalid checkout session.",
        );
    }
    // Stripe's own window: 30 minutes to 24 hours from now.
    if !(now + 30 * 60 - 60..=now + 24 * 3600).contains(&expires_at) {
        return error(
            StatusCode::BAD_REQUEST,
            "parameter_invalid_integer",
            "expires_at out of range.",
        );
    }
    let chave = idempotency(&headers);
    let mut state = provider.lock();
    if let Some(key) = &chave
        && let Some(existing) = state
            .sessoes
            .values()
            .find(|s| s.chave.as_deref() == Some(key.as_str()))
    {
        // The same request again under its key: the same session. Another request under it: no.
        return if existing.amount_total == amount {
            Json(wire(existing)).into_response()
        } else {
            error(
                StatusCode::BAD_REQUEST,
                "idempotency_key_in_use",
                "Keys for idempotent requests can only be used with the same parameters.",
            )
        };
    }
    let id = format!("cs_sim_{}", uuid::Uuid::new_v4().simple());
    let base = provider
        .base_url
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let sessao = Sessao {
        url: format!("{base}{}", PAGE_PATH.replace("{id}", &id)),
        id: id.clone(),
        status: "open".into(),
        payment_status: "unpaid".into(),
        amount_total: amount,
        currency: field("line_items[0][price_data][currency]"),
        expires_at,
        payment_intent: None,
        client_reference_id: form.get("client_reference_id").cloned(),
        descricao: field("line_items[0][price_data][product_data][name]"),
        chave,
        refunds: Vec::new(),
    };
    state.sessoes.insert(id, sessao.clone());
    drop(state);
    provider.keep(&sessao);
    provider.schedule(&sessao);
    Json(wire(&sessao)).into_response()
}

/// A session as it stands now: one past its expiry is `expired`.
fn current(provider: &CheckoutSimulado, id: &str) -> Option<Sessao> {
    let mut state = provider.lock();
    let now = (provider.now)().timestamp();
    let sessao = state.sessoes.get_mut(id)?;
    if sessao.status == "open" && now >= sessao.expires_at {
        sessao.status = "expired".into();
        let s = sessao.clone();
        drop(state);
        provider.keep(&s);
        return Some(s);
    }
    Some(sessao.clone())
}

async fn ler(State(provider): State<CheckoutSimulado>, Path(id): Path<String>) -> Response {
    match current(&provider, &id) {
        Some(s) => Json(wire(&s)).into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            "resource_missing",
            "No such checkout.session.",
        ),
    }
}

async fn expirar(State(provider): State<CheckoutSimulado>, Path(id): Path<String>) -> Response {
    let Some(sessao) = current(&provider, &id) else {
        return error(
            StatusCode::NOT_FOUND,
            "resource_missing",
            "No such checkout.session.",
        );
    };
    if sessao.status != "open" && sessao.status != "expired" {
        return error(
            StatusCode::BAD_REQUEST,
            "checkout_session_not_open",
            "Only open sessions can be expired.",
        );
    }
    let expired = {
        let mut state = provider.lock();
        let Some(s) = state.sessoes.get_mut(&id) else {
            return error(
                StatusCode::NOT_FOUND,
                "resource_missing",
                "No such checkout.session.",
            );
        };
        s.status = "expired".into();
        s.clone()
    };
    provider.keep(&expired);
    Json(wire(&expired)).into_response()
}

async fn estornar(
    State(provider): State<CheckoutSimulado>,
    headers: axum::http::HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let pi = form.get("payment_intent").cloned().unwrap_or_default();
    let chave = idempotency(&headers);
    let later = provider.lock().refunds_later;
    let (refund, sessao) = {
        let mut state = provider.lock();
        let Some(sessao) = state
            .sessoes
            .values_mut()
            .find(|s| s.payment_intent.as_deref() == Some(pi.as_str()))
        else {
            return error(
                StatusCode::NOT_FOUND,
                "resource_missing",
                "No such payment_intent.",
            );
        };
        let amount = form
            .get("amount")
            .and_then(|a| a.parse::<i64>().ok())
            .unwrap_or(sessao.amount_total);
        if let Some(existing) = sessao
            .refunds
            .iter()
            .find(|r| chave.is_some() && r.chave == chave)
        {
            return Json(json!({"id": existing.id, "object": "refund", "status": existing.status, "amount": existing.amount})).into_response();
        }
        let refunded: i64 = sessao
            .refunds
            .iter()
            .filter(|r| r.status != "failed")
            .map(|r| r.amount)
            .sum();
        if amount <= 0 || refunded + amount > sessao.amount_total {
            return error(
                StatusCode::BAD_REQUEST,
                "charge_already_refunded",
                "Charge has already been refunded.",
            );
        }
        let refund = Reembolso {
            id: format!("re_{}", uuid::Uuid::new_v4().simple()),
            status: if later { "pending" } else { "succeeded" }.into(),
            amount,
            chave,
        };
        sessao.refunds.push(refund.clone());
        (refund, sessao.clone())
    };
    provider.keep(&sessao);
    Json(json!({"id": refund.id, "object": "refund", "status": refund.status, "amount": refund.amount}))
        .into_response()
}

#[derive(Deserialize)]
struct Filtro {
    payment_intent: String,
}

/// `GET /refunds?payment_intent=…`: the payment's refunds, newest first.
async fn listar_estornos(
    State(provider): State<CheckoutSimulado>,
    axum::extract::Query(filtro): axum::extract::Query<Filtro>,
) -> Response {
    let state = provider.lock();
    let data: Vec<serde_json::Value> = state
        .sessoes
        .values()
        .filter(|s| s.payment_intent.as_deref() == Some(filtro.payment_intent.as_str()))
        .flat_map(|s| s.refunds.iter().rev())
        .map(|r| json!({"id": r.id, "object": "refund", "status": r.status, "amount": r.amount}))
        .collect();
    Json(json!({"object": "list", "data": data, "has_more": false})).into_response()
}

#[derive(Deserialize)]
struct Endpoint {
    url: String,
}

async fn registrar(State(provider): State<CheckoutSimulado>, Form(endpoint): Form<Endpoint>) -> Response {
    if reqwest::Url::parse(&endpoint.url).is_err() {
        return error(StatusCode::BAD_REQUEST, "url_invalid", "Invalid URL.");
    }
    provider.lock().endpoints.push(endpoint.url.clone());
    Json(json!({
        "id": format!("we_{}", uuid::Uuid::new_v4().simple()),
        "object": "webhook_endpoint",
        "url": endpoint.url,
        "secret": &*provider.secret,
    }))
    .into_response()
}

/// The hosted page: what is paid, and a button. No field for a card: this is a simulator.
async fn pagina(State(provider): State<CheckoutSimulado>, Path(id): Path<String>) -> Response {
    let Some(sessao) = current(&provider, &id) else {
        return (
            StatusCode::NOT_FOUND,
            Html("<p>Pagamento não encontrado.</p>".to_owned()),
        )
            .into_response();
    };
    let valor = vt_domain::vt::money::money_for_people(
        "BRL",
        rust_decimal::Decimal::new(sessao.amount_total, 2),
        vt_domain::vt::input::Idioma::PtBr,
    );
    let escape = |t: &str| {
        t.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let body = match sessao.status.as_str() {
        "open" => format!(
            "<form method=\"post\" action=\"{}\"><button type=\"submit\">Pagar {}</button></form>",
            escape(&PAY_PATH.replace("{id}", &sessao.id)),
            escape(&valor)
        ),
        "complete" => "<p>Pagamento recebido.</p>".to_owned(),
        _ => "<p>Este link expirou.</p>".to_owned(),
    };
    Html(format!(
        "<!doctype html><html lang=\"pt-BR\"><meta charset=\"utf-8\"><title>Pagamento (simulador)</title><h1>{}</h1><p>{}</p>{body}</html>",
        escape(&valor),
        escape(&sessao.descricao)
    ))
    .into_response()
}

async fn pagar_http(State(provider): State<CheckoutSimulado>, Path(id): Path<String>) -> Response {
    match provider.pay(&id, true) {
        Some(pi) => Json(json!({"pago": true, "payment_intent": pi})).into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            "resource_missing",
            "No open checkout.session.",
        ),
    }
}
