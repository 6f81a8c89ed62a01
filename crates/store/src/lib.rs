//! `vt-store`: what vt-agent keeps. One [`Store`] trait, two implementations through sqlx — SQLite (default, a file under
//! the data directory, or `:memory:` for tests) and PostgreSQL (several instances sharing state). Each
//! backend has its own migrations, run at connect; there is no `sqlx::Any`. Both pass one conformance
//! suite (`tests/conformance/`, in this crate).
//!
//! A turn is written in one transaction ([`ConversationStore::save_turn`]), so a crash leaves either the whole turn
//! or none of it — except the user's message, which is written on its own *before* the turn runs.
#![cfg_attr(test, allow(clippy::disallowed_methods))] // tests convert JSON freely; see `vt_contract::json`

pub mod concerns;
pub mod followup;
mod journal;
pub mod locks;
pub mod postgres;
pub mod records;
mod rows;
mod sql;
pub mod seal;
pub mod sqlite;
mod writes;

/// What tests above the store share with its own: a PostgreSQL store in a private schema.
#[cfg(feature = "testkit")]
pub mod testkit;

pub use followup::{Checked, FollowUp, FollowUpView, NewFollowUp, OUTCOME_CASE, RecargasConfig};
pub use journal::StoreJournal;
pub use locks::{LocalLocks, TurnLock};
pub use postgres::PgStore;
pub use sqlite::SqliteStore;

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use serde_json::Value;

use vt_engine::Conversation;
use vt_engine::llm::ChatMessage;

pub use concerns::*;
pub use records::*;
pub use records::{Sent, attempt_status};

/// The whole store, one trait per concern above: what the product keeps, on SQLite or PostgreSQL.
/// A `dyn Store` reaches every concern's methods; a test double implements the concerns one by one.
#[async_trait]
pub trait Store:
    ConversationStore
    + FlowStore
    + RechargeStore
    + OutboxStore
    + BatchStore
    + ReportStore
    + KeepingStore
    + CaseStore
    + DeskStore
    + ReviewStore
    + ContactStore
    + PixStore
    + OutcomeStore
    + RecurrenceStore
{
    /// `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;

    /// Write transactions committed through this handle, where the backend counts them (SQLite: each
    /// one a sync of the WAL). For the benches.
    fn commits(&self) -> Option<u64> {
        None
    }
}

/// The store's concerns, each as the narrow trait its reader reads: what the composition hands to
/// HTTP, the console, batch, retention and the outbox worker in place of the whole store. Writes with
/// a rule go through the job service that owns the rule (`service::jobs`).
#[derive(Clone)]
pub struct Stores {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    pub conversations: Arc<dyn ConversationStore>,
    pub flows: Arc<dyn FlowStore>,
    pub recharges: Arc<dyn RechargeStore>,
    pub outbox: Arc<dyn OutboxStore>,
    pub batches: Arc<dyn BatchStore>,
    pub reports: Arc<dyn ReportStore>,
    pub keeping: Arc<dyn KeepingStore>,
    pub cases: Arc<dyn CaseStore>,
    pub desk: Arc<dyn DeskStore>,
    pub review: Arc<dyn ReviewStore>,
    pub contacts: Arc<dyn ContactStore>,
    pub pix: Arc<dyn PixStore>,
    pub outcomes: Arc<dyn OutcomeStore>,
    pub recurrences: Arc<dyn RecurrenceStore>,
}

impl Stores {
    pub fn of(store: &Arc<dyn Store>) -> Self {
        Self {
            backend: store.backend(),
            conversations: store.clone(),
            flows: store.clone(),
            recharges: store.clone(),
            outbox: store.clone(),
            batches: store.clone(),
            reports: store.clone(),
            keeping: store.clone(),
            cases: store.clone(),
            desk: store.clone(),
            review: store.clone(),
            contacts: store.clone(),
            pix: store.clone(),
            outcomes: store.clone(),
            recurrences: store.clone(),
        }
    }
}

impl From<Arc<dyn Store>> for Stores {
    fn from(store: Arc<dyn Store>) -> Self {
        Self::of(&store)
    }
}

