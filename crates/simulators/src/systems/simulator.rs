//! An embedded simulator of the balance, recharge and notification systems, with magic test cards
//! (like a payment provider's test mode). It serves real HTTP on 127.0.0.1 so the clients are exercised
//! for real, honours idempotency keys on POSTs (same key → the stored response for 24 h; same key with
//! another body → 409), rate-limits notifications (429 + `Retry-After`), and keeps a ledger of what it
//! received so tests can assert "exactly one recharge".
//!
//! Balance GETs are not answered from the idempotency store: a GET changes nothing, and a stored
//! answer would show a stale balance right after a recharge in the same hour.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rust_decimal::Decimal;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use vt_domain::vt::money::{decimal_from_json, money_json};

use super::cards::{BalanceMode, CardBehavior, Fixture, PixPayer, RechargeMode, SituationMode, magic_cards};

mod boleto;
mod desk;
mod ordens;
mod recarga;
#[cfg(test)]
mod tests;

pub use boleto::BOLETO_PAY_PATH;
use boleto::{about_a_boleto, pagar_boleto, waits_for_a_boleto};

/// Where the simulator's server time comes from (a test can pin it).
pub(crate) type NowFn = Arc<dyn Fn() -> chrono::DateTime<chrono::Utc> + Send + Sync>;

#[derive(Clone)]
pub struct SimulatorConfig {
    /// How long a "never answers" card keeps the client waiting.
    pub slow: Duration,
    /// Notifications accepted per second before 429s.
    pub notifications_per_second: u32,
    /// How long an idempotency key keeps its stored response.
    pub idempotency_ttl: Duration,
    /// Server time for `data_servidor` and `data_processamento`; the system clock when `None`.
    pub now: Option<NowFn>,
    /// After how long the payment provider pays each charge it issues by itself, as the card's holder
    /// would ([`CardBehavior::pix`]); `None`: only `POST /_simulador/pix/{txid}/pagar` pays.
    pub pix_pagar_apos: Option<Duration>,
    /// After how long a recharge's boleto counts as paid and cleared by itself ([`CardBehavior::pix`]
    /// says whether its holder pays); `None`: only `POST /_simulador/boletos/{linha}/pagar` pays.
    pub boleto_pagar_apos: Option<Duration>,
}

impl Default for SimulatorConfig {
    fn default() -> Self {
        Self {
            slow: Duration::from_secs(30),
            notifications_per_second: 50,
            idempotency_ttl: Duration::from_secs(24 * 3600),
            now: None,
            pix_pagar_apos: None,
            boleto_pagar_apos: None,
        }
    }
}

impl std::fmt::Debug for SimulatorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimulatorConfig")
            .field("slow", &self.slow)
            .field("notifications_per_second", &self.notifications_per_second)
            .field("pix_pagar_apos", &self.pix_pagar_apos)
            .field("boleto_pagar_apos", &self.boleto_pagar_apos)
            .field("idempotency_ttl", &self.idempotency_ttl)
            .field("now", &self.now.as_ref().map(|_| "pinned"))
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SimulatorError {
    #[error("não foi possível ler o arquivo do simulador {path}: {message}")]
    Fixture { path: String, message: String },
    #[error("não foi possível abrir a porta do simulador: {0}")]
    Bind(#[from] std::io::Error),
}

/// What a request the simulator received did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Efeito {
    /// A recharge was charged.
    RecargaEfetivada,
    /// A notification was delivered.
    NotificacaoEntregue,
    /// A card was blocked (or unblocked).
    CartaoBloqueado,
    CartaoDesbloqueado,
    /// A second copy was issued: the balance moved to it.
    SegundaViaEmitida,
    /// Answered from the idempotency store: nothing new was done.
    Replay,
}

/// One request the simulator received, and what it did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    pub seq: u64,
    /// `saldo`, `recarga` or `notificacao`.
    pub sistema: String,
    pub method: String,
    pub path: String,
    pub idempotency_key: Option<String>,
    pub cartao: Option<String>,
    pub status: u16,
    /// What the request did, if anything.
    pub efeito: Option<Efeito>,
    pub body: Option<Value>,
}

struct Stored {
    body_hash: String,
    status: u16,
    response: Value,
    at: Instant,
}

