//! `POST /channels/mattermost/actions`: a click on a "Confirmar" / "Cancelar" button, or on an option
//! to pick (a card, a score: the option's index, like a WhatsApp list's row). The click has no
//! auth header; its `context` carries the HMAC we made, binding the button to one conversation and one
//! pending recharge. A valid click on the recharge still waiting confirms or cancels it exactly like
//! "sim" / "não" and updates the post without its buttons; anything else moves no money.
//!
//! The support board's buttons (**Assumir**, **Devolver ao bot**, **Propor recarga**, **Encerrar**)
//! come here too, signed the same way over the case and its conversation; only support users may
//! press them, in the deployment's tenant. The post itself is brought up to date by the board.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::cases::CaseCommand;
use super::{CHANNEL, MattermostState};
use crate::service::{Inbound, NotWaiting, ServiceError, Tap};
use vt_engine::Participant;

#[derive(Debug, Deserialize)]
pub(super) struct Click {
    user_id: String,
    #[serde(default)]
    user_name: Option<String>,
    #[serde(default)]
    context: Context,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Context {
    acao: String,
    /// The recharge a confirmation button answers.
    pendente: String,
    /// The case a board button acts on.
    caso: String,
    conversa: String,
    assinatura: String,
}

pub(super) async fn click(State(state): State<MattermostState>, Json(click): Json<Click>) -> Response {
    let c = &click.context;
    let case_button = !c.caso.is_empty();
    let bound = if case_button { &c.caso } else { &c.pendente };
    if !state.config.verify(&c.acao, bound, &c.conversa, &c.assinatura) {
        tracing::warn!("mattermost click with a forged context refused");
        return StatusCode::FORBIDDEN.into_response();
    }
    if case_button {
        return case_click(&state, &click).await;
    }
    // A pick from the options: the service makes it the option only for that person and the options
    // still standing; anything else says the options are gone.
    let pick = (c.acao == super::CHOOSE)
        .then(|| c.pendente.parse::<usize>().ok())
        .flatten();
    // The button belongs to one person's conversation and one request: the service makes the click
    // "sim" or "não" only for that person and the request still waiting; any other click does nothing.
    let tap = pick.is_none().then(|| Tap {
        recharge: c.pendente.clone(),
        confirm: c.acao == "confirmar",
        otherwise: NotWaiting::Refuse,
    });
    let msg = Inbound {
        agent_id: state.agent.clone(),
        conversation_id: Some(c.conversa.clone()),
        user: Participant {
            user_id: click.user_id.clone(),
            user_login: click.user_name.clone().unwrap_or_else(|| click.user_id.clone()),
            channel: CHANNEL.into(),
        },
        text: String::new(),
        pick,
        tap,
        ..Default::default()
    };
    match state.service.messages().handle(msg).await {
        // The post loses its buttons: a second click has nothing to press.
        Ok(h) => Json(json!({"update": {"message": h.reply_text(), "props": {}}})).into_response(),
        Err(ServiceError::TapNotWaiting) => {
            Json(json!({"ephemeral_text": "Este pedido já foi respondido ou não é seu: nada foi feito."}))
                .into_response()
        }
        Err(e) => {
            tracing::warn!(error = %e, "mattermost click failed");
            Json(json!({"ephemeral_text": "Não consegui concluir agora; nada foi cobrado. Tente de novo."}))
                .into_response()
        }
    }
}

/// A click on a case's button on the support board, by a support user.
async fn case_click(state: &MattermostState, click: &Click) -> Response {
    let login = click.user_name.as_deref().unwrap_or(&click.user_id);
    if !state.config.is_support(&click.user_id, login) {
        return Json(json!({"ephemeral_text": "Só a equipe de atendimento usa estes botões."}))
            .into_response();
    }
    let id = click.context.caso.clone();
    let command = match click.context.acao.as_str() {
        "assumir" => CaseCommand::Claim(id),
        "devolver" => CaseCommand::HandBack(id, None),
        "encerrar" => CaseCommand::Close(id),
        "propor" => {
            let how = format!(
                "Digite `/vt propor {id} <valor> <cartão> <pix|boleto|cartao>`: o cliente recebe a confirmação e só ele confirma."
            );
            return Json(json!({"ephemeral_text": how})).into_response();
        }
        _ => return StatusCode::BAD_REQUEST.into_response(),
    };
    let answer = super::cases::run(state, login, command).await;
    Json(json!({"ephemeral_text": answer["text"]})).into_response()
}
