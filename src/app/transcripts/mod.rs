//! The transcript runner (SPEC §13; the files' format is [`crate::transcript`]'s). It composes the
//! product as `serve` does, so it lives with the wiring.
//!
//! Runs one transcript: builds a hermetic world (in-memory SQLite, in-process simulator on loopback
//! with a pinned clock, scripted or recorded model, seeded ids), plays the user turns through the real
//! conversation service, and checks every expectation and `never` rule after each turn. The first
//! mismatch ends the transcript and is reported with what was expected and what happened.

mod report;

pub use report::{junit_xml, summary_line};

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use vt_actions::context::Extensions;
use vt_actions::systems::simulator::{CardBehavior, magic_cards};
use vt_actions::systems::{LedgerEntry, Simulator, SimulatorConfig, SystemsConfig, VtSystems};
use vt_actions::tools::{RecargaPendente, STATE_PENDENTE, VtSettings, user_confirms};
use vt_actions::vt::card::mask_cards_in;

use crate::config::Config;
use crate::engine::{Clock, EngineConfig, IdSource, ManualClock, Participant, RetryPolicy, TurnEvent};
use crate::llm::{LlmError, LlmProvider, Scripted, ScriptedProvider};
use crate::service::Inbound;
use crate::store::{SqliteStore, Store};
use crate::transcript::cassette::{Cassette, RecordingProvider, ReplayProvider};
use crate::transcript::format::{Expect, ExpectCall, Fault, ModelReply, Never, Transcript};

/// How transcripts run.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// The base configuration (skills, prompts, intents; the model for `--record`).
    pub config: Config,
    /// Record cassettes against the configured model instead of replaying them.
    pub record: bool,
    /// The model to record with, overriding the configured one (tests use a loopback fake).
    pub record_with: Option<Arc<dyn LlmProvider>>,
}

/// The first thing that did not match.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mismatch {
    /// 1-based; `None` for setup and whole-conversation checks.
    pub turn: Option<usize>,
    pub user: Option<String>,
    pub what: String,
    pub expected: String,
    pub actual: String,
}

impl Mismatch {
    pub fn headline(&self) -> String {
        match (self.turn, &self.user) {
            (Some(t), Some(u)) => format!("turn {t} ({:?}): {}", truncate(u, 60), self.what),
            _ => self.what.clone(),
        }
    }
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}\n  expected: {}\n  actual:   {}",
            self.headline(),
            self.expected,
            self.actual
        )
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TurnReport {
    pub user: String,
    pub replies: Vec<String>,
    pub intent: Option<String>,
    pub events: Vec<TurnEvent>,
    pub model_calls: usize,
    pub tokens_input: u64,
    pub tokens_output: u64,
    pub latency_ms: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct TranscriptReport {
    pub name: String,
    pub file: String,
    pub passed: bool,
    pub failure: Option<Mismatch>,
    pub turns: Vec<TurnReport>,
    pub duration_ms: u64,
}

/// Loads and runs one file.
pub async fn run_file(path: &Path, options: &RunOptions) -> TranscriptReport {
    let started = Instant::now();
    let file = path.display().to_string();
    match crate::transcript::load(path) {
        Ok(t) => run_transcript(&t, path, options).await,
        Err(e) => TranscriptReport {
            name: file.clone(),
            file,
            passed: false,
            failure: Some(Mismatch {
                turn: None,
                user: None,
                what: "invalid transcript".into(),
                expected: "a valid transcript".into(),
                actual: e,
            }),
            turns: Vec::new(),
            duration_ms: started.elapsed().as_millis() as u64,
        },
    }
}

fn setup_error(what: &str, e: impl std::fmt::Display) -> Mismatch {
    Mismatch {
        turn: None,
        user: None,
        what: format!("setup: {what}"),
        expected: "a working setup".into(),
        actual: e.to_string(),
    }
}

/// Merges `overrides` into the JSON form of `base`.
fn overridden<T: Serialize + serde::de::DeserializeOwned>(
    base: &T,
    overrides: &Map<String, Value>,
) -> Result<T, String> {
    let mut v = serde_json::to_value(base).map_err(|e| e.to_string())?;
    if let Some(obj) = v.as_object_mut() {
        for (k, val) in overrides {
            obj.insert(k.clone(), val.clone());
        }
    }
    serde_json::from_value(v).map_err(|e| e.to_string())
}

enum Model {
    None,
    Scripted(Arc<ScriptedProvider>),
    Replay(Arc<ReplayProvider>),
    Record(Arc<RecordingProvider>),
}

impl Model {
    fn provider(&self) -> Option<Arc<dyn LlmProvider>> {
        match self {
            Self::None => None,
            Self::Scripted(p) => Some(p.clone()),
            Self::Replay(p) => Some(p.clone()),
            Self::Record(p) => Some(p.clone()),
        }
    }
}

fn scripted(reply: &ModelReply) -> Result<Scripted, String> {
    Ok(match reply {
        ModelReply::Text(t) => Scripted::text(t.clone()),
        ModelReply::ToolCall(c) => Scripted::raw_tools(vec![(c.name.as_str(), call_args(c))]),
        ModelReply::ToolCalls(cs) => {
            Scripted::raw_tools(cs.iter().map(|c| (c.name.as_str(), call_args(c))).collect())
        }
        ModelReply::RawOpenai(v) => {
            Scripted::Reply(crate::llm::parse_openai(&v.to_string(), "openai").map_err(|e| e.to_string())?)
        }
        ModelReply::RawAnthropic(v) => Scripted::Reply(
            crate::llm::parse_anthropic(&v.to_string(), "anthropic").map_err(|e| e.to_string())?,
        ),
        ModelReply::Fault(f) => Scripted::fail(match f {
            Fault::Status(s) => LlmError::from_status(*s, format!("HTTP {s}"), None),
            Fault::Detailed { status, retry_after } => LlmError::from_status(
                *status,
                format!("HTTP {status}"),
                retry_after.map(Duration::from_secs),
            ),
            Fault::Named(n) if n == "timeout" => LlmError::Transient {
                status: None,
                message: "timeout".into(),
                retry_after: None,
            },
            Fault::Named(n) if n == "malformed" => LlmError::Malformed("resposta ilegível".into()),
            Fault::Named(other) => {
                return Err(format!(
                    "unknown fault {other:?}: use a status, timeout or malformed"
                ));
            }
        }),
    })
}

fn call_args(c: &crate::transcript::format::ScriptedCall) -> String {
    c.raw_arguments.clone().unwrap_or_else(|| {
        c.arguments
            .clone()
            .unwrap_or(Value::Object(Map::new()))
            .to_string()
    })
}

fn parse_time(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("invalid time {s:?}: {e}"))
}