/// What a turn reads of its conversation before it runs.
#[derive(Debug, Default)]
pub struct TurnReads {
    /// The conversation (`None`: a new one).
    pub conversation: Option<Conversation>,
    /// The compressed context: it stands in for the older history in the prompt.
    pub context: Option<ConversationContext>,
    /// The case open for the conversation ([`CaseStore::open_case_of`]).
    pub open_case: Option<Case>,
}

/// Opens the configured store: PostgreSQL when `database_url` is `postgres://…`, else SQLite in
/// `data_dir` (created on first use). `sqlite::memory:` opens an in-memory database.
pub async fn open(
    database_url: Option<&str>,
    data_dir: &Path,
    usage: Usage,
) -> Result<Arc<dyn Store>, StoreError> {
    match database_url {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            Ok(Arc::new(PgStore::connect(url).await?))
        }
        Some(url) if url.starts_with("sqlite:") => Ok(Arc::new(SqliteStore::connect_for(url, usage).await?)),
        Some(other) => Err(StoreError::Invalid(format!(
            "database_url {:?} não é suportada: use postgres://… ou sqlite:…",
            other.split('@').next_back().unwrap_or_default()
        ))),
        None => {
            std::fs::create_dir_all(data_dir).map_err(|source| StoreError::DataDir {
                path: data_dir.display().to_string(),
                source,
            })?;
            let path = data_dir.join("vt-agent.db");
            Ok(Arc::new(
                SqliteStore::connect_for(&format!("sqlite://{}", path.display()), usage).await?,
            ))
        }
    }
}

/// The sealed columns: `(table, column, JSON)`; a JSON column holds a sealed JSON text, a text column
/// a sealed text ([`seal`]). Everything a person said or that was done for them; the ids, statuses,
/// times, masked cards and hashes beside them stay clear for lookups.
pub const SEALED: &[(&str, &str, bool)] = &[
    ("conversations", "state", true),
    ("conversations", "memory", true),
    ("conversations", "skill_window", true),
    ("conversations", "handoff", true),
    ("messages", "body", true),
    ("executions", "model_calls", true),
    ("executions", "events", true),
    ("flow_runs", "input", true),
    ("flow_stages", "saida", true),
    ("task_runs", "plan", true),
    ("task_runs", "steps", true),
    ("task_runs", "final_result", false),
    ("conversation_context", "summary", false),
    ("conversation_context", "key_facts", true),
    ("outbox", "payload", true),
    ("idempotency_records", "response", true),
    ("batch_lines", "result", true),
    ("batch_jobs", "source", false),
    ("store_secrets", "value", false),
    ("cases", "reason", false),
    ("cases", "case_file", true),
    ("case_events", "detail", false),
    ("recharge_followups", "request", false),
    ("pix_charges", "request", true),
    ("review_items", "note", false),
    ("review_items", "expectation", true),
];

/// Rows a [`KeepingStore::reseal`] batch handles in one transaction.
const RESEAL_BATCH: i64 = 500;

/// Names in `store_secrets`.
const SECRET_INDEX_KEY: &str = "chave_indice";
const SECRET_SEALED: &str = "selado";

/// Seals what an older version wrote in clear (once: the store remembers it did), then hands the
/// payment tokens' fingerprints and the blind indexes the store's index key — random, made at the
/// first start, kept sealed in the store: stable across key rotations, useless without the data key.
/// Returns the index key, which the key file keeps once this has run, so later starts need not ask
/// the store ([`use_index_key`]).
pub async fn prepare_sealing(store: &dyn Store) -> Result<[u8; 32], StoreError> {
    let secrets = store.store_secrets().await?;
    if !secrets.contains_key(SECRET_SEALED) {
        let sealed = store.reseal(&|_, _| {}).await?;
        if sealed > 0 {
            tracing::info!(values = sealed, "values written before sealing are now sealed");
        }
        store.put_store_secret(SECRET_SEALED, "1").await?;
    }
    let index = match secrets.get(SECRET_INDEX_KEY) {
        Some(k) => k.clone(),
        None => {
            let key = seal::DataKey::generate();
            store.put_store_secret(SECRET_INDEX_KEY, &key.to_base64()).await?
        }
    };
    let key = seal::decode_key(&index)
        .ok_or_else(|| StoreError::Invalid("a chave de índice guardada está danificada".into()))?;
    use_index_key(key);
    Ok(key)
}

