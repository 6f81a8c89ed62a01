//! The service's payments job against the simulated Pix provider, on a chat harness whose `[pix]`
//! points at it: a charge issued once, a payment read back and credited once (whatever reports it: the
//! webhook, the sweep, a resumed credit), a refund when it cannot be credited, a case when a refund is not made.

use crate::pix::*;
use crate::support::said;
use std::sync::Arc;
use vt_domain::pix::api::CobStatus;
use vt_domain::pix::{BrCode, txid};

pub(crate) fn recharge(card: &str, valor: u32) -> vt_domain::vt::FlowInput {
    vt_domain::vt::FlowInput::parse(&format!(
        r#"{{"cartao": "{card}", "recarga": {{"valor": {valor}, "meio_pagamento": {{"tipo": "pix"}}}}}}"#
    ))
    .expect("input")
}

/// The first code of recharge `key` (`valor` reais on `card`) in conversation `conv`.
pub(crate) async fn issued(
    h: &crate::support::ChatHarness,
    conv: &str,
    card: &str,
    valor: u32,
    key: &str,
) -> vt_domain::tools::CodigoPix {
    h.service
        .payments()
        .issue(conv, &recharge(card, valor), key, 0)
        .await
        .expect("issued")
}

/// Charge `txid` as it is on record.
pub(crate) async fn on_record(h: &crate::support::ChatHarness, txid: &str) -> vt_store::records::PixCharge {
    h.store.pix_charge(txid).await.expect("read").expect("on record")
}

#[tokio::test]
async fn a_paid_charge_is_credited_once_however_many_times_it_is_reported() {
    use vt_agent::testkit::Settled;
    use vt_store::records::ChargeStatus;
    let h = crate::support::chat_harness_paying().await;
    h.say("c-pix", "oi").await;
    let card = "1234567890";
    let cobranca = h
        .service
        .payments()
        .issue("c-pix", &recharge(card, 20), "k-recarga-1", 0)
        .await
        .expect("issued");
    BrCode::checked(&cobranca.copia_e_cola, reais("20")).expect("the code shown checks");
    assert!(
        cobranca.texto.contains("****7890") && !cobranca.texto.contains(card),
        "{}",
        cobranca.texto
    );
    let again = h
        .service
        .payments()
        .issue("c-pix", &recharge(card, 20), "k-recarga-1", 0)
        .await
        .expect("again");
    assert_eq!(
        (again.txid.as_str(), again.copia_e_cola.as_str()),
        (cobranca.txid.as_str(), cobranca.copia_e_cola.as_str())
    );

    // Not paid yet: a notice (forged, or early) changes nothing and sends nothing.
    assert_eq!(
        h.service.payments().settle(&cobranca.txid).await.expect("read"),
        Settled::Nothing
    );
    assert_eq!(h.sim.charges(card), 0, "no recharge before the payment");

    let paid = h.sim.pix().pay(&cobranca.txid, false).expect("paid");
    // Five reports at once (webhooks) and two sweeps (the follow-up that reads open charges): one
    // credit.
    let reports = (0..5).map(|_| {
        let service = h.service.clone();
        let txid = cobranca.txid.clone();
        tokio::spawn(async move { service.payments().settle(&txid).await.expect("settle") })
    });
    let sweeps = (0..2).map(|_| {
        let service = h.service.clone();
        tokio::spawn(async move { service.payments().sweep().await })
    });
    let (outcomes, swept) = tokio::join!(
        futures::future::join_all(reports),
        futures::future::join_all(sweeps)
    );
    let outcomes: Vec<Settled> = outcomes.into_iter().map(|r| r.expect("task")).collect();
    let swept: usize = swept.into_iter().map(|r| r.expect("task")).sum();
    let credited = outcomes.iter().filter(|o| **o == Settled::Credited).count();
    assert_eq!(credited + swept, 1, "{outcomes:?}, {swept} by the sweeps");
    assert_eq!(h.sim.charges(card), 1, "one payment, one recharge");
    assert_eq!(
        h.service.payments().settle(&cobranca.txid).await.expect("later"),
        Settled::Nothing
    );
    let charge = on_record(&h, &cobranca.txid).await;
    assert_eq!(charge.status, ChargeStatus::Creditada);
    assert_eq!(charge.end_to_end_id.as_deref(), Some(paid.end_to_end_id.as_str()));
    let receipt = said(&h, "c-pix").await.pop().expect("a receipt");
    assert!(receipt.contains(&paid.end_to_end_id), "{receipt}");
    assert!(
        receipt.contains("R$ 20,00") && receipt.contains("****7890"),
        "{receipt}"
    );
    assert!(receipt.contains("Novo saldo"), "{receipt}");
    // The recharge went with the payment as its token, under a key of its own.
    let sent = h
        .sim
        .ledger()
        .into_iter()
        .find(|e| e.sistema == "recarga")
        .expect("the recharge request");
    assert_eq!(
        sent.body
            .as_ref()
            .and_then(|b| b.pointer("/meio_pagamento/tipo"))
            .and_then(|v| v.as_str()),
        Some("pix")
    );
    assert_eq!(
        sent.body
            .as_ref()
            .and_then(|b| b.pointer("/meio_pagamento/token"))
            .and_then(|v| v.as_str()),
        Some(paid.end_to_end_id.as_str())
    );
}

