//! The web console: its auth over real HTTP on loopback (no cookie, forged and expired cookies, CSRF,
//! roles), and a support agent's and an operator's journey through a real headless Chromium
//! ([`crate::browser`]). Screenshots of each step go to `target/tmp/console/`.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use fantoccini::Locator;
use serde_json::{Value, json};
use vt_agent::testkit::{ConsoleConfig, Keys};
use vt_agent::{ApiKeyConfig, AppState, HttpConfig, Role, key_hash};
use vt_store::records::NewOutboxItem;
use vt_store::records::OutboxStatus;
use vt_store::records::UsageRecord;

use crate::browser::Browser;
use crate::support::{ChatHarness, Served, chat_harness, serve_state};

pub(crate) const SECRET: &str = "segredo-do-console-de-teste-com-32+";
pub(crate) const SUPPORT: &str = "chave-suporte-123456";
pub(crate) const ADMIN: &str = "chave-admin-123456";
pub(crate) const CLIENT: &str = "chave-cliente-123456";
pub(crate) const CARD: &str = "2345678901";

pub(crate) fn config() -> HttpConfig {
    let key = |name: &str, secret: &str, role| ApiKeyConfig {
        name: name.into(),
        sha256: key_hash(secret),
        tenant: "default".into(),
        role,
    };
    HttpConfig {
        api_keys: vec![
            key("suporte", SUPPORT, Role::Support),
            key("operacao", ADMIN, Role::Admin),
            key("empresa", CLIENT, Role::Client),
        ],
        ..HttpConfig::default()
    }
}

pub(crate) async fn serve() -> Served {
    let chat = Arc::new(chat_harness(None, vt_domain::tools::VtSettings::default()).await);
    serve_with(chat).await
}

pub(crate) async fn serve_with(chat: Arc<ChatHarness>) -> Served {
    let state = AppState::new(chat.service.clone(), "vt", config()).with_console(&ConsoleConfig {
        secret: Some(SECRET.into()),
        ..ConsoleConfig::default()
    });
    serve_state(chat, state).await
}

/// A client that shows redirects instead of following them.
pub(crate) fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

pub(crate) fn session(name: &str, expires_in_secs: i64, secret: &str) -> String {
    let value = Keys::new(secret.as_bytes(), 3600).session_value(
        name,
        Utc::now().timestamp() + expires_in_secs,
        "nonce-de-teste",
    );
    format!("{}={value}", vt_agent::testkit::SESSION_COOKIE)
}

