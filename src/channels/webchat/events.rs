//! A web chat conversation as Server-Sent Events: every stored message the person reads (theirs, the
//! agent's, a support agent's), in stored order, each event's id the message's. A stream opened after
//! `Last-Event-ID` (or `?ultimo=`) starts after it, so a reconnect neither loses nor repeats one; a
//! stream opened without one starts with the conversation's latest messages (its history).
//!
//! An event is `{"id", "papel", "nome"?, "texto", "em", "pix"?, "cartao"?, "boleto"?, "escolhas"?,
//! "botoes"?, "historico"?}` (`botoes`: confirm / cancel under the message that asks for a recharge's
//! confirmation, however it was asked)
//! (`historico`: said before the stream opened, so not new to the person): cards masked,
//! the conversation's own payment codes whole, and a message that shows one carries it apart — a Pix
//! code with its QR image, a card checkout's link, a boleto's checked line — for the widget's buttons.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::Event;
use base64::Engine as _;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::service::Said;
use vt_engine::llm::ChatMessage;
use vt_store::{ChargeMeans, ConversationStore, PixCharge, PixStore, StoredMessage};

/// How often a stream looks for messages said by another instance (this one's wake it at once).
const POLL: Duration = Duration::from_secs(1);
/// How many of the latest messages a stream opened without a place to resume from starts with.
const HISTORY: usize = 100;
/// How soon a browser reconnects a dropped stream.
const RETRY: Duration = Duration::from_secs(1);

/// What a stream reads.
#[derive(Clone)]
pub(super) struct Sources {
    pub conversations: Arc<dyn ConversationStore>,
    pub pix: Arc<dyn PixStore>,
}

/// The events of conversation `id` after message `after` (`None`: its latest messages first), then
/// each message as it is stored. `wake` tells of a conversation whose turn just ended here, `said` of
/// one something was said in outside a turn (a receipt, a person's reply): the stream looks at once.
pub(super) fn stream(
    sources: Sources,
    id: String,
    after: Option<i64>,
    wake: (broadcast::Receiver<String>, broadcast::Receiver<Said>),
) -> impl futures::Stream<Item = Result<Event, Infallible>> {
    let state = (after, std::collections::VecDeque::new(), wake, true);
    futures::stream::unfold(state, move |(mut after, mut ready, mut wake, mut first)| {
        let (sources, id) = (sources.clone(), id.clone());
        async move {
            loop {
                if let Some(event) = ready.pop_front() {
                    return Some((Ok(event), (after, ready, wake, first)));
                }
                if !first {
                    wait(&mut wake, &id).await;
                }
                first = false;
                // Each look reads only what was stored since the last one.
                let Ok(messages) = sources
                    .conversations
                    .messages_after(&id, after.unwrap_or(0))
                    .await
                else {
                    continue;
                };
                let fresh: Vec<&StoredMessage> = match after {
                    Some(_) => messages.iter().collect(),
                    None => {
                        let shown: Vec<_> = messages.iter().filter(|m| shown(m).is_some()).collect();
                        shown[shown.len().saturating_sub(HISTORY)..].to_vec()
                    }
                };
                if fresh.is_empty() {
                    after = after.or_else(|| messages.last().map(|m| m.id)).or(Some(0));
                    continue;
                }
                let charges = sources.pix.conversation_charges(&id).await.unwrap_or_default();
                let history = after.is_none();
                let asks = asking_to_confirm(sources.conversations.as_ref(), &id, &messages).await;
                for m in fresh {
                    after = Some(m.id);
                    if let Some(mut body) = body(m, &charges) {
                        if history {
                            body["historico"] = json!(true);
                        }
                        if let Some((asked, recharge)) = &asks
                            && *asked == m.id
                        {
                            body["botoes"] = confirm_buttons(recharge);
                        }
                        let mut event = Event::default()
                            .id(m.id.to_string())
                            .event("mensagem")
                            .data(body.to_string());
                        if ready.is_empty() {
                            event = event.retry(RETRY);
                        }
                        ready.push_back(event);
                    }
                }
            }
        }
    })
}

/// Until the poll's time passes or either of `wake` names conversation `id`.
async fn wait((turned, said): &mut (broadcast::Receiver<String>, broadcast::Receiver<Said>), id: &str) {
    use broadcast::error::RecvError;
    let sleep = tokio::time::sleep(POLL);
    tokio::pin!(sleep);
    // A closed sender is left to the poll alone; a lagging receiver missed some, so it looks now.
    let (mut turned_open, mut said_open) = (true, true);
    loop {
        tokio::select! {
            () = &mut sleep => return,
            got = turned.recv(), if turned_open => match got {
                Ok(c) if c == id => return,
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => return,
                Err(RecvError::Closed) => turned_open = false,
            },
            got = said.recv(), if said_open => match got {
                Ok(s) if s.conversation_id == id => return,
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => return,
                Err(RecvError::Closed) => said_open = false,
            },
        }
    }
}

