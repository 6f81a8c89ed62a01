//! Properties of the edge parsers (card, money, flow input, chat text), over inputs nobody would
//! think to write by hand: never a panic, never a changed card digit, never an accepted recharge
//! outside `(0, valor_max]`.

use proptest::prelude::*;
use rust_decimal::Decimal;

use super::card::{CardNumber, ascii_digits, mask_cards_in};
use super::parse::{amounts, cards, is_confirmation, is_refusal, parse_money, payment_type};
use super::{FlowInput, round_half_up};
use crate::stages::rf06_preparar_recarga::preparar_recarga;

/// The zeros of a few decimal-digit scripts: ASCII, fullwidth, Arabic-Indic, Devanagari, mathematical
/// bold.
const ZEROS: [char; 5] = ['0', '\u{FF10}', '\u{0660}', '\u{0966}', '\u{1D7CE}'];

/// A card number written the way people might: digits of mixed scripts, separators in between.
fn written_card() -> impl Strategy<Value = (String, String)> {
    prop::collection::vec(
        (
            0u8..10,
            0usize..ZEROS.len(),
            prop::sample::select(vec!["", "", "", " ", "-", "."]),
        ),
        8..=19,
    )
    .prop_map(|parts| {
        let mut digits = String::new();
        let mut written = String::new();
        for (i, (d, script, sep)) in parts.iter().enumerate() {
            digits.push(char::from(b'0' + d));
            let c = char::from_u32(ZEROS[*script] as u32 + u32::from(*d)).unwrap_or('0');
            written.push(c);
            if i + 1 < parts.len() {
                written.push_str(sep);
            }
        }
        (digits, written)
    })
}