/// Keys the payment tokens' fingerprints and the blind indexes with the store's index key.
pub fn use_index_key(key: [u8; 32]) {
    vt_domain::vt::secret::set_index_key(key);
}

/// Whose records: a data subject (by user id or card) or, for retention, everything older than a date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    User(String),
    /// A card's digits (the store looks it up by its blind index).
    Card(String),
    OlderThan(DateTime<Utc>),
}

/// The records a [`Subject`] has: conversations (with their messages, executions, context, tasks,
/// outbox items) and flow runs (with their stages).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Records {
    pub conversations: Vec<String>,
    pub flow_runs: Vec<String>,
}

impl Records {
    pub fn is_empty(&self) -> bool {
        self.conversations.is_empty() && self.flow_runs.is_empty()
    }
}

/// A blind-index row: the card's keyed hash, what holds it (`conversa`, `fluxo`), its id.
pub type CardRef = (String, &'static str, String);

/// The blind-index rows of the cards a conversation holds ([`vt_domain::tools::cartao::cards_held`]).
pub fn conversation_card_refs(c: &Conversation) -> Vec<CardRef> {
    vt_domain::tools::cartao::cards_held(&c.state, &c.memory)
        .into_iter()
        .map(|card| (seal::card_index(&card), "conversa", c.id.clone()))
        .collect()
}

/// The tenant a flow input names (a parsed input always names one), kept on its run's row
/// (`flow_runs.tenant_id`) so what flows cost can be told per tenant.
pub fn flow_tenant(input: &Value) -> Option<&str> {
    input.get("tenant_id").and_then(Value::as_str)
}

/// The keyed hash of a flow run's card, kept on its row (`flow_runs.card_hash`) from its start.
pub fn flow_card_hash(input: &Value) -> Option<String> {
    let card = input.get("cartao").and_then(Value::as_str).unwrap_or_default();
    vt_domain::vt::card::card_numbers_in(card)
        .first()
        .map(|digits| seal::card_index(digits))
}

/// The blind-index rows a store wrote, once their transaction committed: a conversation holds the same
/// cards turn after turn, and its rows need writing once. Bounded; [`forget`] empties it.
#[derive(Debug, Default)]
pub struct Indexed(std::sync::Mutex<std::collections::HashSet<CardRef>>);

const INDEXED_AT_MOST: usize = 100_000;

impl Indexed {
    fn known(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<CardRef>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `refs` as written, once their transaction committed.
    pub fn committed(&self, refs: Vec<CardRef>) {
        let mut known = self.known();
        if known.len() + refs.len() > INDEXED_AT_MOST {
            known.clear();
        }
        known.extend(refs);
    }

    pub fn clear(&self) {
        self.known().clear();
    }

    /// Those of `refs` not known to be written, each once.
    pub fn unknown(&self, refs: &[CardRef]) -> Vec<CardRef> {
        let known = self.known();
        let mut new: Vec<CardRef> = refs.iter().filter(|r| !known.contains(*r)).cloned().collect();
        new.sort();
        new.dedup();
        new
    }
}

/// Writes the blind-index rows the store has not written yet (a card once indexed stays indexed);
/// returns them, for [`Indexed::committed`] once the transaction commits.
pub async fn insert_card_refs<DB>(
    conn: &mut DB::Connection,
    indexed: &Indexed,
    refs: &[CardRef],
) -> Result<Vec<CardRef>, StoreError>
where
    DB: sqlx::Database + sqlx::database::HasStatementCache,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> &'q String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'static str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    StoreError: From<sqlx::Error>,
{
    let new = indexed.unknown(refs);
    if !new.is_empty() {
        for chunk in new.chunks(ROWS_PER_INSERT) {
            let mut q = sqlx::QueryBuilder::<DB>::new("");
            card_ref_rows(&mut q, chunk);
            q.build().persistent(false).execute(&mut *conn).await?;
        }
    }
    Ok(new)
}

/// The blind-index rows `refs`, in one insert that skips those already there.
pub fn card_ref_rows<DB>(q: &mut sqlx::QueryBuilder<DB>, refs: &[CardRef])
where
    DB: sqlx::Database,
    for<'q> &'q String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'static str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    q.push("INSERT INTO card_refs (card_hash, kind, ref_id) ");
    q.push_values(refs, |mut b, (hash, kind, id)| {
        b.push_bind(hash).push_bind(*kind).push_bind(id);
    });
    q.push(" ON CONFLICT DO NOTHING");
}

/// `head` (ending in `IN (`) with `ids` bound as the list, closed.
fn in_list<DB>(head: &str, ids: &[String]) -> sqlx::QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let mut q = sqlx::QueryBuilder::<DB>::new(head);
    let mut list = q.separated(", ");
    for id in ids {
        list.push_bind(id.clone());
    }
    // Every parenthesis the head opened (a subquery's too) is closed.
    q.push(")".repeat(head.matches('(').count() - head.matches(')').count()));
    q
}

