//! `vt-domain`: the vale-transporte domain on the action contract (`vt-contract`) — what the flow and
//! the conversation do with a card, an amount and a payment, with no HTTP client and no server.
//!
//! - [`vt`]: the domain's values (cards, money, people's numbers and words, secrets, time zones) and
//!   the texts a card holder reads;
//! - [`stages`]: the ten stages of the flow (PRD RF1–RF10) and their follow-ups;
//! - [`tools`]: what the conversational agent may call;
//! - [`faq`], [`boleto`], [`journal`]: the operator's questions, the bank slip's line, a recharge's
//!   history;
//! - the ports the stages and tools call through: [`systems::Systems`] (the three external systems),
//!   [`cartao::Checkouts`] (a card provider's hosted checkout) and the Pix shapes of [`pix`]. Their
//!   HTTP implementations are `vt-connectors`'; their simulators `vt-simulators`'.
#![cfg_attr(test, allow(clippy::disallowed_methods))] // tests convert JSON freely; see `vt_contract::json`

pub mod boleto;
pub mod cartao;
pub mod faq;
pub mod journal;
pub mod pix;
pub mod stages;
pub mod suggest;
pub mod systems;
pub mod tools;
pub mod vt;

use vt_contract::ActionRegistry;

/// Registers every action this crate provides.
pub fn register_all(registry: &mut ActionRegistry) -> Result<(), vt_contract::action::DuplicateAction> {
    stages::register(registry)?;
    tools::register(registry)
}
