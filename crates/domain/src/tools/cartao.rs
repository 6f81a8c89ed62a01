//! Which card a tool means. The model only ever sees masked cards (`****7890`), so when it names one
//! the tool looks the real number up in what the *user* wrote — this turn's message, or the cards the
//! user gave earlier, kept in memory — and never takes digits the model made up to fill a mask, nor a
//! full number the user never gave.

use serde_json::{Map, Value, json};

use super::pendente::RecargaPendente;
use crate::vt::card::ascii_digits;
use crate::vt::parse::cards;
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, ResponseToAgent, ResponseToUser};

/// Memory key: the cards the user wrote, most recent last (full numbers: memory is never shown to the
/// model, and the conversation's messages hold them anyway).
pub const MEMORY_CARTOES: &str = "cartoes_informados";
/// State key: the cards an answer of ours offered to choose from (a photo's, or the remembered ones
/// when a request named none), until the next turn. Not the user's yet: they become so when chosen.
pub const STATE_OFERECIDOS: &str = "cartoes_oferecidos";
/// State key: the cards the conversation had on record before the message being answered, by their
/// blind index (set as each message arrives, before its own cards are remembered). A block or a
/// second copy is allowed for these alone without the holder's check: a number typed just now is no
/// proof of holding the card.
pub const STATE_ANTES_DA_MENSAGEM: &str = "cartoes_antes_da_mensagem";
/// How many cards are remembered.
const REMEMBERED: usize = 5;

fn remembered(ctx: &ActionContext) -> Vec<String> {
    remembered_in(&ctx.memory)
}

