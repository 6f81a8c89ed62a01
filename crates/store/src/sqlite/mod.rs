//! The SQLite store: the default, a file under the data directory. Times are epoch milliseconds and
//! JSON is text, so the schema needs nothing SQLite lacks.

mod attempts;
mod checkpointer;
mod group;
mod conversations;
mod recharges;
mod keeping;

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow};
use sqlx::{Row, Sqlite, SqliteConnection, Transaction};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use vt_domain::journal::{AttemptStatus, Confirmation, Consumption, RechargeAttempt};

use super::locks::FileLocks;
use super::rows::{self, Both, Columns};
use super::sql::{Stmt, sqlite_query};
use super::writes::Writes;
use super::{
    ConversationContext, ConversationListing, ConversationQuery, LocalLocks, RechargeAttemptRecord, Store,
    StoreError, StoredMessage, TaskRun, TurnLock, TurnRecord, UnprocessedMessage, role,
};
use super::{Existing, NewFollowUp, Sent, Usage};
use attempts::{Attempts, Write};
use vt_engine::llm::ChatMessage;
use vt_engine::{Conversation, ExecutionRecord, TurnEvent};

pub struct SqliteStore {
    /// Readers.
    pool: SqlitePool,
    /// A service's connections for its turns' reads, outside the pool: a pooled connection is pinged
    /// on its way back after every query, one more hop to its thread (and a task to make it), and every
    /// message reads its conversation. Empty in memory and for one-shot commands.
    turn_readers: Vec<tokio::sync::Mutex<SqliteConnection>>,
    /// The one writing connection: writers of this process queue for it in order instead of meeting
    /// in SQLite's busy handler, whose growing sleeps gave a few turns seconds of latency under load.
    /// (Other processes still meet in the busy handler, with `busy_timeout`.)
    writer: SqlitePool,
    locks: LocalLocks,
    /// Cross-process turn locks; `None` in memory (one process by definition).
    files: Option<FileLocks>,
    /// Recharge attempts, committed in groups on `writer`.
    attempts: Attempts,
    /// A service's accepted messages and turns, committed in groups on `writer`; `None` for a one-shot
    /// command (nothing to group with).
    group: Option<group::Group>,
    /// The blind-index rows already written.
    indexed: super::Indexed,
    /// Transactions committed through this store's connections.
    commits: Arc<AtomicU64>,
    /// A service's WAL checkpoints ([`checkpointer`]), stopped when the store goes.
    _checkpoints: Option<tokio_util::sync::DropGuard>,
}

/// A service's connections for its turns' reads ([`SqliteStore::turn_readers`]): two, so that one
/// turn's read seldom waits for another's on a 2-core machine.
const TURN_READERS: usize = 2;

/// A conversation's row.
const CONVERSATION: &str = "SELECT * FROM conversations WHERE id = ?";
/// A conversation's compressed context.
const CONTEXT: &str = "SELECT * FROM conversation_context WHERE conversation_id = ?";
/// The case open for a conversation, if any.
const OPEN_CASE_OF: &str =
    "SELECT * FROM cases WHERE conversation_id = ? AND state IN ('aguardando', 'em_atendimento')";

fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

fn at(v: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(v).unwrap_or_default()
}

/// `v` as JSON, sealed ([`super::seal`]): every JSON column but the intents' holds what people said
/// or what was done for them.
fn json<T: Serialize + ?Sized>(v: &T) -> Result<String, StoreError> {
    Ok(super::seal::seal(&vt_contract::json::to_text(v)?))
}

/// `v` as JSON, in clear: the router's intents (data, not anyone's).
fn plain<T: Serialize + ?Sized>(v: &T) -> Result<String, StoreError> {
    Ok(vt_contract::json::to_text(v)?)
}

fn parse<T: DeserializeOwned>(row: &SqliteRow, col: &str) -> Result<T, StoreError> {
    let text: String = row.try_get(col)?;
    Ok(vt_contract::json::from_text(&super::seal::open(&text)?)?)
}

