//! vt-agent: a conversation engine for transit-pass (vale-transporte) credits and the ten-stage VT
//! flow, with the service and command line around them. `main.rs` only parses arguments and calls
//! [`cli::run`].
//!
//! Modules in the floors' order (ARCHITECTURE.md, held by `tests/it/layers.rs`): a module imports only
//! modules below it.
#![cfg_attr(test, allow(clippy::disallowed_methods))] // tests convert JSON freely; see `vt_actions::json`

// Entry and composition: the command line, the wiring, the configuration.
pub mod cli;
pub mod app;
pub mod config;

// The ways in: the HTTP API (the console inside it), the channels, batch jobs.
pub mod http;
pub mod channels;
pub mod batch;

// The message path: accept → route → run → commit (the service), and what it runs on.
pub mod service;
pub mod runs;
pub mod router;
mod planner;
pub mod flow;
pub mod outbox;
pub mod retention;
pub mod usage;
pub mod transcript;

// Below: the store, the engine, logging and traces, the model, photos, prices, background passes.
pub mod store;
pub mod engine;
pub mod telemetry;
pub mod llm;
pub mod ocr;
pub mod costs;
mod periodic;
