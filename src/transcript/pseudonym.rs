//! Personal data out before anything leaves the store: every card, phone number and name a replay
//! reads is replaced by a consistent fake — the same fake for the same value in every message,
//! recorded answer and model reply of the run, so the candidate meets a world that still holds
//! together. Cards are found as the masker finds them (`replace_cards_in`); a fake card keeps the
//! length and the last four digits (what every masked text shows already) and changes the rest. Fakes
//! come from the store's blind-index key: stable from run to run (a baseline's case ids and cards
//! stay the same), useless without the key.
//!
//! The map back (fake → real) never leaves the process: it serves only to recognise a candidate's
//! model request as the recorded one (their fingerprints are taken over the real form).

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// Brazilian phone numbers as people write them — with the marks that tell one from a card number of
/// the same length: `+55 11 98765-4321`, `(11) 98765-4321`, `11 98765-4321`, `98765-4321`, and
/// WhatsApp's ids (`5511987654321`).
static PHONE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"\+55[\s.-]?\(?[1-9]\d\)?[\s.-]?9?\d{4}[\s.-]?\d{4}\b",
        r"|\(\s?[1-9]\d\s?\)[\s.-]?9?\d{4}[\s.-]?\d{4}\b",
        r"|\b[1-9]\d[\s.]9\d{4}[\s.-]\d{4}\b",
        r"|\b9\d{4}-\d{4}\b",
        r"|\b55[1-9]\d9?\d{8}\b",
    ))
    .expect("phone regex")
});

/// A WhatsApp business-scoped user id (`BR.1502576394655843`): a person's id, as personal as their
/// phone — and its digits would pass for a card's.
static BSUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[A-Z]{2}\.(?:ENT\.)?[A-Za-z0-9]*[0-9][A-Za-z0-9]*\b").expect("bsuid regex")
});

/// A Pix code (a BR Code, `000201…6304` and its CRC): the operator's key and a charge's id, no one's
/// personal data — and its digits would pass for a card's.
static PIX_CODE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"000201\S*6304[0-9A-F]{4}").expect("pix code regex"));

/// A name someone gives for themselves: "meu nome é Ana Souza", "me chamo João", "aqui é a Maria".
static GIVEN_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i:meu nome é|meu nome e|me chamo|aqui é (?:o|a)|aqui e (?:o|a)|sou (?:o|a)|falo com (?:o|a))\s+((?:\p{Lu}[\p{L}'-]+)(?:\s+(?:d[aeo]s?\s+)?\p{Lu}[\p{L}'-]+){0,3})",
    )
    .expect("name regex")
});

/// Names that stand in for a person's, by keyed hash.
const NAMES: [&str; 12] = [
    "Alice Teste",
    "Bruno Exemplo",
    "Carla Ficticia",
    "Diego Modelo",
    "Elisa Amostra",
    "Fabio Simulado",
    "Gabi Replay",
    "Heitor Ensaio",
    "Iara Prova",
    "Joel Piloto",
    "Karen Roteiro",
    "Lucas Cenario",
];

/// The run's replacements, both ways.
#[derive(Debug, Default)]
pub(crate) struct Pseudonyms {
    fake: HashMap<String, String>,
    real: HashMap<String, String>,
    /// Names known from the conversations' records (a user's login), replaced wherever they appear.
    names: Vec<String>,
}

/// A keyed hash of `value` (the store's blind index), as a stream of decimal digits.
fn digits_of(value: &str, salt: &str) -> Vec<u8> {
    vt_store::seal::card_index(&format!("replay:{salt}:{value}"))
        .bytes()
        .map(|b| b % 10)
        .collect()
}

impl Pseudonyms {
    /// `name` is a person's (a user's login or profile name): replaced wherever it appears.
    pub(crate) fn know_name(&mut self, name: &str) {
        let name = name.trim();
        // A login made of digits is a phone number (WhatsApp's wa_id) and is found as one.
        if name.chars().count() >= 3
            && !name.chars().all(|c| c.is_ascii_digit() || c == '+')
            && !self.names.iter().any(|n| n == name)
        {
            self.names.push(name.to_owned());
            self.names.sort_by_key(|n| std::cmp::Reverse(n.len()));
        }
    }

