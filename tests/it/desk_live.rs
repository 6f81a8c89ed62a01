//! The live desk (step 37): in Chromium, agent A of one team sees a case the moment it is offered
//! (no reload) with a notification, answers with a canned answer and Ctrl+Enter, notes and transfers
//! it to agent B of another team, who is told live and reads the note; the first response stays A's.
//! Over HTTP: a desk event written by one instance reaches a console listening on another (SQLite and
//! PostgreSQL), and never a case of another tenant.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use vt_agent::testkit::{ConsoleConfig, Equipe, HandoffConfig};
use vt_agent::{ApiKeyConfig, AppState, HttpConfig, Role, key_hash};
use vt_store::Store;
use vt_store::testkit::PgFixture;

use crate::browser::Browser;
use crate::console::{SECRET, session};
use crate::support::{ChatHarness, Served, chat_harness_handing_off, serve_state};

const ANA: &str = "chave-ana-suporte-123456";
const BIA: &str = "chave-bia-financeiro-123456";
const ADMIN: &str = "chave-admin-mesa-123456";

/// Monday 2026-11-23, 10:00 in São Paulo.
fn monday_10() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-23T13:00:00Z")
        .expect("time")
        .with_timezone(&Utc)
}

fn team(nome: &str, toml: &str) -> Equipe {
    let mut e: Equipe = toml::from_str(&format!("nome = \"{nome}\"\n{toml}")).expect("team");
    e.nome = nome.into();
    e
}

fn teams() -> Vec<Equipe> {
    let sla = "horario = \"seg-sex 08:00-18:00\"\n[sla]\nprimeira_resposta = 30\nresolucao = 240";
    vec![
        team(
            "atendimento",
            &format!("padrao = true\nmembros = [\"ana\"]\natribuicao = \"rodizio\"\n{sla}"),
        ),
        team(
            "financeiro",
            &format!("motivos = [\"pagamento_nao_creditado\"]\nmembros = [\"bia\"]\n{sla}"),
        ),
    ]
}

fn config(tenant_of_bia: &str) -> HttpConfig {
    let key = |name: &str, secret: &str, tenant: &str, role| ApiKeyConfig {
        name: name.into(),
        sha256: key_hash(secret),
        tenant: tenant.into(),
        role,
    };
    HttpConfig {
        api_keys: vec![
            key("ana", ANA, "default", Role::Support),
            key("bia", BIA, tenant_of_bia, Role::Support),
            key("operacao", ADMIN, "default", Role::Admin),
        ],
        ..HttpConfig::default()
    }
}

async fn desk(store: Arc<dyn Store>) -> Arc<ChatHarness> {
    let handoff = HandoffConfig {
        equipes: teams(),
        ..Default::default()
    };
    let h = chat_harness_handing_off(
        store,
        None,
        vt_domain::tools::VtSettings::default(),
        None,
        handoff,
    )
    .await;
    h.clock.set(monday_10());
    Arc::new(h)
}

async fn serve(chat: Arc<ChatHarness>, tenant_of_bia: &str) -> Served {
    let state =
        AppState::new(chat.service.clone(), "vt", config(tenant_of_bia)).with_console(&ConsoleConfig {
            secret: Some(SECRET.into()),
            ..ConsoleConfig::default()
        });
    serve_state(chat, state).await
}

/// The page records the notifications it raises instead of showing them (headless Chromium has no
/// one to show them to), with the permission granted.
async fn record_notifications(b: &Browser) {
    b.client
        .execute(
            "window.__avisos = [];
             window.Notification = function (title, options) { window.__avisos.push(title + ' | ' + options.body); };
             window.Notification.permission = 'granted';",
            vec![],
        )
        .await
        .expect("notification stub");
}

