//! The card desk of the balance system (step 35): a card's situation and its statement, as the
//! contract publishes them, answered by the simulator for every magic card and read by the client.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use vt_connectors::systems::{SystemsConfig, VtSystems};
use vt_domain::systems::contract::{
    ErroSistema, ExtratoResposta, Recusa, Situacao, SituacaoResposta, TipoMovimento,
};
use vt_domain::systems::{ExtratoPedido, ReadPolicy, Systems as _};
use vt_simulators::systems::{Simulator, SimulatorConfig};

/// The harnesses' fixed clock: Sunday, 2026-11-22, 09:00 in São Paulo.
fn noon() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-22T12:00:00Z")
        .expect("t")
        .into()
}

async fn desk() -> (vt_simulators::systems::RunningSimulator, VtSystems) {
    let sim = Simulator::new(SimulatorConfig {
        now: Some(Arc::new(noon)),
        ..crate::support::quick_simulator()
    })
    .spawn(0)
    .await
    .expect("simulator");
    let client = VtSystems::new(SystemsConfig {
        timeout_cap_ms: Some(500),
        ..SystemsConfig::single(&sim.url)
    })
    .expect("client");
    (sim, client)
}

const ONCE: ReadPolicy = ReadPolicy {
    timeout_ms: 500,
    attempts: 1,
    backoff_ms: 0,
};

fn parsed<T: DeserializeOwned>(what: &str, body: &Option<Value>) -> T {
    let body = body.clone().unwrap_or(Value::Null);
    serde_json::from_value::<T>(body.clone())
        .unwrap_or_else(|e| panic!("{what}: {body} breaks the contract: {e}"))
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).expect("ISO 8601").into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_magic_card_has_its_situation_in_the_contracts_shape() {
    let (_sim, client) = desk().await;
    let none = BTreeMap::new();
    let situation = |card: &'static str| {
        let client = &client;
        let none = &none;
        async move {
            let r = client.consultar_situacao(card, none, ONCE).await;
            assert_eq!(r.status, Some(200), "{card}: {r:?}");
            let s: SituacaoResposta = parsed(card, &r.body);
            assert_eq!(s.cartao, card);
            s
        }
    };

    let active = situation("1234567890").await;
    assert_eq!(active.situacao, Situacao::Ativo);
    assert!(active.bloqueio.is_none() && active.creditos_pendentes.is_empty() && active.limite.is_none());

    let blocked = situation("1818181818").await;
    assert_eq!(blocked.situacao, Situacao::Bloqueado);
    let bloqueio = blocked.bloqueio.expect("why and since when");
    assert_eq!(bloqueio.motivo, "perda");
    assert_eq!(noon() - at(&bloqueio.desde), chrono::Duration::days(3));

    let pending = situation("1919191919").await;
    assert_eq!(pending.situacao, Situacao::Ativo);
    let [credit] = pending.creditos_pendentes.as_slice() else {
        panic!("one credit waiting: {pending:?}");
    };
    assert!((credit.valor - 50.0).abs() < f64::EPSILON);
    assert_eq!(
        at(&credit.validar_ate) - at(&credit.desde),
        chrono::Duration::days(3)
    );
    assert!(at(&credit.validar_ate) > noon(), "still in time to validate");
    assert!(credit.onde.as_deref().is_some_and(|o| o.contains("validador")));

    let limited = situation("2020202020").await;
    let limite = limited.limite.expect("the day's limit");
    assert_eq!(limite.tipo, "diario");
    assert_eq!(
        limite.libera_em, "2026-11-23T00:00:00-03:00",
        "at midnight, São Paulo"
    );

    assert_eq!(situation("2121212121").await.situacao, Situacao::Cancelado);

    let unknown = client.consultar_situacao("2323232323", &none, ONCE).await;
    assert_eq!(unknown.status, Some(404));
    let why: Recusa = parsed("unknown card", &unknown.body);
    assert_eq!(why.motivo, "cartao_desconhecido");
    let failing = client.consultar_situacao("3333333333", &none, ONCE).await;
    assert_eq!(failing.status, Some(500));
    let _: ErroSistema = parsed("500", &failing.body);
    let invalid = client.consultar_situacao("12ab", &none, ONCE).await;
    assert_eq!(invalid.status, Some(400));
    let _: ErroSistema = parsed("400", &invalid.body);
}