    fn remember(&mut self, real: &str, fake: String) -> String {
        self.real.insert(fake.clone(), real.to_owned());
        self.fake.insert(real.to_owned(), fake.clone());
        fake
    }

    /// A card's fake: same length, same last four digits, the rest from the key (and never the real).
    fn card(&mut self, found: &str) -> String {
        let digits: String = found.chars().filter(char::is_ascii_digit).collect();
        if let Some(f) = self.fake.get(&digits) {
            return f.clone();
        }
        let keep = digits.len().saturating_sub(4);
        let mut fake: Vec<u8> = digits_of(&digits, "cartao")
            .into_iter()
            .cycle()
            .take(keep)
            .map(|d| b'0' + d)
            .collect();
        if fake.first() == Some(&b'0') {
            fake[0] = b'9';
        }
        if fake == digits.as_bytes()[..keep] {
            fake[0] = if fake[0] == b'9' { b'8' } else { b'9' };
        }
        let fake = format!("{}{}", String::from_utf8_lossy(&fake), &digits[keep..]);
        self.remember(&digits, fake)
    }

    /// A phone number's fake: a mobile in area code 00, which no real line has.
    fn phone(&mut self, found: &str) -> String {
        // Kept as written, so the map back gives the very text a model was sent.
        if let Some(f) = self.fake.get(found) {
            return f.clone();
        }
        let digits: String = found.chars().filter(char::is_ascii_digit).collect();
        let tail: String = digits_of(&digits, "telefone")
            .into_iter()
            .take(8)
            .map(|d| char::from(b'0' + d))
            .collect();
        self.remember(found, format!("(00) 9{}-{}", &tail[..4], &tail[4..]))
    }

    /// A business-scoped user id's fake: country `ZZ`, which no real one has, and digits from the key.
    fn bsuid(&mut self, found: &str) -> String {
        if let Some(f) = self.fake.get(found) {
            return f.clone();
        }
        let tail: String = digits_of(found, "bsuid")
            .into_iter()
            .take(16)
            .map(|d| char::from(b'0' + d))
            .collect();
        self.remember(found, format!("ZZ.{tail}"))
    }

    fn name(&mut self, real: &str) -> String {
        if let Some(f) = self.fake.get(real) {
            return f.clone();
        }
        let pick = digits_of(real, "nome")
            .iter()
            .map(|d| usize::from(*d))
            .sum::<usize>()
            % NAMES.len();
        let mut fake = NAMES[pick].to_owned();
        // Two people never share a fake.
        let mut n = 2;
        while self.real.contains_key(&fake) {
            fake = format!("{} {n}", NAMES[pick]);
            n += 1;
        }
        self.remember(real, fake)
    }

