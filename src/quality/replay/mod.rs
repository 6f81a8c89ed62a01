//! `vt-agent replay`: a release gate from real traffic. Stored conversations (personal data replaced,
//! `pseudonym.rs`) are played through a candidate configuration against a world built from what was
//! recorded (`world.rs`), and judged by what they *did* (`effects.rs`) against an approved baseline
//! or, with none, against the recording itself. Reports for CI in `report.rs`.

mod cases;
mod effects;
mod report;
mod world;

pub use cases::Selection;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::quality::transcripts::{ModelChoice, RunOptions};
use cases::{Case, Played};
use effects::Effect;
use vt_engine::llm::LlmProvider;
use vt_store::Store;

/// How a replay runs.
pub struct ReplayOptions {
    pub selection: Selection,
    /// The configuration the cases are played with: the candidate's (or the current one).
    pub candidate: Config,
    /// The candidate's model, for requests the recording has no answer to; none: they go unanswered.
    pub live_model: Option<Arc<dyn LlmProvider>>,
    /// The approved baseline to compare with; none: each case is compared with its recording.
    pub baseline: Option<PathBuf>,
    /// Write the run's effects as the baseline (`--baseline`'s file, else `OUT/baseline.json`) when
    /// every case passed.
    pub approve: bool,
    pub out: PathBuf,
    /// Plays per case, and how many must pass.
    pub repeat: usize,
    pub min_pass: usize,
}

/// A case's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    /// Every one of several plays passed.
    Stable,
    /// Enough plays passed, not all.
    Flaky,
    /// A behaviour failure: a mutating effect differs.
    Fail,
    /// An infrastructure error: the world could not answer (never retried into a pass).
    Error,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Stable => "stable",
            Self::Flaky => "flaky",
            Self::Fail => "fail",
            Self::Error => "error",
        }
    }

    /// As people read it (the command's lines, the console's page); `as_str` stays the reports' value.
    pub fn label(self) -> &'static str {
        match self {
            Self::Pass => "passou",
            Self::Stable => "estável",
            Self::Flaky => "instável",
            Self::Fail => "falhou",
            Self::Error => "erro",
        }
    }

    fn passed(self) -> bool {
        matches!(self, Self::Pass | Self::Stable | Self::Flaky)
    }
}

/// How one turn's words compare with the reference's.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Words {
    pub(crate) turn: usize,
    pub(crate) similarity: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) diff: Option<String>,
}

/// One case of a run.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub id: String,
    pub verdict: Verdict,
    /// `baseline` or `gravacao`: what the effects were compared with.
    pub reference: &'static str,
    pub(crate) expected: Vec<Effect>,
    pub(crate) effects: Vec<Effect>,
    /// The mutating effects side by side from where they part (reference, candidate).
    pub diff: Option<Vec<(String, String)>>,
    /// Read effects differ (reported, never a verdict).
    pub reads_differ: bool,
    pub(crate) words: Vec<Words>,
    /// Mean similarity of the turns' words.
    pub similarity: f64,
    pub(crate) model: world::ModelCount,
    pub errors: Vec<String>,
    pub plays: usize,
    pub passes: usize,
    pub latency_ms: u64,
    /// Reais moved by the candidate's recharges and charges.
    pub reais: String,
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayRun {
    pub evaluator: &'static str,
    /// What the run's set of cases is (a digest of their ids).
    pub corpus: String,
    pub cases: Vec<CaseResult>,
    /// Why the run fails apart from its cases (a missing case, another evaluator).
    pub problems: Vec<String>,
    pub duration_ms: u64,
}

impl CaseResult {
    /// Model calls the candidate's live model answered.
    pub fn live_model_calls(&self) -> usize {
        self.model.live
    }

    /// Model calls answered from the recording.
    pub fn recorded_model_calls(&self) -> usize {
        self.model.recorded
    }
}

impl ReplayRun {
    /// 0 every case passed, 1 a behaviour failed (or the baseline does not hold), 2 the world could not
    /// answer a case.
    pub fn exit_code(&self) -> i32 {
        if self.cases.iter().any(|c| c.verdict == Verdict::Error) {
            2
        } else if !self.problems.is_empty() || self.cases.iter().any(|c| !c.verdict.passed()) {
            1
        } else {
            0
        }
    }

    /// `N cases: P passed, F failed, E errors` — the line CI reads.
    pub fn summary_line(&self) -> String {
        let count = |v: &[Verdict]| self.cases.iter().filter(|c| v.contains(&c.verdict)).count();
        format!(
            "{} casos: {} passaram, {} falharam, {} com erro{}",
            self.cases.len(),
            count(&[Verdict::Pass, Verdict::Stable, Verdict::Flaky]),
            count(&[Verdict::Fail]),
            count(&[Verdict::Error]),
            if self.problems.is_empty() {
                String::new()
            } else {
                format!("; {}", self.problems.join("; "))
            }
        )
    }
}

