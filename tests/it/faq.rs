//! The operator's FAQ (`faq/`): the router answers the questions of `tests/fixtures/faq/perguntas.yaml`
//! with their entry at level 1 (zero tokens), and reads the router's corpus (requests, not questions)
//! as well as without a FAQ.

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use vt_agent::{Route, Router};
use vt_domain::faq::Faq;
use vt_engine::Participant;
use vt_engine::conversation::Conversation;

#[derive(Deserialize)]
struct Pergunta {
    texto: String,
    faq: Option<String>,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn default_faq() -> Arc<Faq> {
    Arc::new(Faq::load(&root().join("faq")).expect("the default FAQ loads"))
}

fn router(faq: Arc<Faq>) -> Router {
    let intents = vt_agent::testkit::load_file(&root().join("intents/default.toml")).expect("intents");
    Router::new("vt", intents, None).with_faq(Some(faq))
}

#[tokio::test]
async fn the_router_answers_the_questions_people_ask_from_the_faq_and_nothing_else() {
    let faq = default_faq();
    assert!(faq.entries().len() >= 10, "a FAQ, not a stub");
    let router = router(faq.clone());
    let text = std::fs::read_to_string(root().join("tests/fixtures/faq/perguntas.yaml")).expect("questions");
    let questions: Vec<Pergunta> = serde_yaml::from_str(&text).expect("yaml");
    assert!(questions.len() >= 30, "a corpus, not a handful");
    let mut misses = Vec::new();
    for q in &questions {
        let conv = Conversation::new("c".into(), "vt", "atendimento".into(), Participant::default());
        let d = router.route(&q.texto, &conv).await;
        let got = match (&d.route, d.intent.as_str()) {
            (Route::Reply { text }, "faq") => faq
                .entries()
                .iter()
                .find(|e| text.starts_with(&format!("*{}*", e.titulo)))
                .map(|e| e.id.clone()),
            _ => None,
        };
        if got != q.faq {
            misses.push(format!(
                "{:?}: want {:?}, got {got:?} ({})",
                q.texto, q.faq, d.intent
            ));
        }
    }
    for m in &misses {
        println!("  miss: {m}");
    }
    assert!(
        misses.is_empty(),
        "{} misses of {}",
        misses.len(),
        questions.len()
    );
}

/// The FAQ takes nothing level 1 read right before: the router's corpus scores as it did.
#[tokio::test]
async fn with_the_faq_the_router_corpus_is_read_as_meant() {
    let corpus =
        vt_agent::testkit::load_corpus(&root().join("tests/fixtures/router/corpus.yaml")).expect("corpus");
    let score = vt_agent::testkit::score_corpus(&router(default_faq()), &corpus).await;
    for miss in &score.misses {
        println!("  miss: {miss}");
    }
    assert!(score.intent_accuracy() >= 0.90, "{}", score.summary());
    assert_eq!(score.menu_answers, 0, "{}", score.summary());
}

#[test]
fn a_broken_entry_is_named_with_its_file() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(
        dir.path().join("ok.md"),
        "# Título\npalavras-chave: a\n\nResposta.",
    )
    .expect("write");
    std::fs::write(dir.path().join("quebrada.md"), "sem título\n").expect("write");
    let err = Faq::load(dir.path()).expect_err("a file without a title");
    assert!(err.to_string().contains("quebrada.md"), "{err}");
    assert!(
        Faq::load(&dir.path().join("nenhuma"))
            .expect("missing folder")
            .is_empty()
    );
}

/// A model that makes every answer as bad as the small one we tried did: every label
/// `cancelar_recarga`, every answer "nada para cancelar" (the tool itself when it is offered).
struct Stubborn;

#[async_trait::async_trait]
impl vt_engine::llm::LlmProvider for Stubborn {
    fn model(&self) -> &str {
        "teimoso"
    }

