//! Recharges that happen by themselves (step 29), on a fixed clock against the simulated provider's
//! Pix Automático: an offer accepted becomes a recurrence, approved only once read back; a balance
//! below its threshold is charged once per cycle, whoever passes; a date recurrence charges each
//! month; a payer without funds is retried by the provider's rules and told once; a cancellation in
//! the chat or in the bank stops the charges; a forged notice is only a read.

use std::sync::Arc;

use chrono::Duration;
use rust_decimal::Decimal;
use vt_domain::pix::BrCode;
use vt_domain::pix::automatico::{CobRStatus, RecStatus, TentativaStatus};
use vt_store::Store;
use vt_store::records::RecurrenceStatus;
use vt_store::records::RecurringChargeStatus;

use crate::support::{ChatHarness, chat_harness_automatic, said};

pub(crate) const CARD: &str = "1234567890";

pub(crate) async fn sqlite() -> Arc<dyn Store> {
    Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    )
}

pub(crate) async fn harness() -> ChatHarness {
    chat_harness_automatic(sqlite().await, None).await
}

pub(crate) fn reais(v: i64) -> Decimal {
    Decimal::new(v, 0)
}

/// The harness's clock moved `days` on (the simulated provider reads the same clock).
pub(crate) fn advance(h: &ChatHarness, days: i64) {
    h.clock.set(h.clock.now() + Duration::days(days));
}

/// The only recurrence asked for in conversation `conv`, as on record.
pub(crate) async fn only_recurrence(h: &ChatHarness, conv: &str) -> vt_store::records::Recurrence {
    let row = h
        .store
        .conversation(conv)
        .await
        .expect("read")
        .expect("conversation");
    let mut mine: Vec<vt_store::records::Recurrence> = h
        .store
        .user_recurrences(&row.tenant_id, &row.user_id)
        .await
        .expect("recurrences")
        .into_iter()
        .filter(|r| r.conversation_id == conv)
        .collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
    mine.remove(0)
}

/// Asks for an automatic recharge in `conv` with `text`, authorises it in the "bank" and has the
/// product read it back: the recurrence, approved.
pub(crate) async fn authorised(h: &ChatHarness, conv: &str, text: &str) -> vt_store::records::Recurrence {
    let asked = h.say(conv, text).await;
    let reply = asked.reply_text();
    assert!(reply.contains("autorize o Pix Automático"), "{reply}");
    let rec = only_recurrence(h, conv).await;
    assert_eq!(rec.status, RecurrenceStatus::Criada);
    let id_rec = rec.id_rec.clone().expect("created at the provider");
    assert!(
        h.sim.pix().authorise(&id_rec),
        "the payer authorises in their bank"
    );
    assert!(
        h.service
            .automatic()
            .rec_notice(&id_rec)
            .await
            .expect("read back")
    );
    let rec = only_recurrence(h, conv).await;
    assert_eq!(rec.status, RecurrenceStatus::Aprovada);
    rec
}

/// Recurrence `rec`'s charges, as on record.
pub(crate) async fn charges_of(
    h: &ChatHarness,
    rec: &vt_store::records::Recurrence,
) -> Vec<vt_store::records::RecurringCharge> {
    h.store.charges_of_recurrence(&rec.id).await.expect("charges")
}

/// `CARD` used down to R$ 10 (below a threshold of 20), the next day's reading schedules a charge,
/// and two days on its date has come.
pub(crate) async fn low_then_due(h: &ChatHarness) {
    h.sim.ride(CARD, reais(40));
    advance(h, 1);
    assert_eq!(h.service.automatic().pass().await.scheduled, 1);
    advance(h, 2);
}

/// The receipts of automatic recharges said in `conv`.
pub(crate) async fn receipts(h: &ChatHarness, conv: &str) -> Vec<String> {
    said(h, conv)
        .await
        .into_iter()
        .filter(|t| t.starts_with("Recarga automática feita"))
        .collect()
}

