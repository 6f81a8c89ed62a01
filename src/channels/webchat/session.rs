//! Who is chatting: a visitor's session, kept in a signed cookie, and an operator's user token.
//!
//! The cookie is an HS256 JWT of this server's key (`[webchat] segredo`) naming the tenant, whose
//! conversation it opens (`who`: a random visitor, or a person the operator signed in), a session id
//! and its expiry. Every renewal (each page that loads the widget) issues a new session id; a post
//! carries a CSRF token derived from it, which a page of another site cannot read. Nothing is kept on
//! the server: a session is its cookie.
//!
//! A user token is the operator's HS256 JWT, signed with the tenant's `chave_usuario`: `sub` (their id
//! for the person), `tenant` (which must be the widget's), `iat` and an `exp` at most an hour later.
//! Its person's conversation is the same on every device; a token for one tenant never verifies under
//! another's key, nor names another tenant.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The session cookie.
pub(super) const COOKIE: &str = "vt_webchat";
/// The longest a user token may live: a page passes a fresh one.
const USER_TOKEN_MAX_SECS: i64 = 3600;
/// Clocks of two servers differ a little.
const LEEWAY_SECS: u64 = 30;

/// A visitor's session, as its cookie says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Session {
    /// The tenant whose chat it is.
    pub ten: String,
    /// Whose conversation: `v-…` a visitor, `u-…` a person the operator signed in (a digest of
    /// their id, so the id is in no conversation's name).
    pub who: String,
    /// The operator's id of a signed-in person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub: Option<String>,
    /// Their name, as the operator's token gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// This session's id, new at every renewal.
    pub sid: String,
    pub iat: i64,
    pub exp: i64,
}

impl Session {
    /// The conversation this session opens.
    pub(super) fn conversation_id(&self) -> String {
        format!("{}:{}:{}", super::CHANNEL, self.ten, self.who)
    }

    /// The person, as the conversation records them.
    pub(super) fn user_id(&self) -> String {
        self.sub.clone().unwrap_or_else(|| self.who.clone())
    }
}

/// Why a user token was refused (the token itself is never repeated).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(super) enum TokenError {
    #[error("este cliente não aceita tokens de usuário (sem chave_usuario)")]
    NoKey,
    #[error("o token de usuário não confere: assinatura, formato ou validade")]
    Invalid,
    #[error("o token de usuário é de outro cliente")]
    OtherTenant,
    #[error("o token de usuário vale por mais de uma hora; emita um de vida curta")]
    TooLong,
}

/// The claims of an operator's user token.
#[derive(Debug, Deserialize)]
struct UserClaims {
    sub: String,
    tenant: String,
    iat: i64,
    exp: i64,
    #[serde(default)]
    name: Option<String>,
}

/// Issues and reads sessions with this server's key.
pub(super) struct Sessions {
    encoding: EncodingKey,
    decoding: DecodingKey,
    /// Derives each session's CSRF token.
    csrf_key: Vec<u8>,
    lifetime_secs: i64,
}

fn random_id() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>())
}

fn validation() -> Validation {
    let mut v = Validation::new(Algorithm::HS256);
    v.leeway = LEEWAY_SECS;
    v.validate_aud = false;
    v.set_required_spec_claims(&["exp", "iat", "sub"]);
    v
}

impl Sessions {
    /// Sessions signed with `secret` (else a random key of this process), lasting `days` since the last
    /// renewal.
    pub(super) fn new(secret: Option<&str>, days: u32) -> Self {
        let key: Vec<u8> = match secret {
            Some(s) => s.as_bytes().to_vec(),
            None => rand::random::<[u8; 32]>().to_vec(),
        };
        let csrf_key = Sha256::digest([b"csrf:".as_slice(), &key].concat()).to_vec();
        Self {
            encoding: EncodingKey::from_secret(&key),
            decoding: DecodingKey::from_secret(&key),
            csrf_key,
            lifetime_secs: i64::from(days) * 86_400,
        }
    }

    /// A new session of `tenant` for `who` (a new visitor when `None`), with a new id; and its cookie's
    /// value.
    pub(super) fn issue(
        &self,
        tenant: &str,
        who: Option<(String, Option<String>, Option<String>)>,
        now: i64,
    ) -> (Session, String) {
        let (who, sub, name) = who.unwrap_or_else(|| (format!("v-{}", random_id()), None, None));
        let session = Session {
            ten: tenant.to_owned(),
            who,
            sub,
            name,
            sid: random_id(),
            iat: now,
            exp: now + self.lifetime_secs,
        };
        // HS256 over a struct of strings and numbers does not fail.
        let value = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &session, &self.encoding)
            .unwrap_or_default();
        (session, value)
    }

    /// The session a cookie's `value` holds, when this server signed it and it has not expired.
    pub(super) fn read(&self, value: &str) -> Option<Session> {
        let mut v = validation();
        v.set_required_spec_claims(&["exp", "iat"]);
        jsonwebtoken::decode::<Session>(value, &self.decoding, &v)
            .ok()
            .map(|t| t.claims)
    }

    /// The CSRF token of `session`: a post must carry it (`X-CSRF-Token`).
    pub(super) fn csrf(&self, session: &Session) -> String {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.csrf_key).expect("HMAC takes a key of any length");
        mac.update(session.sid.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    /// The `Set-Cookie` of a session's `value`: only its own server reads it (`HttpOnly`), only over
    /// TLS (`Secure`; browsers treat `localhost` as such), sent from the tenant's site
    /// (`SameSite=None`) but kept apart per top-level site (`Partitioned`), under the chat's API only.
    pub(super) fn set_cookie(&self, value: &str) -> String {
        format!(
            "{COOKIE}={value}; Path=/webchat/api; Max-Age={}; HttpOnly; Secure; SameSite=None; Partitioned",
            self.lifetime_secs
        )
    }
}

