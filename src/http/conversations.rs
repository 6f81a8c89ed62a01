//! `/v1/conversations`: start one, send it a message and get the replies, read it back (cards masked).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use vt_domain::vt::card::mask_cards_except;

use super::auth::Caller;
use super::error::{ApiError, ErrorBody};
use super::json::ApiJson;
use super::state::AppState;
use crate::service::Inbound;
use vt_engine::Participant;
use vt_engine::llm::ChatMessage;

/// The channel name HTTP conversations are recorded under.
const CHANNEL: &str = "http";
/// Conversation ids are the caller's choice, within reason.
const MAX_ID_CHARS: usize = 128;

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewConversation {
    /// Who is talking; optional.
    #[serde(default)]
    pub user: Option<User>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct User {
    /// The caller's id for the person.
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Created {
    pub conversation_id: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct MessageRequest {
    /// What the person wrote.
    pub text: String,
    pub user: User,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct MessageResponse {
    pub conversation_id: String,
    pub replies: Vec<ReplyOut>,
    /// The conversation ended with this turn.
    pub ended: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ReplyOut {
    /// Empty in a reply that only carries a Pix code's QR (`pix`). Emphasis marked as WhatsApp marks
    /// it (`*sim*`).
    pub text: String,
    /// `text` without its emphasis marks, for a client that shows plain text.
    pub plain_text: String,
    /// Quick answers to offer (a recharge's confirm / cancel): send the `id` back as the next text.
    pub buttons: Vec<Button>,
    /// A Pix code to pay, with its QR code (the reply after the code's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pix: Option<PixOut>,
    /// A card checkout to pay at (the reply after the line with its link).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cartao: Option<CartaoOut>,
}

/// A card checkout to pay at: the provider's page.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CartaoOut {
    /// The provider's hosted page, where the card is typed (never in the chat).
    pub link: String,
    /// Until when it can be paid.
    pub expira_em: DateTime<Utc>,
}

/// The checkout a reply's files name, from the charge on record (left out when it cannot be read).
pub(super) async fn cartao_of(
    pix: &dyn vt_store::PixStore,
    files: &[vt_contract::FileContent],
) -> Option<CartaoOut> {
    let id = files.iter().find_map(vt_domain::tools::link_of)?;
    match pix.pix_charge(id).await {
        Ok(charge) => charge.map(|c| CartaoOut {
            link: c.copia_e_cola,
            expira_em: c.expires_at,
        }),
        Err(e) => {
            tracing::error!(error = %e, "a card checkout shown in a reply could not be read");
            None
        }
    }
}

/// A Pix code to pay.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PixOut {
    /// The BR Code, to copy into a bank's app.
    pub copia_e_cola: String,
    /// The same code as a QR image (PNG), in base64.
    pub qr_png_base64: String,
    /// Until when it can be paid.
    pub expira_em: DateTime<Utc>,
}

/// The Pix code a reply's files name, from the charge on record. The turn is done by then: a charge
/// that cannot be read leaves the field out (the code is in the reply before), it fails nothing.
pub(super) async fn pix_of(
    pix: &dyn vt_store::PixStore,
    files: &[vt_contract::FileContent],
) -> Option<PixOut> {
    use base64::Engine as _;
    let txid = files.iter().find_map(vt_domain::tools::qr_of)?;
    let charge = match pix.pix_charge(txid).await {
        Ok(charge) => charge?,
        Err(e) => {
            tracing::error!(error = %e, "a Pix charge shown in a reply could not be read");
            return None;
        }
    };
    let png = vt_domain::pix::qr::png(&charge.copia_e_cola).ok()?;
    Some(PixOut {
        qr_png_base64: base64::engine::general_purpose::STANDARD.encode(png),
        copia_e_cola: charge.copia_e_cola,
        expira_em: charge.expires_at,
    })
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Button {
    pub id: String,
    pub title: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ConversationView {
    pub conversation_id: String,
    pub ended: bool,
    /// The person's messages and the agent's replies, in order; cards masked.
    pub messages: Vec<MessageView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct MessageView {
    /// The message's id (`msg_<n>`): a late message's is the one its webhook and event carry.
    pub message_id: String,
    /// `user`, `assistant`, or `human_agent` (a support agent who had the conversation).
    pub role: String,
    /// The support agent's name, for their messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub text: String,
    pub at: DateTime<Utc>,
}

fn check_id(id: &str) -> Result<(), ApiError> {
    let ok = !id.is_empty()
        && id.chars().count() <= MAX_ID_CHARS
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "id",
            format!("use até {MAX_ID_CHARS} letras, dígitos, '-', '_', '.' ou ':'"),
        ))
    }
}

fn participant(user: Option<&User>) -> Participant {
    let id = user.map_or_else(|| "http".to_owned(), |u| u.id.clone());
    Participant {
        user_login: user.and_then(|u| u.name.clone()).unwrap_or_else(|| id.clone()),
        user_id: id,
        channel: CHANNEL.into(),
    }
}

/// Start a conversation.
#[utoipa::path(post, path = "/v1/conversations", request_body(content = Option<NewConversation>),
    responses((status = 201, body = Created), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<NewConversation>,
) -> Result<(StatusCode, Json<Created>), ApiError> {
    let service = &state.service;
    let mut conv = service
        .engine()
        .start_conversation(&state.agent, participant(body.user.as_ref()))
        .map_err(|e| ApiError::internal("conversation could not start", &e))?;
    conv.tenant_id = caller.tenant;
    service
        .messages()
        .open(&conv)
        .await
        .map_err(|e| ApiError::internal("conversation could not be stored", &e))?;
    Ok((
        StatusCode::CREATED,
        Json(Created {
            conversation_id: conv.id,
        }),
    ))
}

/// Send a message and get the replies; an unknown id starts that conversation.
#[utoipa::path(post, path = "/v1/conversations/{id}/messages", request_body = MessageRequest,
    params(("id" = String, Path, description = "The conversation")),
    responses((status = 200, body = MessageResponse), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody), (status = 503, body = ErrorBody), (status = 504, body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn message(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<MessageRequest>,
) -> Result<Json<MessageResponse>, ApiError> {
    check_id(&id)?;
    let msg = Inbound {
        agent_id: state.agent.clone(),
        conversation_id: Some(id),
        tenant_id: Some(caller.tenant),
        user: participant(Some(&body.user)),
        text: body.text,
        ..Default::default()
    };
    let service = state.service.clone();
    let started = std::time::Instant::now();
    let handled = state
        .run(async move { service.messages().handle(msg).await })
        .await?
        .map_err(ApiError::from)?;
    state
        .metrics
        .turn(handled.tokens, started.elapsed().as_secs_f64());
    let buttons = || {
        vec![
            Button {
                id: "sim".into(),
                title: "Confirmar".into(),
            },
            Button {
                id: "não".into(),
                title: "Cancelar".into(),
            },
        ]
    };
    let last = handled.replies.len().saturating_sub(1);
    let mut replies = Vec::with_capacity(handled.replies.len());
    for (i, r) in handled.replies.iter().enumerate() {
        replies.push(ReplyOut {
            text: r.text.clone(),
            plain_text: crate::outbox::emphasis(&r.text, ""),
            buttons: if i == last && handled.awaiting_confirmation.is_some() {
                buttons()
            } else {
                Vec::new()
            },
            pix: pix_of(state.stores.pix.as_ref(), &r.files).await,
            cartao: cartao_of(state.stores.pix.as_ref(), &r.files).await,
        });
    }
    Ok(Json(MessageResponse {
        conversation_id: handled.conversation_id,
        replies,
        ended: handled.ended,
    }))
}

/// Read a conversation: its messages in order, cards masked, its own payment codes whole.
#[utoipa::path(get, path = "/v1/conversations/{id}",
    params(("id" = String, Path, description = "The conversation")),
    responses((status = 200, body = ConversationView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<ConversationView>, ApiError> {
    check_id(&id)?;
    let store = &state.stores.conversations;
    let conv = store
        .conversation(&id)
        .await
        .map_err(|e| ApiError::internal("conversation could not be read", &e))?
        .filter(|c| c.tenant_id == caller.tenant)
        .ok_or_else(|| ApiError::not_found("a conversa"))?;
    // The conversation's own payment codes are the caller's to copy: shown whole, cards masked.
    let codes: Vec<String> = state
        .stores
        .pix
        .conversation_charges(&id)
        .await
        .map_err(|e| ApiError::internal("charges could not be read", &e))?
        .iter()
        .flat_map(vt_store::PixCharge::codes)
        .collect();
    let messages = store
        .messages(&id)
        .await
        .map_err(|e| ApiError::internal("messages could not be read", &e))?
        .into_iter()
        .filter_map(|m| {
            let (role, name, text) = match m.message {
                ChatMessage::User { content } => ("user", None, content),
                ChatMessage::Assistant {
                    content: Some(content),
                    ..
                } if !content.trim().is_empty() => ("assistant", None, content),
                ChatMessage::HumanAgent { name, content } => ("human_agent", Some(name), content),
                _ => return None,
            };
            Some(MessageView {
                message_id: super::webhooks::message_public_id(m.id),
                role: role.into(),
                name,
                text: mask_cards_except(&text, &codes),
                at: m.created_at,
            })
        })
        .collect();
    Ok(Json(ConversationView {
        conversation_id: conv.id,
        ended: conv.ended,
        messages,
    }))
}
