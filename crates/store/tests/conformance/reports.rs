//! What the console and the reports read: usage, spending, intents, idempotency, lists.

use super::*;

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
    let rows = store
        .usage_summary(now - chrono::Duration::days(7))
        .await
        .expect("summary");
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
    let template = vt_store::records::MessageCost {
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
        .record_message_cost(&vt_store::records::MessageCost {
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
            status: vt_store::records::RunStatus::Concluido,
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
            vt_store::records::TenantSpending {
                tenant_id: Some("acme".into()),
                conversations: 1,
                known_micro_brl: 44_000,
                unknown: 2,
                flows: 2,
                flow_known_micro_brl: 34_000,
                flow_unknown: 1,
            },
            vt_store::records::TenantSpending {
                tenant_id: Some("beta".into()),
                conversations: 1,
                known_micro_brl: 1,
                ..Default::default()
            },
        ]
    );
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
        let query = vt_store::records::ConversationQuery {
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
        .conversation_list(&vt_store::records::ConversationQuery {
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
            .open_batch(&super::batch_job(id, tenant, now))
            .await
            .expect("batch");
    }
    let ids = |jobs: Vec<vt_store::records::BatchJob>| jobs.into_iter().map(|j| j.id).collect::<Vec<_>>();
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
