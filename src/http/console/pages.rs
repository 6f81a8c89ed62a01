//! The console's pages: each handler reads the store (or runs a turn), builds a view of plain values
//! — every text from the database masked on the way ([`masked`]) — and renders its template. Forms are
//! posted with the session's CSRF token; a missing or wrong token gets 403 and changes nothing.

use axum::Form;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::{LOCATION, SET_COOKIE};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use minijinja::{Value, context};
use serde::Deserialize;

use super::render;
use super::session::{self, SESSION_COOKIE, SIGN_IN_COOKIE, Staff};
use crate::http::config::Role;
use crate::http::state::AppState;
use crate::service::Inbound;
use vt_engine::Participant;
use vt_engine::llm::ChatMessage;

/// The channel of the console's own conversations (its lookups).
use super::CHANNEL;
/// Rows a list shows.
pub(super) const LIST_LIMIT: i64 = 100;

/// Free text from the store as the console shows it: card numbers masked, configured secrets out,
/// amounts in reais as Brazilians read them.
pub(super) fn masked(text: &str) -> String {
    reais_in(&vt_contract::redact::secrets(
        &vt_domain::vt::card::mask_cards_in(text),
    ))
}

/// [`masked`] for a conversation's own texts: its payment `codes` (from its charges on record) stay
/// whole, for the person helping its card holder to read out or copy.
pub(super) fn masked_with(text: &str, codes: &[String]) -> String {
    reais_in(&vt_contract::redact::secrets(
        &vt_domain::vt::card::mask_cards_except(text, codes),
    ))
}

/// `BRL 20,00` as `R$ 20,00` ([`vt_domain::vt::reais_in`]): what the console's readers read.
pub(super) fn reais_in(text: &str) -> String {
    vt_domain::vt::reais_in(text).into_owned()
}

/// The payment codes of conversation `id` (see [`vt_store::PixCharge::codes`]).
pub(super) async fn codes_of(state: &AppState, id: &str) -> Result<Vec<String>, vt_store::StoreError> {
    let charges = state.stores.pix.conversation_charges(id).await?;
    Ok(charges.iter().flat_map(vt_store::PixCharge::codes).collect())
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
pub(super) fn notice(status: StatusCode, staff: Option<&Staff>, title: &str, message: &str) -> Response {
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

/// Why an administrator's form is refused (the page saying so), if it is: its CSRF token is not the
/// session's, or the one sending it is no administrator.
pub(super) fn admin_form(staff: &Staff, csrf: &str) -> Option<Response> {
    if !staff.csrf_ok(csrf) {
        return Some(bad_form(staff));
    }
    (!staff.is_admin()).then(|| admins_only(staff))
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

/// `text` as one segment of a path (percent-encoded).
pub(super) fn path_segment(text: &str) -> String {
    serde_urlencoded::to_string([("", text)])
        .unwrap_or_default()
        .trim_start_matches('=')
        .to_owned()
}

pub(super) fn see_other(to: &str) -> Response {
    (StatusCode::SEE_OTHER, [(LOCATION, to)]).into_response()
}

/// Back to `page` after a form, saying `text` as its `ok` or `erro` notice (`key`).
pub(super) fn back_saying(page: &str, key: &str, text: &str) -> Response {
    let query = serde_urlencoded::to_string([(key, text)]).unwrap_or_default();
    see_other(&format!("{page}?{query}"))
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
    pub(super) csrf: String,
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
        vt_domain::vt::parse::cards(&self.cartao)
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
                masked: vt_domain::vt::mask_card(&card),
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

/// The tenant a user sees: an administrator every tenant, a support agent only theirs.
pub(super) fn tenant_filter(staff: &Staff) -> Option<String> {
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
