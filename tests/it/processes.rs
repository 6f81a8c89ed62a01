//! The product as several *processes* use it: binaries racing on one SQLite data directory, a process
//! killed with SIGKILL in the middle of a charge, a provider that echoes its key back. One simulator,
//! served from this test on loopback, is every process's external system, so its ledger tells how many
//! times money really moved.

use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use vt_simulators::systems::{RunningSimulator, Simulator, SimulatorConfig};

use crate::cli::vt_agent_in;

pub(crate) async fn simulator() -> RunningSimulator {
    Simulator::new(SimulatorConfig::default())
        .spawn(0)
        .await
        .expect("simulator")
}

/// The binary on `data`, talking to `sim`.
pub(crate) fn vt_agent(data: &tempfile::TempDir, sim: &RunningSimulator) -> Command {
    let mut cmd = vt_agent_in(data);
    cmd.env("VT_SYSTEMS_URL", &sim.url)
        // The recharge system charges a card itself: a card recharge in the chat goes to it.
        .env("VT_CARTAO_PROVEDOR", "sistema_de_recarga");
    cmd
}

/// Starts every command at once and waits for all of them (off the runtime, which serves the
/// simulator meanwhile).
pub(crate) async fn race(commands: Vec<Command>) -> Vec<Output> {
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

pub(crate) fn text(bytes: &[u8]) -> String {
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
pub(crate) enum KillAt {
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
pub(crate) struct Killer {
    pub(crate) armed: Arc<Mutex<Option<(KillAt, u32)>>>,
    pub(crate) url: String,
}

impl Killer {
    pub(crate) async fn start(sim: &RunningSimulator) -> Self {
        Self::watching(sim, "/recargas").await
    }

    /// A killer armed on the requests whose path ends in `path` (the recharges, a card's block…).
    pub(crate) async fn watching(sim: &RunningSimulator, path: &'static str) -> Self {
        let armed: Arc<Mutex<Option<(KillAt, u32)>>> = Arc::default();
        let (to, client) = (sim.url.clone(), reqwest::Client::new());
        let state = armed.clone();
        let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
            let (to, client, armed) = (to.clone(), client.clone(), state.clone());
            async move {
                let recharge = req.uri().path().ends_with(path);
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

    pub(crate) fn arm(&self, at: KillAt, pid: u32) {
        *self.armed.lock().expect("lock") = Some((at, pid));
    }
}

pub(crate) fn kill(pid: u32) {
    let status = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -9 {pid}");
}

/// `serve` with the WhatsApp channel on `graph`, the external systems behind `systems`.
pub(crate) fn serve_whatsapp(
    data: &tempfile::TempDir,
    systems: &str,
    graph: &str,
) -> (std::process::Child, String) {
    serve_whatsapp_with(vt_agent_in(data), systems, graph)
}

/// [`serve_whatsapp`] from a command set up already (a database, say).
pub(crate) fn serve_whatsapp_with(
    mut cmd: Command,
    systems: &str,
    graph: &str,
) -> (std::process::Child, String) {
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
pub(crate) fn sent_texts(graph: &crate::support::FakeServer) -> Vec<String> {
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

pub(crate) async fn wait_for_texts(graph: &crate::support::FakeServer, n: usize) -> Vec<String> {
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
pub(crate) fn key_ids(data: &tempfile::TempDir) -> Vec<String> {
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
