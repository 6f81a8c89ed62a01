//! Traces over OTLP in Langfuse's shape, checked the way Langfuse would read them: the binary runs a
//! VT conversation (a model faked on loopback) and a `run-flow`, exporting to an OTLP/HTTP receiver in
//! this test that decodes the protobuf. The attribute names and value types are checked against
//! Langfuse's own mapping table (`../shared/reference/langfuse-otel-mapping.cases.json`, copied under
//! `tests/fixtures/`), and no attribute anywhere may hold a full card number or a secret.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use base64::Engine as _;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message as _;
use serde_json::{Value, json};
use vt_simulators::systems::{RunningSimulator, Simulator, SimulatorConfig};

use crate::cli::vt_agent_in;
use crate::support::FakeServer;

const PUBLIC_KEY: &str = "pk-lf-1234567890";
const SECRET_KEY: &str = "sk-lf-secret-9f8e7d6c5b4a";
const LLM_KEY: &str = "sk-test-Zq81mKd0vX3pL6tR9wB2";
const CHAT_CARD: &str = "1234567890";

/// How the receiver answers.
#[derive(Clone, Copy, PartialEq)]
enum Answer {
    Ok,
    Status(u16),
    /// Reads the request and never answers.
    Hang,
}

#[derive(Clone)]
struct Export {
    path: String,
    headers: HeaderMap,
    body: Bytes,
}

/// An OTLP/HTTP receiver on loopback.
struct Receiver {
    url: String,
    exports: Arc<Mutex<Vec<Export>>>,
}

