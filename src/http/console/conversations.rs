//! Conversations: the list (by person, card or text), one conversation as a chat with its payments and,
//! for administrators, its turns' technical details, and the regression transcript an administrator
//! downloads.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use minijinja::{Value, context};
use serde::Deserialize;
use serde_json::Value as Json;

use super::render;
use super::session::Staff;
use crate::http::state::AppState;
use vt_engine::TurnEvent;
use vt_engine::llm::ChatMessage;
use vt_store::{ConversationQuery, StoredMessage};

/// Rows a list shows.
use super::pages::*;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ConversationFilter {
    q: String,
    canal: String,
}

pub(super) async fn conversations(
    State(state): State<AppState>,
    staff: Staff,
    Query(filter): Query<ConversationFilter>,
) -> Response {
    let query = ConversationQuery {
        intent: None,
        tenant_id: tenant_filter(&staff),
        channel: Some(filter.canal.trim().to_owned()).filter(|c| !c.is_empty()),
        text: Some(filter.q.trim().to_owned()).filter(|q| !q.is_empty()),
        limit: LIST_LIMIT,
    };
    let rows = match state.stores.conversations.conversation_list(&query).await {
        Ok(rows) => rows,
        Err(e) => return store_failed(&staff, &e),
    };
    let rows: Vec<Value> = rows
        .iter()
        .map(|c| {
            context! {
                id => c.id.clone(),
                canal => c.channel.clone(),
                usuario => masked(if c.user_login.is_empty() { &c.user_id } else { &c.user_login }),
                ultima => c.last_message.as_ref().map(|m| cut(&masked(&message_text(m)), 120)),
                intencao => c.last_intent.clone(),
                situacao => if c.handed_over { "transferida" } else if c.ended { "encerrada" } else { "aberta" },
                atualizada => when(&state, c.updated_at),
            }
        })
        .collect();
    let channels: Vec<String> = state.service.channels().names().map(str::to_owned).collect();
    render(
        StatusCode::OK,
        "conversas.html",
        context! {
            conversas => rows,
            q => filter.q,
            canal => filter.canal,
            canais => channels,
            ..frame(Some(&staff), "conversations", "Conversas")
        },
    )
}

/// One line of a turn's events, as the transcript shows it.
fn event_line(event: &TurnEvent) -> Option<(&'static str, String)> {
    Some(match event {
        TurnEvent::Routed {
            intent,
            keyword_matched,
            classified,
        } => {
            let level = if *keyword_matched {
                "nível 1, palavras-chave"
            } else if *classified {
                "nível 2, classificação"
            } else {
                "sem regra: o modelo decide"
            };
            ("roteador", format!("intenção {intent} ({level})"))
        }
        TurnEvent::ModelCall(c) => (
            "modelo",
            format!(
                "{} na habilidade {}: {} tokens de entrada, {} de saída, {} ms{}",
                c.model,
                c.skill,
                c.tokens_input,
                c.tokens_output,
                c.latencia_ms,
                c.error
                    .as_deref()
                    .map(|e| format!(" — erro: {e}"))
                    .unwrap_or_default()
            ),
        ),
        TurnEvent::ToolCall {
            skill,
            name,
            arguments,
            deterministic,
            ..
        } => (
            "ferramenta",
            format!(
                "{name}({}) na habilidade {skill}{}",
                cut(arguments, 300),
                if *deterministic { ", por código" } else { "" }
            ),
        ),
        TurnEvent::ToolResult {
            name,
            status,
            content,
            to_user,
            ..
        } => (
            "resultado",
            format!(
                "{name}: {}{} — {}",
                match status {
                    vt_contract::response::ResponseStatus::Success => "sucesso",
                    vt_contract::response::ResponseStatus::Error => "erro",
                },
                if *to_user {
                    ", resposta direta ao usuário"
                } else {
                    ""
                },
                cut(content, 400)
            ),
        ),
        TurnEvent::ToolSkipped { name, .. } => ("ferramenta", format!("{name} não executada")),
        TurnEvent::Exchanged(x) => (
            "sistema",
            format!(
                "{} {} {} → {}",
                x.system,
                x.method,
                x.path.split('?').next().unwrap_or_default(),
                x.status
                    .map_or_else(|| x.erro.clone().unwrap_or_default(), |s| s.to_string())
            ),
        ),
        TurnEvent::SkillChanged { from, to, reason } => ("habilidade", format!("{from} → {to} ({reason})")),
        TurnEvent::StateUpdated { updates } => {
            ("estado", format!("atualizado: {}", Json::Object(updates.clone())))
        }
        TurnEvent::MemoryUpdated { updates } => (
            "memória",
            format!("atualizada: {}", Json::Object(updates.clone())),
        ),
        TurnEvent::EndChat(e) => ("sistema", format!("atendimento encerrado ({})", e.reason)),
        TurnEvent::TransferToHuman(t) => ("sistema", format!("transferido para humano ({})", t.reason)),
        TurnEvent::Error { message } => ("erro", message.clone()),
        TurnEvent::Reply(_) => return None,
    })
}

/// Loads conversation `id` if `staff` may see it.
async fn visible_conversation(
    state: &AppState,
    staff: &Staff,
    id: &str,
) -> Result<vt_engine::Conversation, Response> {
    match state.stores.conversations.conversation(id).await {
        Ok(Some(c)) if staff.is_admin() || c.tenant_id == staff.caller.tenant => Ok(c),
        Ok(_) => Err(not_found(staff, "Conversa não encontrada.")),
        Err(e) => Err(store_failed(staff, &e)),
    }
}

