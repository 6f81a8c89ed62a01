//! The support side of a case from Mattermost's slash command, for support users only:
//! `/vt casos`, `/vt assumir ID`, `/vt responder ID texto`, `/vt devolver ID [nota]`,
//! `/vt encerrar ID`, `/vt propor ID <valor> <cartão> <pix|boleto|cartao>` — answered ephemerally,
//! in the Mattermost deployment's tenant.

use serde_json::{Value, json};

use super::MattermostState;
use crate::service::{CaseError, SupportAgent};
use crate::store::Claim;

/// What a support user asked of a case.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum CaseCommand {
    List,
    Claim(String),
    Reply(String, String),
    HandBack(String, Option<String>),
    Close(String),
    Propose(String, String),
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
            let reason = vt_actions::vt::card::mask_cards_in(&c.reason);
            format!("• `{}` — {} — {} — {reason}", c.id, c.channel, owner)
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
        assert_eq!(CaseCommand::parse("assumir"), None);
        assert_eq!(CaseCommand::parse("saldo 1234567890"), None);
    }
}
