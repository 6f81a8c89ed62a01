//! Batch jobs: `vt-agent batch` as a process (good and bad lines, CSV, dry run, exit codes, a kill in
//! the middle and the rerun that finishes it without charging anything twice) and `/v1/batches` over
//! loopback HTTP. The simulator is served from the test, so its ledger tells how often money moved.

use std::collections::{BTreeMap, HashSet};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use vt_agent::{ApiKeyConfig, HttpConfig, Role, key_hash};
use vt_simulators::systems::{RunningSimulator, Simulator, SimulatorConfig};

use crate::cli::vt_agent_in;

async fn simulator() -> RunningSimulator {
    Simulator::new(SimulatorConfig::default())
        .spawn(0)
        .await
        .expect("simulator")
}

fn vt_agent(data: &tempfile::TempDir, sim: &RunningSimulator) -> Command {
    let mut cmd = vt_agent_in(data);
    cmd.env("VT_SYSTEMS_URL", &sim.url);
    cmd
}

/// Runs `cmd` off the runtime (which serves the simulator meanwhile).
async fn output(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("run"))
        .await
        .expect("join")
}

/// The result lines by line number; panics on a line that is not JSON or a line number twice.
fn results(stdout: &[u8]) -> BTreeMap<i64, Value> {
    let mut by_line = BTreeMap::new();
    for text in String::from_utf8_lossy(stdout).lines() {
        let v: Value = serde_json::from_str(text).expect("a JSON line");
        let line = v["line"].as_i64().expect("line");
        assert!(by_line.insert(line, v).is_none(), "line {line} twice");
    }
    by_line
}

fn recharge(card: &str) -> String {
    format!(
        r#"{{"cartao": "{card}", "recarga": {{"valor": 50, "meio_pagamento": {{"tipo": "pix", "token": "tok_segredo"}}}}}}"#
    )
}

