//! The simulator as the operator's payment provider: the subset of the API Pix the product uses
//! (`cob` create/read/withdraw, `devolucao`, the webhook's registration and call), served under
//! `/pix/v2` beside the simulated VT systems and behind the same guard (OAuth2 token endpoint
//! included). It issues valid BR Codes; `POST /_simulador/pix/{txid}/pagar` pays a charge as a
//! payer's bank would, and tells the registered webhook — and the product in this same process, when
//! it listens ([`PspSimulado::notices`]): the embedded simulator has no URL to register. Set to pay by
//! itself ([`PspSimulado::paying`]), it pays each charge it issues after a while, as the card's holder
//! would (the magic cards say whether they pay at all, and whether the notice comes).

mod automatico;

pub use automatico::{AUTHORISE_PATH, AvisoAutomatico, CANCEL_PATH};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::json;

use crate::systems::book::Book;
use crate::systems::cards::PixPayer;

use vt_domain::pix::api::{
    AvisoWebhook, Calendario, Cob, CobPedido, CobStatus, Devolucao, DevolucaoPedido, DevolucaoStatus, Pix,
};

/// Where the simulated provider's charges are found (`location`, inside each BR Code).
const LOCATION: &str = "pix.simulador.vt/qr/v2";
/// Where a charge is paid as a payer's bank would.
pub const PAY_PATH: &str = "/_simulador/pix/{txid}/pagar";
/// The receiver's name and city a payer's bank shows.
const RECEBEDOR: (&str, &str) = ("VT SIMULADOR", "SAO PAULO");

type NowFn = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

#[derive(Default)]
struct Charges {
    cobs: HashMap<String, Cob>,
    /// The webhook URL registered per Pix key (`PUT /webhook/{chave}`).
    webhooks: HashMap<String, String>,
    /// Products in this process told of every payment.
    listeners: Vec<tokio::sync::mpsc::UnboundedSender<AvisoWebhook>>,
    /// Charges it will pay by itself.
    scheduled: std::collections::HashSet<String>,
    /// Charge lines of the book read so far.
    book_lines: u64,
    /// Refunds stay `EM_PROCESSAMENTO` until [`PspSimulado::finish_refund`] (a provider whose refunds
    /// take time); else they are `DEVOLVIDO` at once.
    refunds_later: bool,
    /// Pix Automático: locations, recurrences, their charges, webhooks.
    rec: automatico::Recorrencias,
    /// The payers (last four digits of the card) whose account has no funds on a recurring charge's
    /// first attempt.
    sem_saldo: std::collections::HashSet<String>,
}

/// How the simulated provider pays by itself: after `after`, each charge whose card (the last four
/// digits of the masked card in `solicitacaoPagador`) is not in `payers` pays and is notified;
/// `payers` says otherwise for some.
#[derive(Debug, Clone)]
struct AutoPay {
    after: std::time::Duration,
    payers: HashMap<String, PixPayer>,
}

/// The simulated provider; cheap to clone.
#[derive(Clone)]
pub struct PspSimulado {
    state: Arc<Mutex<Charges>>,
    now: NowFn,
    http: reqwest::Client,
    autopay: Option<Arc<AutoPay>>,
    /// Where its charges outlive the process (the embedded simulator's book).
    book: Arc<std::sync::OnceLock<Arc<Book>>>,
    /// Recurrences authorised by themselves after this long ([`Self::authorising`]).
    authorise_after: Option<std::time::Duration>,
}

impl std::fmt::Debug for PspSimulado {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PspSimulado").finish_non_exhaustive()
    }
}

impl PspSimulado {
    pub fn new(now: Option<NowFn>) -> Self {
        Self {
            state: Arc::default(),
            now: now.unwrap_or_else(|| Arc::new(Utc::now)),
            http: reqwest::Client::new(),
            autopay: None,
            book: Arc::default(),
            authorise_after: None,
        }
    }

    /// Keeps its charges in `book`, with the other processes' on the same data directory.
    pub(crate) fn keep_in(&self, book: Arc<Book>) {
        let _ = self.book.set(book);
    }

    /// Charge `cob` as it is now, for the next process.
    fn keep(&self, cob: &Cob) {
        if let Some(book) = self.book.get() {
            book.keep_cob(cob);
        }
    }

    /// Paying by itself `after` each charge is issued (`None`: never), as the holders of `cards` do.
    #[must_use]
    pub fn paying<'a>(
        mut self,
        after: Option<std::time::Duration>,
        cards: impl Iterator<Item = (&'a str, PixPayer)>,
    ) -> Self {
        let payers: HashMap<String, PixPayer> = cards
            .filter(|(_, payer)| *payer != PixPayer::Paga)
            .map(|(card, payer)| (vt_domain::vt::card::last_four(card), payer))
            .collect();
        self.lock().sem_saldo = payers
            .iter()
            .filter(|(_, p)| **p == PixPayer::SemSaldoNaConta)
            .map(|(card, _)| card.clone())
            .collect();
        self.autopay = after.map(|after| Arc::new(AutoPay { after, payers }));
        self
    }

