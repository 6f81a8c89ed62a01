//! The money path: the outbox, Pix payments claimed once, confirmations consumed once, recharge attempts and follow-ups.

use super::*;

pub(crate) async fn outbox_claim_ack_retry(store: Arc<dyn Store>) {
    let now = t("2026-11-22T10:00:00Z");
    let lease = chrono::Duration::seconds(30);
    let item = |n: i32, max: i32| NewOutboxItem {
        kind: "channel_reply".into(),
        destination: format!("canal-{n}"),
        payload: json!({"texto": n}),
        max_attempts: max,
        next_attempt_at: now,
        conversation_id: None,
        status: OutboxStatus::Pending,
    };
    let a = store.enqueue(&item(1, 5), now).await.expect("enqueue");
    let b = store.enqueue(&item(2, 2), now).await.expect("enqueue");
    let c = store.enqueue(&item(3, 5), now).await.expect("enqueue");
    let first = store.claim(2, now, lease).await.expect("claim");
    assert_eq!(first.iter().map(|i| i.id).collect::<Vec<_>>(), vec![a, b]);
    assert!(
        first
            .iter()
            .all(|i| i.status == OutboxStatus::InFlight && i.attempts == 1)
    );
    assert_eq!(
        store
            .claim(10, now, lease)
            .await
            .expect("claim")
            .iter()
            .map(|i| i.id)
            .collect::<Vec<_>>(),
        vec![c]
    );
    assert!(
        store.claim(10, now, lease).await.expect("claim").is_empty(),
        "everything is leased"
    );

    store.ack(a).await.expect("ack");
    assert_eq!(
        store.outbox_item(a).await.expect("get").map(|i| i.status),
        Some(OutboxStatus::Done)
    );
    let retry_at = now + chrono::Duration::seconds(5);
    assert_eq!(
        store
            .retry_later(b, "503 do canal", retry_at)
            .await
            .expect("retry"),
        OutboxStatus::Pending
    );
    assert!(
        store.claim(10, now, lease).await.expect("claim").is_empty(),
        "not due yet"
    );
    let again = store.claim(10, retry_at, lease).await.expect("claim");
    assert_eq!(
        again.iter().map(|i| (i.id, i.attempts)).collect::<Vec<_>>(),
        vec![(b, 2)]
    );
    assert_eq!(again[0].last_error.as_deref(), Some("503 do canal"));
    assert_eq!(
        store
            .retry_later(b, "503 de novo", retry_at)
            .await
            .expect("retry"),
        OutboxStatus::Failed,
        "attempts spent"
    );
    assert_eq!(
        store
            .outbox_items(OutboxStatus::Failed, 10)
            .await
            .expect("dead letters")
            .iter()
            .map(|i| (i.id, i.last_error.clone()))
            .collect::<Vec<_>>(),
        vec![(b, Some("503 de novo".to_owned()))]
    );
    // An item whose lease ran out without an ack is claimed again.
    let reclaimed = store
        .claim(10, now + chrono::Duration::seconds(31), lease)
        .await
        .expect("claim");
    assert_eq!(
        reclaimed.iter().map(|i| (i.id, i.attempts)).collect::<Vec<_>>(),
        vec![(c, 2)]
    );
    assert!(
        store.requeue(b, now).await.expect("requeue"),
        "a dead letter is retried"
    );
    assert!(
        !store.requeue(a, now).await.expect("requeue"),
        "a delivered item is not"
    );
    let b_again = store.outbox_item(b).await.expect("read").expect("item");
    assert_eq!((b_again.status, b_again.attempts), (OutboxStatus::Pending, 0));
}

