//! `vt-contract`: what an action of vt-agent is and what it may answer, and what may be shown of a
//! value.
//!
//! The contract lives in a crate of its own so that the crate graph itself holds the rule that
//! **actions know nothing of the engine**: the engine registers actions through this crate, the
//! domain (`vt-domain`) implements it, and neither reaches into the other.
//!
//! Reading order: [`response`] (what an action answers), [`action`] (the typed and erased traits, the
//! registry and the tool schemas), [`context`] (what an action may know about the turn), then the two
//! rules every output follows: [`json`] (every conversion counted) and [`redact`] (no value in an
//! error, no secret anywhere).
#![cfg_attr(test, allow(clippy::disallowed_methods))] // tests convert JSON freely; see `json`

pub mod action;
pub mod context;
pub mod json;
pub mod redact;
pub mod response;

pub use action::{Action, ActionError, ActionRegistry, DynAction, ToolSpec};
pub use context::ActionContext;
pub use response::{
    ActionResponse, AgentFunction, EndChat, FileContent, HandoffReason, RedirectToSkill, ResponseStatus,
    ResponseToAgent, ResponseToUser, TransferToHuman, UserFunction,
};
