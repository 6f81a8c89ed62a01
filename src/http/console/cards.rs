//! A card's page: what the card system says of it now (its situation, its last 30 days), what the
//! product did for it — flow runs (lookups and recharges, with the notices they sent), the
//! conversations that hold it and the console's audited lookups and blocks of it — masked, in the
//! user's tenant, and the form that blocks it on its holder's behalf (audited, with a reason). Reached
//! from the lookup form; the card travels in the form's body, sealed, never in a URL.

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
use vt_domain::systems::SystemsPort;
use vt_domain::systems::contract::MotivoBloqueio;
use vt_domain::tools::VtSettings;
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
    page(&state, &staff, &card, (StatusCode::OK, None)).await
}

/// The card's page: what the card system says of it now, what the product did for it, and the form
/// that blocks it; `notice` says what the last action did (a block, or why the form was refused).
async fn page(
    state: &AppState,
    staff: &Staff,
    card: &str,
    (status, notice): (StatusCode, Option<String>),
) -> Response {
    let card = card.to_owned();
    let store = &state.stores;
    let records = match store.keeping.subject_records(&Subject::Card(card.clone())).await {
        Ok(r) => r,
        Err(e) => return store_failed(staff, &e),
    };
    let tenant = (!staff.is_admin()).then(|| staff.caller.tenant.clone());
    let mut runs = Vec::new();
    for id in records.flow_runs.iter().take(SHOWN) {
        match store.flows.flow_run(id).await {
            Ok(Some(run)) if tenant.as_deref().is_none_or(|t| flow_tenant(&run.input) == t) => runs.push(run),
            Ok(_) => {}
            Err(e) => return store_failed(staff, &e),
        }
    }
    runs.sort_by_key(|r| std::cmp::Reverse(r.created_at));
    let mut conversations = Vec::new();
    for id in records.conversations.iter().take(SHOWN) {
        match store.conversations.conversation(id).await {
            Ok(Some(c)) if tenant.as_deref().is_none_or(|t| c.tenant_id == t) => conversations.push(c.id),
            Ok(_) => {}
            Err(e) => return store_failed(staff, &e),
        }
    }
    let hash = state.console.keys.card_hash(&card);
    let lookups = match store.reports.audit_records(1_000).await {
        Ok(all) => all
            .into_iter()
            .filter(|a| a.cartao_hash == hash && tenant.as_deref().is_none_or(|t| a.tenant_id == t))
            .map(|a| context! { quando => when(state, a.at), quem => a.support_user, canal => a.channel, resultado => a.outcome })
            .collect::<Vec<_>>(),
        Err(e) => return store_failed(staff, &e),
    };
    tracing::info!(by = %staff.caller.name, "card history read in the console");
    let runs: Vec<_> = runs.iter().map(|r| run_view(state, r)).collect();
    let desk = match state.service.engine().extensions().get::<SystemsPort>() {
        Some(port) => {
            let now = state.service.engine().now();
            Some(vt_domain::tools::ficha(port.get(), &desk_settings(state, staff), &card, now).await)
        }
        None => None,
    };
    render(
        status,
        "cartao.html",
        context! {
            cartao => vt_domain::vt::mask_card(&card),
            cartao_ref => state.console.keys.seal_card(&card),
            chave => uuid::Uuid::new_v4().simple().to_string(),
            aviso => notice,
            situacao => desk.as_ref().map(|d| d.situacao.clone()),
            bloqueavel => desk.as_ref().is_some_and(|d| d.bloqueavel),
            extrato => desk.map(|d| d.extrato).unwrap_or_default(),
            execucoes => runs,
            conversas => conversations,
            consultas => lookups,
            ..frame(Some(staff), "lookup", &format!("Histórico do cartão {}", vt_domain::vt::mask_card(&card)))
        },
    )
}