pub(crate) async fn a_conversations_items_go_out_in_order_and_accepting_twice_is_once(store: Arc<dyn Store>) {
    let now = t("2026-11-22T12:00:00Z");
    let lease = chrono::Duration::seconds(30);
    let item = |conv: &str, n: i32| NewOutboxItem {
        kind: "reply".into(),
        destination: "whatsapp".into(),
        payload: json!({"n": n}),
        max_attempts: 5,
        next_attempt_at: now,
        conversation_id: Some(conv.into()),
        status: OutboxStatus::Pending,
    };
    let a1 = store.enqueue(&item("A", 1), now).await.expect("enqueue");
    let a2 = store.enqueue(&item("A", 2), now).await.expect("enqueue");
    let b1 = store.enqueue(&item("B", 1), now).await.expect("enqueue");
    let first = store.claim(10, now, lease).await.expect("claim");
    assert_eq!(
        first.iter().map(|i| i.id).collect::<Vec<_>>(),
        vec![a1, b1],
        "A's second reply waits for its first"
    );
    store.retry_later(a1, "429", now).await.expect("retry");
    let again = store.claim(10, now, lease).await.expect("claim");
    assert_eq!(
        again.iter().map(|i| i.id).collect::<Vec<_>>(),
        vec![a1],
        "still in order"
    );
    store.ack(a1).await.expect("ack");
    let next = store.claim(10, now, lease).await.expect("claim");
    assert_eq!(next.iter().map(|i| i.id).collect::<Vec<_>>(), vec![a2]);

    let conv = conversation("c-accept");
    let oi = ChatMessage::user("oi");
    let accepting = |new_conversation, channel_message_id, contact_seen| vt_store::records::Accepting {
        conversation: &conv,
        new_conversation,
        channel_message_id,
        message: &oi,
        contact_seen,
        media: None,
        now,
    };
    let first = store
        .accept_message(accepting(true, Some("wamid.1"), None))
        .await
        .expect("accept");
    let again = store
        .accept_message(accepting(false, Some("wamid.1"), None))
        .await
        .expect("accept again");
    let other = store
        .accept_message(accepting(false, None, None))
        .await
        .expect("no id");
    assert!(first.is_some() && again.is_none() && other.is_some());
    assert_eq!(store.messages("c-accept").await.expect("messages").len(), 2);
    // A reply held for a closed window (this conversation's, and another's).
    let held = |conversation: &str| NewOutboxItem {
        kind: "reply".into(),
        destination: "whatsapp".into(),
        payload: json!({"texto": "esperando a janela"}),
        max_attempts: 3,
        next_attempt_at: now,
        conversation_id: Some(conversation.into()),
        status: OutboxStatus::Pending,
    };
    let mine = store.enqueue(&held("c-accept"), now).await.expect("enqueue");
    let theirs = store.enqueue(&held("c-outra"), now).await.expect("enqueue");
    for id in [mine, theirs] {
        store.hold(id, "fora da janela").await.expect("hold");
    }
    // A contact's last message is written with the message, and never moves back; the replies held in
    // its conversation go out in the same transaction, no one else's.
    let wrote = now - chrono::Duration::minutes(3);
    let seen = store
        .accept_message(accepting(false, Some("wamid.2"), Some(("5511999990000", wrote))))
        .await
        .expect("accept with the contact");
    assert!(seen.is_some());
    let status = |id| {
        let store = store.clone();
        async move { store.outbox_item(id).await.expect("read").expect("there").status }
    };
    assert_eq!(
        status(mine).await,
        OutboxStatus::Pending,
        "released with the message"
    );
    assert_eq!(
        status(theirs).await,
        OutboxStatus::Held,
        "another conversation's waits"
    );
    assert_eq!(
        store.last_inbound("5511999990000").await.expect("read"),
        Some(wrote)
    );
    store
        .accept_message(accepting(
            false,
            Some("wamid.3"),
            Some(("5511999990000", wrote - chrono::Duration::hours(1))),
        ))
        .await
        .expect("an older message");
    assert_eq!(
        store.last_inbound("5511999990000").await.expect("read"),
        Some(wrote)
    );
    assert!(store.conversation("c-accept").await.expect("read").is_some());
}

