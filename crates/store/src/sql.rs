//! SQL written once for both backends. A statement is its text with `$1`, `$2`… placeholders (which
//! sqlx takes on SQLite as on PostgreSQL) and its values as [`Arg`]s; each backend implements [`Sql`]
//! to bind them its own way (SQLite keeps times as epoch milliseconds and JSON as text, PostgreSQL as
//! `timestamptz` and `jsonb`) and to run statements on its pools. The concerns whose SQL is the same on
//! both are implemented once, over [`Sql`], in this module's children; what truly differs (a turn's
//! writes, outbox claims, locks, erasure) stays in `sqlite/` and `postgres/`.

mod batches;
pub(crate) mod cases;
pub(crate) mod contacts;
mod desk;
mod flows;
mod identities;
mod reports;
pub(crate) mod outbox;
mod outcomes;
mod pix;
mod recurrences;
mod review;
pub(crate) mod write;

use std::borrow::Cow;
use std::fmt::Write as _;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::StoreError;
use super::rows::Columns;

/// A value bound to a statement, whichever the backend.
#[derive(Debug, Clone)]
pub enum Arg {
    Text(Option<String>),
    Int(Option<i64>),
    Float(Option<f64>),
    Bool(Option<bool>),
    Time(Option<DateTime<Utc>>),
    /// A sealed JSON text ([`super::seal`]): text on SQLite, a JSON string in `jsonb` on PostgreSQL.
    Sealed(Option<String>),
    /// JSON in clear (data, not anyone's): text on SQLite, `jsonb` on PostgreSQL.
    Json(Value),
}

impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_owned()))
    }
}
impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(Some(v))
    }
}
impl From<&String> for Arg {
    fn from(v: &String) -> Self {
        Arg::Text(Some(v.clone()))
    }
}
impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(str::to_owned))
    }
}
impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Self {
        Arg::Text(v)
    }
}
impl From<&Option<String>> for Arg {
    fn from(v: &Option<String>) -> Self {
        Arg::Text(v.clone())
    }
}
impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}
impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}
impl From<i32> for Arg {
    fn from(v: i32) -> Self {
        Arg::Int(Some(v.into()))
    }
}
impl From<Option<i32>> for Arg {
    fn from(v: Option<i32>) -> Self {
        Arg::Int(v.map(i64::from))
    }
}
impl From<f64> for Arg {
    fn from(v: f64) -> Self {
        Arg::Float(Some(v))
    }
}
impl From<bool> for Arg {
    fn from(v: bool) -> Self {
        Arg::Bool(Some(v))
    }
}
impl From<DateTime<Utc>> for Arg {
    fn from(v: DateTime<Utc>) -> Self {
        Arg::Time(Some(v))
    }
}
impl From<Option<DateTime<Utc>>> for Arg {
    fn from(v: Option<DateTime<Utc>>) -> Self {
        Arg::Time(v)
    }
}

/// One statement: its text and its values, in placeholder order.
#[derive(Debug, Clone)]
pub struct Stmt {
    pub sql: Cow<'static, str>,
    pub args: Vec<Arg>,
}

impl Stmt {
    /// A statement of fixed text (kept in the backend's statement cache).
    pub fn new(sql: &'static str) -> Self {
        Self {
            sql: Cow::Borrowed(sql),
            args: Vec::new(),
        }
    }

    /// With `v` as the next placeholder's value.
    pub fn bind(mut self, v: impl Into<Arg>) -> Self {
        self.args.push(v.into());
        self
    }

    /// With `v` as JSON, sealed: every JSON column but the intents' holds what people said or what was
    /// done for them.
    pub fn sealed<T: Serialize + ?Sized>(self, v: &T) -> Result<Self, StoreError> {
        let text = super::seal::seal(&vt_contract::json::to_text(v)?);
        Ok(self.bind(Arg::Sealed(Some(text))))
    }

    /// With `v` as JSON in clear.
    pub fn json<T: Serialize + ?Sized>(self, v: &T) -> Result<Self, StoreError> {
        Ok(self.bind(Arg::Json(vt_contract::json::to_value(v)?)))
    }

