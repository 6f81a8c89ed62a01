//! Level 1's reading of what a message asks: an intent classifier trained at build time from the
//! corpus of how card holders write (`corpus/intencoes/treino/`, by `build/intents.rs`), run here in
//! microseconds with zero tokens. It names an intent and how sure it is; the router acts on a sure
//! one, asks between two close ones, and never lets it near money: cards, amounts and the yes are
//! parsed and checked by code, whatever the classifier says.

#[cfg(test)]
pub(crate) mod augment;
pub(crate) mod features;
pub(crate) mod files;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;

/// The model the build trained, embedded.
static MODEL_BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/intencoes.bin"));

static MODEL: LazyLock<Model> =
    LazyLock::new(|| Model::read(MODEL_BYTES).expect("the build wrote the model"));

/// The classifier's reading of a message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reading {
    /// The likeliest intent (`consultar_saldo`, `faq/catraca`, …) and its probability.
    pub(crate) best: (&'static str, f32),
    /// The next one.
    pub(crate) second: (&'static str, f32),
}

impl Reading {
    /// Sure enough to act on.
    pub(crate) fn sure(&self) -> Option<&'static str> {
        (self.best.1 >= SURE).then_some(self.best.0)
    }

    /// Two intents that together hold most of the probability, neither sure: worth one question.
    pub(crate) fn torn(&self) -> Option<(&'static str, &'static str)> {
        (self.best.1 < SURE && self.best.1 + self.second.1 >= TORN).then_some((self.best.0, self.second.0))
    }
}

/// The probability from which the router acts on the classifier's intent (measured on the held-out
/// split: see BENCHMARKS.md).
const SURE: f32 = 0.55;
/// Two intents whose probabilities sum to this are the options of a clarifying question.
const TORN: f32 = 0.7;

/// Reads `text`.
pub(crate) fn classify(text: &str) -> Reading {
    MODEL.classify(text)
}

/// The classifier's figures on a split of the corpus.
#[derive(Debug, Clone, Default)]
pub struct Evaluation {
    /// Per intent: (read right, messages).
    pub per_intent: BTreeMap<String, (usize, usize)>,
    /// Messages the classifier was sure of, and of those, read right.
    pub sure: usize,
    pub sure_right: usize,
    /// Messages that are no FAQ question and were read as a FAQ entry (sure), and FAQ questions read
    /// as another entry.
    pub faq_false: usize,
    pub not_faq: usize,
    /// What went wrong, one line a message.
    pub misses: Vec<String>,
}

impl Evaluation {
    pub fn messages(&self) -> usize {
        self.per_intent.values().map(|(_, n)| n).sum()
    }

    pub fn right(&self) -> usize {
        self.per_intent.values().map(|(r, _)| r).sum()
    }

    pub fn accuracy(&self) -> f64 {
        self.right() as f64 / self.messages().max(1) as f64
    }

    /// `intent accuracy 96.1 % (174/181); sure on 160, right on 158; FAQ false matches 1/120`.
    pub fn summary(&self) -> String {
        format!(
            "intent accuracy {:.1} % ({}/{}); sure on {}, right on {}; FAQ false matches {}/{}",
            self.accuracy() * 100.0,
            self.right(),
            self.messages(),
            self.sure,
            self.sure_right,
            self.faq_false,
            self.not_faq
        )
    }
}

/// Scores the classifier on a split of the corpus (`corpus/intencoes/avaliacao`).
pub fn evaluate(dir: &Path) -> Evaluation {
    let mut e = Evaluation::default();
    for (label, text) in files::read(dir) {
        let r = classify(&text);
        let right = r.best.0 == label;
        let slot = e.per_intent.entry(label.clone()).or_default();
        slot.1 += 1;
        if right {
            slot.0 += 1;
        } else {
            e.misses.push(format!(
                "{text:?}: want {label}, got {} {:.2} / {} {:.2}",
                r.best.0, r.best.1, r.second.0, r.second.1
            ));
        }
        if r.sure().is_some() {
            e.sure += 1;
            e.sure_right += usize::from(right);
            let faq_read = r.best.0.starts_with("faq/");
            e.faq_false += usize::from(faq_read && !right);
        }
        e.not_faq += usize::from(!label.starts_with("faq/"));
    }
    e
}

