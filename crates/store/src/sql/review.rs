//! [`ReviewStore`], once for both backends.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Sql, Stmt};
use crate::rows::{self, Columns};
use crate::{FaqDecision, NewReviewItem, ReviewItem, ReviewLabel, ReviewStore, StoreError};

#[async_trait]
impl<S: Sql> ReviewStore for S {
    async fn enqueue_review(&self, i: &NewReviewItem) -> Result<Option<i64>, StoreError> {
        let s = Stmt::new(
            "INSERT INTO review_items (tenant_id, conversation_id, message_id, source, reason, note, flagged_by, \
             created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (conversation_id, message_id, source) DO NOTHING RETURNING id",
        )
        .bind(&i.tenant_id)
        .bind(&i.conversation_id)
        .bind(i.message_id)
        .bind(&i.source)
        .bind(i.reason.as_deref())
        .bind(i.note.as_deref().map(crate::seal::seal))
        .bind(i.flagged_by.as_deref())
        .bind(i.created_at);
        let rows = self.write_returning(s).await?;
        rows.first().map(|r| r.value::<i64>("id")).transpose()
    }

    async fn flagged_messages(&self, conversation: &str) -> Result<Vec<i64>, StoreError> {
        let rows = self
            .read_fresh(
                Stmt::new(
                    "SELECT message_id FROM review_items WHERE conversation_id = $1 AND source = 'sinalizada' \
                     ORDER BY message_id",
                )
                .bind(conversation),
            )
            .await?;
        rows.iter().map(|r| r.value::<i64>("message_id")).collect()
    }

    async fn review_item(&self, id: i64) -> Result<Option<ReviewItem>, StoreError> {
        let row = self
            .read_one(Stmt::new("SELECT * FROM review_items WHERE id = $1").bind(id))
            .await?;
        row.as_ref().map(rows::review_item).transpose()
    }

    async fn review_items(&self, tenant: Option<&str>, limit: i64) -> Result<Vec<ReviewItem>, StoreError> {
        let rows = self
            .read_fresh(
                Stmt::new(
                    "SELECT * FROM review_items WHERE (CAST($1 AS TEXT) IS NULL OR tenant_id = $1) \
                     ORDER BY created_at DESC, id DESC LIMIT $2",
                )
                .bind(tenant)
                .bind(limit),
            )
            .await?;
        rows.iter().map(rows::review_item).collect()
    }

    async fn label_review(&self, id: i64, l: &ReviewLabel) -> Result<bool, StoreError> {
        let s = Stmt::new(
            "UPDATE review_items SET state = 'rotulado', labels = $2, expectation = $3, test_file = $4, \
             reviewed_by = $5, reviewed_at = $6 WHERE id = $1 AND state = 'aberto'",
        )
        .bind(id)
        .json(&l.labels)?
        .sealed(&l.expectation)?
        .bind(l.test_file.as_str())
        .bind(l.by.as_str())
        .bind(l.at);
        Ok(self.write(s).await? == 1)
    }

    async fn dismiss_review(&self, id: i64, by: &str, at: DateTime<Utc>) -> Result<bool, StoreError> {
        let s = Stmt::new(
            "UPDATE review_items SET state = 'descartado', reviewed_by = $2, reviewed_at = $3 \
             WHERE id = $1 AND state = 'aberto'",
        )
        .bind(id)
        .bind(by)
        .bind(at);
        Ok(self.write(s).await? == 1)
    }

    async fn faq_decisions(&self, tenant: &str) -> Result<Vec<FaqDecision>, StoreError> {
        let rows = self
            .read_fresh(
                Stmt::new("SELECT * FROM faq_decisions WHERE tenant_id = $1 ORDER BY decided_at")
                    .bind(tenant),
            )
            .await?;
        rows.iter().map(rows::faq_decision).collect()
    }

    async fn decide_faq(&self, d: &FaqDecision) -> Result<bool, StoreError> {
        let s = Stmt::new(
            "INSERT INTO faq_decisions (tenant_id, suggestion, decision, entry, decided_by, decided_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant_id, suggestion) DO NOTHING",
        )
        .bind(&d.tenant_id)
        .bind(&d.suggestion)
        .bind(&d.decision)
        .bind(d.entry.as_deref())
        .bind(&d.decided_by)
        .bind(d.decided_at);
        Ok(self.write(s).await? == 1)
    }
}