    /// Whether the backend may keep the statement prepared.
    pub fn persistent(&self) -> bool {
        matches!(self.sql, Cow::Borrowed(_))
    }
}

/// Where a backend differs in a statement that is otherwise the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// A backend running [`Stmt`]s: reads on its readers, writes on its writer, and transactions.
#[async_trait]
pub trait Sql: Send + Sync {
    type Row: Columns + Send + Sync;
    type Tx: Tx<Row = Self::Row>;

    fn dialect(&self) -> Dialect;

    async fn read_all(&self, s: Stmt) -> Result<Vec<Self::Row>, StoreError>;
    async fn read_one(&self, s: Stmt) -> Result<Option<Self::Row>, StoreError>;
    /// A read that sees every write acknowledged so far (SQLite's readers may still hold an older
    /// snapshot: it runs on the writing connection).
    async fn read_fresh(&self, s: Stmt) -> Result<Vec<Self::Row>, StoreError>;
    /// A write; the rows it changed.
    async fn write(&self, s: Stmt) -> Result<u64, StoreError>;
    /// A write that returns rows (`RETURNING …`).
    async fn write_returning(&self, s: Stmt) -> Result<Vec<Self::Row>, StoreError>;
    /// A write transaction.
    async fn begin(&self) -> Result<Self::Tx, StoreError>;

    /// `statements` in one transaction, in order.
    async fn write_all(&self, statements: Vec<Stmt>) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        for s in statements {
            tx.execute(s).await?;
        }
        tx.commit().await
    }
}

/// A write transaction of a [`Sql`] backend.
#[async_trait]
pub trait Tx: Send {
    type Row: Columns + Send + Sync;

    async fn execute(&mut self, s: Stmt) -> Result<u64, StoreError>;
    /// `statements` as one query ([`super::writes::Writes`]): one round trip for all. The caller keeps
    /// their values under PostgreSQL's 65,535 a query.
    async fn execute_joined(&mut self, statements: Vec<Stmt>) -> Result<(), StoreError>;
    async fn fetch_all(&mut self, s: Stmt) -> Result<Vec<Self::Row>, StoreError>;
    async fn fetch_optional(&mut self, s: Stmt) -> Result<Option<Self::Row>, StoreError> {
        Ok(self.fetch_all(s).await?.into_iter().next())
    }
    async fn commit(self) -> Result<(), StoreError>;
}

/// Binds a statement's values on SQLite.
pub(crate) fn sqlite_query(
    s: Stmt,
) -> sqlx::query::Query<'static, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
    let persistent = s.persistent();
    let mut q = sqlx::query(sqlx::AssertSqlSafe(s.sql)).persistent(persistent);
    for a in s.args {
        q = match a {
            Arg::Text(v) | Arg::Sealed(v) => q.bind(v),
            Arg::Int(v) => q.bind(v),
            Arg::Float(v) => q.bind(v),
            Arg::Bool(v) => q.bind(v),
            Arg::Time(v) => q.bind(v.map(|t| t.timestamp_millis())),
            Arg::Json(v) => q.bind(v.to_string()),
        };
    }
    q
}

/// Binds a statement's values on PostgreSQL.
pub(crate) fn pg_query(s: Stmt) -> sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments> {
    let persistent = s.persistent();
    let mut q = sqlx::query(sqlx::AssertSqlSafe(s.sql)).persistent(persistent);
    for a in s.args {
        q = match a {
            Arg::Text(v) => q.bind(v),
            Arg::Int(v) => q.bind(v),
            Arg::Float(v) => q.bind(v),
            Arg::Bool(v) => q.bind(v),
            Arg::Time(v) => q.bind(v),
            Arg::Sealed(v) => q.bind(v.map(|s| sqlx::types::Json(Value::String(s)))),
            Arg::Json(v) => q.bind(sqlx::types::Json(v)),
        };
    }
    q
}

