//! Canned answers (respostas prontas): texts an administrator keeps per tenant — for every team or
//! one — that a support agent inserts in a reply with `/` and a shortcut. Placeholders are filled per
//! case by code, never by a model: `{nome}` (the person's first name, when their channel gave one),
//! `{cartao}` (their card, masked), `{protocolo}` and `{valor}` (the case's last amount in reais).
//! A reply sent from one leaves a `resposta_pronta` line in the case's log, which the month's report
//! counts.

use chrono::{DateTime, Utc};

use super::{CaseError, Cases, SupportAgent};
use vt_domain::vt::card::{mask_card, mask_cards_in};
use vt_store::{CannedAnswer, Case};

/// The longest text an answer may keep.
pub(crate) const MAX_BODY: usize = 2000;

/// The placeholders an answer may hold, as the admin page lists them.
pub(crate) const PLACEHOLDERS: [(&str, &str); 4] = [
    ("{nome}", "primeiro nome da pessoa"),
    ("{cartao}", "cartão da pessoa, mascarado"),
    ("{protocolo}", "protocolo do atendimento"),
    ("{valor}", "último valor do atendimento"),
];

/// Why a shortcut cannot be kept (`None`: it can): 1 to 32 lowercase letters, digits, `-` or `_`.
pub(crate) fn shortcut_problem(shortcut: &str) -> Option<&'static str> {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
    if shortcut.is_empty() || shortcut.len() > 32 {
        Some("o atalho deve ter de 1 a 32 caracteres")
    } else if !shortcut.chars().all(ok_char) {
        Some("o atalho aceita só letras minúsculas sem acento, números, - e _")
    } else {
        None
    }
}

/// An answer ready for a case: its placeholders filled.
#[derive(Debug, Clone, PartialEq)]
pub struct Filled {
    pub shortcut: String,
    pub text: String,
}

/// What fills the placeholders of one case.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Fill {
    pub first_name: Option<String>,
    pub card: Option<String>,
    pub protocol: Option<String>,
    pub amount: Option<String>,
}

impl Fill {
    /// `body` with its placeholders filled; one without a value goes, and the space before it.
    pub(crate) fn apply(&self, body: &str) -> String {
        let mut text = body.to_owned();
        for (key, value) in [
            ("{nome}", &self.first_name),
            ("{cartao}", &self.card),
            ("{protocolo}", &self.protocol),
            ("{valor}", &self.amount),
        ] {
            match value {
                Some(v) => text = text.replace(key, v),
                None => {
                    text = text.replace(&format!(" {key}"), "").replace(key, "");
                }
            }
        }
        text
    }
}

/// A person's first name from how their channel names them, when it reads as a name (not a number,
/// an id or a login with digits).
fn first_name(named: &str) -> Option<String> {
    let first = named.split_whitespace().next()?;
    // Letters, and hyphenated parts of two or more ("Ana-Maria", never "u-web").
    let parts_are_names = first
        .split('-')
        .all(|p| p.chars().count() >= 2 && p.chars().all(|c| c.is_alphabetic() || c == '\''));
    let capitalized = |part: &str| -> String {
        let mut chars = part.chars();
        chars
            .next()
            .map(|c| {
                c.to_uppercase()
                    .chain(chars.flat_map(char::to_lowercase))
                    .collect()
            })
            .unwrap_or_default()
    };
    parts_are_names.then(|| first.split('-').map(capitalized).collect::<Vec<_>>().join("-"))
}

fn brl(amount: &str) -> String {
    let value: rust_decimal::Decimal = amount.parse().unwrap_or_default();
    let text = format!("{:.2}", value.round_dp(2)).replace('.', ",");
    format!("R$ {text}")
}

