//! Pix, the way card holders pay in Brazil: the API Pix every receiving PSP exposes (Banco Central,
//! `../shared/reference/pix/`), the BR Code a payer copies or scans, and the charge ids derived from a
//! recharge's key so that a retry or a restart issues the same charge.

pub mod api;
pub mod automatico;
mod brcode;
pub mod qr;
pub mod textos;

pub(crate) use brcode::spans_in as br_code_spans;
pub use brcode::{BrCode, BrCodeError, dynamic, recorrencia};

use sha2::{Digest, Sha256};

/// The charge id (`txid`, 26–35 of `[a-zA-Z0-9]`) of a recharge's `n`-th code (0: the first; each
/// "novo código" the next): the same key and `n` are always the same charge, so a retry or a
/// crash-and-restart re-issues it instead of charging twice.
pub fn txid(recharge_key: &str, n: u32) -> String {
    let digest = Sha256::digest(format!("{recharge_key}:{n}").as_bytes());
    format!("vt{}", &hex::encode(digest)[..32])
}

/// The kind of Pix key `chave` is, as WhatsApp's order names it (`CPF`, `CNPJ`, `EMAIL`, `PHONE`,
/// or `EVP`, the random key).
pub fn tipo_chave(chave: &str) -> &'static str {
    let digits = chave.bytes().all(|b| b.is_ascii_digit());
    if chave.contains('@') {
        "EMAIL"
    } else if chave.starts_with('+') {
        "PHONE"
    } else if digits && chave.len() == 11 {
        "CPF"
    } else if digits && chave.len() == 14 {
        "CNPJ"
    } else {
        "EVP"
    }
}

/// The id of the refund of payment `end_to_end_id` (`[a-zA-Z0-9]{1,35}`): one payment, one refund,
/// however many times it is asked.
pub fn refund_id(end_to_end_id: &str) -> String {
    let digest = Sha256::digest(format!("devolucao:{end_to_end_id}").as_bytes());
    format!("vt{}", &hex::encode(digest)[..30])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_told_by_its_shape() {
        assert_eq!(tipo_chave("recargas@operadora.example.com.br"), "EMAIL");
        assert_eq!(tipo_chave("+5511999998888"), "PHONE");
        assert_eq!(tipo_chave("12345678909"), "CPF");
        assert_eq!(tipo_chave("39580525000189"), "CNPJ");
        assert_eq!(tipo_chave("123e4567-e12b-12d1-a456-426655440000"), "EVP");
    }

    #[test]
    fn a_txid_is_the_same_for_the_same_code_of_the_same_recharge() {
        let key = "c1e19a3e-7315-5050-8582-266afc37a1dc";
        let first = txid(key, 0);
        assert_eq!(first, txid(key, 0));
        assert_ne!(first, txid(key, 1), "a new code is a new charge");
        assert_ne!(first, txid("b2ebf279-4290-53cf-a3bc-2e06c4dd4bb9", 0));
        for id in [first, txid(key, 3), txid("", 0)] {
            assert!((26..=35).contains(&id.len()), "{id}");
            assert!(id.bytes().all(|b| b.is_ascii_alphanumeric()), "{id}");
        }
    }
}
