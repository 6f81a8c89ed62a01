//! Cards we offer the person to choose from, and their choice: the cards read off a photo ("Encontrei
//! o cartão final 7890 na foto. É esse?"), or the remembered ones when a request named none ("De qual
//! cartão…?"). The offer is kept in the conversation's state for one turn — the next one — and sealed
//! like any card; a channel that can shows it as a list to pick from (WhatsApp), and a pick is the
//! card written out, as if the person had typed it. A card read off a photo is only a proposal: it
//! becomes the person's card (remembered as the cards they write are) on their "sim" or their pick,
//! and nothing else happens on it.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use vt_domain::tools::cartao::{STATE_OFERECIDOS, remember_written};
use vt_domain::vt::card::mask_card;
use vt_domain::vt::parse::{cards, is_confirmation, is_refusal};

use super::Inbound;
use vt_engine::Conversation;

/// The most cards one offer holds (WhatsApp's list: ten rows).
pub(crate) const MAX_OFFERED: usize = 10;

/// What a pick names when the offer it came from is gone (an old list, another person's).
const STALE_PICK: &str = "(toque em uma opção de uma lista que não está mais valendo)";

/// Cards offered to choose from in the turn's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Offer {
    pub cartoes: Vec<String>,
    /// Read off a photo: a proposal the person accepts or turns down.
    #[serde(default)]
    pub foto: bool,
}

impl Offer {
    /// What a channel shows of each card: masked, at most 24 characters (a WhatsApp list row).
    pub(crate) fn titles(&self) -> Vec<String> {
        self.cartoes
            .iter()
            .map(|c| format!("Cartão {}", mask_card(c)))
            .collect()
    }

    /// [`Self::titles`] of an offer, if any (none: nothing to choose from).
    pub(crate) fn titles_of(offer: Option<&Self>) -> Vec<String> {
        offer.map(Self::titles).unwrap_or_default()
    }

    fn of(conv: &Conversation) -> Option<Self> {
        conv.state
            .get(STATE_OFERECIDOS)
            .cloned()
            .and_then(|v| vt_contract::json::from_value(v).ok())
    }
}

/// `msg` as the turn reads it: a pick from our list becomes the card it names, written out — when
/// the offer is still `conv`'s, made to this very user (or the score it names, while the
/// satisfaction question waits); otherwise words that say the list is gone.
pub(super) fn resolve_pick<'m>(msg: &'m Inbound, conv: Option<&Conversation>) -> Cow<'m, Inbound> {
    let Some(index) = msg.pick else {
        return Cow::Borrowed(msg);
    };
    let card = conv.filter(|c| c.user_id == msg.user.user_id).and_then(|c| {
        Offer::of(c)
            .and_then(|o| o.cartoes.get(index).cloned())
            .or_else(|| survey_pick(c, index))
            .or_else(|| automatic_pick(c, index))
    });
    let mut resolved = msg.clone();
    resolved.text = card.unwrap_or_else(|| STALE_PICK.to_owned());
    resolved.pick = None;
    Cow::Owned(resolved)
}

/// Where a conversation keeps the satisfaction question it was asked (`outcomes.rs`): the outcome
/// it rates.
pub(super) const STATE_PESQUISA: &str = "pesquisa";
/// The satisfaction question's options: a list's pick of one is its score.
pub(super) const SCALE: [&str; 5] = [
    "1 · Muito ruim",
    "2 · Ruim",
    "3 · Regular",
    "4 · Bom",
    "5 · Ótimo",
];

/// A pick from the scale's list (its index) as the score written out, while the question waits.
fn survey_pick(conv: &Conversation, index: usize) -> Option<String> {
    (conv.state.contains_key(STATE_PESQUISA) && index < SCALE.len()).then(|| (index + 1).to_string())
}

/// The offer of an automatic recharge's options: a list's pick of one is its yes or no.
pub(super) const AUTOMATIC_CHOICES: [&str; 2] = ["Sim, recarregar sozinho", "Não, obrigado"];

