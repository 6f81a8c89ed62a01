//! FAQ entries suggested from what support agents answered by hand (issue "Step 38"): from the closed
//! cases of the last `[revisao] sugestoes_dias`, the agents' replies that answered a question — not
//! in a case that moved money or blocked a card, not a fact about one person (a balance, a card, a
//! protocol) — grouped at zero tokens ([`vt_domain::suggest`]). An administrator approves one (its
//! title, keywords and answer edited: a new `faq/` entry and a transcript proving it is answered at
//! level 1, in the review folder), attaches one an entry already answers to that entry (its keywords
//! grown), or dismisses it; each decision is kept, so it is not offered again.

use std::sync::LazyLock;

use regex::Regex;
use vt_domain::faq::{Faq, FaqEntry, SharedFaq};
use vt_domain::suggest::{Answered, Grouping, Suggestion, language_of, suggest};
use vt_domain::vt::card::mask_cards_in;
use vt_engine::llm::ChatMessage;
use vt_store::{Case, CaseEvent, CaseState, FaqDecision, StoreError, StoredMessage};

use super::jobs::Review;
use super::review::ReviewError;
use crate::transcript::format::{Setup, Transcript, Turn};
use crate::transcript::pseudonym::Pseudonyms;

/// Resolutions that moved money or changed a card: their answers are no FAQ's.
const MUTATING: [&str; 2] = ["recarga_feita", "cartao_bloqueado"];

/// A fact about one person: a card (masked or not), a long number (a protocol, a line), a balance.
static PER_PERSON: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\*{4}\d|\d{6,}|\bseu saldo\b|\bsaldo (?:atual |dispon[ií]vel )?(?:é|de|est[aá])\b|\bprotocolo\b")
        .expect("per-person regex")
});

/// A reply has to say this much to answer anything ("Olá!", "Um momento" do not).
const SUBSTANTIVE_WORDS: usize = 5;

/// The questions a closed case's agents answered: each substantive reply with the card holder's
/// messages since the last one (the message that opened the case included).
pub(crate) fn answered_in(case: &Case, log: &[CaseEvent], messages: &[StoredMessage]) -> Vec<Answered> {
    if case.state != CaseState::Encerrado
        || case.resolution.as_deref().is_some_and(|r| MUTATING.contains(&r))
        || log.iter().any(|l| l.what == "proposta_recarga")
    {
        return Vec::new();
    }
    let closed = case.closed_at.unwrap_or(case.opened_at);
    // The message that made the case is stored just before it opened.
    let start = messages
        .iter()
        .rposition(|m| m.created_at <= case.opened_at && matches!(m.message, ChatMessage::User { .. }))
        .unwrap_or(0);
    let mut out = Vec::new();
    let mut asked: Vec<&str> = Vec::new();
    // The message that opened the case is often only the wish for a person ("quero falar com
    // alguém"): the question is what came after it, when something did.
    let mut holds_trigger = false;
    for (i, m) in messages[start..]
        .iter()
        .take_while(|m| m.created_at <= closed)
        .enumerate()
    {
        match &m.message {
            ChatMessage::User { content } => {
                if i == 0 {
                    holds_trigger = true;
                } else if std::mem::take(&mut holds_trigger) {
                    asked.clear();
                }
                asked.push(content);
            }
            ChatMessage::HumanAgent { content, .. } => {
                let words = content.split_whitespace().count();
                if asked.is_empty() || words < SUBSTANTIVE_WORDS {
                    continue;
                }
                let question = asked.join(" ");
                if !PER_PERSON.is_match(content) {
                    out.push(Answered {
                        case: case.id.clone(),
                        question: mask_cards_in(&question),
                        answer: mask_cards_in(content),
                    });
                }
                asked.clear();
                holds_trigger = false;
            }
            _ => {}
        }
    }
    out
}

/// An entry an administrator writes from a suggestion.
#[derive(Debug, Clone, Default)]
pub(crate) struct Approval {
    pub title: String,
    pub keywords: String,
    pub answer: String,
}