/// The approved effects of every case (`baseline.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Baseline {
    pub(crate) evaluator: String,
    pub(crate) corpus: String,
    pub(crate) approved_at: String,
    pub(crate) cases: std::collections::BTreeMap<String, Vec<Effect>>,
}

fn corpus_of(cases: &[Case]) -> String {
    use sha2::Digest;
    let mut ids: Vec<&str> = cases.iter().map(|c| c.id.as_str()).collect();
    ids.sort_unstable();
    hex::encode(sha2::Sha256::digest(ids.join("\n").as_bytes()))[..16].to_owned()
}

fn read_baseline(path: &Path) -> anyhow::Result<Baseline> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("não foi possível ler a linha de base {}: {e}", path.display()))?;
    vt_contract::json::from_text(&text)
        .map_err(|e| anyhow::anyhow!("a linha de base {} é inválida: {e}", path.display()))
}

/// Runs the replay: reads the cases from `store`, plays them, writes the reports under `options.out`.
pub async fn run(store: &dyn Store, options: &ReplayOptions) -> anyhow::Result<ReplayRun> {
    let started = Instant::now();
    let baseline = options
        .baseline
        .as_deref()
        .filter(|p| p.exists())
        .map(read_baseline)
        .transpose()?;
    let pseudonyms = Arc::new(Mutex::new(crate::transcript::pseudonym::Pseudonyms::default()));
    let cases = cases::load(store, &options.selection, &pseudonyms).await?;
    let mut problems = Vec::new();
    if let Some(b) = &baseline {
        if b.evaluator != effects::EVALUATOR_VERSION {
            problems.push(format!(
                "a referência foi aprovada pelo avaliador {}, este é o {}: aprove-a de novo",
                b.evaluator,
                effects::EVALUATOR_VERSION
            ));
        }
        for id in b.cases.keys().filter(|id| cases.iter().all(|c| &c.id != *id)) {
            problems.push(format!("o caso {id} da referência não está nesta execução"));
        }
    }
    let mut results = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        eprintln!("replay {}/{}: {}", i + 1, cases.len(), case.id);
        let expected = baseline.as_ref().and_then(|b| b.cases.get(&case.id));
        let result = judge(case, expected, options, &pseudonyms).await;
        for e in &result.errors {
            eprintln!("  erro: {e}");
        }
        results.push(result);
    }
    let run = ReplayRun {
        evaluator: effects::EVALUATOR_VERSION,
        corpus: corpus_of(&cases),
        cases: results,
        problems,
        duration_ms: started.elapsed().as_millis() as u64,
    };
    report::write(&run, &cases, &options.out)?;
    if options.approve {
        approve(&run, options)?;
    }
    Ok(run)
}

/// Writes the run as the baseline — never a run that did not pass.
fn approve(run: &ReplayRun, options: &ReplayOptions) -> anyhow::Result<()> {
    if run.exit_code() != 0 {
        anyhow::bail!(
            "uma execução que não passou nunca vira a referência: {}",
            run.summary_line()
        );
    }
    let path = options
        .baseline
        .clone()
        .unwrap_or_else(|| options.out.join("baseline.json"));
    let baseline = Baseline {
        evaluator: effects::EVALUATOR_VERSION.to_owned(),
        corpus: run.corpus.clone(),
        approved_at: chrono::Utc::now().to_rfc3339(),
        cases: run
            .cases
            .iter()
            .map(|c| (c.id.clone(), c.effects.clone()))
            .collect(),
    };
    let text = vt_contract::json::to_pretty(&baseline)?;
    std::fs::write(&path, text)
        .map_err(|e| anyhow::anyhow!("não foi possível gravar {}: {e}", path.display()))?;
    eprintln!("referência aprovada: {}", path.display());
    Ok(())
}

/// What one play of a case did, or why the world could not play it.
#[derive(Default)]
struct Play {
    played: Played,
    model: world::ModelCount,
    errors: Vec<String>,
    latency_ms: u64,
}