#[tokio::test]
async fn an_offer_accepted_is_approved_when_read_back_and_a_low_balance_is_charged_once() {
    let h = harness().await;
    let conv = "c-auto-oferta";
    // A Pix recharge asked, confirmed, paid and credited: the receipt, then the offer.
    h.say(conv, &format!("recarregar 20 no {CARD} via pix")).await;
    h.say(conv, "sim").await;
    let code = h
        .store
        .conversation_charges(conv)
        .await
        .expect("charges")
        .remove(0);
    h.sim.pix().pay(&code.txid, false).expect("paid");
    assert_eq!(
        h.service.payments().settle(&code.txid).await.expect("settled"),
        vt_agent::testkit::Settled::Credited
    );
    let offer = said(&h, conv).await.pop().expect("the offer");
    assert!(
        offer.starts_with(vt_domain::tools::OFERTA) && offer.contains("****7890") && !offer.contains(CARD),
        "{offer}"
    );
    assert!(
        offer.contains("abaixo de R$ 20,00, com R$ 50,00 por vez"),
        "{offer}"
    );

    // "sim" accepts the offer: a recurrence at the provider, waiting for the bank; nothing charged.
    let yes = h.say(conv, "sim").await;
    let texts: Vec<String> = yes.replies.iter().map(|r| r.text.clone()).collect();
    assert!(texts[0].contains("autorize o Pix Automático"), "{texts:?}");
    assert!(!yes.reply_text().contains(CARD), "{texts:?}");
    let rec = only_recurrence(&h, conv).await;
    let id_rec = rec.id_rec.clone().expect("idRec");
    let at_provider = h.sim.pix().recurrence(&id_rec).expect("at the provider");
    let location = at_provider.loc.as_ref().expect("loc").location.clone();
    BrCode::checked_rec(&texts[1], &location).expect("the code shown authorises this recurrence");
    assert_eq!(
        at_provider.vinculo.as_ref().and_then(|v| v.objeto.as_deref()),
        Some("Recarga VT cartão ****7890"),
        "the card masked in the object"
    );
    assert_eq!(h.sim.charges(CARD), 1, "only the Pix recharge so far");

    // A notice before the payer authorised (forged, or early) is a read: still waiting.
    assert!(!h.service.automatic().rec_notice(&id_rec).await.expect("read"));
    assert_eq!(only_recurrence(&h, conv).await.status, RecurrenceStatus::Criada);
    assert_eq!(
        h.service.automatic().pass().await,
        vt_agent::testkit::PassFigures::default()
    );

    assert!(h.sim.pix().authorise(&id_rec));
    assert!(
        h.service
            .automatic()
            .rec_notice(&id_rec)
            .await
            .expect("read back")
    );
    assert!(
        !h.service.automatic().rec_notice(&id_rec).await.expect("again"),
        "taken once"
    );
    let ativada = said(&h, conv).await.pop().expect("told");
    assert!(
        ativada.starts_with("Recarga automática ativada no cartão ****7890"),
        "{ativada}"
    );

    // Balance 70 (50 + the recharge): above the threshold, nothing charged; the day's reading is one.
    let first = h.service.automatic().pass().await;
    assert_eq!(first.scheduled, 0);
    let readings = |h: &ChatHarness| h.sim.ledger().iter().filter(|e| e.sistema == "saldo").count();
    let before = readings(&h);
    h.service.automatic().pass().await;
    assert_eq!(readings(&h), before, "one reading a day");

    // The card is used down to R$ 15 and the next day's reading finds it below R$ 20: one charge,
    // for two days later, announced once however many passes run.
    h.sim.ride(CARD, reais(55));
    advance(&h, 1);
    let passes = futures::future::join_all((0..3).map(|_| h.service.automatic().pass())).await;
    let scheduled: usize = passes.iter().map(|f| f.scheduled).sum();
    assert_eq!(scheduled, 1, "{passes:?}");
    let announced: Vec<String> = said(&h, conv)
        .await
        .into_iter()
        .filter(|t| t.contains("será debitada"))
        .collect();
    assert_eq!(announced.len(), 1, "{announced:?}");
    assert!(
        announced[0].contains("25/11/2026") && announced[0].contains("R$ 50,00"),
        "{announced:?}"
    );
    assert_eq!(h.sim.charges(CARD), 1, "nothing recharged before the debit");

    // On its date the payer's bank debits it; the pass reads it back, claims and credits it once.
    advance(&h, 2);
    let credited: usize = futures::future::join_all((0..3).map(|_| h.service.automatic().pass()))
        .await
        .iter()
        .map(|f| f.credited)
        .sum();
    assert_eq!(credited, 1);
    assert_eq!(h.sim.charges(CARD), 2, "the Pix recharge and one automatic one");
    let receipt = receipts(&h, conv).await;
    assert_eq!(receipt.len(), 1, "{receipt:?}");
    let charge = charges_of(&h, &rec).await.remove(0);
    assert_eq!(charge.status, RecurringChargeStatus::Creditada);
    let e2e = charge.end_to_end_id.clone().expect("paid");
    assert!(
        receipt[0].contains(&e2e) && receipt[0].contains("Novo saldo: R$ 65,00"),
        "{receipt:?}"
    );
    // The recharge went with the debit's endToEndId as its token, under a key of its own.
    let recharges: Vec<_> = h
        .sim
        .ledger()
        .into_iter()
        .filter(|e| e.sistema == "recarga")
        .collect();
    let sent = recharges.last().expect("sent");
    assert_ne!(
        sent.idempotency_key, recharges[0].idempotency_key,
        "a key of its own, not the chat recharge's"
    );
    assert_eq!(
        sent.body
            .as_ref()
            .and_then(|b| b.pointer("/meio_pagamento/token"))
            .and_then(|v| v.as_str()),
        Some(e2e.as_str())
    );
    // Counted where outcomes are: resolved by the bot, with no conversation and no model cost.
    let outcomes = h
        .store
        .outcomes_since(h.clock.now() - Duration::days(30))
        .await
        .expect("outcomes");
    let automatic: Vec<_> = outcomes
        .iter()
        .filter(|o| o.intencao == "recarga_automatica")
        .collect();
    assert_eq!(automatic.len(), 1, "{outcomes:?}");
    assert_eq!(
        automatic[0].desfecho,
        vt_store::records::Desfecho::ResolvidaPeloBot
    );
    assert_eq!(automatic[0].custo_micro_brl, Some(0));
    assert!(automatic[0].conversation_id.starts_with("recarga-automatica:"));
    // Later passes in the same cycle charge nothing more, even with the balance low again.
    h.sim.ride(CARD, reais(60));
    for _ in 0..3 {
        advance(&h, 1);
        h.service.automatic().pass().await;
    }
    assert_eq!(charges_of(&h, &rec).await.len(), 1);
    assert_eq!(h.sim.charges(CARD), 2);
}

