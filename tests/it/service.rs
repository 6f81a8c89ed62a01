//! The conversation service over a real store: every user message is stored before it is processed,
//! turns are stored whole, a conversation resumes after a restart, a killed turn loses nothing, and
//! turns of one conversation never overlap.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use vt_agent::{Inbound, ServiceError, Services, ServicesConfig};
use vt_contract::context::Extensions;
use vt_contract::{Action, ActionContext, ActionError, ActionRegistry, ActionResponse, ResponseToAgent};
use vt_domain::journal::{Confirmation, Consumption, RechargeAttempt};
use vt_engine::Clock;
use vt_engine::Engine;
use vt_engine::IdSource;
use vt_engine::conversation::Conversation;
use vt_engine::conversation::ExecutionRecord;
use vt_engine::conversation::TurnEvent;
use vt_engine::llm::ChatMessage;
use vt_engine::llm::LlmProvider;
use vt_engine::llm::scripted::Scripted;
use vt_engine::llm::scripted::ScriptedProvider;
use vt_engine::prompts::Prompts;
use vt_engine::skills::Catalog;
use vt_engine::skills::SkillDef;
use vt_store::Store;
use vt_store::locks::TurnLock;
use vt_store::records::ConversationContext;
use vt_store::records::FlowRunRecord;
use vt_store::records::FlowRunSummary;
use vt_store::records::IdempotencyPut;
use vt_store::records::IdempotencyRecord;
use vt_store::records::IntentRecord;
use vt_store::records::NewOutboxItem;
use vt_store::records::OutboxItem;
use vt_store::records::OutboxStatus;
use vt_store::records::RechargeAttemptRecord;
use vt_store::records::StoreError;
use vt_store::records::StoredMessage;
use vt_store::records::TaskRun;
use vt_store::records::TurnRecord;
use vt_store::records::UnprocessedMessage;
use vt_store::records::UsageRecord;
use vt_store::records::UsageSummaryRow;
use vt_store::sqlite::SqliteStore;

use crate::support::{fast_config, user};

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

/// Records when it ran, then takes a while.
struct Slow;

#[derive(Default)]
struct Timeline(Mutex<Vec<(Instant, Instant)>>);

#[async_trait]
impl Action for Slow {
    type Args = NoArgs;
    const NAME: &'static str = "lento";
    const DESCRIPTION: &'static str = "Demora um pouco.";
    async fn call(&self, ctx: &ActionContext, _: NoArgs) -> Result<ActionResponse, ActionError> {
        let start = Instant::now();
        tokio::time::sleep(Duration::from_millis(80)).await;
        if let Some(t) = ctx.get::<Arc<Timeline>>() {
            t.0.lock().expect("lock").push((start, Instant::now()));
        }
        Ok(ResponseToAgent::new("pronto").with_state("lento", true).into())
    }
}

/// Never finishes: a turn stuck here can only be killed.
struct Hang;

#[async_trait]
impl Action for Hang {
    type Args = NoArgs;
    const NAME: &'static str = "travar";
    const DESCRIPTION: &'static str = "Trava.";
    async fn call(&self, _: &ActionContext, _: NoArgs) -> Result<ActionResponse, ActionError> {
        std::future::pending::<()>().await;
        Ok(ResponseToAgent::new("nunca").into())
    }
}

fn engine(llm: Arc<ScriptedProvider>, ext: Extensions) -> Arc<Engine> {
    let prompts =
        Prompts::from_sources([("s.md".to_owned(), "skill {{ skill }}".to_owned())]).expect("prompts");
    let mut registry = ActionRegistry::new();
    registry.register(Slow).expect("register");
    registry.register(Hang).expect("register");
    let def = SkillDef {
        agent: "genesis".into(),
        name: "a".into(),
        order: 1,
        description: "a".into(),
        prompt: "s.md".into(),
        actions: vec!["lento".into(), "travar".into()],
        deterministic: false,
        next: None,
    };
    let catalog = Catalog::from_defs(vec![def], &prompts, &registry).expect("catalog");
    let llm: Arc<dyn LlmProvider> = llm;
    Arc::new(
        Engine::new(catalog, prompts, registry, fast_config())
            .with_llm(Some(llm))
            .with_extensions(ext)
            .with_clock(Clock::System)
            .with_ids(IdSource::Random),
    )
}

/// A service with nothing configured (no router, no channels' rules, default settings).
fn bare(engine: Arc<Engine>, store: Arc<dyn Store>) -> Services {
    Services::new(engine, store, ServicesConfig::default())
}

fn msg(conversation: Option<&str>, text: &str) -> Inbound {
    Inbound {
        agent_id: "genesis".into(),
        conversation_id: conversation.map(str::to_owned),
        user: user(),
        text: text.into(),
        ..Default::default()
    }
}

async fn memory_store() -> Arc<dyn Store> {
    Arc::new(SqliteStore::connect("sqlite::memory:").await.expect("store"))
}

fn texts(messages: &[StoredMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match &m.message {
            ChatMessage::User { content } => format!("user:{content}"),
            ChatMessage::Assistant { content, tool_calls } if tool_calls.is_empty() => {
                format!("assistant:{}", content.clone().unwrap_or_default())
            }
            ChatMessage::Assistant { tool_calls, .. } => format!("call:{}", tool_calls[0].name),
            ChatMessage::Tool { content, .. } => format!("tool:{content}"),
            ChatMessage::HumanAgent { name, content } => format!("{name}:{content}"),
        })
        .collect()
}

#[tokio::test]
async fn a_turn_is_stored_whole() {
    let llm = Arc::new(ScriptedProvider::new([
        Scripted::tool("lento", json!({})),
        Scripted::text("feito"),
    ]));
    let store = memory_store().await;
    let service = bare(engine(llm, Extensions::default()), store.clone());
    let handled = service
        .messages()
        .handle(msg(Some("c1"), "faça"))
        .await
        .expect("handled");
    assert_eq!(handled.reply_text(), "feito");
    assert!(handled.persisted);
    let messages = store.messages("c1").await.expect("messages");
    assert_eq!(
        texts(&messages),
        vec!["user:faça", "call:lento", "tool:pronto", "assistant:feito"]
    );
    assert_eq!(
        messages[0].execucao_id, None,
        "the user message was stored before the execution existed"
    );
    let id = handled.execucao_id.expect("execution id");
    assert!(
        messages[1..]
            .iter()
            .all(|m| m.execucao_id.as_deref() == Some(id.as_str()))
    );
    let (execution, events) = store.execution(&id).await.expect("load").expect("stored");
    assert_eq!(execution.model_calls.len(), 2);
    assert!(events.iter().any(|e| matches!(e, TurnEvent::StateUpdated { .. })));
    assert_eq!(
        store
            .conversation("c1")
            .await
            .expect("load")
            .expect("stored")
            .state["lento"],
        true
    );
    let usage = store
        .usage_summary(chrono::Utc::now() - chrono::Duration::days(7))
        .await
        .expect("usage");
    assert_eq!(usage.iter().map(|r| r.tokens_input).sum::<i64>(), 20);
}

