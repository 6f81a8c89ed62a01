//! vt-agent: a conversation engine for transit-pass (vale-transporte) credits and the ten-stage VT
//! flow, with the service and command line around them. `main.rs` only parses arguments and calls
//! [`cli::run`].
//!
//! Modules in the floors' order (ARCHITECTURE.md, held by `tests/it/layers.rs`): a module imports only
//! modules below it.
#![cfg_attr(test, allow(clippy::disallowed_methods))] // tests convert JSON freely; see `vt_contract::json`

// Entry and composition: the command line, the wiring, the configuration.
mod cli;
mod quality;
mod app;
mod config;

// The ways in: the HTTP API (the console inside it), the channels, batch jobs.
mod http;
mod channels;
mod batch;

// The message path: accept → route → run → commit (the service), and what it runs on.
mod service;
mod runs;
mod router;
mod planner;
mod flow;
mod outbox;
mod retention;
mod usage;
mod transcript;

// Below: photos and prices (the store is `vt-store`; the engine, the model, logs and traces `vt-engine`).
mod ocr;
mod costs;

/// What tests, benches and tools reach into below the product's face: one visibly separate module.
pub mod testkit;

// The face: what `main`, an embedder and the product-level tests use, and nothing else
// (`unreachable_pub` keeps everything else inside the crate), each from the module that defines it,
// in the floors' order.
pub use app::{
    App, CHAT_AGENT, catalog as build_catalog, engine as build_engine, registry as build_registry,
    serve::Server, service as build_service,
};
pub use batch::{
    Job, Options, derived_id as batch_id, run as run_batch, source::Format, source::LineDefaults,
    source::read as read_batch_source,
};
pub use channels::{Channel, PLUGS, Plug, Section, SectionType, Sections, Settings, Wiring};
pub use cli::{Cli, Command, run, terminal_safe};
pub use config::{Config, SimulatorSettings};
pub use flow::{Etapa, FLOW_AGENT, FlowMode, FlowOutput, FlowStatus, run_flow, share};
pub use http::{
    auth::hash as key_hash, config::ApiKeyConfig, config::HttpConfig, config::Role, openapi, serve,
    state::AppState,
};
pub use outbox::{ChannelSender, ReplyPayload, SendError, Worker};
pub use router::{Route, Router};
pub use service::{
    ChannelRules, Delivery, FlowOptions, FlowRan, Handled, Inbound, ServiceConfig, ServiceError, Services,
    ServicesConfig,
};
pub use transcript::format::Transcript;
