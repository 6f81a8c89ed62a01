//! The transcript runner (SPEC §13; the files' format is [`crate::transcript`]'s). It composes the
//! product as `serve` does, so it lives with the wiring.
//!
//! Runs one transcript: builds a hermetic world (in-memory SQLite, in-process simulator on loopback
//! with a pinned clock, scripted or recorded model, seeded ids), plays the user turns through the real
//! conversation service, and checks every expectation and `never` rule after each turn. The first
//! mismatch ends the transcript and is reported with what was expected and what happened.

mod check;
mod report;
mod world;

pub(crate) use report::{escape, junit_xml, summary_line};
pub(crate) use world::scripted;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::config::Config;
use crate::transcript::format::{TotalExpect, Transcript, Turn};
use check::{check, violation};
use vt_engine::TurnEvent;
use vt_engine::llm::LlmProvider;
use world::{Model, Observed, World};

/// How transcripts run.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// The base configuration (skills, prompts, intents; the model for `--record`).
    pub config: Config,
    /// Record cassettes against the configured model instead of replaying them.
    pub record: bool,
    /// The model to record with, overriding the configured one (tests use a loopback fake).
    pub record_with: Option<Arc<dyn LlmProvider>>,
    /// Plays every transcript against this model instead of its own (`vt-agent eval`): a live model
    /// (the scripts are not used), or none.
    pub model: Option<ModelChoice>,
    /// The systems to play against instead of the simulator's (`vt-agent replay`: what was recorded).
    /// Payments then go to the embedded simulator's providers, as `serve` composes them with none
    /// configured: a replay never reaches a real provider.
    pub systems: Option<vt_connectors::systems::VtSystems>,
}

