//! The WhatsApp channel against a local Graph API fake, driven by Meta's own payloads as they are
//! (`tests/fixtures/payloads/`, byte for byte): verification, signatures (Meta's vectors), text, a
//! redelivery, statuses, an unsupported type, each class of send error, and a whole recharge — ask,
//! buttons, tap, one charge, the confirmation delivered.

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use vt_agent::testkit::Sender;
use vt_agent::testkit::WhatsAppConfig;
use vt_store::records::OutboxStatus;

use crate::support::{Canned, FakeServer, Served};

pub(crate) const SECRET: &str = "TEST_APP_SECRET";
const PHONE: &str = "106540352242922";
const USER: &str = "16505551234";
const OUR_WAMID: &str = "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUFERjg0NDEzNDdFODU3MUMxMAA=";

pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/payloads")
        .join(name);
    std::fs::read(path).expect("fixture")
}

pub(crate) fn sign(body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).expect("key");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// What the Graph API answers to a send: Meta's documented response, with the id a later status
/// names.
pub(crate) fn sent() -> Canned<'static> {
    (
        200,
        vec![],
        json!({"messaging_product": "whatsapp", "contacts": [{"input": USER, "wa_id": USER}],
               "messages": [{"id": OUR_WAMID}]}),
    )
}

pub(crate) struct Wa {
    pub(crate) served: Served,
    pub(crate) graph: FakeServer,
    pub(crate) worker: vt_agent::Worker,
    /// What the channel says when `serve` starts.
    pub(crate) notices: Vec<String>,
}

async fn whatsapp(graph_answers: Vec<Canned<'static>>) -> Wa {
    let chat = crate::support::chat_harness(None, vt_domain::tools::VtSettings::default()).await;
    whatsapp_on(chat, graph_answers).await
}

pub(crate) async fn whatsapp_on(
    chat: crate::support::ChatHarness,
    graph_answers: Vec<Canned<'static>>,
) -> Wa {
    // The privacy notice has its own test; elsewhere it would be one more message to count.
    whatsapp_greeting(chat, graph_answers, "", 0).await
}

/// [`whatsapp_on`] answering a person's messages that arrive within `juntar_ms` of each other as one
/// turn.
pub(crate) async fn whatsapp_joining(
    chat: crate::support::ChatHarness,
    graph_answers: Vec<Canned<'static>>,
    juntar_ms: u64,
) -> Wa {
    whatsapp_greeting(chat, graph_answers, "", juntar_ms).await
}

/// [`whatsapp_on`] with `aviso_privacidade` said to a person's first message.
async fn whatsapp_greeting(
    chat: crate::support::ChatHarness,
    graph_answers: Vec<Canned<'static>>,
    aviso_privacidade: &str,
    juntar_ms: u64,
) -> Wa {
    let chat = Arc::new(chat);
    let graph = FakeServer::start(graph_answers)
        .await
        .answering_read_receipts()
        .answering_uploads();
    let config = WhatsAppConfig {
        graph_url: graph.url.clone(),
        api_version: "v23.0".into(),
        phone_number_id: Some(PHONE.into()),
        access_token: Some("EAAtesttokenvalue0123456789".into()),
        app_secret: Some(SECRET.into()),
        verify_token: Some("vibecoding".into()),
        aviso_privacidade: aviso_privacidade.into(),
        juntar_ms,
    };
    let wiring = vt_agent::Wiring {
        service: chat.service.clone(),
        agent: "vt".into(),
        tenant: vt_engine::conversation::DEFAULT_TENANT.into(),
    };
    let templates = Arc::new(vt_agent::testkit::Templates::default());
    let channel = vt_agent::testkit::whatsapp_channel(&config, &templates, &wiring);
    let state =
        vt_agent::AppState::new(chat.service.clone(), "vt", Default::default()).with_channel(&channel);
    let served = crate::support::serve_state(chat.clone(), state).await;
    let worker = vt_agent::Worker::new(chat.store.clone(), vt_engine::retry::RetryPolicy::new(5, 1))
        .with_sender(Arc::new(
            Sender::new(&config)
                .expect("on")
                .with_files(chat.store.clone())
                .with_pix_orders(chat.service.payments().pix_order_key().map(str::to_owned)),
        ));
    Wa {
        served,
        graph,
        worker,
        notices: channel.notices.clone(),
    }
}

impl Wa {
    async fn post(&self, body: &[u8], signature: Option<String>) -> u16 {
        let mut r = self
            .served
            .client
            .post(format!("{}/channels/whatsapp/webhook", self.served.url))
            .header("content-type", "application/json")
            .body(body.to_vec());
        if let Some(s) = signature {
            r = r.header("x-hub-signature-256", s);
        }
        r.send().await.expect("sent").status().as_u16()
    }

