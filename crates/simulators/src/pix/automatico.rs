//! The simulated provider's Pix Automático (journey 2): locations (`/locrec`), recurrences (`/rec`)
//! the payer authorises in their bank — here `POST /_simulador/pix/rec/{idRec}/autorizar`, or by
//! itself after a while ([`PspSimulado::authorising`]) — and cancels there (`…/cancelar`); the
//! charge of each cycle (`/cobr`, one per recurrence and cycle, sent 2 to 10 days ahead), debited on
//! its date, tried again when asked (`/cobr/{txid}/retentativa/{data}`, `PERMITE_3R_7D`). Charges
//! are settled when the provider is next called on or after their date: a payer's bank debits on the
//! day, and nobody can tell before they ask. The card of magic card `1717171717` has no funds on a
//! first attempt. Notices go to `/webhookrec` and `/webhookcobr`'s URLs and to listeners in this
//! process. Recurrences live in memory: the embedded simulator's are gone with its process.

use std::collections::HashMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{patch, post, put};
use axum::{Json, Router};
use chrono::{Duration, NaiveDate};
use serde::Deserialize;

use super::{PspSimulado, problem};
use vt_domain::pix::api::Pix;
use vt_domain::pix::automatico::{
    ANTECEDENCIA, AvisoCobR, AvisoId, AvisoRec, CalendarioCobR, CobR, CobRPedido, CobRStatus, DadosQr,
    LocRec, PoliticaRetentativa, RETENTATIVAS, Rec, RecPedido, RecStatus, Tentativa, TentativaStatus,
};

/// Where a recurrence's payer authorises it, as their bank app would.
pub const AUTHORISE_PATH: &str = "/_simulador/pix/rec/{id_rec}/autorizar";
/// Where a recurrence's payer cancels it in their bank.
pub const CANCEL_PATH: &str = "/_simulador/pix/rec/{id_rec}/cancelar";

/// A notice of the simulated provider's Pix Automático.
#[derive(Debug, Clone, PartialEq)]
pub enum AvisoAutomatico {
    Rec(AvisoRec),
    CobR(AvisoCobR),
}

#[derive(Default)]
pub(super) struct Recorrencias {
    locs: HashMap<u64, LocRec>,
    recs: HashMap<String, Rec>,
    cobrs: HashMap<String, CobR>,
    webhook_rec: Option<String>,
    webhook_cobr: Option<String>,
    listeners: Vec<tokio::sync::mpsc::UnboundedSender<AvisoAutomatico>>,
    seq: u64,
}

impl PspSimulado {
    /// Pix Automático's routes, nested with the rest under `/pix/v2`.
    pub(super) fn automatico_router(&self) -> Router {
        Router::new()
            .route("/locrec", post(criar_locrec))
            .route("/rec", post(criar_rec))
            .route("/rec/{id_rec}", patch(cancelar_rec).get(ler_rec))
            .route("/cobr/{txid}", put(criar_cobr).get(ler_cobr).patch(cancelar_cobr))
            .route("/cobr/{txid}/retentativa/{data}", post(retentativa))
            .route("/webhookrec", put(registrar_webhook_rec))
            .route("/webhookcobr", put(registrar_webhook_cobr))
            .with_state(self.clone())
    }

    /// The simulator's own routes: a payer authorising or cancelling a recurrence in their bank.
    pub fn bank_router(&self) -> Router {
        self.bank_routes()
            .into_iter()
            .fold(Router::new(), |router, (path, route)| router.route(path, route))
    }

    /// [`Self::bank_router`]'s routes, for a server of the product's own (`serve` with the embedded
    /// simulator).
    pub fn bank_routes(&self) -> Vec<(&'static str, axum::routing::MethodRouter)> {
        vec![
            (AUTHORISE_PATH, post(autorizar_http).with_state(self.clone())),
            (CANCEL_PATH, post(cancelar_pagador_http).with_state(self.clone())),
        ]
    }

