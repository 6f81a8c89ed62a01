//! The console's pages: each handler reads the store (or runs a turn), builds a view of plain values
//! — every text from the database masked on the way ([`masked`]) — and renders its template. Forms are
//! posted with the session's CSRF token; a missing or wrong token gets 403 and changes nothing.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE, LOCATION, SET_COOKIE};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Duration, Utc};
use minijinja::{Value, context};
use serde::Deserialize;
use serde_json::Value as Json;

use super::dashboard::{Dashboard, PERIODS};
use super::render;
use super::session::{self, SESSION_COOKIE, SIGN_IN_COOKIE, Staff};
use crate::engine::{Participant, TurnEvent};
use crate::http::config::Role;
use crate::http::state::AppState;
use crate::llm::ChatMessage;
use crate::service::CaseFigures;
use crate::service::Inbound;
use crate::store::{ConversationQuery, OutboxStatus, RunStatus, StoredMessage};

/// The channel of the console's own conversations (its lookups).
use super::CHANNEL;
/// Rows a list shows.
const LIST_LIMIT: i64 = 100;

/// Free text from the store as the console shows it: card numbers masked, configured secrets out,
/// amounts in reais as Brazilians read them.
pub(super) fn masked(text: &str) -> String {
    reais_in(&vt_actions::redact::secrets(
        &vt_actions::vt::card::mask_cards_in(text),
    ))
}

/// [`masked`] for a conversation's own texts: its payment `codes` (from its charges on record) stay
/// whole, for the person helping its card holder to read out or copy.
pub(super) fn masked_with(text: &str, codes: &[String]) -> String {
    reais_in(&vt_actions::redact::secrets(
        &vt_actions::vt::card::mask_cards_except(text, codes),
    ))
}

/// `BRL 20,00` as `R$ 20,00` ([`vt_actions::vt::reais_in`]): what the console's readers read.
fn reais_in(text: &str) -> String {
    vt_actions::vt::reais_in(text).into_owned()
}

/// The payment codes of conversation `id` (see [`crate::store::PixCharge::codes`]).
pub(super) async fn codes_of(state: &AppState, id: &str) -> Result<Vec<String>, crate::store::StoreError> {
    let charges = state.stores.pix.conversation_charges(id).await?;
    Ok(charges.iter().flat_map(crate::store::PixCharge::codes).collect())
}

/// At most `max` characters of `text`, with an ellipsis when cut.
pub(super) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// A time as people read it: in the policy's time zone (the same as the messages quote).
pub(super) fn when(state: &AppState, t: DateTime<Utc>) -> String {
    state
        .service
        .policy_timezone()
        .local(t)
        .format("%d/%m/%Y %H:%M:%S")
        .to_string()
}

/// What every page's frame needs: the title, the page's place in the menu and who is signed in.
pub(super) fn frame(staff: Option<&Staff>, page: &str, title: &str) -> Value {
    context! {
        titulo => title,
        pagina => page,
        usuario => staff.map(|s| s.caller.name.clone()),
        papel => staff.map(|s| match s.caller.role {
            Role::Admin => "administrador",
            Role::Support => "atendente",
            Role::Client => "cliente da API",
        }),
        aguardando_n => staff.map_or(0, |s| s.counts.0),
        meus_n => staff.map_or(0, |s| s.counts.1),
        admin => staff.is_some_and(Staff::is_admin),
        csrf => staff.map(|s| s.csrf.clone()).unwrap_or_default(),
    }
}

/// A page with only a message (refusals, errors, things not found).
fn notice(status: StatusCode, staff: Option<&Staff>, title: &str, message: &str) -> Response {
    render(
        status,
        "aviso.html",
        context! { mensagem => message, ..frame(staff, "", title) },
    )
}

pub(super) fn bad_form(staff: &Staff) -> Response {
    notice(
        StatusCode::FORBIDDEN,
        Some(staff),
        "Formulário recusado",
        "O formulário veio sem um token válido (proteção contra CSRF). Recarregue a página e tente de novo.",
    )
}

pub(super) fn admins_only(staff: &Staff) -> Response {
    notice(
        StatusCode::FORBIDDEN,
        Some(staff),
        "Acesso negado",
        "Esta página é só para administradores (chaves de papel admin).",
    )
}

