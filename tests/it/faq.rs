//! The operator's FAQ (`faq/`): the router answers the questions of `tests/fixtures/faq/perguntas.yaml`
//! with their entry at level 1 (zero tokens), and reads the router's corpus (requests, not questions)
//! as well as without a FAQ.

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use vt_actions::faq::Faq;
use vt_agent::engine::{Conversation, Participant};
use vt_agent::router::{Route, Router};

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
    let intents = vt_agent::router::intents::load_file(&root().join("intents/default.toml")).expect("intents");
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
            misses.push(format!("{:?}: want {:?}, got {got:?} ({})", q.texto, q.faq, d.intent));
        }
    }
    for m in &misses {
        println!("  miss: {m}");
    }
    assert!(misses.is_empty(), "{} misses of {}", misses.len(), questions.len());
}

/// The FAQ takes nothing level 1 read right before: the router's corpus scores as it did.
#[tokio::test]
async fn with_the_faq_the_router_corpus_is_read_as_meant() {
    let corpus = vt_agent::router::corpus::load(&root().join("tests/fixtures/router/corpus.yaml")).expect("corpus");
    let score = vt_agent::router::corpus::score(&router(default_faq()), &corpus).await;
    for miss in &score.misses {
        println!("  miss: {miss}");
    }
    assert!(score.intent_accuracy() >= 0.90, "{}", score.summary());
    assert_eq!(score.menu_answers, 0, "{}", score.summary());
}

#[test]
fn a_broken_entry_is_named_with_its_file() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("ok.md"), "# Título\npalavras-chave: a\n\nResposta.").expect("write");
    std::fs::write(dir.path().join("quebrada.md"), "sem título\n").expect("write");
    let err = Faq::load(dir.path()).expect_err("a file without a title");
    assert!(err.to_string().contains("quebrada.md"), "{err}");
    assert!(Faq::load(&dir.path().join("nenhuma")).expect("missing folder").is_empty());
}
