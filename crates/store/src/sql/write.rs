//! The row writers both backends share: each returns a [`Stmt`] that a caller runs on its own, in a
//! transaction, or as one part of a [`crate::writes::Writes`] query ([`Stmt::push_on`]).

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Arg, Stmt};
use crate::{
    Accepting, CardRef, ConversationContext, Existing, FlowRunRecord, NewOutboxItem, ROWS_PER_INSERT,
    StoreError, TurnRecord, UsageRecord, role, seal, search_text,
};
use vt_engine::Conversation;
use vt_engine::llm::ChatMessage;

/// `v` as JSON, sealed.
pub(crate) fn sealed<T: Serialize + ?Sized>(v: &T) -> Result<Arg, StoreError> {
    Ok(Arg::Sealed(Some(seal::seal(&vt_contract::json::to_text(v)?))))
}

/// The conversation's row, inserted or (`Existing::Update`) updated; with the blind-index rows its
/// cards need.
pub(crate) fn conversation(
    c: &Conversation,
    now: DateTime<Utc>,
    existing: Existing,
) -> Result<(Stmt, Vec<CardRef>), StoreError> {
    let handoff = match &c.handoff {
        Some(h) => sealed(h)?,
        None => Arg::Sealed(None),
    };
    let row = vec![
        c.id.as_str().into(),
        c.agent_id.as_str().into(),
        c.user_id.as_str().into(),
        c.user_login.as_str().into(),
        c.channel.as_str().into(),
        c.active_skill.as_str().into(),
        sealed(&c.state)?,
        sealed(&c.memory)?,
        sealed(&c.window)?,
        handoff,
        c.ended.into(),
        now.into(),
        now.into(),
        c.tenant_id.as_str().into(),
    ];
    let tail = match existing {
        Existing::Update => {
            " ON CONFLICT (id) DO UPDATE SET active_skill = excluded.active_skill, state = excluded.state,
                 memory = excluded.memory, skill_window = excluded.skill_window, handoff = excluded.handoff,
                 ended = excluded.ended, updated_at = excluded.updated_at"
        }
        Existing::Keep => " ON CONFLICT (id) DO NOTHING",
    };
    let stmt = Stmt::values(
        "INSERT INTO conversations (id, agent_id, user_id, user_login, channel, active_skill, state, memory,
             skill_window, handoff, ended, created_at, updated_at, tenant_id)",
        vec![row],
        tail,
    );
    // A new conversation (accepting its first message, a flow's start) holds no card yet.
    let refs = match existing {
        Existing::Update => crate::conversation_card_refs(c),
        Existing::Keep => Vec::new(),
    };
    Ok((stmt, refs))
}

/// The conversation's compressed context, inserted or replaced.
pub(crate) fn context(c: &ConversationContext) -> Result<Stmt, StoreError> {
    let row = vec![
        c.conversation_id.as_str().into(),
        c.user_id.as_str().into(),
        Arg::Text(c.summary.as_deref().map(seal::seal)),
        sealed(&c.key_facts)?,
        c.last_intent.as_deref().into(),
        c.turn_count.into(),
        c.updated_at.into(),
    ];
    Ok(Stmt::values(
        "INSERT INTO conversation_context (conversation_id, user_id, summary, key_facts, last_intent, turn_count, updated_at)",
        vec![row],
        " ON CONFLICT (conversation_id) DO UPDATE SET summary = excluded.summary, key_facts = excluded.key_facts,
             last_intent = excluded.last_intent, turn_count = excluded.turn_count, updated_at = excluded.updated_at",
    ))
}

