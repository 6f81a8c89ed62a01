//! `vt-agent serve` through real HTTP on loopback: every route, every auth case, every limit, the
//! idempotency rules and a graceful stop with a turn in flight.

use std::time::Duration;

use serde_json::{Value, json};
use vt_agent::{ApiKeyConfig, HttpConfig, Role, key_hash};

use crate::support::Served;

const CLIENT_A: &str = "chave-cliente-a-123456";
const CLIENT_B: &str = "chave-cliente-b-123456";
const ADMIN: &str = "chave-admin-123456";

fn keys() -> Vec<ApiKeyConfig> {
    let key = |name: &str, secret: &str, tenant: &str, role| ApiKeyConfig {
        name: name.into(),
        sha256: key_hash(secret),
        tenant: tenant.into(),
        role,
    };
    vec![
        key("a", CLIENT_A, "empresa-a", Role::Client),
        key("b", CLIENT_B, "empresa-b", Role::Client),
        key("ops", ADMIN, "empresa-a", Role::Admin),
    ]
}

fn with_keys() -> HttpConfig {
    HttpConfig {
        api_keys: keys(),
        ..HttpConfig::default()
    }
}

async fn error_of(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let body: Value = r.json().await.expect("a JSON error");
    (status, body["error"].clone())
}

fn says(text: &str) -> Value {
    json!({"text": text, "user": {"id": "u-1", "name": "Ana"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_over_http_recharges_once_and_reads_back_masked() {
    let s = Served::serve(with_keys()).await;
    let r = s
        .post(
            "/v1/conversations",
            Some(CLIENT_A),
            json!({"user": {"id": "u-1"}}),
        )
        .await;
    assert_eq!(r.status(), 201);
    let id = r.json::<Value>().await.expect("json")["conversation_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let path = format!("/v1/conversations/{id}/messages");
    let ask: Value = s
        .post(&path, Some(CLIENT_A), says("recarrega 50 no 2345678901 via pix"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(ask["conversation_id"], id.as_str());
    assert!(
        ask["replies"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Confirma")
    );
    assert_eq!(ask["replies"][0]["buttons"][0]["id"], "sim", "{ask}");
    // The emphasis as marked, and the same words plain for a client that shows plain text.
    let (marked, plain) = (
        ask["replies"][0]["text"].as_str().unwrap_or_default(),
        ask["replies"][0]["plain_text"].as_str().unwrap_or_default(),
    );
    assert!(
        marked.contains("*sim*") && plain.contains("Responda sim") && !plain.contains("*sim*"),
        "{ask}"
    );
    let done: Value = s
        .post(&path, Some(CLIENT_A), says("sim"))
        .await
        .json()
        .await
        .expect("json");
    assert!(
        done["replies"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("aprovada"),
        "{done}"
    );
    assert_eq!(done["replies"][0]["buttons"], json!([]));
    assert_eq!(done["ended"], false);
    assert_eq!(s.chat.recharges(), 1);

    let view: Value = s
        .get(&format!("/v1/conversations/{id}"), Some(CLIENT_A))
        .await
        .json()
        .await
        .expect("json");
    let roles: Vec<&str> = view["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert!(!view.to_string().contains("2345678901"), "cards masked: {view}");
    assert!(view.to_string().contains("****8901"));
    // An unknown id starts that conversation.
    let fresh = s
        .post("/v1/conversations/pedido-42/messages", Some(CLIENT_A), says("oi"))
        .await;
    assert_eq!(fresh.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_checked_and_reach_only_their_tenant() {
    let s = Served::serve(with_keys()).await;
    let path = "/v1/conversations/c-a/messages";
    for (key, what) in [(None, "no key"), (Some("chave-errada"), "unknown key")] {
        let (status, error) = error_of(s.post(path, key, says("oi")).await).await;
        assert_eq!(
            (status, error["code"].as_str()),
            (401, Some("unauthorized")),
            "{what}"
        );
    }
    assert_eq!(
        s.post(path, Some(CLIENT_A), says("saldo 1234567890"))
            .await
            .status(),
        200
    );
    // Another tenant's key: the conversation does not exist for it, to read or to write.
    let (status, error) = error_of(s.get("/v1/conversations/c-a", Some(CLIENT_B)).await).await;
    assert_eq!((status, error["code"].as_str()), (404, Some("not_found")));
    let (status, _) = error_of(s.post(path, Some(CLIENT_B), says("saldo 1234567890")).await).await;
    assert_eq!(status, 404);
    assert_eq!(s.get("/v1/conversations/c-a", Some(CLIENT_A)).await.status(), 200);
    // Roles: metrics are an operator's.
    let (status, error) = error_of(s.get("/metrics", Some(CLIENT_A)).await).await;
    assert_eq!((status, error["code"].as_str()), (403, Some("forbidden")));
    let metrics = s.get("/metrics", Some(ADMIN)).await.text().await.expect("text");
    assert!(metrics.contains("vt_turns_total 1"), "{metrics}");
    assert!(metrics.contains("vt_zero_token_turns_total 1"), "{metrics}");
    assert!(metrics.contains("vt_outbox_depth 0") && metrics.contains("vt_outbox_dead_letters 0"));
    assert!(metrics.contains("vt_cases_open 0"), "{metrics}");
    assert!(metrics.contains("vt_turn_latency_seconds_bucket"));
    // The month's cost per tenant: a balance read by level 1 costs nothing, and is known.
    assert!(
        metrics.contains("vt_custo_mes_reais{tenant=\"empresa-a\"} 0"),
        "{metrics}"
    );
    // And per conversation over 30 days: one conversation, R$ 0, known. No flow ran: no figure.
    assert!(
        metrics.contains("vt_custo_por_conversa_reais_30d{tenant=\"empresa-a\"} 0"),
        "{metrics}"
    );
    assert!(!metrics.contains("vt_custo_por_fluxo_reais_30d{"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_get_clear_json_errors_naming_the_field() {
    let s = Served::serve(HttpConfig {
        body_limit_bytes: 8 * 1024,
        ..HttpConfig::default()
    })
    .await;
    let path = "/v1/conversations/c-1/messages";
    let send = |body: Vec<u8>| {
        s.client
            .post(format!("{}{path}", s.url))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let (status, error) = error_of(send(vec![b'{'; 16 * 1024]).await.expect("sent")).await;
    assert_eq!((status, error["code"].as_str()), (413, Some("payload_too_large")));
    let (status, error) = error_of(send(b"{\"text\": \"a\xff\"}".to_vec()).await.expect("sent")).await;
    assert_eq!((status, error["field"].as_str()), (400, Some("corpo")), "{error}");
    let (status, error) = error_of(send(b"{\"text\": ".to_vec()).await.expect("sent")).await;
    assert_eq!((status, error["field"].as_str()), (400, Some("corpo")), "{error}");
    // In the API's language, naming the field as the client sent it: never serde's English.
    let said = error["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("o JSON acaba antes do fim") && !said.contains("EOF"),
        "{error}"
    );
    for (body, field, words) in [
        (
            &br#"{"user": 5, "text": "oi"}"#[..],
            "user",
            "tipo inválido: veio um número, esperado um objeto",
        ),
        (
            br#"{"user": {"name": "u"}, "text": "oi"}"#,
            "user.id",
            "campo obrigatório ausente: id",
        ),
        (br#"{"text": "oi"}"#, "user", "campo obrigatório ausente: user"),
        (br#"[1]"#, "corpo", "o corpo deve ser um objeto JSON"),
    ] {
        let (status, error) = error_of(send(body.to_vec()).await.expect("sent")).await;
        assert_eq!((status, error["field"].as_str()), (400, Some(field)), "{error}");
        let said = error["message"].as_str().unwrap_or_default();
        assert!(said.contains(words), "{error}");
        assert!(!said.contains("expected") && !said.contains("struct"), "{error}");
    }
    let (status, error) = error_of(
        send(br#"{"text": ["9876543210"], "user": {"id": "u"}}"#.to_vec())
            .await
            .expect("sent"),
    )
    .await;
    assert_eq!((status, error["field"].as_str()), (400, Some("text")));
    assert!(!error.to_string().contains("9876543210"), "{error}");
    let (status, error) = error_of(send(br#"{"text": "oi"}"#.to_vec()).await.expect("sent")).await;
    assert_eq!(status, 400);
    assert!(
        error["message"].as_str().unwrap_or_default().contains("user"),
        "{error}"
    );
    let (status, error) = error_of(
        s.post("/v1/conversations/um%20id/messages", None, says("oi"))
            .await,
    )
    .await;
    assert_eq!((status, error["field"].as_str()), (400, Some("id")));
    let (status, error) = error_of(s.get("/v2/nada", None).await).await;
    assert_eq!((status, error["code"].as_str()), (404, Some("not_found")));
    // A known route with a method it does not take: the same JSON error, with `Allow`.
    for (method, route, allow) in [
        ("DELETE", "/v1/conversations/c-1", "GET"),
        ("GET", "/v1/flows/vt", "POST"),
        ("PUT", "/v1/flows/vt", "POST"),
        ("PATCH", "/v1/batches/b-1", "GET"),
        ("OPTIONS", "/v1/conversations", "POST"),
        ("TRACE", "/healthz", "GET"),
    ] {
        let r = s
            .client
            .request(method.parse().expect("method"), format!("{}{route}", s.url))
            .send()
            .await
            .expect("sent");
        let allowed = r
            .headers()
            .get("allow")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert!(allowed.contains(allow), "{method} {route}: Allow {allowed:?}");
        let (status, error) = error_of(r).await;
        assert_eq!(
            (status, error["code"].as_str()),
            (405, Some("method_not_allowed")),
            "{method} {route}: {error}"
        );
    }
    // Over-long text gets the same answer as in the terminal.
    let long: Value = s
        .post(path, None, says(&"a".repeat(5_000)))
        .await
        .json()
        .await
        .expect("json");
    assert!(
        long["replies"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("5000 caracteres")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_over_its_rate_gets_429_with_retry_after() {
    let s = Served::serve(HttpConfig {
        rate_per_minute: 3,
        ..with_keys()
    })
    .await;
    for _ in 0..3 {
        assert_eq!(s.get("/v1/conversations/x", Some(CLIENT_A)).await.status(), 404);
    }
    let r = s.get("/v1/conversations/x", Some(CLIENT_A)).await;
    assert_eq!(r.status(), 429);
    let wait: u64 = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!((1..=60).contains(&wait), "{wait}");
    assert_eq!(error_of(r).await.1["code"], "rate_limited");
    // Another key has its own budget.
    assert_eq!(s.get("/v1/conversations/x", Some(CLIENT_B)).await.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_key_configured_there_is_no_key_rate_to_run_out_of() {
    // Open mode (loopback only): everyone is the one local caller. Counting them all against one
    // key's rate made a second person on the same machine wait for the first.
    let s = Served::serve(HttpConfig {
        rate_per_minute: 3,
        ..HttpConfig::default()
    })
    .await;
    for _ in 0..6 {
        assert_eq!(s.get("/v1/conversations/x", None).await.status(), 404);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_in_flight_are_bounded_and_a_slow_request_times_out_without_losing_its_turn() {
    // Card 4444444444: the balance system never answers; the client gives up after 300 ms.
    let s = Served::serve(HttpConfig {
        max_turns_in_flight: 1,
        request_timeout_ms: 100,
        ..HttpConfig::default()
    })
    .await;
    let slow = s.post("/v1/conversations/lento/messages", None, says("saldo 4444444444"));
    let other = async {
        // Well inside the slow turn (≥ 300 ms), even on a loaded machine.
        tokio::time::sleep(Duration::from_millis(150)).await;
        s.post("/v1/conversations/outra/messages", None, says("saldo 1234567890"))
            .await
    };
    let (slow, other) = tokio::join!(slow, other);
    let (status, error) = error_of(slow).await;
    assert_eq!((status, error["code"].as_str()), (504, Some("timeout")));
    assert_eq!(
        other.headers().get("retry-after").map(|v| v.as_bytes()),
        Some(&b"1"[..])
    );
    assert_eq!(error_of(other).await.0, 503);
    // The timed-out turn went on and was stored: its reply is in the conversation.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let view: Value = s
        .get("/v1/conversations/lento", None)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(view["messages"].as_array().map(Vec::len), Some(2), "{view}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_with_an_idempotency_key_runs_once() {
    let s = Served::serve(with_keys()).await;
    let input = json!({"cartao": "1234567890", "recarga": {"valor": 50, "meio_pagamento": {"tipo": "pix"}}});
    let send = |body: Value, key: &str| {
        s.client
            .post(format!("{}/v1/flows/vt", s.url))
            .bearer_auth(CLIENT_A)
            .header("idempotency-key", key)
            .json(&body)
            .send()
    };
    let first = send(input.clone(), "pedido-1").await.expect("sent");
    assert_eq!(first.status(), 200);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first: Value = first.json().await.expect("json");
    assert_eq!(first["status"], "concluido");
    assert_eq!(first["etapas"].as_array().map(Vec::len), Some(10));
    let again = send(input.clone(), "pedido-1").await.expect("sent");
    assert_eq!(
        again.headers().get("idempotent-replayed").map(|v| v.as_bytes()),
        Some(&b"true"[..])
    );
    let again: Value = again.json().await.expect("json");
    assert_eq!(again["execucao_id"], first["execucao_id"], "the stored response");
    assert_eq!(s.chat.sim.charges("1234567890"), 1);
    let mut other = input.clone();
    other["recarga"]["valor"] = json!(60);
    let (status, error) = error_of(send(other, "pedido-1").await.expect("sent")).await;
    assert_eq!((status, error["code"].as_str()), (409, Some("conflict")));
    // The key scopes the recharge: a new key for the same card and value is a new charge.
    send(input.clone(), "pedido-2").await.expect("sent");
    assert_eq!(s.chat.sim.charges("1234567890"), 2);
    // Without a key, invalid input is a 400 naming the field, and nothing is stored.
    let r = s
        .client
        .post(format!("{}/v1/flows/vt", s.url))
        .bearer_auth(CLIENT_A)
        .json(&json!({"cartao": "1234567890", "politicas": {"valor_min": 10, "valor_max": -10}}))
        .send()
        .await
        .expect("sent");
    let (status, error) = error_of(r).await;
    assert_eq!(
        (status, error["field"].as_str()),
        (400, Some("politicas.valor_max"))
    );
    let (status, _) = error_of(send(input, "k".repeat(300).as_str()).await.expect("sent")).await;
    assert_eq!(status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_an_openapi_document_from_the_types() {
    let s = Served::serve(with_keys()).await;
    assert_eq!(s.get("/healthz", None).await.status(), 200);
    let ready: Value = s.get("/readyz", None).await.json().await.expect("json");
    assert_eq!(ready["status"], "ready");
    let doc: Value = s.get("/v1/openapi.json", None).await.json().await.expect("json");
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/v1/conversations",
        "/v1/conversations/{id}",
        "/v1/conversations/{id}/messages",
        "/v1/flows/vt",
        "/healthz",
        "/readyz",
        "/metrics",
    ] {
        assert!(doc["paths"].get(path).is_some(), "{path} missing");
    }
    let schemas = &doc["components"]["schemas"];
    for name in [
        "MessageRequest",
        "MessageResponse",
        "ErrorBody",
        "FlowOutput",
        "FlowInput",
    ] {
        assert!(schemas.get(name).is_some(), "{name} missing");
    }
    assert!(
        schemas["FlowInput"]["properties"]["cartao"].is_object(),
        "from the parsed type"
    );
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_answers_the_turn_in_flight() {
    let mut s = Served::serve(HttpConfig::default()).await;
    let url = format!("{}/v1/conversations/parada/messages", s.url);
    let client = s.client.clone();
    // Card 4444444444 takes ~300 ms (the balance system never answers).
    let in_flight =
        tokio::spawn(async move { client.post(url).json(&says("saldo 4444444444")).send().await });
    tokio::time::sleep(Duration::from_millis(150)).await;
    s.stop();
    let answer = in_flight.await.expect("join").expect("answered");
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().await.expect("json");
    assert!(
        body["replies"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Não consegui consultar")
    );
    tokio::time::timeout(Duration::from_secs(5), &mut s.task)
        .await
        .expect("the server stops")
        .expect("join")
        .expect("clean exit");
    assert!(
        reqwest::get(format!("{}/healthz", s.url)).await.is_err(),
        "no new connections after the stop"
    );
    let stored = s.chat.store.messages("parada").await.expect("messages");
    assert!(
        stored.len() >= 2,
        "the turn was committed before the stop finished"
    );
}

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

/// The issue's report, over HTTP: a recharge whose payment method is asked for, then "pix", then "sim".
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

/// The README's `POST /v1/flows/vt` example, with an API key configured: the example made for the API
/// (`examples/recarga-api.json`, no `tenant_id`: the key's tenant is the run's) runs; the `run-flow`
/// example names its own tenant, which a key of another tenant is refused, by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_flow_example_runs_with_a_key() {
    let s = Served::serve(with_keys()).await;
    let read = |name: &str| {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples")
                .join(name),
        )
        .expect("example")
    };
    let post = |body: Vec<u8>| {
        s.client
            .post(format!("{}/v1/flows/vt", s.url))
            .bearer_auth(CLIENT_A)
            .header("Idempotency-Key", "pedido-42")
            .body(body)
            .send()
    };
    let output: Value = post(read("recarga-api.json"))
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    assert_eq!(output["status"], "concluido", "{output}");
    let (status, error) = error_of(post(read("recarga-saldo-baixo.json")).await.expect("sent")).await;
    assert_eq!(
        (status, error["field"].as_str()),
        (400, Some("tenant_id")),
        "{error}"
    );
    // A value that is no number breaks the schema: 400 naming it, nothing runs, nobody is notified.
    let abc = br#"{"cartao": "1234567890", "recarga": {"valor": "abc", "meio_pagamento": {"tipo": "pix"}}}"#;
    let (status, error) = error_of(post(abc.to_vec()).await.expect("sent")).await;
    assert_eq!(
        (status, error["field"].as_str()),
        (400, Some("recarga.valor")),
        "{error}"
    );
    assert!(!error.to_string().contains("abc"), "{error}");
}

/// WhatsApp, Mattermost and the web chat, each configured.
fn every_channel(
    templates: &std::sync::Arc<vt_agent::testkit::Templates>,
    wiring: &vt_agent::Wiring,
) -> [vt_agent::Channel; 3] {
    let wa = vt_agent::testkit::WhatsAppConfig {
        phone_number_id: Some("123456123".into()),
        access_token: Some("EAAtesttokenvalue0123456789".into()),
        app_secret: Some("segredo-do-app".into()),
        verify_token: Some("vibecoding".into()),
        ..Default::default()
    };
    let mm = vt_agent::testkit::MattermostConfig {
        url: Some("http://127.0.0.1:9".into()),
        bot_token: Some("token-do-bot-0123456789".into()),
        slash_token: Some("token-do-slash".into()),
        canal_suporte: Some("suporte".into()),
        ..Default::default()
    };
    let site = vt_agent::testkit::WebchatConfig {
        clientes: vec![vt_agent::testkit::WebchatTenant {
            tenant: "acme".into(),
            origens: vec!["https://www.acme.com.br".into()],
            ..Default::default()
        }],
        ..Default::default()
    };
    [
        vt_agent::testkit::whatsapp_channel(&wa, templates, wiring),
        vt_agent::testkit::mattermost_channel(&mm, wiring),
        vt_agent::testkit::webchat_channel(&site, wiring),
    ]
}

/// Every channel is registered through its value: the routes `serve` answers are the ones each
/// channel's value lists, its senders are the outbox worker's, and a channel with no configuration
/// brings nothing.
#[tokio::test]
async fn every_channel_is_registered_through_its_value() {
    use std::sync::Arc;
    use vt_agent::Wiring;

    let chat = Arc::new(crate::support::chat_harness(None, vt_domain::tools::VtSettings::default()).await);
    let wiring = Wiring {
        service: chat.service.clone(),
        agent: "vt".into(),
        tenant: "default".into(),
    };
    let templates = Arc::new(vt_agent::testkit::Templates::default());
    let channels = every_channel(&templates, &wiring);
    let mut state = vt_agent::AppState::new(chat.service.clone(), "vt", HttpConfig::default());
    for channel in &channels {
        state = state.with_channel(channel);
    }
    assert_eq!(
        state.channel_routes(),
        [
            ("whatsapp", "/channels/whatsapp/webhook"),
            ("mattermost", "/channels/mattermost/slash"),
            ("mattermost", "/channels/mattermost/webhook"),
            ("mattermost", "/channels/mattermost/actions"),
            ("webchat", "/webchat/widget.js"),
            ("webchat", "/webchat/api/sessao"),
            ("webchat", "/webchat/api/mensagens"),
            ("webchat", "/webchat/api/eventos"),
        ]
    );
    let senders: Vec<_> = channels
        .iter()
        .flat_map(|c| c.senders.iter().map(|s| s.channel().to_owned()))
        .collect();
    assert_eq!(senders, ["whatsapp", "mattermost", vt_agent::testkit::BOARD]);
    assert_eq!(channels[1].jobs.len(), 1, "the websocket bot");
    // The routes listed are served: Meta's subscription check with a wrong token is refused, not 404.
    let served = crate::support::serve_state(chat.clone(), state).await;
    let verify = served
        .client
        .get(format!(
            "{}/channels/whatsapp/webhook?hub.mode=subscribe&hub.verify_token=outro&hub.challenge=1",
            served.url
        ))
        .send()
        .await
        .expect("verify");
    assert_eq!(verify.status(), 403);
    // Without configuration a channel brings nothing.
    assert!(!vt_agent::testkit::whatsapp_channel(&Default::default(), &templates, &wiring).is_on());
    assert!(!vt_agent::testkit::mattermost_channel(&Default::default(), &wiring).is_on());
    assert!(!vt_agent::testkit::webchat_channel(&Default::default(), &wiring).is_on());
}

/// The console's routes (`http/console`), each with the methods it answers.
const CONSOLE_ROUTES: &[&str] = &[
    "/console",
    "/console/entrar",
    "/console/sair",
    "/console/lookup",
    "/console/conversations",
    "/console/conversations/x1",
    "/console/cards",
    "/console/fila",
    "/console/presenca",
    "/console/relatorio",
    "/console/recorrencias",
    "/console/replay",
    "/console/replay/casos/x1",
    "/console/cases",
    "/console/cases/x1",
    "/console/cases/x1/mensagens",
    "/console/cases/x1/assumir",
    "/console/cases/x1/responder",
    "/console/cases/x1/propor",
    "/console/cases/x1/devolver",
    "/console/cases/x1/encerrar",
    "/console/cases/x1/transferir",
    "/console/flows",
    "/console/flows/x1",
    "/console/batches/x1",
    "/console/outbox",
    "/console/outbox/1/retry",
    "/console/usage",
    "/console/assets/x1",
];

/// Every rejection of every route is the API's JSON error in pt-BR — the framework's own extractor
/// failures included: each registered route (the API's from its OpenAPI document, each channel's, the
/// console's) gets an oversized, a malformed and a wrong-type request, and a query that does not parse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_refuses_in_the_apis_json_shape() {
    use std::sync::Arc;
    let chat = Arc::new(crate::support::chat_harness(None, vt_domain::tools::VtSettings::default()).await);
    let wiring = vt_agent::Wiring {
        service: chat.service.clone(),
        agent: "vt".into(),
        tenant: "default".into(),
    };
    let templates = Arc::new(vt_agent::testkit::Templates::default());
    let mut state = vt_agent::AppState::new(chat.service.clone(), "vt", HttpConfig::default());
    for channel in &every_channel(&templates, &wiring) {
        state = state.with_channel(channel);
    }
    let mut paths: Vec<String> = state
        .channel_routes()
        .iter()
        .map(|(_, p)| (*p).to_owned())
        .collect();
    let api = vt_agent::openapi();
    let api_paths = api["paths"].as_object().expect("paths");
    assert!(api_paths.len() >= 10, "the API's routes: {}", api_paths.len());
    paths.extend(api_paths.keys().map(|p| p.replace("{id}", "x1")));
    paths.extend(CONSOLE_ROUTES.iter().map(|p| (*p).to_owned()));
    let served = crate::support::serve_state(chat.clone(), state).await;
    // A connection the server closed after an oversized body is never reused.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    let sentinel = "zq9xvalor";
    let oversized = format!("{{\"text\": \"{}\"}}", "a".repeat(100 * 1024));
    let wrong_type = format!(
        "{{\"text\": 5, \"texto\": {{}}, \"user\": 7, \"id\": [1], \"cartao\": true, \"x\": \"{sentinel}\"}}"
    );
    let query = format!(
        "ultimo={sentinel}&limit={sentinel}&pagina={sentinel}&mes={sentinel}&desde={sentinel}&formato={sentinel}"
    );
    let mut checked = 0;
    for path in &paths {
        let url = format!("{}{path}", served.url);
        let requests = [
            client
                .post(&url)
                .header("content-type", "application/json")
                .body(oversized.clone()),
            client
                .post(&url)
                .header("content-type", "application/json")
                .body("{\"text\":"),
            client
                .post(&url)
                .header("content-type", "application/json")
                .body(wrong_type.clone()),
            client
                .post(&url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("csrf={sentinel}&limit=[")),
            client.get(format!("{url}?{query}")),
        ];
        for (i, request) in requests.into_iter().enumerate() {
            let r = match request.timeout(Duration::from_secs(10)).send().await {
                Ok(r) => r,
                // A route that refuses before it reads (a method it does not take) may close the
                // connection while the oversized body is still being written: nothing to read then.
                Err(e) if i == 0 && e.is_request() => continue,
                Err(e) => panic!("{path}: {e}"),
            };
            let status = r.status();
            if status.as_u16() < 400 {
                continue;
            }
            let kind = r
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            if kind.starts_with("text/html") {
                // The console's own pages for people (a sign-in, a page not found) are designed, not
                // the framework's.
                continue;
            }
            assert!(kind.starts_with("application/json"), "{path} {status}: {kind}");
            let body: Value = r.json().await.unwrap_or_else(|e| panic!("{path} {status}: {e}"));
            let (code, message) = (
                &body["error"]["code"],
                body["error"]["message"].as_str().unwrap_or(""),
            );
            assert!(
                code.as_str().is_some_and(|c| !c.is_empty()),
                "{path} {status}: {body}"
            );
            assert!(!message.is_empty(), "{path} {status}: {body}");
            for english in ["Failed", "Expected", "Invalid", "missing", "invalid type"] {
                assert!(!message.contains(english), "{path} {status}: {message}");
            }
            assert!(
                !body.to_string().contains(sentinel),
                "{path} {status}: a value echoed: {body}"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= paths.len(),
        "refusals checked: {checked} over {} routes",
        paths.len()
    );
}
