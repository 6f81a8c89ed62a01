//! Who is using the console: a sign-in with an API key of role `support` or `admin` becomes a signed
//! session cookie (HttpOnly, SameSite=Strict, path `/console`) that names the key — never the key
//! itself — with an expiry and a random nonce. Every form carries a CSRF token derived from that nonce,
//! so a page of another site cannot post on a signed-in agent's behalf; the sign-in form has its own,
//! bound to a short-lived cookie of its own.
//!
//! The cookie is checked on every request: its MAC, its expiry, and that its key is still configured
//! with a console role (a key removed from the configuration ends its sessions at once).

use axum::extract::FromRequestParts;
use axum::http::header::{COOKIE, LOCATION};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::Utc;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::http::{AppState, Caller, Role};

/// The session cookie.
pub const SESSION_COOKIE: &str = "vt_console";
/// The sign-in form's own cookie (its CSRF nonce).
pub const SIGN_IN_COOKIE: &str = "vt_console_entrada";

/// A signed-in support agent or operator.
#[derive(Debug, Clone)]
pub struct Staff {
    pub caller: Caller,
    /// The form token of this session.
    pub csrf: String,
}

impl Staff {
    pub fn is_admin(&self) -> bool {
        self.caller.role == Role::Admin
    }

    /// Whether a form's token is this session's (compared in constant time).
    pub fn csrf_ok(&self, token: &str) -> bool {
        crate::channels::same_secret(token, &self.csrf)
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
    fn open_session(&self, value: &str) -> Option<(String, String)> {
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
    fn csrf(&self, nonce: &str) -> String {
        self.sign("formulario", &[nonce])
    }

    /// The sign-in form's token for the sign-in cookie `nonce`.
    pub fn sign_in_csrf(&self, nonce: &str) -> String {
        self.sign("entrada", &[nonce])
    }

    pub fn sign_in_csrf_ok(&self, nonce: &str, token: &str) -> bool {
        !nonce.is_empty() && self.verify("entrada", &[nonce], token)
    }

    /// A keyed hash of a card for the audit table.
    pub fn card_hash(&self, card: &str) -> String {
        self.sign("auditoria", &[card])
    }
}

/// A fresh random nonce (128 bits).
pub fn nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// `name=value` for the console's path, HttpOnly and SameSite=Strict; `max_age` 0 removes it.
pub fn set_cookie(name: &str, value: &str, max_age: i64) -> String {
    format!("{name}={value}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={max_age}")
}

/// The value of cookie `name` in a request's headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// A session cookie that is missing, forged, expired, or names a key without a console role sends the
/// browser to the sign-in page.
pub struct SignInFirst;

impl IntoResponse for SignInFirst {
    fn into_response(self) -> Response {
        (StatusCode::SEE_OTHER, [(LOCATION, "/console")]).into_response()
    }
}

/// The signed-in user of a request, if its session cookie is good.
pub fn staff_of(headers: &HeaderMap, state: &AppState) -> Option<Staff> {
    let keys = &state.console.keys;
    let (name, nonce) = cookie(headers, SESSION_COOKIE).and_then(|v| keys.open_session(v))?;
    let caller = state.caller_named(&name)?;
    (caller.role >= Role::Support).then(|| Staff {
        caller,
        csrf: keys.csrf(&nonce),
    })
}

impl FromRequestParts<AppState> for Staff {
    type Rejection = SignInFirst;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        staff_of(&parts.headers, state).ok_or(SignInFirst)
    }
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

    #[test]
    fn cookies_are_read_by_exact_name() {
        let mut h = HeaderMap::new();
        h.insert(
            COOKIE,
            "a=1; vt_console_entrada=x; vt_console=y".parse().expect("header"),
        );
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("y"));
        assert_eq!(cookie(&h, SIGN_IN_COOKIE), Some("x"));
        assert_eq!(cookie(&h, "b"), None);
    }
}
