//! Test helpers: test actions and skills, an engine over a scripted model, a loopback HTTP fake.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use vt_contract::{
    Action, ActionContext, ActionError, ActionRegistry, ActionResponse, RedirectToSkill, ResponseToAgent,
    ResponseToUser,
};
use vt_domain::systems::SystemsPort;
use vt_engine::Clock;
use vt_engine::Engine;
use vt_engine::EngineConfig;
use vt_engine::IdSource;
use vt_engine::Participant;
use vt_engine::llm::LlmProvider;
use vt_engine::llm::scripted::Scripted;
use vt_engine::llm::scripted::ScriptedProvider;
use vt_engine::prompts::Prompts;
use vt_engine::retry::RetryPolicy;
use vt_engine::skills::Catalog;
use vt_engine::skills::SkillDef;

mod chat;
pub(crate) use chat::*;

#[derive(Deserialize, JsonSchema)]
pub(crate) struct CardArgs {
    /// Número do cartão.
    pub cartao: String,
}

/// Answers the agent with a fact about the card.
pub(crate) struct Lookup;

#[async_trait]
impl Action for Lookup {
    type Args = CardArgs;
    const NAME: &'static str = "consultar";
    const DESCRIPTION: &'static str = "Consulta um cartão.";
    fn retry_safe(&self) -> bool {
        true
    }
    async fn call(&self, _ctx: &ActionContext, args: CardArgs) -> Result<ActionResponse, ActionError> {
        Ok(
            ResponseToAgent::new(format!("cartão {} consultado: saldo 50,00", args.cartao))
                .with_state("ultimo_cartao", args.cartao)
                .into(),
        )
    }
}

#[derive(Deserialize, JsonSchema)]
pub(crate) struct NoArgs {}

/// Answers the user directly.
pub(crate) struct Answer;

#[async_trait]
impl Action for Answer {
    type Args = NoArgs;
    const NAME: &'static str = "responder";
    const DESCRIPTION: &'static str = "Responde direto ao usuário.";
    async fn call(&self, _ctx: &ActionContext, _args: NoArgs) -> Result<ActionResponse, ActionError> {
        Ok(ResponseToUser::new(
            "Mensagem pronta para você.",
            "INSTRUCAO_RESPONDER: usuário informado.",
        )
        .into())
    }
}

/// Switches to skill `b`.
pub(crate) struct Redirect;

#[async_trait]
impl Action for Redirect {
    type Args = NoArgs;
    const NAME: &'static str = "redirecionar";
    const DESCRIPTION: &'static str = "Passa para a skill b.";
    async fn call(&self, _ctx: &ActionContext, _args: NoArgs) -> Result<ActionResponse, ActionError> {
        Ok(ResponseToAgent::new("RESPOSTA_DE_A: dados coletados")
            .with_function(RedirectToSkill::new("b", "coleta concluída"))
            .into())
    }
}

/// Panics, to show the engine survives it.
pub(crate) struct Boom;

#[async_trait]
impl Action for Boom {
    type Args = NoArgs;
    const NAME: &'static str = "explodir";
    const DESCRIPTION: &'static str = "Falha de forma inesperada.";
    async fn call(&self, _ctx: &ActionContext, _args: NoArgs) -> Result<ActionResponse, ActionError> {
        panic!("bug inesperado")
    }
}

#[derive(Deserialize, JsonSchema)]
pub(crate) struct StepArgs {
    pub valor: i64,
}

/// A deterministic step, `passo_N`: adds one and hands over; at 3 it answers the user.
pub(crate) struct Increment<const N: usize>;

#[async_trait]
impl<const N: usize> Action for Increment<N> {
    type Args = StepArgs;
    const NAME: &'static str = ["passo_1", "passo_2", "passo_3"][N - 1];
    const DESCRIPTION: &'static str = "Soma um.";
    async fn call(&self, _ctx: &ActionContext, args: StepArgs) -> Result<ActionResponse, ActionError> {
        let valor = args.valor + 1;
        let out = serde_json::json!({ "valor": valor }).to_string();
        if valor >= 3 {
            return Ok(ResponseToUser::new(format!("resultado {valor}"), out).into());
        }
        Ok(ResponseToAgent::new(out).into())
    }
}

