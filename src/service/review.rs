//! The review queue (issue "Step 38"): bot messages a support agent flagged with a reason, and those
//! the product puts there itself — a low score, a stretch reopened, a case opened at the assistant's
//! limit or right after its answer. A reviewer labels failure categories (`[revisao] categorias`)
//! and writes what should have happened; the item becomes a transcript, personal data replaced
//! (`transcript::review`), in the folder the operator's CI runs (`vt-agent test <pasta>`), and the
//! queue reads that run's report to tell which labelled items are green now.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use chrono::{DateTime, Datelike, Duration, Utc};
use serde::Deserialize;
use vt_domain::vt::card::mask_cards_in;
use vt_engine::llm::ChatMessage;
use vt_store::{Expectation, NewReviewItem, ReviewItem, ReviewLabel, StoreError, StoredMessage};

use super::jobs::Review;
use crate::transcript::pseudonym::Pseudonyms;

/// Why a support agent flags a bot message: `(key, label)`.
pub(crate) const REASONS: [(&str, &str); 6] = [
    ("informacao_incorreta", "Informação incorreta"),
    ("resposta_incompleta", "Resposta incompleta"),
    ("acao_errada", "Ação errada"),
    ("nao_entendeu", "Não entendeu"),
    ("tom_inadequado", "Tom inadequado"),
    ("outro", "Outro"),
];

/// Who put an item in the queue: a support agent, or the product and why.
pub(crate) const SOURCES: [(&str, &str); 5] = [
    (FLAGGED, "Sinalizada por atendente"),
    ("csat_baixo", "Nota baixa na pesquisa"),
    ("reaberta", "Voltou pelo mesmo assunto"),
    ("limite_do_assistente", "Limite do assistente"),
    ("caso_apos_resposta", "Pediu uma pessoa logo depois"),
];

const FLAGGED: &str = "sinalizada";

/// A note's length, and each expected text's.
const MAX_NOTE: usize = 1_000;

/// How far back the product looks for what it enqueues itself.
const SWEEP_DAYS: i64 = 30;

/// A case opened this soon after a bot answer was opened because of it.
const RIGHT_AFTER: Duration = Duration::minutes(10);

/// The JSON report `vt-agent test <pasta> --json <pasta>/resultado.json` writes.
pub(crate) const RESULTS_FILE: &str = "resultado.json";

/// `[revisao]`: the review queue and the FAQ's suggestions.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RevisaoConfig {
    /// Where the tests written from the queue and from approved suggestions go, for the operator's CI
    /// (`vt-agent test <pasta>`); default `revisao` under `data_dir`.
    pub pasta: Option<PathBuf>,
    /// The failure categories a reviewer ticks (lowercase letters, digits and `_`).
    pub categorias: Vec<String>,
    /// Days of closed cases the FAQ's suggestions read (default 90).
    pub sugestoes_dias: u32,
}

impl Default for RevisaoConfig {
    fn default() -> Self {
        Self {
            pasta: None,
            categorias: [
                "entendeu_errado",
                "faltou_informacao",
                "acao_indevida",
                "tom_inadequado",
            ]
            .map(str::to_owned)
            .to_vec(),
            sugestoes_dias: 90,
        }
    }
}

impl RevisaoConfig {
    /// `Some((field, why))` for a value that cannot work.
    pub(crate) fn problem(&self) -> Option<(&'static str, &'static str)> {
        let key = |c: &String| {
            (1..=40).contains(&c.len())
                && c.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        };
        if self.categorias.is_empty() || !self.categorias.iter().all(key) {
            return Some((
                "revisao.categorias",
                "deve ter de 1 a 40 categorias de letras minúsculas, dígitos e _",
            ));
        }
        if !(1..=730).contains(&self.sugestoes_dias) {
            return Some(("revisao.sugestoes_dias", "deve ser de 1 a 730"));
        }
        None
    }
}

/// The queue's settings as `serve` resolved them.
#[derive(Debug, Clone)]
pub struct ReviewSettings {
    /// The tests' folder.
    pub dir: PathBuf,
    /// The operator's FAQ, where an approved suggestion is written.
    pub faq_dir: PathBuf,
    pub categories: Vec<String>,
    pub suggestion_days: u32,
}

impl Default for ReviewSettings {
    fn default() -> Self {
        let config = RevisaoConfig::default();
        Self {
            dir: PathBuf::from("data").join("revisao"),
            faq_dir: PathBuf::from("faq"),
            categories: config.categorias,
            suggestion_days: config.sugestoes_dias,
        }
    }
}

