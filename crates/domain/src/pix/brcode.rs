//! The code a payer copies or scans: a BR Code (EMV QR Code, merchant presented), checked before it is
//! shown. A string of TLV fields (two-digit id, two-digit length, value) ending in field `63`, the
//! CRC16-CCITT-FALSE of everything before its value, in four upper-case hex digits.

use rust_decimal::Decimal;

/// CRC16-CCITT-FALSE: poly 0x1021, init 0xFFFF, no reflection, no final xor.
const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_IBM_3740);

/// Why a code is never shown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrCodeError {
    #[error("o código Pix não é uma sequência de campos válida (campo {0})")]
    Malformed(String),
    #[error("o código Pix não termina no campo de verificação (63)")]
    NoCrc,
    #[error("o dígito de verificação do código Pix não confere")]
    WrongCrc,
    #[error("o código Pix não é de pagamento Pix (br.gov.bcb.pix)")]
    NotPix,
    #[error("o valor do código Pix não é o da recarga")]
    WrongAmount,
    #[error("o código Pix não autoriza a recorrência pedida")]
    WrongRecurrence,
}

/// A BR Code whose fields and CRC were checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrCode {
    text: String,
    fields: Vec<(String, String)>,
}

impl BrCode {
    /// Reads `text` field by field and checks its CRC and that it is a Pix code.
    pub fn parse(text: &str) -> Result<Self, BrCodeError> {
        let fields = tlv(text)?;
        let Some((id, crc)) = fields.last() else {
            return Err(BrCodeError::NoCrc);
        };
        if id != "63" || crc.len() != 4 {
            return Err(BrCodeError::NoCrc);
        }
        if crc != &crc16(&text[..text.len() - 4]) {
            return Err(BrCodeError::WrongCrc);
        }
        let code = Self {
            text: text.to_owned(),
            fields,
        };
        let account = code.field("26").map(tlv).transpose()?.unwrap_or_default();
        if !account
            .iter()
            .any(|(id, v)| id == "00" && v.eq_ignore_ascii_case("br.gov.bcb.pix"))
        {
            return Err(BrCodeError::NotPix);
        }
        Ok(code)
    }

    /// The code, checked, and that it charges exactly `amount` (a code without an amount, which lets
    /// the payer choose one, is refused as well).
    pub fn checked(text: &str, amount: Decimal) -> Result<Self, BrCodeError> {
        let code = Self::parse(text)?;
        match code.amount() {
            Some(a) if a == amount => Ok(code),
            _ => Err(BrCodeError::WrongAmount),
        }
    }

    /// Field `54`, the amount in reais.
    pub fn amount(&self) -> Option<Decimal> {
        self.field("54")?.parse().ok()
    }

