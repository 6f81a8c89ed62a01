//! WhatsApp people known by a phone, by a business-scoped user id (BSUID), or by both, in Meta's 2026
//! payload shapes (`tests/fixtures/payloads/wa-*bsuid*`, `…user-id-update`, `…recipient-user-id`):
//! one conversation from a phone to a BSUID-only message and across a new number, sends to what Meta
//! takes for that person (`to` a phone, `recipient` a BSUID), receipts and notices to a BSUID-only
//! person, their erasure, and the template that only goes to a phone.

use chrono::Utc;
use serde_json::{Value, json};

use crate::window::{PHONE, Wa, opt_in, whatsapp, whatsapp_on, whatsapp_with};

/// The person's phone, their BSUID, and the BSUID their new number brings.
const THEIR_PHONE: &str = "16505551234";
const BSUID: &str = "US.13491208655302741918";
const NEW_BSUID: &str = "US.88810020030040050060";

/// The fixture `name` saying `text` now, as message `wamid`.
fn text(name: &str, text: &str, wamid: &str) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(&crate::whatsapp::fixture(name)).expect("json");
    let m = &mut v["entry"][0]["changes"][0]["value"]["messages"][0];
    m["text"]["body"] = json!(text);
    m["id"] = json!(wamid);
    m["timestamp"] = json!(Utc::now().timestamp().to_string());
    serde_json::to_vec(&v).expect("bytes")
}

/// A username adopter's text (no phone), from `bsuid`.
fn from_bsuid(bsuid: &str, said: &str, wamid: &str) -> Vec<u8> {
    let mut v: Value =
        serde_json::from_slice(&text("wa-webhook-text.bsuid-only.json", said, wamid)).expect("json");
    let value = &mut v["entry"][0]["changes"][0]["value"];
    value["contacts"][0]["user_id"] = json!(bsuid);
    value["messages"][0]["from_user_id"] = json!(bsuid);
    serde_json::to_vec(&v).expect("bytes")
}

