//! What a model may say to a card holder. Its words are checked before they are sent: a reply that
//! shows the product's insides (JSON, a tool call, an internal key such as an idempotency key), names
//! a card the person never gave in this conversation, says back a credit or debit card's number, or
//! states an amount of money that neither the person, a tool nor the conversation's state ever said
//! (a sum the model did in its head, a balance it made up) is held back, and the turn answers with a
//! question instead. Code executes; the model talks — and a
//! small model's worst words never reach a person.

use std::sync::LazyLock;

use regex::Regex;

use serde_json::Value;

use crate::Conversation;
use crate::llm::ChatMessage;

/// What the card holder reads instead of a held-back reply: a question that names what can be done.
pub(super) const HELD_BACK_REPLY: &str = "Desculpe, não consegui responder isso direito. Posso consultar o saldo, \
     fazer uma recarga (sempre com a sua confirmação) ou chamar uma pessoa da equipe — o que você prefere?";

/// The product's insides in a text: a JSON object's key, a tool call's markup, a key of its state.
static INSIDES: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)] // a constant pattern, tested below
    Regex::new(
        r#"\{\s*"[^"\n]{1,60}"\s*:|</?tool_call>|"arguments"\s*:|\b(?:idempotency_key|execucao_id|recarga_pendente|tool_calls?|call_id)\b|\$etapa"#,
    )
    .expect("insides pattern")
});

/// A card named by its last four digits — masked (`****7890`) or in words ("final 7890") — or by its
/// number after the word ("cartão 9876543210"). Other digits (a protocol, a phone) are not cards.
static NAMED_CARD: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)] // a constant pattern, tested below
    Regex::new(
        r"(?i)\*{2,}\s?(\d{4})\b|\b(?:final|finais|terminad[oa] em|termina em|ending in)\s*(?:em\s*)?(\d{4})\b|\b(?:cart[aã]o|card)\s*(?:n[º°o.]?\s*)?(\d[\d .-]{6,}\d)",
    )
    .expect("card pattern")
});

/// An amount of money said as such: `R$ 12,50`, `BRL 12,50`, `12,50 reais`.
static MONEY_SAID: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)] // a constant pattern, tested below
    Regex::new(r"(?i)(?:r\$|brl)\s*(\d[\d.]*(?:,\d{1,2})?)|\b(\d[\d.]*(?:,\d{1,2})?)\s*(?:reais|real)\b")
        .expect("money pattern")
});

/// Any number, however written (`12.5` in a tool's JSON, `12,50` in a text, `1.000,00`).
static NUMBER: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)] // a constant pattern, tested below
    Regex::new(r"\d+(?:[.,]\d+)*").expect("number pattern")
});

/// Why `text`, a model's reply in `conv`, must not be sent; `None`: it may.
pub(super) fn held_back(text: &str, conv: &Conversation) -> Option<&'static str> {
    if INSIDES.is_match(text) {
        return Some("mostra JSON, uma chamada de ferramenta ou uma chave interna");
    }
    if !vt_domain::vt::parse::payment_cards(text).is_empty() {
        return Some("repete o número de um cartão de pagamento");
    }
    let given = cards_given(conv);
    let named_unknown = NAMED_CARD.captures_iter(text).any(|c| {
        if let Some(number) = c.get(3) {
            let digits: String = number.as_str().chars().filter(char::is_ascii_digit).collect();
            return !given.contains(&digits);
        }
        let four = c.get(1).or_else(|| c.get(2)).map_or("", |m| m.as_str());
        !given.iter().any(|g| vt_domain::vt::card::last_four(g) == four)
    });
    if named_unknown {
        return Some("cita um cartão que a pessoa não informou");
    }
    let known = numbers_said(conv);
    let unknown_amount = MONEY_SAID
        .captures_iter(text)
        .filter_map(|c| c.get(1).or_else(|| c.get(2)))
        .filter_map(|m| pt_br_amount(m.as_str()))
        .any(|v| !known.contains(&v));
    unknown_amount.then_some("diz um valor que ninguém informou e nenhuma ferramenta calculou")
}

/// `1.000,50` → 1000.50; `12,5` → 12.50.
fn pt_br_amount(text: &str) -> Option<rust_decimal::Decimal> {
    text.replace('.', "")
        .replace(',', ".")
        .parse()
        .ok()
        .map(|d: rust_decimal::Decimal| d.normalize())
}