    /// Every payment from now on, as the webhook would be told it: the embedded simulator's product
    /// listens here, as it has no URL to register.
    pub fn notices(&self) -> tokio::sync::mpsc::UnboundedReceiver<AvisoWebhook> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.lock().listeners.push(tx);
        rx
    }

    /// Whether charge `txid` is paid, or will be by itself.
    pub fn paid_or_paying(&self, txid: &str) -> bool {
        let state = self.lock();
        state.scheduled.contains(txid)
            || state
                .cobs
                .get(txid)
                .is_some_and(|c| c.status == CobStatus::Concluida)
    }

    /// After a new charge: its payment scheduled, if this provider pays by itself and its payer pays.
    fn schedule(&self, cob: &Cob) {
        let Some(autopay) = &self.autopay else {
            return;
        };
        let card = cob
            .solicitacao_pagador
            .as_deref()
            .map(vt_domain::vt::card::last_four)
            .unwrap_or_default();
        let payer = autopay.payers.get(&card).copied().unwrap_or_default();
        if payer == PixPayer::NuncaPaga {
            return;
        }
        let (psp, txid, after) = (self.clone(), cob.txid.clone(), autopay.after);
        self.lock().scheduled.insert(txid.clone());
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            psp.pay(&txid, payer != PixPayer::PagaSemAviso);
            psp.lock().scheduled.remove(&txid);
        });
    }

    /// The API Pix routes, to be nested under `/pix/v2`.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/cob/{txid}", put(criar).get(ler).patch(remover))
            .route("/pix/{e2eid}", get(ler_pix))
            .route("/pix/{e2eid}/devolucao/{id}", put(devolver))
            .route("/webhook/{chave}", put(registrar_webhook))
            .with_state(self.clone())
            .merge(self.automatico_router())
    }

    /// The simulator's own route: `POST /_simulador/pix/{txid}/pagar`.
    pub fn payer_router(&self) -> Router {
        Router::new()
            .route(PAY_PATH, self.payer_route())
            .merge(self.bank_router())
    }

    /// [`PAY_PATH`]'s handler, for a server of the product's own (`serve` with the embedded simulator).
    pub fn payer_route(&self) -> axum::routing::MethodRouter {
        post(pagar_http).with_state(self.clone())
    }

    /// The charge `txid` as the provider has it.
    pub fn charge(&self, txid: &str) -> Option<Cob> {
        self.lock().cobs.get(txid).cloned()
    }

    /// From now on, refunds stay `EM_PROCESSAMENTO` until [`Self::finish_refund`] settles them.
    pub fn refunding_later(&self) {
        self.lock().refunds_later = true;
    }

    /// The refunds of payment `e2eid` still in progress settled: returned (`devolvido`) or not.
    pub fn finish_refund(&self, e2eid: &str, devolvido: bool) {
        let mut state = self.lock();
        let Some(cob) = paid_by(&mut state.cobs, e2eid) else {
            return;
        };
        let refunds = cob.pix.iter_mut().flat_map(|p| p.devolucoes.iter_mut());
        for d in refunds.filter(|d| d.status == DevolucaoStatus::EmProcessamento) {
            d.status = if devolvido {
                DevolucaoStatus::Devolvido
            } else {
                DevolucaoStatus::NaoRealizado
            };
        }
        self.keep(cob);
    }

    /// The charge whose copia-e-cola is `code`, as a payer's bank finds it by reading the code.
    pub fn charge_with_code(&self, code: &str) -> Option<Cob> {
        let state = self.lock();
        let found = state
            .cobs
            .values()
            .find(|c| c.pix_copia_e_cola.as_deref() == Some(code));
        found.cloned()
    }

    /// Pays charge `txid` in full, as a payer's bank would, and tells the registered webhook (in the
    /// background; `notify: false` for a webhook that never comes). `None`: no such charge, or it cannot
    /// be paid (withdrawn, paid already).
    pub fn pay(&self, txid: &str, notify: bool) -> Option<Pix> {
        let (pix, webhook) = {
            let mut state = self.lock();
            let cob = state.cobs.get_mut(txid)?;
            if cob.status != CobStatus::Ativa {
                return None;
            }
            let now = (self.now)();
            let pix = Pix {
                end_to_end_id: payment_id('E', now),
                txid: Some(txid.to_owned()),
                valor: cob.valor.original,
                horario: now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                devolucoes: Vec::new(),
            };
            cob.status = CobStatus::Concluida;
            cob.pix.push(pix.clone());
            self.keep(cob);
            let webhook = state.webhooks.get(&state.cobs[txid].chave).cloned();
            if notify {
                let aviso = AvisoWebhook {
                    pix: vec![pix.clone()],
                };
                state.listeners.retain(|l| l.send(aviso.clone()).is_ok());
            }
            (pix, webhook)
        };
        if notify && let Some(url) = webhook {
            let http = self.http.clone();
            let aviso = AvisoWebhook {
                pix: vec![pix.clone()],
            };
            tokio::spawn(async move {
                let sent = http
                    .post(format!("{}/pix", url.trim_end_matches('/')))
                    .json(&aviso)
                    .send()
                    .await;
                if let Err(e) = sent {
                    tracing::warn!(error = %e, "simulated provider: webhook not delivered");
                }
            });
        }
        Some(pix)
    }

    /// The charges, caught up with what other processes wrote in the book.
    fn lock(&self) -> std::sync::MutexGuard<'_, Charges> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(book) = self.book.get() {
            let (lines, cobs) = book.cobs_since(state.book_lines);
            state.cobs.extend(cobs.unwrap_or_default());
            state.book_lines = lines;
        }
        state
    }
}

