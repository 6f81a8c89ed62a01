//! The desk as people work it live: the log read as it grows (what the console's live queue follows,
//! on every instance), lines of one kind over a time (the month's report, the notes' search), and the
//! answers kept for the agents.

use super::*;

#[async_trait]
pub trait DeskStore: Send + Sync {
    /// The newest line's sequence (0: none yet): where a live reader starts.
    async fn desk_head(&self) -> Result<i64, StoreError>;

    /// Up to `limit` lines after sequence `after`, oldest first, each with its case's tenant, team and
    /// protocol now.
    async fn desk_lines(&self, after: i64, limit: i64) -> Result<Vec<DeskLine>, StoreError>;

    /// The lines `what` written in `[from, to)`, `tenant`'s cases only when given, oldest first.
    async fn case_lines(
        &self,
        tenant: Option<&str>,
        what: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<CaseEvent>, StoreError>;

    /// `tenant`'s kept answers, by shortcut.
    async fn canned_answers(&self, tenant: &str) -> Result<Vec<CannedAnswer>, StoreError>;

    /// Keeps `answer` (a new shortcut, or a new text for one kept).
    async fn save_canned_answer(&self, answer: &CannedAnswer) -> Result<(), StoreError>;

    /// Removes `tenant`'s answer `shortcut`: `false` when there was none.
    async fn delete_canned_answer(&self, tenant: &str, shortcut: &str) -> Result<bool, StoreError>;
}
