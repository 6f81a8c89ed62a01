//! Payments across processes and kills: a Pix or card payment noticed many times by two `serve`
//! processes is credited once; a `serve` killed between a payment (Pix, card, an automatic debit) and its
//! credit credits it once after the restart.

use crate::cli::vt_agent_in;
use crate::processes::*;
use crate::processes_serve::*;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use vt_simulators::systems::{RunningSimulator, Simulator, SimulatorConfig};

/// A configuration file with `[pix]` at `sim`'s provider, and `extra` lines of its own.
pub(crate) fn pix_config(sim: &RunningSimulator, extra: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tmp");
    let config = dir.path().join("vt-agent.toml");
    std::fs::write(
        &config,
        format!(
            "[pix]\napi_url = \"{}/pix/v2\"\nchave = \"recargas@operadora.example.com.br\"\n{extra}",
            sim.url
        ),
    )
    .expect("config");
    (dir, config)
}

/// The txid of the charge whose code an HTTP answer shows, as `sim`'s provider has it.
pub(crate) fn shown_txid(sim: &RunningSimulator, answer: &serde_json::Value) -> String {
    let code = answer["replies"]
        .as_array()
        .and_then(|r| r.iter().find_map(|r| r["pix"]["copia_e_cola"].as_str()))
        .unwrap_or_else(|| panic!("the code: {answer}"));
    let charge = sim.simulator.pix().charge_with_code(code);
    charge
        .unwrap_or_else(|| panic!("a code the provider issued: {code}"))
        .txid
}

/// Code `txid` paid (R$ 20,00) at `sim`'s provider, and the notice the provider would post.
pub(crate) fn pay(sim: &RunningSimulator, txid: &str) -> serde_json::Value {
    let paid = sim.simulator.pix().pay(txid, false).expect("paid");
    serde_json::json!({"pix": [{
        "endToEndId": paid.end_to_end_id, "txid": txid, "valor": "20.00", "horario": paid.horario
    }]})
}

/// How many receipts conversation `id` holds, read through `url`.
pub(crate) async fn receipts_in(url: &str, id: &str) -> usize {
    reqwest::get(format!("{url}/v1/conversations/{id}"))
        .await
        .expect("read")
        .text()
        .await
        .expect("text")
        .matches("Pagamento recebido")
        .count()
}

/// `serve` killed with SIGKILL between a Pix payment and its credit: when the recharge request
/// arrives, and after the recharge system charged but before `serve` read its answer. The paid charge
/// stays on record as paid; the next `serve`'s sweep resumes its credit under the recharge's same key
/// (answered as a replay where it got there): one recharge, one receipt, whatever the moment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serve_killed_between_a_pix_payment_and_its_credit_credits_it_once_after_restart() {
    let sim = simulator().await;
    let killer = Killer::start(&sim).await;
    // A credit still not done a second after its payment is taken for one a stop interrupted, and
    // open charges are read back every second.
    let (_config_dir, config) = pix_config(&sim, "retomar_credito_segundos = 1\nvarredura_segundos = 1\n");
    let http = reqwest::Client::new();
    for (round, at) in [KillAt::RequestArrived, KillAt::Charged].into_iter().enumerate() {
        let card = format!("34567890{round:02}");
        let conversation = format!("c-pix-kill-{round}");
        let data = tempfile::tempdir().expect("tmp");
        let serve = || {
            let mut cmd = vt_agent_in(&data);
            cmd.env("VT_CONFIG", &config);
            serve_following_up(cmd, &killer.url)
        };
        let (mut first, url) = serve();
        let say = |text: String| {
            http.post(format!("{url}/v1/conversations/{conversation}/messages"))
                .json(&serde_json::json!({"text": text, "user": {"id": "u-kill"}}))
                .send()
        };
        let ask = say(format!("recarregar 20 no cartão {card} via pix"))
            .await
            .expect("ask");
        assert_eq!(ask.status(), 200);
        let yes: serde_json::Value = say("sim".into()).await.expect("yes").json().await.expect("json");
        let txid = shown_txid(&sim, &yes);
        let notice = pay(&sim, &txid);
        killer.arm(at, first.id());
        let noticed = http
            .post(format!("{url}/channels/pix/webhook/pix"))
            .json(&notice)
            .send()
            .await
            .expect("notice");
        assert_eq!(noticed.status(), 200, "{at:?}: the notice is acknowledged");
        let exited = tokio::task::spawn_blocking(move || first.wait().expect("wait"))
            .await
            .expect("join");
        assert!(!exited.success(), "{at:?}: killed mid-credit");
        *killer.armed.lock().expect("lock") = None;
        let sent_before = recharge_keys(&sim, &card).len();
        let expected = usize::from(at == KillAt::Charged);
        assert_eq!(
            sent_before, expected,
            "{at:?}: what reached the recharge system before the kill"
        );

        let (mut second, url) = serve();
        let started = Instant::now();
        while receipts_in(&url, &conversation).await == 0 {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{at:?}: the credit was never resumed"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // A few more sweeps: nothing more is sent or said.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let keys = recharge_keys(&sim, &card);
        assert_eq!(
            sim.simulator.charges(&card),
            1,
            "{at:?}: one payment, one recharge"
        );
        // Resumed by the sweep, and possibly also by the recharge's own follow-up (step 15: an attempt
        // a kill left `enviando`): every send under the one key, which the recharge system charges once.
        assert!(keys.len() > sent_before, "{at:?}: resumed: {keys:?}");
        assert!(
            keys.iter().all(|k| *k == keys[0]),
            "{at:?}: under the same key: {keys:?}"
        );
        assert_eq!(receipts_in(&url, &conversation).await, 1, "{at:?}: one receipt");
        let _ = second.kill();
        let _ = second.wait();
    }
}

