//! `serve`'s routes: the README's flow example, every channel registered through its value, every route
//! refusing in the API's JSON shape.

use crate::http::*;
use crate::support::Served;
use serde_json::Value;
use std::time::Duration;
use vt_agent::HttpConfig;

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
pub(crate) fn every_channel(
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
pub(crate) const CONSOLE_ROUTES: &[&str] = &[
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