    async fn complete(
        &self,
        request: &vt_engine::llm::CompletionRequest,
    ) -> Result<vt_engine::llm::Completion, vt_engine::llm::LlmError> {
        use vt_engine::llm::Completion;
        use vt_engine::llm::StopReason;
        use vt_engine::llm::ToolCall;
        use vt_engine::llm::Usage;
        let offered = request.tools.iter().any(|t| t.name == "cancelar_recarga");
        let already = request
            .messages
            .iter()
            .any(|m| matches!(m, vt_engine::llm::ChatMessage::Tool { .. }));
        let (text, tool_calls) = if request.choice.is_some() {
            (
                Some("{\"intencao\": \"cancelar_recarga\"}".to_owned()),
                Vec::new(),
            )
        } else if offered && !already {
            let call = ToolCall {
                id: "c1".into(),
                name: "cancelar_recarga".into(),
                arguments: "{}".into(),
            };
            (None, vec![call])
        } else {
            (
                Some(
                    "Não há nenhuma recarga esperando confirmação, então não há nada para cancelar."
                        .to_owned(),
                ),
                Vec::new(),
            )
        };
        Ok(Completion {
            model: "teimoso".into(),
            stop_reason: if tool_calls.is_empty() {
                StopReason::EndTurn
            } else {
                StopReason::ToolUse
            },
            text,
            tool_calls,
            usage: Usage::default(),
        })
    }
}

fn eval_options(model: vt_agent::testkit::ModelChoice, compare: bool) -> vt_agent::testkit::EvalOptions {
    vt_agent::testkit::EvalOptions {
        config: vt_agent::Config::default(),
        model,
        model_name: "teste".into(),
        repeat: 1,
        compare,
    }
}

/// `vt-agent eval --scripted`: the cases' own strong-model answers score 100 % — what proves the
/// scoring, not a model.
#[tokio::test]
async fn eval_scores_a_strong_model_at_every_case() {
    let cases = vt_agent::testkit::load_eval_cases(&[root().join("eval")]).expect("cases");
    assert!(cases.len() >= 12, "cases, not a handful");
    let options = eval_options(vt_agent::testkit::ModelChoice::Scripted, false);
    let report = vt_agent::testkit::run_eval(&cases, &options, |_, _| {}).await;
    let total = report.total();
    println!("{}", report.table(false));
    assert_eq!(total.answered_well, total.cases, "{}", report.table(false));
    assert_eq!(report.exit_code(), 0);
}

/// The rule of the model path: a model that answers everything as badly as a weak one did makes no
/// case worse than no model at all, and moves no money — on the conversation cases and the router's
/// corpus (every third message, to keep the test short).
#[tokio::test]
async fn a_bad_model_makes_no_answer_worse_and_moves_no_money() {
    let mut cases = vt_agent::testkit::load_eval_cases(&[root().join("eval")]).expect("cases");
    let corpus = vt_agent::testkit::load_eval_cases(&[root().join("tests/fixtures/router/corpus.yaml")])
        .expect("corpus");
    cases.extend(corpus.into_iter().step_by(3));
    let model = vt_agent::testkit::ModelChoice::Live(Arc::new(Stubborn));
    // The operator's `[llm]` (here a port nobody listens on) is never what "no model" plays with.
    let mut options = eval_options(model, true);
    options.config = vt_agent::Config::from_sources(
        Some("[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\ntimeout_secs = 1\n"),
        "vt-agent.toml",
        &Default::default(),
    )
    .expect("config");
    let report = vt_agent::testkit::run_eval(&cases, &options, |_, _| {}).await;
    assert!(
        report.cases.iter().all(|c| c
            .without_model
            .as_ref()
            .is_some_and(|r| !r.error && r.tokens == 0)),
        "a case played with no model called one"
    );
    let total = report.total();
    println!("{}", report.table(true));
    assert_eq!(total.worse, 0, "{}", report.table(true));
    assert_eq!(total.surprises, 0, "{}", report.table(true));
    assert!(
        total.answered_well_without_model > total.cases / 2,
        "the cases mean something"
    );
    assert_eq!(report.exit_code(), 0);
}
