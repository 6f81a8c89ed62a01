//! The message pipeline (accept → route → run → commit → deliver): what each step promises, seen from
//! the store.

use vt_agent::{Delivery, Inbound};
use vt_domain::tools::VtSettings;
use vt_store::records::OutboxStatus;

use crate::support::{chat_harness, user};

fn inbound(conv: &str, text: &str) -> Inbound {
    Inbound {
        agent_id: "vt".into(),
        conversation_id: Some(conv.into()),
        user: user(),
        text: text.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_long_conversation_keeps_a_small_row() {
    let h = chat_harness(None, VtSettings::default()).await;
    for _ in 0..60 {
        h.say("long", "saldo 1234567890").await;
    }
    let conv = h.store.conversation("long").await.expect("read").expect("stored");
    assert!(
        conv.window.len() <= 12,
        "the window is what the model may be shown, not the history: {}",
        conv.window.len()
    );
    // Each turn: the user's message, the router's tool call and its result, the reply.
    assert_eq!(
        h.store.messages("long").await.expect("messages").len(),
        240,
        "the history is whole"
    );
}

#[tokio::test]
async fn a_tools_flow_run_is_stored_with_the_turn_that_started_it() {
    let h = chat_harness(None, VtSettings::default()).await;
    h.say("f1", "recarrega 50 no 2345678901 via pix").await;
    let done = h.say("f1", "sim").await;
    let turn = done.execucao_id.expect("execution");
    let runs = h.store.flow_runs(10).await.expect("runs");
    assert_eq!(runs.len(), 1, "the recharge's stage chain");
    let run = h
        .store
        .flow_run(&runs[0].execucao_id)
        .await
        .expect("read")
        .expect("run");
    assert_eq!(run.parent_execucao_id.as_deref(), Some(turn.as_str()));
    assert_eq!(run.stages.len(), 10);
    let (_, events) = h.store.execution(&turn).await.expect("read").expect("stored");
    let cited = serde_json::to_string(&events).expect("json");
    assert!(
        cited.contains(&run.execucao_id),
        "the reply cites a run that exists"
    );
}

#[tokio::test]
async fn every_reply_is_an_outbox_item_delivered_inline_or_queued_for_the_worker() {
    let h = chat_harness(None, VtSettings::default()).await;
    h.say("o1", "saldo 1234567890").await;
    assert_eq!(
        h.store
            .outbox_items(OutboxStatus::Pending, 10)
            .await
            .expect("pending")
            .len(),
        0
    );
    let mut msg = inbound("o2", "saldo 1111111111");
    msg.delivery = Delivery::Outbox;
    msg.channel_message_id = Some("wamid.A".into());
    let first = h.service.messages().handle(msg.clone()).await.expect("handled");
    let queued = h
        .store
        .outbox_items(OutboxStatus::Pending, 10)
        .await
        .expect("pending");
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].conversation_id.as_deref(), Some("o2"));
    assert_eq!(queued[0].payload["text"], first.reply_text());
    // The channel delivers the same message again: it is not processed again.
    let again = h.service.messages().handle(msg).await.expect("handled");
    assert!(again.duplicate && again.replies.is_empty());
    assert_eq!(
        h.store.messages("o2").await.expect("messages").len(),
        4,
        "one turn's messages, once"
    );
    assert_eq!(
        h.sim.ledger().iter().filter(|e| e.sistema == "saldo").count(),
        2,
        "one query per message"
    );
}

#[tokio::test]
async fn a_conversation_of_another_tenant_is_not_found() {
    let h = chat_harness(None, VtSettings::default()).await;
    let mut msg = inbound("t1", "saldo 1234567890");
    msg.tenant_id = Some("empresa-a".into());
    h.service.messages().handle(msg.clone()).await.expect("handled");
    msg.tenant_id = Some("empresa-b".into());
    let err = h
        .service
        .messages()
        .handle(msg)
        .await
        .expect_err("another tenant");
    assert!(matches!(err, vt_agent::ServiceError::NotFound(_)), "{err}");
    let conv = h.store.conversation("t1").await.expect("read").expect("stored");
    assert_eq!(conv.tenant_id, "empresa-a");
}

