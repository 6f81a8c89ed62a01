//! Row mapping both backends share: a row is read through [`Columns`], which each backend implements
//! for its own row type (SQLite keeps times as epoch milliseconds and JSON as text, PostgreSQL as
//! `timestamptz` and `jsonb`), so a record is mapped from its columns once.

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use sqlx::{Postgres, Sqlite};

use super::{
    BatchJob, CannedAnswer, Case, CaseEvent, CaseState, ConversationContext, DeskLine, FollowUp,
    FollowUpView, IdempotencyRecord, OutboxItem, OutboxStatus, RechargeAttemptRecord, StoreError, TaskRun,
    TaskStatus,
};
use vt_engine::{Conversation, ExecutionRecord, ExecutionStatus};

/// A column type both backends decode.
pub trait Both:
    for<'r> sqlx::Decode<'r, Sqlite>
    + sqlx::Type<Sqlite>
    + for<'r> sqlx::Decode<'r, Postgres>
    + sqlx::Type<Postgres>
{
}

impl<T> Both for T where
    T: for<'r> sqlx::Decode<'r, Sqlite>
        + sqlx::Type<Sqlite>
        + for<'r> sqlx::Decode<'r, Postgres>
        + sqlx::Type<Postgres>
{
}

/// How a record's mapping reads a row's columns, whichever the backend.
pub trait Columns {
    /// A plain column (text, integer, boolean, or an optional one).
    fn value<T: Both>(&self, col: &str) -> Result<T, StoreError>;
    fn time(&self, col: &str) -> Result<DateTime<Utc>, StoreError>;
    fn opt_time(&self, col: &str) -> Result<Option<DateTime<Utc>>, StoreError>;
    /// A JSON column, opened ([`super::seal`]) and parsed.
    fn json<T: DeserializeOwned>(&self, col: &str) -> Result<T, StoreError>;
    fn opt_json<T: DeserializeOwned>(&self, col: &str) -> Result<Option<T>, StoreError>;
    /// A sealed text column.
    fn opt_sealed_text(&self, col: &str) -> Result<Option<String>, StoreError> {
        Ok(super::seal::open_opt(self.value(col)?)?)
    }
}

/// A `conversations` row.
pub(crate) fn conversation(row: &impl Columns) -> Result<Conversation, StoreError> {
    Ok(Conversation {
        id: row.value("id")?,
        agent_id: row.value("agent_id")?,
        tenant_id: row.value("tenant_id")?,
        user_id: row.value("user_id")?,
        user_login: row.value("user_login")?,
        channel: row.value("channel")?,
        active_skill: row.value("active_skill")?,
        state: row.json("state")?,
        memory: row.json("memory")?,
        window: row.json("skill_window")?,
        handoff: row.opt_json("handoff")?,
        ended: row.value("ended")?,
    })
}

/// A `conversation_context` row.
pub(crate) fn context(row: &impl Columns) -> Result<ConversationContext, StoreError> {
    Ok(ConversationContext {
        conversation_id: row.value("conversation_id")?,
        user_id: row.value("user_id")?,
        summary: row.opt_sealed_text("summary")?,
        key_facts: row.json("key_facts")?,
        last_intent: row.value("last_intent")?,
        turn_count: row.value::<i32>("turn_count")?.into(),
        updated_at: row.time("updated_at")?,
    })
}

pub(crate) fn batch_job(row: &impl Columns) -> Result<BatchJob, StoreError> {
    Ok(BatchJob {
        id: row.value("id")?,
        tenant_id: row.value("tenant_id")?,
        digest: row.value("digest")?,
        total: row.value("total")?,
        dry_run: row.value("dry_run")?,
        source: row.opt_sealed_text("source")?,
        created_at: row.time("created_at")?,
        finished_at: row.opt_time("finished_at")?,
    })
}

