//! `vt-agent eval`: how a model does on the cases card holders bring, against no model at all.
//!
//! The cases are the router's corpus (each message a one-turn case: its intent, parameters and text)
//! and conversation cases in the transcript format (`eval/*.yaml`, lists of transcripts whose
//! `expect` says what a good answer holds and whose scripts are what a strong model would answer).
//! Each case is played through the whole product by the transcript runner — a hermetic world, the
//! configured model in place of the scripts — `--repeat K` times; `--compare` plays it with no model
//! too and marks every case the model made **worse**. A money surprise is any recharge charged
//! beyond the case's own (`expect_total.recharges`, else none). A case the model server failed
//! (down, timed out) is an error, not a failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};

use super::transcripts::{ModelChoice, RunOptions, TranscriptReport, run_transcript};
use vt_domain::vt::card::mask_cards_in;

use crate::config::Config;
use crate::router::corpus::Entry;
use crate::transcript::format::{Expect, ExpectCall, Never, Setup, Transcript, Turn};

/// One case, with where it came from.
#[derive(Debug, Clone)]
pub struct Case {
    pub transcript: Transcript,
    pub file: PathBuf,
    /// Recharges the case itself means to make.
    pub allowed: usize,
}

impl Case {
    fn class(&self) -> String {
        self.transcript.class.clone().unwrap_or_else(|| "conversa".into())
    }

    fn of(transcript: Transcript, file: &Path) -> Self {
        let allowed = transcript
            .expect_total
            .as_ref()
            .and_then(|t| t.recharges)
            .unwrap_or(0);
        Self {
            transcript,
            file: file.to_path_buf(),
            allowed,
        }
    }
}

/// Reads the cases of `paths`: folders (their `*.yaml`), lists of transcripts, the router's corpus
/// (a list of `texto` entries), or one transcript.
pub fn load(paths: &[PathBuf]) -> Result<Vec<Case>, String> {
    let mut cases = Vec::new();
    for file in crate::transcript::collect(paths)? {
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let value: serde_yaml::Value =
            serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        let bad = |e: serde_yaml::Error| format!("{}: {e}", file.display());
        let first = value.as_sequence().and_then(|s| s.first());
        if first.is_some_and(|v| v.get("texto").is_some()) {
            let entries: Vec<Entry> = serde_yaml::from_value(value).map_err(bad)?;
            cases.extend(entries.iter().enumerate().map(|(i, e)| {
                let confirms = e.intencao == "confirmar_recarga" && e.rota.as_deref() == Some("acao");
                Case {
                    allowed: usize::from(confirms),
                    ..Case::of(from_corpus(i, e), &file)
                }
            }));
        } else if value.is_sequence() {
            let list: Vec<Transcript> = serde_yaml::from_value(value).map_err(bad)?;
            cases.extend(list.into_iter().map(|transcript| Case::of(transcript, &file)));
        } else {
            let transcript: Transcript = serde_yaml::from_value(value).map_err(bad)?;
            cases.push(Case::of(transcript, &file));
        }
    }
    Ok(cases)
}

/// A message of the router's corpus as a one-turn case: its context as state and memory, its intent,
/// its action's exact arguments or its text.
fn from_corpus(i: usize, e: &Entry) -> Transcript {
    let (state, memory) = e.context();
    // What the product says when it did not understand (the menu, the waiting recharge asked again)
    // is no answer to score: a model may answer better, and only money and cards are checked.
    let understood =
        !(e.rota.as_deref() == Some("reafirma") || (e.intencao == "ajuda" && e.contem.is_none()));
    let mut expect = Expect {
        intent: understood.then(|| e.intencao.clone()),
        ..Expect::default()
    };
    if e.rota.as_deref() == Some("acao") {
        expect.tool_calls = Some(vec![ExpectCall {
            name: e.intencao.clone(),
            arguments: None,
            arguments_exact: e.parametros.clone().map(Value::Object),
            ignore: Vec::new(),
        }]);
    }
    if let Some(part) = &e.contem {
        expect.reply_contains = vec![part.clone()];
    }
    Transcript {
        // What the report prints masks cards, as every text the product shows does.
        name: format!("corpus #{}: {}", i + 1, mask_cards_in(&e.texto)),
        class: Some(format!("roteador/{}", e.intencao)),
        setup: Setup {
            state,
            memory,
            model: Some("none".into()),
            ..Setup::default()
        },
        never: vec![Never::FullCardInReply],
        turns: vec![Turn {
            user: e.texto.clone(),
            expect,
            ..Turn::default()
        }],
        expect_total: None,
        description: None,
    }
}

