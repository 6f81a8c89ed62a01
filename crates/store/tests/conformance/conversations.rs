//! A conversation, its messages, a turn written at once, its reads and its lock.

use super::*;

pub(crate) async fn conversation_round_trip(store: Arc<dyn Store>) {
    let mut c = conversation("c-round");
    store.save_conversation(&c, Utc::now()).await.expect("save");
    assert_eq!(
        store.conversation("c-round").await.expect("load"),
        Some(c.clone())
    );
    c.active_skill = "outra".into();
    c.state.remove("pendente");
    c.ended = true;
    c.handoff = None;
    store.save_conversation(&c, Utc::now()).await.expect("update");
    assert_eq!(store.conversation("c-round").await.expect("load"), Some(c));
    assert_eq!(store.conversation("nao-existe").await.expect("load"), None);
}

/// A person's previous conversation: the most recently updated one of the same user, agent, channel
/// and tenant, never the conversation asking, nor another person's, tenant's or channel's.
pub(crate) async fn a_persons_previous_conversation_is_their_last_on_the_channel(store: Arc<dyn Store>) {
    let at = |s: &str| t(&format!("2026-11-2{s}Z"));
    let saved = |id: &str, user: &str, tenant: &str, channel: &str, when: &str| {
        let mut c = conversation(id);
        c.user_id = user.into();
        c.tenant_id = tenant.into();
        c.channel = channel.into();
        c.memory
            .insert("cartoes_informados".into(), json!([format!("cartao-de-{id}")]));
        let store = store.clone();
        let when = at(when);
        async move {
            store.save_conversation(&c, when).await.expect("save");
            c
        }
    };
    saved("p-old", "ana", "t1", "http", "1T10:00:00").await;
    saved("p-last", "ana", "t1", "http", "2T10:00:00").await;
    saved("p-bia", "bia", "t1", "http", "3T10:00:00").await;
    saved("p-t2", "ana", "t2", "http", "3T11:00:00").await;
    saved("p-term", "ana", "t1", "terminal", "3T12:00:00").await;
    let asking = saved("p-new", "ana", "t1", "http", "4T10:00:00").await;
    let previous = store
        .previous_conversation(&asking)
        .await
        .expect("read")
        .expect("one");
    assert_eq!(previous.id, "p-last");
    assert_eq!(previous.memory["cartoes_informados"], json!(["cartao-de-p-last"]));
    let mut stranger = asking.clone();
    stranger.user_id = "carla".into();
    assert_eq!(store.previous_conversation(&stranger).await.expect("read"), None);
}

