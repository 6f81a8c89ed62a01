//! The product as several *processes* use it: binaries racing on one SQLite data directory, a process
//! killed with SIGKILL in the middle of a charge, a provider that echoes its key back. One simulator,
//! served from this test on loopback, is every process's external system, so its ledger tells how many
//! times money really moved.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use vt_actions::systems::{RunningSimulator, Simulator, SimulatorConfig};

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
    cmd.env("VT_SYSTEMS_URL", &sim.url);
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
            "recarrega 50 no 2345678901 via pix",
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
                c.args(["run-flow", "--compact", "examples/recarga-saldo-baixo.json"]);
                c
            })
            .collect(),
    )
    .await;
    for r in &runs {
        assert!(r.status.success(), "{}", text(&r.stderr));
    }
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
