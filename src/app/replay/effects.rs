//! What a conversation *did*, classed: the verdict of a replay is on effects, never on words.
//! *Mutating* effects (a recharge sent, a notice sent, a Pix charge issued, a case opened) must match
//! the reference exactly and in order; *read* effects (a balance read, a FAQ lookup) may differ and are
//! reported; the *words* are a similarity figure and a diff.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::engine::TurnEvent;

/// The evaluator's version: a baseline approved under another one is not compared, it fails the run.
/// Raise it whenever what counts as an effect, or how one is written, changes.
pub(crate) const EVALUATOR_VERSION: &str = "1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Class {
    Mutating,
    Read,
}

/// One thing a conversation did to the world, with what matters of it (cards masked).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Effect {
    pub class: Class,
    /// `recarga`, `notificacao`, `pix`, `caso`, `saldo`, `faq`.
    pub kind: String,
    pub detail: Value,
}

impl Effect {
    fn new(class: Class, kind: &str, detail: Value) -> Self {
        Self {
            class,
            kind: kind.to_owned(),
            detail,
        }
    }

    /// One line, as a diff shows it.
    pub(crate) fn line(&self) -> String {
        format!("{} {}", self.kind, self.detail)
    }
}

/// The card a request names, masked.
fn masked_card(body: Option<&Value>, path: &str) -> String {
    let from_body = body
        .and_then(|b| b.get("cartao").or_else(|| b.get("numero_cartao")))
        .map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_owned));
    let from_query = path
        .split_once("cartao=")
        .map(|(_, rest)| rest.split('&').next().unwrap_or_default().to_owned());
    from_body
        .or(from_query)
        .map(|c| vt_actions::vt::card::mask_card(&c))
        .unwrap_or_default()
}

/// The effects of one turn's events, in order.
pub(crate) fn of_events(events: &[TurnEvent]) -> Vec<Effect> {
    let mut out = Vec::new();
    for event in events {
        match event {
            TurnEvent::Exchanged(x) => {
                let card = masked_card(x.body.as_ref(), &x.path);
                let field = |k: &str| {
                    x.body
                        .as_ref()
                        .and_then(|b| b.get(k))
                        .cloned()
                        .unwrap_or(Value::Null)
                };
                match (x.system.as_str(), x.method.as_str()) {
                    ("recarga", "POST") => out.push(Effect::new(
                        Class::Mutating,
                        "recarga",
                        json!({"cartao": card, "valor": field("valor"), "meio": field("meio_pagamento")["tipo"].clone()}),
                    )),
                    // A notice's words are words: only whom it went to is the effect.
                    ("notificacao", "POST") => {
                        out.push(Effect::new(Class::Mutating, "notificacao", json!({"cartao": card})));
                    }
                    _ => out.push(Effect::new(Class::Read, &x.system, json!({"cartao": card}))),
                }
            }
            TurnEvent::TransferToHuman(_) => out.push(Effect::new(Class::Mutating, "caso", json!({}))),
            TurnEvent::ToolCall { name, .. } if name == "buscar_faq" => {
                out.push(Effect::new(Class::Read, "faq", json!({})));
            }
            TurnEvent::Routed { intent, .. } if intent.starts_with("faq") => {
                out.push(Effect::new(Class::Read, "faq", json!({"entrada": intent})));
            }
            _ => {}
        }
    }
    out
}

/// A Pix charge (or a card checkout) a conversation issued.
pub(crate) fn charge(meio: &str, amount: &str) -> Effect {
    Effect::new(Class::Mutating, "pix", json!({"meio": meio, "valor": amount}))
}

/// The reais a list of effects moved (recharges sent and charges issued), as text.
pub(crate) fn reais(effects: &[Effect]) -> String {
    let total: rust_decimal::Decimal = effects
        .iter()
        .filter(|e| e.class == Class::Mutating && (e.kind == "recarga" || e.kind == "pix"))
        .filter_map(|e| match &e.detail["valor"] {
            Value::String(s) => s.parse::<rust_decimal::Decimal>().ok(),
            Value::Number(n) => n.to_string().parse::<rust_decimal::Decimal>().ok(),
            _ => None,
        })
        .sum();
    format!("{:.2}", total)
}