impl Stmt {
    /// `head VALUES (…), (…) tail` for `rows` (each a row's values in column order), numbered from
    /// `$1`: a multi-row insert (callers keep a statement to [`super::ROWS_PER_INSERT`] rows).
    pub fn values(head: &str, rows: Vec<Vec<Arg>>, tail: &str) -> Self {
        let mut sql = String::with_capacity(head.len() + tail.len() + rows.len() * 48);
        sql.push_str(head);
        sql.push_str(" VALUES ");
        let mut args = Vec::with_capacity(rows.iter().map(Vec::len).sum());
        for (r, row) in rows.into_iter().enumerate() {
            sql.push_str(if r == 0 { "(" } else { ", (" });
            for i in 0..row.len() {
                if i > 0 {
                    sql.push_str(", ");
                }
                // Writing to a String cannot fail.
                let _ = write!(sql, "${}", args.len() + i + 1);
            }
            sql.push(')');
            args.extend(row);
        }
        sql.push_str(tail);
        Self {
            sql: Cow::Owned(sql),
            args,
        }
    }

    /// Pushes the statement on `q`, its placeholders bound where they stand: a part of a
    /// [`super::writes::Writes`] query, whose placeholders number on across its statements.
    pub fn push_on<DB: BindArg>(self, q: &mut sqlx::QueryBuilder<DB>) {
        // The text between placeholders, and each placeholder's value index.
        let mut parts = Vec::with_capacity(self.args.len() + 1);
        let mut rest: &str = &self.sql;
        let mut from = 0;
        while let Some(at) = rest[from..].find('$').map(|at| from + at) {
            let digits = rest[at + 1..].bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                from = at + 1;
                continue;
            }
            let n: usize = rest[at + 1..at + 1 + digits].parse().unwrap_or(0);
            parts.push((&rest[..at], n.checked_sub(1)));
            rest = &rest[at + 1 + digits..];
            from = 0;
        }
        // Each value is moved to its last placeholder (a sealed stage output is kilobytes); one that
        // stands more than once is copied to the others.
        let mut uses = vec![0usize; self.args.len()];
        for i in parts.iter().filter_map(|(_, i)| *i) {
            if let Some(n) = uses.get_mut(i) {
                *n += 1;
            }
        }
        let mut args: Vec<Option<Arg>> = self.args.into_iter().map(Some).collect();
        for (text, i) in parts {
            q.push(text);
            let Some(i) = i.filter(|i| *i < args.len()) else {
                continue;
            };
            uses[i] -= 1;
            let arg = if uses[i] == 0 {
                args[i].take()
            } else {
                args[i].clone()
            };
            DB::push_arg(q, arg.unwrap_or(Arg::Text(None)));
        }
        q.push(rest);
    }
}

/// How a backend binds an [`Arg`] on a query it builds.
pub trait BindArg: sqlx::Database {
    fn push_arg(q: &mut sqlx::QueryBuilder<Self>, a: Arg);
}

impl BindArg for sqlx::Sqlite {
    fn push_arg(q: &mut sqlx::QueryBuilder<Self>, a: Arg) {
        match a {
            Arg::Text(v) | Arg::Sealed(v) => q.push_bind(v),
            Arg::Int(v) => q.push_bind(v),
            Arg::Float(v) => q.push_bind(v),
            Arg::Bool(v) => q.push_bind(v),
            Arg::Time(v) => q.push_bind(v.map(|t| t.timestamp_millis())),
            Arg::Json(v) => q.push_bind(v.to_string()),
        };
    }
}

impl BindArg for sqlx::Postgres {
    fn push_arg(q: &mut sqlx::QueryBuilder<Self>, a: Arg) {
        match a {
            Arg::Text(v) => q.push_bind(v),
            Arg::Int(v) => q.push_bind(v),
            Arg::Float(v) => q.push_bind(v),
            Arg::Bool(v) => q.push_bind(v),
            Arg::Time(v) => q.push_bind(v),
            Arg::Sealed(v) => q.push_bind(v.map(|s| sqlx::types::Json(Value::String(s)))),
            Arg::Json(v) => q.push_bind(sqlx::types::Json(v)),
        };
    }
}
