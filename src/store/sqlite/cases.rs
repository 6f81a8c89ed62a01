//! [`CaseStore`] on SQLite.

use super::*;
use crate::llm::ChatMessage;
use crate::store::{
    Case, CaseEvent, CaseOpened, CaseState, CaseStore, CaseTimes, CaseWrite, Claim, NewCase, NewOutboxItem,
};

/// Open states first (waiting, then claimed), oldest first; then the closed, newest first.
const LISTED: &str = "ORDER BY CASE state WHEN 'aguardando' THEN 0 WHEN 'em_atendimento' THEN 1 ELSE 2 END, \
                      CASE WHEN state IN ('aguardando', 'em_atendimento') THEN opened_at ELSE -opened_at END";

async fn event(conn: &mut SqliteConnection, e: &CaseEvent) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO case_events (case_id, conversation_id, at, who, what, detail) VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(&e.case_id)
    .bind(&e.conversation_id)
    .bind(ms(e.at))
    .bind(&e.who)
    .bind(&e.what)
    .bind(e.detail.as_deref().map(crate::store::seal::seal))
    .execute(conn)
    .await?;
    Ok(())
}

async fn case_in(conn: &mut SqliteConnection, id: &str) -> Result<Option<Case>, StoreError> {
    let row = sqlx::query("SELECT * FROM cases WHERE id = ?")
        .bind(id)
        .fetch_optional(conn)
        .await?;
    row.as_ref().map(rows::case).transpose()
}

/// What a turn writes about a case ([`CaseWrite`]), in the turn's transaction.
pub(super) async fn write_case(
    conn: &mut SqliteConnection,
    write: &CaseWrite,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    match write {
        CaseWrite::Open(case) => {
            insert_case(&mut *conn, case, now).await?;
        }
        CaseWrite::Held { line, acknowledged } => {
            event(&mut *conn, line).await?;
            if *acknowledged {
                sqlx::query("UPDATE cases SET acknowledged = TRUE WHERE id = ?")
                    .bind(&line.case_id)
                    .execute(&mut *conn)
                    .await?;
            }
        }
    }
    Ok(())
}

/// Inserts `case` (with its `aberto` line) unless its conversation has an open case; whether it did.
pub(super) async fn insert_case(
    conn: &mut SqliteConnection,
    case: &NewCase,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO cases (id, conversation_id, tenant_id, channel, reason, state, opened_at, case_file, notice_due_at) \
         VALUES (?, ?, ?, ?, ?, 'aguardando', ?, ?, ?) ON CONFLICT DO NOTHING",
    )
    .bind(&case.id)
    .bind(&case.conversation_id)
    .bind(&case.tenant_id)
    .bind(&case.channel)
    .bind(crate::store::seal::seal(&case.reason))
    .bind(ms(now))
    .bind(json(&case.case_file)?)
    .bind(case.notice_due_at.map(ms))
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if inserted != 1 {
        return Ok(false);
    }
    let e = case.opened(now);
    event(&mut *conn, &e).await?;
    Ok(true)
}

#[async_trait]
impl CaseStore for SqliteStore {
    async fn open_case(&self, case: &NewCase, now: DateTime<Utc>) -> Result<CaseOpened, StoreError> {
        let mut tx = self.writer.begin().await?;
        let inserted = insert_case(&mut tx, case, now).await?;
        let opened = if inserted {
            case_in(&mut tx, &case.id).await?.map(CaseOpened::Opened)
        } else {
            let row = sqlx::query(OPEN_CASE_OF)
                .bind(&case.conversation_id)
                .fetch_optional(&mut *tx)
                .await?;
            row.as_ref()
                .map(rows::case)
                .transpose()?
                .map(CaseOpened::AlreadyOpen)
        };
        tx.commit().await?;
        opened.ok_or_else(|| StoreError::Invalid(format!("case {} was neither opened nor open", case.id)))
    }

