//! A conversation as the people helping its card holder read it: who said what, when — the card
//! holder, the assistant, a person by name — and its payments as panels with their state (a Pix code,
//! a card checkout's link, a boleto's line and due date). No event, tool, state or instruction meant
//! for the model: those are the administrator's "Detalhes técnicos" on the conversation page.

use minijinja::{Value, context};
use serde_json::Value as Json;

use super::pages::{masked_with, message_text, when};
use crate::http::state::AppState;
use vt_engine::llm::ChatMessage;
use vt_store::{ChargeMeans, ChargeStatus, StoreError};

/// The conversation's messages as chat lines, oldest first; `codes` (its payment codes) stay whole.
pub(super) async fn lines(
    state: &AppState,
    conversation: &str,
    codes: &[String],
) -> Result<Vec<Value>, StoreError> {
    let stored = state.stores.conversations.messages(conversation).await?;
    let flagged = state.stores.review.flagged_messages(conversation).await?;
    Ok(stored
        .iter()
        .filter_map(|m| {
            let (who, name) = match &m.message {
                ChatMessage::User { .. } => ("cliente", "Cliente".to_owned()),
                ChatMessage::Assistant { content: Some(c), .. } if !c.is_empty() => {
                    ("assistente", "Assistente".to_owned())
                }
                ChatMessage::HumanAgent { name, .. } => ("atendente", name.clone()),
                _ => return None,
            };
            let text = match &m.message {
                ChatMessage::HumanAgent { content, .. } => content.clone(),
                other => message_text(other),
            };
            Some(context! {
                id => m.id,
                conversa => conversation,
                sinalizada => flagged.contains(&m.id),
                de => who,
                nome => name,
                texto => masked_with(&text, codes),
                quando => when(state, m.created_at),
            })
        })
        .collect())
}

/// A charge's state as people read it.
fn charge_state(status: ChargeStatus) -> &'static str {
    match status {
        ChargeStatus::Ativa => "aguardando pagamento",
        ChargeStatus::Paga => "paga, recarga a caminho",
        ChargeStatus::Creditada => "paga e creditada",
        ChargeStatus::Enviada => "paga, recarga aguardando o sistema",
        ChargeStatus::Devolvida => "paga e devolvida",
        ChargeStatus::Expirada => "expirada sem pagamento",
    }
}

/// Money as Brazilians read it: `R$ 1.234,56`.
pub(super) fn reais(amount: rust_decimal::Decimal) -> String {
    vt_domain::vt::format_money("R$", amount, vt_domain::vt::Idioma::PtBr)
}

/// The conversation's payments as panels: its Pix codes and card checkouts (from its charges), and the
/// boletos of the recharges its turns started (from their runs).
pub(super) async fn payments(state: &AppState, conversation: &str) -> Result<Vec<Value>, StoreError> {
    let mut panels = Vec::new();
    for c in state.stores.pix.conversation_charges(conversation).await? {
        let card = c.meio == ChargeMeans::CartaoCredito;
        let mut rows = vec![
            ("Valor", reais(c.amount)),
            ("Situação", charge_state(c.status).to_owned()),
            ("Válido até", when(state, c.expires_at)),
        ];
        if let Some(paid) = c.paid_at {
            rows.push(("Pago em", when(state, paid)));
        }
        rows.push(("Cobrança (txid)", c.txid.clone()));
        if let Some(e2e) = &c.end_to_end_id {
            rows.push(("Pagamento", e2e.clone()));
        }
        if let Some(refund) = &c.refund {
            rows.push((
                "Devolução",
                format!("{} ({})", refund_state(&refund.status), refund.end_to_end_id),
            ));
        }
        panels.push(context! {
            tipo => if card { "cartao" } else { "pix" },
            titulo => if card { "Cartão de crédito".to_owned() } else { format!("Pix (código {})", c.n + 1) },
            linhas => rows.into_iter().map(|(k, v)| context! { rotulo => k, valor => v }).collect::<Vec<_>>(),
            codigo => (!card).then(|| c.copia_e_cola.clone()),
            link => card.then(|| c.copia_e_cola.clone()),
            situacao => c.status.as_str(),
        });
    }
    let executions = state.stores.conversations.executions(conversation).await?;
    for (execution, _) in &executions {
        for run in state.stores.flows.runs_started_by(&execution.execucao_id).await? {
            if let Some(panel) = boleto_panel(state, &run).await? {
                panels.push(panel);
            }
        }
    }
    Ok(panels)
}

fn refund_state(status: &str) -> &'static str {
    match status {
        "DEVOLVIDO" => "devolvido ao pagador",
        "NAO_REALIZADO" => "não realizada",
        _ => "em processamento",
    }
}

/// The boleto of run `id`'s recharge, if it was paid by one: its line (checked when the run kept it),
/// due date, amount and where it stands.
async fn boleto_panel(state: &AppState, id: &str) -> Result<Option<Value>, StoreError> {
    let Some(run) = state.stores.flows.flow_run(id).await? else {
        return Ok(None);
    };
    let Some(conciliacao) = run
        .stages
        .iter()
        .rev()
        .find(|(etapa, saida)| etapa == "rf08_conciliar_recarga" && saida.get("boleto").is_some())
        .map(|(_, saida)| saida)
    else {
        return Ok(None);
    };
    let boleto = &conciliacao["boleto"];
    let text = |v: &Json| v.as_str().unwrap_or_default().to_owned();
    let due = boleto["vencimento"]
        .as_str()
        .and_then(|d| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").ok());
    // The last word on the recharge: a follow-up's, else the reconciliation's.
    let last = run
        .stages
        .iter()
        .rev()
        .find_map(|(_, saida)| {
            saida
                .get("status_recarga")
                .and_then(Json::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default();
    let fell_due = run.stages.iter().any(|(_, saida)| {
        saida["observacoes"].as_array().is_some_and(|o| {
            o.iter()
                .any(|x| x.as_str() == Some(vt_domain::stages::rf08_conciliar_recarga::BOLETO_VENCIDO))
        })
    });
    let situation = match last.as_str() {
        _ if fell_due => "vencido sem pagamento",
        "aprovada" => "pago e creditado",
        "pendente" => "aguardando pagamento",
        "negada" => "recusado",
        _ => "em verificação",
    };
    let amount = vt_domain::vt::decimal_from_json(&conciliacao["valor_recarga"]).map(reais);
    let mut rows = vec![
        (
            "Vencimento",
            due.map(|d| d.format("%d/%m/%Y").to_string()).unwrap_or_default(),
        ),
        ("Situação", situation.to_owned()),
    ];
    if let Some(amount) = amount {
        rows.insert(0, ("Valor", amount));
    }
    Ok(Some(context! {
        tipo => "boleto",
        titulo => "Boleto",
        linhas => rows.into_iter().map(|(k, v)| context! { rotulo => k, valor => v }).collect::<Vec<_>>(),
        codigo => text(&boleto["linha_digitavel"]),
        link => Option::<String>::None,
        situacao => situation.replace(' ', "-"),
    }))
}