#[tokio::test]
async fn a_conversation_resumes_after_a_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let url = format!("sqlite://{}", dir.path().join("vt.db").display());
    {
        let llm = Arc::new(ScriptedProvider::new([
            Scripted::tool("lento", json!({})),
            Scripted::text("primeira"),
        ]));
        let store: Arc<dyn Store> = Arc::new(SqliteStore::connect(&url).await.expect("store"));
        let service = bare(engine(llm, Extensions::default()), store);
        service
            .messages()
            .handle(msg(Some("c-resume"), "um"))
            .await
            .expect("turn 1");
    }
    let llm = Arc::new(ScriptedProvider::new([Scripted::text("segunda")]));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::connect(&url).await.expect("reopen"));
    let service = bare(engine(llm.clone(), Extensions::default()), store.clone());
    let handled = service
        .messages()
        .handle(msg(Some("c-resume"), "dois"))
        .await
        .expect("turn 2");
    assert_eq!(handled.reply_text(), "segunda");
    let seen = &llm.requests()[0].messages;
    assert_eq!(
        seen.first(),
        Some(&ChatMessage::user("um")),
        "the model sees the earlier turn"
    );
    assert_eq!(seen.last(), Some(&ChatMessage::user("dois")));
    assert_eq!(
        store
            .conversation("c-resume")
            .await
            .expect("load")
            .expect("stored")
            .state["lento"],
        true
    );
    assert_eq!(
        texts(&store.messages("c-resume").await.expect("messages")).len(),
        6
    );
}

