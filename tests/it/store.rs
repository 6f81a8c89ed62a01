//! One conformance suite, two backends: every test runs against SQLite and, when
//! `VT_TEST_POSTGRES_URL` is set (`.ci/run` sets it), against PostgreSQL in a private schema.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::postgres::PgConnectOptions;
use vt_agent::{
    Case, CaseOpened, CaseState, Claim, ConversationContext, ConversationStore as _, FlowRunRecord,
    IdempotencyPut, IdempotencyRecord, IntentRecord, LineStatus, NewCase, NewOutboxItem, OutboxStatus,
    PgStore, RunStatus, SqliteStore, Store, StoreUsage as Usage, TaskRun, TurnRecord, UsageRecord,
};
use vt_agent::{ChatMessage, ToolCall};
use vt_agent::{
    Conversation, ExecutionRecord, ExecutionStatus, Handoff, ModelCallRecord, Participant, Reply, TurnEvent,
};
use vt_domain::journal::{Confirmation, Consumption, RechargeAttempt};

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).expect("time").into()
}

fn conversation(id: &str) -> Conversation {
    let mut c = Conversation::new(
        id.into(),
        "vt",
        "atendimento".into(),
        Participant {
            user_id: "u-1".into(),
            user_login: "maria".into(),
            channel: "terminal".into(),
        },
    );
    c.state
        .insert("pendente".into(), json!({"valor": 50.0, "cartao": "1234567890"}));
    c.memory.insert("entrada".into(), json!({"cartao": "1"}));
    c.window = vec![ChatMessage::user("oi"), ChatMessage::assistant("olá")];
    c.handoff = Some(Handoff {
        from_skill: "a".into(),
        response: "resposta".into(),
    });
    c
}

fn execution(id: &str, conv: &str) -> ExecutionRecord {
    ExecutionRecord {
        execucao_id: id.into(),
        conversation_id: conv.into(),
        agent_id: "vt".into(),
        status: ExecutionStatus::Falhou,
        error: Some("modelo indisponível".into()),
        model_calls: vec![ModelCallRecord {
            skill: "atendimento".into(),
            model: "m".into(),
            tokens_input: 120,
            tokens_output: 30,
            tokens_cached: 0,
            tokens_cache_write: 0,
            latencia_ms: 450,
            stop_reason: "tool_use".into(),
            attempts: 2,
            error: None,
            request: None,
        }],
        started_at: t("2026-11-22T10:00:00Z"),
        finished_at: t("2026-11-22T10:00:01.250Z"),
    }
}

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
    let summary = store.usage_summary().await.expect("summary");
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
        .close_case("caso-lido", "ana", CaseState::Encerrado, None, now)
        .await
        .expect("close");
    let reads = store.turn_reads("c-lido").await.expect("reads");
    assert!(reads.open_case.is_none(), "a closed case is not open");
    assert_eq!(reads.context, Some(context));
    assert_eq!(reads.conversation.map(|c| c.id), Some("c-lido".to_owned()));
}

pub(crate) async fn flow_runs_keep_their_stages(store: Arc<dyn Store>) {
    let run = FlowRunRecord {
        parent_execucao_id: None,
        execucao_id: "exec-flow".into(),
        status: RunStatus::Concluido,
        input: json!({"cartao": "1111111111"}),
        stages: vec![
            ("rf01_preparar_consulta".into(), json!({"a": 1})),
            ("rf02_executar_consulta".into(), json!({"status": 200})),
        ],
        created_at: t("2026-11-22T10:00:00Z"),
    };
    store.save_flow_run(&run).await.expect("save");
    assert_eq!(store.flow_run("exec-flow").await.expect("load"), Some(run));
    assert_eq!(store.flow_run("nope").await.expect("load"), None);
}

/// A batch group: many runs, their stages and lines in one call (multi-row statements), then a rerun of
/// a line that replaces its result.
pub(crate) async fn a_shared_batchs_chunks_go_to_one_instance_each_and_a_dead_ones_come_back(
    store: Arc<dyn Store>,
) {
    let now = t("2026-11-22T10:00:00Z");
    let mut job = crate::support::batch_job("lote-partilhado", "empresa-a", now);
    job.source = Some("{}".into());
    store.open_batch(&job).await.expect("batch");
    assert_eq!(
        store.claimable_batches(now).await.expect("claimable"),
        ["lote-partilhado"],
        "not split yet: anyone may start it"
    );
    store.share_batch("lote-partilhado", 3).await.expect("share");
    store
        .share_batch("lote-partilhado", 3)
        .await
        .expect("again: nothing changes");
    let lease = now + chrono::Duration::seconds(15);
    let (a, b) = tokio::join!(
        store.claim_batch_chunk("lote-partilhado", "a", now, lease),
        store.claim_batch_chunk("lote-partilhado", "b", now, lease)
    );
    let (a, b) = (a.expect("a").expect("a chunk"), b.expect("b").expect("b chunk"));
    assert_ne!(a, b, "one chunk each");
    let c = store
        .claim_batch_chunk("lote-partilhado", "c", now, lease)
        .await
        .expect("c")
        .expect("the third");
    assert!(
        store
            .claim_batch_chunk("lote-partilhado", "d", now, lease)
            .await
            .expect("d")
            .is_none(),
        "all leased"
    );
    assert!(store.claimable_batches(now).await.expect("claimable").is_empty());
    assert_eq!(
        store
            .batch_chunks_open("lote-partilhado", now)
            .await
            .expect("open"),
        (3, 3)
    );
    assert!(
        !store
            .renew_batch_chunk("lote-partilhado", a, "b", lease)
            .await
            .expect("renew")
    );
    // a is done; b gives its chunk back unfinished, to retry in a minute; c dies (its lease runs out).
    store
        .release_batch_chunk("lote-partilhado", a, "a", true, now)
        .await
        .expect("done");
    let retry = now + chrono::Duration::minutes(1);
    store
        .release_batch_chunk("lote-partilhado", b, "b", false, retry)
        .await
        .expect("back");
    let later = lease + chrono::Duration::seconds(1);
    assert_eq!(
        store
            .claim_batch_chunk(
                "lote-partilhado",
                "d",
                later,
                later + chrono::Duration::seconds(15)
            )
            .await
            .expect("d"),
        Some(c),
        "the dead instance's chunk, not the one waiting to be retried"
    );
    assert_eq!(
        store
            .claim_batch_chunk(
                "lote-partilhado",
                "d",
                retry,
                retry + chrono::Duration::seconds(15)
            )
            .await
            .expect("d"),
        Some(b)
    );
    assert_eq!(
        store
            .batch_chunks_open("lote-partilhado", retry)
            .await
            .expect("open"),
        (2, 1),
        "b's and c's open; c's new lease has run out by then too"
    );
    store
        .save_batch_lines(
            "lote-partilhado",
            &[
                vt_agent::BatchLine {
                    line: 4,
                    status: LineStatus::Concluido,
                    result: json!({}),
                },
                vt_agent::BatchLine {
                    line: 40,
                    status: LineStatus::Concluido,
                    result: json!({}),
                },
            ],
            &[],
            now,
        )
        .await
        .expect("lines");
    assert_eq!(
        store.ended_lines("lote-partilhado", 1, 32).await.expect("ended"),
        [4]
    );
    // Every chunk done, the job not marked finished (its last instance died in between): an instance
    // joins it, to finish it.
    for (chunk, owner) in [(b, "d"), (c, "d")] {
        store
            .release_batch_chunk("lote-partilhado", chunk, owner, true, retry)
            .await
            .expect("done");
    }
    assert_eq!(
        store
            .batch_chunks_open("lote-partilhado", retry)
            .await
            .expect("open"),
        (0, 0)
    );
    assert_eq!(
        store.claimable_batches(retry).await.expect("claimable"),
        ["lote-partilhado"]
    );
    store
        .finish_batch("lote-partilhado", retry)
        .await
        .expect("finish");
    assert_eq!(
        store
            .batch_chunks_open("lote-partilhado", retry)
            .await
            .expect("open"),
        (0, 0)
    );
    assert!(
        store
            .claimable_batches(retry)
            .await
            .expect("claimable")
            .is_empty()
    );
}

