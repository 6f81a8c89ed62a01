//! Recharges paid by card on the provider's hosted checkout (step 24): the Stripe adapter against the
//! simulator's Stripe API on loopback, the chat journey (a link, never a card number), the money rules
//! Pix keeps — a notice is a signed hint, one payment is one recharge whatever arrives twice, never a
//! recharge before its payment, the amount credited is the amount paid — expiry and a new link, a
//! payment that cannot be credited refunded with a case, and a credit a stop interrupted resumed once.

use rust_decimal::Decimal;
use vt_agent::testkit::Settled;
use vt_connectors::cartao::stripe::{ASSINATURA, Stripe, assinar};
use vt_domain::cartao::{AvisoInvalido, Checkouts, LinkStatus, PedidoLink};
use vt_simulators::systems::CARTAO_WEBHOOK_SECRET;
use vt_store::records::ChargeMeans;
use vt_store::records::ChargeStatus;
use vt_store::records::PaymentClaim;

use crate::support::{ChatHarness, chat_harness_cards, said};

fn reais(s: &str) -> Decimal {
    s.parse().expect("decimal")
}

/// The checkout the conversation's "sim" linked to: the reply's link file names it.
fn linked(handled: &vt_agent::Handled) -> String {
    handled
        .replies
        .iter()
        .flat_map(|r| r.files.iter())
        .find_map(|f| vt_domain::tools::link_of(f).map(str::to_owned))
        .unwrap_or_else(|| panic!("a reply with the link: {:?}", handled.replies))
}

/// Asks for a card recharge of `valor` on `card` in `conv` and confirms it; the checkout's id.
async fn confirmed(h: &ChatHarness, conv: &str, card: &str, valor: u32) -> String {
    let ask = h
        .say(conv, &format!("recarregar {valor} no cartão {card} no crédito"))
        .await;
    assert!(ask.reply_text().contains("Confirma"), "{}", ask.reply_text());
    linked(&h.say(conv, "sim").await)
}

/// The provider's signed notice that checkout `id` completed, as its webhook gets it.
fn notice(h: &ChatHarness, id: &str, secret: &str) -> (String, Vec<u8>) {
    let body = serde_json::to_vec(&serde_json::json!({
        "id": "evt_1", "object": "event", "type": "checkout.session.completed",
        "data": {"object": {"id": id, "object": "checkout.session"}},
    }))
    .expect("json");
    (assinar(secret, h.clock.now().timestamp(), &body), body)
}

async fn on_record(h: &ChatHarness, id: &str) -> vt_store::records::PixCharge {
    h.store.pix_charge(id).await.expect("read").expect("on record")
}

#[tokio::test]
async fn the_stripe_adapter_creates_reads_expires_and_refunds_against_the_api() {
    let running = vt_simulators::systems::Simulator::new(crate::support::quick_simulator())
        .spawn(0)
        .await
        .expect("simulator");
    let stripe = Stripe::new(&crate::support::card_config(&running.url)).expect("client");
    let pedido = |chave: &str, valor: &str| PedidoLink {
        valor: reais(valor),
        referencia: "vt0123".into(),
        descricao: "Recarga de vale-transporte, cartão ****7890".into(),
        expira_em: chrono::Utc::now() + chrono::Duration::minutes(30),
        chave: chave.into(),
    };
    let link = stripe.criar(&pedido("k1", "50.00")).await.expect("created");
    assert_eq!((link.status, link.valor), (LinkStatus::Aberto, reais("50")));
    assert!(link.url.contains(&link.id), "{}", link.url);
    // The same request under its key is the same checkout; another body under it is refused.
    assert_eq!(
        stripe.criar(&pedido("k1", "50.00")).await.expect("again").id,
        link.id
    );
    assert!(stripe.criar(&pedido("k1", "60.00")).await.is_err());
    let paid = running.simulator.cartao().pay(&link.id, false).expect("paid");
    let read = stripe.ler(&link.id).await.expect("read");
    assert_eq!(
        (read.status, read.pagamento.as_deref()),
        (LinkStatus::Pago, Some(paid.as_str()))
    );
    // Paid: it can no longer be expired, it reads back paid.
    assert_eq!(
        stripe.expirar(&link.id).await.expect("expire").status,
        LinkStatus::Pago
    );
    let refund = stripe.estornar(&paid, reais("50"), "r1").await.expect("refund");
    assert_eq!(
        stripe.estornar(&paid, reais("50"), "r1").await.expect("again").id,
        refund.id,
        "one refund per key"
    );
    assert_eq!(stripe.estorno(&paid).await.expect("read"), Some(refund));
    assert_eq!(running.simulator.cartao().refunds(), 1);
    let open = stripe.criar(&pedido("k2", "20.00")).await.expect("created");
    assert_eq!(
        stripe.expirar(&open.id).await.expect("expired").status,
        LinkStatus::Expirado
    );
    assert!(
        running.simulator.cartao().pay(&open.id, false).is_none(),
        "an expired link cannot be paid"
    );
    running.task.abort();
}

