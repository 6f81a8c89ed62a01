//! The PostgreSQL store, for several instances sharing state. Outbox claims use `FOR UPDATE SKIP
//! LOCKED`; turn locks take a lease row (`locks`), so two instances never run turns of one
//! conversation at the same time and no connection is held while a turn runs.

mod conversations;
mod flows;
mod recharges;
mod batches;
mod reports;
mod keeping;

use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, QueryBuilder, Row, Transaction};

use vt_actions::journal::{AttemptStatus, Confirmation, Consumption, RechargeAttempt};

use super::locks::{Leases, acquire};
use super::rows::{self, Both, Columns};
use super::sql::{Stmt, pg_query};
use super::writes::Writes;
use super::{
    AuditRecord, BatchJob, BatchLine, ConversationContext, ConversationListing, ConversationQuery,
    FlowRunRecord, FlowRunSummary, IdempotencyPut, IdempotencyRecord, IntentRecord, LocalLocks,
    NewOutboxItem, OutboxItem, OutboxStatus, RechargeAttemptRecord, Store, StoreError, StoredMessage,
    TaskRun, TurnLock, TurnRecord, UnprocessedMessage, UsageRecord, UsageSummaryRow, role,
};
use super::{
    Existing, LineStatus, NewFollowUp, ROWS_PER_INSERT, RUNS_PER_QUERY, RunStatus, Sent, insert_rows,
};
use crate::engine::{Conversation, ExecutionRecord, TurnEvent};
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
        let mut q = QueryBuilder::new("");
        let refs = Self::conversation_row(&mut q, c, now, existing)?;
        q.build().execute(&mut **tx).await?;
        Ok(refs)
    }

    /// The conversation's row, inserted or (`Existing::Update`) updated; returns the blind-index rows its
    /// cards need.
    fn conversation_row(
        q: &mut QueryBuilder<Postgres>,
        c: &Conversation,
        now: DateTime<Utc>,
        existing: Existing,
    ) -> Result<Vec<super::CardRef>, StoreError> {
        q.push(
            "INSERT INTO conversations (id, agent_id, user_id, user_login, channel, active_skill, state, memory,
                 skill_window, handoff, ended, created_at, updated_at, tenant_id) ",
        );
        let (state, memory, window) = (value(&c.state)?, value(&c.memory)?, value(&c.window)?);
        let handoff = c.handoff.as_ref().map(value).transpose()?;
        q.push_values([()], |mut b, ()| {
            b.push_bind(&c.id)
                .push_bind(&c.agent_id)
                .push_bind(&c.user_id)
                .push_bind(&c.user_login)
                .push_bind(&c.channel)
                .push_bind(&c.active_skill)
                .push_bind(&state)
                .push_bind(&memory)
                .push_bind(&window)
                .push_bind(&handoff)
                .push_bind(c.ended)
                .push_bind(now)
                .push_bind(now)
                .push_bind(&c.tenant_id);
        });
        q.push(match existing {
            Existing::Update => {
                " ON CONFLICT (id) DO UPDATE SET active_skill = excluded.active_skill, state = excluded.state,
                     memory = excluded.memory, skill_window = excluded.skill_window, handoff = excluded.handoff,
                     ended = excluded.ended, updated_at = excluded.updated_at"
            }
            Existing::Keep => " ON CONFLICT (id) DO NOTHING",
        });
        // A new conversation (accepting its first message, a flow's start) holds no card yet.
        Ok(match existing {
            Existing::Update => super::conversation_card_refs(c),
            Existing::Keep => Vec::new(),
        })
    }

    async fn upsert_context(conn: &mut PgConnection, c: &ConversationContext) -> Result<(), StoreError> {
        let mut q = QueryBuilder::new("");
        Self::context_row(&mut q, c)?;
        q.build().execute(conn).await?;
        Ok(())
    }

    fn context_row(q: &mut QueryBuilder<Postgres>, c: &ConversationContext) -> Result<(), StoreError> {
        q.push("INSERT INTO conversation_context (conversation_id, user_id, summary, key_facts, last_intent, turn_count, updated_at) ");
        let (summary, facts) = (c.summary.as_deref().map(super::seal::seal), value(&c.key_facts)?);
        q.push_values([()], |mut b, ()| {
            b.push_bind(&c.conversation_id)
                .push_bind(&c.user_id)
                .push_bind(&summary)
                .push_bind(&facts)
                .push_bind(&c.last_intent)
                .push_bind(c.turn_count as i32)
                .push_bind(c.updated_at);
        });
        q.push(
            " ON CONFLICT (conversation_id) DO UPDATE SET summary = excluded.summary, key_facts = excluded.key_facts,
                 last_intent = excluded.last_intent, turn_count = excluded.turn_count, updated_at = excluded.updated_at",
        );
        Ok(())
    }

    async fn insert_outbox(
        conn: &mut PgConnection,
        item: &NewOutboxItem,
        now: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        let mut q = QueryBuilder::new("");
        Self::outbox_rows(&mut q, std::slice::from_ref(item), now)?;
        let row = q.build().fetch_one(conn).await?;
        Ok(row.try_get("id")?)
    }

    /// `items` in one multi-row insert, returning their ids.
    fn outbox_rows(
        q: &mut QueryBuilder<Postgres>,
        items: &[NewOutboxItem],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let payloads = items
            .iter()
            .map(|i| value(&i.payload))
            .collect::<Result<Vec<_>, _>>()?;
        q.push("INSERT INTO outbox (kind, destination, payload, max_attempts, next_attempt_at, created_at, conversation_id, status) ");
        q.push_values(items.iter().zip(payloads), |mut b, (item, payload)| {
            b.push_bind(&item.kind)
                .push_bind(&item.destination)
                .push_bind(payload)
                .push_bind(item.max_attempts)
                .push_bind(item.next_attempt_at)
                .push_bind(now)
                .push_bind(&item.conversation_id)
                .push_bind(item.status.as_str());
        });
        q.push(" RETURNING id");
        Ok(())
    }

    /// Inserts the runs, or completes the rows [`crate::store::FlowStore::begin_flow_run`] left, with their stages —
    /// [`RUNS_PER_QUERY`] runs to a query (a batch group's runs have hundreds of stages).
    async fn insert_flow_runs(
        tx: &mut Transaction<'static, Postgres>,
        runs: &[FlowRunRecord],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        for chunk in runs.chunks(RUNS_PER_QUERY) {
            let mut writes = Writes::<Postgres>::new();
            Self::flow_run_rows(&mut writes, chunk, now)?;
            writes.execute(&mut **tx).await?;
        }
        Ok(())
    }

    /// The runs and their stages as parts of `writes`, [`ROWS_PER_INSERT`] rows to a statement.
    fn flow_run_rows(
        writes: &mut Writes<Postgres>,
        runs: &[FlowRunRecord],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        if runs.is_empty() {
            return Ok(());
        }
        let mut rows = Vec::with_capacity(runs.len());
        let mut stages = Vec::new();
        for run in runs {
            rows.push((run, value(&run.input)?, value(&run.output)?));
            for (i, (etapa, saida)) in run.stages.iter().enumerate() {
                stages.push((&run.execucao_id, i as i32, etapa, value(saida)?));
            }
        }
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            writes.add(|q| {
                q.push(
                    "INSERT INTO flow_runs (execucao_id, status, input, output, created_at, finished_at,
                     parent_execucao_id, card_hash) ",
                );
                q.push_values(chunk, |mut b, (run, input, output)| {
                    b.push_bind(&run.execucao_id)
                        .push_bind(run.status.as_str())
                        .push_bind(input)
                        .push_bind(output)
                        .push_bind(run.created_at)
                        .push_bind(now)
                        .push_bind(&run.parent_execucao_id)
                        .push_bind(super::flow_card_hash(&run.input));
                });
                q.push(
                    " ON CONFLICT (execucao_id) DO UPDATE SET status = excluded.status, output = excluded.output,
                         finished_at = excluded.finished_at",
                );
            });
        }
        for chunk in stages.chunks(ROWS_PER_INSERT) {
            writes.add(|q| {
                q.push("INSERT INTO flow_stages (execucao_id, position, etapa, saida) ");
                q.push_values(chunk, |mut b, (id, position, etapa, saida)| {
                    b.push_bind(id)
                        .push_bind(position)
                        .push_bind(etapa)
                        .push_bind(saida);
                });
            });
        }
        Ok(())
    }

    async fn insert_usage(
        tx: &mut Transaction<'static, Postgres>,
        u: &UsageRecord,
    ) -> Result<(), StoreError> {
        let mut q = QueryBuilder::new("");
        Self::usage_row(&mut q, u);
        q.build().execute(&mut **tx).await?;
        Ok(())
    }

    fn usage_row(q: &mut QueryBuilder<Postgres>, u: &UsageRecord) {
        q.push(
            "INSERT INTO usage_metrics (conversation_id, intent_key, action_type, tokens_input, tokens_output,
                 execution_time_ms, was_keyword_matched, created_at) ",
        );
        q.push_values([()], |mut b, ()| {
            b.push_bind(&u.conversation_id)
                .push_bind(&u.intent_key)
                .push_bind(&u.action_type)
                .push_bind(u.tokens_input)
                .push_bind(u.tokens_output)
                .push_bind(u.execution_time_ms)
                .push_bind(u.was_keyword_matched)
                .push_bind(u.created_at);
        });
    }
}