/// The charge payment `e2eid` paid.
fn paid_by<'a>(cobs: &'a mut HashMap<String, Cob>, e2eid: &str) -> Option<&'a mut Cob> {
    cobs.values_mut()
        .find(|c| c.pix.iter().any(|p| p.end_to_end_id == e2eid))
}

/// An API Pix error (RFC 7807), as PSPs answer them.
fn problem(status: StatusCode, kind: &str, title: &str) -> Response {
    let body = json!({
        "type": format!("https://pix.bcb.gov.br/api/v2/error/{kind}"),
        "title": title,
        "status": status.as_u16(),
    });
    (status, Json(body)).into_response()
}

/// A payment's (`E…`) or a refund's (`D…`) id as the Pix system makes them: the letter, the payer
/// institution's ISPB, the minute, and 11 characters unique across every process sharing the book.
fn payment_id(kind: char, at: DateTime<Utc>) -> String {
    let unique = uuid::Uuid::new_v4().simple().to_string();
    format!("{kind}00000000{}{}", at.format("%Y%m%d%H%M"), &unique[..11])
}

fn txid_ok(txid: &str) -> bool {
    (26..=35).contains(&txid.len()) && txid.bytes().all(|b| b.is_ascii_alphanumeric())
}

async fn criar(
    State(psp): State<PspSimulado>,
    Path(txid): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    if !txid_ok(&txid) {
        return problem(StatusCode::BAD_REQUEST, "CobOperacaoInvalida", "txid inválido");
    }
    let Ok(pedido) = vt_contract::json::from_bytes::<CobPedido>(&body) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "CobOperacaoInvalida",
            "Cobrança inválida.",
        );
    };
    if pedido.chave.trim().is_empty()
        || pedido.calendario.expiracao == 0
        || pedido.valor.original <= rust_decimal::Decimal::ZERO
    {
        return problem(
            StatusCode::BAD_REQUEST,
            "CobOperacaoInvalida",
            "Cobrança inválida.",
        );
    }
    let mut state = psp.lock();
    if let Some(existing) = state.cobs.get(&txid) {
        // The same charge asked again (a retry): the same answer. Another charge under its txid: no.
        let same = existing.valor == pedido.valor && existing.chave == pedido.chave;
        return if same {
            (StatusCode::CREATED, Json(existing.clone())).into_response()
        } else {
            problem(
                StatusCode::BAD_REQUEST,
                "CobOperacaoInvalida",
                "txid já utilizado",
            )
        };
    }
    let location = format!("{LOCATION}/{txid}");
    let cob = Cob {
        pix_copia_e_cola: Some(vt_domain::pix::dynamic(
            &location,
            pedido.valor.original,
            RECEBEDOR.0,
            RECEBEDOR.1,
        )),
        txid: txid.clone(),
        revisao: 0,
        status: CobStatus::Ativa,
        calendario: Calendario {
            criacao: Some((psp.now)().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
            expiracao: pedido.calendario.expiracao,
        },
        valor: pedido.valor,
        chave: pedido.chave,
        location: Some(location),
        solicitacao_pagador: pedido.solicitacao_pagador,
        pix: Vec::new(),
    };
    state.cobs.insert(txid, cob.clone());
    psp.keep(&cob);
    drop(state);
    psp.schedule(&cob);
    (StatusCode::CREATED, Json(cob)).into_response()
}

