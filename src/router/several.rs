//! Several requests in one message ("qual o saldo do 1234567890 e coloca 50 nele no pix"): each part
//! read apart by the classifier, and a balance and a recharge both answered, in one reply, with zero
//! tokens — the balances first, the recharge's question last (a "sim" answers it, and only it).

use vt_domain::vt::parse::{cards, number_words_to_digits};

use super::classifier;
use super::known::{Known, WithParams};
use super::{Read, Route, Router};
use vt_domain::tools::cartao::remembered_in;
use vt_engine::Conversation;

impl Router {
    /// A balance and a recharge asked in one message, each sure in its own part.
    pub(super) fn several(&self, m: &Read<'_>, conv: &Conversation) -> Option<(String, Route)> {
        if m.waiting || !self.active(Known::ConsultarSaldo) || !self.active(Known::PrepararRecarga) {
            return None;
        }
        let parts = clauses(&m.n);
        if parts.len() < 2 {
            return None;
        }
        let sure = |want: &str| {
            parts
                .iter()
                .position(|p| classifier::classify(p).sure() == Some(want))
        };
        let (balance, _) = (sure("consultar_saldo")?, sure("preparar_recarga")?);
        // "meu saldo tá baixo, quero recarregar 40": the balance told as the reason asks for nothing.
        if tells_a_low_balance(&parts[balance]) {
            return None;
        }
        let recharge_text: Vec<&str> = parts
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != balance)
            .map(|(_, p)| p.as_str())
            .collect();
        let recharge_text = recharge_text.join(", ");
        let mut rm = Read::of(&recharge_text, conv, m.model);
        let balance_cards = cards(&parts[balance]);
        // "…e coloca 50 nele": the recharge is on the card the balance named.
        if rm.found.cards.is_empty() && balance_cards.len() == 1 {
            rm.found.cards.clone_from(&balance_cards);
        }
        let then = self.params_route(WithParams::Recarga, &rm, conv);
        let for_balance = if balance_cards.is_empty() {
            recharge_card(&then).map(|c| vec![c]).or_else(|| {
                match remembered_in(&conv.memory).as_slice() {
                    [one] => Some(vec![one.clone()]),
                    _ => None,
                }
            })?
        } else {
            balance_cards
        };
        let route = Route::BalanceFirst {
            cards: for_balance,
            then: Box::new(then),
        };
        Some((Known::PrepararRecarga.key().to_owned(), route))
    }
}

/// "saldo baixo", "acabando", "zerou", "to sem saldo": the balance's state told, not asked for.
fn tells_a_low_balance(part: &str) -> bool {
    part.split_whitespace().any(|w| {
        matches!(
            w,
            "baixo" | "baixinho" | "acabando" | "acabou" | "pouco" | "fraco" | "zerou" | "zerado" | "zerada"
        )
    })
}

/// The card a recharge's route names.
fn recharge_card(route: &Route) -> Option<String> {
    match route {
        Route::Action { arguments, .. } => arguments.get("cartao")?.as_str().map(str::to_owned),
        Route::Ask { awaiting, .. } => awaiting.params.get("cartao")?.as_str().map(str::to_owned),
        _ => None,
    }
}

/// The parts of a message: split at punctuation and at "e", "também", "depois", "aí" between two
/// requests — never inside an amount ("dezessete e cinquenta" is read as 17,50 first, "25,50" and
/// "1.000" stay whole).
pub(super) fn clauses(n: &str) -> Vec<String> {
    let text = number_words_to_digits(n);
    let chars: Vec<char> = text.chars().collect();
    let mut parts = Vec::new();
    let mut current = String::new();
    for (i, c) in chars.iter().enumerate() {
        let next = chars.get(i + 1).copied();
        let within_number =
            i > 0 && chars[i - 1].is_ascii_digit() && next.is_some_and(|n| n.is_ascii_digit());
        if matches!(c, ',' | ';' | '?' | '!' | '.') && !within_number {
            parts.push(std::mem::take(&mut current));
            continue;
        }
        current.push(*c);
    }
    parts.push(current);
    let mut out = Vec::new();
    for part in parts {
        let words: Vec<&str> = part.split_whitespace().collect();
        let mut clause: Vec<&str> = Vec::new();
        for (i, w) in words.iter().enumerate() {
            let joins = matches!(*w, "e" | "tambem" | "depois" | "ai" | "entao");
            let number_follows = words
                .get(i + 1)
                .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()));
            if joins && !number_follows && !clause.is_empty() {
                out.push(clause.join(" "));
                clause.clear();
                continue;
            }
            clause.push(w);
        }
        out.push(clause.join(" "));
    }
    out.retain(|p| p.split_whitespace().count() >= 1);
    out
}
