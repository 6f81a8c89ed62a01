//! The console for support agents and operators' pages of record: a case worked from the console in a
//! real browser, never another tenant's, the outbox's WhatsApp templates, a conversation's Pix charges.

use crate::browser::Browser;
use crate::console::*;
use crate::support::{chat_harness, serve_state};
use chrono::Utc;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use vt_agent::AppState;
use vt_agent::testkit::ConsoleConfig;

/// A transfer worked from the console's Atendimentos page in Chromium while the card holder talks
/// over the HTTP API: claim, a customer message appearing without a reload, a reply the card holder
/// reads with the agent's name, a proposed recharge only the card holder's "sim" confirms (one
/// charge), and the hand back after which the bot answers again. Every page fits a phone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_support_agent_works_a_case_from_the_console_in_a_real_browser() {
    let chat = Arc::new(chat_harness(None, vt_domain::tools::VtSettings::default()).await);
    let s = serve_with(chat.clone()).await;
    let base = s.url.as_str();
    let path = "/v1/conversations/c-web/messages";
    let says = |text: &str| json!({"text": text, "user": {"id": "u-web", "name": "Cliente"}});
    let reply = |r: Value| r["replies"][0]["text"].as_str().unwrap_or_default().to_owned();
    s.post(path, Some(CLIENT), says(&format!("saldo {CARD}"))).await;
    s.post(path, Some(CLIENT), says("quero falar com um atendente"))
        .await;
    let case = chat
        .store
        .open_case_of("c-web")
        .await
        .expect("read")
        .expect("a case");

    let Some(b) = Browser::start().await else {
        return;
    };
    // Signed in, the agent lands on the queue: the case waits there, named by its protocol, with the
    // person and the card; the menu counts it.
    b.sign_in(base, SUPPORT).await;
    b.wait_path("/console/fila").await;
    let protocol = case.protocol.clone().expect("a protocol number");
    let row = b.text("#aguardando .caso").await;
    assert!(
        row.contains(&protocol) && row.contains("****8901") && row.contains("Pedido do cliente"),
        "{row}"
    );
    assert!(b.text("#contagem-fila").await.starts_with("1 · 0"));
    b.click("a[href='/console/cases']").await;
    b.wait_path("/console/cases").await;
    let row = b.text(".caso").await;
    assert!(row.contains(&protocol) && row.contains("aguardando"), "{row}");
    b.shot("20-atendimentos").await;
    b.submit(".caso button.assumir").await;
    let page = format!("/console/cases/{}", case.id);
    b.wait_path(&page).await;
    assert!(b.text(".aviso.ok").await.contains("assumido"));
    assert!(b.text("#situacao").await.contains("assumido por @suporte"));
    let file = b.text(".ficha-caso").await;
    assert!(file.contains("****8901"), "{file}");

    // The card holder writes: the bot is silent, and the page shows it without a reload.
    let held: Value = s
        .post(path, Some(CLIENT), says("oi, pode me ajudar?"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(held["replies"], json!([]), "{held}");
    let mut seen = String::new();
    for _ in 0..100 {
        seen = b.text("#mensagens").await;
        if seen.contains("pode me ajudar") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(seen.contains("pode me ajudar"), "polled in: {seen}");

    // The reply reaches the card holder with the agent's name.
    b.type_into("#texto", "Olá! Posso sim.").await;
    b.submit("#enviar").await;
    assert!(b.text(".aviso.ok").await.contains("enviada"));
    // The newest line is in view, right above the reply box.
    let mut in_view = Value::Null;
    for _ in 0..50 {
        in_view = b
            .client
            .execute(
                "const last = document.querySelector('#mensagens li.fala:last-child');
                 const r = last.getBoundingClientRect();
                 const ok = last.innerText.includes('Posso sim') && r.top >= 0 && r.bottom <= window.innerHeight; return ok ? true : [last.innerText, r.top, r.bottom, window.innerHeight, location.href];",
                vec![],
            )
            .await
            .expect("in view");
        if in_view == json!(true) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(in_view, json!(true), "the reply is in view after Enviar");
    let view: Value = s
        .get("/v1/conversations/c-web", Some(CLIENT))
        .await
        .json()
        .await
        .expect("json");
    let last = view["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_default();
    assert_eq!(last["role"], "human_agent", "{view}");
    assert_eq!(last["name"], "suporte");

    // A proposal: the card holder reads the confirmation; only their "sim" charges, once.
    // The card is picked from the ones the card holder gave (masked), never typed.
    assert_eq!(b.text("#cartao").await.trim(), "****8901");
    b.type_into("#valor", "20").await;
    b.submit("#propor").await;
    let proposed = b.text(".aviso.ok").await;
    assert!(proposed.contains("****8901"), "{proposed}");
    assert!(!b.source().await.contains(CARD), "no card in clear on the page");
    assert_eq!(chat.recharges(), 0, "a proposal moves no money");
    b.shot("21-atendimento-proposta").await;
    let confirmed = reply(
        s.post(path, Some(CLIENT), says("sim"))
            .await
            .json()
            .await
            .expect("json"),
    );
    assert!(confirmed.contains("aprovada"), "{confirmed}");
    let again = reply(
        s.post(path, Some(CLIENT), says("sim"))
            .await
            .json()
            .await
            .expect("json"),
    );
    assert!(!again.contains("aprovada"), "{again}");
    assert_eq!(chat.recharges(), 1, "one charge");

    // A phone fits the case page.
    b.client.set_window_size(390, 844).await.expect("resize");
    for page in [page.as_str(), "/console/cases"] {
        b.client.goto(&format!("{base}{page}")).await.expect("goto");
        assert_eq!(b.past_a_phone().await, Vec::<String>::new(), "{page} fits 390 px");
    }
    b.client
        .goto(&format!("{base}/console/cases/{}", case.id))
        .await
        .expect("goto");
    b.shot("22-atendimento-celular").await;
    b.client.set_window_size(1280, 800).await.expect("resize");

    // Hand back with a note: the bot answers the next message.
    b.type_into("#nota", "cliente orientado sobre a recarga").await;
    b.submit("#devolver").await;
    assert!(b.text(".aviso.ok").await.contains("devolvido"));
    assert!(b.text("#situacao").await.contains("devolvido ao bot"));
    let back = reply(
        s.post(path, Some(CLIENT), says(&format!("saldo {CARD}")))
            .await
            .json()
            .await
            .expect("json"),
    );
    assert!(back.contains("****8901"), "{back}");
    let context = chat.store.context("c-web").await.expect("read").expect("context");
    assert!(
        context.key_facts.iter().any(|f| f.contains("cliente orientado")),
        "{:?}",
        context.key_facts
    );
    let log = chat.store.case_events(&case.id).await.expect("log");
    let whats: Vec<&str> = log.iter().map(|e| e.what.as_str()).collect();
    for what in ["assumido", "mensagem_atendente", "proposta_recarga", "devolvido"] {
        assert!(whats.contains(&what), "{what} on record: {whats:?}");
    }
    assert!(
        log.iter()
            .filter(|e| e.what != "aberto" && e.what != "mensagem_cliente")
            .all(|e| e.who == "suporte")
    );
    b.close().await;
}

/// A support agent sees and acts on their own tenant's cases only: another tenant's is not listed,
/// its page is not found, and a claim posted for it changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_support_agent_never_sees_or_acts_on_another_tenants_case() {
    let s = serve().await;
    let http = no_redirects();
    let transfer = |conversation: &str, tenant: &str| vt_agent::Inbound {
        agent_id: "vt".into(),
        conversation_id: Some(conversation.into()),
        tenant_id: Some(tenant.into()),
        user: crate::support::user(),
        text: "quero falar com um atendente".into(),
        ..Default::default()
    };
    for (conversation, tenant) in [("c-nosso", "default"), ("c-deles", "outra-empresa")] {
        s.chat
            .service
            .messages()
            .handle(transfer(conversation, tenant))
            .await
            .expect("transfer");
    }
    let case_of = |c: &'static str| {
        let store = s.chat.store.clone();
        async move { store.open_case_of(c).await.expect("read").expect("case").id }
    };
    let (ours, theirs) = (case_of("c-nosso").await, case_of("c-deles").await);
    let support = session("suporte", 600, SECRET);
    let get = |path: String| {
        http.get(format!("{}{path}", s.url))
            .header("cookie", &support)
            .send()
    };
    let list = get("/console/cases".into()).await.expect("list");
    let html = list.text().await.expect("html");
    assert!(html.contains(&ours) && !html.contains(&theirs), "{html}");
    let page = get(format!("/console/cases/{theirs}")).await.expect("page");
    assert_eq!(page.status(), 404);
    let csrf = csrf_of(
        &get(format!("/console/cases/{ours}"))
            .await
            .expect("page")
            .text()
            .await
            .expect("html"),
    );
    let r = http
        .post(format!("{}/console/cases/{theirs}/assumir", s.url))
        .header("cookie", &support)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}"))
        .send()
        .await
        .expect("claim");
    assert_eq!(r.status(), 404);
    let case = s.chat.store.case(&theirs).await.expect("read").expect("case");
    assert_eq!(
        case.state,
        vt_store::records::CaseState::Aguardando,
        "nothing changed"
    );
    // An administrator sees every tenant's.
    let admin = session("operacao", 600, SECRET);
    let all = http
        .get(format!("{}/console/cases", s.url))
        .header("cookie", admin)
        .send()
        .await
        .expect("list")
        .text()
        .await
        .expect("html");
    assert!(all.contains(&ours) && all.contains(&theirs));
}

/// The Fila de envio lists the WhatsApp templates in use with what Meta last said of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_page_shows_the_whatsapp_templates_and_their_state() {
    let chat = Arc::new(chat_harness(None, vt_domain::tools::VtSettings::default()).await);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("templates");
    let templates = Arc::new(vt_agent::testkit::Templates::load(&dir).expect("templates"));
    chat.store
        .set_template_state(&vt_store::concerns::TemplateState {
            name: "saldo_baixo_v1".into(),
            language: "pt_BR".into(),
            status: Some("PAUSED".into()),
            category: None,
            reason: None,
            updated_at: Utc::now(),
        })
        .await
        .expect("state");
    let state = AppState::new(chat.service.clone(), "vt", config())
        .with_console(&ConsoleConfig {
            secret: Some(SECRET.into()),
            ..ConsoleConfig::default()
        })
        .with_templates(templates);
    let s = serve_state(chat, state).await;
    let html = no_redirects()
        .get(format!("{}/console/outbox", s.url))
        .header("cookie", session("operacao", 600, SECRET))
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    let table = &html[html.find("tabela-modelos").expect("the templates' table")..];
    let row = &table[table.find("saldo_baixo_v1").expect("the template")..];
    let row = &row[..row.find("</tr>").expect("row")];
    assert!(row.contains("PAUSED") && row.contains("UTILITY"), "{row}");
    assert!(table.contains("retomar_atendimento_v1") && table.contains("sem notícia da Meta"));
}