/// `message`: what was not found, in a sentence ("Conversa não encontrada.").
pub(super) fn not_found(staff: &Staff, message: &str) -> Response {
    notice(StatusCode::NOT_FOUND, Some(staff), "Não encontrado", message)
}

pub(super) fn store_failed(staff: &Staff, e: &dyn std::fmt::Display) -> Response {
    tracing::error!(error = %e, "console could not read the store");
    notice(
        StatusCode::INTERNAL_SERVER_ERROR,
        Some(staff),
        "Erro",
        "Não foi possível ler os dados agora. Tente de novo em instantes.",
    )
}

pub(super) fn see_other(to: &str) -> Response {
    (StatusCode::SEE_OTHER, [(LOCATION, to)]).into_response()
}

// ---- sign-in ----

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct SignInForm {
    chave: String,
    csrf: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct CsrfForm {
    csrf: String,
}

/// The sign-in form, with a fresh form nonce in its own cookie; a signed-in user goes on to the queue.
pub(super) async fn sign_in_page(State(state): State<AppState>, headers: axum::http::HeaderMap) -> Response {
    if session::staff_of(&headers, &state).is_some() {
        return see_other("/console/fila");
    }
    sign_in_form(&state, StatusCode::OK, None)
}

fn sign_in_form(state: &AppState, status: StatusCode, error: Option<&str>) -> Response {
    let nonce = super::keys::nonce();
    let mut page = render(
        status,
        "entrar.html",
        context! {
            erro => error,
            aberto => state.is_open(),
            csrf_entrada => state.console.keys.sign_in_csrf(&nonce),
            ..frame(None, "entrar", "Entrar no console")
        },
    );
    if let Ok(cookie) = session::set_cookie(SIGN_IN_COOKIE, &nonce, 600).parse() {
        page.headers_mut().append(SET_COOKIE, cookie);
    }
    page
}

pub(super) async fn sign_in(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    Form(form): Form<SignInForm>,
) -> Response {
    let keys = &state.console.keys;
    let nonce = session::cookie(&headers, SIGN_IN_COOKIE).unwrap_or_default();
    if !keys.sign_in_csrf_ok(nonce, &form.csrf) {
        return sign_in_form(
            &state,
            StatusCode::FORBIDDEN,
            Some("O formulário expirou ou veio sem token (CSRF). Tente de novo."),
        );
    }
    if state.limit_named("console:entrada").is_err() {
        return sign_in_form(
            &state,
            StatusCode::TOO_MANY_REQUESTS,
            Some("Muitas tentativas. Espere um minuto e tente de novo."),
        );
    }
    let caller = match state.caller_of_key(&form.chave) {
        Ok(c) => c,
        Err(_) => {
            tracing::info!("console sign-in refused: unknown key");
            return sign_in_form(&state, StatusCode::UNAUTHORIZED, Some("Chave de API inválida."));
        }
    };
    if caller.role < Role::Support {
        tracing::info!(key = %caller.name, "console sign-in refused: role client");
        return sign_in_form(
            &state,
            StatusCode::FORBIDDEN,
            Some(
                "Esta chave é de um sistema cliente e não dá acesso ao console: use uma chave de suporte ou de administração.",
            ),
        );
    }
    tracing::info!(key = %caller.name, "console sign-in");
    let expires = Utc::now().timestamp() + keys.session_secs;
    let value = keys.session_value(&caller.name, expires, &super::keys::nonce());
    // Agents land on their queue: what waits for them first.
    let mut response = see_other("/console/fila");
    for cookie in [
        session::set_cookie(SESSION_COOKIE, &value, keys.session_secs),
        session::set_cookie(SIGN_IN_COOKIE, "", 0),
    ] {
        if let Ok(c) = cookie.parse() {
            response.headers_mut().append(SET_COOKIE, c);
        }
    }
    response
}

pub(super) async fn sign_out(staff: Staff, Form(form): Form<CsrfForm>) -> Response {
    if !staff.csrf_ok(&form.csrf) {
        return bad_form(&staff);
    }
    let mut response = see_other("/console");
    if let Ok(c) = session::set_cookie(SESSION_COOKIE, "", 0).parse() {
        response.headers_mut().append(SET_COOKIE, c);
    }
    response
}

// ---- card lookup ----

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct LookupForm {
    cartao: String,
    csrf: String,
    /// The card the page just looked up, sealed ([`super::keys::Keys::seal_card`]).
    cartao_ref: String,
}

impl LookupForm {
    /// The form's card, when it carries its CSRF token and a card; else the page that says why.
    #[allow(clippy::result_large_err)] // the error is the page itself, built once per request
    pub(super) fn card(&self, staff: &Staff, keys: &super::keys::Keys) -> Result<String, Response> {
        if !staff.csrf_ok(&self.csrf) {
            return Err(bad_form(staff));
        }
        if self.cartao.trim().is_empty()
            && let Some(card) = keys.open_card(&self.cartao_ref)
        {
            return Ok(card);
        }
        vt_actions::vt::parse::cards(&self.cartao)
            .into_iter()
            .next()
            .ok_or_else(|| {
                lookup_view(
                    staff,
                    StatusCode::UNPROCESSABLE_ENTITY,
                    None,
                    Some("Informe um número de cartão válido (de 8 a 19 dígitos)."),
                )
            })
    }
}

pub(super) async fn lookup_page(staff: Staff) -> Response {
    lookup_view(&staff, StatusCode::OK, None, None)
}

/// What a lookup answered: the answer, and the card it read (masked, and sealed for its history).
pub(super) struct Looked {
    answer: String,
    masked: String,
    sealed: String,
}

pub(super) fn lookup_view(
    staff: &Staff,
    status: StatusCode,
    looked: Option<Looked>,
    error: Option<&str>,
) -> Response {
    let (answer, card, sealed) = looked.map_or((None, None, None), |l| {
        (Some(l.answer), Some(l.masked), Some(l.sealed))
    });
    render(
        status,
        "consulta.html",
        context! {
            resposta => answer,
            cartao_mascarado => card,
            cartao_ref => sealed,
            erro => error,
            ..frame(Some(staff), "lookup", "Consulta de cartão")
        },
    )
}

/// A balance lookup is a chat turn of the `vt` agent in the agent's own console conversation — the
/// same router, tool and stages as any user's — and goes to the audit table.
pub(super) async fn lookup(
    State(state): State<AppState>,
    staff: Staff,
    Form(form): Form<LookupForm>,
) -> Response {
    let card = match form.card(&staff, &state.console.keys) {
        Ok(card) => card,
        Err(refused) => return refused,
    };
    let text = format!("saldo do cartão {card}");
    let msg = Inbound {
        agent_id: state.agent.clone(),
        conversation_id: Some(format!("console:{}", staff.caller.name)),
        tenant_id: Some(staff.caller.tenant.clone()),
        user: Participant {
            user_id: staff.caller.name.clone(),
            user_login: staff.caller.name.clone(),
            channel: CHANNEL.into(),
        },
        text: text.clone(),
        ..Default::default()
    };
    // The turn runs in a task of its own, within the API's bound of turns in flight and its request
    // time: a browser that goes away, or a slow answer, does not cut it in half.
    let service = state.service.clone();
    let console = state.console.clone();
    let (user, tenant) = (staff.caller.name.clone(), staff.caller.tenant.clone());
    let turn = state
        .run(async move {
            let handled = service.messages().handle(msg).await?;
            let who = crate::service::audit::Lookup {
                support_user: &user,
                tenant: &tenant,
                channel: CHANNEL,
            };
            crate::service::audit::record_lookup(service.cases(), who, &text, &handled, |c| {
                console.keys.card_hash(c)
            })
            .await;
            Ok::<_, crate::service::ServiceError>(handled)
        })
        .await;
    match turn {
        Ok(Ok(handled)) => {
            let looked = Looked {
                answer: masked(&handled.reply_text()),
                masked: vt_actions::vt::mask_card(&card),
                sealed: state.console.keys.seal_card(&card),
            };
            lookup_view(&staff, StatusCode::OK, Some(looked), None)
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "console lookup failed");
            lookup_view(
                &staff,
                StatusCode::SERVICE_UNAVAILABLE,
                None,
                Some("Não foi possível consultar agora. Tente de novo em instantes."),
            )
        }
        Err(busy_or_late) => lookup_view(
            &staff,
            busy_or_late.status,
            None,
            Some(
                "O serviço está ocupado ou a consulta demorou demais. Se ela terminar, aparece na sua conversa do console; tente de novo em instantes.",
            ),
        ),
    }
}

