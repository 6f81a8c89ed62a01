//! Cases: opened once, one claim wins, every transition logged.

use super::*;

pub(crate) async fn cases_open_once_one_claim_wins_and_every_transition_is_logged(store: Arc<dyn Store>) {
    let now = t("2026-11-23T10:00:00Z");
    let new = |id: &str, conv: &str, tenant: &str| NewCase {
        id: id.into(),
        conversation_id: conv.into(),
        tenant_id: tenant.into(),
        channel: "whatsapp".into(),
        reason: "pediu um atendente; cartão 1234567890".into(),
        case_file: json!({"cartoes": ["****7890"]}),
        notice_due_at: Some(now),
        ..NewCase::default()
    };
    let CaseOpened::Opened(first) = store
        .open_case(&new("caso-1", "c-1", "A"), now)
        .await
        .expect("open")
    else {
        panic!("the first case opens");
    };
    assert_eq!(
        (first.state, first.owner.as_deref()),
        (CaseState::Aguardando, None)
    );
    assert_eq!(first.case_file["cartoes"][0], "****7890");
    // Asked again while one is open: that one, not another.
    match store
        .open_case(&new("caso-2", "c-1", "A"), now)
        .await
        .expect("again")
    {
        CaseOpened::AlreadyOpen(c) => assert_eq!(c.id, "caso-1"),
        other => panic!("a second open case: {other:?}"),
    }
    store
        .open_case(&new("caso-b", "c-b", "B"), now)
        .await
        .expect("tenant B");
    // Two agents claim at once: exactly one wins, the other is told who has it.
    let (a, b) = tokio::join!(
        store.claim_case("caso-1", "fulana", now),
        store.claim_case("caso-1", "beltrano", now)
    );
    let outcomes = [a.expect("claim a"), b.expect("claim b")];
    let winners: Vec<&Case> = outcomes
        .iter()
        .filter_map(|c| match c {
            Claim::Claimed(case) => Some(case.as_ref()),
            _ => None,
        })
        .collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    let owner = winners[0].owner.clone().expect("owner");
    assert!(outcomes.contains(&Claim::TakenBy(owner.clone())), "{outcomes:?}");
    assert_eq!(
        store.open_case_of("c-1").await.expect("read").map(|c| c.state),
        Some(CaseState::EmAtendimento)
    );
    // The figures' times: the claimed one in A's; in every tenant's, B's waiting one too.
    let times = store
        .case_times(Some("A"), now - chrono::Duration::hours(1))
        .await
        .expect("times");
    assert_eq!(times.len(), 1);
    assert_eq!(
        (times[0].state, times[0].claimed_at),
        (CaseState::EmAtendimento, Some(now))
    );
    let all = store
        .case_times(None, now + chrono::Duration::hours(1))
        .await
        .expect("times");
    assert_eq!(
        all.iter().map(|c| c.state).collect::<Vec<_>>(),
        [CaseState::Aguardando],
        "before the period: only what still waits"
    );
    // Tenant A lists its own; the waiting case comes before the claimed one.
    let listed: Vec<String> = store
        .cases(None, 10)
        .await
        .expect("all")
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(listed, ["caso-b", "caso-1"]);
    let of_a: Vec<String> = store
        .cases(Some("A"), 10)
        .await
        .expect("A")
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(of_a, ["caso-1"]);
    assert_eq!(store.open_case_count().await.expect("count"), 2);
    // Handed back, once; then the conversation may open a new case.
    let back = store
        .close_case(
            "caso-1",
            &owner,
            CaseState::Devolvido,
            vt_store::Closing {
                note: Some("cliente orientado"),
                resolution: Some("orientado"),
            },
            now,
        )
        .await
        .expect("close")
        .expect("was open");
    assert_eq!(back.state, CaseState::Devolvido);
    assert_eq!(back.resolution.as_deref(), Some("orientado"));
    assert!(
        store
            .close_case("caso-1", &owner, CaseState::Encerrado, Default::default(), now)
            .await
            .expect("close again")
            .is_none()
    );
    assert_eq!(
        store.claim_case("caso-1", "outra", now).await.expect("late"),
        Claim::Closed(CaseState::Devolvido)
    );
    assert!(matches!(
        store
            .open_case(&new("caso-3", "c-1", "A"), now)
            .await
            .expect("reopen"),
        CaseOpened::Opened(_)
    ));
    let log: Vec<(String, String, Option<String>)> = store
        .case_events("caso-1")
        .await
        .expect("log")
        .into_iter()
        .map(|e| (e.who, e.what, e.detail))
        .collect();
    assert_eq!(
        log,
        [
            ("sistema".to_owned(), "aberto".to_owned(), None),
            (owner.clone(), "assumido".to_owned(), None),
            (
                owner,
                "devolvido".to_owned(),
                Some("cliente orientado".to_owned())
            ),
        ]
    );
    assert_eq!(store.case("nenhum").await.expect("read"), None);
    assert_eq!(
        store.claim_case("nenhum", "x", now).await.expect("claim"),
        Claim::NotFound
    );

    // Each due notice is taken once, however many take at once: the two waiting cases, then none.
    let (x, y) = tokio::join!(store.take_due_notice(now), store.take_due_notice(now));
    let mut taken: Vec<String> = [x.expect("x"), y.expect("y")]
        .into_iter()
        .flatten()
        .map(|c| c.id)
        .collect();
    if taken.len() < 2 {
        taken.extend(store.take_due_notice(now).await.expect("third").map(|c| c.id));
    }
    taken.sort();
    assert_eq!(taken, ["caso-3", "caso-b"]);
    assert_eq!(store.take_due_notice(now).await.expect("none left"), None);

    // A message held for a person: its line and the acknowledgement's mark go in the turn's commit.
    store
        .save_conversation(&conversation("c-1"), now)
        .await
        .expect("conversation");
    let caso_3 = store.case("caso-3").await.expect("read").expect("caso-3");
    assert!(!caso_3.acknowledged);
    let held = vt_store::records::CaseWrite::Held {
        line: caso_3.event(now, "cliente", "mensagem_cliente", Some("alô?".into())),
        acknowledged: true,
    };
    let exec = ExecutionRecord {
        execucao_id: "exec-held".into(),
        conversation_id: "c-1".into(),
        agent_id: "vt".into(),
        status: ExecutionStatus::Concluido,
        error: None,
        model_calls: vec![],
        started_at: now,
        finished_at: now,
    };
    let turn = TurnRecord {
        conversation: &conversation("c-1"),
        messages: &[],
        execution: &exec,
        events: &[],
        usage: None,
        flow_runs: &[],
        context: None,
        outbox: &[],
        accepted_message: None,
        case: Some(&held),
    };
    store.save_turn(turn, now).await.expect("held turn");
    assert!(
        store
            .case("caso-3")
            .await
            .expect("read")
            .expect("caso-3")
            .acknowledged
    );
    let lines = store.case_events("caso-3").await.expect("log");
    assert_eq!(lines.last().map(|e| e.detail.as_deref()), Some(Some("alô?")));

    // What an agent says: the message, its outbox item and its log line, together.
    store
        .save_conversation(&conversation("c-dito"), now)
        .await
        .expect("conversation");
    let said = ChatMessage::HumanAgent {
        name: "Fulana".into(),
        content: "Olá!".into(),
    };
    let item = NewOutboxItem {
        kind: "reply".into(),
        destination: "whatsapp".into(),
        payload: json!({"text": "Fulana: Olá!"}),
        max_attempts: 5,
        next_attempt_at: now,
        conversation_id: Some("c-dito".into()),
        status: OutboxStatus::Pending,
    };
    let line = vt_store::records::CaseEvent {
        case_id: "caso-3".into(),
        conversation_id: "c-dito".into(),
        at: now,
        who: "fulana".into(),
        what: "mensagem_atendente".into(),
        detail: Some("Olá!".into()),
    };
    store
        .say_in_case("c-dito", &said, &[item], Some(&line), now)
        .await
        .expect("said");
    let messages = store.messages("c-dito").await.expect("messages");
    assert_eq!(messages.last().map(|m| &m.message), Some(&said));
    assert_eq!(store.outbox_count(OutboxStatus::Pending).await.expect("count"), 1);
    assert!(
        store
            .case_events("caso-3")
            .await
            .expect("log")
            .iter()
            .any(|e| e.what == "mensagem_atendente")
    );
}
