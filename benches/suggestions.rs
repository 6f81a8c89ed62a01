//! FAQ suggestions from agents' answers (reported, not asserted): the synthetic desk of
//! `corpus/sugestoes/temas.yaml` — themes (the same question in ten phrasings, with the answers agents
//! gave) and one-off questions — made into closed cases as people write (greetings, no accents and
//! lower case, no question mark: seeded), grouped at zero tokens by `vt_domain::suggest`. Precision
//! and recall over pairs of cases (two cases in one suggestion that ask the same thing, out of all
//! such pairs suggested / planted), the themes found (a suggestion holding at least half of a theme's
//! cases, most of them that theme's), and the time per case.
//!
//! The themes split in halves: even ones tune the threshold, odd ones are held out; the threshold the
//! product ships is scored on both and on the whole desk.
//!
//! `cargo bench --bench suggestions`
#![allow(clippy::disallowed_methods, clippy::cast_precision_loss)] // a report: JSON and ratios freely

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use serde::Deserialize;
use vt_domain::suggest::{Answered, Grouping, suggest};

#[derive(Deserialize)]
struct Desk {
    temas: Vec<Theme>,
    avulsas: Vec<OneOff>,
}

#[derive(Deserialize)]
struct Theme {
    id: String,
    perguntas: Vec<String>,
    respostas: Vec<String>,
}

#[derive(Deserialize)]
struct OneOff {
    pergunta: String,
    resposta: String,
}

/// A small seeded generator: the same desk on every run.
struct Seed(u64);

impl Seed {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn pick<'a>(&mut self, list: &[&'a str]) -> &'a str {
        list[usize::try_from(self.next()).unwrap_or_default() % list.len()]
    }

    fn coin(&mut self) -> bool {
        self.next().is_multiple_of(2)
    }
}

/// A question as someone types it in a chat.
fn as_typed(seed: &mut Seed, question: &str) -> String {
    let mut q = format!(
        "{}{question}{}",
        seed.pick(&["", "", "boa tarde, ", "oi, ", "bom dia! ", "olá, "]),
        seed.pick(&["", "", "", " obrigado", " por favor", " é urgente"])
    );
    // No accents and all lower case, as `normalize` writes it (what the readers of level 1 see).
    if seed.coin() {
        q = vt_domain::vt::parse::normalize(&q);
    }
    if seed.coin() {
        q = q.replace('?', "");
    }
    q
}

/// The closed cases of `themes` and `one_offs`, each with its theme (`None`: asked once).
fn cases(themes: &[&Theme], one_offs: &[&OneOff], seed: &mut Seed) -> (Vec<Answered>, Vec<Option<String>>) {
    let mut answered = Vec::new();
    let mut truth = Vec::new();
    for t in themes {
        for (i, q) in t.perguntas.iter().enumerate() {
            answered.push(Answered {
                case: format!("{}-{i}", t.id),
                question: as_typed(seed, q),
                answer: t.respostas[i % t.respostas.len()].clone(),
            });
            truth.push(Some(t.id.clone()));
        }
    }
    for (i, o) in one_offs.iter().enumerate() {
        answered.push(Answered {
            case: format!("avulsa-{i}"),
            question: as_typed(seed, &o.pergunta),
            answer: o.resposta.clone(),
        });
        truth.push(None);
    }
    // Cases come in the order they closed, not by theme.
    let keys: Vec<u64> = (0..answered.len()).map(|_| seed.next()).collect();
    let mut order: Vec<usize> = (0..answered.len()).collect();
    order.sort_by_key(|&i| keys[i]);
    (
        order.iter().map(|&i| answered[i].clone()).collect(),
        order.iter().map(|&i| truth[i].clone()).collect(),
    )
}

struct Score {
    precision: f64,
    recall: f64,
    found: usize,
    themes: usize,
    suggestions: usize,
    micros_per_case: f64,
}

fn score(answered: &[Answered], truth: &[Option<String>], grouping: Grouping) -> Score {
    let started = Instant::now();
    let found = suggest(answered, grouping, None);
    let micros_per_case = started.elapsed().as_secs_f64() * 1e6 / answered.len() as f64;
    let pairs = |members: &[usize]| -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (k, &a) in members.iter().enumerate() {
            for &b in &members[k + 1..] {
                out.push((a.min(b), a.max(b)));
            }
        }
        out
    };
    let suggested: BTreeSet<(usize, usize)> = found.iter().flat_map(|s| pairs(&s.members)).collect();
    let mut by_theme: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, t) in truth.iter().enumerate() {
        if let Some(t) = t {
            by_theme.entry(t).or_default().push(i);
        }
    }
    let planted: BTreeSet<(usize, usize)> = by_theme.values().flat_map(|m| pairs(m)).collect();
    let right = suggested.intersection(&planted).count() as f64;
    let themes_found = by_theme
        .iter()
        .filter(|(theme, members)| {
            found.iter().any(|s| {
                let of_theme = s
                    .members
                    .iter()
                    .filter(|&&m| truth[m].as_deref() == Some(**theme))
                    .count();
                of_theme * 2 >= members.len() && of_theme * 2 > s.members.len()
            })
        })
        .count();
    Score {
        precision: if suggested.is_empty() {
            1.0
        } else {
            right / suggested.len() as f64
        },
        recall: right / planted.len().max(1) as f64,
        found: themes_found,
        themes: by_theme.len(),
        suggestions: found.len(),
        micros_per_case,
    }
}

fn line(name: &str, n: usize, threshold: f32, s: &Score) {
    println!(
        "{name:<12} {n:>5} {threshold:>9.2} {:>9.3} {:>7.3} {:>6}/{:<3} {:>11} {:>12.1}",
        s.precision, s.recall, s.found, s.themes, s.suggestions, s.micros_per_case
    );
}

fn main() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/sugestoes/temas.yaml");
    let desk: Desk =
        serde_yaml::from_str(&std::fs::read_to_string(path).expect("corpus")).expect("corpus yaml");
    let half = |keep: usize| -> (Vec<&Theme>, Vec<&OneOff>) {
        (
            desk.temas
                .iter()
                .enumerate()
                .filter(|(i, _)| i % 2 == keep)
                .map(|(_, t)| t)
                .collect(),
            desk.avulsas
                .iter()
                .enumerate()
                .filter(|(i, _)| i % 2 == keep)
                .map(|(_, o)| o)
                .collect(),
        )
    };
    let shipped = Grouping::default();
    println!("set           cases threshold precision  recall  themes found suggestions  µs per case");
    let (themes, one_offs) = half(0);
    let (tune, tune_truth) = cases(&themes, &one_offs, &mut Seed(7));
    for threshold in [0.20, 0.25, 0.30, 0.35, 0.40, 0.50] {
        let grouping = Grouping { threshold, ..shipped };
        line(
            "tuning",
            tune.len(),
            threshold,
            &score(&tune, &tune_truth, grouping),
        );
    }
    let (themes, one_offs) = half(1);
    let (held, held_truth) = cases(&themes, &one_offs, &mut Seed(11));
    line(
        "held out",
        held.len(),
        shipped.threshold,
        &score(&held, &held_truth, shipped),
    );
    let all_themes: Vec<&Theme> = desk.temas.iter().collect();
    let all_one_offs: Vec<&OneOff> = desk.avulsas.iter().collect();
    let (all, all_truth) = cases(&all_themes, &all_one_offs, &mut Seed(13));
    line(
        "whole desk",
        all.len(),
        shipped.threshold,
        &score(&all, &all_truth, shipped),
    );
}
