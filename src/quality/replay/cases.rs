//! Stored conversations as replay cases: the person's turns in order (texts, taps and picks as they
//! were stored, voice notes as their transcript, bursts as they came), what the systems answered, the
//! model's recorded answers by request, and what the conversation did — every card, phone number and
//! name replaced (`pseudonym.rs`) before any of it leaves the store.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use serde::Serialize;
use vt_connectors::tape::Exchange;

use super::effects::{self, Effect};
use crate::transcript::format::{
    Expect, ExpectRequest, LedgerExpect, ModelReply, Never, Setup, Transcript, Turn,
};
use crate::transcript::pseudonym::Pseudonyms;
use vt_engine::TurnEvent;
use vt_engine::llm::ChatMessage;
use vt_store::{ConversationQuery, Store, StoreError, StoredMessage};

/// Which conversations a replay takes.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Those with a message since this time.
    pub since: Option<DateTime<Utc>>,
    /// Only these conversation ids.
    pub ids: Option<Vec<String>>,
    pub tenant: Option<String>,
}

/// One conversation, ready to replay.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    /// A keyed hash of the conversation's id: stable from run to run, no personal data.
    pub(crate) id: String,
    pub(crate) transcript: Transcript,
    pub(crate) exchanges: Vec<Exchange>,
    /// The model's recorded answers, by their request's fingerprint.
    pub(crate) model: Vec<(String, ModelReply)>,
    pub(crate) recorded: Played,
}

/// What a conversation did, recorded or replayed.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Played {
    pub(crate) effects: Vec<Effect>,
    /// Each turn's replies, one text.
    pub(crate) replies: Vec<String>,
}

/// The case id of a conversation.
pub(crate) fn case_id(conversation_id: &str) -> String {
    format!(
        "caso-{}",
        &vt_store::seal::card_index(&format!("replay-caso:{conversation_id}"))[..12]
    )
}

/// The conversations `selection` names, most recent last, as cases. Flow runs are not conversations.
pub(crate) async fn load(
    store: &dyn Store,
    selection: &Selection,
    pseudonyms: &Arc<Mutex<Pseudonyms>>,
) -> Result<Vec<Case>, StoreError> {
    let ids: Vec<String> = match &selection.ids {
        Some(ids) => ids.clone(),
        None => {
            let listed = store
                .conversation_list(&ConversationQuery {
                    tenant_id: selection.tenant.clone(),
                    limit: 100_000,
                    ..ConversationQuery::default()
                })
                .await?;
            listed
                .into_iter()
                .rev()
                .filter(|c| selection.since.is_none_or(|since| c.updated_at >= since))
                .map(|c| c.id)
                .collect()
        }
    };
    let mut cases = Vec::new();
    for id in ids {
        if let Some(case) = one(store, &id, selection.tenant.as_deref(), pseudonyms).await? {
            cases.push(case);
        }
    }
    Ok(cases)
}

/// The user messages from `at` that make one turn: one message, or a burst (several with no reply
/// between them), and where the next turn starts.
fn turn_at(messages: &[StoredMessage], at: usize) -> (Vec<String>, usize) {
    let mut said = Vec::new();
    let mut end = at;
    while let Some(ChatMessage::User { content }) = messages.get(end).map(|m| &m.message) {
        said.push(content.clone());
        end += 1;
    }
    while end < messages.len() && !matches!(messages[end].message, ChatMessage::User { .. }) {
        end += 1;
    }
    (said, end)
}

/// A turn as the person sent it.
fn turn_of(said: Vec<String>, at: DateTime<Utc>) -> Turn {
    let voice = crate::service::VOICE_MARK;
    let mut turn = Turn {
        at: Some(at.to_rfc3339()),
        ..Turn::default()
    };
    match said.as_slice() {
        [one] if one.starts_with(voice) => turn.voice = Some(one[voice.len()..].trim().to_owned()),
        // What the photo showed was read and written nowhere: the replay's photo shows nothing.
        [one] if one == "[foto]" => turn.image = Some(String::new()),
        [one] => turn.user = one.clone(),
        _ => turn.burst = said,
    }
    turn
}

/// The model's answers of one turn's events, each with its request's fingerprint.
fn model_answers(events: &[TurnEvent]) -> Vec<(String, ModelReply)> {
    let calls: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, TurnEvent::ModelCall(_)))
        .map(|(i, _)| i)
        .collect();
    let mut out = Vec::new();
    for (n, &i) in calls.iter().enumerate() {
        let TurnEvent::ModelCall(call) = &events[i] else {
            continue;
        };
        let (Some(fingerprint), None) = (&call.request, &call.error) else {
            continue;
        };
        let end = calls.get(n + 1).copied().unwrap_or(events.len());
        if let Some(reply) = crate::transcript::export::model_replies(&events[i..end])
            .into_iter()
            .next()
        {
            out.push((fingerprint.clone(), reply));
        }
    }
    out
}

