//! The review queue (bot messages flagged or enqueued, labelled, turned into tests) and the decisions
//! about the FAQ entries suggested from the agents' answers.

use super::*;

#[async_trait]
pub trait ReviewStore: Send + Sync {
    /// Puts `item` in the queue: its id, or `None` when that message is there already for that source
    /// (one flag per message and source, whoever and however often).
    async fn enqueue_review(&self, item: &NewReviewItem) -> Result<Option<i64>, StoreError>;

    /// The messages of `conversation` a support agent flagged (their ids).
    async fn flagged_messages(&self, conversation: &str) -> Result<Vec<i64>, StoreError>;

    async fn review_item(&self, id: i64) -> Result<Option<ReviewItem>, StoreError>;

    /// The newest `limit` items, `tenant`'s only when given, newest first.
    async fn review_items(&self, tenant: Option<&str>, limit: i64) -> Result<Vec<ReviewItem>, StoreError>;

    /// Labels an open item: `false` when it is not open (labelled or dismissed before).
    async fn label_review(&self, id: i64, label: &ReviewLabel) -> Result<bool, StoreError>;

    /// Dismisses an open item: `false` when it is not open.
    async fn dismiss_review(&self, id: i64, by: &str, at: DateTime<Utc>) -> Result<bool, StoreError>;

    /// `tenant`'s decisions about suggested FAQ entries.
    async fn faq_decisions(&self, tenant: &str) -> Result<Vec<FaqDecision>, StoreError>;

    /// Keeps a decision: `false` when that suggestion was decided before (the first one stands).
    async fn decide_faq(&self, decision: &FaqDecision) -> Result<bool, StoreError>;
}