/// The insert that puts attempt `a` on record as `enviando`.
fn insert_attempt(
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

/// The insert of an attempt's follow-up, its request sealed; a key followed up already keeps its own.
fn insert_followup<'q>(
    key: &'q str,
    f: &NewFollowUp,
    now: DateTime<Utc>,
) -> Result<sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments>, StoreError> {
    Ok(sqlx::query(
        "INSERT INTO recharge_followups (idempotency_key, request, checks, next_check_at, deadline_at, created_at)
         VALUES (?, ?, 0, ?, ?, ?) ON CONFLICT(idempotency_key) DO NOTHING",
    )
    .bind(key)
    .bind(json(&f.request)?)
    .bind(ms(f.next_check_at))
    .bind(ms(f.deadline_at))
    .bind(ms(now)))
}

/// Settles a follow-up still open as `outcome`, dropping its request.
fn settle_followup<'q>(
    key: &'q str,
    outcome: &'q str,
    now: DateTime<Utc>,
) -> sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments> {
    sqlx::query(
        "UPDATE recharge_followups SET request = NULL, outcome = ?, settled_at = ?, leased_until = NULL
         WHERE idempotency_key = ? AND settled_at IS NULL",
    )
    .bind(outcome)
    .bind(ms(now))
    .bind(key)
}

/// The pools' shared options. No ping before handing out a connection (sqlx's default): the
/// "connection" is a thread of this process, so the ping checks nothing a statement would not, and it
/// cost a hop to that thread and back before every statement — half the hops of a turn.
///
/// Every connection counts its commits in `commits` ([`SqliteStore::commits`]): with `synchronous =
/// FULL` in WAL mode each is one sync of the WAL, the figure `cargo bench --bench serve` prints beside
/// a turn's CPU.
fn pool_options(commits: &Arc<AtomicU64>) -> SqlitePoolOptions {
    let commits = commits.clone();
    SqlitePoolOptions::new()
        .test_before_acquire(false)
        .after_connect(move |conn, _| {
            let commits = commits.clone();
            Box::pin(async move {
                conn.lock_handle().await?.set_commit_hook(move || {
                    commits.fetch_add(1, Ordering::Relaxed);
                    true
                });
                Ok(())
            })
        })
}

fn parse_opt<T: DeserializeOwned>(row: &SqliteRow, col: &str) -> Result<Option<T>, StoreError> {
    let text: Option<String> = row.try_get(col)?;
    text.map(|t| Ok(vt_contract::json::from_text(&super::seal::open(&t)?)?))
        .transpose()
}