pub(crate) async fn concurrent_claims_never_share_an_item(store: Arc<dyn Store>) {
    let now = t("2026-11-22T10:00:00Z");
    let mut ids = Vec::new();
    for n in 0..40 {
        let item = NewOutboxItem {
            kind: "notification".into(),
            destination: "d".into(),
            payload: json!({"n": n}),
            max_attempts: 3,
            next_attempt_at: now,
            conversation_id: None,
            status: OutboxStatus::Pending,
        };
        ids.push(store.enqueue(&item, now).await.expect("enqueue"));
    }
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let got = store
                    .claim(3, now, chrono::Duration::seconds(60))
                    .await
                    .expect("claim");
                if got.is_empty() {
                    break mine;
                }
                mine.extend(got.into_iter().map(|i| i.id));
            }
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("join"));
    }
    all.sort_unstable();
    let mut expected = ids;
    expected.sort_unstable();
    assert_eq!(all, expected, "every item claimed exactly once");
}

/// A Pix charge is put on record once per txid; its payment is claimed once among racing callers,
/// and a recharge holds at most one paid code: a second code paid too is told apart, to be refunded.
pub(crate) async fn a_pix_payment_is_claimed_once_and_one_code_per_recharge_is_paid(store: Arc<dyn Store>) {
    use vt_store::records::ChargeStatus;
    use vt_store::records::PaymentClaim;
    let now = t("2026-11-24T12:00:00Z");
    let first = pix_charge("k-pix-1", 0, now);
    let stored = store.open_charge(&first).await.expect("open");
    assert_eq!(stored, first, "what was stored, read back (the request unsealed)");
    // A retry finds the charge already there, as it was.
    let again = vt_store::records::PixCharge {
        meio: vt_store::records::ChargeMeans::Pix,
        copia_e_cola: "another".into(),
        ..first.clone()
    };
    assert_eq!(store.open_charge(&again).await.expect("again"), first);
    let second = store
        .open_charge(&pix_charge("k-pix-1", 1, now))
        .await
        .expect("second code");
    assert_eq!(
        store.recharge_charges("k-pix-1").await.expect("codes").len(),
        2,
        "two codes of one recharge"
    );
    let of_conversation = store
        .conversation_charges("conv-pix")
        .await
        .expect("of the conversation");
    assert_eq!(
        of_conversation.iter().map(|c| c.n).collect::<Vec<_>>(),
        [0, 1],
        "both codes, of this conversation, in order"
    );
    assert!(
        store
            .conversation_charges("outra-conversa")
            .await
            .expect("of another")
            .is_empty()
    );

    // Ten callers report the same payment at once: one claims it.
    let claims = (0..10).map(|_| {
        let store = store.clone();
        let txid = first.txid.clone();
        tokio::spawn(async move {
            store
                .claim_payment(&txid, "E0000000020261124120012345678901", now)
                .await
        })
    });
    let claims: Vec<PaymentClaim> = futures::future::join_all(claims)
        .await
        .into_iter()
        .map(|r| r.expect("task").expect("claim"))
        .collect();
    assert_eq!(
        claims.iter().filter(|c| **c == PaymentClaim::First).count(),
        1,
        "{claims:?}"
    );
    assert!(
        claims
            .iter()
            .all(|c| matches!(c, PaymentClaim::First | PaymentClaim::Again)),
        "{claims:?}"
    );
    let paid = store.pix_charge(&first.txid).await.expect("read").expect("there");
    assert_eq!(paid.status, ChargeStatus::Paga);
    assert_eq!(
        paid.end_to_end_id.as_deref(),
        Some("E0000000020261124120012345678901")
    );
    assert_eq!(paid.paid_at, Some(now));
    assert_eq!(
        store
            .payment_seconds(now - chrono::Duration::hours(1))
            .await
            .expect("times"),
        [0],
        "shown and paid at once"
    );
    assert!(
        store
            .payment_seconds(now + chrono::Duration::hours(1))
            .await
            .expect("times")
            .is_empty()
    );

    // The recharge's other code paid as well (a race at expiry): it cannot be claimed for the recharge.
    let other = store
        .claim_payment(&second.txid, "E0000000020261124120112345678902", now)
        .await
        .expect("claim");
    assert_eq!(other, PaymentClaim::OtherCodePaid);
    let second_read = store
        .pix_charge(&second.txid)
        .await
        .expect("read")
        .expect("there");
    assert_eq!(
        (second_read.status, second_read.end_to_end_id),
        (ChargeStatus::Ativa, None)
    );
    // Its payment goes back: the refund on record, read back while the provider has not settled it.
    let returned = "E0000000020261124120112345678902";
    store
        .record_refund(&second.txid, returned, vt_store::records::REFUND_IN_PROGRESS)
        .await
        .expect("refund");
    let refunding = store.refunds_in_progress(10).await.expect("in progress");
    assert_eq!(
        refunding.iter().map(|c| c.txid.as_str()).collect::<Vec<_>>(),
        [second.txid.as_str()]
    );
    assert_eq!(
        refunding[0].refund,
        Some(vt_store::records::PixRefund {
            end_to_end_id: returned.into(),
            status: "EM_PROCESSAMENTO".into()
        })
    );
    store
        .record_refund(&second.txid, returned, "DEVOLVIDO")
        .await
        .expect("settled");
    assert!(store.refunds_in_progress(10).await.expect("none").is_empty());
    let settled = store
        .pix_charge(&second.txid)
        .await
        .expect("read")
        .expect("there");
    assert_eq!(settled.refund.map(|r| r.status).as_deref(), Some("DEVOLVIDO"));
    // Another payment for a charge already paid, and a charge nobody issued.
    assert_eq!(
        store
            .claim_payment(&first.txid, "E0000000020261124120212345678903", now)
            .await
            .expect("claim"),
        PaymentClaim::OtherPayment
    );
    assert_eq!(
        store
            .claim_payment("vtdesconhecido0000000000000", "E1", now)
            .await
            .expect("claim"),
        PaymentClaim::Unknown
    );

    // A status moves from the one it is in, once.
    assert!(
        store
            .settle_charge(&first.txid, ChargeStatus::Paga, ChargeStatus::Creditada)
            .await
            .expect("settle")
    );
    assert!(
        !store
            .settle_charge(&first.txid, ChargeStatus::Paga, ChargeStatus::Creditada)
            .await
            .expect("again")
    );
    assert!(
        store
            .settle_charge(&second.txid, ChargeStatus::Ativa, ChargeStatus::Expirada)
            .await
            .expect("expire")
    );
    let active = store
        .open_charge(&pix_charge("k-pix-2", 0, now - chrono::Duration::minutes(5)))
        .await
        .expect("open");
    let listed = store.charges_in(ChargeStatus::Ativa, 10).await.expect("list");
    assert_eq!(
        listed.iter().map(|c| c.txid.as_str()).collect::<Vec<_>>(),
        vec![active.txid.as_str()]
    );
    assert_eq!(
        store
            .charges_in(ChargeStatus::Creditada, 10)
            .await
            .expect("list")
            .len(),
        1
    );
}