/// Whose conversation an operator's user token `token` opens under `tenant`, verified with the
/// tenant's `key`: `(who, sub, name)`.
pub(super) fn verify_user(
    token: &str,
    key: Option<&str>,
    tenant: &str,
    now: i64,
) -> Result<(String, Option<String>, Option<String>), TokenError> {
    let key = key.ok_or(TokenError::NoKey)?;
    let claims =
        jsonwebtoken::decode::<UserClaims>(token, &DecodingKey::from_secret(key.as_bytes()), &validation())
            .map_err(|_| TokenError::Invalid)?
            .claims;
    if claims.tenant != tenant {
        return Err(TokenError::OtherTenant);
    }
    if claims.exp - claims.iat > USER_TOKEN_MAX_SECS || claims.iat > now + LEEWAY_SECS as i64 {
        return Err(TokenError::TooLong);
    }
    let sub = claims.sub.trim();
    if sub.is_empty() || sub.chars().count() > 128 {
        return Err(TokenError::Invalid);
    }
    let digest = Sha256::digest(format!("{tenant}\n{sub}").as_bytes());
    let name = claims
        .name
        .map(|n| n.chars().take(80).collect::<String>())
        .filter(|n| !n.trim().is_empty());
    Ok((
        format!("u-{}", &hex::encode(digest)[..32]),
        Some(sub.to_owned()),
        name,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "chave-de-usuario-da-acme-com-32-bytes!";

    fn token(claims: serde_json::Value, key: &str) -> String {
        jsonwebtoken::encode(
            &Header::default(),
            &claims,
            &EncodingKey::from_secret(key.as_bytes()),
        )
        .expect("token")
    }

    #[test]
    fn a_session_reads_back_only_under_its_key_and_rotates_its_id() {
        let sessions = Sessions::new(Some("segredo-do-servidor-com-32-bytes!!"), 30);
        let now = chrono::Utc::now().timestamp();
        let (s, value) = sessions.issue("acme", None, now);
        assert_eq!(sessions.read(&value), Some(s.clone()));
        assert!(s.who.starts_with("v-") && s.conversation_id().starts_with("webchat:acme:v-"));
        let (again, _) = sessions.issue("acme", Some((s.who.clone(), None, None)), now);
        assert_eq!(again.who, s.who, "the same visitor");
        assert_ne!(again.sid, s.sid, "a new session id");
        assert_ne!(sessions.csrf(&again), sessions.csrf(&s));
        let other = Sessions::new(Some("outro-segredo-de-servidor-32-bytes!"), 30);
        assert_eq!(other.read(&value), None, "another key's cookie");
        let (_, old) = sessions.issue("acme", None, now - 31 * 86_400);
        assert_eq!(sessions.read(&old), None, "expired");
    }

    #[test]
    fn a_user_token_opens_its_tenants_conversation_only() {
        let now = chrono::Utc::now().timestamp();
        let good = token(
            serde_json::json!({"sub": "cliente-42", "tenant": "acme", "iat": now, "exp": now + 600}),
            KEY,
        );
        let (who, sub, _) = verify_user(&good, Some(KEY), "acme", now).expect("verified");
        assert!(who.starts_with("u-") && !who.contains("cliente-42"));
        assert_eq!(sub.as_deref(), Some("cliente-42"));
        assert_eq!(
            verify_user(&good, Some(KEY), "outra", now),
            Err(TokenError::OtherTenant)
        );
        assert_eq!(
            verify_user(&good, Some("chave-de-outro-cliente-com-32-bytes!!"), "acme", now),
            Err(TokenError::Invalid)
        );
        assert_eq!(verify_user(&good, None, "acme", now), Err(TokenError::NoKey));
        let long = token(
            serde_json::json!({"sub": "c", "tenant": "acme", "iat": now, "exp": now + 86_400}),
            KEY,
        );
        assert_eq!(
            verify_user(&long, Some(KEY), "acme", now),
            Err(TokenError::TooLong)
        );
        let expired = token(
            serde_json::json!({"sub": "c", "tenant": "acme", "iat": now - 900, "exp": now - 300}),
            KEY,
        );
        assert_eq!(
            verify_user(&expired, Some(KEY), "acme", now),
            Err(TokenError::Invalid)
        );
        let none = token(
            serde_json::json!({"sub": "c", "tenant": "acme", "iat": now, "exp": now + 60}),
            KEY,
        )
        .replace("eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9", "eyJhbGciOiJub25lIn0");
        assert_eq!(
            verify_user(&none, Some(KEY), "acme", now),
            Err(TokenError::Invalid)
        );
    }
}
