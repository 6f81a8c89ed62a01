//! [`KeepingStore`] on SQLite.

use super::*;
use crate::KeepingStore;

#[async_trait]
impl KeepingStore for SqliteStore {
    async fn store_secrets(&self) -> Result<std::collections::HashMap<String, String>, StoreError> {
        let rows: Vec<(String, String)> = sqlx::query_as("SELECT name, value FROM store_secrets")
            .fetch_all(&self.writer)
            .await?;
        rows.into_iter()
            .map(|(name, value)| Ok((name, crate::seal::open(&value)?)))
            .collect()
    }

    async fn put_store_secret(&self, name: &str, value: &str) -> Result<String, StoreError> {
        sqlx::query("INSERT INTO store_secrets (name, value) VALUES (?, ?) ON CONFLICT(name) DO NOTHING")
            .bind(name)
            .bind(crate::seal::seal(value))
            .execute(&self.writer)
            .await?;
        let kept: String = sqlx::query_scalar("SELECT value FROM store_secrets WHERE name = ?")
            .bind(name)
            .fetch_one(&self.writer)
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
        for (table, column, _) in crate::SEALED {
            // The table and column names are this module's constants, never input.
            let select = format!(
                "SELECT rowid AS rid, {column} AS v FROM {table} WHERE {column} IS NOT NULL AND {column} NOT LIKE ? LIMIT ?"
            );
            let update = format!("UPDATE {table} SET {column} = ? WHERE rowid = ?");
            loop {
                let mut tx = self.writer.begin().await?;
                let rows: Vec<(i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(select.as_str()))
                    .bind(&pattern)
                    .bind(crate::RESEAL_BATCH)
                    .fetch_all(&mut *tx)
                    .await?;
                if rows.is_empty() {
                    break;
                }
                for (rid, v) in &rows {
                    let clear = ring.open(v)?;
                    sqlx::query(sqlx::AssertSqlSafe(update.as_str()))
                        .bind(ring.seal(&clear))
                        .bind(rid)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                total += rows.len() as u64;
                progress(&format!("{table}.{column}"), total);
            }
        }
        // Messages from before sealing have no masked copy to search yet.
        loop {
            let mut tx = self.writer.begin().await?;
            let rows: Vec<(i64, String)> =
                sqlx::query_as("SELECT id, body FROM messages WHERE search_text IS NULL LIMIT ?")
                    .bind(crate::RESEAL_BATCH)
                    .fetch_all(&mut *tx)
                    .await?;
            if rows.is_empty() {
                break;
            }
            for (id, body) in &rows {
                let message: ChatMessage = vt_contract::json::from_text(&ring.open(body)?)?;
                sqlx::query("UPDATE messages SET search_text = ? WHERE id = ?")
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
                    "SELECT id FROM conversations WHERE user_id = ?1 \
                     OR user_id IN (SELECT person FROM whatsapp_identities WHERE identifier = ?1)",
                )
                    .bind(id)
                    .fetch_all(&self.writer)
                    .await?
            }
            Subject::Card(digits) => {
                sqlx::query_scalar(
                    "SELECT ref_id FROM card_refs WHERE card_hash = ? AND kind = 'conversa'
                     UNION SELECT conversation_id FROM flow_runs WHERE card_hash = ? AND conversation_id IS NOT NULL",
                )
                    .bind(crate::seal::card_index(digits))
                    .fetch_all(&self.writer)
                    .await?
            }
            Subject::OlderThan(before) => {
                sqlx::query_scalar("SELECT id FROM conversations WHERE updated_at < ?")
                    .bind(ms(*before))
                    .fetch_all(&self.writer)
                    .await?
            }
        };
        // The flow runs: the subject's own (a card's, or older ones), and those its conversations ran.
        let mut flow_runs: Vec<String> = match subject {
            Subject::User(_) => Vec::new(),
            Subject::Card(digits) => {
                sqlx::query_scalar("SELECT execucao_id FROM flow_runs WHERE card_hash = ?")
                    .bind(crate::seal::card_index(digits))
                    .fetch_all(&self.writer)
                    .await?
            }
            Subject::OlderThan(before) => {
                sqlx::query_scalar("SELECT execucao_id FROM flow_runs WHERE created_at < ?")
                    .bind(ms(*before))
                    .fetch_all(&self.writer)
                    .await?
            }
        };
        let mut conn = self.writer.acquire().await?;
        flow_runs.extend(crate::flow_runs_of::<Sqlite>(&mut conn, &conversations).await?);
        flow_runs.sort();
        flow_runs.dedup();
        Ok(crate::Records {
            conversations,
            flow_runs,
        })
    }

    async fn forget(&self, records: &crate::Records) -> Result<(), StoreError> {
        let mut tx = self.writer.begin().await?;
        crate::forget::<Sqlite>(&mut tx, &self.indexed, records).await?;
        tx.commit().await?;
        Ok(())
    }
}
