//! The SQLite store: the default, a file under the data directory. Times are epoch milliseconds and
//! JSON is text, so the schema needs nothing SQLite lacks.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow};
use sqlx::{Row, Sqlite, SqliteConnection, Transaction};

use rust_decimal::Decimal;
use serde_json::Value;
use vt_actions::journal::{AttemptStatus, Confirmation, Consumption, RechargeAttempt};

use super::attempts::{Attempts, Write};
use super::locks::FileLocks;
use super::{
    AuditRecord, BatchJob, BatchLine, ConversationContext, ConversationListing, ConversationQuery,
    FlowRunRecord, FlowRunSummary, IdempotencyPut, IdempotencyRecord, IntentRecord, LocalLocks,
    NewOutboxItem, OutboxItem, OutboxStatus, RechargeAttemptRecord, Store, StoreError, StoredMessage,
    TaskRun, TaskStatus, TurnLock, TurnRecord, UnprocessedMessage, UsageRecord, UsageSummaryRow, role,
};
use super::{Existing, LineStatus, RunStatus, Sent, Usage, attempt_status, insert_rows};
use crate::engine::{Conversation, ExecutionRecord, ExecutionStatus, TurnEvent};
use crate::llm::ChatMessage;

pub struct SqliteStore {
    /// Readers.
    pool: SqlitePool,
    /// The one writing connection: writers of this process queue for it in order instead of meeting
    /// in SQLite's busy handler, whose growing sleeps gave a few turns seconds of latency under load.
    /// (Other processes still meet in the busy handler, with `busy_timeout`.)
    writer: SqlitePool,
    locks: LocalLocks,
    /// Cross-process turn locks; `None` in memory (one process by definition).
    files: Option<FileLocks>,
    /// Recharge attempts, committed in groups on `writer`.
    attempts: Attempts,
    /// The blind-index rows already written.
    indexed: super::Indexed,
}

fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

fn at(v: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(v).unwrap_or_default()
}

/// `v` as JSON, sealed ([`super::seal`]): every JSON column but the intents' holds what people said
/// or what was done for them.
fn json<T: Serialize + ?Sized>(v: &T) -> Result<String, StoreError> {
    Ok(super::seal::seal(&vt_actions::json::to_text(v)?))
}

/// `v` as JSON, in clear: the router's intents (data, not anyone's).
fn plain<T: Serialize + ?Sized>(v: &T) -> Result<String, StoreError> {
    Ok(vt_actions::json::to_text(v)?)
}

fn parse<T: DeserializeOwned>(row: &SqliteRow, col: &str) -> Result<T, StoreError> {
    let text: String = row.try_get(col)?;
    Ok(vt_actions::json::from_text(&super::seal::open(&text)?)?)
}

fn batch_job(row: &SqliteRow) -> Result<BatchJob, StoreError> {
    Ok(BatchJob {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        digest: row.try_get("digest")?,
        total: row.try_get("total")?,
        dry_run: row.try_get("dry_run")?,
        source: super::seal::open_opt(row.try_get("source")?)?,
        created_at: at(row.try_get("created_at")?),
        finished_at: row.try_get::<Option<i64>, _>("finished_at")?.map(at),
    })
}

/// The insert of an accepted inbound message (returning its id; nothing for a redelivered
/// `channel_message_id`), unprocessed until its turn commits when it has a channel id.
fn accepted<'q>(
    conversation: &'q Conversation,
    channel_message_id: Option<&'q str>,
    message: &ChatMessage,
    now: DateTime<Utc>,
) -> Result<sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments>, StoreError> {
    Ok(sqlx::query(
        "INSERT INTO messages (conversation_id, execucao_id, role, body, created_at, channel_message_id, processed, search_text)
         VALUES (?, NULL, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id",
    )
    .bind(&conversation.id)
    .bind(role(message))
    .bind(json(message)?)
    .bind(ms(now))
    .bind(channel_message_id)
    .bind(channel_message_id.is_none())
    .bind(super::search_text(message)))
}

/// The insert that puts attempt `a` on record as `enviando`.
pub(super) fn insert_attempt(
    a: &RechargeAttempt,
    now: DateTime<Utc>,
    sent: Sent,
) -> sqlx::query::Query<'_, Sqlite, sqlx::sqlite::SqliteArguments> {
    let sql = match sent {
        Sent::NotYet => {
            "INSERT INTO recharge_attempts (idempotency_key, fingerprint, scope, origin, execucao_id, cartao_mascarado,
                 valor, moeda, status, sends, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)
             ON CONFLICT(idempotency_key) DO NOTHING"
        }
        Sent::Now => {
            "INSERT INTO recharge_attempts (idempotency_key, fingerprint, scope, origin, execucao_id, cartao_mascarado,
                 valor, moeda, status, sends, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
             ON CONFLICT(idempotency_key) DO UPDATE SET status = excluded.status, sends = sends + 1,
                 execucao_id = excluded.execucao_id, updated_at = excluded.updated_at"
        }
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
        .bind(ms(now))
        .bind(ms(now))
}

