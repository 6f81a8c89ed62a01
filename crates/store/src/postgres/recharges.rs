//! [`RechargeStore`] on PostgreSQL.

use super::*;
use crate::{Checked, FollowUp, FollowUpView, RechargeStore};

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

    async fn begin_recharge(
        &self,
        a: &RechargeAttempt,
        follow_up: Option<&NewFollowUp>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let Some(f) = follow_up else {
            insert_attempt(a, now, Sent::Now).execute(&self.pool).await?;
            return Ok(());
        };
        let mut tx = self.pool.begin().await?;
        insert_attempt(a, now, Sent::Now).execute(&mut *tx).await?;
        sqlx::query(
            "INSERT INTO recharge_followups (idempotency_key, request, checks, next_check_at, deadline_at, created_at)
             VALUES ($1, $2, 0, $3, $4, $5) ON CONFLICT (idempotency_key) DO NOTHING",
        )
        .bind(&a.idempotency_key)
        .bind(crate::seal::seal(&vt_contract::json::to_text(&f.request)?))
        .bind(f.next_check_at)
        .bind(f.deadline_at)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn resolve_recharge(
        &self,
        idempotency_key: &str,
        status: AttemptStatus,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        if status.is_unknown() {
            sqlx::query(
                "UPDATE recharge_attempts SET status = $1, updated_at = $2 WHERE idempotency_key = $3",
            )
            .bind(status.as_str())
            .bind(now)
            .bind(idempotency_key)
            .execute(&self.pool)
            .await?;
            return Ok(());
        }
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE recharge_attempts SET status = $1, updated_at = $2 WHERE idempotency_key = $3")
            .bind(status.as_str())
            .bind(now)
            .bind(idempotency_key)
            .execute(&mut *tx)
            .await?;
        settle_followup(&mut tx, idempotency_key, status.as_str(), now).await?;
        tx.commit().await?;
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
        rows.iter().map(rows::recharge_attempt).collect()
    }

    async fn claim_followups(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<FollowUp>, StoreError> {
        // Instances skip the rows another is taking: each due follow-up goes to one.
        let rows = sqlx::query(
            "WITH due AS (
                 SELECT idempotency_key FROM recharge_followups
                 WHERE settled_at IS NULL AND next_check_at <= $1 AND (leased_until IS NULL OR leased_until <= $1)
                 ORDER BY next_check_at LIMIT $3 FOR UPDATE SKIP LOCKED),
             taken AS (
                 UPDATE recharge_followups f SET leased_until = $2 FROM due
                 WHERE f.idempotency_key = due.idempotency_key
                 RETURNING f.idempotency_key, f.request, f.checks, f.deadline_at)
             SELECT a.*, taken.request, taken.checks, taken.deadline_at
             FROM taken JOIN recharge_attempts a ON a.idempotency_key = taken.idempotency_key",
        )
        .bind(now)
        .bind(lease_until)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows::followups(&rows)
    }

    async fn followup_checked(
        &self,
        key: &str,
        checked: &Checked,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        match checked {
            Checked::Again { next, deadline } => {
                sqlx::query(
                    "UPDATE recharge_followups SET checks = checks + 1, next_check_at = $1, deadline_at = $2, leased_until = NULL
                     WHERE idempotency_key = $3 AND settled_at IS NULL",
                )
                .bind(*next)
                .bind(*deadline)
                .bind(key)
                .execute(&self.pool)
                .await?;
            }
            Checked::Settled(outcome) => {
                let mut tx = self.pool.begin().await?;
                sqlx::query("UPDATE recharge_followups SET checks = checks + 1 WHERE idempotency_key = $1")
                    .bind(key)
                    .execute(&mut *tx)
                    .await?;
                settle_followup(&mut tx, key, outcome, now).await?;
                tx.commit().await?;
            }
        }
        Ok(())
    }

    async fn followups(&self, pending_only: bool, limit: i64) -> Result<Vec<FollowUpView>, StoreError> {
        let rows = sqlx::query(
            "SELECT a.*, f.checks, f.next_check_at, f.deadline_at, f.outcome, f.settled_at
             FROM recharge_followups f JOIN recharge_attempts a ON a.idempotency_key = f.idempotency_key
             WHERE f.settled_at IS NULL OR NOT $1
             ORDER BY f.settled_at IS NOT NULL, f.next_check_at, f.settled_at DESC LIMIT $2",
        )
        .bind(pending_only)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(rows::followup_view).collect()
    }
}

/// Settles a follow-up still open as `outcome`, dropping its request.
async fn settle_followup(
    tx: &mut Transaction<'_, Postgres>,
    key: &str,
    outcome: &str,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE recharge_followups SET request = NULL, outcome = $1, settled_at = $2, leased_until = NULL
         WHERE idempotency_key = $3 AND settled_at IS NULL",
    )
    .bind(outcome)
    .bind(now)
    .bind(key)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
