//! The spans of a turn, in the shape Langfuse reads (`../shared/reference/stack.md` §1):
//!
//! ```text
//! vt                       agent  one trace per turn: session = conversation, user = channel user,
//! ├─ accept                span   input = the user's text, output = the replies
//! ├─ route                 span   intent, level, keyword or model, tokens
//! ├─ run                   span
//! │  ├─ vt_saldo           generation  one per model call: model, usage, input messages, output
//! │  ├─ consultar_saldo    tool        one per action or flow stage: arguments, result;
//! │  │                                 state_updates / memory_updates as events
//! │  └─ …
//! ├─ commit                span
//! └─ deliver               span   replies answered inline (terminal, HTTP)
//! ```
//!
//! Session, user and trace name are repeated on every span: Langfuse v4 filters observations, not
//! traces. Values are the product's own; the exporter masks every string on the way out
//! ([`super::otlp`]), so nothing here needs to remember to. When no trace is exported the spans are
//! disabled and every helper returns before building a value.

use std::collections::HashMap;

use opentelemetry::KeyValue;
use opentelemetry::trace::Status;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use serde_json::{Map, Value};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// Whom a trace belongs to.
#[derive(Debug, Clone)]
pub struct Scope<'a> {
    pub agent: &'a str,
    pub session: &'a str,
    pub user: &'a str,
}

/// A trace's scope, held for everything its turn runs: a flow the turn's tools start runs on a
/// conversation of its own, yet its spans belong to the turn's session (Langfuse takes a trace's
/// session from any of its spans).
#[derive(Debug, Clone)]
struct TraceScope {
    agent: String,
    session: String,
    user: String,
}

tokio::task_local! {
    static TRACE_SCOPE: TraceScope;
}

/// The observation type, and the trace's scope on a root span.
fn rooted(span: &Span, kind: &'static str, scope: &Scope<'_>) {
    span.set_attribute("langfuse.observation.type", kind);
    span.set_attribute("langfuse.trace.name", scope.agent.to_owned());
    span.set_attribute("langfuse.session.id", scope.session.to_owned());
    span.set_attribute("langfuse.user.id", scope.user.to_owned());
}

/// The observation type, and the scope of the trace it runs in (none outside [`in_trace`]: the
/// engine run on its own, as in benches).
fn scoped(span: &Span, kind: &'static str) {
    span.set_attribute("langfuse.observation.type", kind);
    let _ = TRACE_SCOPE.try_with(|t| {
        let scope = Scope {
            agent: &t.agent,
            session: &t.session,
            user: &t.user,
        };
        rooted(span, kind, &scope);
    });
}

/// Runs `work` as the trace `root` (from [`turn`]) of `scope`: every span inside carries its scope.
pub async fn in_trace<F: std::future::Future>(root: &Span, scope: &Scope<'_>, work: F) -> F::Output {
    use tracing::Instrument as _;
    if root.is_disabled() {
        return work.await;
    }
    let owned = TraceScope {
        agent: scope.agent.to_owned(),
        session: scope.session.to_owned(),
        user: scope.user.to_owned(),
    };
    TRACE_SCOPE.scope(owned, work.instrument(root.clone())).await
}

/// The root of a turn's trace, named after the agent. A new trace even when called inside another
/// span: each turn is its own trace.
pub fn turn(scope: &Scope<'_>, channel: &str, input: &str) -> Span {
    let span =
        tracing::info_span!(target: "vt_agent::trace", parent: None, "turn", "otel.name" = scope.agent);
    if span.is_disabled() {
        return span;
    }
    rooted(&span, "agent", scope);
    span.set_attribute("langfuse.trace.metadata.channel", channel.to_owned());
    span.set_attribute("langfuse.observation.input", json_text(input));
    span
}

/// A step of the pipeline (`accept`, `route`, `run`, `commit`, `deliver`), child of the current span.
pub fn step(name: &'static str) -> Span {
    let span = tracing::info_span!(target: "vt_agent::trace", "step", "otel.name" = name);
    if !span.is_disabled() {
        scoped(&span, "span");
    }
    span
}

/// The router's decision, on the `route` span.
pub fn routed(span: &Span, intent: &str, level: &str, by: &str, tokens: (u64, u64)) {
    if span.is_disabled() {
        return;
    }
    span.set_attribute("langfuse.observation.metadata.intent", intent.to_owned());
    span.set_attribute("langfuse.observation.metadata.level", level.to_owned());
    span.set_attribute("langfuse.observation.metadata.by", by.to_owned());
    span.set_attribute("langfuse.observation.metadata.tokens_input", tokens.0 as i64);
    span.set_attribute("langfuse.observation.metadata.tokens_output", tokens.1 as i64);
}

/// One model call, named after the skill that made it; `input` is built only when traced.
pub fn generation(skill: &str, model: &str, input: impl FnOnce() -> Value) -> Span {
    let span = tracing::info_span!(target: "vt_agent::trace", "generation", "otel.name" = skill);
    if span.is_disabled() {
        return span;
    }
    scoped(&span, "generation");
    span.set_attribute("gen_ai.operation.name", "chat");
    span.set_attribute("gen_ai.request.model", model.to_owned());
    span.set_attribute("langfuse.observation.input", vt_contract::json::text(&input()));
    span
}

