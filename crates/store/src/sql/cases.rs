//! [`CaseStore`], once for both backends; only the list's order differs (how a time becomes a number).

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};

use super::{Dialect, Sql, Stmt, Tx};
use crate::rows::{self, Columns};
use crate::{
    Case, CaseEvent, CaseOffer, CaseOpened, CaseState, CaseStore, CaseTimes, CaseTransfer, CaseWrite, Claim,
    Closing, NewCase, NewOutboxItem, StoreError,
};
use vt_engine::llm::ChatMessage;

/// The case open for a conversation, if any.
pub(crate) const OPEN_CASE_OF: &str =
    "SELECT * FROM cases WHERE conversation_id = $1 AND state IN ('aguardando', 'em_atendimento')";

/// Open states first (waiting, then claimed), oldest first; then the closed, newest first.
const LISTED_SQLITE: &str = "SELECT * FROM cases WHERE (CAST($1 AS TEXT) IS NULL OR tenant_id = $1) \
     ORDER BY CASE state WHEN 'aguardando' THEN 0 WHEN 'em_atendimento' THEN 1 ELSE 2 END, \
     CASE WHEN state IN ('aguardando', 'em_atendimento') THEN opened_at ELSE -opened_at END LIMIT $2";
const LISTED_POSTGRES: &str = "SELECT * FROM cases WHERE (CAST($1 AS TEXT) IS NULL OR tenant_id = $1) \
     ORDER BY CASE state WHEN 'aguardando' THEN 0 WHEN 'em_atendimento' THEN 1 ELSE 2 END, \
     CASE WHEN state IN ('aguardando', 'em_atendimento') THEN EXTRACT(EPOCH FROM opened_at) \
     ELSE -EXTRACT(EPOCH FROM opened_at) END LIMIT $2";