impl Review<'_> {
    fn faq(&self) -> Option<std::sync::Arc<Faq>> {
        self.engine.extension::<SharedFaq>().map(|f| f.0.clone())
    }

    /// The questions agents answered in `tenant`'s cases closed over the configured days, personal
    /// data replaced.
    async fn answered(&self, tenant: &str) -> Result<Vec<Answered>, StoreError> {
        let now = self.engine.now();
        let since = now - chrono::Duration::days(i64::from(self.settings.suggestion_days));
        let mut p = Pseudonyms::default();
        let mut out = Vec::new();
        for case in self.cases.cases_opened_between(Some(tenant), since, now).await? {
            if case.state != CaseState::Encerrado {
                continue;
            }
            let log = self.cases.case_events(&case.id).await?;
            let messages = self.conversations.messages(&case.conversation_id).await?;
            if let Some(conv) = self.conversations.conversation(&case.conversation_id).await? {
                p.know_name(&conv.user_login);
            }
            out.extend(answered_in(&case, &log, &messages).into_iter().map(|a| Answered {
                question: p.text(&a.question),
                answer: p.text(&a.answer),
                case: a.case,
            }));
        }
        Ok(out)
    }

    /// `tenant`'s suggestions not decided yet, the most asked first.
    pub(crate) async fn suggestions(&self, tenant: &str) -> Result<Vec<Suggestion>, StoreError> {
        let answered = self.answered(tenant).await?;
        let decided: Vec<String> = self
            .review
            .faq_decisions(tenant)
            .await?
            .into_iter()
            .map(|d| d.suggestion)
            .collect();
        let faq = self.faq();
        Ok(suggest(&answered, Grouping::default(), faq.as_deref())
            .into_iter()
            .filter(|s| !decided.contains(&s.key))
            .collect())
    }

    async fn undecided(&self, tenant: &str, key: &str) -> Result<Suggestion, ReviewError> {
        self.suggestions(tenant)
            .await?
            .into_iter()
            .find(|s| s.key == key)
            .ok_or(ReviewError::NotFound)
    }

    /// Dismisses suggestion `key`.
    pub(crate) async fn dismiss_suggestion(
        &self,
        tenant: &str,
        key: &str,
        who: &str,
    ) -> Result<(), ReviewError> {
        self.undecided(tenant, key).await?;
        self.decide(tenant, key, "descartada", None, who).await
    }

    async fn decide(
        &self,
        tenant: &str,
        key: &str,
        what: &str,
        entry: Option<String>,
        who: &str,
    ) -> Result<(), ReviewError> {
        let decision = FaqDecision {
            tenant_id: tenant.to_owned(),
            suggestion: key.to_owned(),
            decision: what.to_owned(),
            entry,
            decided_by: who.to_owned(),
            decided_at: self.engine.now(),
        };
        if self.review.decide_faq(&decision).await? {
            Ok(())
        } else {
            Err(ReviewError::Done)
        }
    }

    /// Approves suggestion `key` as `approval`: the entry written in the FAQ's folder and its proof —
    /// a transcript where one of the group's phrasings is answered by it at level 1 — in the review
    /// folder. Returns the entry's id (its file name without `.md`).
    pub(crate) async fn approve(
        &self,
        tenant: &str,
        key: &str,
        who: &str,
        approval: Approval,
    ) -> Result<String, ReviewError> {
        let suggestion = self.undecided(tenant, key).await?;
        let entry = self.entry_of(&approval)?;
        let mut entries = self.faq().map(|f| f.entries().to_vec()).unwrap_or_default();
        entries.push(entry.clone());
        let faq = Faq::new(entries).map_err(|e| invalid("palavras_chave", e.to_string()))?;
        let Some(asked) = suggestion
            .questions
            .iter()
            .find(|q| faq.clear_match(q).is_some_and(|e| e.id == entry.id))
        else {
            return Err(invalid(
                "palavras_chave",
                "nenhuma pergunta do grupo encontra esta entrada: acrescente as palavras que as pessoas usam",
            ));
        };
        let proof = proof_of(&entry, asked);
        let yaml =
            serde_yaml::to_string(&proof).map_err(|_| ReviewError::File(format!("faq-{}.yaml", entry.id)))?;
        let dir = &self.settings.faq_dir;
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(dir.join(format!("{}.md", entry.id)), entry.to_file()))
            .map_err(|_| ReviewError::File(dir.display().to_string()))?;
        self.write_file(&format!("faq-{}.yaml", entry.id), &yaml)?;
        self.decide(tenant, key, "aprovada", Some(entry.id.clone()), who)
            .await?;
        Ok(entry.id)
    }

    /// Attaches suggestion `key` to the entry that already answers it: `keywords` (comma separated)
    /// join the entry's file, and a transcript proves a phrasing of the group, one the entry missed
    /// when one did, is answered by it at level 1. Returns the entry's id.
    pub(crate) async fn attach(
        &self,
        tenant: &str,
        key: &str,
        who: &str,
        keywords: &str,
    ) -> Result<String, ReviewError> {
        let suggestion = self.undecided(tenant, key).await?;
        let id = suggestion.covered_by.clone().ok_or(ReviewError::NotFound)?;
        let faq = self.faq().ok_or(ReviewError::NotFound)?;
        let mut entry = faq
            .entries()
            .iter()
            .find(|e| e.id == id)
            .cloned()
            .ok_or(ReviewError::NotFound)?;
        let path = self.settings.faq_dir.join(format!("{id}.md"));
        if !path.exists() {
            return Err(invalid(
                "entrada",
                "a entrada não está na pasta da FAQ deste serviço",
            ));
        }
        let missed: Vec<&String> = suggestion
            .questions
            .iter()
            .filter(|q| faq.clear_match(q).is_none_or(|e| e.id != id))
            .collect();
        for k in keywords
            .split(',')
            .map(|k| k.trim().to_lowercase())
            .filter(|k| !k.is_empty())
        {
            if !entry.palavras.contains(&k) {
                entry.palavras.push(k);
            }
        }
        let entries: Vec<FaqEntry> = faq
            .entries()
            .iter()
            .map(|e| if e.id == id { entry.clone() } else { e.clone() })
            .collect();
        let grown = Faq::new(entries).map_err(|e| invalid("palavras_chave", e.to_string()))?;
        let answered = |q: &&String| grown.clear_match(q).is_some_and(|e| e.id == id);
        let Some(asked) = missed
            .iter()
            .copied()
            .find(answered)
            .or_else(|| suggestion.questions.iter().find(answered))
        else {
            return Err(invalid(
                "palavras_chave",
                "nenhuma pergunta do grupo encontra a entrada com estas palavras",
            ));
        };
        let proof = proof_of(&entry, asked);
        let name = format!("faq-{id}-{key}.yaml");
        let yaml = serde_yaml::to_string(&proof).map_err(|_| ReviewError::File(name.clone()))?;
        std::fs::write(&path, entry.to_file()).map_err(|_| ReviewError::File(path.display().to_string()))?;
        self.write_file(&name, &yaml)?;
        self.decide(tenant, key, "anexada", Some(id.clone()), who).await?;
        Ok(id)
    }

    /// The entry an approval writes, checked: a title and an answer in the FAQ's language, a file
    /// name no entry has.
    fn entry_of(&self, a: &Approval) -> Result<FaqEntry, ReviewError> {
        let title = a.title.trim();
        let answer = a.answer.trim();
        if !(3..=120).contains(&title.chars().count()) || title.contains('\n') {
            return Err(invalid("titulo", "uma linha de 3 a 120 caracteres"));
        }
        if !(10..=2_000).contains(&answer.chars().count()) {
            return Err(invalid("resposta", "de 10 a 2000 caracteres"));
        }
        for (field, text) in [("titulo", title), ("resposta", answer)] {
            if let Some(other) = language_of(text).filter(|l| *l != "pt") {
                return Err(invalid(
                    field,
                    format!("está em outra língua ({other}): a FAQ responde em português"),
                ));
            }
        }
        if PER_PERSON.is_match(answer) {
            return Err(invalid(
                "resposta",
                "tem dados de uma pessoa (cartão, número, saldo): a FAQ é para todos",
            ));
        }
        let keywords: Vec<String> = a
            .keywords
            .split(',')
            .map(|k| k.trim().to_lowercase())
            .filter(|k| !k.is_empty())
            .collect();
        let base = slug(title);
        let taken = |id: &str| {
            self.settings.faq_dir.join(format!("{id}.md")).exists()
                || self.faq().is_some_and(|f| f.entries().iter().any(|e| e.id == id))
        };
        let id = std::iter::once(base.clone())
            .chain((2..100).map(|n| format!("{base}-{n}")))
            .find(|id| !taken(id))
            .ok_or_else(|| invalid("titulo", "já há entradas demais com este título"))?;
        Ok(FaqEntry {
            id,
            titulo: title.to_owned(),
            palavras: keywords,
            resposta: answer.to_owned(),
        })
    }
}

