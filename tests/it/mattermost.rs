//! The Mattermost routes through real HTTP, driven by Mattermost's own payloads (slash command form,
//! interactive action, outgoing webhook): tokens, a support agent's audited lookup, and a whole recharge
//! with buttons — good, forged and repeated clicks.

use std::sync::Arc;

use serde_json::{Value, json};
use vt_agent::testkit::MattermostConfig;

use crate::support::Served;

const SLASH_TOKEN: &str = "qzgakf1nx3yt9dr4n8585ihbxy";
const HOOK_TOKEN: &str = "zmigewsanbbsdf59xnmduzypjc";

fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/payloads")
        .join(name);
    std::fs::read_to_string(path).expect("fixture")
}

async fn mattermost(support_users: &[&str]) -> Served {
    let config = MattermostConfig {
        slash_token: Some(SLASH_TOKEN.into()),
        webhook_token: Some(HOOK_TOKEN.into()),
        actions_secret: Some("segredo-dos-botoes-0123456789".into()),
        public_url: Some("https://vt.example.com".into()),
        support_users: support_users.iter().map(|u| (*u).to_owned()).collect(),
        ..MattermostConfig::default()
    };
    let chat = Arc::new(crate::support::chat_harness(None, vt_domain::tools::VtSettings::default()).await);
    let wiring = vt_agent::Wiring {
        service: chat.service.clone(),
        agent: "vt".into(),
        tenant: "empresa-a".into(),
    };
    let channel = vt_agent::testkit::mattermost_channel(&config, &wiring);
    let state =
        vt_agent::AppState::new(chat.service.clone(), "vt", Default::default()).with_channel(&channel);
    crate::support::serve_state(chat, state).await
}

/// Mattermost's documented slash command body, with our command's text.
fn slash_body(text: &str) -> String {
    fixture("mm-slash-command.request.body.txt")
        .replace("text=toronto+week", &format!("text={}", text.replace(' ', "+")))
}