/// The tools' settings, in the agent's tenant (an admin's reads go out as the deployment's).
fn desk_settings(state: &AppState, staff: &Staff) -> VtSettings {
    let mut settings = state
        .service
        .engine()
        .extensions()
        .get::<VtSettings>()
        .cloned()
        .unwrap_or_default();
    if !staff.is_admin() {
        settings.tenant_id.clone_from(&staff.caller.tenant);
    }
    settings
}

/// The block form of the card page: the card sealed as the page sent it, why, the agent's words, and
/// the page's own key (one block per page, however often it is sent).
#[derive(serde::Deserialize)]
pub(super) struct BlockForm {
    csrf: String,
    cartao_ref: String,
    motivo: String,
    justificativa: String,
    chave: String,
}

/// The longest justification kept with a block.
const JUSTIFICATIVA_MAX: usize = 300;

/// A support agent blocks the card on its holder's behalf: the reason and the agent's words required,
/// the block sent under the page's key, the attempt audited (who, when, the masked card, why, how it
/// went) whatever the card system answered.
pub(super) async fn block(
    State(state): State<AppState>,
    staff: Staff,
    Form(form): Form<BlockForm>,
) -> Response {
    if !staff.csrf_ok(&form.csrf) {
        return super::pages::bad_form(&staff);
    }
    let Some(card) = state.console.keys.open_card(&form.cartao_ref) else {
        return super::pages::bad_form(&staff);
    };
    let refused = |why: &str| (StatusCode::UNPROCESSABLE_ENTITY, Some(why.to_owned()));
    let motivo = match form.motivo.as_str() {
        "perda" => MotivoBloqueio::Perda,
        "roubo" => MotivoBloqueio::Roubo,
        "dano" => MotivoBloqueio::Dano,
        _ => {
            return page(
                &state,
                &staff,
                &card,
                refused("Escolha o motivo do bloqueio (campo motivo)."),
            )
            .await;
        }
    };
    let justificativa = form.justificativa.trim();
    if justificativa.is_empty() || justificativa.chars().count() > JUSTIFICATIVA_MAX {
        let why = "Diga por que está bloqueando (campo justificativa, até 300 caracteres): fica no registro.";
        return page(&state, &staff, &card, refused(why)).await;
    }
    let Some(port) = state.service.engine().extensions().get::<SystemsPort>() else {
        return page(
            &state,
            &staff,
            &card,
            refused("Nenhum sistema de cartões está configurado."),
        )
        .await;
    };
    let key = format!("console-bloqueio:{}", form.chave);
    let settings = desk_settings(&state, &staff);
    let answer = vt_domain::tools::bloquear_por_atendente(port.get(), &settings, &card, motivo, &key).await;
    let masked = vt_domain::vt::mask_card(&card);
    let (outcome, notice, status) = match &answer {
        Ok(b) => (
            format!("cartao_bloqueado ({}): {justificativa}", motivo.as_str()),
            format!(
                "Cartão {masked} bloqueado em nome do titular (protocolo {}).",
                b.protocolo
            ),
            StatusCode::OK,
        ),
        Err(why) => (
            format!("bloqueio_recusado ({why}): {justificativa}"),
            format!("O cartão {masked} não foi bloqueado: {why}."),
            StatusCode::BAD_GATEWAY,
        ),
    };
    let record = vt_store::AuditRecord {
        at: state.service.engine().now(),
        support_user: staff.caller.name.clone(),
        tenant_id: settings.tenant_id.clone(),
        channel: "console".into(),
        cartao: masked,
        cartao_hash: state.console.keys.card_hash(&card),
        outcome,
        conversation_id: None,
    };
    if let Err(e) = state.service.cases().audited(&record).await {
        tracing::error!(error = %e, "a block on the holder's behalf could not be audited");
    }
    tracing::info!(by = %staff.caller.name, blocked = answer.is_ok(), "card block asked in the console");
    page(&state, &staff, &card, (status, Some(notice))).await
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
