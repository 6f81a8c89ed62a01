//! What leaves the process besides answers:
//!
//! - **logs**: `tracing` to stderr, filtered by `VT_LOG`, and **every line scrubbed of secrets** before
//!   it is written ([`vt_contract::redact::secrets`]: the configured keys and anything key-shaped). The
//!   scrubbing sits in the writer, under every log call, so no call site can leak a key by forgetting;
//! - **traces and metrics** over OTLP ([`otlp`]), when configured: the spans of [`spans`] (Langfuse's
//!   shape), exported in the background and masked on the way out; the `/metrics` figures as OTLP
//!   metrics. [`Telemetry::shutdown`] flushes both, so one-shot commands lose nothing.

pub mod otlp;
pub mod spans;

use std::io::Write;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// How long the last flush waits for trace roots still open (a moment's work of another thread, or a
/// span leaked by a task that never ends: then the root is lost, not the shutdown held up).
const ROOTS_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

/// The installed exporters; [`Self::shutdown`] flushes them.
#[derive(Default)]
pub struct Telemetry {
    traces: Option<SdkTracerProvider>,
    metrics: Option<SdkMeterProvider>,
}

/// Installs the logger (`default_filter` applies when `VT_LOG` is not set) and, with a target, the
/// OTLP exporters. An exporter that cannot be built is reported and left off: the product runs.
pub fn init(default_filter: &str, otlp: Option<&otlp::OtlpTarget>) -> Telemetry {
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(Scrubbed)
        .with_ansi(false)
        .with_filter(EnvFilter::try_from_env("VT_LOG").unwrap_or_else(|_| EnvFilter::new(default_filter)));
    let Some(target) = otlp else {
        tracing_subscriber::registry().with(logs).init();
        return Telemetry::default();
    };
    for secret in target.secrets() {
        vt_contract::redact::register_secret(&secret);
    }
    let resource = opentelemetry_sdk::Resource::builder_empty()
        .with_service_name(target.service_name.clone())
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    let traces = match otlp::span_processor(target) {
        Ok(processor) => Some(
            SdkTracerProvider::builder()
                .with_resource(resource.clone())
                .with_span_processor(processor)
                .build(),
        ),
        Err(e) => {
            eprintln!("aviso: exportação de traces desligada: {e}");
            None
        }
    };
    let metrics = target.metrics_endpoint.as_deref().and_then(|endpoint| {
        match otlp::metric_exporter(target, endpoint) {
            Ok(exporter) => {
                let provider = SdkMeterProvider::builder()
                    .with_resource(resource.clone())
                    .with_periodic_exporter(exporter)
                    .build();
                opentelemetry::global::set_meter_provider(provider.clone());
                Some(provider)
            }
            Err(e) => {
                eprintln!("aviso: exportação de métricas desligada: {e}");
                None
            }
        }
    });
    // Only the product's own spans (and its warnings, such as a model call's retries, as their
    // events): not hyper's, sqlx's or tower's, nor every info line.
    let otel = traces.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("vt-agent"))
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            .with_filter(
                Targets::new()
                    .with_target("vt_agent::trace", tracing::Level::INFO)
                    .with_target("vt_agent", tracing::Level::WARN),
            )
    });
    // Filtered as the spans it counts are: unfiltered, it would bring every library's spans to life.
    let open_roots = traces.as_ref().map(|_| {
        spans::OpenRoots.with_filter(Targets::new().with_target("vt_agent::trace", tracing::Level::INFO))
    });
    tracing_subscriber::registry()
        .with(logs)
        .with(otel)
        .with(open_roots)
        .init();
    Telemetry { traces, metrics }
}

impl Telemetry {
    /// Whether spans are exported.
    pub fn tracing(&self) -> bool {
        self.traces.is_some()
    }

    /// Whether anything is exported (and so needs [`Self::shutdown`] to flush it).
    pub fn exports(&self) -> bool {
        self.traces.is_some() || self.metrics.is_some()
    }

    /// Sends what is queued and stops the exporters (a collector that is away costs about a second).
    pub fn shutdown(self) {
        if let Some(p) = self.traces {
            // A trace whose root has not ended yet would lose its root (see [`spans::OpenRoots`]).
            if !spans::wait_for_open_roots(ROOTS_WAIT) {
                tracing::debug!("trace roots still open at shutdown");
            }
            if let Err(e) = p.shutdown() {
                tracing::debug!(error = %e, "trace exporter shutdown");
            }
        }
        if let Some(p) = self.metrics
            && let Err(e) = p.shutdown()
        {
            tracing::debug!(error = %e, "metric exporter shutdown");
        }
    }
}

/// Hands each log event a buffer that reaches stderr scrubbed.
struct Scrubbed;

impl<'a> MakeWriter<'a> for Scrubbed {
    type Writer = ScrubbedEvent;

    fn make_writer(&'a self) -> Self::Writer {
        ScrubbedEvent(Vec::new())
    }
}

/// One event's text, written when the formatter is done with it.
struct ScrubbedEvent(Vec<u8>);

impl Write for ScrubbedEvent {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for ScrubbedEvent {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.0);
        let clean = vt_contract::redact::secrets(&text);
        let _ = std::io::stderr().lock().write_all(clean.as_bytes());
    }
}