struct Inner {
    config: SimulatorConfig,
    /// The book in the data directory, for the embedded simulator of the product's own commands.
    book: std::sync::OnceLock<Arc<super::book::Book>>,
    cards: HashMap<String, CardBehavior>,
    balances: Mutex<HashMap<String, Decimal>>,
    idempotency: Mutex<HashMap<String, Stored>>,
    ledger: Mutex<Vec<LedgerEntry>>,
    /// What each card's statement shows of this run: credits of recharges, uses at the turnstile.
    movements: Mutex<Vec<desk::Movement>>,
    /// Where the desk's requests left each card (without a book: with one, the book keeps it).
    card_states: Mutex<HashMap<String, super::book::CardState>>,
    rate: Mutex<(Instant, u32)>,
    seq: AtomicU64,
    /// The operator's payment provider, simulated ([`crate::pix::PspSimulado`]).
    pix: crate::pix::PspSimulado,
    /// The operator's card provider, simulated ([`crate::cartao::CheckoutSimulado`]).
    cartao: crate::cartao::CheckoutSimulado,
}

/// The simulator's state; cheap to clone.
#[derive(Clone)]
pub struct Simulator {
    inner: Arc<Inner>,
}

/// A simulator serving on a loopback port.
pub struct RunningSimulator {
    pub url: String,
    pub simulator: Simulator,
    pub task: tokio::task::JoinHandle<()>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Simulator {
    pub fn new(config: SimulatorConfig) -> Self {
        Self::with_cards(config, magic_cards())
    }

    pub fn with_cards(config: SimulatorConfig, cards: HashMap<String, CardBehavior>) -> Self {
        // A card holder authorises a Pix Automático recurrence as soon as they would pay a code.
        let pix = crate::pix::PspSimulado::new(config.now.clone())
            .paying(
                config.pix_pagar_apos,
                cards.iter().map(|(card, b)| (card.as_str(), b.pix)),
            )
            .authorising(config.pix_pagar_apos);
        // A card holder pays a checkout as they pay a Pix code: the same magic cards, the same delay.
        let cartao = crate::cartao::CheckoutSimulado::new(config.now.clone(), CARTAO_WEBHOOK_SECRET).paying(
            config.pix_pagar_apos,
            cards.iter().map(|(card, b)| (card.as_str(), b.pix)),
        );
        Self {
            inner: Arc::new(Inner {
                book: std::sync::OnceLock::new(),
                cards,
                balances: Mutex::new(HashMap::new()),
                idempotency: Mutex::new(HashMap::new()),
                ledger: Mutex::new(Vec::new()),
                movements: Mutex::new(Vec::new()),
                card_states: Mutex::new(HashMap::new()),
                rate: Mutex::new((Instant::now(), 0)),
                seq: AtomicU64::new(1),
                pix,
                cartao,
                config,
            }),
        }
    }

    /// The magic cards, replaced or extended by a fixture file.
    pub fn with_fixture(config: SimulatorConfig, path: &Path) -> Result<Self, SimulatorError> {
        let err = |message: String| SimulatorError::Fixture {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let fixture: Fixture = vt_contract::json::from_text(&text).map_err(|e| err(e.to_string()))?;
        let mut cards = if fixture.replace {
            HashMap::new()
        } else {
            magic_cards()
        };
        cards.extend(fixture.cards);
        Ok(Self::with_cards(config, cards))
    }

    /// Keeps the simulated world in the book at `path` (JSON Lines, appended): balances credited and
    /// answers under idempotency keys, Pix charges outlive this process, for the next one on the same data
    /// directory ([`super::book`]).
    #[must_use]
    pub fn with_book(self, path: &Path) -> Self {
        let book = Arc::new(super::book::Book::at(path));
        self.inner.pix.keep_in(book.clone());
        self.inner.cartao.keep_in(book.clone());
        let _ = self.inner.book.set(book);
        self
    }

    pub fn router(&self) -> Router {
        Router::new()
            .route(vt_domain::systems::SALDO_ENDPOINT, get(saldo))
            .route(vt_domain::systems::RECARGA_ENDPOINT, post(recarga::recarga))
            .route(vt_domain::systems::NOTIFICACAO_ENDPOINT, post(notificacao))
            .route(vt_domain::systems::SITUACAO_ENDPOINT, get(desk::situacao))
            .route(vt_domain::systems::EXTRATO_ENDPOINT, get(desk::extrato))
            .route(
                vt_domain::systems::OrdemCartao::Bloqueio.path(),
                post(ordens::bloqueio),
            )
            .route(
                vt_domain::systems::OrdemCartao::Desbloqueio.path(),
                post(ordens::desbloqueio),
            )
            .route(
                vt_domain::systems::OrdemCartao::Titular.path(),
                post(ordens::titular),
            )
            .route(
                vt_domain::systems::SEGUNDA_VIA_ENDPOINT,
                get(ordens::cotacao).post(ordens::segunda_via),
            )
            .route("/_simulador/ledger", get(ledger))
            .route(BOLETO_PAY_PATH, post(pagar_boleto))
            .with_state(self.clone())
            .nest("/pix/v2", self.inner.pix.router())
            .merge(self.inner.pix.payer_router())
            .nest("/stripe/v1", self.inner.cartao.router())
            .merge(self.inner.cartao.page_router())
    }

    /// Its routes called in this process (the connectors' transport without a socket): what the
    /// systems' client, the Pix PSP's and the card provider's take as `in_process`.
    pub fn local(&self) -> Arc<dyn vt_connectors::exchange::Local> {
        crate::InProcess::shared(self.router())
    }

    /// The card provider it also is (Stripe's Checkout Sessions under `/stripe/v1`, the hosted pages).
    pub fn cartao(&self) -> &crate::cartao::CheckoutSimulado {
        &self.inner.cartao
    }

    /// The payment provider it also is (the API Pix under `/pix/v2`).
    pub fn pix(&self) -> &crate::pix::PspSimulado {
        &self.inner.pix
    }

    /// Serves on `127.0.0.1:port` (0 picks a free port) until the task is dropped or aborted.
    pub async fn spawn(self, port: u16) -> Result<RunningSimulator, SimulatorError> {
        self.spawn_behind(port, super::SimulatorAuth::None).await
    }

    /// The simulator's routes behind `auth` ([`super::guard`]), for a server of the caller's own (TLS).
    pub fn router_behind(&self, auth: super::SimulatorAuth) -> Router {
        super::guard::guarded(self.router(), auth)
    }

    /// Serves as [`Self::spawn`] does, asking callers for `auth` ([`super::guard`]).
    pub async fn spawn_behind(
        self,
        port: u16,
        auth: super::SimulatorAuth,
    ) -> Result<RunningSimulator, SimulatorError> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let app = super::guard::guarded(self.router(), auth);
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "simulator stopped");
            }
        });
        Ok(RunningSimulator {
            url,
            simulator: self,
            task,
        })
    }

    pub fn ledger(&self) -> Vec<LedgerEntry> {
        lock(&self.inner.ledger).clone()
    }

    /// Recharges actually charged for `cartao` (replays excluded).
    pub fn charges(&self, cartao: &str) -> usize {
        self.ledger()
            .iter()
            .filter(|e| e.cartao.as_deref() == Some(cartao) && e.efeito == Some(Efeito::RecargaEfetivada))
            .count()
    }

    /// Notifications actually delivered (replays and refusals excluded).
    pub fn deliveries(&self) -> usize {
        self.ledger()
            .iter()
            .filter(|e| e.efeito == Some(Efeito::NotificacaoEntregue))
            .count()
    }

    fn card(&self, cartao: &str) -> CardBehavior {
        self.inner
            .cards
            .get(cartao)
            .cloned()
            .unwrap_or_else(|| super::cards::unnamed(cartao))
    }

    /// The card holder rides: `valor` off card `cartao`'s balance, as the turnstile takes it (the
    /// embedded simulator's book keeps credits only: there it lowers this process's balance).
    pub fn ride(&self, cartao: &str, valor: Decimal) {
        let start = self.balance(cartao);
        let mut balances = lock(&self.inner.balances);
        let b = balances.entry(cartao.to_owned()).or_insert(start);
        *b -= valor;
        drop(balances);
        self.moved(cartao, desk::Kind::Uso, valor);
    }

    fn balance(&self, cartao: &str) -> Decimal {
        if let Some(book) = self.inner.book.get() {
            return self.card(cartao).saldo + book.credited(cartao);
        }
        *lock(&self.inner.balances)
            .entry(cartao.to_owned())
            .or_insert_with(|| self.card(cartao).saldo)
    }

    fn record(&self, mut entry: LedgerEntry) {
        entry.seq = self.inner.seq.fetch_add(1, Ordering::Relaxed);
        if entry.efeito == Some(Efeito::RecargaEfetivada)
            && let (Some(cartao), Some(valor)) = (
                &entry.cartao,
                entry.body.as_ref().and_then(|b| decimal_from_json(&b["valor"])),
            )
        {
            self.moved(cartao, desk::Kind::Credito, valor);
        }
        lock(&self.inner.ledger).push(entry);
    }

    fn next_id(&self, prefix: &str) -> String {
        format!("{prefix}_{:06}", self.inner.seq.fetch_add(1, Ordering::Relaxed))
    }

    /// The stored response for `key`: `Ok(Some)` to replay, `Err` when the key was used for another body.
    fn replay(&self, key: &str, body_hash: &str) -> Result<Option<(u16, Value)>, ()> {
        if let Some(book) = self.inner.book.get() {
            let ttl = chrono::Duration::from_std(self.inner.config.idempotency_ttl)
                .unwrap_or(chrono::Duration::MAX);
            let live =
                |a: &super::book::Answer| chrono::Utc::now() - a.at < ttl || about_a_boleto(&a.response);
            return match book.answer(key).filter(live) {
                Some(a) if a.hash == body_hash => Ok(Some((a.status, a.response))),
                Some(_) => Err(()),
                None => Ok(None),
            };
        }
        let mut store = lock(&self.inner.idempotency);
        // Expired keys are dropped when looked up: sweeping the whole store on every request made each
        // request cost grow with the number of keys (a batch of thousands of recharges).
        if store.get(key).is_some_and(|s| {
            s.at.elapsed() >= self.inner.config.idempotency_ttl && !about_a_boleto(&s.response)
        }) {
            store.remove(key);
        }
        match store.get(key) {
            Some(s) if s.body_hash == body_hash => Ok(Some((s.status, s.response.clone()))),
            Some(_) => Err(()),
            None => Ok(None),
        }
    }

    /// Answers from the idempotency store when the key is known (a replay, or a 409 for another body),
    /// recording the request; `None` when the request is new.
    fn answer_stored(&self, key: &str, body_hash: &str, entry: &LedgerEntry) -> Option<Response> {
        let (status, response, efeito) = match self.replay(key, body_hash) {
            Ok(None) => return None,
            Ok(Some((status, response))) => (status, response, Some(Efeito::Replay)),
            Err(()) => (409, json!({"motivo": "idempotency_key_reutilizada"}), None),
        };
        let replayed = efeito.is_some();
        self.record(LedgerEntry {
            status,
            efeito,
            ..entry.clone()
        });
        let mut response = reply(status, response);
        if replayed {
            // The payment-API convention: the caller must not take a replay for a new approval.
            response.headers_mut().insert(
                vt_connectors::exchange::REPLAYED_HEADER,
                axum::http::HeaderValue::from_static("true"),
            );
        }
        Some(response)
    }

    fn store(&self, key: &str, body_hash: String, status: u16, response: Value) {
        if let Some(book) = self.inner.book.get() {
            let answer = super::book::Answer {
                hash: body_hash,
                status,
                response,
                at: chrono::Utc::now(),
            };
            book.keep(key, answer);
            return;
        }
        lock(&self.inner.idempotency).insert(
            key.to_owned(),
            Stored {
                body_hash,
                status,
                response,
                at: Instant::now(),
            },
        );
    }

    fn rate_limited(&self) -> bool {
        let mut rate = lock(&self.inner.rate);
        if rate.0.elapsed() >= Duration::from_secs(1) {
            *rate = (Instant::now(), 0);
        }
        rate.1 += 1;
        rate.1 > self.inner.config.notifications_per_second
    }
}

