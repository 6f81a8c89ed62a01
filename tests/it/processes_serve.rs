//! Several `serve` processes on one PostgreSQL database, and `serve` killed with SIGKILL: an unclaimed
//! case's notice sent once, a late recharge followed up once (with its own key after a restart), a shared
//! batch finished when one instance dies, a Pix payment noticed many times credited once.

use crate::cli::vt_agent_in;
use crate::processes::*;
use crate::processes_payments::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use vt_simulators::systems::RunningSimulator;

/// A case nobody claimed, on one PostgreSQL: the `serve` that opened it is killed before the deadline,
/// and two new `serve` processes start together after it — the card holder is told once.
#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_serve_processes_on_postgresql_send_an_unclaimed_cases_notice_once() {
    let pg = vt_store::testkit::PgFixture::start().await;
    let sim = simulator().await;
    let graph = crate::support::FakeServer::start(vec![crate::whatsapp::sent(); 20])
        .await
        .answering_read_receipts();
    let serve = || {
        let data = tempfile::tempdir().expect("tmp");
        let mut cmd = vt_agent_in(&data);
        cmd.env("VT_DATABASE_URL", pg.process_url());
        let child = serve_whatsapp_with(cmd, &sim.url, &graph.url);
        (data, child)
    };
    let (_a_data, (mut a, url)) = serve();
    let body = crate::whatsapp::text_notification("quero falar com um atendente", "wamid.H1");
    let r = reqwest::Client::new()
        .post(format!("{url}/channels/whatsapp/webhook"))
        .header("content-type", "application/json")
        .header("x-hub-signature-256", crate::whatsapp::sign(&body))
        .body(body)
        .send()
        .await
        .expect("sent");
    assert_eq!(r.status(), 200);
    let said = wait_for_texts(&graph, 2).await;
    assert!(
        said[1].contains("atendente"),
        "after the privacy notice: {said:?}"
    );
    // Once its send is acknowledged (killed between the send and the ack, the item would keep its
    // lease for a minute and hold the conversation's next item back), killed before the deadline;
    // the deadline then passes while no instance runs.
    use vt_store::concerns::OutboxStore as _;
    for _ in 0..300 {
        let unfinished = pg
            .store
            .outbox_count(vt_store::records::OutboxStatus::InFlight)
            .await
            .expect("count")
            + pg.store
                .outbox_count(vt_store::records::OutboxStatus::Pending)
                .await
                .expect("count");
        if unfinished == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a.kill().expect("kill -9");
    a.wait().expect("reaped");
    let pool = sqlx::PgPool::connect(&pg.process_url()).await.expect("pool");
    let moved = sqlx::query(
        "UPDATE cases SET notice_due_at = now() - interval '1 minute' WHERE state = 'aguardando'",
    )
    .execute(&pool)
    .await
    .expect("deadline passed")
    .rows_affected();
    assert_eq!(moved, 1);

    let ((_b_data, (mut b, _)), (_c_data, (mut c, _))) = (serve(), serve());
    let notices = |texts: &[String]| {
        texts
            .iter()
            .filter(|t| t.contains("Ainda não há um atendente"))
            .count()
    };
    let told = wait_for_texts(&graph, 3).await;
    assert_eq!(notices(&told), 1, "{told:?}");
    // Both instances have run their first pass by now: still one.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(notices(&sent_texts(&graph)), 1, "{:?}", sent_texts(&graph));
    let noticed: bool = sqlx::query_scalar("SELECT noticed FROM cases")
        .fetch_one(&pool)
        .await
        .expect("case");
    assert!(noticed);
    for child in [&mut b, &mut c] {
        let _ = child.kill();
        let _ = child.wait();
    }
    pool.close().await;
    pg.cleanup().await;
}