/// What a review action refused: the field at fault and why (never its value).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReviewError {
    #[error("{field}: {why}")]
    Invalid { field: &'static str, why: String },
    #[error("item ou conversa não encontrado")]
    NotFound,
    #[error("este item já foi revisado")]
    Done,
    #[error("não foi possível gravar o teste em {0}")]
    File(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn invalid(field: &'static str, why: impl Into<String>) -> ReviewError {
    ReviewError::Invalid {
        field,
        why: why.into(),
    }
}

/// A bot message flagged: where, why, and the agent's note.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flag<'a> {
    pub conversation: &'a str,
    pub message_id: i64,
    /// A key of [`REASONS`].
    pub reason: &'a str,
    pub note: &'a str,
}

/// A line of a conversation as the queue shows it, personal data replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Line {
    /// `cliente`, `assistente` or `atendente`.
    pub who: &'static str,
    pub text: String,
    /// The flagged message.
    pub flagged: bool,
}

/// A bot's answer: an assistant message with words and no tool call.
fn bot_text(m: &StoredMessage) -> Option<&str> {
    match &m.message {
        ChatMessage::Assistant {
            content: Some(c),
            tool_calls,
        } if tool_calls.is_empty() && !c.trim().is_empty() => Some(c),
        _ => None,
    }
}

/// The conversation up to message `upto`, for the queue: every line pseudonymised by `p`.
pub(crate) fn lines_upto(messages: &[StoredMessage], upto: i64, p: &mut Pseudonyms) -> Vec<Line> {
    messages
        .iter()
        .filter(|m| m.id <= upto)
        .filter_map(|m| {
            let (who, text) = match &m.message {
                ChatMessage::User { content } => ("cliente", content.as_str()),
                ChatMessage::HumanAgent { content, .. } => ("atendente", content.as_str()),
                _ => ("assistente", bot_text(m)?),
            };
            Some(Line {
                who,
                text: p.text(text),
                flagged: m.id == upto,
            })
        })
        .collect()
}

/// The bot's answer the card holder asked for a person right after: the last one before their last
/// message at or before `at` (the case's opening), when that message came within [`RIGHT_AFTER`].
fn answer_before_asking(messages: &[StoredMessage], at: DateTime<Utc>) -> Option<&StoredMessage> {
    let asked = messages
        .iter()
        .rev()
        .find(|m| m.created_at <= at && matches!(m.message, ChatMessage::User { .. }))?;
    let answer = messages
        .iter()
        .rev()
        .find(|m| m.id < asked.id && bot_text(m).is_some())?;
    (asked.created_at - answer.created_at <= RIGHT_AFTER).then_some(answer)
}

/// The last bot answer at or before `at`.
fn last_answer_before(messages: &[StoredMessage], at: DateTime<Utc>) -> Option<&StoredMessage> {
    messages
        .iter()
        .rev()
        .find(|m| m.created_at <= at && bot_text(m).is_some())
}

