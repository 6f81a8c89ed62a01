//! [`FlowStore`], once for both backends; only the list's tie-break differs (SQLite's row order).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{Dialect, Sql, Stmt, Tx as _, write};
use crate::rows::Columns;
use crate::{Existing, FlowRunAt, FlowRunRecord, FlowRunSummary, FlowStore, RunStatus, StoreError};
use vt_engine::Conversation;
use vt_engine::llm::ChatMessage;

const LISTED_SQLITE: &str = "SELECT execucao_id, status, input, created_at, finished_at FROM flow_runs
     ORDER BY created_at DESC, rowid DESC LIMIT $1";
const LISTED_POSTGRES: &str = "SELECT execucao_id, status, input, created_at, finished_at FROM flow_runs
     ORDER BY created_at DESC, execucao_id DESC LIMIT $1";

#[async_trait]
impl<S: Sql> FlowStore for S {
    async fn save_flow_run(&self, run: &FlowRunRecord) -> Result<(), StoreError> {
        self.write_all(write::flow_runs(std::slice::from_ref(run), run.created_at)?)
            .await
    }

    async fn flow_run(&self, execucao_id: &str) -> Result<Option<FlowRunRecord>, StoreError> {
        let Some(row) = self
            .read_one(Stmt::new("SELECT * FROM flow_runs WHERE execucao_id = $1").bind(execucao_id))
            .await?
        else {
            return Ok(None);
        };
        let stages = self
            .read_all(
                Stmt::new("SELECT etapa, saida FROM flow_stages WHERE execucao_id = $1 ORDER BY position")
                    .bind(execucao_id),
            )
            .await?
            .iter()
            .map(|r| Ok((r.value("etapa")?, r.json("saida")?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(Some(FlowRunRecord {
            execucao_id: row.value("execucao_id")?,
            parent_execucao_id: row.value("parent_execucao_id")?,
            status: RunStatus::from_row(&row.value::<String>("status")?)?,
            input: row.json("input")?,
            stages,
            created_at: row.time("created_at")?,
        }))
    }

    async fn runs_started_by(&self, parent: &str) -> Result<Vec<String>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new(
                    "SELECT execucao_id FROM flow_runs WHERE parent_execucao_id = $1 ORDER BY created_at, execucao_id",
                )
                .bind(parent),
            )
            .await?;
        rows.iter().map(|r| r.value("execucao_id")).collect()
    }

    async fn begin_flow_run(
        &self,
        conversation: &Conversation,
        message: &ChatMessage,
        execucao_id: &str,
        input: &Value,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let (row, _) = write::conversation(conversation, now, Existing::Keep)?;
        let run = Stmt::new(
            "INSERT INTO flow_runs (execucao_id, status, input, created_at, card_hash, conversation_id, tenant_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(execucao_id)
        .bind(RunStatus::EmAndamento.as_str())
        .sealed(input)?
        .bind(now)
        .bind(crate::flow_card_hash(input))
        .bind(&conversation.id)
        .bind(crate::flow_tenant(input));
        let mut tx = self.begin().await?;
        tx.execute(row).await?;
        tx.fetch_all(write::accepted(&crate::Accepting::plain(
            conversation,
            message,
            now,
        ))?)
        .await?;
        tx.execute(run).await?;
        tx.commit().await
    }

    async fn settle_flow_run(
        &self,
        execucao_id: &str,
        status: RunStatus,
        (etapa, saida): (&str, &Value),
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let run = Stmt::new("UPDATE flow_runs SET status = $1, finished_at = $2 WHERE execucao_id = $3")
            .bind(status.as_str())
            .bind(now)
            .bind(execucao_id);
        let stage = Stmt::new(
            "INSERT INTO flow_stages (execucao_id, position, etapa, saida)
             SELECT $1, COALESCE(MAX(position) + 1, 0), $2, $3 FROM flow_stages WHERE execucao_id = $1",
        )
        .bind(execucao_id)
        .bind(etapa)
        .sealed(saida)?;
        self.write_all(vec![run, stage]).await
    }

    async fn flow_runs(&self, limit: i64) -> Result<Vec<FlowRunSummary>, StoreError> {
        let sql = match self.dialect() {
            Dialect::Sqlite => LISTED_SQLITE,
            Dialect::Postgres => LISTED_POSTGRES,
        };
        let rows = self.read_all(Stmt::new(sql).bind(limit)).await?;
        rows.iter()
            .map(|r| {
                Ok(FlowRunSummary {
                    execucao_id: r.value("execucao_id")?,
                    status: RunStatus::from_row(&r.value::<String>("status")?)?,
                    input: r.json("input")?,
                    created_at: r.time("created_at")?,
                    finished_at: r.opt_time("finished_at")?,
                })
            })
            .collect()
    }

    async fn flow_outcomes_since(&self, since: DateTime<Utc>) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new(
                    "SELECT status, COUNT(*) AS n FROM flow_runs WHERE created_at >= $1 GROUP BY status ORDER BY status",
                )
                .bind(since),
            )
            .await?;
        rows.iter()
            .map(|r| Ok((r.value("status")?, r.value("n")?)))
            .collect()
    }

    async fn flow_runs_since(&self, since: DateTime<Utc>) -> Result<Vec<FlowRunAt>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new(
                    "SELECT tenant_id, created_at FROM flow_runs
                     WHERE created_at >= $1 AND parent_execucao_id IS NULL ORDER BY created_at",
                )
                .bind(since),
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(FlowRunAt {
                    tenant_id: r.value("tenant_id")?,
                    created_at: r.time("created_at")?,
                })
            })
            .collect()
    }
}