/// Runs a parsed transcript; `path` locates its cassette.
pub async fn run_transcript(t: &Transcript, path: &Path, options: &RunOptions) -> TranscriptReport {
    let started = Instant::now();
    let mut report = TranscriptReport {
        name: t.name.clone(),
        file: path.display().to_string(),
        passed: false,
        failure: None,
        turns: Vec::new(),
        duration_ms: 0,
    };
    let result = play(t, path, options, &mut report).await;
    report.passed = result.is_ok();
    report.failure = result.err();
    report.duration_ms = started.elapsed().as_millis() as u64;
    report
}

async fn play(
    t: &Transcript,
    path: &Path,
    options: &RunOptions,
    report: &mut TranscriptReport,
) -> Result<(), Mismatch> {
    let setup = &t.setup;
    let start = parse_time(setup.clock.as_deref().unwrap_or("2026-11-22T12:00:00Z"))
        .map_err(|e| setup_error("clock", e))?;
    let clock = ManualClock::new(start);

    // The simulated systems, on loopback, with the transcript's cards and the pinned clock.
    let mut cards = if setup.simulator.replace_cards {
        Default::default()
    } else {
        magic_cards()
    };
    for (card, behaviour) in &setup.simulator.cards {
        let b: CardBehavior = serde_json::from_value(behaviour.clone())
            .map_err(|e| setup_error(&format!("simulator card {card}"), e))?;
        cards.insert(card.clone(), b);
    }
    let sim_clock = clock.clone();
    let sim_config = SimulatorConfig {
        slow: Duration::from_secs(2),
        notifications_per_second: setup.simulator.notifications_per_second.unwrap_or(50),
        now: Some(Arc::new(move || sim_clock.now())),
        ..SimulatorConfig::default()
    };
    let sim = Simulator::with_cards(sim_config, cards);
    let running = sim
        .clone()
        .spawn(0)
        .await
        .map_err(|e| setup_error("simulator", e))?;
    let systems = SystemsConfig {
        timeout_cap_ms: Some(300),
        max_retry_wait_ms: 20,
        ..SystemsConfig::single(&running.url)
    };
    let vt: VtSettings = overridden(&options.config.vt, &setup.vt).map_err(|e| setup_error("vt", e))?;
    let fast = EngineConfig {
        llm_retry: RetryPolicy::new(3, 1),
        tool_retry: RetryPolicy::new(2, 1),
        persist_retry: RetryPolicy::new(3, 1),
        ..options.config.engine.clone()
    };
    let engine_config: EngineConfig =
        overridden(&fast, &setup.engine).map_err(|e| setup_error("engine", e))?;

    // The model: none, scripted per turn, or a cassette (replayed, or recorded with --record).
    let scripts = t
        .turns
        .iter()
        .any(|turn| !turn.model.is_empty() || turn.classify.is_some());
    let mode = setup
        .model
        .clone()
        .unwrap_or_else(|| if scripts { "scripted".into() } else { "none".into() });
    let cassette_path = setup
        .cassette
        .as_ref()
        .map(|c| path.parent().unwrap_or(Path::new(".")).join(c));
    let model = match mode.as_str() {
        "none" => Model::None,
        "scripted" => Model::Scripted(Arc::new(ScriptedProvider::new([]))),
        "cassette" => {
            let path = cassette_path
                .clone()
                .ok_or_else(|| setup_error("cassette", "model: cassette needs `cassette: FILE`"))?;
            if options.record {
                let inner = match &options.record_with {
                    Some(p) => p.clone(),
                    None => options
                        .config
                        .llm
                        .provider()
                        .map_err(|e| setup_error("model", e))?
                        .ok_or_else(|| {
                            setup_error(
                                "model",
                                "--record needs a model: set VT_LLM_API_KEY (or [llm] in the config)",
                            )
                        })?,
                };
                Model::Record(Arc::new(RecordingProvider::new(inner, path)))
            } else {
                Model::Replay(Arc::new(ReplayProvider::new(
                    Cassette::load(&path).map_err(|e| setup_error("cassette", e))?,
                )))
            }
        }
        other => {
            return Err(setup_error(
                "model",
                format!("unknown model mode {other:?}: none, scripted or cassette"),
            ));
        }
    };
    let config = Config {
        engine: engine_config,
        ..options.config.clone()
    };
    let ext = Extensions::default()
        .with(VtSystems::new(systems).map_err(|e| setup_error("client", e))?)
        .with(vt);
    let engine = super::engine(&config, model.provider(), ext)
        .map_err(|e| setup_error("engine", format!("{e:#}")))?
        .with_clock(Clock::Manual(clock.clone()))
        .with_ids(IdSource::seeded(setup.seed));
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::connect("sqlite::memory:")
            .await
            .map_err(|e| setup_error("store", e))?,
    );
    let engine = crate::flow::share(engine, Some(store.clone()));
    let service = super::service(&config, engine.clone(), store.clone())
        .await
        .map_err(|e| setup_error("service", format!("{e:#}")))?;

    let who = Participant {
        user_id: setup.user.clone(),
        user_login: setup.user.clone(),
        channel: setup.channel.clone(),
    };
    let conv_id = setup.conversation.clone().unwrap_or_else(|| "transcript".into());
    if setup.skill.is_some() || !setup.state.is_empty() || !setup.memory.is_empty() {
        let mut conv = engine
            .start_conversation(&setup.agent, who.clone())
            .map_err(|e| setup_error("agent", e))?;
        conv.id = conv_id.clone();
        if let Some(skill) = &setup.skill {
            conv.active_skill = skill.clone();
        }
        conv.state = setup.state.clone();
        conv.memory = setup.memory.clone();
        store
            .save_conversation(&conv, start)
            .await
            .map_err(|e| setup_error("conversation", e))?;
    }

    let mut total_calls = 0usize;
    let mut total_tokens = 0u64;
    for (i, turn) in t.turns.iter().enumerate() {
        let n = i + 1;
        let mismatch = |what: &str, expected: String, actual: String| Mismatch {
            turn: Some(n),
            user: Some(turn.user.clone()),
            what: what.to_owned(),
            expected,
            actual,
        };
        if let Some(at) = &turn.at {
            clock.set(parse_time(at).map_err(|e| mismatch("at", "an ISO 8601 time".into(), e))?);
        }
        if let Model::Scripted(p) = &model {
            let mut replies = Vec::new();
            if let Some(intent) = &turn.classify {
                replies.push(Scripted::text(intent.clone()));
            }
            for r in &turn.model {
                replies.push(
                    scripted(r).map_err(|e| mismatch("model script", "a valid scripted reply".into(), e))?,
                );
            }
            p.push(replies);
        }
        let before = store.conversation(&conv_id).await.ok().flatten();
        let pending_before: Option<RecargaPendente> = before
            .as_ref()
            .and_then(|c| c.state.get(STATE_PENDENTE).cloned())
            .and_then(|v| serde_json::from_value(v).ok());
        let ledger_before = sim.ledger().len();
        let turn_started = Instant::now();
        let text = turn.user.repeat(turn.repeat.unwrap_or(1));
        let msg = Inbound {
            agent_id: setup.agent.clone(),
            conversation_id: Some(conv_id.clone()),
            user: who.clone(),
            text,
            ..Default::default()
        };
        let handled = service.handle(msg).await;
        let latency_ms = turn_started.elapsed().as_millis() as u64;
        let handled = match (handled, &turn.expect.error) {
            (Err(e), Some(want)) if e.to_string().contains(want.as_str()) => continue,
            (Err(e), want) => {
                return Err(mismatch(
                    "turn",
                    want.clone()
                        .map_or("a reply".into(), |w| format!("error containing {w:?}")),
                    format!("error: {e}"),
                ));
            }
            (Ok(h), Some(want)) => {
                return Err(mismatch(
                    "error",
                    format!("error containing {want:?}"),
                    format!("reply {:?}", h.reply_text()),
                ));
            }
            (Ok(h), None) => h,
        };
        let (execution, events) = match &handled.execucao_id {
            Some(id) => store
                .execution(id)
                .await
                .ok()
                .flatten()
                .map_or((None, Vec::new()), |(e, ev)| (Some(e), ev)),
            None => (None, Vec::new()),
        };
        let conv = store.conversation(&conv_id).await.ok().flatten();
        let ledger: Vec<LedgerEntry> = sim.ledger().into_iter().skip(ledger_before).collect();
        let replies: Vec<String> = handled.replies.iter().map(|r| r.text.clone()).collect();
        let model_calls = execution.as_ref().map_or(0, |e| e.model_calls.len());
        report.turns.push(TurnReport {
            user: turn.user.clone(),
            replies: replies.clone(),
            intent: handled.intent.clone(),
            events: events.clone(),
            model_calls,
            tokens_input: handled.tokens.0,
            tokens_output: handled.tokens.1,
            latency_ms,
        });
        total_calls += model_calls;
        total_tokens += handled.tokens.0 + handled.tokens.1;

        // The model's script must be used up: a reply left over is a turn that went differently.
        if let Model::Scripted(p) = &model
            && p.remaining() > 0
        {
            return Err(mismatch(
                "model script",
                "every scripted reply used".into(),
                format!("{} scripted replies left unused", p.remaining()),
            ));
        }
        if let Model::Replay(p) = &model
            && let Some(miss) = p.take_misses().into_iter().next()
        {
            return Err(mismatch(
                "cassette miss",
                "a recorded reply for every model request".into(),
                miss,
            ));
        }
        let reply = handled.reply_text();
        check(
            &turn.expect,
            &reply,
            &replies,
            &events,
            execution.as_ref(),
            conv.as_ref(),
            &ledger,
            &handled,
            model_calls,
        )
        .map_err(|(what, expected, actual)| mismatch(&what, expected, actual))?;
        for rule in &t.never {
            let violation = match rule {
                Never::RechargeWithoutConfirmation => {
                    let charged = ledger
                        .iter()
                        .any(|e| e.efeito == Some(vt_actions::systems::Efeito::RecargaEfetivada));
                    let confirmed = pending_before
                        .as_ref()
                        .is_some_and(|p| user_confirms(&turn.user, p));
                    (charged && !confirmed).then(|| {
                        "a recharge was charged without the user's confirmation of a pending recharge"
                            .to_owned()
                    })
                }
                Never::FullCardInReply => replies
                    .iter()
                    .find(|r| mask_cards_in(r) != **r)
                    .map(|r| format!("a reply shows a full card number: {r:?}")),
                Never::ReplyContains(s) => replies
                    .iter()
                    .find(|r| r.contains(s.as_str()))
                    .map(|r| format!("a reply contains {s:?}: {r:?}")),
                Never::ModelCallsAbove(max) => {
                    (model_calls > *max).then(|| format!("{model_calls} model calls (limit {max})"))
                }
            };
            if let Some(v) = violation {
                return Err(mismatch("never rule", format!("{rule:?} holds"), v));
            }
        }
    }
    if let Model::Record(p) = &model {
        p.save().map_err(|e| setup_error("cassette", e))?;
    }
    if let Some(total) = &t.expect_total {
        let whole = |what: &str, expected: String, actual: String| Mismatch {
            turn: None,
            user: None,
            what: what.into(),
            expected,
            actual,
        };
        if let Some(n) = total.model_calls
            && n != total_calls
        {
            return Err(whole("total model calls", n.to_string(), total_calls.to_string()));
        }
        if let Some(max) = total.max_tokens
            && total_tokens > max
        {
            return Err(whole(
                "total tokens",
                format!("at most {max}"),
                total_tokens.to_string(),
            ));
        }
        let charges = sim
            .ledger()
            .iter()
            .filter(|e| e.efeito == Some(vt_actions::systems::Efeito::RecargaEfetivada))
            .count();
        if let Some(n) = total.recharges
            && n != charges
        {
            return Err(whole("total recharges", n.to_string(), charges.to_string()));
        }
        if let Some(n) = total.notifications
            && n != sim.deliveries()
        {
            return Err(whole(
                "total notifications",
                n.to_string(),
                sim.deliveries().to_string(),
            ));
        }
    }
    drop(running);
    Ok(())
}

