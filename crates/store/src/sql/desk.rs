//! [`DeskStore`], once for both backends.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Sql, Stmt};
use crate::rows::{self, Columns};
use crate::{CannedAnswer, CaseEvent, DeskLine, DeskStore, StoreError};

#[async_trait]
impl<S: Sql> DeskStore for S {
    async fn desk_head(&self) -> Result<i64, StoreError> {
        let row = self
            .read_one(Stmt::new("SELECT COALESCE(MAX(seq), 0) AS head FROM case_events"))
            .await?;
        row.map_or(Ok(0), |r| r.value("head"))
    }

    async fn desk_lines(&self, after: i64, limit: i64) -> Result<Vec<DeskLine>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new(
                    "SELECT e.seq, e.case_id, e.conversation_id, e.at, e.who, e.what, e.detail, \
                     c.tenant_id, c.team, c.protocol FROM case_events e JOIN cases c ON c.id = e.case_id \
                     WHERE e.seq > $1 ORDER BY e.seq LIMIT $2",
                )
                .bind(after)
                .bind(limit),
            )
            .await?;
        rows.iter().map(rows::desk_line).collect()
    }

    async fn case_lines(
        &self,
        tenant: Option<&str>,
        what: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<CaseEvent>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new(
                    "SELECT e.* FROM case_events e JOIN cases c ON c.id = e.case_id \
                     WHERE e.what = $1 AND e.at >= $2 AND e.at < $3 \
                     AND (CAST($4 AS TEXT) IS NULL OR c.tenant_id = $4) ORDER BY e.seq",
                )
                .bind(what)
                .bind(from)
                .bind(to)
                .bind(tenant),
            )
            .await?;
        rows.iter().map(rows::case_event).collect()
    }

    async fn canned_answers(&self, tenant: &str) -> Result<Vec<CannedAnswer>, StoreError> {
        let rows = self
            .read_fresh(
                Stmt::new("SELECT * FROM canned_answers WHERE tenant_id = $1 ORDER BY shortcut").bind(tenant),
            )
            .await?;
        rows.iter().map(rows::canned_answer).collect()
    }

    async fn save_canned_answer(&self, a: &CannedAnswer) -> Result<(), StoreError> {
        let s = Stmt::new(
            "INSERT INTO canned_answers (tenant_id, shortcut, team, body, updated_by, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant_id, shortcut) DO UPDATE SET \
             team = $3, body = $4, updated_by = $5, updated_at = $6",
        )
        .bind(&a.tenant_id)
        .bind(&a.shortcut)
        .bind(a.team.as_deref().unwrap_or_default())
        .bind(&a.body)
        .bind(&a.updated_by)
        .bind(a.updated_at);
        self.write(s).await?;
        Ok(())
    }

    async fn delete_canned_answer(&self, tenant: &str, shortcut: &str) -> Result<bool, StoreError> {
        let s = Stmt::new("DELETE FROM canned_answers WHERE tenant_id = $1 AND shortcut = $2")
            .bind(tenant)
            .bind(shortcut);
        Ok(self.write(s).await? == 1)
    }
}