async fn one(
    store: &dyn Store,
    id: &str,
    tenant: Option<&str>,
    pseudonyms: &Arc<Mutex<Pseudonyms>>,
) -> Result<Option<Case>, StoreError> {
    let Some(conv) = store.conversation(id).await? else {
        return Ok(None);
    };
    if conv.agent_id == crate::flow::FLOW_AGENT || tenant.is_some_and(|t| conv.tenant_id != t) {
        return Ok(None);
    }
    let messages = store.messages(id).await?;
    let executions = store.executions(id).await?;
    let charges = store.conversation_charges(id).await?;
    let credits = credit_runs(store, &charges).await?;
    let mut p = pseudonyms.lock().unwrap_or_else(PoisonError::into_inner);
    p.know_name(&conv.user_login);
    let case_id = case_id(id);
    let (mut turns, mut recorded, mut exchanges, mut model) =
        (Vec::new(), Played::default(), Vec::new(), Vec::new());
    let (mut placed, mut paid) = (vec![false; charges.len()], vec![false; charges.len()]);
    let mut at = 0;
    while at < messages.len() {
        if !matches!(messages[at].message, ChatMessage::User { .. }) {
            at += 1;
            continue;
        }
        let (said, end) = turn_at(&messages, at);
        let said = said.iter().map(|s| p.text(s)).collect();
        turns.push(turn_of(said, messages[at].created_at));
        // What the turn said (a receipt said later, outside any turn, is not the turn's).
        let replies: Vec<String> = messages[at..end]
            .iter()
            .filter(|m| m.execucao_id.is_some())
            .filter_map(|m| match &m.message {
                ChatMessage::Assistant {
                    content: Some(c),
                    tool_calls,
                } if tool_calls.is_empty() => Some(p.text(c)),
                _ => None,
            })
            .collect();
        recorded.replies.push(replies.join("\n"));
        // A burst may have run as several turns: every one of them.
        let mut execs: Vec<&str> = messages[at..end]
            .iter()
            .filter_map(|m| m.execucao_id.as_deref())
            .collect();
        execs.dedup();
        let mut turn_events: Vec<TurnEvent> = Vec::new();
        for (_, events) in execs
            .iter()
            .filter_map(|e| executions.iter().find(|(x, _)| x.execucao_id == *e))
        {
            turn_events.extend(events.iter().cloned());
            recorded.effects.extend(effects::of_events(events));
            exchanges.extend(events.iter().filter_map(|e| match e {
                TurnEvent::Exchanged(x) => Some(exchange(&mut p, x)),
                _ => None,
            }));
            model.extend(
                model_answers(events)
                    .into_iter()
                    .map(|(f, r)| (f, reply(&mut p, r))),
            );
        }
        if let Some(turn) = turns.last_mut() {
            turn.expect = expectations(&turn_events);
        }
        // The charges the turn issued — those whose code or link its replies show — after its other
        // effects, in the order they happened.
        let shown: String = messages[at..end]
            .iter()
            .filter_map(|m| m.message.text())
            .collect::<Vec<_>>()
            .join("\n");
        for (i, c) in charges.iter().enumerate() {
            if !placed[i] && !c.copia_e_cola.is_empty() && shown.contains(&c.copia_e_cola) {
                placed[i] = true;
                recorded
                    .effects
                    .push(effects::charge(c.meio.as_str(), &c.amount.to_string()));
                if let Some(turn) = turns.last_mut() {
                    turn.expect.reply_contains.extend(must_show(c, &shown));
                }
            }
        }
        // Then the payments made before the next message, and what they did.
        let until = messages.get(end).map(|m| m.created_at);
        for (i, c) in charges.iter().enumerate() {
            if placed[i] && !paid[i] && paid_before(c, until) {
                paid[i] = true;
                let events = c
                    .execucao_id
                    .as_ref()
                    .and_then(|e| credits.get(e))
                    .map_or(&[][..], Vec::as_slice);
                recorded.effects.extend(effects::of_payment(c, events));
                exchanges.extend(events.iter().filter_map(|e| match e {
                    TurnEvent::Exchanged(x) => Some(exchange(&mut p, x)),
                    _ => None,
                }));
                if let Some(turn) = turns.last_mut() {
                    turn.pays.push(i);
                }
            }
        }
        at = end;
    }
    // A charge no turn showed (issued some other way), after everything, as before.
    recorded.effects.extend(
        charges
            .iter()
            .zip(&placed)
            .filter(|(_, placed)| !**placed)
            .map(|(c, _)| effects::charge(c.meio.as_str(), &c.amount.to_string())),
    );
    let transcript = Transcript {
        name: case_id.clone(),
        description: Some("Conversa gravada, com os dados pessoais trocados (`vt-agent replay`).".into()),
        class: None,
        setup: Setup {
            agent: conv.agent_id.clone(),
            channel: conv.channel.clone(),
            user: p.text(&conv.user_id),
            login: Some(p.text(&conv.user_login)),
            clock: turns.first().and_then(|t| t.at.clone()),
            conversation: Some(case_id.clone()),
            simulated_payments: true,
            ..Setup::default()
        },
        never: vec![Never::RechargeWithoutConfirmation, Never::FullCardInReply],
        turns,
        expect_total: None,
    };
    Ok(Some(Case {
        id: case_id,
        transcript,
        exchanges,
        model,
        recorded,
    }))
}