/// Ask, confirm, get a link (never a card number asked); nothing is recharged until the provider says
/// it was paid; then one recharge under the recharge's key, with the payment as its token, of the
/// amount paid, and one receipt — however often the notice comes and the sweep reads it.
#[tokio::test]
async fn a_card_recharge_gets_a_link_and_is_credited_once_when_paid_however_often_it_is_reported() {
    let h = chat_harness_cards().await;
    let card = "1234567890";
    let id = confirmed(&h, "c-cartao", card, 50).await;
    let link = said(&h, "c-cartao").await.pop().expect("the link");
    assert!(
        link.contains("/_simulador/checkout/") && link.contains("****7890"),
        "{link}"
    );
    assert!(link.contains("nunca digite o número do seu cartão"), "{link}");
    assert!(!link.contains(card));
    let charge = on_record(&h, &id).await;
    assert_eq!(
        (charge.meio, charge.status, charge.amount),
        (ChargeMeans::CartaoCredito, ChargeStatus::Ativa, reais("50"))
    );
    assert_eq!(h.sim.charges(card), 0, "confirmed, not paid: nothing recharged");
    // Not paid yet: a notice, even a signed one, credits nothing.
    let (sig, body) = notice(&h, &id, CARTAO_WEBHOOK_SECRET);
    let named = h
        .service
        .payments()
        .card_notice(Some(&sig), &body)
        .expect("signed");
    assert_eq!(named, vec![id.clone()]);
    assert_eq!(
        h.service.payments().settle(&id).await.expect("settle"),
        Settled::Nothing
    );
    assert_eq!(h.sim.charges(card), 0);

    let payment = h.sim.cartao().pay(&id, false).expect("paid on the page");
    let payments = h.service.payments();
    let (first, second) = tokio::join!(payments.settle(&id), payments.settle(&id));
    let outcomes = [first.expect("settle"), second.expect("settle")];
    assert_eq!(
        outcomes.iter().filter(|o| **o == Settled::Credited).count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(payments.settle(&id).await.expect("again"), Settled::Nothing);
    assert_eq!(payments.sweep().await, 0);
    assert_eq!(h.sim.charges(card), 1, "one payment, one recharge");
    let sent: Vec<serde_json::Value> = h
        .sim
        .ledger()
        .into_iter()
        .filter(|e| e.sistema == "recarga")
        .filter_map(|e| e.body)
        .collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["meio_pagamento"]["tipo"], "cartao_credito");
    assert_eq!(
        sent[0]["meio_pagamento"]["token"],
        payment.as_str(),
        "the payment is the token"
    );
    assert_eq!(sent[0]["valor"], serde_json::json!(50.0), "the amount paid");
    let receipts: Vec<String> = said(&h, "c-cartao")
        .await
        .into_iter()
        .filter(|t| t.contains("recarga feita"))
        .collect();
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    assert!(
        receipts[0].contains(&payment) && receipts[0].contains("R$ 50,00"),
        "{receipts:?}"
    );
    assert_eq!(on_record(&h, &id).await.status, ChargeStatus::Creditada);
}

/// A notice not signed with the webhook's secret (or too old) is refused and reads nothing; a
/// checkout nobody issued is not acted on.
#[tokio::test]
async fn a_forged_or_stale_notice_is_refused_and_an_unknown_checkout_ignored() {
    let h = chat_harness_cards().await;
    let id = confirmed(&h, "c-forjado", "1234567890", 20).await;
    h.sim.cartao().pay(&id, false).expect("paid");
    let payments = h.service.payments();
    let (forged, body) = notice(&h, &id, "whsec_de_outro");
    assert_eq!(
        payments.card_notice(Some(&forged), &body),
        Err(AvisoInvalido::Assinatura)
    );
    assert_eq!(
        payments.card_notice(None, &body),
        Err(AvisoInvalido::SemAssinatura)
    );
    let stale = assinar(CARTAO_WEBHOOK_SECRET, h.clock.now().timestamp() - 301, &body);
    assert_eq!(
        payments.card_notice(Some(&stale), &body),
        Err(AvisoInvalido::Expirado)
    );
    assert_eq!(
        h.sim.charges("1234567890"),
        0,
        "nothing credited on a refused notice"
    );
    assert_eq!(
        payments.settle("cs_que_ninguem_emitiu").await.expect("read"),
        Settled::Nothing
    );
    // The sweep finds the payment itself.
    assert_eq!(payments.sweep().await, 1);
    assert_eq!(h.sim.charges("1234567890"), 1);
}