#[tokio::test]
async fn a_charge_nobody_issued_is_not_acted_on() {
    let h = crate::support::chat_harness_paying().await;
    let settled = h
        .service
        .payments()
        .settle(&txid("forjado", 0))
        .await
        .expect("read");
    assert_eq!(settled, vt_agent::testkit::Settled::Nothing);
    assert!(h.sim.ledger().iter().all(|e| e.sistema != "recarga"));
}

#[tokio::test]
async fn a_payment_that_cannot_be_credited_goes_back_and_the_holder_is_told() {
    use vt_agent::testkit::Settled;
    let h = crate::support::chat_harness_paying().await;
    h.say("c-negada", "oi").await;
    // The recharge system denies recharges of this magic card.
    let cobranca = issued(&h, "c-negada", "7777777777", 30, "k-negada").await;
    let paid = h.sim.pix().pay(&cobranca.txid, false).expect("paid");
    assert_eq!(
        h.service.payments().settle(&cobranca.txid).await.expect("settle"),
        Settled::Refunded
    );
    let cob = h.sim.pix().charge(&cobranca.txid).expect("at the provider");
    assert_eq!(cob.pix[0].end_to_end_id, paid.end_to_end_id);
    assert_eq!(cob.pix[0].devolucoes.len(), 1, "one refund");
    assert_eq!(cob.pix[0].devolucoes[0].valor, reais("30"));
    let told = said(&h, "c-negada").await.pop().expect("told");
    assert!(told.contains("devolvido"), "{told}");
    // The case's protocol comes with the explanation, after it (a bare line before it on 80722d3).
    let (explained, protocol) = (
        told.find("devolvido").expect("explained"),
        told.find("Protocolo do seu atendimento").expect("the protocol"),
    );
    assert!(explained < protocol, "{told}");
    // A person gets the case, with the payment in its file.
    let case = h
        .store
        .open_case_of("c-negada")
        .await
        .expect("read")
        .expect("a case");
    assert_eq!(case.case_file["motivo"], "pix_pago_nao_creditado");
    assert_eq!(
        case.case_file["cobranca"]["end_to_end_id"],
        paid.end_to_end_id.as_str()
    );
    assert!(
        !case.case_file.to_string().contains("7777777777"),
        "the card masked in the case file"
    );
    assert_eq!(
        on_record(&h, &cobranca.txid).await.status,
        vt_store::records::ChargeStatus::Devolvida
    );
}

