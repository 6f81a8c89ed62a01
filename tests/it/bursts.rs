//! Bursts on WhatsApp (`[whatsapp] juntar_ms`): quick messages answered as one turn, each still
//! stored on arrival; a yes (typed or tapped) never joined and processed once, in its place.

use std::time::Duration;

use crate::whatsapp::{Wa, sent, text_notification, whatsapp_joining};

const CONVERSATION: &str = "wa:106540352242922:16505551234";
const JUNTAR_MS: u64 = 600;

async fn joining(replies: usize) -> Wa {
    let chat = crate::support::chat_harness(None, vt_domain::tools::VtSettings::default()).await;
    whatsapp_joining(chat, vec![sent(); replies], JUNTAR_MS).await
}

/// Runs the outbox well past the join window: whatever would still go out, went out.
async fn settle(wa: &Wa) {
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(JUNTAR_MS)).await;
        wa.worker.pass().await;
    }
}

/// Delivers `texts` one after the other, as quick messages (ids `wamid.<prefix><n>`), each acknowledged.
async fn deliver_all(wa: &Wa, texts: &[&str], prefix: &str) {
    for (i, text) in texts.iter().enumerate() {
        let body = text_notification(text, &format!("wamid.{prefix}{i}"));
        assert_eq!(wa.deliver(&body).await, 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_quick_messages_are_one_turn_with_one_reply_and_three_stored_messages() {
    let wa = joining(3).await;
    deliver_all(
        &wa,
        &["oi", "quero recarregar", "50 no pix no cartão 1234567890"],
        "rajada",
    )
    .await;
    wa.sent_at_least(1).await;
    settle(&wa).await;
    let said = wa.texts();
    assert_eq!(said.len(), 1, "one answer to the burst: {said:?}");
    assert!(
        said[0].contains("****7890") && said[0].contains("50,00"),
        "{said:?}"
    );

    let store = &wa.served.chat.store;
    let users: Vec<_> = store
        .messages(CONVERSATION)
        .await
        .expect("messages")
        .into_iter()
        .filter(|m| matches!(m.message, vt_engine::llm::ChatMessage::User { .. }))
        .map(|m| m.message.text().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        users,
        ["oi", "quero recarregar", "50 no pix no cartão 1234567890"],
        "each stored as it came"
    );
    assert!(
        crate::support::all_processed(store.as_ref()).await,
        "all three answered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yes_inside_a_burst_is_never_joined_and_charges_once() {
    let wa = joining(4).await;
    assert_eq!(
        wa.deliver(&text_notification(
            "recarregar 20 no pix no cartão 1234567890",
            "wamid.pede"
        ))
        .await,
        200
    );
    wa.sent_at_least(1).await;
    // The question waits; the yes comes between two other words, all inside the window.
    deliver_all(
        &wa,
        &["qual o horário de atendimento?", "sim", "obrigado"],
        "resposta",
    )
    .await;
    wa.sent_at_least(4).await;
    settle(&wa).await;
    let said = wa.texts();
    assert_eq!(said.len(), 4, "the question, then one answer each: {said:?}");
    assert!(
        said.iter().filter(|t| t.contains("aprovada")).count() == 1,
        "{said:?}"
    );
    assert_eq!(wa.served.chat.sim.charges("1234567890"), 1, "one charge");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn words_after_a_yes_join_each_other_but_not_the_yes() {
    let wa = joining(3).await;
    deliver_all(
        &wa,
        &["sim", "tudo bem?", "quero saber o saldo do cartão 1234567890"],
        "depois",
    )
    .await;
    wa.sent_at_least(2).await;
    settle(&wa).await;
    let said = wa.texts();
    assert_eq!(
        said.len(),
        2,
        "the yes alone, then the two words together: {said:?}"
    );
    assert!(said[1].contains("****7890"), "{said:?}");
    assert_eq!(
        wa.served.chat.sim.charges("1234567890"),
        0,
        "a yes to nothing charges nothing"
    );
}