impl Review<'_> {
    pub(crate) fn settings(&self) -> &ReviewSettings {
        self.settings
    }

    /// A support agent (`who`) flags a bot message: the item's id (`None`: it was flagged before).
    /// `tenant`: the agent's, when they see only theirs.
    pub(crate) async fn flag(
        &self,
        tenant: Option<&str>,
        who: &str,
        flag: Flag<'_>,
    ) -> Result<Option<i64>, ReviewError> {
        let Flag {
            conversation,
            message_id,
            reason,
            note,
        } = flag;
        if !REASONS.iter().any(|(k, _)| *k == reason) {
            return Err(invalid("motivo", "escolha um dos motivos da lista"));
        }
        if note.chars().count() > MAX_NOTE {
            return Err(invalid(
                "observacao",
                format!("deve ter até {MAX_NOTE} caracteres"),
            ));
        }
        let conv = self
            .conversations
            .conversation(conversation)
            .await?
            .ok_or(ReviewError::NotFound)?;
        if tenant.is_some_and(|t| t != conv.tenant_id) {
            return Err(ReviewError::NotFound);
        }
        let messages = self.conversations.messages(conversation).await?;
        if !messages
            .iter()
            .any(|m| m.id == message_id && bot_text(m).is_some())
        {
            return Err(invalid(
                "mensagem",
                "só uma resposta do assistente pode ser sinalizada",
            ));
        }
        let note = note.trim();
        let item = NewReviewItem {
            tenant_id: conv.tenant_id,
            conversation_id: conversation.to_owned(),
            message_id,
            source: FLAGGED.into(),
            reason: Some(reason.to_owned()),
            note: (!note.is_empty()).then(|| mask_cards_in(note)),
            flagged_by: Some(who.to_owned()),
            created_at: self.engine.now(),
        };
        Ok(self.review.enqueue_review(&item).await?)
    }

    /// Enqueues what the product finds itself over the last days: stretches scored 1 or 2, stretches
    /// the person came back for, cases opened at the assistant's limit or right after its answer.
    /// Idempotent: each message once per reason. A process's first sweep reads 30 days, the next ones
    /// what came since. How many it added.
    pub(crate) async fn sweep(&self) -> Result<usize, StoreError> {
        let now = self.engine.now();
        let window = now - Duration::days(SWEEP_DAYS);
        // After this process's first look, only what came since: cases opened since then (a few minutes
        // of slack for commits in flight), stretches that ended within a week (a score, or the return
        // that reopens one, comes days later).
        let last = *self
            .swept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (cases_since, outcomes_since) = match last {
            Some(t) => (
                (t - Duration::minutes(5)).max(window),
                (t - Duration::days(7)).max(window),
            ),
            None => (window, window),
        };
        let mut found: Vec<(String, DateTime<Utc>, &'static str)> = Vec::new();
        for o in self.outcomes.outcomes_since(outcomes_since).await? {
            if o.nota.is_some_and(|n| n <= 2) {
                found.push((o.conversation_id.clone(), o.ate, "csat_baixo"));
            }
            if o.reaberta {
                found.push((o.conversation_id, o.ate, "reaberta"));
            }
        }
        // Up to now, inclusive (the range's end is not).
        let until = now + Duration::seconds(1);
        for c in self.cases.cases_opened_between(None, cases_since, until).await? {
            let source = if c.motivo == vt_contract::HandoffReason::LimiteDoAssistente {
                "limite_do_assistente"
            } else {
                "caso_apos_resposta"
            };
            found.push((c.conversation_id, c.opened_at, source));
        }
        let mut added = 0;
        for (conversation, at, source) in found {
            added += usize::from(self.enqueue_found(&conversation, at, source).await?);
        }
        *self
            .swept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(now);
        Ok(added)
    }

    async fn enqueue_found(
        &self,
        conversation: &str,
        at: DateTime<Utc>,
        source: &str,
    ) -> Result<bool, StoreError> {
        let Some(conv) = self.conversations.conversation(conversation).await? else {
            return Ok(false);
        };
        let messages = self.conversations.messages(conversation).await?;
        let answer = if source == "caso_apos_resposta" {
            answer_before_asking(&messages, at)
        } else {
            last_answer_before(&messages, at)
        };
        let Some(answer) = answer else {
            return Ok(false);
        };
        let item = NewReviewItem {
            tenant_id: conv.tenant_id,
            conversation_id: conversation.to_owned(),
            message_id: answer.id,
            source: source.to_owned(),
            reason: None,
            note: None,
            flagged_by: None,
            created_at: self.engine.now(),
        };
        Ok(self.review.enqueue_review(&item).await?.is_some())
    }

    /// The newest items, `tenant`'s only when given.
    pub(crate) async fn items(&self, tenant: Option<&str>) -> Result<Vec<ReviewItem>, StoreError> {
        self.review.review_items(tenant, 200).await
    }

    /// Item `id`, when `tenant` (the staff's, when they see only theirs) may see it.
    async fn visible(&self, tenant: Option<&str>, id: i64) -> Result<ReviewItem, ReviewError> {
        let item = self.review.review_item(id).await?.ok_or(ReviewError::NotFound)?;
        if tenant.is_some_and(|t| t != item.item.tenant_id) {
            return Err(ReviewError::NotFound);
        }
        Ok(item)
    }

    /// Item `id` with its conversation's messages and the pseudonyms its personal data is replaced by
    /// (they know the card holder's login).
    async fn read(
        &self,
        tenant: Option<&str>,
        id: i64,
    ) -> Result<(ReviewItem, Vec<StoredMessage>, Pseudonyms), ReviewError> {
        let item = self.visible(tenant, id).await?;
        let conversation = &item.item.conversation_id;
        let mut p = Pseudonyms::default();
        if let Some(c) = self.conversations.conversation(conversation).await? {
            p.know_name(&c.user_login);
        }
        let messages = self.conversations.messages(conversation).await?;
        Ok((item, messages, p))
    }

    /// An item and its conversation up to the flagged message, pseudonymised — the agent's note too,
    /// which may quote the person.
    pub(crate) async fn item(
        &self,
        tenant: Option<&str>,
        id: i64,
    ) -> Result<(ReviewItem, Vec<Line>), ReviewError> {
        let (mut item, messages, mut p) = self.read(tenant, id).await?;
        let lines = lines_upto(&messages, item.item.message_id, &mut p);
        item.item.note = item.item.note.as_deref().map(|n| p.text(n));
        Ok((item, lines))
    }

    /// Labels an open item and writes its test: the test's file name in the folder.
    pub(crate) async fn label(
        &self,
        tenant: Option<&str>,
        id: i64,
        who: &str,
        labels: Vec<String>,
        expectation: Expectation,
    ) -> Result<String, ReviewError> {
        if labels.is_empty() || !labels.iter().all(|l| self.settings.categories.contains(l)) {
            return Err(invalid(
                "categorias",
                "marque ao menos uma das categorias configuradas",
            ));
        }
        let expectation = checked_expectation(expectation)?;
        let (item, messages, mut p) = self.read(tenant, id).await?;
        if item.state != vt_store::ReviewState::Aberto {
            return Err(ReviewError::Done);
        }
        let flagged = lines_upto(&messages, item.item.message_id, &mut p)
            .pop()
            .filter(|l| l.flagged)
            .map(|l| l.text)
            .unwrap_or_default();
        if already_met(&expectation, &flagged) {
            return Err(invalid(
                "esperado",
                "a resposta sinalizada já cumpre o que foi escrito: o teste não falharia",
            ));
        }
        let transcript = crate::transcript::review::review_case(
            self.conversations,
            &item,
            &messages,
            &mut p,
            &expectation,
            &labels,
        )
        .await
        .map_err(|e| match e {
            crate::transcript::export::ExportError::Store(e) => ReviewError::Store(e),
            crate::transcript::export::ExportError::NotFound(_) => ReviewError::NotFound,
        })?;
        let file = format!("revisao-{id}.yaml");
        let yaml = serde_yaml::to_string(&transcript).map_err(|_| ReviewError::File(file.clone()))?;
        self.write_file(&file, &yaml)?;
        let label = ReviewLabel {
            labels,
            expectation,
            test_file: file.clone(),
            by: who.to_owned(),
            at: self.engine.now(),
        };
        if !self.review.label_review(id, &label).await? {
            return Err(ReviewError::Done);
        }
        Ok(file)
    }

    /// Writes `name` in the tests' folder (created when missing).
    pub(crate) fn write_file(&self, name: &str, text: &str) -> Result<(), ReviewError> {
        let dir = &self.settings.dir;
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(dir.join(name), text))
            .map_err(|_| ReviewError::File(dir.display().to_string()))
    }

    /// Dismisses an open item.
    pub(crate) async fn dismiss(&self, tenant: Option<&str>, id: i64, who: &str) -> Result<(), ReviewError> {
        self.visible(tenant, id).await?;
        if self.review.dismiss_review(id, who, self.engine.now()).await? {
            Ok(())
        } else {
            Err(ReviewError::Done)
        }
    }

    /// The last run of the tests' folder (`vt-agent test <pasta> --json <pasta>/resultado.json`): each
    /// file's verdict (`true`: passed), and when it ran. Empty when it never ran.
    pub(crate) fn results(&self) -> (HashMap<String, bool>, Option<DateTime<Utc>>) {
        let path = self.settings.dir.join(RESULTS_FILE);
        let ran = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .ok()
            .map(DateTime::<Utc>::from);
        let Ok(text) = std::fs::read_to_string(&path) else {
            return (HashMap::new(), None);
        };
        let reports: Vec<serde_json::Value> = vt_contract::json::from_text(&text).unwrap_or_default();
        let verdicts = reports
            .iter()
            .filter_map(|r| {
                let file = r["file"].as_str()?;
                let name = std::path::Path::new(file)
                    .file_name()?
                    .to_string_lossy()
                    .into_owned();
                Some((name, r["passed"].as_bool()?))
            })
            .collect();
        (verdicts, ran)
    }
}