fn invalid(field: &'static str, why: impl Into<String>) -> ReviewError {
    ReviewError::Invalid {
        field,
        why: why.into(),
    }
}

/// A file name from a title: lowercase ASCII words joined by `-`.
fn slug(title: &str) -> String {
    let plain = vt_domain::vt::parse::normalize(title);
    let words: Vec<&str> = plain
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let mut s = words.join("-");
    s.truncate(60);
    let s = s.trim_end_matches('-').to_owned();
    if s.is_empty() { "entrada".into() } else { s }
}

/// The transcript that proves an entry is answered at level 1, with zero tokens.
fn proof_of(entry: &FaqEntry, asked: &str) -> Transcript {
    let mut turn = Turn {
        user: asked.to_owned(),
        ..Turn::default()
    };
    turn.expect.intent = Some("faq".into());
    turn.expect.reply_contains = vec![entry.titulo.clone()];
    turn.expect.model_calls = Some(0);
    Transcript {
        name: format!("faq {}", entry.id),
        description: Some(
            "Da sugestão aprovada na FAQ: uma das perguntas do grupo, respondida pela entrada.".into(),
        ),
        class: Some("faq".into()),
        setup: Setup {
            model: Some("none".into()),
            ..Setup::default()
        },
        never: Vec::new(),
        turns: vec![turn],
        expect_total: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone, Utc};

    fn msg(id: i64, minute: i64, message: ChatMessage) -> StoredMessage {
        StoredMessage {
            id,
            conversation_id: "c".into(),
            execucao_id: None,
            message,
            created_at: Utc.with_ymd_and_hms(2026, 11, 2, 10, 0, 0).unwrap() + Duration::minutes(minute),
        }
    }

    fn agent(text: &str) -> ChatMessage {
        ChatMessage::HumanAgent {
            name: "Ana".into(),
            content: text.into(),
        }
    }

    fn closed(resolution: Option<&str>) -> Case {
        let at = Utc.with_ymd_and_hms(2026, 11, 2, 10, 1, 0).unwrap();
        Case {
            id: "k".into(),
            conversation_id: "c".into(),
            state: CaseState::Encerrado,
            opened_at: at,
            closed_at: Some(at + Duration::hours(1)),
            resolution: resolution.map(str::to_owned),
            ..Case::default()
        }
    }

    #[test]
    fn a_substantive_answer_takes_the_questions_before_it() {
        let messages = vec![
            msg(1, 0, ChatMessage::user("quero falar com alguém")),
            msg(2, 2, agent("Olá! Um momento.")),
            msg(
                3,
                3,
                ChatMessage::user("posso usar o cartão 1234567890 em outra cidade?"),
            ),
            msg(4, 5, agent("Não, o cartão vale só nos ônibus da sua cidade.")),
            msg(5, 6, ChatMessage::user("qual meu saldo?")),
            msg(6, 7, agent("Seu saldo é R$ 12,00 no cartão ****7890.")),
        ];
        let got = answered_in(&closed(Some("orientado")), &[], &messages);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(
            got[0].question, "posso usar o cartão ****7890 em outra cidade?",
            "the wish for a person left out"
        );
        assert!(got[0].answer.starts_with("Não, o cartão vale"));
        assert!(
            answered_in(&closed(Some("recarga_feita")), &[], &messages).is_empty(),
            "money moved"
        );
    }

    #[test]
    fn titles_become_file_names() {
        assert_eq!(
            slug("Posso usar o cartão em outra cidade?"),
            "posso-usar-o-cartao-em-outra-cidade"
        );
        assert_eq!(slug("???"), "entrada");
    }
}
