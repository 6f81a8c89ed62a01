//! Recharges whose outcome came late, at the service with a clock moved by hand: the follow-up sends
//! the same request under the same key, settles the attempt and the run and tells the card holder; one
//! that never resolves goes to a person at the deadline. The processes' side (kill -9 while sending,
//! two instances on PostgreSQL) is in `processes.rs`.

use chrono::{DateTime, Duration, Utc};
use vt_domain::tools::VtSettings;
use vt_simulators::systems::Efeito;
use vt_store::Store;
use vt_store::sqlite::SqliteStore;

use crate::support::{ChatHarness, chat_harness};

fn at(h: &ChatHarness) -> DateTime<Utc> {
    h.clock.now()
}

fn later(h: &ChatHarness, by: Duration) {
    h.clock.set(at(h) + by);
}

/// The recharge requests the simulator received for `card`: `(key, efeito)`.
fn recharge_requests(h: &ChatHarness, card: &str) -> Vec<(Option<String>, Option<Efeito>)> {
    h.sim
        .ledger()
        .into_iter()
        .filter(|e| e.sistema == "recarga" && e.cartao.as_deref() == Some(card))
        .map(|e| (e.idempotency_key, e.efeito))
        .collect()
}

async fn last_text(store: &dyn Store, conv: &str) -> String {
    store
        .messages(conv)
        .await
        .expect("messages")
        .last()
        .and_then(|m| m.message.text().map(str::to_owned))
        .unwrap_or_default()
}

async fn confirmed_recharge(h: &ChatHarness, conv: &str, card: &str) -> String {
    h.say(conv, &format!("recarregar 50 reais no cartão {card} via pix"))
        .await;
    h.say(conv, "sim").await.reply_text()
}

#[tokio::test]
async fn a_recharge_answered_202_resolves_on_its_follow_up_charged_once_and_the_card_holder_is_told() {
    let h = chat_harness(None, VtSettings::default()).await;
    let said = confirmed_recharge(&h, "c-tarde", "6161616161").await;
    assert!(said.contains("em processamento"), "{said}");
    assert_eq!(h.recharges(), 0, "202: nothing charged yet");
    let attempts = h.store.recharge_attempts(10).await.expect("attempts");
    assert_eq!(attempts[0].status.as_str(), "pendente");

    later(&h, Duration::seconds(30));
    assert_eq!(
        h.service.followups().run_due_followups().await,
        0,
        "the first check is a minute after the send"
    );
    later(&h, Duration::seconds(31));
    assert_eq!(h.service.followups().run_due_followups().await, 1);

    let requests = recharge_requests(&h, "6161616161");
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0].0, requests[1].0, "the same key");
    assert_eq!(h.recharges(), 1, "charged once, on the follow-up");
    let told = last_text(h.store.as_ref(), "c-tarde").await;
    assert!(
        told.contains("foi aprovada") && told.contains("****6161") && !told.contains("6161616161"),
        "{told}"
    );
    let attempt = &h.store.recharge_attempts(10).await.expect("attempts")[0];
    assert_eq!((attempt.status.as_str(), attempt.sends), ("aprovada", 2));
    let settled = &h.store.followups(false, 10).await.expect("followups")[0];
    assert_eq!(settled.outcome.as_deref(), Some("aprovada"));
    assert_eq!(settled.checks, 1);
    let run = h
        .store
        .flow_run(&attempt.attempt.execucao_id)
        .await
        .expect("read")
        .expect("the chat's flow run");
    assert_eq!(run.status.as_str(), "concluido");
    let (etapa, saida) = run.stages.last().expect("stages");
    assert_eq!(etapa, vt_agent::testkit::FOLLOW_UP_STAGE);
    assert_eq!(saida["status_recarga"], "aprovada");
    // The run's output is built from its stages: the follow-up is its result now.
    let output = vt_agent::FlowOutput::of_run(&run);
    assert_eq!(output.status, vt_agent::FlowStatus::Concluido);
    assert_eq!(output.resultado["status_recarga"], "aprovada");

    // Nothing more to do, however late.
    later(&h, Duration::hours(3));
    assert_eq!(h.service.followups().run_due_followups().await, 0);
    assert_eq!(recharge_requests(&h, "6161616161").len(), 2);
}

