//! The message pipeline (accept → route → run → commit → deliver): what each step promises, seen from
//! the store.

use vt_actions::tools::VtSettings;
use vt_agent::service::{Delivery, Inbound};
use vt_agent::store::OutboxStatus;

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
    let first = h.service.handle(msg.clone()).await.expect("handled");
    let queued = h
        .store
        .outbox_items(OutboxStatus::Pending, 10)
        .await
        .expect("pending");
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].conversation_id.as_deref(), Some("o2"));
    assert_eq!(queued[0].payload["text"], first.reply_text());
    // The channel delivers the same message again: it is not processed again.
    let again = h.service.handle(msg).await.expect("handled");
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
    h.service.handle(msg.clone()).await.expect("handled");
    msg.tenant_id = Some("empresa-b".into());
    let err = h.service.handle(msg).await.expect_err("another tenant");
    assert!(
        matches!(err, vt_agent::service::ServiceError::NotFound(_)),
        "{err}"
    );
    let conv = h.store.conversation("t1").await.expect("read").expect("stored");
    assert_eq!(conv.tenant_id, "empresa-a");
}