impl Cases<'_> {
    /// What fills `case`'s placeholders now.
    async fn fill_of(self, case: &Case) -> Result<Fill, vt_store::StoreError> {
        let conv = self.conversations.conversation(&case.conversation_id).await?;
        let first_name = conv.as_ref().and_then(|c| first_name(&c.user_login));
        let card = conv.as_ref().and_then(|c| {
            vt_domain::tools::cartao::cards_held(&c.state, &c.memory)
                .last()
                .map(|card| mask_card(card))
        });
        let pending = case.case_file["recarga_pendente"]["valor"].as_str().map(brl);
        let charged = self
            .pix
            .conversation_charges(&case.conversation_id)
            .await?
            .into_iter()
            .max_by_key(|c| c.n)
            .map(|c| brl(&c.amount.to_string()));
        Ok(Fill {
            first_name,
            card,
            protocol: case.protocol.clone(),
            amount: pending.or(charged),
        })
    }

    /// The answers `case`'s team may use (its own and every team's), filled for the case.
    pub async fn canned_for(self, case: &Case) -> Result<Vec<Filled>, vt_store::StoreError> {
        let kept = self.desk.canned_answers(&case.tenant_id).await?;
        let fill = self.fill_of(case).await?;
        Ok(kept
            .into_iter()
            .filter(|a| a.team.as_deref().is_none_or(|t| t == case.team))
            .map(|a| Filled {
                text: mask_cards_in(&fill.apply(&a.body)),
                shortcut: a.shortcut,
            })
            .collect())
    }

    /// The case's owner sends the kept answer `shortcut` (as the agent may have edited it: `text`):
    /// relayed as their words, and a `resposta_pronta` line for the report.
    pub async fn reply_canned(
        self,
        id: &str,
        agent: SupportAgent<'_>,
        text: &str,
        shortcut: &str,
    ) -> Result<(), CaseError> {
        let case = self.owned_case(id, agent).await?;
        let known = self
            .desk
            .canned_answers(&case.tenant_id)
            .await?
            .into_iter()
            .any(|a| a.shortcut == shortcut);
        self.agent_reply(id, agent, text).await?;
        if known {
            let now = self.engine.now();
            let line = case.event(now, agent.login, "resposta_pronta", Some(shortcut.to_owned()));
            self.cases.note_case(&line, &[], now).await?;
        }
        Ok(())
    }

    /// Keeps an answer for `tenant` (an administrator's): the shortcut, team and text checked.
    pub async fn save_canned(
        self,
        tenant: &str,
        who: &str,
        shortcut: &str,
        team: Option<&str>,
        body: &str,
    ) -> Result<(), CaseError> {
        if let Some(why) = shortcut_problem(shortcut) {
            return Err(CaseError::Refused(why.into()));
        }
        let body = body.trim();
        if body.is_empty() || body.chars().count() > MAX_BODY {
            return Err(CaseError::Refused(format!(
                "o texto deve ter de 1 a {MAX_BODY} caracteres"
            )));
        }
        if let Some(t) = team
            && self.board.handoff.desk.named(t).is_none()
        {
            return Err(CaseError::Refused(format!("a equipe {t} não existe")));
        }
        let answer = CannedAnswer {
            tenant_id: tenant.to_owned(),
            shortcut: shortcut.to_owned(),
            team: team.map(str::to_owned),
            body: mask_cards_in(body),
            updated_by: who.to_owned(),
            updated_at: self.engine.now(),
        };
        Ok(self.desk.save_canned_answer(&answer).await?)
    }

    /// How often each answer was sent in `[from, to)`, `tenant`'s only when given: (shortcut, count),
    /// most used first.
    pub async fn canned_counts(
        self,
        tenant: Option<&str>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<(String, u32)>, vt_store::StoreError> {
        let mut counts = std::collections::BTreeMap::<String, u32>::new();
        for line in self.desk.case_lines(tenant, "resposta_pronta", from, to).await? {
            *counts.entry(line.detail.unwrap_or_default()).or_default() += 1;
        }
        let mut counts: Vec<_> = counts.into_iter().collect();
        counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_and_an_unknown_one_goes_with_its_space() {
        let fill = Fill {
            first_name: Some("Maria".into()),
            card: Some("****8901".into()),
            protocol: Some("20261130-000001".into()),
            amount: None,
        };
        assert_eq!(
            fill.apply("Olá {nome}! O cartão {cartao}, protocolo {protocolo}, valor {valor}."),
            "Olá Maria! O cartão ****8901, protocolo 20261130-000001, valor."
        );
        let nobody = Fill::default();
        assert_eq!(nobody.apply("Olá {nome}, tudo bem?"), "Olá, tudo bem?");
    }

    #[test]
    fn a_first_name_is_a_name_never_an_id() {
        assert_eq!(first_name("MARIA da silva").as_deref(), Some("Maria"));
        assert_eq!(first_name("João").as_deref(), Some("João"));
        assert_eq!(first_name("ana-maria").as_deref(), Some("Ana-Maria"));
        assert_eq!(first_name("5511987654321"), None);
        assert_eq!(first_name("u-web"), None);
        assert_eq!(first_name("visitante_3f9a"), None);
        assert_eq!(first_name(""), None);
    }

    #[test]
    fn shortcuts_are_short_plain_words() {
        assert_eq!(shortcut_problem("boas-vindas"), None);
        assert_eq!(shortcut_problem("prazo_2"), None);
        assert!(shortcut_problem("").is_some());
        assert!(shortcut_problem("Saudação").is_some());
        assert!(shortcut_problem("com espaço").is_some());
        assert!(shortcut_problem(&"a".repeat(33)).is_some());
    }
}