    /// Every Pix Automático notice from now on (the embedded simulator has no URL to register).
    pub fn notices_automatico(&self) -> tokio::sync::mpsc::UnboundedReceiver<AvisoAutomatico> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.lock().rec.listeners.push(tx);
        rx
    }

    /// Authorises recurrences by itself `after` each is created, as their payers would.
    #[must_use]
    pub fn authorising(mut self, after: Option<std::time::Duration>) -> Self {
        self.authorise_after = after;
        self
    }

    /// Every recurrence the provider has.
    pub fn recurrences(&self) -> Vec<Rec> {
        self.lock().rec.recs.values().cloned().collect()
    }

    /// The recurrence `id_rec` as the provider has it.
    pub fn recurrence(&self, id_rec: &str) -> Option<Rec> {
        self.lock().rec.recs.get(id_rec).cloned()
    }

    /// Every recurring charge of recurrence `id_rec`, settled up to today.
    pub fn recurring_charges(&self, id_rec: &str) -> Vec<CobR> {
        self.settle_due();
        let state = self.lock();
        let mut charges: Vec<CobR> = state
            .rec
            .cobrs
            .values()
            .filter(|c| c.id_rec == id_rec)
            .cloned()
            .collect();
        charges.sort_by_key(due);
        charges
    }

    /// The payer authorises recurrence `id_rec` in their bank: `APROVADA`, and the webhook told.
    /// `false`: no such recurrence waiting for it.
    pub fn authorise(&self, id_rec: &str) -> bool {
        self.end_or_approve(id_rec, RecStatus::Aprovada)
    }

    /// The payer cancels recurrence `id_rec` in their bank: `CANCELADA`, its charges not yet debited
    /// cancelled, and the webhook told.
    pub fn cancel_by_payer(&self, id_rec: &str) -> bool {
        self.end_or_approve(id_rec, RecStatus::Cancelada)
    }

    fn end_or_approve(&self, id_rec: &str, to: RecStatus) -> bool {
        let today = self.today();
        let notices = {
            let mut state = self.lock();
            let rec = &mut state.rec;
            let Some(found) = rec.recs.get_mut(id_rec) else {
                return false;
            };
            let allowed = match to {
                RecStatus::Aprovada => found.status == RecStatus::Criada,
                _ => !found.status.ended(),
            };
            if !allowed {
                return false;
            }
            found.status = to;
            if to == RecStatus::Aprovada {
                found.dados_qr = None;
            }
            let mut notices = vec![AvisoAutomatico::Rec(AvisoRec {
                recs: vec![AvisoId {
                    id_rec: id_rec.to_owned(),
                    txid: None,
                }],
            })];
            if to.ended() {
                notices.extend(cancel_charges_of(rec, id_rec, today));
            }
            notices
        };
        self.tell(notices);
        true
    }

    /// Settles every charge whose attempt falls due by today: debited (`PAGA`, the charge
    /// `CONCLUIDA`), or — for a payer without funds, on a first attempt — `EXPIRADA`, left for a retry
    /// the receiver asks within the policy's window; a charge whose window closed expires.
    pub(super) fn settle_due(&self) {
        let today = self.today();
        let now = (self.now)();
        let notices: Vec<AvisoAutomatico> = {
            let mut state = self.lock();
            let sem_saldo = state.sem_saldo.clone();
            let rec = &mut state.rec;
            let mut changed = Vec::new();
            for cobr in rec.cobrs.values_mut() {
                if settle(cobr, today, now, &sem_saldo, &rec.recs) {
                    changed.push((cobr.id_rec.clone(), cobr.txid.clone()));
                }
            }
            changed
                .into_iter()
                .map(|(id_rec, txid)| {
                    AvisoAutomatico::CobR(AvisoCobR {
                        cobsr: vec![AvisoId {
                            id_rec,
                            txid: Some(txid),
                        }],
                    })
                })
                .collect()
        };
        self.tell(notices);
    }

    fn today(&self) -> NaiveDate {
        // The arrangement's days are Brasília's.
        ((self.now)() - Duration::hours(3)).date_naive()
    }

    /// `notices` to this process's listeners and the registered webhooks (in the background).
    fn tell(&self, notices: Vec<AvisoAutomatico>) {
        if notices.is_empty() {
            return;
        }
        let (rec_url, cobr_url) = {
            let mut state = self.lock();
            let rec = &mut state.rec;
            for n in &notices {
                rec.listeners.retain(|l| l.send(n.clone()).is_ok());
            }
            (rec.webhook_rec.clone(), rec.webhook_cobr.clone())
        };
        for notice in notices {
            let (url, body) = match (&notice, &rec_url, &cobr_url) {
                (AvisoAutomatico::Rec(a), Some(url), _) => (
                    format!("{}/rec", url.trim_end_matches('/')),
                    vt_contract::json::to_value(a),
                ),
                (AvisoAutomatico::CobR(a), _, Some(url)) => (
                    format!("{}/cobr", url.trim_end_matches('/')),
                    vt_contract::json::to_value(a),
                ),
                _ => continue,
            };
            let Ok(body) = body else { continue };
            let http = self.http.clone();
            tokio::spawn(async move {
                if let Err(e) = http.post(url).json(&body).send().await {
                    tracing::warn!(error = %e, "simulated provider: Pix Automático notice not delivered");
                }
            });
        }
    }

    fn schedule_authorisation(&self, id_rec: &str) {
        let Some(after) = self.authorise_after else {
            return;
        };
        let (psp, id) = (self.clone(), id_rec.to_owned());
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            psp.authorise(&id);
        });
    }
}