pub(crate) async fn confirmations_are_consumed_once(store: Arc<dyn Store>) {
    let attempt = |key: &str| RechargeAttempt {
        idempotency_key: key.into(),
        fingerprint: "f-c".into(),
        scope: "t|u".into(),
        origin: "conv-0".into(),
        execucao_id: "exec-c".into(),
        cartao_mascarado: "****7890".into(),
        valor: rust_decimal::Decimal::new(5000, 2),
        moeda: "BRL".into(),
    };
    let tries = (0..10).map(|i| {
        let store = store.clone();
        let attempt = attempt(&format!("k-c{i}"));
        tokio::spawn(async move {
            let consumer = format!("msg-{i}");
            let c = Confirmation {
                pending_id: "p-1",
                origin: "conv-0",
                consumer: &consumer,
            };
            let got = store
                .consume_confirmation(c, Some(&attempt), Utc::now())
                .await
                .expect("consume");
            (consumer, got)
        })
    });
    let results: Vec<(String, Consumption)> = futures::future::join_all(tries)
        .await
        .into_iter()
        .map(|r| r.expect("join"))
        .collect();
    let winners: Vec<&String> = results
        .iter()
        .filter(|(_, got)| *got == Consumption::Now)
        .map(|(who, _)| who)
        .collect();
    assert_eq!(winners.len(), 1, "exactly one consumer: {results:?}");
    assert!(results.iter().all(|(_, got)| *got != Consumption::Resumed));
    // The winner's attempt went on record with the consumption, not yet sent; the others' did not.
    let listed = store.recharge_attempts(20).await.expect("list");
    assert_eq!(listed.len(), 1, "{listed:?}");
    let winner = winners[0].trim_start_matches("msg-");
    assert_eq!(listed[0].attempt.idempotency_key, format!("k-c{winner}"));
    assert_eq!((listed[0].status.as_str(), listed[0].sends), ("enviando", 0));
    // The same message again (its process died before its turn was stored) carries on.
    let again = Confirmation {
        pending_id: "p-1",
        origin: "conv-0",
        consumer: winners[0],
    };
    assert_eq!(
        store
            .consume_confirmation(again, None, Utc::now())
            .await
            .expect("again"),
        Consumption::Resumed
    );
    assert_eq!(
        store.confirmation_consumer("p-1").await.expect("read").as_deref(),
        Some(winners[0].as_str())
    );
    assert_eq!(store.confirmation_consumer("p-2").await.expect("read"), None);
    let other = Confirmation {
        pending_id: "p-2",
        origin: "c",
        consumer: "m",
    };
    assert_eq!(
        store
            .consume_confirmation(other, None, Utc::now())
            .await
            .expect("other"),
        Consumption::Now
    );
}

