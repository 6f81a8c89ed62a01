//! [`ReportStore`] on PostgreSQL.

use super::*;
use crate::store::ReportStore;

#[async_trait]
impl ReportStore for PgStore {
    async fn record_usage(&self, usage: &UsageRecord) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        Self::insert_usage(&mut tx, usage).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn usage_summary(&self) -> Result<Vec<UsageSummaryRow>, StoreError> {
        let rows = sqlx::query("SELECT * FROM usage_summary_7d ORDER BY turns DESC, intent_key")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(UsageSummaryRow {
                    intent_key: r.try_get("intent_key")?,
                    action_type: r.try_get("action_type")?,
                    turns: r.try_get("turns")?,
                    tokens_input: r.try_get("tokens_input")?,
                    tokens_output: r.try_get("tokens_output")?,
                    zero_token_turns: r.try_get("zero_token_turns")?,
                    keyword_matched: r.try_get("keyword_matched")?,
                    mean_time_ms: r.try_get("mean_time_ms")?,
                })
            })
            .collect()
    }

    async fn upsert_intent(&self, i: &IntentRecord, now: DateTime<Utc>) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO intent_actions (intent_key, description, action_type, required_params, optional_params,
                 prompt_template, max_tokens, is_active, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (intent_key) DO UPDATE SET description = excluded.description, action_type = excluded.action_type,
                 required_params = excluded.required_params, optional_params = excluded.optional_params,
                 prompt_template = excluded.prompt_template, max_tokens = excluded.max_tokens, is_active = excluded.is_active",
        )
        .bind(&i.intent_key)
        .bind(&i.description)
        .bind(&i.action_type)
        .bind(plain(&i.required_params)?)
        .bind(plain(&i.optional_params)?)
        .bind(&i.prompt_template)
        .bind(i.max_tokens as i32)
        .bind(i.is_active)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn intents(&self) -> Result<Vec<IntentRecord>, StoreError> {
        let rows = sqlx::query("SELECT * FROM intent_actions ORDER BY intent_key")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(IntentRecord {
                    intent_key: r.try_get("intent_key")?,
                    description: r.try_get("description")?,
                    action_type: r.try_get("action_type")?,
                    required_params: parse(r, "required_params")?,
                    optional_params: parse(r, "optional_params")?,
                    prompt_template: r.try_get("prompt_template")?,
                    max_tokens: i64::from(r.try_get::<i32, _>("max_tokens")?),
                    is_active: r.try_get("is_active")?,
                })
            })
            .collect()
    }

    async fn put_idempotency(
        &self,
        r: &IdempotencyRecord,
        now: DateTime<Utc>,
    ) -> Result<IdempotencyPut, StoreError> {
        let done = sqlx::query(
            "INSERT INTO idempotency_records (key, scope, request_hash, response, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (key) DO UPDATE SET scope = excluded.scope, request_hash = excluded.request_hash,
                 response = excluded.response, created_at = excluded.created_at, expires_at = excluded.expires_at
             WHERE idempotency_records.expires_at <= $7",
        )
        .bind(&r.key)
        .bind(&r.scope)
        .bind(&r.request_hash)
        .bind(value(&r.response)?)
        .bind(r.created_at)
        .bind(r.expires_at)
        .bind(now)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 1 {
            return Ok(IdempotencyPut::Inserted);
        }
        match self.idempotency(&r.key, now).await? {
            Some(existing) => Ok(IdempotencyPut::Existing(existing)),
            None => Err(StoreError::Invalid(format!(
                "idempotency key {} neither inserted nor found",
                r.key
            ))),
        }
    }

    async fn idempotency(
        &self,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        let row = sqlx::query("SELECT * FROM idempotency_records WHERE key = $1 AND expires_at > $2")
            .bind(key)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| rows::idempotency_record(&r)).transpose()
    }

    async fn settle_idempotency(&self, key: &str, response: Option<&Value>) -> Result<(), StoreError> {
        match response {
            Some(r) => {
                sqlx::query("UPDATE idempotency_records SET response = $1 WHERE key = $2")
                    .bind(value(r)?)
                    .bind(key)
                    .execute(&self.pool)
                    .await?;
            }
            None => {
                sqlx::query("DELETE FROM idempotency_records WHERE key = $1")
                    .bind(key)
                    .execute(&self.pool)
                    .await?;
            }
        }
        Ok(())
    }

    async fn usage_since(&self, since: DateTime<Utc>) -> Result<Vec<UsageRecord>, StoreError> {
        let rows = sqlx::query("SELECT * FROM usage_metrics WHERE created_at >= $1 ORDER BY created_at, id")
            .bind(since)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(UsageRecord {
                    conversation_id: r.try_get("conversation_id")?,
                    intent_key: r.try_get("intent_key")?,
                    action_type: r.try_get("action_type")?,
                    tokens_input: r.try_get("tokens_input")?,
                    tokens_output: r.try_get("tokens_output")?,
                    execution_time_ms: r.try_get("execution_time_ms")?,
                    was_keyword_matched: r.try_get("was_keyword_matched")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect()
    }

    async fn record_audit(&self, r: &AuditRecord) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO support_audit (at, support_user, tenant_id, channel, cartao, cartao_hash, outcome, conversation_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)")
            .bind(r.at)
            .bind(&r.support_user)
            .bind(&r.tenant_id)
            .bind(&r.channel)
            .bind(&r.cartao)
            .bind(&r.cartao_hash)
            .bind(&r.outcome)
            .bind(&r.conversation_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn audit_records(&self, limit: i64) -> Result<Vec<AuditRecord>, StoreError> {
        let rows = sqlx::query("SELECT * FROM support_audit ORDER BY id DESC LIMIT $1")
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(AuditRecord {
                    at: row.try_get("at")?,
                    support_user: row.try_get("support_user")?,
                    tenant_id: row.try_get("tenant_id")?,
                    channel: row.try_get("channel")?,
                    cartao: row.try_get("cartao")?,
                    cartao_hash: row.try_get("cartao_hash")?,
                    outcome: row.try_get("outcome")?,
                    conversation_id: row.try_get("conversation_id")?,
                })
            })
            .collect()
    }
}
