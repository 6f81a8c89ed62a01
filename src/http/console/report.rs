//! Relatório: the month a manager is asked about — per team and per agent, cases, first human
//! response (median and p90, business minutes), the share of SLA clocks kept, reopened cases and CSAT
//! — as a page with charts and as CSV. Administrators only.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use chrono::{Datelike, NaiveDate};
use minijinja::context;
use serde::Deserialize;

use super::pages::{admins_only, frame, store_failed};
use super::render;
use super::session::Staff;
use crate::http::state::AppState;
use crate::service::{Report, ReportLine};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Month {
    /// `AAAA-MM`; the current month when absent or unreadable.
    mes: Option<String>,
    /// `csv`: the report as a file.
    formato: Option<String>,
}

fn month_of(state: &AppState, asked: Option<&str>) -> NaiveDate {
    asked
        .and_then(|m| NaiveDate::parse_from_str(&format!("{m}-01"), "%Y-%m-%d").ok())
        .unwrap_or_else(|| {
            let today = state
                .service
                .policy_timezone()
                .local(chrono::Utc::now())
                .date_naive();
            today.with_day(1).unwrap_or(today)
        })
}

fn number(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{v:.decimals$}").replace('.', ","))
}

fn line_view(l: &ReportLine) -> minijinja::Value {
    context! {
        nome => l.nome.clone(),
        casos => l.casos,
        mediana => l.primeira_resposta_mediana.map_or_else(|| "—".into(), |m| m.to_string()),
        p90 => l.primeira_resposta_p90.map_or_else(|| "—".into(), |m| m.to_string()),
        sla => number(l.sla_pct(), 1),
        sla_valor => l.sla_pct(),
        medidos => l.sla_medidos,
        reabertos => l.reabertos,
        csat => number(l.csat, 2),
        notas => l.notas,
    }
}

/// The report as CSV as a spreadsheet set to pt-BR opens it: `;` between cells, a decimal comma, a
/// byte-order mark so that accents read as UTF-8; one line per team, then per agent (`equipe/agente`).
fn csv(report: &Report) -> String {
    let mut out = String::from(
        "\u{feff}mes;tipo;nome;casos;primeira_resposta_mediana_min;primeira_resposta_p90_min;sla_cumpridos;sla_medidos;sla_pct;reabertos;csat;notas\n",
    );
    let month = report.month.format("%Y-%m");
    let lines = report
        .teams
        .iter()
        .map(|l| ("equipe", l))
        .chain(report.agents.iter().map(|l| ("agente", l)));
    for (kind, l) in lines {
        let opt = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
        let float = |v: Option<f64>| v.map(|v| format!("{v:.2}").replace('.', ",")).unwrap_or_default();
        let name = if l.nome.contains([';', '"', '\n']) {
            format!("\"{}\"", l.nome.replace('"', "\"\""))
        } else {
            l.nome.clone()
        };
        out.push_str(&format!(
            "{month};{kind};{name};{};{};{};{};{};{};{};{};{}\n",
            l.casos,
            opt(l.primeira_resposta_mediana),
            opt(l.primeira_resposta_p90),
            l.sla_cumpridos,
            l.sla_medidos,
            float(l.sla_pct()),
            l.reabertos,
            float(l.csat),
            l.notas
        ));
    }
    // How cases were resolved and which canned answers were sent: their count in the cases column.
    let counted = report
        .resolutions
        .iter()
        .map(|(k, n)| ("resolucao", k.clone(), n))
        .chain(
            report
                .canned
                .iter()
                .map(|(k, n)| ("resposta_pronta", format!("/{k}"), n)),
        );
    for (kind, name, n) in counted {
        out.push_str(&format!("{month};{kind};{name};{n};;;;;;;;\n"));
    }
    out
}

/// "novembro de 2026": a month as people in Brazil name it.
fn month_name(month: NaiveDate) -> String {
    use chrono::Datelike as _;
    const NAMES: [&str; 12] = [
        "janeiro",
        "fevereiro",
        "março",
        "abril",
        "maio",
        "junho",
        "julho",
        "agosto",
        "setembro",
        "outubro",
        "novembro",
        "dezembro",
    ];
    format!("{} de {}", NAMES[month.month0() as usize], month.year())
}