pub(super) async fn conversation(
    State(state): State<AppState>,
    staff: Staff,
    Path(id): Path<String>,
) -> Response {
    let conv = match visible_conversation(&state, &staff, &id).await {
        Ok(c) => c,
        Err(page) => return page,
    };
    let store = &state.stores;
    let (messages, executions) = match (
        store.conversations.messages(&id).await,
        store.conversations.executions(&id).await,
    ) {
        (Ok(m), Ok(e)) => (m, e),
        (Err(e), _) | (_, Err(e)) => return store_failed(&staff, &e),
    };
    // Transferred: a person has it (an open case), not a skill redirect.
    let with_person = match store.cases.open_case_of(&id).await {
        Ok(case) => case.is_some(),
        Err(e) => return store_failed(&staff, &e),
    };
    let codes = match codes_of(&state, &id).await {
        Ok(codes) => codes,
        Err(e) => return store_failed(&staff, &e),
    };
    let (lines, payments) = match (
        super::chat::lines(&state, &id, &codes).await,
        super::chat::payments(&state, &id).await,
    ) {
        (Ok(l), Ok(p)) => (l, p),
        (Err(e), _) | (_, Err(e)) => return store_failed(&staff, &e),
    };
    // The turns' events are for administrators only: tools, state, what the model was told.
    let turns = if staff.is_admin() {
        technical_turns(&state, &messages, &executions, &codes)
    } else {
        Vec::new()
    };
    render(
        StatusCode::OK,
        "conversa.html",
        context! {
            id => conv.id.clone(),
            canal => conv.channel,
            pessoa => masked(if conv.user_login.is_empty() { &conv.user_id } else { &conv.user_login }),
            habilidade => conv.active_skill,
            encerrada => conv.ended,
            transferida => with_person,
            pagamentos => payments,
            mensagens => lines,
            motivos_sinal => super::review::reasons(),
            turnos => turns,
            ..frame(Some(&staff), "conversations", &format!("Conversa {}", conv.id))
        },
    )
}

/// Each turn with its measures and events, for an administrator's "Detalhes técnicos".
fn technical_turns(
    state: &AppState,
    messages: &[StoredMessage],
    executions: &[(vt_engine::ExecutionRecord, Vec<TurnEvent>)],
    codes: &[String],
) -> Vec<Value> {
    let executions: std::collections::HashMap<&str, _> = executions
        .iter()
        .map(|(execution, events)| (execution.execucao_id.as_str(), (execution, events)))
        .collect();
    let mut turns = Vec::new();
    for turn in split_turns(messages) {
        let exec_id = turn.iter().find_map(|m| m.execucao_id.clone());
        let mut events = Vec::new();
        let (mut tokens, mut ms, mut status) = ((0, 0), None, None);
        if let Some((execution, evs)) = exec_id.as_deref().and_then(|id| executions.get(id)) {
            tokens = execution.tokens();
            ms = Some((execution.finished_at - execution.started_at).num_milliseconds());
            status = Some(match execution.status {
                vt_engine::ExecutionStatus::Concluido => "concluído",
                vt_engine::ExecutionStatus::Falhou => "falhou",
            });
            events = evs
                .iter()
                .filter_map(event_line)
                .map(|(kind, text)| context! { tipo => kind, texto => masked_with(&text, codes) })
                .collect();
        }
        turns.push(context! {
            quando => turn.first().map(|m| when(state, m.created_at)),
            eventos => events,
            execucao => exec_id,
            tokens_entrada => tokens.0,
            tokens_saida => tokens.1,
            latencia_ms => ms,
            situacao => status,
        });
    }
    turns
}

/// Messages in turns: each user message with what followed it up to the next one.
fn split_turns(messages: &[StoredMessage]) -> Vec<&[StoredMessage]> {
    let starts: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m.message, ChatMessage::User { .. }))
        .map(|(i, _)| i)
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(k, &i)| &messages[i..starts.get(k + 1).copied().unwrap_or(messages.len())])
        .collect()
}

/// The conversation as a regression transcript (`vt-agent transcript export`'s format), as a file, in
/// clear (it replays against the real cards): an administrator's tool, on record at every download. A
/// support agent reads the conversation on its page; a test is not theirs to write.
pub(super) async fn transcript(
    State(state): State<AppState>,
    staff: Staff,
    Path(id): Path<String>,
) -> Response {
    if !staff.is_admin() {
        return admins_only(&staff);
    }
    let conversation = match visible_conversation(&state, &staff, &id).await {
        Ok(c) => c,
        Err(page) => return page,
    };
    let yaml = match crate::transcript::export::export(state.stores.conversations.as_ref(), &id).await {
        Ok(t) => serde_yaml::to_string(&t)
            .map(|yaml| format!("{}{yaml}", crate::transcript::export::CLEAR_HEADER))
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if yaml.is_ok() {
        let record = vt_store::AuditRecord {
            at: Utc::now(),
            support_user: staff.caller.name.clone(),
            tenant_id: conversation.tenant_id.clone(),
            channel: "console".into(),
            cartao: String::new(),
            cartao_hash: String::new(),
            outcome: "transcricao_completa".into(),
            conversation_id: Some(id.clone()),
        };
        // Nothing is handed out that is not on record.
        if let Err(e) = state.service.cases().audited(&record).await {
            return store_failed(&staff, &e);
        }
    }
    match yaml {
        Ok(yaml) => {
            let file: String = id
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            (
                [
                    (CONTENT_TYPE, "application/yaml; charset=utf-8".to_owned()),
                    (
                        CONTENT_DISPOSITION,
                        format!("attachment; filename=\"conversa-{file}.yaml\""),
                    ),
                ],
                yaml,
            )
                .into_response()
        }
        Err(e) => store_failed(&staff, &e),
    }
}