/// `serve` on `cmd`'s store, the external systems at `systems`, checking recharge follow-ups every
/// second (the first one second after a send).
pub(crate) fn serve_following_up(mut cmd: Command, systems: &str) -> (std::process::Child, String) {
    cmd.env("VT_SYSTEMS_URL", systems)
        // The recharge system charges a card itself: a card recharge in the chat goes to it.
        .env("VT_CARTAO_PROVEDOR", "sistema_de_recarga")
        .env("VT_RECARGAS_PRIMEIRA_VERIFICACAO_SEGUNDOS", "1")
        .args(["serve", "--addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let url = crate::support::listening_on(&mut stderr);
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, url)
}

/// The recharge requests the simulator received for `card`, by key.
pub(crate) fn recharge_keys(sim: &RunningSimulator, card: &str) -> Vec<String> {
    sim.simulator
        .ledger()
        .into_iter()
        .filter(|e| e.sistema == "recarga" && e.cartao.as_deref() == Some(card))
        .filter_map(|e| e.idempotency_key)
        .collect()
}

pub(crate) async fn post_flow(url: &str, body: String) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{url}/v1/flows/vt"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("flow")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recharge_left_enviando_by_kill_9_is_followed_up_after_restart_with_the_same_key_and_charged_once()
{
    // Card 9999999999: charged at once, answered after 30 s; `serve` is killed while it waits.
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    let (mut first, url) = serve_following_up(vt_agent_in(&data), &sim.url);
    let body = r#"{"cartao": "9999999999", "recarga": {"valor": 50, "meio_pagamento": {"tipo": "pix", "token": "tok_kill_77"}}}"#;
    // Its answer never comes: the connection dies with the process.
    let request = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("{url}/v1/flows/vt"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
    });
    let started = Instant::now();
    while sim.simulator.charges("9999999999") == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the charge never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    kill(first.id());
    first.wait().expect("reaped");
    let _ = request.await;
    let flows = |args: &[&str]| {
        let mut c = vt_agent(&data, &sim);
        c.arg("flows").args(args);
        c
    };
    let listed = text(&race(vec![flows(&["--pendentes"])]).await[0].stdout);
    assert!(
        listed.contains("enviando") && listed.contains("****9999") && !listed.contains("9999999999"),
        "the attempt waits for its follow-up: {listed}"
    );

    let (mut second, _) = serve_following_up(vt_agent_in(&data), &sim.url);
    let started = Instant::now();
    while recharge_keys(&sim, "9999999999").len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no follow-up after the restart"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut settled = String::new();
    for _ in 0..100 {
        settled = text(&race(vec![flows(&[])]).await[0].stdout);
        if settled.contains("aprovada") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        settled.contains("aprovada") && settled.contains("concluido"),
        "{settled}"
    );
    let keys = recharge_keys(&sim, "9999999999");
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_eq!(keys[0], keys[1], "the follow-up used the attempt's key");
    assert_eq!(sim.simulator.charges("9999999999"), 1, "charged once");
    let pending = text(&race(vec![flows(&["--pendentes"])]).await[0].stdout);
    assert!(
        pending.contains("Nenhuma recarga com resultado desconhecido"),
        "{pending}"
    );
    let _ = second.kill();
    let _ = second.wait();
    // The request kept for the follow-up (with the token) was sealed, and dropped once settled.
    for entry in std::fs::read_dir(data.path()).expect("data dir") {
        let bytes = std::fs::read(entry.expect("entry").path()).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("tok_kill_77"),
            "the payment token is never in clear on disk"
        );
    }
}

