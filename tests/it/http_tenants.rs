//! `serve` for several tenants and instances: two instances on one PostgreSQL keep each conversation in
//! order, a flow is its key's tenant's, an administrator exports and erases a person's data, a support
//! agent's answer shows over HTTP, a company's opt-ins are checked whole.

use crate::http::*;
use crate::support::Served;
use serde_json::{Value, json};
use vt_agent::HttpConfig;

#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_postgresql_keep_each_conversation_in_order_and_charge_once() {
    let pg = vt_store::testkit::PgFixture::start().await;
    let sim = vt_simulators::systems::Simulator::new(crate::support::quick_simulator());
    let instance = |store: std::sync::Arc<vt_store::postgres::PgStore>| {
        let sim = sim.clone();
        async move {
            let chat = crate::support::chat_harness_with(
                store,
                None,
                vt_domain::tools::VtSettings::default(),
                Some(sim),
            )
            .await;
            crate::support::serve_chat(std::sync::Arc::new(chat), HttpConfig::default()).await
        }
    };
    let (one, two) = (
        instance(pg.store.clone()).await,
        instance(pg.second.clone()).await,
    );
    let (one, two) = (std::sync::Arc::new(one), std::sync::Arc::new(two));
    let script = ["recarrega 50 no {card} via pix", "sim", "saldo {card}", "sim"];
    let conversations = (0..8).map(|i| {
        let (one, two) = (one.clone(), two.clone());
        tokio::spawn(async move {
            let card = format!("23456789{i:02}");
            let id = format!("pg-{i}");
            let mut replies = Vec::new();
            for (n, line) in script.iter().enumerate() {
                // Alternate instances: every message of the conversation goes to the other one.
                let s = if (n + i) % 2 == 0 { &one } else { &two };
                let r: Value = s
                    .post(
                        &format!("/v1/conversations/{id}/messages"),
                        None,
                        says(&line.replace("{card}", &card)),
                    )
                    .await
                    .json()
                    .await
                    .expect("json");
                replies.push(r["replies"][0]["text"].as_str().unwrap_or_default().to_owned());
            }
            (id, card, replies)
        })
    });
    // Meanwhile, both instances answer "sim" to the same recharge at the same moment.
    let race = {
        let (one, two) = (one.clone(), two.clone());
        tokio::spawn(async move {
            one.post(
                "/v1/conversations/pg-race/messages",
                None,
                says("recarrega 70 no 3456789012 via pix"),
            )
            .await;
            let path = "/v1/conversations/pg-race/messages";
            let (a, b) = tokio::join!(
                one.post(path, None, says("sim")),
                two.post(path, None, says("sim"))
            );
            let a: Value = a.json().await.expect("json");
            let b: Value = b.json().await.expect("json");
            [a, b]
                .iter()
                .filter(|r| {
                    r["replies"][0]["text"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("aprovada")
                })
                .count()
        })
    };
    for done in futures::future::join_all(conversations).await {
        let (id, card, replies) = done.expect("join");
        assert!(replies[0].starts_with("Confirma"), "{id}: {replies:?}");
        assert!(replies[1].contains("aprovada"), "{id}: {replies:?}");
        assert!(replies[2].contains("O saldo do cartão"), "{id}: {replies:?}");
        assert!(replies[3].contains("Não há nenhuma recarga"), "{id}: {replies:?}");
        assert_eq!(sim.charges(&card), 1, "{id}");
        let view: Value = one
            .get(&format!("/v1/conversations/{id}"), None)
            .await
            .json()
            .await
            .expect("json");
        let messages = view["messages"].as_array().expect("messages");
        let users: Vec<&str> = messages
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["text"].as_str())
            .collect();
        assert_eq!(users.len(), 4, "every message stored once: {view}");
        assert_eq!(users[1], "sim");
        let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["user", "assistant"].repeat(4), "replies in order: {view}");
    }
    assert_eq!(
        race.await.expect("join"),
        1,
        "one of the two racing yeses charged"
    );
    assert_eq!(sim.charges("3456789012"), 1);
    pg.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_belongs_to_the_keys_tenant_and_gets_the_configured_policy() {
    let vt = vt_domain::tools::VtSettings {
        politicas: vt_domain::vt::Politicas {
            valor_max: rust_decimal::dec!(200),
            ..vt_domain::vt::Politicas::default()
        },
        ..vt_domain::tools::VtSettings::default()
    };
    let store: std::sync::Arc<dyn vt_store::Store> = std::sync::Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    );
    let chat = std::sync::Arc::new(crate::support::chat_harness_on(store.clone(), None, vt).await);
    let s = crate::support::serve_chat(chat, with_keys()).await;
    let flow = |body: Value| {
        s.client
            .post(format!("{}/v1/flows/vt", s.url))
            .bearer_auth(CLIENT_A)
            .json(&body)
            .send()
    };
    let output: Value =
        flow(json!({"cartao": "1234567890", "recarga": {"valor": 150, "meio_pagamento": {"tipo": "pix"}}}))
            .await
            .expect("sent")
            .json()
            .await
            .expect("json");
    assert_eq!(output["status"], "concluido", "{output}");
    let run = store
        .flow_run(output["execucao_id"].as_str().expect("id"))
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(run.input["tenant_id"], "empresa-a");
    assert_eq!(run.input["politicas"]["valor_max"], 200.0);
    let of = |tenant: &str| vt_store::records::ConversationQuery {
        intent: None,
        tenant_id: Some(tenant.into()),
        limit: 10,
        ..Default::default()
    };
    let mine = store.conversation_list(&of("empresa-a")).await.expect("list");
    assert_eq!(mine.len(), 1, "the flow's conversation is the key's tenant's");
    assert!(
        store
            .conversation_list(&of("default"))
            .await
            .expect("list")
            .is_empty()
    );
    // The configured policy, not the built-in one, refuses 300 (the built-in maximum is 1,000).
    let over: Value =
        flow(json!({"cartao": "1234567890", "recarga": {"valor": 300, "meio_pagamento": {"tipo": "pix"}}}))
            .await
            .expect("sent")
            .json()
            .await
            .expect("json");
    assert_eq!(over["status"], "falhou", "{over}");
    // Another tenant named in the body is refused, not used, and nothing runs.
    let (status, error) = error_of(
        flow(json!({"cartao": "1234567890", "tenant_id": "empresa-b"}))
            .await
            .expect("sent"),
    )
    .await;
    assert_eq!(
        (status, error["field"].as_str()),
        (400, Some("tenant_id")),
        "{error}"
    );
    assert!(!error.to_string().contains("empresa-b"));
    assert_eq!(
        store
            .conversation_list(&of("empresa-a"))
            .await
            .expect("list")
            .len(),
        2
    );
    assert_eq!(s.chat.sim.charges("1234567890"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_administrator_exports_and_erases_a_persons_data() {
    let s = Served::serve(with_keys()).await;
    let said = json!({"text": "saldo do cartão 2345678901", "user": {"id": "u-titular"}});
    let r = s
        .post("/v1/conversations/c-titular/messages", Some(CLIENT_A), said)
        .await;
    assert_eq!(r.status(), 200);
    let (status, error) = error_of(
        s.post(
            "/v1/titulares/exportar",
            Some(CLIENT_A),
            json!({"usuario": "u-titular"}),
        )
        .await,
    )
    .await;
    assert_eq!((status, error["code"].as_str()), (403, Some("forbidden")));
    let (status, error) = error_of(s.post("/v1/titulares/exportar", Some(ADMIN), json!({})).await).await;
    assert_eq!((status, error["field"].as_str()), (400, Some("corpo")));
    let export: Value = s
        .post(
            "/v1/titulares/exportar",
            Some(ADMIN),
            json!({"cartao": "2345 6789-01"}),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(export["conversas"][0]["id"], "c-titular", "{export}");
    let erased: Value = s
        .post(
            "/v1/titulares/apagar",
            Some(ADMIN),
            json!({"usuario": "u-titular"}),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(erased["conversas_apagadas"], 1, "{erased}");
    assert_eq!(
        s.get("/v1/conversations/c-titular", Some(CLIENT_A))
            .await
            .status(),
        404
    );
}

/// The report, over HTTP: a recharge whose payment method is asked for, then "pix", then "sim".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_payment_method_answered_over_http_completes_the_recharge() {
    let s = Served::serve(with_keys()).await;
    let path = "/v1/conversations/c-pix/messages";
    let mut replies = Vec::new();
    for text in ["quero recarregar 20 reais no cartão 1111111111", "pix", "sim"] {
        let r: Value = s
            .post(path, Some(CLIENT_A), says(text))
            .await
            .json()
            .await
            .expect("json");
        replies.push(r["replies"][0]["text"].as_str().unwrap_or_default().to_owned());
    }
    assert!(replies[0].contains("meio de pagamento"), "{replies:?}");
    assert!(replies[1].starts_with("Confirma"), "{replies:?}");
    assert!(replies[2].contains("aprovada"), "{replies:?}");
    assert_eq!(s.chat.recharges(), 1);
}

/// A transfer over HTTP: the bot goes silent, the support agent's answer shows in the conversation
/// with their name, and after the hand-back the bot answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_a_support_agents_answer_shows_in_the_conversation() {
    use vt_agent::testkit::SupportAgent;
    let s = Served::serve(with_keys()).await;
    let path = "/v1/conversations/c-pessoa/messages";
    s.post(path, Some(CLIENT_A), says("quero falar com um atendente"))
        .await;
    let case = s
        .chat
        .store
        .open_case_of("c-pessoa")
        .await
        .expect("read")
        .expect("a case");
    assert_eq!(case.tenant_id, "empresa-a");
    let metrics = s.get("/metrics", Some(ADMIN)).await.text().await.expect("text");
    assert!(metrics.contains("vt_cases_open 1"), "{metrics}");
    let agent = SupportAgent {
        login: "fulana",
        name: "Fulana",
        tenant: Some("empresa-a"),
    };
    s.chat
        .service
        .cases()
        .claim_case(&case.id, agent)
        .await
        .expect("claim");
    let metrics = s.get("/metrics", Some(ADMIN)).await.text().await.expect("text");
    assert!(metrics.contains("vt_cases_waiting 0"), "{metrics}");
    assert!(
        metrics.contains("vt_case_claim_seconds{quantile=\"0.5\"} 0"),
        "claimed at once: {metrics}"
    );
    let held: Value = s
        .post(path, Some(CLIENT_A), says("oi?"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(held["replies"], json!([]), "the bot is silent: {held}");
    s.chat
        .service
        .cases()
        .agent_reply(&case.id, agent, "Olá, sou a Fulana. Qual o cartão?")
        .await
        .expect("reply");
    let view: Value = s
        .get("/v1/conversations/c-pessoa", Some(CLIENT_A))
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
    assert_eq!(last["name"], "Fulana");
    assert_eq!(last["text"], "Olá, sou a Fulana. Qual o cartão?");
    s.chat
        .service
        .cases()
        .hand_back(&case.id, agent, None)
        .await
        .expect("hand back");
    let back: Value = s
        .post(path, Some(CLIENT_A), says("saldo do cartão 1111111111"))
        .await
        .json()
        .await
        .expect("json");
    assert!(
        back["replies"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("****1111"),
        "{back}"
    );
}

/// A company imports its opt-ins: every row checked before any is recorded (the error names the field,
/// never the value), each on record with the key that imported it; a person's later PARAR wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_companys_opt_ins_are_checked_whole_and_recorded_with_the_key() {
    let s = Served::serve(with_keys()).await;
    let store = s.chat.store.clone();
    let bad = s
        .post(
            "/v1/optins",
            Some(CLIENT_A),
            json!({"optins": [
                {"telefone": "5511999990000", "origem": "site", "em": "2026-11-01T10:00:00Z"},
                {"telefone": "11-abc", "origem": "site", "em": "2026-11-01T10:00:00Z"}]}),
        )
        .await;
    assert_eq!(bad.status(), 400);
    let body: Value = bad.json().await.expect("json");
    assert_eq!(body["error"]["field"], "optins[1].telefone", "{body}");
    assert!(!body.to_string().contains("11-abc"), "never the value: {body}");
    assert!(
        store.consent("5511999990000").await.expect("read").is_none(),
        "nothing recorded"
    );

    // The person said PARAR after the date the company gives: their word stands.
    store
        .record_consent(&vt_store::concerns::ConsentChange {
            wa_id: "5511988880000".into(),
            opted_in: false,
            source: "chat".into(),
            who: "5511988880000".into(),
            at: "2026-11-10T10:00:00Z".parse().expect("t"),
        })
        .await
        .expect("out");
    let ok: Value = s
        .post(
            "/v1/optins",
            Some(CLIENT_A),
            json!({"optins": [
                {"telefone": "+5511999990000", "origem": "contrato", "em": "2026-11-01T10:00:00Z"},
                {"telefone": "5511988880000", "origem": "contrato", "em": "2026-11-01T10:00:00Z"}]}),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(ok, json!({"registrados": 1, "recebidos": 2}));
    let events = store.consent_events("5511999990000").await.expect("events");
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].source.as_str(), events[0].who.as_str()),
        ("contrato", "api:a")
    );
    assert!(
        !store
            .consent("5511988880000")
            .await
            .expect("read")
            .expect("on record")
            .opted_in
    );
}