/// A configuration file with `[cartao]` a Stripe checkout at `sim`'s Stripe API, reading open
/// checkouts back every second and resuming a credit a second after its payment.
pub(crate) fn card_config(sim: &RunningSimulator) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tmp");
    let config = dir.path().join("vt-agent.toml");
    std::fs::write(
        &config,
        format!(
            "[cartao]\nprovedor = \"stripe\"\napi_url = \"{}/stripe/v1\"\nretorno_url = \"https://operadora.example.com.br/pago\"\nretomar_credito_segundos = 1\nvarredura_segundos = 1\n[cartao.auth]\nkind = \"bearer\"\n",
            sim.url
        ),
    )
    .expect("config");
    (dir, config)
}

/// `serve` with `[cartao]` at `config`, the systems behind `systems`, its secrets from the environment.
pub(crate) fn serve_taking_cards(
    mut cmd: Command,
    config: &std::path::Path,
    systems: &str,
) -> (std::process::Child, String) {
    cmd.env("VT_SYSTEMS_URL", systems)
        .env("VT_CONFIG", config)
        .env("VT_CARTAO_TOKEN", "sk_test_processos_51H8")
        .env(
            "VT_CARTAO_WEBHOOK_SECRET",
            vt_simulators::systems::CARTAO_WEBHOOK_SECRET,
        )
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

/// The checkout an HTTP answer links to.
pub(crate) fn linked_checkout(answer: &serde_json::Value) -> String {
    answer["replies"]
        .as_array()
        .and_then(|r| r.iter().find_map(|r| r["cartao"]["link"].as_str()))
        .and_then(|link| link.rsplit('/').next())
        .unwrap_or_else(|| panic!("the link: {answer}"))
        .to_owned()
}

/// The provider's signed notice that checkout `id` completed.
pub(crate) fn card_notice(id: &str) -> (String, Vec<u8>) {
    let body = serde_json::to_vec(&serde_json::json!({
        "type": "checkout.session.completed", "data": {"object": {"id": id}},
    }))
    .expect("json");
    let signature = vt_connectors::cartao::stripe::assinar(
        vt_simulators::systems::CARTAO_WEBHOOK_SECRET,
        chrono::Utc::now().timestamp(),
        &body,
    );
    (signature, body)
}

pub(crate) async fn card_receipts_in(url: &str, id: &str) -> usize {
    reqwest::get(format!("{url}/v1/conversations/{id}"))
        .await
        .expect("read")
        .text()
        .await
        .expect("text")
        .matches("recarga feita")
        .count()
}

/// Two `serve` processes on one PostgreSQL database taking cards at the provider's checkout: the paid
/// checkout's signed notice reaches both several times at once — one recharge, one receipt.
#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_serve_processes_on_postgresql_credit_a_card_payment_noticed_many_times_once() {
    let pg = vt_store::testkit::PgFixture::start().await;
    let sim = simulator().await;
    let (_config_dir, config) = card_config(&sim);
    let serve = || {
        let data = tempfile::tempdir().expect("tmp");
        let mut cmd = vt_agent_in(&data);
        cmd.env("VT_DATABASE_URL", pg.process_url());
        let child = serve_taking_cards(cmd, &config, &sim.url);
        (data, child)
    };
    let ((_a_data, (mut a, a_url)), (_b_data, (mut b, b_url))) = (serve(), serve());
    let http = reqwest::Client::new();
    let say = |text: &'static str| {
        http.post(format!("{a_url}/v1/conversations/c-pg-cartao/messages"))
            .json(&serde_json::json!({"text": text, "user": {"id": "u-pg"}}))
            .send()
    };
    say("recarregar 20 no cartão 2345678901 no crédito")
        .await
        .expect("ask");
    let yes: serde_json::Value = say("sim").await.expect("yes").json().await.expect("json");
    let id = linked_checkout(&yes);
    assert_eq!(
        sim.simulator.charges("2345678901"),
        0,
        "not paid: nothing recharged"
    );
    sim.simulator.cartao().pay(&id, false).expect("paid");
    let (signature, body) = card_notice(&id);
    let posts = [&a_url, &b_url, &a_url, &b_url, &a_url, &b_url].map(|url| {
        http.post(format!("{url}{}", vt_agent::testkit::WEBHOOK_PATH))
            .header(vt_connectors::cartao::stripe::ASSINATURA, &signature)
            .body(body.clone())
            .send()
    });
    for answered in futures::future::join_all(posts).await {
        assert_eq!(answered.expect("notice").status(), 200);
    }
    let started = Instant::now();
    while card_receipts_in(&b_url, "c-pg-cartao").await == 0 {
        assert!(started.elapsed() < Duration::from_secs(30), "never credited");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        sim.simulator.charges("2345678901"),
        1,
        "one payment, one recharge"
    );
    assert_eq!(card_receipts_in(&b_url, "c-pg-cartao").await, 1, "one receipt");
    assert_eq!(recharge_keys(&sim, "2345678901").len(), 1, "sent once");
    for child in [&mut a, &mut b] {
        let _ = child.kill();
        let _ = child.wait();
    }
    pg.cleanup().await;
}

