//! The three external systems of the VT flow (balance, recharge, notification) over HTTP: the client
//! that implements the stages' port (`vt_domain::systems::Systems`) and `vt-agent systems check`.
#![warn(clippy::too_many_lines)] // on run-flow's path: see clippy.toml

mod check;
mod client;

pub use check::{CHECK_CARD, SystemCheck};
pub use client::{SystemSettings, SystemsConfig, SystemsError, VtSystems};