/// A paid charge's recharge runs as the paying conversation's: counted under its tenant (on 80722d3 a
/// `default` tenant the deployment does not have), and told only there — no notice of the flow's own
/// ("não foi aprovada pelo meio de pagamento") beside the chat's "o valor foi devolvido".
#[tokio::test]
async fn a_paid_charges_recharge_is_the_paying_conversations_and_told_only_there() {
    use vt_agent::testkit::Settled;
    let h = crate::support::chat_harness_paying().await;
    let msg = vt_agent::Inbound {
        agent_id: "vt".into(),
        conversation_id: Some("c-acme".into()),
        tenant_id: Some("acme".into()),
        user: crate::support::user(),
        text: "oi".into(),
        ..Default::default()
    };
    h.service.messages().handle(msg).await.expect("handled");
    let since = chrono::Utc::now() - chrono::Duration::days(400);
    for (card, settled) in [
        ("7777777777", Settled::Refunded),
        ("1234567890", Settled::Credited),
    ] {
        let cobranca = issued(&h, "c-acme", card, 30, &format!("k-acme-{card}")).await;
        h.sim.pix().pay(&cobranca.txid, false).expect("paid");
        assert_eq!(
            h.service.payments().settle(&cobranca.txid).await.expect("settle"),
            settled
        );
    }
    let notices: Vec<_> = h
        .sim
        .ledger()
        .into_iter()
        .filter(|e| e.sistema == "notificacao")
        .collect();
    assert!(notices.is_empty(), "told in the chat alone: {notices:?}");
    let told = said(&h, "c-acme").await;
    assert!(told.iter().any(|t| t.contains("devolvido")), "{told:?}");
    assert!(
        told.iter()
            .any(|t| t.contains("Pagamento recebido") || t.contains("Recebemos seu Pix")),
        "{told:?}"
    );
    let usage = h.store.usage_since(since).await.expect("usage");
    let tenants: std::collections::BTreeSet<_> = usage.iter().map(|u| u.tenant_id.as_str()).collect();
    assert!(!tenants.contains("default"), "every cost is acme's: {usage:?}");
    let runs = h.store.flow_runs_since(since).await.expect("runs");
    assert!(!runs.is_empty());
    for run in runs {
        assert_eq!(run.tenant_id.as_deref(), Some("acme"));
    }
}

/// Two codes of one recharge (R$ 20 on card 1234567890) in conversation `conv`, both paid: the first
/// credited, the second's payment returned. Both codes.
pub(crate) async fn two_codes_paid(
    h: &crate::support::ChatHarness,
    conv: &str,
) -> (vt_domain::tools::CodigoPix, vt_domain::tools::CodigoPix) {
    use vt_agent::testkit::Settled;
    h.say(conv, "oi").await;
    let key = format!("k-{conv}");
    let payments = h.service.payments();
    let input = recharge("1234567890", 20);
    let code = |n| payments.issue(conv, &input, &key, n);
    let (first, second) = (code(0).await.expect("first"), code(1).await.expect("second"));
    assert_ne!(first.txid, second.txid);
    h.sim.pix().pay(&first.txid, false).expect("paid");
    h.sim.pix().pay(&second.txid, false).expect("paid too");
    assert_eq!(
        payments.settle(&first.txid).await.expect("first"),
        Settled::Credited
    );
    assert_eq!(
        payments.settle(&second.txid).await.expect("second"),
        Settled::RefundedDuplicate
    );
    (first, second)
}

