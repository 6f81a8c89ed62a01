//! A review item as a transcript (issue "Step 38"): the conversation up to the flagged bot message,
//! its personal data replaced as replay replaces it, and on the flagged turn what a reviewer says
//! should have happened — a test that fails on the build that answered wrongly, and passes once the
//! answer is fixed. Earlier turns are played, not checked: a fix may change them.

use vt_engine::llm::ChatMessage;
use vt_store::{ConversationStore, Expectation, ReviewItem, StoredMessage};

use super::export::{ExportError, export};
use super::format::{ExpectCall, ModelReply, Never, Transcript, Turn};
use super::pseudonym::Pseudonyms;

/// The user messages up to and including the turn that said message `message_id`: its index among
/// the conversation's user messages (`None`: no user message came before it).
fn turn_of(messages: &[StoredMessage], message_id: i64) -> Option<usize> {
    messages
        .iter()
        .filter(|m| m.id < message_id && matches!(m.message, ChatMessage::User { .. }))
        .count()
        .checked_sub(1)
}

/// The conversation up to the flagged message, personal data replaced by `p`'s fakes (the ones the
/// queue showed), with `expectation` on the flagged turn. `messages`: the conversation's, as read for
/// the queue.
pub(crate) async fn review_case(
    store: &dyn ConversationStore,
    item: &ReviewItem,
    messages: &[StoredMessage],
    p: &mut Pseudonyms,
    expectation: &Expectation,
    labels: &[String],
) -> Result<Transcript, ExportError> {
    let conversation = &item.item.conversation_id;
    let exported = export(store, conversation).await?;
    let last = turn_of(messages, item.item.message_id).ok_or_else(|| {
        ExportError::NotFound(format!("{conversation} (mensagem {})", item.item.message_id))
    })?;
    let mut turns: Vec<Turn> = exported
        .turns
        .into_iter()
        .take(last + 1)
        .map(|t| Turn {
            user: p.text(&t.user),
            at: t.at,
            classify: t.classify,
            model: t.model.iter().map(|r| pseudonymous(p, r)).collect(),
            ..Turn::default()
        })
        .collect();
    if let Some(flagged) = turns.last_mut() {
        let e = &mut flagged.expect;
        e.reply_contains = expectation.contains.iter().map(|w| p.text(w)).collect();
        e.reply_not_contains = expectation.not_contains.iter().map(|w| p.text(w)).collect();
        e.tool_calls = expectation.action.as_ref().map(|name| {
            vec![ExpectCall {
                name: name.clone(),
                arguments: None,
                arguments_exact: None,
                ignore: Vec::new(),
            }]
        });
        e.not_called = expectation.never.iter().cloned().collect();
    }
    let mut setup = exported.setup;
    setup.user = "u-revisao".into();
    setup.conversation = None;
    setup.spare_replies = setup.model.as_deref() == Some("scripted");
    let labels = if labels.is_empty() {
        "nenhuma".to_owned()
    } else {
        labels.join(", ")
    };
    Ok(Transcript {
        name: format!("revisão {}", item.id),
        description: Some(format!(
            "Da fila de revisão ({}): a resposta sinalizada e o que devia ter acontecido. Categorias: {labels}.",
            item.item.source
        )),
        class: Some("revisao".into()),
        setup,
        never: vec![Never::RechargeWithoutConfirmation, Never::FullCardInReply],
        turns,
        expect_total: None,
    })
}

/// A recorded model reply with its texts and arguments pseudonymised.
fn pseudonymous(p: &mut Pseudonyms, reply: &ModelReply) -> ModelReply {
    match reply {
        ModelReply::Text(t) => ModelReply::Text(p.text(t)),
        ModelReply::ToolCall(c) => ModelReply::ToolCall(call(p, c)),
        ModelReply::ToolCalls(cs) => ModelReply::ToolCalls(cs.iter().map(|c| call(p, c)).collect()),
        other => other.clone(),
    }
}

fn call(p: &mut Pseudonyms, c: &super::format::ScriptedCall) -> super::format::ScriptedCall {
    super::format::ScriptedCall {
        name: c.name.clone(),
        arguments: c.arguments.as_ref().map(|a| p.json(a)),
        raw_arguments: c.raw_arguments.as_ref().map(|r| p.text(r)),
    }
}
