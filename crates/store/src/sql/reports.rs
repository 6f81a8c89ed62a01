//! [`ReportStore`], once for both backends.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{Sql, Stmt};
use crate::rows::{self, Columns};
use crate::{
    AuditRecord, IdempotencyPut, IdempotencyRecord, IntentRecord, MessageCost, ReportStore, StoreError,
    TenantSpending, UsageRecord, UsageSummaryRow,
};

#[async_trait]
impl<S: Sql> ReportStore for S {
    async fn record_usage(&self, usage: &UsageRecord) -> Result<(), StoreError> {
        self.write(super::write::usage(usage)).await?;
        Ok(())
    }

    async fn usage_summary(&self, since: DateTime<Utc>) -> Result<Vec<UsageSummaryRow>, StoreError> {
        // Counted from the caller's clock (the service's, which tests move), not the database's: the
        // same SQL on both backends (`CASE` reads SQLite's 0/1 and PostgreSQL's booleans alike).
        let rows = self
            .read_all(
                Stmt::new(
                    "SELECT intent_key, action_type,
                        CAST(COUNT(*) AS BIGINT) AS turns,
                        CAST(SUM(tokens_input) AS BIGINT) AS tokens_input,
                        CAST(SUM(tokens_output) AS BIGINT) AS tokens_output,
                        CAST(SUM(CASE WHEN tokens_input + tokens_output = 0 THEN 1 ELSE 0 END) AS BIGINT)
                            AS zero_token_turns,
                        CAST(SUM(CASE WHEN was_keyword_matched THEN 1 ELSE 0 END) AS BIGINT) AS keyword_matched,
                        CAST(AVG(execution_time_ms) AS DOUBLE PRECISION) AS mean_time_ms,
                        CAST(SUM(tokens_cached) AS BIGINT) AS tokens_cached
                     FROM usage_metrics WHERE created_at >= $1
                     GROUP BY intent_key, action_type ORDER BY turns DESC, intent_key",
                )
                .bind(since),
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(UsageSummaryRow {
                    intent_key: r.value("intent_key")?,
                    action_type: r.value("action_type")?,
                    turns: r.value("turns")?,
                    tokens_input: r.value("tokens_input")?,
                    tokens_output: r.value("tokens_output")?,
                    zero_token_turns: r.value("zero_token_turns")?,
                    keyword_matched: r.value("keyword_matched")?,
                    mean_time_ms: r.value("mean_time_ms")?,
                    tokens_cached: r.value("tokens_cached")?,
                })
            })
            .collect()
    }

    async fn upsert_intent(&self, i: &IntentRecord, now: DateTime<Utc>) -> Result<(), StoreError> {
        let s = Stmt::new(
            "INSERT INTO intent_actions (intent_key, description, action_type, required_params, optional_params,
                 prompt_template, max_tokens, is_active, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (intent_key) DO UPDATE SET description = excluded.description, action_type = excluded.action_type,
                 required_params = excluded.required_params, optional_params = excluded.optional_params,
                 prompt_template = excluded.prompt_template, max_tokens = excluded.max_tokens, is_active = excluded.is_active",
        )
        .bind(&i.intent_key)
        .bind(&i.description)
        .bind(&i.action_type)
        .json(&i.required_params)?
        .json(&i.optional_params)?
        .bind(&i.prompt_template)
        .bind(i.max_tokens)
        .bind(i.is_active)
        .bind(now);
        self.write(s).await?;
        Ok(())
    }

    async fn intents(&self) -> Result<Vec<IntentRecord>, StoreError> {
        let rows = self
            .read_all(Stmt::new("SELECT * FROM intent_actions ORDER BY intent_key"))
            .await?;
        rows.iter()
            .map(|r| {
                Ok(IntentRecord {
                    intent_key: r.value("intent_key")?,
                    description: r.value("description")?,
                    action_type: r.value("action_type")?,
                    required_params: r.json("required_params")?,
                    optional_params: r.json("optional_params")?,
                    prompt_template: r.value("prompt_template")?,
                    max_tokens: i64::from(r.value::<i32>("max_tokens")?),
                    is_active: r.value("is_active")?,
                })
            })
            .collect()
    }

    async fn put_idempotency(
        &self,
        r: &IdempotencyRecord,
        now: DateTime<Utc>,
    ) -> Result<IdempotencyPut, StoreError> {
        // One statement: insert, or take over an expired record; a live one is left alone.
        let s = Stmt::new(
            "INSERT INTO idempotency_records (key, scope, request_hash, response, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (key) DO UPDATE SET scope = excluded.scope, request_hash = excluded.request_hash,
                 response = excluded.response, created_at = excluded.created_at, expires_at = excluded.expires_at
             WHERE idempotency_records.expires_at <= $7",
        )
        .bind(&r.key)
        .bind(&r.scope)
        .bind(&r.request_hash)
        .sealed(&r.response)?
        .bind(r.created_at)
        .bind(r.expires_at)
        .bind(now);
        if self.write(s).await? == 1 {
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
        let s = Stmt::new("SELECT * FROM idempotency_records WHERE key = $1 AND expires_at > $2")
            .bind(key)
            .bind(now);
        let row = self.read_one(s).await?;
        row.map(|r| rows::idempotency_record(&r)).transpose()
    }

    async fn settle_idempotency(&self, key: &str, response: Option<&Value>) -> Result<(), StoreError> {
        let s = match response {
            Some(r) => Stmt::new("UPDATE idempotency_records SET response = $1 WHERE key = $2")
                .sealed(r)?
                .bind(key),
            None => Stmt::new("DELETE FROM idempotency_records WHERE key = $1").bind(key),
        };
        self.write(s).await?;
        Ok(())
    }

    async fn usage_since(&self, since: DateTime<Utc>) -> Result<Vec<UsageRecord>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new("SELECT * FROM usage_metrics WHERE created_at >= $1 ORDER BY created_at, id")
                    .bind(since),
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(UsageRecord {
                    conversation_id: r.value("conversation_id")?,
                    intent_key: r.value("intent_key")?,
                    action_type: r.value("action_type")?,
                    tokens_input: r.value("tokens_input")?,
                    tokens_output: r.value("tokens_output")?,
                    execution_time_ms: r.value("execution_time_ms")?,
                    was_keyword_matched: r.value("was_keyword_matched")?,
                    created_at: r.time("created_at")?,
                    audio_ms: r.value("audio_ms")?,
                    tokens_cached: r.value("tokens_cached")?,
                    tenant_id: r.value("tenant_id")?,
                    custo_micro_brl: r.value("custo_micro_brl")?,
                    marcas: r.value("marcas")?,
                })
            })
            .collect()
    }

    async fn spent_since(&self, tenant: &str, since: DateTime<Utc>) -> Result<i64, StoreError> {
        let row = self
            .read_one(
                Stmt::new(
                    "SELECT CAST(COALESCE((SELECT SUM(custo_micro_brl) FROM usage_metrics
                                            WHERE tenant_id = $1 AND created_at >= $2), 0)
                               + COALESCE((SELECT SUM(custo_micro_brl) FROM message_costs
                                            WHERE tenant_id = $1 AND created_at >= $2), 0) AS BIGINT) AS spent",
                )
                .bind(tenant)
                .bind(since),
            )
            .await?;
        row.map_or(Ok(0), |r| r.value("spent"))
    }

    async fn spent_by_tenant_since(&self, since: DateTime<Utc>) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new(
                    "SELECT tenant_id, CAST(SUM(custo) AS BIGINT) AS spent FROM (
                         SELECT tenant_id, custo_micro_brl AS custo FROM usage_metrics
                          WHERE created_at >= $1 AND custo_micro_brl IS NOT NULL
                         UNION ALL
                         SELECT tenant_id, custo_micro_brl FROM message_costs
                          WHERE created_at >= $1 AND custo_micro_brl IS NOT NULL
                     ) AS priced GROUP BY tenant_id ORDER BY tenant_id",
                )
                .bind(since),
            )
            .await?;
        rows.iter()
            .map(|r| Ok((r.value("tenant_id")?, r.value("spent")?)))
            .collect()
    }

    async fn spending_by_tenant_since(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<TenantSpending>, StoreError> {
        let spent = self
            .read_all(
                Stmt::new(
                    "SELECT tenant_id, COUNT(DISTINCT conversation_id) AS conversas,
                            CAST(COALESCE(SUM(custo), 0) AS BIGINT) AS conhecido,
                            CAST(SUM(CASE WHEN custo IS NULL THEN 1 ELSE 0 END) AS BIGINT) AS sem_preco,
                            CAST(COALESCE(SUM(CASE WHEN de_fluxo = 1 THEN custo END), 0) AS BIGINT) AS fluxo_conhecido,
                            CAST(SUM(CASE WHEN de_fluxo = 1 AND custo IS NULL THEN 1 ELSE 0 END) AS BIGINT)
                              AS fluxo_sem_preco
                       FROM (SELECT tenant_id, conversation_id, custo_micro_brl AS custo, 0 AS de_fluxo
                               FROM usage_metrics WHERE created_at >= $1
                             UNION ALL
                             SELECT tenant_id, conversation_id, custo_micro_brl,
                                    CASE WHEN execucao_id IS NULL THEN 0 ELSE 1 END
                               FROM message_costs WHERE created_at >= $1) AS gasto
                      GROUP BY tenant_id",
                )
                .bind(since),
            )
            .await?;
        let flows = self
            .read_all(
                Stmt::new(
                    "SELECT tenant_id, COUNT(*) AS n FROM flow_runs
                      WHERE created_at >= $1 AND parent_execucao_id IS NULL GROUP BY tenant_id",
                )
                .bind(since),
            )
            .await?;
        let mut by: std::collections::BTreeMap<Option<String>, TenantSpending> = Default::default();
        for r in &spent {
            let tenant: Option<String> = Some(r.value("tenant_id")?);
            by.insert(
                tenant.clone(),
                TenantSpending {
                    tenant_id: tenant,
                    conversations: r.value("conversas")?,
                    known_micro_brl: r.value("conhecido")?,
                    unknown: r.value("sem_preco")?,
                    flows: 0,
                    flow_known_micro_brl: r.value("fluxo_conhecido")?,
                    flow_unknown: r.value("fluxo_sem_preco")?,
                },
            );
        }
        for r in &flows {
            let tenant: Option<String> = r.value("tenant_id")?;
            let row = by.entry(tenant.clone()).or_insert_with(|| TenantSpending {
                tenant_id: tenant,
                ..Default::default()
            });
            row.flows = r.value("n")?;
        }
        Ok(by.into_values().collect())
    }

    async fn record_message_cost(&self, c: &MessageCost) -> Result<(), StoreError> {
        let s = Stmt::new(
            "INSERT INTO message_costs (tenant_id, conversation_id, channel, category, custo_micro_brl, created_at,
                 execucao_id) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(c.tenant_id.as_str())
        .bind(c.conversation_id.as_deref())
        .bind(c.channel.as_str())
        .bind(c.category.as_str())
        .bind(c.custo_micro_brl)
        .bind(c.created_at)
        .bind(c.execucao_id.as_deref());
        self.write(s).await?;
        Ok(())
    }

    async fn message_costs_since(&self, since: DateTime<Utc>) -> Result<Vec<MessageCost>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new("SELECT * FROM message_costs WHERE created_at >= $1 ORDER BY created_at, id")
                    .bind(since),
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(MessageCost {
                    tenant_id: r.value("tenant_id")?,
                    conversation_id: r.value("conversation_id")?,
                    channel: r.value("channel")?,
                    category: r.value("category")?,
                    custo_micro_brl: r.value("custo_micro_brl")?,
                    created_at: r.time("created_at")?,
                    execucao_id: r.value("execucao_id")?,
                })
            })
            .collect()
    }

    async fn record_audit(&self, r: &AuditRecord) -> Result<(), StoreError> {
        let s = Stmt::new(
            "INSERT INTO support_audit (at, support_user, tenant_id, channel, cartao, cartao_hash, outcome, conversation_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(r.at)
        .bind(&r.support_user)
        .bind(&r.tenant_id)
        .bind(&r.channel)
        .bind(&r.cartao)
        .bind(&r.cartao_hash)
        .bind(&r.outcome)
        .bind(&r.conversation_id);
        self.write(s).await?;
        Ok(())
    }

    async fn audit_records(&self, limit: i64) -> Result<Vec<AuditRecord>, StoreError> {
        let rows = self
            .read_all(Stmt::new("SELECT * FROM support_audit ORDER BY id DESC LIMIT $1").bind(limit))
            .await?;
        rows.iter()
            .map(|row| {
                Ok(AuditRecord {
                    at: row.time("at")?,
                    support_user: row.value("support_user")?,
                    tenant_id: row.value("tenant_id")?,
                    channel: row.value("channel")?,
                    cartao: row.value("cartao")?,
                    cartao_hash: row.value("cartao_hash")?,
                    outcome: row.value("outcome")?,
                    conversation_id: row.value("conversation_id")?,
                })
            })
            .collect()
    }
}
