//! vt-agent: a conversation engine for transit-pass (vale-transporte) credits and the ten-stage VT
//! flow, with the service and command line around them. `main.rs` only parses arguments and calls
//! [`cli::run`].
//!
//! Modules in the floors' order (ARCHITECTURE.md, held by `tests/it/layers.rs`): a module imports only
//! modules below it.
#![cfg_attr(test, allow(clippy::disallowed_methods))] // tests convert JSON freely; see `vt_contract::json`

// Entry and composition: the command line, the wiring, the configuration.
mod cli;
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

// The façade: what `main`, the tests and the benches use, and nothing else (`unreachable_pub`
// keeps everything else inside the crate), each from the module that defines it, in the floors' order.
pub use app::{
    App, CHAT_AGENT, card_setup, catalog as build_catalog, channel_book, engine as build_engine,
    eval::EvalOptions, eval::load as load_eval_cases, eval::run as run_eval, registry as build_registry,
    replay::ReplayOptions, replay::Selection as ReplaySelection, replay::Verdict, replay::run as replay,
    service as build_service, tls_simulator::serve_with, transcripts::ModelChoice, transcripts::RunOptions,
    transcripts::run_file, transcripts::run_transcript,
};
pub use batch::{
    Job, Options, background::Background, background::Submission, derived_id as batch_id, run as run_batch,
    source::Format, source::LineDefaults, source::read as read_batch_source,
};
pub use channels::{
    Channel, Wiring, cartao::WEBHOOK_PATH, mattermost::MattermostConfig, mattermost::board::BoardSender,
    mattermost::bot::Bot, mattermost::bot::PostSender, mattermost::channel as mattermost_channel,
    mattermost::conversation_id as mattermost_conversation_id, pix::channel as pix_channel,
    webchat::WebchatConfig, webchat::WebchatTenant, webchat::channel as webchat_channel,
    whatsapp::AVISO_PRIVACIDADE, whatsapp::WhatsAppConfig, whatsapp::channel as whatsapp_channel,
    whatsapp::conversation_id as whatsapp_conversation_id, whatsapp::notices::NoticesConfig,
    whatsapp::notices::WhatsAppNotices, whatsapp::sender::Sender, whatsapp::templates::Templates,
};
pub use cli::{Cli, Command, run, terminal_safe};
pub use config::{
    Config, SimulatorSettings, reference::key_paths as config_key_paths,
    reference::markdown as config_reference,
};
pub use costs::CustosConfig;
pub use flow::{Etapa, FLOW_AGENT, FlowMode, FlowOutput, FlowStatus, run_flow, share};
pub use http::{
    auth::hash as key_hash, config::ApiKeyConfig, config::HttpConfig, config::Role,
    console::keys::ConsoleConfig, console::keys::Keys, console::session::SESSION_COOKIE, openapi, serve,
    state::AppState,
};
pub use ocr::FotosConfig;
pub use outbox::{ChannelSender, ReplyPayload, SendError, TemplateUse, Worker};
pub use retention::{
    RetentionConfig, apply as apply_retention, erase as erase_subject, export as export_subject,
};
pub use router::{
    Route, Router, classifier::evaluate as evaluate_intents, corpus::load as load_corpus,
    corpus::score as score_corpus, intents::load_file,
};
pub use runs::report as runs_report;
pub use service::{
    Delivery, FlowOptions, FlowRan, Handled, Inbound, ServiceConfig, ServiceError, Services, ServicesConfig,
    automatico::PassFigures, automatico::port as automatic_port, board::BOARD, budgets::Orcamento,
    budgets::Standing, cases::CaseError, cases::HandoffConfig, cases::Proposal, cases::SupportAgent,
    complaints::payments_port, followups::STAGE as FOLLOW_UP_STAGE, hours::Hours, payments::PixSetup,
    payments::Settled, payments::card_port, payments::pix_port, teams::Equipe,
};
pub use transcript::{
    collect as collect_transcripts, export::export as export_transcripts, format::Expect, format::Setup,
    format::Transcript, format::Turn,
};
pub use usage::{Spending, costs as usage_costs, costs_table as usage_costs_table};