/// The model `vt-agent eval` plays the cases with.
#[derive(Clone)]
pub enum ModelChoice {
    /// The transcript's own scripts (a strong model's answers, written with the case); no model for
    /// a case that scripts none.
    Scripted,
    Live(Arc<dyn LlmProvider>),
    None,
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
    pub(crate) fn headline(&self) -> String {
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
    /// Recharges the simulator charged during the whole transcript.
    pub charges: usize,
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
            charges: 0,
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
    let mut v = vt_contract::json::to_value(base).map_err(|e| e.to_string())?;
    if let Some(obj) = v.as_object_mut() {
        for (k, val) in overrides {
            obj.insert(k.clone(), val.clone());
        }
    }
    vt_contract::json::from_value(v).map_err(|e| e.to_string())
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
        charges: 0,
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
    let world = World::build(t, path, options).await?;
    let result = play_in(&world, t, report).await;
    report.charges = charges(&world);
    result
}

/// One turn as a replay plays it: what was said back and what happened.
pub(crate) struct PlayedTurn {
    pub replies: String,
    pub events: Vec<TurnEvent>,
    pub latency_ms: u64,
    /// The charges (means, amount) the turn issued, in order.
    pub charges: Vec<(String, String)>,
    /// The charges the card holder paid after it (`pays`), as they then were, with the events of the
    /// runs that sent their recharges.
    pub paid: Vec<(vt_store::PixCharge, Vec<TurnEvent>)>,
}

/// Plays every turn of `t` in its world with no expectation checked (`vt-agent replay`, which judges
/// by effects): each turn's replies, events and the charges it issued.
pub(crate) async fn play_unchecked(
    t: &Transcript,
    options: &RunOptions,
) -> Result<Vec<PlayedTurn>, Mismatch> {
    let world = World::build(t, Path::new("."), options).await?;
    let mut turns = Vec::new();
    let mut issued = 0;
    for turn in &t.turns {
        if let Some(at) = &turn.at {
            world.clock.set(parse_time(at).map_err(|e| setup_error("at", e))?);
        }
        let mut played = match world.play(turn).await {
            Ok(seen) => PlayedTurn {
                replies: seen.replies.join("\n"),
                events: seen.events,
                latency_ms: seen.latency_ms,
                charges: Vec::new(),
                paid: Vec::new(),
            },
            Err(e) => PlayedTurn {
                replies: format!("[erro: {e}]"),
                events: Vec::new(),
                latency_ms: 0,
                charges: Vec::new(),
                paid: Vec::new(),
            },
        };
        let charges = world.charges().await;
        played.charges = charges.get(issued..).unwrap_or_default().to_vec();
        issued = charges.len();
        // A payment the world cannot make is the case's: it is said in its replies.
        match world.pay(&turn.pays).await {
            Ok(paid) => played.paid = paid,
            Err(e) => played.replies.push_str(&format!("\n[erro no pagamento: {e}]")),
        }
        turns.push(played);
    }
    Ok(turns)
}

/// Recharges the world's simulator charged.
fn charges(world: &World) -> usize {
    world
        .sim
        .ledger()
        .iter()
        .filter(|e| e.efeito == Some(vt_simulators::systems::Efeito::RecargaEfetivada))
        .count()
}

async fn play_in(world: &World, t: &Transcript, report: &mut TranscriptReport) -> Result<(), Mismatch> {
    let mut totals = Totals::default();
    for (i, turn) in t.turns.iter().enumerate() {
        let mismatch = |what: &str, expected: String, actual: String| Mismatch {
            turn: Some(i + 1),
            user: Some(turn.said()),
            what: what.to_owned(),
            expected,
            actual,
        };
        if let Some(at) = &turn.at {
            world
                .clock
                .set(parse_time(at).map_err(|e| mismatch("at", "an ISO 8601 time".into(), e))?);
        }
        if let Some(step) = &turn.support {
            world
                .support(step)
                .await
                .map_err(|e| mismatch("support", "the support agent's step done".into(), e))?;
        }
        if let Some(problem) = turn.problem() {
            return Err(mismatch("turn", problem.into(), "more than one".into()));
        }
        world
            .script(turn)
            .map_err(|e| mismatch("model script", "a valid scripted reply".into(), e))?;
        let seen = match (world.play(turn).await, &turn.expect.error) {
            (Err(e), Some(want)) if e.to_string().contains(want.as_str()) => continue,
            (Err(e), want) => {
                let want = want
                    .clone()
                    .map_or("a reply".into(), |w| format!("error containing {w:?}"));
                return Err(mismatch("turn", want, format!("error: {e}")));
            }
            (Ok(seen), Some(want)) => {
                let got = format!("reply {:?}", seen.reply);
                return Err(mismatch("error", format!("error containing {want:?}"), got));
            }
            (Ok(seen), None) => seen,
        };
        report.turns.push(TurnReport::of(turn, &seen));
        totals.model_calls += seen.model_calls;
        totals.tokens += seen.handled.tokens.0 + seen.handled.tokens.1;
        script_used_up(&world.model, t.setup.spare_replies)
            .map_err(|(what, expected, actual)| mismatch(&what, expected, actual))?;
        check(&turn.expect, &seen).map_err(|(what, expected, actual)| mismatch(&what, expected, actual))?;
        world
            .pay(&turn.pays)
            .await
            .map_err(|e| mismatch("pays", "the charges paid and settled".into(), e))?;
        if let Some((rule, v)) = t
            .never
            .iter()
            .find_map(|r| violation(r, turn, &seen).map(|v| (r, v)))
        {
            // The rule and the words that broke it (cards masked): a report names what was said.
            let what = format!(
                "never rule {rule:?} broken by {:?}",
                truncate(&vt_domain::vt::card::mask_cards_in(&v), 80)
            );
            return Err(mismatch(&what, format!("{rule:?} holds"), v));
        }
    }
    if let Model::Record(p) = &world.model {
        p.save().map_err(|e| setup_error("cassette", e))?;
    }
    match &t.expect_total {
        Some(total) => check_totals(total, &totals, world),
        None => Ok(()),
    }
}

/// What the whole transcript used.
#[derive(Default)]
struct Totals {
    model_calls: usize,
    tokens: u64,
}

impl TurnReport {
    fn of(turn: &Turn, seen: &Observed) -> Self {
        Self {
            user: turn.said(),
            replies: seen.replies.clone(),
            intent: seen.handled.intent.clone(),
            events: seen.events.clone(),
            model_calls: seen.model_calls,
            tokens_input: seen.handled.tokens.0,
            tokens_output: seen.handled.tokens.1,
            latency_ms: seen.latency_ms,
        }
    }
}

/// The model's script must be used up, and a cassette must have had every reply: a reply left over,
/// or a request it never saw, is a turn that went differently — but in a case that says its script
/// may be spared (the review queue's).
fn script_used_up(model: &Model, spare: bool) -> Result<(), check::Failure> {
    if let Model::Scripted(p) = model
        && spare
    {
        // A turn a fix answers without the model leaves its replies: they are not the next turn's.
        p.discard();
    }
    if let Model::Scripted(p) = model
        && p.remaining() > 0
    {
        return Err((
            "model script".into(),
            "every scripted reply used".into(),
            format!("{} scripted replies left unused", p.remaining()),
        ));
    }
    if let Model::Replay(p) = model
        && let Some(miss) = p.take_misses().into_iter().next()
    {
        return Err((
            "cassette miss".into(),
            "a recorded reply for every model request".into(),
            miss,
        ));
    }
    Ok(())
}

/// The transcript's `expect_total`: model calls, tokens, recharges and notifications in all.
fn check_totals(total: &TotalExpect, totals: &Totals, world: &World) -> Result<(), Mismatch> {
    let whole = |what: &str, expected: String, actual: String| Mismatch {
        turn: None,
        user: None,
        what: what.into(),
        expected,
        actual,
    };
    if let Some(n) = total.model_calls
        && n != totals.model_calls
    {
        return Err(whole(
            "total model calls",
            n.to_string(),
            totals.model_calls.to_string(),
        ));
    }
    if let Some(max) = total.max_tokens
        && totals.tokens > max
    {
        return Err(whole(
            "total tokens",
            format!("at most {max}"),
            totals.tokens.to_string(),
        ));
    }
    let charges = charges(world);
    if let Some(n) = total.recharges
        && n != charges
    {
        return Err(whole("total recharges", n.to_string(), charges.to_string()));
    }
    let delivered = world.sim.deliveries();
    if let Some(n) = total.notifications
        && n != delivered
    {
        return Err(whole("total notifications", n.to_string(), delivered.to_string()));
    }
    Ok(())
}