fn skill(
    agent: &str,
    name: &str,
    order: u32,
    prompt: &str,
    actions: &[&str],
    deterministic: bool,
) -> SkillDef {
    SkillDef {
        agent: agent.into(),
        name: name.into(),
        order,
        description: format!("skill {name}"),
        prompt: prompt.into(),
        actions: actions.iter().map(|a| (*a).to_owned()).collect(),
        deterministic,
        next: None,
    }
}

pub(crate) fn test_registry() -> ActionRegistry {
    let mut r = ActionRegistry::new();
    r.register(Lookup).expect("register");
    r.register(Answer).expect("register");
    r.register(Redirect).expect("register");
    r.register(Boom).expect("register");
    r.register(Increment::<1>).expect("register");
    r.register(Increment::<2>).expect("register");
    r.register(Increment::<3>).expect("register");
    r
}

/// Agent `genesis` (skills `a` → `b`) and agent `calc` (three deterministic steps).
pub(crate) fn test_engine(llm: Option<Arc<dyn LlmProvider>>, config: EngineConfig) -> Engine {
    let prompts = Prompts::from_sources([
        (
            "a.md".to_owned(),
            "PROMPT_A_SECRETO: você é a skill {{ skill }}.".to_owned(),
        ),
        (
            "b.md".to_owned(),
            "PROMPT_B: você é a skill {{ skill }} falando com {{ user_login }}.".to_owned(),
        ),
        ("det.md".to_owned(), "etapa {{ skill }}".to_owned()),
    ])
    .expect("prompts");
    let mut passo_1 = skill("calc", "p1", 1, "det.md", &["passo_1"], true);
    passo_1.next = Some("p2".into());
    let mut passo_2 = skill("calc", "p2", 2, "det.md", &["passo_2"], true);
    passo_2.next = Some("p3".into());
    let defs = vec![
        skill(
            "genesis",
            "a",
            1,
            "a.md",
            &["consultar", "responder", "redirecionar", "explodir"],
            false,
        ),
        skill("genesis", "b", 2, "b.md", &["consultar"], false),
        passo_1,
        passo_2,
        skill("calc", "p3", 3, "det.md", &["passo_3"], true),
    ];
    let registry = test_registry();
    let catalog = Catalog::from_defs(defs, &prompts, &registry).expect("catalog");
    Engine::new(catalog, prompts, registry, config)
        .with_llm(llm)
        .with_clock(Clock::Fixed(
            chrono::DateTime::parse_from_rfc3339("2026-11-22T12:00:00Z")
                .expect("t")
                .into(),
        ))
        .with_ids(IdSource::seeded(1))
}

/// Engine limits with millisecond backoffs.
pub(crate) fn fast_config() -> EngineConfig {
    EngineConfig {
        llm_retry: RetryPolicy::new(3, 1),
        tool_retry: RetryPolicy::new(2, 1),
        ..EngineConfig::default()
    }
}

/// The service's retries with millisecond backoffs.
pub(crate) fn fast_service() -> vt_agent::ServiceConfig {
    vt_agent::ServiceConfig {
        persist_retry: RetryPolicy::new(3, 1),
    }
}

pub(crate) fn scripted(script: Vec<Scripted>) -> (Engine, Arc<ScriptedProvider>) {
    let llm = Arc::new(ScriptedProvider::new(script));
    (test_engine(Some(llm.clone()), fast_config()), llm)
}

pub(crate) fn user() -> Participant {
    Participant {
        user_id: "u-1".into(),
        user_login: "maria".into(),
        channel: "terminal".into(),
    }
}

/// One request a fake server received.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub path: String,
    pub headers: HeaderMap,
    /// The body as JSON (`Null` when it is not: a multipart upload).
    pub body: Value,
    pub raw: Bytes,
}