impl SqliteStore {
    /// Write transactions committed through this store so far — each one a sync of the WAL
    /// (`synchronous = FULL`). What `cargo bench --bench serve` reports per turn.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

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
        // A service's commits never checkpoint ([`checkpointer`] does, beside them).
        let options = match usage {
            Usage::OneShot => options.pragma("wal_autocheckpoint", "256"),
            Usage::Service if !memory => options.pragma("wal_autocheckpoint", "0"),
            Usage::Service => options,
        };
        // sqlx takes no lock around SQLite migrations (nor around switching a new file to WAL): processes
        // starting together on a new file would each try to create the tables. A file lock beside the
        // database serialises setting it up.
        let _setting_up = match migration_lock_path(url) {
            Some(path) => Some(lock_file(path).await?),
            None => None,
        };
        let commits = Arc::new(AtomicU64::new(0));
        let options_for_readers = options.clone();
        // An in-memory database lives in its one connection: keep exactly one, forever, for reading and
        // writing alike.
        let (pool, writer) = if memory {
            let pool = pool_options(&commits)
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(options)
                .await?;
            (pool.clone(), pool)
        } else {
            let writer = pool_options(&commits)
                .max_connections(1)
                .connect_with(options.clone())
                .await?;
            let pool = match usage {
                // One command, no concurrency to speak of: the writer reads too. A second connection
                // was another thread, file set-up and schema read in every one-shot command.
                Usage::OneShot => writer.clone(),
                Usage::Service => {
                    pool_options(&commits)
                        .max_connections(4)
                        .connect_with(options.clone())
                        .await?
                }
            };
            (pool, writer)
        };
        sqlx::migrate!("./migrations/sqlite").run(&writer).await?;
        let files = database_path(url).map(|p| FileLocks::beside(&p)).transpose()?;
        let mut turn_readers = Vec::new();
        if !memory && usage == Usage::Service {
            for _ in 0..TURN_READERS {
                turn_readers.push(tokio::sync::Mutex::new(
                    sqlx::ConnectOptions::connect(&options_for_readers).await?,
                ));
            }
        }
        let checkpoints = (!memory && usage == Usage::Service).then(|| checkpointer::start(pool.clone()));
        Ok(Self {
            _checkpoints: checkpoints,
            attempts: Attempts::start(writer.clone()),
            group: (usage == Usage::Service).then(|| group::Group::start(writer.clone())),
            commits,
            pool,
            turn_readers,
            writer,
            locks: LocalLocks::default(),
            files,
            indexed: super::Indexed::default(),
        })
    }

    /// A free connection of [`Self::turn_readers`], else the first one once free; `None` where there
    /// are none.
    async fn turn_reader(&self) -> Option<tokio::sync::MutexGuard<'_, SqliteConnection>> {
        if let Some(free) = self.turn_readers.iter().find_map(|c| c.try_lock().ok()) {
            return Some(free);
        }
        Some(self.turn_readers.first()?.lock().await)
    }

    /// Runs `writes` ([`Writes::transaction`]: `BEGIN IMMEDIATE` … `COMMIT` in one query) on the writing
    /// connection of a database file. Unless the query ends well the connection is closed instead of
    /// going back to the pool: a failed statement, or this future dropped half-way, can leave its
    /// transaction open there, and closing the connection rolls it back (the pool opens another for
    /// the next writer). Never in memory, where the connection is the database.
    async fn write_transaction(&self, writes: Writes<Sqlite>) -> Result<(), StoreError> {
        /// The connection, and whether the query ended well (else it is closed on drop).
        struct Held(sqlx::pool::PoolConnection<Sqlite>, bool);
        impl Drop for Held {
            fn drop(&mut self) {
                if !self.1 {
                    self.0.close_on_drop();
                }
            }
        }
        let mut conn = Held(self.writer.acquire().await?, false);
        writes.execute(&mut *conn.0).await?;
        conn.1 = true;
        Ok(())
    }

    async fn upsert_conversation(
        tx: &mut Transaction<'static, Sqlite>,
        c: &Conversation,
        now: DateTime<Utc>,
        existing: Existing,
    ) -> Result<Vec<super::CardRef>, StoreError> {
        let (row, refs) = super::sql::write::conversation(c, now, existing)?;
        sqlite_query(row).execute(&mut **tx).await?;
        Ok(refs)
    }

    async fn upsert_context(conn: &mut SqliteConnection, c: &ConversationContext) -> Result<(), StoreError> {
        sqlite_query(super::sql::write::context(c)?).execute(conn).await?;
        Ok(())
    }
}

