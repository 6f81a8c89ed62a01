//! Who is calling: `Authorization: Bearer <key>`, looked up by its SHA-256 among the configured keys
//! (the key itself is never stored), each with a name, a tenant and a role. A key reaches only its
//! tenant's conversations. With no key configured the service is open — and `serve` then binds only
//! to loopback.

use std::collections::HashMap;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use sha2::{Digest, Sha256};

use super::config::{ApiKeyConfig, Role};
use super::error::ApiError;
use super::state::AppState;
use vt_engine::DEFAULT_TENANT;

/// The caller of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller {
    /// The key's name (`local` without keys): what rate limits and logs count by.
    pub name: String,
    pub tenant: String,
    pub role: Role,
}

/// The caller's name in open mode.
const LOCAL: &str = "local";

/// Everyone is this administrator when no key is configured (and `serve` listens on loopback only).
fn local() -> Caller {
    Caller {
        name: LOCAL.into(),
        tenant: DEFAULT_TENANT.into(),
        role: Role::Admin,
    }
}

/// The configured keys, by hash.
#[derive(Debug, Clone, Default)]
pub(super) struct ApiKeys {
    by_hash: HashMap<String, Caller>,
}

/// The hex SHA-256 of a key, as configured.
pub fn hash(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

impl ApiKeys {
    pub(super) fn new(keys: &[ApiKeyConfig]) -> Self {
        Self {
            by_hash: keys
                .iter()
                .map(|k| {
                    let caller = Caller {
                        name: k.name.clone(),
                        tenant: k.tenant.clone(),
                        role: k.role,
                    };
                    (k.sha256.to_ascii_lowercase(), caller)
                })
                .collect(),
        }
    }

    /// No key configured: the service is open (and bound to loopback only).
    pub(super) fn is_open(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// The caller of the key named `name` (the console's sessions name their key); `local` in open mode.
    pub(super) fn by_name(&self, name: &str) -> Option<Caller> {
        if self.is_open() {
            return (name == LOCAL).then(local);
        }
        self.by_hash.values().find(|c| c.name == name).cloned()
    }

    /// The caller of an API key (the `Bearer` value, or what was typed into the console's sign-in
    /// form).
    pub(super) fn by_key(&self, key: &str) -> Result<Caller, ApiError> {
        if self.is_open() {
            return Ok(local());
        }
        let key = key.trim();
        if key.is_empty() {
            return Err(ApiError::unauthorized());
        }
        // The lookup is by hash: comparing digests leaks nothing usable about the key through timing.
        self.by_hash
            .get(&hash(key))
            .cloned()
            .ok_or_else(ApiError::unauthorized)
    }

    /// The caller a request's `Authorization` header stands for.
    pub(super) fn caller(&self, authorization: Option<&str>) -> Result<Caller, ApiError> {
        match authorization.and_then(|h| h.strip_prefix("Bearer ")) {
            Some(key) => self.by_key(key),
            None if self.is_open() => Ok(local()),
            None => Err(ApiError::unauthorized()),
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let caller = state.keys.caller(header)?;
        // The rate is a key's: with no key configured (open, on loopback only) there is none to count
        // against, and every caller would have shared one budget of `rate_per_minute`.
        if !state.keys.is_open() {
            state.limit(&caller)?;
        }
        Ok(caller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_found_by_its_hash_and_nothing_else() {
        let keys = ApiKeys::new(&[ApiKeyConfig {
            name: "empresa-a".into(),
            sha256: hash("segredo-da-empresa-a"),
            tenant: "a".into(),
            role: Role::Client,
        }]);
        let caller = keys.caller(Some("Bearer segredo-da-empresa-a")).expect("known");
        assert_eq!((caller.tenant.as_str(), caller.role), ("a", Role::Client));
        for bad in [
            None,
            Some("Bearer "),
            Some("segredo-da-empresa-a"),
            Some("Bearer outro"),
        ] {
            assert_eq!(keys.caller(bad).expect_err("refused").status, 401, "{bad:?}");
        }
        assert!(ApiKeys::new(&[]).caller(None).is_ok(), "no keys: open");
    }
}
