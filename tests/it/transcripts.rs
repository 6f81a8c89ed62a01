//! The transcript runner itself: mismatches are reported clearly, cassettes record and replay (and a
//! changed request fails loudly), an exported conversation replays green, and the CLI writes JUnit.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use vt_agent::Transcript;
use vt_agent::testkit::{Expect, Setup, Turn};
use vt_agent::testkit::{RunOptions, run_transcript};
use vt_domain::tools::VtSettings;
use vt_engine::llm::LlmProvider;
use vt_engine::llm::ProviderSettings;
use vt_engine::llm::openai::OpenAiProvider;
use vt_engine::llm::scripted::Scripted;
use vt_engine::llm::scripted::ScriptedProvider;

use crate::support::{FakeServer, chat_harness};

fn transcript(turns: Vec<Turn>) -> Transcript {
    Transcript {
        name: "t".into(),
        turns,
        ..Transcript::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mismatch_names_the_turn_and_shows_both_sides() {
    let t = transcript(vec![
        Turn {
            user: "saldo 1234567890".into(),
            ..Turn::default()
        },
        Turn {
            user: "saldo 1111111111".into(),
            expect: Expect {
                reply_contains: vec!["R$ 99,00".into()],
                ..Expect::default()
            },
            ..Turn::default()
        },
    ]);
    let report = run_transcript(&t, Path::new("x.yaml"), &RunOptions::default()).await;
    assert!(!report.passed);
    let m = report.failure.expect("a mismatch");
    assert_eq!(m.turn, Some(2));
    assert_eq!(m.what, "reply contains");
    assert!(
        m.expected.contains("R$ 99,00") && m.actual.contains("R$ 12,50"),
        "{m}"
    );
    assert!(m.to_string().contains("turn 2 (\"saldo 1111111111\")"), "{m}");
    assert_eq!(report.turns.len(), 2, "the report keeps the turns that ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassettes_record_redacted_and_replay_by_fingerprint() {
    let dir = tempfile::tempdir().expect("tmp");
    let completion = |text: &str| {
        json!({"id": "c", "object": "chat.completion", "created": 1, "model": "gpt-teste",
               "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
               "usage": {"prompt_tokens": 50, "completion_tokens": 3, "total_tokens": 53}})
    };
    let fake = FakeServer::start(vec![
        (200, vec![], completion("general_chat")),
        (200, vec![], completion("Não vejo problema no cartão ****7890.")),
    ])
    .await;
    let real: Arc<dyn LlmProvider> = Arc::new(
        OpenAiProvider::new(ProviderSettings {
            base_url: fake.url.clone(),
            model: "gpt-teste".into(),
            api_key: Some("sk-segredo-de-teste-123".into()),
            temperature: None,
            max_tokens: 200,
            timeout: std::time::Duration::from_secs(5),
        })
        .expect("provider"),
    );
    let t = Transcript {
        name: "gravada".into(),
        setup: Setup {
            model: Some("cassette".into()),
            cassette: Some("cassettes/gravada.yaml".into()),
            ..Setup::default()
        },
        turns: vec![Turn {
            user: "meu cartão 1234567890 tem algum problema?".into(),
            expect: Expect {
                reply: Some("Não vejo problema no cartão ****7890.".into()),
                model_calls: Some(1),
                ..Expect::default()
            },
            ..Turn::default()
        }],
        ..Transcript::default()
    };
    let path = dir.path().join("gravada.yaml");
    let record = RunOptions {
        record: true,
        record_with: Some(real),
        ..RunOptions::default()
    };
    let recorded = run_transcript(&t, &path, &record).await;
    assert!(recorded.passed, "{:?}", recorded.failure);
    assert_eq!(
        fake.received().len(),
        2,
        "classification and answer came from the model"
    );
    let cassette =
        std::fs::read_to_string(dir.path().join("cassettes/gravada.yaml")).expect("cassette written");
    assert!(
        !cassette.contains("1234567890"),
        "card numbers are masked in the cassette"
    );
    assert!(!cassette.contains("sk-segredo"), "no secret in the cassette");

    // Replay: no model server involved.
    let replayed = run_transcript(&t, &path, &RunOptions::default()).await;
    assert!(replayed.passed, "{:?}", replayed.failure);
    assert_eq!(fake.received().len(), 2);

    // A changed request finds no recording and says what changed.
    let mut changed = t.clone();
    changed.turns[0].user = "meu cartão 1234567890 vale no metrô?".into();
    let missed = run_transcript(&changed, &path, &RunOptions::default()).await;
    let m = missed.failure.expect("a cassette miss");
    assert_eq!(m.what, "cassette miss");
    assert!(m.actual.contains("messages[0] changed"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_conversation_replays_green() {
    let llm = Arc::new(ScriptedProvider::new([]));
    let h = chat_harness(Some(llm.clone()), VtSettings::default()).await;
    h.say("exp", "saldo 1234567890").await;
    llm.push([
        Scripted::text("general_chat"),
        Scripted::text("VT é transporte; VR é refeição."),
    ]);
    h.say("exp", "qual a diferença entre VT e VR?").await;
    // The same question again is classified from the cache: no micro call, in the replay too.
    llm.push([Scripted::text("Como eu disse: VT transporte, VR refeição.")]);
    h.say("exp", "Qual a diferença entre VT e VR?").await;
    llm.push([
        Scripted::text("general_chat"),
        Scripted::tool(
            "notificar",
            json!({"assunto": "Lembrete", "mensagem": "Recarregar"}),
        ),
        Scripted::text("Lembrete enviado."),
    ]);
    h.say("exp", "me manda um lembrete para amanhã").await;
    h.say("exp", "recarrega 50 no 1234567890 via pix").await;
    h.say("exp", "sim").await;
    h.say("exp", "tchau").await;

    let exported = vt_agent::testkit::export_transcripts(h.store.as_ref(), "exp")
        .await
        .expect("export");
    assert_eq!(exported.turns.len(), 7);
    assert_eq!(exported.turns[1].classify.as_deref(), Some("general_chat"));
    assert_eq!(
        exported.turns[2].classify, None,
        "answered from the classification cache"
    );
    assert_eq!(exported.turns[3].model.len(), 2, "tool call, then text");
    crate::support::assert_replays_green(&exported).await;
}

#[test]
fn the_cli_reports_failures_and_writes_junit() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(
        dir.path().join("a_ok.yaml"),
        "name: passa\nturns:\n  - user: oi\n    expect: {intent: ajuda}\n",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("b_falha.yaml"),
        "name: falha\nturns:\n  - user: oi\n    expect: {reply: \"outra coisa\"}\n",
    )
    .expect("write");
    let junit = dir.path().join("out.xml");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vt-agent"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("VT_DATA_DIR", dir.path())
        .args([
            "test",
            dir.path().to_str().expect("utf-8"),
            "--junit",
            junit.to_str().expect("utf-8"),
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ok    passa") && stdout.contains("FAIL  falha"),
        "{stdout}"
    );
    assert!(stdout.contains("expected: \"outra coisa\""), "{stdout}");
    assert!(
        stdout.trim_end().ends_with("transcrições: 1 passou, 1 falhou"),
        "{stdout}"
    );
    let xml = std::fs::read_to_string(&junit).expect("junit written");
    assert!(
        xml.contains("tests=\"2\" failures=\"1\"") && xml.contains("<failure message="),
        "{xml}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misspelled_override_is_a_setup_error() {
    let mut t = transcript(vec![Turn {
        user: "oi".into(),
        ..Turn::default()
    }]);
    t.setup.engine.insert("max_model_cals".into(), json!(3));
    let m = run_transcript(&t, Path::new("x.yaml"), &RunOptions::default())
        .await
        .failure
        .expect("refused");
    assert_eq!(m.what, "setup: engine");
    assert!(m.actual.contains("max_model_cals"), "{m}");
}