#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_serve_processes_on_postgresql_follow_each_late_recharge_up_once() {
    let pg = vt_store::testkit::PgFixture::start().await;
    let sim = simulator().await;
    let serve = || {
        let data = tempfile::tempdir().expect("tmp");
        let mut cmd = vt_agent_in(&data);
        cmd.env("VT_DATABASE_URL", pg.process_url());
        let child = serve_following_up(cmd, &sim.url);
        (data, child)
    };
    let ((_a_data, (mut a, url)), (_b_data, (mut b, _))) = (serve(), serve());
    // Six recharges answered 202 (card 6161616161: approved when the same request comes again).
    const N: usize = 6;
    for valor in 10..10 + N {
        let body = format!(
            r#"{{"cartao": "6161616161", "recarga": {{"valor": {valor}, "meio_pagamento": {{"tipo": "pix"}}}}}}"#
        );
        let r = post_flow(&url, body).await;
        assert_eq!(r.status(), 200);
        let out: serde_json::Value = r.json().await.expect("json");
        assert_eq!(out["status"], "pendente", "{out}");
    }
    let started = Instant::now();
    while sim.simulator.charges("6161616161") < N {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "follow-ups did not run"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Both instances have had several passes by now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let keys = recharge_keys(&sim, "6161616161");
    let mut per_key = std::collections::BTreeMap::<String, usize>::new();
    for k in &keys {
        *per_key.entry(k.clone()).or_default() += 1;
    }
    assert_eq!(per_key.len(), N, "{per_key:?}");
    assert!(
        per_key.values().all(|n| *n == 2),
        "each sent once and followed up once: {per_key:?}"
    );
    assert_eq!(sim.simulator.charges("6161616161"), N, "one charge per recharge");
    let pool = sqlx::PgPool::connect(&pg.process_url()).await.expect("pool");
    let settled: Vec<(String, Option<String>, i32)> =
        sqlx::query_as("SELECT idempotency_key, outcome, checks FROM recharge_followups")
            .fetch_all(&pool)
            .await
            .expect("followups");
    assert_eq!(settled.len(), N);
    assert!(
        settled
            .iter()
            .all(|(_, outcome, checks)| outcome.as_deref() == Some("aprovada") && *checks == 1),
        "{settled:?}"
    );
    for child in [&mut a, &mut b] {
        let _ = child.kill();
        let _ = child.wait();
    }
    pool.close().await;
    pg.cleanup().await;
}

#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_serve_processes_on_postgresql_share_a_batch_and_finish_it_when_one_is_killed_mid_job() {
    let pg = vt_store::testkit::PgFixture::start().await;
    let sim = simulator().await;
    let serve = || {
        let data = tempfile::tempdir().expect("tmp");
        let mut cmd = vt_agent_in(&data);
        cmd.env("VT_DATABASE_URL", pg.process_url());
        let child = serve_following_up(cmd, &sim.url);
        (data, child)
    };
    let ((_a_data, (mut a, a_url)), (_b_data, (mut b, b_url)), (_c_data, (mut c, _))) =
        (serve(), serve(), serve());
    // Five chunks of 32 lines. The instance it is sent to runs its first chunk at 10 lines a second;
    // the other two join the job and take the other chunks at full speed.
    const N: usize = 160;
    let cards: Vec<String> = (0..N).map(|i| format!("30000{i:05}")).collect();
    let body = cards
        .iter()
        .map(|card| {
            format!(r#"{{"cartao": "{card}", "recarga": {{"valor": 10, "meio_pagamento": {{"tipo": "pix", "token": "tok_lote_3"}}}}}}"#)
        })
        .collect::<Vec<_>>()
        .join("\n");
    let client = reqwest::Client::new();
    let accepted: serde_json::Value = client
        .post(format!("{a_url}/v1/batches?rate=10"))
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .await
        .expect("submit")
        .json()
        .await
        .expect("accepted");
    let id = accepted["id"].as_str().expect("id").to_owned();
    // Killed in the middle of its chunk: some of its lines charged, none recorded.
    let first_chunk = &cards[..32];
    let charged = |cards: &[String]| cards.iter().filter(|c| sim.simulator.charges(c) > 0).count();
    let started = Instant::now();
    while charged(first_chunk) < 5 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the first chunk never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    kill(a.id());
    a.wait().expect("reaped");
    let at_kill = charged(first_chunk);
    assert!(at_kill < 32, "killed mid-chunk ({at_kill} of 32 charged)");

    // The other two finish the job, the dead instance's chunk once its lease ran out.
    let mut status = serde_json::Value::Null;
    let started = Instant::now();
    while status["status"] != "concluido" {
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the job never finished: {status}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
        status = client
            .get(format!("{b_url}/v1/batches/{id}"))
            .send()
            .await
            .expect("status")
            .json()
            .await
            .expect("json");
    }
    assert_eq!(status["done"], N, "{status}");
    assert_eq!(status["counts"]["concluido"], N, "{status}");
    let charges: Vec<usize> = cards.iter().map(|c| sim.simulator.charges(c)).collect();
    assert!(
        charges.iter().all(|n| *n == 1),
        "one charge per line: {charges:?}"
    );
    // The lines the killed instance had charged were sent again with their keys and answered from the
    // recharge system's idempotency store.
    let replays = sim
        .simulator
        .ledger()
        .into_iter()
        .filter(|e| e.sistema == "recarga" && e.efeito == Some(vt_simulators::systems::Efeito::Replay))
        .count();
    assert!(
        replays >= at_kill,
        "{replays} replays for {at_kill} lines charged before the kill"
    );
    let pool = sqlx::PgPool::connect(&pg.process_url()).await.expect("pool");
    let lines: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM batch_lines WHERE job_id = $1")
        .bind(&id)
        .fetch_one(&pool)
        .await
        .expect("lines");
    assert_eq!(lines, N as i64, "every line recorded once");
    for child in [&mut b, &mut c] {
        let _ = child.kill();
        let _ = child.wait();
    }
    pool.close().await;
    pg.cleanup().await;
}