async fn play_once(
    case: &Case,
    options: &ReplayOptions,
    pseudonyms: &Arc<Mutex<crate::transcript::pseudonym::Pseudonyms>>,
) -> Play {
    let systems = world::Systems::new(case.exchanges.clone());
    let model = Arc::new(world::Model::new(
        case.model.clone(),
        pseudonyms.clone(),
        options.live_model.clone(),
    ));
    // A conversation that never needed a model is played without one, as it was: with one, the
    // router leaves to it what it is not sure of.
    let choice = if case.model.is_empty() && options.live_model.is_none() {
        ModelChoice::None
    } else {
        ModelChoice::Live(model.clone())
    };
    let run_options = RunOptions {
        config: options.candidate.clone(),
        model: Some(choice),
        systems: Some(vt_connectors::systems::VtSystems::in_process(
            vt_simulators::InProcess::shared(systems.router()),
        )),
        ..RunOptions::default()
    };
    let mut play = Play::default();
    match crate::quality::transcripts::play_unchecked(&case.transcript, &run_options).await {
        Ok(turns) => {
            // Each turn's effects, then the charges it issued, then what the payments made after it
            // did: in the order they happened.
            for turn in turns {
                play.played.effects.extend(effects::of_events(&turn.events));
                play.played.effects.extend(
                    turn.charges
                        .iter()
                        .map(|(meio, amount)| effects::charge(meio, amount)),
                );
                // Then what the payments made after it did (the recharge sent, a refund, a case).
                for (charge, events) in &turn.paid {
                    play.played.effects.extend(effects::of_payment(charge, events));
                }
                play.played.replies.push(turn.replies);
                play.latency_ms += turn.latency_ms;
            }
        }
        Err(m) => play.errors.push(m.to_string()),
    }
    play.errors.extend(systems.misses());
    play.model = model.count();
    play
}

/// A case's verdict from its plays: an infrastructure error wins; one play passes or fails; several
/// are `stable` (all passed), `flaky` (at least `min_pass`) or `fail`.
fn verdict(plays: usize, passes: usize, min_pass: usize, infrastructure: bool) -> Verdict {
    if infrastructure {
        Verdict::Error
    } else if plays == 1 {
        if passes == 1 { Verdict::Pass } else { Verdict::Fail }
    } else if passes == plays {
        Verdict::Stable
    } else if passes >= min_pass.max(1) {
        Verdict::Flaky
    } else {
        Verdict::Fail
    }
}

async fn judge(
    case: &Case,
    baseline: Option<&Vec<Effect>>,
    options: &ReplayOptions,
    pseudonyms: &Arc<Mutex<crate::transcript::pseudonym::Pseudonyms>>,
) -> CaseResult {
    let (reference, expected) = match baseline {
        Some(b) => ("baseline", b.clone()),
        None => ("gravacao", case.recorded.effects.clone()),
    };
    let plays = options.repeat.max(1);
    let (mut passes, mut last, mut errors, mut diff) = (0, None, Vec::new(), None);
    for _ in 0..plays {
        let play = play_once(case, options, pseudonyms).await;
        match effects::diff(&expected, &play.played.effects) {
            // A candidate that did something else: its request may well be one nobody recorded, and
            // the verdict is on what it did.
            Some(d) => diff = Some(d),
            None if play.errors.is_empty() => passes += 1,
            None => {
                // The world could not answer: an infrastructure error is the case's, whatever the
                // other plays did, and never retried into a pass.
                errors.extend(play.errors.iter().cloned());
                last = Some(play);
                break;
            }
        }
        last = Some(play);
    }
    let play = last.unwrap_or_default();
    let verdict = verdict(plays, passes, options.min_pass, !errors.is_empty());
    let reads = |e: &[Effect]| {
        e.iter()
            .filter(|x| x.class == effects::Class::Read)
            .cloned()
            .collect::<Vec<_>>()
    };
    let words: Vec<Words> = case
        .recorded
        .replies
        .iter()
        .zip(
            play.played
                .replies
                .iter()
                .chain(std::iter::repeat(&String::new())),
        )
        .enumerate()
        .map(|(i, (was, now))| Words {
            turn: i + 1,
            similarity: effects::similarity(was, now),
            diff: effects::words_diff(was, now),
        })
        .collect();
    let similarity = if words.is_empty() {
        1.0
    } else {
        words.iter().map(|w| w.similarity).sum::<f64>() / words.len() as f64
    };
    CaseResult {
        id: case.id.clone(),
        verdict,
        reference,
        reads_differ: reads(&expected) != reads(&play.played.effects),
        diff: if verdict.passed() { None } else { diff },
        reais: effects::reais(&play.played.effects),
        expected,
        effects: play.played.effects,
        words,
        similarity,
        model: play.model,
        errors,
        plays,
        passes,
        latency_ms: play.latency_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::{Verdict, verdict};

    #[test]
    fn plays_make_a_verdict_and_an_error_is_never_a_pass() {
        assert_eq!(verdict(1, 1, 1, false), Verdict::Pass);
        assert_eq!(verdict(1, 0, 1, false), Verdict::Fail);
        assert_eq!(verdict(5, 5, 3, false), Verdict::Stable);
        assert_eq!(verdict(5, 3, 3, false), Verdict::Flaky);
        assert_eq!(verdict(5, 2, 3, false), Verdict::Fail);
        assert_eq!(verdict(5, 5, 3, true), Verdict::Error);
    }
}
