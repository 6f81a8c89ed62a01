//! WhatsApp turns in order and payments on WhatsApp: bursts answered in the order stored (one instance,
//! the webhook, two on PostgreSQL), a failed message not holding up the next, turns ending before a stop,
//! a Pix code with its QR image or as native order details, the privacy notice once, a card checkout button.

use crate::whatsapp::*;
use serde_json::{Value, json};
use std::sync::Arc;
use vt_store::records::OutboxStatus;

/// Bursts: several people each send several messages at once (Meta delivers them in parallel),
/// to one instance or, on PostgreSQL, alternately to two. Whichever order the webhooks stored them
/// in, every conversation's messages are processed, and answered, in that order — whichever of the
/// tasks started after each 200 reaches the turn lock first. Turns commit their replies under the
/// lock, so the outbox's order is the order they were processed in.
pub(crate) async fn bursts_are_processed_and_answered_in_the_order_stored(instances: &[Arc<Wa>]) {
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
    let store: Arc<dyn vt_store::Store> = Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    );
    let flaky = Arc::new(crate::service::Flaky {
        inner: store.clone(),
        fail_append: false,
        fail_turn: false,
        fail_accepting: Some("não dá para guardar"),
        turn_attempts: std::sync::atomic::AtomicU32::new(0),
    });
    let chat = crate::support::chat_harness_conversing(store, flaky).await;
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