/// How `eval` runs.
#[derive(Clone)]
pub struct EvalOptions {
    pub config: Config,
    pub model: ModelChoice,
    /// The model's name, for the report and the prices.
    pub model_name: String,
    pub repeat: usize,
    pub compare: bool,
}

/// One play of a case.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub passed: bool,
    /// The model server failed (down, timed out): not the case's failure.
    pub error: bool,
    pub failure: Option<String>,
    /// The intent expected was the intent given (`None`: the case expects none).
    pub intent_right: Option<bool>,
    pub surprise: bool,
    pub tokens: u64,
    pub latencies_ms: Vec<u64>,
}

impl Run {
    fn of(case: &Case, report: &TranscriptReport) -> Self {
        // A model call that failed (down, timed out, cut by the turn's deadline) is the server's, not
        // the case's.
        let model_error = report.turns.iter().flat_map(|t| &t.events).find_map(|e| match e {
            vt_engine::TurnEvent::ModelCall(call) => call.error.clone(),
            _ => None,
        });
        let error = model_error.is_some();
        let intent_right = case
            .transcript
            .turns
            .iter()
            .zip(&report.turns)
            .filter_map(|(t, r)| {
                t.expect
                    .intent
                    .as_ref()
                    .map(|want| r.intent.as_ref() == Some(want))
            })
            .reduce(|a, b| a && b);
        Self {
            passed: report.passed && !error,
            error,
            // A case the server failed says why (its reason was empty before).
            failure: report
                .failure
                .as_ref()
                .map(|m| m.headline())
                .or_else(|| model_error.map(|e| format!("o servidor do modelo falhou: {e}")))
                .map(|m| mask_cards_in(&m)),
            intent_right,
            surprise: report.charges > case.allowed,
            tokens: report
                .turns
                .iter()
                .map(|t| t.tokens_input + t.tokens_output)
                .sum(),
            latencies_ms: report.turns.iter().map(|t| t.latency_ms).collect(),
        }
    }
}

/// A case's plays, with and (with `--compare`) without the model.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub name: String,
    pub class: String,
    pub file: String,
    pub with_params: bool,
    pub runs: Vec<Run>,
    pub without_model: Option<Run>,
}

impl CaseResult {
    /// Passed every play (τ-bench's pass^k).
    pub(crate) fn pass_all(&self) -> bool {
        self.runs.iter().all(|r| r.passed)
    }

    /// Passed in some plays and failed in others.
    pub(crate) fn flips(&self) -> bool {
        self.runs.iter().any(|r| r.passed) && !self.pass_all()
    }

    pub fn error(&self) -> bool {
        self.runs.iter().any(|r| r.error)
    }

    /// Answered well without a model, and not in every play with it.
    pub fn worse(&self) -> bool {
        self.without_model.as_ref().is_some_and(|r| r.passed) && !self.pass_all() && !self.error()
    }

    pub(crate) fn surprise(&self) -> bool {
        self.runs.iter().any(|r| r.surprise) || self.without_model.as_ref().is_some_and(|r| r.surprise)
    }
}

/// Everything `eval` found.
#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    pub model: String,
    pub repeat: usize,
    pub cases: Vec<CaseResult>,
    /// What the model's tokens cost in reais (`None`: `[custos]` has no price for it).
    pub cost_brl: Option<String>,
}

