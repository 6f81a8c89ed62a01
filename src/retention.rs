//! How long the product keeps what people said, and the data subject's rights (LGPD): access to
//! everything kept about a person ([`export`]) and its erasure ([`erase`]).
//!
//! Retention (`[retencao] dias`, 180 by default) deletes conversations untouched for that long — with
//! their messages, executions, context, tasks and outbox items — and flow runs started that long ago.
//! What stays is what no person can be found in and what the money trail needs: the usage figures and
//! the recharge attempts (masked card, value, key, outcome), no longer tied to a conversation or user.
//! `serve` applies it at start and every hour; `vt-agent retencao aplicar` is the same for cron.
//!
//! Both reach the embedded simulator's book in the data directory, when the simulator is in use: an
//! erased card's credits go from it, and its history older than the window is folded away
//! (`vt_simulators::systems::book`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use vt_store::{AuditRecord, Records, StoreError, Subject};

/// How often `serve` applies retention.
pub(crate) const EVERY: Duration = Duration::from_secs(3600);

/// `[retencao]` in the configuration file.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionConfig {
    /// Conversations untouched and flow runs started this many days ago are deleted.
    pub dias: u32,
    /// The embedded simulator's book, which retention reaches too; set when the configuration is
    /// loaded with no real systems.
    #[serde(skip)]
    pub simulator_book: Option<PathBuf>,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            dias: 180,
            simulator_book: None,
        }
    }
}

impl RetentionConfig {
    /// Checks the value when loaded; the error is `(field, why)`.
    pub(crate) fn validate(&self) -> Result<(), (&'static str, &'static str)> {
        if !(1..=36_500).contains(&self.dias) {
            return Err(("retencao.dias", "deve ser de 1 a 36500 dias"));
        }
        Ok(())
    }

    /// The moment before which records go, at `now`.
    pub(crate) fn cutoff(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        now - chrono::Duration::days(i64::from(self.dias))
    }
}

/// Deletes what is older than the retention period allows; returns what went.
pub async fn apply(
    store: &dyn vt_store::KeepingStore,
    config: &RetentionConfig,
    now: DateTime<Utc>,
) -> Result<Records, StoreError> {
    let subject = Subject::OlderThan(config.cutoff(now));
    let records = store.subject_records(&subject).await?;
    if !records.is_empty() {
        store.forget(&records).await?;
    }
    reach_book(config.simulator_book.as_deref(), &subject);
    Ok(records)
}

/// What `subject` has in the simulator's `book` goes too (a card's credits; history before a cutoff).
/// A book that cannot be rewritten is logged, never fatal: the store's records went already.
fn reach_book(book: Option<&Path>, subject: &Subject) {
    let Some(book) = book else {
        return;
    };
    let gone = match subject {
        Subject::Card(digits) => vt_simulators::systems::book::forget_card(book, digits),
        Subject::OlderThan(cutoff) => vt_simulators::systems::book::forget_before(book, *cutoff),
        // The book knows cards, not people.
        Subject::User(_) => return,
    };
    match gone {
        Ok(lines) if lines > 0 => tracing::info!(lines, "simulator book rewritten"),
        Ok(_) => {}
        Err(e) => tracing::error!(error = %e, path = %book.display(), "simulator book not rewritten"),
    }
}

/// Applies retention once, and logs what it deleted (`serve` does it every [`EVERY`]).
pub(crate) async fn pass(store: &dyn vt_store::KeepingStore, config: &RetentionConfig) {
    match apply(store, config, Utc::now()).await {
        Ok(gone) if !gone.is_empty() => tracing::info!(
            conversations = gone.conversations.len(),
            flow_runs = gone.flow_runs.len(),
            "retention applied"
        ),
        Ok(_) => {}
        Err(e) => tracing::error!(error = %e, "retention could not be applied"),
    }
}