/// A `recharge_attempts` row (and any row holding its columns).
pub(crate) fn recharge_attempt(row: &impl Columns) -> Result<RechargeAttemptRecord, StoreError> {
    let valor: String = row.value("valor")?;
    Ok(RechargeAttemptRecord {
        attempt: vt_domain::journal::RechargeAttempt {
            idempotency_key: row.value("idempotency_key")?,
            fingerprint: row.value("fingerprint")?,
            scope: row.value("scope")?,
            origin: row.value("origin")?,
            execucao_id: row.value("execucao_id")?,
            cartao_mascarado: row.value("cartao_mascarado")?,
            valor: valor
                .parse()
                .map_err(|e| StoreError::Invalid(format!("stored recharge value: {e}")))?,
            moeda: row.value("moeda")?,
        },
        status: super::attempt_status(&row.value::<String>("status")?)?,
        sends: row.value::<i32>("sends")?.into(),
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

/// A claimed follow-up: its attempt's columns with the follow-up's `request`, `checks` and
/// `deadline_at`; `None` when its request was dropped (settled meanwhile).
pub(crate) fn followup(row: &impl Columns) -> Result<Option<FollowUp>, StoreError> {
    let Some(request) = row.opt_sealed_text("request")? else {
        return Ok(None);
    };
    Ok(Some(FollowUp {
        attempt: recharge_attempt(row)?,
        request: vt_contract::json::from_text(&request)?,
        checks: row.value::<i32>("checks")?.into(),
        deadline_at: row.time("deadline_at")?,
    }))
}

/// The follow-ups of claimed rows (a row whose request is gone has none).
pub(crate) fn followups(rows: &[impl Columns]) -> Result<Vec<FollowUp>, StoreError> {
    let mut all = Vec::with_capacity(rows.len());
    for row in rows {
        all.extend(followup(row)?);
    }
    Ok(all)
}

/// A follow-up as listed: its attempt's columns with the follow-up's.
pub(crate) fn followup_view(row: &impl Columns) -> Result<FollowUpView, StoreError> {
    Ok(FollowUpView {
        attempt: recharge_attempt(row)?,
        checks: row.value::<i32>("checks")?.into(),
        next_check_at: row.time("next_check_at")?,
        deadline_at: row.time("deadline_at")?,
        outcome: row.value("outcome")?,
        settled_at: row.opt_time("settled_at")?,
    })
}

pub(crate) fn execution(row: &impl Columns) -> Result<ExecutionRecord, StoreError> {
    Ok(ExecutionRecord {
        execucao_id: row.value("execucao_id")?,
        conversation_id: row.value("conversation_id")?,
        agent_id: row.value("agent_id")?,
        status: ExecutionStatus::parse(&row.value::<String>("status")?),
        error: row.value("error")?,
        model_calls: row.json("model_calls")?,
        started_at: row.time("started_at")?,
        finished_at: row.time("finished_at")?,
    })
}

pub(crate) fn outbox_item(row: &impl Columns) -> Result<OutboxItem, StoreError> {
    Ok(OutboxItem {
        id: row.value("id")?,
        kind: row.value("kind")?,
        destination: row.value("destination")?,
        payload: row.json("payload")?,
        conversation_id: row.value("conversation_id")?,
        status: OutboxStatus::parse(&row.value::<String>("status")?)?,
        attempts: row.value("attempts")?,
        max_attempts: row.value("max_attempts")?,
        next_attempt_at: row.time("next_attempt_at")?,
        last_error: row.value("last_error")?,
        message_id: row.value("message_id")?,
    })
}

pub(crate) fn task_run(row: &impl Columns) -> Result<TaskRun, StoreError> {
    Ok(TaskRun {
        id: row.value("id")?,
        conversation_id: row.value("conversation_id")?,
        user_id: row.value("user_id")?,
        intent_key: row.value("intent_key")?,
        status: TaskStatus::parse(&row.value::<String>("status")?)?,
        plan: row.opt_json("plan")?,
        steps: row.json("steps")?,
        final_result: row.opt_sealed_text("final_result")?,
        tokens_used: row.value("tokens_used")?,
        error_message: row.value("error_message")?,
        created_at: row.time("created_at")?,
        completed_at: row.opt_time("completed_at")?,
    })
}

pub(crate) fn idempotency_record(row: &impl Columns) -> Result<IdempotencyRecord, StoreError> {
    Ok(IdempotencyRecord {
        key: row.value("key")?,
        scope: row.value("scope")?,
        request_hash: row.value("request_hash")?,
        response: row.json("response")?,
        created_at: row.time("created_at")?,
        expires_at: row.time("expires_at")?,
    })
}

pub(crate) fn case(row: &impl Columns) -> Result<Case, StoreError> {
    Ok(Case {
        id: row.value("id")?,
        conversation_id: row.value("conversation_id")?,
        tenant_id: row.value("tenant_id")?,
        channel: row.value("channel")?,
        reason: row.opt_sealed_text("reason")?.unwrap_or_default(),
        state: CaseState::from_row(&row.value::<String>("state")?)?,
        owner: row.value("owner")?,
        opened_at: row.time("opened_at")?,
        claimed_at: row.opt_time("claimed_at")?,
        closed_at: row.opt_time("closed_at")?,
        acknowledged: row.value("acknowledged")?,
        case_file: row.json("case_file")?,
        notice_due_at: row.opt_time("notice_due_at")?,
        noticed: row.value("noticed")?,
        board_post: row.value("board_post")?,
        protocol: row.value("protocol")?,
        team: row.value("team")?,
        motivo: vt_contract::HandoffReason::named(&row.value::<String>("motivo")?).unwrap_or_default(),
        offered_to: row.value("offered_to")?,
        offer_due_at: row.opt_time("offer_due_at")?,
        sla_warned: row.value("sla_warned")?,
        resolution: row.value("resolution")?,
    })
}

pub(crate) fn case_event(row: &impl Columns) -> Result<CaseEvent, StoreError> {
    Ok(CaseEvent {
        case_id: row.value("case_id")?,
        conversation_id: row.value("conversation_id")?,
        at: row.time("at")?,
        who: row.value("who")?,
        what: row.value("what")?,
        detail: row.opt_sealed_text("detail")?,
    })
}

pub(crate) fn canned_answer(row: &impl Columns) -> Result<CannedAnswer, StoreError> {
    let team: String = row.value("team")?;
    Ok(CannedAnswer {
        tenant_id: row.value("tenant_id")?,
        shortcut: row.value("shortcut")?,
        team: (!team.is_empty()).then_some(team),
        body: row.value("body")?,
        updated_by: row.value("updated_by")?,
        updated_at: row.time("updated_at")?,
    })
}

pub(crate) fn desk_line(row: &impl Columns) -> Result<DeskLine, StoreError> {
    Ok(DeskLine {
        seq: row.value("seq")?,
        tenant_id: row.value("tenant_id")?,
        team: row.value("team")?,
        protocol: row.value("protocol")?,
        line: case_event(row)?,
    })
}

pub(crate) fn review_item(row: &impl Columns) -> Result<super::ReviewItem, StoreError> {
    let state: String = row.value("state")?;
    Ok(super::ReviewItem {
        id: row.value("id")?,
        item: super::NewReviewItem {
            tenant_id: row.value("tenant_id")?,
            conversation_id: row.value("conversation_id")?,
            message_id: row.value("message_id")?,
            source: row.value("source")?,
            reason: row.value("reason")?,
            note: row.opt_sealed_text("note")?,
            flagged_by: row.value("flagged_by")?,
            created_at: row.time("created_at")?,
        },
        state: super::ReviewState::parse(&state)
            .ok_or_else(|| StoreError::Invalid(format!("review_items.state desconhecido: {state}")))?,
        labels: row.opt_json("labels")?.unwrap_or_default(),
        expectation: row.opt_json("expectation")?,
        test_file: row.value("test_file")?,
        reviewed_by: row.value("reviewed_by")?,
        reviewed_at: row.opt_time("reviewed_at")?,
    })
}

pub(crate) fn faq_decision(row: &impl Columns) -> Result<super::FaqDecision, StoreError> {
    Ok(super::FaqDecision {
        tenant_id: row.value("tenant_id")?,
        suggestion: row.value("suggestion")?,
        decision: row.value("decision")?,
        entry: row.value("entry")?,
        decided_by: row.value("decided_by")?,
        decided_at: row.time("decided_at")?,
    })
}