impl Simulator {
    /// Server time.
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.inner
            .config
            .now
            .as_ref()
            .map_or_else(chrono::Utc::now, |f| f())
    }

    /// Server time in São Paulo, ISO 8601.
    fn now_sp(&self) -> String {
        vt_domain::vt::timezone::Timezone::sao_paulo()
            .local(self.now())
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, false)
    }
}

fn idempotency_key(headers: &HeaderMap) -> Option<String> {
    headers
        .get("x-idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .filter(|k| !k.is_empty())
}

fn hash(body: &Value) -> String {
    hex::encode(Sha256::digest(body.to_string().as_bytes()))
}

fn reply(status: u16, body: Value) -> Response {
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(body),
    )
        .into_response()
}

fn valid_card(c: &str) -> bool {
    (8..=19).contains(&c.len()) && c.chars().all(|c| c.is_ascii_digit())
}

#[derive(Deserialize)]
struct SaldoQuery {
    cartao: Option<String>,
}

async fn saldo(State(sim): State<Simulator>, headers: HeaderMap, Query(q): Query<SaldoQuery>) -> Response {
    let cartao = q.cartao.unwrap_or_default();
    let entry = |status: u16| LedgerEntry {
        seq: 0,
        sistema: "saldo".into(),
        method: "GET".into(),
        path: vt_domain::systems::SALDO_ENDPOINT.into(),
        idempotency_key: idempotency_key(&headers),
        cartao: Some(cartao.clone()),
        status,
        efeito: None,
        body: None,
    };
    if !valid_card(&cartao) {
        sim.record(entry(400));
        return reply(400, json!({"erro": "cartao_invalido"}));
    }
    let card = sim.card(&cartao);
    let saldo = money_json(sim.balance(&cartao));
    let (status, body) = match card.saldo_api {
        BalanceMode::Ok => (
            200,
            json!({"cartao": cartao, "saldo": saldo, "moeda": "BRL", "data_servidor": sim.now_sp(), "fonte": "SISTEMA_VT"}),
        ),
        BalanceMode::Nulo => (
            200,
            json!({"cartao": cartao, "saldo": null, "moeda": "BRL", "data_servidor": sim.now_sp(), "fonte": "SISTEMA_VT"}),
        ),
        BalanceMode::Erro500 => (
            500,
            json!({"erro": "falha_interna", "mensagem": "serviço de saldo indisponível"}),
        ),
        BalanceMode::SemResposta => {
            sim.record(entry(0));
            tokio::time::sleep(sim.inner.config.slow).await;
            return reply(504, json!({"erro": "tarde_demais"}));
        }
        BalanceMode::OutroCartao => (
            200,
            json!({"cartao": "0000000000", "saldo": saldo, "moeda": "BRL", "data_servidor": sim.now_sp(), "fonte": "SISTEMA_VT"}),
        ),
        BalanceMode::SemMoedaData => (
            200,
            json!({"cartao": cartao, "saldo": saldo, "fonte": "SISTEMA_VT"}),
        ),
    };
    sim.record(entry(status));
    reply(status, body)
}