pub(super) async fn page(State(state): State<AppState>, staff: Staff, Query(q): Query<Month>) -> Response {
    if !staff.is_admin() {
        return admins_only(&staff);
    }
    let month = month_of(&state, q.mes.as_deref());
    let report = match state.service.cases().report(None, month).await {
        Ok(r) => r,
        Err(e) => return store_failed(&staff, &e),
    };
    let label = month_name(month);
    if q.formato.as_deref() == Some("csv") {
        let file = format!("attachment; filename=\"relatorio-{}.csv\"", month.format("%Y-%m"));
        return (
            [
                (CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
                (CONTENT_DISPOSITION, file),
            ],
            csv(&report),
        )
            .into_response();
    }
    let previous = month.checked_sub_months(chrono::Months::new(1)).unwrap_or(month);
    let next = month.checked_add_months(chrono::Months::new(1)).unwrap_or(month);
    let chart = serde_json::json!({
        "rotulos": report.teams.iter().map(|l| l.nome.clone()).collect::<Vec<_>>(),
        "sla": report.teams.iter().map(|l| l.sla_pct()).collect::<Vec<_>>(),
        "mediana": report.teams.iter().map(|l| l.primeira_resposta_mediana).collect::<Vec<_>>(),
    });
    let has_data = report.teams.iter().any(|l| l.casos > 0);
    render(
        StatusCode::OK,
        "relatorio.html",
        context! {
            mes => month.format("%Y-%m").to_string(),
            mes_rotulo => label.clone(),
            anterior => previous.format("%Y-%m").to_string(),
            seguinte => next.format("%Y-%m").to_string(),
            equipes => report.teams.iter().map(line_view).collect::<Vec<_>>(),
            agentes => report.agents.iter().map(line_view).collect::<Vec<_>>(),
            resolucoes => report.resolutions.iter().map(|(k, n)| {
                let label = crate::service::RESOLUTIONS.iter().find(|(key, _)| key == k).map_or(k.as_str(), |(_, l)| *l);
                context! { nome => label, n => *n }
            }).collect::<Vec<_>>(),
            prontas => report.canned.iter().map(|(k, n)| context! { nome => format!("/{k}"), n => *n }).collect::<Vec<_>>(),
            grafico => has_data.then(|| minijinja::Value::from(minijinja::value::Serde(&chart))),
            ..frame(Some(&staff), "relatorio", &format!("Relatório de {label}"))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_csv_has_one_line_per_team_and_agent_with_empty_cells_for_no_data() {
        let report = Report {
            month: NaiveDate::from_ymd_opt(2026, 11, 1).expect("date"),
            teams: vec![ReportLine {
                nome: "financeiro".into(),
                casos: 3,
                primeira_resposta_mediana: Some(12),
                primeira_resposta_p90: Some(40),
                sla_cumpridos: 2,
                sla_medidos: 4,
                reabertos: 1,
                csat: Some(4.5),
                notas: 2,
            }],
            agents: vec![ReportLine {
                nome: "financeiro/ana".into(),
                casos: 1,
                ..ReportLine::default()
            }],
            resolutions: vec![("orientado".into(), 2)],
            canned: vec![("boas-vindas".into(), 5)],
        };
        assert_eq!(
            csv(&report).lines().skip(1).collect::<Vec<_>>(),
            [
                "2026-11;equipe;financeiro;3;12;40;2;4;50,00;1;4,50;2",
                "2026-11;agente;financeiro/ana;1;;;0;0;;0;;0",
                "2026-11;resolucao;orientado;2;;;;;;;;",
                "2026-11;resposta_pronta;/boas-vindas;5;;;;;;;;"
            ]
        );
        assert!(csv(&report).starts_with("\u{feff}mes;tipo;nome;"));
        assert_eq!(month_name(report.month), "novembro de 2026");
    }
}