#[tokio::test]
async fn a_killed_turn_keeps_the_user_message_and_the_conversation_goes_on() {
    let llm = Arc::new(ScriptedProvider::new([Scripted::tool("travar", json!({}))]));
    let store = memory_store().await;
    let service = Arc::new(bare(engine(llm.clone(), Extensions::default()), store.clone()));
    let running = {
        let service = service.clone();
        tokio::spawn(async move { service.messages().handle(msg(Some("c-kill"), "primeira")).await })
    };
    // Wait until the turn is inside the action, then kill it.
    for _ in 0..200 {
        if llm.requests().len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    running.abort();
    assert!(running.await.expect_err("killed").is_cancelled());
    assert_eq!(
        texts(&store.messages("c-kill").await.expect("messages")),
        vec!["user:primeira"]
    );

    llm.push([Scripted::text("estou aqui")]);
    let handled = service
        .messages()
        .handle(msg(Some("c-kill"), "segunda"))
        .await
        .expect("the lock was released");
    assert_eq!(handled.reply_text(), "estou aqui");
    let all = texts(&store.messages("c-kill").await.expect("messages"));
    assert_eq!(all, vec!["user:primeira", "user:segunda", "assistant:estou aqui"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_of_one_conversation_never_overlap() {
    let timeline = Arc::new(Timeline::default());
    let script = [
        Scripted::tool("lento", json!({})),
        Scripted::text("a"),
        Scripted::tool("lento", json!({})),
        Scripted::text("b"),
    ];
    let llm = Arc::new(ScriptedProvider::new(script));
    let service = Arc::new(bare(
        engine(llm, Extensions::default().with(timeline.clone())),
        memory_store().await,
    ));
    let (s1, s2) = (service.clone(), service.clone());
    let (a, b) = tokio::join!(
        tokio::spawn(async move { s1.messages().handle(msg(Some("c-same"), "x")).await }),
        tokio::spawn(async move { s2.messages().handle(msg(Some("c-same"), "y")).await })
    );
    a.expect("join").expect("turn a");
    b.expect("join").expect("turn b");
    let mut runs = timeline.0.lock().expect("lock").clone();
    runs.sort_by_key(|r| r.0);
    assert_eq!(runs.len(), 2);
    assert!(
        runs[0].1 <= runs[1].0,
        "the second turn started after the first ended: {runs:?}"
    );
}

#[tokio::test]
async fn oversized_and_empty_messages_are_stored_and_answered_without_a_model() {
    let llm = Arc::new(ScriptedProvider::new([]));
    let store = memory_store().await;
    let service = bare(engine(llm.clone(), Extensions::default()), store.clone());
    let long = "a".repeat(6_000);
    let handled = service
        .messages()
        .handle(msg(Some("c-big"), &long))
        .await
        .expect("handled");
    assert!(
        handled.reply_text().contains("6000 caracteres"),
        "{}",
        handled.reply_text()
    );
    let handled = service
        .messages()
        .handle(msg(Some("c-big"), "   "))
        .await
        .expect("handled");
    assert!(handled.reply_text().contains("Não recebi"));
    assert!(llm.requests().is_empty());
    assert_eq!(store.messages("c-big").await.expect("messages").len(), 4);
}

#[tokio::test]
async fn an_unknown_agent_writes_nothing() {
    let llm = Arc::new(ScriptedProvider::new([]));
    let store = memory_store().await;
    let service = bare(engine(llm, Extensions::default()), store.clone());
    let mut m = msg(Some("c-x"), "oi");
    m.agent_id = "inexistente".into();
    let err = service.messages().handle(m).await.expect_err("unknown agent");
    assert_eq!(err.to_string(), "agente não encontrado: inexistente");
    assert!(store.conversation("c-x").await.expect("load").is_none());
    assert!(store.messages("c-x").await.expect("messages").is_empty());
}

/// A store that fails the writes it is told to fail.
pub(crate) struct Flaky {
    pub(crate) inner: Arc<dyn Store>,
    pub(crate) fail_append: bool,
    pub(crate) fail_turn: bool,
    /// Accepting a message with this text fails.
    pub(crate) fail_accepting: Option<&'static str>,
    pub(crate) turn_attempts: AtomicU32,
}

fn broken() -> StoreError {
    StoreError::Invalid("disco cheio".into())
}

#[async_trait]
impl vt_store::concerns::ConversationStore for Flaky {
    async fn save_conversation(&self, c: &Conversation, now: DateTime<Utc>) -> Result<(), StoreError> {
        self.inner.save_conversation(c, now).await
    }
    async fn conversation(&self, id: &str) -> Result<Option<Conversation>, StoreError> {
        self.inner.conversation(id).await
    }
    async fn previous_conversation(&self, c: &Conversation) -> Result<Option<Conversation>, StoreError> {
        self.inner.previous_conversation(c).await
    }
    async fn append_message(
        &self,
        c: &str,
        e: Option<&str>,
        m: &ChatMessage,
        now: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        if self.fail_append {
            return Err(broken());
        }
        self.inner.append_message(c, e, m, now).await
    }
    async fn heard(&self, id: i64, m: &ChatMessage) -> Result<(), StoreError> {
        self.inner.heard(id, m).await
    }
    async fn unprocessed_messages(
        &self,
        through: Option<(&str, i64)>,
        limit: i64,
    ) -> Result<Vec<UnprocessedMessage>, StoreError> {
        self.inner.unprocessed_messages(through, limit).await
    }
    async fn messages_after(&self, c: &str, after: i64) -> Result<Vec<StoredMessage>, StoreError> {
        self.inner.messages_after(c, after).await
    }
    async fn save_turn(&self, t: TurnRecord<'_>, now: DateTime<Utc>) -> Result<(), StoreError> {
        self.turn_attempts.fetch_add(1, Ordering::SeqCst);
        if self.fail_turn {
            return Err(broken());
        }
        self.inner.save_turn(t, now).await
    }
    async fn execution(&self, id: &str) -> Result<Option<(ExecutionRecord, Vec<TurnEvent>)>, StoreError> {
        self.inner.execution(id).await
    }
    async fn executions(&self, c: &str) -> Result<Vec<(ExecutionRecord, Vec<TurnEvent>)>, StoreError> {
        self.inner.executions(c).await
    }
    async fn save_task_run(&self, t: &TaskRun) -> Result<(), StoreError> {
        self.inner.save_task_run(t).await
    }
    async fn task_runs(&self, c: &str) -> Result<Vec<TaskRun>, StoreError> {
        self.inner.task_runs(c).await
    }
    async fn save_context(&self, c: &ConversationContext) -> Result<(), StoreError> {
        self.inner.save_context(c).await
    }
    async fn context(&self, c: &str) -> Result<Option<ConversationContext>, StoreError> {
        self.inner.context(c).await
    }
    async fn accept_message(&self, a: vt_store::records::Accepting<'_>) -> Result<Option<i64>, StoreError> {
        if self.fail_append || self.fail_accepting.is_some_and(|t| a.message.text() == Some(t)) {
            return Err(broken());
        }
        self.inner.accept_message(a).await
    }
    async fn conversation_list(
        &self,
        q: &vt_store::records::ConversationQuery,
    ) -> Result<Vec<vt_store::records::ConversationListing>, StoreError> {
        self.inner.conversation_list(q).await
    }
    async fn lock_conversation(&self, c: &str) -> Result<TurnLock, StoreError> {
        self.inner.lock_conversation(c).await
    }
}

#[async_trait]
impl vt_store::concerns::FlowStore for Flaky {
    async fn save_flow_run(&self, r: &FlowRunRecord) -> Result<(), StoreError> {
        self.inner.save_flow_run(r).await
    }
    async fn flow_run(&self, id: &str) -> Result<Option<FlowRunRecord>, StoreError> {
        self.inner.flow_run(id).await
    }
    async fn runs_started_by(&self, parent: &str) -> Result<Vec<String>, StoreError> {
        self.inner.runs_started_by(parent).await
    }
    async fn flow_outcomes_since(&self, since: DateTime<Utc>) -> Result<Vec<(String, i64)>, StoreError> {
        self.inner.flow_outcomes_since(since).await
    }
    async fn flow_runs_since(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<vt_store::records::FlowRunAt>, StoreError> {
        self.inner.flow_runs_since(since).await
    }
    async fn begin_flow_run(
        &self,
        c: &Conversation,
        m: &ChatMessage,
        id: &str,
        input: &serde_json::Value,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.inner.begin_flow_run(c, m, id, input, now).await
    }
    async fn flow_runs(&self, limit: i64) -> Result<Vec<FlowRunSummary>, StoreError> {
        self.inner.flow_runs(limit).await
    }
    async fn settle_flow_run(
        &self,
        id: &str,
        status: vt_store::records::RunStatus,
        stage: (&str, &serde_json::Value),
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.inner.settle_flow_run(id, status, stage, now).await
    }
}

#[async_trait]
impl vt_store::concerns::RechargeStore for Flaky {
    async fn consume_confirmation(
        &self,
        c: Confirmation<'_>,
        a: Option<&RechargeAttempt>,
        now: DateTime<Utc>,
    ) -> Result<Consumption, StoreError> {
        self.inner.consume_confirmation(c, a, now).await
    }
    async fn confirmation_consumer(&self, p: &str) -> Result<Option<String>, StoreError> {
        self.inner.confirmation_consumer(p).await
    }
    async fn begin_recharge(
        &self,
        a: &RechargeAttempt,
        f: Option<&vt_store::followup::NewFollowUp>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.inner.begin_recharge(a, f, now).await
    }
    async fn resolve_recharge(
        &self,
        k: &str,
        s: vt_domain::journal::AttemptStatus,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.inner.resolve_recharge(k, s, now).await
    }
    async fn unresolved_recharge(&self, s: &str, f: &str) -> Result<Option<String>, StoreError> {
        self.inner.unresolved_recharge(s, f).await
    }
    async fn recharge_attempts(&self, limit: i64) -> Result<Vec<RechargeAttemptRecord>, StoreError> {
        self.inner.recharge_attempts(limit).await
    }
    async fn claim_followups(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<vt_store::followup::FollowUp>, StoreError> {
        self.inner.claim_followups(now, lease_until, limit).await
    }
    async fn followup_checked(
        &self,
        k: &str,
        c: &vt_store::followup::Checked,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.inner.followup_checked(k, c, now).await
    }
    async fn followups(
        &self,
        pending_only: bool,
        limit: i64,
    ) -> Result<Vec<vt_store::followup::FollowUpView>, StoreError> {
        self.inner.followups(pending_only, limit).await
    }
}

#[async_trait]
impl vt_store::concerns::OutboxStore for Flaky {
    async fn hold(&self, id: i64, why: &str) -> Result<(), StoreError> {
        self.inner.hold(id, why).await
    }
    async fn enqueue(&self, i: &NewOutboxItem, now: DateTime<Utc>) -> Result<i64, StoreError> {
        self.inner.enqueue(i, now).await
    }
    async fn claim(
        &self,
        l: i64,
        now: DateTime<Utc>,
        lease: chrono::Duration,
    ) -> Result<Vec<OutboxItem>, StoreError> {
        self.inner.claim(l, now, lease).await
    }
    async fn ack(&self, id: i64) -> Result<(), StoreError> {
        self.inner.ack(id).await
    }
    async fn retry_later(&self, id: i64, e: &str, at: DateTime<Utc>) -> Result<OutboxStatus, StoreError> {
        self.inner.retry_later(id, e, at).await
    }
    async fn record_sent(&self, id: i64, e: &str) -> Result<(), StoreError> {
        self.inner.record_sent(id, e).await
    }
    async fn record_delivery_status(
        &self,
        e: &str,
        s: &str,
        c: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.inner.record_delivery_status(e, s, c, at).await
    }
    async fn delivery_statuses(&self, e: &str) -> Result<Vec<(String, Option<String>)>, StoreError> {
        self.inner.delivery_statuses(e).await
    }
    async fn dead_letter(&self, id: i64, e: &str) -> Result<(), StoreError> {
        self.inner.dead_letter(id, e).await
    }
    async fn outbox_count(&self, s: OutboxStatus) -> Result<i64, StoreError> {
        self.inner.outbox_count(s).await
    }
    async fn outbox_items(&self, s: OutboxStatus, l: i64) -> Result<Vec<OutboxItem>, StoreError> {
        self.inner.outbox_items(s, l).await
    }
    async fn requeue(&self, id: i64, now: DateTime<Utc>) -> Result<bool, StoreError> {
        self.inner.requeue(id, now).await
    }
    async fn outbox_item(&self, id: i64) -> Result<Option<OutboxItem>, StoreError> {
        self.inner.outbox_item(id).await
    }
}

#[async_trait]
impl vt_store::concerns::BatchStore for Flaky {
    async fn open_batch(
        &self,
        j: &vt_store::records::BatchJob,
    ) -> Result<vt_store::records::BatchJob, StoreError> {
        self.inner.open_batch(j).await
    }
    async fn batch(&self, id: &str) -> Result<Option<vt_store::records::BatchJob>, StoreError> {
        self.inner.batch(id).await
    }
    async fn save_batch_lines(
        &self,
        j: &str,
        l: &[vt_store::records::BatchLine],
        r: &[vt_store::records::FlowRunRecord],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.inner.save_batch_lines(j, l, r, now).await
    }
    async fn batch_lines(&self, j: &str) -> Result<Vec<vt_store::records::BatchLine>, StoreError> {
        self.inner.batch_lines(j).await
    }
    async fn batch_counts(&self, j: &str) -> Result<Vec<(vt_store::records::LineStatus, i64)>, StoreError> {
        self.inner.batch_counts(j).await
    }
    async fn finish_batch(&self, j: &str, now: DateTime<Utc>) -> Result<(), StoreError> {
        self.inner.finish_batch(j, now).await
    }
    async fn unfinished_batches(&self) -> Result<Vec<vt_store::records::BatchJob>, StoreError> {
        self.inner.unfinished_batches().await
    }
    async fn batches(
        &self,
        tenant: Option<&str>,
        limit: i64,
    ) -> Result<Vec<vt_store::records::BatchJob>, StoreError> {
        self.inner.batches(tenant, limit).await
    }
    async fn share_batch(&self, j: &str, chunks: i64) -> Result<(), StoreError> {
        self.inner.share_batch(j, chunks).await
    }
    async fn claim_batch_chunk(
        &self,
        j: &str,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Option<i64>, StoreError> {
        self.inner.claim_batch_chunk(j, owner, now, until).await
    }
    async fn renew_batch_chunk(
        &self,
        j: &str,
        chunk: i64,
        owner: &str,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.inner.renew_batch_chunk(j, chunk, owner, until).await
    }
    async fn release_batch_chunk(
        &self,
        j: &str,
        chunk: i64,
        owner: &str,
        done: bool,
        not_before: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.inner
            .release_batch_chunk(j, chunk, owner, done, not_before)
            .await
    }
    async fn batch_chunks_open(&self, j: &str, now: DateTime<Utc>) -> Result<(i64, i64), StoreError> {
        self.inner.batch_chunks_open(j, now).await
    }
    async fn claimable_batches(&self, now: DateTime<Utc>) -> Result<Vec<String>, StoreError> {
        self.inner.claimable_batches(now).await
    }
    async fn ended_lines(&self, j: &str, from: i64, to: i64) -> Result<Vec<i64>, StoreError> {
        self.inner.ended_lines(j, from, to).await
    }
}

#[async_trait]
impl vt_store::concerns::ReportStore for Flaky {
    async fn record_usage(&self, u: &UsageRecord) -> Result<(), StoreError> {
        self.inner.record_usage(u).await
    }
    async fn usage_summary(&self, since: DateTime<Utc>) -> Result<Vec<UsageSummaryRow>, StoreError> {
        self.inner.usage_summary(since).await
    }
    async fn upsert_intent(&self, i: &IntentRecord, now: DateTime<Utc>) -> Result<(), StoreError> {
        self.inner.upsert_intent(i, now).await
    }
    async fn intents(&self) -> Result<Vec<IntentRecord>, StoreError> {
        self.inner.intents().await
    }
    async fn put_idempotency(
        &self,
        r: &IdempotencyRecord,
        now: DateTime<Utc>,
    ) -> Result<IdempotencyPut, StoreError> {
        self.inner.put_idempotency(r, now).await
    }
    async fn idempotency(
        &self,
        k: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        self.inner.idempotency(k, now).await
    }
    async fn settle_idempotency(&self, k: &str, r: Option<&serde_json::Value>) -> Result<(), StoreError> {
        self.inner.settle_idempotency(k, r).await
    }
    async fn usage_since(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<vt_store::records::UsageRecord>, StoreError> {
        self.inner.usage_since(since).await
    }
    async fn spent_since(&self, tenant: &str, since: DateTime<Utc>) -> Result<i64, StoreError> {
        self.inner.spent_since(tenant, since).await
    }
    async fn spent_by_tenant_since(&self, since: DateTime<Utc>) -> Result<Vec<(String, i64)>, StoreError> {
        self.inner.spent_by_tenant_since(since).await
    }
    async fn spending_by_tenant_since(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<vt_store::records::TenantSpending>, StoreError> {
        self.inner.spending_by_tenant_since(since).await
    }
    async fn record_message_cost(&self, c: &vt_store::records::MessageCost) -> Result<(), StoreError> {
        self.inner.record_message_cost(c).await
    }
    async fn message_costs_since(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<vt_store::records::MessageCost>, StoreError> {
        self.inner.message_costs_since(since).await
    }
    async fn record_audit(&self, r: &vt_store::records::AuditRecord) -> Result<(), StoreError> {
        self.inner.record_audit(r).await
    }
    async fn audit_records(&self, l: i64) -> Result<Vec<vt_store::records::AuditRecord>, StoreError> {
        self.inner.audit_records(l).await
    }
}

#[async_trait]
impl vt_store::concerns::KeepingStore for Flaky {
    async fn subject_records(&self, s: &vt_store::Subject) -> Result<vt_store::Records, StoreError> {
        self.inner.subject_records(s).await
    }
    async fn forget(&self, r: &vt_store::Records) -> Result<(), StoreError> {
        self.inner.forget(r).await
    }
    async fn store_secrets(&self) -> Result<std::collections::HashMap<String, String>, StoreError> {
        self.inner.store_secrets().await
    }
    async fn put_store_secret(&self, name: &str, value: &str) -> Result<String, StoreError> {
        self.inner.put_store_secret(name, value).await
    }
    async fn reseal(
        &self,
        progress: &(dyn for<'p> Fn(&'p str, u64) + Send + Sync),
    ) -> Result<u64, StoreError> {
        self.inner.reseal(progress).await
    }
}

#[async_trait]
impl vt_store::concerns::CaseStore for Flaky {
    async fn open_case(
        &self,
        c: &vt_store::records::NewCase,
        now: DateTime<Utc>,
    ) -> Result<vt_store::records::CaseOpened, StoreError> {
        self.inner.open_case(c, now).await
    }
    async fn case(&self, id: &str) -> Result<Option<vt_store::records::Case>, StoreError> {
        self.inner.case(id).await
    }
    async fn open_case_of(&self, c: &str) -> Result<Option<vt_store::records::Case>, StoreError> {
        self.inner.open_case_of(c).await
    }
    async fn open_case_count(&self) -> Result<i64, StoreError> {
        self.inner.open_case_count().await
    }
    async fn case_times(
        &self,
        t: Option<&str>,
        since: DateTime<Utc>,
    ) -> Result<Vec<vt_store::records::CaseTimes>, StoreError> {
        self.inner.case_times(t, since).await
    }
    async fn cases(&self, t: Option<&str>, limit: i64) -> Result<Vec<vt_store::records::Case>, StoreError> {
        self.inner.cases(t, limit).await
    }
    async fn claim_case(
        &self,
        id: &str,
        o: &str,
        now: DateTime<Utc>,
    ) -> Result<vt_store::records::Claim, StoreError> {
        self.inner.claim_case(id, o, now).await
    }
    async fn close_case(
        &self,
        id: &str,
        who: &str,
        to: vt_store::records::CaseState,
        note: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Option<vt_store::records::Case>, StoreError> {
        self.inner.close_case(id, who, to, note, now).await
    }
    async fn case_events(&self, id: &str) -> Result<Vec<vt_store::records::CaseEvent>, StoreError> {
        self.inner.case_events(id).await
    }
    async fn take_due_notice(
        &self,
        now: DateTime<Utc>,
    ) -> Result<Option<vt_store::records::Case>, StoreError> {
        self.inner.take_due_notice(now).await
    }
    async fn say_in_case(
        &self,
        c: &str,
        m: &ChatMessage,
        o: &[NewOutboxItem],
        e: Option<&vt_store::records::CaseEvent>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.inner.say_in_case(c, m, o, e, now).await
    }
    async fn note_case(
        &self,
        e: &vt_store::records::CaseEvent,
        o: &[NewOutboxItem],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.inner.note_case(e, o, now).await
    }
    async fn set_board_post(&self, c: &str, p: &str) -> Result<(), StoreError> {
        self.inner.set_board_post(c, p).await
    }
    async fn case_of_board_post(&self, p: &str) -> Result<Option<vt_store::records::Case>, StoreError> {
        self.inner.case_of_board_post(p).await
    }
    async fn next_protocol(&self, t: &str, day: chrono::NaiveDate) -> Result<String, StoreError> {
        self.inner.next_protocol(t, day).await
    }
    async fn case_by_protocol(
        &self,
        t: Option<&str>,
        p: &str,
    ) -> Result<Option<vt_store::records::Case>, StoreError> {
        self.inner.case_by_protocol(t, p).await
    }
    async fn open_cases(&self) -> Result<Vec<vt_store::records::Case>, StoreError> {
        self.inner.open_cases().await
    }
    async fn cases_opened_between(
        &self,
        t: Option<&str>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<vt_store::records::Case>, StoreError> {
        self.inner.cases_opened_between(t, from, to).await
    }
    async fn offer_case(&self, o: &vt_store::concerns::CaseOffer) -> Result<bool, StoreError> {
        self.inner.offer_case(o).await
    }
    async fn team_turn(&self, t: &str) -> Result<Option<String>, StoreError> {
        self.inner.team_turn(t).await
    }
    async fn transfer_case(
        &self,
        t: &vt_store::concerns::CaseTransfer,
    ) -> Result<Option<vt_store::records::Case>, StoreError> {
        self.inner.transfer_case(t).await
    }
    async fn warn_sla(&self, c: &str, k: &str) -> Result<bool, StoreError> {
        self.inner.warn_sla(c, k).await
    }
    async fn set_away(&self, l: &str, away: bool, now: DateTime<Utc>) -> Result<(), StoreError> {
        self.inner.set_away(l, away, now).await
    }
    async fn away_agents(&self) -> Result<Vec<String>, StoreError> {
        self.inner.away_agents().await
    }
}

#[async_trait::async_trait]
impl vt_store::concerns::ContactStore for Flaky {
    async fn touch_contact(&self, w: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.inner.touch_contact(w, at).await
    }
    async fn last_inbound(&self, w: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.inner.last_inbound(w).await
    }
    async fn set_template_state(&self, t: &vt_store::concerns::TemplateState) -> Result<(), StoreError> {
        self.inner.set_template_state(t).await
    }
    async fn template_states(&self) -> Result<Vec<vt_store::concerns::TemplateState>, StoreError> {
        self.inner.template_states().await
    }
    async fn record_consent(&self, c: &vt_store::concerns::ConsentChange) -> Result<(), StoreError> {
        self.inner.record_consent(c).await
    }
    async fn consent(&self, w: &str) -> Result<Option<vt_store::concerns::ConsentChange>, StoreError> {
        self.inner.consent(w).await
    }
    async fn consent_events(&self, w: &str) -> Result<Vec<vt_store::concerns::ConsentChange>, StoreError> {
        self.inner.consent_events(w).await
    }
    async fn take_low_balance_notice(
        &self,
        c: &str,
        not_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.inner.take_low_balance_notice(c, not_before, now).await
    }
    async fn balance_recovered(&self, c: &str) -> Result<(), StoreError> {
        self.inner.balance_recovered(c).await
    }
}

#[async_trait::async_trait]
impl vt_store::concerns::PixStore for Flaky {
    async fn open_charge(
        &self,
        c: &vt_store::records::PixCharge,
    ) -> Result<vt_store::records::PixCharge, StoreError> {
        self.inner.open_charge(c).await
    }
    async fn pix_charge(&self, t: &str) -> Result<Option<vt_store::records::PixCharge>, StoreError> {
        self.inner.pix_charge(t).await
    }
    async fn note_credit_run(&self, t: &str, e: &str) -> Result<(), StoreError> {
        self.inner.note_credit_run(t, e).await
    }
    async fn recharge_charges(&self, k: &str) -> Result<Vec<vt_store::records::PixCharge>, StoreError> {
        self.inner.recharge_charges(k).await
    }
    async fn claim_payment(
        &self,
        t: &str,
        e2e: &str,
        at: DateTime<Utc>,
    ) -> Result<vt_store::records::PaymentClaim, StoreError> {
        self.inner.claim_payment(t, e2e, at).await
    }
    async fn settle_charge(
        &self,
        t: &str,
        from: vt_store::records::ChargeStatus,
        to: vt_store::records::ChargeStatus,
    ) -> Result<bool, StoreError> {
        self.inner.settle_charge(t, from, to).await
    }
    async fn charges_in(
        &self,
        s: vt_store::records::ChargeStatus,
        limit: i64,
    ) -> Result<Vec<vt_store::records::PixCharge>, StoreError> {
        self.inner.charges_in(s, limit).await
    }
    async fn conversation_charges(
        &self,
        conv: &str,
    ) -> Result<Vec<vt_store::records::PixCharge>, StoreError> {
        self.inner.conversation_charges(conv).await
    }
    async fn charge_counts(&self) -> Result<Vec<(vt_store::records::ChargeStatus, i64)>, StoreError> {
        self.inner.charge_counts().await
    }
    async fn payment_seconds(&self, since: DateTime<Utc>) -> Result<Vec<i64>, StoreError> {
        self.inner.payment_seconds(since).await
    }
    async fn record_refund(&self, t: &str, e2e: &str, status: &str) -> Result<(), StoreError> {
        self.inner.record_refund(t, e2e, status).await
    }
    async fn refunds_in_progress(&self, limit: i64) -> Result<Vec<vt_store::records::PixCharge>, StoreError> {
        self.inner.refunds_in_progress(limit).await
    }
}

#[async_trait::async_trait]
#[async_trait::async_trait]
impl vt_store::concerns::RecurrenceStore for Flaky {
    async fn put_recurrence(&self, r: &vt_store::records::Recurrence) -> Result<(), StoreError> {
        self.inner.put_recurrence(r).await
    }
    async fn recurrence(&self, id: &str) -> Result<Option<vt_store::records::Recurrence>, StoreError> {
        self.inner.recurrence(id).await
    }
    async fn recurrence_by_rec(&self, id: &str) -> Result<Option<vt_store::records::Recurrence>, StoreError> {
        self.inner.recurrence_by_rec(id).await
    }
    async fn move_recurrence(
        &self,
        id: &str,
        from: &[vt_store::records::RecurrenceStatus],
        to: vt_store::records::RecurrenceStatus,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.inner.move_recurrence(id, from, to, at).await
    }
    async fn recurrences_in(
        &self,
        s: vt_store::records::RecurrenceStatus,
        limit: i64,
    ) -> Result<Vec<vt_store::records::Recurrence>, StoreError> {
        self.inner.recurrences_in(s, limit).await
    }
    async fn user_recurrences(
        &self,
        t: &str,
        u: &str,
    ) -> Result<Vec<vt_store::records::Recurrence>, StoreError> {
        self.inner.user_recurrences(t, u).await
    }
    async fn recurrence_listing(
        &self,
        t: Option<&str>,
        limit: i64,
    ) -> Result<Vec<vt_store::records::RecurrenceListed>, StoreError> {
        self.inner.recurrence_listing(t, limit).await
    }
    async fn take_daily_check(&self, id: &str, day: &str) -> Result<bool, StoreError> {
        self.inner.take_daily_check(id, day).await
    }
    async fn note_recurrence(&self, id: &str, outcome: &str) -> Result<(), StoreError> {
        self.inner.note_recurrence(id, outcome).await
    }
    async fn open_recurring_charge(
        &self,
        c: &vt_store::records::RecurringCharge,
    ) -> Result<bool, StoreError> {
        self.inner.open_recurring_charge(c).await
    }
    async fn recurring_charge(
        &self,
        t: &str,
    ) -> Result<Option<vt_store::records::RecurringCharge>, StoreError> {
        self.inner.recurring_charge(t).await
    }
    async fn recurring_charges_in(
        &self,
        s: vt_store::records::RecurringChargeStatus,
        limit: i64,
    ) -> Result<Vec<vt_store::records::RecurringCharge>, StoreError> {
        self.inner.recurring_charges_in(s, limit).await
    }
    async fn charges_of_recurrence(
        &self,
        id: &str,
    ) -> Result<Vec<vt_store::records::RecurringCharge>, StoreError> {
        self.inner.charges_of_recurrence(id).await
    }
    async fn move_recurring_charge(
        &self,
        t: &str,
        from: vt_store::records::RecurringChargeStatus,
        to: vt_store::records::RecurringChargeStatus,
    ) -> Result<bool, StoreError> {
        self.inner.move_recurring_charge(t, from, to).await
    }
    async fn claim_recurring_payment(
        &self,
        t: &str,
        e2e: &str,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.inner.claim_recurring_payment(t, e2e, at).await
    }
    async fn count_retry(&self, t: &str, seen: i64) -> Result<bool, StoreError> {
        self.inner.count_retry(t, seen).await
    }
    async fn take_funds_notice(&self, t: &str) -> Result<bool, StoreError> {
        self.inner.take_funds_notice(t).await
    }
    async fn offer_automatic(
        &self,
        conv: &str,
        state: &serde_json::Map<String, serde_json::Value>,
        said: (&vt_engine::llm::ChatMessage, &[vt_store::records::NewOutboxItem]),
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.inner.offer_automatic(conv, state, said, at).await
    }
    async fn recurrence_counts(&self) -> Result<(Vec<(String, i64)>, Vec<(String, i64)>), StoreError> {
        self.inner.recurrence_counts().await
    }
}

#[async_trait::async_trait]
impl vt_store::concerns::OutcomeStore for Flaky {
    async fn stretches_over(
        &self,
        window: (DateTime<Utc>, DateTime<Utc>),
        except: &str,
        limit: i64,
    ) -> Result<Vec<vt_store::records::StretchHead>, StoreError> {
        self.inner.stretches_over(window, except, limit).await
    }
    async fn stretch(
        &self,
        h: &vt_store::records::StretchHead,
    ) -> Result<vt_store::records::Stretch, StoreError> {
        self.inner.stretch(h).await
    }
    async fn resolved_before(
        &self,
        h: &vt_store::records::StretchHead,
        a: &str,
        since: DateTime<Utc>,
    ) -> Result<Option<String>, StoreError> {
        self.inner.resolved_before(h, a, since).await
    }
    async fn record_outcome(&self, o: &vt_store::records::OutcomeRecord) -> Result<bool, StoreError> {
        self.inner.record_outcome(o).await
    }
    async fn extend_outcome(&self, h: &vt_store::records::StretchHead) -> Result<bool, StoreError> {
        self.inner.extend_outcome(h).await
    }
    async fn last_survey(
        &self,
        h: &vt_store::records::StretchHead,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.inner.last_survey(h).await
    }
    async fn ask_survey(
        &self,
        asked: (&vt_store::records::StretchHead, &str),
        state: &serde_json::Map<String, serde_json::Value>,
        said: (&vt_engine::llm::ChatMessage, &[vt_store::records::NewOutboxItem]),
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.inner.ask_survey(asked, state, said, at).await
    }
    async fn record_score(&self, o: &str, nota: i32, at: DateTime<Utc>) -> Result<bool, StoreError> {
        self.inner.record_score(o, nota, at).await
    }
    async fn outcomes_since(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<vt_store::records::OutcomeRecord>, StoreError> {
        self.inner.outcomes_since(since).await
    }
}

impl Store for Flaky {
    fn backend(&self) -> &'static str {
        "flaky"
    }
}

#[tokio::test]
async fn a_message_that_cannot_be_stored_is_not_processed_and_the_user_is_told() {
    let llm = Arc::new(ScriptedProvider::new([Scripted::text("não deveria")]));
    let flaky = Arc::new(Flaky {
        inner: memory_store().await,
        fail_append: true,
        fail_turn: false,
        fail_accepting: None,
        turn_attempts: AtomicU32::new(0),
    });
    let service = bare(engine(llm.clone(), Extensions::default()), flaky);
    let err = service
        .messages()
        .handle(msg(Some("c-flaky"), "recarrega"))
        .await
        .expect_err("not recorded");
    assert!(matches!(err, ServiceError::NotRecorded(_)));
    assert!(
        err.to_string()
            .contains("não foi possível registrar sua mensagem"),
        "{err}"
    );
    assert!(
        llm.requests().is_empty(),
        "nothing acted on an unrecorded message"
    );
}

#[tokio::test]
async fn a_turn_that_cannot_be_stored_is_retried_and_reported() {
    let llm = Arc::new(ScriptedProvider::new([Scripted::text("resposta")]));
    let inner = memory_store().await;
    let flaky = Arc::new(Flaky {
        inner: inner.clone(),
        fail_append: false,
        fail_turn: true,
        fail_accepting: None,
        turn_attempts: AtomicU32::new(0),
    });
    let setup = ServicesConfig {
        service: crate::support::fast_service(),
        ..Default::default()
    };
    let service = Services::new(engine(llm, Extensions::default()), flaky.clone(), setup);
    let handled = service
        .messages()
        .handle(msg(Some("c-turnfail"), "oi"))
        .await
        .expect("the reply still goes out");
    assert_eq!(handled.reply_text(), "resposta");
    assert!(!handled.persisted);
    assert_eq!(
        flaky.turn_attempts.load(Ordering::SeqCst),
        3,
        "persist retried per the BPMN table"
    );
    assert_eq!(
        texts(&inner.messages("c-turnfail").await.expect("messages")),
        vec!["user:oi"]
    );
}

#[tokio::test]
async fn run_flow_stores_the_run_and_its_stages() {
    let h = crate::support::flow_harness(crate::support::quick_simulator()).await;
    let store = memory_store().await;
    let engine = Arc::new(h.engine);
    let service = bare(engine, store.clone());
    let vt_agent::FlowRan { output, persisted, .. } = service
        .flows().run_flow(r#"{"cartao": "1111111111", "recarga": {"valor": 50, "meio_pagamento": {"tipo": "pix"}}, "cpf": "123.456.789-00"}"#, Default::default())
        .await
        .expect("flow");
    assert!(persisted);
    let run = store
        .flow_run(&output.execucao_id)
        .await
        .expect("load")
        .expect("stored");
    assert_eq!(run.stages.len(), 10);
    assert_eq!(run.stages[0].0, "rf01_preparar_consulta");
    assert!(
        !run.input.to_string().contains("123.456.789-00"),
        "unknown fields are not stored"
    );
    // The stages are where the output is kept: the output read back is built from them, whole.
    assert_eq!(vt_agent::FlowOutput::of_run(&run), output);
    let (execution, events) = store
        .execution(&output.execucao_id)
        .await
        .expect("load")
        .expect("stored");
    assert_eq!(execution.model_calls.len(), 0);
    // RF1 gets its input typed with the turn: its call carries no copy of the input to parse again.
    let rf01 = events
        .iter()
        .find_map(|e| match e {
            vt_engine::conversation::TurnEvent::ToolCall { name, arguments, .. }
                if name == "rf01_preparar_consulta" =>
            {
                Some(arguments.clone())
            }
            _ => None,
        })
        .expect("RF1's call");
    assert_eq!(rf01, "{}");
    // Each stage's output is kept once, in its stage: the chain's history (calls, results, events)
    // points at it. The card is in the output of every stage but one, and in no history line.
    let mut history: Vec<String> = store
        .messages(&execution.conversation_id)
        .await
        .expect("messages")
        .iter()
        .skip(1) // the user's message: the input, as it came
        .map(|m| serde_json::to_string(&m.message).expect("json"))
        .collect();
    // RF3's balance is also the memory RF5 and RF8 read (its own concern, kept with the conversation);
    // what the systems answered is on the run's tape (sealed, as a turn's is), for a replay's world.
    let taped = events
        .iter()
        .filter(|e| matches!(e, vt_engine::conversation::TurnEvent::Exchanged(_)))
        .count();
    assert_eq!(taped, 4, "the balance, two notices and the recharge, answered");
    history.extend(
        events
            .iter()
            .filter(|e| {
                !matches!(
                    e,
                    vt_engine::conversation::TurnEvent::MemoryUpdated { .. }
                        | vt_engine::conversation::TurnEvent::Exchanged(_)
                )
            })
            .map(|e| serde_json::to_string(e).expect("json")),
    );
    assert_eq!(
        history.iter().filter(|h| h.contains("\"tool_calls\"")).count(),
        10,
        "a call per stage"
    );
    assert!(
        history.iter().all(|h| !h.contains("1111111111")),
        "no history line holds a stage's output: {history:?}"
    );
    assert!(
        history
            .iter()
            .any(|h| h.contains(r#"{\"$etapa\":\"rf02_executar_consulta\"}"#)),
        "{history:?}"
    );
    let err = service
        .flows()
        .run_flow("{", Default::default())
        .await
        .expect_err("invalid");
    assert!(matches!(err, ServiceError::Flow(_)));
}

/// `run-flow` parses its input once where it enters and hands values on typed: this counts the JSON
/// conversions of one stored ten-stage run (`vt_contract::json`), from the input text to the output
/// as the caller prints it. The simulator's own, on its server, are not the product's.
///
/// 109 when stages handed text on (each parsed again by the engine, re-read by the flow output) and
/// 8 stages re-read the input from memory; 92 now: 44 of them are the store sealing what it keeps
/// (one per column value), 30 the stages' outputs (typed → value → the model's text, value → the
/// next stage's type). A change that adds one fails here: say why in the bound.
#[tokio::test]
async fn a_stored_run_flow_converts_json_a_bounded_number_of_times() {
    let h = crate::support::flow_harness(crate::support::quick_simulator()).await;
    let store = memory_store().await;
    let service = bare(Arc::new(h.engine), store.clone());
    let input = include_str!("../../examples/recarga-saldo-baixo.json");
    // Traced, each span adds its input and output as text: counted here untraced, as it runs by
    // default (another test may have installed a global subscriber).
    let _untraced = tracing::subscriber::set_default(tracing::subscriber::NoSubscriber::default());
    let (output, conversions) = vt_contract::json::counted(async {
        let ran = service
            .flows()
            .run_flow(input, Default::default())
            .await
            .expect("flow");
        vt_contract::json::to_pretty(&ran.output.for_caller()).expect("printed")
    })
    .await;
    assert!(
        output.contains("rf10_enviar_notificacao_recarga"),
        "all ten stages ran"
    );
    eprintln!("run-flow JSON conversions: {conversions}");
    assert!(
        conversions <= 92,
        "{conversions} conversions (92 before this change)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_turns_on_sqlite_share_commits_and_each_is_stored_when_answered() {
    let dir = tempfile::tempdir().expect("tmp");
    let url = format!("sqlite://{}", dir.path().join("grupo.db").display());
    let sqlite = Arc::new(vt_store::sqlite::SqliteStore::connect(&url).await.expect("store"));
    let store: Arc<dyn vt_store::Store> = sqlite.clone();
    let h =
        Arc::new(crate::support::chat_harness_on(store, None, vt_domain::tools::VtSettings::default()).await);
    // One turn each first, so the conversations exist; then one more each, all at once.
    const N: usize = 60;
    for i in 0..N {
        h.say(&format!("c-grupo-{i}"), "oi").await;
    }
    let before = sqlite.commits();
    let turns: Vec<_> = (0..N)
        .map(|i| {
            let h = h.clone();
            tokio::spawn(async move {
                let conv = format!("c-grupo-{i}");
                h.say(&conv, "saldo do cartão 1234567890").await.reply_text()
            })
        })
        .collect();
    for t in turns {
        assert!(t.await.expect("join").contains("****7890"));
    }
    let commits = sqlite.commits() - before;
    println!("{commits} commits for {N} concurrent turns");
    // Alone, each turn is two commits (its message accepted, then the turn).
    assert!(
        commits < 2 * N as u64,
        "{commits} commits for {N} concurrent turns: writes that came together shared commits"
    );
    // Every answered turn is on disk: another handle on the file reads them all.
    use vt_store::concerns::ConversationStore as _;
    let fresh = vt_store::sqlite::SqliteStore::connect(&url)
        .await
        .expect("reopen");
    for i in 0..N {
        let stored = fresh.messages(&format!("c-grupo-{i}")).await.expect("messages");
        let last = stored.last().and_then(|m| m.message.text()).unwrap_or_default();
        assert!(
            last.contains("****7890"),
            "c-grupo-{i}'s second turn is stored: {last}"
        );
    }
}
