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
pub(crate) const PHONE: &str = "106540352242922";
pub(crate) const USER: &str = "16505551234";
pub(crate) const OUR_WAMID: &str = "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUFERjg0NDEzNDdFODU3MUMxMAA=";

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

pub(crate) async fn whatsapp(graph_answers: Vec<Canned<'static>>) -> Wa {
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
pub(crate) async fn whatsapp_greeting(
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
        ..Default::default()
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
    pub(crate) async fn post(&self, body: &[u8], signature: Option<String>) -> u16 {
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
    pub(crate) fn uploads(&self) -> Vec<crate::support::Received> {
        self.graph
            .received()
            .into_iter()
            .filter(|r| r.path.ends_with("/media"))
            .collect()
    }

    pub(crate) fn receipts(&self) -> Vec<Value> {
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
pub(crate) fn text_from(wa_id: &str, text: &str, wamid: &str) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(&text_notification(text, wamid)).expect("json");
    let value = &mut v["entry"][0]["changes"][0]["value"];
    value["contacts"][0]["wa_id"] = json!(wa_id);
    value["messages"][0]["from"] = json!(wa_id);
    serde_json::to_vec(&v).expect("bytes")
}