/// A channel on loopback HTTP (the fake answers what it is told, in order): 2xx delivered, 5xx and 429
/// retried, other 4xx final — the classification every real channel of the next step makes.
struct HttpChannel {
    client: reqwest::Client,
    url: String,
}

#[async_trait::async_trait]
impl vt_agent::ChannelSender for HttpChannel {
    fn channel(&self) -> &str {
        "loopback"
    }

    async fn send(
        &self,
        _item: &vt_store::records::OutboxItem,
        reply: &vt_agent::ReplyPayload,
    ) -> Result<Option<String>, vt_agent::SendError> {
        use vt_agent::SendError;
        let r = self
            .client
            .post(&self.url)
            .json(reply)
            .send()
            .await
            .map_err(|e| SendError::Retry {
                reason: e.to_string(),
                after: None,
            })?;
        match r.status().as_u16() {
            200..=299 => Ok(None),
            s @ (429 | 500..=599) => Err(SendError::Retry {
                reason: format!("http {s}"),
                after: None,
            }),
            s => Err(SendError::Permanent(format!("http {s}"))),
        }
    }
}

fn queued(conv: &str, n: i32) -> vt_store::records::NewOutboxItem {
    vt_store::records::NewOutboxItem {
        kind: "reply".into(),
        destination: "loopback".into(),
        payload: crate::support::reply_payload(conv, "u", &format!("resposta {n}")),
        max_attempts: 5,
        next_attempt_at: chrono::Utc::now(),
        conversation_id: Some(conv.into()),
        status: OutboxStatus::Pending,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_worker_retries_then_dead_letters_and_keeps_a_conversations_order() {
    use crate::support::FakeServer;
    use serde_json::json;
    let store: std::sync::Arc<dyn vt_store::Store> = std::sync::Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    );
    // Item 1: 503, 503, then 200. Item 2 (same conversation) waits, then 200. Item 3: 500 five times.
    // Item 4: 400, final at once.
    let fake = FakeServer::start(vec![
        (503, vec![], json!({})),
        (503, vec![], json!({})),
        (200, vec![], json!({})),
        (200, vec![], json!({})),
        (500, vec![], json!({})),
        (500, vec![], json!({})),
        (500, vec![], json!({})),
        (500, vec![], json!({})),
        (500, vec![], json!({})),
        (400, vec![], json!({})),
    ])
    .await;
    let now = chrono::Utc::now();
    let a1 = store.enqueue(&queued("A", 1), now).await.expect("enqueue");
    let a2 = store.enqueue(&queued("A", 2), now).await.expect("enqueue");
    let worker = vt_agent::Worker::new(store.clone(), vt_engine::retry::RetryPolicy::new(5, 1)).with_sender(
        std::sync::Arc::new(HttpChannel {
            client: reqwest::Client::new(),
            url: format!("{}/send", fake.url),
        }),
    );
    for _ in 0..10 {
        worker.pass().await;
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let texts: Vec<String> = fake
        .received()
        .iter()
        .map(|r| r.body["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        texts,
        ["resposta 1", "resposta 1", "resposta 1", "resposta 2"],
        "in order, 1 before 2"
    );
    for id in [a1, a2] {
        let item = store.outbox_item(id).await.expect("read").expect("item");
        assert_eq!(item.status, OutboxStatus::Done);
    }
    let b = store
        .enqueue(&queued("B", 1), chrono::Utc::now())
        .await
        .expect("enqueue");
    for _ in 0..20 {
        worker.pass().await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let dead = store.outbox_item(b).await.expect("read").expect("item");
    assert_eq!((dead.status, dead.attempts), (OutboxStatus::Failed, 5));
    assert_eq!(dead.last_error.as_deref(), Some("http 500"));
    let c = store
        .enqueue(&queued("C", 1), chrono::Utc::now())
        .await
        .expect("enqueue");
    worker.pass().await;
    let final_error = store.outbox_item(c).await.expect("read").expect("item");
    assert_eq!(
        (final_error.status, final_error.attempts),
        (OutboxStatus::Failed, 1),
        "a 400 is not retried"
    );
    assert_eq!(
        store
            .outbox_items(OutboxStatus::Failed, 10)
            .await
            .expect("dead")
            .len(),
        2
    );
}

#[tokio::test]
async fn a_message_acknowledged_before_a_stop_is_processed_at_start_once() {
    let h = chat_harness(None, VtSettings::default()).await;
    let mut msg = inbound("wa-1", "saldo 1234567890");
    msg.delivery = Delivery::Outbox;
    msg.channel_message_id = Some("wamid.X".into());
    // The webhook stored it and answered 200; the process stopped before the turn.
    let received = h
        .service
        .messages()
        .receive(&msg)
        .await
        .expect("stored")
        .expect("new");
    assert!(
        h.service
            .messages()
            .receive(&msg)
            .await
            .expect("stored")
            .is_none(),
        "a redelivery is known"
    );
    assert_eq!(
        h.store.unprocessed_messages(None, 10).await.expect("read").len(),
        1
    );
    assert_eq!(h.service.messages().recover().await, 1);
    assert!(
        h.store
            .unprocessed_messages(None, 10)
            .await
            .expect("read")
            .is_empty()
    );
    // The webhook's own task gets its turn after the recovery did the work: nothing runs twice.
    let late = h
        .service
        .messages()
        .process(received.clone())
        .await
        .expect("handled");
    assert!(late.duplicate && late.replies.is_empty());
    assert_eq!(h.service.messages().recover().await, 0, "never twice");
    let queued = h
        .store
        .outbox_items(OutboxStatus::Pending, 10)
        .await
        .expect("pending");
    assert_eq!(queued.len(), 1);
    assert!(
        queued[0].payload["text"]
            .as_str()
            .unwrap_or_default()
            .contains("****7890")
    );
    assert_eq!(received.conversation_id, "wa-1");
}

/// Two webhook messages stored in order, whose tasks reach the turn lock in the other order: the
/// later one's task processes the earlier message first, and the earlier one's task gets its own
/// outcome, not a "duplicate".
#[tokio::test]
async fn messages_are_processed_in_the_order_they_were_stored_whichever_task_runs_first() {
    let h = chat_harness(None, VtSettings::default()).await;
    let channel = |text: &str, wamid: &str| {
        let mut msg = inbound("wa-order", text);
        msg.delivery = Delivery::Outbox;
        msg.channel_message_id = Some(wamid.into());
        msg
    };
    let ask = channel("recarrega 50 no cartão 2345678901 via pix", "wamid.1");
    let yes = channel("sim", "wamid.2");
    let first = h
        .service
        .messages()
        .receive(&ask)
        .await
        .expect("stored")
        .expect("new");
    let second = h
        .service
        .messages()
        .receive(&yes)
        .await
        .expect("stored")
        .expect("new");

    let later = h.service.messages().process(second).await.expect("handled");
    assert!(
        later.reply_text().contains("aprovada"),
        "the yes answered the recharge asked before it: {}",
        later.reply_text()
    );
    assert_eq!(h.recharges(), 1);
    let earlier = h.service.messages().process(first).await.expect("handled");
    assert!(!earlier.duplicate, "the ask's own task gets the ask's outcome");
    assert!(
        earlier.awaiting_confirmation.is_some() && earlier.reply_text().contains("****8901"),
        "{}",
        earlier.reply_text()
    );

    let users: Vec<String> = h
        .store
        .messages("wa-order")
        .await
        .expect("read")
        .into_iter()
        .filter_map(|m| match m.message {
            vt_engine::llm::ChatMessage::User { .. } => m.message.text().map(str::to_owned),
            _ => None,
        })
        .collect();
    assert_eq!(users, [ask.text.clone(), yes.text.clone()]);
    let replies: Vec<String> = h
        .store
        .outbox_items(OutboxStatus::Pending, 10)
        .await
        .expect("pending")
        .into_iter()
        .map(|i| i.payload["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert!(
        replies[0].contains("****8901") && replies[1].contains("aprovada"),
        "answered in order: {replies:?}"
    );
    assert!(
        h.store
            .unprocessed_messages(None, 10)
            .await
            .expect("read")
            .is_empty()
    );
}
