//! Usage: turns, tokens, costs and outcomes over a period, by tenant.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{Duration, Utc};
use minijinja::{Value, context};
use serde::Deserialize;

use super::dashboard::{Dashboard, PERIODS};
use super::render;
use super::session::Staff;
use crate::http::state::AppState;
use crate::service::CaseFigures;
use vt_engine::llm::ChatMessage;
use vt_store::ConversationQuery;

/// Rows a list shows.
use super::pages::*;

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
    // The service's clock, as the budget's banner reads it (tests move it).
    let now = state.service.engine().now();
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
pub(super) async fn unanswered(state: &AppState, staff: &Staff) -> Result<Vec<Value>, vt_store::StoreError> {
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
fn spending_lines(spending: &[vt_store::TenantSpending]) -> Vec<Value> {
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
) -> Result<(Vec<Value>, Value), vt_store::StoreError> {
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