/// A link not paid in time expires (the card holder told, nothing charged); "novo link" issues the
/// recharge's next link, which is paid and credited once; a link still valid is shown again.
#[tokio::test]
async fn an_expired_link_is_told_and_a_new_one_issued_on_request() {
    let h = chat_harness_cards().await;
    let conv = "c-expira";
    let first = confirmed(&h, conv, "1111111111", 15).await;
    let again = h.say(conv, "manda outro link").await;
    assert_eq!(linked(&again), first, "still valid: the same link again");
    h.clock.set(h.clock.now() + chrono::Duration::minutes(31));
    assert_eq!(h.service.payments().sweep().await, 1);
    assert_eq!(on_record(&h, &first).await.status, ChargeStatus::Expirada);
    assert!(
        h.sim.cartao().pay(&first, false).is_none(),
        "an expired link cannot be paid"
    );
    let told = said(&h, conv).await.pop().expect("told");
    assert!(
        told.contains("expirou") && told.contains("novo link") && told.contains("****1111"),
        "{told}"
    );
    let renewed = h.say(conv, "novo link").await;
    let second = linked(&renewed);
    assert_ne!(second, first);
    assert_eq!(on_record(&h, &second).await.n, 1);
    h.sim.cartao().pay(&second, false).expect("paid");
    assert_eq!(
        h.service.payments().settle(&second).await.expect("settle"),
        Settled::Credited
    );
    assert_eq!(h.sim.charges("1111111111"), 1);
    let done = h.say(conv, "novo link").await.reply_text();
    assert!(done.contains("já foi paga"), "{done}");
}

/// Paid, and the recharge system refuses the recharge: the payment is refunded once, the card holder
/// told, and a person gets the case (the card masked in its file).
#[tokio::test]
async fn a_paid_recharge_the_system_refuses_is_refunded_told_and_handed_to_a_person() {
    let h = chat_harness_cards().await;
    let id = confirmed(&h, "c-negada", "7777777777", 30).await;
    let payment = h.sim.cartao().pay(&id, false).expect("paid");
    assert_eq!(
        h.service.payments().settle(&id).await.expect("settle"),
        Settled::Refunded
    );
    assert_eq!(
        h.service.payments().settle(&id).await.expect("again"),
        Settled::Nothing
    );
    assert_eq!(h.sim.cartao().refunds(), 1, "one refund");
    let told = said(&h, "c-negada").await.pop().expect("told");
    assert!(told.contains("estornado"), "{told}");
    let case = h
        .store
        .open_case_of("c-negada")
        .await
        .expect("read")
        .expect("a case");
    assert_eq!(case.case_file["motivo"], "cartao_pago_nao_creditado");
    assert_eq!(case.case_file["cobranca"]["end_to_end_id"], payment.as_str());
    assert!(!case.case_file.to_string().contains("7777777777"));
    assert_eq!(on_record(&h, &id).await.status, ChargeStatus::Devolvida);
    let refund = on_record(&h, &id).await.refund.expect("refund on record");
    assert_eq!(refund.status, "DEVOLVIDO");
}

/// A process claimed the payment and died before it sent the recharge (kill -9 between paid and
/// credited): the sweep resumes the credit under the same key, once.
#[tokio::test]
async fn a_credit_a_stop_interrupted_is_resumed_once_by_the_sweep() {
    let h = chat_harness_cards().await;
    let id = confirmed(&h, "c-retoma", "1234567890", 20).await;
    let payment = h.sim.cartao().pay(&id, false).expect("paid");
    let claim = h
        .store
        .claim_payment(&id, &payment, h.clock.now())
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
    assert_eq!(on_record(&h, &id).await.status, ChargeStatus::Creditada);
}

