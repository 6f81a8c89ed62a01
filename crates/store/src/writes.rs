//! Several writes sent to the database as one query — what a stored turn costs is mostly round trips,
//! not the writes themselves:
//!
//! - on SQLite, statements one after the other in one query: sqlx runs them in order on its worker
//!   thread and binds the `?`s in order across them, so a turn's writes are one hop to that thread
//!   and back instead of one per statement (each hop is two context switches, most of a turn's CPU);
//! - on PostgreSQL, data-modifying CTEs (`WITH w0 AS (INSERT …), w1 AS (…) SELECT 1`): one round trip,
//!   and one statement is its own transaction, so a turn needs no `BEGIN` and `COMMIT` of its own.
//!   The parts see one snapshot and no part's effects: they must not touch the same row, and foreign
//!   keys are checked when the statement ends.
//!
//! Each store's row-writing functions push one statement (no terminator) on a [`QueryBuilder`]; the
//! same function serves a write on its own and a part of [`Writes`].

use sqlx::{Database, Postgres, QueryBuilder, Sqlite};

use super::StoreError;
use super::sql::{BindArg, Stmt};

/// How a backend chains statements into one query.
pub(crate) trait Chain: Database {
    /// What goes before statement `n` (counting from 0).
    fn open(q: &mut QueryBuilder<Self>, n: usize);
    /// What goes after each statement.
    const CLOSE: &'static str;
    /// What ends the query.
    const END: &'static str;
}

impl Chain for Sqlite {
    fn open(q: &mut QueryBuilder<Self>, n: usize) {
        if n > 0 {
            q.push(";\n");
        }
    }
    const CLOSE: &'static str = "";
    const END: &'static str = "";
}

impl Chain for Postgres {
    fn open(q: &mut QueryBuilder<Self>, n: usize) {
        q.push(if n == 0 { "WITH " } else { ", " });
        q.push(format_args!("w{n} AS ("));
    }
    const CLOSE: &'static str = ")";
    const END: &'static str = " SELECT 1";
}

/// Writes collected to be sent as one query.
pub(crate) struct Writes<DB: Chain> {
    q: QueryBuilder<DB>,
    count: usize,
    /// What ends the query after [`Chain::END`]: the `COMMIT` of [`Writes::transaction`].
    end: &'static str,
}

impl<DB: Chain> Writes<DB> {
    pub(crate) fn new() -> Self {
        Self {
            q: QueryBuilder::new(""),
            count: 0,
            end: "",
        }
    }

    /// Adds the statement `write` pushes; returns what `write` returns.
    pub(crate) fn add<T>(&mut self, write: impl FnOnce(&mut QueryBuilder<DB>) -> T) -> T {
        DB::open(&mut self.q, self.count);
        let out = write(&mut self.q);
        self.q.push(DB::CLOSE);
        self.count += 1;
        out
    }

    /// Adds `s` ([`Stmt::push_on`]).
    pub(crate) fn push(&mut self, s: Stmt)
    where
        DB: BindArg,
    {
        self.add(|q| s.push_on(q));
    }

    /// Sends the writes, if there are any.
    pub(crate) async fn execute<'c, E>(mut self, conn: E) -> Result<(), StoreError>
    where
        E: sqlx::Executor<'c, Database = DB>,
        DB::Arguments: sqlx::IntoArguments<DB>,
        StoreError: From<sqlx::Error>,
    {
        if self.count == 0 {
            return Ok(());
        }
        self.q.push(DB::END);
        self.q.push(self.end);
        self.q.build().execute(conn).await?;
        Ok(())
    }
}

impl Writes<Sqlite> {
    /// Writes that are a transaction of their own in the same query, `BEGIN IMMEDIATE` to `COMMIT`: one
    /// hop to SQLite's thread instead of three (`BEGIN`, the writes, `COMMIT`). A statement that fails
    /// leaves the transaction open on the connection, so it runs only where the connection is closed
    /// rather than pooled unless the query ended well (`SqliteStore::write_transaction`). `IMMEDIATE`
    /// takes the write lock first, waiting for another process's writer in the busy handler.
    pub(crate) fn transaction() -> Self {
        Self {
            q: QueryBuilder::new("BEGIN IMMEDIATE;\n"),
            count: 0,
            end: ";\nCOMMIT",
        }
    }
}