/// The secret the simulated card provider signs its notices with (a simulator's, not a secret).
pub const CARTAO_WEBHOOK_SECRET: &str = "whsec_simulador";

async fn notificacao(
    State(sim): State<Simulator>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Response {
    let body = body.map(|Json(b)| b).unwrap_or(Value::Null);
    let key = idempotency_key(&headers);
    let mut entry = LedgerEntry {
        seq: 0,
        sistema: "notificacao".into(),
        method: "POST".into(),
        path: vt_domain::systems::NOTIFICACAO_ENDPOINT.into(),
        idempotency_key: key.clone(),
        cartao: body
            .pointer("/metadados/cartao")
            .and_then(Value::as_str)
            .map(str::to_owned),
        status: 0,
        efeito: None,
        body: Some(body.clone()),
    };
    if sim.rate_limited() {
        entry.status = 429;
        sim.record(entry);
        let mut r = reply(
            429,
            json!({"erro": "limite_de_envios", "mensagem": "muitas notificações por segundo"}),
        );
        r.headers_mut()
            .insert("retry-after", axum::http::HeaderValue::from_static("1"));
        return r;
    }
    let canal = body
        .get("canal")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mensagem_ok = body
        .get("mensagem")
        .and_then(Value::as_str)
        .is_some_and(|m| !m.trim().is_empty());
    if canal.is_empty() || !mensagem_ok || body.get("destinatario").is_none() {
        entry.status = 400;
        sim.record(entry);
        return reply(400, json!({"motivo": "payload_invalido"}));
    }
    if let Some(key) = &key {
        let body_hash = hash(&body);
        if let Some(stored) = sim.answer_stored(key, &body_hash, &entry) {
            return stored;
        }
        let response = json!({"message_id": sim.next_id("msg"), "canal": canal, "aceito": true});
        sim.store(key, body_hash, 202, response.clone());
        entry.status = 202;
        entry.efeito = Some(Efeito::NotificacaoEntregue);
        sim.record(entry);
        return reply(202, response);
    }
    let response = json!({"message_id": sim.next_id("msg"), "canal": canal, "aceito": true});
    entry.status = 202;
    entry.efeito = Some(Efeito::NotificacaoEntregue);
    sim.record(entry);
    reply(202, response)
}

async fn ledger(State(sim): State<Simulator>) -> Json<Vec<LedgerEntry>> {
    Json(sim.ledger())
}
