//! Flow runs and batches: the list, one run line by line, one batch's progress and lines.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::{Value, context};
use serde_json::Value as Json;

use super::render;
use super::session::Staff;
use crate::http::state::AppState;
use vt_store::RunStatus;

/// Rows a list shows.
use super::pages::*;

pub(super) fn flow_tenant(input: &Json) -> &str {
    input
        .get("tenant_id")
        .and_then(Json::as_str)
        .unwrap_or(vt_engine::DEFAULT_TENANT)
}

/// A run's or a batch line's status, as people read it (the stored words are unaccented keys).
pub(super) fn status_label(status: &str) -> String {
    match status {
        "em_andamento" => "em andamento ou interrompido".into(),
        "concluido" => "concluído".into(),
        "invalida" => "inválida".into(),
        "nao_enviado" => "não enviado".into(),
        other => other.replace('_', " "),
    }
}

/// An amount from a flow's input as pt-BR money (`R$ 900,00`); anything else as it came, masked.
pub(super) fn money_of(v: &Json) -> String {
    let amount = match v {
        Json::String(s) => vt_domain::vt::parse::parse_money(s),
        Json::Number(n) => n.to_string().parse().ok(),
        _ => None,
    };
    amount.map_or_else(
        || masked(&v.to_string()),
        |a| vt_domain::vt::format_money("R$", a, vt_domain::vt::Idioma::PtBr),
    )
}

pub(super) async fn flows(State(state): State<AppState>, staff: Staff) -> Response {
    let store = &state.stores;
    let (runs, jobs, followups) = match (
        store.flows.flow_runs(LIST_LIMIT).await,
        store.batches.batches(tenant_filter(&staff).as_deref(), 20).await,
        store.recharges.followups(true, LIST_LIMIT).await,
    ) {
        (Ok(r), Ok(j), Ok(f)) => (r, j, f),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return store_failed(&staff, &e),
    };
    let now = state.service.engine().now();
    // A recharge's scope is `tenant|user`.
    let pending: Vec<Value> = followups
        .iter()
        .filter(|f| staff.is_admin() || f.attempt.attempt.scope.split('|').next() == Some(staff.caller.tenant.as_str()))
        .map(|f| {
            let a = &f.attempt.attempt;
            context! {
                chave => a.idempotency_key.clone(),
                execucao => a.execucao_id.clone(),
                situacao => f.attempt.status.as_str(),
                cartao => a.cartao_mascarado.clone(),
                valor => vt_domain::vt::format_money(&a.moeda, a.valor, vt_domain::vt::Idioma::PtBr),
                verificacoes => f.checks,
                proxima => if f.next_check_at <= now { "agora".to_owned() } else { when(&state, f.next_check_at) },
                prazo => when(&state, f.deadline_at),
            }
        })
        .collect();
    let runs: Vec<Value> = runs
        .iter()
        .filter(|r| staff.is_admin() || flow_tenant(&r.input) == staff.caller.tenant)
        .map(|r| {
            context! {
                id => r.execucao_id.clone(),
                situacao => status_label(r.status.as_str()),
                interrompido => r.status == RunStatus::EmAndamento,
                cartao => r.input.get("cartao").and_then(Json::as_str).map(vt_domain::vt::mask_card),
                valor => r.input.pointer("/recarga/valor").map(money_of),
                inicio => when(&state, r.created_at),
                fim => r.finished_at.map(|t| when(&state, t)),
            }
        })
        .collect();
    let mut batches = Vec::new();
    for job in &jobs {
        let counts = match store.batches.batch_counts(&job.id).await {
            Ok(c) => c,
            Err(e) => return store_failed(&staff, &e),
        };
        batches.push(batch_view(&state, job, &counts));
    }
    render(
        StatusCode::OK,
        "fluxos.html",
        context! { execucoes => runs, lotes => batches, pendentes => pending, ..frame(Some(&staff), "flows", "Fluxos e lotes") },
    )
}

fn batch_view(state: &AppState, job: &vt_store::BatchJob, counts: &[(vt_store::LineStatus, i64)]) -> Value {
    let done: i64 = counts.iter().map(|(_, n)| n).sum();
    context! {
        id => job.id.clone(),
        total => job.total,
        feitas => done,
        pct => if job.total > 0 { done * 100 / job.total } else { 100 },
        contagens => counts.iter().map(|(s, n)| context! { situacao => status_label(s.as_str()), n => n }).collect::<Vec<_>>(),
        simulacao => job.dry_run,
        inicio => when(state, job.created_at),
        fim => job.finished_at.map(|t| when(state, t)),
    }
}

