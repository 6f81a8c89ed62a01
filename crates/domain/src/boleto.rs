//! A bank boleto's digitable line (*linha digitável*, FEBRABAN's "bloqueto de cobrança"), checked before
//! it is shown: 47 digits in five fields — three carrying the barcode's bank, currency and free field,
//! each closed by a modulo-10 digit; the barcode's general modulo-11 digit; the due-date factor and the
//! amount in cents.
//!
//! Written here rather than taken from a crate: the one published (`boleto-utils` 0.1) reads amounts
//! as `f64` and builds them by truncating `valor * 100.0` (R$ 0,29 becomes 28 cents), and cannot put a
//! free field in a line it issues — and a line's amount is money this product checks to the cent.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a line is never shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BoletoError {
    #[error("a linha digitável do boleto não tem 47 dígitos")]
    Tamanho,
    #[error("a linha digitável é de uma conta de consumo, não de um boleto de cobrança")]
    Arrecadacao,
    #[error("o dígito verificador do campo {0} da linha digitável não confere")]
    DigitoCampo(u8),
    #[error("o dígito verificador geral da linha digitável não confere")]
    DigitoGeral,
    #[error("a moeda da linha digitável não é o real")]
    Moeda,
    #[error("o valor da linha digitável não é o da recarga")]
    Valor,
    #[error("o vencimento da linha digitável não é o informado")]
    Vencimento,
}

/// Business days a bank takes to clear a boleto's payment (FEBRABAN's D+1 to D+3): a recharge paid by
/// boleto is credited within them, and followed until they passed after its due date.
pub const COMPENSACAO_DIAS_UTEIS: u32 = 3;

/// A recharge's boleto as the card holder is shown it: the line (as banks print it) and its due date,
/// both checked against the recharge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Boleto {
    pub linha_digitavel: String,
    pub vencimento: NaiveDate,
}

impl Boleto {
    /// The recharge system's `boleto` (its contract's `BoletoResposta`), checked: the line's digits,
    /// that it charges `valor`, and that it falls due on the day the answer says.
    pub fn from_answer(answer: &Value, valor: Option<Decimal>) -> Result<Self, BoletoError> {
        let text = |k: &str| answer.get(k).and_then(Value::as_str);
        let vencimento = text("vencimento")
            .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
            .ok_or(BoletoError::Vencimento)?;
        let linha = text("linha_digitavel").ok_or(BoletoError::Tamanho)?;
        let linha = LinhaDigitavel::checked(linha, valor.ok_or(BoletoError::Valor)?, vencimento)?;
        Ok(Self {
            linha_digitavel: linha.formatted(),
            vencimento,
        })
    }

    /// The due date as people read it (`28/11/2026`).
    pub fn vence_em(&self) -> String {
        self.vencimento.format("%d/%m/%Y").to_string()
    }
}

/// The day the due-date factor counted from until it reached 9999 (2025-02-21).
const BASE_ANTIGA: (i32, u32, u32) = (1997, 10, 7);
/// The day the factor started again at 1000, when the old count ran out.
const BASE_NOVA: (i32, u32, u32) = (2025, 2, 22);

fn date((y, m, d): (i32, u32, u32)) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).unwrap_or_default()
}

/// A digitable line whose five fields' check digits agree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinhaDigitavel {
    digits: String,
}

