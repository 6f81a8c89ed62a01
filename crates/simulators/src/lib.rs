//! `vt-simulators`: the operator's world on a fresh machine and in tests — the balance, recharge and
//! notification systems ([`systems::Simulator`], with magic cards for every branch), the Pix PSP
//! ([`pix::PspSimulado`]) and the card provider's hosted checkout ([`cartao::CheckoutSimulado`]),
//! served over real HTTP or called in this process ([`InProcess`]). The only crate besides the
//! binary that serves HTTP.
#![cfg_attr(test, allow(clippy::disallowed_methods))] // tests convert JSON freely; see `vt_contract::json`

pub mod cartao;
mod local;
pub mod pix;
pub mod systems;

pub use local::InProcess;
pub use systems::{RunningSimulator, Simulator, SimulatorAuth, SimulatorConfig};
