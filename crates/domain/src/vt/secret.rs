//! The payment token of a recharge (`recarga.meio_pagamento.token`) as a type that never shows its
//! value: written out (`Serialize`, `Display`, `Debug`) it is its *fingerprint* — the first and last
//! characters and a keyed hash, `tok…-9#3f2a9c01b7de` — so whatever the product stores, logs, traces or
//! answers carries the fingerprint, and two records of one token can still be compared. Only the
//! request to the recharge system sees the value ([`PaymentToken::reveal_in`]).
//!
//! The value lives as long as some `PaymentToken` made from it: a flow's parsed input holds it while
//! the flow runs. Stages hand their outputs to each other as JSON, where the token is its fingerprint;
//! reading a fingerprint back finds the value in a process-wide table of weak references, so a
//! fingerprint alone (a stored record, a token of a flow that ended) reveals nothing.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, PoisonError, RwLock, Weak};

use hmac::{Hmac, Mac};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use sha2::Sha256;

use vt_contract::redact::fingerprint::{ELLIPSIS, HASH_HEX, HASH_MARK};

/// The key of the product's keyed hashes ([`keyed_hash`]: token fingerprints, the store's blind
/// indexes): the store's index key once [`set_index_key`] ran, else a random one for this process
/// (unit tests, tools that keep nothing).
static KEY: LazyLock<RwLock<[u8; 32]>> = LazyLock::new(|| {
    let mut key = [0u8; 32];
    key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    RwLock::new(key)
});

/// The values of the tokens alive in this process, by fingerprint.
static LIVE: LazyLock<Mutex<HashMap<String, Weak<str>>>> = LazyLock::new(Mutex::default);

/// Keys the product's keyed hashes with the store's index key (a stable key: what one process stored
/// compares with another's).
pub fn set_index_key(key: [u8; 32]) {
    *KEY.write().unwrap_or_else(PoisonError::into_inner) = key;
}

/// HMAC-SHA256 of `value` under the index key, in `domain` (so one value hashes apart in each use),
/// as `hex_digits` hex digits.
pub fn keyed_hash(domain: &str, value: &str, hex_digits: usize) -> String {
    let key = *KEY.read().unwrap_or_else(PoisonError::into_inner);
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&key).expect("HMAC takes a key of any length");
    mac.update(domain.as_bytes());
    mac.update(b"\0");
    mac.update(value.as_bytes());
    let mut hash = hex::encode(mac.finalize().into_bytes());
    hash.truncate(hex_digits);
    hash
}

/// The blind index of a card (its digits): a keyed hash, the same for the same card in every process
/// of one store, useless without the store's index key. The store's card index and the simulator's
/// book both key cards by it.
pub fn card_index(digits: &str) -> String {
    keyed_hash("vt-agent/cartao", digits, 32)
}

/// A payment token. See the module's documentation.
#[derive(Clone, PartialEq, Eq)]
pub struct PaymentToken {
    fingerprint: String,
    /// `None` for a token read back from its fingerprint after the flow that had its value ended.
    value: Option<Arc<str>>,
}

impl PaymentToken {
    /// A token from its value, as a caller sent it.
    pub fn new(value: &str) -> Self {
        let fingerprint = fingerprint(value);
        let value: Arc<str> = Arc::from(value);
        let mut live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
        // Dead entries go when the table has grown: a long `serve` sees many flows.
        if live.len() >= 1024 {
            live.retain(|_, v| v.strong_count() > 0);
        }
        live.insert(fingerprint.clone(), Arc::downgrade(&value));
        Self {
            fingerprint,
            value: Some(value),
        }
    }

    /// What stands for the token everywhere but in the recharge request.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Whether `text` is a fingerprint, not a token's value.
    pub(crate) fn is_fingerprint(text: &str) -> bool {
        vt_contract::redact::fingerprint::is(text)
    }

    /// The token a fingerprint stands for, with its value while a token made from the value is alive.
    fn from_fingerprint(fingerprint: &str) -> Self {
        let value = LIVE
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(fingerprint)
            .and_then(Weak::upgrade);
        Self {
            fingerprint: fingerprint.to_owned(),
            value,
        }
    }