async fn ler(State(psp): State<PspSimulado>, Path(txid): Path<String>) -> Response {
    match psp.charge(&txid) {
        Some(cob) => Json(cob).into_response(),
        None => problem(
            StatusCode::NOT_FOUND,
            "CobNaoEncontrado",
            "Cobrança não encontrada.",
        ),
    }
}

#[derive(Deserialize)]
struct Revisao {
    status: CobStatus,
}

async fn remover(
    State(psp): State<PspSimulado>,
    Path(txid): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let Ok(Revisao {
        status: CobStatus::RemovidaPeloUsuarioRecebedor,
    }) = vt_contract::json::from_bytes::<Revisao>(&body)
    else {
        return problem(
            StatusCode::BAD_REQUEST,
            "CobOperacaoInvalida",
            "Revisão inválida.",
        );
    };
    let mut state = psp.lock();
    let Some(cob) = state.cobs.get_mut(&txid) else {
        return problem(
            StatusCode::NOT_FOUND,
            "CobNaoEncontrado",
            "Cobrança não encontrada.",
        );
    };
    match cob.status {
        CobStatus::Ativa => {
            cob.status = CobStatus::RemovidaPeloUsuarioRecebedor;
            cob.revisao += 1;
            psp.keep(cob);
            Json(cob.clone()).into_response()
        }
        CobStatus::RemovidaPeloUsuarioRecebedor => Json(cob.clone()).into_response(),
        _ => problem(
            StatusCode::BAD_REQUEST,
            "CobOperacaoInvalida",
            "A cobrança não está ATIVA.",
        ),
    }
}

async fn devolver(
    State(psp): State<PspSimulado>,
    Path((e2eid, id)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let Ok(pedido) = vt_contract::json::from_bytes::<DevolucaoPedido>(&body) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "PixDevolucaoInvalida",
            "Devolução inválida.",
        );
    };
    let mut state = psp.lock();
    let later = state.refunds_later;
    let Some(cob) = paid_by(&mut state.cobs, &e2eid) else {
        return problem(StatusCode::NOT_FOUND, "PixNaoEncontrado", "Pix não encontrado.");
    };
    let Some(pix) = cob.pix.iter_mut().find(|p| p.end_to_end_id == e2eid) else {
        return problem(StatusCode::NOT_FOUND, "PixNaoEncontrado", "Pix não encontrado.");
    };
    if let Some(existing) = pix.devolucoes.iter().find(|d| d.id == id) {
        return (StatusCode::CREATED, Json(existing.clone())).into_response();
    }
    let returned: rust_decimal::Decimal = pix.devolucoes.iter().map(|d| d.valor).sum();
    if pedido.valor <= rust_decimal::Decimal::ZERO || returned + pedido.valor > pix.valor {
        return problem(
            StatusCode::BAD_REQUEST,
            "PixDevolucaoInvalida",
            "Valor acima do que pode ser devolvido.",
        );
    }
    let devolucao = Devolucao {
        id,
        rtr_id: payment_id('D', (psp.now)()),
        valor: pedido.valor,
        status: if later {
            DevolucaoStatus::EmProcessamento
        } else {
            DevolucaoStatus::Devolvido
        },
        motivo: None,
    };
    pix.devolucoes.push(devolucao.clone());
    psp.keep(cob);
    (StatusCode::CREATED, Json(devolucao)).into_response()
}

/// `GET /pix/{e2eid}`: a payment received, with its refunds.
async fn ler_pix(State(psp): State<PspSimulado>, Path(e2eid): Path<String>) -> Response {
    let mut state = psp.lock();
    let found =
        paid_by(&mut state.cobs, &e2eid).and_then(|c| c.pix.iter().find(|p| p.end_to_end_id == e2eid));
    match found {
        Some(pix) => Json(pix.clone()).into_response(),
        None => problem(StatusCode::NOT_FOUND, "PixNaoEncontrado", "Pix não encontrado."),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Webhook {
    webhook_url: String,
}

async fn registrar_webhook(
    State(psp): State<PspSimulado>,
    Path(chave): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    match vt_contract::json::from_bytes::<Webhook>(&body) {
        Ok(w) if w.webhook_url.starts_with("http") => {
            psp.lock().webhooks.insert(chave, w.webhook_url);
            StatusCode::OK.into_response()
        }
        _ => problem(
            StatusCode::BAD_REQUEST,
            "WebhookOperacaoInvalida",
            "webhookUrl inválida.",
        ),
    }
}

async fn pagar_http(State(psp): State<PspSimulado>, Path(txid): Path<String>) -> Response {
    match psp.pay(&txid, true) {
        Some(pix) => Json(pix).into_response(),
        None => problem(
            StatusCode::BAD_REQUEST,
            "CobOperacaoInvalida",
            "A cobrança não pode ser paga.",
        ),
    }
}