#[tokio::test]
async fn a_second_code_of_a_recharge_paid_too_is_refunded_not_credited() {
    use vt_agent::testkit::Settled;
    let h = crate::support::chat_harness_paying().await;
    let (_, second) = two_codes_paid(&h, "c-dois").await;
    let payments = h.service.payments();
    assert_eq!(h.sim.charges("1234567890"), 1, "one recharge");
    let cob = h.sim.pix().charge(&second.txid).expect("at the provider");
    assert_eq!(cob.pix[0].devolucoes.len(), 1);
    let told = said(&h, "c-dois").await;
    let last = told.last().expect("told");
    assert!(
        last.contains("segundo Pix") && last.contains("devolvido"),
        "{last}"
    );
    // Read again (a notice repeated, the sweeps that follow): returned once, told once.
    assert_eq!(
        payments.settle(&second.txid).await.expect("again"),
        Settled::Nothing
    );
    payments.sweep().await;
    payments.sweep().await;
    assert_eq!(said(&h, "c-dois").await.len(), told.len(), "nothing more said");
    let returned = on_record(&h, &second.txid).await;
    assert_eq!(returned.status, vt_store::records::ChargeStatus::Devolvida);
    let refund = returned.refund.expect("the refund on record");
    assert_eq!(
        (refund.end_to_end_id.as_str(), refund.status.as_str()),
        (cob.pix[0].end_to_end_id.as_str(), "DEVOLVIDO")
    );
}

/// A provider whose refunds take time: the refund of a second code paid for one recharge is on record
/// as in progress and read back by the sweep until the provider settles it; one it could not make goes
/// to a person.
#[tokio::test]
async fn a_refund_in_progress_is_read_back_until_final_and_one_not_made_goes_to_a_person() {
    let h = crate::support::chat_harness_paying().await;
    h.sim.pix().refunding_later();
    let (_, second) = two_codes_paid(&h, "c-devolve").await;
    let payments = h.service.payments();
    let twice = h.sim.pix().charge(&second.txid).expect("at the provider").pix[0].clone();
    let status = || async {
        let charge = on_record(&h, &second.txid).await;
        charge.refund.map(|r| r.status).unwrap_or_default()
    };
    assert_eq!(status().await, "EM_PROCESSAMENTO");
    // Still in progress: read back, nothing changes.
    assert_eq!(payments.sweep().await, 0);
    assert_eq!(status().await, "EM_PROCESSAMENTO");
    assert!(h.store.open_case_of("c-devolve").await.expect("read").is_none());
    // The provider could not return it: on record, and a person gets it.
    h.sim.pix().finish_refund(&twice.end_to_end_id, false);
    assert_eq!(payments.sweep().await, 1);
    assert_eq!(status().await, "NAO_REALIZADO");
    assert_eq!(payments.sweep().await, 0, "final: not read again");
    let case = h
        .store
        .open_case_of("c-devolve")
        .await
        .expect("read")
        .expect("a case");
    assert_eq!(case.case_file["motivo"], "pix_devolucao_nao_realizada");
    assert_eq!(
        case.case_file["cobranca"]["end_to_end_id"],
        twice.end_to_end_id.as_str()
    );
}

/// A refund the provider could not make, in a conversation whose case (the recharge not credited) is
/// open already: a conversation holds one case, so the person who has it hears of it in its thread.
#[tokio::test]
async fn a_refund_not_made_under_a_case_already_open_is_a_line_in_its_thread() {
    use vt_agent::testkit::Settled;
    let handoff = vt_agent::testkit::HandoffConfig {
        board: true,
        ..Default::default()
    };
    let h = crate::support::chat_harness_pix_handing_off(crate::support::Pix::Provider, handoff).await;
    h.sim.pix().refunding_later();
    h.say("c-linha", "oi").await;
    // The recharge system denies this magic card: refunded (in progress), and a case.
    let cobranca = issued(&h, "c-linha", "7777777777", 30, "k-linha").await;
    let paid = h.sim.pix().pay(&cobranca.txid, false).expect("paid");
    let payments = h.service.payments();
    assert_eq!(
        payments.settle(&cobranca.txid).await.expect("settle"),
        Settled::Refunded
    );
    let case = h
        .store
        .open_case_of("c-linha")
        .await
        .expect("read")
        .expect("a case");
    h.sim.pix().finish_refund(&paid.end_to_end_id, false);
    assert_eq!(payments.sweep().await, 1);

    let still = h
        .store
        .open_case_of("c-linha")
        .await
        .expect("read")
        .expect("a case");
    assert_eq!(still.id, case.id, "one case per conversation");
    let board: Vec<_> = h
        .store
        .outbox_items(vt_store::records::OutboxStatus::Pending, 100)
        .await
        .expect("outbox")
        .into_iter()
        .filter(|i| i.destination == vt_agent::testkit::BOARD)
        .collect();
    let kinds: Vec<&str> = board.iter().map(|i| i.kind.as_str()).collect();
    assert_eq!(kinds, ["caso_aberto", "caso_linha"], "{board:?}");
    let line = board[1].payload["text"].as_str().unwrap_or_default();
    assert!(
        line.contains("Novo motivo") && line.contains("não realizada") && line.contains("****7777"),
        "{line}"
    );
    assert!(!line.contains("7777777777"), "the card masked: {line}");
}

