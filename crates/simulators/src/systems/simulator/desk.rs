//! The card system's service desk, simulated: a card's situation (by its magic behaviour) and its
//! statement — what this run did to the card (recharges credited, rides taken) and, for a card with a
//! history, a commuter's weekdays before it — newest first, a page at a time.

use chrono::{DateTime, Datelike, Duration as Span, NaiveDate, NaiveTime, Utc, Weekday};

use super::ordens::Standing;
use super::*;

/// A statement's page.
const PAGE: usize = 20;
/// The longest period a statement covers, in days (the operator's policy: the contract answers 400
/// `periodo_invalido` beyond it).
const EXTRATO_MAX_DIAS: i64 = 90;
/// A commuter's fare in the simulated history.
const FARE: Decimal = rust_decimal::dec!(4.40);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Credito,
    Uso,
}

/// One line of a card's statement.
#[derive(Debug, Clone)]
pub(super) struct Movement {
    cartao: String,
    at: DateTime<Utc>,
    kind: Kind,
    valor: Decimal,
    local: Option<String>,
    linha: Option<String>,
}

impl Simulator {
    /// Card `cartao` was credited or used for `valor`, now.
    pub(super) fn moved(&self, cartao: &str, kind: Kind, valor: Decimal) {
        let (local, linha) = match kind {
            Kind::Credito => (None, None),
            Kind::Uso => (Some("Validador a bordo".to_owned()), Some("8012-10".to_owned())),
        };
        lock(&self.inner.movements).push(Movement {
            cartao: cartao.to_owned(),
            at: self.now(),
            kind,
            valor,
            local,
            linha,
        });
    }

    /// Card `cartao`'s statement from `de` to `ate` (São Paulo days, both included), newest first.
    fn statement(&self, cartao: &str, de: NaiveDate, ate: NaiveDate) -> Vec<Movement> {
        let tz = vt_domain::vt::timezone::Timezone::sao_paulo();
        let day = |t: DateTime<Utc>| tz.local(t).date_naive();
        let mut lines: Vec<Movement> = lock(&self.inner.movements)
            .iter()
            .filter(|m| m.cartao == cartao)
            .cloned()
            .collect();
        // Of two lines at the same moment, the one recorded last comes first (the sort keeps the order).
        lines.reverse();
        lines.extend(self.history(cartao));
        lines.retain(|m| (de..=ate).contains(&day(m.at)));
        lines.sort_by_key(|m| std::cmp::Reverse(m.at));
        lines
    }

    /// A commuter's days before now, for a card with a history: a ride at 07:30 and one at 18:10 on
    /// each weekday, a R$ 100,00 credit every fifteen days at 09:00.
    fn history(&self, cartao: &str) -> Vec<Movement> {
        let days = self.card(cartao).historico_dias;
        let tz = vt_domain::vt::timezone::Timezone::sao_paulo();
        let today = tz.local(self.now()).date_naive();
        let at = |d: NaiveDate, h: u32, m: u32| {
            tz.instant(d.and_time(NaiveTime::from_hms_opt(h, m, 0).unwrap_or_default()))
        };
        let line = |at, kind, valor, linha: Option<&str>| Movement {
            cartao: cartao.to_owned(),
            at,
            kind,
            valor,
            local: linha.map(|_| "Validador a bordo".to_owned()),
            linha: linha.map(str::to_owned),
        };
        let mut out = Vec::new();
        for back in 1..=i64::from(days) {
            let d = today - Span::days(back);
            if back % 15 == 0 {
                out.push(line(at(d, 9, 0), Kind::Credito, rust_decimal::dec!(100.00), None));
            }
            if !matches!(d.weekday(), Weekday::Sat | Weekday::Sun) {
                out.push(line(at(d, 7, 30), Kind::Uso, FARE, Some("8012-10")));
                out.push(line(at(d, 18, 10), Kind::Uso, FARE, Some("8012-10")));
            }
        }
        out
    }

    /// The situation's body for a card the system knows: blocked or cancelled as it stands (the
    /// desk's requests, else its behaviour), then what its behaviour adds to an active card.
    fn situation(&self, cartao: &str, mode: SituationMode) -> Value {
        let tz = vt_domain::vt::timezone::Timezone::sao_paulo();
        let now = self.now();
        let mut body = json!({
            "cartao": cartao, "situacao": "ativo", "creditos_pendentes": [], "data_servidor": self.now_sp(),
        });
        match self.standing(cartao) {
            Standing::Ativo => {}
            Standing::Bloqueado { motivo, desde, .. } => {
                body["situacao"] = json!("bloqueado");
                body["bloqueio"] = json!({"motivo": motivo, "desde": desde});
                return body;
            }
            Standing::Cancelado => {
                body["situacao"] = json!("cancelado");
                return body;
            }
        }
        match mode {
            SituationMode::Ativo
            | SituationMode::Desconhecido
            | SituationMode::Bloqueado
            | SituationMode::Cancelado => {}
            SituationMode::CreditoPendente => {
                let desde = now - Span::days(1);
                body["creditos_pendentes"] = json!([{
                    "valor": money_json(super::ordens::PENDING_CREDIT), "desde": self.iso(desde),
                    "validar_ate": self.iso(desde + Span::days(3)),
                    "onde": "em qualquer validador a bordo dos ônibus ou nas estações",
                }]);
            }
            SituationMode::LimiteDiario => {
                let tomorrow = tz.local(now).date_naive() + Span::days(1);
                let midnight = tz.instant(tomorrow.and_time(NaiveTime::MIN));
                body["limite"] = json!({"tipo": "diario", "libera_em": self.iso(midnight)});
            }
        }
        body
    }
}

