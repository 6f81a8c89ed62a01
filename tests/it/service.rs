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
use vt_store::records::StoreError;
use vt_store::records::StoredMessage;
use vt_store::records::TaskRun;
use vt_store::records::TurnRecord;
use vt_store::records::UnprocessedMessage;
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
fn bare(engine: Arc<Engine>, store: impl Into<vt_store::Stores>) -> Services {
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

/// A conversation store that fails the writes it is told to fail.
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
    async fn turn_reads(&self, c: &str) -> Result<vt_store::TurnReads, StoreError> {
        self.inner.turn_reads(c).await
    }
}

impl Flaky {
    /// The whole store with its conversations through this one.
    pub(crate) fn stores(self: &Arc<Self>) -> vt_store::Stores {
        vt_store::Stores {
            conversations: self.clone(),
            ..vt_store::Stores::of(&self.inner)
        }
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
    let service = bare(engine(llm.clone(), Extensions::default()), flaky.stores());
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
    let service = Services::new(engine(llm, Extensions::default()), flaky.stores(), setup);
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
