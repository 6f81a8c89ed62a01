//! [`BatchStore`], once for both backends; only the chunk claim differs (PostgreSQL skips the rows
//! another instance holds locked, SQLite has one writer).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Arg, Dialect, Sql, Stmt, Tx as _, write};
use crate::rows::{self, Columns};
use crate::{
    BatchJob, BatchLine, BatchStore, FlowRunRecord, LineStatus, ROWS_PER_INSERT, RUNS_PER_QUERY, StoreError,
};

const CLAIM_SQLITE: &str = "UPDATE batch_chunks SET owner = $1, leased_until = $2
     WHERE job_id = $3 AND chunk = (
         SELECT chunk FROM batch_chunks
         WHERE job_id = $3 AND NOT done AND (leased_until IS NULL OR leased_until <= $4)
         ORDER BY chunk LIMIT 1)
     RETURNING chunk";
const CLAIM_POSTGRES: &str = "UPDATE batch_chunks c SET owner = $1, leased_until = $2
     FROM (SELECT chunk FROM batch_chunks
           WHERE job_id = $3 AND NOT done AND (leased_until IS NULL OR leased_until <= $4)
           ORDER BY chunk LIMIT 1 FOR UPDATE SKIP LOCKED) d
     WHERE c.job_id = $3 AND c.chunk = d.chunk RETURNING c.chunk::bigint AS chunk";

#[async_trait]
impl<S: Sql> BatchStore for S {
    async fn open_batch(&self, job: &BatchJob) -> Result<BatchJob, StoreError> {
        let insert = Stmt::new(
            "INSERT INTO batch_jobs (id, tenant_id, digest, total, dry_run, source, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING",
        )
        .bind(&job.id)
        .bind(&job.tenant_id)
        .bind(&job.digest)
        .bind(job.total)
        .bind(job.dry_run)
        .bind(Arg::Text(job.source.as_deref().map(crate::seal::seal)))
        .bind(job.created_at);
        // Read back in the writing transaction: the job as first opened, whoever opened it.
        let mut tx = self.begin().await?;
        tx.execute(insert).await?;
        let row = tx
            .fetch_optional(Stmt::new("SELECT * FROM batch_jobs WHERE id = $1").bind(&job.id))
            .await?
            .ok_or_else(|| StoreError::Invalid("a batch job just written is not there".into()))?;
        tx.commit().await?;
        rows::batch_job(&row)
    }

    async fn batch(&self, id: &str) -> Result<Option<BatchJob>, StoreError> {
        self.read_one(Stmt::new("SELECT * FROM batch_jobs WHERE id = $1").bind(id))
            .await?
            .as_ref()
            .map(rows::batch_job)
            .transpose()
    }

    async fn save_batch_lines(
        &self,
        job_id: &str,
        lines: &[BatchLine],
        runs: &[FlowRunRecord],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut rows = Vec::with_capacity(lines.len());
        for l in lines {
            rows.push(vec![
                job_id.into(),
                l.line.into(),
                l.status.as_str().into(),
                write::sealed(&l.result)?,
                now.into(),
            ]);
        }
        let mut tx = self.begin().await?;
        // A group's runs (thousands of stages) in as few round trips as the backend takes: all in one
        // query on SQLite, `RUNS_PER_QUERY` to one on PostgreSQL (its limit of values per query).
        let per_query = match self.dialect() {
            Dialect::Sqlite => runs.len().max(1),
            Dialect::Postgres => RUNS_PER_QUERY,
        };
        for chunk in runs.chunks(per_query) {
            tx.execute_joined(write::flow_runs(chunk, now)?).await?;
        }
        let mut rows = rows.into_iter().peekable();
        while rows.peek().is_some() {
            tx.execute(Stmt::values(
                "INSERT INTO batch_lines (job_id, line, status, result, finished_at)",
                rows.by_ref().take(ROWS_PER_INSERT).collect(),
                " ON CONFLICT (job_id, line) DO UPDATE SET status = excluded.status, result = excluded.result,
                 finished_at = excluded.finished_at",
            ))
            .await?;
        }
        tx.commit().await
    }

    async fn batch_lines(&self, job_id: &str) -> Result<Vec<BatchLine>, StoreError> {
        self.read_all(
            Stmt::new("SELECT line, status, result FROM batch_lines WHERE job_id = $1 ORDER BY line")
                .bind(job_id),
        )
        .await?
        .iter()
        .map(|row| {
            Ok(BatchLine {
                line: row.value("line")?,
                status: LineStatus::from_row(&row.value::<String>("status")?)?,
                result: row.json("result")?,
            })
        })
        .collect()
    }

    async fn batch_counts(&self, job_id: &str) -> Result<Vec<(LineStatus, i64)>, StoreError> {
        self.read_all(
            Stmt::new(
                "SELECT status, COUNT(*) AS n FROM batch_lines WHERE job_id = $1 GROUP BY status ORDER BY status",
            )
            .bind(job_id),
        )
        .await?
        .iter()
        .map(|row| Ok((LineStatus::from_row(&row.value::<String>("status")?)?, row.value("n")?)))
        .collect()
    }

