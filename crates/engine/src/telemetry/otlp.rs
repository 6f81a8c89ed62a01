//! OTLP export over HTTP/protobuf: where traces and metrics go (the standard `OTEL_*` variables,
//! `[otlp]` in the file, or Langfuse's own `LANGFUSE_*` convention), and the two wrappers that make the
//! export safe for the product:
//!
//! - [`QueueProcessor`]: a bounded queue and one exporter thread; a span that would not fit is dropped
//!   and counted, never waited for, so a turn never waits on the exporter;
//! - on that thread, every string sent (span names, attributes, events, status messages) has card
//!   numbers masked and secrets removed ([`mask_span`]) — one place, under every span, so no call site
//!   can leak by forgetting — and a failed export counts its spans as dropped.
//!
//! Drops are counted in [`spans_dropped`] (served as `vt_otlp_spans_dropped` by `/metrics`) and
//! warned about once per process, not once per span.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex};
use std::time::Duration;

use base64::Engine as _;
use opentelemetry::{KeyValue, Value};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter, SpanProcessor};
use prometheus_client::metrics::counter::Counter;
use serde::Deserialize;

/// The service name when neither `OTEL_SERVICE_NAME` nor `[otlp] service_name` gives one.
pub const DEFAULT_SERVICE_NAME: &str = "vt-agent";

/// Spans waiting to be exported at most; beyond that they are dropped (and counted).
const MAX_QUEUED_SPANS: usize = 4096;

/// `[otlp]` in the configuration file. The standard environment variables win over it.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct OtlpConfig {
    /// The collector's base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT`: `/v1/traces` and `/v1/metrics` are
    /// appended (for Langfuse: `https://cloud.langfuse.com/api/public/otel`).
    pub endpoint: Option<String>,
    /// Headers sent with every export (`Authorization`, …). Their values are treated as secrets.
    pub headers: BTreeMap<String, String>,
    /// `service.name` of the resource (default `vt-agent`).
    pub service_name: Option<String>,
}

/// Where the export goes, resolved from the file and the environment at load.
#[derive(Clone, PartialEq, Eq)]
pub struct OtlpTarget {
    pub traces_endpoint: String,
    /// Metrics go where traces go (`…/v1/metrics` beside `…/v1/traces`) unless the traces endpoint was
    /// given alone (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), which says nothing about metrics.
    pub metrics_endpoint: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub service_name: String,
}

/// Header values are credentials: never printed, not even in `Debug`.
impl std::fmt::Debug for OtlpTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpTarget")
            .field("traces_endpoint", &self.traces_endpoint)
            .field("metrics_endpoint", &self.metrics_endpoint)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("service_name", &self.service_name)
            .finish()
    }
}