/// The pools' shared options. No ping before handing out a connection (sqlx's default): the
/// "connection" is a thread of this process, so the ping checks nothing a statement would not, and it
/// cost a hop to that thread and back before every statement — half the hops of a turn.
fn pool_options() -> SqlitePoolOptions {
    SqlitePoolOptions::new().test_before_acquire(false)
}

fn parse_opt<T: DeserializeOwned>(row: &SqliteRow, col: &str) -> Result<Option<T>, StoreError> {
    let text: Option<String> = row.try_get(col)?;
    text.map(|t| Ok(vt_actions::json::from_text(&super::seal::open(&t)?)?))
        .transpose()
}

impl SqliteStore {
    /// `sqlite://path/to/file.db` (created if missing) or `sqlite::memory:`, for a service.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_for(url, Usage::Service).await
    }

    /// [`Self::connect`], with the connections `usage` needs.
    pub async fn connect_for(url: &str, usage: Usage) -> Result<Self, StoreError> {
        let memory = url.contains(":memory:");
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(if memory {
                SqliteJournalMode::Memory
            } else {
                SqliteJournalMode::Wal
            })
            .busy_timeout(Duration::from_secs(10));
        // A one-shot process may end with its connection open (`run-flow` does, `App::leave`: closing
        // checkpoints the WAL and deletes it, ~1.7 ms), so the next one starts by recovering the WAL,
        // reading every frame since its last checkpoint: checkpointing every 256 pages instead of SQLite's
        // 1,000 keeps that short (`run-flow`, interleaved runs: 11.1 → 10.4 ms median).
        let options = match usage {
            Usage::OneShot => options.pragma("wal_autocheckpoint", "256"),
            Usage::Service => options,
        };
        // sqlx takes no lock around SQLite migrations (nor around switching a new file to WAL): processes
        // starting together on a new file would each try to create the tables. A file lock beside the
        // database serialises setting it up.
        let _setting_up = match migration_lock_path(url) {
            Some(path) => Some(lock_file(path).await?),
            None => None,
        };
        // An in-memory database lives in its one connection: keep exactly one, forever, for reading and
        // writing alike.
        let (pool, writer) = if memory {
            let pool = pool_options()
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(options)
                .await?;
            (pool.clone(), pool)
        } else {
            let writer = pool_options()
                .max_connections(1)
                .connect_with(options.clone())
                .await?;
            let pool = match usage {
                // One command, no concurrency to speak of: the writer reads too. A second connection
                // was another thread, file set-up and schema read in every one-shot command.
                Usage::OneShot => writer.clone(),
                Usage::Service => pool_options().max_connections(4).connect_with(options).await?,
            };
            (pool, writer)
        };
        sqlx::migrate!("./migrations/sqlite").run(&writer).await?;
        let files = database_path(url).map(|p| FileLocks::beside(&p)).transpose()?;
        Ok(Self {
            attempts: Attempts::start(writer.clone()),
            pool,
            writer,
            locks: LocalLocks::default(),
            files,
            indexed: super::Indexed::default(),
        })
    }

    async fn upsert_conversation(
        tx: &mut Transaction<'static, Sqlite>,
        c: &Conversation,
        now: DateTime<Utc>,
        existing: Existing,
    ) -> Result<Vec<super::CardRef>, StoreError> {
        let sql = match existing {
            Existing::Update => {
                "INSERT INTO conversations (id, agent_id, user_id, user_login, channel, active_skill, state, memory,
                     skill_window, handoff, ended, created_at, updated_at, tenant_id)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                 ON CONFLICT(id) DO UPDATE SET active_skill = excluded.active_skill, state = excluded.state,
                     memory = excluded.memory, skill_window = excluded.skill_window, handoff = excluded.handoff,
                     ended = excluded.ended, updated_at = excluded.updated_at"
            }
            Existing::Keep => {
                "INSERT INTO conversations (id, agent_id, user_id, user_login, channel, active_skill, state, memory,
                     skill_window, handoff, ended, created_at, updated_at, tenant_id)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING"
            }
        };
        sqlx::query(sql)
            .bind(&c.id)
            .bind(&c.agent_id)
            .bind(&c.user_id)
            .bind(&c.user_login)
            .bind(&c.channel)
            .bind(&c.active_skill)
            .bind(json(&c.state)?)
            .bind(json(&c.memory)?)
            .bind(json(&c.window)?)
            .bind(c.handoff.as_ref().map(json).transpose()?)
            .bind(c.ended)
            .bind(ms(now))
            .bind(ms(now))
            .bind(&c.tenant_id)
            .execute(&mut **tx)
            .await?;
        // A new conversation (accepting its first message, a flow's start) holds no card yet.
        Ok(match existing {
            Existing::Update => super::conversation_card_refs(c),
            Existing::Keep => Vec::new(),
        })
    }

    async fn upsert_context(conn: &mut SqliteConnection, c: &ConversationContext) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO conversation_context (conversation_id, user_id, summary, key_facts, last_intent, turn_count, updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT(conversation_id) DO UPDATE SET summary = excluded.summary, key_facts = excluded.key_facts,
                 last_intent = excluded.last_intent, turn_count = excluded.turn_count, updated_at = excluded.updated_at",
        )
        .bind(&c.conversation_id)
        .bind(&c.user_id)
        .bind(c.summary.as_deref().map(super::seal::seal))
        .bind(json(&c.key_facts)?)
        .bind(&c.last_intent)
        .bind(c.turn_count)
        .bind(ms(c.updated_at))
        .execute(conn)
        .await?;
        Ok(())
    }

    async fn insert_outbox(
        conn: &mut SqliteConnection,
        item: &NewOutboxItem,
        now: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "INSERT INTO outbox (kind, destination, payload, max_attempts, next_attempt_at, created_at, conversation_id, status)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(&item.kind)
        .bind(&item.destination)
        .bind(json(&item.payload)?)
        .bind(item.max_attempts)
        .bind(ms(item.next_attempt_at))
        .bind(ms(now))
        .bind(&item.conversation_id)
        .bind(item.status.as_str())
        .fetch_one(conn)
        .await?;
        Ok(row.try_get("id")?)
    }

    /// Inserts the runs, or completes the rows [`Store::begin_flow_run`] left, with their stages — many
    /// rows to a statement: every statement is a round trip to sqlx's SQLite worker thread, and a batch
    /// group's runs have hundreds of stages.
    async fn insert_flow_runs(
        tx: &mut Transaction<'static, Sqlite>,
        runs: &[FlowRunRecord],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut rows = Vec::with_capacity(runs.len());
        for run in runs {
            rows.push((run, json(&run.input)?, json(&run.output)?));
        }
        insert_rows::<Sqlite, _>(
            tx,
            "INSERT INTO flow_runs (execucao_id, status, input, output, created_at, finished_at, parent_execucao_id, card_hash) ",
            &rows,
            " ON CONFLICT(execucao_id) DO UPDATE SET status = excluded.status, output = excluded.output,
                 finished_at = excluded.finished_at",
            |b, (run, input, output)| {
                b.push_bind(run.execucao_id.clone())
                    .push_bind(run.status.as_str())
                    .push_bind(input.clone())
                    .push_bind(output.clone())
                    .push_bind(ms(run.created_at))
                    .push_bind(ms(now))
                    .push_bind(run.parent_execucao_id.clone())
                    .push_bind(super::flow_card_hash(&run.input));
            },
        )
        .await?;
        let mut stages = Vec::new();
        for run in runs {
            for (i, (etapa, saida)) in run.stages.iter().enumerate() {
                stages.push((&run.execucao_id, i as i64, etapa, json(saida)?));
            }
        }
        insert_rows::<Sqlite, _>(
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

    async fn insert_usage(tx: &mut Transaction<'static, Sqlite>, u: &UsageRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO usage_metrics (conversation_id, intent_key, action_type, tokens_input, tokens_output,
                 execution_time_ms, was_keyword_matched, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&u.conversation_id)
        .bind(&u.intent_key)
        .bind(&u.action_type)
        .bind(u.tokens_input)
        .bind(u.tokens_output)
        .bind(u.execution_time_ms)
        .bind(u.was_keyword_matched)
        .bind(ms(u.created_at))
        .execute(&mut **tx)
        .await?;
        Ok(())
    }
}

