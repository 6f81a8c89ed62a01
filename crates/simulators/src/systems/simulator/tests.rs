use rust_decimal::dec;

use super::*;

async fn start() -> (RunningSimulator, reqwest::Client) {
    let running = Simulator::new(SimulatorConfig::default())
        .spawn(0)
        .await
        .expect("spawn");
    (running, reqwest::Client::new())
}

fn body(card: &str, valor: f64) -> Value {
    json!({"cartao": card, "valor": valor, "moeda": "BRL", "meio_pagamento": {"tipo": "pix"}})
}

async fn post(c: &reqwest::Client, url: &str, key: Option<&str>, body: &Value) -> (u16, Value) {
    let mut r = c.post(format!("{url}/api/v1/recargas")).json(body);
    if let Some(k) = key {
        r = r.header("x-idempotency-key", k);
    }
    let resp = r.send().await.expect("send");
    (resp.status().as_u16(), resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn same_key_same_body_replays_without_charging_again() {
    let (sim, c) = start().await;
    let (s1, r1) = post(&c, &sim.url, Some("k1"), &body("1234567890", 30.0)).await;
    let (s2, r2) = post(&c, &sim.url, Some("k1"), &body("1234567890", 30.0)).await;
    assert_eq!((s1, s2), (201, 201));
    assert_eq!(r1, r2, "the stored response");
    assert_eq!(r1["saldo_atualizado"], json!(80.0));
    assert_eq!(sim.simulator.charges("1234567890"), 1);
}

type Clock = Arc<Mutex<chrono::DateTime<chrono::Utc>>>;

/// A simulator whose boletos count as paid 30 s after they were issued, on a clock the test moves
/// (Sunday 2026-11-22, noon UTC, at first).
async fn boleto_simulator() -> (RunningSimulator, reqwest::Client, Clock) {
    let start = chrono::DateTime::parse_from_rfc3339("2026-11-22T12:00:00Z").expect("t");
    let clock = Arc::new(Mutex::new(start.to_utc()));
    let now = clock.clone();
    let sim = Simulator::new(SimulatorConfig {
        now: Some(Arc::new(move || *lock(&now))),
        boleto_pagar_apos: Some(Duration::from_secs(30)),
        ..SimulatorConfig::default()
    })
    .spawn(0)
    .await
    .expect("spawn");
    (sim, reqwest::Client::new(), clock)
}

fn boleto(card: &str) -> Value {
    json!({"cartao": card, "valor": 20.0, "moeda": "BRL", "meio_pagamento": {"tipo": "boleto"}})
}

/// A boleto recharge waits for its boleto: paid by itself after `boleto_pagar_apos` (approved once,
/// then replayed), or paid at once through its route.
#[tokio::test]
async fn a_boleto_is_credited_once_when_paid() {
    let (sim, c, clock) = boleto_simulator().await;
    let (status, first) = post(&c, &sim.url, Some("kb"), &boleto("1234567890")).await;
    assert_eq!((status, first["status"].as_str()), (202, Some("pendente")));
    let linha = first["boleto"]["linha_digitavel"].as_str().expect("line");
    assert_eq!(first["boleto"]["vencimento"], "2026-11-25");
    let due = chrono::NaiveDate::from_ymd_opt(2026, 11, 25).expect("d");
    vt_domain::boleto::LinhaDigitavel::checked(linha, dec!(20), due).expect("a line that checks");
    assert_eq!(
        post(&c, &sim.url, Some("kb"), &boleto("1234567890")).await,
        (202, first.clone())
    );
    assert_eq!(sim.simulator.charges("1234567890"), 0);

    let (_, by_route) = post(&c, &sim.url, Some("kr"), &boleto("2345678901")).await;
    let linha = by_route["boleto"]["linha_digitavel"].as_str().expect("line");
    let pay = |linha: &str| {
        c.post(format!("{}/_simulador/boletos/{linha}/pagar", sim.url))
            .send()
    };
    assert_eq!(pay(linha).await.expect("pay").status(), 200);
    assert_eq!(pay("123").await.expect("pay").status(), 404, "no such boleto");
    assert_eq!(post(&c, &sim.url, Some("kr"), &boleto("2345678901")).await.0, 201);

    *lock(&clock) += chrono::Duration::seconds(31);
    let (status, approved) = post(&c, &sim.url, Some("kb"), &boleto("1234567890")).await;
    assert_eq!((status, approved["saldo_atualizado"].as_f64()), (201, Some(70.0)));
    assert_eq!(
        post(&c, &sim.url, Some("kb"), &boleto("1234567890")).await,
        (201, approved)
    );
    assert_eq!(sim.simulator.charges("1234567890"), 1);
}

/// A boleto waits days, past the idempotency window: its recharge's answer and its own records
/// outlive the window that an ordinary answer does not.
#[tokio::test]
async fn a_waiting_boleto_outlives_the_idempotency_window() {
    let sim = Simulator::new(SimulatorConfig {
        idempotency_ttl: Duration::ZERO,
        ..SimulatorConfig::default()
    })
    .spawn(0)
    .await
    .expect("spawn");
    let c = reqwest::Client::new();
    let (_, waiting) = post(&c, &sim.url, Some("kb"), &boleto("1234567890")).await;
    assert_eq!(
        post(&c, &sim.url, Some("kb"), &boleto("1234567890")).await,
        (202, waiting.clone())
    );
    assert!(
        sim.simulator
            .pay_boleto(waiting["boleto"]["linha_digitavel"].as_str().expect("line"))
    );
    assert_eq!(post(&c, &sim.url, Some("kb"), &boleto("1234567890")).await.0, 201);
    assert_eq!(sim.simulator.charges("1234567890"), 1);
    // An ordinary answer is gone at once with this window: the same key is a new request.
    post(&c, &sim.url, Some("kc"), &body("2345678901", 10.0)).await;
    post(&c, &sim.url, Some("kc"), &body("2345678901", 10.0)).await;
    assert_eq!(sim.simulator.charges("2345678901"), 2);
}

/// A holder who never pays: the boleto waits until its due date, then is refused (402) for good —
/// paid after that, it credits nothing.
#[tokio::test]
async fn a_boleto_fallen_due_is_refused_for_good() {
    let (sim, c, clock) = boleto_simulator().await;
    let (_, never) = post(&c, &sim.url, Some("kn"), &boleto("1515151515")).await;
    *lock(&clock) += chrono::Duration::days(1);
    assert_eq!(
        post(&c, &sim.url, Some("kn"), &boleto("1515151515")).await.0,
        202,
        "not due yet"
    );

    *lock(&clock) = chrono::DateTime::parse_from_rfc3339("2026-11-26T03:30:00Z")
        .expect("t")
        .to_utc();
    let fallen_due = (402, json!({"motivo": "boleto_vencido"}));
    assert_eq!(
        post(&c, &sim.url, Some("kn"), &boleto("1515151515")).await,
        fallen_due
    );
    sim.simulator
        .pay_boleto(never["boleto"]["linha_digitavel"].as_str().expect("line"));
    assert_eq!(
        post(&c, &sim.url, Some("kn"), &boleto("1515151515")).await,
        fallen_due,
        "paid after it fell due: nothing credited"
    );
    assert_eq!(sim.simulator.charges("1515151515"), 0);
}

#[tokio::test]
async fn same_key_other_body_is_refused() {
    let (sim, c) = start().await;
    post(&c, &sim.url, Some("k1"), &body("1234567890", 30.0)).await;
    let (status, r) = post(&c, &sim.url, Some("k1"), &body("1234567890", 31.0)).await;
    assert_eq!(status, 409);
    assert_eq!(r["motivo"], "idempotency_key_reutilizada");
    assert_eq!(sim.simulator.charges("1234567890"), 1);
}

#[tokio::test]
async fn a_recharge_without_key_or_with_a_bad_body_is_refused() {
    let (sim, c) = start().await;
    assert_eq!(post(&c, &sim.url, None, &body("1234567890", 30.0)).await.0, 400);
    assert_eq!(
        post(&c, &sim.url, Some("k"), &body("1234567890", -1.0)).await.0,
        400
    );
    assert_eq!(
        post(&c, &sim.url, Some("k"), &json!({"cartao": "1234567890"}))
            .await
            .0,
        400
    );
    assert_eq!(sim.simulator.charges("1234567890"), 0);
    assert_eq!(sim.simulator.ledger().len(), 3, "refusals are in the ledger too");
}

#[tokio::test]
async fn balances_follow_recharges_and_magic_cards() {
    let (sim, c) = start().await;
    let get = |card: &str| {
        c.get(format!("{}/api/v1/saldos/consultar?cartao={card}", sim.url))
            .send()
    };
    let low: Value = get("1111111111").await.expect("get").json().await.expect("json");
    assert_eq!(low["saldo"], json!(12.5));
    assert_eq!(get("3333333333").await.expect("get").status().as_u16(), 500);
    assert_eq!(get("12ab").await.expect("get").status().as_u16(), 400);
    post(&c, &sim.url, Some("k"), &body("1111111111", 10.0)).await;
    let after: Value = get("1111111111").await.expect("get").json().await.expect("json");
    assert_eq!(after["saldo"], json!(22.5));
}

#[tokio::test]
async fn notifications_are_deduplicated_and_rate_limited() {
    let sim = Simulator::new(SimulatorConfig {
        notifications_per_second: 2,
        ..SimulatorConfig::default()
    });
    let running = sim.clone().spawn(0).await.expect("spawn");
    let c = reqwest::Client::new();
    let n = json!({"canal": "app", "assunto": "a", "mensagem": "m", "destinatario": {"tipo": "usuario", "id": ""}});
    let send = |key: &str| {
        c.post(format!("{}/api/v1/notificacoes", running.url))
            .header("x-idempotency-key", key)
            .json(&n)
            .send()
    };
    assert_eq!(send("n1").await.expect("send").status().as_u16(), 202);
    assert_eq!(send("n1").await.expect("send").status().as_u16(), 202);
    let limited = send("n2").await.expect("send");
    assert_eq!(limited.status().as_u16(), 429);
    assert_eq!(limited.headers()["retry-after"], "1");
    assert_eq!(sim.deliveries(), 1, "the second n1 was a replay");
}

#[test]
fn fixtures_extend_or_replace_the_table() {
    let dir = std::env::temp_dir().join(format!("vt-fixture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("cards.json");
    std::fs::write(
        &path,
        r#"{"cards": {"1234512345": {"saldo": 3.5, "recarga": "negada"}}}"#,
    )
    .expect("write");
    let sim = Simulator::with_fixture(SimulatorConfig::default(), &path).expect("fixture");
    assert_eq!(sim.card("1234512345").recarga, RechargeMode::Negada);
    assert_eq!(sim.card("1234512345").saldo, dec!(3.5));
    assert_eq!(
        sim.card("7777777777").recarga,
        RechargeMode::Negada,
        "magic cards kept"
    );
    std::fs::write(&path, r#"{"replace": true, "cards": {}}"#).expect("write");
    let sim = Simulator::with_fixture(SimulatorConfig::default(), &path).expect("fixture");
    assert_eq!(
        sim.card("7777777777").recarga,
        RechargeMode::Aprovada,
        "table replaced"
    );
    std::fs::write(&path, r#"{"cards": {"1": {"recarga": "talvez"}}}"#).expect("write");
    let err = Simulator::with_fixture(SimulatorConfig::default(), &path)
        .err()
        .expect("invalid");
    assert!(err.to_string().contains("cards.json"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
