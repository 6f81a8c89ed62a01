//! The notices a flow sends on WhatsApp outside the window: a low balance told once with consent, once
//! per crossing and instance, a paused template stopped, a Pix receipt as the receipt template, a paid
//! notice costed under its run.

use crate::support::FakeServer;
use crate::window::*;
use chrono::{Duration, Utc};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use vt_agent::testkit::Sender;
use vt_store::records::OutboxStatus;

/// A flow whose recipient is a WhatsApp user: the product tells them itself — once per crossing of the
/// limit, never without an opt-in, never in the quiet hours (the item is due at their end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_low_balance_flow_for_a_whatsapp_user_is_told_once_with_consent_and_outside_quiet_hours() {
    use vt_agent::testkit::NoticesConfig;
    let memory = || async {
        std::sync::Arc::new(
            vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
                .await
                .expect("store"),
        ) as std::sync::Arc<dyn vt_store::Store>
    };
    let flow = |wa: &str, recharge: bool| {
        let recarga = if recharge {
            r#", "recarga": {"valor": 50, "meio_pagamento": {"tipo": "pix"}}"#
        } else {
            ""
        };
        format!(
            r#"{{"cartao": "1111111111", "destinatario": {{"tipo": "whatsapp", "id": "{wa}"}}, "cpf": "123.456.789-00"{recarga}}}"#
        )
    };
    let notices = |store: &std::sync::Arc<dyn vt_store::Store>| {
        let store = store.clone();
        async move {
            store
                .outbox_items(OutboxStatus::Pending, 100)
                .await
                .expect("outbox")
                .into_iter()
                .filter(|i| i.kind == "aviso_saldo_baixo")
                .collect::<Vec<_>>()
        }
    };
    let consent = |store: &std::sync::Arc<dyn vt_store::Store>, wa: &str, opted_in: bool| {
        let (store, wa) = (store.clone(), wa.to_owned());
        async move {
            store
                .record_consent(&vt_store::concerns::ConsentChange {
                    wa_id: wa.clone(),
                    opted_in,
                    source: "importacao".into(),
                    who: "teste".into(),
                    at: "2026-11-01T00:00:00Z".parse().expect("t"),
                })
                .await
                .expect("consent");
        }
    };

    // 09:00 in São Paulo: sent now, once.
    let store = memory().await;
    let h = crate::support::chat_harness_notifying(store.clone(), PHONE, NoticesConfig::default()).await;
    let (user, out) = ("5511912345678", "5511987654321");
    consent(&store, user, true).await;
    let ran = h
        .service
        .flows()
        .run_flow(flow(user, false).as_str(), Default::default())
        .await
        .expect("flow");
    assert!(
        serde_json::to_string(&ran.output)
            .expect("json")
            .contains("\"enviado\":true")
    );
    let sent = notices(&store).await;
    assert_eq!(sent.len(), 1);
    let payload = &sent[0].payload;
    assert_eq!(payload["user_id"], user);
    assert_eq!(payload["template"]["purpose"], "saldo_baixo");
    assert_eq!(payload["template"]["parameters"]["cartao_final"], "1111");
    assert_eq!(payload["template"]["parameters"]["saldo"], "R$ 12,50");
    assert!(!payload.to_string().contains("1111111111"), "no card in clear");
    assert_eq!(sent[0].next_attempt_at, h.clock.now(), "due now");
    // The same card again, still low: nothing more.
    let again = h
        .service
        .flows()
        .run_flow(flow(user, false).as_str(), Default::default())
        .await
        .expect("flow");
    assert!(
        serde_json::to_string(&again.output)
            .expect("json")
            .contains("ja_avisado")
    );
    assert_eq!(notices(&store).await.len(), 1);
    // Opted out: nothing, and the flow says why.
    consent(&store, out, false).await;
    let refused = h
        .service
        .flows()
        .run_flow(flow(out, false).as_str(), Default::default())
        .await
        .expect("flow");
    assert!(
        serde_json::to_string(&refused.output)
            .expect("json")
            .contains("cliente_pediu_parar")
    );
    assert_eq!(notices(&store).await.len(), 1);
    // A recharge lifts the balance above the limit: the next low balance is a new crossing.
    h.service
        .flows()
        .run_flow(flow(user, true).as_str(), Default::default())
        .await
        .expect("recharge");
    // Its result reaches the WhatsApp user the same way (RF10), with the resultado_recarga template.
    let results: Vec<_> = store
        .outbox_items(OutboxStatus::Pending, 100)
        .await
        .expect("outbox")
        .into_iter()
        .filter(|i| i.kind == "aviso_recarga")
        .collect();
    assert_eq!(results.len(), 1);
    let parameters = &results[0].payload["template"]["parameters"];
    assert_eq!(results[0].payload["template"]["purpose"], "resultado_recarga");
    assert_eq!(
        (
            &parameters["cartao_final"],
            &parameters["valor"],
            &parameters["resultado"]
        ),
        (&json!("1111"), &json!("R$ 50,00"), &json!("aprovada"))
    );
    let high = h
        .service
        .flows()
        .run_flow(flow(user, false).as_str(), Default::default())
        .await
        .expect("lookup");
    assert!(
        serde_json::to_string(&high.output)
            .expect("json")
            .contains("saldo_acima_do_limite")
    );

    // 00:00 in São Paulo (03:00 UTC): deferred to 08:00 local, 11:00 UTC — a row, so a restart keeps it.
    let night_store = memory().await;
    let night =
        crate::support::chat_harness_notifying(night_store.clone(), PHONE, NoticesConfig::default()).await;
    night.clock.set("2026-11-23T03:00:00Z".parse().expect("t"));
    consent(&night_store, user, true).await;
    let deferred = night
        .service
        .flows()
        .run_flow(flow(user, false).as_str(), Default::default())
        .await
        .expect("flow");
    assert!(
        serde_json::to_string(&deferred.output)
            .expect("json")
            .contains("adiado_para_o_fim_do_silencio")
    );
    let items = notices(&night_store).await;
    assert_eq!(items.len(), 1);
    assert_eq!(
        items[0].next_attempt_at,
        "2026-11-23T11:00:00Z"
            .parse::<chrono::DateTime<Utc>>()
            .expect("t")
    );
}

