//! The console's configuration and the keys it signs with: one secret, domain-separated for sessions,
//! forms and the audit hash.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::Utc;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

/// `[console]` in the configuration file.
#[derive(Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleConfig {
    /// Signs the sessions and the forms, and keys the audit hash of the console's lookups
    /// (`VT_CONSOLE_SECRET`, at least 32 characters). Unset: a random secret of this process, so
    /// sessions end when `serve` stops and are not shared between instances.
    pub secret: Option<String>,
    /// How long a sign-in lasts.
    pub session_minutes: u32,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        Self {
            secret: None,
            session_minutes: 8 * 60,
        }
    }
}

impl std::fmt::Debug for ConsoleConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleConfig")
            .field("secret", &self.secret.as_ref().map(|_| "<set>"))
            .field("session_minutes", &self.session_minutes)
            .finish()
    }
}

impl ConsoleConfig {
    /// The error is `(field, why)`.
    pub(crate) fn validate(&self) -> Result<(), (&'static str, &'static str)> {
        if self.secret.as_ref().is_some_and(|s| s.len() < 32) {
            return Err(("console.secret", "precisa de pelo menos 32 caracteres"));
        }
        if !(1..=7 * 24 * 60).contains(&self.session_minutes) {
            return Err(("console.session_minutes", "deve ser de 1 minuto a 10080 (7 dias)"));
        }
        Ok(())
    }

    pub(crate) fn register_secrets(&self) {
        if let Some(s) = &self.secret {
            vt_contract::redact::register_secret(s);
        }
    }
}

/// The console's state inside the API's (`AppState`).
pub(crate) struct Console {
    pub keys: Keys,
    /// The desk's log as it grows, for the pages listening ([`super::feed`]).
    pub live: super::feed::Feed,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

impl Console {
    pub(crate) fn new(config: &ConsoleConfig) -> Self {
        let secret = match &config.secret {
            Some(s) => s.as_bytes().to_vec(),
            None => [nonce(), nonce()].concat().into_bytes(),
        };
        Self {
            keys: Keys::new(&secret, i64::from(config.session_minutes) * 60),
            live: super::feed::Feed::default(),
        }
    }
}

/// The console's keys: one secret, domain-separated for sessions, forms and the audit hash.
#[derive(Clone)]
pub struct Keys {
    secret: Vec<u8>,
    pub session_secs: i64,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("session_secs", &self.session_secs)
            .finish_non_exhaustive()
    }
}

impl Keys {
    pub fn new(secret: &[u8], session_secs: i64) -> Self {
        Self {
            secret: secret.to_vec(),
            session_secs,
        }
    }

