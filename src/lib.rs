//! vt-agent: a conversation engine for transit-pass (vale-transporte) credits and the ten-stage VT
//! flow, with the service and command line around them. `main.rs` only parses arguments and calls
//! [`cli::run`].

pub mod app;
pub mod cli;
pub mod config;
pub mod engine;
pub mod flow;
pub mod http;
pub mod llm;
pub mod outbox;
pub mod planner;
pub mod router;
pub mod runs;
pub mod service;
pub mod store;
pub mod telemetry;
pub mod transcript;
pub mod usage;