fn execution_from(row: &SqliteRow) -> Result<ExecutionRecord, StoreError> {
    let status: String = row.try_get("status")?;
    Ok(ExecutionRecord {
        execucao_id: row.try_get("execucao_id")?,
        conversation_id: row.try_get("conversation_id")?,
        agent_id: row.try_get("agent_id")?,
        status: ExecutionStatus::parse(&status),
        error: row.try_get("error")?,
        model_calls: parse(row, "model_calls")?,
        started_at: at(row.try_get("started_at")?),
        finished_at: at(row.try_get("finished_at")?),
    })
}

fn outbox_from(row: &SqliteRow) -> Result<OutboxItem, StoreError> {
    Ok(OutboxItem {
        id: row.try_get("id")?,
        kind: row.try_get("kind")?,
        destination: row.try_get("destination")?,
        payload: parse(row, "payload")?,
        conversation_id: row.try_get("conversation_id")?,
        status: OutboxStatus::parse(&row.try_get::<String, _>("status")?)?,
        attempts: row.try_get("attempts")?,
        max_attempts: row.try_get("max_attempts")?,
        next_attempt_at: at(row.try_get("next_attempt_at")?),
        last_error: row.try_get("last_error")?,
    })
}

fn task_from(row: &SqliteRow) -> Result<TaskRun, StoreError> {
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
        created_at: at(row.try_get("created_at")?),
        completed_at: row.try_get::<Option<i64>, _>("completed_at")?.map(at),
    })
}