/// `serve` killed with SIGKILL between a card payment and its credit (when the recharge request
/// arrives; after the recharge system charged): the next `serve`'s sweep resumes the credit under the
/// recharge's key — one recharge, one receipt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serve_killed_between_a_card_payment_and_its_credit_credits_it_once_after_restart() {
    let sim = simulator().await;
    let killer = Killer::start(&sim).await;
    let (_config_dir, config) = card_config(&sim);
    let http = reqwest::Client::new();
    for (round, at) in [KillAt::RequestArrived, KillAt::Charged].into_iter().enumerate() {
        let card = format!("45678901{round:02}");
        let conversation = format!("c-cartao-kill-{round}");
        let data = tempfile::tempdir().expect("tmp");
        let serve = || serve_taking_cards(vt_agent_in(&data), &config, &killer.url);
        let (mut first, url) = serve();
        let say = |text: String| {
            http.post(format!("{url}/v1/conversations/{conversation}/messages"))
                .json(&serde_json::json!({"text": text, "user": {"id": "u-kill"}}))
                .send()
        };
        say(format!("recarregar 20 no cartão {card} no crédito"))
            .await
            .expect("ask");
        let yes: serde_json::Value = say("sim".into()).await.expect("yes").json().await.expect("json");
        let id = linked_checkout(&yes);
        sim.simulator.cartao().pay(&id, false).expect("paid");
        killer.arm(at, first.id());
        let (signature, body) = card_notice(&id);
        let noticed = http
            .post(format!("{url}{}", vt_agent::testkit::WEBHOOK_PATH))
            .header(vt_connectors::cartao::stripe::ASSINATURA, &signature)
            .body(body)
            .send()
            .await
            .expect("notice");
        assert_eq!(noticed.status(), 200, "{at:?}: the notice is acknowledged");
        let exited = tokio::task::spawn_blocking(move || first.wait().expect("wait"))
            .await
            .expect("join");
        assert!(!exited.success(), "{at:?}: killed mid-credit");
        *killer.armed.lock().expect("lock") = None;
        let sent_before = recharge_keys(&sim, &card).len();
        assert_eq!(sent_before, usize::from(at == KillAt::Charged), "{at:?}");
        let (mut second, url) = serve();
        let started = Instant::now();
        while card_receipts_in(&url, &conversation).await == 0 {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{at:?}: never resumed"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let keys = recharge_keys(&sim, &card);
        assert_eq!(
            sim.simulator.charges(&card),
            1,
            "{at:?}: one payment, one recharge"
        );
        assert!(
            keys.iter().all(|k| *k == keys[0]),
            "{at:?}: under the same key: {keys:?}"
        );
        assert_eq!(
            card_receipts_in(&url, &conversation).await,
            1,
            "{at:?}: one receipt"
        );
        let _ = second.kill();
        let _ = second.wait();
    }
}