/// Why the OTLP settings were refused: `(the variable or key, what is wrong)`, never the value.
pub type OtlpError = (String, &'static str);

impl OtlpConfig {
    /// Resolves the export target; `None` when nothing asks for one (export is off by default).
    ///
    /// Order: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is), `OTEL_EXPORTER_OTLP_ENDPOINT` (base),
    /// `[otlp] endpoint` (base), then `LANGFUSE_HOST`/`LANGFUSE_BASE_URL` (`{host}/api/public/otel`).
    /// Headers: `[otlp] headers`, then `OTEL_EXPORTER_OTLP_HEADERS` over them; with Langfuse keys set
    /// and no `Authorization` given, Basic auth with the keys and `x-langfuse-ingestion-version: 4`.
    pub fn resolve(&self, env: &HashMap<String, String>) -> Result<Option<OtlpTarget>, OtlpError> {
        let get = |name: &str| env.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
        let langfuse_host = get("LANGFUSE_HOST")
            .map(|h| ("LANGFUSE_HOST", h))
            .or_else(|| get("LANGFUSE_BASE_URL").map(|h| ("LANGFUSE_BASE_URL", h)));
        let base = |name: &str, url: &str| -> Result<String, OtlpError> {
            check_url(name, url)?;
            Ok(url.trim_end_matches('/').to_owned())
        };
        let (traces_endpoint, metrics_endpoint) = if let Some(url) = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        {
            check_url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url)?;
            (url.to_owned(), None)
        } else if let Some(url) = get("OTEL_EXPORTER_OTLP_ENDPOINT") {
            let b = base("OTEL_EXPORTER_OTLP_ENDPOINT", url)?;
            (format!("{b}/v1/traces"), Some(format!("{b}/v1/metrics")))
        } else if let Some(url) = self.endpoint.as_deref().map(str::trim).filter(|u| !u.is_empty()) {
            let b = base("otlp.endpoint", url)?;
            (format!("{b}/v1/traces"), Some(format!("{b}/v1/metrics")))
        } else if let Some((name, host)) = langfuse_host {
            let b = base(name, host)?;
            (
                format!("{b}/api/public/otel/v1/traces"),
                Some(format!("{b}/api/public/otel/v1/metrics")),
            )
        } else {
            return Ok(None);
        };
        let mut headers = self.headers.clone();
        if let Some(raw) = get("OTEL_EXPORTER_OTLP_HEADERS") {
            headers.extend(parse_headers(raw).ok_or((
                "OTEL_EXPORTER_OTLP_HEADERS".to_owned(),
                "expected key=value pairs separated by commas",
            ))?);
        }
        let keys = (get("LANGFUSE_PUBLIC_KEY"), get("LANGFUSE_SECRET_KEY"));
        if langfuse_host.is_some() && keys.0.is_none() {
            return Err((
                "LANGFUSE_PUBLIC_KEY".to_owned(),
                "é obrigatório com LANGFUSE_HOST",
            ));
        }
        if langfuse_host.is_some() && keys.1.is_none() {
            return Err((
                "LANGFUSE_SECRET_KEY".to_owned(),
                "é obrigatório com LANGFUSE_HOST",
            ));
        }
        let has_auth = headers.keys().any(|k| k.eq_ignore_ascii_case("authorization"));
        if let (Some(public), Some(secret), false) = (keys.0, keys.1, has_auth) {
            let basic = base64::engine::general_purpose::STANDARD.encode(format!("{public}:{secret}"));
            headers.insert("Authorization".into(), format!("Basic {basic}"));
            headers
                .entry("x-langfuse-ingestion-version".into())
                .or_insert_with(|| "4".into());
        }
        let service_name = get("OTEL_SERVICE_NAME")
            .map(str::to_owned)
            .or_else(|| self.service_name.clone().filter(|s| !s.trim().is_empty()))
            .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_owned());
        Ok(Some(OtlpTarget {
            traces_endpoint,
            metrics_endpoint,
            headers,
            service_name,
        }))
    }
}

impl OtlpTarget {
    /// The values that must never be shown: every header value (and the Basic credentials inside).
    pub fn secrets(&self) -> Vec<String> {
        let mut out = Vec::new();
        for value in self.headers.values() {
            out.push(value.clone());
            if let Some((_, token)) = value.split_once(' ') {
                out.push(token.to_owned());
            }
        }
        out
    }
}

fn check_url(name: &str, url: &str) -> Result<(), OtlpError> {
    match reqwest::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(()),
        _ => Err((name.to_owned(), "deve ser uma URL http:// ou https://")),
    }
}

/// `k=v,k2=v2` as the OTLP specification writes headers; `%XX` escapes are decoded.
fn parse_headers(raw: &str) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for pair in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=')?;
        let k = k.trim();
        if k.is_empty() {
            return None;
        }
        out.insert(percent_decode(k.trim()), percent_decode(v.trim()));
    }
    Some(out)
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

static DROPPED: LazyLock<Counter> = LazyLock::new(Counter::default);
static WARNED: AtomicBool = AtomicBool::new(false);

/// Spans that were not exported (queue full, or the collector refused or did not answer), since the
/// process started. The same counter `/metrics` serves.
pub fn spans_dropped() -> Counter {
    DROPPED.clone()
}

