//! [`OutboxStore`] on SQLite.

use super::*;
use crate::store::OutboxStore;

#[async_trait]
impl OutboxStore for SqliteStore {
    async fn enqueue(&self, item: &NewOutboxItem, now: DateTime<Utc>) -> Result<i64, StoreError> {
        let mut conn = self.writer.acquire().await?;
        Self::insert_outbox(&mut conn, item, now).await
    }

    async fn claim(
        &self,
        limit: i64,
        now: DateTime<Utc>,
        lease: chrono::Duration,
    ) -> Result<Vec<OutboxItem>, StoreError> {
        // One UPDATE: SQLite has a single writer, so the select-and-mark cannot interleave. An item
        // waits while an earlier one of its conversation is unfinished: replies go out in order.
        let rows = sqlx::query(
            "UPDATE outbox SET status = 'in_flight', attempts = attempts + 1, claimed_until = ?
             WHERE id IN (SELECT o.id FROM outbox o
                          WHERE ((o.status = 'pending' AND o.next_attempt_at <= ?)
                                 OR (o.status = 'in_flight' AND o.claimed_until < ?))
                            AND NOT EXISTS (SELECT 1 FROM outbox e
                                            WHERE o.conversation_id IS NOT NULL
                                              AND e.conversation_id = o.conversation_id AND e.id < o.id
                                              AND e.status IN ('pending', 'in_flight', 'held'))
                          ORDER BY o.id LIMIT ?)
             RETURNING id, kind, destination, payload, conversation_id, status, attempts, max_attempts,
                 next_attempt_at, last_error",
        )
        .bind(ms(now + lease))
        .bind(ms(now))
        .bind(ms(now))
        .bind(limit)
        .fetch_all(&self.writer)
        .await?;
        let mut items = rows
            .iter()
            .map(rows::outbox_item)
            .collect::<Result<Vec<_>, _>>()?;
        items.sort_by_key(|i| i.id);
        Ok(items)
    }

    async fn ack(&self, id: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET status = 'done', claimed_until = NULL WHERE id = ?")
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn retry_later(
        &self,
        id: i64,
        error: &str,
        next_attempt_at: DateTime<Utc>,
    ) -> Result<OutboxStatus, StoreError> {
        let row = sqlx::query(
            "UPDATE outbox SET status = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END,
                 next_attempt_at = ?, last_error = ?, claimed_until = NULL
             WHERE id = ? RETURNING status",
        )
        .bind(ms(next_attempt_at))
        .bind(error)
        .bind(id)
        .fetch_optional(&self.writer)
        .await?
        .ok_or_else(|| StoreError::Invalid(format!("outbox item {id} does not exist")))?;
        OutboxStatus::parse(&row.try_get::<String, _>("status")?)
    }

    async fn record_sent(&self, id: i64, external_id: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET external_id = ? WHERE id = ?")
            .bind(external_id)
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn record_delivery_status(
        &self,
        external_id: &str,
        status: &str,
        error_code: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let ours = sqlx::query("SELECT 1 FROM outbox WHERE external_id = ?")
            .bind(external_id)
            .fetch_optional(&self.pool)
            .await?
            .is_some();
        if ours {
            sqlx::query(
                "INSERT INTO delivery_statuses (external_id, status, error_code, at) VALUES (?, ?, ?, ?)
             ON CONFLICT DO NOTHING",
            )
            .bind(external_id)
            .bind(status)
            .bind(error_code)
            .bind(ms(at))
            .execute(&self.writer)
            .await?;
        }
        Ok(ours)
    }

    async fn delivery_statuses(
        &self,
        external_id: &str,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let rows = sqlx::query(
            "SELECT status, error_code FROM delivery_statuses WHERE external_id = ? ORDER BY at, rowid",
        )
        .bind(external_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("status")?, r.try_get("error_code")?)))
            .collect()
    }

    async fn dead_letter(&self, id: i64, error: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET status = 'failed', last_error = ?, claimed_until = NULL WHERE id = ?")
            .bind(error)
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn hold(&self, id: i64, why: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET status = 'held', last_error = ?, claimed_until = NULL WHERE id = ?")
            .bind(why)
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn release_held(&self, conversation_id: &str, now: DateTime<Utc>) -> Result<u64, StoreError> {
        let released = sqlx::query(
            "UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = ? \
             WHERE conversation_id = ? AND status = 'held'",
        )
        .bind(ms(now))
        .bind(conversation_id)
        .execute(&self.writer)
        .await?
        .rows_affected();
        Ok(released)
    }

    async fn outbox_count(&self, status: OutboxStatus) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM outbox WHERE status = ?")
            .bind(status.as_str())
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get("n")?)
    }

    async fn outbox_items(&self, status: OutboxStatus, limit: i64) -> Result<Vec<OutboxItem>, StoreError> {
        let rows = sqlx::query("SELECT * FROM outbox WHERE status = ? ORDER BY id LIMIT ?")
            .bind(status.as_str())
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(rows::outbox_item).collect()
    }

    async fn requeue(&self, id: i64, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = ?, claimed_until = NULL
             WHERE id = ? AND status = 'failed'",
        )
        .bind(ms(now))
        .bind(id)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn outbox_item(&self, id: i64) -> Result<Option<OutboxItem>, StoreError> {
        let row = sqlx::query("SELECT * FROM outbox WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| rows::outbox_item(&r)).transpose()
    }
}