/// What the model answered: usage and output. Tokens read from and written to the provider's prompt
/// cache, when there are any, go as Langfuse's `usage_details` keys `input_cache_read` and
/// `input_cache_write` (`gen_ai.usage.<key>` maps to `usageDetails.<key>`).
pub fn generated(span: &Span, model: &str, usage: &crate::llm::Usage, output: impl FnOnce() -> Value) {
    if span.is_disabled() {
        return;
    }
    span.set_attribute("gen_ai.response.model", model.to_owned());
    span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens as i64);
    span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens as i64);
    if usage.cached_input_tokens > 0 {
        span.set_attribute("gen_ai.usage.input_cache_read", usage.cached_input_tokens as i64);
    }
    if usage.cache_write_tokens > 0 {
        span.set_attribute("gen_ai.usage.input_cache_write", usage.cache_write_tokens as i64);
    }
    span.set_attribute("langfuse.observation.output", vt_contract::json::text(&output()));
}

/// One action or flow stage; `input` gives the JSON the action was given (or, for a stage, a pointer
/// to the previous stage's output), built only when traced.
pub fn tool(name: &str, input: impl FnOnce() -> String) -> Span {
    let span = tracing::info_span!(target: "vt_agent::trace", "tool", "otel.name" = name);
    if span.is_disabled() {
        return span;
    }
    scoped(&span, "tool");
    span.set_attribute("langfuse.observation.input", input());
    span
}

/// The observation's output (a tool's result, the turn's replies), as JSON text.
pub fn output(span: &Span, value: impl FnOnce() -> Value) {
    if !span.is_disabled() {
        span.set_attribute("langfuse.observation.output", vt_contract::json::text(&value()));
    }
}

/// `state_updates` / `memory_updates` of a response, as an event of the tool span.
pub fn updates(span: &Span, name: &'static str, updates: &Map<String, Value>) {
    if span.is_disabled() || updates.is_empty() {
        return;
    }
    let keys: Vec<&str> = updates.keys().map(String::as_str).collect();
    span.add_event(
        name,
        vec![
            KeyValue::new("keys", keys.join(",")),
            KeyValue::new("updates", vt_contract::json::to_text(updates).unwrap_or_default()),
        ],
    );
}

/// Marks the observation failed: span status, Langfuse level and status message.
pub fn failed(span: &Span, message: &str) {
    if span.is_disabled() {
        return;
    }
    span.set_attribute("langfuse.observation.level", "ERROR");
    span.set_attribute("langfuse.observation.status_message", message.to_owned());
    span.set_status(Status::error(message.to_owned()));
}

/// A plain text as the JSON string Langfuse shows as input or output.
fn json_text(text: &str) -> String {
    vt_contract::json::to_text(text).unwrap_or_default()
}

/// The current span's W3C trace context (`traceparent`), for work that continues the trace later
/// (the outbox's deliveries); `None` when nothing is traced.
pub fn trace_context() -> Option<HashMap<String, String>> {
    use opentelemetry::propagation::TextMapPropagator as _;
    let span = Span::current();
    if span.is_disabled() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&span.context(), &mut carrier);
    (!carrier.is_empty()).then_some(carrier)
}

/// The `deliver` step of a reply sent by the outbox worker, in the trace of the turn that wrote it
/// (`context` from [`trace_context`]); a trace of its own when the turn was not traced.
pub fn deliver(scope: &Scope<'_>, context: Option<&HashMap<String, String>>, destination: &str) -> Span {
    use opentelemetry::propagation::TextMapPropagator as _;
    let span =
        tracing::info_span!(target: "vt_agent::trace", parent: None, "deliver", "otel.name" = "deliver");
    if span.is_disabled() {
        return span;
    }
    if let Some(carrier) = context {
        let _ = span.set_parent(TraceContextPropagator::new().extract(carrier));
    }
    rooted(&span, "span", scope);
    span.set_attribute("langfuse.observation.metadata.channel", destination.to_owned());
    span
}

/// One model call outside the engine's loop (the router's classification, the planner, the context
/// summary) in its `generation` span.
pub async fn complete(
    name: &str,
    llm: &dyn crate::llm::LlmProvider,
    request: &crate::llm::CompletionRequest,
) -> Result<crate::llm::Completion, crate::llm::LlmError> {
    use tracing::Instrument as _;
    let span = generation(
        name,
        llm.model(),
        || serde_json::json!({"system": request.system, "context": request.context, "messages": request.messages}),
    );
    let result = llm.complete(request).instrument(span.clone()).await;
    match &result {
        Ok(c) => generated(
            &span,
            &c.model,
            &c.usage,
            || serde_json::json!({"content": c.text}),
        ),
        Err(e) => failed(&span, &e.to_string()),
    }
    result
}

/// Root spans ([`turn`], [`deliver`]) begun and not yet ended.
static OPEN_ROOTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Marks a span counted in [`OPEN_ROOTS`].
struct Root;

/// Counts the open root spans, so the last flush can wait for them: a span ends when its last handle
/// goes, and a library may hold one a moment after the work is done (sqlx's SQLite worker thread keeps
/// the span current at each statement until the end of that command's loop turn, after it has answered)
/// — in a one-shot command, past the exporter's shutdown, losing the trace's root.
pub(super) struct OpenRoots;

impl<S> tracing_subscriber::Layer<S> for OpenRoots
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if attrs.is_root()
            && let Some(span) = ctx.span(id)
        {
            span.extensions_mut().insert(Root);
            OPEN_ROOTS.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
    }

    fn on_close(&self, id: tracing::span::Id, ctx: tracing_subscriber::layer::Context<'_, S>) {
        if ctx
            .span(&id)
            .is_some_and(|span| span.extensions().get::<Root>().is_some())
        {
            OPEN_ROOTS.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        }
    }
}

/// Waits until every root span has ended, at most `limit`; `true` when they all did.
pub(super) fn wait_for_open_roots(limit: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while OPEN_ROOTS.load(std::sync::atomic::Ordering::Acquire) > 0 {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        // At shutdown, on the thread that ends the process: no runtime worker is blocked.
        #[allow(clippy::disallowed_methods)]
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    true
}
