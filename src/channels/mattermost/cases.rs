//! The support side of a case from Mattermost's slash command, for support users only:
//! `/vt casos`, `/vt assumir ID`, `/vt responder ID texto`, `/vt devolver ID [nota]`,
//! `/vt encerrar ID`, `/vt propor ID <valor> <cartão> <pix|boleto|cartao>`,
//! `/vt transferir ID equipe [atendente]`, `/vt ausente`, `/vt disponivel` — answered ephemerally, in
//! the Mattermost deployment's tenant. `ID` is the case's protocol number (or its id).

use serde_json::{Value, json};

use super::MattermostState;
use crate::service::{CaseError, SupportAgent};
use vt_store::Claim;

/// What a support user asked of a case.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum CaseCommand {
    List,
    Claim(String),
    Reply(String, String),
    HandBack(String, Option<String>),
    Close(String),
    Propose(String, String),
    Transfer(String, String),
    Away(bool),
}

impl CaseCommand {
    /// `None`: not a case command (the text goes to the agent as any other).
    pub(super) fn parse(text: &str) -> Option<Self> {
        let mut words = text.trim().splitn(3, char::is_whitespace);
        let verb = words.next()?.to_lowercase();
        let id = words.next().map(str::to_owned);
        let rest = words
            .next()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_owned);
        Some(match (verb.as_str(), id) {
            ("casos", _) => Self::List,
            ("ausente", None) => Self::Away(true),
            ("disponivel" | "disponível", None) => Self::Away(false),
            ("transferir", Some(id)) => Self::Transfer(id, rest.unwrap_or_default()),
            ("assumir", Some(id)) => Self::Claim(id),
            ("responder", Some(id)) => Self::Reply(id, rest.unwrap_or_default()),
            ("devolver", Some(id)) => Self::HandBack(id, rest),
            ("encerrar", Some(id)) => Self::Close(id),
            ("propor", Some(id)) => Self::Propose(id, rest.unwrap_or_default()),
            _ => return None,
        })
    }
}

/// Runs `command` for `login` and says how it went, ephemerally.
pub(super) async fn run(state: &MattermostState, login: &str, command: CaseCommand) -> Value {
    let agent = SupportAgent {
        login,
        name: login,
        tenant: Some(&state.tenant),
    };
    let service = &state.service;
    let command = match command.resolved(state).await {
        Ok(c) => c,
        Err(e) => return json!({"response_type": "ephemeral", "text": format!("{e}.")}),
    };
    let text = match command {
        CaseCommand::List => list(state).await,
        CaseCommand::Claim(id) => match service.cases().claim_case(&id, agent).await {
            Ok(Claim::Claimed(_)) => Ok(format!("Atendimento {id} assumido por @{login}.")),
            Ok(Claim::TakenBy(owner)) => Ok(format!("O atendimento {id} já está com @{owner}.")),
            Ok(Claim::Closed(_)) => Ok(format!("O atendimento {id} já foi encerrado.")),
            Ok(Claim::NotFound) => Err(CaseError::NotFound(id)),
            Err(e) => Err(e),
        },
        CaseCommand::Reply(_, text) if text.is_empty() => {
            Ok("Diga o texto: `/vt responder ID texto`.".into())
        }
        CaseCommand::Reply(id, text) => service
            .cases()
            .agent_reply(&id, agent, &text)
            .await
            .map(|()| "Enviado.".into()),
        CaseCommand::HandBack(id, note) => service
            .cases()
            .hand_back(&id, agent, note.as_deref())
            .await
            .map(|_| format!("Atendimento {id} devolvido ao bot.")),
        CaseCommand::Propose(id, rest) => match crate::service::Proposal::parse(&rest) {
            Err(why) => Ok(format!("Proposta não enviada: {why}.")),
            Ok(proposal) => service
                .cases()
                .propose_recharge(&id, agent, &proposal)
                .await
                .map(|what| format!("Proposta enviada ao cliente: {what}. Só o cliente confirma.")),
        },
        CaseCommand::Close(id) => service
            .cases()
            .close_case(&id, agent)
            .await
            .map(|_| format!("Atendimento {id} encerrado.")),
        CaseCommand::Transfer(id, rest) => {
            let mut words = rest.split_whitespace();
            match words.next() {
                None => Ok("Diga a equipe: `/vt transferir ID equipe [atendente]`.".into()),
                Some(team) => service
                    .cases()
                    .transfer_case(&id, agent, team, words.next(), None)
                    .await
                    .map(|c| format!("Atendimento passado para a equipe {}.", c.team)),
            }
        }
        CaseCommand::Away(away) => service.cases().set_away(login, away).await.map(|()| {
            if away {
                "Você está ausente: nenhum atendimento novo é oferecido a você.".into()
            } else {
                "Você está disponível.".into()
            }
        }),
    };
    let text = text.unwrap_or_else(|e| match e {
        CaseError::Store(e) => {
            tracing::error!(error = %e, "case command failed");
            "Não consegui agora. Tente de novo em instantes.".into()
        }
        refused => format!("{refused}."),
    });
    json!({"response_type": "ephemeral", "text": text})
}