/// `serve`'s Pix channel over loopback: the provider's notice (its real body) starts the read-back.
#[tokio::test]
async fn a_notice_on_the_webhook_credits_the_payment_it_names_and_a_bad_body_is_refused() {
    let h = Arc::new(crate::support::chat_harness_paying().await);
    h.say("c-hook", "oi").await;
    let wiring = vt_agent::Wiring {
        service: h.service.clone(),
        agent: "vt".into(),
        tenant: vt_engine::conversation::DEFAULT_TENANT.into(),
    };
    let channel = vt_agent::testkit::pix_channel(&wiring, None, std::time::Duration::from_secs(30));
    assert_eq!(channel.name, "pix");
    assert_eq!(channel.routes.len(), 1);
    let state = vt_agent::AppState::new(h.service.clone(), "vt", Default::default()).with_channel(&channel);
    let served = crate::support::serve_state(h.clone(), state).await;
    let cobranca = issued(&h, "c-hook", "1234567890", 20, "k-hook").await;
    // Paid 95 s after it was shown.
    h.clock.set(h.clock.now() + chrono::Duration::seconds(95));
    let paid = h.sim.pix().pay(&cobranca.txid, false).expect("paid");
    // As the provider writes it (the spec's webhook body), twice in one notice.
    let notice = format!(
        r#"{{"pix": [{{"endToEndId": "{e2e}", "txid": "{txid}", "valor": "20.00", "horario": "2026-11-22T12:01:00.000Z"}}, {{"endToEndId": "{e2e}", "txid": "{txid}", "valor": "20.00", "horario": "2026-11-22T12:01:00.000Z"}}]}}"#,
        e2e = paid.end_to_end_id,
        txid = cobranca.txid
    );
    let post = |body: String| {
        served
            .client
            .post(format!("{}/channels/pix/webhook/pix", served.url))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    assert_eq!(post(notice.clone()).await.expect("post").status(), 200);
    assert_eq!(post(notice).await.expect("again").status(), 200);
    for _ in 0..100 {
        let charge = on_record(&h, &cobranca.txid).await;
        if charge.status == vt_store::records::ChargeStatus::Creditada {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    h.service.stopped().await;
    assert_eq!(
        on_record(&h, &cobranca.txid).await.status,
        vt_store::records::ChargeStatus::Creditada
    );
    assert_eq!(h.sim.charges("1234567890"), 1, "two notices, one recharge");
    let metrics = served
        .client
        .get(format!("{}/metrics", served.url))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains(r#"vt_pix_charges{status="creditada"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"vt_pix_charges{status="ativa"} 0"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"vt_pix_payment_seconds{quantile="0.5"} 95"#),
        "code to payment: {metrics}"
    );
    assert_eq!(post("{\"pix\": 3}".into()).await.expect("bad").status(), 400);
    assert_eq!(post("não é json".into()).await.expect("bad").status(), 400);
}

#[tokio::test]
async fn the_sweep_credits_a_payment_whose_notice_never_came_and_withdraws_an_expired_code() {
    use vt_agent::testkit::Settled;
    use vt_store::records::ChargeStatus;
    let h = crate::support::chat_harness_paying().await;
    h.say("c-sweep", "oi").await;
    let payments = h.service.payments();
    let paid = payments
        .issue("c-sweep", &recharge("1234567890", 20), "k-sweep-pago", 0)
        .await
        .expect("issued");
    let unpaid = payments
        .issue("c-sweep", &recharge("1111111111", 15), "k-sweep-expira", 0)
        .await
        .expect("issued");
    h.sim.pix().pay(&paid.txid, false).expect("paid, no notice");
    assert_eq!(
        payments.sweep().await,
        1,
        "the paid one, found by reading it back"
    );
    assert_eq!(h.sim.charges("1234567890"), 1);
    assert_eq!(
        on_record(&h, &unpaid.txid).await.status,
        ChargeStatus::Ativa,
        "not expired yet"
    );

    // Fifteen minutes later the unpaid one has expired: withdrawn, and the holder told.
    h.clock.set(h.clock.now() + chrono::Duration::minutes(16));
    assert_eq!(payments.sweep().await, 1);
    assert_eq!(on_record(&h, &unpaid.txid).await.status, ChargeStatus::Expirada);
    assert_eq!(
        h.sim.pix().charge(&unpaid.txid).expect("at the provider").status,
        CobStatus::RemovidaPeloUsuarioRecebedor
    );
    assert!(
        h.sim.pix().pay(&unpaid.txid, false).is_none(),
        "a withdrawn code cannot be paid"
    );
    let last = said(&h, "c-sweep").await.pop().expect("told");
    assert!(
        last.contains("novo código") && last.contains("****1111"),
        "{last}"
    );
    assert_eq!(payments.sweep().await, 0, "nothing left to do");
    assert_eq!(
        payments.settle(&unpaid.txid).await.expect("read"),
        Settled::Nothing
    );
}

#[tokio::test]
async fn a_code_paid_just_before_it_expires_is_credited_not_withdrawn() {
    use vt_store::records::ChargeStatus;
    let h = crate::support::chat_harness_paying().await;
    h.say("c-corrida", "oi").await;
    let cobranca = issued(&h, "c-corrida", "1234567890", 20, "k-corrida").await;
    h.sim
        .pix()
        .pay(&cobranca.txid, false)
        .expect("paid at the last second");
    h.clock.set(h.clock.now() + chrono::Duration::minutes(16));
    assert_eq!(h.service.payments().sweep().await, 1);
    assert_eq!(
        on_record(&h, &cobranca.txid).await.status,
        ChargeStatus::Creditada
    );
    assert_eq!(h.sim.charges("1234567890"), 1);
}

#[tokio::test]
async fn a_credit_a_stop_interrupted_is_resumed_once_by_the_sweep() {
    use vt_store::records::ChargeStatus;
    use vt_store::records::PaymentClaim;
    let h = crate::support::chat_harness_paying().await;
    h.say("c-retoma", "oi").await;
    let cobranca = issued(&h, "c-retoma", "1234567890", 20, "k-retoma").await;
    let paid = h.sim.pix().pay(&cobranca.txid, false).expect("paid");
    // A process claimed the payment and stopped before it sent the recharge.
    let claim = h
        .store
        .claim_payment(&cobranca.txid, &paid.end_to_end_id, h.clock.now())
        .await
        .expect("claim");
    assert_eq!(claim, PaymentClaim::First);
    assert_eq!(
        h.service.payments().sweep().await,
        0,
        "too soon: it may still be on its way"
    );
    h.clock.set(h.clock.now() + chrono::Duration::minutes(3));
    assert_eq!(h.service.payments().sweep().await, 1);
    assert_eq!(h.service.payments().sweep().await, 0);
    assert_eq!(h.sim.charges("1234567890"), 1);
    assert_eq!(
        on_record(&h, &cobranca.txid).await.status,
        ChargeStatus::Creditada
    );
}