    async fn case(&self, id: &str) -> Result<Option<Case>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        case_in(&mut conn, id).await
    }

    async fn open_case_of(&self, conversation_id: &str) -> Result<Option<Case>, StoreError> {
        let row = sqlx::query(OPEN_CASE_OF)
            .bind(conversation_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::case).transpose()
    }

    async fn open_case_count(&self) -> Result<i64, StoreError> {
        let n: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM cases WHERE state IN ('aguardando', 'em_atendimento')")
                .fetch_one(&self.pool)
                .await?;
        Ok(n)
    }

    async fn case_times(
        &self,
        tenant: Option<&str>,
        since: DateTime<Utc>,
    ) -> Result<Vec<CaseTimes>, StoreError> {
        let rows = sqlx::query(
            "SELECT state, opened_at, claimed_at, closed_at FROM cases \
             WHERE (?1 IS NULL OR tenant_id = ?1) AND (opened_at >= ?2 OR state = 'aguardando')",
        )
        .bind(tenant)
        .bind(ms(since))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(CaseTimes {
                    state: CaseState::from_row(&r.value::<String>("state")?)?,
                    opened_at: r.time("opened_at")?,
                    claimed_at: r.opt_time("claimed_at")?,
                    closed_at: r.opt_time("closed_at")?,
                })
            })
            .collect()
    }

    async fn cases(&self, tenant: Option<&str>, limit: i64) -> Result<Vec<Case>, StoreError> {
        let sql = format!("SELECT * FROM cases WHERE (?1 IS NULL OR tenant_id = ?1) {LISTED} LIMIT ?2");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(tenant)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(rows::case).collect()
    }

    async fn claim_case(&self, id: &str, owner: &str, now: DateTime<Utc>) -> Result<Claim, StoreError> {
        let mut tx = self.writer.begin().await?;
        let claimed = sqlx::query(
            "UPDATE cases SET state = 'em_atendimento', owner = ?, claimed_at = ? WHERE id = ? AND state = 'aguardando'",
        )
        .bind(owner)
        .bind(ms(now))
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        let Some(case) = case_in(&mut tx, id).await? else {
            return Ok(Claim::NotFound);
        };
        let claim = if claimed {
            let e = case.event(now, owner, "assumido", None);
            event(&mut tx, &e).await?;
            Claim::Claimed(Box::new(case))
        } else if case.state == CaseState::EmAtendimento {
            Claim::TakenBy(case.owner.unwrap_or_default())
        } else {
            Claim::Closed(case.state)
        };
        tx.commit().await?;
        Ok(claim)
    }

    async fn close_case(
        &self,
        id: &str,
        who: &str,
        to: CaseState,
        note: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Option<Case>, StoreError> {
        let mut tx = self.writer.begin().await?;
        let closed = sqlx::query(
            "UPDATE cases SET state = ?, closed_at = ? WHERE id = ? AND state IN ('aguardando', 'em_atendimento')",
        )
        .bind(to.as_str())
        .bind(ms(now))
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if !closed {
            return Ok(None);
        }
        let case = case_in(&mut tx, id).await?;
        if let Some(case) = &case {
            let e = case.event(now, who, to.as_str(), note.map(str::to_owned));
            event(&mut tx, &e).await?;
        }
        tx.commit().await?;
        Ok(case)
    }

    async fn case_events(&self, case_id: &str) -> Result<Vec<CaseEvent>, StoreError> {
        let rows = sqlx::query("SELECT * FROM case_events WHERE case_id = ? ORDER BY seq")
            .bind(case_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(rows::case_event).collect()
    }

    async fn take_due_notice(&self, now: DateTime<Utc>) -> Result<Option<Case>, StoreError> {
        let row = sqlx::query(
            "UPDATE cases SET noticed = TRUE WHERE NOT noticed AND id = (SELECT id FROM cases \
             WHERE state = 'aguardando' AND NOT noticed AND notice_due_at <= ? ORDER BY notice_due_at LIMIT 1) \
             RETURNING *",
        )
        .bind(ms(now))
        .fetch_optional(&self.writer)
        .await?;
        row.as_ref().map(rows::case).transpose()
    }

    async fn say_in_case(
        &self,
        conversation_id: &str,
        message: &ChatMessage,
        outbox: &[NewOutboxItem],
        said: Option<&CaseEvent>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut tx = self.writer.begin().await?;
        sqlx::query(
            "INSERT INTO messages (conversation_id, execucao_id, role, body, created_at, search_text) \
             VALUES (?, NULL, ?, ?, ?, ?)",
        )
        .bind(conversation_id)
        .bind(role(message))
        .bind(json(message)?)
        .bind(ms(now))
        .bind(crate::store::search_text(message))
        .execute(&mut *tx)
        .await?;
        for item in outbox {
            Self::insert_outbox(&mut tx, item, now).await?;
        }
        if let Some(e) = said {
            event(&mut tx, e).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn note_case(
        &self,
        line: &CaseEvent,
        outbox: &[NewOutboxItem],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut tx = self.writer.begin().await?;
        event(&mut tx, line).await?;
        for item in outbox {
            Self::insert_outbox(&mut tx, item, now).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn set_board_post(&self, case_id: &str, post: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE cases SET board_post = ? WHERE id = ?")
            .bind(post)
            .bind(case_id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn case_of_board_post(&self, post: &str) -> Result<Option<Case>, StoreError> {
        let row = sqlx::query("SELECT * FROM cases WHERE board_post = ?")
            .bind(post)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::case).transpose()
    }
}