impl CaseCommand {
    /// The same command naming the case by its id where it named it by its protocol number.
    async fn resolved(self, state: &MattermostState) -> Result<Self, CaseError> {
        let id = |named: String| async {
            let looks_like_protocol = named.len() == 15
                && named.as_bytes()[8] == b'-'
                && named.chars().filter(char::is_ascii_digit).count() == 14;
            if !looks_like_protocol {
                return Ok(named);
            }
            match state
                .service
                .stores()
                .cases
                .case_by_protocol(Some(&state.tenant), &named)
                .await?
            {
                Some(case) => Ok(case.id),
                None => Err(CaseError::NotFound(named)),
            }
        };
        Ok(match self {
            Self::Claim(c) => Self::Claim(id(c).await?),
            Self::Reply(c, t) => Self::Reply(id(c).await?, t),
            Self::HandBack(c, n) => Self::HandBack(id(c).await?, n),
            Self::Close(c) => Self::Close(id(c).await?),
            Self::Propose(c, r) => Self::Propose(id(c).await?, r),
            Self::Transfer(c, r) => Self::Transfer(id(c).await?, r),
            other => other,
        })
    }
}

/// The tenant's open cases, waiting first.
async fn list(state: &MattermostState) -> Result<String, CaseError> {
    let cases = state
        .service
        .stores()
        .cases
        .cases(Some(&state.tenant), 50)
        .await?;
    let open: Vec<String> = cases
        .iter()
        .filter(|c| c.state.is_open())
        .map(|c| {
            let owner = c
                .owner
                .as_deref()
                .map_or_else(|| "aguardando".to_owned(), |o| format!("com @{o}"));
            let reason = vt_domain::vt::card::mask_cards_in(&c.reason);
            let name = c.protocol.as_deref().unwrap_or(&c.id);
            format!(
                "• `{name}` — {} — {} — {} — {owner} — {reason}",
                c.team,
                c.motivo.label(),
                c.channel
            )
        })
        .collect();
    Ok(if open.is_empty() {
        "Nenhum atendimento aberto.".into()
    } else {
        format!("Atendimentos abertos:\n{}", open.join("\n"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_commands_are_read_and_other_text_is_left_for_the_agent() {
        assert_eq!(CaseCommand::parse("casos"), Some(CaseCommand::List));
        assert_eq!(
            CaseCommand::parse("assumir caso_1"),
            Some(CaseCommand::Claim("caso_1".into()))
        );
        assert_eq!(
            CaseCommand::parse("responder caso_1 Olá, tudo bem?"),
            Some(CaseCommand::Reply("caso_1".into(), "Olá, tudo bem?".into()))
        );
        assert_eq!(
            CaseCommand::parse("devolver caso_1"),
            Some(CaseCommand::HandBack("caso_1".into(), None))
        );
        assert_eq!(
            CaseCommand::parse("propor caso_1 20 1111111111 pix"),
            Some(CaseCommand::Propose("caso_1".into(), "20 1111111111 pix".into()))
        );
        assert_eq!(
            CaseCommand::parse("transferir 20261128-000001 financeiro ana"),
            Some(CaseCommand::Transfer(
                "20261128-000001".into(),
                "financeiro ana".into()
            ))
        );
        assert_eq!(CaseCommand::parse("ausente"), Some(CaseCommand::Away(true)));
        assert_eq!(CaseCommand::parse("disponível"), Some(CaseCommand::Away(false)));
        assert_eq!(CaseCommand::parse("assumir"), None);
        assert_eq!(CaseCommand::parse("saldo 1234567890"), None);
    }
}