/// The flow runs the executions of `conversations` ran (their own, and the sub-runs of their tools).
pub async fn flow_runs_of<DB>(
    conn: &mut DB::Connection,
    conversations: &[String],
) -> Result<Vec<String>, StoreError>
where
    DB: sqlx::Database + sqlx::database::HasStatementCache,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Decode<'q, DB> + sqlx::Type<DB>,
    (String,): for<'r> sqlx::FromRow<'r, DB::Row>,
    usize: sqlx::ColumnIndex<DB::Row>,
    StoreError: From<sqlx::Error>,
{
    let mut runs = Vec::new();
    for chunk in conversations.chunks(ROWS_PER_INSERT) {
        // A run a kill interrupted has no execution: its row names its conversation.
        for head in [
            "SELECT f.execucao_id FROM flow_runs f JOIN executions e
               ON f.execucao_id = e.execucao_id OR f.parent_execucao_id = e.execucao_id
             WHERE e.conversation_id IN (",
            "SELECT execucao_id FROM flow_runs WHERE conversation_id IN (",
        ] {
            let ids: Vec<String> = in_list::<DB>(head, chunk)
                .build_query_scalar()
                .fetch_all(&mut *conn)
                .await?;
            runs.extend(ids);
        }
    }
    Ok(runs)
}

/// Deletes `records` with everything that hangs on them, in the caller's transaction. The usage
/// figures, the recharge attempts (masked card, value, key, outcome) and the Pix charges (txid,
/// payment, amount, status) — the trail of money movements — stay, no longer tied to the conversation
/// or its user.
pub async fn forget<DB>(
    conn: &mut DB::Connection,
    indexed: &Indexed,
    records: &Records,
) -> Result<(), StoreError>
where
    DB: sqlx::Database + sqlx::database::HasStatementCache,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    StoreError: From<sqlx::Error>,
{
    const OF_FLOWS: &[&str] = &[
        "DELETE FROM flow_stages WHERE execucao_id IN (",
        "DELETE FROM flow_runs WHERE execucao_id IN (",
        "DELETE FROM card_refs WHERE ref_id IN (",
        "UPDATE recharge_attempts SET scope = 'apagado', origin = 'apagada' WHERE execucao_id IN (",
    ];
    const OF_CONVERSATIONS: &[&str] = &[
        "DELETE FROM messages WHERE conversation_id IN (",
        "DELETE FROM executions WHERE conversation_id IN (",
        "DELETE FROM conversation_context WHERE conversation_id IN (",
        "DELETE FROM task_runs WHERE conversation_id IN (",
        "DELETE FROM outbox WHERE conversation_id IN (",
        // The support board's items are keyed by their case (`caso:ID`, see `service::cases`).
        "DELETE FROM outbox WHERE conversation_id IN (SELECT 'caso:' || id FROM cases WHERE conversation_id IN (",
        // A WhatsApp user's last-message time and consent go with their conversation.
        "DELETE FROM whatsapp_contacts WHERE wa_id IN (SELECT user_id FROM conversations WHERE channel = 'whatsapp' AND id IN (",
        "DELETE FROM whatsapp_consent WHERE wa_id IN (SELECT user_id FROM conversations WHERE channel = 'whatsapp' AND id IN (",
        "DELETE FROM whatsapp_consent_events WHERE wa_id IN (SELECT user_id FROM conversations WHERE channel = 'whatsapp' AND id IN (",
        // Every phone and BSUID they were known by.
        "DELETE FROM whatsapp_identities WHERE person IN (SELECT user_id FROM conversations WHERE channel = 'whatsapp' AND id IN (",
        "DELETE FROM conversation_leases WHERE conversation_id IN (",
        "DELETE FROM review_items WHERE conversation_id IN (",
        "DELETE FROM case_events WHERE conversation_id IN (",
        "DELETE FROM cases WHERE conversation_id IN (",
        "DELETE FROM consumed_confirmations WHERE origin IN (",
        "DELETE FROM card_refs WHERE ref_id IN (",
        "UPDATE usage_metrics SET conversation_id = 'apagada' WHERE conversation_id IN (",
        // How their conversations ended stays as a figure, untied from them.
        "UPDATE desfechos SET conversation_id = 'apagada:' || id WHERE conversation_id IN (",
        "UPDATE recharge_attempts SET scope = 'apagado', origin = 'apagada' WHERE origin IN (",
        // A Pix charge is money trail too: its txid, payment, amount and status stay; the recharge it
        // carried (the card) and its tie to the person go.
        "UPDATE pix_charges SET request = 'null', conversation_id = 'apagada' WHERE conversation_id IN (",
        "DELETE FROM conversations WHERE id IN (",
    ];
    indexed.clear();
    for (ids, statements) in [
        (&records.flow_runs, OF_FLOWS),
        (&records.conversations, OF_CONVERSATIONS),
    ] {
        for chunk in ids.chunks(ROWS_PER_INSERT) {
            for head in statements {
                in_list::<DB>(head, chunk)
                    .build()
                    .persistent(false)
                    .execute(&mut *conn)
                    .await?;
            }
        }
    }
    Ok(())
}

/// Rows to one multi-row INSERT: well under SQLite's limit of 32,766 parameters (PostgreSQL's is 65,535).
pub const ROWS_PER_INSERT: usize = 500;

/// Flow runs to one PostgreSQL query of [`writes::Writes`]: with their stages (a dozen at most each)
/// well under PostgreSQL's 65,535 parameters for the whole statement (SQLite's limit is per statement:
/// a group's runs go in one query there).
pub const RUNS_PER_QUERY: usize = 40;

/// What the process opening the store will do with it, which decides how many connections it opens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Usage {
    /// Serve many at once (`serve`, `chat`, `batch`, tests): on SQLite a writer and a pool of readers.
    #[default]
    Service,
    /// One command that does one thing and exits: on SQLite one connection reads and writes.
    OneShot,
}

/// What writing a conversation's row does to a row that is already there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Replace its state (a turn's commit).
    Update,
    /// Leave it alone (accepting a message into a conversation that may already exist).
    Keep,
}

/// The role column of a message.
pub fn role(m: &ChatMessage) -> &'static str {
    match m {
        ChatMessage::User { .. } => "user",
        ChatMessage::Assistant { .. } => "assistant",
        ChatMessage::Tool { .. } => "tool",
        ChatMessage::HumanAgent { .. } => "human_agent",
    }
}

/// What the console's search reads of a message: its text with cards masked and secrets out (the
/// body itself is sealed).
/// What people read is searched — the user's words and the assistant's answers; a tool's traffic is
/// not (empty), which also keeps a flow's stage-by-stage messages from being written twice.
pub fn search_text(message: &ChatMessage) -> String {
    let text = match message {
        ChatMessage::User { content } | ChatMessage::HumanAgent { content, .. } => content.as_str(),
        ChatMessage::Assistant {
            content: Some(content),
            ..
        } => content.as_str(),
        ChatMessage::Assistant { content: None, .. } | ChatMessage::Tool { .. } => return String::new(),
    };
    vt_contract::redact::secrets(&vt_domain::vt::card::mask_cards_in(text)).into_owned()
}
