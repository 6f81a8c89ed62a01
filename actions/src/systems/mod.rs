//! The three external systems of the VT flow (balance, recharge, notification): the HTTP client the
//! stages use, and the embedded simulator that stands in for them on a fresh machine and in tests.
#![warn(clippy::too_many_lines)] // on run-flow's path: see clippy.toml

pub mod auth;
pub mod book;
mod check;
pub mod client;
pub mod contract;
mod guard;
pub mod tls;
pub mod simulator;
pub mod tape;

pub use auth::{AuthConfig, AuthMethod};
pub use check::{CHECK_CARD, SystemCheck};
pub use client::{Erro, HttpResult, SystemSettings, SystemsConfig, SystemsError, VtSystems};
pub use guard::SimulatorAuth;
pub use simulator::{Efeito, LedgerEntry, RunningSimulator, Simulator, SimulatorConfig};
pub use tls::{TlsConfig, TlsError};

/// Endpoints, as the PRD names them.
pub(crate) const SALDO_ENDPOINT: &str = "/api/v1/saldos/consultar";
pub(crate) const RECARGA_ENDPOINT: &str = "/api/v1/recargas";
pub(crate) const NOTIFICACAO_ENDPOINT: &str = "/api/v1/notificacoes";
