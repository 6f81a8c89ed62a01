//! Money: `rust_decimal`, never floats, rounded half up to 2 places, formatted per language only in
//! text (`BRL 1.234,56`); JSON carries plain numbers.

use std::str::FromStr;

use rust_decimal::{Decimal, RoundingStrategy};
use serde_json::Value;

use super::input::Idioma;

/// Rounds to 2 places, half away from zero (`x.xx5` → up), as the PRD asks. `round_dp` alone would be
/// banker's rounding.
pub fn round_half_up(d: Decimal) -> Decimal {
    d.round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero)
}

/// A decimal from a JSON number or numeric string. NaN, infinities, booleans and the rest give `None`.
pub fn decimal_from_json(v: &Value) -> Option<Decimal> {
    match v {
        // The shortest text that round-trips the double: `9.995` stays `9.995`, never `9.99499...`.
        Value::Number(n) => Decimal::from_str(&n.to_string())
            .or_else(|_| Decimal::from_scientific(&n.to_string()))
            .ok(),
        Value::String(s) => Decimal::from_str(s.trim()).ok(),
        _ => None,
    }
}

/// A money amount as a JSON number (rounded to 2 places).
pub fn money_json(d: Decimal) -> Value {
    // Two places even for whole amounts, so `100` is written `100.0`, a decimal number like the rest.
    let text = format!("{:.2}", round_half_up(d));
    serde_json::Number::from_str(&text)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// `BRL 1.234,56` (pt-BR, es) or `BRL 1,234.56` (en).
/// An amount as a person in a conversation reads it, on every channel: reais as people in Brazil write
/// them (`R$ 50,00`), another currency by its ISO code. The ten-stage flow's outputs (the PRD's shapes,
/// metadata in ISO codes and numbers) keep [`format_money`].
pub fn money_for_people(currency: &str, amount: Decimal, idioma: Idioma) -> String {
    if currency.is_empty() || currency.eq_ignore_ascii_case("BRL") {
        format_money("R$", amount, idioma)
    } else {
        format_money(currency, amount, idioma)
    }
}

/// A text for people with its `BRL 20,00` (a stage's message follows the ISO code, as the PRD's
/// outputs do) written `R$ 20,00`: what every reply a card holder reads goes through, whatever wrote it.
pub fn reais_in(text: &str) -> std::borrow::Cow<'_, str> {
    static AMOUNT: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        #[allow(clippy::expect_used)] // a constant pattern, tested below
        regex::Regex::new(r"\bBRL (-?\d[\d.]*,\d{2})\b").expect("pattern")
    });
    if !text.contains("BRL ") {
        return std::borrow::Cow::Borrowed(text);
    }
    AMOUNT.replace_all(text, "R$$ $1")
}

pub fn format_money(currency: &str, amount: Decimal, idioma: Idioma) -> String {
    let rounded = round_half_up(amount);
    let negative = rounded.is_sign_negative() && !rounded.is_zero();
    let text = format!("{:.2}", rounded.abs());
    let (int_part, frac) = text.split_once('.').unwrap_or((&text, "00"));
    let (thousands, decimal) = match idioma {
        Idioma::En => (',', '.'),
        Idioma::PtBr | Idioma::Es => ('.', ','),
    };
    let mut grouped = String::new();
    for (i, c) in int_part.chars().enumerate() {
        if i > 0 && (int_part.len() - i) % 3 == 0 {
            grouped.push(thousands);
        }
        grouped.push(c);
    }
    let sign = if negative { "-" } else { "" };
    format!("{currency} {sign}{grouped}{decimal}{frac}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reais_are_written_as_people_in_brazil_write_them() {
        assert_eq!(
            reais_in("Sua recarga de BRL 50,00 foi aprovada. Novo saldo: BRL 1.100,00."),
            "Sua recarga de R$ 50,00 foi aprovada. Novo saldo: R$ 1.100,00."
        );
        assert_eq!(
            reais_in("moeda BRL, 50.00"),
            "moeda BRL, 50.00",
            "an ISO code alone stays"
        );
        assert_eq!(
            money_for_people("BRL", Decimal::new(5000, 2), Idioma::PtBr),
            "R$ 50,00"
        );
        assert_eq!(
            money_for_people("USD", Decimal::new(5000, 2), Idioma::PtBr),
            "USD 50,00"
        );
    }
    use rust_decimal::dec;
    use serde_json::json;

    #[test]
    fn rounds_half_up_not_to_even() {
        assert_eq!(round_half_up(dec!(2.345)), dec!(2.35));
        assert_eq!(round_half_up(dec!(2.355)), dec!(2.36));
        assert_eq!(round_half_up(dec!(10.005)), dec!(10.01));
        assert_eq!(round_half_up(dec!(2.344)), dec!(2.34));
        assert_eq!(round_half_up(dec!(-2.345)), dec!(-2.35));
    }

    #[test]
    fn reads_numbers_and_strings_exactly() {
        assert_eq!(decimal_from_json(&json!(9.995)), Some(dec!(9.995)));
        assert_eq!(decimal_from_json(&json!("12.50")), Some(dec!(12.50)));
        assert_eq!(decimal_from_json(&json!(100)), Some(dec!(100)));
        assert_eq!(decimal_from_json(&json!(null)), None);
        assert_eq!(decimal_from_json(&json!("NaN")), None);
        assert_eq!(decimal_from_json(&json!(true)), None);
    }

    #[test]
    fn formats_per_language() {
        assert_eq!(format_money("BRL", dec!(12.5), Idioma::PtBr), "BRL 12,50");
        assert_eq!(format_money("BRL", dec!(1234.56), Idioma::PtBr), "BRL 1.234,56");
        assert_eq!(
            format_money("BRL", dec!(1234567.891), Idioma::PtBr),
            "BRL 1.234.567,89"
        );
        assert_eq!(format_money("BRL", dec!(1234.56), Idioma::En), "BRL 1,234.56");
        assert_eq!(format_money("BRL", dec!(0), Idioma::Es), "BRL 0,00");
        assert_eq!(format_money("BRL", dec!(999.999), Idioma::PtBr), "BRL 1.000,00");
    }

    #[test]
    fn money_json_is_a_number_with_two_places() {
        assert_eq!(money_json(dec!(12.5)), json!(12.5));
        assert_eq!(money_json(dec!(100.005)), json!(100.01));
        assert_eq!(money_json(dec!(50)).to_string(), "50.0");
    }
}

/// A money amount as a tool argument: the model may send a number (`50`, `50.5`) or text (`"50,00"`,
/// `"R$ 1.234,56"`); either way it becomes a `Decimal`, never a float.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoneyArg(pub Decimal);

impl<'de> serde::Deserialize<'de> for MoneyArg {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let parsed = match &v {
            Value::String(s) => super::parse::parse_money(s),
            other => decimal_from_json(other),
        };
        parsed
            .map(MoneyArg)
            .ok_or_else(|| serde::de::Error::custom(format!("valor inválido: {v}")))
    }
}

impl schemars::JsonSchema for MoneyArg {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "MoneyArg".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "number", "description": "Valor em reais, por exemplo 50 ou 50.5."})
    }

    fn inline_schema() -> bool {
        true
    }
}
