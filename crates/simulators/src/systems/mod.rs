//! The three external systems of the VT flow, simulated: magic cards for every branch, an idempotency
//! store, a ledger, and a book that outlives the process.

pub mod book;
pub(crate) mod cards;
mod guard;
mod simulator;

pub use cards::{BalanceMode, CardBehavior, PixPayer, RechargeMode, magic_cards};
pub use guard::SimulatorAuth;
pub use simulator::*;
