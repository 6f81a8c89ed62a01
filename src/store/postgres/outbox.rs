//! [`OutboxStore`] on PostgreSQL.

use super::*;
use crate::store::OutboxStore;

#[async_trait]
impl OutboxStore for PgStore {
    async fn enqueue(&self, item: &NewOutboxItem, now: DateTime<Utc>) -> Result<i64, StoreError> {
        let mut conn = self.pool.acquire().await?;
        Self::insert_outbox(&mut conn, item, now).await
    }

    async fn claim(
        &self,
        limit: i64,
        now: DateTime<Utc>,
        lease: chrono::Duration,
    ) -> Result<Vec<OutboxItem>, StoreError> {
        let rows = sqlx::query(
            "UPDATE outbox SET status = 'in_flight', attempts = attempts + 1, claimed_until = $1
             WHERE id IN (SELECT o.id FROM outbox o
                          WHERE ((o.status = 'pending' AND o.next_attempt_at <= $2)
                                 OR (o.status = 'in_flight' AND o.claimed_until < $2))
                            AND NOT EXISTS (SELECT 1 FROM outbox e
                                            WHERE o.conversation_id IS NOT NULL
                                              AND e.conversation_id = o.conversation_id AND e.id < o.id
                                              AND e.status IN ('pending', 'in_flight', 'held'))
                          ORDER BY o.id LIMIT $3
                          FOR UPDATE SKIP LOCKED)
             RETURNING id, kind, destination, payload, conversation_id, status, attempts, max_attempts,
                 next_attempt_at, last_error",
        )
        .bind(now + lease)
        .bind(now)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut items = rows
            .iter()
            .map(rows::outbox_item)
            .collect::<Result<Vec<_>, _>>()?;
        items.sort_by_key(|i| i.id);
        Ok(items)
    }

    async fn ack(&self, id: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET status = 'done', claimed_until = NULL WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
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
                 next_attempt_at = $1, last_error = $2, claimed_until = NULL
             WHERE id = $3 RETURNING status",
        )
        .bind(next_attempt_at)
        .bind(error)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::Invalid(format!("outbox item {id} does not exist")))?;
        OutboxStatus::parse(&row.try_get::<String, _>("status")?)
    }

    async fn record_sent(&self, id: i64, external_id: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET external_id = $1 WHERE id = $2")
            .bind(external_id)
            .bind(id)
            .execute(&self.pool)
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
        let ours = sqlx::query("SELECT 1 FROM outbox WHERE external_id = $1")
            .bind(external_id)
            .fetch_optional(&self.pool)
            .await?
            .is_some();
        if ours {
            sqlx::query(
                "INSERT INTO delivery_statuses (external_id, status, error_code, at) VALUES ($1, $2, $3, $4)
             ON CONFLICT DO NOTHING",
            )
            .bind(external_id)
            .bind(status)
            .bind(error_code)
            .bind(at)
            .execute(&self.pool)
            .await?;
        }
        Ok(ours)
    }

    async fn delivery_statuses(
        &self,
        external_id: &str,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let rows = sqlx::query(
            "SELECT status, error_code FROM delivery_statuses WHERE external_id = $1 ORDER BY at, status",
        )
        .bind(external_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("status")?, r.try_get("error_code")?)))
            .collect()
    }

    async fn dead_letter(&self, id: i64, error: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE outbox SET status = 'failed', last_error = $1, claimed_until = NULL WHERE id = $2",
        )
        .bind(error)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn hold(&self, id: i64, why: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET status = 'held', last_error = $1, claimed_until = NULL WHERE id = $2")
            .bind(why)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn release_held(&self, conversation_id: &str, now: DateTime<Utc>) -> Result<u64, StoreError> {
        let released = sqlx::query(
            "UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = $1 \
             WHERE conversation_id = $2 AND status = 'held'",
        )
        .bind(now)
        .bind(conversation_id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(released)
    }

    async fn outbox_count(&self, status: OutboxStatus) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM outbox WHERE status = $1")
            .bind(status.as_str())
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get("n")?)
    }

    async fn outbox_items(&self, status: OutboxStatus, limit: i64) -> Result<Vec<OutboxItem>, StoreError> {
        let rows = sqlx::query("SELECT * FROM outbox WHERE status = $1 ORDER BY id LIMIT $2")
            .bind(status.as_str())
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(rows::outbox_item).collect()
    }

    async fn requeue(&self, id: i64, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = $1, claimed_until = NULL
             WHERE id = $2 AND status = 'failed'",
        )
        .bind(now)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn outbox_item(&self, id: i64) -> Result<Option<OutboxItem>, StoreError> {
        let row = sqlx::query("SELECT * FROM outbox WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| rows::outbox_item(&r)).transpose()
    }
}
