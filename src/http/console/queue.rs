//! Fila: where a support agent lands after signing in. Their cases (claimed, or offered to them), the
//! cases whose clocks are at risk, the cases waiting (each team's in its order), whether they are
//! away, and — for administrators — each team's queue and each agent's load now.

use axum::Form;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::context;
use serde::Deserialize;

use super::cases::{age, agent, row};
use super::pages::{bad_form, frame, store_failed};
use super::render;
use super::session::Staff;
use crate::http::state::AppState;
use vt_store::CaseState;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Said {
    ok: Option<String>,
    /// The team whose queue is shown (`todas`: every team's the agent may see).
    equipe: Option<String>,
}

pub(super) async fn page(State(state): State<AppState>, staff: Staff, Query(said): Query<Said>) -> Response {
    let me = staff.caller.name.clone();
    let cases = state.service.cases();
    let (queue, away) = match (
        cases.queue(agent(&staff).tenant).await,
        state.stores.cases.away_agents().await,
    ) {
        (Ok(q), Ok(a)) => (q, a),
        (Err(e), _) | (_, Err(e)) => return store_failed(&staff, &e),
    };
    let theirs = |e: &&crate::service::QueueEntry| {
        e.case.owner.as_deref() == Some(me.as_str())
            || (e.case.state == CaseState::Aguardando && e.case.offered_to.as_deref() == Some(me.as_str()))
    };
    let mine: Vec<_> = queue.iter().filter(theirs).map(|e| row(&state, e)).collect();
    let at_risk: Vec<_> = queue
        .iter()
        .filter(|e| {
            e.clocks
                .at_risk()
                .is_some_and(|s| s != crate::service::SlaStatus::NoPrazo)
        })
        .map(|e| row(&state, e))
        .collect();
    let my_teams: Vec<String> = state
        .service
        .desk()
        .teams()
        .iter()
        .filter(|t| t.config.has_member(&me))
        .map(|t| t.name().to_owned())
        .collect();
    let (shown, filters, everything) = teams_shown(&state, &staff, &my_teams, said.equipe.as_deref());
    let waiting: Vec<_> = queue
        .iter()
        .filter(|e| e.case.state == CaseState::Aguardando && shown.contains(&e.case.team))
        .map(|e| row(&state, e))
        .collect();
    let teams: Vec<_> = if staff.is_admin() {
        cases
            .team_figures(&queue)
            .into_iter()
            .map(|f| {
                context! {
                    nome => f.team,
                    aguardando => f.waiting,
                    maior_espera => if f.oldest_wait_secs > 0 {
                        age(chrono::Utc::now() - chrono::Duration::seconds(f.oldest_wait_secs))
                    } else {
                        "—".into()
                    },
                    vencendo => f.at_risk,
                    vencidos => f.breached,
                    cargas => f.loads.iter().map(|(a, n)| format!("{a} ({n})")).collect::<Vec<_>>(),
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    render(
        StatusCode::OK,
        "fila.html",
        context! {
            ok => said.ok,
            ausente => away.contains(&me),
            minhas_equipes => my_teams,
            meus => mine,
            risco => at_risk,
            aguardando => waiting,
            equipes => teams,
            filtros => filters,
            todas => everything,
            mostradas => shown,
            ..frame(Some(&staff), "fila", "Fila de atendimento")
        },
    )
}

/// Which teams' waiting cases the queue lists: the one asked for (an agent may ask for their own
/// teams' only), else an agent's own teams, else all — with the filter's links (none for one team)
/// and whether every team is shown.
fn teams_shown(
    state: &AppState,
    staff: &Staff,
    my_teams: &[String],
    asked: Option<&str>,
) -> (Vec<String>, Vec<minijinja::Value>, bool) {
    let all: Vec<String> = state.service.desk().team_names();
    let everyone = staff.is_admin() || my_teams.is_empty();
    let may_see = |t: &str| everyone || my_teams.iter().any(|m| m == t);
    let shown: Vec<String> = match asked {
        Some(t) if t != "todas" && all.iter().any(|a| a == t) && may_see(t) => vec![t.to_owned()],
        _ if everyone => all.clone(),
        _ => my_teams.to_vec(),
    };
    let choices: Vec<_> = all.iter().filter(|t| may_see(t)).collect();
    let filters = if choices.len() > 1 {
        choices
            .iter()
            .map(|t| context! { nome => (*t).clone(), atual => shown.len() == 1 && shown[0] == **t })
            .collect()
    } else {
        Vec::new()
    };
    let everything = shown.len() == choices.len();
    (shown, filters, everything)
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct PresenceForm {
    csrf: String,
    ausente: String,
}

/// An agent says they are away (no case is offered to them) or back.
pub(super) async fn presence(
    State(state): State<AppState>,
    staff: Staff,
    Form(form): Form<PresenceForm>,
) -> Response {
    if !staff.csrf_ok(&form.csrf) {
        return bad_form(&staff);
    }
    let away = form.ausente == "sim";
    if let Err(e) = state.service.cases().set_away(&staff.caller.name, away).await {
        return store_failed(&staff, &e);
    }
    let said = if away {
        "Você está ausente: nenhum atendimento novo é oferecido a você."
    } else {
        "Você está disponível."
    };
    let query = serde_urlencoded::to_string([("ok", said)]).unwrap_or_default();
    super::pages::see_other(&format!("/console/fila?{query}"))
}