#[tokio::test]
async fn a_date_recurrence_charges_once_a_month_for_three_months() {
    let h = harness().await;
    let conv = "c-auto-dia";
    let rec = authorised(&h, conv, &format!("recarrega 100 todo dia 5 no {CARD}")).await;
    assert_eq!(rec.kind, vt_store::records::RecurrenceKind::Dia(5));
    assert_eq!(rec.amount, reais(100));
    // Every day until February 10th, two passes a day (two instances' sweeps, a restart).
    for _ in 0..80 {
        advance(&h, 1);
        h.service.automatic().pass().await;
        h.service.automatic().pass().await;
    }
    let charges = charges_of(&h, &rec).await;
    let dues: Vec<&str> = charges.iter().map(|c| c.due_on.as_str()).collect();
    assert_eq!(dues, ["2026-12-05", "2027-01-05", "2027-02-05"]);
    assert!(
        charges
            .iter()
            .all(|c| c.status == RecurringChargeStatus::Creditada),
        "{charges:?}"
    );
    assert_eq!(h.sim.charges(CARD), 3);
    assert_eq!(receipts(&h, conv).await.len(), 3);
    let id_rec = rec.id_rec.expect("idRec");
    assert_eq!(
        h.sim.pix().recurring_charges(&id_rec).len(),
        3,
        "three charges at the provider"
    );
}

#[tokio::test]
async fn a_payer_without_funds_is_retried_by_the_providers_rules_and_told_once() {
    let h = harness().await;
    let conv = "c-auto-sem-saldo";
    // 1717171717: the payer's account has no funds on a charge's first attempt.
    let card = "1717171717";
    let rec = authorised(
        &h,
        conv,
        &format!("recarrega 40 no {card} sempre que ficar abaixo de 30"),
    )
    .await;
    h.sim.ride(card, reais(25));
    advance(&h, 1);
    assert_eq!(h.service.automatic().pass().await.scheduled, 1);
    advance(&h, 2);
    // The first attempt fails: a retry for the next day, asked once of two passes, told once.
    let figures = futures::future::join_all((0..2).map(|_| h.service.automatic().pass())).await;
    assert_eq!(figures.iter().map(|f| f.retried).sum::<usize>(), 1, "{figures:?}");
    h.service.automatic().pass().await;
    let told: Vec<String> = said(&h, conv)
        .await
        .into_iter()
        .filter(|t| t.contains("não tinha saldo suficiente"))
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].contains("26/11/2026"), "{told:?}");
    assert_eq!(h.sim.charges(card), 0, "nothing credited without the debit");
    let id_rec = rec.id_rec.clone().expect("idRec");
    let at_provider = h.sim.pix().recurring_charges(&id_rec).remove(0);
    let kinds: Vec<(&str, TentativaStatus)> = at_provider
        .tentativas
        .iter()
        .map(|t| (t.tipo.as_str(), t.status))
        .collect();
    assert_eq!(
        kinds,
        [
            ("AGND", TentativaStatus::Expirada),
            ("NTAG", TentativaStatus::Agendada)
        ]
    );
    // The retry's day: debited, credited once.
    advance(&h, 1);
    h.service.automatic().pass().await;
    h.service.automatic().pass().await;
    assert_eq!(h.sim.charges(card), 1);
    assert_eq!(receipts(&h, conv).await.len(), 1);
    assert_eq!(
        h.sim.pix().recurring_charges(&id_rec).remove(0).status,
        CobRStatus::Concluida
    );
}