/// Plays every case.
pub async fn run(cases: &[Case], options: &EvalOptions, progress: impl Fn(usize, usize)) -> EvalReport {
    let mut results = Vec::with_capacity(cases.len());
    for (i, case) in cases.iter().enumerate() {
        progress(i, cases.len());
        let mut runs = Vec::with_capacity(options.repeat);
        for _ in 0..options.repeat.max(1) {
            runs.push(play(case, options, options.model.clone()).await);
        }
        let without_model = if options.compare {
            Some(play(case, options, ModelChoice::None).await)
        } else {
            None
        };
        results.push(CaseResult {
            name: mask_cards_in(&case.transcript.name),
            class: case.class(),
            file: case.file.display().to_string(),
            with_params: case.transcript.turns.iter().any(|t| {
                t.expect
                    .tool_calls
                    .as_ref()
                    .is_some_and(|c| c.iter().any(|c| c.arguments_exact.is_some()))
            }),
            runs,
            without_model,
        });
    }
    progress(cases.len(), cases.len());
    let tokens: u64 = results.iter().flat_map(|c| &c.runs).map(|r| r.tokens).sum();
    let used = crate::costs::Used {
        calls: vec![crate::costs::Call::plain(&options.model_name, (tokens, 0))],
        audio: None,
    };
    let cost_brl = if tokens == 0 {
        Some("0,00".into())
    } else {
        options
            .config
            .custos
            .brl(&used)
            .map(|c| format!("{:.4}", c).replace('.', ","))
    };
    EvalReport {
        model: options.model_name.clone(),
        repeat: options.repeat.max(1),
        cases: results,
        cost_brl,
    }
}

async fn play(case: &Case, options: &EvalOptions, model: ModelChoice) -> Run {
    let run = RunOptions {
        config: options.config.clone(),
        record: false,
        record_with: None,
        model: Some(model),
        systems: None,
    };
    let mut transcript = case.transcript.clone();
    // Money never moves unasked, whatever the case says.
    if !transcript.never.contains(&Never::RechargeWithoutConfirmation) {
        transcript.never.push(Never::RechargeWithoutConfirmation);
    }
    let report = run_transcript(&transcript, &case.file, &run).await;
    Run::of(case, &report)
}

/// Figures of a group of cases.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Figures {
    pub cases: usize,
    pub answered_well: usize,
    pub answered_well_without_model: usize,
    pub pass_all: usize,
    pub intent_cases: usize,
    pub intent_right: usize,
    pub params_cases: usize,
    pub params_exact: usize,
    pub surprises: usize,
    pub worse: usize,
    pub errors: usize,
    pub tokens: u64,
    pub p50_ms: u64,
    pub p95_ms: u64,
}

impl Figures {
    fn of<'a>(cases: impl Iterator<Item = &'a CaseResult>) -> Self {
        let mut f = Self::default();
        let mut latencies = Vec::new();
        for c in cases {
            f.cases += 1;
            let first = c.runs.first();
            f.answered_well += usize::from(first.is_some_and(|r| r.passed));
            f.answered_well_without_model += usize::from(c.without_model.as_ref().is_some_and(|r| r.passed));
            f.pass_all += usize::from(c.pass_all());
            if let Some(right) = first.and_then(|r| r.intent_right) {
                f.intent_cases += 1;
                f.intent_right += usize::from(right);
            }
            if c.with_params {
                f.params_cases += 1;
                f.params_exact += usize::from(first.is_some_and(|r| r.passed));
            }
            f.surprises += usize::from(c.surprise());
            f.worse += usize::from(c.worse());
            f.errors += usize::from(c.error());
            for r in &c.runs {
                f.tokens += r.tokens;
                latencies.extend(&r.latencies_ms);
            }
        }
        latencies.sort_unstable();
        let at = |q: f64| {
            latencies
                .get(((latencies.len() as f64 * q).ceil() as usize).saturating_sub(1))
                .copied()
                .unwrap_or(0)
        };
        f.p50_ms = at(0.50);
        f.p95_ms = at(0.95);
        f
    }
}

impl EvalReport {
    pub fn total(&self) -> Figures {
        Figures::of(self.cases.iter())
    }

    /// Figures per class, by class name.
    pub fn by_class(&self) -> BTreeMap<String, Figures> {
        let mut classes: BTreeMap<String, Vec<&CaseResult>> = BTreeMap::new();
        for c in &self.cases {
            // The router's corpus as one class per intent would be a long table: one line for it.
            let class = if c.class.starts_with("roteador/") {
                "roteador (corpus)".to_owned()
            } else {
                c.class.clone()
            };
            classes.entry(class).or_default().push(c);
        }
        classes
            .into_iter()
            .map(|(k, v)| (k, Figures::of(v.into_iter())))
            .collect()
    }

