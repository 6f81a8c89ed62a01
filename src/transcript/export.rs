//! Export: a stored conversation as a transcript, with the expectations it actually produced —
//! the model's replies rebuilt from the recorded events, the tool calls, the replies, the system
//! functions — ready to become a regression test.

use serde_json::Value;

use super::format::{
    ExpectCall, Fault, ModelReply, Never, ScriptedCall, Setup, SkillChange, Transcript, Turn,
};
use vt_engine::TurnEvent;
use vt_engine::llm::ChatMessage;
use vt_store::StoreError;

/// The first line of a transcript with the cards in clear (`transcript export`, the console's
/// administrators): it replays against the real cards, so it is the person's data.
pub(crate) const CLEAR_HEADER: &str = "# Transcrição com os números completos dos cartões: reproduz as consultas e recargas \
contra os cartões reais. É dado pessoal do titular: guarde e apague como tal.\n";

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("conversa {0} não encontrada")]
    NotFound(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The model's replies during a turn, rebuilt from its events: after each model call, the tool calls
/// it asked for, or its text answer.
pub(crate) fn model_replies(events: &[TurnEvent]) -> Vec<ModelReply> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < events.len() {
        if let TurnEvent::ModelCall(call) = &events[i] {
            if call.error.is_some() {
                out.extend((0..call.attempts).map(|_| ModelReply::Fault(Fault::Status(500))));
                i += 1;
                continue;
            }
            let mut calls = Vec::new();
            let mut text = None;
            let mut j = i + 1;
            while j < events.len() && !matches!(events[j], TurnEvent::ModelCall(_)) {
                match &events[j] {
                    TurnEvent::ToolCall {
                        name,
                        arguments,
                        deterministic: false,
                        ..
                    } if text.is_none() => {
                        calls.push(ScriptedCall {
                            name: name.clone(),
                            arguments: vt_contract::json::from_text(arguments).ok(),
                            raw_arguments: None,
                        });
                    }
                    TurnEvent::Reply(r) if calls.is_empty() => text = Some(r.text.clone()),
                    _ => {}
                }
                j += 1;
            }
            match (calls.len(), text) {
                (0, Some(t)) => out.push(ModelReply::Text(t)),
                (0, None) => out.push(ModelReply::Text(String::new())),
                (1, _) => out.push(ModelReply::ToolCall(calls.remove(0))),
                _ => out.push(ModelReply::ToolCalls(calls)),
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

pub async fn export(
    store: &dyn vt_store::ConversationStore,
    conversation_id: &str,
) -> Result<Transcript, ExportError> {
    let conv = store
        .conversation(conversation_id)
        .await?
        .ok_or_else(|| ExportError::NotFound(conversation_id.to_owned()))?;
    let messages = store.messages(conversation_id).await?;
    let executions = store.executions(conversation_id).await?;
    let executions: std::collections::HashMap<&str, _> = executions
        .iter()
        .map(|(execution, events)| (execution.execucao_id.as_str(), (execution, events)))
        .collect();
    let mut turns = Vec::new();
    let mut first_at = None;
    let mut idx = 0;
    while idx < messages.len() {
        let ChatMessage::User { content } = &messages[idx].message else {
            idx += 1;
            continue;
        };
        let at = messages[idx].created_at;
        first_at.get_or_insert(at);
        let mut end = idx + 1;
        while end < messages.len() && !matches!(messages[end].message, ChatMessage::User { .. }) {
            end += 1;
        }
        let exec_id = messages[idx + 1..end].iter().find_map(|m| m.execucao_id.clone());
        let replies: Vec<String> = messages[idx + 1..end]
            .iter()
            .filter_map(|m| match &m.message {
                ChatMessage::Assistant {
                    content: Some(c),
                    tool_calls,
                } if tool_calls.is_empty() => Some(c.clone()),
                _ => None,
            })
            .collect();
        let mut turn = Turn {
            user: content.clone(),
            at: Some(at.to_rfc3339()),
            ..Turn::default()
        };
        turn.expect.reply = Some(replies.join("\n"));
        if let Some((execution, events)) = exec_id.as_deref().and_then(|id| executions.get(id)) {
            if let Some(TurnEvent::Routed {
                intent, classified, ..
            }) = events.first()
            {
                turn.expect.intent = Some(intent.clone());
                if *classified {
                    turn.classify = Some(intent.clone());
                }
            }
            turn.model = model_replies(events);
            turn.expect.model_calls = Some(execution.model_calls.len());
            turn.expect.status = Some(execution.status.as_str().to_owned());
            turn.expect.tool_calls = Some(
                events
                    .iter()
                    .filter_map(TurnEvent::model_tool_call)
                    .map(|(name, arguments)| ExpectCall {
                        name: name.to_owned(),
                        arguments: vt_contract::json::from_text::<Value>(arguments).ok(),
                        arguments_exact: None,
                        ignore: Vec::new(),
                    })
                    .collect(),
            );
            let functions: Vec<String> = events
                .iter()
                .filter_map(|e| e.system_function().map(str::to_owned))
                .collect();
            turn.expect.system_functions = Some(functions);
            let changes: Vec<SkillChange> = events
                .iter()
                .filter_map(|e| match e {
                    TurnEvent::SkillChanged { from, to, .. } => Some(SkillChange {
                        from: from.clone(),
                        to: to.clone(),
                    }),
                    _ => None,
                })
                .collect();
            if !changes.is_empty() {
                turn.expect.skill_changes = Some(changes);
            }
        }
        turns.push(turn);
        idx = end;
    }
    let scripted = turns.iter().any(|t| !t.model.is_empty() || t.classify.is_some());
    Ok(Transcript {
        name: format!("exportada de {conversation_id}"),
        class: None,
        description: Some(
            "Gerada por `vt-agent transcript export`: as expectativas são o que a conversa fez.".into(),
        ),
        setup: Setup {
            agent: conv.agent_id.clone(),
            channel: conv.channel.clone(),
            user: conv.user_id.clone(),
            clock: first_at.map(|t| t.to_rfc3339()),
            conversation: Some(conversation_id.to_owned()),
            model: Some(if scripted { "scripted" } else { "none" }.into()),
            ..Setup::default()
        },
        never: vec![Never::RechargeWithoutConfirmation, Never::FullCardInReply],
        turns,
        expect_total: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vt_engine::Reply;
    use vt_engine::conversation::ModelCallRecord;

    fn call(error: bool) -> TurnEvent {
        TurnEvent::ModelCall(ModelCallRecord {
            skill: "s".into(),
            model: "m".into(),
            tokens_input: 1,
            tokens_output: 1,
            tokens_cached: 0,
            tokens_cache_write: 0,
            latencia_ms: 1,
            stop_reason: "x".into(),
            attempts: if error { 3 } else { 1 },
            error: error.then(|| "down".into()),
            request: None,
        })
    }

    #[test]
    fn model_replies_are_rebuilt_from_events() {
        let tool = |name: &str, det: bool| TurnEvent::ToolCall {
            call_id: "c".into(),
            skill: "s".into(),
            name: name.into(),
            arguments: "{\"cartao\":\"1\"}".into(),
            deterministic: det,
        };
        let events = vec![
            tool("routed", false),
            call(false),
            tool("consultar_saldo", false),
            tool("notificar", false),
            call(false),
            TurnEvent::Reply(Reply {
                text: "pronto".into(),
                files: vec![],
            }),
        ];
        let replies = model_replies(&events);
        assert_eq!(replies.len(), 2);
        assert!(
            matches!(&replies[0], ModelReply::ToolCalls(c) if c.len() == 2 && c[0].name == "consultar_saldo")
        );
        assert_eq!(replies[1], ModelReply::Text("pronto".into()));
        assert_eq!(
            model_replies(&[call(true)]).len(),
            3,
            "a model that stayed down: one fault per attempt"
        );
    }
}