impl LinhaDigitavel {
    /// Reads `text` (digits, with or without the dots and spaces it is printed with) and checks its
    /// three field digits, its general digit and its currency.
    pub fn parse(text: &str) -> Result<Self, BoletoError> {
        let digits: String = text.chars().filter(|c| !matches!(c, ' ' | '.')).collect();
        if digits.len() != 47 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(BoletoError::Tamanho);
        }
        if digits.starts_with('8') {
            return Err(BoletoError::Arrecadacao);
        }
        for (n, (start, end)) in [(0, 9), (10, 20), (21, 31)].into_iter().enumerate() {
            if mod10(&digits[start..end]) != digit(&digits, end) {
                return Err(BoletoError::DigitoCampo(n as u8 + 1));
            }
        }
        let linha = Self { digits };
        let barcode = linha.barcode();
        if mod11(&format!("{}{}", &barcode[..4], &barcode[5..])) != digit(&barcode, 4) {
            return Err(BoletoError::DigitoGeral);
        }
        if &barcode[3..4] != "9" {
            return Err(BoletoError::Moeda);
        }
        Ok(linha)
    }

    /// The line, checked, and that it charges exactly `valor` (in reais) and falls due on `vencimento`.
    pub fn checked(text: &str, valor: Decimal, vencimento: NaiveDate) -> Result<Self, BoletoError> {
        let linha = Self::parse(text)?;
        if Some(linha.centavos()) != centavos(valor) {
            return Err(BoletoError::Valor);
        }
        if Some(linha.fator()) != fator(vencimento) {
            return Err(BoletoError::Vencimento);
        }
        Ok(linha)
    }

    /// Issues the line of bank `banco` (three digits) for `valor` falling due on `vencimento`, with the
    /// bank's 25-digit free field (its own numbering: agreement, our number…). `None` when a part does
    /// not fit (a date outside the factor's range, an amount past ten digits of cents).
    pub fn emitir(banco: &str, vencimento: NaiveDate, valor: Decimal, livre: &str) -> Option<Self> {
        let ok = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_digit());
        if !ok(banco, 3) || !ok(livre, 25) {
            return None;
        }
        let fator = fator(vencimento)?;
        let valor = centavos(valor).filter(|c| *c < 10_000_000_000)?;
        let tail = format!("{fator:04}{valor:010}{livre}");
        let general = mod11(&format!("{banco}9{tail}"));
        let barcode = format!("{banco}9{general}{tail}");
        let campo = |s: &str| format!("{s}{}", mod10(s));
        let digits = format!(
            "{}{}{}{}{}",
            campo(&format!("{}{}", &barcode[..4], &barcode[19..24])),
            campo(&barcode[24..34]),
            campo(&barcode[34..44]),
            &barcode[4..5],
            &barcode[5..19],
        );
        Some(Self { digits })
    }

    /// The 47 digits.
    pub fn digits(&self) -> &str {
        &self.digits
    }

    /// The line as banks print it: `AAABC.CCCCX DDDDD.DDDDDY EEEEE.EEEEEZ K UUUUVVVVVVVVVV`.
    pub fn formatted(&self) -> String {
        let d = &self.digits;
        format!(
            "{}.{} {}.{} {}.{} {} {}",
            &d[0..5],
            &d[5..10],
            &d[10..15],
            &d[15..21],
            &d[21..26],
            &d[26..32],
            &d[32..33],
            &d[33..47]
        )
    }

    /// The amount, in cents.
    pub fn centavos(&self) -> u64 {
        self.digits[37..47].parse().unwrap_or_default()
    }

    /// The due-date factor (0: no due date).
    pub fn fator(&self) -> u16 {
        self.digits[33..37].parse().unwrap_or_default()
    }

    /// The 44-digit barcode the line was made from.
    fn barcode(&self) -> String {
        let d = &self.digits;
        format!(
            "{}{}{}{}{}{}",
            &d[0..4],
            &d[32..33],
            &d[33..47],
            &d[4..9],
            &d[10..20],
            &d[21..31]
        )
    }
}

/// The due-date factor of `vencimento`: days since 1997-10-07 until 2025-02-21 (factor 9999), then
/// 1000 again from 2025-02-22 on, as FEBRABAN restarted it. `None` before the factor's first day or past
/// its second run.
pub fn fator(vencimento: NaiveDate) -> Option<u16> {
    let days = if vencimento >= date(BASE_NOVA) {
        1000 + (vencimento - date(BASE_NOVA)).num_days()
    } else {
        (vencimento - date(BASE_ANTIGA)).num_days()
    };
    u16::try_from(days).ok().filter(|f| (1000..=9999).contains(f))
}

fn centavos(valor: Decimal) -> Option<u64> {
    (valor.round_dp(2) * Decimal::ONE_HUNDRED).to_u64()
}