/// One notice per crossing and per interval: a card below the limit is told once; after a reading
/// above it, again — but not within the interval.
pub(crate) async fn a_cards_low_balance_notice_is_taken_once_per_crossing_and_interval(
    store: std::sync::Arc<dyn vt_store::Store>,
) {
    let t = |h: i64| {
        "2026-11-22T12:00:00Z"
            .parse::<chrono::DateTime<Utc>>()
            .expect("t")
            + Duration::hours(h)
    };
    let day = Duration::hours(24);
    assert!(
        store
            .take_low_balance_notice("cartao-h", t(0) - day, t(0))
            .await
            .expect("take")
    );
    assert!(
        !store
            .take_low_balance_notice("cartao-h", t(30) - day, t(30))
            .await
            .expect("take"),
        "still below"
    );
    store.balance_recovered("cartao-h").await.expect("recovered");
    assert!(
        !store
            .take_low_balance_notice("cartao-h", t(10) - day, t(10))
            .await
            .expect("take"),
        "within the interval"
    );
    assert!(
        store
            .take_low_balance_notice("cartao-h", t(30) - day, t(30))
            .await
            .expect("take"),
        "a new crossing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cards_low_balance_notice_is_taken_once_per_crossing_and_interval_on_sqlite() {
    let sqlite = vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
        .await
        .expect("store");
    a_cards_low_balance_notice_is_taken_once_per_crossing_and_interval(std::sync::Arc::new(sqlite)).await;
}

#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cards_low_balance_notice_is_taken_once_per_crossing_and_interval_on_postgresql() {
    let pg = vt_store::testkit::PgFixture::start().await;
    a_cards_low_balance_notice_is_taken_once_per_crossing_and_interval(pg.store.clone()).await;
    pg.cleanup().await;
}