proptest! {
    #[test]
    fn any_text_is_parsed_without_panic(text in "\\PC{0,200}") {
        let _ = cards(&text);
        let _ = amounts(&text);
        let _ = parse_money(&text);
        let _ = payment_type(&text);
        let _ = is_confirmation(&text);
        let _ = is_refusal(&text);
        let _ = mask_cards_in(&text);
        let _ = CardNumber::parse(&text, 8, 19);
        let _ = FlowInput::parse(&text);
    }

    #[test]
    fn a_card_keeps_every_digit_whatever_script_or_separators((digits, written) in written_card()) {
        let card = CardNumber::parse(&written, 8, 19).expect("a valid card");
        prop_assert_eq!(card.digits(), digits.as_str());
        // "50 1234567890" is an amount and a card: a card written as a short group, a space and
        // one long group of ten digits or more is read that way (`parse::digit_runs`).
        let ascii = ascii_digits(&written);
        let groups: Vec<&str> = ascii.split(' ').collect();
        let plain = |g: &str| g.len() >= 10 && g.bytes().all(|b| b.is_ascii_digit());
        let amount_and_card = matches!(groups.as_slice(),
            [a, b] if (a.len() <= 3 && plain(b)) || (b.len() <= 3 && plain(a)));
        prop_assume!(!amount_and_card);
        // A payment card's number is never a transit card (`card::is_payment_card`).
        let payment = crate::vt::card::is_payment_card(&digits);
        let found = cards(&format!("recarrega 20 no {written} via pix"));
        prop_assert_eq!(found.is_empty(), payment);
        prop_assume!(!payment);
        prop_assert_eq!(found, vec![digits.clone()]);
        let masked = mask_cards_in(&format!("cartão {written}"));
        prop_assert!(!ascii_digits(&masked).contains(&digits[..8]), "{}", masked);
    }

    #[test]
    fn a_card_with_a_foreign_character_is_refused_never_shortened(
        (_, written) in written_card(),
        at in 0usize..19,
        intruder in prop::sample::select(vec!['O', 'l', '²', '½', 'x', '#']),
    ) {
        let mut chars: Vec<char> = written.chars().collect();
        let at = at.min(chars.len());
        chars.insert(at, intruder);
        let text: String = chars.into_iter().collect();
        prop_assert!(CardNumber::parse(&text, 8, 19).is_err());
        for found in cards(&text) {
            // Whatever is read as a card is a whole run of the text, never a run with a digit lost.
            prop_assert!(ascii_digits(&text).replace([' ', '-', '.'], "").contains(&found));
        }
    }

    #[test]
    fn an_accepted_recharge_value_is_always_above_zero_and_within_the_maximum(
        valor in -1_000_000i64..1_000_000,
        scale in 0u32..5,
        min in -10_000i64..10_000,
        max in -10_000i64..100_000,
    ) {
        let valor = Decimal::new(valor, scale);
        let (min, max) = (Decimal::new(min, 2), Decimal::new(max, 2));
        let text = format!(
            r#"{{"cartao": "1234567890", "politicas": {{"valor_min": {min}, "valor_max": {max}}},
                "recarga": {{"valor": {valor}, "meio_pagamento": {{"tipo": "pix"}}}}}}"#
        );
        if let Ok(input) = FlowInput::parse(&text) {
            let payload = preparar_recarga(&input);
            if payload.validation_errors().is_empty() {
                let sent = payload.body["valor"].as_f64().expect("a number");
                prop_assert!(sent > 0.0, "{}", sent);
                let sent = crate::vt::decimal_from_json(&payload.body["valor"]).expect("decimal");
                prop_assert!(sent > Decimal::ZERO && sent <= round_half_up(max), "{} max {}", sent, max);
            }
        }
    }

    #[test]
    fn any_flow_input_json_is_parsed_or_refused_without_echoing_strings(
        field in prop::sample::select(vec!["cartao", "tenant_id", "origem", "politicas", "recarga", "preferencias", "destinatario"]),
        secret in "[0-9]{10}",
        shape in 0usize..4,
    ) {
        let value = match shape {
            0 => format!(r#"["{secret}"]"#),
            1 => format!(r#"{{"x": "{secret}"}}"#),
            2 => format!(r#""{secret}""#),
            _ => "true".to_owned(),
        };
        let text = if field == "cartao" {
            format!(r#"{{"cartao": {value}}}"#)
        } else {
            format!(r#"{{"cartao": "1234567890", "{field}": {value}}}"#)
        };
        if let Err(e) = FlowInput::parse(&text) {
            prop_assert!(!e.to_string().contains(&secret), "{}", e);
        }
    }
}

proptest! {
    /// A run of a card's length (8 to 19 digits), however it is written — glued to letters, with dots
    /// or dashes between — never comes back as money, whatever money stands beside it.
    #[test]
    fn a_card_length_run_is_never_money(
        digits in "[1-9][0-9]{7,18}",
        before in "[a-z]{0,3}",
        after in "[a-z]{0,3}",
        dotted in any::<bool>(),
    ) {
        let written = if dotted {
            digits.as_bytes().rchunks(3).rev().map(|c| std::str::from_utf8(c).unwrap_or_default()).collect::<Vec<_>>().join(".")
        } else {
            digits.clone()
        };
        let found = amounts(&format!("recarrega 20 reais no {before}{written}{after} no crédito"));
        prop_assert_eq!(found, vec![rust_decimal::Decimal::from(20)], "{}", written);
    }
}

proptest! {
    /// Yes words in any order and number are a yes; one word that is no yes — a "não", a "mas", a
    /// "cancela", a tool's name — anywhere among them makes the message no confirmation at all.
    #[test]
    fn a_yes_with_a_no_in_it_is_no_yes(
        core in prop::sample::select(vec!["sim", "pode", "ok", "isso", "confirmo", "ta bom", "siim", "👍"]),
        more in prop::collection::vec(prop::sample::select(vec!["sim", "pode", "por favor", "isso mesmo", "pode ser"]), 0..3),
        no in prop::sample::select(vec!["não", "nao", "mas", "cancela", "cancelar", "desisto", "espera", "confirmar_recarga", "outro"]),
        at in 0usize..4,
    ) {
        let yes: Vec<&str> = std::iter::once(core).chain(more).collect();
        let plain = yes.join(" ");
        prop_assert!(is_confirmation(&plain), "{}", plain);
        let mut words = yes.clone();
        words.insert(at.min(words.len()), no);
        let mixed = words.join(", ");
        prop_assert!(!is_confirmation(&mixed), "{}", mixed);
    }
}
