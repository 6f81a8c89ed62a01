//! What traces, logs and records never hold: a token, a full card, a secret from an OAuth2 flow — read
//! from every file under the data directory and every span the receiver decoded.

use crate::traces::*;
use serde_json::{Value, json};
use std::time::Duration;
use vt_simulators::systems::{Simulator, SimulatorConfig};

/// Every file under `dir`, as bytes read whole (the SQLite database, its WAL, lock files…).
pub(crate) fn files_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                out.push((path, bytes));
            }
        }
    }
    out
}

pub(crate) fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Every place a flow with a token, a batch with tokens and a chat recharge leave bytes — stdout,
/// stderr, every file under the data directory (the database, its WAL, the key file), the spans — holds
/// no payment token and no full card: the cards are in sealed columns only. The transcript export is
/// the one place a card is in clear, by design (it replays), and says so: it is also this test's proof
/// that the search would see a card if one were there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_and_no_full_card_is_kept_or_sent_anywhere_but_the_sealed_columns() {
    const TOKEN: &str = "tok-guardado-7";
    let cards = ["2345678901", "3456789012", "4567890123"];
    let receiver = Receiver::start(Answer::Ok).await;
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    let inputs = tempfile::tempdir().expect("inputs");
    let flow = inputs.path().join("fluxo.json");
    std::fs::write(
        &flow,
        format!(
            r#"{{"cartao": "{}", "recarga": {{"valor": 50, "meio_pagamento": {{"tipo": "pix", "token": "{TOKEN}"}}}}}}"#,
            cards[0]
        ),
    )
    .expect("write");
    let batch = inputs.path().join("lote.csv");
    std::fs::write(
        &batch,
        format!(
            "cartao;valor;meio_pagamento;token\n{};20,00;pix;{TOKEN}\n",
            cards[1]
        ),
    )
    .expect("write");
    let results = inputs.path().join("resultados.jsonl");
    // The key file's path, as a new user runs it (no configured key).
    let run = |args: Vec<String>| {
        let mut c = traced(&data, &sim, &receiver);
        c.env_remove("VT_ENCRYPTION_KEY").args(args);
        c
    };
    let s = |v: &str| v.to_owned();
    let mut outputs = Vec::new();
    for args in [
        vec![s("run-flow"), flow.display().to_string()],
        vec![
            s("batch"),
            batch.display().to_string(),
            s("--output"),
            results.display().to_string(),
        ],
        vec![
            s("chat"),
            s("--conversation"),
            s("conv-guardada"),
            s("-m"),
            format!("recarrega 50 no {} no crédito", cards[2]),
        ],
        vec![
            s("chat"),
            s("--conversation"),
            s("conv-guardada"),
            s("-m"),
            s("sim"),
        ],
    ] {
        let out = output(run(args.clone())).await;
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        outputs.push((format!("{args:?}"), out));
    }
    assert_eq!(
        sim.simulator.charges(cards[2]),
        1,
        "the chat recharge went through"
    );
    // The recharge system got the token's value (the flow's and the batch line's); the caller, its
    // fingerprint.
    let sent: Vec<Value> = sim
        .simulator
        .ledger()
        .into_iter()
        .filter(|e| e.sistema == "recarga")
        .filter_map(|e| e.body)
        .filter(|b| b["meio_pagamento"].get("token").is_some())
        .collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(
        sent.iter().all(|b| b["meio_pagamento"]["token"] == TOKEN),
        "{sent:?}"
    );
    let flow_output: Value = serde_json::from_slice(&outputs[0].1.stdout).expect("the flow output");
    let rf06 = flow_output["etapas"][5]["saida"]["body"]["meio_pagamento"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        rf06.starts_with("tok…-7#"),
        "the caller gets the fingerprint: {rf06}"
    );
    let mut leaks = Vec::new();
    let mut look = |what: String, bytes: &[u8]| {
        for secret in [TOKEN].iter().chain(&cards) {
            if contains(bytes, secret) {
                leaks.push(format!("{secret} in {what}"));
            }
        }
    };
    for (args, out) in &outputs {
        look(format!("{args} stdout"), &out.stdout);
        look(format!("{args} stderr"), &out.stderr);
    }
    look(
        "the batch results".into(),
        &std::fs::read(&results).expect("results"),
    );
    for (path, bytes) in files_under(data.path()) {
        look(path.display().to_string(), &bytes);
    }
    let mut spans = String::new();
    for _ in 0..50 {
        spans = all_text(&receiver.spans());
        if spans.contains("rf10") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        spans.contains("****8901"),
        "the spans were searched: {} bytes",
        spans.len()
    );
    look("the spans".into(), spans.as_bytes());
    assert!(leaks.is_empty(), "{leaks:#?}");

    // The export replays against the real card, and says so first.
    let out = output(run(vec![s("transcript"), s("export"), s("conv-guardada")])).await;
    let export = String::from_utf8_lossy(&out.stdout);
    assert!(
        export.starts_with("# Transcrição com os números completos"),
        "{export}"
    );
    assert!(
        contains(&out.stdout, cards[2]),
        "the search sees a card in clear: {export}"
    );

    // The person asks for their data, then for its erasure: afterwards the card is nowhere, not even
    // where it was in clear by design.
    let out = output(run(vec![s("titular"), s("exportar"), s("--cartao"), s(cards[2])])).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let theirs: Value = serde_json::from_slice(&out.stdout).expect("the export is JSON");
    assert!(theirs["conversas"][0]["id"] == "conv-guardada", "{theirs}");
    let out = output(run(vec![s("titular"), s("apagar"), s("--cartao"), s(cards[2])])).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = output(run(vec![s("transcript"), s("export"), s("conv-guardada")])).await;
    assert!(
        !out.status.success() && !contains(&out.stdout, cards[2]),
        "erased"
    );
    let out = output(run(vec![s("titular"), s("exportar"), s("--cartao"), s(cards[2])])).await;
    let theirs: Value = serde_json::from_slice(&out.stdout).expect("the export is JSON");
    assert_eq!(theirs["conversas"], json!([]), "{theirs}");
    let out = output(run(vec![s("audit")])).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("titular_apagado"));
    assert_eq!(sim.simulator.charges(cards[2]), 1, "money figures stay");
}