    /// Why this run gives no verdict: how many cases the model server failed, and the first reason.
    pub fn infrastructure_errors(&self) -> Option<String> {
        let failed: Vec<&CaseResult> = self.cases.iter().filter(|c| c.error()).collect();
        let first = failed.first()?;
        let reason = first
            .runs
            .iter()
            .find_map(|r| r.failure.clone().filter(|_| r.error))
            .unwrap_or_else(|| "o servidor do modelo falhou".into());
        Some(format!(
            "sem veredito: o servidor do modelo falhou em {} de {} casos (o primeiro, {}: {reason}); nenhuma nota foi dada",
            failed.len(),
            self.cases.len(),
            first.name
        ))
    }

    /// 0 when nothing went worse and no money moved unasked; 1 otherwise; 2 when the model server
    /// failed a case (an infrastructure error, not a verdict).
    pub fn exit_code(&self) -> u8 {
        let t = self.total();
        if t.surprises > 0 || t.worse > 0 {
            1
        } else if t.errors > 0 {
            2
        } else {
            0
        }
    }

    pub fn json(&self) -> Value {
        json!({
            "model": self.model,
            "repeat": self.repeat,
            "total": self.total(),
            "classes": self.by_class(),
            "cost_brl": self.cost_brl,
            "cases": self.cases,
        })
    }

    /// The table an operator reads.
    pub fn table(&self, compare: bool) -> String {
        let pct = |a: usize, b: usize| {
            if b == 0 {
                "—".to_owned()
            } else {
                format!("{:.0} % ({a}/{b})", a as f64 * 100.0 / b as f64)
            }
        };
        let mut out = format!("modelo: {}   repetições: {}\n\n", self.model, self.repeat);
        out.push_str(&format!(
            "{:<24} {:>6} {:>16} {:>16} {:>16} {:>14} {:>8} {:>8} {:>9} {:>9}\n",
            "classe",
            "casos",
            "bem respondidos",
            "sem modelo",
            "intenção",
            "parâmetros",
            "surpr.$",
            "tokens",
            "p50 ms",
            "p95 ms"
        ));
        let mut rows: Vec<(String, Figures)> = self.by_class().into_iter().collect();
        rows.push(("TOTAL".into(), self.total()));
        for (class, f) in rows {
            out.push_str(&format!(
                "{:<24} {:>6} {:>16} {:>16} {:>16} {:>14} {:>8} {:>8} {:>9} {:>9}\n",
                class,
                f.cases,
                pct(f.answered_well, f.cases),
                if compare {
                    pct(f.answered_well_without_model, f.cases)
                } else {
                    "—".into()
                },
                pct(f.intent_right, f.intent_cases),
                pct(f.params_exact, f.params_cases),
                f.surprises,
                f.tokens,
                f.p50_ms,
                f.p95_ms
            ));
        }
        let t = self.total();
        out.push_str(&format!(
            "\npass^{}: {}   custo: {}   erros de infraestrutura: {}\n",
            self.repeat,
            pct(t.pass_all, t.cases),
            self.cost_brl
                .as_deref()
                .map_or("sem preço em [custos]".to_owned(), |c| format!("BRL {c}")),
            t.errors
        ));
        let failed: Vec<&CaseResult> = self
            .cases
            .iter()
            .filter(|c| !c.pass_all() && !c.worse())
            .collect();
        for c in failed.iter().take(40) {
            let why = c.runs.iter().find_map(|r| r.failure.clone()).unwrap_or_default();
            out.push_str(&format!("não passou: {} — {why}\n", c.name));
        }
        if failed.len() > 40 {
            out.push_str(&format!("… e mais {} (--json tem todos)\n", failed.len() - 40));
        }
        for c in self.cases.iter().filter(|c| c.flips()) {
            out.push_str(&format!("oscila: {}\n", c.name));
        }
        for c in self.cases.iter().filter(|c| c.worse()) {
            let why = c.runs.iter().find_map(|r| r.failure.clone()).unwrap_or_default();
            out.push_str(&format!("PIOR com o modelo: {} — {why}\n", c.name));
        }
        for c in self.cases.iter().filter(|c| c.surprise()) {
            out.push_str(&format!("SURPRESA DE DINHEIRO: {}\n", c.name));
        }
        out
    }
}

/// The default corpus: `eval/` and the router's corpus, found as the other data folders are.
pub(crate) fn default_corpus() -> Vec<PathBuf> {
    let found = |name: &str| {
        let local = PathBuf::from(name);
        if local.exists() {
            local
        } else {
            Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
        }
    };
    vec![found("eval"), found("tests/fixtures/router/corpus.yaml")]
}
