//! A recharge a support agent proposes to the card holder, and the turn that puts it to them.

use serde_json::json;
use vt_domain::tools::RecargaPendente;
use vt_domain::vt::card::{mask_card, mask_cards_in};
use vt_store::{Case, CaseWrite};

use super::cases::{CaseError, SupportAgent, addressed_to_card_holder};
use super::*;

/// A recharge a support agent proposes to the card holder: `valor` in the policy's currency, the card
/// (one the card holder gave in the conversation), and how to pay (`pix`, `boleto`, `cartao`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    pub valor: String,
    pub cartao: String,
    pub meio_pagamento: String,
}

impl Proposal {
    /// `<valor> <cartão> <pix|boleto|cartao>` as a support agent types it; the error says what is
    /// missing (never echoing the card).
    pub fn parse(text: &str) -> Result<Self, &'static str> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let [valor, cartao, meio] = words[..] else {
            return Err("escreva: <valor> <cartão> <pix|boleto|cartao>");
        };
        if vt_domain::vt::parse::parse_money(valor).is_none_or(|v| v <= rust_decimal::Decimal::ZERO) {
            return Err("o valor deve ser um número maior que zero, por exemplo 20 ou 20,50");
        }
        if !cartao.chars().all(|c| c.is_ascii_digit() || c == '.' || c == '-')
            || vt_domain::vt::parse::cards(cartao).len() != 1
        {
            return Err("o cartão deve ser o número do cartão de VT (8 a 19 dígitos)");
        }
        let meio = match meio.to_lowercase().as_str() {
            "pix" => "pix",
            "boleto" => "boleto",
            "cartao" | "cartão" | "credito" | "crédito" | "cartao_credito" => "cartao_credito",
            _ => return Err("o meio de pagamento deve ser pix, boleto ou cartao"),
        };
        Ok(Self {
            valor: valor.to_owned(),
            cartao: vt_domain::vt::parse::cards(cartao).remove(0),
            meio_pagamento: meio.to_owned(),
        })
    }

    /// The turn that prepares it: `preparar_recarga` with these arguments, as the router starts it.
    pub(super) fn start(&self) -> vt_engine::TurnStart {
        vt_engine::TurnStart::Action {
            name: "preparar_recarga".into(),
            arguments: json!({
                "cartao": self.cartao,
                "valor": self.valor,
                "meio_pagamento": self.meio_pagamento,
            }),
        }
    }

    /// What the card holder and the case's log read of it (card masked).
    pub(super) fn describe(&self) -> String {
        let meio = match self.meio_pagamento.as_str() {
            "cartao_credito" => "cartão de crédito",
            other => other,
        };
        format!(
            "recarga de {} reais no cartão {} via {meio}",
            self.valor,
            mask_card(&self.cartao)
        )
    }
}

impl Cases<'_> {
    /// The case's owner proposes a recharge: the card holder gets the usual confirmation (with buttons
    /// where the channel has them), and only their own "sim" or tap confirms it. Nothing here moves
    /// money. Returns what was proposed, masked.
    pub async fn propose_recharge(
        self,
        id: &str,
        agent: SupportAgent<'_>,
        proposal: &Proposal,
    ) -> Result<String, CaseError> {
        let case = self.owned_case(id, agent).await?;
        let lock = self
            .conversations
            .lock_conversation(&case.conversation_id)
            .await?;
        let proposed = self.proposal_turn(&case, agent, proposal).await;
        lock.release().await;
        proposed
    }

    /// The proposal as a turn of the card holder's conversation that begins with `preparar_recarga` —
    /// the same checks and confirmation as when the card holder asks — opened by the agent's message.
    pub(super) async fn proposal_turn(
        &self,
        case: &Case,
        agent: SupportAgent<'_>,
        proposal: &Proposal,
    ) -> Result<String, CaseError> {
        let mut conv = self
            .conversations
            .conversation(&case.conversation_id)
            .await?
            .ok_or_else(|| CaseError::NotFound(case.id.clone()))?;
        // An agent reaches only the cards the card holder gave in this conversation.
        if !vt_domain::tools::cartao::cards_held(&conv.state, &conv.memory).contains(&proposal.cartao) {
            return Err(CaseError::Refused(
                "o cliente não informou esse cartão nesta conversa".into(),
            ));
        }
        let now = self.engine.now();
        let started = Instant::now();
        let described = proposal.describe();
        let opening = ChatMessage::HumanAgent {
            name: agent.name.to_owned(),
            content: format!("Proposta: {described}."),
        };
        let before = RecargaPendente::id_in(&conv.state);
        let text = format!("recarga de {} via {}", proposal.valor, proposal.meio_pagamento);
        let input = vt_engine::TurnInput::new(&text, proposal.start()).opened_by(opening.clone());
        let outcome = self
            .engine
            .run_turn(&mut conv, input)
            .await
            .map_err(|e| CaseError::Refused(e.to_string()))?;
        let after = RecargaPendente::id_in(&conv.state);
        if after.is_none() || after == before {
            // Not prepared (a limit, a card the system refuses): the agent reads why; the card holder
            // hears nothing of it.
            return Err(CaseError::Refused(mask_cards_in(&outcome.reply_text())));
        }
        // Stored before its turn commits, as every message that opens a turn is.
        let accepted_message = self
            .conversations
            .accept_message(vt_store::Accepting::plain(&conv, &opening, now))
            .await?
            .unwrap_or_default();
        let msg = addressed_to_card_holder(&conv, text, self.speaker.sends_late(&conv));
        let ran = Ran {
            outcome,
            routing: Routing::deterministic("proposta_recarga", false),
            context: self.conversations.context(&conv.id).await?,
            started,
            now,
            accepted_message,
            held: Some(CaseWrite::Held {
                line: case.event(now, agent.login, "proposta_recarga", Some(described.clone())),
                acknowledged: false,
            }),
            listened: super::hearing::Listened::default(),
        };
        let handled = self.messages.commit_traced(&mut conv, &msg, ran, false).await;
        if !handled.persisted {
            return Err(CaseError::Refused(
                "a proposta não foi registrada; tente de novo".into(),
            ));
        }
        Ok(described)
    }
}
