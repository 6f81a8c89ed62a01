//! FAQ entries suggested from what support agents answered by hand (issue "Step 38"), at zero tokens:
//! the questions card holders asked and the agents' answers, grouped by what was asked — TF-IDF over
//! the FAQ's own Portuguese stems ([`crate::faq`]), the question's and the answer's words alike — so the same
//! question in different words becomes one suggestion with how many cases asked it, its phrasings and
//! the answers given. A group that an existing entry already answers is attached to that entry.
//!
//! Grouping is by centroid: each answer joins the closest group (cosine ≥ [`Grouping::threshold`]) or
//! starts one; every answer is placed again against the groups' final centroids, and groups whose
//! centroids are that close merge, so the order answers came in matters little. Answers × groups, then
//! groups² per merge.

use std::collections::{BTreeSet, HashMap};

use crate::faq::{Faq, stems};

/// A question a support agent answered in a closed case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    /// The case it was answered in (a suggestion counts cases, not answers).
    pub case: String,
    /// What the card holder asked (cards masked).
    pub question: String,
    /// What the agent answered.
    pub answer: String,
}

/// How answers are grouped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grouping {
    /// The cosine an answer needs with a group's centroid to join it.
    pub threshold: f32,
    /// How many cases a group needs to be suggested.
    pub min_cases: usize,
    /// What the answer's words weigh beside the question's.
    pub answer_weight: f32,
}

impl Default for Grouping {
    fn default() -> Self {
        Self {
            // Tuned on the even half of `corpus/sugestoes/` (flat from 0.33 to 0.35); the odd half is
            // held out (BENCHMARKS.md).
            threshold: 0.34,
            min_cases: 2,
            answer_weight: 1.0,
        }
    }
}

/// A suggested entry: a group of the same question asked in several cases.
#[derive(Debug, Clone, PartialEq)]
pub struct Suggestion {
    /// Stable while the group holds the same cases' first answer: the decisions are kept under it.
    pub key: String,
    /// Indexes into the answers given to [`suggest`], the most central first.
    pub members: Vec<usize>,
    /// How many distinct cases asked it.
    pub source_count: usize,
    /// The distinct phrasings, the most central first.
    pub questions: Vec<String>,
    /// The distinct answers, the most central first.
    pub answers: Vec<String>,
    /// The group's heaviest words, as its phrasings write them most: keywords to start from.
    pub keywords: Vec<String>,
    /// The FAQ entry (its id) that already answers it, when one clearly does.
    pub covered_by: Option<String>,
}

type Vector = HashMap<String, f32>;

/// Answers assumed beside the desk's own when words are weighed by rarity.
const BACKGROUND: usize = 50;

fn dot(a: &Vector, b: &Vector) -> f32 {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    small
        .iter()
        .filter_map(|(k, v)| large.get(k).map(|w| v * w))
        .sum()
}

fn normalised(mut v: Vector) -> Vector {
    let norm = v.values().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.values_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Each answer as a unit vector: its question's stems weighed by their rarity, its answer's by
/// `answer_weight` as much.
fn vectors(answered: &[Answered], answer_weight: f32) -> Vec<Vector> {
    let docs: Vec<(Vec<String>, Vec<String>)> = answered
        .iter()
        .map(|a| (stems(&a.question), stems(&a.answer)))
        .collect();
    let mut df: HashMap<&str, usize> = HashMap::new();
    for (q, r) in &docs {
        let words: BTreeSet<&str> = q.iter().chain(r).map(String::as_str).collect();
        for w in words {
            *df.entry(w).or_default() += 1;
        }
    }
    // As if among `BACKGROUND` more answers that share none of these words: on a desk of a few cases
    // the words they share still weigh about as much as the rest (plain IDF would all but drop them).
    let n = (docs.len() + BACKGROUND) as f32;
    let idf = |w: &str| (n / (1.0 + df.get(w).copied().unwrap_or(0) as f32)).ln();
    docs.iter()
        .map(|(q, r)| {
            let mut v = Vector::new();
            for w in q {
                *v.entry(w.clone()).or_default() += idf(w);
            }
            for w in r {
                *v.entry(w.clone()).or_default() += answer_weight * idf(w);
            }
            normalised(v)
        })
        .collect()
}

fn centroid(vectors: &[Vector], members: &[usize]) -> Vector {
    let mut c = Vector::new();
    for &m in members {
        for (k, v) in &vectors[m] {
            *c.entry(k.clone()).or_default() += v;
        }
    }
    normalised(c)
}

/// The groups' members: a first pass in order, then every answer placed again against the final
/// centroids.
fn groups(vectors: &[Vector], threshold: f32) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut centroids: Vec<Vector> = Vec::new();
    let closest = |centroids: &[Vector], v: &Vector| {
        centroids
            .iter()
            .enumerate()
            .map(|(g, c)| (g, dot(c, v)))
            .filter(|(_, s)| *s >= threshold)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(g, _)| g)
    };
    for (i, v) in vectors.iter().enumerate() {
        if let Some(g) = closest(&centroids, v) {
            groups[g].push(i);
            centroids[g] = centroid(vectors, &groups[g]);
        } else {
            groups.push(vec![i]);
            centroids.push(v.clone());
        }
    }
    let mut placed: Vec<Vec<usize>> = vec![Vec::new(); centroids.len()];
    let mut alone = Vec::new();
    for (i, v) in vectors.iter().enumerate() {
        match closest(&centroids, v) {
            Some(g) => placed[g].push(i),
            None => alone.push(vec![i]),
        }
    }
    placed.retain(|g| !g.is_empty());
    placed.extend(alone);
    merged(vectors, placed, threshold)
}

