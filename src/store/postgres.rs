//! The PostgreSQL store, for several instances sharing state. Outbox claims use `FOR UPDATE SKIP
//! LOCKED`; turn locks take a lease row (`locks`), so two instances never run turns of one
//! conversation at the same time and no connection is held while a turn runs.

use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, Row, Transaction};

use rust_decimal::Decimal;
use vt_actions::journal::{AttemptStatus, Confirmation, Consumption, RechargeAttempt};

use super::locks::{Leases, acquire};
use super::{
    AuditRecord, BatchJob, BatchLine, ConversationContext, ConversationListing, ConversationQuery,
    FlowRunRecord, FlowRunSummary, IdempotencyPut, IdempotencyRecord, IntentRecord, LocalLocks,
    NewOutboxItem, OutboxItem, OutboxStatus, RechargeAttemptRecord, Store, StoreError, StoredMessage,
    TaskRun, TaskStatus, TurnLock, TurnRecord, UnprocessedMessage, UsageRecord, UsageSummaryRow, role,
};
use super::{Existing, LineStatus, RunStatus, Sent, attempt_status, insert_rows};
use crate::engine::{Conversation, ExecutionRecord, ExecutionStatus, TurnEvent};
use crate::llm::ChatMessage;

pub struct PgStore {
    pool: PgPool,
    locks: LocalLocks,
    /// The blind-index rows this instance already wrote. Another instance's erasure does not empty
    /// it: a conversation erased there and written again here keeps its rows only if this instance
    /// writes them again, so an erasure on PostgreSQL is best run with the instances restarted after.
    indexed: super::Indexed,
}

