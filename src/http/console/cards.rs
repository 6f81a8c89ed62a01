//! A card's history: what the product did for one card — flow runs (lookups and recharges, with the
//! notices they sent), the conversations that hold it and the console's audited lookups of it —
//! masked, in the user's tenant. Reached from the lookup form; the card travels in the form's body,
//! never in a URL.

use axum::Form;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::context;
use serde_json::Value as Json;

use super::flows::{flow_tenant, money_of, status_label};
use super::pages::{LookupForm, frame, store_failed, when};
use super::render;
use super::session::Staff;
use crate::http::state::AppState;
use vt_store::{FlowRunRecord, Subject};

/// Runs and conversations the page shows at most.
const SHOWN: usize = 100;

pub(super) async fn history(
    State(state): State<AppState>,
    staff: Staff,
    Form(form): Form<LookupForm>,
) -> Response {
    let card = match form.card(&staff, &state.console.keys) {
        Ok(card) => card,
        Err(refused) => return refused,
    };
    let store = &state.stores;
    let records = match store.keeping.subject_records(&Subject::Card(card.clone())).await {
        Ok(r) => r,
        Err(e) => return store_failed(&staff, &e),
    };
    let tenant = (!staff.is_admin()).then(|| staff.caller.tenant.clone());
    let mut runs = Vec::new();
    for id in records.flow_runs.iter().take(SHOWN) {
        match store.flows.flow_run(id).await {
            Ok(Some(run)) if tenant.as_deref().is_none_or(|t| flow_tenant(&run.input) == t) => runs.push(run),
            Ok(_) => {}
            Err(e) => return store_failed(&staff, &e),
        }
    }
    runs.sort_by_key(|r| std::cmp::Reverse(r.created_at));
    let mut conversations = Vec::new();
    for id in records.conversations.iter().take(SHOWN) {
        match store.conversations.conversation(id).await {
            Ok(Some(c)) if tenant.as_deref().is_none_or(|t| c.tenant_id == t) => conversations.push(c.id),
            Ok(_) => {}
            Err(e) => return store_failed(&staff, &e),
        }
    }
    let hash = state.console.keys.card_hash(&card);
    let lookups = match store.reports.audit_records(1_000).await {
        Ok(all) => all
            .into_iter()
            .filter(|a| a.cartao_hash == hash && tenant.as_deref().is_none_or(|t| a.tenant_id == t))
            .map(|a| context! { quando => when(&state, a.at), quem => a.support_user, canal => a.channel, resultado => a.outcome })
            .collect::<Vec<_>>(),
        Err(e) => return store_failed(&staff, &e),
    };
    tracing::info!(by = %staff.caller.name, "card history read in the console");
    let runs: Vec<_> = runs.iter().map(|r| run_view(&state, r)).collect();
    render(
        StatusCode::OK,
        "cartao.html",
        context! {
            cartao => vt_domain::vt::mask_card(&card),
            execucoes => runs,
            conversas => conversations,
            consultas => lookups,
            ..frame(Some(&staff), "lookup", &format!("Histórico do cartão {}", vt_domain::vt::mask_card(&card)))
        },
    )
}

/// One run as the history lists it: when, what, how it ended, the amount and the notices it sent.
fn run_view(state: &AppState, run: &FlowRunRecord) -> minijinja::Value {
    let recharge = run.input.get("recarga").is_some_and(|r| !r.is_null());
    let sent = |prefix: &str| {
        run.stages
            .iter()
            .any(|(stage, out)| stage.starts_with(prefix) && out["enviado"] == Json::Bool(true))
    };
    let mut notices = Vec::new();
    if sent("rf05") {
        notices.push("aviso de saldo baixo");
    }
    if sent("rf10") {
        notices.push("aviso da recarga");
    }
    context! {
        id => run.execucao_id.clone(),
        quando => when(state, run.created_at),
        operacao => if recharge { "recarga" } else { "consulta de saldo" },
        situacao => status_label(run.status.as_str()),
        valor => run.input.pointer("/recarga/valor").map(money_of),
        avisos => notices.join(", "),
    }
}
