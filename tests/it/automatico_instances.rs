//! Automatic recharges across instances and time: a cycle charged once by two instances (SQLite and
//! PostgreSQL), a debit whose credit a stop cut, notices over HTTP and the console's list, new terms, the
//! quiet hours, a cancellation on the debit's day.

use crate::automatico::*;
use crate::support::{chat_harness_automatic, said};
use chrono::{DateTime, Duration, Utc};
use std::sync::Arc;
use vt_domain::pix::automatico::RecStatus;
use vt_store::Store;
use vt_store::records::RecurrenceStatus;
use vt_store::records::RecurringChargeStatus;
use vt_store::testkit::PgFixture;

/// Two instances (two services on one store, one provider) pass at once through a month: one charge
/// per cycle and card, one recharge, one announcement and one receipt.
pub(crate) async fn two_instances_charge_once(first: Arc<dyn Store>, second: Arc<dyn Store>) {
    let a = chat_harness_automatic(first, None).await;
    let b = chat_harness_automatic(second, Some(a.sim.clone())).await;
    let conv = "c-auto-duas";
    let rec = authorised(
        &a,
        conv,
        &format!("recarrega 50 no {CARD} quando o saldo ficar abaixo de 20"),
    )
    .await;
    a.sim.ride(CARD, reais(40));
    for _ in 0..6 {
        let now: DateTime<Utc> = a.clock.now() + Duration::days(1);
        a.clock.set(now);
        b.clock.set(now);
        let (x, y) = tokio::join!(a.service.automatic().pass(), b.service.automatic().pass());
        let _ = (x, y);
    }
    let charges = a.store.charges_of_recurrence(&rec.id).await.expect("charges");
    assert_eq!(charges.len(), 1, "{charges:?}");
    assert_eq!(charges[0].status, RecurringChargeStatus::Creditada);
    assert_eq!(a.sim.charges(CARD), 1);
    let texts = said(&a, conv).await;
    assert_eq!(
        texts.iter().filter(|t| t.contains("será debitada")).count(),
        1,
        "{texts:?}"
    );
    assert_eq!(receipts(&a, conv).await.len(), 1, "{texts:?}");
    // The operator's listing, one query on either backend: the credited one counted, none due.
    let listed = a
        .store
        .recurrence_listing(Some(&rec.tenant_id), 10)
        .await
        .expect("listing");
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].credited, listed[0].next_debit.as_deref()), (1, None));
    assert!(
        a.store
            .recurrence_listing(Some("outro"), 10)
            .await
            .expect("listing")
            .is_empty()
    );
}

#[tokio::test]
async fn two_instances_on_sqlite_charge_a_cycle_once() {
    let store = sqlite().await;
    two_instances_charge_once(store.clone(), store).await;
}

#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test]
async fn two_instances_on_postgres_charge_a_cycle_once() {
    let pg = PgFixture::start().await;
    two_instances_charge_once(pg.store.clone(), pg.second.clone()).await;
    pg.cleanup().await;
}

#[tokio::test]
async fn a_debit_whose_credit_a_stop_cut_is_credited_once_by_the_next_pass() {
    let h = harness().await;
    let conv = "c-auto-parada";
    let rec = authorised(
        &h,
        conv,
        &format!("recarrega 50 no {CARD} quando o saldo ficar abaixo de 20"),
    )
    .await;
    low_then_due(&h).await;
    // What a process killed between the debit's claim and the credit leaves: the charge claimed
    // (`paga`), the recharge sent under its key and charged, no receipt.
    let charge = charges_of(&h, &rec).await.remove(0);
    let read = h
        .sim
        .pix()
        .recurring_charges(rec.id_rec.as_deref().expect("idRec"))
        .remove(0);
    let (e2e, _) = read.paga().expect("debited on its date");
    assert!(
        h.store
            .claim_recurring_payment(&charge.txid, e2e, h.clock.now())
            .await
            .expect("claim")
    );
    let input = vt_domain::vt::FlowInput::parse(&format!(
        r#"{{"cartao": "{CARD}", "recarga": {{"valor": 50, "idempotency_key": "pixauto-{e2e}", "meio_pagamento": {{"tipo": "pix", "token": "{e2e}"}}}}}}"#
    ))
    .expect("input");
    h.service
        .flows()
        .run_flow(input, Default::default())
        .await
        .expect("sent");
    assert_eq!(h.sim.charges(CARD), 1);
    // Too soon to resume (the first process may still be waiting for its answer): nothing.
    assert_eq!(h.service.automatic().pass().await.credited, 0);
    h.clock.set(h.clock.now() + Duration::minutes(5));
    assert_eq!(h.service.automatic().pass().await.credited, 1);
    assert_eq!(h.service.automatic().pass().await.credited, 0);
    assert_eq!(h.sim.charges(CARD), 1, "the resumed credit was a replay");
    assert_eq!(receipts(&h, conv).await.len(), 1);
}