/// Waits (up to 10 s) for `script` to return true; the last value otherwise.
async fn until(b: &Browser, script: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..100 {
        last = b.client.execute(script, vec![]).await.unwrap_or(Value::Null);
        if last == Value::Bool(true) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    last
}

async fn live(b: &Browser) {
    let on = until(b, "return document.body.getAttribute('data-ao-vivo') === 'sim'").await;
    assert_eq!(on, json!(true), "the page listens to the desk's events");
}

async fn keys(b: &Browser, css: &str, text: &str) {
    b.element(css).await.send_keys(text).await.expect("type");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offer_reaches_the_agent_live_and_a_noted_transfer_reaches_the_other_team() {
    let chat = desk(Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    ))
    .await;
    chat.service
        .cases()
        .save_canned(
            "default",
            "operacao",
            "ola",
            None,
            "Olá {nome}! Seu protocolo é {protocolo}; já vejo o cartão {cartao}.",
        )
        .await
        .expect("a canned answer kept");
    chat.say("c-vivo", "saldo do cartão 2345678901").await;
    let s = serve(chat.clone(), "default").await;
    let base = s.url.as_str();
    let Some(a) = Browser::start_for("mesa-a").await else {
        return;
    };
    let Some(b) = Browser::start_for("mesa-b").await else {
        return;
    };
    // Both agents on their queue, listening; the pages record their notifications.
    a.sign_in(base, ANA).await;
    a.wait_path("/console/fila").await;
    assert!(a.text(".presenca").await.contains("na equipe atendimento"));
    record_notifications(&a).await;
    live(&a).await;
    b.sign_in(base, BIA).await;
    b.wait_path("/console/fila").await;
    record_notifications(&b).await;
    live(&b).await;
    a.client
        .execute("window.__mesma_pagina = true", vec![])
        .await
        .expect("mark");

    // The card holder asks for a person; the desk offers the case to ana.
    chat.say("c-vivo", "quero falar com um atendente").await;
    let case = chat
        .store
        .open_case_of("c-vivo")
        .await
        .expect("read")
        .expect("a case");
    let protocol = case.protocol.clone().expect("protocol");
    assert_eq!(chat.service.cases().assign_waiting().await, 1);

    // A's queue shows it without a reload, with a banner and a notification.
    let shown = until(
        &a,
        &format!("return document.getElementById('meus').innerText.includes('{protocol}')"),
    )
    .await;
    assert_eq!(
        shown,
        json!(true),
        "the offered case appears in 'Seus atendimentos'"
    );
    assert_eq!(
        a.client
            .execute("return window.__mesma_pagina === true", vec![])
            .await
            .expect("same page"),
        json!(true),
        "no reload"
    );
    assert!(a.text("#avisos-vivos").await.contains(&protocol));
    let raised: Value = a
        .client
        .execute("return window.__avisos", vec![])
        .await
        .expect("notifications");
    assert_eq!(raised.as_array().map(Vec::len), Some(1), "{raised}");
    assert!(
        raised[0].as_str().unwrap_or_default().contains(&protocol),
        "{raised}"
    );
    let counted = until(
        &a,
        "return document.getElementById('contagem-fila').innerText.startsWith('1 · 1')",
    )
    .await;
    assert_eq!(counted, json!(true), "the menu's count moved");
    // B (another team) was not offered it.
    let b_raised: Value = b
        .client
        .execute("return window.__avisos", vec![])
        .await
        .expect("notifications");
    assert_eq!(b_raised, json!([]));
    a.shot("01-oferta-ao-vivo").await;

    // A opens it from the banner and claims it with the keyboard.
    a.click("#aviso-oferta").await;
    a.wait_path(&format!("/console/cases/{}", case.id)).await;
    a.client
        .execute("window.__antes = true", vec![])
        .await
        .expect("mark");
    a.element("body").await.send_keys("a").await.expect("a");
    let claimed = until(
        &a,
        "return window.__antes === undefined && document.getElementById('situacao').innerText.includes('@ana')",
    )
    .await;
    assert_eq!(claimed, json!(true), "'a' claims the case");

    // A canned answer: "/" and its shortcut, Enter inserts it filled, Ctrl+Enter sends it.
    keys(&a, "#texto", "/ol").await;
    let listed = a.text("#prontas-lista").await;
    assert!(listed.contains("/ola"), "{listed}");
    keys(&a, "#texto", "\u{E007}").await; // Enter: inserted
    let typed: Value = a
        .client
        .execute("return document.getElementById('texto').value", vec![])
        .await
        .expect("value");
    let expected = format!("Olá Maria! Seu protocolo é {protocol}; já vejo o cartão ****8901.");
    assert_eq!(typed, json!(expected));
    a.client
        .execute("window.__antes = true", vec![])
        .await
        .expect("mark");
    keys(&a, "#texto", "\u{E009}\u{E007}").await; // Ctrl+Enter: sent
    let sent = until(
        &a,
        "return window.__antes === undefined && document.readyState === 'complete'",
    )
    .await;
    assert_eq!(sent, json!(true), "Ctrl+Enter sends the reply");
    assert!(a.text(".aviso.ok").await.contains("enviada"));
    let said = chat.store.messages("c-vivo").await.expect("messages");
    let last = said
        .last()
        .expect("a message")
        .message
        .text()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(last, expected, "the card holder reads the filled answer");
    a.shot("02-resposta-pronta").await;

    // An internal note, then a transfer to bia of financeiro with its note.
    keys(&a, "#nota-interna", "Cliente diz que pagou e não foi creditado.").await;
    a.submit("#guardar-nota").await;
    assert!(a.text("#atividade").await.contains("pagou e não foi creditado"));
    a.client
        .execute(
            "document.getElementById('equipe').value = 'financeiro';
             document.getElementById('equipe').dispatchEvent(new Event('change'));
             document.getElementById('agente').value = 'bia';",
            vec![],
        )
        .await
        .expect("pick the team and agent");
    let members = a.text("#agente").await;
    assert!(members.contains("bia (disponível)"), "{members}");
    b.client
        .execute("window.__mesma_pagina = true", vec![])
        .await
        .expect("mark");
    keys(
        &a,
        "#nota-transferencia",
        "Segue para o financeiro conferir o Pix.",
    )
    .await;
    a.submit("#transferir").await;
    assert!(a.text(".aviso.ok").await.contains("bia"));

    // B is told live: the case in their queue, a banner and a notification, no reload.
    let reached = until(
        &b,
        &format!("return document.getElementById('meus').innerText.includes('{protocol}')"),
    )
    .await;
    assert_eq!(reached, json!(true), "the transfer reaches bia's queue live");
    assert_eq!(
        b.client
            .execute("return window.__mesma_pagina === true", vec![])
            .await
            .expect("same page"),
        json!(true)
    );
    // The notification comes with the offer's event, the queue with its own read: either may be first.
    until(&b, "return window.__avisos.length > 0").await;
    let b_raised: Value = b
        .client
        .execute("return window.__avisos", vec![])
        .await
        .expect("notifications");
    assert_eq!(b_raised.as_array().map(Vec::len), Some(1), "{b_raised}");
    b.click("#aviso-oferta").await;
    b.wait_path(&format!("/console/cases/{}", case.id)).await;
    let activity = b.text("#atividade").await;
    for line in [
        "ana assumiu",
        "ana nota interna: Cliente diz que pagou",
        "ana enviou a resposta pronta /ola",
        "Segue para o financeiro conferir o Pix",
        "transferiu para financeiro (@bia)",
    ] {
        assert!(activity.contains(line), "{line} in: {activity}");
    }
    b.shot("03-transferido").await;

    // The first response stays ana's, under atendimento's promise; bia answered nothing yet.
    let month = chrono::NaiveDate::from_ymd_opt(2026, 11, 1).expect("month");
    let report = chat.service.cases().report(None, month).await.expect("report");
    let line = |name: &str| report.agents.iter().find(|l| l.nome == name).cloned();
    let ana = line("atendimento/ana").expect("ana's line");
    assert_eq!(ana.primeira_resposta_mediana, Some(0), "{report:?}");
    assert_eq!((ana.sla_cumpridos, ana.sla_medidos), (1, 1));
    let financeiro = report
        .teams
        .iter()
        .find(|l| l.nome == "financeiro")
        .expect("financeiro");
    assert_eq!(financeiro.primeira_resposta_mediana, None, "{report:?}");
    assert_eq!(financeiro.casos, 1);
    assert_eq!(report.canned, vec![("ola".to_owned(), 1)]);
    // financeiro's own first-response clock started at the transfer.
    let clocks = chat.service.cases().clocks(&case.id).await.expect("clocks");
    let first = clocks
        .primeira_resposta
        .expect("financeiro promises a first response");
    assert!(first.running && !first.stopped, "{first:?}");

    // B closes it with a resolution (the form asks for one).
    b.client
        .execute("document.getElementById('encerrar-caixa').open = true", vec![])
        .await
        .expect("open");
    b.client
        .execute(
            "document.getElementById('resolucao').value = 'orientado';",
            vec![],
        )
        .await
        .expect("resolution");
    b.submit("#encerrar").await;
    assert!(b.text(".aviso.ok").await.contains("encerrado"));
    let closed = chat.store.case(&case.id).await.expect("read").expect("case");
    assert_eq!(closed.resolution.as_deref(), Some("orientado"));
    assert!(b.text("#atividade").await.contains("encerrou: Cliente orientado"));
    a.close().await;
    b.close().await;
}

/// The keyboard sheet, canned answers managed by an administrator, the notes' search, and the queue
/// filtered by team.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_administrator_keeps_canned_answers_and_agents_find_notes_and_filter_the_queue() {
    let chat = desk(Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    ))
    .await;
    let s = serve(chat.clone(), "default").await;
    let base = s.url.as_str();
    chat.say("c-um", "quero falar com um atendente").await;
    let case = chat
        .store
        .open_case_of("c-um")
        .await
        .expect("read")
        .expect("case");
    chat.service
        .cases()
        .note(
            &case.id,
            vt_agent::testkit::SupportAgent {
                login: "ana",
                name: "ana",
                tenant: None,
            },
            "estorno pedido pelo RH, cartão 2345678901",
        )
        .await
        .expect("note");
    let Some(b) = Browser::start_for("mesa-admin").await else {
        return;
    };
    b.sign_in(base, ADMIN).await;
    b.wait_path("/console/fila").await;
    // The sheet opens with "?".
    b.element("body").await.send_keys("?").await.expect("?");
    let sheet = until(&b, "return document.getElementById('atalhos').open === true").await;
    assert_eq!(sheet, json!(true));
    assert!(
        b.text("#atalhos")
            .await
            .contains("próximo / anterior atendimento")
    );
    b.click("#fechar-atalhos").await;

    // Canned answers: a bad shortcut is refused by name; a good one is kept and listed.
    b.click("nav a[href='/console/respostas']").await;
    b.wait_path("/console/respostas").await;
    b.client
        .execute(
            "document.getElementById('atalho').removeAttribute('pattern')",
            vec![],
        )
        .await
        .expect("let the server judge");
    b.type_into("#atalho", "Bom Dia").await;
    b.type_into("#texto-resposta", "Bom dia, {nome}!").await;
    b.submit("#guardar-resposta").await;
    assert!(b.text(".aviso.erro").await.contains("atalho"), "refused by name");
    b.type_into("#atalho", "bom-dia").await;
    b.type_into("#texto-resposta", "Bom dia, {nome}!").await;
    b.submit("#guardar-resposta").await;
    assert!(b.text("#respostas").await.contains("/bom-dia"));
    let kept = chat.store.canned_answers("default").await.expect("answers");
    assert_eq!(kept.len(), 1);

    // The notes' search finds the case by a note's words; the card in the note is masked.
    b.client
        .goto(&format!("{base}/console/cases?q=estorno"))
        .await
        .expect("search");
    let found = b.text("#notas-encontradas").await;
    assert!(
        found.contains("estorno pedido pelo RH") && found.contains("****8901"),
        "{found}"
    );
    assert!(!b.source().await.contains("2345678901"), "no card in clear");

    // The queue by team: the case waits in atendimento, none in financeiro.
    b.client
        .goto(&format!("{base}/console/fila?equipe=financeiro"))
        .await
        .expect("filter");
    assert!(
        b.text("#aguardando")
            .await
            .contains("Nenhum atendimento aguardando")
    );
    b.client
        .goto(&format!("{base}/console/fila?equipe=atendimento"))
        .await
        .expect("filter");
    let protocol = case.protocol.clone().expect("protocol");
    assert!(b.text("#aguardando").await.contains(&protocol));
    // j selects the first row.
    b.element("body").await.send_keys("j").await.expect("j");
    let chosen = until(&b, "return document.querySelector('tr.caso.escolhido') !== null").await;
    assert_eq!(chosen, json!(true));

    // A second tab of the same browser follows the first one's stream (one connection per browser,
    // not per tab) and still moves live.
    live(&b).await;
    let first_tab = b.client.window().await.expect("tab");
    let second_tab = b.client.new_window(true).await.expect("a second tab");
    b.client
        .switch_to_window(second_tab.handle)
        .await
        .expect("to the second tab");
    b.client
        .goto(&format!("{base}/console/fila"))
        .await
        .expect("queue");
    live(&b).await;
    chat.say("c-dois", "quero falar com um atendente").await;
    let other = chat
        .store
        .open_case_of("c-dois")
        .await
        .expect("read")
        .expect("case");
    let protocol = other.protocol.clone().expect("protocol");
    let moved = until(
        &b,
        &format!("return document.getElementById('aguardando').innerText.includes('{protocol}')"),
    )
    .await;
    assert_eq!(moved, json!(true), "the second tab hears through the first");
    let listens: Value = b
        .client
        .execute("return navigator.locks.query().then(q => q.held.length)", vec![])
        .await
        .expect("locks");
    assert_eq!(listens, json!(1), "one tab holds the stream");
    b.client.switch_to_window(first_tab).await.expect("back");
    b.close().await;
}