/// The expectation trimmed, its texts masked, checked: something to test, each text short.
fn checked_expectation(e: Expectation) -> Result<Expectation, ReviewError> {
    let texts = |list: Vec<String>| -> Vec<String> {
        list.iter()
            .map(|t| mask_cards_in(t.trim()))
            .filter(|t| !t.is_empty())
            .collect()
    };
    let tool = |t: Option<String>| t.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
    let e = Expectation {
        contains: texts(e.contains),
        not_contains: texts(e.not_contains),
        action: tool(e.action),
        never: tool(e.never),
    };
    if e.is_empty() {
        return Err(invalid(
            "esperado",
            "escreva o que a resposta devia conter ou evitar, ou a ação esperada",
        ));
    }
    let tool_name = |t: &Option<String>| {
        t.as_ref()
            .is_none_or(|t| t.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
    };
    if !tool_name(&e.action) || !tool_name(&e.never) {
        return Err(invalid("acao", "o nome de uma ferramenta: letras minúsculas e _"));
    }
    if e.contains
        .iter()
        .chain(&e.not_contains)
        .any(|t| t.chars().count() > MAX_NOTE)
    {
        return Err(invalid(
            "esperado",
            format!("cada texto deve ter até {MAX_NOTE} caracteres"),
        ));
    }
    Ok(e)
}

/// Whether the flagged answer already does what the reviewer expects of its words (an action or a
/// "never" cannot be judged from the words: they are tested).
fn already_met(e: &Expectation, answer: &str) -> bool {
    let lower = answer.to_lowercase();
    e.action.is_none()
        && e.never.is_none()
        && e.contains.iter().all(|w| lower.contains(&w.to_lowercase()))
        && !e.not_contains.iter().any(|w| lower.contains(&w.to_lowercase()))
}

/// Labelled items per week (Monday) and category: the error analysis, newest week first.
pub(crate) fn weekly(items: &[ReviewItem]) -> Vec<(chrono::NaiveDate, BTreeMap<String, usize>)> {
    let mut weeks: BTreeMap<chrono::NaiveDate, BTreeMap<String, usize>> = BTreeMap::new();
    for i in items {
        let Some(at) = i
            .reviewed_at
            .filter(|_| i.state == vt_store::ReviewState::Rotulado)
        else {
            continue;
        };
        let day = at.date_naive();
        let monday = day - Duration::days(i64::from(day.weekday().num_days_from_monday()));
        let week = weeks.entry(monday).or_default();
        for l in &i.labels {
            *week.entry(l.clone()).or_default() += 1;
        }
    }
    weeks.into_iter().rev().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expectation_the_answer_meets_is_no_test() {
        let e = |contains: &[&str], not: &[&str]| Expectation {
            contains: contains.iter().map(|s| (*s).to_owned()).collect(),
            not_contains: not.iter().map(|s| (*s).to_owned()).collect(),
            ..Expectation::default()
        };
        let answer = "Posso ajudar com saldo e recarga.";
        assert!(already_met(&e(&["saldo"], &[]), answer));
        assert!(!already_met(&e(&["outra cidade"], &[]), answer));
        assert!(!already_met(&e(&[], &["recarga"]), answer));
        assert!(!already_met(
            &Expectation {
                never: Some("preparar_recarga".into()),
                ..Expectation::default()
            },
            answer
        ));
    }

    #[test]
    fn an_empty_or_odd_expectation_is_refused_by_field() {
        let err = checked_expectation(Expectation {
            contains: vec!["  ".into()],
            ..Expectation::default()
        });
        assert!(matches!(
            err,
            Err(ReviewError::Invalid {
                field: "esperado",
                ..
            })
        ));
        let err = checked_expectation(Expectation {
            action: Some("rm -rf".into()),
            ..Expectation::default()
        });
        assert!(matches!(err, Err(ReviewError::Invalid { field: "acao", .. })));
        let ok = checked_expectation(Expectation {
            contains: vec![" cartão 1234567890 ".into()],
            ..Expectation::default()
        })
        .expect("ok");
        assert_eq!(
            ok.contains,
            vec!["cartão ****7890".to_owned()],
            "a card in an expectation is masked"
        );
    }

    #[test]
    fn the_configured_categories_are_checked() {
        assert_eq!(RevisaoConfig::default().problem(), None);
        let bad = RevisaoConfig {
            categorias: vec!["Entendeu Errado".into()],
            ..RevisaoConfig::default()
        };
        assert_eq!(bad.problem().map(|p| p.0), Some("revisao.categorias"));
    }
}