/// The policy a run used, in one line (the same default reaches every way in, so it says which).
fn policy_line(input: &Json) -> Option<String> {
    let p: vt_domain::vt::Politicas = vt_contract::json::from_value(input.get("politicas")?.clone()).ok()?;
    let money = |v| vt_domain::vt::format_money(&p.moeda_padrao, v, vt_domain::vt::Idioma::PtBr);
    Some(reais_in(&format!(
        "recarga de {} a {}; saldo baixo até {}; cartão de {} a {} dígitos; fuso {}",
        money(p.valor_min),
        money(p.valor_max),
        money(p.limite_saldo_baixo),
        p.validacoes_cartao.tamanho_min,
        p.validacoes_cartao.tamanho_max,
        p.timezone.name(),
    )))
}

fn pretty(v: &Json) -> String {
    vt_contract::json::to_pretty(&masked_json(v)).unwrap_or_default()
}

/// A stored JSON value as people read it ([`crate::flow::masked_json`]), with configured secrets out.
fn masked_json(v: &Json) -> Json {
    crate::flow::masked_json(v, masked)
}

pub(super) async fn flow(State(state): State<AppState>, staff: Staff, Path(id): Path<String>) -> Response {
    let run = match state.stores.flows.flow_run(&id).await {
        Ok(Some(r)) if staff.is_admin() || flow_tenant(&r.input) == staff.caller.tenant => r,
        Ok(_) => return not_found(&staff, "Execução não encontrada."),
        Err(e) => return store_failed(&staff, &e),
    };
    let stages: Vec<Value> = run
        .stages
        .iter()
        .map(|(etapa, saida)| {
            context! { etapa => etapa, resumo => super::stages::summary(etapa, saida), saida => pretty(saida) }
        })
        .collect();
    render(
        StatusCode::OK,
        "fluxo.html",
        context! {
            id => run.execucao_id.clone(),
            situacao => status_label(run.status.as_str()),
            entrada => pretty(&run.input),
            politica => policy_line(&run.input),
            resultado => run.stages.last().map(|(_, saida)| pretty(saida)),
            etapas => stages,
            inicio => when(&state, run.created_at),
            ..frame(Some(&staff), "flows", &format!("Execução {id}"))
        },
    )
}

pub(super) async fn batch(State(state): State<AppState>, staff: Staff, Path(id): Path<String>) -> Response {
    let store = &state.stores;
    let job = match store.batches.batch(&id).await {
        Ok(Some(j)) if staff.is_admin() || j.tenant_id == staff.caller.tenant => j,
        Ok(_) => return not_found(&staff, "Lote não encontrado."),
        Err(e) => return store_failed(&staff, &e),
    };
    let (counts, lines) = match (
        store.batches.batch_counts(&id).await,
        store.batches.batch_lines(&id).await,
    ) {
        (Ok(c), Ok(l)) => (c, l),
        (Err(e), _) | (_, Err(e)) => return store_failed(&staff, &e),
    };
    let lines: Vec<Value> = lines
        .iter()
        .take(500)
        .map(|l| context! { linha => l.line, situacao => status_label(l.status.as_str()), resultado => cut(&masked_json(&l.result).to_string(), 400) })
        .collect();
    render(
        StatusCode::OK,
        "lote.html",
        context! { lote => batch_view(&state, &job, &counts), linhas => lines, ..frame(Some(&staff), "flows", &format!("Lote {id}")) },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_json_masks_cards_and_leaves_ids_keys_and_times_whole() {
        let stored = serde_json::json!({
            "execucao_id": "exec_4f1e9988776655443322",
            "idempotency_key": "recarga-99887766554433",
            "cartao": "2345678901",
            "numero": 2345678901u64,
            "consultado_em": "1732262400000",
            "mensagem": "saldo do cartão 2345678901",
            "linhas": [{"cartao": 11112222333u64, "pedido_id": "p-11112222333"}],
        });
        let shown = masked_json(&stored);
        assert_eq!(shown["execucao_id"], "exec_4f1e9988776655443322");
        assert_eq!(shown["idempotency_key"], "recarga-99887766554433");
        assert_eq!(shown["consultado_em"], "1732262400000");
        assert_eq!(shown["cartao"], "****8901");
        assert_eq!(shown["mensagem"], "saldo do cartão ****8901");
        assert_eq!(shown["linhas"][0]["cartao"], "****2333");
        assert_eq!(shown["linhas"][0]["pedido_id"], "p-11112222333");
        assert!(!shown.to_string().contains("2345678901"), "{shown}");
    }
}
