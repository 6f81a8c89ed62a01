//! [`BatchStore`] on PostgreSQL.

use super::*;
use crate::store::BatchStore;

#[async_trait]
impl BatchStore for PgStore {
    async fn open_batch(&self, job: &BatchJob) -> Result<BatchJob, StoreError> {
        sqlx::query(
            "INSERT INTO batch_jobs (id, tenant_id, digest, total, dry_run, source, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING",
        )
        .bind(&job.id)
        .bind(&job.tenant_id)
        .bind(&job.digest)
        .bind(job.total)
        .bind(job.dry_run)
        .bind(job.source.as_deref().map(crate::store::seal::seal))
        .bind(job.created_at)
        .execute(&self.pool)
        .await?;
        let row = sqlx::query("SELECT * FROM batch_jobs WHERE id = $1")
            .bind(&job.id)
            .fetch_one(&self.pool)
            .await?;
        rows::batch_job(&row)
    }

    async fn batch(&self, id: &str) -> Result<Option<BatchJob>, StoreError> {
        let row = sqlx::query("SELECT * FROM batch_jobs WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::batch_job).transpose()
    }

    async fn save_batch_lines(
        &self,
        job_id: &str,
        lines: &[BatchLine],
        runs: &[FlowRunRecord],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        Self::insert_flow_runs(&mut tx, runs, now).await?;
        let mut rows = Vec::with_capacity(lines.len());
        for l in lines {
            rows.push((l, value(&l.result)?));
        }
        insert_rows::<Postgres, _>(
            &mut tx,
            "INSERT INTO batch_lines (job_id, line, status, result, finished_at) ",
            &rows,
            " ON CONFLICT (job_id, line) DO UPDATE SET status = excluded.status, result = excluded.result, \
             finished_at = excluded.finished_at",
            |b, (l, result)| {
                b.push_bind(job_id.to_owned())
                    .push_bind(l.line)
                    .push_bind(l.status.as_str())
                    .push_bind(result.clone())
                    .push_bind(now);
            },
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn batch_lines(&self, job_id: &str) -> Result<Vec<BatchLine>, StoreError> {
        let rows =
            sqlx::query("SELECT line, status, result FROM batch_lines WHERE job_id = $1 ORDER BY line")
                .bind(job_id)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|row| {
                Ok(BatchLine {
                    line: row.try_get("line")?,
                    status: LineStatus::from_row(row.try_get("status")?)?,
                    result: parse(row, "result")?,
                })
            })
            .collect()
    }

    async fn batch_counts(&self, job_id: &str) -> Result<Vec<(LineStatus, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT status, COUNT(*) AS n FROM batch_lines WHERE job_id = $1 GROUP BY status ORDER BY status",
        )
        .bind(job_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((LineStatus::from_row(row.try_get("status")?)?, row.try_get("n")?)))
            .collect()
    }

    async fn finish_batch(&self, job_id: &str, now: DateTime<Utc>) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE batch_jobs SET finished_at = $1, source = NULL WHERE id = $2 AND finished_at IS NULL",
        )
        .bind(now)
        .bind(job_id)
        .execute(&self.pool)
        .await?;
        sqlx::query("DELETE FROM batch_chunks WHERE job_id = $1")
            .bind(job_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn unfinished_batches(&self) -> Result<Vec<BatchJob>, StoreError> {
        let rows = sqlx::query(
            "SELECT * FROM batch_jobs WHERE finished_at IS NULL AND source IS NOT NULL ORDER BY created_at",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(rows::batch_job).collect()
    }

    async fn batches(&self, tenant_id: Option<&str>, limit: i64) -> Result<Vec<BatchJob>, StoreError> {
        let rows = sqlx::query(
            "SELECT * FROM batch_jobs WHERE ($1::text IS NULL OR tenant_id = $1)
             ORDER BY created_at DESC, id DESC LIMIT $2",
        )
        .bind(tenant_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(rows::batch_job).collect()
    }

    async fn share_batch(&self, job_id: &str, chunks: i64) -> Result<(), StoreError> {
        let chunks: Vec<i64> = (0..chunks).collect();
        let mut tx = self.pool.begin().await?;
        insert_rows::<Postgres, _>(
            &mut tx,
            "INSERT INTO batch_chunks (job_id, chunk) ",
            &chunks,
            " ON CONFLICT DO NOTHING",
            |b, chunk| {
                b.push_bind(job_id.to_owned()).push_bind(*chunk as i32);
            },
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn claim_batch_chunk(
        &self,
        job_id: &str,
        owner: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<Option<i64>, StoreError> {
        let chunk: Option<i32> = sqlx::query_scalar(
            "UPDATE batch_chunks c SET owner = $2, leased_until = $4
             FROM (SELECT chunk FROM batch_chunks
                   WHERE job_id = $1 AND NOT done AND (leased_until IS NULL OR leased_until <= $3)
                   ORDER BY chunk LIMIT 1 FOR UPDATE SKIP LOCKED) d
             WHERE c.job_id = $1 AND c.chunk = d.chunk RETURNING c.chunk",
        )
        .bind(job_id)
        .bind(owner)
        .bind(now)
        .bind(lease_until)
        .fetch_optional(&self.pool)
        .await?;
        Ok(chunk.map(i64::from))
    }

    async fn renew_batch_chunk(
        &self,
        job_id: &str,
        chunk: i64,
        owner: &str,
        lease_until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE batch_chunks SET leased_until = $1 WHERE job_id = $2 AND chunk = $3 AND owner = $4 AND NOT done",
        )
        .bind(lease_until)
        .bind(job_id)
        .bind(chunk as i32)
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn release_batch_chunk(
        &self,
        job_id: &str,
        chunk: i64,
        owner: &str,
        done: bool,
        not_before: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE batch_chunks SET done = $1, leased_until = $2, owner = NULL
             WHERE job_id = $3 AND chunk = $4 AND owner = $5",
        )
        .bind(done)
        .bind(not_before)
        .bind(job_id)
        .bind(chunk as i32)
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn batch_chunks_open(&self, job_id: &str, now: DateTime<Utc>) -> Result<(i64, i64), StoreError> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS open, COUNT(*) FILTER (WHERE leased_until > $2) AS leased
             FROM batch_chunks WHERE job_id = $1 AND NOT done",
        )
        .bind(job_id)
        .bind(now)
        .fetch_one(&self.pool)
        .await?;
        Ok((row.try_get("open")?, row.try_get("leased")?))
    }

    async fn claimable_batches(&self, now: DateTime<Utc>) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM batch_jobs j WHERE finished_at IS NULL AND source IS NOT NULL
             AND (NOT EXISTS (SELECT 1 FROM batch_chunks c WHERE c.job_id = j.id AND NOT c.done)
                  OR EXISTS (SELECT 1 FROM batch_chunks c WHERE c.job_id = j.id AND NOT c.done
                             AND (c.leased_until IS NULL OR c.leased_until <= $1)))
             ORDER BY created_at",
        )
        .bind(now)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn ended_lines(&self, job_id: &str, from: i64, to: i64) -> Result<Vec<i64>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT line FROM batch_lines WHERE job_id = $1 AND line BETWEEN $2 AND $3")
                .bind(job_id)
                .bind(from)
                .bind(to)
                .fetch_all(&self.pool)
                .await?,
        )
    }
}