fn count_dropped(n: usize, why: &str) {
    if n == 0 {
        return;
    }
    DROPPED.inc_by(n as u64);
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            target: "vt_agent::telemetry",
            spans = n,
            reason = why,
            "traces are being dropped (the OTLP collector is slow, refusing or away); the product \
             goes on, later drops are only counted in vt_otlp_spans_dropped_total"
        );
    }
}

/// Builds the span exporter and the processor that feeds it.
pub fn span_processor(target: &OtlpTarget) -> Result<QueueProcessor, String> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(&target.traces_endpoint)
        .with_headers(target.headers.clone().into_iter().collect())
        .build()
        .map_err(|e| vt_contract::redact::secrets(&e.to_string()).into_owned())?;
    Ok(QueueProcessor::start(exporter))
}

/// Builds the OTLP metric exporter, for the periodic reader.
pub fn metric_exporter(
    target: &OtlpTarget,
    endpoint: &str,
) -> Result<opentelemetry_otlp::MetricExporter, String> {
    opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(endpoint)
        .with_headers(target.headers.clone().into_iter().collect())
        .build()
        .map_err(|e| vt_contract::redact::secrets(&e.to_string()).into_owned())
}

/// Spans sent in one export at most; a full batch wakes the exporter early.
const BATCH: usize = 512;
/// How long a span waits for its batch at most.
const EXPORT_EVERY: Duration = Duration::from_secs(1);
/// How long shutdown waits for the last export (a collector that does not answer).
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// A bounded queue of finished spans and one exporter thread.
///
/// The SDK's `BatchSpanProcessor` wakes its thread for every span (a channel send per span end):
/// measured, that cost a turn's thread switches more than the spans themselves. Here a span end is a
/// push under a mutex; the thread wakes once a second or when a batch is full. A span that finds the
/// queue full is dropped and counted, never waited for. The exporter masks every string
/// ([`mask_span`]) off the turn's thread and counts a failed batch as dropped.
#[derive(Debug)]
pub struct QueueProcessor {
    shared: Arc<Shared>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
    done: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

#[derive(Debug)]
struct Shared {
    queue: Mutex<Vec<SpanData>>,
    wake: Condvar,
    stop: AtomicBool,
    exporter: Mutex<Box<dyn ExportOnce>>,
}

/// The exporter behind a trait object, run to completion on the calling thread.
trait ExportOnce: Send + std::fmt::Debug {
    fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult;
    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource);
    fn shutdown(&self) -> OTelSdkResult;
}

impl<E: SpanExporter + 'static> ExportOnce for E {
    fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        futures::executor::block_on(SpanExporter::export(self, batch))
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        SpanExporter::set_resource(self, resource);
    }

    fn shutdown(&self) -> OTelSdkResult {
        SpanExporter::shutdown(self)
    }
}

impl QueueProcessor {
    fn start<E: SpanExporter + 'static>(exporter: E) -> Self {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Vec::with_capacity(BATCH)),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            exporter: Mutex::new(Box::new(exporter)),
        });
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let worker = std::thread::Builder::new()
            .name("otlp-export".into())
            .spawn({
                let shared = shared.clone();
                move || {
                    shared.run();
                    let _ = done_tx.send(());
                }
            })
            .ok();
        Self {
            shared,
            worker: Mutex::new(worker),
            done: Mutex::new(Some(done_rx)),
        }
    }
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    fn run(&self) {
        loop {
            let batch = {
                let mut queue = locked(&self.queue);
                if queue.len() < BATCH && !self.stop.load(Ordering::Acquire) {
                    queue = self
                        .wake
                        .wait_timeout(queue, EXPORT_EVERY)
                        .map_or_else(|e| e.into_inner().0, |(q, _)| q);
                }
                std::mem::take(&mut *queue)
            };
            self.export(batch);
            if self.stop.load(Ordering::Acquire) && locked(&self.queue).is_empty() {
                return;
            }
        }
    }

    /// Exports `batch` in chunks of [`BATCH`].
    fn export(&self, mut batch: Vec<SpanData>) {
        while !batch.is_empty() {
            let rest = batch.split_off(batch.len().min(BATCH));
            let n = batch.len();
            batch.iter_mut().for_each(mask_span);
            if locked(&self.exporter).export(batch).is_err() {
                count_dropped(n, "export failed");
            }
            batch = rest;
        }
    }
}