/// A template Meta refuses at send time as paused (132015) is stopped as its webhook would stop it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_refused_as_paused_stops_the_template() {
    let paused = json!({"error": {"code": 132015, "message": "Template is paused"}});
    let wa = whatsapp(vec![(400, vec![], paused), crate::whatsapp::sent()]).await;
    let quiet = "5511900000025";
    wa.served
        .chat
        .store
        .touch_contact(quiet, Utc::now() - Duration::hours(30))
        .await
        .expect("touch");
    opt_in(&wa, quiet).await;
    let first = wa
        .enqueue(quiet, "Saldo baixo", low_balance("7890", "R$ 1,00"))
        .await;
    wa.worker.pass().await;
    assert_eq!(wa.item(first).await.status, OutboxStatus::Failed);
    let states = wa.served.chat.store.template_states().await.expect("states");
    assert_eq!(
        (states[0].name.as_str(), states[0].status.as_deref()),
        ("saldo_baixo_v1", Some("PAUSED"))
    );
    // The next one is not even tried.
    let second = wa
        .enqueue(quiet, "Saldo baixo", low_balance("7890", "R$ 1,00"))
        .await;
    wa.worker.pass().await;
    assert!(
        wa.item(second)
            .await
            .last_error
            .unwrap_or_default()
            .contains("PAUSED")
    );
    assert_eq!(wa.graph.received().len(), 1, "one call reached Meta");
}

/// A Pix payment credited after the card holder's window closed: the receipt goes as the
/// `comprovante_recarga` template (they opted in), its parameters what the text says; the messages
/// that had no template were dead-lettered, never sent as free text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pix_receipt_after_the_window_closed_goes_as_the_comprovante_template() {
    let chat = crate::support::chat_harness_pix(crate::support::Pix::Provider).await;
    let wa = whatsapp_on(chat, vec![crate::whatsapp::sent(); 10]).await;
    let user = "5511900000047";
    opt_in(&wa, user).await;
    // They asked and confirmed a day ago (the messages reach us now, as Meta retries them).
    let ago = |h| Utc::now() - Duration::hours(h);
    let ask = text_at(user, "recarrega 20 no 2345678901 via pix", "wamid.R1", ago(26));
    assert_eq!(wa.deliver(&ask).await, 200);
    crate::support::pending_once(wa.served.chat.store.as_ref(), |items| !items.is_empty()).await;
    assert_eq!(wa.deliver(&text_at(user, "sim", "wamid.R2", ago(25))).await, 200);
    let items = crate::support::pending_once(wa.served.chat.store.as_ref(), |items| {
        items
            .iter()
            .any(|i| !i.payload["files"].is_null() && i.payload["files"][0].is_object())
    })
    .await;
    let txid = items
        .iter()
        .find_map(|i| i.payload["files"][0]["fileId"].as_str())
        .and_then(|id| id.strip_prefix(vt_domain::tools::QR_FILE))
        .expect("a code was shown")
        .to_owned();
    let paid = wa.served.chat.sim.pix().pay(&txid, false).expect("paid");
    let credited = wa
        .served
        .chat
        .service
        .payments()
        .settle(&txid)
        .await
        .expect("settle");
    assert_eq!(credited, vt_agent::testkit::Settled::Credited);
    for _ in 0..8 {
        wa.worker.pass().await;
    }

    let sends = wa.sends();
    assert_eq!(sends.len(), 1, "only the template reached Meta: {sends:?}");
    let template = &sends[0];
    assert_eq!(template["type"], "template", "{template}");
    assert_eq!(template["to"], user);
    assert_eq!(template["template"]["name"], "comprovante_recarga_v1");
    let parameters: BTreeMap<String, String> = template["template"]["components"][0]["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .map(|p| {
            let text = p["text"].as_str().unwrap_or_default();
            (
                p["parameter_name"].as_str().unwrap_or_default().to_owned(),
                text.to_owned(),
            )
        })
        .collect();
    assert_eq!(parameters["valor"], "R$ 20,00");
    assert_eq!(parameters["cartao_final"], "8901");
    assert!(parameters["novo_saldo"].starts_with("R$ "), "{parameters:?}");
    assert_eq!(parameters["identificador"], paid.end_to_end_id);
    assert!(!parameters["pago_em"].is_empty());
    let receipt = told_last(&wa, user).await;
    assert!(
        receipt.contains(&parameters["novo_saldo"]) && receipt.contains(&paid.end_to_end_id),
        "the template says what the conversation holds: {receipt}"
    );
    let dead = wa
        .served
        .chat
        .store
        .outbox_items(OutboxStatus::Failed, 100)
        .await
        .expect("read");
    assert!(
        !dead.is_empty(),
        "the replies without a template were dead-lettered"
    );
}