fn idempotency_from(row: &SqliteRow) -> Result<IdempotencyRecord, StoreError> {
    Ok(IdempotencyRecord {
        key: row.try_get("key")?,
        scope: row.try_get("scope")?,
        request_hash: row.try_get("request_hash")?,
        response: parse(row, "response")?,
        created_at: at(row.try_get("created_at")?),
        expires_at: at(row.try_get("expires_at")?),
    })
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn save_conversation(&self, conv: &Conversation, now: DateTime<Utc>) -> Result<(), StoreError> {
        let mut tx = self.writer.begin().await?;
        let refs = Self::upsert_conversation(&mut tx, conv, now, Existing::Update).await?;
        let indexed = super::insert_card_refs::<Sqlite>(&mut tx, &self.indexed, &refs).await?;
        tx.commit().await?;
        self.indexed.committed(indexed);
        Ok(())
    }

    async fn conversation(&self, id: &str) -> Result<Option<Conversation>, StoreError> {
        let Some(row) = sqlx::query("SELECT * FROM conversations WHERE id = ?")
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
        // Writes only, no read first: a deferred transaction that reads and then writes fails at once
        // (SQLITE_BUSY, no busy wait) when another process wrote in between.
        let insert = accepted(conversation, channel_message_id, message, now)?;
        let row = if new_conversation {
            let mut tx = self.writer.begin().await?;
            Self::upsert_conversation(&mut tx, conversation, now, Existing::Keep).await?;
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
        .bind(super::search_text(message))
        .fetch_one(&self.writer)
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
                })
            })
            .collect()
    }

    async fn messages(&self, conversation_id: &str) -> Result<Vec<StoredMessage>, StoreError> {
        let rows = sqlx::query("SELECT * FROM messages WHERE conversation_id = ? ORDER BY id")
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
                    created_at: at(r.try_get("created_at")?),
                })
            })
            .collect()
    }

    async fn save_turn(&self, turn: TurnRecord<'_>, now: DateTime<Utc>) -> Result<(), StoreError> {
        let e = turn.execution;
        let (tokens_in, tokens_out) = e.tokens();
        let mut tx = self.writer.begin().await?;
        let refs = Self::upsert_conversation(&mut tx, turn.conversation, now, Existing::Update).await?;
        let mut messages = Vec::with_capacity(turn.messages.len());
        for m in turn.messages {
            messages.push((role(m), json(m)?, super::search_text(m)));
        }
        insert_rows::<Sqlite, _>(
            &mut tx,
            "INSERT INTO messages (conversation_id, execucao_id, role, body, created_at, search_text) ",
            &messages,
            "",
            |b, (role, body, search)| {
                b.push_bind(turn.conversation.id.clone())
                    .push_bind(e.execucao_id.clone())
                    .push_bind(*role)
                    .push_bind(body.clone())
                    .push_bind(ms(now))
                    .push_bind(search.clone());
            },
        )
        .await?;
        sqlx::query(
            "INSERT INTO executions (execucao_id, conversation_id, agent_id, status, error, model_calls, events,
                 tokens_input, tokens_output, started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&e.execucao_id)
        .bind(&e.conversation_id)
        .bind(&e.agent_id)
        .bind(e.status.as_str())
        .bind(&e.error)
        .bind(json(&e.model_calls)?)
        .bind(json(turn.events)?)
        .bind(tokens_in as i64)
        .bind(tokens_out as i64)
        .bind(ms(e.started_at))
        .bind(ms(e.finished_at))
        .execute(&mut *tx)
        .await?;
        if let Some(u) = turn.usage {
            Self::insert_usage(&mut tx, u).await?;
        }
        if let Some(id) = turn.accepted_message {
            sqlx::query("UPDATE messages SET processed = 1 WHERE id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        Self::insert_flow_runs(&mut tx, turn.flow_runs, now).await?;
        // One statement for the cards of the whole turn.
        let indexed = super::insert_card_refs::<Sqlite>(&mut tx, &self.indexed, &refs).await?;
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
        let row = sqlx::query("SELECT * FROM executions WHERE execucao_id = ?")
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
        let rows =
            sqlx::query("SELECT * FROM executions WHERE conversation_id = ? ORDER BY started_at, rowid")
                .bind(conversation_id)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|r| Ok((execution_from(r)?, parse(r, "events")?)))
            .collect()
    }

    async fn save_flow_run(&self, run: &FlowRunRecord) -> Result<(), StoreError> {
        let mut tx = self.writer.begin().await?;
        Self::insert_flow_runs(&mut tx, std::slice::from_ref(run), run.created_at).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn flow_run(&self, execucao_id: &str) -> Result<Option<FlowRunRecord>, StoreError> {
        let Some(row) = sqlx::query("SELECT * FROM flow_runs WHERE execucao_id = ?")
            .bind(execucao_id)
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok(None);
        };
        let stages =
            sqlx::query("SELECT etapa, saida FROM flow_stages WHERE execucao_id = ? ORDER BY position")
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
            created_at: at(row.try_get("created_at")?),
        }))
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
        .bind(t.final_result.as_deref().map(super::seal::seal))
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
        rows.iter().map(task_from).collect()
    }

    async fn record_usage(&self, usage: &UsageRecord) -> Result<(), StoreError> {
        let mut tx = self.writer.begin().await?;
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
        let mut conn = self.writer.acquire().await?;
        Self::upsert_context(&mut conn, c).await
    }

    async fn context(&self, conversation_id: &str) -> Result<Option<ConversationContext>, StoreError> {
        let row = sqlx::query("SELECT * FROM conversation_context WHERE conversation_id = ?")
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
                turn_count: r.try_get("turn_count")?,
                updated_at: at(r.try_get("updated_at")?),
            })
        })
        .transpose()
    }

    async fn upsert_intent(&self, i: &IntentRecord, now: DateTime<Utc>) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO intent_actions (intent_key, description, action_type, required_params, optional_params,
                 prompt_template, max_tokens, is_active, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT(intent_key) DO UPDATE SET description = excluded.description, action_type = excluded.action_type,
                 required_params = excluded.required_params, optional_params = excluded.optional_params,
                 prompt_template = excluded.prompt_template, max_tokens = excluded.max_tokens, is_active = excluded.is_active",
        )
        .bind(&i.intent_key)
        .bind(&i.description)
        .bind(&i.action_type)
        .bind(plain(&i.required_params)?)
        .bind(plain(&i.optional_params)?)
        .bind(&i.prompt_template)
        .bind(i.max_tokens)
        .bind(i.is_active)
        .bind(ms(now))
        .execute(&self.writer)
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
                    max_tokens: r.try_get("max_tokens")?,
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
        // One statement: insert, or take over an expired record; a live one is left alone.
        let done = sqlx::query(
            "INSERT INTO idempotency_records (key, scope, request_hash, response, created_at, expires_at)
             VALUES (?, ?, ?, ?, ?, ?)
             ON CONFLICT(key) DO UPDATE SET scope = excluded.scope, request_hash = excluded.request_hash,
                 response = excluded.response, created_at = excluded.created_at, expires_at = excluded.expires_at
             WHERE idempotency_records.expires_at <= ?",
        )
        .bind(&r.key)
        .bind(&r.scope)
        .bind(&r.request_hash)
        .bind(json(&r.response)?)
        .bind(ms(r.created_at))
        .bind(ms(r.expires_at))
        .bind(ms(now))
        .execute(&self.writer)
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
        let row = sqlx::query("SELECT * FROM idempotency_records WHERE key = ? AND expires_at > ?")
            .bind(key)
            .bind(ms(now))
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| idempotency_from(&r)).transpose()
    }

    async fn settle_idempotency(&self, key: &str, response: Option<&Value>) -> Result<(), StoreError> {
        match response {
            Some(r) => {
                sqlx::query("UPDATE idempotency_records SET response = ? WHERE key = ?")
                    .bind(json(r)?)
                    .bind(key)
                    .execute(&self.writer)
                    .await?;
            }
            None => {
                sqlx::query("DELETE FROM idempotency_records WHERE key = ?")
                    .bind(key)
                    .execute(&self.writer)
                    .await?;
            }
        }
        Ok(())
    }

    async fn enqueue(&self, item: &NewOutboxItem, now: DateTime<Utc>) -> Result<i64, StoreError> {
        let mut conn = self.writer.acquire().await?;
        Self::insert_outbox(&mut conn, item, now).await
    }

    async fn claim(
        &self,
        limit: i64,
        now: DateTime<Utc>,
        lease: chrono::Duration,
    ) -> Result<Vec<OutboxItem>, StoreError> {
        // One UPDATE: SQLite has a single writer, so the select-and-mark cannot interleave. An item
        // waits while an earlier one of its conversation is unfinished: replies go out in order.
        let rows = sqlx::query(
            "UPDATE outbox SET status = 'in_flight', attempts = attempts + 1, claimed_until = ?
             WHERE id IN (SELECT o.id FROM outbox o
                          WHERE ((o.status = 'pending' AND o.next_attempt_at <= ?)
                                 OR (o.status = 'in_flight' AND o.claimed_until < ?))
                            AND NOT EXISTS (SELECT 1 FROM outbox e
                                            WHERE o.conversation_id IS NOT NULL
                                              AND e.conversation_id = o.conversation_id AND e.id < o.id
                                              AND e.status IN ('pending', 'in_flight'))
                          ORDER BY o.id LIMIT ?)
             RETURNING id, kind, destination, payload, conversation_id, status, attempts, max_attempts,
                 next_attempt_at, last_error",
        )
        .bind(ms(now + lease))
        .bind(ms(now))
        .bind(ms(now))
        .bind(limit)
        .fetch_all(&self.writer)
        .await?;
        let mut items = rows.iter().map(outbox_from).collect::<Result<Vec<_>, _>>()?;
        items.sort_by_key(|i| i.id);
        Ok(items)
    }

    async fn ack(&self, id: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET status = 'done', claimed_until = NULL WHERE id = ?")
            .bind(id)
            .execute(&self.writer)
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
                 next_attempt_at = ?, last_error = ?, claimed_until = NULL
             WHERE id = ? RETURNING status",
        )
        .bind(ms(next_attempt_at))
        .bind(error)
        .bind(id)
        .fetch_optional(&self.writer)
        .await?
        .ok_or_else(|| StoreError::Invalid(format!("outbox item {id} does not exist")))?;
        OutboxStatus::parse(&row.try_get::<String, _>("status")?)
    }

    async fn record_sent(&self, id: i64, external_id: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET external_id = ? WHERE id = ?")
            .bind(external_id)
            .bind(id)
            .execute(&self.writer)
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
        let ours = sqlx::query("SELECT 1 FROM outbox WHERE external_id = ?")
            .bind(external_id)
            .fetch_optional(&self.pool)
            .await?
            .is_some();
        if ours {
            sqlx::query(
                "INSERT INTO delivery_statuses (external_id, status, error_code, at) VALUES (?, ?, ?, ?)
             ON CONFLICT DO NOTHING",
            )
            .bind(external_id)
            .bind(status)
            .bind(error_code)
            .bind(ms(at))
            .execute(&self.writer)
            .await?;
        }
        Ok(ours)
    }

    async fn delivery_statuses(
        &self,
        external_id: &str,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let rows = sqlx::query(
            "SELECT status, error_code FROM delivery_statuses WHERE external_id = ? ORDER BY at, rowid",
        )
        .bind(external_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("status")?, r.try_get("error_code")?)))
            .collect()
    }

    async fn dead_letter(&self, id: i64, error: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET status = 'failed', last_error = ?, claimed_until = NULL WHERE id = ?")
            .bind(error)
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn outbox_count(&self, status: OutboxStatus) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM outbox WHERE status = ?")
            .bind(status.as_str())
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get("n")?)
    }

    async fn outbox_items(&self, status: OutboxStatus, limit: i64) -> Result<Vec<OutboxItem>, StoreError> {
        let rows = sqlx::query("SELECT * FROM outbox WHERE status = ? ORDER BY id LIMIT ?")
            .bind(status.as_str())
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(outbox_from).collect()
    }

    async fn requeue(&self, id: i64, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = ?, claimed_until = NULL
             WHERE id = ? AND status = 'failed'",
        )
        .bind(ms(now))
        .bind(id)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn outbox_item(&self, id: i64) -> Result<Option<OutboxItem>, StoreError> {
        let row = sqlx::query("SELECT * FROM outbox WHERE id = ?")
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
        let mut tx = self.writer.begin().await?;
        Self::upsert_conversation(&mut tx, conversation, now, Existing::Keep).await?;
        accepted(conversation, None, message, now)?
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO flow_runs (execucao_id, status, input, output, created_at, card_hash, conversation_id)
             VALUES (?, ?, ?, 'null', ?, ?, ?)",
        )
        .bind(execucao_id)
        .bind(RunStatus::EmAndamento.as_str())
        .bind(json(input)?)
        .bind(ms(now))
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
             ORDER BY created_at DESC, rowid DESC LIMIT ?",
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
                    created_at: at(r.try_get("created_at")?),
                    finished_at: r.try_get::<Option<i64>, _>("finished_at")?.map(at),
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
        let mut tx = self.writer.begin().await?;
        let done = sqlx::query(
            "INSERT INTO consumed_confirmations (pending_id, origin, consumed_at, consumer) VALUES (?, ?, ?, ?)
             ON CONFLICT(pending_id) DO NOTHING",
        )
        .bind(c.pending_id)
        .bind(c.origin)
        .bind(ms(now))
        .bind(c.consumer)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            let by: Option<String> =
                sqlx::query_scalar("SELECT consumer FROM consumed_confirmations WHERE pending_id = ?")
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
        // On the writer: a reader may not see a consumption this process just committed yet.
        let row: Option<(Option<String>,)> =
            sqlx::query_as("SELECT consumer FROM consumed_confirmations WHERE pending_id = ?")
                .bind(pending_id)
                .fetch_optional(&self.writer)
                .await?;
        Ok(row.map(|(by,)| by.unwrap_or_default()))
    }

    async fn begin_recharge(&self, a: &RechargeAttempt, now: DateTime<Utc>) -> Result<(), StoreError> {
        self.attempts.write(Write::Begin(Box::new(a.clone()), now)).await
    }

    async fn resolve_recharge(
        &self,
        idempotency_key: &str,
        status: AttemptStatus,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.attempts
            .write(Write::Resolve {
                key: idempotency_key.to_owned(),
                status,
                now,
            })
            .await
    }

    async fn unresolved_recharge(
        &self,
        scope: &str,
        fingerprint: &str,
    ) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT idempotency_key FROM recharge_attempts
             WHERE scope = ? AND fingerprint = ? AND status IN (?, ?)
             ORDER BY updated_at DESC LIMIT 1",
        )
        .bind(scope)
        .bind(fingerprint)
        .bind(AttemptStatus::UNKNOWN[0].as_str())
        .bind(AttemptStatus::UNKNOWN[1].as_str())
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| r.try_get("idempotency_key")).transpose()?)
    }

    async fn recharge_attempts(&self, limit: i64) -> Result<Vec<RechargeAttemptRecord>, StoreError> {
        let rows =
            sqlx::query("SELECT * FROM recharge_attempts ORDER BY updated_at DESC, rowid DESC LIMIT ?")
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
                    sends: r.try_get("sends")?,
                    created_at: at(r.try_get("created_at")?),
                    updated_at: at(r.try_get("updated_at")?),
                })
            })
            .collect()
    }

    async fn open_batch(&self, job: &BatchJob) -> Result<BatchJob, StoreError> {
        sqlx::query(
            "INSERT INTO batch_jobs (id, tenant_id, digest, total, dry_run, source, created_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
        )
        .bind(&job.id)
        .bind(&job.tenant_id)
        .bind(&job.digest)
        .bind(job.total)
        .bind(job.dry_run)
        .bind(job.source.as_deref().map(super::seal::seal))
        .bind(ms(job.created_at))
        .execute(&self.writer)
        .await?;
        // Read on the writer: a reader connection may not see the row just written yet.
        let row = sqlx::query("SELECT * FROM batch_jobs WHERE id = ?")
            .bind(&job.id)
            .fetch_one(&self.writer)
            .await?;
        batch_job(&row)
    }

    async fn batch(&self, id: &str) -> Result<Option<BatchJob>, StoreError> {
        let row = sqlx::query("SELECT * FROM batch_jobs WHERE id = ?")
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
        let mut tx = self.writer.begin().await?;
        Self::insert_flow_runs(&mut tx, runs, now).await?;
        let mut rows = Vec::with_capacity(lines.len());
        for l in lines {
            rows.push((l, json(&l.result)?));
        }
        insert_rows::<Sqlite, _>(
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
                    .push_bind(ms(now));
            },
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn batch_lines(&self, job_id: &str) -> Result<Vec<BatchLine>, StoreError> {
        let rows = sqlx::query("SELECT line, status, result FROM batch_lines WHERE job_id = ? ORDER BY line")
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
            "SELECT status, COUNT(*) AS n FROM batch_lines WHERE job_id = ? GROUP BY status ORDER BY status",
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
            "UPDATE batch_jobs SET finished_at = ?, source = NULL WHERE id = ? AND finished_at IS NULL",
        )
        .bind(ms(now))
        .bind(job_id)
        .execute(&self.writer)
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
            "SELECT * FROM batch_jobs WHERE (?1 IS NULL OR tenant_id = ?1)
             ORDER BY created_at DESC, id DESC LIMIT ?2",
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
             WHERE (?1 IS NULL OR c.tenant_id = ?1)
               AND (?2 IS NULL OR c.channel = ?2)
               AND (?3 IS NULL OR instr(lower(c.id), lower(?3)) > 0
                    OR instr(lower(c.user_id), lower(?3)) > 0
                    OR instr(lower(c.user_login), lower(?3)) > 0
                    OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id
                               AND instr(lower(m.search_text), lower(?3)) > 0))
             ORDER BY c.updated_at DESC, c.id LIMIT ?4",
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
                    last_message: parse_opt(r, "last_body")?,
                    last_intent: r.try_get("last_intent")?,
                    ended: r.try_get("ended")?,
                    handed_over: r.try_get("handed_over")?,
                    updated_at: at(r.try_get("updated_at")?),
                })
            })
            .collect()
    }

    async fn usage_since(&self, since: DateTime<Utc>) -> Result<Vec<UsageRecord>, StoreError> {
        let rows = sqlx::query("SELECT * FROM usage_metrics WHERE created_at >= ? ORDER BY created_at, id")
            .bind(ms(since))
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
                    created_at: at(r.try_get("created_at")?),
                })
            })
            .collect()
    }

    async fn flow_outcomes_since(&self, since: DateTime<Utc>) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT status, COUNT(*) AS n FROM flow_runs WHERE created_at >= ? GROUP BY status ORDER BY status",
        )
        .bind(ms(since))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("status")?, r.try_get("n")?)))
            .collect()
    }

    async fn record_audit(&self, r: &AuditRecord) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO support_audit (at, support_user, tenant_id, channel, cartao, cartao_hash, outcome, conversation_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
            .bind(ms(r.at))
            .bind(&r.support_user)
            .bind(&r.tenant_id)
            .bind(&r.channel)
            .bind(&r.cartao)
            .bind(&r.cartao_hash)
            .bind(&r.outcome)
            .bind(&r.conversation_id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn audit_records(&self, limit: i64) -> Result<Vec<AuditRecord>, StoreError> {
        let rows = sqlx::query("SELECT * FROM support_audit ORDER BY id DESC LIMIT ?")
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(AuditRecord {
                    at: at(row.try_get("at")?),
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
            .fetch_all(&self.writer)
            .await?;
        rows.into_iter()
            .map(|(name, value)| Ok((name, super::seal::open(&value)?)))
            .collect()
    }

    async fn put_store_secret(&self, name: &str, value: &str) -> Result<String, StoreError> {
        sqlx::query("INSERT INTO store_secrets (name, value) VALUES (?, ?) ON CONFLICT(name) DO NOTHING")
            .bind(name)
            .bind(super::seal::seal(value))
            .execute(&self.writer)
            .await?;
        let kept: String = sqlx::query_scalar("SELECT value FROM store_secrets WHERE name = ?")
            .bind(name)
            .fetch_one(&self.writer)
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
        for (table, column, _) in super::SEALED {
            // The table and column names are this module's constants, never input.
            let select = format!(
                "SELECT rowid AS rid, {column} AS v FROM {table} WHERE {column} IS NOT NULL AND {column} NOT LIKE ? LIMIT ?"
            );
            let update = format!("UPDATE {table} SET {column} = ? WHERE rowid = ?");
            loop {
                let mut tx = self.writer.begin().await?;
                let rows: Vec<(i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(select.as_str()))
                    .bind(&pattern)
                    .bind(super::RESEAL_BATCH)
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
                    .bind(super::RESEAL_BATCH)
                    .fetch_all(&mut *tx)
                    .await?;
            if rows.is_empty() {
                break;
            }
            for (id, body) in &rows {
                let message: ChatMessage = vt_actions::json::from_text(&ring.open(body)?)?;
                sqlx::query("UPDATE messages SET search_text = ? WHERE id = ?")
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
                sqlx::query_scalar("SELECT id FROM conversations WHERE user_id = ?")
                    .bind(id)
                    .fetch_all(&self.writer)
                    .await?
            }
            Subject::Card(digits) => {
                sqlx::query_scalar(
                    "SELECT ref_id FROM card_refs WHERE card_hash = ? AND kind = 'conversa'
                     UNION SELECT conversation_id FROM flow_runs WHERE card_hash = ? AND conversation_id IS NOT NULL",
                )
                    .bind(super::seal::card_index(digits))
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
                    .bind(super::seal::card_index(digits))
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
        flow_runs.extend(super::flow_runs_of::<Sqlite>(&mut conn, &conversations).await?);
        flow_runs.sort();
        flow_runs.dedup();
        Ok(super::Records {
            conversations,
            flow_runs,
        })
    }

    async fn forget(&self, records: &super::Records) -> Result<(), StoreError> {
        let mut tx = self.writer.begin().await?;
        super::forget::<Sqlite>(&mut tx, &self.indexed, records).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn lock_conversation(&self, conversation_id: &str) -> Result<TurnLock, StoreError> {
        match &self.files {
            Some(files) => files.acquire(&self.locks, conversation_id).await,
            None => Ok(TurnLock::local(self.locks.lock(conversation_id).await)),
        }
    }
}

/// The database file of a `sqlite:` URL; `None` in memory.
fn database_path(url: &str) -> Option<std::path::PathBuf> {
    if url.contains(":memory:") {
        return None;
    }
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    Some(std::path::PathBuf::from(path.split('?').next().unwrap_or(path)))
}

/// `<database file>.migrate.lock` for a file database; `None` in memory.
fn migration_lock_path(url: &str) -> Option<std::path::PathBuf> {
    database_path(url).map(|p| std::path::PathBuf::from(format!("{}.migrate.lock", p.display())))
}

/// An exclusive lock on `path` (created if missing), held until the file is dropped; the kernel drops
/// it if the process dies.
async fn lock_file(path: std::path::PathBuf) -> Result<std::fs::File, StoreError> {
    let failed = |source| StoreError::DataDir {
        path: "migration lock".into(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(failed)?;
    // Usually free: taken here, with no blocking thread started for it (a one-shot command's only one).
    match file.try_lock() {
        Ok(()) => return Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {}
        Err(std::fs::TryLockError::Error(e)) => return Err(failed(e)),
    }
    tokio::task::spawn_blocking(move || file.lock().map(|()| file))
        .await
        .map_err(|e| StoreError::Invalid(format!("migration lock task failed: {e}")))?
        .map_err(failed)
}