pub(crate) fn csrf_of(html: &str) -> String {
    let start = html.find("name=\"csrf\" value=\"").expect("a form token") + 19;
    html[start..start + 64].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_good_session_cookie_every_page_sends_to_the_sign_in_page() {
    let s = serve().await;
    let http = no_redirects();
    let get = |path: &str, cookie: Option<String>| {
        let mut r = http.get(format!("{}{path}", s.url));
        if let Some(c) = cookie {
            r = r.header("cookie", c);
        }
        r.send()
    };
    for path in [
        "/console/lookup",
        "/console/conversations",
        "/console/flows",
        "/console/usage",
    ] {
        let r = get(path, None).await.expect("request");
        assert_eq!(r.status(), 303, "{path}");
        assert_eq!(r.headers()["location"], "/console");
    }
    let page = get("/console", None).await.expect("request");
    assert_eq!(page.status(), 200);
    let html = page.text().await.expect("html");
    assert!(html.contains("action=\"/console/entrar\"") && html.contains("<label for=\"chave\">"));

    let good = session("suporte", 600, SECRET);
    let r = get("/console/conversations", Some(good.clone()))
        .await
        .expect("request");
    assert_eq!(r.status(), 200, "a good cookie opens the page");
    for (why, cookie) in [
        (
            "forged",
            session("suporte", 600, "outro-segredo-que-ninguem-configurou"),
        ),
        ("expired", session("suporte", -5, SECRET)),
        ("a key no longer configured", session("antiga", 600, SECRET)),
        ("a client key's name", session("empresa", 600, SECRET)),
        (
            "garbage",
            format!("{}=abc.def", vt_agent::testkit::SESSION_COOKIE),
        ),
    ] {
        let r = get("/console/conversations", Some(cookie))
            .await
            .expect("request");
        assert_eq!(r.status(), 303, "{why}");
    }
    // A support agent is no operator.
    let r = get("/console/outbox", Some(good)).await.expect("request");
    assert_eq!(r.status(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_without_its_csrf_token_is_refused_and_changes_nothing() {
    let s = serve().await;
    let http = no_redirects();
    let post = |path: &str, cookie: &str, body: &str| {
        http.post(format!("{}{path}", s.url))
            .header("cookie", cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.to_owned())
            .send()
    };
    let support = session("suporte", 600, SECRET);
    let r = post("/console/lookup", &support, &format!("cartao={CARD}"))
        .await
        .expect("request");
    assert_eq!(r.status(), 403);
    let r = post(
        "/console/lookup",
        &support,
        &format!("cartao={CARD}&csrf={}", "0".repeat(64)),
    )
    .await
    .expect("request");
    assert_eq!(r.status(), 403, "a wrong token");
    assert!(s.chat.sim.ledger().is_empty(), "no lookup ran");
    assert!(s.chat.store.audit_records(10).await.expect("audit").is_empty());

    let store = &s.chat.store;
    let id = dead_letter(store.as_ref(), "graph api 503").await;
    let admin = session("operacao", 600, SECRET);
    let r = post(&format!("/console/outbox/{id}/retry"), &admin, "")
        .await
        .expect("request");
    assert_eq!(r.status(), 403);
    let item = store.outbox_item(id).await.expect("item").expect("there");
    assert_eq!(item.status, OutboxStatus::Failed, "still dead");

    // The sign-in form has its own token, bound to its own cookie.
    let r = post("/console/entrar", "", &format!("chave={ADMIN}"))
        .await
        .expect("request");
    assert_eq!(r.status(), 403);
    assert!(r.headers().get_all("set-cookie").iter().all(|c| {
        !c.to_str()
            .unwrap_or_default()
            .starts_with(&format!("{}=", vt_agent::testkit::SESSION_COOKIE))
    }));

    // With the token, the same lookup runs, masked, and is audited.
    let page = http
        .get(format!("{}/console/lookup", s.url))
        .header("cookie", &support)
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    let r = post(
        "/console/lookup",
        &support,
        &format!("cartao={CARD}&csrf={}", csrf_of(&page)),
    )
    .await
    .expect("request");
    assert_eq!(r.status(), 200);
    let html = r.text().await.expect("html");
    assert!(html.contains("****8901") && !html.contains(CARD), "{html}");
    let audit = store.audit_records(10).await.expect("audit");
    assert_eq!(audit.len(), 1);
    assert_eq!(
        (
            audit[0].support_user.as_str(),
            audit[0].channel.as_str(),
            audit[0].cartao.as_str()
        ),
        ("suporte", "console", "****8901")
    );
    assert!(!audit[0].cartao_hash.is_empty() && !audit[0].cartao_hash.contains(CARD));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_key_is_refused_at_sign_in() {
    let s = serve().await;
    let http = no_redirects();
    let form = http.get(format!("{}/console", s.url)).send().await.expect("page");
    let cookie = form.headers()["set-cookie"]
        .to_str()
        .expect("cookie")
        .split(';')
        .next()
        .expect("pair")
        .to_owned();
    let token = csrf_of(&form.text().await.expect("html"));
    let sign_in = |key: &str| {
        http.post(format!("{}/console/entrar", s.url))
            .header("cookie", &cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(serde_urlencoded::to_string([("chave", key), ("csrf", token.as_str())]).expect("form"))
            .send()
    };
    let r = sign_in(CLIENT).await.expect("request");
    assert_eq!(r.status(), 403);
    assert!(r.text().await.expect("html").contains("não dá acesso ao console"));
    assert_eq!(
        sign_in("chave-que-nao-existe").await.expect("request").status(),
        401
    );
    let r = sign_in(SUPPORT).await.expect("request");
    assert_eq!(r.status(), 303);
    assert_eq!(
        r.headers()["location"],
        "/console/fila",
        "agents land on their queue"
    );
    let set: Vec<&str> = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let session = set
        .iter()
        .find(|c| c.starts_with("vt_console="))
        .expect("a session cookie");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(session.contains(attribute), "{session}");
    }
    assert!(!session.contains(SUPPORT), "the key itself never travels back");
}

pub(crate) async fn dead_letter(store: &dyn vt_store::Store, reason: &str) -> i64 {
    let now = Utc::now();
    let id = store
        .enqueue(
            &NewOutboxItem {
                kind: "reply".into(),
                destination: "whatsapp".into(),
                payload: crate::support::reply_payload("conversa-1", "5511999990000", "Seu saldo é R$ 50,00"),
                max_attempts: 5,
                next_attempt_at: now,
                conversation_id: Some("conversa-1".into()),
                status: OutboxStatus::Pending,
            },
            now,
        )
        .await
        .expect("enqueue");
    store.dead_letter(id, reason).await.expect("dead letter");
    id
}

/// What the console needs to show: a conversation with tool calls and a recharge, flows, a dead letter,
/// turns that cost tokens.
pub(crate) async fn seed(chat: &ChatHarness) -> i64 {
    chat.say("conversa-1", &format!("qual o saldo do cartão {CARD}?"))
        .await;
    chat.say("conversa-1", &format!("recarrega 50 no {CARD} via pix"))
        .await;
    chat.say("conversa-1", "sim").await;
    assert_eq!(chat.recharges(), 1);
    chat.store
        .record_usage(&UsageRecord {
            conversation_id: "conversa-2".into(),
            intent_key: "fora_do_escopo".into(),
            action_type: "reasoning".into(),
            tokens_input: 420,
            tokens_output: 60,
            execution_time_ms: 900,
            was_keyword_matched: false,
            created_at: chat.clock.now(),
            audio_ms: 0,
            tokens_cached: 0,
            tenant_id: "default".into(),
            custo_micro_brl: Some(12_000),
            marcas: String::new(),
        })
        .await
        .expect("usage");
    // On the service's clock, as the turns above: the usage page counts its period from it.
    let now = chat.clock.now();
    chat.store
        .open_batch(&vt_store::testkit::batch_job("lote-da-empresa", "default", now))
        .await
        .expect("batch");
    let line = |n: i64, status: &str| vt_store::records::BatchLine {
        line: n,
        status: vt_store::records::LineStatus::from_row(status).expect("a line status"),
        result: json!({"line": n, "status": status, "cartao": "****8901"}),
    };
    chat.store
        .save_batch_lines(
            "lote-da-empresa",
            &[line(1, "concluido"), line(2, "invalida")],
            &[],
            now,
        )
        .await
        .expect("lines");
    // Outside the 24-hour window: a retry cannot help, so none is offered.
    dead_letter(chat.store.as_ref(), "131047: fora da janela de 24 h").await;
    dead_letter(chat.store.as_ref(), "graph api 503, error 1: unknown").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn support_and_operators_use_the_console_in_a_real_browser() {
    let chat = Arc::new(chat_harness(None, vt_domain::tools::VtSettings::default()).await);
    let dead = seed(&chat).await;
    let s = serve_with(chat.clone()).await;
    let Some(b) = Browser::start().await else {
        return;
    };
    let base = s.url.as_str();

    // No session: the sign-in page. A client key is refused there.
    b.client
        .goto(&format!("{base}/console/conversations"))
        .await
        .expect("goto");
    assert_eq!(b.path().await, "/console");
    b.shot("01-entrar").await;
    b.sign_in(base, CLIENT).await;
    assert!(b.text("#erro").await.contains("não dá acesso ao console"));
    b.shot("02-chave-de-cliente-recusada").await;
    b.client
        .goto(&format!("{base}/console/lookup"))
        .await
        .expect("goto");
    assert_eq!(b.path().await, "/console", "still signed out");

    // A support agent signs in on their queue, and looks a card up: masked on screen, audited.
    b.sign_in(base, SUPPORT).await;
    b.wait_path("/console/fila").await;
    b.client
        .goto(&format!("{base}/console/lookup"))
        .await
        .expect("goto");
    let unlabelled: Value = b
        .client
        .execute(
            "return [...document.querySelectorAll('input:not([type=hidden]), select, button')]
                .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.textContent.trim())
                .map(e => e.outerHTML)",
            vec![],
        )
        .await
        .expect("labels");
    assert_eq!(unlabelled, json!([]), "every control has a label");
    let mut order = Vec::new();
    // The header's controls, then the page's: the two after "Sair" are the desk's (notifications, the
    // shortcut sheet).
    for _ in 0..12 {
        b.client
            .active_element()
            .await
            .expect("focus")
            .send_keys("\u{E004}")
            .await
            .expect("tab");
        let focused: Value = b
            .client
            .execute(
                "const e = document.activeElement; return e.id || e.getAttribute('href') || e.textContent.trim()",
                vec![],
            )
            .await
            .expect("focused");
        order.push(focused.as_str().unwrap_or_default().to_owned());
    }
    let at = |what: &str| {
        order
            .iter()
            .position(|o| o == what)
            .unwrap_or_else(|| panic!("{what} in {order:?}"))
    };
    assert_eq!(order[0], "#conteudo", "the skip link comes first: {order:?}");
    assert!(
        at("/console/lookup") < at("/console/conversations")
            && at("/console/conversations") < at("Sair")
            && at("Sair") < at("cartao")
            && at("cartao") < at("Consultar"),
        "{order:?}"
    );
    b.type_into("#cartao", CARD).await;
    b.click("form[action='/console/lookup'] button").await;
    let answer = b.text("#resposta").await;
    assert!(answer.contains("****8901"), "{answer}");
    assert!(!b.source().await.contains(CARD), "no card in clear on the page");
    b.shot("03-consulta").await;

    // The card's history, one click from the answer (the card is in no field, page or URL): runs,
    // conversations and this lookup, masked.
    b.submit("#historico-consultado").await;
    assert_eq!(b.path().await, "/console/cards", "the card is in no URL");
    let runs = b.text("#execucoes").await;
    assert!(
        runs.contains("recarga") && runs.contains("R$ 50,00") && runs.contains("consulta de saldo"),
        "{runs}"
    );
    assert!(b.text("#conversas").await.contains("conversa-1"));
    assert!(b.text("#consultas").await.contains("suporte"));
    assert!(!b.source().await.contains(CARD), "no card in clear on the page");
    // What the card system says of it now (step 35): its situation, its last 30 days.
    assert_eq!(b.text("#situacao").await, "O cartão ****8901 está ativo.");
    b.shot("03b-historico-do-cartao").await;
    // Blocked on the holder's behalf: a reason and the agent's words, audited.
    b.client
        .execute("document.querySelector('#motivo').value = 'roubo'", vec![])
        .await
        .expect("motivo");
    b.type_into("#justificativa", "titular ligou: roubaram a carteira no ônibus")
        .await;
    b.submit("#bloqueio button").await;
    let notice = b.text("#aviso").await;
    assert!(
        notice.starts_with("Cartão ****8901 bloqueado em nome do titular (protocolo"),
        "{notice}"
    );
    assert!(b.text("#situacao").await.contains("está bloqueado desde"));
    assert!(
        !b.source().await.contains("id=\"bloqueio\""),
        "a blocked card offers no block"
    );
    let record = b.text("#consultas").await;
    assert!(
        record.contains("cartao_bloqueado (roubo): titular ligou: roubaram a carteira no ônibus"),
        "{record}"
    );
    assert!(!b.source().await.contains(CARD), "no card in clear on the page");
    let blocks = |sim: &vt_simulators::systems::Simulator| {
        sim.ledger()
            .iter()
            .filter(|e| e.efeito == Some(vt_simulators::systems::Efeito::CartaoBloqueado))
            .count()
    };
    assert_eq!(blocks(&chat.sim), 1);
    b.shot("03c-cartao-bloqueado").await;
    b.client
        .goto(&format!("{base}/console/lookup"))
        .await
        .expect("lookup");
    let audit = chat.store.audit_records(10).await.expect("audit");
    assert!(
        audit
            .iter()
            .any(|a| a.support_user == "suporte" && a.channel == "console")
    );

    // The conversation as a chat — who said what, when — and no engine internals for a support
    // agent: no tool, state or instruction meant for the model, no JSON.
    b.click("nav a[href='/console/conversations']").await;
    b.click("a[href='/console/conversations/conversa-1']").await;
    let chat_text = b.text("#mensagens").await;
    assert!(
        chat_text.contains("Cliente") && chat_text.contains("Assistente"),
        "{chat_text}"
    );
    let page = b.source().await;
    for internal in [
        "consultar_saldo",
        "preparar_recarga",
        "confirmar_recarga",
        "estado",
        "Detalhes técnicos",
        "{\"",
        "BRL ",
    ] {
        assert!(!page.contains(internal), "{internal} on a support agent's page");
    }
    assert!(!page.contains(CARD));
    assert!(
        page.contains("suporte (atendente)"),
        "the frame names who is signed in"
    );
    b.shot("04-conversa").await;
    // A regression transcript is an administrator's tool (a support agent downloaded a masked one on
    // 80722d3): not offered, and refused when asked for.
    assert!(
        !page.contains("baixar-transcricao"),
        "no download for a support agent"
    );
    let refused = crate::console::no_redirects()
        .get(format!("{base}/console/conversations/conversa-1/transcript.yaml"))
        .header(
            "cookie",
            crate::console::session("suporte", 600, crate::console::SECRET),
        )
        .send()
        .await
        .expect("request");
    assert_eq!(refused.status(), 403);
    let downloads = |outcome: &'static str| {
        let store = chat.store.clone();
        async move {
            store
                .audit_records(50)
                .await
                .expect("audit")
                .into_iter()
                .filter(|a| a.outcome == outcome && a.conversation_id.as_deref() == Some("conversa-1"))
                .count()
        }
    };
    assert_eq!(downloads("transcricao_completa").await, 0, "nothing handed out");

    // Flows: the recharge's run with its ten stages.
    b.click("nav a[href='/console/flows']").await;
    let progress = b.text("a[href='/console/batches/lote-da-empresa']").await;
    assert_eq!(progress, "lote-da-empresa");
    let row: Value = b
        .client
        .execute(
            "return document.querySelector(\"a[href='/console/batches/lote-da-empresa']\").closest('tr').innerText",
            vec![],
        )
        .await
        .expect("batch row");
    let row = row.as_str().unwrap_or_default();
    assert!(
        row.contains("2/3") && row.contains("concluído: 1") && row.contains("inválida: 1"),
        "{row}"
    );
    b.shot("05-fluxos").await;
    b.click("table a[href^='/console/flows/']").await;
    let stages = b.text("ol.etapas").await;
    assert!(
        stages.contains("rf01_preparar_consulta") && stages.contains("rf05"),
        "{stages}"
    );
    // A support agent reads a line per stage, not its JSON (an administrator's "Detalhes técnicos").
    assert!(stages.contains("Consulta de saldo preparada."), "{stages}");
    let source = b.source().await;
    assert!(
        !source.contains("detalhes-tecnicos") && !source.contains("x-idempotency-key"),
        "JSON shown to support"
    );
    let facts = b.text("dl.ficha").await;
    assert!(
        facts.contains("Política") && facts.contains("R$ 1.000,00"),
        "{facts}"
    );

    // Support sees no operator pages.
    assert!(!b.source().await.contains("href=\"/console/outbox\""));
    b.sign_out().await;
    b.wait_path("/console").await;
    b.element("#chave").await;

    // An operator retries the dead letter.
    b.sign_in(base, ADMIN).await;
    b.click("nav a[href='/console/outbox']").await;
    let row = b.text(&format!("#item-{dead}")).await;
    assert!(
        row.contains("503") && row.contains("Seu saldo é R$ 50,00"),
        "{row}"
    );
    let window = b.text("#tabela-failed tbody tr:first-child").await;
    assert!(
        window.contains("131047") && window.contains("reenviar não adiantaria"),
        "{window}"
    );
    assert_eq!(
        b.client
            .find_all(Locator::Css("#tabela-failed button"))
            .await
            .expect("buttons")
            .len(),
        1,
        "only the item a retry can help offers one"
    );
    b.click(&format!(
        "#item-{dead} a[href='/console/conversations/conversa-1']"
    ))
    .await;
    b.wait_path("/console/conversations/conversa-1").await;
    b.client.back().await.expect("back");
    b.shot("06-outbox").await;
    b.click(&format!("#item-{dead} button")).await;
    assert!(
        b.text("p.ok")
            .await
            .contains(&format!("item {dead} voltou para a fila"))
    );
    let item = chat.store.outbox_item(dead).await.expect("item").expect("there");
    assert_eq!((item.status, item.attempts), (OutboxStatus::Pending, 0));
    b.shot("07-outbox-reenviado").await;

    // An operator sees the turns' internals behind "Detalhes técnicos": the tool calls.
    b.client
        .goto(&format!("{base}/console/conversations/conversa-1"))
        .await
        .expect("conversation");
    b.click("#detalhes-tecnicos summary").await;
    let tools: Value = b
        .client
        .execute(
            "return [...document.querySelectorAll('li.evento-ferramenta')].map(e => e.innerText).join('\\n')",
            vec![],
        )
        .await
        .expect("events");
    let tools = tools.as_str().unwrap_or_default();
    for tool in ["consultar_saldo", "preparar_recarga", "confirmar_recarga"] {
        assert!(tools.contains(tool), "{tool} in {tools}");
    }
    // An operator's transcript replays against the real cards: in clear, said so, and on record.
    let yaml = b.download_transcript("conversa-1").await;
    assert!(yaml.contains(CARD), "{yaml}");
    assert!(
        yaml.starts_with("# Transcrição com os números completos"),
        "{yaml}"
    );
    assert_eq!(downloads("transcricao_completa").await, 1);

    // Every chart of the dashboard is drawn, with data.
    b.click("nav a[href='/console/usage']").await;
    b.client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("#grafico-fluxos[data-desenhado='sim']"))
        .await
        .expect("the charts are drawn");
    for id in [
        "grafico-turnos",
        "grafico-zero",
        "grafico-intencao",
        "grafico-latencia",
        "grafico-custo",
        "grafico-fluxos",
    ] {
        let drawn: Value = b
            .client
            .execute(
                "const c = document.getElementById(arguments[0]);
                 const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                 let ink = 0; for (let i = 3; i < px.length; i += 4) { if (px[i] > 0) ink++; }
                 return {desenhado: c.dataset.desenhado, pontos: Number(c.dataset.pontos), largura: c.width, tinta: ink};",
                vec![json!(id)],
            )
            .await
            .expect("canvas");
        assert_eq!(drawn["desenhado"], "sim", "{id}: {drawn}");
        assert!(drawn["pontos"].as_i64() > Some(0), "{id} has data: {drawn}");
        assert!(
            drawn["tinta"].as_i64() > Some(500),
            "{id} is not an empty box: {drawn}"
        );
    }
    let page = b.source().await;
    assert!(page.contains("fora_do_escopo"), "tokens by intent");
    b.shot("08-uso").await;

    // Support agents answer from phones: every page fits 390 px.
    b.client.set_window_size(390, 844).await.expect("resize");
    for page in [
        "/console/lookup".to_owned(),
        "/console/conversations".to_owned(),
        "/console/conversations/conversa-1".to_owned(),
        "/console/flows".to_owned(),
        "/console/batches/lote-da-empresa".to_owned(),
        "/console/outbox".to_owned(),
        "/console/usage".to_owned(),
        "/console/cases".to_owned(),
    ] {
        b.client.goto(&format!("{base}{page}")).await.expect("goto");
        assert_eq!(b.past_a_phone().await, Vec::<String>::new(), "{page} fits 390 px");
    }
    b.shot("09-conversa-celular").await;
    b.close().await;
}