pub(crate) async fn recharge_attempts_are_on_record_before_they_are_sent(store: Arc<dyn Store>) {
    let attempt = RechargeAttempt {
        idempotency_key: "k-1".into(),
        fingerprint: "f-1".into(),
        scope: "t|u".into(),
        origin: "conv-1".into(),
        execucao_id: "exec-1".into(),
        cartao_mascarado: "****7890".into(),
        valor: rust_decimal::Decimal::new(5000, 2),
        moeda: "BRL".into(),
    };
    let now = t("2026-11-22T12:00:00Z");
    store.begin_recharge(&attempt, None, now).await.expect("begin");
    assert_eq!(
        store
            .unresolved_recharge("t|u", "f-1")
            .await
            .expect("read")
            .as_deref(),
        Some("k-1"),
        "sent, no answer: unknown outcome"
    );
    assert_eq!(
        store.unresolved_recharge("t|v", "f-1").await.expect("read"),
        None,
        "another user's"
    );
    store
        .resolve_recharge("k-1", vt_domain::journal::AttemptStatus::Pendente, now)
        .await
        .expect("resolve");
    assert!(
        store
            .unresolved_recharge("t|u", "f-1")
            .await
            .expect("read")
            .is_some()
    );
    store
        .begin_recharge(&attempt, None, now)
        .await
        .expect("sent again");
    store
        .resolve_recharge("k-1", vt_domain::journal::AttemptStatus::Aprovada, now)
        .await
        .expect("resolve");
    assert_eq!(store.unresolved_recharge("t|u", "f-1").await.expect("read"), None);
    let listed = store.recharge_attempts(10).await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].attempt, attempt);
    assert_eq!((listed[0].status.as_str(), listed[0].sends), ("aprovada", 2));
}