impl Columns for PgRow {
    fn value<T: Both>(&self, col: &str) -> Result<T, StoreError> {
        Ok(self.try_get(col)?)
    }
    fn time(&self, col: &str) -> Result<DateTime<Utc>, StoreError> {
        Ok(self.try_get(col)?)
    }
    fn opt_time(&self, col: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        Ok(self.try_get(col)?)
    }
    fn json<T: DeserializeOwned>(&self, col: &str) -> Result<T, StoreError> {
        parse(self, col)
    }
    fn opt_json<T: DeserializeOwned>(&self, col: &str) -> Result<Option<T>, StoreError> {
        parse_opt(self, col)
    }
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
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

#[async_trait]
impl super::sql::Sql for PgStore {
    type Row = PgRow;
    type Tx = Transaction<'static, Postgres>;

    fn dialect(&self) -> super::sql::Dialect {
        super::sql::Dialect::Postgres
    }
    async fn read_all(&self, s: Stmt) -> Result<Vec<PgRow>, StoreError> {
        Ok(pg_query(s).fetch_all(&self.pool).await?)
    }
    async fn read_one(&self, s: Stmt) -> Result<Option<PgRow>, StoreError> {
        Ok(pg_query(s).fetch_optional(&self.pool).await?)
    }
    async fn write(&self, s: Stmt) -> Result<u64, StoreError> {
        Ok(pg_query(s).execute(&self.pool).await?.rows_affected())
    }
    async fn write_returning(&self, s: Stmt) -> Result<Vec<PgRow>, StoreError> {
        Ok(pg_query(s).fetch_all(&self.pool).await?)
    }
    async fn begin(&self) -> Result<Self::Tx, StoreError> {
        Ok(self.pool.begin().await?)
    }
}

#[async_trait]
impl super::sql::Tx for Transaction<'static, Postgres> {
    type Row = PgRow;

    async fn execute(&mut self, s: Stmt) -> Result<u64, StoreError> {
        Ok(pg_query(s).execute(&mut **self).await?.rows_affected())
    }
    async fn fetch_all(&mut self, s: Stmt) -> Result<Vec<PgRow>, StoreError> {
        Ok(pg_query(s).fetch_all(&mut **self).await?)
    }
    async fn commit(self) -> Result<(), StoreError> {
        Ok(Transaction::commit(self).await?)
    }
}
