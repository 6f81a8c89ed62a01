//! `vt-agent serve` through real HTTP on loopback: every route, every auth case, every limit, the
//! idempotency rules and a graceful stop with a turn in flight.

use std::time::Duration;

use serde_json::{Value, json};
use vt_agent::{ApiKeyConfig, HttpConfig, Role, key_hash};

use crate::support::Served;

pub(crate) const CLIENT_A: &str = "chave-cliente-a-123456";
pub(crate) const CLIENT_B: &str = "chave-cliente-b-123456";
pub(crate) const ADMIN: &str = "chave-admin-123456";

pub(crate) fn keys() -> Vec<ApiKeyConfig> {
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

pub(crate) fn with_keys() -> HttpConfig {
    HttpConfig {
        api_keys: keys(),
        ..HttpConfig::default()
    }
}

pub(crate) async fn error_of(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let body: Value = r.json().await.expect("a JSON error");
    (status, body["error"].clone())
}

pub(crate) fn says(text: &str) -> Value {
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
