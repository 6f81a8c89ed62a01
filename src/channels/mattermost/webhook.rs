//! `POST /channels/mattermost/webhook`: an outgoing webhook (public channels). The `token` in the body
//! is checked in constant time; the answer goes in the thread (`response_type: comment`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::{CHANNEL, MattermostState, conversation_id};
use crate::channels::same_secret;
use crate::service::Inbound;
use vt_engine::Participant;

/// Form-encoded or JSON, as the hook was created.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Outgoing {
    token: String,
    channel_id: String,
    user_id: String,
    user_name: String,
    post_id: String,
    text: String,
    trigger_word: String,
}

pub(super) async fn outgoing(
    State(state): State<MattermostState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let json_body = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let parsed: Option<Outgoing> = if json_body {
        vt_contract::json::from_bytes(&body).ok()
    } else {
        serde_urlencoded::from_bytes(&body).ok()
    };
    let Some(hook) = parsed else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    if !same_secret(
        &hook.token,
        state.config.webhook_token.as_deref().unwrap_or_default(),
    ) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let text = hook
        .text
        .trim()
        .strip_prefix(hook.trigger_word.as_str())
        .unwrap_or(&hook.text)
        .trim()
        .to_owned();
    let msg = Inbound {
        agent_id: state.agent.clone(),
        conversation_id: Some(conversation_id(&hook.channel_id, &hook.user_id)),
        tenant_id: Some(state.tenant.clone()),
        user: Participant {
            user_id: hook.user_id.clone(),
            user_login: hook.user_name.clone(),
            channel: CHANNEL.into(),
        },
        text,
        // The post's id: a retried delivery of the same post is not processed twice.
        channel_message_id: (!hook.post_id.is_empty()).then(|| hook.post_id.clone()),
        ..Default::default()
    };
    match state.service.messages().handle(msg).await {
        Ok(h) if h.duplicate => StatusCode::OK.into_response(),
        Ok(h) => Json(json!({"text": h.reply_text(), "response_type": "comment"})).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "outgoing webhook failed");
            Json(json!({"text": "Não consegui atender agora. Tente de novo em instantes.", "response_type": "comment"}))
                .into_response()
        }
    }
}
