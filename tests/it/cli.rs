//! The binary itself: the README's run command, exit codes and `--help`.

use std::io::Write;
use std::process::{Command, Stdio};

/// The binary, run from the checkout (for `examples/`, `skills/`, `prompts/`) with its data in a
/// fresh temporary directory that lives as long as the returned guard.
fn vt_agent_in(data: &tempfile::TempDir) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vt-agent"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("VT_")) {
        cmd.env_remove(k);
    }
    cmd.env("VT_DATA_DIR", data.path());
    cmd
}

fn vt_agent() -> (Command, tempfile::TempDir) {
    let data = tempfile::tempdir().expect("tmp");
    (vt_agent_in(&data), data)
}

fn with_stdin(mut cmd: Command, input: &str) -> std::process::Output {
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
        .write_all(input.as_bytes())
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
    ] {
        let (mut cmd, _data) = vt_agent();
        cmd.args(["run-flow", "-"]);
        let out = with_stdin(cmd, input);
        assert_eq!(out.status.code(), Some(2), "{input:.40}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(expected), "{err}");
        assert!(out.stdout.is_empty());
    }
    let (mut cmd, _data) = vt_agent();
    let out = cmd.args(["run-flow", "nao-existe.json"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
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
    for cmd in ["chat", "run-flow", "simulator"] {
        assert!(text.contains(cmd), "{cmd} missing from --help");
    }
    let (mut cmd, _data) = vt_agent();
    let out = cmd.args(["run-flow", "--help"]).output().expect("run");
    assert!(String::from_utf8_lossy(&out.stdout).contains("exits with code 2"));
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
}