/// Over HTTP: the provider's notices on the Pix channel's routes (a body that is not one refused, a
/// notice ahead of the bank only a read), the console's page for support agents, `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notices_over_http_are_read_back_and_the_console_lists_the_recurrences() {
    use crate::console::{ADMIN, SECRET, SUPPORT, session};
    let h = Arc::new(harness().await);
    let wiring = vt_agent::Wiring {
        service: h.service.clone(),
        agent: "vt".into(),
        tenant: vt_engine::conversation::DEFAULT_TENANT.into(),
    };
    let channel = vt_agent::testkit::pix_channel(&wiring, None, std::time::Duration::from_secs(30));
    let paths: Vec<&str> = channel.routes.iter().map(|(p, _)| *p).collect();
    assert_eq!(
        paths,
        [
            "/channels/pix/webhook/pix",
            "/channels/pix/webhook/rec",
            "/channels/pix/webhook/cobr"
        ]
    );
    let http = vt_agent::HttpConfig {
        api_keys: [
            ("suporte", SUPPORT, vt_agent::Role::Support),
            ("operacao", ADMIN, vt_agent::Role::Admin),
        ]
        .map(|(name, key, role)| vt_agent::ApiKeyConfig {
            name: name.into(),
            sha256: vt_agent::key_hash(key),
            tenant: vt_engine::conversation::DEFAULT_TENANT.into(),
            role,
        })
        .to_vec(),
        ..Default::default()
    };
    let state = vt_agent::AppState::new(h.service.clone(), "vt", http)
        .with_console(&vt_agent::testkit::ConsoleConfig {
            secret: Some(SECRET.into()),
            ..Default::default()
        })
        .with_channel(&channel);
    let served = crate::support::serve_state(h.clone(), state).await;
    let post = |path: &str, body: String| {
        served
            .client
            .post(format!("{}/channels/pix/webhook/{path}", served.url))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let conv = "c-auto-http";
    h.say(
        conv,
        &format!("recarrega 50 no {CARD} quando o saldo ficar abaixo de 20"),
    )
    .await;
    let rec = only_recurrence(&h, conv).await;
    let id_rec = rec.id_rec.clone().expect("idRec");
    let notice = format!(r#"{{"recs": [{{"idRec": "{id_rec}", "status": "APROVADA", "atualizacao": []}}]}}"#);
    assert_eq!(
        post("rec", "não é json".into()).await.expect("post").status(),
        400
    );
    // Ahead of the bank (forged): read back, still waiting for the payer.
    assert_eq!(post("rec", notice.clone()).await.expect("post").status(), 200);
    h.service.stopped().await;
    assert_eq!(only_recurrence(&h, conv).await.status, RecurrenceStatus::Criada);
    assert!(h.sim.pix().authorise(&id_rec));
    assert_eq!(post("rec", notice).await.expect("post").status(), 200);
    for _ in 0..100 {
        if only_recurrence(&h, conv).await.status == RecurrenceStatus::Aprovada {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(only_recurrence(&h, conv).await.status, RecurrenceStatus::Aprovada);
    low_then_due(&h).await;
    let charge = charges_of(&h, &rec).await.remove(0);
    let cobr = format!(
        r#"{{"cobsr": [{{"idRec": "{id_rec}", "txid": "{}", "status": "CONCLUIDA", "atualizacao": []}}]}}"#,
        charge.txid
    );
    assert_eq!(post("cobr", cobr).await.expect("post").status(), 200);
    for _ in 0..100 {
        if h.sim.charges(CARD) == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    h.service.stopped().await;
    assert_eq!(h.sim.charges(CARD), 1);

    let page = served
        .client
        .get(format!("{}/console/recorrencias", served.url))
        .header("cookie", session("suporte", 600, SECRET))
        .send()
        .await
        .expect("page");
    assert_eq!(page.status(), 200);
    let html = page.text().await.expect("html");
    assert!(html.contains("****7890") && !html.contains(CARD), "{html}");
    assert!(
        html.contains("R$ 50,00 sempre que o saldo ficar abaixo de R$ 20,00"),
        "amounts in reais: {html}"
    );
    assert!(
        html.contains("<td>aprovada</td>") && html.contains("recarga feita"),
        "{html}"
    );
    let metrics = served
        .client
        .get(format!("{}/metrics", served.url))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("pix_recurrences{status=\"aprovada\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("pix_recurring_charges{status=\"creditada\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn new_terms_are_a_new_authorisation_and_the_old_one_ends_when_it_is_approved() {
    let h = harness().await;
    let conv = "c-auto-novos-termos";
    let old = authorised(
        &h,
        conv,
        &format!("recarrega 50 no {CARD} quando o saldo ficar abaixo de 20"),
    )
    .await;
    h.say(conv, "recarrega 80 todo dia 10").await;
    let row = h.store.conversation(conv).await.expect("read").expect("conv");
    let mine = h
        .store
        .user_recurrences(&row.tenant_id, &row.user_id)
        .await
        .expect("recurrences");
    let new = mine
        .iter()
        .find(|r| r.id != old.id)
        .expect("a new authorisation")
        .clone();
    assert_eq!(
        (new.kind, new.amount),
        (vt_store::records::RecurrenceKind::Dia(10), reais(80))
    );
    // Until the bank approves the new one, the old one still stands.
    assert_eq!(
        h.store
            .recurrence(&old.id)
            .await
            .expect("read")
            .expect("old")
            .status,
        RecurrenceStatus::Aprovada
    );
    let new_rec = new.id_rec.clone().expect("idRec");
    assert!(h.sim.pix().authorise(&new_rec));
    assert!(
        h.service
            .automatic()
            .rec_notice(&new_rec)
            .await
            .expect("read back")
    );
    assert_eq!(
        h.store
            .recurrence(&old.id)
            .await
            .expect("read")
            .expect("old")
            .status,
        RecurrenceStatus::Cancelada
    );
    let old_at_provider = h
        .sim
        .pix()
        .recurrence(old.id_rec.as_deref().expect("idRec"))
        .expect("old");
    assert_eq!(
        old_at_provider.status,
        RecStatus::Cancelada,
        "cancelled at the provider too"
    );
    let listed = h.say(conv, "minhas recargas automáticas").await.reply_text();
    assert!(
        listed.contains("R$ 80,00 todo dia 10") && !listed.contains("abaixo de"),
        "{listed}"
    );
}

#[tokio::test]
async fn a_notice_due_in_the_quiet_hours_waits_for_their_end() {
    let h = harness().await;
    let conv = "c-auto-quieto";
    let on_whatsapp = |text: &str| vt_agent::Inbound {
        agent_id: "vt".into(),
        conversation_id: Some(conv.into()),
        user: vt_engine::Participant {
            user_id: "5511999990000".into(),
            user_login: "5511999990000".into(),
            channel: "whatsapp".into(),
        },
        text: text.into(),
        ..Default::default()
    };
    h.service
        .messages()
        .handle(on_whatsapp(&format!(
            "recarrega 50 no {CARD} quando o saldo ficar abaixo de 20"
        )))
        .await
        .expect("asked");
    let rec = only_recurrence(&h, conv).await;
    let id_rec = rec.id_rec.clone().expect("idRec");
    assert!(h.sim.pix().authorise(&id_rec));
    assert!(
        h.service
            .automatic()
            .rec_notice(&id_rec)
            .await
            .expect("read back")
    );
    h.sim.ride(CARD, reais(40));
    // 22:30 in São Paulo: the reading is below the threshold and the charge is scheduled, but its
    // announcement waits for 08:00.
    h.clock.set("2026-11-23T01:30:00Z".parse().expect("time"));
    assert_eq!(h.service.automatic().pass().await.scheduled, 1);
    let pending = h
        .store
        .outbox_items(vt_store::records::OutboxStatus::Pending, 100)
        .await
        .expect("outbox");
    let announced = pending
        .iter()
        .find(|i| {
            i.payload["text"]
                .as_str()
                .is_some_and(|t| t.contains("será debitada"))
        })
        .expect("the announcement is queued");
    let release: DateTime<Utc> = "2026-11-23T11:00:00Z".parse().expect("time");
    assert_eq!(announced.next_attempt_at, release, "08:00 in São Paulo");
    assert_eq!(
        announced.payload["template"]["purpose"], "recarga_automatica_agendada",
        "outside the window, its template"
    );
}

#[tokio::test]
async fn cancelled_on_the_debits_day_the_debit_goes_on_and_is_credited() {
    let h = harness().await;
    let conv = "c-auto-no-dia";
    let rec = authorised(
        &h,
        conv,
        &format!("recarrega 50 no {CARD} quando o saldo ficar abaixo de 20"),
    )
    .await;
    low_then_due(&h).await;
    // Too late at the bank: the charge is not marked cancelled, and the card holder is told.
    let reply = h.say(conv, "cancelar recarga automática").await.reply_text();
    assert!(reply.contains("já estava em andamento no banco"), "{reply}");
    assert_eq!(
        only_recurrence(&h, conv).await.status,
        RecurrenceStatus::Cancelada
    );
    assert_eq!(
        charges_of(&h, &rec).await[0].status,
        RecurringChargeStatus::Agendada
    );
    // The debit happens: it is credited, once.
    h.service.automatic().pass().await;
    h.service.automatic().pass().await;
    assert_eq!(
        charges_of(&h, &rec).await[0].status,
        RecurringChargeStatus::Creditada
    );
    assert_eq!(h.sim.charges(CARD), 1);
    assert_eq!(receipts(&h, conv).await.len(), 1);
}
