//! Respostas prontas: the administrators' page of the answers agents insert with `/` and a shortcut
//! (per tenant; for every team or one), with the placeholders they may hold. An administrator keeps
//! their own tenant's answers; a support agent reads and uses them on a case's page.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::context;
use serde::Deserialize;

use super::pages::{admin_form, admins_only, back_saying, frame, store_failed};
use super::render;
use super::session::Staff;
use crate::http::state::AppState;
use crate::service::cases::CaseError;
use crate::service::replies::{MAX_BODY, PLACEHOLDERS};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Said {
    ok: Option<String>,
    erro: Option<String>,
}

pub(super) async fn page(State(state): State<AppState>, staff: Staff, Query(said): Query<Said>) -> Response {
    if !staff.is_admin() {
        return admins_only(&staff);
    }
    let kept = match state.stores.desk.canned_answers(&staff.caller.tenant).await {
        Ok(k) => k,
        Err(e) => return store_failed(&staff, &e),
    };
    let answers: Vec<_> = kept
        .iter()
        .map(|a| {
            context! {
                atalho => a.shortcut.clone(),
                equipe => a.team.clone(),
                texto => a.body.clone(),
                por => a.updated_by.clone(),
            }
        })
        .collect();
    let teams: Vec<String> = state.service.desk().team_names();
    let placeholders: Vec<_> = PLACEHOLDERS
        .iter()
        .map(|(k, what)| context! { chave => *k, significa => *what })
        .collect();
    render(
        StatusCode::OK,
        "respostas.html",
        context! {
            ok => said.ok,
            erro => said.erro,
            respostas => answers,
            equipes => teams,
            marcadores => placeholders,
            maximo => MAX_BODY,
            ..frame(Some(&staff), "respostas", "Respostas prontas")
        },
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct AnswerForm {
    csrf: String,
    atalho: String,
    equipe: String,
    texto: String,
}

fn back(key: &str, text: &str) -> Response {
    back_saying("/console/respostas", key, text)
}

/// Keeps an answer (new, or a new text for its shortcut).
pub(super) async fn save(
    State(state): State<AppState>,
    staff: Staff,
    Form(form): Form<AnswerForm>,
) -> Response {
    if let Some(refused) = admin_form(&staff, &form.csrf) {
        return refused;
    }
    let shortcut = form.atalho.trim().trim_start_matches('/');
    let team = Some(form.equipe.trim()).filter(|t| !t.is_empty());
    let kept = state
        .service
        .cases()
        .save_canned(
            &staff.caller.tenant,
            &staff.caller.name,
            shortcut,
            team,
            &form.texto,
        )
        .await;
    match kept {
        Ok(()) => back("ok", &format!("Resposta /{shortcut} guardada.")),
        Err(CaseError::Store(e)) => store_failed(&staff, &e),
        Err(refused) => back("erro", &format!("Resposta não guardada: {refused}.")),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct DeleteForm {
    csrf: String,
}

pub(super) async fn delete(
    State(state): State<AppState>,
    staff: Staff,
    Path(shortcut): Path<String>,
    Form(form): Form<DeleteForm>,
) -> Response {
    if let Some(refused) = admin_form(&staff, &form.csrf) {
        return refused;
    }
    match state
        .stores
        .desk
        .delete_canned_answer(&staff.caller.tenant, &shortcut)
        .await
    {
        Ok(true) => back("ok", "Resposta apagada."),
        Ok(false) => back("erro", "Essa resposta não existe mais."),
        Err(e) => store_failed(&staff, &e),
    }
}