/// The cards the user gave in this conversation (or an earlier one of theirs), oldest first.
pub fn remembered_in(memory: &Map<String, Value>) -> Vec<String> {
    memory
        .get(MEMORY_CARTOES)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The cards this conversation's user gave: in this turn's message, remembered from earlier ones, and
/// the pending recharge's. The only cards a tool may reach: a model (or an instruction injected into
/// what it reads) never reaches one the user did not give.
fn users_cards(ctx: &ActionContext) -> Vec<String> {
    let mut known = cards(&ctx.user_message);
    known.extend(remembered(ctx));
    known.extend(RecargaPendente::from_state(ctx).map(|p| p.cartao));
    known.sort();
    known.dedup();
    known
}

/// The card `raw` (the model's argument) stands for, among the user's own cards: the one written out
/// when the user gave it, else (a masked `****7890`) the one card whose last digits match. Text the
/// user wrote as it is that is no card at all (`98765432O10`) comes back as it is, for the card's
/// parser to say what is wrong with it. Otherwise the answer the tool gives instead: a number the user
/// never gave is refused to the model (it must ask the user, never pick a card), a mask no single card
/// matches asks the user for the full number.
pub fn resolve(ctx: &ActionContext, raw: &str) -> Result<String, Box<ActionResponse>> {
    if !raw.contains('*') {
        let known = users_cards(ctx);
        return match cards(raw).as_slice() {
            [one] if known.contains(one) => Ok(raw.to_owned()),
            [] if !raw.trim().is_empty() && ctx.user_message.contains(raw.trim()) => Ok(raw.to_owned()),
            [] => Err(Box::new(ask_full_number(raw))),
            _ => Err(Box::new(not_given())),
        };
    }
    lookup_masked(ctx, raw).ok_or_else(|| Box::new(ask_full_number(raw)))
}

/// The card `raw` means ([`resolve`]), parsed under the conversation's policy; else the answer the
/// tool gives instead (the full number asked for, a card the user never gave refused, what is wrong
/// with the number said).
pub(crate) fn parsed(ctx: &ActionContext, raw: &str) -> Result<crate::vt::CardNumber, Box<ActionResponse>> {
    let v = super::VtSettings::of(ctx).politicas.validacoes_cartao;
    let raw = resolve(ctx, raw)?;
    crate::vt::CardNumber::parse(&raw, v.tamanho_min, v.tamanho_max)
        .map_err(|e| Box::new(super::consultar_saldo::invalid_card(&raw, &e.to_string())))
}

/// The model named a full card the user never gave in this conversation.
fn not_given() -> ActionResponse {
    ResponseToAgent::new(
        "Recusado: o usuário não informou esse cartão nesta conversa, e só os cartões que o próprio \
         usuário escreveu podem ser consultados ou recarregados. Nada foi feito. Responda ao que o \
         usuário pediu; se ele quiser uma consulta ou recarga, peça o número do cartão a ele.",
    )
    .error()
    .into()
}

/// The one card of the user's whose last digits are the mask's.
fn lookup_masked(ctx: &ActionContext, raw: &str) -> Option<String> {
    let known = users_cards(ctx);
    let tail: String = ascii_digits(raw.rsplit('*').next().unwrap_or_default())
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    if tail.is_empty() {
        return None;
    }
    let mut matching = known.into_iter().filter(|c| c.ends_with(&tail));
    match (matching.next(), matching.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// The answer when the model named a card (masked, or partly) that the user never wrote out.
fn ask_full_number(raw: &str) -> ActionResponse {
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

/// The cards a conversation holds, for the store's blind index: the ones its user wrote (remembered
/// as they arrived), the ones offered to choose from (read off a photo) and its pending recharge's.
/// Only these: other numbers in state and memory (keys, ids, times) are no one's card, and a flow's
/// card is on its run's row.
pub fn cards_held(state: &Map<String, Value>, memory: &Map<String, Value>) -> Vec<String> {
    let mut held = remembered_in(memory);
    let pending = state
        .get(super::pendente::STATE_PENDENTE)
        .and_then(|p| p.get("cartao"));
    held.extend(pending.and_then(Value::as_str).map(str::to_owned));
    let offered = state
        .get(STATE_OFERECIDOS)
        .and_then(|o| o.get("cartoes"))
        .and_then(Value::as_array);
    held.extend(
        offered
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned),
    );
    let mut digits: Vec<String> = held
        .iter()
        .flat_map(|c| crate::vt::card::card_numbers_in(c))
        .collect();
    digits.sort();
    digits.dedup();
    digits
}

/// The memory value that remembers `card` among the user's cards.
pub fn remember(ctx: &ActionContext, card: &str) -> Value {
    json!(with_card(remembered(ctx), card))
}

/// Whether `card` was on record before the message being answered ([`STATE_ANTES_DA_MENSAGEM`]).
pub fn on_record_before(ctx: &ActionContext, card: &str) -> bool {
    ctx.state
        .get(STATE_ANTES_DA_MENSAGEM)
        .and_then(Value::as_array)
        .is_some_and(|a| {
            let index = crate::vt::secret::card_index(card);
            a.iter().any(|c| c.as_str() == Some(index.as_str()))
        })
}

/// The value of [`STATE_ANTES_DA_MENSAGEM`] for the cards `memory` holds now.
pub fn on_record_now(memory: &Map<String, Value>) -> Value {
    let indexes: Vec<String> = remembered_in(memory)
        .iter()
        .map(|c| crate::vt::secret::card_index(c))
        .collect();
    json!(indexes)
}

/// Remembers the cards the user wrote in `text`, as the message arrives: a card given in one message
/// (the router asking for the rest in the next) is the user's in the turns after it.
pub fn remember_written(memory: &mut Map<String, Value>, text: &str) {
    let written = cards(text);
    if !written.is_empty() {
        let known = written
            .iter()
            .fold(remembered_in(memory), |known, card| with_card(known, card));
        memory.insert(MEMORY_CARTOES.into(), json!(known));
    }
}

/// `known` with `card` last (moved there if it was known), at most [`REMEMBERED`] of them.
fn with_card(mut known: Vec<String>, card: &str) -> Vec<String> {
    known.retain(|c| c != card);
    known.push(card.to_owned());
    let excess = known.len().saturating_sub(REMEMBERED);
    known.drain(..excess);
    known
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
        assert_eq!(resolve(&c, "****7890").ok().as_deref(), Some("1234567890"));
        let c = ctx("e o outro?", &["1111111111", "2345678901"]);
        assert_eq!(resolve(&c, "****8901").ok().as_deref(), Some("2345678901"));
        assert_eq!(resolve(&c, "****0000").ok(), None, "no card of the user ends so");
        let c = ctx("", &["1111117890", "2222227890"]);
        assert_eq!(resolve(&c, "****7890").ok(), None, "ambiguous: ask, never guess");
        assert_eq!(resolve(&c, "****").ok(), None);
    }

    #[test]
    fn a_written_out_card_counts_only_when_the_user_gave_it() {
        let c = ctx("recarrega o cartão 1234 5678-90", &["1111111111"]);
        assert_eq!(
            resolve(&c, "1234 5678-90").ok().as_deref(),
            Some("1234 5678-90"),
            "written out by the user: as is"
        );
        assert_eq!(resolve(&c, "1234567890").ok().as_deref(), Some("1234567890"));
        assert_eq!(
            resolve(&c, "1111111111").ok().as_deref(),
            Some("1111111111"),
            "remembered"
        );
        assert_eq!(resolve(&c, "9876543210").ok(), None, "a card the user never gave");
        assert_eq!(
            resolve(&c, "1234567890 9876543210").ok(),
            None,
            "one card, not two"
        );
        let c = ctx("meu cartão é 98765432O10", &[]);
        assert_eq!(
            resolve(&c, "98765432O10").ok().as_deref(),
            Some("98765432O10"),
            "the user's own text, for the parser to refuse"
        );
        let c = ctx("me conta uma piada", &[]);
        assert_eq!(resolve(&c, "1234567890").ok(), None);
        assert_eq!(resolve(&c, "12345").ok(), None);
    }

    #[test]
    fn the_cards_a_user_writes_are_remembered_as_the_message_arrives() {
        let mut memory = Map::new();
        remember_written(&mut memory, "quero recarregar");
        assert!(memory.is_empty());
        remember_written(&mut memory, "o 1234 5678-90 e o 1111111111");
        remember_written(&mut memory, "de novo o 1234567890");
        assert_eq!(memory[MEMORY_CARTOES], json!(["1111111111", "1234567890"]));
    }

    #[test]
    fn the_cards_held_are_the_users_and_the_pending_ones() {
        let mut memory = Map::new();
        remember_written(&mut memory, "o 1234 5678-90");
        memory.insert(
            "entrada".into(),
            json!({"cartao": "2222 2222-22", "idempotency": "12345678-1234-1234"}),
        );
        memory.insert("chave".into(), json!("99999999-9999"));
        let mut state = Map::new();
        state.insert(
            super::super::pendente::STATE_PENDENTE.into(),
            json!({"cartao": "3333333333", "valor": 50}),
        );
        assert_eq!(cards_held(&state, &memory), ["1234567890", "3333333333"]);
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
