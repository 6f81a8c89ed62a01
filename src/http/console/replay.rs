//! Replay: the last `vt-agent replay` run written under the data directory (`replay/`) — its cases by
//! verdict, a failed case's mutating effects side by side with the reference's, and each case as a
//! transcript to keep (personal data replaced by the replay). Administrators only: it judges a release.

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use minijinja::context;
use serde_json::Value;

use super::pages::{admins_only, frame, masked, not_found};
use super::render;
use super::session::Staff;
use crate::http::state::AppState;

/// The run's report, if one was written.
fn report(state: &AppState) -> Option<Value> {
    let dir = state.replay_dir.as_ref()?;
    let text = std::fs::read_to_string(dir.join("report.json")).ok()?;
    vt_contract::json::from_text(&text).ok()
}

/// One case's row and, when it did not pass, its effects side by side.
fn case_row(c: &Value) -> minijinja::Value {
    let text = |v: &Value| v.as_str().map(masked).unwrap_or_default();
    let diff: Vec<minijinja::Value> = c["diff"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|row| context! { esperado => text(&row[0]), obtido => text(&row[1]) })
        .collect();
    let errors: Vec<String> = c["errors"].as_array().into_iter().flatten().map(text).collect();
    context! {
        id => c["id"].as_str().unwrap_or_default(),
        veredito => verdict_label(c["verdict"].as_str().unwrap_or_default()),
        classe => c["verdict"].as_str().unwrap_or_default(),
        referencia => reference_label(c["reference"].as_str().unwrap_or_default()),
        similaridade => format!("{:.0} %", c["similarity"].as_f64().unwrap_or_default() * 100.0),
        modelo => format!("{}/{}/{}", c["model"]["recorded"], c["model"]["live"], c["model"]["unanswered"]),
        reais => c["reais"].as_str().unwrap_or_default(),
        diff => diff,
        erros => errors,
    }
}

/// What a case was compared with, as people read it.
fn reference_label(reference: &str) -> &str {
    match reference {
        "baseline" => "referência aprovada",
        "gravacao" => "gravação",
        other => other,
    }
}

pub(super) async fn page(State(state): State<AppState>, staff: Staff) -> Response {
    if !staff.is_admin() {
        return admins_only(&staff);
    }
    let Some(run) = report(&state) else {
        return render(
            StatusCode::OK,
            "replay.html",
            context! { run => false, ..frame(Some(&staff), "replay", "Replay") },
        );
    };
    let cases: Vec<&Value> = run["cases"].as_array().into_iter().flatten().collect();
    let count = |v: &[&str]| {
        cases
            .iter()
            .filter(|c| v.contains(&c["verdict"].as_str().unwrap_or_default()))
            .count()
    };
    let problems: Vec<String> = run["problems"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(masked)
        .collect();
    render(
        StatusCode::OK,
        "replay.html",
        context! {
            run => true,
            avaliador => run["evaluator"].as_str().unwrap_or_default(),
            corpus => run["corpus"].as_str().unwrap_or_default(),
            passaram => count(&["pass", "stable", "flaky"]),
            falharam => count(&["fail"]),
            erros => count(&["error"]),
            problemas => problems,
            casos => cases.iter().map(|c| case_row(c)).collect::<Vec<_>>(),
            ..frame(Some(&staff), "replay", "Replay")
        },
    )
}

/// A case id as the replay writes it (`caso-` and twelve hex digits): nothing else names a file.
fn is_case_id(id: &str) -> bool {
    id.strip_prefix("caso-")
        .is_some_and(|h| h.len() == 12 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A case as a transcript, to keep under `tests/transcripts/` (personal data replaced).
pub(super) async fn case_file(
    State(state): State<AppState>,
    staff: Staff,
    Path(file): Path<String>,
) -> Response {
    if !staff.is_admin() {
        return admins_only(&staff);
    }
    let id = file.strip_suffix(".yaml").unwrap_or(&file);
    let text = state
        .replay_dir
        .as_ref()
        .filter(|_| is_case_id(id))
        .and_then(|dir| std::fs::read_to_string(dir.join("cases").join(format!("{id}.yaml"))).ok());
    match text {
        Some(yaml) => (
            [
                (header::CONTENT_TYPE, "application/yaml; charset=utf-8".to_owned()),
                (
                    header::CONTENT_DISPOSITION,
                    format!("attachment; filename=\"{id}.yaml\""),
                ),
            ],
            yaml,
        )
            .into_response(),
        None => not_found(&staff, "Caso não encontrado."),
    }
}

/// A report's verdict (`pass`, `fail`…, the report's values) as the page's reader reads it.
fn verdict_label(value: &str) -> &str {
    match value {
        "pass" => "passou",
        "stable" => "estável",
        "flaky" => "instável",
        "fail" => "falhou",
        "error" => "erro",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_case_id_names_a_file() {
        assert!(super::is_case_id("caso-0123456789ab"));
        for bad in [
            "caso-../../etc",
            "caso-0123456789abc",
            "outro-0123456789ab",
            "caso-01234567890g",
        ] {
            assert!(!super::is_case_id(bad), "{bad}");
        }
    }
}
