//! The binary itself: the README's run command, exit codes and `--help`.

use std::io::Write;
use std::process::{Command, Stdio};

/// The binary, run from the checkout (for `examples/`, `skills/`, `prompts/`) with its data in a
/// fresh temporary directory that lives as long as the returned guard.
pub(crate) fn vt_agent_in(data: &tempfile::TempDir) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vt-agent"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    let ours = |k: &str| ["VT_", "OTEL_", "LANGFUSE_"].iter().any(|p| k.starts_with(p));
    for (k, _) in std::env::vars().filter(|(k, _)| ours(k)) {
        cmd.env_remove(k);
    }
    cmd.env("VT_DATA_DIR", data.path());
    // The simulated Pix provider pays a code after a second, not the newcomer's five.
    cmd.env("VT_SIMULATOR_PIX_PAGAR_APOS_SEGUNDOS", "1");
    // One data key for this test process and the binaries it runs, so a test can read what they
    // stored; the key file's own path is tested where this variable is removed.
    crate::support::test_keys();
    cmd.env("VT_ENCRYPTION_KEY", crate::support::TEST_KEY);
    cmd
}

pub(crate) fn vt_agent() -> (Command, tempfile::TempDir) {
    let data = tempfile::tempdir().expect("tmp");
    (vt_agent_in(&data), data)
}

pub(crate) fn with_stdin(cmd: Command, input: &str) -> std::process::Output {
    with_stdin_bytes(cmd, input.as_bytes())
}

pub(crate) fn with_stdin_bytes(mut cmd: Command, input: &[u8]) -> std::process::Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write");
    child.wait_with_output().expect("wait")
}

#[test]
fn the_readme_run_command_prints_the_flow_output() {
    let (mut cmd, _data) = vt_agent();
    let out = cmd
        .args(["run-flow", "examples/recarga-saldo-baixo.json"])
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(v["status"], "concluido");
    assert_eq!(v["etapas"].as_array().map(Vec::len), Some(10));
    assert_eq!(v["resultado"]["enviado"], true);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("123.456.789-00"),
        "the example's CPF never reaches the output"
    );
}