impl Columns for SqliteRow {
    fn value<T: Both>(&self, col: &str) -> Result<T, StoreError> {
        Ok(self.try_get(col)?)
    }
    fn time(&self, col: &str) -> Result<DateTime<Utc>, StoreError> {
        Ok(at(self.try_get(col)?))
    }
    fn opt_time(&self, col: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        Ok(self.try_get::<Option<i64>, _>(col)?.map(at))
    }
    fn json<T: DeserializeOwned>(&self, col: &str) -> Result<T, StoreError> {
        parse(self, col)
    }
    fn opt_json<T: DeserializeOwned>(&self, col: &str) -> Result<Option<T>, StoreError> {
        parse_opt(self, col)
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    fn commits(&self) -> Option<u64> {
        Some(SqliteStore::commits(self))
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

#[async_trait]
impl super::sql::Sql for SqliteStore {
    type Row = SqliteRow;
    type Tx = Transaction<'static, Sqlite>;

    fn dialect(&self) -> super::sql::Dialect {
        super::sql::Dialect::Sqlite
    }
    async fn read_all(&self, s: Stmt) -> Result<Vec<SqliteRow>, StoreError> {
        Ok(sqlite_query(s).fetch_all(&self.pool).await?)
    }
    async fn read_one(&self, s: Stmt) -> Result<Option<SqliteRow>, StoreError> {
        Ok(sqlite_query(s).fetch_optional(&self.pool).await?)
    }
    async fn read_fresh(&self, s: Stmt) -> Result<Vec<SqliteRow>, StoreError> {
        Ok(sqlite_query(s).fetch_all(&self.writer).await?)
    }
    async fn write(&self, s: Stmt) -> Result<u64, StoreError> {
        Ok(sqlite_query(s).execute(&self.writer).await?.rows_affected())
    }
    async fn write_returning(&self, s: Stmt) -> Result<Vec<SqliteRow>, StoreError> {
        Ok(sqlite_query(s).fetch_all(&self.writer).await?)
    }
    async fn begin(&self) -> Result<Self::Tx, StoreError> {
        Ok(self.writer.begin().await?)
    }
}

#[async_trait]
impl super::sql::Tx for Transaction<'static, Sqlite> {
    type Row = SqliteRow;

    async fn execute(&mut self, s: Stmt) -> Result<u64, StoreError> {
        Ok(sqlite_query(s).execute(&mut **self).await?.rows_affected())
    }
    async fn execute_joined(&mut self, statements: Vec<Stmt>) -> Result<(), StoreError> {
        let mut writes = Writes::<Sqlite>::new();
        for s in statements {
            writes.push(s);
        }
        writes.execute(&mut **self).await
    }
    async fn fetch_all(&mut self, s: Stmt) -> Result<Vec<SqliteRow>, StoreError> {
        Ok(sqlite_query(s).fetch_all(&mut **self).await?)
    }
    async fn commit(self) -> Result<(), StoreError> {
        Ok(Transaction::commit(self).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confirmation(id: &'static str) -> Stmt {
        Stmt::new(
            "INSERT INTO consumed_confirmations (pending_id, origin, consumed_at) VALUES ($1, 'teste', 0)",
        )
        .bind(id)
    }

    async fn consumed(store: &SqliteStore) -> Vec<String> {
        sqlx::query_scalar("SELECT pending_id FROM consumed_confirmations ORDER BY pending_id")
            .fetch_all(&store.pool)
            .await
            .expect("read")
    }

    /// A one-query transaction whose last statement fails writes none of its statements, and leaves no
    /// transaction open on the writing connection: the next one begins and commits on its own (with the
    /// first one's transaction left open, its `BEGIN` would fail).
    #[tokio::test]
    async fn a_one_query_transaction_that_fails_writes_nothing_and_leaves_none_open() {
        let dir = tempfile::tempdir().expect("tmp");
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let store = SqliteStore::connect(&url).await.expect("store");

        let mut failing = Writes::<Sqlite>::transaction();
        failing.push(confirmation("a"));
        failing.push(confirmation("a"));
        assert!(
            store.write_transaction(failing).await.is_err(),
            "the second insert breaks the key"
        );
        assert!(consumed(&store).await.is_empty(), "the first insert is not kept");

        let commits = store.commits();
        let mut good = Writes::<Sqlite>::transaction();
        good.push(confirmation("b"));
        good.push(confirmation("c"));
        store.write_transaction(good).await.expect("written");
        assert_eq!(consumed(&store).await, ["b", "c"]);
        assert_eq!(store.commits() - commits, 1, "both statements in one commit");
    }

    /// A service's commits never checkpoint the WAL; the checkpointer does, beside them: what was
    /// committed reaches the database file without any commit copying it there.
    #[tokio::test]
    async fn a_services_wal_is_checkpointed_beside_its_commits() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = dir.path().join("t.db");
        let store = SqliteStore::connect(&format!("sqlite://{}", file.display()))
            .await
            .expect("store");
        let size = || std::fs::metadata(&file).expect("database file").len();
        tokio::time::sleep(checkpointer::EVERY * 3).await;
        let before = size();
        for batch in 0..20 {
            let mut writes = Writes::<Sqlite>::transaction();
            for i in 0..100 {
                writes.push(Stmt::new(
                    "INSERT INTO consumed_confirmations (pending_id, origin, consumed_at) VALUES ($1, 'um pedido bem mais longo que o normal para ocupar páginas', 0)",
                ).bind(format!("{batch}-{i}")));
            }
            store.write_transaction(writes).await.expect("written");
        }
        // No commit checkpoints (the task may have run during the writes: the file alone cannot say).
        let autocheckpoint: i64 = sqlx::query_scalar("PRAGMA wal_autocheckpoint")
            .fetch_one(&store.writer)
            .await
            .expect("pragma");
        assert_eq!(autocheckpoint, 0);
        tokio::time::sleep(checkpointer::EVERY * 3).await;
        assert!(size() > before, "the checkpointer copied the pages");
    }
}