fn asked(cartao: &str, de: &str, ate: &str, pagina: u32) -> ExtratoPedido {
    let day = |d: &str| NaiveDate::parse_from_str(d, "%Y-%m-%d").expect("date");
    ExtratoPedido {
        cartao: cartao.into(),
        de: day(de),
        ate: day(ate),
        pagina,
    }
}

/// Thirty days of a commuter's card, page after page: newest first, each line inside the period, no
/// page over twenty lines, the last page saying there is no next one — and what this run did to the
/// card (a recharge, a ride) on today's lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_of_thirty_days_comes_page_by_page_newest_first() {
    let (sim, client) = desk().await;
    let none = BTreeMap::new();
    let key = BTreeMap::from([("x-idempotency-key".to_owned(), "k-extrato".to_owned())]);
    let body =
        json!({"cartao": "2424242424", "valor": 30.0, "moeda": "BRL", "meio_pagamento": {"tipo": "pix"}});
    assert_eq!(client.recarregar(&body, &key, 500).await.status, Some(201));
    sim.simulator.ride("2424242424", rust_decimal::dec!(4.40));

    let mut lines = Vec::new();
    let mut page = 1;
    loop {
        let r = client
            .extrato(
                &asked("2424242424", "2026-10-24", "2026-11-22", page),
                &none,
                ONCE,
            )
            .await;
        assert_eq!(r.status, Some(200), "{r:?}");
        let e: ExtratoResposta = parsed("statement", &r.body);
        assert_eq!((e.de.as_str(), e.ate.as_str()), ("2026-10-24", "2026-11-22"));
        assert!(e.itens.len() <= 20, "a page holds twenty lines at most");
        lines.extend(e.itens);
        match e.proxima_pagina {
            Some(next) => {
                assert_eq!(next, page + 1);
                page = next;
            }
            None => break,
        }
    }
    assert!(page >= 2, "thirty days of rides take more than a page");
    let times: Vec<DateTime<Utc>> = lines.iter().map(|l| at(&l.data)).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first");
    let first = at("2026-10-24T00:00:00-03:00");
    assert!(
        times.iter().all(|t| *t >= first && *t <= noon()),
        "inside the period"
    );
    // Today (a Sunday): the recharge and the ride of this run, nothing of the history.
    let today: Vec<_> = lines
        .iter()
        .filter(|l| l.data.starts_with("2026-11-22"))
        .collect();
    assert_eq!(today.len(), 2, "{today:?}");
    assert_eq!(today[0].tipo, TipoMovimento::Uso);
    assert_eq!(today[1].tipo, TipoMovimento::Credito);
    assert!((today[1].valor - 30.0).abs() < f64::EPSILON);
    // Weekdays' rides carry the line; no weekend ride in the history.
    for l in lines.iter().filter(|l| l.tipo == TipoMovimento::Uso) {
        assert!(l.linha.is_some(), "{l:?}");
        let day = at(&l.data).with_timezone(&chrono::FixedOffset::west_opt(3 * 3600).expect("-03:00"));
        let weekend = matches!(
            chrono::Datelike::weekday(&day),
            chrono::Weekday::Sat | chrono::Weekday::Sun
        );
        assert!(!weekend || l.data.starts_with("2026-11-22"), "{l:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_for_a_period_the_system_does_not_give_is_refused_naming_the_field() {
    let (_sim, client) = desk().await;
    let none = BTreeMap::new();
    for (de, ate, campo) in [
        ("2026-11-22", "2026-11-01", "de"),
        ("2026-01-01", "2026-11-22", "de"),
    ] {
        let r = client
            .extrato(&asked("1234567890", de, ate, 1), &none, ONCE)
            .await;
        assert_eq!(r.status, Some(400), "{de}..{ate}");
        let why: Recusa = parsed("refused period", &r.body);
        assert_eq!(
            (why.motivo.as_str(), why.campo.as_deref()),
            ("periodo_invalido", Some(campo))
        );
    }
    let r = client
        .extrato(&asked("2323232323", "2026-11-01", "2026-11-22", 1), &none, ONCE)
        .await;
    assert_eq!(r.status, Some(404));
    let why: Recusa = parsed("unknown card", &r.body);
    assert_eq!(why.motivo, "cartao_desconhecido");
    let r = client
        .extrato(&asked("1234567890", "2026-11-01", "2026-11-22", 1), &none, ONCE)
        .await;
    let empty: ExtratoResposta = parsed("a card with nothing", &r.body);
    assert!(empty.itens.is_empty() && empty.proxima_pagina.is_none());
}