#[tokio::test]
async fn a_recharge_that_never_resolves_is_checked_with_backoff_then_goes_to_a_person() {
    let h = chat_harness(None, VtSettings::default()).await;
    let sent_at = at(&h);
    confirmed_recharge(&h, "c-nunca", "6666666666").await;
    let mut waits = Vec::new();
    loop {
        let pending = h.store.followups(true, 10).await.expect("followups");
        let Some(next) = pending.first() else { break };
        waits.push((next.next_check_at - sent_at).num_minutes());
        h.clock.set(next.next_check_at);
        assert_eq!(h.service.followups().run_due_followups().await, 1);
        assert!(waits.len() < 20, "the follow-ups end: {waits:?}");
    }
    assert_eq!(
        waits,
        [1, 3, 7, 15, 31, 60],
        "1, 2, 4, 8, 16 minutes apart, up to the deadline"
    );
    assert_eq!(h.recharges(), 0);
    assert_eq!(recharge_requests(&h, "6666666666").len(), 1 + waits.len());

    let case = h
        .store
        .open_case_of("c-nunca")
        .await
        .expect("read")
        .expect("a case for a person");
    let file = case.case_file.to_string();
    assert!(
        file.contains("****6666") && !file.contains("6666666666"),
        "{file}"
    );
    let attempt = &h.store.recharge_attempts(10).await.expect("attempts")[0];
    assert_eq!(
        case.case_file["recarga"]["chave_idempotencia"],
        attempt.attempt.idempotency_key
    );
    assert_eq!(
        attempt.status.as_str(),
        "pendente",
        "still unknown: a person finds out"
    );
    // The explanation first, then the case's protocol line (it came first, bare, on 80722d3).
    let said = crate::support::said(&h, "c-nunca").await;
    let [.., explained, protocol] = said.as_slice() else {
        panic!("{said:?}")
    };
    assert!(explained.contains("Um atendente vai verificar"), "{said:?}");
    assert!(protocol.starts_with("Protocolo do seu atendimento"), "{said:?}");
    let settled = &h.store.followups(false, 10).await.expect("followups")[0];
    assert_eq!(settled.outcome.as_deref(), Some(vt_store::followup::OUTCOME_CASE));

    later(&h, Duration::hours(5));
    assert_eq!(
        h.service.followups().run_due_followups().await,
        0,
        "nothing is sent again"
    );
    assert_eq!(recharge_requests(&h, "6666666666").len(), 1 + waits.len());
}

#[tokio::test]
async fn a_flows_late_outcome_settles_its_run_and_notifies_its_recipient_as_rf10_would() {
    let store: std::sync::Arc<dyn Store> =
        std::sync::Arc::new(SqliteStore::connect("sqlite::memory:").await.expect("store"));
    let h = crate::support::chat_harness_on(store, None, VtSettings::default()).await;
    let input = r#"{"cartao": "6161616161", "destinatario": {"tipo": "email", "id": "ana@example.com"},
        "recarga": {"valor": 30, "meio_pagamento": {"tipo": "pix", "token": "tok_flow_9"}}}"#;
    let ran = h
        .service
        .flows()
        .run_flow(input, vt_agent::FlowOptions::default())
        .await
        .expect("ran");
    assert_eq!(ran.output.status.as_str(), "pendente");
    let notices_before = h.sim.deliveries();

    later(&h, Duration::minutes(1));
    assert_eq!(h.service.followups().run_due_followups().await, 1);
    assert_eq!(h.recharges(), 1);
    assert_eq!(
        h.sim.deliveries(),
        notices_before + 1,
        "the recipient is told once"
    );
    let notice = h
        .sim
        .ledger()
        .into_iter()
        .rfind(|e| e.sistema == "notificacao")
        .and_then(|e| e.body)
        .expect("notice");
    let text = notice.to_string();
    assert!(
        text.contains("aprovada") && text.contains("ana@example.com"),
        "{text}"
    );
    let run = h
        .store
        .flow_run(&ran.output.execucao_id)
        .await
        .expect("read")
        .expect("run");
    assert_eq!(run.status.as_str(), "concluido");
    assert_eq!(
        run.stages.last().map(|s| s.0.as_str()),
        Some(vt_agent::testkit::FOLLOW_UP_STAGE)
    );
    // The request with the token is gone from the store once the outcome is known.
    let kept = h.store.followups(false, 10).await.expect("followups");
    assert_eq!(kept[0].outcome.as_deref(), Some("aprovada"));
}