    fn mac(&self, domain: &str, parts: &[&str]) -> Hmac<Sha256> {
        #[allow(clippy::expect_used)] // HMAC takes a key of any length.
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).expect("hmac key");
        mac.update(domain.as_bytes());
        for p in parts {
            mac.update(b"|");
            mac.update(p.as_bytes());
        }
        mac
    }

    fn sign(&self, domain: &str, parts: &[&str]) -> String {
        hex::encode(self.mac(domain, parts).finalize().into_bytes())
    }

    fn verify(&self, domain: &str, parts: &[&str], signature: &str) -> bool {
        hex::decode(signature).is_ok_and(|sig| self.mac(domain, parts).verify_slice(&sig).is_ok())
    }

    /// A session cookie's value for key `name`, valid until `expires` (Unix seconds).
    pub fn session_value(&self, name: &str, expires: i64, nonce: &str) -> String {
        let name = URL_SAFE_NO_PAD.encode(name);
        let expires = expires.to_string();
        let mac = self.sign("sessao", &[&name, &expires, nonce]);
        format!("{name}.{expires}.{nonce}.{mac}")
    }

    /// The key name and nonce of a genuine, unexpired session cookie.
    pub(super) fn open_session(&self, value: &str) -> Option<(String, String)> {
        let mut it = value.split('.');
        let (name, expires, nonce, mac) = (it.next()?, it.next()?, it.next()?, it.next()?);
        if it.next().is_some() || !self.verify("sessao", &[name, expires, nonce], mac) {
            return None;
        }
        if expires.parse::<i64>().ok()? <= Utc::now().timestamp() {
            return None;
        }
        let name = String::from_utf8(URL_SAFE_NO_PAD.decode(name).ok()?).ok()?;
        Some((name, nonce.to_owned()))
    }

    /// The forms' token of the session with `nonce`.
    pub(super) fn csrf(&self, nonce: &str) -> String {
        self.sign("formulario", &[nonce])
    }

    /// The sign-in form's token for the sign-in cookie `nonce`.
    pub(crate) fn sign_in_csrf(&self, nonce: &str) -> String {
        self.sign("entrada", &[nonce])
    }

    pub(crate) fn sign_in_csrf_ok(&self, nonce: &str, token: &str) -> bool {
        !nonce.is_empty() && self.verify("entrada", &[nonce], token)
    }

    /// `card` sealed for the page that just looked it up (AES-256-GCM under a key derived from the
    /// console's secret, for `CARD_REF_SECS`): the card's history is one click away without the card
    /// being on the page or in a URL.
    pub(super) fn seal_card(&self, card: &str) -> String {
        use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng};
        let key = self.mac("cartao-selado", &[]).finalize().into_bytes();
        let cipher = aes_gcm::Aes256Gcm::new(&key);
        let nonce = aes_gcm::Aes256Gcm::generate_nonce(&mut OsRng);
        let until = Utc::now().timestamp() + CARD_REF_SECS;
        let plain = format!("{until}|{card}");
        let Ok(sealed) = cipher.encrypt(&nonce, plain.as_bytes()) else {
            return String::new();
        };
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(nonce),
            URL_SAFE_NO_PAD.encode(sealed)
        )
    }

    /// The card [`Keys::seal_card`] sealed, while the reference is valid.
    pub(super) fn open_card(&self, reference: &str) -> Option<String> {
        use aes_gcm::aead::{Aead, KeyInit};
        let (nonce, sealed) = reference.split_once('.')?;
        let (nonce, sealed) = (
            URL_SAFE_NO_PAD.decode(nonce).ok()?,
            URL_SAFE_NO_PAD.decode(sealed).ok()?,
        );
        let nonce: [u8; 12] = nonce.try_into().ok()?;
        let key = self.mac("cartao-selado", &[]).finalize().into_bytes();
        let cipher = aes_gcm::Aes256Gcm::new(&key);
        let plain = cipher
            .decrypt(&aes_gcm::Nonce::from(nonce), sealed.as_slice())
            .ok()?;
        let (until, card) = std::str::from_utf8(&plain).ok()?.split_once('|')?;
        (until.parse::<i64>().ok()? > Utc::now().timestamp()).then(|| card.to_owned())
    }

    /// A keyed hash of a card for the audit table.
    pub(crate) fn card_hash(&self, card: &str) -> String {
        self.sign("auditoria", &[card])
    }
}

/// How long a looked-up card's sealed reference opens its history.
const CARD_REF_SECS: i64 = 30 * 60;

/// A fresh random nonce (128 bits).
pub(crate) fn nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_opens_only_with_its_own_mac_and_before_it_expires() {
        let keys = Keys::new(b"segredo-do-console-para-testes", 3600);
        let later = Utc::now().timestamp() + 60;
        let value = keys.session_value("suporte", later, "abc");
        assert_eq!(keys.open_session(&value), Some(("suporte".into(), "abc".into())));
        let other = Keys::new(b"outro-segredo-qualquer-mesmo", 3600);
        assert_eq!(other.open_session(&value), None, "another secret");
        let expired = keys.session_value("suporte", Utc::now().timestamp() - 1, "abc");
        assert_eq!(keys.open_session(&expired), None, "expired");
        let forged = value.replacen(
            &URL_SAFE_NO_PAD.encode("suporte"),
            &URL_SAFE_NO_PAD.encode("admin"),
            1,
        );
        assert_eq!(keys.open_session(&forged), None, "another name, same mac");
        assert_eq!(keys.open_session("lixo"), None);
        assert_ne!(keys.csrf("abc"), keys.sign_in_csrf("abc"), "domains are separate");
        assert!(keys.sign_in_csrf_ok("n", &keys.sign_in_csrf("n")));
        assert!(!keys.sign_in_csrf_ok("", &keys.sign_in_csrf("")));
    }
}