/// Reads an event stream until an event `kind` naming `case` arrives (10 s at most).
async fn heard(stream: &mut reqwest::Response, kind: &str, case: &str) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut text = String::new();
    while let Ok(Ok(Some(chunk))) = tokio::time::timeout_at(deadline, stream.chunk()).await {
        text.push_str(&String::from_utf8_lossy(&chunk));
        if text
            .split("\n\n")
            .any(|block| block.contains(&format!("event: {kind}")) && block.contains(case))
        {
            return true;
        }
    }
    false
}

/// Two instances on one database: a case offered by the first reaches an agent listening on the
/// second; an agent of another tenant hears nothing of it.
async fn an_event_on_one_instance_reaches_a_console_on_another(
    first: Arc<dyn Store>,
    second: Arc<dyn Store>,
) {
    let one = desk(first).await;
    let two = desk(second).await;
    let s2 = serve(two.clone(), "outra-empresa").await;
    let listen = |who: &str| {
        reqwest::Client::new()
            .get(format!("{}/console/eventos", s2.url))
            .header("cookie", session(who, 600, SECRET))
            .send()
    };
    let ana = listen("ana").await.expect("ana listens");
    assert_eq!(ana.status(), 200);
    assert!(
        ana.headers()["content-type"]
            .to_str()
            .unwrap_or_default()
            .starts_with("text/event-stream")
    );
    let mut bia = listen("bia").await.expect("bia listens");
    // Bia's stream is open too: hearing nothing on it means the case was kept from her.
    assert_eq!(bia.status(), 200);
    let mut ana = ana;
    // Give the second instance's reader its first read before anything happens.
    tokio::time::sleep(Duration::from_millis(700)).await;
    one.say("c-longe", "quero falar com um atendente").await;
    let case = one
        .store
        .open_case_of("c-longe")
        .await
        .expect("read")
        .expect("case");
    assert_eq!(one.service.cases().assign_waiting().await, 1);
    assert!(
        heard(&mut ana, "oferta", &case.id).await,
        "the offer reached the other instance's console"
    );
    assert!(
        !heard(&mut bia, "caso", &case.id).await,
        "another tenant's agent hears nothing of the case"
    );
    // Without a session, no events.
    let anonymous = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
        .get(format!("{}/console/eventos", s2.url))
        .send()
        .await
        .expect("request");
    assert_eq!(anonymous.status(), 303);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_on_one_sqlite_instance_reaches_a_console_on_another() {
    let dir = tempfile::tempdir().expect("dir");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("vt.db").display());
    let first: Arc<dyn Store> = Arc::new(vt_store::sqlite::SqliteStore::connect(&url).await.expect("first"));
    let second: Arc<dyn Store> = Arc::new(
        vt_store::sqlite::SqliteStore::connect(&url)
            .await
            .expect("second"),
    );
    an_event_on_one_instance_reaches_a_console_on_another(first, second).await;
}

