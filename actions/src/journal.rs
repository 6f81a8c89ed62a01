//! The recharge journal: the port through which the money path writes down what it is about to do,
//! before it does it. The engine's side implements it over the store; this crate only states what it
//! needs, so it still knows nothing of the engine or of SQL.
//!
//! Three promises rest on it:
//! - **a confirmation is consumed once** ([`RechargeJournal::consume_confirmation`]): an atomic write in
//!   the store, so of several processes answering "sim" to one pending recharge exactly one charges;
//! - **a recharge attempt is on record before it is sent** ([`RechargeJournal::begin`]): after a kill -9
//!   an operator sees the key, the masked card and the value of what may have been charged;
//! - **a request whose twin has an unknown outcome reuses the twin's key**
//!   ([`RechargeJournal::unresolved`]): a person retrying after a timeout is never charged twice.
//!
//! Without a journal (unit tests of a stage) the stages still run; with one, a failure to write it
//! stops the recharge before anything is sent.

use std::sync::Arc;

use async_trait::async_trait;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::vt::texts::RecargaStatus;

/// The status of an attempt on record that has no answer yet: a process that died while sending leaves
/// it so. It and `pendente` are the unknown outcomes.
pub const STATUS_ENVIANDO: &str = "enviando";

/// A recharge about to be sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RechargeAttempt {
    /// The `x-idempotency-key` it is sent with.
    pub idempotency_key: String,
    /// The same for identical requests (card, value, currency): the PRD key, never the card itself.
    pub fingerprint: String,
    /// Whose request it is: tenant and user.
    pub scope: String,
    /// The conversation it belongs to.
    pub origin: String,
    /// The execution (flow run) that sends it.
    pub execucao_id: String,
    pub cartao_mascarado: String,
    pub valor: Decimal,
    pub moeda: String,
}

/// The journal could not be written or read; the operator's text.
#[derive(Debug, Clone, thiserror::Error)]
#[error("recharge journal: {0}")]
pub struct JournalError(pub String);

#[async_trait]
pub trait RechargeJournal: Send + Sync {
    /// Marks the pending confirmation `pending_id` as used. `true` for the one caller that consumed
    /// it, `false` for every later one (in this process or another).
    async fn consume_confirmation(&self, pending_id: &str, origin: &str) -> Result<bool, JournalError>;
    /// Records an attempt as `enviando` before it is sent (again `enviando` when the same key is sent
    /// again).
    async fn begin(&self, attempt: &RechargeAttempt) -> Result<(), JournalError>;
    /// Records how the attempt with `idempotency_key` ended.
    async fn resolve(&self, idempotency_key: &str, status: RecargaStatus) -> Result<(), JournalError>;
    /// The key of an identical attempt of the same scope whose outcome is still unknown (`enviando` or
    /// `pendente`).
    async fn unresolved(&self, scope: &str, fingerprint: &str) -> Result<Option<String>, JournalError>;
}

/// How stages and tools find the journal in their context.
pub type SharedJournal = Arc<dyn RechargeJournal>;
