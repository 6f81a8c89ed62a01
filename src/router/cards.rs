//! Which card a request means when its message names none: the cards the conversation remembers
//! (the user's own, from this conversation or their last one on the channel). "nele", "no mesmo",
//! "esse cartão" mean the last one given; "o final 7890" the one that ends so; with no word at all,
//! the only one — and with several, the person is asked which, never guessed for.

use super::keywords::means_same_card;

/// The card a message means among the `known` ones (oldest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pick {
    One(String),
    /// Several could be meant: ask which.
    Choose(Vec<String>),
    /// "o final 7890", and no known card ends so.
    NoSuchFinal(String),
    /// No card known.
    None,
}

/// The card meant among the `known` ones, the message naming `last_digits` ("o final 7890") if it
/// does (`n`: its normalised text).
pub(crate) fn pick(last_digits: Option<&str>, n: &str, known: &[String]) -> Pick {
    if let Some(tail) = last_digits {
        let matching: Vec<String> = known.iter().filter(|c| c.ends_with(tail)).cloned().collect();
        return match matching.as_slice() {
            [] => Pick::NoSuchFinal(tail.to_owned()),
            [one] => Pick::One(one.clone()),
            _ => Pick::Choose(matching),
        };
    }
    match known {
        [] => Pick::None,
        [one] => Pick::One(one.clone()),
        [.., last] if means_same_card(n) => Pick::One(last.clone()),
        many => Pick::Choose(many.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(cards: &[&str]) -> Vec<String> {
        cards.iter().map(|c| (*c).to_owned()).collect()
    }

    #[test]
    fn a_card_is_picked_only_without_doubt() {
        let one = known(&["1234567890"]);
        let two = known(&["1111111111", "1234567890"]);
        assert_eq!(pick(None, "saldo", &one), Pick::One("1234567890".into()));
        assert_eq!(pick(None, "saldo", &[]), Pick::None);
        assert_eq!(pick(None, "saldo", &two), Pick::Choose(two.clone()));
        assert_eq!(
            pick(None, "recarrega 50 nele", &two),
            Pick::One("1234567890".into()),
            "the last one given"
        );
        assert_eq!(
            pick(Some("1111"), "o final 1111", &two),
            Pick::One("1111111111".into())
        );
        assert_eq!(
            pick(Some("0000"), "o final 0000", &two),
            Pick::NoSuchFinal("0000".into())
        );
    }
}
