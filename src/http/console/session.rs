//! Who is using the console: a sign-in with an API key of role `support` or `admin` becomes a signed
//! session cookie (HttpOnly, SameSite=Strict, path `/console`) that names the key — never the key
//! itself — with an expiry and a random nonce. Every form carries a CSRF token derived from that nonce,
//! so a page of another site cannot post on a signed-in agent's behalf; the sign-in form has its own,
//! bound to a short-lived cookie of its own.
//!
//! The cookie is checked on every request: its MAC, its expiry, and that its key is still configured
//! with a console role (a key removed from the configuration ends its sessions at once).

use axum::extract::FromRequestParts;
use axum::http::header::LOCATION;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::http::auth::Caller;
use crate::http::config::Role;
use crate::http::state::AppState;

/// The session cookie.
pub const SESSION_COOKIE: &str = "vt_console";
/// The sign-in form's own cookie (its CSRF nonce).
pub(crate) const SIGN_IN_COOKIE: &str = "vt_console_entrada";

/// A signed-in support agent or operator.
#[derive(Debug, Clone)]
pub(super) struct Staff {
    pub caller: Caller,
    /// The form token of this session.
    pub csrf: String,
    /// Cases waiting in the user's tenant and cases that are theirs (claimed or offered to them), for
    /// the menu.
    pub counts: (usize, usize),
}

impl Staff {
    pub(super) fn is_admin(&self) -> bool {
        self.caller.role == Role::Admin
    }

    /// Whether a form's token is this session's (compared in constant time).
    pub(super) fn csrf_ok(&self, token: &str) -> bool {
        crate::channels::same_secret(token, &self.csrf)
    }
}

/// `name=value` for the console's path, HttpOnly and SameSite=Strict; `max_age` 0 removes it.
pub(super) fn set_cookie(name: &str, value: &str, max_age: i64) -> String {
    format!("{name}={value}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={max_age}")
}

pub(super) use crate::channels::cookie;

/// A session cookie that is missing, forged, expired, or names a key without a console role sends the
/// browser to the sign-in page.
pub(super) struct SignInFirst;

impl IntoResponse for SignInFirst {
    fn into_response(self) -> Response {
        (StatusCode::SEE_OTHER, [(LOCATION, "/console")]).into_response()
    }
}

/// The signed-in user of a request, if its session cookie is good.
pub(super) fn staff_of(headers: &HeaderMap, state: &AppState) -> Option<Staff> {
    let keys = &state.console.keys;
    let (name, nonce) = cookie(headers, SESSION_COOKIE).and_then(|v| keys.open_session(v))?;
    let caller = state.caller_named(&name)?;
    (caller.role >= Role::Support).then(|| Staff {
        caller,
        csrf: keys.csrf(&nonce),
        counts: (0, 0),
    })
}

impl FromRequestParts<AppState> for Staff {
    type Rejection = SignInFirst;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let mut staff = staff_of(&parts.headers, state).ok_or(SignInFirst)?;
        // One read of the open cases; a failed one leaves the menu without counts.
        if let Ok(open) = state.stores.cases.open_cases().await {
            let me = staff.caller.name.as_str();
            let tenant = (!staff.is_admin()).then_some(staff.caller.tenant.as_str());
            let visible = open.iter().filter(|c| tenant.is_none_or(|t| t == c.tenant_id));
            let (waiting, mine) = visible.fold((0, 0), |(w, m), c| {
                let waits = c.state == vt_store::CaseState::Aguardando;
                let theirs = c.owner.as_deref() == Some(me) || (waits && c.offered_to.as_deref() == Some(me));
                (w + usize::from(waits), m + usize::from(theirs))
            });
            staff.counts = (waiting, mine);
        }
        Ok(staff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_read_by_exact_name() {
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::header::COOKIE,
            "a=1; vt_console_entrada=x; vt_console=y".parse().expect("header"),
        );
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("y"));
        assert_eq!(cookie(&h, SIGN_IN_COOKIE), Some("x"));
        assert_eq!(cookie(&h, "b"), None);
    }
}