/// A loopback HTTP server that answers queued responses in order and records every request.
#[derive(Clone)]
pub(crate) struct FakeServer {
    pub url: String,
    received: Arc<Mutex<Vec<Received>>>,
    /// Answers the Graph API's read receipts (`"status": "read"`) itself, leaving the queue to the
    /// sends: the receipt goes out beside a turn, in no fixed order with its reply.
    read_receipts: Arc<std::sync::atomic::AtomicBool>,
    /// Answers uploads (a path ending in `/media` or `/files`) itself, as the Graph API and
    /// Mattermost do: `{"id": "midia-N"}` and `{"file_infos": [{"id": "arquivo-N"}]}`.
    uploads: Arc<std::sync::atomic::AtomicBool>,
    /// Paths answered apart from the queue with fixed bytes (content type, body): the Graph API's
    /// media endpoints.
    files: Files,
}

type Files = Arc<Mutex<std::collections::HashMap<String, (String, Vec<u8>)>>>;
type Queue = Arc<Mutex<VecDeque<(u16, Vec<(String, String)>, String)>>>;
/// A canned response: status, extra headers, JSON body.
pub(crate) type Canned<'a> = (u16, Vec<(&'a str, &'a str)>, Value);

impl FakeServer {
    /// `responses`: status, extra headers and body, served in order (then 500s).
    pub(crate) async fn start(responses: Vec<Canned<'_>>) -> Self {
        let queue: Queue = Arc::new(Mutex::new(
            responses
                .into_iter()
                .map(|(s, h, b)| {
                    (
                        s,
                        h.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect(),
                        b.to_string(),
                    )
                })
                .collect(),
        ));
        let received = Arc::new(Mutex::new(Vec::new()));
        let read_receipts = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let uploads = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let files: Files = Arc::default();
        let (q, r, receipts, up, fs) = (
            queue.clone(),
            received.clone(),
            read_receipts.clone(),
            uploads.clone(),
            files.clone(),
        );
        let app = Router::new().fallback(move |uri: axum::http::Uri, headers: HeaderMap, raw: Bytes| {
            let (q, r, receipts, up, fs) = (q.clone(), r.clone(), receipts.clone(), up.clone(), fs.clone());
            async move {
                let file = fs.lock().expect("lock").get(uri.path()).cloned();
                let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
                let receipt = body["status"] == "read" && receipts.load(std::sync::atomic::Ordering::SeqCst);
                let path = uri.path().to_owned();
                let upload = up.load(std::sync::atomic::Ordering::SeqCst)
                    && (path.ends_with("/media") || path.ends_with("/files"));
                let n = {
                    let mut r = r.lock().expect("lock");
                    r.push(Received {
                        path: path.clone(),
                        headers,
                        body,
                        raw,
                    });
                    r.iter().filter(|x| x.path == path).count()
                };
                if let Some((content_type, bytes)) = file {
                    return (StatusCode::OK, [("content-type", content_type)], bytes).into_response();
                }
                if upload {
                    let answer = if path.ends_with("/media") {
                        serde_json::json!({"id": format!("midia-{n}")})
                    } else {
                        serde_json::json!({"file_infos": [{"id": format!("arquivo-{n}")}]})
                    };
                    return (StatusCode::CREATED, axum::Json(answer)).into_response();
                }
                if receipt {
                    return (
                        StatusCode::OK,
                        [("content-type", "application/json")],
                        r#"{"success":true}"#.to_owned(),
                    )
                        .into_response();
                }
                let next = q.lock().expect("lock").pop_front();
                let (status, extra, body) =
                    next.unwrap_or((500, Vec::new(), r#"{"error":{"message":"no more"}}"#.into()));
                let mut response = (
                    StatusCode::from_u16(status).expect("status"),
                    [("content-type", "application/json")],
                    body,
                )
                    .into_response();
                for (k, v) in extra {
                    response.headers_mut().insert(
                        axum::http::HeaderName::from_bytes(k.as_bytes()).expect("header"),
                        v.parse().expect("value"),
                    );
                }
                response
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            url,
            received,
            read_receipts,
            uploads,
            files,
        }
    }

    /// Answers `GET path` with `bytes` of `content_type`, apart from the queue.
    pub(crate) fn serve_file(&self, path: &str, content_type: &str, bytes: Vec<u8>) {
        self.files
            .lock()
            .expect("lock")
            .insert(path.to_owned(), (content_type.to_owned(), bytes));
    }

    /// With uploads answered apart from the queue.
    pub(crate) fn answering_uploads(self) -> Self {
        self.uploads.store(true, std::sync::atomic::Ordering::SeqCst);
        self
    }

    /// With read receipts answered apart from the queue.
    pub(crate) fn answering_read_receipts(self) -> Self {
        self.read_receipts
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self
    }

    pub(crate) fn received(&self) -> Vec<Received> {
        self.received.lock().expect("lock").clone()
    }
}

/// The real skills and stages against an in-process simulator with short timeouts.
pub(crate) struct FlowHarness {
    pub engine: Engine,
    pub sim: vt_simulators::systems::Simulator,
    _running: vt_simulators::systems::RunningSimulator,
}

pub(crate) async fn flow_harness(config: vt_simulators::systems::SimulatorConfig) -> FlowHarness {
    flow_harness_with(vt_simulators::systems::Simulator::new(config)).await
}

/// The magic cards plus `1111111112`, a second low-balance card.
pub(crate) fn two_low_cards(
    config: vt_simulators::systems::SimulatorConfig,
) -> vt_simulators::systems::Simulator {
    use vt_simulators::systems::{CardBehavior, magic_cards};
    let mut cards = magic_cards();
    cards.insert(
        "1111111112".into(),
        CardBehavior {
            saldo: rust_decimal::Decimal::new(500, 2),
            ..CardBehavior::default()
        },
    );
    vt_simulators::systems::Simulator::with_cards(config, cards)
}

pub(crate) async fn flow_harness_with(sim: vt_simulators::systems::Simulator) -> FlowHarness {
    use vt_connectors::systems::{SystemsConfig, VtSystems};
    let running = sim.clone().spawn(0).await.expect("simulator");
    let systems = SystemsConfig {
        timeout_cap_ms: Some(300),
        max_retry_wait_ms: 20,
        ..SystemsConfig::single(&running.url)
    };
    let ext = vt_contract::context::Extensions::default()
        .with(SystemsPort::new(VtSystems::new(systems).expect("client")));
    let engine = vt_agent::build_engine(&vt_agent::Config::default(), None, ext)
        .expect("engine")
        .with_clock(Clock::Fixed(
            chrono::DateTime::parse_from_rfc3339("2026-11-22T14:30:00Z")
                .expect("t")
                .into(),
        ))
        .with_ids(IdSource::seeded(1));
    FlowHarness {
        engine,
        sim,
        _running: running,
    }
}

/// A simulator whose slow cards answer after 2 s (the client gives up after 300 ms).
pub(crate) fn quick_simulator() -> vt_simulators::systems::SimulatorConfig {
    vt_simulators::systems::SimulatorConfig {
        slow: std::time::Duration::from_secs(2),
        ..Default::default()
    }
}

/// `vt-agent serve` in process on `127.0.0.1:0` over a [`chat_harness_on`] world: real HTTP, a real
/// store, the simulator on loopback. Dropping it does not stop the server; `stop` does, gracefully.
pub(crate) struct Served {
    pub url: String,
    pub chat: Arc<ChatHarness>,
    pub client: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
}

pub(crate) async fn serve_on(store: Arc<dyn vt_store::Store>, config: vt_agent::HttpConfig) -> Served {
    let chat = Arc::new(chat_harness_on(store, None, vt_domain::tools::VtSettings::default()).await);
    serve_chat(chat, config).await
}

pub(crate) async fn serve_chat(chat: Arc<ChatHarness>, config: vt_agent::HttpConfig) -> Served {
    let state = vt_agent::AppState::new(chat.service.clone(), "vt", config);
    serve_state(chat, state).await
}

pub(crate) async fn serve_state(chat: Arc<ChatHarness>, state: vt_agent::AppState) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(vt_agent::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    Served {
        url,
        chat,
        client: reqwest::Client::new(),
        stop: Some(stop),
        task,
    }
}

impl Served {
    pub(crate) async fn serve(config: vt_agent::HttpConfig) -> Self {
        let store: Arc<dyn vt_store::Store> = Arc::new(
            vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
                .await
                .expect("store"),
        );
        serve_on(store, config).await
    }

    /// Asks for a graceful stop.
    pub(crate) fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// POSTs `body` to `path` with `key` as the bearer, if any.
    pub(crate) async fn post(
        &self,
        path: &str,
        key: Option<&str>,
        body: serde_json::Value,
    ) -> reqwest::Response {
        let mut r = self.client.post(format!("{}{path}", self.url)).json(&body);
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        r.send().await.expect("request")
    }

    pub(crate) async fn get(&self, path: &str, key: Option<&str>) -> reqwest::Response {
        let mut r = self.client.get(format!("{}{path}", self.url));
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        r.send().await.expect("request")
    }
}

/// Writes `transcript` to a file and replays it; panics with the first mismatch when it fails.
pub(crate) async fn assert_replays_green(transcript: &vt_agent::Transcript) {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("exportada.yaml");
    std::fs::write(&path, serde_yaml::to_string(transcript).expect("yaml")).expect("write");
    let report = vt_agent::testkit::run_file(&path, &vt_agent::testkit::RunOptions::default()).await;
    assert!(
        report.passed,
        "{}",
        report.failure.map(|m| m.to_string()).unwrap_or_default()
    );
}

/// Held by the tests that set this process's index key (opening a new store the way `serve` does:
/// `prepare_sealing` draws it) and by those whose assertions need it to stay put while they run (a
/// card written, then found by its blind index): the key is process-wide, the tests run in parallel.
pub(crate) static INDEX_KEY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The data key of this test process and of the binaries its tests run (`VT_ENCRYPTION_KEY`).
pub(crate) const TEST_KEY: &str = "dGVzdGVzLWRvLXZ0LWFnZW50LWNoYXZlLWRhZG9zISE=";

/// Installs [`TEST_KEY`] for this process (once; the keys installed before stay readable).
pub(crate) fn test_keys() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let key = vt_store::seal::decode_key(TEST_KEY).expect("a 32-byte key");
        vt_store::seal::install(vt_store::seal::KeyRing::new(
            vt_store::seal::DataKey::new(key),
            Vec::new(),
        ));
    });
}

/// Reads a `serve` process's stderr up to the line that tells where it listens; its address.
pub(crate) fn listening_on(stderr: &mut impl std::io::BufRead) -> String {
    let mut line = String::new();
    while !line.contains("http://") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).expect("a line") > 0,
            "serve ended before listening"
        );
    }
    line.split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("address")
        .to_owned()
}

