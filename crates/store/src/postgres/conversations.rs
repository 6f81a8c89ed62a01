//! [`ConversationStore`] on PostgreSQL.

use super::*;
use crate::{Accepting, ConversationStore};

const DIALECT: crate::sql::Dialect = crate::sql::Dialect::Postgres;
use crate::writes::Writes;

#[async_trait]
impl ConversationStore for PgStore {
    async fn save_conversation(&self, conv: &Conversation, now: DateTime<Utc>) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let refs = Self::upsert_conversation(&mut tx, conv, now, Existing::Update).await?;
        let indexed = crate::insert_card_refs::<Postgres>(&mut tx, &self.indexed, &refs).await?;
        tx.commit().await?;
        self.indexed.committed(indexed);
        Ok(())
    }

    async fn conversation(&self, id: &str) -> Result<Option<Conversation>, StoreError> {
        let row = sqlx::query("SELECT * FROM conversations WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::conversation).transpose()
    }

    async fn previous_conversation(&self, conv: &Conversation) -> Result<Option<Conversation>, StoreError> {
        let row = sqlx::query(
            "SELECT * FROM conversations WHERE tenant_id = $1 AND channel = $2 AND user_id = $3 AND agent_id = $4 AND id <> $5 ORDER BY updated_at DESC LIMIT 1",
        )
        .bind(&conv.tenant_id)
        .bind(&conv.channel)
        .bind(&conv.user_id)
        .bind(&conv.agent_id)
        .bind(&conv.id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(rows::conversation).transpose()
    }

    async fn accept_message(&self, a: Accepting<'_>) -> Result<Option<i64>, StoreError> {
        let Accepting {
            conversation,
            new_conversation,
            contact_seen,
            now,
            ..
        } = a;
        let touch = contact_seen.map(|seen| crate::sql::contacts::seen(DIALECT, seen, &conversation.id, now));
        let insert = pg_query(crate::sql::write::accepted(&a)?);
        let row = if new_conversation || touch.is_some() {
            let mut tx = self.pool.begin().await?;
            if new_conversation {
                Self::upsert_conversation(&mut tx, conversation, now, Existing::Keep).await?;
            }
            for s in touch.into_iter().flatten() {
                pg_query(s).execute(&mut *tx).await?;
            }
            let row = insert.fetch_optional(&mut *tx).await?;
            tx.commit().await?;
            row
        } else {
            insert.fetch_optional(&self.pool).await?
        };
        Ok(row.map(|r| r.try_get("id")).transpose()?)
    }

    async fn append_message(
        &self,
        conversation_id: &str,
        execucao_id: Option<&str>,
        message: &ChatMessage,
        now: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "INSERT INTO messages (conversation_id, execucao_id, role, body, created_at, search_text) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .bind(conversation_id)
        .bind(execucao_id)
        .bind(role(message))
        .bind(value(message)?)
        .bind(now)
        .bind(crate::search_text(message))
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get("id")?)
    }

    async fn heard(&self, id: i64, message: &ChatMessage) -> Result<(), StoreError> {
        pg_query(crate::sql::write::heard(id, message)?)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn unprocessed_messages(
        &self,
        through: Option<(&str, i64)>,
        limit: i64,
    ) -> Result<Vec<UnprocessedMessage>, StoreError> {
        let (conversation, last) = through.unzip();
        let rows = sqlx::query(
            "SELECT id, conversation_id, channel_message_id, body, media FROM messages
             WHERE NOT processed AND ($1::text IS NULL OR (conversation_id = $1 AND id <= $2)) ORDER BY id LIMIT $3",
        )
        .bind(conversation)
        .bind(last)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let message: ChatMessage = parse(r, "body")?;
                Ok(UnprocessedMessage {
                    id: r.try_get("id")?,
                    conversation_id: r.try_get("conversation_id")?,
                    channel_message_id: r
                        .try_get::<Option<String>, _>("channel_message_id")?
                        .unwrap_or_default(),
                    text: message.text().unwrap_or_default().to_owned(),
                    media: parse_opt(r, "media")?,
                })
            })
            .collect()
    }

    async fn messages_after(
        &self,
        conversation_id: &str,
        after: i64,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let rows = sqlx::query("SELECT * FROM messages WHERE conversation_id = $1 AND id > $2 ORDER BY id")
            .bind(conversation_id)
            .bind(after)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(StoredMessage {
                    id: r.try_get("id")?,
                    conversation_id: r.try_get("conversation_id")?,
                    execucao_id: r.try_get("execucao_id")?,
                    message: parse(r, "body")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect()
    }

    async fn save_turn(&self, turn: TurnRecord<'_>, now: DateTime<Utc>) -> Result<(), StoreError> {
        let mut writes = Writes::<Postgres>::new();
        let (rows, refs) = crate::sql::write::turn(&turn, now)?;
        for s in rows {
            writes.push(s);
        }
        // The cards of the whole turn in one statement.
        let indexed = self.indexed.unknown(&refs);
        if !indexed.is_empty() {
            writes.add(|q| crate::card_ref_rows(q, &indexed));
        }
        let few_runs = turn.flow_runs.len() <= RUNS_PER_QUERY;
        if few_runs {
            for s in crate::sql::write::flow_runs(turn.flow_runs, now)? {
                writes.push(s);
            }
        }
        if turn.case.is_none() && few_runs {
            // One statement, its own transaction: one round trip.
            writes.execute(&self.pool).await?;
        } else {
            let mut tx = self.pool.begin().await?;
            if let Some(case) = turn.case {
                crate::sql::cases::write_case(&mut tx, case, now).await?;
            }
            if !few_runs {
                Self::insert_flow_runs(&mut tx, turn.flow_runs, now).await?;
            }
            writes.execute(&mut *tx).await?;
            tx.commit().await?;
        }
        self.indexed.committed(indexed);
        Ok(())
    }

    async fn execution(
        &self,
        execucao_id: &str,
    ) -> Result<Option<(ExecutionRecord, Vec<TurnEvent>)>, StoreError> {
        let row = sqlx::query("SELECT * FROM executions WHERE execucao_id = $1")
            .bind(execucao_id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| Ok((rows::execution(&r)?, parse(&r, "events")?)))
            .transpose()
    }

    async fn executions(
        &self,
        conversation_id: &str,
    ) -> Result<Vec<(ExecutionRecord, Vec<TurnEvent>)>, StoreError> {
        let rows = sqlx::query(
            "SELECT * FROM executions WHERE conversation_id = $1 ORDER BY started_at, execucao_id",
        )
        .bind(conversation_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((rows::execution(r)?, parse(r, "events")?)))
            .collect()
    }

    async fn save_task_run(&self, t: &TaskRun) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO task_runs (id, conversation_id, user_id, intent_key, status, plan, steps, final_result,
                 tokens_used, error_message, created_at, completed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
             ON CONFLICT (id) DO UPDATE SET status = excluded.status, plan = excluded.plan, steps = excluded.steps,
                 final_result = excluded.final_result, tokens_used = excluded.tokens_used,
                 error_message = excluded.error_message, completed_at = excluded.completed_at",
        )
        .bind(&t.id)
        .bind(&t.conversation_id)
        .bind(&t.user_id)
        .bind(&t.intent_key)
        .bind(t.status.as_str())
        .bind(t.plan.as_ref().map(value).transpose()?)
        .bind(value(&t.steps)?)
        .bind(t.final_result.as_deref().map(crate::seal::seal))
        .bind(t.tokens_used)
        .bind(&t.error_message)
        .bind(t.created_at)
        .bind(t.completed_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn task_runs(&self, conversation_id: &str) -> Result<Vec<TaskRun>, StoreError> {
        let rows = sqlx::query("SELECT * FROM task_runs WHERE conversation_id = $1 ORDER BY created_at, id")
            .bind(conversation_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(rows::task_run).collect()
    }

    async fn save_context(&self, c: &ConversationContext) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        Self::upsert_context(&mut conn, c).await
    }

    async fn context(&self, conversation_id: &str) -> Result<Option<ConversationContext>, StoreError> {
        let row = sqlx::query("SELECT * FROM conversation_context WHERE conversation_id = $1")
            .bind(conversation_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::context).transpose()
    }

    async fn conversation_list(
        &self,
        query: &ConversationQuery,
    ) -> Result<Vec<ConversationListing>, StoreError> {
        let rows = sqlx::query(
            "SELECT c.id, c.tenant_id, c.channel, c.user_id, c.user_login, c.ended,
                    EXISTS (SELECT 1 FROM cases k WHERE k.conversation_id = c.id \
                    AND k.state IN ('aguardando', 'em_atendimento')) AS handed_over, c.updated_at, x.last_intent,
                    (SELECT m.body FROM messages m WHERE m.conversation_id = c.id
                     ORDER BY m.id DESC LIMIT 1) AS last_body
             FROM conversations c LEFT JOIN conversation_context x ON x.conversation_id = c.id
             WHERE ($1::text IS NULL OR c.tenant_id = $1)
               AND ($2::text IS NULL OR c.channel = $2)
               AND ($3::text IS NULL OR strpos(lower(c.id), lower($3)) > 0
                    OR strpos(lower(c.user_id), lower($3)) > 0
                    OR strpos(lower(c.user_login), lower($3)) > 0
                    OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id
                               AND strpos(lower(m.search_text), lower($3)) > 0))
               AND ($5::text IS NULL OR x.last_intent = $5)
             ORDER BY c.updated_at DESC, c.id LIMIT $4",
        )
        .bind(&query.tenant_id)
        .bind(&query.channel)
        .bind(&query.text)
        .bind(query.limit)
        .bind(&query.intent)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ConversationListing {
                    id: r.try_get("id")?,
                    tenant_id: r.try_get("tenant_id")?,
                    channel: r.try_get("channel")?,
                    user_id: r.try_get("user_id")?,
                    user_login: r.try_get("user_login")?,
                    last_message: r
                        .try_get::<Option<Json<Value>>, _>("last_body")?
                        .map(|Json(v)| opened(v))
                        .transpose()?,
                    last_intent: r.try_get("last_intent")?,
                    ended: r.try_get("ended")?,
                    handed_over: r.try_get("handed_over")?,
                    updated_at: r.try_get("updated_at")?,
                })
            })
            .collect()
    }

    async fn lock_conversation(&self, conversation_id: &str) -> Result<TurnLock, StoreError> {
        acquire(&PgLeases(self.pool.clone()), &self.locks, conversation_id).await
    }

    async fn turn_reads(&self, conversation_id: &str) -> Result<crate::TurnReads, StoreError> {
        let (conversation, context, open_case) = tokio::join!(
            self.conversation(conversation_id),
            self.context(conversation_id),
            crate::CaseStore::open_case_of(self, conversation_id)
        );
        Ok(crate::TurnReads {
            conversation: conversation?,
            context: context?,
            open_case: open_case?,
        })
    }
}