/// The insert of an accepted inbound message (returning its id; nothing for a redelivered
/// `channel_message_id`), unprocessed until its turn commits when it has a channel id.
fn accepted<'q>(
    conversation: &'q Conversation,
    channel_message_id: Option<&'q str>,
    message: &ChatMessage,
    now: DateTime<Utc>,
) -> Result<sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>, StoreError> {
    Ok(sqlx::query(
        "INSERT INTO messages (conversation_id, execucao_id, role, body, created_at, channel_message_id, processed, search_text)
         VALUES ($1, NULL, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING id",
    )
    .bind(&conversation.id)
    .bind(role(message))
    .bind(value(message)?)
    .bind(now)
    .bind(channel_message_id)
    .bind(channel_message_id.is_none())
    .bind(super::search_text(message)))
}

fn batch_job(row: &PgRow) -> Result<BatchJob, StoreError> {
    Ok(BatchJob {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        digest: row.try_get("digest")?,
        total: row.try_get("total")?,
        dry_run: row.try_get("dry_run")?,
        source: super::seal::open_opt(row.try_get("source")?)?,
        created_at: row.try_get("created_at")?,
        finished_at: row.try_get("finished_at")?,
    })
}

/// `v` sealed ([`super::seal`]), kept in its JSONB column as a JSON string: every JSON column but the
/// intents' holds what people said or what was done for them.
fn value<T: Serialize + ?Sized>(v: &T) -> Result<Json<Value>, StoreError> {
    Ok(Json(Value::String(super::seal::seal(
        &vt_actions::json::to_text(v)?,
    ))))
}

/// `v` as JSON, in clear: the router's intents (data, not anyone's).
fn plain<T: Serialize + ?Sized>(v: &T) -> Result<Json<Value>, StoreError> {
    Ok(Json(vt_actions::json::to_value(v)?))
}

/// A JSONB value as written: sealed (a string), or clear from before sealing.
fn opened<T: DeserializeOwned>(v: Value) -> Result<T, StoreError> {
    match v {
        Value::String(s) if super::seal::is_sealed(&s) => {
            Ok(vt_actions::json::from_text(&super::seal::open(&s)?)?)
        }
        v => Ok(vt_actions::json::from_value(v)?),
    }
}

fn parse<T: DeserializeOwned>(row: &PgRow, col: &str) -> Result<T, StoreError> {
    let Json(v): Json<Value> = row.try_get(col)?;
    opened(v)
}

fn parse_opt<T: DeserializeOwned>(row: &PgRow, col: &str) -> Result<Option<T>, StoreError> {
    let v: Option<Json<Value>> = row.try_get(col)?;
    v.map(|Json(v)| opened(v)).transpose()
}

impl PgStore {
    /// Connects and runs the migrations. On loopback, unless the URL asks for an `sslmode`, TLS is off:
    /// it protects nothing there, and its extra writes met delayed ACKs (sqlx sets no `TCP_NODELAY`),
    /// which took a turn from ~11 ms to ~100 ms once the conversation row passed ~16 KB.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let mut options = PgConnectOptions::from_str(url)?;
        if !url.contains("sslmode") && is_loopback(options.get_host()) {
            options = options.ssl_mode(sqlx::postgres::PgSslMode::Disable);
        }
        Self::connect_with(options).await
    }

    /// Connects with explicit options (tests use a private schema through `search_path`).
    pub async fn connect_with(options: PgConnectOptions) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(10)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(Self {
            pool,
            locks: LocalLocks::default(),
            indexed: super::Indexed::default(),
        })
    }

    async fn upsert_conversation(
        tx: &mut Transaction<'static, Postgres>,
        c: &Conversation,
        now: DateTime<Utc>,
        existing: Existing,
    ) -> Result<Vec<super::CardRef>, StoreError> {
        let sql = match existing {
            Existing::Update => {
                "INSERT INTO conversations (id, agent_id, user_id, user_login, channel, active_skill, state, memory,
                     skill_window, handoff, ended, created_at, updated_at, tenant_id)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13)
                 ON CONFLICT (id) DO UPDATE SET active_skill = excluded.active_skill, state = excluded.state,
                     memory = excluded.memory, skill_window = excluded.skill_window, handoff = excluded.handoff,
                     ended = excluded.ended, updated_at = excluded.updated_at"
            }
            Existing::Keep => {
                "INSERT INTO conversations (id, agent_id, user_id, user_login, channel, active_skill, state, memory,
                     skill_window, handoff, ended, created_at, updated_at, tenant_id)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13)
                 ON CONFLICT (id) DO NOTHING"
            }
        };
        sqlx::query(sql)
            .bind(&c.id)
            .bind(&c.agent_id)
            .bind(&c.user_id)
            .bind(&c.user_login)
            .bind(&c.channel)
            .bind(&c.active_skill)
            .bind(value(&c.state)?)
            .bind(value(&c.memory)?)
            .bind(value(&c.window)?)
            .bind(c.handoff.as_ref().map(value).transpose()?)
            .bind(c.ended)
            .bind(now)
            .bind(&c.tenant_id)
            .execute(&mut **tx)
            .await?;
        // A new conversation (accepting its first message, a flow's start) holds no card yet.
        Ok(match existing {
            Existing::Update => super::conversation_card_refs(c),
            Existing::Keep => Vec::new(),
        })
    }

    async fn upsert_context(conn: &mut PgConnection, c: &ConversationContext) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO conversation_context (conversation_id, user_id, summary, key_facts, last_intent, turn_count, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (conversation_id) DO UPDATE SET summary = excluded.summary, key_facts = excluded.key_facts,
                 last_intent = excluded.last_intent, turn_count = excluded.turn_count, updated_at = excluded.updated_at",
        )
        .bind(&c.conversation_id)
        .bind(&c.user_id)
        .bind(c.summary.as_deref().map(super::seal::seal))
        .bind(value(&c.key_facts)?)
        .bind(&c.last_intent)
        .bind(c.turn_count as i32)
        .bind(c.updated_at)
        .execute(conn)
        .await?;
        Ok(())
    }

    async fn insert_outbox(
        conn: &mut PgConnection,
        item: &NewOutboxItem,
        now: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "INSERT INTO outbox (kind, destination, payload, max_attempts, next_attempt_at, created_at, conversation_id, status)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
        )
        .bind(&item.kind)
        .bind(&item.destination)
        .bind(value(&item.payload)?)
        .bind(item.max_attempts)
        .bind(item.next_attempt_at)
        .bind(now)
        .bind(&item.conversation_id)
        .bind(item.status.as_str())
        .fetch_one(conn)
        .await?;
        Ok(row.try_get("id")?)
    }

    /// Inserts the runs, or completes the rows [`Store::begin_flow_run`] left, with their stages, many
    /// rows to a statement ([`insert_rows`]).
    async fn insert_flow_runs(
        tx: &mut Transaction<'static, Postgres>,
        runs: &[FlowRunRecord],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut rows = Vec::with_capacity(runs.len());
        for run in runs {
            rows.push((run, value(&run.input)?, value(&run.output)?));
        }
        insert_rows::<Postgres, _>(
            tx,
            "INSERT INTO flow_runs (execucao_id, status, input, output, created_at, finished_at, parent_execucao_id, card_hash) ",
            &rows,
            " ON CONFLICT (execucao_id) DO UPDATE SET status = excluded.status, output = excluded.output,
                 finished_at = excluded.finished_at",
            |b, (run, input, output)| {
                b.push_bind(run.execucao_id.clone())
                    .push_bind(run.status.as_str())
                    .push_bind(input.clone())
                    .push_bind(output.clone())
                    .push_bind(run.created_at)
                    .push_bind(now)
                    .push_bind(run.parent_execucao_id.clone())
                    .push_bind(super::flow_card_hash(&run.input));
            },
        )
        .await?;
        let mut stages = Vec::new();
        for run in runs {
            for (i, (etapa, saida)) in run.stages.iter().enumerate() {
                stages.push((&run.execucao_id, i as i32, etapa, value(saida)?));
            }
        }
        insert_rows::<Postgres, _>(
            tx,
            "INSERT INTO flow_stages (execucao_id, position, etapa, saida) ",
            &stages,
            "",
            |b, (id, position, etapa, saida)| {
                b.push_bind((*id).clone())
                    .push_bind(*position)
                    .push_bind((*etapa).clone())
                    .push_bind(saida.clone());
            },
        )
        .await?;
        Ok(())
    }

    async fn insert_usage(
        tx: &mut Transaction<'static, Postgres>,
        u: &UsageRecord,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO usage_metrics (conversation_id, intent_key, action_type, tokens_input, tokens_output,
                 execution_time_ms, was_keyword_matched, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&u.conversation_id)
        .bind(&u.intent_key)
        .bind(&u.action_type)
        .bind(u.tokens_input)
        .bind(u.tokens_output)
        .bind(u.execution_time_ms)
        .bind(u.was_keyword_matched)
        .bind(u.created_at)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }
}