/// Recharges actually charged per card.
fn charged(sim: &RunningSimulator, cards: &[String]) -> Vec<usize> {
    cards.iter().map(|c| sim.simulator.charges(c)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_line_gets_a_result_and_a_bad_line_never_stops_the_batch() {
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("lote.jsonl");
    let input = [
        recharge("2000000001"),               // 1 concluido
        r#"{"cartao": "1111111111"}"#.into(), // 2 balance only, low: concluido
        "{\"cartao\": ".into(),               // 3 not JSON
        String::new(),                        // 4 blank: skipped
        recharge("6666666666"),               // 5 recharge pending
        r#"{"cartao": "2000000002", "recarga": {"valor": 5000, "meio_pagamento": {"tipo": "pix"}}}"#.into(), // 6 over the limit
        r#"{"cartao": {"x": 1}}"#.into(), // 7 wrong type
        recharge("7777777777"),           // 8 denied
    ]
    .join("\n");
    std::fs::write(&file, &input).expect("write");
    let mut cmd = vt_agent(&data, &sim);
    cmd.arg("batch").arg(&file);
    let out = output(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "not every line concluded: {stderr}");
    let by_line = results(&out.stdout);
    let lines: Vec<i64> = by_line.keys().copied().collect();
    assert_eq!(lines, [1, 2, 3, 5, 6, 7, 8], "one result per non-blank line");
    let status = |l: i64| by_line[&l]["status"].as_str().unwrap_or_default().to_owned();
    assert_eq!(status(1), "concluido");
    assert_eq!(status(2), "concluido");
    assert_eq!(status(3), "invalida");
    assert_eq!(status(5), "pendente");
    assert_eq!(status(6), "falhou");
    assert_eq!(status(7), "invalida");
    assert_eq!(status(8), "falhou");
    assert!(by_line[&3]["error"].as_str().unwrap_or_default().contains("JSON"));
    assert!(
        by_line[&7]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("cartao")
    );
    assert!(
        by_line[&1]["execucao_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("exec"))
    );
    assert!(by_line[&1]["resultado"].is_object());
    assert!(
        stderr.contains("7 de 7 linhas") && stderr.contains("concluido 2") && stderr.contains("invalida 2"),
        "{stderr}"
    );
    assert!(stderr.contains("fluxos/s") && stderr.contains("p99"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for secret in ["2000000001", "6666666666", "tok_segredo"] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{secret} leaked"
        );
    }
    assert_eq!(sim.simulator.charges("2000000001"), 1);
    assert_eq!(
        sim.simulator.charges("2000000002"),
        0,
        "over the limit: never sent"
    );

    // The same file again is the same job: nothing runs, every result comes back from the store.
    let before = sim.simulator.ledger().len();
    let mut again = vt_agent(&data, &sim);
    again.arg("batch").arg(&file);
    let out = output(again).await;
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(results(&out.stdout).keys().copied().collect::<Vec<_>>(), lines);
    assert!(String::from_utf8_lossy(&out.stderr).contains("7 já estavam"));
    assert_eq!(
        sim.simulator.ledger().len(),
        before,
        "no request reached the systems"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_killed_mid_way_finishes_on_rerun_and_charges_each_line_once() {
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("lote.jsonl");
    let cards: Vec<String> = (0..60).map(|i| format!("20000001{i:02}")).collect();
    let input: Vec<String> = cards.iter().map(|c| recharge(c)).collect();
    std::fs::write(&file, input.join("\n")).expect("write");
    // Slowed down by --rate, so the kill lands with lines done, lines in flight and lines not begun.
    let mut child = vt_agent(&data, &sim)
        .args(["batch", "--concurrency", "4", "--rate", "40"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let started = Instant::now();
    while charged(&sim, &cards).iter().sum::<usize>() < 15 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the batch never got going"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
    let first = charged(&sim, &cards).iter().sum::<usize>();
    assert!(first < cards.len(), "killed before the end ({first} charged)");

    let mut rerun = vt_agent(&data, &sim);
    rerun.args(["batch", "--concurrency", "4"]).arg(&file);
    let out = output(rerun).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A line that did not conclude is shown whole (its stages say why): seen once under a loaded
    // machine's full suite, never alone.
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let not_concluded: Vec<&str> = stdout.lines().filter(|l| !l.contains("\"concluido\"")).collect();
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{not_concluded:#?}");
    assert!(stderr.contains("já estavam de uma execução anterior"), "{stderr}");
    let by_line = results(&out.stdout);
    assert_eq!(by_line.len(), 60, "every line once, earlier ones included");
    assert!(by_line.values().all(|v| v["status"] == "concluido"));
    assert_eq!(
        charged(&sim, &cards),
        vec![1; 60],
        "each card charged exactly once"
    );
    // Lines that were in flight at the kill were sent again with the same key, and answered from the
    // recharge system's idempotency store.
    let mut keys = HashSet::new();
    let mut sends = 0;
    for e in sim.simulator.ledger().iter().filter(|e| e.sistema == "recarga") {
        sends += 1;
        keys.insert(e.idempotency_key.clone());
    }
    assert_eq!(keys.len(), 60, "one key per line");
    assert!(sends >= 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_rows_map_to_flow_inputs_and_a_dry_run_charges_nothing() {
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("cartoes.csv");
    std::fs::write(
        &file,
        "cartao;valor;meio_pagamento;idioma;cpf\n\
         2000 0000-03;50,00;pix;en;123.456.789-00\n\
         2000000004;;;;\n",
    )
    .expect("write");
    let mut dry = vt_agent(&data, &sim);
    dry.args(["batch", "--dry-run"]).arg(&file);
    let out = output(dry).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("colunas ignoradas: cpf"), "{stderr}");
    let by_line = results(&out.stdout);
    assert_eq!(by_line.len(), 2);
    // Line 1 stops at RF6 with the prepared recharge; line 2 asked no recharge.
    assert_eq!(by_line[&1]["resultado"]["body"]["valor"], 50.0, "{}", by_line[&1]);
    assert_eq!(
        sim.simulator.charges("2000000003"),
        0,
        "a dry run charges nothing"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("123.456.789-00"));

    let mut real = vt_agent(&data, &sim);
    real.arg("batch").arg(&file);
    let out = output(real).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        results(&out.stdout).len(),
        2,
        "a dry run is another job: every line runs"
    );
    assert_eq!(sim.simulator.charges("2000000003"), 1);
    assert_eq!(sim.simulator.charges("2000000004"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_input_and_a_job_id_reused_for_other_input_exit_2() {
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    let dir = tempfile::tempdir().expect("tmp");
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    let empty = dir.path().join("vazio.jsonl");
    std::fs::write(&a, recharge("2000000005")).expect("write");
    std::fs::write(&b, recharge("2000000006")).expect("write");
    std::fs::write(&empty, "\n\n").expect("write");
    let run = |args: Vec<String>| {
        let mut cmd = vt_agent(&data, &sim);
        cmd.args(args);
        output(cmd)
    };
    let s = |p: &std::path::Path| p.display().to_string();
    let first = run(vec!["batch".into(), "--job".into(), "mensal".into(), s(&a)]).await;
    assert_eq!(first.status.code(), Some(0));
    for (args, says) in [
        (
            vec!["batch".into(), "--job".into(), "mensal".into(), s(&b)],
            "outra entrada",
        ),
        (
            vec!["batch".into(), s(&dir.path().join("nao-existe.jsonl"))],
            "não foi possível ler",
        ),
        (vec!["batch".into(), s(&empty)], "vazia"),
        (vec!["batch".into(), "--job".into(), "a:b".into(), s(&a)], "--job"),
        (
            vec![
                "batch".into(),
                "--politicas".into(),
                r#"{"valor_min": "x"}"#.into(),
                s(&a),
            ],
            "valor_min",
        ),
    ] {
        let out = run(args.clone()).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty());
    }
    assert_eq!(
        sim.simulator.charges("2000000006"),
        0,
        "the refused job ran nothing"
    );
}

const CLIENT_A: &str = "chave-cliente-a-123456";
const CLIENT_B: &str = "chave-cliente-b-123456";

fn config() -> HttpConfig {
    let key = |name: &str, secret: &str, tenant: &str| ApiKeyConfig {
        name: name.into(),
        sha256: key_hash(secret),
        tenant: tenant.into(),
        role: Role::Client,
    };
    HttpConfig {
        api_keys: vec![key("a", CLIENT_A, "empresa-a"), key("b", CLIENT_B, "empresa-b")],
        ..HttpConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_over_http_run_in_the_background_and_report_progress_and_results() {
    let store: Arc<dyn vt_store::Store> = Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    );
    let chat =
        Arc::new(crate::support::chat_harness_on(store, None, vt_domain::tools::VtSettings::default()).await);
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let background = vt_agent::testkit::Background::new(
        chat.service.clone(),
        vt_domain::vt::input::Politicas::default(),
        stop_rx,
    );
    let state = vt_agent::AppState::new(chat.service.clone(), "vt", config()).with_batches(background);
    let s = crate::support::serve_state(chat.clone(), state).await;
    let body = [
        recharge("2000000007"),
        "nao e json".into(),
        r#"{"cartao": "1111111111"}"#.into(),
    ]
    .join("\n");
    let post = |key: Option<&'static str>, query: &'static str, body: String| {
        let mut r = s.client.post(format!("{}/v1/batches{query}", s.url)).body(body);
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        r.send()
    };
    let r = post(Some(CLIENT_A), "", body.clone()).await.expect("post");
    assert_eq!(r.status(), 202);
    let accepted: Value = r.json().await.expect("json");
    let id = accepted["id"].as_str().expect("id").to_owned();
    assert_eq!(accepted["total"], 3);
    assert_eq!(accepted["status_url"], format!("/v1/batches/{id}"));
    let view = loop {
        let v: Value = s
            .get(&format!("/v1/batches/{id}"), Some(CLIENT_A))
            .await
            .json()
            .await
            .expect("json");
        if v["status"] == "concluido" {
            break v;
        }
        assert_eq!(v["status"], "em_andamento", "{v}");
        // Slow enough to stay within the key's rate (600 a minute) on a loaded machine.
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(view["done"], 3);
    assert_eq!(view["counts"]["concluido"], 2, "{view}");
    assert_eq!(view["counts"]["invalida"], 1, "{view}");
    let r = s.get(&format!("/v1/batches/{id}/results"), Some(CLIENT_A)).await;
    assert_eq!(r.headers()["content-type"], "application/x-ndjson");
    let lines = results(&r.bytes().await.expect("body"));
    assert_eq!(lines.keys().copied().collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(lines[&2]["status"], "invalida");
    assert_eq!(chat.sim.charges("2000000007"), 1);

    // The same body again names the same job, which has finished: nothing runs again.
    let again: Value = post(Some(CLIENT_A), "", body.clone())
        .await
        .expect("post")
        .json()
        .await
        .expect("json");
    assert_eq!(again["id"], id.as_str());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(chat.sim.charges("2000000007"), 1);

    // Another tenant does not see it; bad requests say what is wrong.
    assert_eq!(
        s.get(&format!("/v1/batches/{id}"), Some(CLIENT_B)).await.status(),
        404
    );
    assert_eq!(
        s.get(&format!("/v1/batches/{id}/results"), Some(CLIENT_B))
            .await
            .status(),
        404
    );
    assert_eq!(s.get("/v1/batches/nada", Some(CLIENT_A)).await.status(), 404);
    assert_eq!(post(None, "", body.clone()).await.expect("post").status(), 401);
    let empty = post(Some(CLIENT_A), "", "\n".into()).await.expect("post");
    assert_eq!(empty.status(), 400);
    let bad = post(Some(CLIENT_A), "?concurrency=0", body).await.expect("post");
    assert_eq!(bad.status(), 400);
    let err: Value = bad.json().await.expect("json");
    assert_eq!(err["error"]["field"], "concurrency", "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_after_the_flows_in_flight_and_the_rerun_finishes_the_job() {
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("lote.jsonl");
    let cards: Vec<String> = (0..60).map(|i| format!("20000002{i:02}")).collect();
    let input: Vec<String> = cards.iter().map(|c| recharge(c)).collect();
    std::fs::write(&file, input.join("\n")).expect("write");
    let child = vt_agent(&data, &sim)
        // A slow rate leaves the stop a wide margin: under a loaded machine the test notices the tenth
        // charge late, and at 30 a second the batch could be over by then.
        .args(["batch", "--concurrency", "4", "--rate", "10"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let started = Instant::now();
    while charged(&sim, &cards).iter().sum::<usize>() < 10 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the batch never got going"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let interrupt = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(interrupt.success());
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().expect("wait"))
        .await
        .expect("join");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "stopped early: {stderr}");
    assert!(
        stderr.contains("parando") && stderr.contains("interrompido"),
        "{stderr}"
    );
    let first = results(&out.stdout);
    assert!(first.len() < 60, "stopped before the end");
    // Every flow that was sent before the stop ended and was reported: none was cut in half.
    let charged_now = charged(&sim, &cards).iter().sum::<usize>();
    assert_eq!(first.len(), charged_now, "each charged line has its result");

    let mut rerun = vt_agent(&data, &sim);
    rerun.arg("batch").arg(&file);
    let out = output(rerun).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(results(&out.stdout).len(), 60);
    assert_eq!(
        charged(&sim, &cards),
        vec![1; 60],
        "each card charged exactly once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_resumes_a_batch_a_stop_interrupted() {
    let store: Arc<dyn vt_store::Store> = Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    );
    let chat = Arc::new(
        crate::support::chat_harness_on(store.clone(), None, vt_domain::tools::VtSettings::default()).await,
    );
    let body = (0..5)
        .map(|i| recharge(&format!("20000003{i:02}")))
        .collect::<Vec<_>>()
        .join("\n");
    // A job as a stopped server left it: on record with its input, its first two lines ended.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let first = vt_agent::testkit::Background::new(
        chat.service.clone(),
        vt_domain::vt::input::Politicas::default(),
        stop_rx,
    );
    stop_tx.send(true).expect("stop");
    let job = first
        .submit(vt_agent::testkit::Submission {
            tenant_id: "empresa-a".into(),
            text: body.clone(),
            options: vt_agent::Options::default(),
        })
        .await
        .expect("submit");
    first.wait().await;
    assert!(
        store.batch_lines(&job.id).await.expect("lines").is_empty(),
        "a stopped job starts no line"
    );
    assert_eq!(store.unfinished_batches().await.expect("unfinished").len(), 1);

    let (_go, running) = tokio::sync::watch::channel(false);
    let second = vt_agent::testkit::Background::new(
        chat.service.clone(),
        vt_domain::vt::input::Politicas::default(),
        running,
    );
    assert_eq!(second.join().await, 1);
    second.wait().await;
    let lines = store.batch_lines(&job.id).await.expect("lines");
    assert_eq!(lines.len(), 5);
    assert!(
        lines
            .iter()
            .all(|l| l.status == vt_store::records::LineStatus::Concluido)
    );
    assert!(
        store
            .batch(&job.id)
            .await
            .expect("job")
            .expect("there")
            .finished_at
            .is_some()
    );
    assert!(store.unfinished_batches().await.expect("unfinished").is_empty());
    assert_eq!(chat.sim.charges("2000000300"), 1);
}