/// A conversation's Pix charges on its console page and on its case's: the status, txid, expiry,
/// payment and refund — never the card the recharge was for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conversation_and_case_pages_show_the_pix_charges() {
    let chat = Arc::new(crate::support::chat_harness_paying().await);
    chat.say("c-console-pix", "oi").await;
    // The recharge system denies this magic card: paid, refunded, and a case for a person.
    let charge = chat
        .service
        .payments()
        .issue(
            "c-console-pix",
            &vt_domain::vt::FlowInput::parse(
                r#"{"cartao": "7777777777", "recarga": {"valor": 30, "meio_pagamento": {"tipo": "pix"}}}"#,
            )
            .expect("input"),
            "k-console-pix",
            0,
        )
        .await
        .expect("issued");
    let paid = chat.sim.pix().pay(&charge.txid, false).expect("paid");
    chat.service
        .payments()
        .settle(&charge.txid)
        .await
        .expect("settled");
    let case = chat
        .store
        .open_case_of("c-console-pix")
        .await
        .expect("read")
        .expect("a case");
    let s = serve_with(chat).await;
    let support = session("suporte", 600, SECRET);
    for path in [
        "/console/conversations/c-console-pix".to_owned(),
        format!("/console/cases/{}", case.id),
    ] {
        let page = no_redirects()
            .get(format!("{}{path}", s.url))
            .header("cookie", &support)
            .send()
            .await
            .expect("page");
        assert_eq!(page.status(), 200, "{path}");
        let html = page.text().await.expect("html");
        let panels = &html[html
            .find("<h2>Pagamentos</h2>")
            .unwrap_or_else(|| panic!("{path}: {html}"))..];
        for shown in [
            charge.txid.as_str(),
            "paga e devolvida",
            "R$ 30,00",
            paid.end_to_end_id.as_str(),
            "devolvido ao pagador",
        ] {
            assert!(panels.contains(shown), "{path}: {shown} in {panels}");
        }
        assert!(!html.contains("7777777777"), "{path}: the card in clear");
        assert!(
            !html.contains("BRL "),
            "{path}: money in reais, as Brazilians read it"
        );
    }
}