/// Two `serve` processes on one PostgreSQL database, with `[pix]` pointed at the provider: a paid
/// code's notice reaches both instances several times at once (a provider retrying, a load balancer
/// spreading it) — the payment is credited once, and the card holder gets one receipt.
#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_serve_processes_on_postgresql_credit_a_pix_payment_noticed_many_times_once() {
    let pg = vt_store::testkit::PgFixture::start().await;
    let sim = simulator().await;
    let (_config_dir, config) = pix_config(&sim, "");
    let serve = || {
        let data = tempfile::tempdir().expect("tmp");
        let mut cmd = vt_agent_in(&data);
        cmd.env("VT_DATABASE_URL", pg.process_url())
            .env("VT_CONFIG", &config);
        let child = serve_following_up(cmd, &sim.url);
        (data, child)
    };
    let ((_a_data, (mut a, a_url)), (_b_data, (mut b, b_url))) = (serve(), serve());
    let http = reqwest::Client::new();
    let say = |text: &'static str| {
        http.post(format!("{a_url}/v1/conversations/c-pg-pix/messages"))
            .json(&serde_json::json!({"text": text, "user": {"id": "u-pg"}}))
            .send()
    };
    let ask = say("recarregar 20 no cartão 2345678901 via pix")
        .await
        .expect("ask");
    assert_eq!(ask.status(), 200);
    let yes: serde_json::Value = say("sim").await.expect("yes").json().await.expect("json");
    let txid = shown_txid(&sim, &yes);
    assert_eq!(
        sim.simulator.charges("2345678901"),
        0,
        "not paid: nothing recharged"
    );
    let notice = pay(&sim, &txid);
    let posts = [&a_url, &b_url, &a_url, &b_url, &a_url, &b_url].map(|url| {
        http.post(format!("{url}/channels/pix/webhook/pix"))
            .json(&notice)
            .send()
    });
    for answered in futures::future::join_all(posts).await {
        assert_eq!(answered.expect("notice").status(), 200);
    }
    let started = Instant::now();
    let receipts = || receipts_in(&b_url, "c-pg-pix");
    while receipts().await == 0 {
        assert!(started.elapsed() < Duration::from_secs(30), "never credited");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Every notice has been read back by now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        sim.simulator.charges("2345678901"),
        1,
        "one payment, one recharge"
    );
    assert_eq!(receipts().await, 1, "one receipt");
    let keys = recharge_keys(&sim, "2345678901");
    assert_eq!(keys.len(), 1, "sent once: {keys:?}");
    for child in [&mut a, &mut b] {
        let _ = child.kill();
        let _ = child.wait();
    }
    pg.cleanup().await;
}
