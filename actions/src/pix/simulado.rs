//! The simulator as the operator's payment provider: the subset of the API Pix the product uses
//! (`cob` create/read/withdraw, `devolucao`, the webhook's registration and call), served under
//! `/pix/v2` beside the simulated VT systems and behind the same guard (OAuth2 token endpoint
//! included). It issues valid BR Codes; `POST /_simulador/pix/{txid}/pagar` pays a charge as a
//! payer's bank would, and tells the registered webhook.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{post, put};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::json;

use super::api::{
    AvisoWebhook, Calendario, Cob, CobPedido, CobStatus, Devolucao, DevolucaoPedido, DevolucaoStatus, Pix,
};

/// Where the simulated provider's charges are found (`location`, inside each BR Code).
const LOCATION: &str = "pix.simulador.vt/qr/v2";
/// The receiver's name and city a payer's bank shows.
const RECEBEDOR: (&str, &str) = ("VT SIMULADOR", "SAO PAULO");

type NowFn = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

#[derive(Default)]
struct Charges {
    cobs: HashMap<String, Cob>,
    /// The webhook URL registered per Pix key (`PUT /webhook/{chave}`).
    webhooks: HashMap<String, String>,
    seq: u64,
}

/// The simulated provider; cheap to clone.
#[derive(Clone)]
pub struct PspSimulado {
    state: Arc<Mutex<Charges>>,
    now: NowFn,
    http: reqwest::Client,
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
        }
    }

    /// The API Pix routes, to be nested under `/pix/v2`.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/cob/{txid}", put(criar).get(ler).patch(remover))
            .route("/pix/{e2eid}/devolucao/{id}", put(devolver))
            .route("/webhook/{chave}", put(registrar_webhook))
            .with_state(self.clone())
    }

    /// The simulator's own route: `POST /_simulador/pix/{txid}/pagar`.
    pub fn payer_router(&self) -> Router {
        Router::new()
            .route("/_simulador/pix/{txid}/pagar", post(pagar_http))
            .with_state(self.clone())
    }

    /// The charge `txid` as the provider has it.
    pub fn charge(&self, txid: &str) -> Option<Cob> {
        self.lock().cobs.get(txid).cloned()
    }

    /// Pays charge `txid` in full, as a payer's bank would, and tells the registered webhook (in the
    /// background; `notify: false` for a webhook that never comes). `None`: no such charge, or it cannot
    /// be paid (withdrawn, paid already).
    pub fn pay(&self, txid: &str, notify: bool) -> Option<Pix> {
        let (pix, webhook) = {
            let mut state = self.lock();
            state.seq += 1;
            let seq = state.seq;
            let cob = state.cobs.get_mut(txid)?;
            if cob.status != CobStatus::Ativa {
                return None;
            }
            let now = (self.now)();
            let pix = Pix {
                end_to_end_id: format!("E00000000{}{:011}", now.format("%Y%m%d%H%M"), seq),
                txid: Some(txid.to_owned()),
                valor: cob.valor.original,
                horario: now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                devolucoes: Vec::new(),
            };
            cob.status = CobStatus::Concluida;
            cob.pix.push(pix.clone());
            let webhook = state.webhooks.get(&state.cobs[txid].chave).cloned();
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

    fn lock(&self) -> std::sync::MutexGuard<'_, Charges> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
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
    let Ok(pedido) = crate::json::from_bytes::<CobPedido>(&body) else {
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
        pix_copia_e_cola: Some(super::dynamic(
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
    }) = crate::json::from_bytes::<Revisao>(&body)
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
    let Ok(pedido) = crate::json::from_bytes::<DevolucaoPedido>(&body) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "PixDevolucaoInvalida",
            "Devolução inválida.",
        );
    };
    let mut state = psp.lock();
    state.seq += 1;
    let seq = state.seq;
    let Some(pix) = state
        .cobs
        .values_mut()
        .flat_map(|c| c.pix.iter_mut())
        .find(|p| p.end_to_end_id == e2eid)
    else {
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
        rtr_id: format!("D00000000{}{:011}", (psp.now)().format("%Y%m%d%H%M"), seq),
        valor: pedido.valor,
        status: DevolucaoStatus::Devolvido,
        motivo: None,
    };
    pix.devolucoes.push(devolucao.clone());
    (StatusCode::CREATED, Json(devolucao)).into_response()
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
    match crate::json::from_bytes::<Webhook>(&body) {
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
