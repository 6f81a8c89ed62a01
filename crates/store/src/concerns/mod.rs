//! The store's concerns, one trait each: what each part of the product reads and writes. The whole
//! store ([`super::Store`]) is all of them; a reader is given the narrow one it reads.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use serde_json::Value;

use vt_domain::journal::{AttemptStatus, Confirmation, Consumption, RechargeAttempt};

use vt_engine::llm::ChatMessage;
use vt_engine::{Conversation, ExecutionRecord, TurnEvent};

use super::*;

mod cases;
mod desk;
mod payments;
mod review;

pub use cases::{CaseOffer, CaseStore, CaseTransfer, Closing};
pub use desk::DeskStore;
pub use payments::{PixStore, RecurrenceStore};
pub use review::ReviewStore;

/// Conversations and what a turn writes: the conversation row, its messages (accepted once per
/// channel id, processed in stored order), its executions, its compressed context, its planner
/// tasks, the console's list and the per-conversation turn lock.
#[async_trait]
pub trait ConversationStore: Send + Sync {
    async fn save_conversation(&self, conv: &Conversation, now: DateTime<Utc>) -> Result<(), StoreError>;

    async fn conversation(&self, id: &str) -> Result<Option<Conversation>, StoreError>;

    /// The last conversation (most recently updated) of `conv`'s user with the same agent, on the
    /// same channel and tenant, other than `conv` itself: where what they told us before is found.
    async fn previous_conversation(&self, conv: &Conversation) -> Result<Option<Conversation>, StoreError>;