/// A pick from the automatic recharge's offer as its yes or no written out, while the offer stands.
fn automatic_pick(conv: &Conversation, index: usize) -> Option<String> {
    let offered = conv.state.contains_key(vt_domain::tools::STATE_OFERTA_AUTOMATICA);
    let answer = ["sim", "não"].get(index)?;
    offered.then(|| (*answer).to_owned())
}

/// After a turn: the offer its answer made stands until the next turn; any other turn drops the last.
pub(super) fn settle(conv: &mut Conversation, offered: Option<&Offer>) {
    match offered {
        Some(offer) => {
            conv.state.insert(
                STATE_OFERECIDOS.into(),
                vt_contract::json::to_value(offer).unwrap_or(Value::Null),
            );
        }
        None => {
            conv.state.remove(STATE_OFERECIDOS);
        }
    }
}

/// The answer to a photo's proposal, when `msg` is one: "sim" to the one card read, or one of the
/// cards read (picked or typed), makes it the person's card; "não" drops it. Anything else is no
/// answer to it (the turn goes on, and the proposal is dropped after it).
pub(super) fn answer_to_photo(conv: &mut Conversation, msg: &Inbound) -> Option<String> {
    let offer = Offer::of(conv).filter(|o| o.foto)?;
    let written = cards(&msg.text);
    let chosen = match (offer.cartoes.as_slice(), written.as_slice()) {
        ([one], []) if is_confirmation(&msg.text) => Some(one.clone()),
        (_, [card]) if offer.cartoes.contains(card) => Some(card.clone()),
        _ => None,
    };
    if let Some(card) = chosen {
        // Remembered as a card the person wrote: the tools reach it from now on, and only now.
        remember_written(&mut conv.memory, &card);
        return Some(format!(
            "Pronto: vou usar o cartão {} nesta conversa. Quer consultar o saldo ou fazer uma recarga?",
            mask_card(&card)
        ));
    }
    is_refusal(&msg.text)
        .then(|| "Tudo bem, não vou usar esse número. Pode digitar o número do cartão?".to_owned())
}

/// What a photo's reading proposes: the cards found in `text` of the policy's lengths (`min..=max`),
/// in the order they were read, at most [`MAX_OFFERED`].
pub(super) fn read_off_photo(text: &str, min: usize, max: usize) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    // Line by line: a card is printed on one line, and digits on the next line are another number.
    for card in text.lines().flat_map(cards) {
        if (min..=max).contains(&card.len()) && !found.contains(&card) {
            found.push(card);
        }
    }
    found.truncate(MAX_OFFERED);
    found
}

/// The answer to a photo and the offer it makes: one card is proposed (sim/não), several are offered
/// to choose from, none asks the person to type it.
pub(super) fn photo_proposal(found: Vec<String>) -> (String, Option<Offer>) {
    let text = match found.as_slice() {
        [] => return (NOT_READ.to_owned(), None),
        [one] => format!(
            "Encontrei o cartão final {} na foto. É esse? (sim/não)",
            vt_domain::vt::card::last_four(one)
        ),
        many => format!(
            "Encontrei {} números de cartão na foto: {}. Qual deles é o seu? Pode escolher na lista ou responder com o final.",
            many.len(),
            many.iter().map(|c| mask_card(c)).collect::<Vec<_>>().join(", ")
        ),
    };
    let offer = Offer {
        cartoes: found,
        foto: true,
    };
    (text, Some(offer))
}

/// What a photo whose card could not be read gets.
pub(super) const NOT_READ: &str = "Não consegui ler o número do cartão na foto; pode digitar?";

#[cfg(test)]
mod tests {
    use super::*;
    use vt_engine::Participant;

    fn conv_offering(cards: &[&str], foto: bool) -> Conversation {
        let mut conv = Conversation::new(
            "c1".into(),
            "vt",
            "vt".into(),
            Participant {
                user_id: "u1".into(),
                user_login: "u1".into(),
                channel: "zap".into(),
            },
        );
        let offer = Offer {
            cartoes: cards.iter().map(|c| (*c).to_owned()).collect(),
            foto,
        };
        settle(&mut conv, Some(&offer));
        conv
    }

