//! [`ConversationStore`] on SQLite.

use super::*;
use crate::{Accepting, ConversationStore};

const DIALECT: crate::sql::Dialect = crate::sql::Dialect::Sqlite;
use crate::writes::Writes;

#[async_trait]
impl ConversationStore for SqliteStore {
    async fn save_conversation(&self, conv: &Conversation, now: DateTime<Utc>) -> Result<(), StoreError> {
        let mut tx = self.writer.begin().await?;
        let refs = Self::upsert_conversation(&mut tx, conv, now, Existing::Update).await?;
        let indexed = crate::insert_card_refs::<Sqlite>(&mut tx, &self.indexed, &refs).await?;
        tx.commit().await?;
        self.indexed.committed(indexed);
        Ok(())
    }

    async fn conversation(&self, id: &str) -> Result<Option<Conversation>, StoreError> {
        let row = sqlx::query(CONVERSATION)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::conversation).transpose()
    }

    async fn previous_conversation(&self, conv: &Conversation) -> Result<Option<Conversation>, StoreError> {
        let row = sqlx::query(
            "SELECT * FROM conversations WHERE tenant_id = ? AND channel = ? AND user_id = ? AND agent_id = ? AND id <> ? ORDER BY updated_at DESC LIMIT 1",
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
        // Writes only, no read first: a deferred transaction that reads and then writes fails at once
        // (SQLITE_BUSY, no busy wait) when another process wrote in between.
        // A new conversation's row and message are two statements: a transaction either way, so they
        // join a group; an existing conversation's message is one statement, grouped only under load.
        if let Some(group) = self
            .group
            .as_ref()
            .filter(|g| new_conversation || touch.is_some() || g.busy())
            && let Some(mut member) = group.enter().await
        {
            let written = async {
                if new_conversation {
                    Self::upsert_conversation(member.tx(), conversation, now, Existing::Keep).await?;
                }
                for s in touch.clone().into_iter().flatten() {
                    sqlite_query(s).execute(&mut **member.tx()).await?;
                }
                let row = sqlite_query(crate::sql::write::accepted(&a)?)
                    .fetch_optional(&mut **member.tx())
                    .await?;
                Ok::<_, StoreError>(row.map(|r| r.try_get::<i64, _>("id")).transpose()?)
            }
            .await;
            if let Ok(id) = written
                && member.committed().await
            {
                return Ok(id);
            }
        }
        let _alone = self.group.as_ref().map(super::group::Group::alone);
        let insert = sqlite_query(crate::sql::write::accepted(&a)?);
        let row = if new_conversation || touch.is_some() {
            let mut tx = self.writer.begin().await?;
            if new_conversation {
                Self::upsert_conversation(&mut tx, conversation, now, Existing::Keep).await?;
            }
            for s in touch.into_iter().flatten() {
                sqlite_query(s).execute(&mut *tx).await?;
            }
            let row = insert.fetch_optional(&mut *tx).await?;
            tx.commit().await?;
            row
        } else {
            insert.fetch_optional(&self.writer).await?
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
            "INSERT INTO messages (conversation_id, execucao_id, role, body, created_at, search_text) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(conversation_id)
        .bind(execucao_id)
        .bind(role(message))
        .bind(json(message)?)
        .bind(ms(now))
        .bind(crate::search_text(message))
        .fetch_one(&self.writer)
        .await?;
        Ok(row.try_get("id")?)
    }

    async fn heard(&self, id: i64, message: &ChatMessage) -> Result<(), StoreError> {
        sqlite_query(crate::sql::write::heard(id, message)?)
            .execute(&self.writer)
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
             WHERE processed = 0 AND (?1 IS NULL OR (conversation_id = ?1 AND id <= ?2)) ORDER BY id LIMIT ?3",
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
        let rows = sqlx::query("SELECT * FROM messages WHERE conversation_id = ? AND id > ? ORDER BY id")
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
                    created_at: at(r.try_get("created_at")?),
                })
            })
            .collect()
    }

    async fn save_turn(&self, turn: TurnRecord<'_>, now: DateTime<Utc>) -> Result<(), StoreError> {
        // With other writes under way the turn joins their group: one commit, one sync, for all.
        // Alone, it is one query that is its own transaction — on a file: closing the connection is
        // how a half-done one is undone, and in memory that would drop the database. (A case's write
        // reads first: not in one query either.)
        let busy = self.group.as_ref().is_some_and(super::group::Group::busy);
        if !busy && turn.case.is_none() && self.files.is_some() {
            let _alone = self.group.as_ref().map(super::group::Group::alone);
            let mut writes = Writes::<Sqlite>::transaction();
            let indexed = self.turn_writes(&mut writes, &turn, now)?;
            self.write_transaction(writes).await?;
            self.indexed.committed(indexed);
            return Ok(());
        }
        if let Some(group) = &self.group
            && let Some(mut member) = group.enter().await
            && let Ok(indexed) = self.write_turn(member.tx(), &turn, now).await
            && member.committed().await
        {
            self.indexed.committed(indexed);
            return Ok(());
        }
        let mut tx = self.writer.begin().await?;
        let indexed = self.write_turn(&mut tx, &turn, now).await?;
        tx.commit().await?;
        self.indexed.committed(indexed);
        Ok(())
    }

    async fn execution(
        &self,
        execucao_id: &str,
    ) -> Result<Option<(ExecutionRecord, Vec<TurnEvent>)>, StoreError> {
        let row = sqlx::query("SELECT * FROM executions WHERE execucao_id = ?")
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
        let rows =
            sqlx::query("SELECT * FROM executions WHERE conversation_id = ? ORDER BY started_at, rowid")
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
                 tokens_used, error_message, created_at, completed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT(id) DO UPDATE SET status = excluded.status, plan = excluded.plan, steps = excluded.steps,
                 final_result = excluded.final_result, tokens_used = excluded.tokens_used,
                 error_message = excluded.error_message, completed_at = excluded.completed_at",
        )
        .bind(&t.id)
        .bind(&t.conversation_id)
        .bind(&t.user_id)
        .bind(&t.intent_key)
        .bind(t.status.as_str())
        .bind(t.plan.as_ref().map(json).transpose()?)
        .bind(json(&t.steps)?)
        .bind(t.final_result.as_deref().map(crate::seal::seal))
        .bind(t.tokens_used)
        .bind(&t.error_message)
        .bind(ms(t.created_at))
        .bind(t.completed_at.map(ms))
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    async fn task_runs(&self, conversation_id: &str) -> Result<Vec<TaskRun>, StoreError> {
        let rows =
            sqlx::query("SELECT * FROM task_runs WHERE conversation_id = ? ORDER BY created_at, rowid")
                .bind(conversation_id)
                .fetch_all(&self.pool)
                .await?;
        rows.iter().map(rows::task_run).collect()
    }

    async fn save_context(&self, c: &ConversationContext) -> Result<(), StoreError> {
        let mut conn = self.writer.acquire().await?;
        Self::upsert_context(&mut conn, c).await
    }

    async fn context(&self, conversation_id: &str) -> Result<Option<ConversationContext>, StoreError> {
        let row = sqlx::query(CONTEXT)
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
             WHERE (?1 IS NULL OR c.tenant_id = ?1)
               AND (?2 IS NULL OR c.channel = ?2)
               AND (?3 IS NULL OR instr(lower(c.id), lower(?3)) > 0
                    OR instr(lower(c.user_id), lower(?3)) > 0
                    OR instr(lower(c.user_login), lower(?3)) > 0
                    OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id
                               AND instr(lower(m.search_text), lower(?3)) > 0))
               AND (?5 IS NULL OR x.last_intent = ?5)
             ORDER BY c.updated_at DESC, c.id LIMIT ?4",
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
                    last_message: parse_opt(r, "last_body")?,
                    last_intent: r.try_get("last_intent")?,
                    ended: r.try_get("ended")?,
                    handed_over: r.try_get("handed_over")?,
                    updated_at: at(r.try_get("updated_at")?),
                })
            })
            .collect()
    }

    async fn lock_conversation(&self, conversation_id: &str) -> Result<TurnLock, StoreError> {
        match &self.files {
            Some(files) => files.acquire(conversation_id).await,
            None => Ok(TurnLock::local(self.locks.lock(conversation_id).await)),
        }
    }

    async fn turn_reads(&self, conversation_id: &str) -> Result<crate::TurnReads, StoreError> {
        // Three statements, one query: their rows come back together, told apart by their columns.
        static TURN_READS: LazyLock<String> =
            LazyLock::new(|| [CONVERSATION, CONTEXT, OPEN_CASE_OF].join(";\n"));
        let query = sqlx::query(TURN_READS.as_str())
            .bind(conversation_id)
            .bind(conversation_id)
            .bind(conversation_id);
        let rows = match self.turn_reader().await {
            Some(mut conn) => query.fetch_all(&mut *conn).await?,
            None => query.fetch_all(&self.pool).await?,
        };
        let mut reads = crate::TurnReads::default();
        for row in &rows {
            if row.try_column("skill_window").is_ok() {
                reads.conversation = Some(rows::conversation(row)?);
            } else if row.try_column("key_facts").is_ok() {
                reads.context = Some(rows::context(row)?);
            } else {
                reads.open_case = Some(rows::case(row)?);
            }
        }
        Ok(reads)
    }
}