impl Receiver {
    async fn start(answer: Answer) -> Self {
        let exports = Arc::new(Mutex::new(Vec::new()));
        let seen = exports.clone();
        let app = Router::new().fallback(move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
            let seen = seen.clone();
            async move {
                seen.lock().expect("lock").push(Export {
                    path: uri.path().to_owned(),
                    headers,
                    body,
                });
                match answer {
                    // An empty protobuf message is a valid Export*ServiceResponse.
                    Answer::Ok => (
                        StatusCode::OK,
                        [("content-type", "application/x-protobuf")],
                        Vec::new(),
                    )
                        .into_response(),
                    Answer::Status(s) => {
                        (StatusCode::from_u16(s).expect("status"), "refused").into_response()
                    }
                    Answer::Hang => std::future::pending().await,
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, exports }
    }

    fn exports(&self) -> Vec<Export> {
        self.exports.lock().expect("lock").clone()
    }

    fn spans(&self) -> Vec<SpanView> {
        let mut out = Vec::new();
        for e in self.exports().iter().filter(|e| e.path.ends_with("/v1/traces")) {
            let req = ExportTraceServiceRequest::decode(e.body.clone())
                .expect("protobuf ExportTraceServiceRequest");
            for rs in req.resource_spans {
                let resource = rs.resource.map(|r| attrs(&r.attributes)).unwrap_or_default();
                for ss in rs.scope_spans {
                    for s in ss.spans {
                        out.push(SpanView {
                            trace: hex(&s.trace_id),
                            id: hex(&s.span_id),
                            parent: hex(&s.parent_span_id),
                            name: s.name,
                            attrs: attrs(&s.attributes),
                            events: s
                                .events
                                .iter()
                                .map(|e| (e.name.clone(), attrs(&e.attributes)))
                                .collect(),
                            status: s.status.map(|st| (st.code, st.message)).unwrap_or_default(),
                            resource: resource.clone(),
                        });
                    }
                }
            }
        }
        out
    }
}

/// Attributes by key: (OTLP/JSON type name, value).
type Attrs = BTreeMap<String, (String, Value)>;

#[derive(Debug, Clone)]
struct SpanView {
    trace: String,
    id: String,
    parent: String,
    name: String,
    attrs: Attrs,
    events: Vec<(String, Attrs)>,
    status: (i32, String),
    resource: Attrs,
}

impl SpanView {
    fn str(&self, key: &str) -> &str {
        self.attrs
            .get(key)
            .and_then(|(_, v)| v.as_str())
            .unwrap_or_default()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Attributes as (OTLP/JSON type name, value).
fn attrs(kvs: &[KeyValue]) -> Attrs {
    kvs.iter()
        .map(|kv| (kv.key.clone(), typed(kv.value.as_ref())))
        .collect()
}

fn typed(v: Option<&AnyValue>) -> (String, Value) {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => ("stringValue".into(), json!(s)),
        Some(any_value::Value::IntValue(i)) => ("intValue".into(), json!(i)),
        Some(any_value::Value::DoubleValue(d)) => ("doubleValue".into(), json!(d)),
        Some(any_value::Value::BoolValue(b)) => ("boolValue".into(), json!(b)),
        Some(any_value::Value::ArrayValue(a)) => (
            "arrayValue".into(),
            Value::Array(a.values.iter().map(|v| typed(Some(v)).1).collect()),
        ),
        Some(any_value::Value::KvlistValue(l)) => ("kvlistValue".into(), json!(format!("{l:?}"))),
        Some(any_value::Value::BytesValue(b)) => ("bytesValue".into(), json!(hex(b))),
        _ => ("empty".into(), Value::Null),
    }
}

/// Every text a collector receives from us: names, attribute values, events, status, resource.
fn all_text(spans: &[SpanView]) -> String {
    let mut out = String::new();
    for s in spans {
        out.push_str(&format!(
            "{} {:?} {:?} {:?} {:?}\n",
            s.name, s.attrs, s.events, s.status, s.resource
        ));
    }
    out
}

async fn simulator() -> RunningSimulator {
    Simulator::new(SimulatorConfig::default())
        .spawn(0)
        .await
        .expect("simulator")
}

/// The binary with Langfuse's own variables pointing at `receiver`.
fn traced(data: &tempfile::TempDir, sim: &RunningSimulator, receiver: &Receiver) -> Command {
    let mut cmd = vt_agent_in(data);
    cmd.env("VT_SYSTEMS_URL", &sim.url)
        // The recharge system charges a card itself: a card recharge in the chat goes to it.
        .env("VT_CARTAO_PROVEDOR", "sistema_de_recarga")
        .env("LANGFUSE_HOST", &receiver.url)
        .env("LANGFUSE_PUBLIC_KEY", PUBLIC_KEY)
        .env("LANGFUSE_SECRET_KEY", SECRET_KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

async fn output(mut cmd: Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("run"))
        .await
        .expect("join")
}

fn openai(body: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "modelo-teste-2026",
           "choices": [{"index": 0, "finish_reason": body["finish"], "message": body["message"]}],
           "usage": {"prompt_tokens": 120, "completion_tokens": 18, "total_tokens": 138,
                     "prompt_tokens_details": {"cached_tokens": 64}}})
}

/// The mapping table: for each attribute key Langfuse maps, the OTLP value types it is given in.
fn mapping() -> (HashMap<String, BTreeSet<String>>, BTreeSet<String>) {
    let text = include_str!("../fixtures/langfuse-otel-mapping.cases.json");
    let table: Value = serde_json::from_str(text).expect("cases json");
    let mut types: HashMap<String, BTreeSet<String>> = HashMap::new();
    for case in table["cases"].as_array().expect("cases") {
        let key = case["otelAttributeKey"].as_str().expect("key").to_owned();
        for t in case["otelAttributeValue"].as_object().expect("value").keys() {
            types.entry(key.clone()).or_default().insert(t.clone());
        }
    }
    let observation_types = table["observation_type_cases"]["attribute_langfuse.observation.type"]
        .as_array()
        .expect("type cases")
        .iter()
        .map(|c| {
            c["otelAttributeValue"]["stringValue"]
                .as_str()
                .expect("type")
                .to_owned()
        })
        .collect();
    (types, observation_types)
}

fn children<'a>(spans: &'a [SpanView], parent: &SpanView) -> Vec<&'a SpanView> {
    spans
        .iter()
        .filter(|s| s.parent == parent.id && s.trace == parent.trace)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_and_a_flow_reach_langfuse_in_its_shape_with_nothing_to_hide() {
    let receiver = Receiver::start(Answer::Ok).await;
    let model = FakeServer::start(vec![
        (
            200,
            vec![],
            openai(json!({"finish": "stop", "message": {"role": "assistant", "content": "general_chat"}})),
        ),
        (
            200,
            vec![],
            openai(
                json!({"finish": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "consultar_saldo", "arguments": "{\"cartao\":\"****7890\"}"}}]}}),
            ),
        ),
    ])
    .await;
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");

    let mut chat = traced(&data, &sim, &receiver);
    chat.env("VT_LLM_BASE_URL", format!("{}/v1", model.url))
        .env("VT_LLM_API_KEY", LLM_KEY)
        .args(["chat", "--conversation", "conv-traced", "-m"])
        .arg(format!(
            "me conta uma coisa sobre o meu bilhete {CHAT_CARD}, como anda ele?"
        ));
    let out = output(chat).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let reply = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        model.received().len(),
        2,
        "classification, then the tool call: {reply}"
    );
    assert!(
        reply.contains("O saldo do cartão ****7890"),
        "the action answers the user: {reply}"
    );
    let mut flow = traced(&data, &sim, &receiver);
    flow.args(["run-flow", "examples/recarga-saldo-baixo.json"]);
    let out = output(flow).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let flow_stderr = out.stderr;

    // Both one-shot processes flushed on exit: everything is already here.
    let exports = receiver.exports();
    assert!(!exports.is_empty(), "nothing exported");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{PUBLIC_KEY}:{SECRET_KEY}"));
    for e in exports.iter().filter(|e| e.path.contains("traces")) {
        assert_eq!(e.path, "/api/public/otel/v1/traces");
        assert_eq!(e.headers["authorization"], format!("Basic {basic}").as_str());
        assert_eq!(e.headers["x-langfuse-ingestion-version"], "4");
        assert!(
            e.headers["content-type"]
                .to_str()
                .expect("ct")
                .contains("application/x-protobuf")
        );
    }
    let spans = receiver.spans();

    // The conversation's trace: the agent at the root, the pipeline's steps under it.
    let root = spans
        .iter()
        .find(|s| s.parent.is_empty() && s.str("langfuse.session.id") == "conv-traced")
        .expect("the turn's root span");
    assert_eq!(root.name, "vt");
    assert_eq!(root.str("langfuse.trace.name"), "vt");
    assert_eq!(root.str("langfuse.observation.type"), "agent");
    assert!(!root.str("langfuse.user.id").is_empty());
    let input: Value = serde_json::from_str(root.str("langfuse.observation.input")).expect("input is JSON");
    assert!(input.as_str().expect("text").contains("****7890"), "{input}");
    let output: Value =
        serde_json::from_str(root.str("langfuse.observation.output")).expect("output is JSON");
    assert!(
        output.to_string().contains("O saldo do cartão ****7890"),
        "{output}"
    );
    let steps: Vec<&str> = children(&spans, root).iter().map(|s| s.name.as_str()).collect();
    for step in ["accept", "route", "run", "commit", "deliver"] {
        assert!(steps.contains(&step), "{step} missing from {steps:?}");
    }
    let route = children(&spans, root)
        .into_iter()
        .find(|s| s.name == "route")
        .expect("route");
    assert_eq!(route.str("langfuse.observation.metadata.by"), "model");
    assert_eq!(route.str("langfuse.observation.metadata.intent"), "general_chat");
    let classify = children(&spans, route);
    assert_eq!(
        classify.len(),
        1,
        "the classification call is the route's generation"
    );
    assert_eq!(classify[0].str("langfuse.observation.type"), "generation");
    let run = children(&spans, root)
        .into_iter()
        .find(|s| s.name == "run")
        .expect("run");
    let in_run = children(&spans, run);
    let generations: Vec<_> = in_run
        .iter()
        .filter(|s| s.str("langfuse.observation.type") == "generation")
        .collect();
    assert_eq!(generations.len(), 1, "one generation per model call of the loop");
    for g in &generations {
        assert_eq!(
            g.str("gen_ai.request.model"),
            "gpt-5-mini",
            "the configured model"
        );
        assert_eq!(
            g.str("gen_ai.response.model"),
            "modelo-teste-2026",
            "the model that answered"
        );
        assert_eq!(
            g.attrs["gen_ai.usage.input_tokens"],
            ("intValue".into(), json!(120))
        );
        assert_eq!(
            g.attrs["gen_ai.usage.output_tokens"],
            ("intValue".into(), json!(18))
        );
        // Cached tokens apart, under Langfuse's `usage_details` key (any `gen_ai.usage.<key>` maps
        // to `usageDetails.<key>`, as the table's custom-tokens case has it).
        assert_eq!(
            g.attrs["gen_ai.usage.input_cache_read"],
            ("intValue".into(), json!(64))
        );
        let messages: Value = serde_json::from_str(g.str("langfuse.observation.input")).expect("input JSON");
        assert!(messages["messages"].is_array());
        assert!(serde_json::from_str::<Value>(g.str("langfuse.observation.output")).is_ok());
    }
    let tool = in_run
        .iter()
        .find(|s| s.name == "consultar_saldo")
        .expect("the action's span");
    assert_eq!(tool.str("langfuse.observation.type"), "tool");
    assert!(tool.str("langfuse.observation.input").contains("cartao"));
    assert!(tool.str("langfuse.observation.output").contains("instruction"));
    assert!(
        tool.events
            .iter()
            .any(|(n, _)| n == "memory_updates" || n == "state_updates"),
        "updates are events of the action: {:?}",
        tool.events
    );
    for s in spans.iter().filter(|s| s.trace == root.trace) {
        assert_eq!(
            s.str("langfuse.session.id"),
            "conv-traced",
            "{} lacks the session",
            s.name
        );
        assert_eq!(s.str("langfuse.trace.name"), "vt");
    }

    // The flow's trace: its ten stages, in order, under `run`.
    let flow_root = spans
        .iter()
        .find(|s| s.parent.is_empty() && s.name == "vt_fluxo")
        .unwrap_or_else(|| {
            let all: Vec<String> = spans
                .iter()
                .map(|s| format!("{} trace {} id {} parent {}", s.name, s.trace, s.id, s.parent))
                .collect();
            panic!(
                "the flow's root span is missing: {} spans\n{}\nrun-flow's stderr: {}",
                spans.len(),
                all.join("\n"),
                String::from_utf8_lossy(&flow_stderr)
            )
        });
    let flow_run = children(&spans, flow_root)
        .into_iter()
        .find(|s| s.name == "run")
        .expect("run");
    let stages: Vec<&str> = children(&spans, flow_run)
        .iter()
        .filter(|s| s.str("langfuse.observation.type") == "tool")
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(stages.len(), 10, "{stages:?}");
    assert!(stages.iter().all(|s| s.starts_with("rf")), "{stages:?}");
    assert!(flow_root.str("langfuse.observation.output").contains("concluido"));

    // Names and value types as Langfuse's mapping table has them.
    let (types, observation_types) = mapping();
    let mut checked = BTreeSet::new();
    for s in &spans {
        for (key, (ty, value)) in &s.attrs {
            if let Some(allowed) = types.get(key) {
                assert!(
                    allowed.contains(ty),
                    "{key} sent as {ty}, Langfuse maps {allowed:?}"
                );
                checked.insert(key.clone());
            }
            if key == "langfuse.observation.type" {
                assert!(
                    observation_types.contains(value.as_str().unwrap_or_default()),
                    "{value}"
                );
            }
            if key.starts_with("langfuse.observation.")
                && (key.ends_with(".input") || key.ends_with(".output"))
            {
                assert!(
                    serde_json::from_str::<Value>(value.as_str().unwrap_or("x")).is_ok(),
                    "{key} is JSON"
                );
            }
        }
        assert_eq!(s.resource["service.name"].1, "vt-agent");
    }
    assert!(
        types["gen_ai.usage.custom_tokens"].contains("intValue"),
        "a custom usage key is sent as an integer"
    );
    for key in [
        "gen_ai.request.model",
        "gen_ai.usage.input_tokens",
        "langfuse.session.id",
        "langfuse.user.id",
    ] {
        assert!(checked.contains(key), "{key} never checked against the table");
    }

    // Nothing to hide anywhere.
    let text = all_text(&spans);
    for secret in [
        CHAT_CARD,
        "1111111111",
        "1111 1111-11",
        LLM_KEY,
        SECRET_KEY,
        basic.as_str(),
    ] {
        assert!(!text.contains(secret), "{secret} reached the collector");
    }
}