    /// `text` with every card, phone number and name replaced.
    pub(crate) fn text(&mut self, text: &str) -> String {
        // Pix codes and phones first, set aside while cards are looked for (their digits look like a
        // card's).
        let mut phones = Vec::new();
        let codes = PIX_CODE
            .replace_all(text, |c: &regex::Captures<'_>| {
                phones.push(c[0].to_owned());
                format!("\u{E000}{}\u{E001}", phones.len() - 1)
            })
            .into_owned();
        let held = PHONE
            .replace_all(&codes, |c: &regex::Captures<'_>| {
                phones.push(self.phone(&c[0]));
                format!("\u{E000}{}\u{E001}", phones.len() - 1)
            })
            .into_owned();
        let held = BSUID
            .replace_all(&held, |c: &regex::Captures<'_>| {
                phones.push(self.bsuid(&c[0]));
                format!("\u{E000}{}\u{E001}", phones.len() - 1)
            })
            .into_owned();
        let cards = vt_domain::vt::card::replace_cards_in(&held, |found| self.card(found));
        let mut out = cards;
        for (i, phone) in phones.iter().enumerate() {
            out = out.replace(&format!("\u{E000}{i}\u{E001}"), phone);
        }
        let mut named = GIVEN_NAME
            .replace_all(&out, |c: &regex::Captures<'_>| {
                let whole = &c[0];
                let name = &c[1];
                format!("{}{}", &whole[..whole.len() - name.len()], self.name(name))
            })
            .into_owned();
        for known in self.names.clone() {
            if named.contains(&known) {
                let fake = self.name(&known);
                named = named.replace(&known, &fake);
            }
        }
        named
    }

    /// Every string in `value` through [`Self::text`] (keys stay).
    pub(crate) fn json(&mut self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(a) => Value::Array(a.iter().map(|v| self.json(v)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| {
                        let v = match v {
                            // A card sent as a number; any other number (an amount, a time, an id)
                            // is no one's and stays.
                            Value::Number(n) if k.contains("cartao") => {
                                let fake = self.card(&n.to_string());
                                fake.parse::<u64>().map_or(Value::String(fake), Value::from)
                            }
                            other => self.json(other),
                        };
                        (k.clone(), v)
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// `text` with every fake this run made put back: only to compare a candidate's request with the
    /// recorded one in this process.
    pub(crate) fn restore(&self, text: &str) -> String {
        let mut fakes: Vec<(&String, &String)> = self.real.iter().collect();
        fakes.sort_by_key(|(fake, _)| std::cmp::Reverse(fake.len()));
        let mut out = text.to_owned();
        for (fake, real) in fakes {
            if out.contains(fake.as_str()) {
                out = out.replace(fake.as_str(), real);
            }
        }
        out
    }

    /// Every real value this run replaced (for a test's grep).
    #[cfg(test)]
    fn reals(&self) -> Vec<String> {
        self.fake.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cards_phones_and_names_get_consistent_fakes() {
        let mut p = Pseudonyms::default();
        p.know_name("Beatriz Lima");
        let a = p.text("oi, sou a Beatriz Lima, cartão 1234567890, fone (11) 98765-4321");
        let b = p.text("de novo o 1234 567 890 e o +55 11 98765-4321; meu nome é Carlos Dias");
        for real in ["1234567890", "98765-4321", "Beatriz", "Carlos Dias"] {
            assert!(!a.contains(real) && !b.contains(real), "{real}: {a} / {b}");
        }
        assert!(a.contains("7890") && a.contains("(00) 9"), "{a}");
        let fake_card = a
            .split_whitespace()
            .find(|w| w.trim_end_matches(',').ends_with("7890"))
            .expect("the card's fake");
        assert!(
            b.contains(fake_card.trim_end_matches(',')),
            "the same card, the same fake: {a} / {b}"
        );
        assert_eq!(
            p.restore(&a),
            "oi, sou a Beatriz Lima, cartão 1234567890, fone (11) 98765-4321"
        );
        assert!(p.reals().len() >= 4);
    }

    #[test]
    fn a_whatsapp_bsuid_gets_a_fake_of_its_own_never_a_cards() {
        let mut p = Pseudonyms::default();
        let a = p.text("usuário BR.1502576394655843 (pai US.ENT.11815799212886844830)");
        assert!(
            !a.contains("1502576394655843") && !a.contains("11815799212886844830"),
            "{a}"
        );
        assert!(a.starts_with("usuário ZZ.") && !a.contains('*'), "{a}");
        let b = p.text("de novo BR.1502576394655843");
        let fake = a.split_whitespace().nth(1).expect("the fake");
        assert!(b.ends_with(fake), "the same id, the same fake: {a} / {b}");
        assert_eq!(p.text("OK.obrigado, R$ 4.40"), "OK.obrigado, R$ 4.40");
    }

    #[test]
    fn dates_amounts_protocols_and_pix_codes_are_no_personal_data() {
        let mut p = Pseudonyms::default();
        let text = "recarga de R$ 50,00 em 2026-11-28, protocolo 20261128-000042, \
                    00020101021226790014br.gov.bcb.pix2557pix.simulador.vt/qr/v2/vt3adc9d6330622d3e7520400005303986540520.005802BR6304ABCD";
        assert_eq!(p.text(text), text);
        // A code whose merchant name has spaces (the card pass saw its digits on 80722d3, and the
        // replayed code no longer checked): whole, known by its CRC.
        let spaced = "pague: 00020101021226760014br.gov.bcb.pix2554pix.example.com/qr/v2/8b3da2f39a4140d1a91abd93113bd4415204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***80800014br.gov.bcb.pix2558pix.example.com/qr/v2/rec/94ed2badcbc04c15b0bb7fa35319489063047741";
        assert_eq!(p.text(spaced), spaced);
    }
}
