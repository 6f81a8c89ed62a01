//! `vt-actions`: the action contract of vt-agent and the vale-transporte domain built on it.
//!
//! The contract (what an action is, what it may answer) lives here so that the crate boundary itself
//! enforces the rule that **actions know nothing of the engine**: the engine depends on this crate to
//! register actions, never the other way round.
//!
//! Reading order: [`response`] (what an action answers), [`action`] (the typed and erased traits, the
//! registry and the tool schemas), [`context`] (what an action may know about the turn), then the
//! domain: [`tools`] (what the conversational agent may call).
#![cfg_attr(test, allow(clippy::disallowed_methods))] // tests convert JSON freely; see `json`

pub mod action;
pub mod boleto;
pub mod cartao;
pub mod context;
pub mod faq;
pub mod journal;
pub mod json;
pub mod pix;
pub mod redact;
pub mod response;
pub mod stages;
pub mod systems;
pub mod tools;
pub mod vt;

/// Registers every action this crate provides.
pub fn register_all(registry: &mut ActionRegistry) -> Result<(), action::DuplicateAction> {
    stages::register(registry)?;
    tools::register(registry)
}

pub use action::{Action, ActionError, ActionRegistry, DynAction, ToolSpec};
pub use context::ActionContext;
pub use response::{
    ActionResponse, AgentFunction, EndChat, FileContent, HandoffReason, RedirectToSkill, ResponseStatus,
    ResponseToAgent, ResponseToUser, TransferToHuman, UserFunction,
};