/// The message that asks the person to confirm a recharge, and the recharge: the conversation's
/// newest message, when it is the agent's and a recharge waits for confirmation — however it was
/// asked (the person's own request, or a support agent's proposal, which reaches the widget only here).
async fn asking_to_confirm(
    conversations: &dyn ConversationStore,
    id: &str,
    messages: &[StoredMessage],
) -> Option<(i64, String)> {
    let newest = messages.last()?;
    if !matches!(&newest.message, ChatMessage::Assistant { content: Some(t), .. } if !t.trim().is_empty()) {
        return None;
    }
    let conv = conversations.conversation(id).await.ok()??;
    let recharge = vt_domain::tools::RecargaPendente::id_in(&conv.state)?;
    Some((newest.id, recharge))
}

/// Confirm and cancel, as the widget offers them: a tap sends the recharge's id back.
pub(super) fn confirm_buttons(recharge: &str) -> Value {
    json!([
        {"titulo": "Confirmar", "toque": {"recarga": recharge, "confirmar": true}},
        {"titulo": "Cancelar", "toque": {"recarga": recharge, "confirmar": false}},
    ])
}

/// A stored message the person reads: `(role, support agent's name, text)`.
fn shown(m: &StoredMessage) -> Option<(&'static str, Option<&str>, &str)> {
    match &m.message {
        ChatMessage::User { content } => Some(("user", None, content)),
        ChatMessage::Assistant { content: Some(t), .. } if !t.trim().is_empty() => {
            Some(("assistant", None, t))
        }
        ChatMessage::HumanAgent { name, content } => Some(("human_agent", Some(name), content)),
        _ => None,
    }
}

/// A message's event body, for the conversation whose charges are `charges`.
fn body(m: &StoredMessage, charges: &[PixCharge]) -> Option<Value> {
    let (role, name, text) = shown(m)?;
    let codes: Vec<String> = charges.iter().flat_map(PixCharge::codes).collect();
    let mut body = json!({
        "id": m.id,
        "papel": role,
        "texto": vt_domain::vt::card::mask_cards_except(text, &codes),
        "em": m.created_at,
    });
    if let Some(name) = name {
        body["nome"] = json!(name);
    }
    if role == "user" {
        return Some(body);
    }
    // The satisfaction question's 1–5, as the widget's quick replies.
    if let Some(choices) = crate::service::late_choices(text) {
        body["escolhas"] = json!(choices);
    }
    // The charge a message shows, by its code or link in the text.
    let shows = |meio: ChargeMeans| {
        charges
            .iter()
            .filter(|c| c.meio == meio && !c.copia_e_cola.is_empty())
            .find(|c| text.contains(&c.copia_e_cola))
    };
    if let Some(c) = shows(ChargeMeans::Pix)
        && let Ok(png) = vt_domain::pix::qr::png(&c.copia_e_cola)
    {
        body["pix"] = json!({
            "copia_e_cola": c.copia_e_cola,
            "qr_png_base64": base64::engine::general_purpose::STANDARD.encode(png),
        });
    }
    if let Some(c) = shows(ChargeMeans::CartaoCredito) {
        body["cartao"] = json!({"link": c.copia_e_cola});
    }
    if let Some(linha) = boleto_in(text) {
        body["boleto"] = json!({"linha": linha});
    }
    Some(body)
}

/// A boleto's digitable line in `text`, as printed, when it checks.
fn boleto_in(text: &str) -> Option<String> {
    static LINE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\d{5}\.\d{5} \d{5}\.\d{6} \d{5}\.\d{6} \d \d{14}").expect("the line's pattern")
    });
    LINE.find_iter(text)
        .find_map(|m| vt_domain::boleto::LinhaDigitavel::parse(m.as_str()).ok())
        .map(|l| l.formatted())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_boleto_line_is_shown_apart_only_when_it_checks() {
        let date = chrono::NaiveDate::from_ymd_opt(2026, 12, 10).expect("date");
        let line = vt_domain::boleto::LinhaDigitavel::emitir(
            "341",
            date,
            rust_decimal::Decimal::new(5000, 2),
            &"1".repeat(25),
        )
        .expect("a line")
        .formatted();
        assert_eq!(
            boleto_in(&format!("Pague até 10/12: {line}.")),
            Some(line.clone())
        );
        let mut wrong = line.clone();
        wrong.replace_range(0..1, if line.starts_with('9') { "1" } else { "9" });
        assert_eq!(boleto_in(&wrong), None);
    }
}
