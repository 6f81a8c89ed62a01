//! vt-agent: a conversation engine for transit-pass (vale-transporte) credits and the ten-stage VT
//! flow, with the service and command line around them. `main.rs` only parses arguments and calls
//! [`cli::run`].
//!
//! Modules in the order a message meets them.
#![cfg_attr(test, allow(clippy::disallowed_methods))] // tests convert JSON freely; see `vt_actions::json`

// The ways in: the command line and the HTTP API turn their input into an `Inbound`.
pub mod cli;
pub mod http;
pub mod channels;

// The message path: accept → route → run → commit (the service), deliver (the outbox).
pub mod service;
pub mod router;
pub mod planner;
pub mod engine;
pub mod llm;
pub mod ocr;
pub mod flow;
pub mod batch;
pub mod store;
pub mod outbox;
pub mod retention;
pub mod costs;

// Wiring, configuration, logging.
pub mod app;
pub mod config;
pub mod telemetry;
pub mod periodic;

// What operators and testers read.
pub mod runs;
pub mod transcript;
pub mod usage;
