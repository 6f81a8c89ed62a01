//! The product as several *processes* use it: binaries racing on one SQLite data directory, a process
//! killed with SIGKILL in the middle of a charge, a provider that echoes its key back. One simulator,
//! served from this test on loopback, is every process's external system, so its ledger tells how many
//! times money really moved.

use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use vt_simulators::systems::{RunningSimulator, Simulator, SimulatorConfig};

use crate::cli::vt_agent_in;

async fn simulator() -> RunningSimulator {
    Simulator::new(SimulatorConfig::default())
        .spawn(0)
        .await
        .expect("simulator")
}

/// The binary on `data`, talking to `sim`.
fn vt_agent(data: &tempfile::TempDir, sim: &RunningSimulator) -> Command {
    let mut cmd = vt_agent_in(data);
    cmd.env("VT_SYSTEMS_URL", &sim.url)
        // The recharge system charges a card itself: a card recharge in the chat goes to it.
        .env("VT_CARTAO_PROVEDOR", "sistema_de_recarga");
    cmd
}

/// Starts every command at once and waits for all of them (off the runtime, which serves the
/// simulator meanwhile).
async fn race(commands: Vec<Command>) -> Vec<Output> {
    tokio::task::spawn_blocking(move || {
        let children: Vec<_> = commands
            .into_iter()
            .map(|mut c| {
                c.stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("spawn")
            })
            .collect();
        children
            .into_iter()
            .map(|c| c.wait_with_output().expect("wait"))
            .collect()
    })
    .await
    .expect("join")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Real systems and no card provider (`[cartao]` absent): a card recharge in the chat is refused before
/// anything is prepared — it would go to the recharge system with nobody paying — naming the means that
/// are taken; the "sim" after it confirms nothing, and the recharge system never hears of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_real_systems_and_no_card_provider_a_card_recharge_is_refused_before_anything_is_prepared() {
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    let say = |text: &str| {
        let mut c = vt_agent_in(&data);
        c.env("VT_SYSTEMS_URL", &sim.url)
            .args(["chat", "--conversation", "sem-cartao", "-m", text]);
        c
    };
    let ask = race(vec![say("recarrega 50 no 2345678901 no crédito")]).await;
    let told = text(&ask[0].stdout);
    assert!(ask[0].status.success(), "{}", text(&ask[0].stderr));
    assert!(
        told.contains("cartão de crédito ainda não está disponível") && told.contains("no boleto"),
        "{told}"
    );
    assert!(!told.contains("Confirma"), "nothing was prepared: {told}");
    let yes = race(vec![say("sim")]).await;
    assert!(
        !text(&yes[0].stdout).contains("aprovada"),
        "{}",
        text(&yes[0].stdout)
    );
    assert!(
        sim.simulator.ledger().iter().all(|e| e.sistema != "recarga"),
        "the recharge system never heard of it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_processes_answering_yes_to_one_recharge_charge_it_once() {
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    let ask = race(vec![{
        let mut c = vt_agent(&data, &sim);
        c.args([
            "chat",
            "--conversation",
            "R",
            "-m",
            "recarrega 50 no 2345678901 no crédito",
        ]);
        c
    }])
    .await;
    assert!(
        text(&ask[0].stdout).contains("Confirma a recarga"),
        "{}",
        text(&ask[0].stderr)
    );
    let answers = race(
        (0..10)
            .map(|_| {
                let mut c = vt_agent(&data, &sim);
                c.args(["chat", "--conversation", "R", "--message", "sim"]);
                c
            })
            .collect(),
    )
    .await;
    for a in &answers {
        assert!(a.status.success(), "{}", text(&a.stderr));
    }
    let replies: Vec<String> = answers.iter().map(|a| text(&a.stdout)).collect();
    let approved = replies.iter().filter(|r| r.contains("aprovada")).count();
    assert_eq!(approved, 1, "{replies:#?}");
    assert!(
        replies
            .iter()
            .filter(|r| !r.contains("aprovada"))
            .all(|r| r.contains("Não há nenhuma recarga")),
        "the others are told nothing is pending: {replies:#?}"
    );
    let posts = sim
        .simulator
        .ledger()
        .into_iter()
        .filter(|e| e.sistema == "recarga")
        .count();
    assert_eq!(posts, 1, "the recharge was sent once");
    assert_eq!(sim.simulator.charges("2345678901"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_first_runs_at_once_on_a_new_data_directory_all_succeed() {
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    let runs = race(
        (0..10)
            .map(|_| {
                let mut c = vt_agent(&data, &sim);
                // No configured key: the first runs make the key file, one of them wins.
                c.env_remove("VT_ENCRYPTION_KEY");
                c.args(["run-flow", "--compact", "examples/recarga-saldo-baixo.json"]);
                c
            })
            .collect(),
    )
    .await;
    for r in &runs {
        assert!(r.status.success(), "{}", text(&r.stderr));
    }
    let told = runs
        .iter()
        .filter(|r| text(&r.stderr).contains("chave de dados criada"))
        .count();
    assert_eq!(told, 1, "the key file is made, and said, once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_mid_charge_stays_visible_and_its_rerun_is_not_charged_again() {
    // Card 9999999999: the charge is recorded, the answer takes 30 s; the process is killed while
    // it waits.
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    let input = r#"{"cartao": "9999999999", "recarga": {"valor": 50, "meio_pagamento": {"tipo": "pix"}}}"#;
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("entrada.json");
    std::fs::write(&file, input).expect("write");
    let mut child = vt_agent(&data, &sim)
        .arg("run-flow")
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let started = Instant::now();
    while sim.simulator.charges("9999999999") == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the charge never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // SIGKILL: no destructor, no flush, nothing runs after this.
    child.kill().expect("kill -9");
    child.wait().expect("reaped");

    let list = race(vec![{
        let mut c = vt_agent(&data, &sim);
        c.arg("flows");
        c
    }])
    .await;
    let listed = text(&list[0].stdout);
    assert!(listed.contains("em_andamento"), "the run is on record: {listed}");
    assert!(
        listed.contains("enviando") && listed.contains("****9999") && listed.contains("BRL 50"),
        "the attempt is on record with its key, masked card and value: {listed}"
    );
    assert!(!listed.contains("9999999999"), "{listed}");

    let rerun = race(vec![{
        let mut c = vt_agent(&data, &sim);
        c.args(["run-flow", "--compact"]).arg(&file);
        c
    }])
    .await;
    let out: serde_json::Value = serde_json::from_slice(&rerun[0].stdout).expect("json");
    assert_eq!(out["status"], "concluido", "{out}");
    let rf08 = &out["etapas"][7]["saida"];
    assert!(
        rf08["observacoes"]
            .as_array()
            .is_some_and(|o| o.contains(&serde_json::json!("replay_idempotente"))),
        "{rf08}"
    );
    let keys: Vec<Option<String>> = sim
        .simulator
        .ledger()
        .into_iter()
        .filter(|e| e.sistema == "recarga")
        .map(|e| e.idempotency_key)
        .collect();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0], keys[1], "the rerun reused the key");
    assert_eq!(sim.simulator.charges("9999999999"), 1, "charged once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_echoes_the_key_leaves_it_in_no_log_and_no_record() {
    const KEY: &str = "sk-test-Zq81mKd0vX3pL6tR9wB2";
    let echo = serde_json::json!({"error": {
        "message": format!("Incorrect API key provided: {KEY}. Also seen: sk-proj-OTHERkey1234567890abc."),
        "type": "invalid_request_error", "code": "invalid_api_key"}});
    let fake = crate::support::FakeServer::start(vec![
        (401, vec![], echo.clone()),
        (401, vec![], echo.clone()),
        (401, vec![], echo.clone()),
        (401, vec![], echo),
    ])
    .await;
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    let out = race(vec![{
        let mut c = vt_agent(&data, &sim);
        c.env("VT_LLM_BASE_URL", format!("{}/v1", fake.url))
            .env("VT_LLM_API_KEY", KEY)
            .env("VT_LOG", "info,sqlx=warn,rustls_platform_verifier=warn")
            .args([
                "chat",
                "--conversation",
                "s1",
                "-m",
                "qual a diferença entre VT e VR?",
            ]);
        c
    }])
    .await;
    let stderr = text(&out[0].stderr);
    assert!(
        stderr.contains("401") || stderr.contains("rejected"),
        "the failure is logged: {stderr}"
    );
    for secret in [KEY, "sk-proj-OTHERkey1234567890abc"] {
        assert!(!stderr.contains(secret), "{stderr}");
        assert!(!text(&out[0].stdout).contains(secret));
        for entry in std::fs::read_dir(data.path()).expect("data dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                continue;
            }
            let bytes = std::fs::read(&path).expect("read");
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{} holds a secret",
                path.display()
            );
        }
    }
}

/// Where the proxy in front of the recharge system kills the `serve` process.
#[derive(Clone, Copy, Debug, PartialEq)]
enum KillAt {
    /// Right after the webhook's 200 for "sim" (from the test, not the proxy).
    Acknowledged,
    /// When the recharge request arrives: the confirmation is consumed and the attempt on record,
    /// nothing charged.
    RequestArrived,
    /// After the recharge system charged and answered, before `serve` read the answer.
    Charged,
    /// Never: the process runs to the end.
    Nowhere,
}

/// A proxy for the external systems that passes everything to `sim` and, when armed, kills the
/// process `pid` at its recharge request.
#[derive(Clone)]
struct Killer {
    armed: Arc<Mutex<Option<(KillAt, u32)>>>,
    url: String,
}

impl Killer {
    async fn start(sim: &RunningSimulator) -> Self {
        let armed: Arc<Mutex<Option<(KillAt, u32)>>> = Arc::default();
        let (to, client) = (sim.url.clone(), reqwest::Client::new());
        let state = armed.clone();
        let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
            let (to, client, armed) = (to.clone(), client.clone(), state.clone());
            async move {
                let recharge = req.uri().path().ends_with("/recargas");
                let at = armed.lock().expect("lock").filter(|_| recharge);
                if let Some((KillAt::RequestArrived, pid)) = at {
                    // The request never reaches the recharge system: nobody is left to read an answer.
                    kill(pid);
                    return axum::response::IntoResponse::into_response(axum::http::StatusCode::BAD_GATEWAY);
                }
                let (parts, body) = req.into_parts();
                let body = axum::body::to_bytes(body, 1 << 20).await.expect("body");
                let url = format!("{to}{}", parts.uri.path_and_query().map_or("", |p| p.as_str()));
                let mut forward = client.request(parts.method, url).body(body);
                for (k, v) in &parts.headers {
                    if k != "host" && k != "content-length" {
                        forward = forward.header(k, v);
                    }
                }
                let answer = forward.send().await.expect("simulator");
                let status = answer.status().as_u16();
                let headers = answer.headers().clone();
                let bytes = answer.bytes().await.expect("answer");
                if let Some((KillAt::Charged, pid)) = at {
                    kill(pid);
                }
                let mut response = axum::response::Response::new(axum::body::Body::from(bytes));
                *response.status_mut() = axum::http::StatusCode::from_u16(status).expect("status");
                *response.headers_mut() = headers;
                response
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { armed, url }
    }

    fn arm(&self, at: KillAt, pid: u32) {
        *self.armed.lock().expect("lock") = Some((at, pid));
    }
}

fn kill(pid: u32) {
    let status = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -9 {pid}");
}

/// `serve` with the WhatsApp channel on `graph`, the external systems behind `systems`.
fn serve_whatsapp(data: &tempfile::TempDir, systems: &str, graph: &str) -> (std::process::Child, String) {
    serve_whatsapp_with(vt_agent_in(data), systems, graph)
}

/// [`serve_whatsapp`] from a command set up already (a database, say).
fn serve_whatsapp_with(mut cmd: Command, systems: &str, graph: &str) -> (std::process::Child, String) {
    cmd.env("VT_SYSTEMS_URL", systems)
        // The recharge system charges a card itself: a card recharge in the chat goes to it.
        .env("VT_CARTAO_PROVEDOR", "sistema_de_recarga")
        .env("VT_WHATSAPP_GRAPH_URL", graph)
        .env("VT_WHATSAPP_PHONE_NUMBER_ID", "106540352242922")
        .env("VT_WHATSAPP_ACCESS_TOKEN", "EAAtesttokenvalue0123456789")
        .env("VT_WHATSAPP_APP_SECRET", crate::whatsapp::SECRET)
        .env("VT_WHATSAPP_VERIFY_TOKEN", "vibecoding")
        .args(["serve", "--addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let url = crate::support::listening_on(&mut stderr);
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, url)
}

/// The texts the Graph fake was asked to send, in order.
fn sent_texts(graph: &crate::support::FakeServer) -> Vec<String> {
    graph
        .received()
        .into_iter()
        .filter_map(|r| {
            let b = r.body;
            b.pointer("/text/body")
                .or_else(|| b.pointer("/interactive/body/text"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        })
        .collect()
}

async fn wait_for_texts(graph: &crate::support::FakeServer, n: usize) -> Vec<String> {
    for _ in 0..300 {
        let texts = sent_texts(graph);
        if texts.len() >= n {
            return texts;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("fewer than {n} replies were sent: {:?}", sent_texts(graph));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_yes_killed_at_any_point_is_charged_once_and_told_truthfully() {
    let sim = simulator().await;
    let killer = Killer::start(&sim).await;
    let client = reqwest::Client::new();
    let webhook = |url: &str, text: &str, wamid: &str| {
        let body = crate::whatsapp::text_notification(text, wamid);
        client
            .post(format!("{url}/channels/whatsapp/webhook"))
            .header("content-type", "application/json")
            .header("x-hub-signature-256", crate::whatsapp::sign(&body))
            .body(body)
            .send()
    };
    for (round, at) in [
        KillAt::Acknowledged,
        KillAt::RequestArrived,
        KillAt::Charged,
        KillAt::Nowhere,
    ]
    .into_iter()
    .enumerate()
    {
        // A card per round, so that each round's ledger is its own.
        let card = format!("12345678{round:02}");
        let data = tempfile::tempdir().expect("tmp");
        let graph = crate::support::FakeServer::start(vec![crate::whatsapp::sent(); 20]).await;
        let (mut child, url) = serve_whatsapp(&data, &killer.url, &graph.url);
        let asked = webhook(
            &url,
            &format!("recarrega 50 no {card} no crédito"),
            &format!("wamid.ask{round}"),
        )
        .await
        .expect("sent");
        assert_eq!(asked.status(), 200);
        // The person's first message: the privacy notice, then the question.
        let question = wait_for_texts(&graph, 2).await;
        assert_eq!(question[0], vt_agent::testkit::AVISO_PRIVACIDADE);
        assert!(question[1].contains("Confirma"), "{question:?}");
        killer.arm(at, child.id());
        let yes = webhook(&url, "sim", &format!("wamid.yes{round}"))
            .await
            .expect("sent");
        assert_eq!(yes.status(), 200, "{at:?}: the yes is acknowledged");
        if at == KillAt::Acknowledged {
            kill(child.id());
        }
        if at == KillAt::Nowhere {
            wait_for_texts(&graph, 3).await;
            kill(child.id());
        }
        tokio::task::spawn_blocking(move || child.wait().expect("wait"))
            .await
            .expect("join");
        *killer.armed.lock().expect("lock") = None;

        // The next start processes what was acknowledged and not answered.
        let (mut child, _) = serve_whatsapp(&data, &killer.url, &graph.url);
        let texts = wait_for_texts(&graph, 3).await;
        let answer = texts.last().expect("an answer").clone();
        kill(child.id());
        let _ = child.wait();
        assert_eq!(
            sim.simulator.charges(&card),
            1,
            "{at:?}: one charge; told {texts:?}"
        );
        assert!(
            answer.contains("aprovada") || answer.contains("já tinha sido feita"),
            "{at:?}: the answer tells the charge: {texts:?}"
        );
        assert!(
            !answer.contains("não será cobrado de novo") && !answer.contains("Não há nenhuma recarga"),
            "{at:?}: never told that nothing is pending: {texts:?}"
        );
        assert_eq!(texts.len(), 3, "{at:?}: one answer to the yes: {texts:?}");
    }
}

/// The data key ids of the key file under `data`, current first.
fn key_ids(data: &tempfile::TempDir) -> Vec<String> {
    vt_store::seal::read_key_file(&data.path().join(vt_store::seal::KEY_FILE))
        .expect("read")
        .expect("a key file")
        .ids()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_rotate_reseals_everything_survives_a_kill_and_a_wrong_key_is_named() {
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    let inputs = tempfile::tempdir().expect("inputs");
    let lines: String = (0..150)
        .map(|i| {
            format!(
                "{{\"cartao\": \"{}\", \"recarga\": {{\"valor\": 10, \"meio_pagamento\": {{\"tipo\": \"pix\", \"token\": \"tok-lote-{i}\"}}}}}}\n",
                4_000_000_000u64 + i
            )
        })
        .collect();
    std::fs::write(inputs.path().join("lote.jsonl"), lines).expect("write");
    let binary = |args: &[&str]| {
        let mut c = vt_agent(&data, &sim);
        c.env_remove("VT_ENCRYPTION_KEY").args(args);
        c
    };
    let lote = inputs.path().join("lote.jsonl");
    let out = race(vec![binary(&["batch", lote.to_str().expect("path")])]).await;
    assert!(out[0].status.success(), "{}", text(&out[0].stderr));
    let first = key_ids(&data);
    assert_eq!(first.len(), 1);

    // Killed after its first batch of values: the file holds the new key and the old one.
    let mut child = binary(&["keys", "rotate"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    while !line.contains("valores") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut stderr, &mut line).expect("line") > 0,
            "the rotation ended before it could be killed"
        );
    }
    child.kill().expect("kill -9");
    let _ = child.wait();
    let halfway = key_ids(&data);
    assert_eq!(halfway.len(), 2, "{halfway:?}");
    assert_eq!(halfway[1], first[0]);

    // The rerun goes on with the same new key and ends with it alone.
    let out = race(vec![binary(&["keys", "rotate"])]).await;
    assert!(out[0].status.success(), "{}", text(&out[0].stderr));
    assert_eq!(key_ids(&data), vec![halfway[0].clone()]);
    let flows = race(vec![binary(&["flows", "--limit", "200"])]).await;
    assert!(flows[0].status.success(), "{}", text(&flows[0].stderr));

    // Every sealed value opens under the new key alone (read raw, opened with that ring only).
    let ring = vt_store::seal::read_key_file(&data.path().join(vt_store::seal::KEY_FILE))
        .expect("read")
        .expect("file");
    let url = format!("sqlite://{}", data.path().join("vt-agent.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.expect("open");
    let mut opened = 0;
    for (table, column, _) in vt_store::SEALED {
        let values: Vec<Option<String>> =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT {column} FROM {table}")))
                .fetch_all(&pool)
                .await
                .expect("read");
        for v in values.into_iter().flatten() {
            assert!(vt_store::seal::is_sealed(&v), "{table}.{column} in clear");
            let clear = ring.open(&v).unwrap_or_else(|e| panic!("{table}.{column}: {e}"));
            assert!(!clear.contains("tok-lote"), "{table}.{column} keeps a token");
            opened += 1;
        }
    }
    assert!(opened > 1_500, "{opened} values");

    // A key that is not the one: a clear error naming the key the values need, never a panic.
    std::fs::write(
        data.path().join(vt_store::seal::KEY_FILE),
        format!("{}\n", vt_store::seal::DataKey::generate().to_base64()),
    )
    .expect("write");
    let wrong = race(vec![binary(&["flows"])]).await;
    let said = text(&wrong[0].stderr);
    assert_eq!(wrong[0].status.code(), Some(1), "{said}");
    assert!(said.contains(&halfway[0]) && !said.contains("panicked"), "{said}");
}

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
fn serve_following_up(mut cmd: Command, systems: &str) -> (std::process::Child, String) {
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
fn recharge_keys(sim: &RunningSimulator, card: &str) -> Vec<String> {
    sim.simulator
        .ledger()
        .into_iter()
        .filter(|e| e.sistema == "recarga" && e.cartao.as_deref() == Some(card))
        .filter_map(|e| e.idempotency_key)
        .collect()
}

async fn post_flow(url: &str, body: String) -> reqwest::Response {
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

/// A configuration file with `[pix]` at `sim`'s provider, and `extra` lines of its own.
fn pix_config(sim: &RunningSimulator, extra: &str) -> (tempfile::TempDir, std::path::PathBuf) {
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
fn shown_txid(sim: &RunningSimulator, answer: &serde_json::Value) -> String {
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
fn pay(sim: &RunningSimulator, txid: &str) -> serde_json::Value {
    let paid = sim.simulator.pix().pay(txid, false).expect("paid");
    serde_json::json!({"pix": [{
        "endToEndId": paid.end_to_end_id, "txid": txid, "valor": "20.00", "horario": paid.horario
    }]})
}

/// How many receipts conversation `id` holds, read through `url`.
async fn receipts_in(url: &str, id: &str) -> usize {
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
fn card_config(sim: &RunningSimulator) -> (tempfile::TempDir, std::path::PathBuf) {
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
fn serve_taking_cards(
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
fn linked_checkout(answer: &serde_json::Value) -> String {
    answer["replies"]
        .as_array()
        .and_then(|r| r.iter().find_map(|r| r["cartao"]["link"].as_str()))
        .and_then(|link| link.rsplit('/').next())
        .unwrap_or_else(|| panic!("the link: {answer}"))
        .to_owned()
}

/// The provider's signed notice that checkout `id` completed.
fn card_notice(id: &str) -> (String, Vec<u8>) {
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

async fn card_receipts_in(url: &str, id: &str) -> usize {
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