    async fn finish_batch(&self, job_id: &str, now: DateTime<Utc>) -> Result<(), StoreError> {
        // One statement each, as before: the job finished, then its chunks gone.
        self.write(
            Stmt::new(
                "UPDATE batch_jobs SET finished_at = $1, source = NULL WHERE id = $2 AND finished_at IS NULL",
            )
            .bind(now)
            .bind(job_id),
        )
        .await?;
        self.write(Stmt::new("DELETE FROM batch_chunks WHERE job_id = $1").bind(job_id))
            .await?;
        Ok(())
    }

    async fn unfinished_batches(&self) -> Result<Vec<BatchJob>, StoreError> {
        self.read_all(Stmt::new(
            "SELECT * FROM batch_jobs WHERE finished_at IS NULL AND source IS NOT NULL ORDER BY created_at",
        ))
        .await?
        .iter()
        .map(rows::batch_job)
        .collect()
    }

    async fn batches(&self, tenant_id: Option<&str>, limit: i64) -> Result<Vec<BatchJob>, StoreError> {
        self.read_all(
            Stmt::new(
                "SELECT * FROM batch_jobs WHERE (CAST($1 AS TEXT) IS NULL OR tenant_id = $1)
                 ORDER BY created_at DESC, id DESC LIMIT $2",
            )
            .bind(tenant_id)
            .bind(limit),
        )
        .await?
        .iter()
        .map(rows::batch_job)
        .collect()
    }

    async fn share_batch(&self, job_id: &str, chunks: i64) -> Result<(), StoreError> {
        let rows: Vec<Vec<Arg>> = (0..chunks).map(|c| vec![job_id.into(), c.into()]).collect();
        let mut rows = rows.into_iter().peekable();
        let mut statements = Vec::new();
        while rows.peek().is_some() {
            statements.push(Stmt::values(
                "INSERT INTO batch_chunks (job_id, chunk)",
                rows.by_ref().take(ROWS_PER_INSERT).collect(),
                " ON CONFLICT DO NOTHING",
            ));
        }
        self.write_all(statements).await
    }

    async fn claim_batch_chunk(
        &self,
        job_id: &str,
        owner: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<Option<i64>, StoreError> {
        let sql = match self.dialect() {
            Dialect::Sqlite => CLAIM_SQLITE,
            Dialect::Postgres => CLAIM_POSTGRES,
        };
        let claimed = self
            .write_returning(
                Stmt::new(sql)
                    .bind(owner)
                    .bind(lease_until)
                    .bind(job_id)
                    .bind(now),
            )
            .await?;
        claimed.first().map(|row| row.value("chunk")).transpose()
    }

    async fn renew_batch_chunk(
        &self,
        job_id: &str,
        chunk: i64,
        owner: &str,
        lease_until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let renewed = self
            .write(
                Stmt::new(
                    "UPDATE batch_chunks SET leased_until = $1
                     WHERE job_id = $2 AND chunk = $3 AND owner = $4 AND NOT done",
                )
                .bind(lease_until)
                .bind(job_id)
                .bind(chunk)
                .bind(owner),
            )
            .await?;
        Ok(renewed == 1)
    }

    async fn release_batch_chunk(
        &self,
        job_id: &str,
        chunk: i64,
        owner: &str,
        done: bool,
        not_before: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.write(
            Stmt::new(
                "UPDATE batch_chunks SET done = $1, leased_until = $2, owner = NULL
                 WHERE job_id = $3 AND chunk = $4 AND owner = $5",
            )
            .bind(done)
            .bind(not_before)
            .bind(job_id)
            .bind(chunk)
            .bind(owner),
        )
        .await?;
        Ok(())
    }

    async fn batch_chunks_open(&self, job_id: &str, now: DateTime<Utc>) -> Result<(i64, i64), StoreError> {
        let rows = self
            .read_fresh(
                Stmt::new(
                    "SELECT COUNT(*) AS open, COUNT(*) FILTER (WHERE leased_until > $2) AS leased
                     FROM batch_chunks WHERE job_id = $1 AND NOT done",
                )
                .bind(job_id)
                .bind(now),
            )
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Invalid("a count returned no row".into()))?;
        Ok((row.value("open")?, row.value("leased")?))
    }

    async fn claimable_batches(&self, now: DateTime<Utc>) -> Result<Vec<String>, StoreError> {
        self.read_all(
            Stmt::new(
                "SELECT id FROM batch_jobs j WHERE finished_at IS NULL AND source IS NOT NULL
                 AND (NOT EXISTS (SELECT 1 FROM batch_chunks c WHERE c.job_id = j.id AND NOT c.done)
                      OR EXISTS (SELECT 1 FROM batch_chunks c WHERE c.job_id = j.id AND NOT c.done
                                 AND (c.leased_until IS NULL OR c.leased_until <= $1)))
                 ORDER BY created_at",
            )
            .bind(now),
        )
        .await?
        .iter()
        .map(|row| row.value("id"))
        .collect()
    }

    async fn ended_lines(&self, job_id: &str, from: i64, to: i64) -> Result<Vec<i64>, StoreError> {
        self.read_fresh(
            Stmt::new("SELECT line FROM batch_lines WHERE job_id = $1 AND line BETWEEN $2 AND $3")
                .bind(job_id)
                .bind(from)
                .bind(to),
        )
        .await?
        .iter()
        .map(|row| row.value("line"))
        .collect()
    }
}
