//! The PostgreSQL store, for several instances sharing state. Outbox claims use `FOR UPDATE SKIP
//! LOCKED`; turn locks take a lease row (`locks`), so two instances never run turns of one
//! conversation at the same time and no connection is held while a turn runs.

mod conversations;
mod recharges;
mod keeping;

use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, Row, Transaction};

use vt_domain::journal::{AttemptStatus, Confirmation, Consumption, RechargeAttempt};

use super::locks::{Leases, acquire};
use super::rows::{self, Both, Columns};
use super::sql::{Stmt, pg_query};
use super::writes::Writes;
use super::{
    ConversationContext, ConversationListing, ConversationQuery, FlowRunRecord, LocalLocks,
    RechargeAttemptRecord, Store, StoreError, StoredMessage, TaskRun, TurnLock, TurnRecord,
    UnprocessedMessage, role,
};
use super::{Existing, NewFollowUp, RUNS_PER_QUERY, Sent};
use vt_engine::llm::ChatMessage;
use vt_engine::{Conversation, ExecutionRecord, TurnEvent};

pub struct PgStore {
    pool: PgPool,
    locks: LocalLocks,
    /// The blind-index rows this instance already wrote. Another instance's erasure does not empty
    /// it: a conversation erased there and written again here keeps its rows only if this instance
    /// writes them again, so an erasure on PostgreSQL is best run with the instances restarted after.
    indexed: super::Indexed,
}

/// `v` sealed ([`super::seal`]), kept in its JSONB column as a JSON string: every JSON column but the
/// intents' holds what people said or what was done for them.
fn value<T: Serialize + ?Sized>(v: &T) -> Result<Json<Value>, StoreError> {
    Ok(Json(Value::String(super::seal::seal(
        &vt_contract::json::to_text(v)?,
    ))))
}

/// A JSONB value as written: sealed (a string), or clear from before sealing.
fn opened<T: DeserializeOwned>(v: Value) -> Result<T, StoreError> {
    match v {
        Value::String(s) if super::seal::is_sealed(&s) => {
            Ok(vt_contract::json::from_text(&super::seal::open(&s)?)?)
        }
        v => Ok(vt_contract::json::from_value(v)?),
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
        let (row, refs) = super::sql::write::conversation(c, now, existing)?;
        pg_query(row).execute(&mut **tx).await?;
        Ok(refs)
    }

    async fn upsert_context(conn: &mut PgConnection, c: &ConversationContext) -> Result<(), StoreError> {
        pg_query(super::sql::write::context(c)?).execute(conn).await?;
        Ok(())
    }

    /// Inserts the runs, or completes the rows [`crate::FlowStore::begin_flow_run`] left, with their stages —
    /// [`RUNS_PER_QUERY`] runs to a query (a batch group's runs have hundreds of stages).
    async fn insert_flow_runs(
        tx: &mut Transaction<'static, Postgres>,
        runs: &[FlowRunRecord],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        for chunk in runs.chunks(RUNS_PER_QUERY) {
            let mut writes = Writes::<Postgres>::new();
            for s in super::sql::write::flow_runs(chunk, now)? {
                writes.push(s);
            }
            writes.execute(&mut **tx).await?;
        }
        Ok(())
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
    async fn read_fresh(&self, s: Stmt) -> Result<Vec<PgRow>, StoreError> {
        Ok(pg_query(s).fetch_all(&self.pool).await?)
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
    async fn execute_joined(&mut self, statements: Vec<Stmt>) -> Result<(), StoreError> {
        let mut writes = Writes::<Postgres>::new();
        for s in statements {
            writes.push(s);
        }
        writes.execute(&mut **self).await
    }
    async fn fetch_all(&mut self, s: Stmt) -> Result<Vec<PgRow>, StoreError> {
        Ok(pg_query(s).fetch_all(&mut **self).await?)
    }
    async fn commit(self) -> Result<(), StoreError> {
        Ok(Transaction::commit(self).await?)
    }
}