/// Groups whose centroids are as close as an answer must be to join one become one, the closest
/// first: a first pass's order may have split one question in two.
fn merged(vectors: &[Vector], mut groups: Vec<Vec<usize>>, threshold: f32) -> Vec<Vec<usize>> {
    let mut centroids: Vec<Vector> = groups.iter().map(|g| centroid(vectors, g)).collect();
    loop {
        let mut best: Option<(usize, usize, f32)> = None;
        for a in 0..groups.len() {
            for b in a + 1..groups.len() {
                let s = dot(&centroids[a], &centroids[b]);
                if s >= threshold && best.is_none_or(|(_, _, t)| s > t) {
                    best = Some((a, b, s));
                }
            }
        }
        let Some((a, b, _)) = best else {
            return groups;
        };
        let moved = groups.swap_remove(b);
        centroids.swap_remove(b);
        groups[a].extend(moved);
        centroids[a] = centroid(vectors, &groups[a]);
    }
}

/// Distinct texts in the order given (compared without case and surrounding spaces).
fn distinct<'a>(texts: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    texts
        .filter(|t| seen.insert(t.trim().to_lowercase()))
        .map(|t| t.trim().to_owned())
        .collect()
}

/// The groups of the same question worth an entry, the most asked first.
pub fn suggest(answered: &[Answered], grouping: Grouping, faq: Option<&Faq>) -> Vec<Suggestion> {
    let vectors = vectors(answered, grouping.answer_weight);
    let mut out: Vec<Suggestion> = groups(&vectors, grouping.threshold)
        .into_iter()
        .filter_map(|mut members| {
            let cases: BTreeSet<&str> = members.iter().map(|&m| answered[m].case.as_str()).collect();
            if cases.len() < grouping.min_cases {
                return None;
            }
            let c = centroid(&vectors, &members);
            members.sort_by(|&a, &b| {
                dot(&vectors[b], &c)
                    .total_cmp(&dot(&vectors[a], &c))
                    .then(a.cmp(&b))
            });
            let questions = distinct(members.iter().map(|&m| answered[m].question.as_str()));
            let covered_by = faq.and_then(|faq| covering_entry(faq, &questions));
            let mut heavy: Vec<(&String, &f32)> = c.iter().collect();
            heavy.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
            let heavy: Vec<&String> = heavy.into_iter().map(|(stem, _)| stem).collect();
            let first = members.iter().min().copied().unwrap_or_default();
            Some(Suggestion {
                key: key_of(&answered[first]),
                source_count: cases.len(),
                answers: distinct(members.iter().map(|&m| answered[m].answer.as_str())),
                keywords: keywords_of(&heavy, &questions),
                questions,
                covered_by,
                members,
            })
        })
        .collect();
    out.sort_by(|a, b| b.source_count.cmp(&a.source_count).then(a.key.cmp(&b.key)));
    out
}

/// The `heavy` stems (heaviest first) as `questions` write them most often — each question's words
/// stemmed once; a stem only an answer uses is left out.
fn keywords_of(heavy: &[&String], questions: &[String]) -> Vec<String> {
    let mut written: HashMap<String, HashMap<String, usize>> = HashMap::new();
    for q in questions {
        for word in q.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            if let Some(stem) = stems(word).into_iter().next() {
                *written
                    .entry(stem)
                    .or_default()
                    .entry(word.to_lowercase())
                    .or_default() += 1;
            }
        }
    }
    heavy
        .iter()
        .filter_map(|stem| {
            let words = written.get(stem.as_str())?;
            words
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                .map(|(w, _)| w.clone())
        })
        .take(6)
        .collect()
}

