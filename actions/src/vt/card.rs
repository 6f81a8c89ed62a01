//! Card numbers: cleaned (spaces and dashes removed), digits only, length within the policy.

use serde::{Deserialize, Serialize};

/// A card number that passed the policy's checks. Its `Display` is masked; the digits come only from
/// [`CardNumber::digits`], so a full number never reaches a message or a log line by accident.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CardNumber(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CardError {
    #[error("o cartão tem caracteres que não são dígitos")]
    NotDigits,
    #[error("o cartão deve ter entre {min} e {max} dígitos (tem {len})")]
    Length { len: usize, min: usize, max: usize },
}

/// Removes the separators people type (spaces, dashes, dots).
pub fn clean(raw: &str) -> String {
    raw.chars()
        .filter(|c| !matches!(c, ' ' | '-' | '.' | '\t'))
        .collect()
}

impl CardNumber {
    /// Parses `raw` under the length policy `min..=max`.
    pub fn parse(raw: &str, min: usize, max: usize) -> Result<Self, CardError> {
        let cleaned = clean(raw);
        if cleaned.is_empty() || !cleaned.chars().all(|c| c.is_ascii_digit()) {
            return Err(CardError::NotDigits);
        }
        let len = cleaned.chars().count();
        if len < min || len > max {
            return Err(CardError::Length { len, min, max });
        }
        Ok(Self(cleaned))
    }

    /// The full number, for the external systems' payloads and internal metadata only.
    pub fn digits(&self) -> &str {
        &self.0
    }

    /// `****7890`.
    pub fn masked(&self) -> String {
        mask_card(&self.0)
    }
}

impl std::fmt::Display for CardNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.masked())
    }
}

impl std::fmt::Debug for CardNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CardNumber({})", self.masked())
    }
}

/// Masks any card-like text to its last four digits.
pub fn mask_card(raw: &str) -> String {
    let digits: Vec<char> = raw.chars().filter(char::is_ascii_digit).collect();
    let tail: String = digits[digits.len().saturating_sub(4)..].iter().collect();
    format!("****{tail}")
}

static CARD_LIKE: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| regex::Regex::new(r"\d[\d \-.]{6,}\d").expect("card regex"));

/// Replaces every run of 8 or more digits (a card number, with or without separators) by its masked
/// form. For free text that may carry a card: messages, facts, notifications.
pub fn mask_cards_in(text: &str) -> String {
    CARD_LIKE
        .replace_all(text, |c: &regex::Captures<'_>| {
            let digits = c[0].chars().filter(char::is_ascii_digit).count();
            if digits >= 8 {
                mask_card(&c[0])
            } else {
                c[0].to_owned()
            }
        })
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_are_removed_before_validation() {
        let c = CardNumber::parse("1234 5678-90", 8, 19).expect("valid");
        assert_eq!(c.digits(), "1234567890");
        assert_eq!(c.masked(), "****7890");
        assert_eq!(format!("{c} {c:?}"), "****7890 CardNumber(****7890)");
    }

    #[test]
    fn letters_are_rejected() {
        assert_eq!(CardNumber::parse("1234abcd90", 8, 19), Err(CardError::NotDigits));
        assert_eq!(CardNumber::parse("", 8, 19), Err(CardError::NotDigits));
        assert_eq!(
            CardNumber::parse("１２３４５６７８９０", 8, 19),
            Err(CardError::NotDigits),
            "only ASCII digits"
        );
    }

    #[test]
    fn length_bounds_are_inclusive() {
        assert!(CardNumber::parse("1234567890", 10, 16).is_ok());
        assert!(CardNumber::parse("1234567890123456", 10, 16).is_ok());
        assert_eq!(
            CardNumber::parse("123456789", 10, 16),
            Err(CardError::Length {
                len: 9,
                min: 10,
                max: 16
            })
        );
        assert!(CardNumber::parse("12345678901234567", 10, 16).is_err());
    }
}
