//! Traces over OTLP in Langfuse's shape, checked the way Langfuse would read them: the binary runs a
//! VT conversation (a model faked on loopback) and a `run-flow`, exporting to an OTLP/HTTP receiver in
//! this test that decodes the protobuf. The attribute names and value types are checked against
//! Langfuse's own mapping table (`../shared/reference/langfuse-otel-mapping.cases.json`, copied under
//! `tests/fixtures/`), and no attribute anywhere may hold a full card number or a secret.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use base64::Engine as _;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message as _;
use serde_json::{Value, json};
use vt_simulators::systems::{RunningSimulator, Simulator, SimulatorConfig};

use crate::cli::vt_agent_in;
use crate::support::FakeServer;

pub(crate) const PUBLIC_KEY: &str = "pk-lf-1234567890";
pub(crate) const SECRET_KEY: &str = "sk-lf-secret-9f8e7d6c5b4a";
pub(crate) const LLM_KEY: &str = "sk-test-Zq81mKd0vX3pL6tR9wB2";
pub(crate) const CHAT_CARD: &str = "1234567890";

/// How the receiver answers.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Answer {
    Ok,
    Status(u16),
    /// Reads the request and never answers.
    Hang,
}

#[derive(Clone)]
pub(crate) struct Export {
    pub(crate) path: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

/// An OTLP/HTTP receiver on loopback.
pub(crate) struct Receiver {
    pub(crate) url: String,
    pub(crate) exports: Arc<Mutex<Vec<Export>>>,
}

impl Receiver {
    pub(crate) async fn start(answer: Answer) -> Self {
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

    pub(crate) fn exports(&self) -> Vec<Export> {
        self.exports.lock().expect("lock").clone()
    }

    pub(crate) fn spans(&self) -> Vec<SpanView> {
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
pub(crate) type Attrs = BTreeMap<String, (String, Value)>;

#[derive(Debug, Clone)]
pub(crate) struct SpanView {
    pub(crate) trace: String,
    pub(crate) id: String,
    pub(crate) parent: String,
    pub(crate) name: String,
    pub(crate) attrs: Attrs,
    pub(crate) events: Vec<(String, Attrs)>,
    pub(crate) status: (i32, String),
    pub(crate) resource: Attrs,
}

impl SpanView {
    pub(crate) fn str(&self, key: &str) -> &str {
        self.attrs
            .get(key)
            .and_then(|(_, v)| v.as_str())
            .unwrap_or_default()
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Attributes as (OTLP/JSON type name, value).
pub(crate) fn attrs(kvs: &[KeyValue]) -> Attrs {
    kvs.iter()
        .map(|kv| (kv.key.clone(), typed(kv.value.as_ref())))
        .collect()
}

pub(crate) fn typed(v: Option<&AnyValue>) -> (String, Value) {
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
pub(crate) fn all_text(spans: &[SpanView]) -> String {
    let mut out = String::new();
    for s in spans {
        out.push_str(&format!(
            "{} {:?} {:?} {:?} {:?}\n",
            s.name, s.attrs, s.events, s.status, s.resource
        ));
    }
    out
}

pub(crate) async fn simulator() -> RunningSimulator {
    Simulator::new(SimulatorConfig::default())
        .spawn(0)
        .await
        .expect("simulator")
}

/// The binary with Langfuse's own variables pointing at `receiver`.
pub(crate) fn traced(data: &tempfile::TempDir, sim: &RunningSimulator, receiver: &Receiver) -> Command {
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

pub(crate) async fn output(mut cmd: Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("run"))
        .await
        .expect("join")
}

pub(crate) fn openai(body: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "modelo-teste-2026",
           "choices": [{"index": 0, "finish_reason": body["finish"], "message": body["message"]}],
           "usage": {"prompt_tokens": 120, "completion_tokens": 18, "total_tokens": 138,
                     "prompt_tokens_details": {"cached_tokens": 64}}})
}

/// The mapping table: for each attribute key Langfuse maps, the OTLP value types it is given in.
pub(crate) fn mapping() -> (HashMap<String, BTreeSet<String>>, BTreeSet<String>) {
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

pub(crate) fn children<'a>(spans: &'a [SpanView], parent: &SpanView) -> Vec<&'a SpanView> {
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
