//! [`FlowStore`] on PostgreSQL.

use super::*;
use crate::store::FlowStore;

#[async_trait]
impl FlowStore for PgStore {
    async fn save_flow_run(&self, run: &FlowRunRecord) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        Self::insert_flow_runs(&mut tx, std::slice::from_ref(run), run.created_at).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn flow_run(&self, execucao_id: &str) -> Result<Option<FlowRunRecord>, StoreError> {
        let Some(row) = sqlx::query("SELECT * FROM flow_runs WHERE execucao_id = $1")
            .bind(execucao_id)
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok(None);
        };
        let stages =
            sqlx::query("SELECT etapa, saida FROM flow_stages WHERE execucao_id = $1 ORDER BY position")
                .bind(execucao_id)
                .fetch_all(&self.pool)
                .await?
                .iter()
                .map(|r| Ok((r.try_get("etapa")?, parse(r, "saida")?)))
                .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(Some(FlowRunRecord {
            execucao_id: row.try_get("execucao_id")?,
            parent_execucao_id: row.try_get("parent_execucao_id")?,
            status: RunStatus::from_row(&row.try_get::<String, _>("status")?)?,
            input: parse(&row, "input")?,
            output: parse(&row, "output")?,
            stages,
            created_at: row.try_get("created_at")?,
        }))
    }

    async fn begin_flow_run(
        &self,
        conversation: &Conversation,
        message: &ChatMessage,
        execucao_id: &str,
        input: &Value,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        Self::upsert_conversation(&mut tx, conversation, now, Existing::Keep).await?;
        accepted(conversation, None, message, now)?
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO flow_runs (execucao_id, status, input, output, created_at, card_hash, conversation_id)
             VALUES ($1, $2, $3, 'null', $4, $5, $6)",
        )
        .bind(execucao_id)
        .bind(RunStatus::EmAndamento.as_str())
        .bind(value(input)?)
        .bind(now)
        .bind(crate::store::flow_card_hash(input))
        .bind(&conversation.id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn settle_flow_run(
        &self,
        execucao_id: &str,
        status: RunStatus,
        output: &Value,
        (etapa, saida): (&str, &Value),
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE flow_runs SET status = $1, output = $2, finished_at = $3 WHERE execucao_id = $4")
            .bind(status.as_str())
            .bind(value(output)?)
            .bind(now)
            .bind(execucao_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO flow_stages (execucao_id, position, etapa, saida)
             SELECT $1, COALESCE(MAX(position) + 1, 0), $2, $3 FROM flow_stages WHERE execucao_id = $1",
        )
        .bind(execucao_id)
        .bind(etapa)
        .bind(value(saida)?)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn flow_runs(&self, limit: i64) -> Result<Vec<FlowRunSummary>, StoreError> {
        let rows = sqlx::query(
            "SELECT execucao_id, status, input, created_at, finished_at FROM flow_runs
             ORDER BY created_at DESC, execucao_id DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(FlowRunSummary {
                    execucao_id: r.try_get("execucao_id")?,
                    status: RunStatus::from_row(&r.try_get::<String, _>("status")?)?,
                    input: parse(r, "input")?,
                    created_at: r.try_get("created_at")?,
                    finished_at: r.try_get("finished_at")?,
                })
            })
            .collect()
    }

    async fn flow_outcomes_since(&self, since: DateTime<Utc>) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT status, COUNT(*) AS n FROM flow_runs WHERE created_at >= $1 GROUP BY status ORDER BY status",
        )
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("status")?, r.try_get("n")?)))
            .collect()
    }
}