    /// Replaces the fingerprint at `body.meio_pagamento.token` by the token's value: the one place the
    /// value is written, the body of the request to the recharge system. `Err` when the value is no
    /// longer known (the request must not be sent with a fingerprint in its place).
    pub(crate) fn reveal_in(body: &mut Value) -> Result<(), TokenUnavailable> {
        let Some(slot) = body.pointer_mut("/meio_pagamento/token") else {
            return Ok(());
        };
        let Some(text) = slot.as_str() else {
            return Ok(());
        };
        if !Self::is_fingerprint(text) {
            return Ok(());
        }
        let value = Self::from_fingerprint(text).value.ok_or(TokenUnavailable)?;
        *slot = Value::String(value.to_string());
        Ok(())
    }
}

/// The value of a token is no longer known in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("o token de pagamento não está mais disponível")]
pub(crate) struct TokenUnavailable;

/// `tok…-9#3f2a9c01b7de`: a few characters of the value (none of a short one) and the keyed hash.
fn fingerprint(value: &str) -> String {
    let chars: Vec<char> = value.chars().collect();
    let shown = match chars.len() {
        n if n >= 10 => format!(
            "{}{ELLIPSIS}{}",
            chars[..3].iter().collect::<String>(),
            chars[n - 2..].iter().collect::<String>()
        ),
        n if n >= 6 => format!("{ELLIPSIS}{}", chars[n - 2..].iter().collect::<String>()),
        _ => ELLIPSIS.to_string(),
    };
    let hash = keyed_hash("vt-agent/payment-token", value, HASH_HEX);
    format!("{shown}{HASH_MARK}{hash}")
}

impl fmt::Debug for PaymentToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PaymentToken({})", self.fingerprint)
    }
}

impl fmt::Display for PaymentToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.fingerprint)
    }
}

impl Serialize for PaymentToken {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.fingerprint)
    }
}

/// A value the caller sent, or a fingerprint the product wrote (read back between stages).
impl<'de> Deserialize<'de> for PaymentToken {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Ok(if Self::is_fingerprint(&text) {
            Self::from_fingerprint(&text)
        } else {
            Self::new(&text)
        })
    }
}

impl JsonSchema for PaymentToken {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PaymentToken".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        String::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_value_is_never_written_out() {
        let token = PaymentToken::new("tok-secret-9");
        let shown = [
            vt_contract::json::to_text(&token).expect("json"),
            format!("{token}"),
            format!("{token:?}"),
        ];
        for text in shown {
            assert!(
                !text.contains("tok-secret-9") && text.contains("tok…-9#"),
                "{text}"
            );
        }
        assert!(PaymentToken::is_fingerprint(token.fingerprint()));
        assert!(!PaymentToken::is_fingerprint("tok-secret-9"));
    }

    #[test]
    fn short_tokens_show_less_and_equal_tokens_compare() {
        assert!(fingerprint("abc").starts_with("…#"));
        assert!(fingerprint("abcdef").starts_with("…ef#"));
        assert_eq!(fingerprint("tok_x12345"), fingerprint("tok_x12345"));
        assert_ne!(fingerprint("tok_x12345"), fingerprint("tok_x12346"));
    }

    #[test]
    fn a_fingerprint_reveals_the_value_only_while_a_token_of_it_lives() {
        let token = PaymentToken::new("tok-vivo-123");
        let mut body = serde_json::json!({"meio_pagamento": {"tipo": "pix", "token": token}});
        let read: PaymentToken =
            vt_contract::json::from_value(body["meio_pagamento"]["token"].clone()).expect("read back");
        assert_eq!(read, token, "read back between stages, the value is found");
        PaymentToken::reveal_in(&mut body).expect("alive");
        assert_eq!(body["meio_pagamento"]["token"], "tok-vivo-123");

        let gone = PaymentToken::new("tok-morto-456").fingerprint().to_owned();
        let mut body = serde_json::json!({"meio_pagamento": {"tipo": "pix", "token": gone}});
        assert_eq!(PaymentToken::reveal_in(&mut body), Err(TokenUnavailable));
        let mut none = serde_json::json!({"meio_pagamento": {"tipo": "pix"}});
        assert_eq!(PaymentToken::reveal_in(&mut none), Ok(()));
    }
}
