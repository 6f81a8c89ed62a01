//! The desk as it happens: every instance follows the cases' log ([`vt_store::DeskStore::desk_lines`])
//! while someone has a console open, and tells each signed-in agent's page, over server-sent events,
//! that a case of their tenant moved — opened, offered, claimed, transferred, answered, noted, closed.
//! The event names the case and what happened, never what was said: the page then reads its own
//! parts again, as a reload would. An offer to the agent (or a transfer to them) is an `oferta`
//! event, which the page turns into a sound and a browser notification.
//!
//! The lines come from the process's one reader of the log ([`super::feed`]).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde_json::json;
use tokio::sync::broadcast;
use vt_store::DeskLine;

use super::session::Staff;
use crate::http::state::AppState;

/// Whether `line` is a case offered or transferred to `login`.
fn for_me(line: &DeskLine, login: &str) -> bool {
    let to = line.line.detail.as_deref().unwrap_or_default();
    match line.line.what.as_str() {
        "oferecido" => to == login,
        "transferido" => to.ends_with(&format!("(@{login})")),
        _ => false,
    }
}

/// The events of one line for one agent's page.
fn events_of(line: &DeskLine, staff: &Staff) -> Vec<Event> {
    let visible = staff.is_admin() || line.tenant_id == staff.caller.tenant;
    if !visible {
        return Vec::new();
    }
    let case = &line.line.case_id;
    let mut out = vec![
        Event::default()
            .event("caso")
            .data(json!({"caso": case, "o_que": line.line.what, "equipe": line.team}).to_string()),
    ];
    if for_me(line, &staff.caller.name) {
        let protocol = line.protocol.clone().unwrap_or_else(|| case.clone());
        out.push(
            Event::default()
                .event("oferta")
                .data(json!({"caso": case, "protocolo": protocol, "equipe": line.team}).to_string()),
        );
    }
    out
}

/// `GET /console/eventos`: the desk's events for the signed-in agent, as server-sent events.
pub(super) async fn events(State(state): State<AppState>, staff: Staff) -> Response {
    let lines = state.console.live.listen(state.stores.desk.clone());
    Sse::new(stream(lines, staff))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

fn stream(
    lines: broadcast::Receiver<Arc<DeskLine>>,
    staff: Staff,
) -> impl Stream<Item = Result<Event, Infallible>> {
    futures::stream::unfold((lines, staff), |(mut lines, staff)| async move {
        loop {
            match lines.recv().await {
                Ok(line) => {
                    let events: Vec<Result<Event, Infallible>> =
                        events_of(&line, &staff).into_iter().map(Ok).collect();
                    if !events.is_empty() {
                        return Some((futures::stream::iter(events), (lines, staff)));
                    }
                }
                // Fell behind: the page reads everything again.
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let all = Event::default().event("caso").data("{}");
                    return Some((futures::stream::iter(vec![Ok(all)]), (lines, staff)));
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .flatten()
}

/// `GET /console/contagem`: the menu's counts (waiting, the agent's), for the page to update them.
pub(super) async fn counts(staff: Staff) -> Response {
    let (waiting, mine) = staff.counts;
    axum::Json(json!({"aguardando": waiting, "meus": mine})).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(tenant: &str, what: &str, detail: Option<&str>) -> DeskLine {
        DeskLine {
            seq: 1,
            tenant_id: tenant.into(),
            team: "atendimento".into(),
            protocol: Some("20261123-000001".into()),
            line: vt_store::CaseEvent {
                case_id: "caso-1".into(),
                conversation_id: "c-1".into(),
                at: chrono::Utc::now(),
                who: "sistema".into(),
                what: what.into(),
                detail: detail.map(str::to_owned),
            },
        }
    }

    #[test]
    fn an_offer_or_a_transfer_to_me_is_mine_and_nobody_elses() {
        assert!(for_me(&line("A", "oferecido", Some("ana")), "ana"));
        assert!(!for_me(&line("A", "oferecido", Some("ana")), "bia"));
        assert!(for_me(
            &line("A", "transferido", Some("financeiro (@bia)")),
            "bia"
        ));
        assert!(!for_me(
            &line("A", "transferido", Some("financeiro (@bia)")),
            "ana"
        ));
        assert!(!for_me(&line("A", "transferido", Some("financeiro")), "ana"));
        // A note that merely names someone is no offer.
        assert!(!for_me(&line("A", "nota_interna", Some("ana")), "ana"));
    }
}