fn execution_from(row: &PgRow) -> Result<ExecutionRecord, StoreError> {
    let status: String = row.try_get("status")?;
    Ok(ExecutionRecord {
        execucao_id: row.try_get("execucao_id")?,
        conversation_id: row.try_get("conversation_id")?,
        agent_id: row.try_get("agent_id")?,
        status: ExecutionStatus::parse(&status),
        error: row.try_get("error")?,
        model_calls: parse(row, "model_calls")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
    })
}

fn outbox_from(row: &PgRow) -> Result<OutboxItem, StoreError> {
    Ok(OutboxItem {
        id: row.try_get("id")?,
        kind: row.try_get("kind")?,
        destination: row.try_get("destination")?,
        payload: parse(row, "payload")?,
        conversation_id: row.try_get("conversation_id")?,
        status: OutboxStatus::parse(&row.try_get::<String, _>("status")?)?,
        attempts: row.try_get("attempts")?,
        max_attempts: row.try_get("max_attempts")?,
        next_attempt_at: row.try_get("next_attempt_at")?,
        last_error: row.try_get("last_error")?,
    })
}

fn task_from(row: &PgRow) -> Result<TaskRun, StoreError> {
    Ok(TaskRun {
        id: row.try_get("id")?,
        conversation_id: row.try_get("conversation_id")?,
        user_id: row.try_get("user_id")?,
        intent_key: row.try_get("intent_key")?,
        status: TaskStatus::parse(&row.try_get::<String, _>("status")?)?,
        plan: parse_opt(row, "plan")?,
        steps: parse(row, "steps")?,
        final_result: super::seal::open_opt(row.try_get("final_result")?)?,
        tokens_used: row.try_get("tokens_used")?,
        error_message: row.try_get("error_message")?,
        created_at: row.try_get("created_at")?,
        completed_at: row.try_get("completed_at")?,
    })
}