pub(crate) async fn messages_keep_their_order(store: Arc<dyn Store>) {
    for i in 0..30 {
        let conv = if i % 2 == 0 { "c-even" } else { "c-odd" };
        store
            .append_message(conv, None, &ChatMessage::user(format!("m{i}")), Utc::now())
            .await
            .expect("append");
    }
    let tool = ChatMessage::Tool {
        call_id: "call_1".into(),
        name: "x".into(),
        content: "instrução".into(),
        is_error: true,
    };
    store
        .append_message("c-even", Some("exec-1"), &tool, Utc::now())
        .await
        .expect("append");
    let even = store.messages("c-even").await.expect("messages");
    let texts: Vec<String> = even
        .iter()
        .filter_map(|m| match &m.message {
            ChatMessage::User { content } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        texts,
        (0..30).step_by(2).map(|i| format!("m{i}")).collect::<Vec<_>>()
    );
    assert_eq!(
        even.last().map(|m| (&m.message, m.execucao_id.as_deref())),
        Some((&tool, Some("exec-1")))
    );
    assert!(even.windows(2).all(|w| w[0].id < w[1].id));
}

pub(crate) async fn a_turn_is_written_at_once(store: Arc<dyn Store>) {
    let conv = conversation("c-turn");
    store.save_conversation(&conv, Utc::now()).await.expect("save");
    let messages = vec![
        ChatMessage::Assistant {
            content: None,
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "consultar_saldo".into(),
                arguments: "{\"cartao\":\"1\"}".into(),
            }],
        },
        ChatMessage::Tool {
            call_id: "call_1".into(),
            name: "consultar_saldo".into(),
            content: "saldo 50".into(),
            is_error: false,
        },
        ChatMessage::assistant("Seu saldo é R$ 50,00."),
    ];
    let exec = execution("exec-turn", "c-turn");
    let events = vec![
        TurnEvent::SkillChanged {
            from: "a".into(),
            to: "b".into(),
            reason: "r".into(),
        },
        TurnEvent::Reply(Reply {
            text: "Seu saldo é R$ 50,00.".into(),
            files: vec![],
        }),
    ];
    let usage = UsageRecord {
        conversation_id: "c-turn".into(),
        intent_key: "consultar_saldo".into(),
        action_type: "deterministic".into(),
        tokens_input: 0,
        tokens_output: 0,
        execution_time_ms: 12,
        was_keyword_matched: true,
        created_at: Utc::now(),
        audio_ms: 0,
        tokens_cached: 0,
        tenant_id: "default".into(),
        custo_micro_brl: Some(0),
        marcas: String::new(),
    };
    let mut changed = conv.clone();
    changed.state.insert("ultimo_saldo".into(), json!(50.0));
    let now = t("2026-11-22T10:00:02Z");
    // Every part of a turn, written as one query (one hop on SQLite, one statement on PostgreSQL).
    let run = |id: &str| FlowRunRecord {
        parent_execucao_id: Some("exec-turn".into()),
        execucao_id: id.into(),
        status: RunStatus::Concluido,
        input: json!({"cartao": "1111111111"}),
        stages: vec![
            ("rf01_preparar_consulta".into(), json!({"a": 1})),
            ("rf02_executar_consulta".into(), json!({"status": 200})),
        ],
        created_at: now,
    };
    let context = |facts: &[&str]| ConversationContext {
        key_facts: facts.iter().map(|f| (*f).to_owned()).collect(),
        turn_count: facts.len() as i64,
        last_intent: Some("consultar_saldo".into()),
        ..ConversationContext::empty("c-turn", "u-1", now)
    };
    let reply = |n: i32| NewOutboxItem {
        kind: "channel_reply".into(),
        destination: "whatsapp".into(),
        payload: json!({"texto": n}),
        max_attempts: 5,
        next_attempt_at: now,
        conversation_id: Some("c-turn".into()),
        status: OutboxStatus::Pending,
    };
    let (runs, first_context, replies) = (
        [run("exec-turn-run")],
        context(&["saldo: 50"]),
        [reply(1), reply(2)],
    );
    let record = TurnRecord {
        conversation: &changed,
        messages: &messages,
        execution: &exec,
        events: &events,
        usage: Some(&usage),
        flow_runs: &runs,
        context: Some(&first_context),
        outbox: &replies,
        accepted_message: None,
        case: None,
    };
    store.save_turn(record, now).await.expect("save turn");
    let (loaded, loaded_events) = store.execution("exec-turn").await.expect("load").expect("exists");
    assert_eq!(loaded, exec);
    assert_eq!(loaded_events, events);
    assert_eq!(
        store.executions("c-turn").await.expect("list"),
        vec![(exec.clone(), events.clone())]
    );
    let stored: Vec<ChatMessage> = store
        .messages("c-turn")
        .await
        .expect("messages")
        .into_iter()
        .map(|m| m.message)
        .collect();
    assert_eq!(stored, messages);
    // An event stream's look reads only what came after the last message it has.
    let all = store.messages("c-turn").await.expect("messages");
    let after_first = store.messages_after("c-turn", all[0].id).await.expect("after");
    assert_eq!(after_first, all[1..].to_vec());
    let last = all.last().expect("a message").id;
    assert!(
        store
            .messages_after("c-turn", last)
            .await
            .expect("after")
            .is_empty()
    );
    assert_eq!(
        store
            .conversation("c-turn")
            .await
            .expect("load")
            .expect("exists")
            .state["ultimo_saldo"],
        json!(50.0)
    );
    assert_eq!(
        store.flow_run("exec-turn-run").await.expect("run"),
        Some(run("exec-turn-run"))
    );
    assert_eq!(
        store.context("c-turn").await.expect("context"),
        Some(first_context.clone())
    );
    let queued = store
        .outbox_items(OutboxStatus::Pending, 10)
        .await
        .expect("outbox");
    let payloads: Vec<_> = queued.iter().map(|i| i.payload.clone()).collect();
    assert_eq!(payloads, [json!({"texto": 1}), json!({"texto": 2})]);
    // A second write of the same execution fails as a whole: nothing of it is added — not its
    // messages, usage, conversation state, flow run, context nor replies.
    let mut changed_again = changed.clone();
    changed_again.state.insert("ultimo_saldo".into(), json!(10.0));
    let (runs_again, context_again, replies_again) = (
        [run("exec-turn-run-2")],
        context(&["saldo: 50", "saldo: 10"]),
        [reply(3)],
    );
    let again = TurnRecord {
        conversation: &changed_again,
        messages: &messages,
        execution: &exec,
        events: &events,
        usage: Some(&usage),
        flow_runs: &runs_again,
        context: Some(&context_again),
        outbox: &replies_again,
        accepted_message: None,
        case: None,
    };
    assert!(store.save_turn(again, now).await.is_err());
    assert_eq!(
        store.messages("c-turn").await.expect("messages").len(),
        3,
        "the failed turn left no messages behind"
    );
    let summary = store
        .usage_summary(Utc::now() - chrono::Duration::days(7))
        .await
        .expect("summary");
    assert_eq!(
        summary
            .iter()
            .filter(|r| r.intent_key == "consultar_saldo")
            .map(|r| r.turns)
            .sum::<i64>(),
        1
    );
    assert_eq!(
        store
            .conversation("c-turn")
            .await
            .expect("load")
            .expect("exists")
            .state["ultimo_saldo"],
        json!(50.0)
    );
    assert_eq!(store.flow_run("exec-turn-run-2").await.expect("run"), None);
    assert_eq!(
        store.context("c-turn").await.expect("context"),
        Some(first_context)
    );
    assert_eq!(store.outbox_count(OutboxStatus::Pending).await.expect("count"), 2);
}