    /// Accepts an inbound message in one transaction: the conversation's row when it is new, then the
    /// message — unless `channel_message_id` was accepted before in this conversation (a channel's
    /// redelivery), in which case nothing is written and `None` comes back. A message with a channel id
    /// is stored as not yet processed until its turn commits (see [`TurnRecord::accepted_message`]).
    /// A new conversation's row, or a contact's last-message time, make it a transaction; else it is
    /// one statement (the hot path).
    async fn accept_message(&self, a: Accepting<'_>) -> Result<Option<i64>, StoreError>;

    /// Replaces accepted message `id`'s text by what was heard of it (a voice note's transcript),
    /// before its turn runs.
    async fn heard(&self, id: i64, message: &ChatMessage) -> Result<(), StoreError>;

    /// Stores one message on its own.
    async fn append_message(
        &self,
        conversation_id: &str,
        execucao_id: Option<&str>,
        message: &ChatMessage,
        now: DateTime<Utc>,
    ) -> Result<i64, StoreError>;

    async fn messages(&self, conversation_id: &str) -> Result<Vec<StoredMessage>, StoreError> {
        self.messages_after(conversation_id, 0).await
    }

    /// The conversation's messages stored after message `after`, in order: what an event stream that
    /// has `after` reads each time it looks.
    async fn messages_after(
        &self,
        conversation_id: &str,
        after: i64,
    ) -> Result<Vec<StoredMessage>, StoreError>;

    /// Accepted channel messages whose turn never committed, oldest first: every conversation's, or
    /// with `through = Some((conversation, id))` that conversation's up to message `id` included.
    async fn unprocessed_messages(
        &self,
        through: Option<(&str, i64)>,
        limit: i64,
    ) -> Result<Vec<UnprocessedMessage>, StoreError>;

    /// Conversation state, messages, execution, events, usage, context, flow runs and outbox items of a
    /// turn, in one transaction.
    async fn save_turn(&self, turn: TurnRecord<'_>, now: DateTime<Utc>) -> Result<(), StoreError>;

    async fn execution(
        &self,
        execucao_id: &str,
    ) -> Result<Option<(ExecutionRecord, Vec<TurnEvent>)>, StoreError>;

    /// Every execution of a conversation with its events, in order (one query for a whole transcript).
    async fn executions(
        &self,
        conversation_id: &str,
    ) -> Result<Vec<(ExecutionRecord, Vec<TurnEvent>)>, StoreError>;

    async fn save_task_run(&self, task: &TaskRun) -> Result<(), StoreError>;

    async fn task_runs(&self, conversation_id: &str) -> Result<Vec<TaskRun>, StoreError>;

    async fn save_context(&self, context: &ConversationContext) -> Result<(), StoreError>;

    async fn context(&self, conversation_id: &str) -> Result<Option<ConversationContext>, StoreError>;

    /// Conversations matching `query`, most recently updated first.
    async fn conversation_list(
        &self,
        query: &ConversationQuery,
    ) -> Result<Vec<ConversationListing>, StoreError>;

    /// Serialises turns of one conversation: in this process, and across processes and instances
    /// through a lease row in the database ([`locks`]).
    async fn lock_conversation(&self, conversation_id: &str) -> Result<TurnLock, StoreError>;

    /// What a turn reads of conversation `conversation_id` before it runs — the conversation, its
    /// compressed context and its open case ([`CaseStore::open_case_of`]) — at once: concurrently
    /// (one round trip of waiting), or, on SQLite, in one query (one hop to a reader thread).
    async fn turn_reads(&self, conversation_id: &str) -> Result<crate::TurnReads, StoreError>;
}

/// Flow runs: on record before they run, with their input, output and stages.
#[async_trait]
pub trait FlowStore: Send + Sync {
    async fn save_flow_run(&self, run: &FlowRunRecord) -> Result<(), StoreError>;

    async fn flow_run(&self, execucao_id: &str) -> Result<Option<FlowRunRecord>, StoreError>;

    /// The ids of the runs a chat turn's tools started (`parent` is the turn's execution), oldest first.
    async fn runs_started_by(&self, parent: &str) -> Result<Vec<String>, StoreError>;

    /// Puts a flow run on record as `em_andamento` before it makes its first external call, in one
    /// transaction with its conversation (new: a flow's conversation is its own) and the input
    /// `message`; the turn's record later completes the same row.
    async fn begin_flow_run(
        &self,
        conversation: &Conversation,
        message: &ChatMessage,
        execucao_id: &str,
        input: &Value,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// The newest `limit` flow runs, newest first.
    async fn flow_runs(&self, limit: i64) -> Result<Vec<FlowRunSummary>, StoreError>;

    /// A run's outcome learnt after it ended (a recharge's follow-up): its status, and one more stage
    /// after the last (its output's `resultado` from then on), in one transaction.
    async fn settle_flow_run(
        &self,
        execucao_id: &str,
        status: RunStatus,
        stage: (&str, &Value),
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// Flow runs started since `since`, counted by status (`em_andamento` for one never finished).
    async fn flow_outcomes_since(&self, since: DateTime<Utc>) -> Result<Vec<(String, i64)>, StoreError>;

    /// Flow runs started on their own (API, CLI, batch) since `since`, oldest first: when and for
    /// which tenant (what a flow costs is counted per day and tenant over these). A flow a chat turn
    /// ran is part of that turn, and costed with it.
    async fn flow_runs_since(&self, since: DateTime<Utc>) -> Result<Vec<FlowRunAt>, StoreError>;
}

/// The money trail: confirmations consumed once, recharge attempts on record before they are sent
/// and resolved when answered.
#[async_trait]
pub trait RechargeStore: Send + Sync {
    /// Marks a pending confirmation used by `confirmation.consumer` and, in the same transaction, puts
    /// `attempt` on record as `enviando` with no send yet (an attempt already on record under its key
    /// is left as it is). A confirmation already used says whether by the same consumer.
    async fn consume_confirmation(
        &self,
        confirmation: Confirmation<'_>,
        attempt: Option<&RechargeAttempt>,
        now: DateTime<Utc>,
    ) -> Result<Consumption, StoreError>;

    /// Who consumed the confirmation `pending_id` (`Some("")` for one consumed before consumers were
    /// recorded).
    async fn confirmation_consumer(&self, pending_id: &str) -> Result<Option<String>, StoreError>;

    /// Records a recharge attempt as `enviando` (again, with one more send, for a key sent before) and,
    /// the first time, its follow-up: the request kept sealed while the outcome is unknown.
    async fn begin_recharge(
        &self,
        attempt: &RechargeAttempt,
        follow_up: Option<&NewFollowUp>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// Records how the attempt ended; an outcome that is known settles its follow-up (its request is
    /// dropped).
    async fn resolve_recharge(
        &self,
        idempotency_key: &str,
        status: AttemptStatus,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// The key of the newest attempt of `scope` with `fingerprint` whose outcome is unknown.
    async fn unresolved_recharge(&self, scope: &str, fingerprint: &str)
    -> Result<Option<String>, StoreError>;

    /// The newest `limit` recharge attempts, newest first.
    async fn recharge_attempts(&self, limit: i64) -> Result<Vec<RechargeAttemptRecord>, StoreError>;

    /// Takes up to `limit` follow-ups due by `now` (unknown outcome, not leased) and leases them until
    /// `lease_until`: among several processes and instances each is taken by one (on PostgreSQL with
    /// `FOR UPDATE SKIP LOCKED`), and one whose process died is taken again once its lease ran out.
    async fn claim_followups(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<FollowUp>, StoreError>;

    /// What the check of `idempotency_key`'s follow-up left (the lease is released).
    async fn followup_checked(
        &self,
        idempotency_key: &str,
        checked: &Checked,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// Follow-ups, those still unknown first (soonest check first), then the settled ones, newest
    /// first; only the unknown ones with `pending_only`.
    async fn followups(&self, pending_only: bool, limit: i64) -> Result<Vec<FollowUpView>, StoreError>;
}

/// The outbox: replies and notices waiting to go out, claimed by one sender at a time, with their
/// delivery statuses.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    async fn enqueue(&self, item: &NewOutboxItem, now: DateTime<Utc>) -> Result<i64, StoreError>;

    /// Takes up to `limit` due items (pending, or in flight past their lease) and leases them until
    /// `now + lease`. Two callers never get the same item.
    async fn claim(
        &self,
        limit: i64,
        now: DateTime<Utc>,
        lease: chrono::Duration,
    ) -> Result<Vec<OutboxItem>, StoreError>;

    async fn ack(&self, id: i64) -> Result<(), StoreError>;

    /// Gives the item back for another attempt at `next_attempt_at`, or marks it `failed` when its
    /// attempts are spent. Returns the new status.
    async fn retry_later(
        &self,
        id: i64,
        error: &str,
        next_attempt_at: DateTime<Utc>,
    ) -> Result<OutboxStatus, StoreError>;

    /// Remembers the id the channel gave a sent item, for the statuses it reports later.
    async fn record_sent(&self, id: i64, external_id: &str) -> Result<(), StoreError>;

    /// Records a status the channel reported for one of our messages (once per status); `false` when
    /// the message is not ours.
    async fn record_delivery_status(
        &self,
        external_id: &str,
        status: &str,
        error_code: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// The statuses reported for one of our messages, in the order they came.
    async fn delivery_statuses(&self, external_id: &str)
    -> Result<Vec<(String, Option<String>)>, StoreError>;

    /// Dead-letters an item at once (an error no retry can fix).
    async fn dead_letter(&self, id: i64, error: &str) -> Result<(), StoreError>;

    /// Holds an item until its conversation's user writes ([`OutboxStatus::Held`]), saying why.
    async fn hold(&self, id: i64, why: &str) -> Result<(), StoreError>;

    async fn outbox_item(&self, id: i64) -> Result<Option<OutboxItem>, StoreError>;

    /// How many items are in `status`.
    async fn outbox_count(&self, status: OutboxStatus) -> Result<i64, StoreError>;

    /// Items in `status`, oldest first.
    async fn outbox_items(&self, status: OutboxStatus, limit: i64) -> Result<Vec<OutboxItem>, StoreError>;

    /// Gives a dead-lettered item a fresh set of attempts; `false` when it is not dead-lettered.
    async fn requeue(&self, id: i64, now: DateTime<Utc>) -> Result<bool, StoreError>;

    /// Gives a claimed item back until `at` without spending an attempt: it was not tried (its pace).
    async fn defer(&self, id: i64, at: DateTime<Utc>) -> Result<(), StoreError>;

    /// Takes `pace.cost` slots of the pace `key` for a send at `now`, when the first is within
    /// `pace.max_wait` (one atomic write: every instance shares the pace). `Ok(slot)`: the send may go at
    /// `slot`; `Err(earliest)`: nothing taken, not before `earliest`.
    async fn take_pace(
        &self,
        key: &str,
        pace: Pace,
        now: DateTime<Utc>,
    ) -> Result<Result<DateTime<Utc>, DateTime<Utc>>, StoreError>;

    /// Gives back the `pace.cost` slots a send took of `key` and did not use (its other pace held it back).
    async fn give_back_pace(&self, key: &str, pace: Pace) -> Result<(), StoreError>;

    /// Nothing more goes under the pace `key` (of `pace`) before `until` (the channel said to slow down).
    async fn slow_pace(&self, key: &str, pace: Pace, until: DateTime<Utc>) -> Result<(), StoreError>;
}

/// A pace (the generic cell rate algorithm): one slot every `every`, `burst` slots at once at most, a
/// send of `cost` slots, taken only when its first slot is at most `max_wait` away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    pub every: std::time::Duration,
    pub burst: u32,
    pub cost: u32,
    pub max_wait: std::time::Duration,
}

/// Batch jobs and their ended lines (with the lines' flow runs, a group per transaction).
#[async_trait]
pub trait BatchStore: Send + Sync {
    /// Puts a batch job on record unless a job with its id is there; returns the job as stored (the
    /// caller checks that a rerun is of the same input).
    async fn open_batch(&self, job: &BatchJob) -> Result<BatchJob, StoreError>;

    async fn batch(&self, id: &str) -> Result<Option<BatchJob>, StoreError>;

    /// Records lines that ended with their flow runs, in one transaction (a line recorded again is
    /// replaced).
    async fn save_batch_lines(
        &self,
        job_id: &str,
        lines: &[BatchLine],
        runs: &[FlowRunRecord],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// The job's recorded lines, by line number.
    async fn batch_lines(&self, job_id: &str) -> Result<Vec<BatchLine>, StoreError>;

    /// How many recorded lines the job has per status.
    async fn batch_counts(&self, job_id: &str) -> Result<Vec<(LineStatus, i64)>, StoreError>;

    /// Marks the job finished; its input, kept only to resume it, is not kept any longer.
    async fn finish_batch(&self, job_id: &str, now: DateTime<Utc>) -> Result<(), StoreError>;

    /// Jobs sent over HTTP that have not finished, oldest first.
    async fn unfinished_batches(&self) -> Result<Vec<BatchJob>, StoreError>;

    /// Batch jobs, newest first; only `tenant_id`'s when given.
    async fn batches(&self, tenant_id: Option<&str>, limit: i64) -> Result<Vec<BatchJob>, StoreError>;

    /// Splits the job into `chunks` chunks that `serve` instances share (the first call does; later
    /// ones change nothing).
    async fn share_batch(&self, job_id: &str, chunks: i64) -> Result<(), StoreError>;

    /// Takes one chunk of the job that is not done and not leased (or whose lease ran out) for `owner`
    /// until `lease_until`: of several instances each chunk goes to one (on PostgreSQL `FOR UPDATE
    /// SKIP LOCKED`).
    async fn claim_batch_chunk(
        &self,
        job_id: &str,
        owner: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<Option<i64>, StoreError>;

    /// Keeps `owner`'s lease on the chunk until `lease_until`; `false` when it is no longer theirs.
    async fn renew_batch_chunk(
        &self,
        job_id: &str,
        chunk: i64,
        owner: &str,
        lease_until: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// `owner` gives the chunk back: done, or to be taken again from `not_before`.
    async fn release_batch_chunk(
        &self,
        job_id: &str,
        chunk: i64,
        owner: &str,
        done: bool,
        not_before: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// The job's chunks not done, and of those, how many are leased past `now`.
    async fn batch_chunks_open(&self, job_id: &str, now: DateTime<Utc>) -> Result<(i64, i64), StoreError>;

    /// Unfinished jobs sent over HTTP with work an instance could take now — not split yet, a chunk
    /// free, or every chunk done and the job not marked finished (its last instance died in between) —
    /// oldest first.
    async fn claimable_batches(&self, now: DateTime<Utc>) -> Result<Vec<String>, StoreError>;

    /// The numbers of the job's recorded lines in `from..=to`.
    async fn ended_lines(&self, job_id: &str, from: i64, to: i64) -> Result<Vec<i64>, StoreError>;
}

/// What operators read and the router's data: token usage, the audit trail, the intents, HTTP
/// idempotency records.
#[async_trait]
pub trait ReportStore: Send + Sync {
    async fn record_usage(&self, usage: &UsageRecord) -> Result<(), StoreError>;

    /// What each intent's turns cost since `since` (the last 7 days, by the caller's clock), per intent and
    /// action type.
    async fn usage_summary(&self, since: DateTime<Utc>) -> Result<Vec<UsageSummaryRow>, StoreError>;

    async fn upsert_intent(&self, intent: &IntentRecord, now: DateTime<Utc>) -> Result<(), StoreError>;

    async fn intents(&self) -> Result<Vec<IntentRecord>, StoreError>;

    /// Inserts unless a live (unexpired at `now`) record holds the key.
    async fn put_idempotency(
        &self,
        record: &IdempotencyRecord,
        now: DateTime<Utc>,
    ) -> Result<IdempotencyPut, StoreError>;

    async fn idempotency(
        &self,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>, StoreError>;

    /// Settles a record put as "in progress": stores the final response, or (`None`) removes the
    /// record so the request can be made again.
    async fn settle_idempotency(&self, key: &str, response: Option<&Value>) -> Result<(), StoreError>;

    /// Every turn's usage record since `since`, oldest first (the console's dashboard).
    async fn usage_since(&self, since: DateTime<Utc>) -> Result<Vec<UsageRecord>, StoreError>;

    /// What `tenant`'s turns and paid messages cost since `since`, in millionths of a real (unknown
    /// costs are not counted).
    async fn spent_since(&self, tenant: &str, since: DateTime<Utc>) -> Result<i64, StoreError>;

    /// What each tenant's turns and paid messages cost since `since`, in millionths of a real (unknown
    /// costs are not counted), by tenant.
    async fn spent_by_tenant_since(&self, since: DateTime<Utc>) -> Result<Vec<(String, i64)>, StoreError>;

    /// What each tenant spent since `since` and on what — conversations, flow runs, the known costs
    /// and how many had no price — summed by the database (for `/metrics`: no rows are read out).
    async fn spending_by_tenant_since(&self, since: DateTime<Utc>)
    -> Result<Vec<TenantSpending>, StoreError>;

    /// A paid message sent, with its cost.
    async fn record_message_cost(&self, cost: &super::MessageCost) -> Result<(), StoreError>;

    /// Every paid message since `since`, oldest first.
    async fn message_costs_since(&self, since: DateTime<Utc>) -> Result<Vec<super::MessageCost>, StoreError>;

    async fn record_audit(&self, record: &AuditRecord) -> Result<(), StoreError>;

    /// The newest `limit` support lookups, newest first.
    async fn audit_records(&self, limit: i64) -> Result<Vec<AuditRecord>, StoreError>;
}

/// What the product keeps and forgets: the sealing keys' secrets, re-sealing under a new key, a
/// data subject's records and their erasure.
#[async_trait]
pub trait KeepingStore: Send + Sync {
    /// The store's own secrets by name, opened (the index key; the mark that older rows are sealed).
    async fn store_secrets(&self) -> Result<HashMap<String, String>, StoreError>;

    /// Keeps `value` sealed under `name` unless a value is there already; returns the value kept.
    async fn put_store_secret(&self, name: &str, value: &str) -> Result<String, StoreError>;

    /// Seals every value of the [`SEALED`] columns that is not sealed under the current key: values
    /// written in clear before sealing existed, and values under an older key (a rotation). A batch at a
    /// time, each its own transaction, so it can be stopped anywhere and run again; `progress` is told
    /// each batch (`table.column`, values so far). Returns how many values it sealed.
    async fn reseal(
        &self,
        progress: &(dyn for<'p> Fn(&'p str, u64) + Send + Sync),
    ) -> Result<u64, StoreError>;

    /// The conversations and flow runs of `subject`: a user's (by user id), a card's (by its blind
    /// index), or everything not touched since a date (retention). A conversation's flow runs come
    /// with it.
    async fn subject_records(&self, subject: &Subject) -> Result<Records, StoreError>;

    /// Deletes `records` and everything that hangs on them, in one transaction ([`forget`]).
    async fn forget(&self, records: &Records) -> Result<(), StoreError>;
}

/// A WhatsApp template's state as Meta last reported it (its lifecycle webhooks, or a send's error).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TemplateState {
    pub name: String,
    pub language: String,
    /// `None`: not reported (a category change alone).
    pub status: Option<String>,
    pub category: Option<String>,
    pub reason: Option<String>,
    pub updated_at: DateTime<Utc>,
}

/// WhatsApp's contacts and templates: when each user last wrote (the 24-hour window is counted from
/// it) and what Meta said of each template.
#[async_trait]
pub trait ContactStore: Send + Sync {
    /// `wa_id` wrote at `at` (kept when later than what is on record).
    async fn touch_contact(&self, wa_id: &str, at: DateTime<Utc>) -> Result<(), StoreError>;

    /// When `wa_id` last wrote.
    async fn last_inbound(&self, wa_id: &str) -> Result<Option<DateTime<Utc>>, StoreError>;

    /// Records what Meta said of a template: a status, a category, or both (what is `None` stays).
    async fn set_template_state(&self, state: &TemplateState) -> Result<(), StoreError>;

    async fn template_states(&self) -> Result<Vec<TemplateState>, StoreError>;

    /// A user's answer on business-initiated messages changes: their current answer and the change's
    /// line, in one transaction.
    async fn record_consent(&self, change: &ConsentChange) -> Result<(), StoreError>;

    /// A user's current answer (`None`: never given).
    async fn consent(&self, wa_id: &str) -> Result<Option<ConsentChange>, StoreError>;

    /// Every change of a user's answer, oldest first.
    async fn consent_events(&self, wa_id: &str) -> Result<Vec<ConsentChange>, StoreError>;

    /// The person a WhatsApp notification names on business number `number` (`seen`: their phone, their
    /// BSUID, one at least): the person any of them already is, else a new one keyed by the phone (or
    /// the BSUID); every identifier seen is linked to them. The key is the user id of their conversation.
    async fn whatsapp_person(
        &self,
        number: &str,
        seen: &WhatsAppIds,
        now: DateTime<Utc>,
    ) -> Result<String, StoreError>;

    /// The person `identifier` (a phone or a BSUID) is on `number`, while it is theirs.
    async fn whatsapp_person_of(&self, number: &str, identifier: &str) -> Result<Option<String>, StoreError>;

    /// `from` became `to` on `number` (a new BSUID after a new phone: `user_id_update`; a new phone:
    /// `user_changed_number`): `to` is linked to `from`'s person and what they were reached by retires.
    /// The person, when `from` was known.
    async fn whatsapp_moved(
        &self,
        number: &str,
        (from, to): (&str, &str),
        now: DateTime<Utc>,
    ) -> Result<Option<String>, StoreError>;

    /// Where `person` is reached on `number`: their current phone and BSUID (empty when none is on
    /// record: a person known by their phone only, from before identities were kept).
    async fn whatsapp_address(&self, number: &str, person: &str) -> Result<WhatsAppIds, StoreError>;

    /// Takes the low-balance notice of the card `card_hash` if one is due: it is not below the limit
    /// since its last notice, and none went since `not_before`. One conditional write, so of several
    /// flows at once one takes it. Returns whether this call took it.
    async fn take_low_balance_notice(
        &self,
        card_hash: &str,
        not_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// The card's balance was read above the limit: its next low balance is a new crossing.
    async fn balance_recovered(&self, card_hash: &str) -> Result<(), StoreError>;
}

/// What WhatsApp names a person by: their phone (`wa_id`), withheld from a username adopter, and their
/// business-scoped user id (`CC.…`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WhatsAppIds {
    pub phone: Option<String>,
    pub bsuid: Option<String>,
}

/// A change of a user's consent to business-initiated messages: who made it, when, through what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConsentChange {
    pub wa_id: String,
    pub opted_in: bool,
    /// Through what: `chat` (the user's own words), `importacao`, `api`…
    pub source: String,
    /// Who made it: the user, or the key or command that imported it.
    pub who: String,
    pub at: DateTime<Utc>,
}

/// How conversations end (issue "Step 22"): the stretches gone quiet or ended, what happened in
/// each, their outcomes, and the satisfaction question's answers.
#[async_trait]
pub trait OutcomeStore: Send + Sync {
    /// Conversations of agents other than `except_agent` active since `horizon` whose last stretch
    /// has no outcome yet and no open case, and which went quiet by `quiet_before` or ended (their
    /// last turn ended the chat, or a case was closed with them); at most `limit`, oldest first.
    async fn stretches_over(
        &self,
        (horizon, quiet_before): (DateTime<Utc>, DateTime<Utc>),
        except_agent: &str,
        limit: i64,
    ) -> Result<Vec<StretchHead>, StoreError>;

    /// What happened in `head`'s stretch: its turns, its case, its Pix charges, its paid messages.
    async fn stretch(&self, head: &StretchHead) -> Result<Stretch, StoreError>;

    /// The newest resolved outcome of the same person (tenant, channel, user) on `assunto` that
    /// ended at `since` or later.
    async fn resolved_before(
        &self,
        head: &StretchHead,
        assunto: &str,
        since: DateTime<Utc>,
    ) -> Result<Option<String>, StoreError>;

    /// Puts an outcome on record, and marks the one it reopens; `false` when the stretch had one
    /// already (another instance was first).
    async fn record_outcome(&self, outcome: &OutcomeRecord) -> Result<bool, StoreError>;

    /// Stretches `head`'s previous outcome to `head.ate`: what happened since belongs to it (the
    /// answer to its satisfaction question). `false` when it has no previous outcome.
    async fn extend_outcome(&self, head: &StretchHead) -> Result<bool, StoreError>;

    /// When the same person (tenant, channel, user) was last asked the satisfaction question.
    async fn last_survey(&self, head: &StretchHead) -> Result<Option<DateTime<Utc>>, StoreError>;

    /// The satisfaction question put to `outcome`'s person at `at`: `state` becomes the
    /// conversation's, unless it moved since `head.ate` (they wrote again: `false`, nothing sent);
    /// `message` is kept in its history and `outbox` carries it.
    async fn ask_survey(
        &self,
        (head, outcome): (&StretchHead, &str),
        state: &serde_json::Map<String, Value>,
        (message, outbox): (&ChatMessage, &[NewOutboxItem]),
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// `nota` (1–5) for `outcome`, once: `false` when it had one.
    async fn record_score(&self, outcome: &str, nota: i32, at: DateTime<Utc>) -> Result<bool, StoreError>;

    /// Every outcome whose stretch ended since `since`, oldest first.
    async fn outcomes_since(&self, since: DateTime<Utc>) -> Result<Vec<OutcomeRecord>, StoreError>;
}