pub(crate) async fn a_batch_group_stores_every_run_stage_and_line(store: Arc<dyn Store>) {
    let now = t("2026-11-22T10:00:00Z");
    store
        .open_batch(&crate::support::batch_job("lote-grupo", "empresa-a", now))
        .await
        .expect("batch");
    let run = |id: &str, stages: usize| FlowRunRecord {
        parent_execucao_id: None,
        execucao_id: id.into(),
        status: RunStatus::Concluido,
        input: json!({"cartao": id}),
        stages: (0..stages)
            .map(|i| (format!("rf{:02}", i + 1), json!({"etapa": i, "de": id})))
            .collect(),
        created_at: now,
    };
    let runs = vec![run("exec-g1", 10), run("exec-g2", 3)];
    let line = |n: i64, status: LineStatus| vt_agent::BatchLine {
        line: n,
        status,
        result: json!({"line": n, "status": status.as_str()}),
    };
    let lines = vec![
        line(1, LineStatus::Concluido),
        line(2, LineStatus::Concluido),
        line(3, LineStatus::Erro),
    ];
    store
        .save_batch_lines("lote-grupo", &lines, &runs, now)
        .await
        .expect("group");
    for r in &runs {
        assert_eq!(
            store.flow_run(&r.execucao_id).await.expect("run").as_ref(),
            Some(r)
        );
    }
    assert_eq!(store.batch_lines("lote-grupo").await.expect("lines"), lines);
    // The line that failed, run again.
    store
        .save_batch_lines("lote-grupo", &[line(3, LineStatus::Concluido)], &[], now)
        .await
        .expect("rerun");
    assert_eq!(
        store.batch_lines("lote-grupo").await.expect("lines"),
        [
            line(1, LineStatus::Concluido),
            line(2, LineStatus::Concluido),
            line(3, LineStatus::Concluido)
        ]
    );
}

pub(crate) async fn task_runs_round_trip(store: Arc<dyn Store>) {
    let mut task = TaskRun {
        id: "task-1".into(),
        conversation_id: "c-task".into(),
        user_id: "u-1".into(),
        intent_key: "analisar".into(),
        status: vt_agent::TaskStatus::Running,
        plan: Some(json!({"steps": [{"type": "deterministic"}]})),
        steps: json!([]),
        final_result: None,
        tokens_used: 0,
        error_message: None,
        created_at: t("2026-11-22T10:00:00Z"),
        completed_at: None,
    };
    store.save_task_run(&task).await.expect("save");
    task.status = vt_agent::TaskStatus::Completed;
    task.steps = json!([{"resultado": "ok"}]);
    task.final_result = Some("pronto".into());
    task.tokens_used = 42;
    task.completed_at = Some(t("2026-11-22T10:00:05Z"));
    store.save_task_run(&task).await.expect("update");
    assert_eq!(store.task_runs("c-task").await.expect("list"), vec![task]);
}

pub(crate) async fn usage_summary_covers_seven_days(store: Arc<dyn Store>) {
    let now = Utc::now();
    let usage = |intent: &str, tokens: i64, ms: i64, keyword: bool, days_ago: i64| UsageRecord {
        conversation_id: "c-usage".into(),
        intent_key: intent.into(),
        action_type: if tokens == 0 { "deterministic" } else { "reasoning" }.into(),
        tokens_input: tokens,
        tokens_output: tokens / 2,
        execution_time_ms: ms,
        was_keyword_matched: keyword,
        created_at: now - chrono::Duration::days(days_ago),
        audio_ms: 0,
        tokens_cached: 0,
        tenant_id: "default".into(),
        custo_micro_brl: Some(0),
        marcas: String::new(),
    };
    for u in [
        usage("saldo_x", 0, 10, true, 0),
        usage("saldo_x", 0, 30, true, 1),
        usage("saldo_x", 0, 1000, true, 8),
        usage("chat_x", 100, 500, false, 2),
    ] {
        store.record_usage(&u).await.expect("record");
    }
    let rows = store.usage_summary().await.expect("summary");
    let saldo = rows
        .iter()
        .find(|r| r.intent_key == "saldo_x")
        .expect("saldo row");
    assert_eq!(
        (saldo.turns, saldo.zero_token_turns, saldo.keyword_matched),
        (2, 2, 2),
        "the 8-day-old turn is out"
    );
    assert!((saldo.mean_time_ms - 20.0).abs() < 0.01);
    let chat = rows.iter().find(|r| r.intent_key == "chat_x").expect("chat row");
    assert_eq!(
        (chat.tokens_input, chat.tokens_output, chat.zero_token_turns),
        (100, 50, 0)
    );
}