/// Runs the outbox until `n` messages went to Meta (the turns run after the 200).
async fn sent_at_least(wa: &Wa, n: usize) -> Vec<Value> {
    for _ in 0..400 {
        wa.worker.pass().await;
        let sends = wa.sends();
        if sends.len() >= n {
            return sends;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{n} messages never went out: {:?}", wa.sends());
}

/// The first text sent that `wanted` picks, once the outbox has sent it.
async fn said(wa: &Wa, wanted: impl Fn(&str) -> bool) -> String {
    for _ in 0..400 {
        wa.worker.pass().await;
        if let Some(b) = wa.sends().iter().map(body).find(|b| wanted(b)) {
            return b;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!(
        "never said: {:?}",
        wa.sends().iter().map(body).collect::<Vec<_>>()
    );
}

/// Who a send went to: `("to", phone)` or `("recipient", bsuid)` — never both.
fn addressee(send: &Value) -> (&'static str, String) {
    match (send["to"].as_str(), send["recipient"].as_str()) {
        (Some(to), None) => ("to", to.to_owned()),
        (None, Some(r)) => ("recipient", r.to_owned()),
        _ => panic!("a send names one addressee: {send}"),
    }
}

fn body(send: &Value) -> String {
    send["text"]["body"]
        .as_str()
        .or(send["interactive"]["body"]["text"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_conversation_goes_on_from_a_phone_to_a_bsuid_and_across_a_new_number() {
    let wa = whatsapp(vec![crate::whatsapp::sent(); 12]).await;
    let store = wa.served.chat.store.clone();
    let conversation = vt_agent::testkit::whatsapp_conversation_id(PHONE, THEIR_PHONE);

    // With their phone and BSUID: the conversation is their phone's, as always.
    let first = text(
        "wa-webhook-text.bsuid-and-phone.json",
        "saldo do 1234567890",
        "wamid.B1",
    );
    assert_eq!(wa.deliver(&first).await, 200);
    let sends = sent_at_least(&wa, 1).await;
    assert_eq!(addressee(&sends[0]), ("to", THEIR_PHONE.to_owned()));

    // Their phone withheld: the same conversation (the card remembered), still answered at their phone.
    let ask = from_bsuid(BSUID, "recarrega 50 no boleto", "wamid.B2");
    assert_eq!(wa.deliver(&ask).await, 200);
    let sends = sent_at_least(&wa, 2).await;
    assert!(body(&sends[1]).contains("****7890"), "{}", sends[1]);
    assert_eq!(addressee(&sends[1]), ("to", THEIR_PHONE.to_owned()));
    assert!(
        store
            .conversation(&format!("wa:{PHONE}:{BSUID}"))
            .await
            .expect("read")
            .is_none()
    );

    // A new number: a new BSUID. Not a turn; nothing is said.
    let update = crate::whatsapp::fixture("wa-webhook-system.user-id-update.json");
    assert_eq!(wa.deliver(&update).await, 200);
    let before = store.messages(&conversation).await.expect("messages").len();

    // Their "sim" from the new BSUID answers the question asked before: one recharge, said at the new
    // BSUID (the old phone is not theirs anymore).
    assert_eq!(wa.deliver(&from_bsuid(NEW_BSUID, "sim", "wamid.B3")).await, 200);
    let sends = sent_at_least(&wa, 3).await;
    assert_eq!(addressee(&sends[2]), ("recipient", NEW_BSUID.to_owned()));
    assert!(
        body(&sends[2]).starts_with("Boleto da recarga de R$ 50,00 no cartão ****7890"),
        "{}",
        sends[2]
    );
    let recharges = wa
        .served
        .chat
        .sim
        .ledger()
        .into_iter()
        .filter(|e| e.sistema == "recarga")
        .count();
    assert_eq!(recharges, 1, "the confirmation asked, consumed once");
    assert!(store.messages(&conversation).await.expect("messages").len() > before);
    for other in [BSUID, NEW_BSUID] {
        let id = format!("wa:{PHONE}:{other}");
        assert!(store.conversation(&id).await.expect("read").is_none(), "{id}");
    }

    // A status naming the phone and the BSUID links them; a status never moves anyone.
    let status = crate::whatsapp::fixture("wa-webhook-status-delivered.recipient-user-id.json");
    assert_eq!(wa.deliver(&status).await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bsuid_only_person_gets_the_pix_receipt_and_the_automatic_recharge_offer_at_their_bsuid() {
    let chat = crate::support::chat_harness_pix(crate::support::Pix::Automatic).await;
    let wa = whatsapp_on(chat, vec![crate::whatsapp::sent(); 12]).await;
    let ask = from_bsuid(BSUID, "recarrega 20 no 2345678901 via pix", "wamid.X1");
    assert_eq!(wa.deliver(&ask).await, 200);
    sent_at_least(&wa, 1).await;
    assert_eq!(wa.deliver(&from_bsuid(BSUID, "sim", "wamid.X2")).await, 200);
    let items = crate::support::pending_once(wa.served.chat.store.as_ref(), |items| {
        items.iter().any(|i| i.payload["files"][0].is_object())
    })
    .await;
    let txid = items
        .iter()
        .find_map(|i| i.payload["files"][0]["fileId"].as_str())
        .and_then(|id| id.strip_prefix(vt_domain::tools::QR_FILE))
        .expect("a code was shown")
        .to_owned();
    wa.served.chat.sim.pix().pay(&txid, false).expect("paid");
    let credited = wa
        .served
        .chat
        .service
        .payments()
        .settle(&txid)
        .await
        .expect("settle");
    assert_eq!(credited, vt_agent::testkit::Settled::Credited);
    let receipt = said(&wa, |b| b.contains("recarga feita")).await;
    let offer = said(&wa, |b| b.contains("recarregue sozinho")).await;
    assert!(receipt.contains("****8901"), "{receipt}");
    assert!(!offer.is_empty());
    let sends = wa.sends();
    for s in &sends {
        assert_eq!(addressee(s), ("recipient", BSUID.to_owned()), "{s}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erasing_a_bsuid_only_person_by_their_bsuid_leaves_nothing_of_them() {
    let wa = whatsapp(vec![crate::whatsapp::sent(); 6]).await;
    let store = wa.served.chat.store.clone();
    assert_eq!(
        wa.deliver(&from_bsuid(BSUID, "saldo do 1234567890", "wamid.E1"))
            .await,
        200
    );
    sent_at_least(&wa, 1).await;
    let conversation = format!("wa:{PHONE}:{BSUID}");
    assert!(store.conversation(&conversation).await.expect("read").is_some());
    let stores = vt_store::Stores::of(&store);
    let subject = vt_store::Subject::User(BSUID.to_owned());
    let export = vt_agent::testkit::export_subject(&stores, &subject)
        .await
        .expect("export");
    assert!(export.to_string().contains(&conversation), "{export}");
    vt_agent::testkit::erase_subject(&stores, &subject, ("operador", "default"), None)
        .await
        .expect("erase");
    assert!(store.conversation(&conversation).await.expect("read").is_none());
    assert!(
        store
            .whatsapp_person_of(PHONE, BSUID)
            .await
            .expect("read")
            .is_none()
    );
    assert!(store.last_inbound(BSUID).await.expect("read").is_none());
}

/// The shipped templates, the low-balance one of the authentication category, which Meta sends to a
/// phone only.
fn with_an_authentication_template() -> std::sync::Arc<vt_agent::testkit::Templates> {
    let dir = tempfile::tempdir().expect("dir");
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("templates");
    for entry in std::fs::read_dir(shipped).expect("templates") {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, dir.path().join(path.file_name().expect("name"))).expect("copy");
    }
    // The low-balance notice's template, approved as an authentication one.
    let low = dir.path().join("saldo_baixo.toml");
    let text = std::fs::read_to_string(&low).expect("read");
    std::fs::write(&low, text.replace("\"UTILITY\"", "\"AUTHENTICATION\"")).expect("write");
    std::sync::Arc::new(vt_agent::testkit::Templates::load(dir.path()).expect("load"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phone_only_template_to_a_bsuid_only_person_is_refused_with_its_reason() {
    let chat = crate::support::chat_harness(None, vt_domain::tools::VtSettings::default()).await;
    let wa = whatsapp_with(
        chat,
        vec![crate::whatsapp::sent(); 4],
        with_an_authentication_template(),
    )
    .await;
    let store = wa.served.chat.store.clone();
    // They wrote two days ago, by their BSUID only, and agreed to notices.
    let mut v: Value = serde_json::from_slice(&from_bsuid(BSUID, "oi", "wamid.T1")).expect("json");
    v["entry"][0]["changes"][0]["value"]["messages"][0]["timestamp"] =
        json!((Utc::now() - chrono::Duration::days(2)).timestamp().to_string());
    assert_eq!(wa.deliver(&serde_json::to_vec(&v).expect("bytes")).await, 200);
    crate::support::pending_once(store.as_ref(), |items| !items.is_empty()).await;
    opt_in(&wa, BSUID).await;
    for _ in 0..5 {
        wa.worker.pass().await;
    }
    let id = wa
        .enqueue(
            BSUID,
            "O saldo do cartão ****7890 está baixo: R$ 3,20.",
            crate::window::low_balance("7890", "R$ 3,20"),
        )
        .await;
    for _ in 0..3 {
        wa.worker.pass().await;
    }
    let item = wa.item(id).await;
    assert_eq!(item.status, vt_store::records::OutboxStatus::Failed, "{item:?}");
    let why = item.last_error.unwrap_or_default();
    assert!(why.contains("autenticação") && why.contains("BSUID"), "{why}");
    assert!(
        wa.sends().iter().all(|s| s["type"] != "template"),
        "nothing went: {:?}",
        wa.sends()
    );
}
