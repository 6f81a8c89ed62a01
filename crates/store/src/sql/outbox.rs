//! [`OutboxStore`], once for both backends; only the claim differs (PostgreSQL skips rows another
//! instance has locked, SQLite has one writer).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Dialect, Sql, Stmt, Tx};
use crate::rows::{self, Columns};
use crate::{NewOutboxItem, OutboxItem, OutboxStatus, OutboxStore, StoreError};
use vt_engine::llm::ChatMessage;

/// One UPDATE: on SQLite a single writer means the select-and-mark cannot interleave; on PostgreSQL
/// the rows another instance claims are skipped (`$lock`). An item waits while an earlier one of its
/// conversation is unfinished: replies go out in order.
macro_rules! claim {
    ($lock:literal) => {
        concat!(
            "UPDATE outbox SET status = 'in_flight', attempts = attempts + 1, claimed_until = $1
     WHERE id IN (SELECT o.id FROM outbox o
                  WHERE ((o.status = 'pending' AND o.next_attempt_at <= $2)
                         OR (o.status = 'in_flight' AND o.claimed_until < $2))
                    AND NOT EXISTS (SELECT 1 FROM outbox e
                                    WHERE o.conversation_id IS NOT NULL
                                      AND e.conversation_id = o.conversation_id AND e.id < o.id
                                      AND e.status IN ('pending', 'in_flight', 'held'))
                  ORDER BY o.id LIMIT $3",
            $lock,
            ")
     RETURNING id, kind, destination, payload, conversation_id, status, attempts, max_attempts,
         next_attempt_at, last_error, message_id"
        )
    };
}
const CLAIM_SQLITE: &str = claim!("");
const CLAIM_POSTGRES: &str = claim!(" FOR UPDATE SKIP LOCKED");

/// A message's statuses in the order they came (SQLite keeps the row order; PostgreSQL has none).
const STATUSES_SQLITE: &str =
    "SELECT status, error_code FROM delivery_statuses WHERE external_id = $1 ORDER BY at, rowid";
const STATUSES_POSTGRES: &str =
    "SELECT status, error_code FROM delivery_statuses WHERE external_id = $1 ORDER BY at, status";

/// The insert of one outbox item, returning its id (a turn's items go in one multi-row insert of its
/// backend's writes).
pub(crate) fn insert(item: &NewOutboxItem, now: DateTime<Utc>) -> Result<Stmt, StoreError> {
    insert_carrying(item, None, now)
}

/// [`insert`] of an item that carries the stored message `message_id`.
fn insert_carrying(
    item: &NewOutboxItem,
    message_id: Option<i64>,
    now: DateTime<Utc>,
) -> Result<Stmt, StoreError> {
    Stmt::new(
        "INSERT INTO outbox (kind, destination, payload, max_attempts, next_attempt_at, created_at, conversation_id, status, message_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
    )
    .bind(&item.kind)
    .bind(&item.destination)
    .sealed(&item.payload)
    .map(|s| {
        s.bind(item.max_attempts)
            .bind(item.next_attempt_at)
            .bind(now)
            .bind(&item.conversation_id)
            .bind(item.status.as_str())
            .bind(message_id)
    })
}

/// `message`, said in `conversation_id` outside a turn, and the `outbox` items that carry it, inside
/// `tx`: each item names the message's id, so every way it reaches an integrator gives it that id.
pub(crate) async fn say_late<T: Tx>(
    tx: &mut T,
    conversation_id: &str,
    message: &ChatMessage,
    outbox: &[NewOutboxItem],
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    let stored = tx
        .fetch_optional(super::write::said_outside_a_turn(conversation_id, message, at)?)
        .await?
        .ok_or_else(|| StoreError::Invalid("a mensagem gravada não devolveu id".into()))?;
    let id: i64 = stored.value("id")?;
    for item in outbox {
        tx.execute(insert_carrying(item, Some(id), at)?).await?;
    }
    Ok(())
}

#[async_trait]
impl<S: Sql> OutboxStore for S {
    async fn enqueue(&self, item: &NewOutboxItem, now: DateTime<Utc>) -> Result<i64, StoreError> {
        let rows = self.write_returning(insert(item, now)?).await?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Invalid("a inclusão na saída não devolveu id".into()))?;
        row.value("id")
    }

    async fn claim(
        &self,
        limit: i64,
        now: DateTime<Utc>,
        lease: chrono::Duration,
    ) -> Result<Vec<OutboxItem>, StoreError> {
        let sql = match self.dialect() {
            Dialect::Sqlite => CLAIM_SQLITE,
            Dialect::Postgres => CLAIM_POSTGRES,
        };
        let rows = self
            .write_returning(Stmt::new(sql).bind(now + lease).bind(now).bind(limit))
            .await?;
        let mut items = rows
            .iter()
            .map(rows::outbox_item)
            .collect::<Result<Vec<_>, _>>()?;
        items.sort_by_key(|i| i.id);
        Ok(items)
    }

    async fn ack(&self, id: i64) -> Result<(), StoreError> {
        self.write(
            Stmt::new("UPDATE outbox SET status = 'done', claimed_until = NULL WHERE id = $1").bind(id),
        )
        .await?;
        Ok(())
    }

    async fn retry_later(
        &self,
        id: i64,
        error: &str,
        next_attempt_at: DateTime<Utc>,
    ) -> Result<OutboxStatus, StoreError> {
        let s = Stmt::new(
            "UPDATE outbox SET status = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END,
                 next_attempt_at = $1, last_error = $2, claimed_until = NULL
             WHERE id = $3 RETURNING status",
        )
        .bind(next_attempt_at)
        .bind(error)
        .bind(id);
        let rows = self.write_returning(s).await?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Invalid(format!("o item de saída {id} não existe")))?;
        OutboxStatus::parse(&row.value::<String>("status")?)
    }

    async fn record_sent(&self, id: i64, external_id: &str) -> Result<(), StoreError> {
        self.write(
            Stmt::new("UPDATE outbox SET external_id = $1 WHERE id = $2")
                .bind(external_id)
                .bind(id),
        )
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
        let ours = self
            .read_one(Stmt::new("SELECT 1 FROM outbox WHERE external_id = $1").bind(external_id))
            .await?
            .is_some();
        if ours {
            let s = Stmt::new(
                "INSERT INTO delivery_statuses (external_id, status, error_code, at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT DO NOTHING",
            )
            .bind(external_id)
            .bind(status)
            .bind(error_code)
            .bind(at);
            self.write(s).await?;
        }
        Ok(ours)
    }

    async fn delivery_statuses(
        &self,
        external_id: &str,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let sql = match self.dialect() {
            Dialect::Sqlite => STATUSES_SQLITE,
            Dialect::Postgres => STATUSES_POSTGRES,
        };
        let rows = self.read_all(Stmt::new(sql).bind(external_id)).await?;
        rows.iter()
            .map(|r| Ok((r.value("status")?, r.value("error_code")?)))
            .collect()
    }

    async fn dead_letter(&self, id: i64, error: &str) -> Result<(), StoreError> {
        self.write(
            Stmt::new(
                "UPDATE outbox SET status = 'failed', last_error = $1, claimed_until = NULL WHERE id = $2",
            )
            .bind(error)
            .bind(id),
        )
        .await?;
        Ok(())
    }

    async fn hold(&self, id: i64, why: &str) -> Result<(), StoreError> {
        self.write(
            Stmt::new(
                "UPDATE outbox SET status = 'held', last_error = $1, claimed_until = NULL WHERE id = $2",
            )
            .bind(why)
            .bind(id),
        )
        .await?;
        Ok(())
    }

    async fn outbox_count(&self, status: OutboxStatus) -> Result<i64, StoreError> {
        let row = self
            .read_one(Stmt::new("SELECT COUNT(*) AS n FROM outbox WHERE status = $1").bind(status.as_str()))
            .await?;
        row.map_or(Ok(0), |r| r.value("n"))
    }

    async fn outbox_items(&self, status: OutboxStatus, limit: i64) -> Result<Vec<OutboxItem>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new("SELECT * FROM outbox WHERE status = $1 ORDER BY id LIMIT $2")
                    .bind(status.as_str())
                    .bind(limit),
            )
            .await?;
        rows.iter().map(rows::outbox_item).collect()
    }

    async fn requeue(&self, id: i64, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let done = self
            .write(
                Stmt::new(
                    "UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = $1, claimed_until = NULL
                     WHERE id = $2 AND status = 'failed'",
                )
                .bind(now)
                .bind(id),
            )
            .await?;
        Ok(done == 1)
    }

    async fn outbox_item(&self, id: i64) -> Result<Option<OutboxItem>, StoreError> {
        let row = self
            .read_one(Stmt::new("SELECT * FROM outbox WHERE id = $1").bind(id))
            .await?;
        row.map(|r| rows::outbox_item(&r)).transpose()
    }

    async fn defer(&self, id: i64, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.write(
            Stmt::new(
                "UPDATE outbox SET status = 'pending', attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,
                     next_attempt_at = $1, claimed_until = NULL
                 WHERE id = $2 AND status = 'in_flight'",
            )
            .bind(at)
            .bind(id),
        )
        .await?;
        Ok(())
    }

    async fn take_pace(
        &self,
        key: &str,
        pace: crate::Pace,
        now: DateTime<Utc>,
    ) -> Result<Result<DateTime<Utc>, DateTime<Utc>>, StoreError> {
        let (now_us, every) = (now.timestamp_micros(), micros(pace.every));
        let cost = every.saturating_mul(i64::from(pace.cost.max(1)));
        let tolerance = every.saturating_mul(i64::from(pace.burst.max(1) - 1));
        // The slots are taken when the pace's first free one is at most `max_wait` away.
        let taken = self
            .write_returning(
                Stmt::new(
                    "INSERT INTO send_pacing (key, tat_us) VALUES ($1, $2 + $3)
                     ON CONFLICT (key) DO UPDATE SET
                         tat_us = (CASE WHEN send_pacing.tat_us > $2 THEN send_pacing.tat_us ELSE $2 END) + $3
                     WHERE send_pacing.tat_us - $4 <= $2 + $5
                     RETURNING tat_us",
                )
                .bind(key)
                .bind(now_us)
                .bind(cost)
                .bind(tolerance)
                .bind(micros(pace.max_wait)),
            )
            .await?;
        if let Some(row) = taken.first() {
            let tat: i64 = row.value("tat_us")?;
            return Ok(Ok(at_micros((tat - cost - tolerance).max(now_us))));
        }
        let row = self
            .read_fresh(Stmt::new("SELECT tat_us FROM send_pacing WHERE key = $1").bind(key))
            .await?;
        let tat: i64 = row
            .first()
            .map(|r| r.value("tat_us"))
            .transpose()?
            .unwrap_or(now_us);
        Ok(Err(at_micros((tat - tolerance).max(now_us))))
    }

    async fn give_back_pace(&self, key: &str, pace: crate::Pace) -> Result<(), StoreError> {
        let cost = micros(pace.every).saturating_mul(i64::from(pace.cost.max(1)));
        self.write(
            Stmt::new("UPDATE send_pacing SET tat_us = tat_us - $2 WHERE key = $1")
                .bind(key)
                .bind(cost),
        )
        .await?;
        Ok(())
    }

    async fn slow_pace(&self, key: &str, pace: crate::Pace, until: DateTime<Utc>) -> Result<(), StoreError> {
        // Its burst counted in: the pace's next slot is `until` itself.
        let tolerance = micros(pace.every).saturating_mul(i64::from(pace.burst.max(1) - 1));
        let until = until.timestamp_micros().saturating_add(tolerance);
        self.write(
            Stmt::new(
                "INSERT INTO send_pacing (key, tat_us) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET tat_us = $2 WHERE send_pacing.tat_us < $2",
            )
            .bind(key)
            .bind(until),
        )
        .await?;
        Ok(())
    }
}

fn micros(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

fn at_micros(us: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(us).unwrap_or(DateTime::<Utc>::MAX_UTC)
}