/// What a turn reads before it runs — the conversation, its compressed context and its open case —
/// comes in one call, each part only when there is one.
pub(crate) async fn a_turns_reads_bring_its_context_and_open_case(store: Arc<dyn Store>) {
    let now = t("2026-11-22T10:00:00Z");
    let none = store.turn_reads("c-lido").await.expect("reads");
    assert!(none.conversation.is_none() && none.context.is_none() && none.open_case.is_none());
    for id in ["c-lido", "c-outro"] {
        store
            .save_conversation(&conversation(id), now)
            .await
            .expect("save");
    }
    let empty = store.turn_reads("c-lido").await.expect("reads");
    assert_eq!(empty.conversation, Some(conversation("c-lido")));
    assert!(empty.context.is_none() && empty.open_case.is_none());
    let context = ConversationContext {
        key_facts: vec!["saldo: 50".into()],
        turn_count: 1,
        ..ConversationContext::empty("c-lido", "u-1", now)
    };
    store.save_context(&context).await.expect("context");
    let reads = store.turn_reads("c-lido").await.expect("reads");
    assert_eq!(reads.context.as_ref(), Some(&context));
    assert!(reads.open_case.is_none());
    let case = |id: &str, conv: &str| NewCase {
        id: id.into(),
        conversation_id: conv.into(),
        tenant_id: "A".into(),
        channel: "whatsapp".into(),
        reason: "pediu um atendente".into(),
        case_file: json!({}),
        notice_due_at: None,
        ..NewCase::default()
    };
    store
        .open_case(&case("caso-lido", "c-lido"), now)
        .await
        .expect("open");
    store
        .open_case(&case("caso-outro", "c-outro"), now)
        .await
        .expect("open");
    let reads = store.turn_reads("c-lido").await.expect("reads");
    assert_eq!(reads.context.as_ref(), Some(&context));
    assert_eq!(reads.open_case.map(|c| c.id), Some("caso-lido".to_owned()));
    let other = store.turn_reads("c-outro").await.expect("reads");
    assert!(
        other.context.is_none(),
        "another conversation's context is not read"
    );
    assert_eq!(other.open_case.map(|c| c.id), Some("caso-outro".to_owned()));
    store
        .close_case("caso-lido", "ana", CaseState::Encerrado, Default::default(), now)
        .await
        .expect("close");
    let reads = store.turn_reads("c-lido").await.expect("reads");
    assert!(reads.open_case.is_none(), "a closed case is not open");
    assert_eq!(reads.context, Some(context));
    assert_eq!(reads.conversation.map(|c| c.id), Some("c-lido".to_owned()));
}

pub(crate) async fn task_runs_round_trip(store: Arc<dyn Store>) {
    let mut task = TaskRun {
        id: "task-1".into(),
        conversation_id: "c-task".into(),
        user_id: "u-1".into(),
        intent_key: "analisar".into(),
        status: vt_store::records::TaskStatus::Running,
        plan: Some(json!({"steps": [{"type": "deterministic"}]})),
        steps: json!([]),
        final_result: None,
        tokens_used: 0,
        error_message: None,
        created_at: t("2026-11-22T10:00:00Z"),
        completed_at: None,
    };
    store.save_task_run(&task).await.expect("save");
    task.status = vt_store::records::TaskStatus::Completed;
    task.steps = json!([{"resultado": "ok"}]);
    task.final_result = Some("pronto".into());
    task.tokens_used = 42;
    task.completed_at = Some(t("2026-11-22T10:00:05Z"));
    store.save_task_run(&task).await.expect("update");
    assert_eq!(store.task_runs("c-task").await.expect("list"), vec![task]);
}

pub(crate) async fn context_round_trip(store: Arc<dyn Store>) {
    let mut ctx = ConversationContext {
        conversation_id: "c-ctx".into(),
        user_id: "u-1".into(),
        summary: None,
        key_facts: vec!["cartão ****7890".into()],
        last_intent: Some("consultar_saldo".into()),
        turn_count: 1,
        updated_at: t("2026-11-22T10:00:00Z"),
    };
    store.save_context(&ctx).await.expect("save");
    ctx.summary = Some("Usuária consultou o saldo.".into());
    ctx.key_facts.push("saldo R$ 50,00".into());
    ctx.turn_count = 5;
    store.save_context(&ctx).await.expect("update");
    assert_eq!(store.context("c-ctx").await.expect("load"), Some(ctx));
}

pub(crate) async fn turn_locks_serialize_one_conversation(store: Arc<dyn Store>) {
    let held = store.lock_conversation("c-lock").await.expect("lock");
    let other = store.clone();
    let waiter = tokio::spawn(async move { other.lock_conversation("c-lock").await.map(|_| ()) });
    let free = store
        .lock_conversation("c-other")
        .await
        .expect("another conversation is not blocked");
    drop(free);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "the second turn waits");
    drop(held);
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("released")
        .expect("join")
        .expect("locked");
}
