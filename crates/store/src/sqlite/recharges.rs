//! [`RechargeStore`] on SQLite.

use super::*;
use crate::{Checked, FollowUp, FollowUpView, RechargeStore};

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

    async fn begin_recharge(
        &self,
        a: &RechargeAttempt,
        follow_up: Option<&NewFollowUp>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.attempts
            .write(Write::Begin(Box::new((a.clone(), follow_up.cloned())), now))
            .await
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
        rows.iter().map(rows::recharge_attempt).collect()
    }

    async fn claim_followups(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<FollowUp>, StoreError> {
        // One statement on the one writer: of several processes on the file, one takes each.
        let keys: Vec<String> = sqlx::query_scalar(
            "UPDATE recharge_followups SET leased_until = ?
             WHERE idempotency_key IN (
                 SELECT idempotency_key FROM recharge_followups
                 WHERE settled_at IS NULL AND next_check_at <= ? AND (leased_until IS NULL OR leased_until <= ?)
                 ORDER BY next_check_at LIMIT ?)
             RETURNING idempotency_key",
        )
        .bind(ms(lease_until))
        .bind(ms(now))
        .bind(ms(now))
        .bind(limit)
        .fetch_all(&self.writer)
        .await?;
        // The claimed rows in one read (the keys as a JSON array), not one per key.
        let rows = sqlx::query(
            "SELECT a.*, f.request, f.checks, f.deadline_at FROM recharge_followups f
             JOIN recharge_attempts a ON a.idempotency_key = f.idempotency_key
             WHERE f.idempotency_key IN (SELECT value FROM json_each(?))",
        )
        .bind(plain(&keys)?)
        .fetch_all(&self.writer)
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
                    "UPDATE recharge_followups SET checks = checks + 1, next_check_at = ?, deadline_at = ?, leased_until = NULL
                     WHERE idempotency_key = ? AND settled_at IS NULL",
                )
                .bind(ms(*next))
                .bind(ms(*deadline))
                .bind(key)
                .execute(&self.writer)
                .await?;
            }
            Checked::Settled(outcome) => {
                let mut tx = self.writer.begin().await?;
                sqlx::query("UPDATE recharge_followups SET checks = checks + 1 WHERE idempotency_key = ?")
                    .bind(key)
                    .execute(&mut *tx)
                    .await?;
                settle_followup(key, outcome, now).execute(&mut *tx).await?;
                tx.commit().await?;
            }
        }
        Ok(())
    }

    async fn followups(&self, pending_only: bool, limit: i64) -> Result<Vec<FollowUpView>, StoreError> {
        let rows = sqlx::query(
            "SELECT a.*, f.checks, f.next_check_at, f.deadline_at, f.outcome, f.settled_at
             FROM recharge_followups f JOIN recharge_attempts a ON a.idempotency_key = f.idempotency_key
             WHERE f.settled_at IS NULL OR NOT ?
             ORDER BY f.settled_at IS NOT NULL, f.next_check_at, f.settled_at DESC LIMIT ?",
        )
        .bind(pending_only)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(rows::followup_view).collect()
    }
}
