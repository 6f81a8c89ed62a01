//! [`KeepingStore`] on PostgreSQL.

use super::*;
use crate::KeepingStore;

#[async_trait]
impl KeepingStore for PgStore {
    async fn store_secrets(&self) -> Result<std::collections::HashMap<String, String>, StoreError> {
        let rows: Vec<(String, String)> = sqlx::query_as("SELECT name, value FROM store_secrets")
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|(name, value)| Ok((name, crate::seal::open(&value)?)))
            .collect()
    }

    async fn put_store_secret(&self, name: &str, value: &str) -> Result<String, StoreError> {
        sqlx::query("INSERT INTO store_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING")
            .bind(name)
            .bind(crate::seal::seal(value))
            .execute(&self.pool)
            .await?;
        let kept: String = sqlx::query_scalar("SELECT value FROM store_secrets WHERE name = $1")
            .bind(name)
            .fetch_one(&self.pool)
            .await?;
        Ok(crate::seal::open(&kept)?)
    }

    async fn reseal(
        &self,
        progress: &(dyn for<'p> Fn(&'p str, u64) + Send + Sync),
    ) -> Result<u64, StoreError> {
        let ring = crate::seal::ring();
        let pattern = ring.current_pattern();
        let mut total = 0;
        for (table, column, is_json) in crate::SEALED {
            // A JSONB column keeps a sealed value as a JSON string; its text is `#>> '{}'`.
            // The table and column names are this module's constants, never input.
            let select = if *is_json {
                format!(
                    "SELECT ctid::text AS rid, {column}::text AS v, jsonb_typeof({column}) = 'string' AS s FROM {table}
                     WHERE {column} IS NOT NULL AND NOT (jsonb_typeof({column}) = 'string' AND {column} #>> '{{}}' LIKE $1)
                     LIMIT $2"
                )
            } else {
                format!(
                    "SELECT ctid::text AS rid, {column} AS v, TRUE AS s FROM {table}
                     WHERE {column} IS NOT NULL AND {column} NOT LIKE $1 LIMIT $2"
                )
            };
            let update = format!("UPDATE {table} SET {column} = $1 WHERE ctid = $2::tid");
            loop {
                let mut tx = self.pool.begin().await?;
                let rows: Vec<(String, String, bool)> = sqlx::query_as(sqlx::AssertSqlSafe(select.as_str()))
                    .bind(&pattern)
                    .bind(crate::RESEAL_BATCH)
                    .fetch_all(&mut *tx)
                    .await?;
                if rows.is_empty() {
                    break;
                }
                for (rid, v, is_string) in &rows {
                    // A JSON string holds the sealed text; any other JSON is a value from before sealing.
                    let stored = if *is_json && *is_string {
                        vt_contract::json::from_text::<String>(v)?
                    } else {
                        v.clone()
                    };
                    let sealed = ring.seal(&ring.open(&stored)?);
                    let q = sqlx::query(sqlx::AssertSqlSafe(update.as_str()));
                    let q = if *is_json {
                        q.bind(Json(Value::String(sealed)))
                    } else {
                        q.bind(sealed)
                    };
                    q.bind(rid).execute(&mut *tx).await?;
                }
                tx.commit().await?;
                total += rows.len() as u64;
                progress(&format!("{table}.{column}"), total);
            }
        }
        loop {
            let mut tx = self.pool.begin().await?;
            let rows: Vec<(i64, Json<Value>)> =
                sqlx::query_as("SELECT id, body FROM messages WHERE search_text IS NULL LIMIT $1")
                    .bind(crate::RESEAL_BATCH)
                    .fetch_all(&mut *tx)
                    .await?;
            if rows.is_empty() {
                break;
            }
            for (id, Json(body)) in rows.iter().cloned() {
                let message: ChatMessage = opened(body)?;
                sqlx::query("UPDATE messages SET search_text = $1 WHERE id = $2")
                    .bind(crate::search_text(&message))
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
        }
        Ok(total)
    }

    async fn subject_records(&self, subject: &crate::Subject) -> Result<crate::Records, StoreError> {
        use crate::Subject;
        let conversations: Vec<String> = match subject {
            Subject::User(id) => {
                sqlx::query_scalar(
                    "SELECT id FROM conversations WHERE user_id = $1 \
                     OR user_id IN (SELECT person FROM whatsapp_identities WHERE identifier = $1)",
                )
                    .bind(id)
                    .fetch_all(&self.pool)
                    .await?
            }
            Subject::Card(digits) => {
                sqlx::query_scalar(
                    "SELECT ref_id FROM card_refs WHERE card_hash = $1 AND kind = 'conversa'
                     UNION SELECT conversation_id FROM flow_runs WHERE card_hash = $1 AND conversation_id IS NOT NULL",
                )
                    .bind(crate::seal::card_index(digits))
                    .fetch_all(&self.pool)
                    .await?
            }
            Subject::OlderThan(before) => {
                sqlx::query_scalar("SELECT id FROM conversations WHERE updated_at < $1")
                    .bind(*before)
                    .fetch_all(&self.pool)
                    .await?
            }
        };
        // The flow runs: the subject's own (a card's, or older ones), and those its conversations ran.
        let mut flow_runs: Vec<String> = match subject {
            Subject::User(_) => Vec::new(),
            Subject::Card(digits) => {
                sqlx::query_scalar("SELECT execucao_id FROM flow_runs WHERE card_hash = $1")
                    .bind(crate::seal::card_index(digits))
                    .fetch_all(&self.pool)
                    .await?
            }
            Subject::OlderThan(before) => {
                sqlx::query_scalar("SELECT execucao_id FROM flow_runs WHERE created_at < $1")
                    .bind(*before)
                    .fetch_all(&self.pool)
                    .await?
            }
        };
        let mut conn = self.pool.acquire().await?;
        flow_runs.extend(crate::flow_runs_of::<Postgres>(&mut conn, &conversations).await?);
        flow_runs.sort();
        flow_runs.dedup();
        Ok(crate::Records {
            conversations,
            flow_runs,
        })
    }

    async fn forget(&self, records: &crate::Records) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        crate::forget::<Postgres>(&mut tx, &self.indexed, records).await?;
        tx.commit().await?;
        Ok(())
    }
}