/// An automatic recharge's debit whose credit a kill -9 cut — the recharge system charged and
/// answered, `serve` never read it: the next `serve` resumes the credit under the same key (the
/// recharge system answers a replay), one recharge and one receipt. The provider's clock is the
/// test's (it settles charges on their date); the product's is real.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_automatic_debit_killed_between_paid_and_credited_is_credited_once() {
    use chrono::{DateTime, Utc};
    let now: Arc<Mutex<DateTime<Utc>>> = Arc::new(Mutex::new(Utc::now()));
    let clock = now.clone();
    let sim = Simulator::new(SimulatorConfig {
        now: Some(Arc::new(move || *clock.lock().expect("clock"))),
        ..SimulatorConfig::default()
    })
    .spawn(0)
    .await
    .expect("simulator");
    let killer = Killer::start(&sim).await;
    let data = tempfile::tempdir().expect("tmp");
    let config = data.path().join("vt-agent.toml");
    std::fs::write(
        &config,
        format!(
            "[pix]\napi_url = \"{}/pix/v2\"\nchave = \"recargas@operadora.example.com.br\"\nvarredura_segundos = 1\nretomar_credito_segundos = 2\n[pix.automatico]\nativo = true\n",
            sim.url
        ),
    )
    .expect("config");
    let serve = |data: &tempfile::TempDir| {
        let mut cmd = vt_agent_in(data);
        cmd.env("VT_CONFIG", &config);
        serve_following_up(cmd, &killer.url)
    };
    let card = "1234567855";
    sim.simulator.ride(card, rust_decimal::Decimal::new(40, 0));
    let (mut child, url) = serve(&data);
    let http = reqwest::Client::new();
    let opened: serde_json::Value = http
        .post(format!("{url}/v1/conversations"))
        .json(&serde_json::json!({"user": {"id": "u-auto"}}))
        .send()
        .await
        .expect("open")
        .json()
        .await
        .expect("json");
    let conv = opened["conversation_id"].as_str().expect("id").to_owned();
    let asked: serde_json::Value = http
        .post(format!("{url}/v1/conversations/{conv}/messages"))
        .json(&serde_json::json!({"text": format!("recarrega 50 no {card} quando o saldo ficar abaixo de 20"), "user": {"id": "u-auto"}}))
        .send()
        .await
        .expect("ask")
        .json()
        .await
        .expect("json");
    assert!(asked.to_string().contains("autorize o Pix Automático"), "{asked}");
    let rec = sim
        .simulator
        .pix()
        .recurrences()
        .pop()
        .expect("a recurrence at the provider");
    assert!(sim.simulator.pix().authorise(&rec.id_rec));
    // The passes read it back as approved, read the balance (10, below 20) and schedule a charge.
    let deadline = Instant::now() + Duration::from_secs(30);
    while sim.simulator.pix().recurring_charges(&rec.id_rec).is_empty() {
        assert!(Instant::now() < deadline, "no charge was scheduled");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The provider tells `serve` of its charges (the product's own clock is days before the debit,
    // so only a notice makes it read one back).
    let registered = http
        .put(format!("{}/pix/v2/webhookcobr", sim.url))
        .json(&serde_json::json!({"webhookUrl": format!("{url}/channels/pix/webhook")}))
        .send()
        .await
        .expect("register");
    assert!(registered.status().is_success());
    // Its date comes at the payer's bank: debited, the notice read back, claimed and sent — killed
    // once the recharge system charged it.
    killer.arm(KillAt::Charged, child.id());
    *now.lock().expect("clock") += chrono::Duration::days(3);
    sim.simulator.pix().recurring_charges(&rec.id_rec);
    let waited = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::task::spawn_blocking(move || child.wait().expect("wait")),
    )
    .await;
    assert!(
        waited.is_ok(),
        "serve was never killed: the debit was not credited"
    );
    *killer.armed.lock().expect("lock") = None;
    assert_eq!(sim.simulator.charges(card), 1, "charged before the kill");

    let (mut child, url) = serve(&data);
    let deadline = Instant::now() + Duration::from_secs(30);
    let read = || async {
        http.get(format!("{url}/v1/conversations/{conv}"))
            .send()
            .await
            .expect("read")
            .text()
            .await
            .expect("text")
    };
    let receipts = loop {
        let view = read().await;
        let n = view.matches("Recarga automática feita").count();
        if n > 0 || Instant::now() > deadline {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // A few more passes: nothing more happens.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let view = read().await;
    kill(child.id());
    let _ = child.wait();
    assert_eq!(receipts, 1, "the resumed credit speaks once");
    assert_eq!(view.matches("Recarga automática feita").count(), 1, "{view}");
    assert_eq!(sim.simulator.charges(card), 1, "one debit, one recharge: {view}");
    let keys = recharge_keys(&sim, card);
    assert!(
        keys.len() >= 2 && keys.iter().all(|k| *k == keys[0]),
        "resent under its key: {keys:?}"
    );
}