#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_on_one_postgres_instance_reaches_a_console_on_another() {
    let pg = PgFixture::start().await;
    an_event_on_one_instance_reaches_a_console_on_another(pg.store.clone(), pg.second.clone()).await;
    pg.cleanup().await;
}

/// A web-chat visitor who gave no name reads as one in the queue, with when they came — never their
/// raw id; the queue's last line is the conversation's last message, the bot's included.
#[tokio::test]
async fn an_anonymous_visitor_is_a_visitor_in_the_queue_and_the_last_line_is_the_last_said() {
    let chat = desk(Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    ))
    .await;
    let visitor = vt_engine::Participant {
        user_id: "v-3f9a2c".into(),
        user_login: "v-3f9a2c".into(),
        channel: "webchat".into(),
    };
    let said = |text: &str| vt_agent::Inbound {
        agent_id: "vt".into(),
        conversation_id: Some("c-visita".into()),
        user: visitor.clone(),
        text: text.into(),
        ..Default::default()
    };
    chat.service
        .messages()
        .handle(said("quero falar com um atendente"))
        .await
        .expect("handled");
    let queue = chat.service.cases().queue(None).await.expect("queue");
    let entry = queue
        .iter()
        .find(|e| e.case.conversation_id == "c-visita")
        .expect("in the queue");
    // Monday 10:00 in São Paulo.
    assert_eq!(entry.person, "Visitante do site · 10:00");
    let stored = chat.store.messages("c-visita").await.expect("messages");
    let last = stored
        .last()
        .and_then(|m| m.message.text())
        .unwrap_or_default()
        .to_owned();
    assert!(!last.is_empty());
    assert_eq!(entry.last_line, last, "the last thing said, the bot's answer too");
}