type Failure = (String, String, String);

fn fail<T: std::fmt::Debug, U: std::fmt::Debug>(what: &str, expected: T, actual: U) -> Failure {
    (what.to_owned(), format!("{expected:?}"), format!("{actual:?}"))
}

/// `actual` contains every field of `want` with the same value (recursively for objects).
fn partial_match(want: &Value, actual: &Value) -> bool {
    match (want, actual) {
        (Value::Object(w), Value::Object(a)) => w
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|av| partial_match(v, av))),
        (Value::Number(w), Value::Number(a)) => w.as_f64() == a.as_f64(),
        (Value::Number(w), Value::String(a)) | (Value::String(a), Value::Number(w)) => {
            a.parse::<f64>().ok() == w.as_f64()
        }
        _ => want == actual,
    }
}

fn call_matches(want: &ExpectCall, name: &str, args: &Value) -> bool {
    if want.name != name {
        return false;
    }
    if let Some(w) = &want.arguments
        && !partial_match(w, args)
    {
        return false;
    }
    if let Some(exact) = &want.arguments_exact {
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(o) = v.as_object_mut() {
                for k in &want.ignore {
                    o.remove(k);
                }
            }
            v
        };
        return strip(exact) == strip(args);
    }
    true
}

#[allow(clippy::too_many_arguments)]
fn check(
    expect: &Expect,
    reply: &str,
    replies: &[String],
    events: &[TurnEvent],
    execution: Option<&crate::engine::ExecutionRecord>,
    conv: Option<&crate::engine::Conversation>,
    ledger: &[LedgerEntry],
    handled: &crate::service::Handled,
    model_calls: usize,
) -> Result<(), Failure> {
    let calls: Vec<(String, Value)> = events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::ToolCall {
                name,
                arguments,
                deterministic: false,
                ..
            } => Some((
                name.clone(),
                serde_json::from_str(arguments).unwrap_or(Value::String(arguments.clone())),
            )),
            _ => None,
        })
        .collect();
    if let Some(want) = &expect.intent
        && handled.intent.as_deref() != Some(want.as_str())
    {
        return Err(fail("intent", want, &handled.intent));
    }
    if let Some(want) = &expect.tool_calls {
        let names: Vec<String> = calls.iter().map(|(n, a)| format!("{n}({a})")).collect();
        let ok =
            want.len() == calls.len() && want.iter().zip(&calls).all(|(w, (n, a))| call_matches(w, n, a));
        if !ok {
            let wanted: Vec<String> = want
                .iter()
                .map(|w| {
                    format!(
                        "{}({})",
                        w.name,
                        w.arguments
                            .clone()
                            .or(w.arguments_exact.clone())
                            .unwrap_or_default()
                    )
                })
                .collect();
            return Err(("tool calls".into(), wanted.join(", "), names.join(", ")));
        }
    }
    if let Some(called) = expect
        .not_called
        .iter()
        .find(|n| calls.iter().any(|(c, _)| c == *n))
    {
        return Err(fail(
            "tool that must not be called",
            format!("{called} not called"),
            format!("{called} called"),
        ));
    }
    if let Some(want) = &expect.reply
        && reply != want
    {
        return Err(fail("reply", want, reply));
    }
    if let Some(part) = expect.reply_contains.iter().find(|p| !reply.contains(p.as_str())) {
        return Err(fail("reply contains", part, reply));
    }
    if let Some(pattern) = &expect.reply_regex {
        let re = regex::Regex::new(pattern).map_err(|e| fail("reply regex", pattern, e.to_string()))?;
        if !re.is_match(reply) {
            return Err(fail("reply regex", pattern, reply));
        }
    }
    if let Some(part) = expect
        .reply_not_contains
        .iter()
        .find(|p| reply.contains(p.as_str()))
    {
        return Err(fail("reply must not contain", part, reply));
    }
    if let Some(n) = expect.replies
        && n != replies.len()
    {
        return Err(fail("number of replies", n, replies.len()));
    }
    if let Some(want) = &expect.skill_changes {
        let got: Vec<(String, String)> = events
            .iter()
            .filter_map(|e| match e {
                TurnEvent::SkillChanged { from, to, .. } => Some((from.clone(), to.clone())),
                _ => None,
            })
            .collect();
        let want: Vec<(String, String)> = want.iter().map(|c| (c.from.clone(), c.to.clone())).collect();
        if want != got {
            return Err(fail("skill changes", want, got));
        }
    }
    if let Some(want) = &expect.system_functions {
        let got: Vec<&str> = events.iter().filter_map(TurnEvent::system_function).collect();
        if *want != got {
            return Err(fail("system functions", want, got));
        }
    }
    for r in &expect.requests {
        let matching: Vec<&LedgerEntry> = ledger
            .iter()
            .filter(|e| e.method.eq_ignore_ascii_case(&r.method) && e.path == r.path)
            .filter(|e| {
                r.headers.iter().all(|(k, v)| {
                    k == "x-idempotency-key"
                        && e.idempotency_key
                            .as_deref()
                            .is_some_and(|key| v == "*" || key == v)
                })
            })
            .filter(|e| {
                r.body
                    .as_ref()
                    .is_none_or(|b| e.body.as_ref().is_some_and(|eb| partial_match(b, eb)))
            })
            .collect();
        let ok = match r.count {
            Some(n) => matching.len() == n,
            None => !matching.is_empty(),
        };
        if !ok {
            let seen: Vec<String> = ledger
                .iter()
                .map(|e| format!("{} {} → {}", e.method, e.path, e.status))
                .collect();
            return Err((
                "requests to the simulated systems".into(),
                format!(
                    "{} {} × {}",
                    r.method,
                    r.path,
                    r.count.map_or("≥1".into(), |n| n.to_string())
                ),
                format!(
                    "{} matching; all requests this turn: [{}]",
                    matching.len(),
                    seen.join(", ")
                ),
            ));
        }
    }
    if let Some(l) = &expect.ledger {
        let charged = ledger
            .iter()
            .filter(|e| e.efeito == Some(vt_actions::systems::Efeito::RecargaEfetivada))
            .count();
        let delivered = ledger
            .iter()
            .filter(|e| e.efeito == Some(vt_actions::systems::Efeito::NotificacaoEntregue))
            .count();
        if let Some(n) = l.recharges
            && n != charged
        {
            return Err(fail("recharges charged this turn", n, charged));
        }
        if let Some(n) = l.notifications
            && n != delivered
        {
            return Err(fail("notifications delivered this turn", n, delivered));
        }
    }
    let empty = Map::new();
    for (label, want, have) in [
        ("state", &expect.state, conv.map_or(&empty, |c| &c.state)),
        ("memory", &expect.memory, conv.map_or(&empty, |c| &c.memory)),
    ] {
        for (k, v) in want {
            let actual = have.get(k);
            let ok = match (v, actual) {
                (Value::Null, None) | (Value::Null, Some(Value::Null)) => true,
                (v, Some(a)) => partial_match(v, a),
                _ => false,
            };
            if !ok {
                return Err(fail(&format!("{label}.{k}"), v, actual));
            }
        }
    }
    if let Some(n) = expect.model_calls
        && n != model_calls
    {
        return Err(fail("model calls", n, model_calls));
    }
    if let Some(max) = expect.max_tokens {
        let used = handled.tokens.0 + handled.tokens.1;
        if used > max {
            return Err(fail("tokens", format!("at most {max}"), used));
        }
    }
    if let Some(want) = &expect.status {
        let got = execution.map(|e| e.status.as_str());
        if got != Some(want.as_str()) {
            return Err(fail("execution status", want, got));
        }
    }
    Ok(())
}
