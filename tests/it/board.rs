//! A transfer worked on the support board, end to end with the local fakes — Mattermost (REST and a
//! live websocket) and the Graph API — in Mattermost's and Meta's own payloads: the case posted with
//! its file (no full card), two agents pressing Assumir at once, the card holder's messages mirrored
//! into the thread and not answered, the owner's thread reply delivered on WhatsApp with their name,
//! a colleague's post kept internal, a proposed recharge confirmed by the card holder's tap (one
//! charge), and the hand back with a note the bot's context keeps.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use vt_agent::testkit::MattermostConfig;
use vt_agent::testkit::Sender;
use vt_agent::testkit::WhatsAppConfig;
use vt_agent::testkit::{BoardSender, Bot, PostSender};

use crate::support::Served;

const SUPPORT_CHANNEL: &str = "canal-suporte";
const PHONE: &str = "106540352242922";
const CARD: &str = "2345678901";
const SLASH_TOKEN: &str = "qzgakf1nx3yt9dr4n8585ihbxy";

fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/payloads")
        .join(name);
    std::fs::read_to_string(path).expect("fixture")
}

/// What a fake received, in order.
type Log = Arc<Mutex<Vec<(String, Value)>>>;

/// Mattermost: `/users/me`, a websocket that plays what the test feeds it, `POST /posts` and
/// `PUT /posts/{id}/patch`, each recorded as (path, body).
struct FakeMattermost {
    url: String,
    calls: Log,
    feed: tokio::sync::mpsc::UnboundedSender<String>,
}