pub(crate) async fn what_tenants_spent_sums_turns_and_paid_messages_with_a_price(store: Arc<dyn Store>) {
    let month = t("2026-11-01T03:00:00Z");
    let turn = |tenant: &str, micro: Option<i64>, at: &str| UsageRecord {
        conversation_id: format!("c-{tenant}"),
        intent_key: "general_chat".into(),
        action_type: "reasoning".into(),
        created_at: t(at),
        tenant_id: tenant.into(),
        custo_micro_brl: micro,
        ..Default::default()
    };
    for u in [
        turn("acme", Some(10_000), "2026-11-10T12:00:00Z"),
        turn("acme", None, "2026-11-10T12:01:00Z"),
        turn("acme", Some(99_000), "2026-10-31T12:00:00Z"),
        turn("beta", Some(1), "2026-11-20T12:00:00Z"),
    ] {
        store.record_usage(&u).await.expect("usage");
    }
    let template = vt_agent::MessageCost {
        tenant_id: "acme".into(),
        conversation_id: Some("c-acme".into()),
        channel: "whatsapp".into(),
        category: "utility".into(),
        custo_micro_brl: Some(34_000),
        created_at: t("2026-11-11T12:00:00Z"),
        // A flow's notice names its run (and reads back with it: `since[0] == template`).
        execucao_id: Some("exec-aviso".into()),
    };
    store.record_message_cost(&template).await.expect("message");
    store
        .record_message_cost(&vt_agent::MessageCost {
            custo_micro_brl: None,
            ..template.clone()
        })
        .await
        .expect("message");
    assert_eq!(store.spent_since("acme", month).await.expect("spent"), 44_000);
    assert_eq!(store.spent_since("nobody", month).await.expect("spent"), 0);
    assert_eq!(
        store.spent_by_tenant_since(month).await.expect("by tenant"),
        vec![("acme".to_owned(), 44_000), ("beta".to_owned(), 1)]
    );
    let since = store.message_costs_since(month).await.expect("messages");
    assert_eq!(since.len(), 2);
    assert_eq!(since[0], template);

    // Flow runs keep their input's tenant; with the turns and paid messages, the database sums what
    // each tenant spent on what.
    // A chat turn's balance read (a run with a parent) is that turn's, not a flow of its own.
    for (id, tenant, at, parent) in [
        ("exec-aviso", "acme", "2026-11-11T11:59:00Z", None),
        ("exec-2", "acme", "2026-11-12T12:00:00Z", None),
        ("exec-antigo", "acme", "2026-10-30T12:00:00Z", None),
        (
            "exec-do-turno",
            "acme",
            "2026-11-12T12:05:00Z",
            Some("exec-turno".to_owned()),
        ),
    ] {
        let run = FlowRunRecord {
            execucao_id: id.into(),
            parent_execucao_id: parent,
            status: vt_agent::RunStatus::Concluido,
            input: json!({"cartao": "1234567890", "tenant_id": tenant}),
            stages: vec![],
            created_at: t(at),
        };
        store.save_flow_run(&run).await.expect("run");
    }
    let runs = store.flow_runs_since(month).await.expect("runs");
    assert_eq!(
        runs.iter()
            .map(|r| (r.tenant_id.as_deref(), r.created_at))
            .collect::<Vec<_>>(),
        vec![
            (Some("acme"), t("2026-11-11T11:59:00Z")),
            (Some("acme"), t("2026-11-12T12:00:00Z"))
        ]
    );
    let spending = store.spending_by_tenant_since(month).await.expect("spending");
    assert_eq!(
        spending,
        vec![
            vt_agent::TenantSpending {
                tenant_id: Some("acme".into()),
                conversations: 1,
                known_micro_brl: 44_000,
                unknown: 2,
                flows: 2,
                flow_known_micro_brl: 34_000,
                flow_unknown: 1,
            },
            vt_agent::TenantSpending {
                tenant_id: Some("beta".into()),
                conversations: 1,
                known_micro_brl: 1,
                ..Default::default()
            },
        ]
    );
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

pub(crate) async fn intents_round_trip(store: Arc<dyn Store>) {
    let mut intent = IntentRecord {
        intent_key: "consultar_saldo_x".into(),
        description: "Consulta saldo".into(),
        action_type: "deterministic".into(),
        required_params: vec!["cartao".into()],
        optional_params: vec![],
        prompt_template: None,
        max_tokens: 200,
        is_active: true,
    };
    store.upsert_intent(&intent, Utc::now()).await.expect("save");
    intent.is_active = false;
    intent.optional_params = vec!["canal".into()];
    store.upsert_intent(&intent, Utc::now()).await.expect("update");
    let all = store.intents().await.expect("list");
    assert_eq!(
        all.iter().find(|i| i.intent_key == "consultar_saldo_x"),
        Some(&intent)
    );
}

pub(crate) async fn idempotency_records_hold_until_they_expire(store: Arc<dyn Store>) {
    let now = t("2026-11-22T10:00:00Z");
    let record = |hash: &str, at: DateTime<Utc>| IdempotencyRecord {
        key: "idem-1".into(),
        scope: "recarga".into(),
        request_hash: hash.into(),
        response: json!({"status": 201}),
        created_at: at,
        expires_at: at + chrono::Duration::hours(24),
    };
    assert_eq!(
        store.put_idempotency(&record("h1", now), now).await.expect("put"),
        IdempotencyPut::Inserted
    );
    let later = now + chrono::Duration::hours(1);
    match store
        .put_idempotency(&record("h2", later), later)
        .await
        .expect("put")
    {
        IdempotencyPut::Existing(existing) => assert_eq!(existing.request_hash, "h1"),
        other => panic!("expected the existing record, got {other:?}"),
    }
    assert!(store.idempotency("idem-1", later).await.expect("get").is_some());
    let expired = now + chrono::Duration::hours(25);
    assert!(store.idempotency("idem-1", expired).await.expect("get").is_none());
    assert_eq!(
        store
            .put_idempotency(&record("h3", expired), expired)
            .await
            .expect("put"),
        IdempotencyPut::Inserted
    );
    assert_eq!(
        store
            .idempotency("idem-1", expired)
            .await
            .expect("get")
            .map(|r| r.request_hash),
        Some("h3".into())
    );
}

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
    let accepting = |new_conversation, channel_message_id, contact_seen| vt_agent::Accepting {
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

fn pix_charge(recharge: &str, n: i64, now: DateTime<Utc>) -> vt_agent::PixCharge {
    vt_agent::PixCharge {
        meio: vt_agent::ChargeMeans::Pix,
        txid: vt_domain::pix::txid(recharge, u32::try_from(n).expect("n")),
        recharge_key: recharge.into(),
        n,
        conversation_id: "conv-pix".into(),
        request: json!({"cartao": "1234567890", "recarga": {"valor": 20}}),
        amount: rust_decimal::Decimal::new(2000, 2),
        copia_e_cola: "000201…6304ABCD".into(),
        status: vt_agent::ChargeStatus::Ativa,
        expires_at: now + chrono::Duration::minutes(15),
        end_to_end_id: None,
        paid_at: None,
        created_at: now,
        refund: None,
        execucao_id: None,
    }
}

/// A Pix charge is put on record once per txid; its payment is claimed once among racing callers,
/// and a recharge holds at most one paid code: a second code paid too is told apart, to be refunded.
pub(crate) async fn a_pix_payment_is_claimed_once_and_one_code_per_recharge_is_paid(store: Arc<dyn Store>) {
    use vt_agent::{ChargeStatus, PaymentClaim};
    let now = t("2026-11-24T12:00:00Z");
    let first = pix_charge("k-pix-1", 0, now);
    let stored = store.open_charge(&first).await.expect("open");
    assert_eq!(stored, first, "what was stored, read back (the request unsealed)");
    // A retry finds the charge already there, as it was.
    let again = vt_agent::PixCharge {
        meio: vt_agent::ChargeMeans::Pix,
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
        .record_refund(&second.txid, returned, vt_agent::REFUND_IN_PROGRESS)
        .await
        .expect("refund");
    let refunding = store.refunds_in_progress(10).await.expect("in progress");
    assert_eq!(
        refunding.iter().map(|c| c.txid.as_str()).collect::<Vec<_>>(),
        [second.txid.as_str()]
    );
    assert_eq!(
        refunding[0].refund,
        Some(vt_agent::PixRefund {
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
    use vt_agent::{Checked, RecargasConfig};
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
        .followup_checked("k-a", &Checked::Settled(vt_agent::OUTCOME_CASE.into()), next)
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

pub(crate) async fn a_flow_run_is_on_record_before_it_finishes(store: Arc<dyn Store>) {
    let started = t("2026-11-22T12:00:00Z");
    let conv = conversation("c-flow");
    store
        .begin_flow_run(
            &conv,
            &ChatMessage::user("{\"cartao\":\"****7890\"}"),
            "exec-f",
            &json!({"cartao": "1234567890"}),
            started,
        )
        .await
        .expect("begin");
    let runs = store.flow_runs(10).await.expect("list");
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (runs[0].status.as_str(), runs[0].finished_at),
        ("em_andamento", None)
    );
    // With it, in the same transaction: the flow's conversation and its input message.
    assert!(store.conversation("c-flow").await.expect("read").is_some());
    let messages = store.messages("c-flow").await.expect("read");
    assert_eq!(messages.len(), 1);
    assert_eq!(
        messages[0].message,
        ChatMessage::user("{\"cartao\":\"****7890\"}")
    );
    let exec = execution("exec-f", "c-flow");
    let run = FlowRunRecord {
        parent_execucao_id: None,
        execucao_id: "exec-f".into(),
        status: RunStatus::Concluido,
        input: json!({"cartao": "1234567890"}),
        stages: vec![("rf01_preparar_consulta".into(), json!({"ok": true}))],
        created_at: started,
    };
    let turn = TurnRecord {
        conversation: &conv,
        messages: &[],
        execution: &exec,
        events: &[],
        usage: None,
        flow_runs: std::slice::from_ref(&run),
        context: None,
        outbox: &[],
        accepted_message: None,
        case: None,
    };
    store
        .save_turn(turn, t("2026-11-22T12:00:01Z"))
        .await
        .expect("finish");
    let runs = store.flow_runs(10).await.expect("list");
    assert_eq!(runs.len(), 1, "the same row, completed");
    assert_eq!(runs[0].status, RunStatus::Concluido);
    assert_eq!(runs[0].finished_at, Some(t("2026-11-22T12:00:01Z")));
    assert_eq!(
        store
            .flow_run("exec-f")
            .await
            .expect("read")
            .expect("run")
            .stages
            .len(),
        1
    );
}

/// What the web console reads: conversations by tenant, channel and text; batch jobs; usage since a
/// time; flow runs counted by status.
pub(crate) async fn the_console_reads_lists_and_counts(store: Arc<dyn Store>) {
    let now = Utc::now();
    let mut a = conversation("c-lista-a");
    a.tenant_id = "empresa-a".into();
    a.handoff = None;
    let mut b = conversation("c-lista-b");
    b.tenant_id = "empresa-b".into();
    b.channel = "whatsapp".into();
    b.user_login = "joana".into();
    b.ended = true;
    store
        .save_conversation(&a, now - chrono::Duration::seconds(5))
        .await
        .expect("save");
    store.save_conversation(&b, now).await.expect("save");
    for (conv, text) in [
        ("c-lista-a", "qual o saldo do cartão 2345678901?"),
        ("c-lista-b", "Oi, tudo bem?"),
    ] {
        store
            .append_message(conv, None, &ChatMessage::user(text), now)
            .await
            .expect("append");
    }
    store
        .save_context(&ConversationContext {
            conversation_id: "c-lista-a".into(),
            user_id: "u-1".into(),
            summary: None,
            key_facts: Vec::new(),
            last_intent: Some("consultar_saldo".into()),
            turn_count: 1,
            updated_at: now,
        })
        .await
        .expect("context");
    let list = |tenant: Option<&str>, channel: Option<&str>, text: Option<&str>| {
        let store = store.clone();
        let query = vt_agent::ConversationQuery {
            intent: None,
            tenant_id: tenant.map(Into::into),
            channel: channel.map(Into::into),
            text: text.map(Into::into),
            limit: 10,
        };
        async move {
            store
                .conversation_list(&query)
                .await
                .expect("list")
                .into_iter()
                .map(|c| c.id)
                .filter(|id| id.starts_with("c-lista"))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        list(None, None, None).await,
        ["c-lista-b", "c-lista-a"],
        "newest first"
    );
    assert_eq!(list(Some("empresa-a"), None, None).await, ["c-lista-a"]);
    assert_eq!(list(None, Some("whatsapp"), None).await, ["c-lista-b"]);
    assert_eq!(
        list(None, None, Some("JOANA")).await,
        ["c-lista-b"],
        "by login, any case"
    );
    assert_eq!(
        list(None, None, Some("8901")).await,
        ["c-lista-a"],
        "by message text, as masked"
    );
    assert!(
        list(None, None, Some("2345678901")).await.is_empty(),
        "the search reads masked copies: a full card is in no clear column"
    );
    assert_eq!(
        list(None, None, Some("100%_")).await,
        Vec::<String>::new(),
        "no wildcards"
    );
    let rows = store
        .conversation_list(&vt_agent::ConversationQuery {
            intent: None,
            tenant_id: Some("empresa-a".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(rows[0].last_intent.as_deref(), Some("consultar_saldo"));
    assert_eq!(
        rows[0].last_message,
        Some(ChatMessage::user("qual o saldo do cartão 2345678901?"))
    );
    assert!(!rows[0].ended && !rows[0].handed_over);

    for (id, tenant) in [("lote-1", "empresa-a"), ("lote-2", "empresa-b")] {
        store
            .open_batch(&crate::support::batch_job(id, tenant, now))
            .await
            .expect("batch");
    }
    let ids = |jobs: Vec<vt_agent::BatchJob>| jobs.into_iter().map(|j| j.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.batches(Some("empresa-b"), 10).await.expect("batches")),
        ["lote-2"]
    );
    assert_eq!(store.batches(None, 10).await.expect("batches").len(), 2);

    let usage = |days_ago: i64| UsageRecord {
        conversation_id: "c-lista-a".into(),
        intent_key: "consultar_saldo".into(),
        action_type: "deterministic".into(),
        tokens_input: 0,
        tokens_output: 0,
        execution_time_ms: 12,
        was_keyword_matched: true,
        created_at: now - chrono::Duration::days(days_ago),
        audio_ms: 0,
        tokens_cached: 0,
        tenant_id: "default".into(),
        custo_micro_brl: Some(0),
        marcas: String::new(),
    };
    for d in [40, 3, 0] {
        store.record_usage(&usage(d)).await.expect("usage");
    }
    let since = store
        .usage_since(now - chrono::Duration::days(30))
        .await
        .expect("usage");
    assert_eq!(since.len(), 2);
    assert!(since[0].created_at < since[1].created_at && since[0].was_keyword_matched);

    store
        .begin_flow_run(
            &conversation("c-console-fluxo"),
            &ChatMessage::user("{}"),
            "exec-console-1",
            &json!({"cartao": "1"}),
            now,
        )
        .await
        .expect("begin");
    for (id, status) in [
        ("exec-console-2", RunStatus::Concluido),
        ("exec-console-3", RunStatus::Concluido),
        ("exec-console-4", RunStatus::Falhou),
    ] {
        store
            .save_flow_run(&FlowRunRecord {
                parent_execucao_id: None,
                execucao_id: id.into(),
                status,
                input: json!({}),
                stages: Vec::new(),
                created_at: now,
            })
            .await
            .expect("flow");
    }
    store
        .save_flow_run(&FlowRunRecord {
            parent_execucao_id: None,
            execucao_id: "exec-console-old".into(),
            status: RunStatus::Concluido,
            input: json!({}),
            stages: Vec::new(),
            created_at: now - chrono::Duration::days(60),
        })
        .await
        .expect("flow");
    assert_eq!(
        store
            .flow_outcomes_since(now - chrono::Duration::days(1))
            .await
            .expect("outcomes"),
        [
            ("concluido".to_owned(), 2),
            ("em_andamento".to_owned(), 1),
            ("falhou".to_owned(), 1)
        ]
    );
}

async fn sqlite() -> Arc<dyn Store> {
    Arc::new(SqliteStore::connect("sqlite::memory:").await.expect("sqlite"))
}

/// Two handles (two pools, as two instances would have) on a private schema. The PostgreSQL tests are
/// `#[ignore]`d with their reason, so that a run without a server reports them as not run, never as
/// passed; asked to run (`-- --ignored`, as `.ci/run` does) without `VT_TEST_POSTGRES_URL`, they fail.
pub(crate) struct PgFixture {
    pub store: Arc<PgStore>,
    pub second: Arc<PgStore>,
    url: String,
    schema: String,
}

impl PgFixture {
    pub(crate) async fn start() -> Self {
        let url = std::env::var("VT_TEST_POSTGRES_URL")
            .ok()
            .filter(|u| !u.is_empty())
            .expect("VT_TEST_POSTGRES_URL: a PostgreSQL test was asked to run without a server (see the tests chapter)");
        let schema = format!("vt_test_{}", uuid::Uuid::new_v4().simple());
        let admin = sqlx::PgPool::connect(&url)
            .await
            .expect("connect to VT_TEST_POSTGRES_URL");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&admin)
            .await
            .expect("schema");
        admin.close().await;
        let options = || {
            PgConnectOptions::from_str(&url)
                .expect("url")
                .options([("search_path", schema.as_str())])
        };
        let store = Arc::new(PgStore::connect_with(options()).await.expect("pg store"));
        let second = Arc::new(PgStore::connect_with(options()).await.expect("pg store 2"));
        Self {
            store,
            second,
            url,
            schema,
        }
    }

    /// The URL a `vt-agent` process reaches this fixture's schema at.
    pub(crate) fn process_url(&self) -> String {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-c%20search_path%3D{}", self.url, self.schema)
    }

    pub(crate) async fn cleanup(self) {
        if let Ok(admin) = sqlx::PgPool::connect(&self.url).await {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP SCHEMA {} CASCADE",
                self.schema
            )))
            .execute(&admin)
            .await;
        }
    }
}

/// A conversation of `user` whose memory holds `card`, last touched at `at`, with one turn (a usage
/// record) and a recharge attempt made in it.
async fn kept_conversation(store: &Arc<dyn Store>, id: &str, user: &str, card: &str, at: DateTime<Utc>) {
    let mut conv = conversation(id);
    conv.user_id = user.into();
    conv.memory.insert("cartoes_informados".into(), json!([card]));
    let messages = vec![ChatMessage::assistant(format!(
        "saldo do cartão ****{}",
        &card[6..]
    ))];
    let exec = execution(&format!("exec-{id}"), id);
    let usage = UsageRecord {
        conversation_id: id.into(),
        intent_key: "consultar_saldo".into(),
        action_type: "deterministic".into(),
        tokens_input: 10,
        tokens_output: 5,
        execution_time_ms: 12,
        was_keyword_matched: true,
        created_at: at,
        audio_ms: 0,
        tokens_cached: 0,
        tenant_id: "default".into(),
        custo_micro_brl: Some(0),
        marcas: String::new(),
    };
    let record = TurnRecord {
        conversation: &conv,
        messages: &messages,
        execution: &exec,
        events: &[],
        usage: Some(&usage),
        flow_runs: &[],
        context: None,
        outbox: &[],
        accepted_message: None,
        case: None,
    };
    store.save_turn(record, at).await.expect("turn");
    let attempt = RechargeAttempt {
        idempotency_key: format!("k-{id}"),
        fingerprint: "f".into(),
        scope: format!("t|{user}"),
        origin: id.into(),
        execucao_id: format!("exec-{id}"),
        cartao_mascarado: vt_domain::vt::mask_card(card),
        valor: rust_decimal::Decimal::new(5000, 2),
        moeda: "BRL".into(),
    };
    store.begin_recharge(&attempt, None, at).await.expect("attempt");
}

pub(crate) async fn retention_and_erasure_keep_the_money_trail_and_the_usage_figures(store: Arc<dyn Store>) {
    use vt_agent::Subject;
    use vt_agent::{
        RetentionConfig, apply_retention as apply, erase_subject as erase, export_subject as export,
    };
    let now = t("2026-11-22T12:00:00Z");
    let old = now - chrono::Duration::days(200);
    kept_conversation(&store, "c-velha", "u-1", "2345678901", old).await;
    kept_conversation(&store, "c-nova", "u-2", "3456789012", now).await;
    kept_conversation(&store, "c-titular", "u-9", "5678901234", now).await;
    for (id, card, at) in [
        ("exec-fluxo-velho", "4567890123", old),
        ("exec-fluxo-novo", "3456789012", now),
    ] {
        let conv = conversation(&format!("c-{id}"));
        store
            .begin_flow_run(&conv, &ChatMessage::user("{}"), id, &json!({"cartao": card}), at)
            .await
            .expect("flow");
    }
    let usage_before = store
        .usage_since(old - chrono::Duration::days(1))
        .await
        .expect("usage");
    let money_before: Vec<_> = store
        .recharge_attempts(50)
        .await
        .expect("attempts")
        .into_iter()
        .map(|a| (a.attempt.idempotency_key, a.attempt.valor, a.status))
        .collect();

    // Retention of 180 days: the old conversation and flow run go, the recent ones stay.
    let gone = apply(
        store.as_ref(),
        &RetentionConfig {
            dias: 180,
            ..Default::default()
        },
        now,
    )
    .await
    .expect("retention");
    assert!(gone.conversations.contains(&"c-velha".to_owned()), "{gone:?}");
    assert!(!gone.conversations.contains(&"c-nova".to_owned()), "{gone:?}");
    assert!(
        gone.flow_runs.contains(&"exec-fluxo-velho".to_owned()),
        "{gone:?}"
    );
    assert!(store.conversation("c-velha").await.expect("read").is_none());
    assert!(store.messages("c-velha").await.expect("read").is_empty());
    assert!(store.flow_run("exec-fluxo-velho").await.expect("read").is_none());
    assert!(store.conversation("c-nova").await.expect("read").is_some());
    assert!(store.flow_run("exec-fluxo-novo").await.expect("read").is_some());

    // Access: everything about a card, in clear, from its blind index.
    let card = export(&vt_agent::Stores::of(&store), &Subject::Card("3456789012".into()))
        .await
        .expect("export");
    let text = card.to_string();
    assert!(
        text.contains("c-nova") && text.contains("exec-fluxo-novo") && text.contains("3456789012"),
        "{text}"
    );
    assert!(!text.contains("c-titular"), "another person's: {text}");

    // A Pix charge of the person's conversation, paid.
    let charge = vt_agent::PixCharge {
        meio: vt_agent::ChargeMeans::Pix,
        conversation_id: "c-titular".into(),
        request: json!({"cartao": "5678901234", "recarga": {"valor": 20}}),
        ..pix_charge("k-titular", 0, now)
    };
    store.open_charge(&charge).await.expect("charge");
    store
        .claim_payment(&charge.txid, "E0000000020261124120012345678999", now)
        .await
        .expect("paid");

    // Erasure by card and by user: nothing of them is left, an audit line says it happened.
    erase(
        &vt_agent::Stores::of(&store),
        &Subject::Card("3456789012".into()),
        ("operador", "t"),
        None,
    )
    .await
    .expect("erase card");
    erase(
        &vt_agent::Stores::of(&store),
        &Subject::User("u-9".into()),
        ("operador", "t"),
        None,
    )
    .await
    .expect("erase user");
    for id in ["c-nova", "c-titular"] {
        assert!(store.conversation(id).await.expect("read").is_none(), "{id}");
        assert!(store.messages(id).await.expect("read").is_empty(), "{id}");
    }
    assert!(store.flow_run("exec-fluxo-novo").await.expect("read").is_none());
    let after = export(&vt_agent::Stores::of(&store), &Subject::Card("3456789012".into()))
        .await
        .expect("export");
    assert_eq!(after["conversas"], json!([]), "{after}");
    assert_eq!(after["execucoes"], json!([]), "{after}");
    let audit = store.audit_records(10).await.expect("audit");
    assert_eq!(audit.iter().filter(|a| a.outcome == "titular_apagado").count(), 2);
    assert!(
        audit
            .iter()
            .all(|a| a.cartao.is_empty() || a.cartao.starts_with("****"))
    );

    // The money trail and the usage figures are what they were.
    let usage_after = store
        .usage_since(old - chrono::Duration::days(1))
        .await
        .expect("usage");
    let totals = |u: &[UsageRecord]| u.iter().map(|r| r.tokens_input + r.tokens_output).sum::<i64>();
    assert_eq!(
        (usage_after.len(), totals(&usage_after)),
        (usage_before.len(), totals(&usage_before))
    );
    let money_after: Vec<_> = store
        .recharge_attempts(50)
        .await
        .expect("attempts")
        .into_iter()
        .map(|a| (a.attempt.idempotency_key, a.attempt.valor, a.status))
        .collect();
    assert_eq!(money_after, money_before);
    // The Pix charge stays as money trail, without the card or the tie to the person.
    let kept = store.pix_charge(&charge.txid).await.expect("read").expect("kept");
    assert_eq!(
        (kept.amount, kept.status, kept.end_to_end_id.as_deref()),
        (
            charge.amount,
            vt_agent::ChargeStatus::Paga,
            Some("E0000000020261124120012345678999")
        )
    );
    assert_eq!(kept.conversation_id, "apagada");
    assert_eq!(kept.request, serde_json::Value::Null);
}

async fn cases_open_once_one_claim_wins_and_every_transition_is_logged(store: Arc<dyn Store>) {
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
            Some("cliente orientado"),
            now,
        )
        .await
        .expect("close")
        .expect("was open");
    assert_eq!(back.state, CaseState::Devolvido);
    assert!(
        store
            .close_case("caso-1", &owner, CaseState::Encerrado, None, now)
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
    let held = vt_agent::CaseWrite::Held {
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
    let line = vt_agent::CaseEvent {
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

/// Each test runs on both backends, grouped by the store's concern (its trait):
/// `store::sqlite_suite::outbox::…`, `store::postgres_suite::outbox::…`.
macro_rules! conformance {
    ($($concern:ident: [$($name:ident),* $(,)?]),* $(,)?) => {
        mod sqlite_suite {
            $(mod $concern {
                $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::super::$name(super::super::sqlite().await).await;
                })*
            })*
        }
        mod postgres_suite {
            $(mod $concern {
                $(#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let pg = super::super::PgFixture::start().await;
                    super::super::$name(pg.store.clone()).await;
                    pg.cleanup().await;
                })*
            })*
        }
    };
}

conformance!(
    conversations: [
        conversation_round_trip,
        a_persons_previous_conversation_is_their_last_on_the_channel,
        messages_keep_their_order,
        a_turn_is_written_at_once,
        a_turns_reads_bring_its_context_and_open_case,
        task_runs_round_trip,
        context_round_trip,
        turn_locks_serialize_one_conversation,
    ],
    flows: [flow_runs_keep_their_stages, a_flow_run_is_on_record_before_it_finishes],
    recharges: [
        confirmations_are_consumed_once,
        recharge_attempts_are_on_record_before_they_are_sent,
        a_recharge_follow_up_is_claimed_once_and_settled_with_its_request_dropped,
    ],
    pix: [a_pix_payment_is_claimed_once_and_one_code_per_recharge_is_paid],
    outbox: [
        outbox_claim_ack_retry,
        concurrent_claims_never_share_an_item,
        a_conversations_items_go_out_in_order_and_accepting_twice_is_once,
    ],
    batches: [
        a_batch_group_stores_every_run_stage_and_line,
        a_shared_batchs_chunks_go_to_one_instance_each_and_a_dead_ones_come_back,
    ],
    reports: [
        usage_summary_covers_seven_days,
        what_tenants_spent_sums_turns_and_paid_messages_with_a_price,
        intents_round_trip,
        idempotency_records_hold_until_they_expire,
        the_console_reads_lists_and_counts,
    ],
    keeping: [retention_and_erasure_keep_the_money_trail_and_the_usage_figures],
    cases: [cases_open_once_one_claim_wins_and_every_transition_is_logged],
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_file_is_created_and_reopened() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let store = vt_agent::open_store(None, &data, Usage::Service)
        .await
        .expect("open");
    store
        .save_conversation(&conversation("c-file"), Utc::now())
        .await
        .expect("save");
    drop(store);
    assert!(data.join("vt-agent.db").exists());
    // A one-shot command's store: one connection reads and writes.
    let again = vt_agent::open_store(None, &data, Usage::OneShot)
        .await
        .expect("reopen");
    assert!(again.conversation("c-file").await.expect("load").is_some());
    again
        .save_conversation(&conversation("c-again"), Utc::now())
        .await
        .expect("save through the one connection");
    assert!(again.conversation("c-again").await.expect("load").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_file_lock_spans_handles_as_it_spans_processes() {
    let dir = tempfile::tempdir().expect("tmp");
    let url = format!("sqlite://{}", dir.path().join("db.sqlite").display());
    let one = SqliteStore::connect(&url).await.expect("one");
    let two = Arc::new(SqliteStore::connect(&url).await.expect("two"));
    let held = one.lock_conversation("c-shared").await.expect("lock on handle 1");
    let second = two.clone();
    let waiter = tokio::spawn(async move { second.lock_conversation("c-shared").await.map(|_| ()) });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "handle 2 waits for handle 1");
    held.release().await;
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("released")
        .expect("join")
        .expect("locked");
}

#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_turn_lease_spans_instances() {
    let pg = PgFixture::start().await;
    let held = pg
        .store
        .lock_conversation("c-shared")
        .await
        .expect("lock on instance 1");
    let second = pg.second.clone();
    let waiter = tokio::spawn(async move { second.lock_conversation("c-shared").await.map(|_| ()) });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "instance 2 waits for instance 1");
    drop(held);
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("released")
        .expect("join")
        .expect("locked");
    pg.cleanup().await;
}

#[test]
fn an_unknown_database_url_is_refused_by_name() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let err = rt
        .block_on(vt_agent::open_store(
            Some("mysql://root@host/db"),
            std::path::Path::new("data"),
            Usage::Service,
        ))
        .err()
        .expect("refused");
    assert!(
        err.to_string().contains("host/db") && !err.to_string().contains("root@"),
        "{err}"
    );
}

#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_conversations_at_once_complete_on_postgresql() {
    let pg = PgFixture::start().await;
    let h = std::sync::Arc::new(
        crate::support::chat_harness_on(pg.store.clone(), None, vt_domain::tools::VtSettings::default())
            .await,
    );
    // A held connection per turn (the old advisory lock) starves a pool of ten long before 200.
    let turns = (0..200).map(|i| {
        let h = h.clone();
        tokio::spawn(async move { h.say(&format!("pg-{i}"), "saldo 1234567890").await })
    });
    let replies = tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(turns))
        .await
        .expect("200 concurrent turns finish");
    for r in replies {
        let r = r.expect("join");
        assert!(
            r.persisted && r.reply_text().contains("****7890"),
            "{}",
            r.reply_text()
        );
    }
    pg.cleanup().await;
}

/// Every row of every table of `schema` (PostgreSQL) as text, the way a dump would show them.
async fn pg_dump(url: &str, schema: &str) -> String {
    let pool = sqlx::PgPool::connect(url).await.expect("connect");
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE'",
    )
    .bind(schema)
    .fetch_all(&pool)
    .await
    .expect("tables");
    let mut dump = String::new();
    for table in tables {
        let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT to_jsonb(t)::text FROM {schema}.{table} t"
        )))
        .fetch_all(&pool)
        .await
        .expect("rows");
        dump.push_str(&rows.join("\n"));
    }
    dump
}

