//! The review queue's records (issue "Step 38"): a bot message put up for review, what a reviewer
//! made of it, and what administrators decided about a suggested FAQ entry.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A bot message put up for review: flagged by a support agent, or enqueued by the product itself.
#[derive(Debug, Clone, PartialEq)]
pub struct NewReviewItem {
    pub tenant_id: String,
    pub conversation_id: String,
    /// The stored message's id.
    pub message_id: i64,
    /// `sinalizada`, or the product's reason (`csat_baixo`, `reaberta`, …).
    pub source: String,
    pub reason: Option<String>,
    /// Sealed at rest.
    pub note: Option<String>,
    pub flagged_by: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// Where an item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewState {
    Aberto,
    Rotulado,
    Descartado,
}

impl ReviewState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Aberto => "aberto",
            Self::Rotulado => "rotulado",
            Self::Descartado => "descartado",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "aberto" => Some(Self::Aberto),
            "rotulado" => Some(Self::Rotulado),
            "descartado" => Some(Self::Descartado),
            _ => None,
        }
    }
}

/// What should have happened, as a reviewer wrote it: the words the answer must and must not hold,
/// the action expected, or an action that must never run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expectation {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contains: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_contains: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub never: Option<String>,
}

impl Expectation {
    /// Whether it expects nothing (no test can be written from it).
    pub fn is_empty(&self) -> bool {
        self.contains.is_empty()
            && self.not_contains.is_empty()
            && self.action.is_none()
            && self.never.is_none()
    }
}

/// A reviewer's verdict on an item: the categories ticked, what was expected, the test written.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewLabel {
    pub labels: Vec<String>,
    pub expectation: Expectation,
    pub test_file: String,
    pub by: String,
    pub at: DateTime<Utc>,
}

/// An item of the review queue as kept.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewItem {
    pub id: i64,
    pub item: NewReviewItem,
    pub state: ReviewState,
    pub labels: Vec<String>,
    pub expectation: Option<Expectation>,
    pub test_file: Option<String>,
    pub reviewed_by: Option<String>,
    pub reviewed_at: Option<DateTime<Utc>>,
}

/// An administrator's decision about a suggested FAQ entry.
#[derive(Debug, Clone, PartialEq)]
pub struct FaqDecision {
    pub tenant_id: String,
    /// The suggestion's key.
    pub suggestion: String,
    /// `aprovada` or `descartada`.
    pub decision: String,
    /// The entry written, when approved.
    pub entry: Option<String>,
    pub decided_by: String,
    pub decided_at: DateTime<Utc>,
}