impl SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        let mut queue = locked(&self.shared.queue);
        if queue.len() >= MAX_QUEUED_SPANS {
            drop(queue);
            count_dropped(1, "queue full");
            return;
        }
        queue.push(span);
        if queue.len() == BATCH {
            self.shared.wake.notify_one();
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        let batch = std::mem::take(&mut *locked(&self.shared.queue));
        self.shared.export(batch);
        Ok(())
    }

    /// Stops the thread after it has sent what is queued, waiting at most [`SHUTDOWN_WAIT`] (a
    /// collector that does not answer must not hold the process).
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        {
            // Under the queue's lock: the worker either sees `stop` before it waits or is waiting when
            // woken. (Stored without it, the wake-up could fall between its check and its wait, and
            // the last spans waited a full `EXPORT_EVERY` of the shutdown's budget.)
            let _queue = locked(&self.shared.queue);
            self.shared.stop.store(true, Ordering::Release);
        }
        self.shared.wake.notify_one();
        let finished = locked(&self.done)
            .take()
            .is_some_and(|rx| rx.recv_timeout(timeout.min(SHUTDOWN_WAIT)).is_ok());
        if finished {
            if let Some(worker) = locked(&self.worker).take() {
                let _ = worker.join();
            }
            let _ = locked(&self.shared.exporter).shutdown();
        }
        Ok(())
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        locked(&self.shared.exporter).set_resource(resource);
    }
}

fn mask_span(span: &mut SpanData) {
    if let Some(clean) = changed(&span.name) {
        span.name = clean.into();
    }
    span.attributes.iter_mut().for_each(mask_attribute);
    for event in span.events.events.iter_mut() {
        if let Some(clean) = changed(&event.name) {
            event.name = clean.into();
        }
        event.attributes.iter_mut().for_each(mask_attribute);
    }
    if let opentelemetry::trace::Status::Error { description } = &mut span.status
        && let Some(clean) = changed(description)
    {
        *description = clean.into();
    }
}

fn mask_attribute(kv: &mut KeyValue) {
    match &kv.value {
        Value::String(s) => {
            if let Some(clean) = changed(s.as_str()) {
                kv.value = Value::String(clean.into());
            }
        }
        Value::Array(opentelemetry::Array::String(items)) => {
            let items = items
                .iter()
                .map(|s| changed(s.as_str()).map_or_else(|| s.clone(), Into::into))
                .collect();
            kv.value = Value::Array(opentelemetry::Array::String(items));
        }
        _ => {}
    }
}

