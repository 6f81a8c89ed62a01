//! [`RechargeStore`] on SQLite.

use super::*;
use crate::store::RechargeStore;

#[async_trait]
impl RechargeStore for SqliteStore {
    async fn consume_confirmation(
        &self,
        c: Confirmation<'_>,
        attempt: Option<&RechargeAttempt>,
        now: DateTime<Utc>,
    ) -> Result<Consumption, StoreError> {
        let mut tx = self.writer.begin().await?;
        let done = sqlx::query(
            "INSERT INTO consumed_confirmations (pending_id, origin, consumed_at, consumer) VALUES (?, ?, ?, ?)
             ON CONFLICT(pending_id) DO NOTHING",
        )
        .bind(c.pending_id)
        .bind(c.origin)
        .bind(ms(now))
        .bind(c.consumer)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            let by: Option<String> =
                sqlx::query_scalar("SELECT consumer FROM consumed_confirmations WHERE pending_id = ?")
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
        // On the writer: a reader may not see a consumption this process just committed yet.
        let row: Option<(Option<String>,)> =
            sqlx::query_as("SELECT consumer FROM consumed_confirmations WHERE pending_id = ?")
                .bind(pending_id)
                .fetch_optional(&self.writer)
                .await?;
        Ok(row.map(|(by,)| by.unwrap_or_default()))
    }

    async fn begin_recharge(&self, a: &RechargeAttempt, now: DateTime<Utc>) -> Result<(), StoreError> {
        self.attempts.write(Write::Begin(Box::new(a.clone()), now)).await
    }

    async fn resolve_recharge(
        &self,
        idempotency_key: &str,
        status: AttemptStatus,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.attempts
            .write(Write::Resolve {
                key: idempotency_key.to_owned(),
                status,
                now,
            })
            .await
    }

    async fn unresolved_recharge(
        &self,
        scope: &str,
        fingerprint: &str,
    ) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT idempotency_key FROM recharge_attempts
             WHERE scope = ? AND fingerprint = ? AND status IN (?, ?)
             ORDER BY updated_at DESC LIMIT 1",
        )
        .bind(scope)
        .bind(fingerprint)
        .bind(AttemptStatus::UNKNOWN[0].as_str())
        .bind(AttemptStatus::UNKNOWN[1].as_str())
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| r.try_get("idempotency_key")).transpose()?)
    }

    async fn recharge_attempts(&self, limit: i64) -> Result<Vec<RechargeAttemptRecord>, StoreError> {
        let rows =
            sqlx::query("SELECT * FROM recharge_attempts ORDER BY updated_at DESC, rowid DESC LIMIT ?")
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
                    sends: r.try_get("sends")?,
                    created_at: at(r.try_get("created_at")?),
                    updated_at: at(r.try_get("updated_at")?),
                })
            })
            .collect()
    }
}