/// The entry that clearly answers most of the group's phrasings, if one does.
fn covering_entry(faq: &Faq, questions: &[String]) -> Option<String> {
    let mut votes: HashMap<&str, usize> = HashMap::new();
    for q in questions {
        if let Some(e) = faq.clear_match(q) {
            *votes.entry(e.id.as_str()).or_default() += 1;
        }
    }
    votes
        .into_iter()
        .filter(|(_, n)| n * 2 > questions.len())
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
        .map(|(id, _)| id.to_owned())
}

/// A group's key: its earliest answer's case and question, hashed (SHA-256: stable across runs and
/// builds, which std's hasher is not), 16 hex digits.
fn key_of(first: &Answered) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new()
        .chain_update(first.case.as_bytes())
        .chain_update([0])
        .chain_update(first.question.as_bytes())
        .finalize();
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("s{hex}")
}

/// The language a text is written in, by its commonest function words: `pt`, `es`, `en`, or `None`
/// when it holds too few to tell. An entry's answer must be in the FAQ's language (pt).
pub fn language_of(text: &str) -> Option<&'static str> {
    const WORDS: [(&str, &[&str]); 3] = [
        (
            "pt",
            &[
                "o", "a", "os", "as", "de", "do", "da", "que", "não", "nao", "é", "e", "em", "para", "você",
                "voce", "seu", "sua", "um", "uma", "com", "no", "na",
            ],
        ),
        (
            "es",
            &[
                "el", "la", "los", "las", "de", "del", "que", "no", "es", "y", "en", "para", "usted", "su",
                "un", "una", "con", "tu", "puede",
            ],
        ),
        (
            "en",
            &[
                "the", "a", "an", "of", "to", "is", "and", "in", "for", "you", "your", "it", "not", "can",
                "with", "on", "be",
            ],
        ),
    ];
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let score = |list: &[&str]| words.iter().filter(|w| list.contains(&w.as_str())).count();
    let mut scores: Vec<(&str, usize)> = WORDS.iter().map(|(l, list)| (*l, score(list))).collect();
    scores.sort_by_key(|s| std::cmp::Reverse(s.1));
    (scores[0].1 >= 2 && scores[0].1 > scores[1].1).then_some(scores[0].0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(case: &str, question: &str, answer: &str) -> Answered {
        Answered {
            case: case.into(),
            question: question.into(),
            answer: answer.into(),
        }
    }

    #[test]
    fn the_same_question_in_other_words_is_one_suggestion() {
        let answered = [
            a(
                "c1",
                "posso usar o cartão no metrô de outra cidade?",
                "Não, o cartão vale só na sua cidade.",
            ),
            a(
                "c2",
                "meu vt funciona em outra cidade no metro?",
                "O cartão só vale nos ônibus e metrô da sua cidade.",
            ),
            a(
                "c3",
                "da pra usar o bilhete em outra cidade",
                "Não dá: ele vale só na cidade da empresa.",
            ),
            a(
                "c4",
                "quanto tempo demora a segunda via",
                "A segunda via chega em até 10 dias úteis.",
            ),
            a(
                "c5",
                "esqueci a senha do app",
                "Use 'esqueci a senha' na tela de entrada.",
            ),
        ];
        let found = suggest(&answered, Grouping::default(), None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].source_count, 3);
        assert_eq!(found[0].questions.len(), 3);
        assert!(
            found[0].keywords.iter().any(|k| k == "cidade"),
            "{:?}",
            found[0].keywords
        );
    }

    #[test]
    fn one_case_asking_twice_is_no_suggestion() {
        let answered = [
            a(
                "c1",
                "como cancelo a recarga automática?",
                "Pelo menu Recarga automática, em Cancelar.",
            ),
            a(
                "c1",
                "e como cancela a recarga automatica?",
                "No menu Recarga automática, em Cancelar.",
            ),
        ];
        assert!(suggest(&answered, Grouping::default(), None).is_empty());
    }

    #[test]
    fn languages_are_told_apart() {
        assert_eq!(
            language_of("O cartão vale só na sua cidade e não no metrô de outra."),
            Some("pt")
        );
        assert_eq!(
            language_of("The card is valid only in your city and not in the subway."),
            Some("en")
        );
        assert_eq!(
            language_of("La tarjeta vale solo en su ciudad y no en el metro."),
            Some("es")
        );
        assert_eq!(language_of("ok"), None);
    }
}