    /// Field `59`, the name of who receives.
    pub fn nome(&self) -> Option<&str> {
        self.field("59")
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn field(&self, id: &str) -> Option<&str> {
        self.fields.iter().find(|(i, _)| i == id).map(|(_, v)| v.as_str())
    }

    /// Field `80`'s location: the Pix Automático recurrence the code authorises (journeys 2–4).
    pub fn recorrencia(&self) -> Option<String> {
        let fields = tlv(self.field("80")?).ok()?;
        fields.into_iter().find(|(id, _)| id == "25").map(|(_, v)| v)
    }

    /// The code, checked, and that it authorises the recurrence at `location` (and charges nothing
    /// now: journey 2).
    pub fn checked_rec(text: &str, location: &str) -> Result<Self, BrCodeError> {
        let code = Self::parse(text)?;
        if code.recorrencia().as_deref() != Some(location) || code.amount().is_some() {
            return Err(BrCodeError::WrongRecurrence);
        }
        Ok(code)
    }
}

/// The code that authorises the Pix Automático recurrence whose payload lives at `location` (journey
/// 2: nothing charged now), as a PSP issues it.
pub fn recorrencia(location: &str, name: &str, city: &str) -> String {
    let gui = field("00", "br.gov.bcb.pix");
    let mut text = [
        field("00", "01"),
        field("26", &gui),
        field("52", "0000"),
        field("53", "986"),
        field("58", "BR"),
        field("59", &name.chars().take(25).collect::<String>()),
        field("60", &city.chars().take(15).collect::<String>()),
        field("62", &field("05", "***")),
        field("80", &(gui.clone() + &field("25", location))),
    ]
    .concat();
    text.push_str("6304");
    let crc = crc16(&text);
    text + &crc
}

/// A dynamic code (used once) for a charge whose payload lives at `location` (the PSP's URL, without
/// scheme), as a PSP issues it. `name` and `city` are cut to the standard's 25 and 15 characters.
pub fn dynamic(location: &str, amount: Decimal, name: &str, city: &str) -> String {
    let account = field("00", "br.gov.bcb.pix") + &field("25", location);
    let mut text = [
        field("00", "01"),
        field("01", "12"),
        field("26", &account),
        field("52", "0000"),
        field("53", "986"),
        field("54", &format!("{:.2}", amount.round_dp(2))),
        field("58", "BR"),
        field("59", &name.chars().take(25).collect::<String>()),
        field("60", &city.chars().take(15).collect::<String>()),
        field("62", &field("05", "***")),
    ]
    .concat();
    text.push_str("6304");
    let crc = crc16(&text);
    text + &crc
}

fn field(id: &str, value: &str) -> String {
    format!("{id}{:02}{value}", value.chars().count())
}

/// The CRC field's value for `text` (everything up to and including `6304`).
pub(crate) fn crc16(text: &str) -> String {
    format!("{:04X}", CRC16.checksum(text.as_bytes()))
}

/// The fields of a TLV string, in order. Lengths count characters (a name may carry accents).
fn tlv(text: &str) -> Result<Vec<(String, String)>, BrCodeError> {
    let chars: Vec<char> = text.chars().collect();
    let mut fields = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let id: String = chars
            .get(at..at + 2)
            .ok_or_else(|| malformed(at))?
            .iter()
            .collect();
        let len: String = chars
            .get(at + 2..at + 4)
            .ok_or_else(|| malformed(at))?
            .iter()
            .collect();
        let len: usize = len.parse().map_err(|_| BrCodeError::Malformed(id.clone()))?;
        let value: String = chars
            .get(at + 4..at + 4 + len)
            .ok_or_else(|| BrCodeError::Malformed(id.clone()))?
            .iter()
            .collect();
        if !id.chars().all(|c| c.is_ascii_digit()) {
            return Err(BrCodeError::Malformed(id));
        }
        fields.push((id, value));
        at += 4 + len;
    }
    Ok(fields)
}

fn malformed(at: usize) -> BrCodeError {
    BrCodeError::Malformed(format!("na posição {at}"))
}