/// `items` in one multi-row insert, returning their ids.
pub(crate) fn outbox(items: &[NewOutboxItem], now: DateTime<Utc>) -> Result<Stmt, StoreError> {
    let rows = items
        .iter()
        .map(|item| {
            Ok(vec![
                item.kind.as_str().into(),
                item.destination.as_str().into(),
                sealed(&item.payload)?,
                item.max_attempts.into(),
                item.next_attempt_at.into(),
                now.into(),
                item.conversation_id.as_deref().into(),
                item.status.as_str().into(),
            ])
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(Stmt::values(
        "INSERT INTO outbox (kind, destination, payload, max_attempts, next_attempt_at, created_at, conversation_id, status)",
        rows,
        " RETURNING id",
    ))
}

/// A turn's usage figures.
pub(crate) fn usage(u: &UsageRecord) -> Stmt {
    let row = vec![
        u.conversation_id.as_str().into(),
        u.intent_key.as_str().into(),
        u.action_type.as_str().into(),
        u.tokens_input.into(),
        u.tokens_output.into(),
        u.execution_time_ms.into(),
        u.was_keyword_matched.into(),
        u.created_at.into(),
        u.audio_ms.into(),
        u.tokens_cached.into(),
        u.tenant_id.as_str().into(),
        u.custo_micro_brl.into(),
        u.marcas.as_str().into(),
    ];
    Stmt::values(
        "INSERT INTO usage_metrics (conversation_id, intent_key, action_type, tokens_input, tokens_output,
             execution_time_ms, was_keyword_matched, created_at, audio_ms, tokens_cached, tenant_id,
             custo_micro_brl, marcas)",
        vec![row],
        "",
    )
}

/// An accepted message (returning its id; nothing for a redelivered `channel_message_id`),
/// unprocessed until its turn commits when it has a channel id.
pub(crate) fn accepted(a: &Accepting<'_>) -> Result<Stmt, StoreError> {
    let media = match a.media {
        Some(m) => sealed(m)?,
        None => Arg::Sealed(None),
    };
    Ok(Stmt::new(
        "INSERT INTO messages (conversation_id, execucao_id, role, body, created_at, channel_message_id, processed, search_text, media)
         VALUES ($1, NULL, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING RETURNING id",
    )
    .bind(a.conversation.id.as_str())
    .bind(role(a.message))
    .bind(sealed(a.message)?)
    .bind(a.now)
    .bind(a.channel_message_id)
    .bind(a.channel_message_id.is_none())
    .bind(search_text(a.message))
    .bind(media))
}

/// Message `id`'s text replaced by what was heard of it (a voice note's transcript).
/// A message said in conversation `conversation_id` outside a turn (a late outcome, a person's
/// words, a question or an offer the product puts), at `at`.
pub(crate) fn said_outside_a_turn(
    conversation_id: &str,
    message: &ChatMessage,
    at: DateTime<Utc>,
) -> Result<Stmt, StoreError> {
    Ok(Stmt::new(
        "INSERT INTO messages (conversation_id, execucao_id, role, body, created_at, search_text) \
         VALUES ($1, NULL, $2, $3, $4, $5) RETURNING id",
    )
    .bind(conversation_id)
    .bind(role(message))
    .sealed(message)?
    .bind(at)
    .bind(search_text(message)))
}

pub(crate) fn heard(id: i64, message: &ChatMessage) -> Result<Stmt, StoreError> {
    Ok(
        Stmt::new("UPDATE messages SET body = $2, search_text = $3 WHERE id = $1")
            .bind(id)
            .bind(sealed(message)?)
            .bind(search_text(message)),
    )
}

/// The runs (inserted, or completing the rows [`crate::FlowStore::begin_flow_run`] left) and
/// their stages, [`ROWS_PER_INSERT`] rows to a statement.
pub(crate) fn flow_runs(runs: &[FlowRunRecord], now: DateTime<Utc>) -> Result<Vec<Stmt>, StoreError> {
    let mut rows = Vec::with_capacity(runs.len());
    let mut stages = Vec::new();
    for run in runs {
        rows.push(vec![
            run.execucao_id.as_str().into(),
            run.status.as_str().into(),
            sealed(&run.input)?,
            run.created_at.into(),
            now.into(),
            run.parent_execucao_id.as_deref().into(),
            crate::flow_card_hash(&run.input).into(),
            crate::flow_tenant(&run.input).into(),
        ]);
        for (i, (etapa, saida)) in run.stages.iter().enumerate() {
            stages.push(vec![
                run.execucao_id.as_str().into(),
                Arg::Int(Some(i as i64)),
                etapa.as_str().into(),
                sealed(saida)?,
            ]);
        }
    }
    let mut statements = Vec::new();
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        statements.push(Stmt::values(
            "INSERT INTO flow_runs (execucao_id, status, input, created_at, finished_at, parent_execucao_id,
                 card_hash, tenant_id)",
            rows.by_ref().take(ROWS_PER_INSERT).collect(),
            " ON CONFLICT (execucao_id) DO UPDATE SET status = excluded.status, finished_at = excluded.finished_at",
        ));
    }
    let mut stages = stages.into_iter().peekable();
    while stages.peek().is_some() {
        statements.push(Stmt::values(
            "INSERT INTO flow_stages (execucao_id, position, etapa, saida)",
            stages.by_ref().take(ROWS_PER_INSERT).collect(),
            "",
        ));
    }
    Ok(statements)
}

/// A turn's rows but its case's, its flow runs' and its cards': the conversation, the messages, the
/// execution, usage, the accepted message marked processed, the compressed context and the outbox
/// items, in that order. With the blind-index rows the conversation's cards need.
pub(crate) fn turn(
    turn: &TurnRecord<'_>,
    now: DateTime<Utc>,
) -> Result<(Vec<Stmt>, Vec<CardRef>), StoreError> {
    let e = turn.execution;
    let (tokens_in, tokens_out) = e.tokens();
    let (conversation, refs) = conversation(turn.conversation, now, Existing::Update)?;
    let mut statements = vec![conversation];
    if !turn.messages.is_empty() {
        let rows = turn
            .messages
            .iter()
            .map(|m| {
                Ok(vec![
                    turn.conversation.id.as_str().into(),
                    e.execucao_id.as_str().into(),
                    role(m).into(),
                    sealed(m)?,
                    now.into(),
                    search_text(m).into(),
                ])
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        statements.push(Stmt::values(
            "INSERT INTO messages (conversation_id, execucao_id, role, body, created_at, search_text)",
            rows,
            "",
        ));
    }
    let execution = vec![
        e.execucao_id.as_str().into(),
        e.conversation_id.as_str().into(),
        e.agent_id.as_str().into(),
        e.status.as_str().into(),
        e.error.as_deref().into(),
        sealed(&e.model_calls)?,
        sealed(turn.events)?,
        (tokens_in as i64).into(),
        (tokens_out as i64).into(),
        e.started_at.into(),
        e.finished_at.into(),
    ];
    statements.push(Stmt::values(
        "INSERT INTO executions (execucao_id, conversation_id, agent_id, status, error, model_calls, events,
             tokens_input, tokens_output, started_at, finished_at)",
        vec![execution],
        "",
    ));
    statements.extend(turn.usage.map(usage));
    if let Some((first, last)) = turn.accepted_message {
        statements.push(
            Stmt::new(
                "UPDATE messages SET processed = TRUE WHERE conversation_id = $1 AND id BETWEEN $2 AND $3",
            )
            .bind(turn.conversation.id.as_str())
            .bind(first)
            .bind(last),
        );
    }
    if let Some(c) = turn.context {
        statements.push(context(c)?);
    }
    if !turn.outbox.is_empty() {
        statements.push(outbox(turn.outbox, now)?);
    }
    Ok((statements, refs))
}