impl SqliteStore {
    /// A turn's writes on `tx` (committed by the caller); returns the blind-index rows it wrote, which
    /// count as written once the commit is done.
    async fn write_turn(
        &self,
        tx: &mut Transaction<'static, Sqlite>,
        turn: &TurnRecord<'_>,
        now: DateTime<Utc>,
    ) -> Result<Vec<crate::CardRef>, StoreError> {
        if let Some(case) = turn.case {
            crate::sql::cases::write_case(tx, case, now).await?;
        }
        let mut writes = Writes::<Sqlite>::new();
        let indexed = self.turn_writes(&mut writes, turn, now)?;
        writes.execute(&mut **tx).await?;
        Ok(indexed)
    }

    /// A turn's rows but its case's, added to `writes`; returns the blind-index rows among them.
    fn turn_writes(
        &self,
        writes: &mut Writes<Sqlite>,
        turn: &TurnRecord<'_>,
        now: DateTime<Utc>,
    ) -> Result<Vec<crate::CardRef>, StoreError> {
        for s in crate::sql::write::flow_runs(turn.flow_runs, now)? {
            writes.push(s);
        }
        let (rows, refs) = crate::sql::write::turn(turn, now)?;
        // The cards of the whole turn in one statement.
        let indexed = self.indexed.unknown(&refs);
        if !indexed.is_empty() {
            writes.add(|q| crate::card_ref_rows(q, &indexed));
        }
        for s in rows {
            writes.push(s);
        }
        Ok(indexed)
    }
}