async fn slash(s: &Served, token: &str, body: String) -> (u16, Value) {
    let r = s
        .client
        .post(format!("{}/channels/mattermost/slash", s.url))
        .header("authorization", format!("Token {token}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .expect("sent");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn click(s: &Served, context: &Value, user_id: &str) -> (u16, Value) {
    let mut request: Value =
        serde_json::from_str(&fixture("mm-interactive-action.request.json")).expect("json");
    request["context"] = context.clone();
    request["user_id"] = json!(user_id);
    let r = s
        .client
        .post(format!("{}/channels/mattermost/actions", s.url))
        .json(&request)
        .send()
        .await
        .expect("sent");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slash_command_checks_its_token_and_answers_ephemerally() {
    let s = mattermost(&[]).await;
    // Mattermost's documented request as it is: an unknown command text gets the help.
    let (status, body) = slash(&s, SLASH_TOKEN, fixture("mm-slash-command.request.body.txt")).await;
    assert_eq!(status, 200);
    assert_eq!(body["response_type"], "ephemeral");
    assert!(
        body["text"].as_str().unwrap_or_default().contains("Posso ajudar"),
        "{body}"
    );
    let (status, _) = slash(&s, "token-errado", slash_body("saldo 1234567890")).await;
    assert_eq!(status, 401);
    let (_, body) = slash(&s, SLASH_TOKEN, slash_body("ajuda")).await;
    assert!(body["text"].as_str().unwrap_or_default().contains("Posso ajudar"));
    assert!(
        s.chat.store.audit_records(10).await.expect("read").is_empty(),
        "not a support agent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_support_agents_lookup_is_answered_masked_and_audited() {
    let s = mattermost(&["alan"]).await;
    let (status, body) = slash(&s, SLASH_TOKEN, slash_body("saldo 1234567890")).await;
    assert_eq!(status, 200);
    let text = body["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("****7890") && !text.contains("1234567890"),
        "{text}"
    );
    let audit = s.chat.store.audit_records(10).await.expect("read");
    assert_eq!(audit.len(), 1);
    assert_eq!(
        (
            audit[0].support_user.as_str(),
            audit[0].tenant_id.as_str(),
            audit[0].cartao.as_str()
        ),
        ("alan", "empresa-a", "****7890")
    );
    assert_eq!(audit[0].outcome, "saldo_informado");
    assert_eq!(audit[0].cartao_hash.len(), 64);
    assert!(
        !serde_json::to_string(&audit)
            .expect("json")
            .contains("1234567890")
    );
    slash(&s, SLASH_TOKEN, slash_body("saldo 1234567890")).await;
    let again = s.chat.store.audit_records(10).await.expect("read");
    assert_eq!(
        again[0].cartao_hash, again[1].cartao_hash,
        "the same card, found by its hash"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recharge_with_buttons_charges_once_and_refuses_forged_and_repeated_clicks() {
    let s = mattermost(&[]).await;
    let (_, body) = slash(&s, SLASH_TOKEN, slash_body("recarga 50 no 2345678901 via pix")).await;
    let attachment = &body["attachments"][0];
    assert!(
        attachment["text"]
            .as_str()
            .unwrap_or_default()
            .contains("****8901"),
        "{body}"
    );
    let confirm = attachment["actions"]
        .as_array()
        .expect("buttons")
        .iter()
        .find(|a| a["id"] == "confirmar")
        .expect("confirm button")
        .clone();
    assert_eq!(confirm["type"], "button", "Mattermost requires the type");
    assert_eq!(
        confirm["integration"]["url"],
        "https://vt.example.com/channels/mattermost/actions"
    );
    let context = confirm["integration"]["context"].clone();
    let user = "erj6qck3rfgtujs86w5r6rckzh";

    let mut forged = context.clone();
    forged["pendente"] = json!("outro-pedido");
    assert_eq!(click(&s, &forged, user).await.0, 403);
    let (status, body) = click(&s, &context, "outro-usuario").await;
    assert_eq!(status, 200);
    assert!(
        body.get("update").is_none(),
        "another user's click does nothing: {body}"
    );
    assert_eq!(s.chat.recharges(), 0);

    let (status, body) = click(&s, &context, user).await;
    assert_eq!(status, 200);
    assert!(
        body["update"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("aprovada"),
        "{body}"
    );
    assert_eq!(body["update"]["props"], json!({}), "the buttons are gone");
    let (_, body) = click(&s, &context, user).await;
    assert!(
        body.get("update").is_none() && body["ephemeral_text"].is_string(),
        "{body}"
    );
    assert_eq!(s.chat.recharges(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outgoing_webhook_checks_its_token_and_answers_in_the_thread() {
    let s = mattermost(&[]).await;
    let json_hook = json!({"token": HOOK_TOKEN, "team_id": "kwoknj9nwpypzgzy78wkw516qe",
        "channel_id": "hawos4dqtby53pd64o4a4cmeoo", "channel_name": "town-square", "timestamp": 1445532266000_u64,
        "user_id": "rnina9994bde8mua79zqcg5hmo", "user_name": "somename", "post_id": "axdygg1957njfe5pu38saikdho",
        "text": "@agent saldo 1111111111", "trigger_word": "@agent", "file_ids": ""});
    let r = s
        .client
        .post(format!("{}/channels/mattermost/webhook", s.url))
        .json(&json_hook)
        .send()
        .await
        .expect("sent");
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["response_type"], "comment");
    assert!(
        body["text"].as_str().unwrap_or_default().contains("****1111"),
        "{body}"
    );
    let form = "channel_id=hawos4dqtby53pd64o4a4cmeoo&channel_name=town-square&file_ids=&post_id=bxdygg1957njfe5pu38saikdho&team_domain=someteam&team_id=kwoknj9nwpypzgzy78wkw516qe&text=%40agent+oi&timestamp=1445532266&token=errado&trigger_word=%40agent&user_id=rnina9994bde8mua79zqcg5hmo&user_name=somename";
    let r = s
        .client
        .post(format!("{}/channels/mattermost/webhook", s.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .expect("sent");
    assert_eq!(r.status(), 401);
}

/// A Mattermost server on loopback: `users/me`, the websocket (with Mattermost's own frames) and
/// `POST /api/v4/posts` (rate-limited once, as Mattermost answers: plain text and `X-Ratelimit-Reset`).
struct FakeMattermost {
    url: String,
    posts: Arc<std::sync::Mutex<Vec<Value>>>,
    post_calls: Arc<std::sync::atomic::AtomicUsize>,
    connections: Arc<std::sync::Mutex<Vec<String>>>,
}

/// Mattermost's `posted` frame, with another post in it.
fn posted(seq: i64, channel_type: &str, mentions: &[&str], post: Value) -> String {
    let mut frame: Value =
        serde_json::from_str(&fixture("mm-ws-posted.hackerone-2541027.json")).expect("json");
    frame["seq"] = json!(seq);
    frame["data"]["channel_type"] = json!(channel_type);
    frame["data"]["mentions"] = json!(serde_json::to_string(&mentions).expect("json"));
    frame["data"]["post"] = json!(post.to_string());
    frame.to_string()
}

/// What the fake sends over each websocket connection, in order: the frames, then whether it drops
/// the connection (else it stays open). Connections past the script get nothing and stay open.
type Script = Vec<(Vec<String>, bool)>;

/// The first connection: the bot's own post, a system post and a DM, then a drop; the second: a
/// mention in a channel.
fn dropped_then_resumed() -> Script {
    let post = |id: &str, user: &str, channel: &str, message: &str, kind: &str| {
        json!({"id": id, "user_id": user, "channel_id": channel, "root_id": "",
               "message": message, "type": kind, "props": {}})
    };
    vec![
        (
            vec![
                posted(
                    2,
                    "D",
                    &[],
                    post("p-own", "bot-id", "dm-ana", "resposta antiga", ""),
                ),
                posted(
                    3,
                    "O",
                    &[],
                    post("p-sys", "u-ana", "geral", "ana entrou", "system_join_channel"),
                ),
                posted(
                    4,
                    "D",
                    &["bot-id"],
                    post("p-ana", "u-ana", "dm-ana", "saldo 1234567890", ""),
                ),
            ],
            true,
        ),
        (
            vec![posted(
                5,
                "O",
                &["bot-id"],
                post("p-bia", "u-bia", "geral", "@vt saldo 1111111111", ""),
            )],
            false,
        ),
    ]
}

/// A Mattermost server: `/users/me`, the websocket playing `script`, and `/posts` (answering its
/// first call with a 429 when `throttle_first_post`).
async fn fake_mattermost(script: Script, throttle_first_post: bool) -> FakeMattermost {
    use axum::extract::RawQuery;
    use axum::extract::ws::{Message, WebSocketUpgrade};
    use axum::routing::{get, post};
    let script = Arc::new(script);
    let posts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let post_calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let connections = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let (p, calls, conns) = (posts.clone(), post_calls.clone(), connections.clone());
    let app = axum::Router::new()
        .route(
            "/api/v4/users/me",
            get(|| async { axum::Json(json!({"id": "bot-id", "username": "vt"})) }),
        )
        .route(
            "/api/v4/websocket",
            get(move |ws: WebSocketUpgrade, RawQuery(query): RawQuery| {
                let (conns, script) = (conns.clone(), script.clone());
                async move {
                    let n = {
                        let mut c = conns.lock().expect("lock");
                        c.push(query.unwrap_or_default());
                        c.len()
                    };
                    ws.on_upgrade(move |mut socket| async move {
                        let Some(Ok(Message::Text(auth))) = socket.recv().await else {
                            return;
                        };
                        let auth: Value = serde_json::from_str(&auth).unwrap_or_default();
                        if auth["action"] != "authentication_challenge"
                            || auth["data"]["token"] != "token-do-bot"
                        {
                            return;
                        }
                        let ok = fixture("mm-ws-response-ok.json");
                        let hello = fixture("mm-ws-hello.mmctl-pr25545.json");
                        let _ = socket.send(Message::text(ok)).await;
                        let _ = socket.send(Message::text(hello)).await;
                        let (frames, drop) = script.get(n - 1).cloned().unwrap_or_default();
                        for f in frames {
                            let _ = socket.send(Message::text(f)).await;
                        }
                        if drop {
                            // The connection drops: the bot must reconnect and resume.
                            let _ = socket.send(Message::Close(None)).await;
                            return;
                        }
                        while socket.recv().await.is_some() {}
                    })
                }
            }),
        )
        .route(
            "/api/v4/posts",
            post(
                move |headers: axum::http::HeaderMap, axum::Json(body): axum::Json<Value>| {
                    let (p, calls) = (p.clone(), calls.clone());
                    async move {
                        use axum::response::IntoResponse;
                        let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        if headers.get("authorization").and_then(|v| v.to_str().ok())
                            != Some("Bearer token-do-bot")
                        {
                            return axum::http::StatusCode::UNAUTHORIZED.into_response();
                        }
                        if n == 0 && throttle_first_post {
                            return (
                                axum::http::StatusCode::TOO_MANY_REQUESTS,
                                [("x-ratelimit-reset", "1")],
                                "limit exceeded",
                            )
                                .into_response();
                        }
                        p.lock().expect("lock").push(body);
                        (
                            axum::http::StatusCode::CREATED,
                            axum::Json(json!({"id": format!("post-{n}")})),
                        )
                            .into_response()
                    }
                },
            ),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    FakeMattermost {
        url,
        posts,
        post_calls,
        connections,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bot_answers_dms_and_mentions_and_survives_a_dropped_websocket() {
    let mm = fake_mattermost(dropped_then_resumed(), true).await;
    let config = Arc::new(MattermostConfig {
        url: Some(mm.url.clone()),
        bot_token: Some("token-do-bot".into()),
        actions_secret: Some("segredo-dos-botoes-0123456789".into()),
        public_url: Some("https://vt.example.com".into()),
        support_users: vec!["u-ana".into()],
        ..MattermostConfig::default()
    });
    let chat = Arc::new(crate::support::chat_harness(None, vt_domain::tools::VtSettings::default()).await);
    let bot = vt_agent::testkit::Bot::new(chat.service.clone(), "vt", config.clone(), "empresa-a")
        .expect("bot")
        .with_backoff(std::time::Duration::from_millis(50));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(bot.run(async move {
        let _ = stopped.await;
    }));
    let worker = vt_agent::Worker::new(chat.store.clone(), vt_engine::retry::RetryPolicy::new(5, 1))
        .with_sender(Arc::new(
            vt_agent::testkit::PostSender::new(config).expect("sender"),
        ));
    let started = std::time::Instant::now();
    while mm.posts.lock().expect("lock").len() < 2 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "replies never posted"
        );
        worker.pass().await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let _ = stop.send(());
    tokio::time::timeout(std::time::Duration::from_secs(5), running)
        .await
        .expect("the bot stops")
        .expect("join");

    let posts = mm.posts.lock().expect("lock").clone();
    let dm = posts
        .iter()
        .find(|p| p["channel_id"] == "dm-ana")
        .expect("the DM was answered");
    assert!(
        dm["message"].as_str().unwrap_or_default().contains("****7890"),
        "{dm}"
    );
    assert!(dm.get("root_id").is_none(), "no thread in a DM: {dm}");
    let mention = posts
        .iter()
        .find(|p| p["channel_id"] == "geral")
        .expect("the mention was answered");
    assert!(
        mention["message"]
            .as_str()
            .unwrap_or_default()
            .contains("****1111"),
        "{mention}"
    );
    assert_eq!(mention["root_id"], "p-bia", "threaded outside DMs");
    assert_eq!(
        posts.len(),
        2,
        "the bot's own post and the system post are not turns"
    );
    assert_eq!(
        mm.post_calls.load(std::sync::atomic::Ordering::SeqCst),
        3,
        "the 429 was retried"
    );
    let connections = mm.connections.lock().expect("lock").clone();
    assert!(connections.len() >= 2, "reconnected: {connections:?}");
    assert_eq!(
        connections[1], "connection_id=beysw7hhzp8f3ffjnpzze3jg9o&sequence_number=4",
        "resumed"
    );
}

/// A burst of DMs from several people, read off the websocket one after the other, each turn run by
/// its own task — by one instance, or on PostgreSQL by two bots that both read every post (the one
/// that stores a post first runs it). Every conversation is processed and answered in the order its
/// posts came.
async fn bursts_are_processed_and_answered_in_the_order_posted(chats: Vec<crate::support::ChatHarness>) {
    const PEOPLE: usize = 4;
    const BURST: usize = 8;
    let card = |k: usize| format!("23456789{k:02}");
    let mut frames = Vec::new();
    for k in 0..BURST {
        for p in 0..PEOPLE {
            let post = json!({"id": format!("p-{p}-{k}"), "user_id": format!("u-{p}"),
                              "channel_id": format!("dm-{p}"), "root_id": "",
                              "message": format!("saldo do cartão {}", card(k)), "type": "", "props": {}});
            frames.push(posted((k * PEOPLE + p + 2) as i64, "D", &["bot-id"], post));
        }
    }
    let script = chats.iter().map(|_| (frames.clone(), false)).collect();
    let mm = fake_mattermost(script, false).await;
    let config = Arc::new(MattermostConfig {
        url: Some(mm.url.clone()),
        bot_token: Some("token-do-bot".into()),
        ..MattermostConfig::default()
    });
    let store = chats[0].store.clone();
    let mut running = Vec::new();
    // Each bot's instance, kept until the end: its simulator and clock serve its turns.
    for chat in &chats {
        let bot = vt_agent::testkit::Bot::new(chat.service.clone(), "vt", config.clone(), "empresa-a")
            .expect("bot");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(bot.run(async move {
            let _ = stopped.await;
        }));
        running.push((stop, task));
    }
    let started = std::time::Instant::now();
    let replies = loop {
        let items = store
            .outbox_items(vt_store::records::OutboxStatus::Pending, 100)
            .await
            .expect("read");
        if items.len() >= PEOPLE * BURST {
            break items;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{} of {} replies",
            items.len(),
            PEOPLE * BURST
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    for (stop, task) in running {
        let _ = stop.send(());
        tokio::time::timeout(std::time::Duration::from_secs(5), task)
            .await
            .expect("the bot stops")
            .expect("join");
    }
    assert_eq!(replies.len(), PEOPLE * BURST, "each post once");
    for p in 0..PEOPLE {
        let conversation =
            vt_agent::testkit::mattermost_conversation_id(&format!("dm-{p}"), &format!("u-{p}"));
        let answered: Vec<String> = replies
            .iter()
            .filter(|i| i.conversation_id.as_deref() == Some(conversation.as_str()))
            .filter_map(|i| {
                let text = i.payload["text"].as_str()?;
                text.split("****").nth(1).map(|r| r[..4].to_owned())
            })
            .collect();
        let posted: Vec<String> = (0..BURST).map(|k| card(k)[6..].to_owned()).collect();
        assert_eq!(answered, posted, "person {p}: answered in the order posted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_bots_bursts_are_processed_and_answered_in_the_order_posted() {
    let chat = crate::support::chat_harness(None, vt_domain::tools::VtSettings::default()).await;
    bursts_are_processed_and_answered_in_the_order_posted(vec![chat]).await;
}

#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_bots_on_postgresql_answer_bursts_in_the_order_posted() {
    let pg = vt_store::testkit::PgFixture::start().await;
    let sim = vt_simulators::systems::Simulator::new(crate::support::quick_simulator());
    let mut chats = Vec::new();
    for store in [pg.store.clone(), pg.second.clone()] {
        let vt = vt_domain::tools::VtSettings::default();
        chats.push(crate::support::chat_harness_with(store, None, vt, Some(sim.clone())).await);
    }
    bursts_are_processed_and_answered_in_the_order_posted(chats).await;
}

/// The case commands of the slash command: support users only, in the deployment's tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn support_users_work_cases_with_the_slash_command_in_their_tenant_only() {
    let s = mattermost(&["alan"]).await;
    let transfer = |conversation: &str, tenant: &str| vt_agent::Inbound {
        agent_id: "vt".into(),
        conversation_id: Some(conversation.into()),
        tenant_id: Some(tenant.into()),
        user: crate::support::user(),
        text: "quero falar com um atendente".into(),
        ..Default::default()
    };
    s.chat
        .service
        .messages()
        .handle(transfer("c-a", "empresa-a"))
        .await
        .expect("a");
    s.chat
        .service
        .messages()
        .handle(transfer("c-b", "empresa-b"))
        .await
        .expect("b");
    let case_of = |conversation: &'static str| {
        let store = s.chat.store.clone();
        async move {
            store
                .open_case_of(conversation)
                .await
                .expect("read")
                .expect("a case")
                .id
        }
    };
    let (a, b) = (case_of("c-a").await, case_of("c-b").await);

    let (_, listed) = slash(&s, SLASH_TOKEN, slash_body("casos")).await;
    let text = listed["text"].as_str().unwrap_or_default();
    // Named by protocol number — counted per tenant, so only the count tells the other tenant's apart.
    let protocol = s
        .chat
        .store
        .case(&a)
        .await
        .expect("read")
        .expect("case")
        .protocol
        .expect("protocol");
    assert!(
        text.contains(&protocol) && text.lines().filter(|l| l.starts_with('•')).count() == 1,
        "{text}"
    );
    let (_, other) = slash(&s, SLASH_TOKEN, slash_body(&format!("assumir {b}"))).await;
    assert!(
        other["text"].as_str().unwrap_or_default().contains("não existe"),
        "{other}"
    );
    let (_, claimed) = slash(&s, SLASH_TOKEN, slash_body(&format!("assumir {a}"))).await;
    assert!(
        claimed["text"]
            .as_str()
            .unwrap_or_default()
            .contains("assumido por @alan"),
        "{claimed}"
    );
    let (_, sent) = slash(
        &s,
        SLASH_TOKEN,
        slash_body(&format!("responder {a} Olá, aqui é o Alan")),
    )
    .await;
    assert_eq!(sent["text"], "Enviado.", "{sent}");
    let messages = s.chat.store.messages("c-a").await.expect("messages");
    assert_eq!(
        messages.last().map(|m| &m.message),
        Some(&vt_engine::llm::ChatMessage::HumanAgent {
            name: "alan".into(),
            content: "Olá, aqui é o Alan".into()
        })
    );
    let (_, back) = slash(
        &s,
        SLASH_TOKEN,
        slash_body(&format!("devolver {a} cliente orientado")),
    )
    .await;
    assert!(
        back["text"].as_str().unwrap_or_default().contains("devolvido"),
        "{back}"
    );
    assert!(s.chat.store.open_case_of("c-a").await.expect("read").is_none());

    // Anyone else is told it is for support agents, and nothing changes.
    let plain = mattermost(&[]).await;
    let (_, refused) = slash(&plain, SLASH_TOKEN, slash_body("casos")).await;
    assert!(
        refused["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Só atendentes"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_satisfaction_question_comes_with_buttons_and_a_click_is_the_score() {
    use hmac::Mac as _;
    let s = mattermost(&[]).await;
    let user = "erj6qck3rfgtujs86w5r6rckzh";
    let (_, body) = slash(&s, SLASH_TOKEN, slash_body("saldo 1234567890")).await;
    assert!(
        body["text"].as_str().unwrap_or_default().contains("****7890"),
        "{body}"
    );
    s.chat
        .clock
        .set(s.chat.clock.now() + chrono::Duration::minutes(31));
    assert_eq!(s.chat.service.outcomes().close_stretches().await, 1);
    // The question waits in the outbox for the bot, with its five options.
    let items = s
        .chat
        .store
        .outbox_items(vt_store::records::OutboxStatus::Pending, 10)
        .await
        .expect("outbox");
    let question = items
        .iter()
        .find(|i| i.destination == "mattermost")
        .expect("the question");
    assert_eq!(
        question.payload["choices"].as_array().map(Vec::len),
        Some(5),
        "{:?}",
        question.payload
    );
    let conversation = question.conversation_id.clone().expect("conversation");

    // A click on the fourth option, signed as the bot signs it.
    let sign = |index: &str| {
        let mut mac =
            hmac::Hmac::<sha2::Sha256>::new_from_slice(b"segredo-dos-botoes-0123456789").expect("key");
        mac.update(format!("escolher|{index}|{conversation}").as_bytes());
        hex::encode(mac.finalize().into_bytes())
    };
    let context = |index: &str| json!({"acao": "escolher", "pendente": index, "conversa": conversation, "assinatura": sign(index)});
    let mut forged = context("3");
    forged["pendente"] = json!("4");
    assert_eq!(click(&s, &forged, user).await.0, 403);
    let (status, body) = click(&s, &context("3"), user).await;
    assert_eq!(status, 200);
    assert!(
        body["update"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Obrigado"),
        "{body}"
    );
    let scored = s
        .chat
        .store
        .outcomes_since(chrono::DateTime::UNIX_EPOCH)
        .await
        .expect("outcomes");
    assert_eq!(scored.iter().map(|o| o.nota).collect::<Vec<_>>(), [Some(4)]);
}
