//! The store's conformance suite, two backends: every test runs against SQLite and, when
//! `VT_TEST_POSTGRES_URL` is set (`.ci/run` sets it), against PostgreSQL in a private schema
//! (`vt_store::testkit::PgFixture`). The concerns' tests are in this folder's files; what is tested
//! with the service around the store (retention, a turn's rows on PostgreSQL) stays in `tests/it/store.rs`.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::postgres::PgConnectOptions;
use vt_domain::journal::{Confirmation, Consumption, RechargeAttempt};
use vt_engine::conversation::ExecutionRecord;
use vt_engine::conversation::ExecutionStatus;
use vt_engine::conversation::Reply;
use vt_engine::conversation::TurnEvent;
use vt_engine::llm::ChatMessage;
use vt_engine::llm::ToolCall;
use vt_store::Store;
use vt_store::Usage;
use vt_store::concerns::ConversationStore as _;
use vt_store::records::Case;
use vt_store::records::CaseOpened;
use vt_store::records::CaseState;
use vt_store::records::Claim;
use vt_store::records::ConversationContext;
use vt_store::records::FlowRunRecord;
use vt_store::records::IdempotencyPut;
use vt_store::records::IdempotencyRecord;
use vt_store::records::IntentRecord;
use vt_store::records::LineStatus;
use vt_store::records::NewCase;
use vt_store::records::NewOutboxItem;
use vt_store::records::OutboxStatus;
use vt_store::records::RunStatus;
use vt_store::records::TaskRun;
use vt_store::records::TurnRecord;
use vt_store::records::UsageRecord;
use vt_store::sqlite::SqliteStore;
use vt_store::testkit::{PgFixture, batch_job, conversation, execution, pix_charge, t};

mod cases;
mod conversations;
mod desk;
mod money;
mod people;
mod reports;
mod review;
mod runs;

pub(crate) use cases::*;
pub(crate) use conversations::*;
pub(crate) use desk::*;
pub(crate) use money::*;
pub(crate) use people::*;
pub(crate) use reports::*;
pub(crate) use review::*;
pub(crate) use runs::*;

async fn sqlite() -> Arc<dyn Store> {
    Arc::new(SqliteStore::connect("sqlite::memory:").await.expect("sqlite"))
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
    cases: [cases_open_once_one_claim_wins_and_every_transition_is_logged],
    contacts: [a_whatsapp_person_is_one_whichever_identifier_arrives],
    desk: [the_desk_log_is_read_by_sequence_and_canned_answers_are_kept_per_tenant],
    review: [a_flag_is_queued_once_and_labelled_once],
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_file_is_created_and_reopened() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let store = vt_store::open(None, &data, Usage::Service).await.expect("open");
    store
        .save_conversation(&conversation("c-file"), Utc::now())
        .await
        .expect("save");
    drop(store);
    assert!(data.join("vt-agent.db").exists());
    // A one-shot command's store: one connection reads and writes.
    let again = vt_store::open(None, &data, Usage::OneShot).await.expect("reopen");
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
        .block_on(vt_store::open(
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
    vt_store::prepare_sealing(store.as_ref()).await.expect("sealed");
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
        .conversation_list(&vt_store::records::ConversationQuery {
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
