//! [`RechargeStore`] on PostgreSQL.

use super::*;
use crate::store::RechargeStore;

#[async_trait]
impl RechargeStore for PgStore {
    async fn consume_confirmation(
        &self,
        c: Confirmation<'_>,
        attempt: Option<&RechargeAttempt>,
        now: DateTime<Utc>,
    ) -> Result<Consumption, StoreError> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "INSERT INTO consumed_confirmations (pending_id, origin, consumed_at, consumer) VALUES ($1, $2, $3, $4)
             ON CONFLICT (pending_id) DO NOTHING",
        )
        .bind(c.pending_id)
        .bind(c.origin)
        .bind(now)
        .bind(c.consumer)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            let by: Option<String> =
                sqlx::query_scalar("SELECT consumer FROM consumed_confirmations WHERE pending_id = $1")
                    .bind(c.pending_id)
                    .fetch_one(&mut *tx)
                    .await?;
            tx.commit().await?;
            return Ok(Consumption::before(by.as_deref().unwrap_or_default(), c.consumer));
        }
        if let Some(a) = attempt {
            insert_attempt(a, now, Sent::NotYet).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(Consumption::Now)
    }

    async fn confirmation_consumer(&self, pending_id: &str) -> Result<Option<String>, StoreError> {
        let row: Option<(Option<String>,)> =
            sqlx::query_as("SELECT consumer FROM consumed_confirmations WHERE pending_id = $1")
                .bind(pending_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|(by,)| by.unwrap_or_default()))
    }

    async fn begin_recharge(&self, a: &RechargeAttempt, now: DateTime<Utc>) -> Result<(), StoreError> {
        insert_attempt(a, now, Sent::Now).execute(&self.pool).await?;
        Ok(())
    }

    async fn resolve_recharge(
        &self,
        idempotency_key: &str,
        status: AttemptStatus,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE recharge_attempts SET status = $1, updated_at = $2 WHERE idempotency_key = $3")
            .bind(status.as_str())
            .bind(now)
            .bind(idempotency_key)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn unresolved_recharge(
        &self,
        scope: &str,
        fingerprint: &str,
    ) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT idempotency_key FROM recharge_attempts
             WHERE scope = $1 AND fingerprint = $2 AND status = ANY($3)
             ORDER BY updated_at DESC LIMIT 1",
        )
        .bind(scope)
        .bind(fingerprint)
        .bind(AttemptStatus::UNKNOWN.map(AttemptStatus::as_str).to_vec())
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| r.try_get("idempotency_key")).transpose()?)
    }

    async fn recharge_attempts(&self, limit: i64) -> Result<Vec<RechargeAttemptRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT * FROM recharge_attempts ORDER BY updated_at DESC, idempotency_key DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let valor: String = r.try_get("valor")?;
                Ok(RechargeAttemptRecord {
                    attempt: RechargeAttempt {
                        idempotency_key: r.try_get("idempotency_key")?,
                        fingerprint: r.try_get("fingerprint")?,
                        scope: r.try_get("scope")?,
                        origin: r.try_get("origin")?,
                        execucao_id: r.try_get("execucao_id")?,
                        cartao_mascarado: r.try_get("cartao_mascarado")?,
                        valor: Decimal::from_str(&valor)
                            .map_err(|e| StoreError::Invalid(format!("stored recharge value: {e}")))?,
                        moeda: r.try_get("moeda")?,
                    },
                    status: attempt_status(r.try_get("status")?)?,
                    sends: r.try_get::<i32, _>("sends")?.into(),
                    created_at: r.try_get("created_at")?,
                    updated_at: r.try_get("updated_at")?,
                })
            })
            .collect()
    }
}
