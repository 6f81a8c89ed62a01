//! The card provider's side of a recharge paid by card (`vt_domain::cartao::Checkouts`): `[cartao]`'s
//! configuration and Stripe Checkout Sessions' adapter. Another provider is one file beside
//! `stripe.rs` implementing the port.

mod config;
pub mod stripe;

pub use config::{CartaoConfig, ProvedorCartao};