fn digit(s: &str, at: usize) -> u32 {
    u32::from(s.as_bytes()[at] - b'0')
}

/// Modulo 10, weights 2, 1, 2… from the right; a product past 9 counts its two digits.
fn mod10(s: &str) -> u32 {
    let sum: u32 = s
        .bytes()
        .rev()
        .zip([2, 1].into_iter().cycle())
        .map(|(b, w)| {
            let p = u32::from(b - b'0') * w;
            p / 10 + p % 10
        })
        .sum();
    (10 - sum % 10) % 10
}

/// The barcode's general digit: modulo 11, weights 2..=9 from the right; 0, 10 and 11 become 1.
fn mod11(s: &str) -> u32 {
    let sum: u32 = s
        .bytes()
        .rev()
        .zip((2..=9).cycle())
        .map(|(b, w)| u32::from(b - b'0') * w)
        .sum();
    match 11 - sum % 11 {
        10 | 11 => 1,
        d => d,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::dec;

    fn day(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).expect("valid")
    }

    /// FEBRABAN's own dates for the factor, on both sides of its restart.
    #[test]
    fn the_due_date_factor_follows_febraban_across_the_restart() {
        assert_eq!(fator(day(2000, 7, 3)), Some(1000));
        assert_eq!(fator(day(2010, 1, 1)), Some(4469));
        assert_eq!(fator(day(2025, 2, 21)), Some(9999));
        assert_eq!(fator(day(2025, 2, 22)), Some(1000));
        assert_eq!(fator(day(2025, 2, 23)), Some(1001));
        assert_eq!(fator(day(1999, 1, 1)), None);
    }

    /// A line a bank issued (Caixa, R$ 214,03 due 2022-05-10; the barcode
    /// 10499898100000214032006561000100040099726390 is a published test vector), read and checked.
    #[test]
    fn a_published_line_reads_and_checks() {
        let line = "10492006506100010004200997263900989810000021403";
        let linha = LinhaDigitavel::checked(line, dec!(214.03), day(2022, 5, 10)).expect("valid");
        assert_eq!(linha.barcode(), "10499898100000214032006561000100040099726390");
        assert_eq!(
            linha.formatted(),
            "10492.00650 61000.100042 00997.263900 9 89810000021403"
        );
        assert_eq!(LinhaDigitavel::parse(&linha.formatted()).expect("valid"), linha);
        assert_eq!(
            LinhaDigitavel::checked(line, dec!(214.04), day(2022, 5, 10)),
            Err(BoletoError::Valor)
        );
        assert_eq!(
            LinhaDigitavel::checked(line, dec!(214.03), day(2022, 5, 11)),
            Err(BoletoError::Vencimento)
        );
    }

    #[test]
    fn a_line_issued_here_checks_and_any_one_digit_changed_does_not() {
        let livre = "0000000000000000001234567";
        let linha = LinhaDigitavel::emitir("999", day(2026, 11, 28), dec!(0.29), livre).expect("valid");
        assert_eq!(linha.centavos(), 29, "no cent lost to a float");
        LinhaDigitavel::checked(linha.digits(), dec!(0.29), day(2026, 11, 28)).expect("valid");
        for at in 0..47 {
            let mut bytes = linha.digits().as_bytes().to_vec();
            bytes[at] = b'0' + (bytes[at] - b'0' + 1) % 10;
            let changed = String::from_utf8(bytes).expect("valid");
            assert!(
                LinhaDigitavel::checked(&changed, dec!(0.29), day(2026, 11, 28)).is_err(),
                "digit {at} changed still checks"
            );
        }
        assert_eq!(LinhaDigitavel::parse("123"), Err(BoletoError::Tamanho));
        assert_eq!(
            LinhaDigitavel::parse(&"8".repeat(47)),
            Err(BoletoError::Arrecadacao)
        );
        assert!(LinhaDigitavel::emitir("99", day(2026, 11, 28), dec!(1), livre).is_none());
        assert!(LinhaDigitavel::emitir("999", day(2060, 1, 1), dec!(1), livre).is_none());
    }
}