async fn fake_mattermost() -> FakeMattermost {
    use axum::extract::Path;
    use axum::extract::ws::{Message, WebSocketUpgrade};
    use axum::routing::{get, post, put};
    let calls: Log = Arc::default();
    let (feed, frames) = tokio::sync::mpsc::unbounded_channel::<String>();
    let frames = Arc::new(tokio::sync::Mutex::new(frames));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (posts, patches, sockets) = (calls.clone(), calls.clone(), calls.clone());
    let app = axum::Router::new()
        .route(
            "/api/v4/users/me",
            get(|| async { axum::Json(json!({"id": "bot-id", "username": "vt"})) }),
        )
        .route(
            "/api/v4/websocket",
            get(move |ws: WebSocketUpgrade| {
                let (frames, sockets) = (frames.clone(), sockets.clone());
                async move {
                    ws.on_upgrade(move |mut socket| async move {
                        use futures::{SinkExt, StreamExt};
                        let Some(Ok(Message::Text(_auth))) = socket.recv().await else {
                            return;
                        };
                        let _ = socket
                            .send(Message::text(fixture("mm-ws-response-ok.json")))
                            .await;
                        let _ = socket
                            .send(Message::text(fixture("mm-ws-hello.mmctl-pr25545.json")))
                            .await;
                        let (mut out, mut inbound) = socket.split();
                        // What the bot sends over the socket (its actions) is recorded too.
                        tokio::spawn(async move {
                            while let Some(Ok(frame)) = inbound.next().await {
                                if let Message::Text(text) = frame {
                                    let action = serde_json::from_str(&text).unwrap_or_default();
                                    sockets.lock().expect("lock").push(("ws".into(), action));
                                }
                            }
                        });
                        let mut frames = frames.lock().await;
                        while let Some(frame) = frames.recv().await {
                            if out.send(Message::text(frame)).await.is_err() {
                                return;
                            }
                        }
                    })
                }
            }),
        )
        .route(
            "/api/v4/posts",
            post(move |axum::Json(body): axum::Json<Value>| {
                let (posts, next) = (posts.clone(), next.clone());
                async move {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    posts.lock().expect("lock").push(("posts".into(), body));
                    (
                        axum::http::StatusCode::CREATED,
                        axum::Json(json!({"id": format!("post-{n}")})),
                    )
                }
            }),
        )
        .route(
            "/api/v4/posts/{id}/patch",
            put(
                move |Path(id): Path<String>, axum::Json(body): axum::Json<Value>| {
                    let patches = patches.clone();
                    async move {
                        patches.lock().expect("lock").push((format!("patch/{id}"), body));
                        axum::Json(json!({"id": id}))
                    }
                },
            ),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    FakeMattermost { url, calls, feed }
}

/// The Graph API: a mark-read gets `{"success": true}`, a send Meta's documented answer.
async fn fake_graph() -> (String, Log) {
    let sends: Log = Arc::default();
    let log = sends.clone();
    let app = axum::Router::new().fallback(move |axum::Json(body): axum::Json<Value>| {
        let log = log.clone();
        async move {
            let read = body["status"] == "read";
            let n = {
                let mut l = log.lock().expect("lock");
                l.push(("messages".into(), body));
                l.len()
            };
            if read {
                return axum::Json(json!({"success": true}));
            }
            axum::Json(json!({"messaging_product": "whatsapp",
                "contacts": [{"input": "16505551234", "wa_id": "16505551234"}],
                "messages": [{"id": format!("wamid.OUT{n}")}]}))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, sends)
}

/// A thread post in the support channel, as the websocket carries it.
fn thread_post(seq: i64, id: &str, root: &str, user_id: &str, user: &str, message: &str) -> String {
    let mut frame: Value =
        serde_json::from_str(&fixture("mm-ws-posted.hackerone-2541027.json")).expect("json");
    frame["seq"] = json!(seq);
    frame["data"]["channel_type"] = json!("O");
    frame["data"]["mentions"] = json!("[]");
    frame["data"]["sender_name"] = json!(format!("@{user}"));
    frame["data"]["post"] = json!(
        json!({"id": id, "user_id": user_id, "channel_id": SUPPORT_CHANNEL, "root_id": root,
               "message": message, "type": "", "props": {}})
        .to_string()
    );
    frame.to_string()
}

struct Journey {
    served: Served,
    mm: FakeMattermost,
    graph: Log,
    worker: vt_agent::Worker,
}

impl Journey {
    async fn start() -> Self {
        let mm = fake_mattermost().await;
        let (graph_url, graph) = fake_graph().await;
        let store: Arc<dyn vt_store::Store> = Arc::new(
            vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
                .await
                .expect("store"),
        );
        let handoff = vt_agent::testkit::HandoffConfig {
            board: true,
            ..Default::default()
        };
        let chat = Arc::new(
            crate::support::chat_harness_handing_off(
                store,
                None,
                vt_domain::tools::VtSettings::default(),
                None,
                handoff,
            )
            .await,
        );
        let mattermost = MattermostConfig {
            url: Some(mm.url.clone()),
            bot_token: Some("token-do-bot".into()),
            slash_token: Some(SLASH_TOKEN.into()),
            actions_secret: Some("segredo-dos-botoes-0123456789".into()),
            public_url: Some("https://vt.example.com".into()),
            support_users: vec!["ana".into(), "bia".into()],
            canal_suporte: Some(SUPPORT_CHANNEL.into()),
            ..MattermostConfig::default()
        };
        let whatsapp = WhatsAppConfig {
            graph_url,
            api_version: "v23.0".into(),
            phone_number_id: Some(PHONE.into()),
            access_token: Some("EAAtesttokenvalue0123456789".into()),
            app_secret: Some(crate::whatsapp::SECRET.into()),
            verify_token: Some("vibecoding".into()),
            aviso_privacidade: String::new(),
            juntar_ms: 0,
            ..Default::default()
        };
        let tenant = vt_engine::conversation::DEFAULT_TENANT;
        let wiring = vt_agent::Wiring {
            service: chat.service.clone(),
            agent: "vt".into(),
            tenant: tenant.into(),
        };
        let templates = Arc::new(vt_agent::testkit::Templates::default());
        let state = vt_agent::AppState::new(chat.service.clone(), "vt", Default::default())
            .with_channel(&vt_agent::testkit::whatsapp_channel(
                &whatsapp, &templates, &wiring,
            ))
            .with_channel(&vt_agent::testkit::mattermost_channel(&mattermost, &wiring));
        let mattermost = Arc::new(mattermost);
        let bot = Bot::new(chat.service.clone(), "vt", mattermost.clone(), tenant).expect("bot");
        tokio::spawn(bot.run(std::future::pending()));
        let worker = vt_agent::Worker::new(chat.store.clone(), vt_engine::retry::RetryPolicy::new(5, 1))
            .with_sender(Arc::new(Sender::new(&whatsapp).expect("whatsapp")))
            .with_sender(Arc::new(PostSender::new(mattermost.clone()).expect("posts")))
            .with_sender(Arc::new(
                BoardSender::new(mattermost, chat.service.clone()).expect("board"),
            ));
        let served = crate::support::serve_state(chat, state).await;
        Self {
            served,
            mm,
            graph,
            worker,
        }
    }

    /// The card holder writes on WhatsApp (signed as Meta signs).
    async fn customer(&self, body: &[u8]) {
        let status = self
            .served
            .client
            .post(format!("{}/channels/whatsapp/webhook", self.served.url))
            .header("content-type", "application/json")
            .header("x-hub-signature-256", crate::whatsapp::sign(body))
            .body(body.to_vec())
            .send()
            .await
            .expect("sent")
            .status();
        assert_eq!(status, 200);
    }

    /// Runs the outbox until `done` holds of what the fakes received.
    async fn until(&self, what: &str, done: impl Fn(&[(String, Value)], &[(String, Value)]) -> bool) {
        for _ in 0..300 {
            self.worker.pass().await;
            let (mm, graph) = (self.mm_calls(), self.graph_calls());
            if done(&mm, &graph) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!(
            "{what} never happened: mattermost {:?}, graph {:?}",
            self.mm_calls(),
            self.graph_calls()
        );
    }

    fn mm_calls(&self) -> Vec<(String, Value)> {
        self.mm.calls.lock().expect("lock").clone()
    }

    fn graph_calls(&self) -> Vec<(String, Value)> {
        self.graph.lock().expect("lock").clone()
    }

    /// The texts sent to the card holder.
    fn to_customer(&self) -> Vec<String> {
        self.graph_calls()
            .iter()
            .filter_map(|(_, b)| {
                b["text"]["body"]
                    .as_str()
                    .or_else(|| b["interactive"]["body"]["text"].as_str())
                    .map(str::to_owned)
            })
            .collect()
    }

    async fn click(&self, button: &Value, user_id: &str, user_name: &str) -> Value {
        let mut request: Value =
            serde_json::from_str(&fixture("mm-interactive-action.request.json")).expect("json");
        request["context"] = button["integration"]["context"].clone();
        request["user_id"] = json!(user_id);
        request["user_name"] = json!(user_name);
        self.served
            .client
            .post(format!("{}/channels/mattermost/actions", self.served.url))
            .json(&request)
            .send()
            .await
            .expect("sent")
            .json()
            .await
            .expect("json")
    }

    async fn slash(&self, user_id: &str, user_name: &str, text: &str) -> Value {
        let body = fixture("mm-slash-command.request.body.txt")
            .replace("text=toronto+week", &format!("text={}", text.replace(' ', "+")))
            .replace(
                "user_id=erj6qck3rfgtujs86w5r6rckzh",
                &format!("user_id={user_id}"),
            )
            .replace("user_name=alan", &format!("user_name={user_name}"));
        self.served
            .client
            .post(format!("{}/channels/mattermost/slash", self.served.url))
            .header("authorization", format!("Token {SLASH_TOKEN}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .expect("sent")
            .json()
            .await
            .expect("json")
    }
}

fn buttons(post: &Value) -> Vec<Value> {
    post["props"]["attachments"][0]["actions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn button(post: &Value, id: &str) -> Value {
    buttons(post)
        .into_iter()
        .find(|b| b["id"] == id)
        .unwrap_or_else(|| panic!("no {id} button in {post}"))
}

fn wa(text: &str, wamid: &str) -> Vec<u8> {
    crate::whatsapp::text_notification(text, wamid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_case_is_worked_on_the_support_board_and_handed_back_to_the_bot() {
    let j = Journey::start().await;
    let chat = j.served.chat.clone();

    // The card holder checks a card, then asks for a person: the case goes to the support channel.
    j.customer(&wa(&format!("saldo {CARD}"), "wamid.A1")).await;
    j.customer(&wa("quero falar com um atendente", "wamid.A2")).await;
    j.until("the case's root post", |mm, _| {
        mm.iter()
            .any(|(p, b)| p == "posts" && b["channel_id"] == SUPPORT_CHANNEL)
    })
    .await;
    let root = j
        .mm_calls()
        .into_iter()
        .find(|(p, b)| p == "posts" && b["channel_id"] == SUPPORT_CHANNEL)
        .map(|(_, b)| b)
        .expect("root");
    let text = root["message"].as_str().unwrap_or_default();
    assert!(
        text.contains("****8901"),
        "the case file names the card masked: {text}"
    );
    assert!(!text.contains(CARD), "never the full card: {text}");
    assert!(text.contains("aguardando"), "{text}");
    let ids: Vec<Value> = buttons(&root).iter().map(|b| b["id"].clone()).collect();
    assert_eq!(ids, [json!("assumir"), json!("encerrar")]);
    let case = chat
        .store
        .cases(None, 10)
        .await
        .expect("cases")
        .pop()
        .expect("a case");
    let root_id = chat
        .store
        .case(&case.id)
        .await
        .expect("read")
        .and_then(|c| c.board_post)
        .expect("the root post is on record");

    // Two agents press Assumir at once: one owns the case, the other is told who.
    let assumir = button(&root, "assumir");
    let (a, b) = tokio::join!(
        j.click(&assumir, "u-ana", "ana"),
        j.click(&assumir, "u-bia", "bia")
    );
    let answers = [a["ephemeral_text"].to_string(), b["ephemeral_text"].to_string()];
    assert_eq!(
        answers.iter().filter(|t| t.contains("assumido por")).count(),
        1,
        "{answers:?}"
    );
    assert_eq!(
        answers.iter().filter(|t| t.contains("já está com")).count(),
        1,
        "{answers:?}"
    );
    let owner = chat
        .store
        .case(&case.id)
        .await
        .expect("read")
        .and_then(|c| c.owner)
        .expect("owner");
    let (owner_id, other, other_id) = if owner == "ana" {
        ("u-ana", "bia", "u-bia")
    } else {
        ("u-bia", "ana", "u-ana")
    };
    // A stranger's press does nothing.
    let stranger = j.click(&button(&root, "encerrar"), "u-zed", "zed").await;
    assert!(
        stranger["ephemeral_text"]
            .as_str()
            .unwrap_or_default()
            .contains("Só a equipe")
    );
    j.until("the root post patched", |mm, _| {
        mm.iter().any(|(p, b)| {
            p == &format!("patch/{root_id}")
                && b["message"].as_str().unwrap_or_default().contains("assumido por")
        })
    })
    .await;
    let patched = j
        .mm_calls()
        .into_iter()
        .rfind(|(p, _)| p.starts_with("patch/"))
        .map(|(_, b)| b)
        .expect("patch");
    let ids: Vec<Value> = buttons(&patched).iter().map(|b| b["id"].clone()).collect();
    assert_eq!(ids, [json!("devolver"), json!("propor"), json!("encerrar")]);

    // The card holder writes: mirrored into the thread, not answered by the bot.
    let said_before = j.to_customer().len();
    j.customer(&wa("oi, alguém aí?", "wamid.A3")).await;
    j.until("the message in the thread", |mm, _| {
        mm.iter().any(|(_, b)| {
            b["root_id"] == root_id.as_str()
                && b["message"].as_str().unwrap_or_default().contains("alguém aí")
        })
    })
    .await;
    assert_eq!(j.to_customer().len(), said_before, "the bot stays silent");

    // The owner answers in the thread: the card holder reads it with the owner's name. A colleague's
    // post in the thread stays internal.
    j.mm.feed
        .send(thread_post(
            10,
            "p-1",
            &root_id,
            owner_id,
            &owner,
            "Olá! Vou verificar seu cartão.",
        ))
        .expect("feed");
    j.mm.feed
        .send(thread_post(
            11,
            "p-2",
            &root_id,
            other_id,
            other,
            "nota: cliente antigo",
        ))
        .expect("feed");
    j.mm.feed
        .send(thread_post(12, "p-3", &root_id, "bot-id", "vt", "eco do bot"))
        .expect("feed");
    j.until("the owner's reply on WhatsApp", |_, _| {
        j.to_customer()
            .iter()
            .any(|t| t == &format!("{owner}: Olá! Vou verificar seu cartão."))
    })
    .await;
    let mut log = Vec::new();
    for _ in 0..100 {
        log = chat.store.case_events(&case.id).await.expect("log");
        if log.iter().any(|e| e.what == "nota_interna") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        log.iter().any(|e| e.what == "nota_interna"
            && e.who == other
            && e.detail.as_deref() == Some("nota: cliente antigo")),
        "{log:?}"
    );
    assert!(
        !j.to_customer()
            .iter()
            .any(|t| t.contains("cliente antigo") || t.contains("eco do bot"))
    );

    // A colleague cannot propose; the owner proposes a recharge: the card holder gets the buttons.
    let refused = j
        .slash(other_id, other, &format!("propor {} 20 {CARD} pix", case.id))
        .await;
    assert!(
        refused["text"].as_str().unwrap_or_default().contains("está com"),
        "{refused}"
    );
    let unknown = j
        .slash(owner_id, &owner, &format!("propor {} 20 1111111111 pix", case.id))
        .await;
    assert!(
        unknown["text"]
            .as_str()
            .unwrap_or_default()
            .contains("não informou"),
        "only a card the card holder gave: {unknown}"
    );
    let proposed = j
        .slash(owner_id, &owner, &format!("propor {} 20 {CARD} pix", case.id))
        .await;
    let answer = proposed["text"].as_str().unwrap_or_default();
    assert!(
        answer.contains("Proposta enviada") && answer.contains("****8901"),
        "{answer}"
    );
    assert!(!answer.contains(CARD), "{answer}");
    j.until("the confirmation buttons on WhatsApp", |_, graph| {
        graph.iter().any(|(_, b)| b["type"] == "interactive")
    })
    .await;
    assert_eq!(chat.recharges(), 0, "a proposal moves no money");
    let confirm = j
        .graph_calls()
        .into_iter()
        .rfind(|(_, b)| b["type"] == "interactive")
        .map(|(_, b)| b)
        .expect("buttons");
    let tap_id = confirm["interactive"]["action"]["buttons"][0]["reply"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert!(tap_id.starts_with("confirmar:"), "{tap_id}");

    // The card holder taps Confirmar (Meta delivers it twice): one charge.
    let mut tap: Value = serde_json::from_str(&fixture(
        "wa-webhook-interactive-button-reply.reply-buttons-page.json",
    ))
    .expect("json");
    tap["entry"][0]["changes"][0]["value"]["messages"][0]["interactive"]["button_reply"]["id"] =
        json!(tap_id);
    tap["entry"][0]["changes"][0]["value"]["messages"][0]["id"] = json!("wamid.TAP");
    let tap = serde_json::to_vec(&tap).expect("bytes");
    j.customer(&tap).await;
    j.customer(&tap).await;
    j.until("the recharge's result on WhatsApp", |_, _| {
        j.to_customer().iter().any(|t| t.contains("aprovada"))
    })
    .await;
    assert_eq!(chat.recharges(), 1, "exactly one charge");

    // Hand back with a note: the next message is the bot's again, and its context has the note.
    let back = j
        .slash(
            owner_id,
            &owner,
            &format!("devolver {} cliente quer avisos de saldo", case.id),
        )
        .await;
    assert!(
        back["text"].as_str().unwrap_or_default().contains("devolvido"),
        "{back}"
    );
    j.customer(&wa(&format!("saldo {CARD}"), "wamid.A4")).await;
    j.until("the bot's answer", |_, _| {
        j.to_customer().iter().filter(|t| t.contains("****8901")).count() >= 2
    })
    .await;
    let conversation = case.conversation_id.clone();
    let context = chat
        .store
        .context(&conversation)
        .await
        .expect("read")
        .expect("context");
    assert!(
        context
            .key_facts
            .iter()
            .any(|f| f.contains("nota do atendente: cliente quer avisos de saldo")),
        "{:?}",
        context.key_facts
    );
    j.until("the root post closed", |mm, _| {
        mm.iter().any(|(p, b)| {
            p == &format!("patch/{root_id}")
                && b["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("devolvido ao bot")
        })
    })
    .await;
    // While the product works on a message, the person sees "typing…": on WhatsApp with the read
    // receipt, on Mattermost over the websocket.
    assert!(
        j.graph_calls().iter().any(|(_, b)| b
            == &json!({"messaging_product": "whatsapp", "status": "read", "message_id": "wamid.A1",
                       "typing_indicator": {"type": "text"}})),
        "{:?}",
        j.graph_calls()
    );
    let mut dm: Value =
        serde_json::from_str(&thread_post(20, "p-dm", "", "u-cli", "cli", "ajuda")).expect("json");
    dm["data"]["channel_type"] = json!("D");
    dm["data"]["post"] = json!(
        json!({"id": "p-dm", "user_id": "u-cli", "channel_id": "dm-cli", "root_id": "",
               "message": "ajuda", "type": "", "props": {}})
        .to_string()
    );
    j.mm.feed.send(dm.to_string()).expect("feed");
    j.until("typing in the DM and its answer", |mm, _| {
        mm.iter()
            .any(|(p, b)| p == "ws" && b["action"] == "user_typing" && b["data"]["channel_id"] == "dm-cli")
            && mm
                .iter()
                .any(|(p, b)| p == "posts" && b["channel_id"] == "dm-cli")
    })
    .await;

    // Nothing the support side saw held a full card.
    for (_, body) in j.mm_calls() {
        assert!(!body.to_string().contains(CARD), "{body}");
    }
}

/// The board belongs to one tenant (the Mattermost bot's, `[vt] tenant_id`): a case of another tenant
/// — a conversation over an API key of `beta` — is never posted there; it stays in that tenant's
/// console and `vt-agent cases`. The board's own tenant's cases are posted as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_case_is_posted_only_on_its_own_tenants_board() {
    let store: Arc<dyn vt_store::Store> = Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    );
    let handoff = vt_agent::testkit::HandoffConfig {
        board: true,
        ..Default::default()
    };
    // The bot, and so its board, serves `[vt] tenant_id`.
    let vt = vt_domain::tools::VtSettings {
        tenant_id: "acme".into(),
        ..Default::default()
    };
    let chat = crate::support::chat_harness_handing_off(store.clone(), None, vt, None, handoff).await;
    let transfer = |conversation: &str, tenant: &str| vt_agent::Inbound {
        agent_id: "vt".into(),
        conversation_id: Some(conversation.into()),
        tenant_id: Some(tenant.into()),
        user: crate::support::user(),
        text: "quero falar com um atendente".into(),
        ..Default::default()
    };
    chat.service
        .messages()
        .handle(transfer("c-beta", "beta"))
        .await
        .expect("beta");
    chat.service
        .messages()
        .handle(transfer("c-acme", "acme"))
        .await
        .expect("acme");
    let cases = store.cases(None, 10).await.expect("cases");
    assert_eq!(cases.len(), 2, "both cases are open: {cases:?}");
    let board: Vec<_> = store
        .outbox_items(vt_store::records::OutboxStatus::Pending, 100)
        .await
        .expect("outbox")
        .into_iter()
        .filter(|i| i.destination == "suporte")
        .collect();
    // A board item names its case where a reply names its user.
    let on_board: Vec<&str> = board
        .iter()
        .filter_map(|i| i.payload["user_id"].as_str())
        .collect();
    let case_of = |tenant: &str| {
        cases
            .iter()
            .find(|c| c.tenant_id == tenant)
            .expect("a case")
            .id
            .clone()
    };
    assert!(
        on_board.contains(&case_of("acme").as_str()),
        "acme's case is on its board: {board:?}"
    );
    assert!(
        !on_board.contains(&case_of("beta").as_str()),
        "beta's case is not on acme's board: {board:?}"
    );
    let betas = store.cases(Some("beta"), 10).await.expect("beta's");
    assert_eq!(betas.len(), 1, "beta's case is in beta's list");
}