#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_rows_hold_no_card_and_no_token() {
    let pg = PgFixture::start().await;
    vt_agent::prepare_sealing(pg.store.as_ref())
        .await
        .expect("sealing");
    let chat =
        crate::support::chat_harness_on(pg.store.clone(), None, vt_domain::tools::VtSettings::default())
            .await;
    let ask = chat.say("c-pg", "recarrega 50 no 2345678901 via pix").await;
    assert!(ask.reply_text().starts_with("Confirma"), "{}", ask.reply_text());
    chat.say("c-pg", "sim").await;
    let output = chat
        .service
        .flows().run_flow(
            r#"{"cartao": "3456789012", "recarga": {"valor": 20, "meio_pagamento": {"tipo": "pix", "token": "tok-pg-secreto"}}}"#,
            vt_agent::FlowOptions::default(),
        )
        .await
        .expect("flow")
        .output;
    assert_eq!(output.status, vt_agent::FlowStatus::Concluido);
    assert_eq!(chat.sim.charges("2345678901"), 1);
    let dump = pg_dump(&pg.url, &pg.schema).await;
    assert!(
        dump.contains("****8901"),
        "the dump was read: {} bytes",
        dump.len()
    );
    for secret in ["2345678901", "3456789012", "tok-pg-secreto"] {
        assert!(!dump.contains(secret), "{secret} is in a PostgreSQL row");
    }
    // And the product reads it all back.
    let conv = chat
        .store
        .conversation("c-pg")
        .await
        .expect("read")
        .expect("there");
    assert!(
        serde_json::Value::Object(conv.memory)
            .to_string()
            .contains("2345678901"),
        "sealed, not lost"
    );
    pg.cleanup().await;
}