fn due(c: &CobR) -> String {
    c.calendario
        .as_ref()
        .map(|c| c.data_de_vencimento.clone())
        .unwrap_or_default()
}

fn date(text: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()
}

/// The charges of recurrence `id_rec` not yet due, cancelled with it: one whose first attempt is
/// `today` or past is under way at the payer's bank, and settles as it would have.
fn cancel_charges_of(rec: &mut Recorrencias, id_rec: &str, today: NaiveDate) -> Vec<AvisoAutomatico> {
    let mut notices = Vec::new();
    for cobr in rec.cobrs.values_mut().filter(|c| c.id_rec == id_rec) {
        let first = cobr.tentativas.first().and_then(|t| date(&t.data_liquidacao));
        if matches!(cobr.status, CobRStatus::Criada | CobRStatus::Ativa) && first.is_none_or(|d| d > today) {
            cobr.status = CobRStatus::Cancelada;
            for t in cobr
                .tentativas
                .iter_mut()
                .filter(|t| matches!(t.status, TentativaStatus::Solicitada | TentativaStatus::Agendada))
            {
                t.status = TentativaStatus::Cancelada;
            }
            notices.push(AvisoAutomatico::CobR(AvisoCobR {
                cobsr: vec![AvisoId {
                    id_rec: id_rec.to_owned(),
                    txid: Some(cobr.txid.clone()),
                }],
            }));
        }
    }
    notices
}

/// One charge settled up to `today`; whether it changed.
fn settle(
    cobr: &mut CobR,
    today: NaiveDate,
    now: chrono::DateTime<chrono::Utc>,
    sem_saldo: &std::collections::HashSet<String>,
    recs: &HashMap<String, Rec>,
) -> bool {
    if cobr.status != CobRStatus::Ativa {
        return false;
    }
    let Some(due_on) = cobr.calendario.as_ref().and_then(|c| date(&c.data_de_vencimento)) else {
        return false;
    };
    let card = recs
        .get(&cobr.id_rec)
        .and_then(|r| r.vinculo.as_ref())
        .and_then(|v| v.objeto.as_deref())
        .map(vt_domain::vt::card::last_four)
        .unwrap_or_default();
    let valor = cobr.valor.as_ref().map(|v| v.original).unwrap_or_default();
    let Some(attempt) = cobr.tentativas.iter_mut().find(|t| {
        matches!(t.status, TentativaStatus::Solicitada | TentativaStatus::Agendada)
            && date(&t.data_liquidacao).is_some_and(|d| d <= today)
    }) else {
        // No attempt under way and the retry window closed: the charge expires.
        let window_closed = today > due_on + Duration::days(RETENTATIVAS.1);
        if cobr.pendente().is_none() && cobr.falhas() > 0 && window_closed {
            cobr.status = CobRStatus::Expirada;
            return true;
        }
        return false;
    };
    if attempt.tipo == "AGND" && sem_saldo.contains(&card) {
        attempt.status = TentativaStatus::Expirada;
        attempt.rejeicao = Some(
            serde_json::json!({"codigo": "AM04", "descricao": "Saldo insuficiente na conta do pagador"}),
        );
        if cobr.politica_retentativa != Some(PoliticaRetentativa::Permite3r7d) {
            cobr.status = CobRStatus::Expirada;
        }
        return true;
    }
    attempt.status = TentativaStatus::Paga;
    let pix = Pix {
        end_to_end_id: attempt.end_to_end_id.clone(),
        txid: Some(cobr.txid.clone()),
        valor,
        horario: now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        devolucoes: Vec::new(),
    };
    cobr.pix.push(pix);
    cobr.status = CobRStatus::Concluida;
    true
}