pub(super) fn desk_entry(path: &str, headers: &HeaderMap, cartao: &str, status: u16) -> LedgerEntry {
    LedgerEntry {
        seq: 0,
        sistema: "saldo".into(),
        method: "GET".into(),
        path: path.into(),
        idempotency_key: idempotency_key(headers),
        cartao: Some(cartao.to_owned()),
        status,
        efeito: None,
        body: None,
    }
}

/// The balance system's failures apply to its desk too: a card whose balance read fails fails here.
pub(super) async fn failure(sim: &Simulator, card: &CardBehavior) -> Option<(u16, Value)> {
    match card.saldo_api {
        BalanceMode::Erro500 => Some((
            500,
            json!({"erro": "falha_interna", "mensagem": "sistema de cartões indisponível"}),
        )),
        BalanceMode::SemResposta => {
            tokio::time::sleep(sim.inner.config.slow).await;
            Some((504, json!({"erro": "tarde_demais"})))
        }
        _ if card.situacao == SituationMode::Desconhecido => {
            Some((404, json!({"motivo": "cartao_desconhecido"})))
        }
        _ => None,
    }
}

pub(super) async fn situacao(
    State(sim): State<Simulator>,
    headers: HeaderMap,
    Query(q): Query<SaldoQuery>,
) -> Response {
    let path = vt_domain::systems::SITUACAO_ENDPOINT;
    let cartao = q.cartao.unwrap_or_default();
    let (status, body) = if valid_card(&cartao) {
        let card = sim.card(&cartao);
        match failure(&sim, &card).await {
            Some(failed) => failed,
            None => (200, sim.situation(&cartao, card.situacao)),
        }
    } else {
        (400, json!({"erro": "cartao_invalido"}))
    };
    sim.record(desk_entry(path, &headers, &cartao, status));
    reply(status, body)
}

#[derive(Deserialize)]
pub(super) struct ExtratoQuery {
    cartao: Option<String>,
    de: Option<String>,
    ate: Option<String>,
    pagina: Option<u32>,
}

pub(super) async fn extrato(
    State(sim): State<Simulator>,
    headers: HeaderMap,
    Query(q): Query<ExtratoQuery>,
) -> Response {
    let path = vt_domain::systems::EXTRATO_ENDPOINT;
    let cartao = q.cartao.clone().unwrap_or_default();
    let (status, body) = statement_answer(&sim, &cartao, &q).await;
    sim.record(desk_entry(path, &headers, &cartao, status));
    reply(status, body)
}

async fn statement_answer(sim: &Simulator, cartao: &str, q: &ExtratoQuery) -> (u16, Value) {
    let refused = |motivo: &str, campo: &str| (400, json!({"motivo": motivo, "campo": campo}));
    if !valid_card(cartao) {
        return refused("cartao_invalido", "cartao");
    }
    let date = |v: &Option<String>| {
        v.as_deref()
            .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
    };
    let (Some(de), Some(ate)) = (date(&q.de), date(&q.ate)) else {
        let campo = if date(&q.de).is_none() { "de" } else { "ate" };
        return refused("periodo_invalido", campo);
    };
    if de > ate || (ate - de).num_days() >= EXTRATO_MAX_DIAS {
        return refused("periodo_invalido", "de");
    }
    let pagina = q.pagina.unwrap_or(1).max(1);
    let card = sim.card(cartao);
    if let Some(failed) = failure(sim, &card).await {
        return failed;
    }
    let lines = sim.statement(cartao, de, ate);
    let from = (pagina as usize - 1) * PAGE;
    let tz = vt_domain::vt::timezone::Timezone::sao_paulo();
    let itens: Vec<Value> = lines
        .iter()
        .skip(from)
        .take(PAGE)
        .map(|m| {
            json!({
                "data": tz.local(m.at).to_rfc3339_opts(chrono::SecondsFormat::Secs, false),
                "tipo": if m.kind == Kind::Credito { "credito" } else { "uso" },
                "valor": money_json(m.valor),
                "local": m.local,
                "linha": m.linha,
            })
        })
        .collect();
    let next = (lines.len() > from + PAGE).then_some(pagina + 1);
    (
        200,
        json!({
            "cartao": cartao, "de": de.format("%Y-%m-%d").to_string(), "ate": ate.format("%Y-%m-%d").to_string(),
            "itens": itens, "proxima_pagina": next,
        }),
    )
}