fn idempotency_from(row: &PgRow) -> Result<IdempotencyRecord, StoreError> {
    Ok(IdempotencyRecord {
        key: row.try_get("key")?,
        scope: row.try_get("scope")?,
        request_hash: row.try_get("request_hash")?,
        response: parse(row, "response")?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
    })
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn save_conversation(&self, conv: &Conversation, now: DateTime<Utc>) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let refs = Self::upsert_conversation(&mut tx, conv, now, Existing::Update).await?;
        let indexed = super::insert_card_refs::<Postgres>(&mut tx, &self.indexed, &refs).await?;
        tx.commit().await?;
        self.indexed.committed(indexed);
        Ok(())
    }

    async fn conversation(&self, id: &str) -> Result<Option<Conversation>, StoreError> {
        let Some(row) = sqlx::query("SELECT * FROM conversations WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(Conversation {
            id: row.try_get("id")?,
            agent_id: row.try_get("agent_id")?,
            tenant_id: row.try_get("tenant_id")?,
            user_id: row.try_get("user_id")?,
            user_login: row.try_get("user_login")?,
            channel: row.try_get("channel")?,
            active_skill: row.try_get("active_skill")?,
            state: parse(&row, "state")?,
            memory: parse(&row, "memory")?,
            window: parse(&row, "skill_window")?,
            handoff: parse_opt(&row, "handoff")?,
            ended: row.try_get("ended")?,
        }))
    }

    async fn accept_message(
        &self,
        conversation: &Conversation,
        new_conversation: bool,
        channel_message_id: Option<&str>,
        message: &ChatMessage,
        now: DateTime<Utc>,
    ) -> Result<Option<i64>, StoreError> {
        let insert = accepted(conversation, channel_message_id, message, now)?;
        let row = if new_conversation {
            let mut tx = self.pool.begin().await?;
            Self::upsert_conversation(&mut tx, conversation, now, Existing::Keep).await?;
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
        .bind(super::search_text(message))
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get("id")?)
    }

    async fn unprocessed_messages(
        &self,
        through: Option<(&str, i64)>,
        limit: i64,
    ) -> Result<Vec<UnprocessedMessage>, StoreError> {
        let (conversation, last) = through.unzip();
        let rows = sqlx::query(
            "SELECT id, conversation_id, channel_message_id, body FROM messages
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
                })
            })
            .collect()
    }

    async fn messages(&self, conversation_id: &str) -> Result<Vec<StoredMessage>, StoreError> {
        let rows = sqlx::query("SELECT * FROM messages WHERE conversation_id = $1 ORDER BY id")
            .bind(conversation_id)
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
        let e = turn.execution;
        let (tokens_in, tokens_out) = e.tokens();
        let mut tx = self.pool.begin().await?;
        let refs = Self::upsert_conversation(&mut tx, turn.conversation, now, Existing::Update).await?;
        let mut messages = Vec::with_capacity(turn.messages.len());
        for m in turn.messages {
            messages.push((role(m), value(m)?, super::search_text(m)));
        }
        insert_rows::<Postgres, _>(
            &mut tx,
            "INSERT INTO messages (conversation_id, execucao_id, role, body, created_at, search_text) ",
            &messages,
            "",
            |b, (role, body, search)| {
                b.push_bind(turn.conversation.id.clone())
                    .push_bind(e.execucao_id.clone())
                    .push_bind(*role)
                    .push_bind(body.clone())
                    .push_bind(now)
                    .push_bind(search.clone());
            },
        )
        .await?;
        sqlx::query(
            "INSERT INTO executions (execucao_id, conversation_id, agent_id, status, error, model_calls, events,
                 tokens_input, tokens_output, started_at, finished_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(&e.execucao_id)
        .bind(&e.conversation_id)
        .bind(&e.agent_id)
        .bind(e.status.as_str())
        .bind(&e.error)
        .bind(value(&e.model_calls)?)
        .bind(value(turn.events)?)
        .bind(tokens_in as i64)
        .bind(tokens_out as i64)
        .bind(e.started_at)
        .bind(e.finished_at)
        .execute(&mut *tx)
        .await?;
        if let Some(u) = turn.usage {
            Self::insert_usage(&mut tx, u).await?;
        }
        if let Some(id) = turn.accepted_message {
            sqlx::query("UPDATE messages SET processed = TRUE WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        Self::insert_flow_runs(&mut tx, turn.flow_runs, now).await?;
        // One statement for the cards of the whole turn.
        let indexed = super::insert_card_refs::<Postgres>(&mut tx, &self.indexed, &refs).await?;
        if let Some(c) = turn.context {
            Self::upsert_context(&mut tx, c).await?;
        }
        for item in turn.outbox {
            Self::insert_outbox(&mut tx, item, now).await?;
        }
        tx.commit().await?;
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
        row.map(|r| Ok((execution_from(&r)?, parse(&r, "events")?)))
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
            .map(|r| Ok((execution_from(r)?, parse(r, "events")?)))
            .collect()
    }

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
        .bind(t.final_result.as_deref().map(super::seal::seal))
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
        rows.iter().map(task_from).collect()
    }

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

    async fn save_context(&self, c: &ConversationContext) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        Self::upsert_context(&mut conn, c).await
    }

    async fn context(&self, conversation_id: &str) -> Result<Option<ConversationContext>, StoreError> {
        let row = sqlx::query("SELECT * FROM conversation_context WHERE conversation_id = $1")
            .bind(conversation_id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            Ok(ConversationContext {
                conversation_id: r.try_get("conversation_id")?,
                user_id: r.try_get("user_id")?,
                summary: super::seal::open_opt(r.try_get("summary")?)?,
                key_facts: parse(&r, "key_facts")?,
                last_intent: r.try_get("last_intent")?,
                turn_count: i64::from(r.try_get::<i32, _>("turn_count")?),
                updated_at: r.try_get("updated_at")?,
            })
        })
        .transpose()
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
        row.map(|r| idempotency_from(&r)).transpose()
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

    async fn enqueue(&self, item: &NewOutboxItem, now: DateTime<Utc>) -> Result<i64, StoreError> {
        let mut conn = self.pool.acquire().await?;
        Self::insert_outbox(&mut conn, item, now).await
    }

    async fn claim(
        &self,
        limit: i64,
        now: DateTime<Utc>,
        lease: chrono::Duration,
    ) -> Result<Vec<OutboxItem>, StoreError> {
        let rows = sqlx::query(
            "UPDATE outbox SET status = 'in_flight', attempts = attempts + 1, claimed_until = $1
             WHERE id IN (SELECT o.id FROM outbox o
                          WHERE ((o.status = 'pending' AND o.next_attempt_at <= $2)
                                 OR (o.status = 'in_flight' AND o.claimed_until < $2))
                            AND NOT EXISTS (SELECT 1 FROM outbox e
                                            WHERE o.conversation_id IS NOT NULL
                                              AND e.conversation_id = o.conversation_id AND e.id < o.id
                                              AND e.status IN ('pending', 'in_flight'))
                          ORDER BY o.id LIMIT $3
                          FOR UPDATE SKIP LOCKED)
             RETURNING id, kind, destination, payload, conversation_id, status, attempts, max_attempts,
                 next_attempt_at, last_error",
        )
        .bind(now + lease)
        .bind(now)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut items = rows.iter().map(outbox_from).collect::<Result<Vec<_>, _>>()?;
        items.sort_by_key(|i| i.id);
        Ok(items)
    }

    async fn ack(&self, id: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET status = 'done', claimed_until = NULL WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn retry_later(
        &self,
        id: i64,
        error: &str,
        next_attempt_at: DateTime<Utc>,
    ) -> Result<OutboxStatus, StoreError> {
        let row = sqlx::query(
            "UPDATE outbox SET status = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END,
                 next_attempt_at = $1, last_error = $2, claimed_until = NULL
             WHERE id = $3 RETURNING status",
        )
        .bind(next_attempt_at)
        .bind(error)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::Invalid(format!("outbox item {id} does not exist")))?;
        OutboxStatus::parse(&row.try_get::<String, _>("status")?)
    }

    async fn record_sent(&self, id: i64, external_id: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET external_id = $1 WHERE id = $2")
            .bind(external_id)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn record_delivery_status(
        &self,
        external_id: &str,
        status: &str,
        error_code: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let ours = sqlx::query("SELECT 1 FROM outbox WHERE external_id = $1")
            .bind(external_id)
            .fetch_optional(&self.pool)
            .await?
            .is_some();
        if ours {
            sqlx::query(
                "INSERT INTO delivery_statuses (external_id, status, error_code, at) VALUES ($1, $2, $3, $4)
             ON CONFLICT DO NOTHING",
            )
            .bind(external_id)
            .bind(status)
            .bind(error_code)
            .bind(at)
            .execute(&self.pool)
            .await?;
        }
        Ok(ours)
    }

    async fn delivery_statuses(
        &self,
        external_id: &str,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let rows = sqlx::query(
            "SELECT status, error_code FROM delivery_statuses WHERE external_id = $1 ORDER BY at, status",
        )
        .bind(external_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("status")?, r.try_get("error_code")?)))
            .collect()
    }

    async fn dead_letter(&self, id: i64, error: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE outbox SET status = 'failed', last_error = $1, claimed_until = NULL WHERE id = $2",
        )
        .bind(error)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn outbox_count(&self, status: OutboxStatus) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM outbox WHERE status = $1")
            .bind(status.as_str())
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get("n")?)
    }

    async fn outbox_items(&self, status: OutboxStatus, limit: i64) -> Result<Vec<OutboxItem>, StoreError> {
        let rows = sqlx::query("SELECT * FROM outbox WHERE status = $1 ORDER BY id LIMIT $2")
            .bind(status.as_str())
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(outbox_from).collect()
    }

    async fn requeue(&self, id: i64, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = $1, claimed_until = NULL
             WHERE id = $2 AND status = 'failed'",
        )
        .bind(now)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn outbox_item(&self, id: i64) -> Result<Option<OutboxItem>, StoreError> {
        let row = sqlx::query("SELECT * FROM outbox WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| outbox_from(&r)).transpose()
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
        .bind(super::flow_card_hash(input))
        .bind(&conversation.id)
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

    async fn consume_confirmation(
        &self,
        c: Confirmation<'_>,
        attempt: Option<&RechargeAttempt>,
        now: DateTime<Utc>,
    ) -> Result<Consumption, StoreError> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "INSERT INTO consumed_confirmations (pending_id, origin, consumed_at, consumer) VALUES ($1, $2, $3, $4)
             ON CONFLICT (pending_id) DO NOTHING",
        )
        .bind(c.pending_id)
        .bind(c.origin)
        .bind(now)
        .bind(c.consumer)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            let by: Option<String> =
                sqlx::query_scalar("SELECT consumer FROM consumed_confirmations WHERE pending_id = $1")
                    .bind(c.pending_id)
                    .fetch_one(&mut *tx)
                    .await?;
            tx.commit().await?;
            return Ok(Consumption::before(by.as_deref().unwrap_or_default(), c.consumer));
        }
        if let Some(a) = attempt {
            insert_attempt(a, now, Sent::NotYet).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(Consumption::Now)
    }

    async fn confirmation_consumer(&self, pending_id: &str) -> Result<Option<String>, StoreError> {
        let row: Option<(Option<String>,)> =
            sqlx::query_as("SELECT consumer FROM consumed_confirmations WHERE pending_id = $1")
                .bind(pending_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|(by,)| by.unwrap_or_default()))
    }

    async fn begin_recharge(&self, a: &RechargeAttempt, now: DateTime<Utc>) -> Result<(), StoreError> {
        insert_attempt(a, now, Sent::Now).execute(&self.pool).await?;
        Ok(())
    }

    async fn resolve_recharge(
        &self,
        idempotency_key: &str,
        status: AttemptStatus,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE recharge_attempts SET status = $1, updated_at = $2 WHERE idempotency_key = $3")
            .bind(status.as_str())
            .bind(now)
            .bind(idempotency_key)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn unresolved_recharge(
        &self,
        scope: &str,
        fingerprint: &str,
    ) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT idempotency_key FROM recharge_attempts
             WHERE scope = $1 AND fingerprint = $2 AND status = ANY($3)
             ORDER BY updated_at DESC LIMIT 1",
        )
        .bind(scope)
        .bind(fingerprint)
        .bind(AttemptStatus::UNKNOWN.map(AttemptStatus::as_str).to_vec())
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| r.try_get("idempotency_key")).transpose()?)
    }

    async fn recharge_attempts(&self, limit: i64) -> Result<Vec<RechargeAttemptRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT * FROM recharge_attempts ORDER BY updated_at DESC, idempotency_key DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let valor: String = r.try_get("valor")?;
                Ok(RechargeAttemptRecord {
                    attempt: RechargeAttempt {
                        idempotency_key: r.try_get("idempotency_key")?,
                        fingerprint: r.try_get("fingerprint")?,
                        scope: r.try_get("scope")?,
                        origin: r.try_get("origin")?,
                        execucao_id: r.try_get("execucao_id")?,
                        cartao_mascarado: r.try_get("cartao_mascarado")?,
                        valor: Decimal::from_str(&valor)
                            .map_err(|e| StoreError::Invalid(format!("stored recharge value: {e}")))?,
                        moeda: r.try_get("moeda")?,
                    },
                    status: attempt_status(r.try_get("status")?)?,
                    sends: r.try_get::<i32, _>("sends")?.into(),
                    created_at: r.try_get("created_at")?,
                    updated_at: r.try_get("updated_at")?,
                })
            })
            .collect()
    }

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
        .bind(job.source.as_deref().map(super::seal::seal))
        .bind(job.created_at)
        .execute(&self.pool)
        .await?;
        let row = sqlx::query("SELECT * FROM batch_jobs WHERE id = $1")
            .bind(&job.id)
            .fetch_one(&self.pool)
            .await?;
        batch_job(&row)
    }

    async fn batch(&self, id: &str) -> Result<Option<BatchJob>, StoreError> {
        let row = sqlx::query("SELECT * FROM batch_jobs WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(batch_job).transpose()
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
        Ok(())
    }

    async fn unfinished_batches(&self) -> Result<Vec<BatchJob>, StoreError> {
        let rows = sqlx::query(
            "SELECT * FROM batch_jobs WHERE finished_at IS NULL AND source IS NOT NULL ORDER BY created_at",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(batch_job).collect()
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
        rows.iter().map(batch_job).collect()
    }

    async fn conversation_list(
        &self,
        query: &ConversationQuery,
    ) -> Result<Vec<ConversationListing>, StoreError> {
        let rows = sqlx::query(
            "SELECT c.id, c.tenant_id, c.channel, c.user_id, c.user_login, c.ended,
                    c.handoff IS NOT NULL AS handed_over, c.updated_at, x.last_intent,
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
             ORDER BY c.updated_at DESC, c.id LIMIT $4",
        )
        .bind(&query.tenant_id)
        .bind(&query.channel)
        .bind(&query.text)
        .bind(query.limit)
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

    async fn store_secrets(&self) -> Result<std::collections::HashMap<String, String>, StoreError> {
        let rows: Vec<(String, String)> = sqlx::query_as("SELECT name, value FROM store_secrets")
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|(name, value)| Ok((name, super::seal::open(&value)?)))
            .collect()
    }

    async fn put_store_secret(&self, name: &str, value: &str) -> Result<String, StoreError> {
        sqlx::query("INSERT INTO store_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING")
            .bind(name)
            .bind(super::seal::seal(value))
            .execute(&self.pool)
            .await?;
        let kept: String = sqlx::query_scalar("SELECT value FROM store_secrets WHERE name = $1")
            .bind(name)
            .fetch_one(&self.pool)
            .await?;
        Ok(super::seal::open(&kept)?)
    }

    async fn reseal(
        &self,
        progress: &(dyn for<'p> Fn(&'p str, u64) + Send + Sync),
    ) -> Result<u64, StoreError> {
        let ring = super::seal::ring();
        let pattern = ring.current_pattern();
        let mut total = 0;
        for (table, column, is_json) in super::SEALED {
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
                    .bind(super::RESEAL_BATCH)
                    .fetch_all(&mut *tx)
                    .await?;
                if rows.is_empty() {
                    break;
                }
                for (rid, v, is_string) in &rows {
                    // A JSON string holds the sealed text; any other JSON is a value from before sealing.
                    let stored = if *is_json && *is_string {
                        vt_actions::json::from_text::<String>(v)?
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
                    .bind(super::RESEAL_BATCH)
                    .fetch_all(&mut *tx)
                    .await?;
            if rows.is_empty() {
                break;
            }
            for (id, Json(body)) in rows.iter().cloned() {
                let message: ChatMessage = opened(body)?;
                sqlx::query("UPDATE messages SET search_text = $1 WHERE id = $2")
                    .bind(super::search_text(&message))
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
        }
        Ok(total)
    }

    async fn subject_records(&self, subject: &super::Subject) -> Result<super::Records, StoreError> {
        use super::Subject;
        let conversations: Vec<String> = match subject {
            Subject::User(id) => {
                sqlx::query_scalar("SELECT id FROM conversations WHERE user_id = $1")
                    .bind(id)
                    .fetch_all(&self.pool)
                    .await?
            }
            Subject::Card(digits) => {
                sqlx::query_scalar(
                    "SELECT ref_id FROM card_refs WHERE card_hash = $1 AND kind = 'conversa'
                     UNION SELECT conversation_id FROM flow_runs WHERE card_hash = $1 AND conversation_id IS NOT NULL",
                )
                    .bind(super::seal::card_index(digits))
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
                    .bind(super::seal::card_index(digits))
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
        flow_runs.extend(super::flow_runs_of::<Postgres>(&mut conn, &conversations).await?);
        flow_runs.sort();
        flow_runs.dedup();
        Ok(super::Records {
            conversations,
            flow_runs,
        })
    }

    async fn forget(&self, records: &super::Records) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        super::forget::<Postgres>(&mut tx, &self.indexed, records).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn lock_conversation(&self, conversation_id: &str) -> Result<TurnLock, StoreError> {
        acquire(&PgLeases(self.pool.clone()), &self.locks, conversation_id).await
    }
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host.starts_with('/')
        || host
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The insert that puts attempt `a` on record as `enviando`.
fn insert_attempt(
    a: &RechargeAttempt,
    now: DateTime<Utc>,
    sent: Sent,
) -> sqlx::query::Query<'_, Postgres, sqlx::postgres::PgArguments> {
    let sql = if matches!(sent, Sent::Now) {
        "INSERT INTO recharge_attempts (idempotency_key, fingerprint, scope, origin, execucao_id, cartao_mascarado,
             valor, moeda, status, sends, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1, $10, $10)
         ON CONFLICT (idempotency_key) DO UPDATE SET status = excluded.status,
             sends = recharge_attempts.sends + 1, execucao_id = excluded.execucao_id,
             updated_at = excluded.updated_at"
    } else {
        "INSERT INTO recharge_attempts (idempotency_key, fingerprint, scope, origin, execucao_id, cartao_mascarado,
             valor, moeda, status, sends, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, $10, $10)
         ON CONFLICT (idempotency_key) DO NOTHING"
    };
    sqlx::query(sql)
        .bind(&a.idempotency_key)
        .bind(&a.fingerprint)
        .bind(&a.scope)
        .bind(&a.origin)
        .bind(&a.execucao_id)
        .bind(&a.cartao_mascarado)
        .bind(a.valor.to_string())
        .bind(&a.moeda)
        .bind(AttemptStatus::Enviando.as_str())
        .bind(now)
}

/// The lease half of the turn lock, on this database.
#[derive(Clone)]
struct PgLeases(PgPool);

#[async_trait]
impl Leases for PgLeases {
    async fn try_take(
        &self,
        conversation_id: &str,
        owner: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO conversation_leases (conversation_id, owner, expires_at) VALUES ($1, $2, $3)
             ON CONFLICT (conversation_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
             WHERE conversation_leases.expires_at <= $4",
        )
        .bind(conversation_id)
        .bind(owner)
        .bind(until)
        .bind(now)
        .execute(&self.0)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn renew(
        &self,
        conversation_id: &str,
        owner: &str,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE conversation_leases SET expires_at = $1 WHERE conversation_id = $2 AND owner = $3",
        )
        .bind(until)
        .bind(conversation_id)
        .bind(owner)
        .execute(&self.0)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn release(&self, conversation_id: &str, owner: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM conversation_leases WHERE conversation_id = $1 AND owner = $2")
            .bind(conversation_id)
            .bind(owner)
            .execute(&self.0)
            .await?;
        Ok(())
    }
}
