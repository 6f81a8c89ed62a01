//! Improving the answers (step 38), in Chromium: a support agent flags a wrong answer; the reviewer
//! labels it and writes what was expected; the test it becomes fails on this build; the FAQ entry
//! suggested from what agents answered by hand in closed cases, approved, makes it pass — and the
//! queue shows it green after the folder's run. No card or name in clear on the way.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use vt_agent::AppState;
use vt_agent::testkit::{ConsoleConfig, SupportAgent};

use crate::browser::Browser;
use crate::console::{ADMIN, SECRET, SUPPORT, config};
use crate::support::{ChatHarness, chat_harness_reviewing, serve_state};

/// A question with a card gets no FAQ answer (the router reads a request in it): the card comes first.
const CARD_FIRST: &str = "saldo do cartão 2345678901";
const ASKED: &str = "posso usar o cartão no metrô de outra cidade?";
/// What agents answered by hand, in their own words, in closed cases: the same question each time.
const ANSWERED: [(&str, &str); 3] = [
    (
        "meu vt funciona se eu viajar pra outra cidade?",
        "Não. O cartão vale só nos ônibus e no metrô da cidade onde foi emitido.",
    ),
    (
        "o bilhete vale em outro município?",
        "O cartão só é aceito na rede da sua cidade; em outro município ele não passa.",
    ),
    (
        "uso meu cartão em qualquer cidade do estado?",
        "Só na sua cidade. Fora dela, outro sistema de transporte não lê o cartão.",
    ),
];

fn at(minutes: i64) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-23T13:00:00Z")
        .expect("time")
        .with_timezone(&Utc)
        + Duration::minutes(minutes)
}

/// The repository's FAQ, copied where the test may add to it.
fn faq_copy(dir: &Path) -> PathBuf {
    let faq = dir.join("faq");
    std::fs::create_dir_all(&faq).expect("faq dir");
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("faq")).expect("faq") {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, faq.join(path.file_name().expect("name"))).expect("copy");
    }
    faq
}

/// A card holder asks for a person, then the question; an agent answers it and closes the case.
async fn answered_by_hand(chat: &ChatHarness, n: usize, question: &str, answer: &str) {
    let conversation = format!("c-mao-{n}");
    let start = 10 + 10 * i64::try_from(n).expect("n");
    chat.clock.set(at(start));
    chat.say(&conversation, "quero falar com um atendente").await;
    chat.clock.set(at(start + 1));
    chat.say(&conversation, question).await;
    let case = chat
        .store
        .open_case_of(&conversation)
        .await
        .expect("read")
        .expect("a case opened");
    let agent = SupportAgent {
        login: "ana",
        name: "Ana",
        tenant: None,
    };
    chat.clock.set(at(start + 2));
    chat.service
        .cases()
        .claim_case(&case.id, agent)
        .await
        .expect("claim");
    chat.service
        .cases()
        .agent_reply(&case.id, agent, answer)
        .await
        .expect("reply");
    chat.clock.set(at(start + 3));
    chat.service
        .cases()
        .close_resolved(&case.id, agent, Some("orientado"), None)
        .await
        .expect("close");
}

async fn run(path: &Path, faq: &Path) -> vt_agent::testkit::TranscriptReport {
    let options = vt_agent::testkit::RunOptions {
        config: vt_agent::Config {
            faq_dir: Some(faq.to_path_buf()),
            ..vt_agent::Config::default()
        },
        ..vt_agent::testkit::RunOptions::default()
    };
    vt_agent::testkit::run_file(path, &options).await
}

/// A console page's HTML, signed in by `cookie`.
async fn html(client: &reqwest::Client, url: String, cookie: &str) -> String {
    let r = client
        .get(url)
        .header("cookie", cookie)
        .send()
        .await
        .expect("page");
    r.text().await.expect("html")
}

