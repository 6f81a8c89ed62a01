//! The recharge journal: the port through which the money path writes down what it is about to do,
//! before it does it. The engine's side implements it over the store; this crate only states what it
//! needs, so it still knows nothing of the engine or of SQL.
//!
//! Three promises rest on it:
//! - **a confirmation is consumed once** ([`RechargeJournal::consume_confirmation`]): an atomic write in
//!   the store, so of several processes answering "sim" to one pending recharge exactly one charges. The
//!   same transaction puts the recharge attempt on record, under the message that confirmed it: a
//!   process killed right after leaves an attempt the same message carries on when it is processed
//!   again, never a consumed confirmation with nothing behind it;
//! - **a recharge attempt is on record before it is sent** ([`RechargeJournal::begin`]): after a kill -9
//!   an operator sees the key, the masked card and the value of what may have been charged;
//! - **a request whose twin has an unknown outcome reuses the twin's key**
//!   ([`RechargeJournal::unresolved`]): a person retrying after a timeout is never charged twice.
//!
//! Without a journal (unit tests of a stage) the stages still run; with one, a failure to write it
//! stops the recharge before anything is sent.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::vt::texts::RecargaStatus;

/// Where a recharge attempt on record stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptStatus {
    /// On record and (being) sent, with no answer yet: a process that died while sending leaves it so.
    Enviando,
    /// Answered: RF8's reconciliation of the answer.
    Pendente,
    Aprovada,
    Negada,
    Erro,
}

impl AttemptStatus {
    const ALL: [Self; 5] = [
        Self::Enviando,
        Self::Pendente,
        Self::Aprovada,
        Self::Negada,
        Self::Erro,
    ];
    /// The outcomes not known yet: the money may or may not have moved.
    pub const UNKNOWN: [Self; 2] = [Self::Enviando, Self::Pendente];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enviando => "enviando",
            Self::Pendente => "pendente",
            Self::Aprovada => "aprovada",
            Self::Negada => "negada",
            Self::Erro => "erro",
        }
    }

    /// A status as text holds it (`None`: not one).
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    pub fn is_unknown(self) -> bool {
        Self::UNKNOWN.contains(&self)
    }
}

impl From<RecargaStatus> for AttemptStatus {
    fn from(status: RecargaStatus) -> Self {
        match status {
            RecargaStatus::Aprovada => Self::Aprovada,
            RecargaStatus::Pendente => Self::Pendente,
            RecargaStatus::Negada => Self::Negada,
            RecargaStatus::Erro => Self::Erro,
        }
    }
}

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

/// A recharge request exactly as it goes to the recharge system — the body with the payment token's
/// value, the headers with the idempotency key — so that a recharge whose outcome is unknown can be
/// sent again, the same bytes under the same key, until the recharge system says what became of it.
/// The store keeps it sealed, and only while the outcome is unknown. `Debug` shows none of it.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct RechargeRequest {
    pub body: Value,
    pub headers: BTreeMap<String, String>,
    pub timeout_ms: u64,
}

impl fmt::Debug for RechargeRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RechargeRequest")
            .field("timeout_ms", &self.timeout_ms)
            .finish_non_exhaustive()
    }
}

impl RechargeRequest {
    /// The `x-idempotency-key` it is sent with.
    pub fn idempotency_key(&self) -> &str {
        self.headers.get("x-idempotency-key").map_or("", String::as_str)
    }
}

/// A confirmation being consumed: the pending recharge, the conversation, and the stored user message
/// that confirms it (the same when that message is processed again after a crash).
#[derive(Debug, Clone, Copy)]
pub struct Confirmation<'a> {
    pub pending_id: &'a str,
    pub origin: &'a str,
    pub consumer: &'a str,
}

/// What consuming a confirmation found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumption {
    /// This call consumed it, and put the attempt on record with it.
    Now,
    /// This very message consumed it before, and its turn never finished (the process died): the
    /// attempt on record is carried on under the same key, so the recharge system answers it once.
    Resumed,
    /// Another message consumed it: nothing is to be done here.
    ByAnother,
}

impl Consumption {
    /// What a message learns of a confirmation `recorded` consumed before: its own (`Resumed`) or
    /// another's.
    pub fn before(recorded: &str, consumer: &str) -> Self {
        if recorded == consumer {
            Self::Resumed
        } else {
            Self::ByAnother
        }
    }
}

/// The journal could not be written or read; the operator's text.
#[derive(Debug, Clone, thiserror::Error)]
#[error("registro de recargas: {0}")]
pub struct JournalError(pub String);

#[async_trait]
pub trait RechargeJournal: Send + Sync {
    /// Marks the confirmation as used and, in the same transaction, records `attempt` as `enviando`
    /// (not yet sent: `sends` stays 0 until RF7 sends it). Exactly one message consumes a
    /// confirmation, in this process or another; see [`Consumption`] for what the others learn.
    async fn consume_confirmation(
        &self,
        confirmation: Confirmation<'_>,
        attempt: Option<&RechargeAttempt>,
    ) -> Result<Consumption, JournalError>;
    /// The message that consumed the confirmation `pending_id`, if one did.
    async fn consumer_of(&self, pending_id: &str) -> Result<Option<String>, JournalError>;
    /// Records an attempt as `enviando` before it is sent (again `enviando` when the same key is sent
    /// again), with the request itself: kept until the outcome is known, it is what a follow-up sends
    /// again when the outcome stays unknown (an answer that came late, a process that died).
    async fn begin(&self, attempt: &RechargeAttempt, request: &RechargeRequest) -> Result<(), JournalError>;
    /// Records how the attempt with `idempotency_key` ended.
    async fn resolve(&self, idempotency_key: &str, status: RecargaStatus) -> Result<(), JournalError>;
    /// The key of an identical attempt of the same scope whose outcome is still unknown (`enviando` or
    /// `pendente`).
    async fn unresolved(&self, scope: &str, fingerprint: &str) -> Result<Option<String>, JournalError>;
}

/// How stages and tools find the journal in their context.
pub type SharedJournal = Arc<dyn RechargeJournal>;