/// A serve process exporting to `receiver`; its address.
fn serve(
    data: &tempfile::TempDir,
    sim: &RunningSimulator,
    receiver: &Receiver,
) -> (std::process::Child, String) {
    let mut cmd = vt_agent_in(data);
    cmd.env("VT_SYSTEMS_URL", &sim.url)
        // The recharge system charges a card itself: a card recharge in the chat goes to it.
        .env("VT_CARTAO_PROVEDOR", "sistema_de_recarga")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)
        .env(
            "OTEL_EXPORTER_OTLP_HEADERS",
            format!("Authorization=Bearer {SECRET_KEY}"),
        )
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "60000")
        .args(["serve", "--addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let url = crate::support::listening_on(&mut stderr);
    // The rest of stderr, kept for the assertions.
    let log = Arc::new(Mutex::new(String::new()));
    child.stderr = None;
    std::thread::spawn({
        let log = log.clone();
        move || {
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
            log.lock().expect("lock").push_str(&rest);
        }
    });
    LOGS.lock().expect("lock").insert(child.id(), log);
    (child, url)
}

static LOGS: std::sync::LazyLock<Mutex<HashMap<u32, Arc<Mutex<String>>>>> =
    std::sync::LazyLock::new(Default::default);

async fn turn(client: &reqwest::Client, url: &str, conv: &str, text: &str) -> Value {
    let r = client
        .post(format!("{url}/v1/conversations/{conv}/messages"))
        .json(&json!({"text": text, "user": {"id": "u-1"}}))
        .send()
        .await
        .expect("answered");
    assert_eq!(r.status(), 200);
    r.json().await.expect("json")
}

async fn dropped(client: &reqwest::Client, url: &str) -> u64 {
    let text = client
        .get(format!("{url}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    text.lines()
        .find(|l| l.starts_with("vt_otlp_spans_dropped_total "))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .expect("the dropped-spans counter is served")
}

fn stop(mut child: std::process::Child) -> String {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    // Called inside `block_in_place`: the runtime moved its work off this thread first.
    #[allow(clippy::disallowed_methods)]
    std::thread::sleep(Duration::from_millis(200));
    let log = LOGS.lock().expect("lock").remove(&child.id()).expect("log");
    log.lock().expect("lock").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_refuses_costs_no_turn_and_its_drops_are_counted_and_warned_once() {
    for status in [400, 500] {
        let receiver = Receiver::start(Answer::Status(status)).await;
        let sim = simulator().await;
        let data = tempfile::tempdir().expect("tmp");
        let (child, url) = tokio::task::block_in_place(|| serve(&data, &sim, &receiver));
        let client = reqwest::Client::new();
        for i in 0..3 {
            let r = turn(&client, &url, &format!("c{i}"), "saldo 1234567890").await;
            assert!(r.to_string().contains("****7890"), "{r}");
        }
        // The batch goes out within a second or two and is refused.
        let mut n = 0;
        for _ in 0..100 {
            n = dropped(&client, &url).await;
            if n > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(n > 0, "refused spans are counted ({status})");
        turn(&client, &url, "after", "saldo 1234567890").await;
        assert!(
            receiver
                .exports()
                .iter()
                .all(|e| e.path == "/v1/traces" || e.path == "/v1/metrics")
        );
        let log = tokio::task::block_in_place(|| stop(child));
        assert_eq!(
            log.matches("traces are being dropped").count(),
            1,
            "one warning, not one per span ({status}): {log}"
        );
        assert!(!log.contains(SECRET_KEY), "{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_holds_up_no_turn() {
    let receiver = Receiver::start(Answer::Hang).await;
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    let (child, url) = tokio::task::block_in_place(|| serve(&data, &sim, &receiver));
    let client = reqwest::Client::new();
    turn(&client, &url, "first", "saldo 1234567890").await;
    // Wait until the exporter is stuck on a request the collector will never answer …
    for _ in 0..100 {
        if !receiver.exports().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!receiver.exports().is_empty(), "the exporter sent its batch");
    // … then turns keep being answered while it still waits (its timeout is a minute).
    let more = tokio::time::timeout(Duration::from_secs(30), async {
        for i in 0..20 {
            turn(&client, &url, &format!("c{i}"), "saldo 1234567890").await;
        }
    })
    .await;
    assert!(more.is_ok(), "turns waited on the exporter");
    let health = client.get(format!("{url}/healthz")).send().await.expect("health");
    assert_eq!(health.status(), 200);
    drop(tokio::task::block_in_place(|| stop(child)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_go_out_as_otlp_beside_the_traces() {
    let receiver = Receiver::start(Answer::Ok).await;
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    let (child, url) = tokio::task::block_in_place(|| serve(&data, &sim, &receiver));
    let client = reqwest::Client::new();
    turn(&client, &url, "m1", "saldo 1234567890").await;
    turn(&client, &url, "m1", "oi").await;
    // A graceful stop flushes both exporters.
    tokio::task::block_in_place(|| stop(child));
    let exports = receiver.exports();
    let metrics = exports
        .iter()
        .find(|e| e.path == "/v1/metrics")
        .expect("metrics at {base}/v1/metrics");
    assert_eq!(
        metrics.headers["authorization"],
        format!("Bearer {SECRET_KEY}").as_str()
    );
    let req = ExportMetricsServiceRequest::decode(metrics.body.clone()).expect("protobuf metrics");
    let mut sums = BTreeMap::new();
    for rm in &req.resource_metrics {
        for sm in &rm.scope_metrics {
            for m in &sm.metrics {
                use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point::Value as N};
                let total: i64 = match &m.data {
                    Some(Data::Sum(s)) => s
                        .data_points
                        .iter()
                        .map(|p| match p.value {
                            Some(N::AsInt(i)) => i,
                            Some(N::AsDouble(d)) => d as i64,
                            None => 0,
                        })
                        .sum(),
                    Some(Data::Histogram(h)) => h.data_points.iter().map(|p| p.count as i64).sum(),
                    _ => 0,
                };
                sums.insert(m.name.clone(), total);
            }
        }
    }
    assert_eq!(sums.get("vt.turns"), Some(&2), "{sums:?}");
    assert_eq!(sums.get("vt.zero_token_turns"), Some(&2), "{sums:?}");
    assert_eq!(sums.get("vt.turn_latency"), Some(&2), "{sums:?}");
    assert!(sums.contains_key("vt.outbox_depth"), "{sums:?}");
    // The HTTP turns are traced too, each its own trace.
    let roots: Vec<_> = receiver
        .spans()
        .into_iter()
        .filter(|s| s.parent.is_empty() && s.name == "vt")
        .collect();
    assert_eq!(roots.len(), 2);
    assert_ne!(roots[0].trace, roots[1].trace);
    assert!(
        roots
            .iter()
            .all(|r| r.attrs["langfuse.trace.metadata.channel"].1 == "http")
    );
}

/// Records every sent item; the channel the outbox hands WhatsApp-like replies to.
struct Recorder;

#[async_trait::async_trait]
impl vt_agent::ChannelSender for Recorder {
    fn channel(&self) -> &str {
        "whatsapp"
    }

    async fn send(
        &self,
        _item: &vt_store::records::OutboxItem,
        _reply: &vt_agent::ReplyPayload,
    ) -> Result<Option<String>, vt_agent::SendError> {
        Ok(Some("wamid.1".into()))
    }
}

const OWN_PROCESS: &str = "VT_TEST_TRACES_OWN_PROCESS";

/// A reply sent later by the outbox worker is a `deliver` span in the trace of the turn that wrote
/// it. In process with an in-memory exporter, but in a process of its own (this test binary, run
/// again for this test alone): the subscriber must be the process's global one, since a
/// thread-scoped subscriber races with the other tests over `tracing`'s cached callsite interest.
#[tokio::test]
async fn a_reply_the_outbox_sends_later_is_delivered_inside_its_turns_trace() {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    const NAME: &str = "traces::a_reply_the_outbox_sends_later_is_delivered_inside_its_turns_trace";
    if std::env::var_os(OWN_PROCESS).is_none() {
        let out = Command::new(std::env::current_exe().expect("test binary"))
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(OWN_PROCESS, "1")
            .output()
            .expect("run");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("1 passed"),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let exporter = opentelemetry_sdk::trace::InMemorySpanExporter::default();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber of this process");

    let h = crate::support::chat_harness(None, vt_domain::tools::VtSettings::default()).await;
    let mut user = crate::support::user();
    user.channel = "whatsapp".into();
    let msg = vt_agent::Inbound {
        agent_id: "vt".into(),
        conversation_id: Some("wa-traced".into()),
        user,
        text: "saldo 1234567890".into(),
        channel_message_id: Some("wamid.in.1".into()),
        delivery: vt_agent::Delivery::Outbox,
        ..Default::default()
    };
    h.service.messages().handle(msg).await.expect("turn");
    let worker = vt_agent::Worker::new(h.store.clone(), vt_engine::retry::RetryPolicy::new(1, 1))
        .with_sender(Arc::new(Recorder));
    assert_eq!(worker.pass().await.sent, 1);
    // The deliver span ends when its last handle goes: SQLite's worker thread keeps the span of the
    // statement it ran until it takes its next command, a moment after the pass has returned.
    let mut spans = exporter.get_finished_spans().expect("spans");
    for _ in 0..500 {
        if spans.iter().any(|s| s.name == "deliver") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        spans = exporter.get_finished_spans().expect("spans");
    }
    let root = spans
        .iter()
        .find(|s| s.name == "vt" && s.parent_span_id == opentelemetry::trace::SpanId::INVALID)
        .unwrap_or_else(|| {
            let names: Vec<_> = spans.iter().map(|s| (s.name.clone(), s.parent_span_id)).collect();
            panic!("the turn's root is missing: {names:?}")
        });
    let deliver = spans
        .iter()
        .find(|s| s.name == "deliver")
        .expect("the worker's deliver span");
    assert_eq!(
        deliver.span_context.trace_id(),
        root.span_context.trace_id(),
        "same trace"
    );
    assert_ne!(deliver.parent_span_id, opentelemetry::trace::SpanId::INVALID);
    let session = deliver
        .attributes
        .iter()
        .find(|kv| kv.key.as_str() == "langfuse.session.id")
        .map(|kv| kv.value.to_string());
    assert_eq!(session.as_deref(), Some("wa-traced"));
}

/// Every file under `dir`, as bytes read whole (the SQLite database, its WAL, lock files…).
pub(crate) fn files_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                out.push((path, bytes));
            }
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Every place a flow with a token, a batch with tokens and a chat recharge leave bytes — stdout,
/// stderr, every file under the data directory (the database, its WAL, the key file), the spans — holds
/// no payment token and no full card: the cards are in sealed columns only. The transcript export is
/// the one place a card is in clear, by design (it replays), and says so: it is also this test's proof
/// that the search would see a card if one were there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_and_no_full_card_is_kept_or_sent_anywhere_but_the_sealed_columns() {
    const TOKEN: &str = "tok-guardado-7";
    let cards = ["2345678901", "3456789012", "4567890123"];
    let receiver = Receiver::start(Answer::Ok).await;
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    let inputs = tempfile::tempdir().expect("inputs");
    let flow = inputs.path().join("fluxo.json");
    std::fs::write(
        &flow,
        format!(
            r#"{{"cartao": "{}", "recarga": {{"valor": 50, "meio_pagamento": {{"tipo": "pix", "token": "{TOKEN}"}}}}}}"#,
            cards[0]
        ),
    )
    .expect("write");
    let batch = inputs.path().join("lote.csv");
    std::fs::write(
        &batch,
        format!(
            "cartao;valor;meio_pagamento;token\n{};20,00;pix;{TOKEN}\n",
            cards[1]
        ),
    )
    .expect("write");
    let results = inputs.path().join("resultados.jsonl");
    // The key file's path, as a new user runs it (no configured key).
    let run = |args: Vec<String>| {
        let mut c = traced(&data, &sim, &receiver);
        c.env_remove("VT_ENCRYPTION_KEY").args(args);
        c
    };
    let s = |v: &str| v.to_owned();
    let mut outputs = Vec::new();
    for args in [
        vec![s("run-flow"), flow.display().to_string()],
        vec![
            s("batch"),
            batch.display().to_string(),
            s("--output"),
            results.display().to_string(),
        ],
        vec![
            s("chat"),
            s("--conversation"),
            s("conv-guardada"),
            s("-m"),
            format!("recarrega 50 no {} no crédito", cards[2]),
        ],
        vec![
            s("chat"),
            s("--conversation"),
            s("conv-guardada"),
            s("-m"),
            s("sim"),
        ],
    ] {
        let out = output(run(args.clone())).await;
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        outputs.push((format!("{args:?}"), out));
    }
    assert_eq!(
        sim.simulator.charges(cards[2]),
        1,
        "the chat recharge went through"
    );
    // The recharge system got the token's value (the flow's and the batch line's); the caller, its
    // fingerprint.
    let sent: Vec<Value> = sim
        .simulator
        .ledger()
        .into_iter()
        .filter(|e| e.sistema == "recarga")
        .filter_map(|e| e.body)
        .filter(|b| b["meio_pagamento"].get("token").is_some())
        .collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(
        sent.iter().all(|b| b["meio_pagamento"]["token"] == TOKEN),
        "{sent:?}"
    );
    let flow_output: Value = serde_json::from_slice(&outputs[0].1.stdout).expect("the flow output");
    let rf06 = flow_output["etapas"][5]["saida"]["body"]["meio_pagamento"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        rf06.starts_with("tok…-7#"),
        "the caller gets the fingerprint: {rf06}"
    );
    let mut leaks = Vec::new();
    let mut look = |what: String, bytes: &[u8]| {
        for secret in [TOKEN].iter().chain(&cards) {
            if contains(bytes, secret) {
                leaks.push(format!("{secret} in {what}"));
            }
        }
    };
    for (args, out) in &outputs {
        look(format!("{args} stdout"), &out.stdout);
        look(format!("{args} stderr"), &out.stderr);
    }
    look(
        "the batch results".into(),
        &std::fs::read(&results).expect("results"),
    );
    for (path, bytes) in files_under(data.path()) {
        look(path.display().to_string(), &bytes);
    }
    let mut spans = String::new();
    for _ in 0..50 {
        spans = all_text(&receiver.spans());
        if spans.contains("rf10") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        spans.contains("****8901"),
        "the spans were searched: {} bytes",
        spans.len()
    );
    look("the spans".into(), spans.as_bytes());
    assert!(leaks.is_empty(), "{leaks:#?}");

    // The export replays against the real card, and says so first.
    let out = output(run(vec![s("transcript"), s("export"), s("conv-guardada")])).await;
    let export = String::from_utf8_lossy(&out.stdout);
    assert!(
        export.starts_with("# Transcrição com os números completos"),
        "{export}"
    );
    assert!(
        contains(&out.stdout, cards[2]),
        "the search sees a card in clear: {export}"
    );

    // The person asks for their data, then for its erasure: afterwards the card is nowhere, not even
    // where it was in clear by design.
    let out = output(run(vec![s("titular"), s("exportar"), s("--cartao"), s(cards[2])])).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let theirs: Value = serde_json::from_slice(&out.stdout).expect("the export is JSON");
    assert!(theirs["conversas"][0]["id"] == "conv-guardada", "{theirs}");
    let out = output(run(vec![s("titular"), s("apagar"), s("--cartao"), s(cards[2])])).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = output(run(vec![s("transcript"), s("export"), s("conv-guardada")])).await;
    assert!(
        !out.status.success() && !contains(&out.stdout, cards[2]),
        "erased"
    );
    let out = output(run(vec![s("titular"), s("exportar"), s("--cartao"), s(cards[2])])).await;
    let theirs: Value = serde_json::from_slice(&out.stdout).expect("the export is JSON");
    assert_eq!(theirs["conversas"], json!([]), "{theirs}");
    let out = output(run(vec![s("audit")])).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("titular_apagado"));
    assert_eq!(sim.simulator.charges(cards[2]), 1, "money figures stay");
}

/// The systems behind OAuth2, as an operator runs them: a flow with a recharge through the binary
/// with traces to a collector. Neither the client secret nor any token the token endpoint issued is in
/// a byte the collector received, nor in what the command printed, nor in the data directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_through_oauth2_leaves_no_secret_or_token_in_traces_outputs_or_data() {
    const CLIENT_SECRET: &str = "segredo-do-cliente-traces-0123";
    let receiver = Receiver::start(Answer::Ok).await;
    let sim = Simulator::new(SimulatorConfig::default())
        .spawn_behind(
            0,
            vt_simulators::systems::SimulatorAuth::Oauth2 {
                client_id: "vt-agent".into(),
                client_secret: CLIENT_SECRET.into(),
                token_ttl: std::time::Duration::from_secs(3600),
            },
        )
        .await
        .expect("simulator");
    let data = tempfile::tempdir().expect("tmp");
    let config = data.path().join("vt-agent.toml");
    std::fs::write(
        &config,
        format!(
            "[systems]\nsaldo_url = \"{u}\"\nrecarga_url = \"{u}\"\nnotificacao_url = \"{u}\"\n[systems.auth]\nkind = \"oauth2\"\ntoken_url = \"{u}/oauth/token\"\nclient_id = \"vt-agent\"\n",
            u = sim.url
        ),
    )
    .expect("config");
    let input = data.path().join("fluxo.json");
    std::fs::write(
        &input,
        r#"{"cartao": "2345678901", "recarga": {"valor": 30, "meio_pagamento": {"tipo": "pix", "token": "tok_x"}}}"#,
    )
    .expect("input");
    let mut cmd = traced(&data, &sim, &receiver);
    // The file names the systems; the environment's base URL would replace them with the same one.
    cmd.env_remove("VT_SYSTEMS_URL")
        .env("VT_SYSTEMS_CLIENT_SECRET", CLIENT_SECRET)
        .arg("--config")
        .arg(&config)
        .arg("run-flow")
        .arg(&input);
    let out = output(cmd).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sim.simulator.charges("2345678901"), 1);
    let exported: Vec<u8> = receiver
        .exports
        .lock()
        .expect("lock")
        .iter()
        .flat_map(|e| e.body.to_vec())
        .collect();
    assert!(!exported.is_empty(), "the collector received the traces");
    let mut every: Vec<(String, Vec<u8>)> = vec![
        ("exports".into(), exported),
        ("stdout".into(), out.stdout.clone()),
        ("stderr".into(), out.stderr.clone()),
    ];
    every.extend(
        files_under(data.path())
            .into_iter()
            .map(|(p, b)| (p.display().to_string(), b)),
    );
    for (what, bytes) in &every {
        assert!(!contains(bytes, CLIENT_SECRET), "the client secret is in {what}");
        assert!(!contains(bytes, "simulador-"), "an issued token is in {what}");
    }
}