/// The last thing said in `user`'s conversation.
pub(crate) async fn told_last(wa: &Wa, user: &str) -> String {
    let conversation = vt_agent::testkit::whatsapp_conversation_id(PHONE, user);
    let messages = wa
        .served
        .chat
        .store
        .messages(&conversation)
        .await
        .expect("messages");
    messages
        .into_iter()
        .rev()
        .find_map(|m| m.message.text().map(str::to_owned))
        .expect("a message")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flows_paid_notice_is_costed_under_its_run() {
    use vt_agent::testkit::NoticesConfig;
    let store: Arc<dyn vt_store::Store> = Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    );
    let h = crate::support::chat_harness_notifying(store.clone(), PHONE, NoticesConfig::default()).await;
    let user = "5511912345678";
    store
        .record_consent(&vt_store::concerns::ConsentChange {
            wa_id: user.into(),
            opted_in: true,
            source: "importacao".into(),
            who: "teste".into(),
            at: "2026-11-01T00:00:00Z".parse().expect("t"),
        })
        .await
        .expect("consent");
    let input =
        format!(r#"{{"cartao": "1111111111", "destinatario": {{"tipo": "whatsapp", "id": "{user}"}}}}"#);
    let ran = h
        .service
        .flows()
        .run_flow(input.as_str(), Default::default())
        .await
        .expect("flow");
    let run = ran.output.execucao_id.clone();
    // The user never wrote: the notice goes as the utility template, at its price, under the run.
    let graph = FakeServer::start(vec![crate::whatsapp::sent()]).await;
    let sender = Sender::new(&config(&graph.url))
        .expect("on")
        .with_window(store.clone(), templates())
        .with_costs(store.clone(), prices(), vt_engine::conversation::DEFAULT_TENANT);
    let worker = vt_agent::Worker::new(store.clone(), vt_engine::retry::RetryPolicy::new(5, 1))
        .with_sender(Arc::new(sender));
    let pass = worker.pass().await;
    let items = store
        .outbox_items(OutboxStatus::Failed, 10)
        .await
        .expect("outbox");
    assert_eq!(pass.sent, 1, "{pass:?} {items:?}");
    assert_eq!(graph.received()[0].body["type"], "template");
    let costs = store
        .message_costs_since(chrono::DateTime::UNIX_EPOCH)
        .await
        .expect("costs");
    assert_eq!(costs.len(), 1);
    assert_eq!(costs[0].execucao_id.as_deref(), Some(run.as_str()));
    // US$ 0,0068 at R$ 5,00.
    assert_eq!(costs[0].custo_micro_brl, Some(34_000));
    let runs = store.flow_runs(10).await.expect("runs");
    let report = vt_agent::testkit::runs_report(&runs, (&[], &costs), chrono::Utc::now());
    let line = report.lines().find(|l| l.contains(&run)).expect("the run's line");
    assert!(line.contains("R$ 0,034"), "{report}");
}