/// A console form posted, signed in by `cookie`.
async fn post_form(
    client: &reqwest::Client,
    url: String,
    cookie: &str,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    client
        .post(url)
        .header("cookie", cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(serde_urlencoded::to_string(fields).expect("form"))
        .send()
        .await
        .expect("post")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flagged_answer_becomes_a_red_test_that_the_suggested_faq_entry_turns_green() {
    let tmp = tempfile::tempdir().expect("tmp");
    let faq = faq_copy(tmp.path());
    let tests = tmp.path().join("revisao");
    let chat = Arc::new(chat_harness_reviewing(&faq, &tests).await);
    chat.clock.set(at(0));
    chat.say("c-sinal", CARD_FIRST).await;
    let asked = chat.say("c-sinal", ASKED).await;
    let wrong: Vec<&str> = asked.replies.iter().map(|r| r.text.as_str()).collect();
    let wrong = wrong.join("\n");
    assert!(
        !wrong.contains("cidade onde foi emitido"),
        "this build does not know: {wrong}"
    );
    for (n, (q, a)) in ANSWERED.iter().enumerate() {
        answered_by_hand(&chat, n, q, a).await;
    }
    let state = AppState::new(chat.service.clone(), "vt", config()).with_console(&ConsoleConfig {
        secret: Some(SECRET.into()),
        ..ConsoleConfig::default()
    });
    let s = serve_state(chat.clone(), state).await;
    let base = s.url.as_str();
    let Some(b) = Browser::start_for("revisao").await else {
        return;
    };

    // The support agent flags the bot's answer on the conversation's page.
    b.sign_in(base, SUPPORT).await;
    b.wait_path("/console/fila").await;
    b.client
        .goto(&format!("{base}/console/conversations/c-sinal"))
        .await
        .expect("conversation");
    b.click("li.fala.assistente:last-child details.sinalizar summary")
        .await;
    b.element("li.fala.assistente:last-child option[value='resposta_incompleta']")
        .await
        .click()
        .await
        .expect("reason");
    b.type_into(
        "li.fala.assistente:last-child textarea[name='observacao']",
        "não respondeu se vale em outra cidade; cartão 2345678901",
    )
    .await;
    b.submit("li.fala.assistente:last-child .sinalizar-enviar").await;
    assert_eq!(b.path().await, "/console/conversations/c-sinal");
    assert!(
        b.text("li.fala.assistente:last-child .sinalizada")
            .await
            .contains("Sinalizada")
    );
    b.sign_out().await;
    b.wait_path("/console").await;

    // The reviewer finds it in the queue: the conversation up to the answer, the person's data replaced.
    b.sign_in(base, ADMIN).await;
    b.wait_path("/console/fila").await;
    b.client
        .goto(&format!("{base}/console/revisao"))
        .await
        .expect("queue");
    let queue = b.text("#revisao-abertos").await;
    assert!(
        queue.contains("Sinalizada por atendente") && queue.contains("Resposta incompleta"),
        "{queue}"
    );
    b.click("#revisao-abertos .item-revisao a").await;
    let page = b.source().await;
    assert!(
        !page.contains("2345678901") && !page.contains("maria"),
        "nothing personal in clear"
    );
    assert!(
        b.text("#conversa-revisao")
            .await
            .contains("metrô de outra cidade")
    );
    b.click("#rotular input[value='faltou_informacao']").await;
    b.type_into("#contem", "cidade onde foi emitido").await;
    b.submit("#gerar-teste").await;
    let told = b.text(".aviso.ok").await;
    assert!(told.contains("falha até a resposta ser corrigida"), "{told}");
    let file = b.text("#arquivo-teste").await;
    let written = tests.join(&file);
    let yaml = std::fs::read_to_string(&written).expect("the test is written");
    assert!(!yaml.contains("2345678901") && !yaml.contains("maria"), "{yaml}");
    let red = run(&written, &faq).await;
    assert!(!red.passed, "the test fails on the build that answered wrongly");

    // The suggestion from the agents' answers: three cases, their phrasings; approved with an edit.
    b.client
        .goto(&format!("{base}/console/sugestoes"))
        .await
        .expect("suggestions");
    let section = b.element("section.sugestao").await;
    assert_eq!(
        section.attr("data-casos").await.expect("attr").as_deref(),
        Some("3")
    );
    for summary in b
        .client
        .find_all(fantoccini::Locator::Css("section.sugestao summary"))
        .await
        .expect("summaries")
    {
        summary.click().await.expect("open");
    }
    let suggested = b.text("section.sugestao").await;
    assert!(
        suggested.contains("outro município") && !suggested.contains("2345678901"),
        "{suggested}"
    );
    b.type_into(
        "section.sugestao input[name='titulo']",
        "Posso usar o cartão em outra cidade?",
    )
    .await;
    b.type_into(
        "section.sugestao input[name='palavras']",
        "outra cidade, outro município, viajar, metrô de outra cidade",
    )
    .await;
    b.type_into(
        "section.sugestao textarea[name='resposta']",
        "Não. O cartão vale só nos ônibus e no metrô da cidade onde foi emitido.",
    )
    .await;
    b.submit("section.sugestao .aprovar-sugestao").await;
    let told = b.text(".aviso").await;
    assert!(told.contains("gravada na FAQ"), "{told}");
    assert!(
        b.source().await.contains("id=\"sem-sugestoes\""),
        "an approved suggestion is not offered again"
    );
    let entry = faq.join("posso-usar-o-cartao-em-outra-cidade.md");
    assert!(
        std::fs::read_to_string(&entry)
            .expect("entry")
            .starts_with("# Posso usar o cartão em outra cidade?")
    );

    // The red test is green with the entry, and so is the entry's own proof; the queue says so.
    let green = run(&written, &faq).await;
    assert!(green.passed, "{:?}", green.failure.map(|m| m.to_string()));
    let proof = run(&tests.join("faq-posso-usar-o-cartao-em-outra-cidade.yaml"), &faq).await;
    assert!(proof.passed, "{:?}", proof.failure.map(|m| m.to_string()));
    let reports: Vec<Value> = [&green, &proof]
        .iter()
        .map(|r| serde_json::to_value(r).expect("json"))
        .collect();
    std::fs::write(
        tests.join("resultado.json"),
        serde_json::to_string(&reports).expect("json"),
    )
    .expect("results");
    b.client
        .goto(&format!("{base}/console/revisao"))
        .await
        .expect("queue");
    assert_eq!(b.text("#revisao-feitos .item-revisado .veredito").await, "verde");
    assert!(b.text("#revisao-semanas").await.contains("faltou_informacao 1"));
    b.close().await;
}

/// Over HTTP: what the product enqueues itself (a case opened right after the bot's answer, once however
/// often the queue is read), a flag refused on a message that is not the bot's (naming the field), and
/// another tenant's support agent who cannot flag at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_product_enqueues_a_case_opened_right_after_an_answer_and_a_flag_is_checked() {
    use crate::console::{csrf_of, no_redirects, session};
    let tmp = tempfile::tempdir().expect("tmp");
    let faq = faq_copy(tmp.path());
    let chat = Arc::new(chat_harness_reviewing(&faq, &tmp.path().join("revisao")).await);
    chat.clock.set(at(0));
    chat.say("c-logo", "saldo do cartão 2345678901").await;
    chat.clock.set(at(2));
    chat.say("c-logo", "quero falar com um atendente").await;
    chat.clock.set(at(60));
    chat.say("c-tarde", "saldo do cartão 2345678901").await;
    chat.clock.set(at(90));
    chat.say("c-tarde", "quero falar com um atendente").await;
    let state = AppState::new(chat.service.clone(), "vt", config()).with_console(&ConsoleConfig {
        secret: Some(SECRET.into()),
        ..ConsoleConfig::default()
    });
    let s = serve_state(chat.clone(), state).await;
    let client = no_redirects();
    let admin = session("operacao", 600, SECRET);
    let queue_url = format!("{}/console/revisao", s.url);
    let queue = html(&client, queue_url.clone(), &admin).await;
    assert_eq!(
        queue.matches("Pediu uma pessoa logo depois").count(),
        1,
        "only the case 2 minutes after: {queue}"
    );
    // Read again after another case came right after an answer: that one joins, the first stays one.
    chat.clock.set(at(95));
    chat.say("c-depois", "saldo do cartão 2345678901").await;
    chat.clock.set(at(96));
    chat.say("c-depois", "quero falar com um atendente").await;
    let again = html(&client, queue_url, &admin).await;
    assert_eq!(
        again.matches("class=\"item-revisao\"").count(),
        2,
        "the new one added, the first once: {again}"
    );

    // The support agent's flag: on the card holder's own message it is refused, naming the field.
    let support = session("suporte", 600, SECRET);
    let conversation = html(
        &client,
        format!("{}/console/conversations/c-logo", s.url),
        &support,
    )
    .await;
    let csrf = csrf_of(&conversation);
    let messages = chat.store.messages("c-logo").await.expect("messages");
    let theirs = messages
        .iter()
        .find(|m| matches!(m.message, vt_engine::llm::ChatMessage::User { .. }))
        .expect("a message");
    let refused = post_form(
        &client,
        format!("{}/console/conversations/c-logo/sinalizar", s.url),
        &support,
        &[
            ("csrf", &csrf),
            ("mensagem", &theirs.id.to_string()),
            ("motivo", "outro"),
            ("observacao", ""),
        ],
    )
    .await;
    assert_eq!(refused.status(), 422);
    let said = refused.text().await.expect("html");
    assert!(
        said.contains("mensagem: só uma resposta do assistente pode ser sinalizada"),
        "{said}"
    );
    let reason = post_form(
        &client,
        format!("{}/console/conversations/c-logo/sinalizar", s.url),
        &support,
        &[
            ("csrf", &csrf),
            ("mensagem", &theirs.id.to_string()),
            ("motivo", "<script>"),
            ("observacao", ""),
        ],
    )
    .await;
    let said = reason.text().await.expect("html");
    assert!(
        said.contains("motivo: escolha") && !said.contains("<script>"),
        "the field named, never its value"
    );
}

/// A question the FAQ already answers for most of its phrasings is attached to that entry: the words it
/// missed join the entry's keywords, and its proof passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suggestion_an_entry_already_covers_grows_that_entry() {
    use crate::console::{csrf_of, no_redirects, session};
    let tmp = tempfile::tempdir().expect("tmp");
    let faq = faq_copy(tmp.path());
    let tests = tmp.path().join("revisao");
    let chat = Arc::new(chat_harness_reviewing(&faq, &tests).await);
    let asked = [
        (
            "qual o valor mínimo de uma recarga?",
            "Cada recarga vai de 1 a 1.000 reais; o mínimo é 1 real.",
        ),
        (
            "qual o valor máximo de uma recarga?",
            "Cada recarga vai de 1 a 1.000 reais; o máximo é mil reais.",
        ),
        (
            "tem um valor mínimo pra colocar de crédito?",
            "Cada recarga vai de 1 a 1.000 reais, então o mínimo é 1 real.",
        ),
    ];
    for (n, (q, a)) in asked.iter().enumerate() {
        answered_by_hand(&chat, n, q, a).await;
    }
    let state = AppState::new(chat.service.clone(), "vt", config()).with_console(&ConsoleConfig {
        secret: Some(SECRET.into()),
        ..ConsoleConfig::default()
    });
    let s = serve_state(chat.clone(), state).await;
    let client = no_redirects();
    let admin = session("operacao", 600, SECRET);
    let page = html(&client, format!("{}/console/sugestoes", s.url), &admin).await;
    assert!(
        page.contains("Já coberta pela entrada <code>limites</code>"),
        "{page}"
    );
    let start = page.find("/anexar\"").expect("an attach form");
    let key = &page[page[..start].rfind("/console/sugestoes/").expect("action") + 19..start];
    let csrf = csrf_of(&page);
    let r = post_form(
        &client,
        format!("{}/console/sugestoes/{key}/anexar", s.url),
        &admin,
        &[("csrf", &csrf), ("palavras", "valor mínimo pra colocar, crédito")],
    )
    .await;
    let to = r.headers()["location"].to_str().expect("location").to_owned();
    assert!(to.contains("ok="), "{to}");
    let entry = std::fs::read_to_string(faq.join("limites.md")).expect("entry");
    assert!(entry.contains("valor mínimo pra colocar, crédito"), "{entry}");
    assert!(
        vt_domain::faq::FaqEntry::parse("limites", &entry).is_ok(),
        "the entry still reads"
    );
    let proof = tests.join(format!("faq-limites-{key}.yaml"));
    let report = run(&proof, &faq).await;
    assert!(report.passed, "{:?}", report.failure.map(|m| m.to_string()));
    let after = html(&client, format!("{}/console/sugestoes", s.url), &admin).await;
    assert!(!after.contains("/anexar\""), "decided once, not offered again");
}