/// Everything the product keeps about `subject`, in clear (it is for the person): conversations with
/// their messages, state and memory, flow runs with their input and stages, and the recharge attempts
/// made in them.
pub async fn export(store: &vt_store::Stores, subject: &Subject) -> Result<Value, StoreError> {
    let records = store.keeping.subject_records(subject).await?;
    let mut conversations = Vec::new();
    for id in &records.conversations {
        let Some(c) = store.conversations.conversation(id).await? else {
            continue;
        };
        let messages: Vec<Value> = store
            .conversations
            .messages(id)
            .await?
            .into_iter()
            .map(|m| json!({"em": m.created_at, "mensagem": m.message}))
            .collect();
        conversations.push(json!({
            "id": c.id, "agente": c.agent_id, "canal": c.channel, "usuario": c.user_id,
            "estado": c.state, "memoria": c.memory, "mensagens": messages,
        }));
    }
    let mut flows = Vec::new();
    for id in &records.flow_runs {
        if let Some(run) = store.flows.flow_run(id).await? {
            flows.push(json!({
                "execucao_id": run.execucao_id, "status": run.status, "entrada": run.input,
                "etapas": run.stages.iter().map(|(etapa, saida)| json!({"etapa": etapa, "saida": saida})).collect::<Vec<_>>(),
                "em": run.created_at,
            }));
        }
    }
    let origins: Vec<&String> = records.conversations.iter().collect();
    let attempts: Vec<Value> = store
        .recharges
        .recharge_attempts(10_000)
        .await?
        .into_iter()
        .filter(|a| {
            origins.contains(&&a.attempt.origin) || records.flow_runs.contains(&a.attempt.execucao_id)
        })
        .map(|a| {
            json!({"chave": a.attempt.idempotency_key, "cartao": a.attempt.cartao_mascarado,
            "valor": a.attempt.valor, "moeda": a.attempt.moeda, "status": a.status})
        })
        .collect();
    Ok(json!({
        "titular": describe(subject),
        "conversas": conversations,
        "execucoes": flows,
        "recargas": attempts,
    }))
}

/// Erases everything kept about `subject` and puts on record that an erasure happened (who asked, when
/// — not what was erased). Returns what went.
pub async fn erase(
    store: &vt_store::Stores,
    subject: &Subject,
    (by, tenant): (&str, &str),
    simulator_book: Option<&Path>,
) -> Result<Records, StoreError> {
    let records = store.keeping.subject_records(subject).await?;
    store.keeping.forget(&records).await?;
    reach_book(simulator_book, subject);
    store
        .reports
        .record_audit(&AuditRecord {
            at: Utc::now(),
            support_user: by.to_owned(),
            tenant_id: tenant.to_owned(),
            channel: "titular".into(),
            cartao: String::new(),
            cartao_hash: String::new(),
            outcome: "titular_apagado".into(),
            conversation_id: None,
        })
        .await?;
    Ok(records)
}

/// The subject as the export names it: a user id as it is, a card masked.
fn describe(subject: &Subject) -> Value {
    match subject {
        Subject::User(id) => json!({"usuario": id}),
        Subject::Card(card) => json!({"cartao": vt_domain::vt::mask_card(card)}),
        Subject::OlderThan(t) => json!({"antes_de": t}),
    }
}

/// A subject from what an operator typed: a user id, or a card (its digits, any separators).
pub(crate) fn subject(usuario: Option<&str>, cartao: Option<&str>) -> Result<Subject, &'static str> {
    match (usuario.map(str::trim), cartao) {
        (Some(u), None) if !u.is_empty() => Ok(Subject::User(u.to_owned())),
        (None, Some(c)) => match vt_domain::vt::parse::cards(c).as_slice() {
            [one] => Ok(Subject::Card(one.clone())),
            _ => Err("cartao: informe um número de cartão (8 a 19 dígitos)"),
        },
        _ => Err("informe --usuario ID ou --cartao NÚMERO (um dos dois)"),
    }
}
