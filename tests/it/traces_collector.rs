//! Traces when the collector misbehaves and beside them: a collector that refuses or never answers holds up
//! no turn (its drops counted), metrics go out as OTLP, a reply the outbox sends later is traced inside its turn.

use crate::cli::vt_agent_in;
use crate::traces::*;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use prost::Message as _;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use vt_simulators::systems::RunningSimulator;

/// A serve process exporting to `receiver`; its address.
pub(crate) fn serve(
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

pub(crate) static LOGS: std::sync::LazyLock<Mutex<HashMap<u32, Arc<Mutex<String>>>>> =
    std::sync::LazyLock::new(Default::default);

pub(crate) async fn turn(client: &reqwest::Client, url: &str, conv: &str, text: &str) -> Value {
    let r = client
        .post(format!("{url}/v1/conversations/{conv}/messages"))
        .json(&json!({"text": text, "user": {"id": "u-1"}}))
        .send()
        .await
        .expect("answered");
    assert_eq!(r.status(), 200);
    r.json().await.expect("json")
}

pub(crate) async fn dropped(client: &reqwest::Client, url: &str) -> u64 {
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

pub(crate) fn stop(mut child: std::process::Child) -> String {
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
pub(crate) struct Recorder;

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

pub(crate) const OWN_PROCESS: &str = "VT_TEST_TRACES_OWN_PROCESS";

/// A reply sent later by the outbox worker is a `deliver` span in the trace of the turn that wrote
/// it. In process with an in-memory exporter, but in a process of its own (this test binary, run
/// again for this test alone): the subscriber must be the process's global one, since a
/// thread-scoped subscriber races with the other tests over `tracing`'s cached callsite interest.
#[tokio::test]
async fn a_reply_the_outbox_sends_later_is_delivered_inside_its_turns_trace() {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    // Its own name as the test harness filters it (`traces_collector::…`, without the crate's).
    let name = format!(
        "{}::a_reply_the_outbox_sends_later_is_delivered_inside_its_turns_trace",
        module_path!().trim_start_matches("it::")
    );
    if std::env::var_os(OWN_PROCESS).is_none() {
        let out = Command::new(std::env::current_exe().expect("test binary"))
            .args(["--exact", name.as_str(), "--nocapture", "--test-threads=1"])
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
