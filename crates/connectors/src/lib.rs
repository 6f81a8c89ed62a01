//! `vt-connectors`: the operator's systems and payment providers over HTTP — the implementations of
//! the domain's ports (`vt-domain`), and nothing that serves HTTP.
//!
//! - [`exchange`]: the one exchange every connector makes — over HTTP or to a server in this process
//!   ([`exchange::Local`], how the embedded simulators are called), with the provider's credentials
//!   ([`auth`], a refused token renewed once), its TLS ([`tls`]) and the retries the caller allows;
//! - [`systems`]: the three external systems of the flow (`VtSystems`, the stages' `Systems` port) and
//!   `vt-agent systems check`; [`tape`]: what they answered during a turn, kept for replay;
//! - [`pix`]: the operator's PSP through the API Pix (`Psp`); [`cartao`]: a card provider's hosted
//!   checkout (Stripe).
#![cfg_attr(test, allow(clippy::disallowed_methods))] // tests convert JSON freely; see `vt_contract::json`

pub mod auth;
pub mod cartao;
pub mod exchange;
pub mod pix;
pub mod systems;
pub mod tape;
pub mod tls;

pub use auth::{AuthConfig, AuthMethod};
pub use tls::{TlsConfig, TlsError};
