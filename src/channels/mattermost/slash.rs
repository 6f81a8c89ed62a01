//! `POST /channels/mattermost/slash`: `/vt saldo <cartão>`, `/vt recarga …`, `/vt ajuda`, and for
//! support users the case commands ([`super::cases`]). Answered
//! ephemerally within Mattermost's 3 s; a slower turn answers "um momento" at once and its result goes
//! to the command's `response_url`.

use std::time::Duration;

use axum::Json;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{CHANNEL, MattermostState, audit, conversation_id};
use crate::channels::same_secret;
use crate::service::{Handled, Inbound};
use vt_engine::Participant;

/// Mattermost waits 3 s for the answer.
const ANSWER_WITHIN: Duration = Duration::from_millis(2_500);

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct SlashForm {
    channel_id: String,
    user_id: String,
    user_name: String,
    text: String,
    response_url: String,
}

/// The command's words as the agent reads them.
fn as_message(text: &str) -> String {
    let text = text.trim();
    let (verb, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    match verb.to_lowercase().as_str() {
        "" | "ajuda" | "help" => "ajuda".into(),
        "recarga" | "recarregar" => format!("recarregar {rest}"),
        _ => text.to_owned(),
    }
}

pub(super) async fn command(
    State(state): State<MattermostState>,
    headers: HeaderMap,
    Form(form): Form<SlashForm>,
) -> Response {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Token "))
        .unwrap_or_default();
    if !same_secret(token, state.config.slash_token.as_deref().unwrap_or_default()) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let support = state.config.is_support(&form.user_id, &form.user_name);
    if let Some(case_command) = super::cases::CaseCommand::parse(&form.text) {
        if !support {
            let refused =
                json!({"response_type": "ephemeral", "text": "Só atendentes cuidam de atendimentos."});
            return Json(refused).into_response();
        }
        return Json(super::cases::run(&state, &form.user_name, case_command).await).into_response();
    }
    let conversation = conversation_id(&form.channel_id, &form.user_id);
    let text = as_message(&form.text);
    let msg = Inbound {
        agent_id: state.agent.clone(),
        conversation_id: Some(conversation.clone()),
        tenant_id: Some(state.tenant.clone()),
        user: Participant {
            user_id: form.user_id.clone(),
            user_login: form.user_name.clone(),
            channel: CHANNEL.into(),
        },
        text: text.clone(),
        ..Default::default()
    };
    let mut work = {
        let state = state.clone();
        let support_user = form.user_name.clone();
        let turns = state.service.clone();
        turns.messages().spawn(async move {
            let handled = state.service.messages().handle(msg).await;
            if support && let Ok(h) = &handled {
                audit(
                    &state.service,
                    &state.config,
                    &state.tenant,
                    &support_user,
                    &text,
                    h,
                )
                .await;
            }
            handled
        })
    };
    match tokio::time::timeout(ANSWER_WITHIN, &mut work).await {
        Ok(Ok(Ok(handled))) => Json(answer(&state, &conversation, &handled)).into_response(),
        Ok(Ok(Err(e))) => {
            tracing::warn!(error = %e, "slash command failed");
            Json(json!({"response_type": "ephemeral", "text": "Não consegui atender agora. Tente de novo em instantes."}))
                .into_response()
        }
        Ok(Err(e)) => {
            tracing::error!(error = %e, "slash command task failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
        Err(_) => {
            // Mattermost stops waiting at 3 s: the result follows through the response URL.
            let url = form.response_url.clone();
            tokio::spawn(async move {
                if let Ok(Ok(handled)) = work.await
                    && !url.is_empty()
                {
                    let body = answer(&state, &conversation, &handled);
                    if let Err(e) = state.client.post(&url).json(&body).send().await {
                        tracing::warn!(error = %e, "slash command result could not be delivered");
                    }
                }
            });
            Json(json!({"response_type": "ephemeral", "text": "Um momento: a resposta chega em instantes."}))
                .into_response()
        }
    }
}

/// The ephemeral answer, with confirm / cancel buttons when a recharge waits.
fn answer(state: &MattermostState, conversation: &str, handled: &Handled) -> Value {
    let text = handled.reply_text();
    match &handled.awaiting_confirmation {
        Some(pending) => json!({"response_type": "ephemeral", "text": "",
            "attachments": state.config.buttons(&text, pending, conversation)}),
        None => json!({"response_type": "ephemeral", "text": text}),
    }
}

#[cfg(test)]
mod tests {
    use super::as_message;

    #[test]
    fn subcommands_read_as_the_agent_reads_people() {
        assert_eq!(as_message("saldo 1234567890"), "saldo 1234567890");
        assert_eq!(
            as_message("recarga 50 no 1234567890 via pix"),
            "recarregar 50 no 1234567890 via pix"
        );
        assert_eq!(as_message(""), "ajuda");
        assert_eq!(as_message("ajuda"), "ajuda");
    }
}