/// Rows an older version wrote in clear are sealed at the first start, and still read the same.
pub(crate) async fn values_written_before_sealing_are_sealed_at_the_first_start(
    store: Arc<dyn Store>,
    raw: impl AsyncFn(&str) -> Vec<String>,
    write_clear: impl AsyncFn(),
) {
    write_clear().await;
    assert!(
        raw("SELECT CAST(state AS TEXT) FROM conversations WHERE id = 'c-antiga'").await[0]
            .contains("1234567890"),
        "in clear before"
    );
    vt_agent::prepare_sealing(store.as_ref()).await.expect("sealed");
    let after = raw("SELECT CAST(state AS TEXT) FROM conversations WHERE id = 'c-antiga'").await;
    assert!(
        !after[0].contains("1234567890") && after[0].contains("v1:"),
        "{after:?}"
    );
    let conv = store
        .conversation("c-antiga")
        .await
        .expect("opens")
        .expect("there");
    assert_eq!(conv.state["pendente"]["cartao"], "1234567890");
    let search = store
        .conversation_list(&vt_agent::ConversationQuery {
            text: Some("7890".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .expect("search");
    assert_eq!(search.len(), 1, "the old message got its masked copy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_rows_from_before_sealing_are_sealed_at_the_first_start() {
    let dir = tempfile::tempdir().expect("tmp");
    let url = format!("sqlite://{}", dir.path().join("antigo.db").display());
    let store: Arc<dyn Store> = Arc::new(SqliteStore::connect(&url).await.expect("open"));
    let pool = sqlx::SqlitePool::connect(&url).await.expect("raw");
    let raw = async |sql: &str| -> Vec<String> {
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_all(&pool)
            .await
            .expect("raw")
    };
    let write_clear = async || {
        sqlx::query(
            "INSERT INTO conversations (id, agent_id, user_id, user_login, channel, active_skill, state, created_at, updated_at)
             VALUES ('c-antiga', 'vt', 'u', 'u', 'terminal', 'atendimento', '{\"pendente\": {\"cartao\": \"1234567890\"}}', 0, 0)",
        )
        .execute(&pool)
        .await
        .expect("old row");
        sqlx::query(
            "INSERT INTO messages (conversation_id, role, body, created_at) VALUES ('c-antiga', 'user', '{\"role\": \"user\", \"content\": \"saldo do 1234567890\"}', 0)",
        )
        .execute(&pool)
        .await
        .expect("old message");
    };
    values_written_before_sealing_are_sealed_at_the_first_start(store, raw, write_clear).await;
}

#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_rows_from_before_sealing_are_sealed_at_the_first_start() {
    let pg = PgFixture::start().await;
    let options = PgConnectOptions::from_str(&pg.url)
        .expect("url")
        .options([("search_path", pg.schema.as_str())]);
    let pool = sqlx::PgPool::connect_with(options).await.expect("raw");
    let raw = async |sql: &str| -> Vec<String> {
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_all(&pool)
            .await
            .expect("raw")
    };
    let write_clear = async || {
        sqlx::query(
            "INSERT INTO conversations (id, agent_id, user_id, user_login, channel, active_skill, state, created_at, updated_at)
             VALUES ('c-antiga', 'vt', 'u', 'u', 'terminal', 'atendimento', '{\"pendente\": {\"cartao\": \"1234567890\"}}', now(), now())",
        )
        .execute(&pool)
        .await
        .expect("old row");
        sqlx::query(
            "INSERT INTO messages (conversation_id, role, body, created_at) VALUES ('c-antiga', 'user', '{\"role\": \"user\", \"content\": \"saldo do 1234567890\"}', now())",
        )
        .execute(&pool)
        .await
        .expect("old message");
    };
    values_written_before_sealing_are_sealed_at_the_first_start(pg.store.clone(), raw, write_clear).await;
    pg.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_fails_in_a_group_commit_fails_alone_and_the_others_are_stored() {
    // Twenty turns written at once on a SQLite file (one group or a few); one of them reuses an
    // execution id already stored, so its INSERT fails inside the group.
    let dir = tempfile::tempdir().expect("tmp");
    let url = format!("sqlite://{}", dir.path().join("grupo.db").display());
    let store: Arc<dyn Store> = Arc::new(SqliteStore::connect(&url).await.expect("store"));
    let write = |i: usize, exec_id: String| {
        let store = store.clone();
        async move {
            let conv = conversation(&format!("c-{i}"));
            let exec = execution(&exec_id, &conv.id);
            let messages = vec![ChatMessage::assistant(format!("resposta {i}"))];
            store
                .save_conversation(&conv, Utc::now())
                .await
                .expect("conversation");
            let record = TurnRecord {
                conversation: &conv,
                messages: &messages,
                execution: &exec,
                events: &[],
                usage: None,
                flow_runs: &[],
                context: None,
                outbox: &[],
                accepted_message: None,
                case: None,
            };
            store.save_turn(record, Utc::now()).await
        }
    };
    write(999, "exec-repetida".into()).await.expect("the first");
    let writes: Vec<_> = (0..20)
        .map(|i| {
            let id = if i == 7 {
                "exec-repetida".to_owned()
            } else {
                format!("exec-{i}")
            };
            tokio::spawn(write(i, id))
        })
        .collect();
    let mut failed = Vec::new();
    for (i, w) in writes.into_iter().enumerate() {
        if w.await.expect("join").is_err() {
            failed.push(i);
        }
    }
    assert_eq!(failed, [7], "only the bad turn fails");
    for i in (0..20).filter(|i| *i != 7) {
        let messages = store.messages(&format!("c-{i}")).await.expect("messages");
        assert_eq!(messages.len(), 1, "c-{i}'s turn is stored once");
        assert!(
            store
                .execution(&format!("exec-{i}"))
                .await
                .expect("read")
                .is_some()
        );
    }
    assert!(
        store.messages("c-7").await.expect("messages").is_empty(),
        "nothing of the bad turn"
    );
}
