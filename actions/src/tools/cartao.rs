//! Which card a tool means. The model only ever sees masked cards (`****7890`), so when it names one
//! the tool looks the real number up in what the *user* wrote — this turn's message, or the cards the
//! user gave earlier, kept in memory — and never takes digits the model made up to fill a mask.

use serde_json::{Value, json};

use super::pendente::RecargaPendente;
use crate::context::ActionContext;
use crate::response::{ActionResponse, ResponseToUser};
use crate::vt::card::ascii_digits;
use crate::vt::parse::cards;

/// Memory key: the cards the user wrote, most recent last (full numbers: memory is never shown to the
/// model, and the conversation's messages hold them anyway).
pub const MEMORY_CARTOES: &str = "cartoes_informados";
/// How many cards are remembered.
const REMEMBERED: usize = 5;

fn remembered(ctx: &ActionContext) -> Vec<String> {
    ctx.memory
        .get(MEMORY_CARTOES)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The card `raw` stands for: itself when it is written out, else (a masked `****7890`) the one card the
/// user wrote whose last digits match. `None` when no single card matches.
pub fn resolve(ctx: &ActionContext, raw: &str) -> Option<String> {
    if !raw.contains('*') {
        // Written out (valid or not: the card's own parser says what is wrong with it).
        return Some(raw.to_owned());
    }
    let tail: String = ascii_digits(raw.rsplit('*').next().unwrap_or_default())
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    if tail.is_empty() {
        return None;
    }
    let mut candidates = cards(&ctx.user_message);
    candidates.extend(remembered(ctx));
    candidates.extend(RecargaPendente::from_state(ctx).map(|p| p.cartao));
    candidates.sort();
    candidates.dedup();
    let mut matching = candidates.into_iter().filter(|c| c.ends_with(&tail));
    match (matching.next(), matching.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// The answer when the model named a card (masked, or partly) that the user never wrote out.
pub fn ask_full_number(raw: &str) -> ActionResponse {
    let tail: String = ascii_digits(raw)
        .chars()
        .filter(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let which = if tail.is_empty() {
        "qual cartão".to_owned()
    } else {
        format!("o cartão com final {tail}")
    };
    ResponseToUser::new(
        format!("Para continuar, preciso do número completo do cartão de VT ({which}). Pode me enviar?"),
        "O número completo do cartão não está nas mensagens do usuário: nada foi feito. Peça o número ao usuário; nunca o invente.",
    )
    .into()
}

/// The memory value that remembers `card` among the user's cards.
pub fn remember(ctx: &ActionContext, card: &str) -> Value {
    let mut known = remembered(ctx);
    known.retain(|c| c != card);
    known.push(card.to_owned());
    let excess = known.len().saturating_sub(REMEMBERED);
    known.drain(..excess);
    json!(known)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn ctx(user_message: &str, remembered: &[&str]) -> ActionContext {
        let mut ctx = ActionContext::new("vt", "c1", Utc::now());
        ctx.user_message = user_message.into();
        std::sync::Arc::make_mut(&mut ctx.memory).insert(MEMORY_CARTOES.into(), json!(remembered));
        ctx
    }

    #[test]
    fn a_masked_card_is_taken_from_what_the_user_wrote() {
        let c = ctx("recarrega o cartão 1234567890", &[]);
        assert_eq!(resolve(&c, "****7890").as_deref(), Some("1234567890"));
        let c = ctx("e o outro?", &["1111111111", "2345678901"]);
        assert_eq!(resolve(&c, "****8901").as_deref(), Some("2345678901"));
        assert_eq!(resolve(&c, "****0000"), None, "no card of the user ends so");
        let c = ctx("", &["1111117890", "2222227890"]);
        assert_eq!(resolve(&c, "****7890"), None, "ambiguous: ask, never guess");
        assert_eq!(
            resolve(&c, "1234 5678-90").as_deref(),
            Some("1234 5678-90"),
            "written out: as is"
        );
        assert_eq!(resolve(&c, "****"), None);
    }

    #[test]
    fn memory_keeps_the_last_cards() {
        let mut c = ctx("", &[]);
        for card in ["1", "2", "3", "4", "5", "6", "2"] {
            let v = remember(&c, card);
            std::sync::Arc::make_mut(&mut c.memory).insert(MEMORY_CARTOES.into(), v);
        }
        assert_eq!(c.memory[MEMORY_CARTOES], json!(["3", "4", "5", "6", "2"]));
    }
}