/// The mutating effects, in order.
pub(crate) fn mutating(effects: &[Effect]) -> Vec<&Effect> {
    effects.iter().filter(|e| e.class == Class::Mutating).collect()
}

/// Where two lists of mutating effects part: the lines side by side from the first difference, or
/// nothing when they match.
pub(crate) fn diff(reference: &[Effect], candidate: &[Effect]) -> Option<Vec<(String, String)>> {
    let (a, b) = (mutating(reference), mutating(candidate));
    let first = a
        .iter()
        .zip(&b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    if a.len() == b.len() && first == a.len() {
        return None;
    }
    let rows = a.len().max(b.len());
    Some(
        (first..rows)
            .map(|i| {
                (
                    a.get(i).map_or_else(|| "—".to_owned(), |e| e.line()),
                    b.get(i).map_or_else(|| "—".to_owned(), |e| e.line()),
                )
            })
            .collect(),
    )
}

/// A Pix code (a BR Code: `000201…6304` and its CRC) or a case's protocol number: issued anew by
/// every run, never words the candidate chose.
static ISSUED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"000201\S*6304[0-9A-F]{4}|\b\d{8}-\d{6}\b").expect("issued regex")
});

/// A reply's words: a payment code, a protocol number and a QR code's block art stand as one word.
fn words_of(text: &str) -> String {
    let text = ISSUED.replace_all(text, "<emitido>");
    text.lines()
        .filter(|l| !l.chars().any(|c| matches!(c, '█' | '▀' | '▄')))
        .collect::<Vec<_>>()
        .join("\n")
}

/// How alike two replies are, 0 to 1 (words, in order).
pub(crate) fn similarity(a: &str, b: &str) -> f64 {
    let (a, b) = (words_of(a), words_of(b));
    if a == b {
        return 1.0;
    }
    f64::from(similar::TextDiff::from_words(&a, &b).ratio())
}

/// A unified diff of two replies' words, or nothing when they are the same.
pub(crate) fn words_diff(a: &str, b: &str) -> Option<String> {
    let (a, b) = (words_of(a), words_of(b));
    (a != b).then(|| {
        similar::TextDiff::from_lines(&a, &b)
            .unified_diff()
            .header("gravado", "candidato")
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recarga(valor: f64) -> Effect {
        Effect::new(
            Class::Mutating,
            "recarga",
            json!({"cartao": "****7890", "valor": valor}),
        )
    }

    #[test]
    fn reads_may_differ_mutations_may_not() {
        let read = Effect::new(Class::Read, "saldo", json!({"cartao": "****7890"}));
        assert_eq!(diff(&[read.clone(), recarga(60.0)], &[recarga(60.0)]), None);
        let parted = diff(&[recarga(60.0)], &[recarga(40.0)]).expect("another value");
        assert_eq!(parted.len(), 1);
        assert!(
            parted[0].0.contains("60") && parted[0].1.contains("40"),
            "{parted:?}"
        );
        assert_eq!(diff(&[recarga(60.0)], &[]).expect("missing")[0].1, "—");
    }

    #[test]
    fn words_are_a_figure_and_a_diff() {
        assert!((similarity("o saldo é R$ 10", "o saldo é R$ 10") - 1.0).abs() < f64::EPSILON);
        let s = similarity("Seu saldo é R$ 10,00.", "O saldo do seu cartão é R$ 10,00.");
        assert!(s > 0.3 && s < 1.0, "{s}");
        assert!(words_diff("a", "b").expect("differs").contains("+b"));
        let code = |txid: &str| {
            format!(
                "Pague:\n00020101021226790014br.gov.bcb.pix{txid}6304AB12\n█▀▄\nProtocolo 20261122-00000{}",
                txid.len()
            )
        };
        assert_eq!(
            words_diff(&code("vt1"), &code("vt2")),
            None,
            "a new code is no new words"
        );
    }
}