#[test]
fn bad_input_exits_2_with_one_clear_line() {
    for (input, expected) in [
        ("{\"cartao\": ", "não é JSON válido"),
        ("[1, 2]", "objeto JSON"),
        (
            &format!("{{\"cartao\": \"1\", \"x\": \"{}\"}}", "a".repeat(5_000)),
            "limite é 5000",
        ),
        // A value that is no number breaks the schema: refused by name, nothing runs.
        (
            "{\"cartao\": \"1234567890\", \"recarga\": {\"valor\": \"abc\", \"meio_pagamento\": {\"tipo\": \"pix\"}}}",
            "recarga.valor",
        ),
    ] {
        let (mut cmd, _data) = vt_agent();
        cmd.args(["run-flow", "-"]);
        let out = with_stdin(cmd, input);
        assert_eq!(out.status.code(), Some(2), "{input:.40}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(expected), "{err}");
        assert!(!err.contains("abc"), "the value is never echoed: {err}");
        assert!(out.stdout.is_empty());
    }
    let (mut cmd, _data) = vt_agent();
    let out = cmd.args(["run-flow", "nao-existe.json"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bytes_that_are_not_utf8_are_invalid_input_from_a_file_and_from_stdin() {
    let bytes = b"{\"cartao\": \"12345\xff67890\"}";
    let (mut cmd, _data) = vt_agent();
    cmd.args(["run-flow", "-"]);
    let out = with_stdin_bytes(cmd, bytes);
    assert_eq!(out.status.code(), Some(2), "stdin");
    assert!(String::from_utf8_lossy(&out.stderr).contains("UTF-8"));
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("in.json");
    std::fs::write(&file, bytes).expect("write");
    let (mut cmd, _data) = vt_agent();
    let out = cmd.arg("run-flow").arg(&file).output().expect("run");
    assert_eq!(out.status.code(), Some(2), "file");
}

#[test]
fn the_exit_code_follows_the_flow_status() {
    for (card, recarga, status, code) in [
        ("1234567890", "", "concluido", 0),
        ("12ab", "", "falhou", 3),
        ("3333333333", "", "falhou", 3),
        (
            "7777777777",
            r#", "recarga": {"valor": 50, "meio_pagamento": {"tipo": "pix"}}"#,
            "falhou",
            3,
        ),
        (
            "6666666666",
            r#", "recarga": {"valor": 50, "meio_pagamento": {"tipo": "pix"}}"#,
            "pendente",
            3,
        ),
    ] {
        let (mut cmd, _data) = vt_agent();
        cmd.args(["run-flow", "-", "--compact"]);
        let out = with_stdin(cmd, &format!(r#"{{"cartao": "{card}"{recarga}}}"#));
        assert_eq!(out.status.code(), Some(code), "{card}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the JSON is still printed");
        assert_eq!(v["status"], status, "{card}");
    }
}

#[test]
fn an_interrupted_run_is_listed_and_cards_stay_masked() {
    let (mut cmd, data) = vt_agent();
    let out = with_stdin(
        {
            cmd.args(["run-flow", "-"]);
            cmd
        },
        r#"{"cartao": "1234567890", "recarga": {"valor": 50, "meio_pagamento": {"tipo": "pix"}}}"#,
    );
    assert!(out.status.success());
    let list = vt_agent_in(&data).arg("flows").output().expect("run");
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.contains("concluido") && text.contains("aprovada") && text.contains("****7890"),
        "{text}"
    );
    assert!(!text.contains("1234567890"), "{text}");

    // One run whole: its stages, cards masked, its id whole.
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let id = v["execucao_id"].as_str().expect("an id").to_owned();
    let one = vt_agent_in(&data)
        .args(["flows", "--id", &id])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&one.stdout);
    assert!(one.status.success(), "{}", String::from_utf8_lossy(&one.stderr));
    assert!(
        text.contains(&id) && text.contains("rf07_executar_recarga") && text.contains("****7890"),
        "{text}"
    );
    assert!(!text.contains("1234567890"), "{text}");
    let missing = vt_agent_in(&data)
        .args(["flows", "--id", "exec_que_nao_existe"])
        .output()
        .expect("run");
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn chat_answers_every_line_of_a_pipe_even_blank_and_broken_ones() {
    let (mut cmd, _data) = vt_agent();
    cmd.arg("chat");
    let out = with_stdin_bytes(cmd, b"oi\n\nsaldo \xff\xfe 1111111111\nqual meu saldo\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let blocks: Vec<&str> = text.split("\n\n").filter(|b| !b.trim().is_empty()).collect();
    assert_eq!(blocks.len(), 4, "one reply block per line: {text}");
    assert!(blocks[1].contains("Não recebi nenhum texto"), "{text}");
    assert!(
        blocks[2].contains("Não consegui ler parte da sua mensagem"),
        "{text}"
    );
    assert!(
        !text.contains("12,50"),
        "a message with unreadable bytes is not acted on: {text}"
    );
}

#[test]
fn a_one_shot_chat_tells_its_conversation_id_so_a_later_message_can_answer() {
    let data = tempfile::tempdir().expect("tmp");
    let first = vt_agent_in(&data)
        .args(["chat", "-m", "recarrega 50 no 2345678901 via pix"])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&first.stderr);
    let id = stderr
        .split("--conversation ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("the id is told")
        .trim()
        .to_owned();
    assert!(String::from_utf8_lossy(&first.stdout).contains("Confirma a recarga"));
    let second = vt_agent_in(&data)
        .args(["chat", "--conversation", &id, "-m", "sim"])
        .output()
        .expect("run");
    // With no configuration the embedded simulator is the Pix provider, and it pays by itself: the
    // code (a valid BR Code of the amount, on its own line), then the receipt.
    let reply = String::from_utf8_lossy(&second.stdout);
    let code = reply
        .lines()
        .find(|l| l.starts_with("000201"))
        .unwrap_or_else(|| panic!("the code on a line of its own: {reply}"));
    vt_domain::pix::BrCode::checked(code, rust_decimal::dec!(50)).expect("a valid code of 50");
    assert!(
        reply.contains("Pagamento recebido e recarga feita: R$ 50,00 no cartão ****8901"),
        "{reply}"
    );
    assert!(
        reply.find("000201") < reply.find("Pagamento recebido"),
        "the receipt after the code: {reply}"
    );
}

#[test]
fn chat_reads_line_by_line_from_a_pipe() {
    let (mut cmd, _data) = vt_agent();
    cmd.arg("chat");
    let out = with_stdin(cmd, "oi\nqual meu saldo\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let blocks: Vec<&str> = text.split("\n\n").filter(|b| !b.trim().is_empty()).collect();
    assert_eq!(blocks.len(), 2, "one reply block per line: {text}");
}

#[test]
fn help_lists_every_command() {
    let (mut cmd, _data) = vt_agent();
    let out = cmd.arg("--help").output().expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    for cmd in [
        "chat",
        "run-flow",
        "flows",
        "serve",
        "outbox",
        "cases",
        "recorrencias",
        "audit",
        "simulator",
    ] {
        assert!(text.contains(cmd), "{cmd} missing from --help");
    }
    let (mut cmd, _data) = vt_agent();
    let out = cmd.args(["run-flow", "--help"]).output().expect("run");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("2 invalid input") && help.contains("3 `pendente` or `falhou`"),
        "{help}"
    );
}

#[test]
fn chat_resumes_a_stored_conversation_and_usage_counts_it() {
    let data = tempfile::tempdir().expect("tmp");
    let first = vt_agent_in(&data)
        .args(["chat", "--conversation", "c-cli", "--message", "oi"])
        .output()
        .expect("run");
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(String::from_utf8_lossy(&first.stderr).contains("começando uma nova"));
    let second = vt_agent_in(&data)
        .args(["chat", "--conversation", "c-cli", "--message", "de novo"])
        .output()
        .expect("run");
    assert!(second.status.success());
    assert!(
        second.stderr.is_empty(),
        "the second process finds the conversation: {}",
        String::from_utf8_lossy(&second.stderr)
    );
    let flow = vt_agent_in(&data)
        .args(["run-flow", "examples/recarga-saldo-baixo.json"])
        .output()
        .expect("run");
    assert!(flow.status.success());
    let usage = vt_agent_in(&data).arg("usage").output().expect("run");
    let table = String::from_utf8_lossy(&usage.stdout);
    let total = table.lines().last().unwrap_or_default();
    assert!(
        total.starts_with("total") && total.contains(" 3 ") && total.contains("100%"),
        "{table}"
    );
    // No model: every turn costs exactly nothing, per day and tenant.
    let costs = vt_agent_in(&data)
        .args(["usage", "--custos", "--dias", "1"])
        .output()
        .expect("run");
    assert!(costs.status.success());
    let table = String::from_utf8_lossy(&costs.stdout);
    assert!(
        table.lines().next().is_some_and(|h| h.contains("por conversa")),
        "{table}"
    );
    let total = table.lines().last().unwrap_or_default();
    assert!(
        total.starts_with("total") && total.contains("R$ 0") && total.trim_end().ends_with(" 0"),
        "{table}"
    );
    // The flow run is counted under its input's tenant: one run, no paid notice, R$ 0 a flow.
    let cells_of = |line: &'_ str| -> Vec<String> {
        line.split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let header = cells_of(table.lines().next().unwrap_or_default());
    let cells = cells_of(
        table
            .lines()
            .find(|l| l.contains("EMPRESA_X"))
            .unwrap_or_default(),
    );
    let cell = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .and_then(|i| cells.get(i))
            .map(String::as_str)
    };
    assert_eq!(
        (cell("fluxos"), cell("por fluxo")),
        (Some("1"), Some("R$ 0")),
        "{table}"
    );
    // Outcomes are recorded by `serve`'s sweep: none here yet, and the command says so.
    let endings = vt_agent_in(&data)
        .args(["usage", "--desfechos", "--dias", "1"])
        .output()
        .expect("run");
    assert!(endings.status.success());
    assert!(
        String::from_utf8_lossy(&endings.stdout).starts_with("Nenhum atendimento terminado desde"),
        "{}",
        String::from_utf8_lossy(&endings.stdout)
    );
    let bad = vt_agent_in(&data)
        .args(["usage", "--custos", "--dias", "0"])
        .output()
        .expect("run");
    assert_eq!(bad.status.code(), Some(2), "a usage error names the flag");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--dias"));
}

#[test]
fn serve_refuses_an_open_public_address_and_stops_cleanly_on_sigterm() {
    let (mut cmd, _data) = vt_agent();
    let out = cmd.args(["serve", "--addr", "0.0.0.0:0"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));

    let data = tempfile::tempdir().expect("tmp");
    let mut child = vt_agent_in(&data)
        .args(["serve", "--addr", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let url = crate::support::listening_on(&mut stderr);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let health = rt.block_on(async { reqwest::get(format!("{url}/healthz")).await.map(|r| r.status()) });
    assert_eq!(health.expect("answered").as_u16(), 200);
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let status = child.wait().expect("exit");
    assert_eq!(status.code(), Some(0), "a graceful stop exits 0");
}

#[test]
fn the_outbox_command_lists_dead_letters_and_retries_one() {
    use vt_store::records::NewOutboxItem;
    use vt_store::records::OutboxStatus;
    let data = tempfile::tempdir().expect("tmp");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let id = rt.block_on(async {
        crate::support::test_keys();
        let store = vt_store::open(None, data.path(), vt_store::Usage::Service)
            .await
            .expect("store");
        let now = chrono::Utc::now();
        let id = store
            .enqueue(
                &NewOutboxItem {
                    kind: "reply".into(),
                    destination: "whatsapp".into(),
                    payload: crate::support::reply_payload(
                        "c-1",
                        "5511999990000",
                        "Saldo do cartão 1234567890",
                    ),
                    max_attempts: 5,
                    next_attempt_at: now,
                    conversation_id: Some("c-1".into()),
                    status: OutboxStatus::Pending,
                },
                now,
            )
            .await
            .expect("enqueue");
        store
            .claim(1, now, chrono::Duration::seconds(30))
            .await
            .expect("claim");
        store
            .dead_letter(id, "131047: fora da janela de 24 h")
            .await
            .expect("dead");
        id
    });
    let list = vt_agent_in(&data).arg("outbox").output().expect("run");
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.contains("131047") && text.contains("whatsapp"), "{text}");
    assert!(
        text.contains("****7890") && !text.contains("1234567890"),
        "{text}"
    );
    let retry = vt_agent_in(&data)
        .args(["outbox", "--retry", &id.to_string()])
        .output()
        .expect("run");
    assert!(
        retry.status.success(),
        "{}",
        String::from_utf8_lossy(&retry.stderr)
    );
    let again = vt_agent_in(&data)
        .args(["outbox", "--retry", &id.to_string()])
        .output()
        .expect("run");
    assert_eq!(again.status.code(), Some(2), "no longer a dead letter");
}

#[test]
fn the_audit_command_lists_lookups_masked() {
    let data = tempfile::tempdir().expect("tmp");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        crate::support::test_keys();
        let store = vt_store::open(None, data.path(), vt_store::Usage::Service)
            .await
            .expect("store");
        store
            .record_audit(&vt_store::records::AuditRecord {
                at: chrono::Utc::now(),
                support_user: "maria".into(),
                tenant_id: "empresa-a".into(),
                channel: "mattermost".into(),
                cartao: "****7890".into(),
                cartao_hash: "ab".repeat(32),
                outcome: "saldo_informado".into(),
                conversation_id: None,
            })
            .await
            .expect("audit");
    });
    let out = vt_agent_in(&data).arg("audit").output().expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        text.contains("maria") && text.contains("****7890") && text.contains("saldo_informado"),
        "{text}"
    );
}

/// `vt-agent cases` after a transfer in the terminal: the case waits, with its reason; no full card.
#[test]
fn a_transfer_in_the_terminal_is_a_case_the_cases_command_lists() {
    let (_, data) = vt_agent();
    let chat = vt_agent_in(&data)
        .args([
            "chat",
            "-m",
            "quero falar com um atendente sobre o cartão 1234567890",
        ])
        .output()
        .expect("run");
    assert!(chat.status.success(), "{}", String::from_utf8_lossy(&chat.stderr));
    let list = vt_agent_in(&data).arg("cases").output().expect("run");
    assert!(list.status.success());
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.contains("aguardando") && text.contains("terminal"), "{text}");
    assert!(!text.contains("1234567890"), "{text}");
    let none = vt_agent_in(&data)
        .args(["cases", "--tenant", "outro"])
        .output()
        .expect("run");
    assert!(String::from_utf8_lossy(&none.stdout).contains("Nenhum atendimento"));
}

/// `[pix.automatico]` written alone turns automatic recharges on against the embedded simulator: the
/// terminal asks for one and `vt-agent recorrencias` lists it, waiting for the bank, card masked.
#[test]
fn an_automatic_recharge_asked_in_the_terminal_is_listed_by_recorrencias() {
    let (_, data) = vt_agent();
    let config = data.path().join("vt-agent.toml");
    std::fs::write(&config, "[pix.automatico]\nativo = true\n").expect("config");
    let empty = vt_agent_in(&data)
        .env("VT_CONFIG", &config)
        .arg("recorrencias")
        .output()
        .expect("run");
    assert!(empty.status.success());
    assert!(String::from_utf8_lossy(&empty.stdout).contains("Nenhuma recarga automática"));
    let chat = vt_agent_in(&data)
        .env("VT_CONFIG", &config)
        .args(["chat", "-m", "recarrega 100 todo dia 5 no 1234567890"])
        .output()
        .expect("run");
    let said = String::from_utf8_lossy(&chat.stdout);
    assert!(chat.status.success(), "{}", String::from_utf8_lossy(&chat.stderr));
    assert!(
        said.contains("autorize o Pix Automático") && said.contains("br.gov.bcb.pix"),
        "{said}"
    );
    let list = vt_agent_in(&data)
        .env("VT_CONFIG", &config)
        .arg("recorrencias")
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.contains("****7890") && text.contains("todo dia 5") && text.contains("criada"),
        "{text}"
    );
    assert!(!text.contains("1234567890"), "{text}");
}

/// A WhatsApp template file that cannot be used stops `serve` at once, naming the file and the field.
#[test]
fn serve_refuses_a_bad_template_file_naming_its_field() {
    let data = tempfile::tempdir().expect("tmp");
    let templates = data.path().join("modelos");
    std::fs::create_dir_all(&templates).expect("dir");
    std::fs::write(
        templates.join("saldo.toml"),
        "name = \"saldo_baixo_v1\"\nlanguage = \"pt_BR\"\ncategory = \"UTILITY\"\npurpose = \"promocao\"\n\
         parameters = [\"saldo\"]\npreview = \"Saldo {{saldo}}\"\n",
    )
    .expect("write");
    let out = vt_agent_in(&data)
        .env("VT_TEMPLATES_DIR", &templates)
        .env("VT_WHATSAPP_PHONE_NUMBER_ID", "106540352242922")
        .env("VT_WHATSAPP_ACCESS_TOKEN", "EAAtesttokenvalue0123456789")
        .env("VT_WHATSAPP_APP_SECRET", "segredo-do-app")
        .env("VT_WHATSAPP_VERIFY_TOKEN", "vibecoding")
        .args(["serve", "--addr", "127.0.0.1:0"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("saldo.toml") && err.contains("campo purpose"),
        "{err}"
    );
    assert!(!err.contains("EAAtest"), "no token in the error: {err}");
}

/// `vt-agent optins import FILE`: a bad row names its line and column and records nothing; a good file
/// records every row.
#[test]
fn optins_import_checks_every_row_first() {
    let data = tempfile::tempdir().expect("tmp");
    let file = data.path().join("optins.csv");
    std::fs::write(
        &file,
        "telefone,origem,em\n5511999990000,site,2026-11-01T10:00:00Z\n5511999990001,,2026-11-01T10:00:00Z\n",
    )
    .expect("write");
    let out = vt_agent_in(&data)
        .args(["optins", "import"])
        .arg(&file)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("linha 3, origem"), "{err}");
    std::fs::write(
        &file,
        "telefone,origem,em\n5511999990000,site,2026-11-01T10:00:00Z\n5511999990001,loja,2026-11-02T10:00:00Z\n",
    )
    .expect("write");
    let out = vt_agent_in(&data)
        .args(["optins", "import"])
        .arg(&file)
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("2 opt-in(s) registrado(s)"));
}

/// The shipped example batch runs as it is: three lines, each `concluido`.
#[test]
fn the_example_batch_file_runs() {
    let data = tempfile::tempdir().expect("tmp");
    let out = vt_agent_in(&data)
        .args(["batch", "examples/lote.csv"])
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 3);
    assert!(lines.iter().all(|l| l["status"] == "concluido"), "{lines:?}");
}
