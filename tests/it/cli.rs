//! The binary itself: the README's run command, exit codes and `--help`.

use std::io::Write;
use std::process::{Command, Stdio};

fn vt_agent() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vt-agent"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("VT_")) {
        cmd.env_remove(k);
    }
    cmd
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
    let out = vt_agent()
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
        let mut cmd = vt_agent();
        cmd.args(["run-flow", "-"]);
        let out = with_stdin(cmd, input);
        assert_eq!(out.status.code(), Some(2), "{input:.40}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(expected), "{err}");
        assert!(out.stdout.is_empty());
    }
    let out = vt_agent()
        .args(["run-flow", "nao-existe.json"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn chat_reads_line_by_line_from_a_pipe() {
    let mut cmd = vt_agent();
    cmd.arg("chat");
    let out = with_stdin(cmd, "oi\nqual meu saldo\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let blocks: Vec<&str> = text.split("\n\n").filter(|b| !b.trim().is_empty()).collect();
    assert_eq!(blocks.len(), 2, "one reply block per line: {text}");
}

#[test]
fn help_lists_every_command() {
    let out = vt_agent().arg("--help").output().expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    for cmd in ["chat", "run-flow", "simulator"] {
        assert!(text.contains(cmd), "{cmd} missing from --help");
    }
    let out = vt_agent().args(["run-flow", "--help"]).output().expect("run");
    assert!(String::from_utf8_lossy(&out.stdout).contains("exits with code 2"));
}