/// `vt-agent serve` with no configuration: the embedded simulator is the card provider. A card
/// recharge's "sim" carries the link as a field; a forged notice on the webhook is refused with 400;
/// paying on the simulator's page is noticed in process (signed) and the receipt lands in the
/// conversation, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_configuration_serve_takes_cards_on_the_embedded_simulators_page() {
    let data = tempfile::tempdir().expect("tmp");
    let mut cmd = crate::cli::vt_agent_in(&data);
    cmd.env("VT_SIMULATOR_PIX_PAGAR_APOS_SEGUNDOS", "0")
        .args(["serve", "--addr", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let url = crate::support::listening_on(&mut stderr);
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let http = reqwest::Client::new();
    let say = |text: &str| {
        http.post(format!("{url}/v1/conversations/c-http-cartao/messages"))
            .json(&serde_json::json!({"text": text, "user": {"id": "u-http"}}))
            .send()
    };
    say("recarregar 20 no cartão 1234567890 no crédito")
        .await
        .expect("ask");
    let yes: serde_json::Value = say("sim").await.expect("yes").json().await.expect("json");
    let cartao = yes["replies"]
        .as_array()
        .expect("replies")
        .iter()
        .find_map(|r| r.get("cartao"))
        .unwrap_or_else(|| panic!("a reply with the link: {yes}"))
        .clone();
    let link = cartao["link"].as_str().expect("link").to_owned();
    assert!(
        cartao["expira_em"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{cartao}"
    );
    let id = link.rsplit('/').next().expect("id").to_owned();
    // The link opens the simulator's page on this server.
    let page = http
        .get(&link)
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    assert!(page.contains("R$ 20,00") && page.contains("****7890"), "{page}");
    let forged = serde_json::to_vec(
        &serde_json::json!({"type": "checkout.session.completed", "data": {"object": {"id": id}}}),
    )
    .expect("json");
    let refused = http
        .post(format!("{url}{}", vt_agent::testkit::WEBHOOK_PATH))
        .header(
            ASSINATURA,
            assinar("whsec_forjado", chrono::Utc::now().timestamp(), &forged),
        )
        .body(forged)
        .send()
        .await
        .expect("sent");
    assert_eq!(refused.status(), 400);
    let paid = http.post(format!("{link}/pagar")).send().await.expect("pay");
    assert_eq!(paid.status(), 200);
    let mut receipt = String::new();
    for _ in 0..100 {
        let conv: serde_json::Value = http
            .get(format!("{url}/v1/conversations/c-http-cartao"))
            .send()
            .await
            .expect("read")
            .json()
            .await
            .expect("json");
        let texts: Vec<String> = conv["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter_map(|m| m["text"].as_str().map(str::to_owned))
            .filter(|t| t.contains("recarga feita"))
            .collect();
        if let Some(t) = texts.first() {
            assert_eq!(texts.len(), 1, "{texts:?}");
            receipt = t.clone();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(receipt.contains("R$ 20,00"), "the receipt arrived: {receipt}");
    let _ = child.kill();
    let _ = child.wait();
}

/// On Mattermost a checkout link is an attachment of its post whose title opens the provider's page
/// (drawn from the checkout on record); nothing is uploaded.
#[tokio::test]
async fn on_mattermost_a_checkout_link_is_an_attachment_that_opens_the_page() {
    use vt_agent::ChannelSender as _;
    let h = chat_harness_cards().await;
    let conv = "mm:canal1:user1";
    let id = confirmed(&h, conv, "1234567890", 20).await;
    let url = on_record(&h, &id).await.copia_e_cola;
    let mm =
        crate::support::FakeServer::start(vec![(201, vec![], serde_json::json!({"id": "post-1"}))]).await;
    let config = vt_agent::testkit::MattermostConfig {
        url: Some(mm.url.clone()),
        bot_token: Some("token-do-bot".into()),
        ..Default::default()
    };
    let sender = vt_agent::testkit::PostSender::new(std::sync::Arc::new(config))
        .expect("on")
        .with_files(h.store.clone());
    let mut payload = crate::support::reply_payload(conv, "user1", "");
    payload["files"] = serde_json::to_value([vt_domain::tools::link_file(&id)]).expect("json");
    let item = vt_store::records::OutboxItem {
        id: 1,
        kind: "reply".into(),
        destination: "mattermost".into(),
        payload,
        conversation_id: Some(conv.into()),
        status: vt_store::records::OutboxStatus::InFlight,
        attempts: 1,
        max_attempts: 5,
        next_attempt_at: chrono::Utc::now(),
        last_error: None,
        message_id: None,
    };
    let reply = vt_agent::ReplyPayload::of(&item).expect("a reply");
    assert_eq!(
        sender.send(&item, &reply).await.expect("sent").as_deref(),
        Some("post-1")
    );
    let received = mm.received();
    assert_eq!(received.len(), 1, "the post alone: nothing to upload");
    assert!(received[0].path.ends_with("/api/v4/posts"));
    let attachment = &received[0].body["props"]["attachments"][0];
    assert_eq!(attachment["title_link"], url.as_str());
    assert!(
        attachment["title"].as_str().is_some_and(|t| t.contains("cartão")),
        "{attachment}"
    );
}