/// A reply item's payload with only a text, as a turn's commit writes it.
pub(crate) fn reply_payload(conversation: &str, user: &str, text: &str) -> serde_json::Value {
    vt_agent::ReplyPayload {
        conversation_id: conversation.into(),
        user_id: user.into(),
        text: text.into(),
        files: Vec::new(),
        reply_to: None,
        thread: None,
        confirmation: None,
        choices: Vec::new(),
        trace: None,
        template: None,
        fluxo: None,
    }
    .to_value()
}

/// The outbox's pending items of `store`, once `enough` says they are there (the turns a webhook
/// started run after its 200).
pub(crate) async fn pending_once(
    store: &dyn vt_store::Store,
    enough: impl Fn(&[vt_store::records::OutboxItem]) -> bool,
) -> Vec<vt_store::records::OutboxItem> {
    for _ in 0..300 {
        let items = store
            .outbox_items(vt_store::records::OutboxStatus::Pending, 100)
            .await
            .expect("read");
        if enough(&items) {
            return items;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the replies were never queued");
}

/// Whether `store` holds no message left unprocessed (every one answered, none hanging).
pub(crate) async fn all_processed(store: &dyn vt_store::Store) -> bool {
    store
        .unprocessed_messages(None, 10)
        .await
        .expect("read")
        .is_empty()
}