/// The systems behind OAuth2, as an operator runs them: a flow with a recharge through the binary
/// with traces to a collector. Neither the client secret nor any token the token endpoint issued is in
/// a byte the collector received, nor in what the command printed, nor in the data directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_through_oauth2_leaves_no_secret_or_token_in_traces_outputs_or_data() {
    const CLIENT_SECRET: &str = "segredo-do-cliente-traces-0123";
    let receiver = Receiver::start(Answer::Ok).await;
    let sim = Simulator::new(SimulatorConfig::default())
        .spawn_behind(
            0,
            vt_simulators::systems::SimulatorAuth::Oauth2 {
                client_id: "vt-agent".into(),
                client_secret: CLIENT_SECRET.into(),
                token_ttl: std::time::Duration::from_secs(3600),
            },
        )
        .await
        .expect("simulator");
    let data = tempfile::tempdir().expect("tmp");
    let config = data.path().join("vt-agent.toml");
    std::fs::write(
        &config,
        format!(
            "[systems]\nsaldo_url = \"{u}\"\nrecarga_url = \"{u}\"\nnotificacao_url = \"{u}\"\n[systems.auth]\nkind = \"oauth2\"\ntoken_url = \"{u}/oauth/token\"\nclient_id = \"vt-agent\"\n",
            u = sim.url
        ),
    )
    .expect("config");
    let input = data.path().join("fluxo.json");
    std::fs::write(
        &input,
        r#"{"cartao": "2345678901", "recarga": {"valor": 30, "meio_pagamento": {"tipo": "pix", "token": "tok_x"}}}"#,
    )
    .expect("input");
    let mut cmd = traced(&data, &sim, &receiver);
    // The file names the systems; the environment's base URL would replace them with the same one.
    cmd.env_remove("VT_SYSTEMS_URL")
        .env("VT_SYSTEMS_CLIENT_SECRET", CLIENT_SECRET)
        .arg("--config")
        .arg(&config)
        .arg("run-flow")
        .arg(&input);
    let out = output(cmd).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sim.simulator.charges("2345678901"), 1);
    let exported: Vec<u8> = receiver
        .exports
        .lock()
        .expect("lock")
        .iter()
        .flat_map(|e| e.body.to_vec())
        .collect();
    assert!(!exported.is_empty(), "the collector received the traces");
    let mut every: Vec<(String, Vec<u8>)> = vec![
        ("exports".into(), exported),
        ("stdout".into(), out.stdout.clone()),
        ("stderr".into(), out.stderr.clone()),
    ];
    every.extend(
        files_under(data.path())
            .into_iter()
            .map(|(p, b)| (p.display().to_string(), b)),
    );
    for (what, bytes) in &every {
        assert!(!contains(bytes, CLIENT_SECRET), "the client secret is in {what}");
        assert!(!contains(bytes, "simulador-"), "an issued token is in {what}");
    }
}
