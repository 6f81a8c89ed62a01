//! The web chat's configuration and answers: a bad section refused naming its field, the framework's
//! refusals as the API's JSON, the satisfaction scale as quick replies, a support agent's proposal with
//! its buttons.

use crate::support::chat_harness_paying;
use crate::webchat::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// `vt-agent config check` on a file of `toml`.
pub(crate) fn config_check(toml: &str) -> std::process::Output {
    let (mut cmd, data) = crate::cli::vt_agent();
    let file = data.path().join("site.toml");
    std::fs::write(&file, toml).expect("write");
    cmd.arg("--config")
        .arg(&file)
        .args(["config", "check"])
        .output()
        .expect("run")
}

#[test]
fn a_bad_web_chat_section_is_refused_when_loaded_naming_its_field_never_its_value() {
    let site = "[[webchat.clientes]]\ntenant = \"acme\"\n";
    let out = config_check(&format!("{site}origens = [\"https://www.acme.com.br/chat\"]\n"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("webchat.clientes[0].origens"), "{err}");
    let out = config_check(&format!(
        "{site}origens = [\"https://www.acme.com.br\"]\nchave_usuario = \"curta-e-secreta\"\n"
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("webchat.clientes[0].chave_usuario") && !err.contains("curta-e-secreta"),
        "{err}"
    );
    let out = config_check(&format!(
        "{site}origens = [\"https://www.acme.com.br\"]\nnome = \"Acme\"\n"
    ));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The framework's own refusals (a body over the route's limit, a query parameter of the wrong type)
/// come in the API's JSON error, pt-BR, naming the field — they were `text/plain` in English.
#[tokio::test]
async fn the_frameworks_refusals_come_as_the_apis_json_errors() {
    let origin = "http://localhost:8124";
    let chat = Arc::new(chat_harness_paying().await);
    let s = serve(chat.clone(), &webchat(origin, 20)).await;
    let mut page = Page::new(&s.url, origin);
    page.open("acme", None).await;
    let long = page
        .post(&json!({"id": "x-longo", "texto": "a".repeat(20_000)}))
        .await;
    assert_eq!(long.status(), 413);
    assert!(
        long.headers()["content-type"]
            .to_str()
            .expect("type")
            .starts_with("application/json")
    );
    let body: Value = long.json().await.expect("a JSON error");
    assert_eq!(body["error"]["code"], "payload_too_large");
    assert_eq!(body["error"]["field"], "corpo");
    let mut r = s
        .client
        .get(format!("{}/webchat/api/eventos?ultimo=abc", s.url))
        .header("origin", origin);
    if let Some(c) = &page.cookie {
        r = r.header("cookie", c);
    }
    let bad = r.send().await.expect("events");
    assert_eq!(bad.status(), 400);
    let body: Value = bad.json().await.expect("a JSON error");
    assert_eq!(body["error"]["field"], "ultimo", "{body}");
    let message = body["error"]["message"].as_str().expect("message");
    assert!(
        !message.contains("abc") && !message.contains("Failed"),
        "{message}"
    );
    assert!(
        page_messages(&chat, &page.conversation_id()).await.is_empty(),
        "nothing stored"
    );
}

/// The satisfaction question reaches the web chat with its 1–5 as quick replies (it came as bare text
/// on 80722d3), and a pick is the score.
#[tokio::test]
async fn the_satisfaction_question_comes_with_its_scale_as_quick_replies() {
    let origin = "http://localhost:8124";
    let chat = Arc::new(chat_harness_paying().await);
    let s = serve(chat.clone(), &webchat(origin, 20)).await;
    let mut page = Page::new(&s.url, origin);
    page.open("acme", None).await;
    page.say("saldo do cartão 1234567890").await;
    let mut stream = page.events(None).await;
    stream.until("R$ 50,00").await;
    chat.clock.set(chat.clock.now() + chrono::Duration::minutes(31));
    assert_eq!(chat.service.outcomes().close_stretches().await, 1);
    let asked = stream.until("Como você avalia").await;
    let question = asked
        .iter()
        .map(|(_, e)| e)
        .find(|e| text(e).contains("Como você avalia"))
        .expect("the question");
    assert_eq!(
        question["escolhas"].as_array().map(Vec::len),
        Some(5),
        "{question}"
    );
    let picked = page
        .post(&json!({"id": "nota-1", "texto": "5 · Ótimo", "escolha": 4}))
        .await;
    assert_eq!(picked.status(), 200);
    // The thanks arrive on the stream, as every answer does.
    let thanked = stream.until("Obrigado pela avaliação").await;
    assert!(!thanked.is_empty());
}

/// A recharge a support agent proposes reaches the web chat with Confirmar / Cancelar under it (on
/// 80722d3 it came as text alone), and the person's tap confirms it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_support_agents_proposal_reaches_the_web_chat_with_its_buttons() {
    let origin = "http://localhost:8124";
    let chat = Arc::new(chat_harness_paying().await);
    let s = serve(chat.clone(), &webchat(origin, 20)).await;
    let mut page = Page::new(&s.url, origin);
    page.open("acme", None).await;
    page.say("saldo do cartão 1234567890").await;
    page.say("quero falar com um atendente").await;
    let conv = page.conversation_id();
    let case = chat
        .store
        .open_case_of(&conv)
        .await
        .expect("read")
        .expect("a case");
    let agent = vt_agent::testkit::SupportAgent {
        login: "carla",
        name: "Carla",
        tenant: None,
    };
    chat.service
        .cases()
        .claim_case(&case.id, agent)
        .await
        .expect("claim");
    let mut stream = page.events(None).await;
    stream.until_quiet(Duration::from_millis(500)).await;
    let proposal = vt_agent::testkit::Proposal::parse("20 1234567890 pix").expect("a proposal");
    chat.service
        .cases()
        .propose_recharge(&case.id, agent, &proposal)
        .await
        .expect("proposed");
    let came = stream.until("Confirma").await;
    let (_, asked) = came
        .iter()
        .find(|(_, e)| text(e).contains("Confirma"))
        .expect("the question");
    let buttons = asked["botoes"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        buttons.iter().map(|b| b["titulo"].clone()).collect::<Vec<_>>(),
        [json!("Confirmar"), json!("Cancelar")],
        "{asked}"
    );
    assert_eq!(chat.recharges(), 0, "a proposal moves no money");
    let tapped = page
        .post(&json!({"id": "toque-1", "texto": "Confirmar", "toque": buttons[0]["toque"]}))
        .await;
    assert_eq!(tapped.status(), 200);
    let after: Value = tapped.json().await.expect("json");
    assert_eq!(after["botoes"], json!([]), "{after}");
    let again = page
        .post(&json!({"id": "toque-2", "texto": "Confirmar", "toque": buttons[0]["toque"]}))
        .await;
    assert_eq!(again.status(), 200);
    let charges = chat.store.conversation_charges(&conv).await.expect("charges");
    assert_eq!(charges.len(), 1, "one Pix charge, however often it is tapped");
    assert_eq!(chat.recharges(), 0, "no money before the Pix is paid");
}
