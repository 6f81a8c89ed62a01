//! The outbox: what waits, what failed and why, a retry where one can help, the templates on record.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use minijinja::{Value, context};
use serde::Deserialize;

use super::render;
use super::session::Staff;
use crate::http::state::AppState;
use vt_store::OutboxStatus;

/// Rows a list shows.
use super::pages::*;

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
    // How long what waits takes to leave at WhatsApp's pace (a month's notices: 100,000 at 80/s).
    let waiting = match store.outbox.outbox_count(OutboxStatus::Pending).await {
        Ok(n) => n,
        Err(e) => return store_failed(&staff, &e),
    };
    let ritmo = state.pace.map(|rate| {
        let count = u64::try_from(waiting).unwrap_or(0);
        format!(
            "{waiting} na fila; no ritmo do WhatsApp ({rate} mensagens por segundo): {}",
            crate::channels::whatsapp::time_to_send(count, rate)
        )
    });
    let templates = match templates_view(&state).await {
        Ok(t) => t,
        Err(e) => return store_failed(&staff, &e),
    };
    render(
        StatusCode::OK,
        "outbox.html",
        context! {
            secoes => sections,
            ritmo => ritmo,
            modelos => templates,
            reenviado => flash.ok,
            falhou => flash.falhou,
            ..frame(Some(&staff), "outbox", "Fila de envio")
        },
    )
}

/// The WhatsApp templates in use with their state as Meta last reported it.
async fn templates_view(state: &AppState) -> Result<Vec<Value>, vt_store::StoreError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_is_offered_only_where_it_can_help() {
        assert!(retry_can_help(Some("graph api 503")));
        assert!(!retry_can_help(Some(
            "graph api 400, error 131047: Re-engagement message (fora da janela de 24 h)"
        )));
    }
}