/// Every number the conversation holds — what the person wrote (amounts in words too), what tools
/// answered, what was said before, its state — read both as people write them and as JSON does.
fn numbers_said(conv: &Conversation) -> Vec<rust_decimal::Decimal> {
    let mut texts: Vec<String> = Vec::new();
    for said in conv.window.iter().filter_map(|m| m.text()) {
        texts.push(said.to_owned());
        texts.push(vt_domain::vt::parse::number_words_to_digits(said));
    }
    texts.push(Value::Object(conv.state.clone()).to_string());
    let mut known = Vec::new();
    for text in &texts {
        for m in NUMBER.find_iter(text) {
            let n = m.as_str();
            let as_json = n.replace(',', "").parse::<rust_decimal::Decimal>().ok();
            for v in [pt_br_amount(n), as_json].into_iter().flatten() {
                known.push(v.normalize());
            }
        }
    }
    known
}

/// The transit cards the person gave in this conversation: remembered, pending, or in their messages.
fn cards_given(conv: &Conversation) -> Vec<String> {
    let mut given = vt_domain::tools::cartao::cards_held(&conv.state, &conv.memory);
    for m in &conv.window {
        if let ChatMessage::User { content } = m {
            for card in vt_domain::vt::parse::cards(content) {
                if !given.contains(&card) {
                    given.push(card);
                }
            }
        }
    }
    given
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Participant;

    fn conv(said: &[&str]) -> Conversation {
        let mut conv = Conversation::new(
            "c".into(),
            "vt",
            "atendimento".into(),
            Participant {
                user_id: "u".into(),
                user_login: "u".into(),
                channel: "terminal".into(),
            },
        );
        conv.window = said.iter().map(|s| ChatMessage::user(*s)).collect();
        conv
    }

    #[test]
    fn a_reply_with_the_products_insides_is_held_back() {
        let c = conv(&["oi, tenho 12,50 no cartão?"]);
        for text in [
            r#"Seu pedido: {"cartao": "****7890", "idempotency_key": "abc"}"#,
            r#"<tool_call>{"name": "consultar_saldo", "arguments": {}}</tool_call>"#,
            "A chave idempotency_key da recarga é 5f2c.",
            r#"{"name":"preparar_recarga","arguments":"{}"}"#,
        ] {
            assert!(held_back(text, &c).is_some(), "{text}");
        }
        assert_eq!(
            held_back("Seu saldo é R$ 12,50. Posso ajudar em algo mais?", &c),
            None
        );
        assert_eq!(held_back("Use {chaves} só em fórmulas.", &c), None);
    }

    #[test]
    fn a_card_the_person_never_gave_is_never_named_and_a_payment_card_never_said_back() {
        let c = conv(&["saldo do cartão 1234567890", "tem 12,50?"]);
        assert_eq!(held_back("O cartão ****7890 tem R$ 12,50.", &c), None);
        assert_eq!(held_back("O cartão com final 7890 tem saldo.", &c), None);
        assert!(held_back("O cartão com final 4321 tem saldo.", &c).is_some());
        assert!(held_back("Vou usar o cartão ****5555.", &c).is_some());
        assert!(held_back("Consultei o cartão 9876543210.", &c).is_some());
        assert_eq!(
            held_back(
                "Protocolo do seu atendimento: 20261122-000001. Central: (11) 98765-4321.",
                &c
            ),
            None,
            "a protocol and a phone are no cards"
        );
        let paying = conv(&["paga com 4111 1111 1111 1111"]);
        assert!(held_back("Certo, cartão 4111111111111111 anotado.", &paying).is_some());
        assert_eq!(held_back("Para pagar com cartão, envio um link.", &paying), None);
    }

    #[test]
    fn an_amount_nobody_said_and_no_tool_computed_is_never_sent() {
        let mut c = conv(&[
            "quanto dá 22 passagens de 8,80?",
            "recarrega dezessete e cinquenta",
        ]);
        c.window.push(ChatMessage::Tool {
            call_id: "1".into(),
            name: "consultar_saldo".into(),
            content: r#"{"saldo": 12.5, "moeda": "BRL"}"#.into(),
            is_error: false,
        });
        // Said back from a tool, or from what the person wrote (in words too): sent.
        assert_eq!(held_back("O cartão tem R$ 12,50 de saldo.", &c), None);
        assert_eq!(held_back("Confirma a recarga de R$ 17,50?", &c), None);
        assert_eq!(held_back("São 22 passagens a R$ 8,80.", &c), None);
        // A product the model worked out in its head, a balance it made up: held back.
        assert!(held_back("Fica R$ 193,60.", &c).is_some());
        assert!(held_back("Seu saldo é de 40 reais.", &c).is_some());
        assert!(held_back("O limite é BRL 1.000,00.", &c).is_some());
    }
}