// ---- conversations ----

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ConversationFilter {
    q: String,
    canal: String,
}

/// The tenant a user sees: an administrator every tenant, a support agent only theirs.
fn tenant_filter(staff: &Staff) -> Option<String> {
    (!staff.is_admin()).then(|| staff.caller.tenant.clone())
}

pub(super) fn message_text(m: &ChatMessage) -> String {
    match m {
        ChatMessage::User { content } => content.clone(),
        ChatMessage::Assistant { content, tool_calls } => match content {
            Some(c) if !c.is_empty() => c.clone(),
            _ => tool_calls
                .iter()
                .map(|c| format!("[{}]", c.name))
                .collect::<Vec<_>>()
                .join(" "),
        },
        ChatMessage::Tool { name, .. } => format!("[resultado de {name}]"),
        ChatMessage::HumanAgent { name, content } => format!("{name}: {content}"),
    }
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
                    vt_actions::response::ResponseStatus::Success => "sucesso",
                    vt_actions::response::ResponseStatus::Error => "erro",
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
) -> Result<crate::engine::Conversation, Response> {
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
            turnos => turns,
            ..frame(Some(&staff), "conversations", &format!("Conversa {}", conv.id))
        },
    )
}

/// Each turn with its measures and events, for an administrator's "Detalhes técnicos".
fn technical_turns(
    state: &AppState,
    messages: &[StoredMessage],
    executions: &[(crate::engine::ExecutionRecord, Vec<TurnEvent>)],
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
                crate::engine::ExecutionStatus::Concluido => "concluído",
                crate::engine::ExecutionStatus::Falhou => "falhou",
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
        let record = crate::store::AuditRecord {
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

// ---- flows and batches ----

pub(super) fn flow_tenant(input: &Json) -> &str {
    input
        .get("tenant_id")
        .and_then(Json::as_str)
        .unwrap_or(crate::engine::DEFAULT_TENANT)
}

/// A run's or a batch line's status, as people read it (the stored words are unaccented keys).
pub(super) fn status_label(status: &str) -> String {
    match status {
        "em_andamento" => "em andamento ou interrompido".into(),
        "concluido" => "concluído".into(),
        "invalida" => "inválida".into(),
        "nao_enviado" => "não enviado".into(),
        other => other.replace('_', " "),
    }
}

/// An amount from a flow's input as pt-BR money (`R$ 900,00`); anything else as it came, masked.
pub(super) fn money_of(v: &Json) -> String {
    let amount = match v {
        Json::String(s) => vt_actions::vt::parse::parse_money(s),
        Json::Number(n) => n.to_string().parse().ok(),
        _ => None,
    };
    amount.map_or_else(
        || masked(&v.to_string()),
        |a| vt_actions::vt::format_money("R$", a, vt_actions::vt::Idioma::PtBr),
    )
}

pub(super) async fn flows(State(state): State<AppState>, staff: Staff) -> Response {
    let store = &state.stores;
    let (runs, jobs, followups) = match (
        store.flows.flow_runs(LIST_LIMIT).await,
        store.batches.batches(tenant_filter(&staff).as_deref(), 20).await,
        store.recharges.followups(true, LIST_LIMIT).await,
    ) {
        (Ok(r), Ok(j), Ok(f)) => (r, j, f),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return store_failed(&staff, &e),
    };
    let now = state.service.engine().now();
    // A recharge's scope is `tenant|user`.
    let pending: Vec<Value> = followups
        .iter()
        .filter(|f| staff.is_admin() || f.attempt.attempt.scope.split('|').next() == Some(staff.caller.tenant.as_str()))
        .map(|f| {
            let a = &f.attempt.attempt;
            context! {
                chave => a.idempotency_key.clone(),
                execucao => a.execucao_id.clone(),
                situacao => f.attempt.status.as_str(),
                cartao => a.cartao_mascarado.clone(),
                valor => vt_actions::vt::format_money(&a.moeda, a.valor, vt_actions::vt::Idioma::PtBr),
                verificacoes => f.checks,
                proxima => if f.next_check_at <= now { "agora".to_owned() } else { when(&state, f.next_check_at) },
                prazo => when(&state, f.deadline_at),
            }
        })
        .collect();
    let runs: Vec<Value> = runs
        .iter()
        .filter(|r| staff.is_admin() || flow_tenant(&r.input) == staff.caller.tenant)
        .map(|r| {
            context! {
                id => r.execucao_id.clone(),
                situacao => status_label(r.status.as_str()),
                interrompido => r.status == RunStatus::EmAndamento,
                cartao => r.input.get("cartao").and_then(Json::as_str).map(vt_actions::vt::mask_card),
                valor => r.input.pointer("/recarga/valor").map(money_of),
                inicio => when(&state, r.created_at),
                fim => r.finished_at.map(|t| when(&state, t)),
            }
        })
        .collect();
    let mut batches = Vec::new();
    for job in &jobs {
        let counts = match store.batches.batch_counts(&job.id).await {
            Ok(c) => c,
            Err(e) => return store_failed(&staff, &e),
        };
        batches.push(batch_view(&state, job, &counts));
    }
    render(
        StatusCode::OK,
        "fluxos.html",
        context! { execucoes => runs, lotes => batches, pendentes => pending, ..frame(Some(&staff), "flows", "Fluxos e lotes") },
    )
}

fn batch_view(
    state: &AppState,
    job: &crate::store::BatchJob,
    counts: &[(crate::store::LineStatus, i64)],
) -> Value {
    let done: i64 = counts.iter().map(|(_, n)| n).sum();
    context! {
        id => job.id.clone(),
        total => job.total,
        feitas => done,
        pct => if job.total > 0 { done * 100 / job.total } else { 100 },
        contagens => counts.iter().map(|(s, n)| context! { situacao => status_label(s.as_str()), n => n }).collect::<Vec<_>>(),
        simulacao => job.dry_run,
        inicio => when(state, job.created_at),
        fim => job.finished_at.map(|t| when(state, t)),
    }
}

/// The policy a run used, in one line (the same default reaches every way in, so it says which).
fn policy_line(input: &Json) -> Option<String> {
    let p: vt_actions::vt::Politicas = vt_actions::json::from_value(input.get("politicas")?.clone()).ok()?;
    let money = |v| vt_actions::vt::format_money(&p.moeda_padrao, v, vt_actions::vt::Idioma::PtBr);
    Some(reais_in(&format!(
        "recarga de {} a {}; saldo baixo até {}; cartão de {} a {} dígitos; fuso {}",
        money(p.valor_min),
        money(p.valor_max),
        money(p.limite_saldo_baixo),
        p.validacoes_cartao.tamanho_min,
        p.validacoes_cartao.tamanho_max,
        p.timezone.name(),
    )))
}

fn pretty(v: &Json) -> String {
    vt_actions::json::to_pretty(&masked_json(v)).unwrap_or_default()
}

/// A stored JSON value as people read it ([`crate::flow::masked_json`]), with configured secrets out.
fn masked_json(v: &Json) -> Json {
    crate::flow::masked_json(v, masked)
}

pub(super) async fn flow(State(state): State<AppState>, staff: Staff, Path(id): Path<String>) -> Response {
    let run = match state.stores.flows.flow_run(&id).await {
        Ok(Some(r)) if staff.is_admin() || flow_tenant(&r.input) == staff.caller.tenant => r,
        Ok(_) => return not_found(&staff, "Execução não encontrada."),
        Err(e) => return store_failed(&staff, &e),
    };
    let stages: Vec<Value> = run
        .stages
        .iter()
        .map(|(etapa, saida)| {
            context! { etapa => etapa, resumo => super::stages::summary(etapa, saida), saida => pretty(saida) }
        })
        .collect();
    render(
        StatusCode::OK,
        "fluxo.html",
        context! {
            id => run.execucao_id.clone(),
            situacao => status_label(run.status.as_str()),
            entrada => pretty(&run.input),
            politica => policy_line(&run.input),
            resultado => run.stages.last().map(|(_, saida)| pretty(saida)),
            etapas => stages,
            inicio => when(&state, run.created_at),
            ..frame(Some(&staff), "flows", &format!("Execução {id}"))
        },
    )
}

pub(super) async fn batch(State(state): State<AppState>, staff: Staff, Path(id): Path<String>) -> Response {
    let store = &state.stores;
    let job = match store.batches.batch(&id).await {
        Ok(Some(j)) if staff.is_admin() || j.tenant_id == staff.caller.tenant => j,
        Ok(_) => return not_found(&staff, "Lote não encontrado."),
        Err(e) => return store_failed(&staff, &e),
    };
    let (counts, lines) = match (
        store.batches.batch_counts(&id).await,
        store.batches.batch_lines(&id).await,
    ) {
        (Ok(c), Ok(l)) => (c, l),
        (Err(e), _) | (_, Err(e)) => return store_failed(&staff, &e),
    };
    let lines: Vec<Value> = lines
        .iter()
        .take(500)
        .map(|l| context! { linha => l.line, situacao => status_label(l.status.as_str()), resultado => cut(&masked_json(&l.result).to_string(), 400) })
        .collect();
    render(
        StatusCode::OK,
        "lote.html",
        context! { lote => batch_view(&state, &job, &counts), linhas => lines, ..frame(Some(&staff), "flows", &format!("Lote {id}")) },
    )
}

// ---- outbox ----

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct OutboxNotice {
    ok: Option<i64>,
    falhou: Option<i64>,
}

pub(super) async fn outbox(
    State(state): State<AppState>,
    staff: Staff,
    Query(flash): Query<OutboxNotice>,
) -> Response {
    if !staff.is_admin() {
        return admins_only(&staff);
    }
    let store = &state.stores;
    let mut sections = Vec::new();
    for (status, title) in [
        (OutboxStatus::Failed, "Não entregues"),
        (OutboxStatus::Pending, "Na fila"),
        (
            OutboxStatus::Held,
            "Aguardando o cliente escrever (fora da janela de 24 h)",
        ),
        (OutboxStatus::InFlight, "Em envio"),
    ] {
        let items = match store.outbox.outbox_items(status, LIST_LIMIT).await {
            Ok(i) => i,
            Err(e) => return store_failed(&staff, &e),
        };
        let items: Vec<Value> = items
            .iter()
            .map(|i| {
                let text = i.payload["text"].as_str().unwrap_or_default();
                let conversation = i
                    .conversation_id
                    .as_deref()
                    .filter(|c| !c.starts_with("caso:"))
                    .map(str::to_owned);
                context! {
                    id => i.id,
                    tipo => kind_label(&i.kind),
                    destino => masked(&i.destination),
                    mensagem => (!text.is_empty()).then(|| cut(&masked(text), 200)),
                    conversa => conversation,
                    caso => i.conversation_id.as_deref().and_then(|c| c.strip_prefix("caso:")).map(str::to_owned),
                    tentativas => format!("{}/{}", i.attempts, i.max_attempts),
                    proxima => when(&state, i.next_attempt_at),
                    motivo => i.last_error.as_deref().map(|e| cut(&masked(e), 300)),
                    pode_reenviar => status == OutboxStatus::Failed && retry_can_help(i.last_error.as_deref()),
                }
            })
            .collect();
        sections.push(context! { titulo => title, situacao => status.as_str(), itens => items });
    }
    let templates = match templates_view(&state).await {
        Ok(t) => t,
        Err(e) => return store_failed(&staff, &e),
    };
    render(
        StatusCode::OK,
        "outbox.html",
        context! {
            secoes => sections,
            modelos => templates,
            reenviado => flash.ok,
            falhou => flash.falhou,
            ..frame(Some(&staff), "outbox", "Fila de envio")
        },
    )
}

/// The WhatsApp templates in use with their state as Meta last reported it.
async fn templates_view(state: &AppState) -> Result<Vec<Value>, crate::store::StoreError> {
    let Some(templates) = &state.templates else {
        return Ok(Vec::new());
    };
    let states = state.stores.contacts.template_states().await?;
    Ok(templates
        .all()
        .map(|t| {
            let reported = states
                .iter()
                .find(|s| s.name == t.name && s.language == t.language);
            context! {
                nome => t.name.clone(),
                finalidade => t.purpose.clone(),
                idioma => t.language.clone(),
                categoria => reported.and_then(|s| s.category.clone()).unwrap_or_else(|| t.category.clone()),
                situacao => reported.and_then(|s| s.status.clone()).unwrap_or_else(|| "sem notícia da Meta".into()),
                previa => t.preview.clone(),
            }
        })
        .collect())
}

/// What an outbox item is, in words.
fn kind_label(kind: &str) -> String {
    match kind {
        "reply" => "resposta".into(),
        "aviso_saldo_baixo" => "aviso de saldo baixo".into(),
        "aviso_recarga" => "aviso de recarga".into(),
        "caso_aberto" => "atendimento aberto (suporte)".into(),
        "caso_linha" => "linha do atendimento (suporte)".into(),
        "caso_estado" => "estado do atendimento (suporte)".into(),
        other => other.replace('_', " "),
    }
}

/// Whether sending a dead letter again could go through: not when the channel said it never will
/// (WhatsApp's 131047, a user outside the 24-hour window, stays so until they write) or the item is
/// unreadable.
fn retry_can_help(reason: Option<&str>) -> bool {
    let reason = reason.unwrap_or_default();
    ![
        "131047",
        "fora da janela",
        "não é uma resposta",
        "no longer exists",
    ]
    .iter()
    .any(|r| reason.contains(r))
}

/// An administrator puts a dead letter back in the queue: the worker sends it again from attempt one.
pub(super) async fn retry(
    State(state): State<AppState>,
    staff: Staff,
    Path(id): Path<i64>,
    Form(form): Form<CsrfForm>,
) -> Response {
    if !staff.is_admin() {
        return admins_only(&staff);
    }
    if !staff.csrf_ok(&form.csrf) {
        return bad_form(&staff);
    }
    match state.stores.outbox.requeue(id, Utc::now()).await {
        Ok(true) => {
            tracing::info!(item = id, by = %staff.caller.name, "outbox item requeued from the console");
            see_other(&format!("/console/outbox?ok={id}"))
        }
        Ok(false) => see_other(&format!("/console/outbox?falhou={id}")),
        Err(e) => store_failed(&staff, &e),
    }
}

// ---- usage ----

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Period {
    dias: Option<u32>,
}

pub(super) async fn usage(
    State(state): State<AppState>,
    staff: Staff,
    Query(period): Query<Period>,
) -> Response {
    if !staff.is_admin() {
        return admins_only(&staff);
    }
    let days = period.dias.filter(|d| PERIODS.contains(d)).unwrap_or(7);
    let now = Utc::now();
    let since = now - Duration::days(i64::from(days));
    let store = &state.stores;
    let (usage, flows, messages) = match (
        store.reports.usage_since(since).await,
        store.flows.flow_outcomes_since(since).await,
        store.reports.message_costs_since(since).await,
    ) {
        (Ok(u), Ok(f), Ok(m)) => (u, f, m),
        (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => return store_failed(&staff, &e),
    };
    let cases = match store
        .cases
        .case_times(tenant_filter(&staff).as_deref(), since)
        .await
    {
        Ok(c) => CaseFigures::of(&c, since),
        Err(e) => return store_failed(&staff, &e),
    };
    let dashboard = Dashboard::build(days, now, (&usage, &messages), flows, cases);
    let endings = match endings(&state, &staff, since).await {
        Ok(lines) => lines,
        Err(e) => return store_failed(&staff, &e),
    };
    let (spending, flows_alone) = match store.reports.spending_by_tenant_since(since).await {
        Ok(s) => (spending_lines(&s), s.iter().map(|t| t.flows).sum::<i64>()),
        Err(e) => return store_failed(&staff, &e),
    };
    // The two counts of flows reconcile on the page: every run, of which those started alone.
    let flows_total: i64 = dashboard.flows_by_outcome.iter().map(|(_, n)| n).sum();
    let priced = dashboard
        .buckets
        .iter()
        .any(|b| b.cost_brl > 0.0 || b.cost_unknown > 0);
    let unanswered = match unanswered(&state, &staff).await {
        Ok(lines) => lines,
        Err(e) => return store_failed(&staff, &e),
    };
    // Tenants past 80 % of their monthly budget: the operator sees it first.
    let budgets: Vec<Value> = state
        .service
        .spending()
        .budget_shares()
        .await
        .into_iter()
        .filter(|(_, share)| *share >= rust_decimal::Decimal::new(8, 1))
        .map(|(tenant, share)| {
            let pct = (share * rust_decimal::Decimal::ONE_HUNDRED).round_dp(0);
            context! { tenant => tenant, pct => pct.to_string(), esgotado => share >= rust_decimal::Decimal::ONE }
        })
        .collect();
    render(
        StatusCode::OK,
        "uso.html",
        context! {
            painel => Value::from(minijinja::value::Serde(&dashboard)),
            fluxos_total => flows_total,
            fluxos_avulsos => flows_alone,
            custo_no_periodo => priced,
            periodos => PERIODS,
            orcamentos => budgets,
            desfechos => endings.0,
            satisfacao => endings.1,
            gastos => spending,
            sem_resposta => unanswered,
            ..frame(Some(&staff), "usage", "Uso")
        },
    )
}

/// Questions neither a rule nor the FAQ answered (their turn went to the model): the last of each
/// recent such conversation, masked — what the operator writes into the FAQ next.
async fn unanswered(state: &AppState, staff: &Staff) -> Result<Vec<Value>, crate::store::StoreError> {
    const SHOWN: i64 = 20;
    let query = ConversationQuery {
        intent: Some("general_chat".into()),
        tenant_id: tenant_filter(staff),
        channel: None,
        text: None,
        limit: SHOWN,
    };
    let mut lines = Vec::new();
    for c in state.stores.conversations.conversation_list(&query).await? {
        let messages = state.stores.conversations.messages(&c.id).await?;
        let asked = messages
            .iter()
            .rev()
            .find(|m| matches!(m.message, ChatMessage::User { .. }))
            .map(|m| cut(&masked(&message_text(&m.message)), 200));
        if let Some(pergunta) = asked {
            lines.push(context! { conversa => c.id.clone(), pergunta => pergunta, quando => when(state, c.updated_at) });
        }
    }
    Ok(lines)
}

/// What each tenant spent over the period: per conversation and per flow run (`—` where there was
/// none, `desconhecido` where a price was missing).
fn spending_lines(spending: &[crate::store::TenantSpending]) -> Vec<Value> {
    use crate::costs::reais;
    use crate::usage::{CostRow, per};
    spending
        .iter()
        .map(|s| {
            let row = CostRow::of_period(s);
            context! {
                tenant => &row.tenant,
                conversas => row.conversations,
                custo => reais(row.total()),
                por_conversa => per(row.conversations, row.per_conversation()),
                fluxos => row.flows,
                por_fluxo => per(row.flows, row.per_flow()),
            }
        })
        .collect()
}

/// How the period's conversations ended, per day, tenant and intent (the staff's tenant only, unless
/// an admin), and the satisfaction scores of the whole period, bot versus person.
async fn endings(
    state: &AppState,
    staff: &Staff,
    since: chrono::DateTime<Utc>,
) -> Result<(Vec<Value>, Value), crate::store::StoreError> {
    use crate::usage::outcomes::{Line, Tally, by_day};
    let mut records = state.stores.outcomes.outcomes_since(since).await?;
    if let Some(tenant) = tenant_filter(staff) {
        records.retain(|o| o.tenant_id == tenant);
    }
    let tz = state.service.policy_timezone();
    let first = tz.local(since).date_naive();
    let lines = by_day(&records, &tz, first)
        .iter()
        .map(|g| Value::from(minijinja::value::Serde(Line::of(g))))
        .collect();
    let mut all = Tally::default();
    records.iter().for_each(|o| all.add(o));
    let satisfaction = context! {
        bot => all.nota_bot(),
        pessoa => all.nota_pessoa(),
        resolvidas => all.resolved(),
        total => all.total,
    };
    Ok((lines, satisfaction))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_json_masks_cards_and_leaves_ids_keys_and_times_whole() {
        let stored = serde_json::json!({
            "execucao_id": "exec_4f1e9988776655443322",
            "idempotency_key": "recarga-99887766554433",
            "cartao": "2345678901",
            "numero": 2345678901u64,
            "consultado_em": "1732262400000",
            "mensagem": "saldo do cartão 2345678901",
            "linhas": [{"cartao": 11112222333u64, "pedido_id": "p-11112222333"}],
        });
        let shown = masked_json(&stored);
        assert_eq!(shown["execucao_id"], "exec_4f1e9988776655443322");
        assert_eq!(shown["idempotency_key"], "recarga-99887766554433");
        assert_eq!(shown["consultado_em"], "1732262400000");
        assert_eq!(shown["cartao"], "****8901");
        assert_eq!(shown["mensagem"], "saldo do cartão ****8901");
        assert_eq!(shown["linhas"][0]["cartao"], "****2333");
        assert_eq!(shown["linhas"][0]["pedido_id"], "p-11112222333");
        assert!(!shown.to_string().contains("2345678901"), "{shown}");
    }

    #[test]
    fn a_retry_is_offered_only_where_it_can_help() {
        assert!(retry_can_help(Some("graph api 503")));
        assert!(!retry_can_help(Some(
            "graph api 400, error 131047: Re-engagement message (fora da janela de 24 h)"
        )));
    }
}
