//! The store with the service around it, on both backends: retention and erasure (`retention.rs`
//! over the store), many conversations at once on PostgreSQL, and what a PostgreSQL dump holds after
//! a turn. The store's own conformance suite is `crates/store/tests/conformance/`.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;
use vt_domain::journal::RechargeAttempt;
use vt_engine::llm::ChatMessage;
use vt_store::Store;
use vt_store::records::TurnRecord;
use vt_store::records::UsageRecord;
use vt_store::sqlite::SqliteStore;
use vt_store::testkit::{PgFixture, conversation, execution, pix_charge, t};

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

async fn retention_and_erasure_keep_the_money_trail_and_the_usage_figures(store: Arc<dyn Store>) {
    let _index_key = crate::support::INDEX_KEY.lock().await;
    use vt_agent::testkit::{
        RetentionConfig, apply_retention as apply, erase_subject as erase, export_subject as export,
    };
    use vt_store::Subject;
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
    let card = export(&vt_store::Stores::of(&store), &Subject::Card("3456789012".into()))
        .await
        .expect("export");
    let text = card.to_string();
    assert!(
        text.contains("c-nova") && text.contains("exec-fluxo-novo") && text.contains("3456789012"),
        "{text}"
    );
    assert!(!text.contains("c-titular"), "another person's: {text}");

    // A Pix charge of the person's conversation, paid.
    let charge = vt_store::records::PixCharge {
        meio: vt_store::records::ChargeMeans::Pix,
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
        &vt_store::Stores::of(&store),
        &Subject::Card("3456789012".into()),
        ("operador", "t"),
        None,
    )
    .await
    .expect("erase card");
    erase(
        &vt_store::Stores::of(&store),
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
    let after = export(&vt_store::Stores::of(&store), &Subject::Card("3456789012".into()))
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
            vt_store::records::ChargeStatus::Paga,
            Some("E0000000020261124120012345678999")
        )
    );
    assert_eq!(kept.conversation_id, "apagada");
    assert_eq!(kept.request, serde_json::Value::Null);
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
    let _index_key = crate::support::INDEX_KEY.lock().await;
    vt_store::prepare_sealing(pg.store.as_ref())
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_and_erasure_on_sqlite() {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::connect("sqlite::memory:").await.expect("sqlite"));
    retention_and_erasure_keep_the_money_trail_and_the_usage_figures(store).await;
}

#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_and_erasure_on_postgresql() {
    let pg = PgFixture::start().await;
    retention_and_erasure_keep_the_money_trail_and_the_usage_figures(pg.store.clone()).await;
    pg.cleanup().await;
}
