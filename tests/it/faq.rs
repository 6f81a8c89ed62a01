//! The operator's FAQ (`faq/`): the questions of `tests/fixtures/faq/perguntas.yaml` clearly match
//! their entry at level 1, and no message of the router's corpus (requests, not questions) is taken
//! for a FAQ question.

use std::path::Path;

use serde::Deserialize;
use vt_actions::faq::Faq;

#[derive(Deserialize)]
struct Pergunta {
    texto: String,
    faq: Option<String>,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn default_faq() -> Faq {
    Faq::load(&root().join("faq")).expect("the default FAQ loads")
}

#[test]
fn the_default_faq_answers_the_questions_people_ask_and_nothing_else() {
    let faq = default_faq();
    assert!(faq.entries().len() >= 10, "a FAQ, not a stub");
    let text = std::fs::read_to_string(root().join("tests/fixtures/faq/perguntas.yaml")).expect("questions");
    let questions: Vec<Pergunta> = serde_yaml::from_str(&text).expect("yaml");
    let mut misses = Vec::new();
    for q in &questions {
        let got = faq.clear_match(&q.texto).map(|e| e.id.clone());
        if got != q.faq {
            misses.push(format!(
                "{:?}: want {:?}, got {got:?} {:?}",
                q.texto,
                q.faq,
                faq.search(&q.texto, 3)
            ));
        }
    }
    let corpus =
        vt_agent::router::corpus::load(&root().join("tests/fixtures/router/corpus.yaml")).expect("corpus");
    for entry in &corpus {
        if let Some(e) = faq.clear_match(&entry.texto) {
            misses.push(format!(
                "router corpus {:?} taken for FAQ {:?}",
                entry.texto, e.id
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
        questions.len() + corpus.len()
    );
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