pub(crate) async fn a_recharge_follow_up_is_claimed_once_and_settled_with_its_request_dropped(
    store: Arc<dyn Store>,
) {
    use vt_store::followup::Checked;
    use vt_store::followup::RecargasConfig;
    let attempt = |key: &str| RechargeAttempt {
        idempotency_key: key.into(),
        fingerprint: format!("f-{key}"),
        scope: "t|u".into(),
        origin: "conv-1".into(),
        execucao_id: "exec-1".into(),
        cartao_mascarado: "****6666".into(),
        valor: rust_decimal::Decimal::new(5000, 2),
        moeda: "BRL".into(),
    };
    let request = |key: &str| vt_domain::journal::RechargeRequest {
        body: json!({"cartao": "6666666666", "valor": 50.0, "meio_pagamento": {"tipo": "pix", "token": "tok_segredo_123"}}),
        headers: [("x-idempotency-key".to_owned(), key.to_owned())].into(),
        timeout_ms: 12_000,
    };
    let config = RecargasConfig::default();
    let sent = t("2026-11-22T12:00:00Z");
    for key in ["k-a", "k-b"] {
        let follow_up = config.follow_up(request(key), sent);
        store
            .begin_recharge(&attempt(key), Some(&follow_up), sent)
            .await
            .expect("begin");
    }
    // A second send of the same key (a follow-up's) keeps the first timing.
    let later = config.follow_up(request("k-a"), t("2026-11-22T12:30:00Z"));
    store
        .begin_recharge(&attempt("k-a"), Some(&later), sent)
        .await
        .expect("again");
    let lease = |at: chrono::DateTime<Utc>| at + chrono::Duration::minutes(2);
    let early = t("2026-11-22T12:00:30Z");
    assert!(
        store
            .claim_followups(early, lease(early), 10)
            .await
            .expect("claim")
            .is_empty(),
        "the first check is a minute after the send"
    );
    let due = t("2026-11-22T12:01:00Z");
    let (one, two) = tokio::join!(
        store.claim_followups(due, lease(due), 1),
        store.claim_followups(due, lease(due), 10)
    );
    let mut keys: Vec<String> = one
        .expect("claim")
        .into_iter()
        .chain(two.expect("claim"))
        .map(|f| {
            assert_eq!(
                f.request,
                request(&f.attempt.attempt.idempotency_key),
                "the request as sent"
            );
            assert_eq!(f.deadline_at, t("2026-11-22T13:00:00Z"));
            f.attempt.attempt.idempotency_key
        })
        .collect();
    keys.sort();
    assert_eq!(keys, ["k-a", "k-b"], "each claimed once");
    assert!(
        store
            .claim_followups(due, lease(due), 10)
            .await
            .expect("claim")
            .is_empty(),
        "leased"
    );
    // k-a: still unknown, checked again later, and followed longer (it waits for a boleto); k-b: its
    // outcome came (RF8 or the follow-up).
    let next = config.next_check(1, due, t("2026-11-22T13:00:00Z"));
    assert_eq!(next, t("2026-11-22T12:03:00Z"), "twice the first wait");
    let deadline = t("2026-11-27T03:00:00Z");
    store
        .followup_checked("k-a", &Checked::Again { next, deadline }, due)
        .await
        .expect("checked");
    store
        .resolve_recharge("k-b", vt_domain::journal::AttemptStatus::Aprovada, due)
        .await
        .expect("resolved");
    let pending = store.followups(true, 10).await.expect("list");
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (
            pending[0].attempt.attempt.idempotency_key.as_str(),
            pending[0].checks,
            pending[0].next_check_at,
            pending[0].deadline_at
        ),
        ("k-a", 1, next, deadline)
    );
    let all = store.followups(false, 10).await.expect("list");
    let settled = all
        .iter()
        .find(|f| f.attempt.attempt.idempotency_key == "k-b")
        .expect("k-b");
    assert_eq!(
        (settled.outcome.as_deref(), settled.settled_at),
        (Some("aprovada"), Some(due))
    );
    assert!(
        store
            .claim_followups(t("2026-11-22T12:02:00Z"), lease(t("2026-11-22T12:02:00Z")), 10)
            .await
            .expect("claim")
            .is_empty(),
        "not due yet"
    );
    let claimed = store.claim_followups(next, lease(next), 10).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].checks, 1);
    store
        .followup_checked(
            "k-a",
            &Checked::Settled(vt_store::followup::OUTCOME_CASE.into()),
            next,
        )
        .await
        .expect("to a person");
    assert!(store.followups(true, 10).await.expect("list").is_empty());
    assert!(
        store
            .claim_followups(t("2026-11-22T14:00:00Z"), lease(t("2026-11-22T14:00:00Z")), 10)
            .await
            .expect("claim")
            .is_empty(),
        "nothing is checked once settled"
    );
}
