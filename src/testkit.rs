//! What the integration tests, the benches and the examples reach into below the product's face
//! (`lib.rs`): white-box hooks, each from the module that defines it. Nothing here is the product's
//! boundary; a name moves to `lib.rs` when `main` or an embedder needs it.

pub use crate::app::{card_setup, channel_book, tls_simulator::serve_with};
pub use crate::batch::{background::Background, background::Submission};
pub use crate::channels::{
    cartao::WEBHOOK_PATH, mattermost::MattermostConfig, mattermost::board::BoardSender, mattermost::bot::Bot,
    mattermost::bot::PostSender, mattermost::channel as mattermost_channel,
    mattermost::conversation_id as mattermost_conversation_id, pix::channel as pix_channel,
    webchat::WebchatConfig, webchat::WebchatTenant, webchat::channel as webchat_channel,
    whatsapp::AVISO_PRIVACIDADE, whatsapp::WhatsAppConfig, whatsapp::channel as whatsapp_channel,
    whatsapp::conversation_id as whatsapp_conversation_id, whatsapp::notices::NoticesConfig,
    whatsapp::notices::WhatsAppNotices, whatsapp::sender::Sender, whatsapp::templates::Templates,
};
pub use crate::config::{reference::key_paths as config_key_paths, reference::markdown as config_reference};
pub use crate::costs::CustosConfig;
pub use crate::http::{console::keys::ConsoleConfig, console::keys::Keys, console::session::SESSION_COOKIE};
pub use crate::ocr::FotosConfig;
pub use crate::outbox::TemplateUse;
pub use crate::quality::{
    eval::EvalOptions, eval::load as load_eval_cases, eval::run as run_eval, replay::ReplayOptions,
    replay::Selection as ReplaySelection, replay::Verdict, replay::run as replay, transcripts::ModelChoice,
    transcripts::RunOptions, transcripts::TranscriptReport, transcripts::run_file,
    transcripts::run_transcript,
};
pub use crate::retention::{
    RetentionConfig, apply as apply_retention, erase as erase_subject, export as export_subject,
};
pub use crate::router::{
    classifier::evaluate as evaluate_intents, corpus::load as load_corpus, corpus::score as score_corpus,
    intents::load_file,
};
pub use crate::runs::report as runs_report;
pub use crate::service::{
    automatico::PassFigures, automatico::port as automatic_port, board::BOARD, budgets::Orcamento,
    budgets::Standing, cases::CaseError, cases::HandoffConfig, cases::SupportAgent,
    complaints::payments_port, followups::STAGE as FOLLOW_UP_STAGE, hours::Hours, payments::PixSetup,
    payments::Settled, payments::card_port, payments::pix_port, proposal::Proposal, review::RevisaoConfig,
    teams::Equipe,
};
pub use crate::transcript::{
    collect as collect_transcripts, export::export as export_transcripts, format::Expect, format::Setup,
    format::Turn,
};
pub use crate::usage::{Spending, costs as usage_costs, costs_table as usage_costs_table};