#[tokio::test]
async fn cancelled_in_the_chat_or_in_the_bank_no_further_charge_is_made() {
    let h = harness().await;
    // In the chat: listed, then cancelled at the provider too.
    let conv = "c-auto-cancela";
    let rec = authorised(&h, conv, &format!("recarrega 100 todo dia 5 no {CARD}")).await;
    let listed = h.say(conv, "minhas recargas automáticas").await.reply_text();
    assert!(
        listed.contains("Cartão ****7890: R$ 100,00 todo dia 5 — ativa"),
        "{listed}"
    );
    let cancelled = h.say(conv, "cancelar recarga automática").await.reply_text();
    assert!(cancelled.contains("cancelei a recarga automática"), "{cancelled}");
    let id_rec = rec.id_rec.clone().expect("idRec");
    assert_eq!(
        h.sim.pix().recurrence(&id_rec).expect("rec").status,
        RecStatus::Cancelada
    );
    assert_eq!(
        only_recurrence(&h, conv).await.status,
        RecurrenceStatus::Cancelada
    );
    let none = h.say(conv, "cancelar recarga automática").await.reply_text();
    assert!(none.contains("não há nada para cancelar"), "{none}");

    // In the bank: the notice read back ends it, the card holder told.
    let other = "c-auto-banco";
    let second = authorised(
        &h,
        other,
        "recarrega 60 no 2345678901 quando o saldo ficar abaixo de 25",
    )
    .await;
    let second_rec = second.id_rec.clone().expect("idRec");
    assert!(h.sim.pix().cancel_by_payer(&second_rec));
    assert!(
        h.service
            .automatic()
            .rec_notice(&second_rec)
            .await
            .expect("read back")
    );
    let told = said(&h, other).await.pop().expect("told");
    assert!(told.contains("foi cancelada no seu banco"), "{told}");
    h.sim.ride("2345678901", reais(45));
    for _ in 0..40 {
        advance(&h, 1);
        h.service.automatic().pass().await;
    }
    assert!(charges_of(&h, &rec).await.is_empty());
    assert!(charges_of(&h, &second).await.is_empty());
    assert_eq!(h.sim.charges(CARD) + h.sim.charges("2345678901"), 0);
}

#[tokio::test]
async fn a_charge_cancelled_after_it_was_scheduled_is_not_debited() {
    let h = harness().await;
    let conv = "c-auto-agendada";
    let rec = authorised(&h, conv, &format!("recarrega 100 todo dia 5 no {CARD}")).await;
    // November 30th: December 5th's charge is scheduled; the holder cancels before its date.
    advance(&h, 8);
    assert_eq!(h.service.automatic().pass().await.scheduled, 1);
    h.say(conv, "cancela a recarga automática").await;
    let charge = charges_of(&h, &rec).await.remove(0);
    assert_eq!(charge.status, RecurringChargeStatus::Cancelada);
    advance(&h, 10);
    h.service.automatic().pass().await;
    assert_eq!(h.sim.charges(CARD), 0);
    let at_provider = h
        .sim
        .pix()
        .recurring_charges(&rec.id_rec.expect("idRec"))
        .remove(0);
    assert_eq!(at_provider.status, CobRStatus::Cancelada);
}

#[tokio::test]
async fn a_forged_notice_is_only_a_read() {
    let h = harness().await;
    let auto = h.service.automatic();
    assert!(
        !auto
            .rec_notice("RR0000000020261122naoexiste1")
            .await
            .expect("ignored")
    );
    assert!(
        !auto
            .cobr_notice("vr0000000000000000000000000000000000")
            .await
            .expect("ignored")
    );
    // A notice naming a real recurrence that nobody authorised: read, still waiting.
    h.say("c-auto-forjado", &format!("quero recarga automática no {CARD}"))
        .await;
    let rec = only_recurrence(&h, "c-auto-forjado").await;
    assert!(
        !auto
            .rec_notice(rec.id_rec.as_deref().expect("idRec"))
            .await
            .expect("read")
    );
    assert_eq!(
        only_recurrence(&h, "c-auto-forjado").await.status,
        RecurrenceStatus::Criada
    );
}

#[tokio::test]
async fn terms_outside_the_policy_are_refused_before_the_provider_hears_of_them() {
    let h = harness().await;
    let conv = "c-auto-limites";
    let over = h
        .say(conv, &format!("recarrega 900 todo dia 5 no {CARD}"))
        .await
        .reply_text();
    assert!(over.contains("precisa ficar entre R$ 1,00 e R$ 200,00"), "{over}");
    let day = h
        .say(conv, &format!("recarrega 50 todo dia 40 no {CARD}"))
        .await
        .reply_text();
    assert!(!day.contains("autorize"), "{day}");
    let conv_row = h.store.conversation(conv).await.expect("read").expect("conv");
    assert!(
        h.store
            .user_recurrences(&conv_row.tenant_id, &conv_row.user_id)
            .await
            .expect("recurrences")
            .is_empty()
    );
}