struct Model {
    labels: Vec<String>,
    buckets: Vec<u32>,
    scale: f32,
    bias: Vec<f32>,
    weights: Vec<i8>,
}

impl Model {
    fn read(bytes: &[u8]) -> Option<Self> {
        let mut r = Reader(bytes);
        if r.take(4)? != b"VTI1" {
            return None;
        }
        let classes = r.u32()? as usize;
        let mut labels = Vec::with_capacity(classes);
        for _ in 0..classes {
            let len = u16::from_le_bytes(r.take(2)?.try_into().ok()?) as usize;
            labels.push(String::from_utf8(r.take(len)?.to_vec()).ok()?);
        }
        let n = r.u32()? as usize;
        let buckets = (0..n).map(|_| r.u32()).collect::<Option<Vec<_>>>()?;
        let scale = r.f32()?;
        let bias = (0..classes).map(|_| r.f32()).collect::<Option<Vec<_>>>()?;
        let weights = r.take(n * classes)?.iter().map(|b| *b as i8).collect();
        Some(Self {
            labels,
            buckets,
            scale,
            bias,
            weights,
        })
    }

    fn classify(&'static self, text: &str) -> Reading {
        let classes = self.labels.len();
        let feats = features::features(text);
        let value = self.scale / (feats.len().max(1) as f32).sqrt();
        let mut p = self.bias.clone();
        for f in feats {
            if let Ok(i) = self.buckets.binary_search(&f) {
                for (pc, w) in p.iter_mut().zip(&self.weights[i * classes..(i + 1) * classes]) {
                    *pc += f32::from(*w) * value;
                }
            }
        }
        let max = p.iter().copied().fold(f32::MIN, f32::max);
        let sum: f32 = p
            .iter_mut()
            .map(|x| {
                *x = (*x - max).exp();
                *x
            })
            .sum();
        let mut order: Vec<usize> = (0..classes).collect();
        order.sort_by(|a, b| p[*b].total_cmp(&p[*a]));
        let at = |k: usize| {
            let i = order.get(k).copied().unwrap_or(0);
            (
                self.labels.get(i).map_or("", String::as_str),
                p.get(i).copied().unwrap_or(0.0) / sum,
            )
        };
        Reading {
            best: at(0),
            second: at(1),
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn f32(&mut self) -> Option<f32> {
        Some(f32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_writes_the_same_variants_every_time_each_another_way_to_type() {
        let text = "quero recarregar meu cartão por favor";
        let a = augment::variants(text, 42);
        assert_eq!(
            a,
            augment::variants(text, 42),
            "seeded: the same corpus every build"
        );
        assert!(a.len() >= 2, "{a:?}");
        assert!(a.iter().all(|v| v != text), "{a:?}");
        assert!(
            a.iter().any(|v| v.starts_with("qro ")),
            "\"quero\" as people shorten it: {a:?}"
        );
    }

    #[test]
    fn a_card_in_any_separators_and_an_amount_are_read_by_their_shape() {
        for typed in ["1234 5678 90", "1234_5678/90", "1234.5678-90"] {
            let words = features::fold(&format!("saldo {typed}"));
            assert_eq!(words, ["saldo", "#cartao"], "{typed}");
        }
        assert_eq!(features::fold("Põe R$ 25,50 já!"), ["poe", "r", "#n3", "ja"]);
        assert_eq!(features::features("saldo"), features::features("SALDO"));
    }

    /// `avaliacao/` is the split the training is checked against while the corpus grows; `reserva/`
    /// was written before the corpus grew and is only ever reported.
    #[test]
    fn the_held_out_splits_are_read_as_people_meant_them() {
        for split in ["avaliacao", "reserva"] {
            held_out(split);
        }
    }

    fn held_out(split: &str) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("corpus/intencoes")
            .join(split);
        let e = evaluate(&dir);
        for m in &e.misses {
            eprintln!("{m}");
        }
        for (intent, (right, n)) in &e.per_intent {
            eprintln!("{intent}: {right}/{n}");
        }
        eprintln!("{split}: {}", e.summary());
        assert!(e.accuracy() >= 0.95, "{}", e.summary());
    }
}
