//! Recargas automáticas: the automatic recharges (Pix Automático) — card masked, terms, status, next
//! debit, how many were credited, the last outcome — newest first, the same list `vt-agent
//! recorrencias` prints. A support agent sees their tenant's; an administrator, every tenant's.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::context;

use super::pages::{frame, masked, store_failed};
use super::render;
use super::session::Staff;
use crate::http::state::AppState;

/// How many recurrences the page lists.
const LIMIT: i64 = 200;

pub(super) async fn page(State(state): State<AppState>, staff: Staff) -> Response {
    let tenant = (!staff.is_admin()).then_some(staff.caller.tenant.as_str());
    let lines = match crate::runs::recurrences(state.stores.recurrences.as_ref(), tenant, LIMIT).await {
        Ok(l) => l,
        Err(e) => return store_failed(&staff, &e),
    };
    let tz = state.service.policy_timezone();
    let rows: Vec<minijinja::Value> = lines
        .iter()
        .map(|l| {
            let r = &l.recurrence;
            let proxima = l.proxima.as_deref().and_then(|d| {
                chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d")
                    .ok()
                    .map(|d| d.format("%d/%m/%Y").to_string())
            });
            context! {
                cartao => &r.card_masked,
                inquilino => &r.tenant_id,
                termos => masked(&l.termos),
                situacao => r.status.as_str(),
                ativa => r.status.live(),
                proxima => proxima,
                creditadas => l.creditadas,
                resultado => r.last_outcome.as_deref().map(masked),
                criada => tz.local(r.created_at).format("%d/%m/%Y %H:%M").to_string(),
                conversa => &r.conversation_id,
            }
        })
        .collect();
    let ativas = lines.iter().filter(|l| l.recurrence.status.live()).count();
    render(
        StatusCode::OK,
        "recorrencias.html",
        context! {
            linhas => rows,
            ativas => ativas,
            ..frame(Some(&staff), "recorrencias", "Recargas automáticas")
        },
    )
}