fn event(e: &CaseEvent) -> Stmt {
    Stmt::new(
        "INSERT INTO case_events (case_id, conversation_id, at, who, what, detail) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&e.case_id)
    .bind(&e.conversation_id)
    .bind(e.at)
    .bind(&e.who)
    .bind(&e.what)
    .bind(e.detail.as_deref().map(crate::seal::seal))
}

fn case_by_id(id: &str) -> Stmt {
    Stmt::new("SELECT * FROM cases WHERE id = $1").bind(id)
}

async fn case_in(tx: &mut impl Tx, id: &str) -> Result<Option<Case>, StoreError> {
    let row = tx.fetch_optional(case_by_id(id)).await?;
    row.as_ref().map(rows::case).transpose()
}

/// What a turn writes about a case ([`CaseWrite`]), in the turn's transaction.
pub(crate) async fn write_case(
    tx: &mut impl Tx,
    write: &CaseWrite,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    match write {
        CaseWrite::Open(case) => {
            insert_case(tx, case, now).await?;
        }
        CaseWrite::Held { line, acknowledged } => {
            tx.execute(event(line)).await?;
            if *acknowledged {
                tx.execute(
                    Stmt::new("UPDATE cases SET acknowledged = TRUE WHERE id = $1").bind(&line.case_id),
                )
                .await?;
            }
        }
    }
    Ok(())
}

/// Inserts `case` (with its `aberto` line) unless its conversation has an open case; whether it did.
async fn insert_case(tx: &mut impl Tx, case: &NewCase, now: DateTime<Utc>) -> Result<bool, StoreError> {
    let insert = Stmt::new(
        "INSERT INTO cases (id, conversation_id, tenant_id, channel, reason, state, opened_at, case_file, notice_due_at, \
         protocol, team, motivo) \
         VALUES ($1, $2, $3, $4, $5, 'aguardando', $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING",
    )
    .bind(&case.id)
    .bind(&case.conversation_id)
    .bind(&case.tenant_id)
    .bind(&case.channel)
    .bind(crate::seal::seal(&case.reason))
    .bind(now)
    .sealed(&case.case_file)?
    .bind(case.notice_due_at)
    // No number (none could be taken): NULL, which the unique index lets repeat.
    .bind((!case.protocol.is_empty()).then_some(case.protocol.as_str()))
    .bind(&case.team)
    .bind(case.motivo.as_str());
    if tx.execute(insert).await? != 1 {
        return Ok(false);
    }
    tx.execute(event(&case.opened(now))).await?;
    Ok(true)
}

#[async_trait]
impl<S: Sql> CaseStore for S {
    async fn open_case(&self, case: &NewCase, now: DateTime<Utc>) -> Result<CaseOpened, StoreError> {
        let mut tx = self.begin().await?;
        let opened = if insert_case(&mut tx, case, now).await? {
            case_in(&mut tx, &case.id).await?.map(CaseOpened::Opened)
        } else {
            let row = tx
                .fetch_optional(Stmt::new(OPEN_CASE_OF).bind(&case.conversation_id))
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
        let row = self.read_one(case_by_id(id)).await?;
        row.as_ref().map(rows::case).transpose()
    }

    async fn open_case_of(&self, conversation_id: &str) -> Result<Option<Case>, StoreError> {
        let row = self
            .read_one(Stmt::new(OPEN_CASE_OF).bind(conversation_id))
            .await?;
        row.as_ref().map(rows::case).transpose()
    }

    async fn open_case_count(&self) -> Result<i64, StoreError> {
        let row = self
            .read_one(Stmt::new(
                "SELECT COUNT(*) AS n FROM cases WHERE state IN ('aguardando', 'em_atendimento')",
            ))
            .await?;
        row.map_or(Ok(0), |r| r.value("n"))
    }

    async fn case_times(
        &self,
        tenant: Option<&str>,
        since: DateTime<Utc>,
    ) -> Result<Vec<CaseTimes>, StoreError> {
        let s = Stmt::new(
            "SELECT state, opened_at, claimed_at, closed_at FROM cases \
             WHERE (CAST($1 AS TEXT) IS NULL OR tenant_id = $1) AND (opened_at >= $2 OR state = 'aguardando')",
        )
        .bind(tenant)
        .bind(since);
        let rows = self.read_all(s).await?;
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
        let sql = match self.dialect() {
            Dialect::Sqlite => LISTED_SQLITE,
            Dialect::Postgres => LISTED_POSTGRES,
        };
        let rows = self.read_all(Stmt::new(sql).bind(tenant).bind(limit)).await?;
        rows.iter().map(rows::case).collect()
    }

    async fn claim_case(&self, id: &str, owner: &str, now: DateTime<Utc>) -> Result<Claim, StoreError> {
        let mut tx = self.begin().await?;
        let claim = Stmt::new(
            "UPDATE cases SET state = 'em_atendimento', owner = $1, claimed_at = COALESCE(claimed_at, $2), \
             offered_to = NULL, offer_due_at = NULL WHERE id = $3 AND state = 'aguardando'",
        )
        .bind(owner)
        .bind(now)
        .bind(id);
        let claimed = tx.execute(claim).await? == 1;
        let Some(case) = case_in(&mut tx, id).await? else {
            return Ok(Claim::NotFound);
        };
        let claim = if claimed {
            tx.execute(event(&case.event(now, owner, "assumido", None)))
                .await?;
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
        said: Closing<'_>,
        now: DateTime<Utc>,
    ) -> Result<Option<Case>, StoreError> {
        let mut tx = self.begin().await?;
        let close = Stmt::new(
            "UPDATE cases SET state = $1, closed_at = $2, resolution = $3 \
             WHERE id = $4 AND state IN ('aguardando', 'em_atendimento')",
        )
        .bind(to.as_str())
        .bind(now)
        .bind(said.resolution)
        .bind(id);
        if tx.execute(close).await? != 1 {
            return Ok(None);
        }
        let case = case_in(&mut tx, id).await?;
        if let Some(case) = &case {
            tx.execute(event(&case.event(
                now,
                who,
                to.as_str(),
                said.note.map(str::to_owned),
            )))
            .await?;
        }
        tx.commit().await?;
        Ok(case)
    }

    async fn case_events(&self, case_id: &str) -> Result<Vec<CaseEvent>, StoreError> {
        let rows = self
            .read_all(Stmt::new("SELECT * FROM case_events WHERE case_id = $1 ORDER BY seq").bind(case_id))
            .await?;
        rows.iter().map(rows::case_event).collect()
    }

    async fn take_due_notice(&self, now: DateTime<Utc>) -> Result<Option<Case>, StoreError> {
        let s = Stmt::new(
            "UPDATE cases SET noticed = TRUE WHERE NOT noticed AND id = (SELECT id FROM cases \
             WHERE state = 'aguardando' AND NOT noticed AND notice_due_at <= $1 ORDER BY notice_due_at LIMIT 1) \
             RETURNING *",
        )
        .bind(now);
        let rows = self.write_returning(s).await?;
        rows.first().map(rows::case).transpose()
    }

    async fn say_in_case(
        &self,
        conversation_id: &str,
        message: &ChatMessage,
        outbox: &[NewOutboxItem],
        said: Option<&CaseEvent>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        super::outbox::say_late(&mut tx, conversation_id, message, outbox, now).await?;
        if let Some(line) = said {
            tx.execute(event(line)).await?;
        }
        tx.commit().await
    }

    async fn note_case(
        &self,
        line: &CaseEvent,
        outbox: &[NewOutboxItem],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut statements = vec![event(line)];
        for item in outbox {
            statements.push(super::outbox::insert(item, now)?);
        }
        self.write_all(statements).await
    }

    async fn set_board_post(&self, case_id: &str, post: &str) -> Result<(), StoreError> {
        self.write(
            Stmt::new("UPDATE cases SET board_post = $1 WHERE id = $2")
                .bind(post)
                .bind(case_id),
        )
        .await?;
        Ok(())
    }

    async fn case_of_board_post(&self, post: &str) -> Result<Option<Case>, StoreError> {
        let row = self
            .read_one(Stmt::new("SELECT * FROM cases WHERE board_post = $1").bind(post))
            .await?;
        row.as_ref().map(rows::case).transpose()
    }

    async fn next_protocol(&self, tenant: &str, day: NaiveDate) -> Result<String, StoreError> {
        let day = day.format("%Y%m%d").to_string();
        let s = Stmt::new(
            "INSERT INTO case_protocols (tenant_id, day, last) VALUES ($1, $2, 1) \
             ON CONFLICT (tenant_id, day) DO UPDATE SET last = case_protocols.last + 1 RETURNING last",
        )
        .bind(tenant)
        .bind(&day);
        let rows = self.write_returning(s).await?;
        let last: i64 = rows
            .first()
            .ok_or_else(|| StoreError::Invalid("no protocol number came back".into()))?
            .value("last")?;
        Ok(format!("{day}-{last:06}"))
    }

    async fn case_by_protocol(
        &self,
        tenant: Option<&str>,
        protocol: &str,
    ) -> Result<Option<Case>, StoreError> {
        let s = Stmt::new(
            "SELECT * FROM cases WHERE protocol = $1 AND (CAST($2 AS TEXT) IS NULL OR tenant_id = $2) \
             ORDER BY opened_at LIMIT 1",
        )
        .bind(protocol.trim())
        .bind(tenant);
        let row = self.read_one(s).await?;
        row.as_ref().map(rows::case).transpose()
    }

    async fn open_cases(&self) -> Result<Vec<Case>, StoreError> {
        let rows = self
            .read_all(Stmt::new(
                "SELECT * FROM cases WHERE state IN ('aguardando', 'em_atendimento') ORDER BY opened_at, id",
            ))
            .await?;
        rows.iter().map(rows::case).collect()
    }

    async fn cases_opened_between(
        &self,
        tenant: Option<&str>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Case>, StoreError> {
        let s = Stmt::new(
            "SELECT * FROM cases WHERE (CAST($1 AS TEXT) IS NULL OR tenant_id = $1) \
             AND opened_at >= $2 AND opened_at < $3 ORDER BY opened_at, id",
        )
        .bind(tenant)
        .bind(from)
        .bind(to);
        let rows = self.read_all(s).await?;
        rows.iter().map(rows::case).collect()
    }

    async fn offer_case(&self, offer: &CaseOffer) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let update = Stmt::new(
            "UPDATE cases SET offered_to = $1, offer_due_at = $2 WHERE id = $3 AND state = 'aguardando' \
             AND COALESCE(offered_to, '') = $4",
        )
        .bind(offer.to.as_deref())
        .bind(offer.due_at)
        .bind(&offer.case_id)
        .bind(offer.previous.as_deref().unwrap_or_default());
        if tx.execute(update).await? != 1 {
            return Ok(false);
        }
        let line = |who: &str, what: &str, detail: &str| CaseEvent {
            case_id: offer.case_id.clone(),
            conversation_id: offer.conversation_id.clone(),
            at: offer.now,
            who: who.to_owned(),
            what: what.to_owned(),
            detail: Some(detail.to_owned()),
        };
        if let Some(previous) = &offer.previous {
            tx.execute(event(&line("sistema", "oferta_expirada", previous)))
                .await?;
        }
        if let Some(to) = &offer.to {
            tx.execute(event(&line("sistema", "oferecido", to))).await?;
            tx.execute(
                Stmt::new(
                    "INSERT INTO team_turns (team, last_agent) VALUES ($1, $2) \
                     ON CONFLICT (team) DO UPDATE SET last_agent = $2",
                )
                .bind(&offer.team)
                .bind(to),
            )
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn team_turn(&self, team: &str) -> Result<Option<String>, StoreError> {
        let row = self
            .read_one(Stmt::new("SELECT last_agent FROM team_turns WHERE team = $1").bind(team))
            .await?;
        row.map(|r| r.value("last_agent")).transpose()
    }

    async fn transfer_case(&self, t: &CaseTransfer) -> Result<Option<Case>, StoreError> {
        let mut tx = self.begin().await?;
        let update = match &t.owner {
            Some(owner) => Stmt::new(
                "UPDATE cases SET team = $1, owner = $2, state = 'em_atendimento', claimed_at = COALESCE(claimed_at, $3), \
                 offered_to = NULL, offer_due_at = NULL WHERE id = $4 AND state IN ('aguardando', 'em_atendimento')",
            )
            .bind(&t.team)
            .bind(owner)
            .bind(t.now)
            .bind(&t.case_id),
            None => Stmt::new(
                "UPDATE cases SET team = $1, owner = NULL, state = 'aguardando', offered_to = NULL, offer_due_at = NULL \
                 WHERE id = $2 AND state IN ('aguardando', 'em_atendimento')",
            )
            .bind(&t.team)
            .bind(&t.case_id),
        };
        if tx.execute(update).await? != 1 {
            return Ok(None);
        }
        let case = case_in(&mut tx, &t.case_id).await?;
        if let Some(case) = &case {
            if let Some(note) = &t.note {
                tx.execute(event(&case.event(
                    t.now,
                    &t.who,
                    "nota_interna",
                    Some(note.clone()),
                )))
                .await?;
            }
            let to = match &t.owner {
                Some(owner) => format!("{} (@{owner})", t.team),
                None => t.team.clone(),
            };
            tx.execute(event(&case.event(t.now, &t.who, "transferido", Some(to))))
                .await?;
        }
        tx.commit().await?;
        Ok(case)
    }

    async fn warn_sla(&self, case_id: &str, key: &str) -> Result<bool, StoreError> {
        let s =
            Stmt::new("UPDATE cases SET sla_warned = $1 WHERE id = $2 AND COALESCE(sla_warned, '') <> $1")
                .bind(key)
                .bind(case_id);
        Ok(self.write(s).await? == 1)
    }

    async fn set_away(&self, login: &str, away: bool, now: DateTime<Utc>) -> Result<(), StoreError> {
        let s = Stmt::new(
            "INSERT INTO agent_presence (login, away, changed_at) VALUES ($1, $2, $3) \
             ON CONFLICT (login) DO UPDATE SET away = $2, changed_at = $3",
        )
        .bind(login)
        .bind(away)
        .bind(now);
        self.write(s).await?;
        Ok(())
    }

    async fn away_agents(&self) -> Result<Vec<String>, StoreError> {
        let rows = self
            .read_all(Stmt::new(
                "SELECT login FROM agent_presence WHERE away ORDER BY login",
            ))
            .await?;
        rows.iter().map(|r| r.value("login")).collect()
    }
}