/// The text with cards masked and secrets removed, when that changes it. Runs on every string a
/// collector receives, so the common case allocates nothing: a card needs eight digits, and most
/// strings have fewer.
fn changed(text: &str) -> Option<String> {
    let may_hold_card = text.chars().filter(|c| c.is_numeric()).nth(7).is_some();
    let masked: std::borrow::Cow<'_, str> = if may_hold_card {
        vt_domain::vt::card::mask_cards_in(text).into()
    } else {
        text.into()
    };
    let clean = vt_contract::redact::secrets(&masked);
    (clean != text).then(|| clean.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn off_unless_configured() {
        assert_eq!(OtlpConfig::default().resolve(&env(&[])), Ok(None));
    }

    #[test]
    fn langfuse_convention_gives_its_path_basic_auth_and_ingestion_version() {
        let target = OtlpConfig::default()
            .resolve(&env(&[
                ("LANGFUSE_HOST", "https://cloud.langfuse.com/"),
                ("LANGFUSE_PUBLIC_KEY", "pk-lf-1234567890"),
                ("LANGFUSE_SECRET_KEY", "sk-lf-1234567890"),
            ]))
            .expect("valid")
            .expect("configured");
        assert_eq!(
            target.traces_endpoint,
            "https://cloud.langfuse.com/api/public/otel/v1/traces"
        );
        assert_eq!(
            target.metrics_endpoint.as_deref(),
            Some("https://cloud.langfuse.com/api/public/otel/v1/metrics")
        );
        // The documentation's keys and their documented base64.
        assert_eq!(
            target.headers["Authorization"],
            "Basic cGstbGYtMTIzNDU2Nzg5MDpzay1sZi0xMjM0NTY3ODkw"
        );
        assert_eq!(target.headers["x-langfuse-ingestion-version"], "4");
        assert_eq!(target.service_name, "vt-agent");
        assert!(!format!("{target:?}").contains("cGstbGYt"));
    }

    #[test]
    fn standard_variables_win_and_the_generic_endpoint_gets_the_signal_path() {
        let file = OtlpConfig {
            endpoint: Some("http://file:4318".into()),
            headers: BTreeMap::from([("x-a".into(), "1".into())]),
            service_name: Some("from-file".into()),
        };
        let target = file
            .resolve(&env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Basic%20abc, x-b = 2"),
                ("OTEL_SERVICE_NAME", "vt-prod"),
            ]))
            .expect("valid")
            .expect("configured");
        assert_eq!(target.traces_endpoint, "http://collector:4318/v1/traces");
        assert_eq!(target.headers["Authorization"], "Basic abc");
        assert_eq!(target.headers["x-a"], "1");
        assert_eq!(target.headers["x-b"], "2");
        assert_eq!(target.service_name, "vt-prod");
        let only_traces = OtlpConfig::default()
            .resolve(&env(&[(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://c:4318/custom",
            )]))
            .expect("valid")
            .expect("configured");
        assert_eq!(only_traces.traces_endpoint, "http://c:4318/custom");
        assert_eq!(only_traces.metrics_endpoint, None);
    }

    #[test]
    fn bad_settings_name_the_variable_never_the_value() {
        let bad_url =
            OtlpConfig::default().resolve(&env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "sk-secret-url")]));
        assert_eq!(
            bad_url,
            Err((
                "OTEL_EXPORTER_OTLP_ENDPOINT".into(),
                "deve ser uma URL http:// ou https://"
            ))
        );
        let no_keys = OtlpConfig::default().resolve(&env(&[("LANGFUSE_HOST", "http://localhost:3000")]));
        assert_eq!(no_keys.expect_err("refused").0, "LANGFUSE_PUBLIC_KEY");
        let bad_headers = OtlpConfig::default().resolve(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "justatoken"),
        ]));
        assert_eq!(bad_headers.expect_err("refused").0, "OTEL_EXPORTER_OTLP_HEADERS");
    }

    #[test]
    fn masking_reaches_names_attributes_events_and_status() {
        let mut kv = KeyValue::new("langfuse.observation.input", "cartão 4111111111111111");
        mask_attribute(&mut kv);
        assert!(!kv.value.as_str().contains("4111111111111111"));
        assert!(kv.value.as_str().contains("1111"));
        // The eight-digit shortcut counts digits of every script, as the card rule reads them.
        let mut wide = KeyValue::new("x", "cartão １２３４５６７８９０ ok");
        mask_attribute(&mut wide);
        assert_eq!(wide.value.as_str(), "cartão ****7890 ok");
        let mut plain = KeyValue::new("x", "nada 1234567 aqui");
        mask_attribute(&mut plain);
        assert_eq!(plain.value.as_str(), "nada 1234567 aqui");
        let mut ints = KeyValue::new("gen_ai.usage.input_tokens", 4111111111111111_i64);
        mask_attribute(&mut ints);
        assert_eq!(ints.value, Value::I64(4111111111111111));
    }
}