    fn said(text: &str) -> Inbound {
        Inbound {
            text: text.into(),
            user: Participant {
                user_id: "u1".into(),
                user_login: "u1".into(),
                channel: "zap".into(),
            },
            ..Inbound::default()
        }
    }

    #[test]
    fn a_photos_cards_are_the_policys_lengths_read_line_by_line() {
        let text = "VALE TRANSPORTE\n\n6363 1234 5678 7890\nVALIDO ATE 12/29\n1234567\n6363 1234 5678 7890\n";
        assert_eq!(read_off_photo(text, 8, 19), vec!["6363123456787890"]);
        assert_eq!(
            read_off_photo(text, 8, 12),
            Vec::<String>::new(),
            "16 digits: not this policy's"
        );
        let two = "1111 2222 3333 4444\n5555 6666\n7777 8888";
        assert_eq!(
            read_off_photo(two, 8, 19),
            vec!["1111222233334444", "55556666", "77778888"],
            "digits on another line are another number"
        );
        let many: String = (10..25).map(|i| format!("{i}00000000{i}\n")).collect();
        assert_eq!(read_off_photo(&many, 8, 19).len(), MAX_OFFERED);
    }

    #[test]
    fn a_photos_card_is_the_persons_only_on_their_yes_or_pick() {
        let mut conv = conv_offering(&["6363123456787890"], true);
        assert_eq!(
            answer_to_photo(&mut conv, &said("saldo")),
            None,
            "no answer to it"
        );
        assert!(vt_domain::tools::cartao::remembered_in(&conv.memory).is_empty());
        let reply = answer_to_photo(&mut conv, &said("sim")).expect("a yes");
        assert!(
            reply.contains("****7890") && !reply.contains("6363123456787890"),
            "{reply}"
        );
        assert_eq!(
            vt_domain::tools::cartao::remembered_in(&conv.memory),
            vec!["6363123456787890"]
        );

        let mut conv = conv_offering(&["6363123456787890"], true);
        assert!(answer_to_photo(&mut conv, &said("não")).is_some_and(|r| r.contains("digitar")));
        assert!(vt_domain::tools::cartao::remembered_in(&conv.memory).is_empty());

        let mut conv = conv_offering(&["1111222233334444", "5555666677778888"], true);
        assert_eq!(
            answer_to_photo(&mut conv, &said("sim")),
            None,
            "a yes to two cards names none"
        );
        assert!(answer_to_photo(&mut conv, &said("5555666677778888")).is_some());
        assert_eq!(
            vt_domain::tools::cartao::remembered_in(&conv.memory),
            vec!["5555666677778888"]
        );
        let mut conv = conv_offering(&["1111222233334444"], false);
        assert_eq!(
            answer_to_photo(&mut conv, &said("sim")),
            None,
            "not a photo's offer"
        );
    }

    #[test]
    fn a_pick_names_the_offered_card_only_while_the_offer_stands() {
        let conv = conv_offering(&["1111222233334444", "5555666677778888"], false);
        let pick = Inbound {
            pick: Some(1),
            ..said("")
        };
        assert_eq!(resolve_pick(&pick, Some(&conv)).text, "5555666677778888");
        let out_of_range = Inbound {
            pick: Some(7),
            ..said("")
        };
        assert_eq!(resolve_pick(&out_of_range, Some(&conv)).text, STALE_PICK);
        let mut other = pick.clone();
        other.user.user_id = "u2".into();
        assert_eq!(
            resolve_pick(&other, Some(&conv)).text,
            STALE_PICK,
            "another person's list"
        );
        let mut gone = conv.clone();
        settle(&mut gone, None);
        assert_eq!(resolve_pick(&pick, Some(&gone)).text, STALE_PICK);
    }

    #[test]
    fn titles_fit_a_list_row_and_show_no_card() {
        let offer = Offer {
            cartoes: vec!["6363123456787890".into(), "12345678".into()],
            foto: true,
        };
        for t in offer.titles() {
            assert!(t.chars().count() <= 24, "{t}");
            assert!(!t.contains("6363123456787890") && !t.contains("12345678"), "{t}");
        }
    }
}