    /// Posts a notification signed as Meta would.
    pub(crate) async fn deliver(&self, body: &[u8]) -> u16 {
        self.post(body, Some(sign(body))).await
    }

    /// Waits for the turns that run after the 200 to queue `n` replies.
    pub(crate) async fn queued(&self, n: usize) -> Vec<vt_store::records::OutboxItem> {
        crate::support::pending_once(self.served.chat.store.as_ref(), |items| items.len() >= n).await
    }

    /// What was sent to the user, in order (read receipts apart: they go out beside the turns; uploads
    /// apart: [`Self::uploads`]).
    pub(crate) fn sends(&self) -> Vec<Value> {
        self.graph
            .received()
            .into_iter()
            .filter(|r| r.path.ends_with("/messages"))
            .map(|r| r.body)
            .filter(|b| b["status"] != "read")
            .collect()
    }

    /// What was said to the user, in order: each message's text (a text's body, an interactive
    /// message's).
    pub(crate) fn texts(&self) -> Vec<String> {
        self.sends()
            .iter()
            .map(|b| {
                b["text"]["body"]
                    .as_str()
                    .or(b["interactive"]["body"]["text"].as_str())
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }

    /// Runs the outbox until `n` messages went out (the turns run after the 200).
    pub(crate) async fn sent_at_least(&self, n: usize) {
        for _ in 0..300 {
            self.worker.pass().await;
            if self.sends().len() >= n {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("{n} messages never went out: {:?}", self.sends());
    }

    /// The media uploaded, in order.
    fn uploads(&self) -> Vec<crate::support::Received> {
        self.graph
            .received()
            .into_iter()
            .filter(|r| r.path.ends_with("/media"))
            .collect()
    }

    fn receipts(&self) -> Vec<Value> {
        self.graph
            .received()
            .into_iter()
            .map(|r| r.body)
            .filter(|b| b["status"] == "read")
            .collect()
    }
}

/// A text notification like Meta's, with another text and message id.
pub(crate) fn text_notification(text: &str, wamid: &str) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(&fixture("wa-webhook-text.json")).expect("json");
    v["entry"][0]["changes"][0]["value"]["messages"][0]["text"]["body"] = json!(text);
    v["entry"][0]["changes"][0]["value"]["messages"][0]["id"] = json!(wamid);
    // Sent now, as a live user's message is: its 24-hour window is open.
    v["entry"][0]["changes"][0]["value"]["messages"][0]["timestamp"] =
        json!(chrono::Utc::now().timestamp().to_string());
    serde_json::to_vec(&v).expect("bytes")
}

/// A media notification as Meta sends one (`kind`: `audio`, `image`…, `media` its object: the
/// media's id, type and sha256, never bytes).
pub(crate) fn media_notification(wamid: &str, kind: &str, media: Value) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(&fixture("wa-webhook-text.json")).expect("json");
    let m = &mut v["entry"][0]["changes"][0]["value"]["messages"][0];
    m["id"] = json!(wamid);
    m["type"] = json!(kind);
    m["timestamp"] = json!(chrono::Utc::now().timestamp().to_string());
    m.as_object_mut().expect("message").remove("text");
    m[kind] = media;
    serde_json::to_vec(&v).expect("bytes")
}

pub(crate) fn tap_notification(button_id: &str, wamid: &str) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(&fixture(
        "wa-webhook-interactive-button-reply.reply-buttons-page.json",
    ))
    .expect("json");
    let m = &mut v["entry"][0]["changes"][0]["value"]["messages"][0];
    m["interactive"]["button_reply"]["id"] = json!(button_id);
    m["id"] = json!(wamid);
    m["timestamp"] = json!(chrono::Utc::now().timestamp().to_string());
    serde_json::to_vec(&v).expect("bytes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_answers_metas_verification_and_nothing_else() {
    let wa = whatsapp(vec![]).await;
    let get = |q: &str| {
        wa.served
            .client
            .get(format!("{}/channels/whatsapp/webhook?{q}", wa.served.url))
            .send()
    };
    let ok = get("hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=vibecoding")
        .await
        .expect("sent");
    assert_eq!(ok.status(), 200);
    assert!(
        ok.headers()["content-type"]
            .to_str()
            .unwrap_or_default()
            .starts_with("text/plain")
    );
    assert_eq!(ok.text().await.expect("body"), "1158201444");
    for q in [
        "hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=errado",
        "hub.mode=unsubscribe&hub.challenge=1158201444&hub.verify_token=vibecoding",
        "hub.mode=subscribe&hub.verify_token=vibecoding",
    ] {
        assert_eq!(get(q).await.expect("sent").status(), 403, "{q}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signatures_are_checked_over_the_raw_bytes() {
    let wa = whatsapp(vec![]).await;
    let body = fixture("wa-webhook-text.json");
    // Meta's vector over the exact bytes of the fixture.
    let documented = "sha256=8a7f8eae56da6ba7f4066ba1b1a1aab590472c7257166967feccf045227cecae";
    assert_eq!(sign(&body), documented);
    // The same JSON re-serialised, or without its final newline, must be refused with that signature.
    let reserialised =
        serde_json::to_vec(&serde_json::from_slice::<Value>(&body).expect("json")).expect("bytes");
    assert_eq!(wa.post(&reserialised, Some(documented.into())).await, 401);
    assert_eq!(
        wa.post(&body[..body.len() - 1], Some(documented.into())).await,
        401
    );
    assert_eq!(wa.post(&body, None).await, 401);
    assert_eq!(wa.post(&body, Some("sha256=00".into())).await, 401);
    let conversation = vt_agent::testkit::whatsapp_conversation_id(PHONE, USER);
    assert!(
        wa.served
            .chat
            .store
            .messages(&conversation)
            .await
            .expect("read")
            .is_empty(),
        "nothing stored"
    );
    assert_eq!(wa.post(&body, Some(documented.into())).await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_is_a_turn_once_and_its_reply_goes_out_through_the_graph_api() {
    let wa = whatsapp(vec![sent()]).await;
    let body = fixture("wa-webhook-text.json");
    assert_eq!(wa.deliver(&body).await, 200);
    assert_eq!(wa.deliver(&body).await, 200, "a redelivery is acknowledged");
    let queued = wa.queued(1).await;
    assert_eq!(queued.len(), 1, "one turn for one wamid");
    let conversation = vt_agent::testkit::whatsapp_conversation_id(PHONE, USER);
    let stored = wa.served.chat.store.messages(&conversation).await.expect("read");
    let users = stored
        .iter()
        .filter(|m| matches!(m.message, vt_engine::llm::ChatMessage::User { .. }))
        .count();
    assert_eq!(users, 1);
    let pass = wa.worker.pass().await;
    assert_eq!(pass.sent, 1);
    // The read receipt with the typing indicator (channels.md, Example S) while the turn ran, once.
    assert_eq!(
        wa.receipts(),
        [json!({"messaging_product": "whatsapp", "status": "read",
        "message_id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=",
        "typing_indicator": {"type": "text"}})]
    );
    let sends = wa.sends();
    assert_eq!(sends[0]["to"], USER);
    assert_eq!(sends[0]["type"], "text");
    assert!(
        sends[0]["text"]["body"]
            .as_str()
            .unwrap_or_default()
            .contains("Posso ajudar")
    );
    let paths: Vec<String> = wa.graph.received().iter().map(|r| r.path.clone()).collect();
    assert!(
        paths.iter().all(|p| p == &format!("/v23.0/{PHONE}/messages")),
        "{paths:?}"
    );
    let auth = wa.graph.received()[0].headers["authorization"]
        .to_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(auth, "Bearer EAAtesttokenvalue0123456789");

    // Meta reports the status of the message we sent: recorded, never a turn.
    assert_eq!(wa.deliver(&fixture("wa-webhook-status-sent.json")).await, 200);
    assert_eq!(
        wa.served
            .chat
            .store
            .delivery_statuses(OUR_WAMID)
            .await
            .expect("read"),
        vec![("sent".to_owned(), None)]
    );
    let after = wa.served.chat.store.messages(&conversation).await.expect("read");
    assert_eq!(after.len(), stored.len(), "a status is not a turn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsupported_type_gets_a_polite_answer() {
    let wa = whatsapp(vec![]).await;
    let mut v: Value = serde_json::from_slice(&fixture("wa-webhook-text.json")).expect("json");
    let m = &mut v["entry"][0]["changes"][0]["value"]["messages"][0];
    m["type"] = json!("sticker");
    m["sticker"] = json!({"id": "1", "mime_type": "image/webp"});
    m.as_object_mut().map(|o| o.remove("text"));
    assert_eq!(wa.deliver(&serde_json::to_vec(&v).expect("bytes")).await, 200);
    let queued = wa.queued(1).await;
    assert!(
        queued[0].payload["text"]
            .as_str()
            .unwrap_or_default()
            .contains("só leio mensagens de texto")
    );
    let garbage = b"{\"entry\": 5}";
    assert_eq!(wa.deliver(garbage).await, 400, "unreadable, but never a 500");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_errors_are_classified_by_code() {
    let rate: Value = serde_json::from_slice(&fixture("wa-error-130429.json")).expect("json");
    let wa = whatsapp(vec![
        (400, vec![], rate),
        (500, vec![], json!({"error": {"code": 1, "message": "unknown"}})),
        (
            400,
            vec![],
            json!({"error": {"code": 131047, "message": "Re-engagement message"}}),
        ),
    ])
    .await;
    wa.deliver(&text_notification("oi", "wamid.E1")).await;
    let item = wa.queued(1).await.remove(0);
    let store = &wa.served.chat.store;
    let pass = wa.worker.pass().await;
    assert_eq!(pass.retried, 1, "130429 comes as HTTP 400 and is retried");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(wa.worker.pass().await.retried, 1, "a 5xx is retried");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(wa.worker.pass().await.dead, 1, "131047 is final");
    let dead = store.outbox_item(item.id).await.expect("read").expect("item");
    assert_eq!(dead.status, OutboxStatus::Failed);
    assert!(
        dead.last_error.as_deref().unwrap_or_default().contains("131047"),
        "{dead:?}"
    );
    assert!(
        !dead.last_error.unwrap_or_default().contains("EAAtest"),
        "no token in the reason"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_recharge_over_whatsapp_charges_once() {
    let wa = whatsapp([sent(), sent(), sent()].into()).await;
    wa.deliver(&text_notification(
        "recarrega 50 no 2345678901 via pix",
        "wamid.R1",
    ))
    .await;
    let ask = wa.queued(1).await.remove(0);
    let pending = ask.payload["confirmation"]
        .as_str()
        .expect("a recharge waits")
        .to_owned();
    wa.worker.pass().await;
    let buttons = &wa.sends()[0];
    assert_eq!(buttons["type"], "interactive");
    assert_eq!(buttons["interactive"]["type"], "button");
    let ids: Vec<&str> = buttons["interactive"]["action"]["buttons"]
        .as_array()
        .expect("buttons")
        .iter()
        .filter_map(|b| b["reply"]["id"].as_str())
        .collect();
    assert_eq!(
        ids,
        [format!("confirmar:{pending}"), format!("cancelar:{pending}")]
    );
    assert!(
        buttons["interactive"]["body"]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("****8901")
    );

    // A tap on a button of another (stale or forged) pending recharge moves no money.
    wa.deliver(&tap_notification("confirmar:outro-pedido", "wamid.T0"))
        .await;
    wa.queued(1).await;
    wa.worker.pass().await;
    assert_eq!(wa.served.chat.recharges(), 0);

    wa.deliver(&tap_notification(&format!("confirmar:{pending}"), "wamid.T1"))
        .await;
    wa.deliver(&tap_notification(&format!("confirmar:{pending}"), "wamid.T1"))
        .await;
    let done = wa.queued(1).await.remove(0);
    assert!(
        done.payload["text"]
            .as_str()
            .unwrap_or_default()
            .contains("aprovada"),
        "{done:?}"
    );
    assert_eq!(
        wa.served.chat.recharges(),
        1,
        "one tap, delivered twice: one charge"
    );
    wa.worker.pass().await;
    let last = wa.sends().pop().expect("sent");
    assert!(
        last["text"]["body"]
            .as_str()
            .unwrap_or_default()
            .contains("aprovada")
    );
}

/// A "sim" answers the last thing we said, but a tap names its own request: after the question, a
/// balance question comes in between — the typed "sim" then gets the question again (no money), and
/// the tap on the waiting request's button confirms it. A correction replaces the request: the old
/// question's button moves no money, the new one's charges the corrected value once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tap_names_its_request_and_a_replaced_requests_button_moves_no_money() {
    let wa = whatsapp([sent(), sent(), sent(), sent(), sent(), sent(), sent()].into()).await;
    wa.deliver(&text_notification(
        "recarrega 50 no 2345678901 via pix",
        "wamid.Q1",
    ))
    .await;
    let first = wa.queued(1).await.remove(0).payload["confirmation"]
        .as_str()
        .expect("a recharge waits")
        .to_owned();
    wa.worker.pass().await;
    wa.deliver(&text_notification("muda pra 60", "wamid.Q2")).await;
    let second = wa.queued(1).await.remove(0).payload["confirmation"]
        .as_str()
        .expect("the corrected recharge waits")
        .to_owned();
    assert_ne!(first, second, "a correction is a new request");
    wa.worker.pass().await;
    wa.deliver(&tap_notification(&format!("confirmar:{first}"), "wamid.Q3"))
        .await;
    wa.queued(1).await;
    wa.worker.pass().await;
    assert_eq!(
        wa.served.chat.recharges(),
        0,
        "the replaced request's button moves no money"
    );
    wa.deliver(&text_notification(
        "qual o saldo do cartão 1234567890?",
        "wamid.Q4",
    ))
    .await;
    wa.queued(1).await;
    wa.worker.pass().await;
    wa.deliver(&text_notification("sim", "wamid.Q5")).await;
    let again = wa.queued(1).await.remove(0);
    assert!(
        again.payload["text"]
            .as_str()
            .unwrap_or_default()
            .contains("R$ 60,00 no cartão ****8901 via PIX ainda espera a sua confirmação"),
        "{again:?}"
    );
    wa.worker.pass().await;
    assert_eq!(
        wa.served.chat.recharges(),
        0,
        "a typed sim after another answer moves no money"
    );
    // Another answer again: the question is no longer the last thing said, but the tap names it.
    wa.deliver(&text_notification("saldo do 1234567890", "wamid.Q5b"))
        .await;
    wa.queued(1).await;
    wa.worker.pass().await;
    wa.deliver(&tap_notification(&format!("confirmar:{second}"), "wamid.Q6"))
        .await;
    let done = wa.queued(1).await.remove(0);
    assert!(
        done.payload["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Sua recarga de R$ 60,00 no cartão ****8901 foi aprovada"),
        "{done:?}"
    );
    assert_eq!(wa.served.chat.recharges(), 1);
}

/// Meta's text notification from another number.
fn text_from(wa_id: &str, text: &str, wamid: &str) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(&text_notification(text, wamid)).expect("json");
    let value = &mut v["entry"][0]["changes"][0]["value"];
    value["contacts"][0]["wa_id"] = json!(wa_id);
    value["messages"][0]["from"] = json!(wa_id);
    serde_json::to_vec(&v).expect("bytes")
}

/// Bursts: several people each send several messages at once (Meta delivers them in parallel),
/// to one instance or, on PostgreSQL, alternately to two. Whichever order the webhooks stored them
/// in, every conversation's messages are processed, and answered, in that order — whichever of the
/// tasks started after each 200 reaches the turn lock first. Turns commit their replies under the
/// lock, so the outbox's order is the order they were processed in.
async fn bursts_are_processed_and_answered_in_the_order_stored(instances: &[Arc<Wa>]) {
    const PEOPLE: usize = 4;
    const BURST: usize = 8;
    let person = |p: usize| format!("55119900000{p:02}");
    // Each message names its own card; a reply names it masked (`****89kk`).
    let card = |k: usize| format!("23456789{k:02}");
    let mut sends = Vec::new();
    for p in 0..PEOPLE {
        for k in 0..BURST {
            let wa = instances[(p + k) % instances.len()].clone();
            let body = text_from(
                &person(p),
                &format!("saldo do cartão {}", card(k)),
                &format!("wamid.burst.{p}.{k}"),
            );
            sends.push(tokio::spawn(async move { wa.deliver(&body).await }));
        }
    }
    for s in sends {
        assert_eq!(s.await.expect("sent"), 200);
    }
    let wa = &instances[0];
    let replies = wa.queued(PEOPLE * BURST).await;
    let last4 = |text: &str| text.split("****").nth(1).map(|r| r[..4].to_owned());
    for p in 0..PEOPLE {
        let conversation = vt_agent::testkit::whatsapp_conversation_id(PHONE, &person(p));
        let stored: Vec<Option<String>> = wa
            .served
            .chat
            .store
            .messages(&conversation)
            .await
            .expect("read")
            .into_iter()
            .filter(|m| matches!(m.message, vt_engine::llm::ChatMessage::User { .. }))
            .map(|m| m.message.text().map(|t| t[t.len() - 4..].to_owned()))
            .collect();
        let answered: Vec<Option<String>> = replies
            .iter()
            .filter(|i| i.conversation_id.as_deref() == Some(conversation.as_str()))
            .map(|i| last4(i.payload["text"].as_str().unwrap_or_default()))
            .collect();
        assert_eq!(stored.len(), BURST);
        assert_eq!(answered, stored, "person {p}: answered in the order stored");
    }
    let left = wa
        .served
        .chat
        .store
        .unprocessed_messages(None, 10)
        .await
        .expect("read");
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bursts_over_the_webhook_are_processed_and_answered_in_the_order_stored() {
    bursts_are_processed_and_answered_in_the_order_stored(&[Arc::new(whatsapp(vec![]).await)]).await;
}

#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bursts_over_two_instances_on_postgresql_are_processed_in_the_order_stored() {
    let pg = vt_store::testkit::PgFixture::start().await;
    let sim = vt_simulators::systems::Simulator::new(crate::support::quick_simulator());
    let mut instances = Vec::new();
    for store in [pg.store.clone(), pg.second.clone()] {
        let chat = crate::support::chat_harness_with(
            store,
            None,
            vt_domain::tools::VtSettings::default(),
            Some(sim.clone()),
        )
        .await;
        instances.push(Arc::new(whatsapp_on(chat, vec![]).await));
    }
    bursts_are_processed_and_answered_in_the_order_stored(&instances).await;
}

/// A notification with two messages, the second of which cannot be stored: the 503 makes Meta deliver
/// it again, and the first — stored, so a redelivery of it is a duplicate — still gets its turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_stored_before_a_failed_one_is_still_answered() {
    let store = Arc::new(crate::service::Flaky {
        inner: Arc::new(
            vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
                .await
                .expect("store"),
        ),
        fail_append: false,
        fail_turn: false,
        fail_accepting: Some("não dá para guardar"),
        turn_attempts: std::sync::atomic::AtomicU32::new(0),
    });
    let chat = crate::support::chat_harness_on(store, None, vt_domain::tools::VtSettings::default()).await;
    let wa = whatsapp_on(chat, vec![]).await;
    let mut v: Value =
        serde_json::from_slice(&text_notification("saldo do cartão 1234567890", "wamid.A")).expect("json");
    let mut second = v["entry"][0]["changes"][0]["value"]["messages"][0].clone();
    second["id"] = json!("wamid.B");
    second["text"]["body"] = json!("não dá para guardar");
    v["entry"][0]["changes"][0]["value"]["messages"]
        .as_array_mut()
        .expect("messages")
        .push(second);
    let body = serde_json::to_vec(&v).expect("bytes");
    assert_eq!(wa.deliver(&body).await, 503, "not everything was stored");
    let replies = wa.queued(1).await;
    assert!(
        replies[0].payload["text"]
            .as_str()
            .unwrap_or_default()
            .contains("****7890"),
        "{replies:?}"
    );
}

/// The turns a webhook runs after its 200 are the service's, not detached: `stopped` returns only
/// once each has committed, so a server that stops after acknowledging messages loses none of their
/// replies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turns_a_webhook_started_end_before_the_service_stops() {
    let wa = whatsapp(vec![sent(), sent(), sent()]).await;
    for (i, text) in ["oi", "saldo do cartão 1111 1111-11", "ajuda"].iter().enumerate() {
        assert_eq!(
            wa.deliver(&text_notification(text, &format!("wamid.parar{i}")))
                .await,
            200
        );
    }
    // No waiting for the replies: the service's stop is what waits.
    wa.served.chat.service.stopped().await;
    let queued = wa
        .served
        .chat
        .store
        .outbox_items(OutboxStatus::Pending, 100)
        .await
        .expect("read");
    assert_eq!(
        queued.len(),
        3,
        "every acknowledged message was answered before the stop returned"
    );
}

/// The Pix journey on WhatsApp: the confirmation's tap issues one charge; the card holder gets the line,
/// the code alone (a BR Code whose CRC and amount check) and its QR uploaded with the media API and
/// sent as an image; the payment, reported twice at once (a notice and a follow-up), is credited once
/// with its endToEndId, and the receipt goes out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pix_recharge_on_whatsapp_sends_the_code_and_its_qr_image_and_credits_the_payment_once() {
    let chat = crate::support::chat_harness_pix(crate::support::Pix::Provider).await;
    let wa = whatsapp_on(chat, vec![sent(); 8]).await;
    wa.deliver(&text_notification(
        "recarrega 20 no 2345678901 via pix",
        "wamid.P1",
    ))
    .await;
    let ask = wa.queued(1).await.remove(0);
    let pending = ask.payload["confirmation"].as_str().expect("waits").to_owned();
    wa.worker.pass().await;
    wa.deliver(&tap_notification(&format!("confirmar:{pending}"), "wamid.P2"))
        .await;
    let shown = wa.queued(3).await;
    assert_eq!(wa.served.chat.recharges(), 0, "confirmed, not paid: nothing sent");
    let txid = shown
        .iter()
        .find_map(|i| i.payload["files"][0]["fileId"].as_str())
        .and_then(|id| id.strip_prefix(vt_domain::tools::QR_FILE))
        .expect("a reply carries the QR")
        .to_owned();
    // One item of a conversation at a time, in order.
    for _ in 0..3 {
        wa.worker.pass().await;
    }

    let sends = wa.sends();
    let texts: Vec<&str> = sends.iter().filter_map(|s| s["text"]["body"].as_str()).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("pague o Pix") && t.contains("****8901")),
        "{texts:?}"
    );
    let code = texts
        .iter()
        .find(|t| t.starts_with("000201"))
        .unwrap_or_else(|| panic!("the code, alone in its message: {sends:?}"));
    vt_domain::pix::BrCode::checked(code, rust_decimal::dec!(20)).expect("its CRC and amount check");
    let uploads = wa.uploads();
    assert_eq!(uploads.len(), 1, "one image uploaded");
    let raw = &uploads[0].raw;
    let png = vt_domain::pix::qr::png(code).expect("png");
    assert!(
        raw.windows(png.len()).any(|w| w == png.as_slice()),
        "the QR of that code is the file uploaded"
    );
    let form = String::from_utf8_lossy(raw);
    assert!(form.contains("name=\"messaging_product\"") && form.contains("image/png"));
    assert!(
        uploads[0].headers["authorization"]
            .to_str()
            .expect("ascii")
            .starts_with("Bearer ")
    );
    let image = sends
        .iter()
        .find(|s| s["type"] == "image")
        .expect("an image message");
    assert_eq!(image["image"]["id"], "midia-1");
    assert_eq!(image["to"], USER);

    let paid = wa.served.chat.sim.pix().pay(&txid, false).expect("paid");
    let service = wa.served.chat.service.clone();
    let (a, b) = tokio::join!(service.payments().settle(&txid), service.payments().settle(&txid));
    let mut outcomes = [a.expect("settle"), b.expect("settle")];
    outcomes.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(
        outcomes,
        [
            vt_agent::testkit::Settled::Credited,
            vt_agent::testkit::Settled::Nothing
        ]
    );
    assert_eq!(wa.served.chat.recharges(), 1, "one payment, one recharge");
    wa.queued(1).await;
    wa.worker.pass().await;
    let receipt = wa.sends().pop().expect("sent");
    let receipt = receipt["text"]["body"].as_str().unwrap_or_default();
    assert!(
        receipt.contains("Pagamento recebido") && receipt.contains(&paid.end_to_end_id),
        "{receipt}"
    );
}

/// On an account Meta enabled for payments (`[pix] whatsapp_order_details`), the code goes as the
/// native `order_details` (amount in cents, the dynamic code, the operator's key), not as text and an
/// image; once credited, `order_status` completes the same order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_native_orders_a_pix_code_goes_as_order_details_and_ends_with_order_status() {
    let chat = crate::support::chat_harness_pix(crate::support::Pix::NativeOrders).await;
    let wa = whatsapp_on(chat, vec![sent(); 8]).await;
    wa.deliver(&text_notification(
        "recarrega 20 no 2345678901 via pix",
        "wamid.N1",
    ))
    .await;
    let ask = wa.queued(1).await.remove(0);
    let pending = ask.payload["confirmation"].as_str().expect("waits").to_owned();
    wa.worker.pass().await;
    wa.deliver(&tap_notification(&format!("confirmar:{pending}"), "wamid.N2"))
        .await;
    wa.queued(2).await;
    for _ in 0..3 {
        wa.worker.pass().await;
    }
    let sends = wa.sends();
    let texts: Vec<&str> = sends.iter().filter_map(|s| s["text"]["body"].as_str()).collect();
    assert!(
        texts.iter().any(|t| t.contains("pague o Pix")),
        "the line: {texts:?}"
    );
    assert!(
        !texts.iter().any(|t| t.starts_with("000201")),
        "no code as text: {texts:?}"
    );
    assert!(wa.uploads().is_empty(), "no QR image");
    let order = sends
        .iter()
        .find(|s| s["interactive"]["type"] == "order_details")
        .unwrap_or_else(|| panic!("an order_details message: {sends:?}"));
    assert_eq!(order["to"], USER);
    let action = &order["interactive"]["action"];
    assert_eq!(action["name"], "review_and_pay");
    let parameters = &action["parameters"];
    assert_eq!(parameters["payment_type"], "br");
    assert_eq!(parameters["currency"], "BRL");
    assert_eq!(
        parameters["total_amount"],
        serde_json::json!({"value": 2000, "offset": 100})
    );
    let pix = &parameters["payment_settings"][0];
    assert_eq!(pix["type"], "pix_dynamic_code");
    let code = pix["pix_dynamic_code"]["code"].as_str().expect("the code");
    vt_domain::pix::BrCode::checked(code, rust_decimal::dec!(20)).expect("its CRC and amount check");
    assert_eq!(
        pix["pix_dynamic_code"]["key"],
        "recargas@operadora.example.com.br"
    );
    assert_eq!(pix["pix_dynamic_code"]["key_type"], "EMAIL");
    assert!(
        !pix["pix_dynamic_code"]["merchant_name"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
    );
    let txid = parameters["reference_id"].as_str().expect("reference").to_owned();
    assert_eq!(
        wa.served
            .chat
            .sim
            .pix()
            .charge(&txid)
            .and_then(|c| c.pix_copia_e_cola)
            .as_deref(),
        Some(code),
        "the order is the charge at the provider"
    );

    wa.served.chat.sim.pix().pay(&txid, false).expect("paid");
    let settled = wa
        .served
        .chat
        .service
        .payments()
        .settle(&txid)
        .await
        .expect("settle");
    assert_eq!(settled, vt_agent::testkit::Settled::Credited);
    wa.queued(1).await;
    wa.worker.pass().await;
    let sends = wa.sends();
    let receipt = sends
        .iter()
        .rev()
        .find_map(|s| s["text"]["body"].as_str())
        .unwrap_or_default();
    assert!(receipt.contains("Pagamento recebido"), "{receipt}");
    let status = sends.last().expect("sent");
    assert_eq!(status["interactive"]["type"], "order_status", "{status}");
    let action = &status["interactive"]["action"];
    assert_eq!(action["name"], "review_order");
    assert_eq!(action["parameters"]["reference_id"], txid.as_str());
    assert_eq!(action["parameters"]["order"]["status"], "completed");
}

/// A person's first message gets the privacy notice (the default text: what is kept, the data
/// subject's rights, a link) and then the answer, in that order; their next message only the answer.
/// Another person gets their own notice once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_first_message_gets_the_privacy_notice_once_before_the_answer() {
    let chat = crate::support::chat_harness(None, vt_domain::tools::VtSettings::default()).await;
    let notice = vt_agent::testkit::AVISO_PRIVACIDADE;
    let wa = whatsapp_greeting(chat, vec![sent(); 6], notice, 0).await;
    let body = |text: &str, from: &str, wamid: &str| text_from(from, text, wamid);
    let mut sent = 0;
    for (text, from, wamid, replies) in [
        ("oi", USER, "wamid.p1", 2),
        ("qual o saldo do 1234567890", USER, "wamid.p2", 1),
        ("oi", "5511988887777", "wamid.p3", 2),
    ] {
        assert_eq!(wa.deliver(&body(text, from, wamid)).await, 200);
        sent += replies;
        wa.sent_at_least(sent).await;
    }

    let texts: Vec<(String, String)> = wa
        .sends()
        .iter()
        .map(|b| {
            let to = b["to"].as_str().unwrap_or_default().to_owned();
            (to, b["text"]["body"].as_str().unwrap_or_default().to_owned())
        })
        .collect();
    assert_eq!(texts.len(), 5, "{texts:?}");
    assert_eq!(texts[0], (USER.to_owned(), notice.to_owned()), "the notice first");
    assert!(
        notice.contains("LGPD") && notice.contains("apagados") && notice.contains("https://"),
        "it names the rights and links to them"
    );
    assert!(
        texts[1].1.contains("Posso ajudar"),
        "then the answer: {}",
        texts[1].1
    );
    assert!(
        texts[2].1.contains("****7890") && texts[2].1 != notice,
        "{}",
        texts[2].1
    );
    assert_eq!(texts[3], ("5511988887777".to_owned(), notice.to_owned()));
    assert_ne!(texts[4].1, notice);
    // Said as such in the conversation, so the model knows it was said.
    let conversation = vt_agent::testkit::whatsapp_conversation_id(PHONE, USER);
    let said = wa.served.chat.store.messages(&conversation).await.expect("read");
    let notices = said.iter().filter(|m| m.message.text() == Some(notice)).count();
    assert_eq!(notices, 1);
}

/// A card recharge on WhatsApp: the confirmation's tap gets the line with the link and a `cta_url`
/// button that opens the provider's page (the card is typed there, never in the chat); paid, it is
/// credited once and the receipt goes out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_recharge_on_whatsapp_sends_a_button_to_the_checkout_and_credits_the_payment_once() {
    let chat = crate::support::chat_harness_cards().await;
    let wa = whatsapp_on(chat, vec![sent(); 8]).await;
    wa.deliver(&text_notification(
        "recarrega 20 no 2345678901 no crédito",
        "wamid.C1",
    ))
    .await;
    let ask = wa.queued(1).await.remove(0);
    let pending = ask.payload["confirmation"].as_str().expect("waits").to_owned();
    wa.worker.pass().await;
    wa.deliver(&tap_notification(&format!("confirmar:{pending}"), "wamid.C2"))
        .await;
    let shown = wa.queued(2).await;
    let id = shown
        .iter()
        .find_map(|i| i.payload["files"][0]["fileId"].as_str())
        .and_then(|f| f.strip_prefix(vt_domain::tools::LINK_FILE))
        .expect("a reply carries the link")
        .to_owned();
    for _ in 0..2 {
        wa.worker.pass().await;
    }
    let sends = wa.sends();
    let button = sends
        .iter()
        .find(|s| s["interactive"]["type"] == "cta_url")
        .unwrap_or_else(|| panic!("a cta_url button: {sends:?}"));
    let url = button["interactive"]["action"]["parameters"]["url"]
        .as_str()
        .expect("url");
    assert!(url.contains(&id), "{url}");
    assert_eq!(button["interactive"]["action"]["name"], "cta_url");
    assert!(
        !sends.iter().any(|s| s.to_string().contains("2345678901")),
        "the card masked"
    );
    assert_eq!(wa.served.chat.recharges(), 0, "confirmed, not paid: nothing sent");
    wa.served.chat.sim.cartao().pay(&id, false).expect("paid");
    let service = wa.served.chat.service.clone();
    assert_eq!(
        service.payments().settle(&id).await.expect("settle"),
        vt_agent::testkit::Settled::Credited
    );
    assert_eq!(wa.served.chat.recharges(), 1, "one payment, one recharge");
    wa.queued(1).await;
    wa.worker.pass().await;
    let receipt = wa.sends().pop().expect("sent");
    assert!(
        receipt["text"]["body"]
            .as_str()
            .unwrap_or_default()
            .contains("recarga feita"),
        "{receipt}"
    );
}