/// Where BR Codes stand in `text`, by their structure: from a payload format indicator `000201` to
/// the first `6304` whose four hex digits are the CRC of what they close. What a text shows so is a
/// code the payer copies (a charge's, a recurrence's authorisation), never a card to mask.
pub(crate) fn spans_in(text: &str) -> Vec<std::ops::Range<usize>> {
    /// The longest BR Code looked for (the format allows 512 characters).
    const MAX: usize = 512;
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find("000201") {
        let start = from + found;
        let mut window_end = (start + MAX).min(text.len());
        while !text.is_char_boundary(window_end) {
            window_end -= 1;
        }
        let mut end = None;
        let mut search = start + 6;
        while search < window_end {
            let Some(at) = text[search..window_end].find("6304") else {
                break;
            };
            let crc_at = search + at + 4;
            if let Some(crc) = text.get(crc_at..crc_at + 4)
                && crc.bytes().all(|b| b.is_ascii_hexdigit())
                && crc16(&text[start..crc_at]).eq_ignore_ascii_case(crc)
            {
                end = Some(crc_at + 4);
                break;
            }
            search += at + 1;
        }
        match end {
            Some(end) => {
                spans.push(start..end);
                from = end;
            }
            None => from = start + 1,
        }
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spec's own examples, as `../shared/reference/pix/README.md` gives them.
    const STATIC: &str = "00020126180014br.gov.bcb.pix5204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***80800014br.gov.bcb.pix2558pix.example.com/qr/v2/rec/2353c790eefb11eaadc10242ac120002630462C9";
    const DYNAMIC: &str = "00020101021226760014br.gov.bcb.pix2554pix.example.com/qr/v2/8b3da2f39a4140d1a91abd93113bd4415204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***80800014br.gov.bcb.pix2558pix.example.com/qr/v2/rec/94ed2badcbc04c15b0bb7fa35319489063047741";

    fn reais(s: &str) -> Decimal {
        s.parse().expect("decimal")
    }

    const COBV: &str = "00020101021226810014br.gov.bcb.pix2559pix.example.com/qr/v2/cobv/1e6c54d3ec9449b7a7fc53b6b0f998e75204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***80800014br.gov.bcb.pix2558pix.example.com/qr/v2/rec/3ffa640fa4f14080adccb949fa2dc0d06304A441";

    #[test]
    fn the_specs_examples_are_valid_codes() {
        for text in [STATIC, DYNAMIC, COBV] {
            let code = BrCode::parse(text).expect("valid");
            assert_eq!(code.as_str(), text);
            assert_eq!(code.amount(), None, "the examples carry no amount");
            assert_eq!(code.nome(), Some("Fulano de Tal"));
        }
        assert_eq!(crc16(&STATIC[..STATIC.len() - 4]), "62C9");
        assert_eq!(crc16(&DYNAMIC[..DYNAMIC.len() - 4]), "7741");
    }

    #[test]
    fn a_recurrence_code_is_issued_as_the_spec_writes_it() {
        let location = "pix.example.com/qr/v2/rec/2353c790eefb11eaadc10242ac120002";
        assert_eq!(recorrencia(location, "Fulano de Tal", "BRASILIA"), STATIC);
        let code = BrCode::checked_rec(STATIC, location).expect("checks");
        assert_eq!(code.recorrencia().as_deref(), Some(location));
        assert!(BrCode::checked_rec(STATIC, "pix.example.com/qr/v2/rec/outra").is_err());
        assert!(
            BrCode::checked_rec(
                DYNAMIC,
                "pix.example.com/qr/v2/rec/94ed2badcbc04c15b0bb7fa353194890"
            )
            .is_ok(),
            "journey 3's code authorises too"
        );
    }

    #[test]
    fn a_wrong_crc_or_a_changed_field_is_refused() {
        let bad_crc = format!("{}62C8", &STATIC[..STATIC.len() - 4]);
        assert_eq!(BrCode::parse(&bad_crc), Err(BrCodeError::WrongCrc));
        let changed = STATIC.replace("Fulano de Tal", "Fulano de Tau");
        assert_eq!(BrCode::parse(&changed), Err(BrCodeError::WrongCrc));
        assert_eq!(
            BrCode::parse(&STATIC[..STATIC.len() - 8]),
            Err(BrCodeError::NoCrc)
        );
        assert!(matches!(BrCode::parse("0002"), Err(BrCodeError::Malformed(_))));
        assert!(matches!(BrCode::parse(""), Err(BrCodeError::NoCrc)));
    }

    #[test]
    fn an_issued_code_is_valid_and_charges_its_amount() {
        let text = dynamic(
            "pix.example.com/qr/v2/cobv/abc",
            reais("20"),
            "Operadora de Transporte Urbano",
            "Fortaleza",
        );
        let code = BrCode::checked(&text, reais("20.00")).expect("valid");
        assert_eq!(code.amount(), Some(reais("20.00")));
        assert!(text.contains("5405"), "{text}");
        assert!(
            text.contains("5925Operadora de Transporte U"),
            "the name is cut to 25: {text}"
        );
        assert_eq!(
            BrCode::checked(&text, reais("20.01")),
            Err(BrCodeError::WrongAmount)
        );
        assert_eq!(
            BrCode::checked(DYNAMIC, reais("20")),
            Err(BrCodeError::WrongAmount)
        );
    }

    #[test]
    fn a_code_for_another_scheme_is_not_pix() {
        let account = field("00", "com.example.pay") + &field("01", "chave");
        let mut text = [field("00", "01"), field("26", &account), field("54", "1.00")].concat();
        text.push_str("6304");
        let crc = crc16(&text);
        assert_eq!(BrCode::parse(&(text + &crc)), Err(BrCodeError::NotPix));
    }
}
