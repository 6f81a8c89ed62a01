//! What a conversation *did*, classed: the verdict of a replay is on effects, never on words.
//! *Mutating* effects (a recharge sent, a notice sent, a Pix charge issued, a case opened) must match
//! the reference exactly and in order; *read* effects (a balance read, a FAQ lookup) may differ and are
//! reported; the *words* are a similarity figure and a diff.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use vt_engine::TurnEvent;

/// The evaluator's version: a baseline approved under another one is not compared, it fails the run.
/// Raise it whenever what counts as an effect, or how one is written, changes.
/// 2: a charge is named by its means (`pix`, `cartao`), each turn's charges after its other effects,
/// then what its payments did (the recharge sent, a payment returned, a case).
pub(crate) const EVALUATOR_VERSION: &str = "2";

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
    /// `recarga`, `notificacao`, `pix`, `cartao` (a card checkout), `devolucao`, `caso`, `saldo`,
    /// `faq`.
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

    /// One line, as a diff shows it: a sentence in pt-BR, money in reais.
    pub(crate) fn line(&self) -> String {
        let card = self.detail["cartao"].as_str().filter(|c| !c.is_empty());
        let on_card = card.map(|c| format!(" no cartão {c}")).unwrap_or_default();
        let valor = amount_of(&self.detail["valor"]).map(reais_for_people);
        let de = valor.as_deref().map(|v| format!(" de {v}")).unwrap_or_default();
        match self.kind.as_str() {
            "recarga" => {
                let meio = match self.detail["meio"].as_str() {
                    Some("cartao_credito") => " (cartão de crédito)".to_owned(),
                    Some(m) if !m.is_empty() => format!(" ({m})"),
                    _ => String::new(),
                };
                format!("recarga{de} enviada{on_card}{meio}")
            }
            "notificacao" => format!("aviso enviado ao titular{on_card}"),
            "pix" => format!("cobrança Pix{de} emitida"),
            "devolucao" => format!("pagamento{de} devolvido"),
            "cartao" => format!("link de pagamento com cartão{de} emitido"),
            "caso" => "atendimento aberto para uma pessoa".to_owned(),
            "bloqueio" => format!("cartão bloqueado{on_card}"),
            "desbloqueio" => format!("cartão desbloqueado{on_card}"),
            "segunda_via" => format!("segunda via pedida{on_card}"),
            "saldo" => format!("saldo consultado{on_card}"),
            "faq" => "resposta buscada nas perguntas frequentes".to_owned(),
            other => format!("{other}{on_card}"),
        }
    }
}

/// An effect's amount, as recorded (text or number).
fn amount_of(v: &Value) -> Option<rust_decimal::Decimal> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.to_string().parse().ok(),
        _ => None,
    }
}

/// `R$ 1.234,50`, as people in Brazil read it.
fn reais_for_people(amount: rust_decimal::Decimal) -> String {
    vt_domain::vt::money_for_people("BRL", amount, vt_domain::vt::Idioma::PtBr)
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
        .map(|c| vt_domain::vt::card::mask_card(&c))
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
                    // The card desk's POSTs change a card (a block, a second copy); its holder's
                    // check changes nothing.
                    ("saldo", "POST") if !x.path.ends_with("/verificacao") => {
                        let kind = x.path.rsplit('/').next().unwrap_or("cartao").replace('-', "_");
                        out.push(Effect::new(Class::Mutating, &kind, json!({"cartao": card})));
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

/// A charge a conversation issued, named by how it is paid: `pix` (a code), `cartao` (a card checkout).
pub(crate) fn charge(meio: &str, amount: &str) -> Effect {
    let kind = match meio {
        "cartao_credito" => "cartao",
        other => other,
    };
    Effect::new(Class::Mutating, kind, json!({"valor": amount}))
}

/// What a charge's payment did after the conversation, in order: what the run that sent its recharge
/// did (`events`), the payment returned (`devolucao`), and — when a paid recharge failed — the case
/// a person gets (`caso`).
pub(crate) fn of_payment(charge: &vt_store::PixCharge, events: &[TurnEvent]) -> Vec<Effect> {
    let mut out = of_events(events);
    if charge.refund.is_some() {
        out.push(Effect::new(
            Class::Mutating,
            "devolucao",
            json!({"valor": charge.amount.to_string()}),
        ));
        if charge.execucao_id.is_some() {
            out.push(Effect::new(Class::Mutating, "caso", json!({})));
        }
    }
    out
}

/// The reais a list of effects moved (recharges sent and charges issued), as people read it
/// (`R$ 20,00`).
pub(crate) fn reais(effects: &[Effect]) -> String {
    let total: rust_decimal::Decimal = effects
        .iter()
        .filter(|e| e.class == Class::Mutating && matches!(e.kind.as_str(), "recarga" | "pix" | "cartao"))
        .filter_map(|e| amount_of(&e.detail["valor"]))
        .sum();
    reais_for_people(total)
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
    fn an_effect_reads_as_a_sentence_in_reais_and_a_card_payment_is_no_pix() {
        assert_eq!(
            recarga(60.0).line(),
            "recarga de R$ 60,00 enviada no cartão ****7890"
        );
        assert_eq!(charge("pix", "20.0").line(), "cobrança Pix de R$ 20,00 emitida");
        let card = charge("cartao_credito", "1250.5");
        assert_eq!(card.kind, "cartao");
        assert_eq!(card.line(), "link de pagamento com cartão de R$ 1.250,50 emitido");
        assert_ne!(
            charge("pix", "20"),
            charge("cartao_credito", "20"),
            "not the same effect"
        );
        assert_eq!(reais(&[recarga(60.0), card]), "R$ 1.310,50");
        assert_eq!(reais(&[]), "R$ 0,00");
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