/// What a turn written as a case must show again, from what it did when it was recorded: the same
/// requests that change the world (recharges sent, notices sent, with their amounts), the same
/// hand-offs and endings, and no recharge where none was sent — so the case fails when they break.
fn expectations(events: &[TurnEvent]) -> Expect {
    let mut requests: Vec<ExpectRequest> = Vec::new();
    for x in events.iter().filter_map(|e| match e {
        TurnEvent::Exchanged(x)
            if x.method == "POST" && matches!(x.system.as_str(), "recarga" | "notificacao") =>
        {
            Some(x)
        }
        _ => None,
    }) {
        let path = x.path.split('?').next().unwrap_or_default().to_owned();
        let body = (x.system == "recarga")
            .then(|| x.body.as_ref().map(|b| serde_json::json!({"valor": b["valor"]})))
            .flatten();
        match requests.iter_mut().find(|r| r.path == path && r.body == body) {
            Some(r) => r.count = r.count.map(|n| n + 1),
            None => requests.push(ExpectRequest {
                method: "POST".into(),
                path,
                count: Some(1),
                headers: std::collections::BTreeMap::new(),
                body,
            }),
        }
    }
    let recharged = requests.iter().any(|r| r.body.is_some());
    Expect {
        system_functions: Some(
            events
                .iter()
                .filter_map(TurnEvent::system_function)
                .map(str::to_owned)
                .collect(),
        ),
        ledger: (!recharged).then_some(LedgerExpect {
            recharges: Some(0),
            notifications: None,
        }),
        requests,
        ..Expect::default()
    }
}

/// The events of the runs that sent the recharges of `charges` once paid, by run.
async fn credit_runs(
    store: &dyn Store,
    charges: &[vt_store::PixCharge],
) -> Result<std::collections::HashMap<String, Vec<TurnEvent>>, StoreError> {
    let mut runs = std::collections::HashMap::new();
    for run in charges.iter().filter_map(|c| c.execucao_id.as_deref()) {
        if let Some((_, events)) = store.execution(run).await? {
            runs.insert(run.to_owned(), events);
        }
    }
    Ok(runs)
}

/// Whether `charge` was paid before a message at `until` (`None`: no message came after): a payment
/// with no time on record (a second code's, returned) is taken as the last thing that happened.
fn paid_before(charge: &vt_store::PixCharge, until: Option<DateTime<Utc>>) -> bool {
    if charge.end_to_end_id.is_none() && charge.refund.is_none() {
        return false;
    }
    match (charge.paid_at, until) {
        (_, None) => true,
        (Some(t), Some(u)) => t < u,
        (None, Some(_)) => false,
    }
}

/// The lines a turn that issued `charge` must show again: its amount as the reply said it, and a Pix
/// code where it showed one (every code is new, its start is not).
fn must_show(charge: &vt_store::PixCharge, shown: &str) -> Vec<String> {
    let amount = vt_domain::vt::money_for_people("BRL", charge.amount, vt_domain::vt::Idioma::PtBr);
    let code = (charge.meio == vt_store::ChargeMeans::Pix).then(|| "000201".to_owned());
    std::iter::once(amount)
        .chain(code)
        .filter(|line| shown.contains(line.as_str()))
        .collect()
}

fn exchange(p: &mut Pseudonyms, x: &Exchange) -> Exchange {
    Exchange {
        path: p.text(&x.path),
        body: x.body.as_ref().map(|b| p.json(b)),
        answer: x.answer.as_ref().map(|a| p.json(a)),
        ..x.clone()
    }
}

fn reply(p: &mut Pseudonyms, reply: ModelReply) -> ModelReply {
    let call = |p: &mut Pseudonyms, mut c: crate::transcript::format::ScriptedCall| {
        c.arguments = c.arguments.map(|a| p.json(&a));
        c.raw_arguments = c.raw_arguments.map(|a| p.text(&a));
        c
    };
    match reply {
        ModelReply::Text(t) => ModelReply::Text(p.text(&t)),
        ModelReply::ToolCall(c) => ModelReply::ToolCall(call(p, c)),
        ModelReply::ToolCalls(cs) => ModelReply::ToolCalls(cs.into_iter().map(|c| call(p, c)).collect()),
        other => other,
    }
}