async fn criar_locrec(State(psp): State<PspSimulado>) -> Response {
    let now = (psp.now)();
    let mut state = psp.lock();
    let rec = &mut state.rec;
    rec.seq += 1;
    let id = rec.seq;
    let loc = LocRec {
        id,
        location: format!("pix.simulador.vt/qr/v2/rec/{}", uuid::Uuid::new_v4().simple()),
        criacao: Some(now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
        id_rec: None,
    };
    rec.locs.insert(id, loc.clone());
    (StatusCode::CREATED, Json(loc)).into_response()
}

fn invalid_rec(title: &str) -> Response {
    problem(StatusCode::BAD_REQUEST, "RecOperacaoInvalida", title)
}

async fn criar_rec(State(psp): State<PspSimulado>, body: axum::body::Bytes) -> Response {
    let Ok(pedido) = vt_contract::json::from_bytes::<RecPedido>(&body) else {
        return invalid_rec("Recorrência inválida.");
    };
    let (today, now) = (psp.today(), (psp.now)());
    let fixed = pedido.valor.valor_rec.is_some();
    if fixed == pedido.valor.valor_minimo_recebedor.is_some() {
        return invalid_rec("Informe valorRec ou valorMinimoRecebedor, nunca os dois.");
    }
    if date(&pedido.calendario.data_inicial).is_none_or(|d| d < today) {
        return invalid_rec("dataInicial anterior à criação da recorrência.");
    }
    if pedido.vinculo.contrato.is_empty() || pedido.vinculo.contrato.chars().count() > 35 {
        return invalid_rec("vinculo.contrato inválido.");
    }
    let id_rec = format!(
        "RR00000000{}{}",
        now.format("%Y%m%d"),
        &uuid::Uuid::new_v4().simple().to_string()[..11]
    );
    let mut state = psp.lock();
    let rec = &mut state.rec;
    let loc = match pedido.loc {
        Some(id) => match rec.locs.get_mut(&id) {
            Some(l) if l.id_rec.is_none() => {
                l.id_rec = Some(id_rec.clone());
                Some(l.clone())
            }
            Some(_) => return invalid_rec("A location já está em uso por outra recorrência."),
            None => return invalid_rec("A location informada não existe."),
        },
        None => None,
    };
    let dados_qr = loc.as_ref().map(|l| DadosQr {
        jornada: "JORNADA_2".into(),
        pix_copia_e_cola: vt_domain::pix::recorrencia(&l.location, super::RECEBEDOR.0, super::RECEBEDOR.1),
    });
    let created = Rec {
        id_rec: id_rec.clone(),
        status: RecStatus::Criada,
        vinculo: Some(pedido.vinculo),
        calendario: Some(pedido.calendario),
        valor: pedido.valor,
        politica_retentativa: Some(pedido.politica_retentativa),
        loc,
        dados_qr,
        encerramento: None,
    };
    rec.recs.insert(id_rec.clone(), created.clone());
    drop(state);
    psp.schedule_authorisation(&id_rec);
    (StatusCode::CREATED, Json(created)).into_response()
}

fn rec_not_found() -> Response {
    problem(
        StatusCode::NOT_FOUND,
        "RecNaoEncontrada",
        "Recorrência não encontrada para o idRec informado.",
    )
}

async fn ler_rec(State(psp): State<PspSimulado>, Path(id_rec): Path<String>) -> Response {
    match psp.recurrence(&id_rec) {
        Some(rec) => Json(rec).into_response(),
        None => rec_not_found(),
    }
}

#[derive(Deserialize)]
struct Revisao {
    status: String,
}

async fn cancelar_rec(
    State(psp): State<PspSimulado>,
    Path(id_rec): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    if !vt_contract::json::from_bytes::<Revisao>(&body).is_ok_and(|r| r.status == "CANCELADA") {
        return invalid_rec("O campo rec.status não respeita o schema.");
    }
    let Some(rec) = psp.recurrence(&id_rec) else {
        return rec_not_found();
    };
    if rec.status == RecStatus::Cancelada {
        return Json(rec).into_response();
    }
    if rec.status.ended() {
        return invalid_rec("A recorrência encontra-se expirada, cancelada ou rejeitada.");
    }
    psp.end_or_approve(&id_rec, RecStatus::Cancelada);
    let mut state = psp.lock();
    if let Some(found) = state.rec.recs.get_mut(&id_rec) {
        found.encerramento =
            Some(serde_json::json!({"cancelamento": {"solicitante": "USUARIO_RECEBEDOR", "codigo": "SLCR"}}));
    }
    match state.rec.recs.get(&id_rec) {
        Some(rec) => Json(rec.clone()).into_response(),
        None => rec_not_found(),
    }
}

fn invalid_cobr(title: &str) -> Response {
    problem(StatusCode::BAD_REQUEST, "CobROperacaoInvalida", title)
}

fn cobr_not_found() -> Response {
    problem(
        StatusCode::NOT_FOUND,
        "CobRNaoEncontrado",
        "Cobrança não encontrada para o txid informado.",
    )
}

async fn criar_cobr(
    State(psp): State<PspSimulado>,
    Path(txid): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    if !super::txid_ok(&txid) {
        return invalid_cobr("txid inválido");
    }
    let Ok(pedido) = vt_contract::json::from_bytes::<CobRPedido>(&body) else {
        return invalid_cobr("Cobrança recorrente inválida.");
    };
    psp.settle_due();
    let (today, now) = (psp.today(), (psp.now)());
    let mut state = psp.lock();
    let rec = &mut state.rec;
    if let Some(existing) = rec.cobrs.get(&txid) {
        // The same charge asked again (a retry, a second instance): the same answer.
        let same = existing.id_rec == pedido.id_rec && existing.valor.as_ref() == Some(&pedido.valor);
        return if same {
            (StatusCode::CREATED, Json(existing.clone())).into_response()
        } else {
            invalid_cobr("O campo cobr.txid encontra-se em uso.")
        };
    }
    let Some(parent) = rec.recs.get(&pedido.id_rec) else {
        return problem(
            StatusCode::NOT_FOUND,
            "RecNaoEncontrada",
            "Recorrência não encontrada.",
        );
    };
    if parent.status != RecStatus::Aprovada {
        return invalid_cobr("A recorrência não está aprovada.");
    }
    let Some(due_on) = date(&pedido.calendario.data_de_vencimento) else {
        return invalid_cobr("O objeto cobr.calendario não respeita o schema.");
    };
    let ahead = (due_on - today).num_days();
    if !(ANTECEDENCIA.0..=ANTECEDENCIA.1).contains(&ahead) {
        return invalid_cobr("A cobrança deve ser enviada de 2 a 10 dias antes do vencimento.");
    }
    let allowed = match &parent.valor {
        v if v.valor_rec.is_some() => v.valor_rec == Some(pedido.valor.original),
        v => v
            .valor_minimo_recebedor
            .is_none_or(|m| pedido.valor.original >= m),
    };
    if !allowed || pedido.valor.original <= rust_decimal::Decimal::ZERO {
        return invalid_cobr("O campo cobr.valor não respeita a recorrência.");
    }
    let periodicidade = parent
        .calendario
        .as_ref()
        .map_or(vt_domain::pix::automatico::Periodicidade::Mensal, |c| {
            c.periodicidade
        });
    let cycle = periodicidade.cycle(due_on);
    let same_cycle = rec.cobrs.values().any(|c| {
        c.id_rec == pedido.id_rec
            && !matches!(c.status, CobRStatus::Rejeitada | CobRStatus::Cancelada)
            && c.calendario
                .as_ref()
                .and_then(|k| date(&k.data_de_vencimento))
                .is_some_and(|d| periodicidade.cycle(d) == cycle)
    });
    if same_cycle {
        return invalid_cobr("Existe uma CobR com status diferente de REJEITADA e CANCELADA no mesmo ciclo.");
    }
    let politica = parent.politica_retentativa;
    let cobr = CobR {
        id_rec: pedido.id_rec,
        txid: txid.clone(),
        status: CobRStatus::Ativa,
        calendario: Some(CalendarioCobR {
            criacao: Some(today.to_string()),
            data_de_vencimento: pedido.calendario.data_de_vencimento,
        }),
        valor: Some(pedido.valor),
        politica_retentativa: politica,
        tentativas: vec![Tentativa {
            data_liquidacao: due_on.to_string(),
            tipo: "AGND".into(),
            status: TentativaStatus::Agendada,
            end_to_end_id: super::payment_id('E', now),
            rejeicao: None,
        }],
        pix: Vec::new(),
    };
    rec.cobrs.insert(txid, cobr.clone());
    (StatusCode::CREATED, Json(cobr)).into_response()
}

async fn ler_cobr(State(psp): State<PspSimulado>, Path(txid): Path<String>) -> Response {
    psp.settle_due();
    match psp.lock().rec.cobrs.get(&txid) {
        Some(cobr) => Json(cobr.clone()).into_response(),
        None => cobr_not_found(),
    }
}

async fn cancelar_cobr(
    State(psp): State<PspSimulado>,
    Path(txid): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    if !vt_contract::json::from_bytes::<Revisao>(&body).is_ok_and(|r| r.status == "CANCELADA") {
        return invalid_cobr("O campo cobr.status não respeita o schema.");
    }
    psp.settle_due();
    let today = psp.today();
    let mut state = psp.lock();
    let Some(cobr) = state.rec.cobrs.get_mut(&txid) else {
        return cobr_not_found();
    };
    let first = cobr.tentativas.first().and_then(|t| date(&t.data_liquidacao));
    match cobr.status {
        CobRStatus::Cancelada => Json(cobr.clone()).into_response(),
        CobRStatus::Ativa | CobRStatus::Criada if first.is_none_or(|d| today < d) => {
            cobr.status = CobRStatus::Cancelada;
            for t in &mut cobr.tentativas {
                t.status = TentativaStatus::Cancelada;
            }
            Json(cobr.clone()).into_response()
        }
        _ => invalid_cobr(
            "Não é possível cancelar uma cobrança em uma data igual ou maior que a data prevista da primeira tentativa de liquidação.",
        ),
    }
}

async fn retentativa(State(psp): State<PspSimulado>, Path((txid, data)): Path<(String, String)>) -> Response {
    psp.settle_due();
    let (today, now) = (psp.today(), (psp.now)());
    let mut state = psp.lock();
    let Some(cobr) = state.rec.cobrs.get_mut(&txid) else {
        return cobr_not_found();
    };
    let Some(on) = date(&data) else {
        return invalid_cobr("O parâmetro data não corresponde a uma data futura.");
    };
    let due_on = cobr.calendario.as_ref().and_then(|c| date(&c.data_de_vencimento));
    let retries = cobr.tentativas.iter().filter(|t| t.tipo != "AGND").count();
    let why = if cobr.politica_retentativa != Some(PoliticaRetentativa::Permite3r7d) {
        Some("A política configurada na recorrência não permite retentativa de cobrança.")
    } else if cobr.status != CobRStatus::Ativa {
        Some("A cobrança não está ATIVA.")
    } else if cobr.pendente().is_some() {
        Some("Existe uma tentativa com status SOLICITADA ou AGENDADA.")
    } else if on <= today {
        Some("O parâmetro data não corresponde a uma data futura.")
    } else if retries >= RETENTATIVAS.0 as usize
        || due_on.is_none_or(|d| on > d + Duration::days(RETENTATIVAS.1))
    {
        Some("A retentativa está fora da política PERMITE_3R_7D.")
    } else {
        None
    };
    if let Some(title) = why {
        return invalid_cobr(title);
    }
    cobr.tentativas.push(Tentativa {
        data_liquidacao: on.to_string(),
        tipo: "NTAG".into(),
        status: TentativaStatus::Agendada,
        end_to_end_id: super::payment_id('E', now),
        rejeicao: None,
    });
    (StatusCode::CREATED, Json(cobr.clone())).into_response()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Webhook {
    webhook_url: String,
}

fn webhook_url(body: &[u8]) -> Option<String> {
    vt_contract::json::from_bytes::<Webhook>(body)
        .ok()
        .map(|w| w.webhook_url)
        .filter(|u| u.starts_with("http"))
}

async fn registrar_webhook_rec(State(psp): State<PspSimulado>, body: axum::body::Bytes) -> Response {
    let Some(url) = webhook_url(&body) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "RequisicaoInvalida",
            "webhookUrl inválida.",
        );
    };
    psp.lock().rec.webhook_rec = Some(url);
    StatusCode::OK.into_response()
}

async fn registrar_webhook_cobr(State(psp): State<PspSimulado>, body: axum::body::Bytes) -> Response {
    let Some(url) = webhook_url(&body) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "RequisicaoInvalida",
            "webhookUrl inválida.",
        );
    };
    psp.lock().rec.webhook_cobr = Some(url);
    StatusCode::OK.into_response()
}

async fn autorizar_http(State(psp): State<PspSimulado>, Path(id_rec): Path<String>) -> Response {
    if psp.authorise(&id_rec) {
        Json(psp.recurrence(&id_rec)).into_response()
    } else {
        invalid_rec("A recorrência não aguarda autorização.")
    }
}

async fn cancelar_pagador_http(State(psp): State<PspSimulado>, Path(id_rec): Path<String>) -> Response {
    if psp.cancel_by_payer(&id_rec) {
        Json(psp.recurrence(&id_rec)).into_response()
    } else {
        invalid_rec("A recorrência já terminou.")
    }
}
