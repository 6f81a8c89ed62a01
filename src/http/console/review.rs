//! Improving the answers: a bot message flagged from a conversation or a case (any support agent),
//! the review queue (administrators) — each item's conversation up to the flagged answer with its
//! personal data replaced, the categories and the expectation that make it a failing test in the
//! review folder, which items are green in that folder's last run, the categories per week — and
//! the FAQ's suggestions from the agents' own answers, approved into entries or dismissed.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::{Value, context};
use serde::Deserialize;

use super::pages::{
    admin_form, admins_only, back_saying, bad_form, frame, masked, not_found, path_segment, see_other,
    store_failed, tenant_filter, when,
};
use super::render;
use super::session::Staff;
use crate::http::state::AppState;
use crate::service::review::{Flag, REASONS, ReviewError, SOURCES, weekly};
use crate::service::suggestions::Approval;
use vt_store::{Expectation, ReviewState};

/// The reasons a support agent picks from, for the flag forms.
pub(super) fn reasons() -> Vec<Value> {
    REASONS
        .iter()
        .map(|(k, l)| context! { chave => *k, rotulo => *l })
        .collect()
}

fn label_of(list: &[(&'static str, &'static str)], key: &str) -> String {
    list.iter()
        .find(|(k, _)| *k == key)
        .map_or_else(|| key.to_owned(), |(_, l)| (*l).to_owned())
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct FlagForm {
    csrf: String,
    mensagem: i64,
    motivo: String,
    observacao: String,
}

/// Where a form sent from `referer` goes back to: the conversation or case page it came from.
fn back_to(referer: Option<&str>, conversation: &str, message: i64) -> String {
    let from = referer
        .and_then(|r| r.find("/console/").map(|i| &r[i..]))
        .map(|p| p.split(['?', '#']).next().unwrap_or(p))
        .filter(|p| p.starts_with("/console/cases/") || p.starts_with("/console/conversations/"));
    let page = from.map_or_else(
        || format!("/console/conversations/{}", path_segment(conversation)),
        str::to_owned,
    );
    format!("{page}#msg-{message}")
}

/// A support agent flags a bot answer.
pub(super) async fn flag(
    State(state): State<AppState>,
    staff: Staff,
    Path(conversation): Path<String>,
    headers: axum::http::HeaderMap,
    Form(form): Form<FlagForm>,
) -> Response {
    if !staff.csrf_ok(&form.csrf) {
        return bad_form(&staff);
    }
    let tenant = tenant_filter(&staff);
    let flag = Flag {
        conversation: &conversation,
        message_id: form.mensagem,
        reason: &form.motivo,
        note: &form.observacao,
    };
    let flagged = state
        .service
        .review()
        .flag(tenant.as_deref(), &staff.caller.name, flag)
        .await;
    let referer = headers
        .get(axum::http::header::REFERER)
        .and_then(|v| v.to_str().ok());
    match flagged {
        Ok(_) => see_other(&back_to(referer, &conversation, form.mensagem)),
        Err(e) => refused(&staff, &e),
    }
}

fn refused(staff: &Staff, e: &ReviewError) -> Response {
    match e {
        ReviewError::Store(e) => store_failed(staff, e),
        ReviewError::NotFound => not_found(staff, "Item ou conversa não encontrado."),
        other => super::pages::notice(
            StatusCode::UNPROCESSABLE_ENTITY,
            Some(staff),
            "Não foi feito",
            &format!("{other}."),
        ),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Said {
    ok: Option<String>,
    erro: Option<String>,
}

/// The queue: open items first, then the reviewed ones with their test's last verdict.
pub(super) async fn queue(State(state): State<AppState>, staff: Staff, Query(said): Query<Said>) -> Response {
    if !staff.is_admin() {
        return admins_only(&staff);
    }
    let review = state.service.review();
    if let Err(e) = review.sweep().await {
        return store_failed(&staff, &e);
    }
    let items = match review.items(tenant_filter(&staff).as_deref()).await {
        Ok(i) => i,
        Err(e) => return store_failed(&staff, &e),
    };
    let (verdicts, ran) = review.results();
    let row = |i: &vt_store::ReviewItem| {
        let verdict = i.test_file.as_ref().map(|f| match verdicts.get(f) {
            Some(true) => "verde",
            Some(false) => "vermelho",
            None => "ainda não rodou",
        });
        context! {
            id => i.id,
            origem => label_of(&SOURCES, &i.item.source),
            motivo => i.item.reason.as_deref().map(|r| label_of(&REASONS, r)),
            por => i.item.flagged_by.clone(),
            quando => when(&state, i.item.created_at),
            situacao => i.state.as_str(),
            categorias => i.labels.join(", "),
            teste => i.test_file.clone(),
            veredito => verdict,
        }
    };
    let open: Vec<Value> = items
        .iter()
        .filter(|i| i.state == ReviewState::Aberto)
        .map(row)
        .collect();
    let done: Vec<Value> = items
        .iter()
        .filter(|i| i.state != ReviewState::Aberto)
        .map(row)
        .collect();
    let weeks: Vec<Value> = weekly(&items)
        .into_iter()
        .map(|(monday, counts)| {
            let counts: Vec<Value> = counts
                .into_iter()
                .map(|(c, n)| context! { categoria => c, n => n })
                .collect();
            context! { semana => monday.format("%d/%m/%Y").to_string(), contagens => counts }
        })
        .collect();
    render(
        StatusCode::OK,
        "revisao.html",
        context! {
            ok => said.ok,
            erro => said.erro,
            abertos => open,
            revisados => done,
            semanas => weeks,
            pasta => review.settings().dir.display().to_string(),
            rodou => ran.map(|t| when(&state, t)),
            ..frame(Some(&staff), "revisao", "Revisão das respostas")
        },
    )
}

/// One item: the conversation up to the flagged answer, and the label form.
pub(super) async fn item(
    State(state): State<AppState>,
    staff: Staff,
    Path(id): Path<i64>,
    Query(said): Query<Said>,
) -> Response {
    if !staff.is_admin() {
        return admins_only(&staff);
    }
    let review = state.service.review();
    let (item, lines) = match review.item(tenant_filter(&staff).as_deref(), id).await {
        Ok(found) => found,
        Err(e) => return refused(&staff, &e),
    };
    let lines: Vec<Value> = lines
        .iter()
        .map(|l| context! { de => l.who, texto => masked(&l.text), sinalizada => l.flagged })
        .collect();
    let expected = item.expectation.clone().unwrap_or_default();
    render(
        StatusCode::OK,
        "revisao_item.html",
        context! {
            ok => said.ok,
            erro => said.erro,
            id => item.id,
            origem => label_of(&SOURCES, &item.item.source),
            motivo => item.item.reason.as_deref().map(|r| label_of(&REASONS, r)),
            observacao => item.item.note.as_deref().map(masked),
            por => item.item.flagged_by.clone(),
            aberto => item.state == ReviewState::Aberto,
            situacao => item.state.as_str(),
            linhas => lines,
            categorias => review.settings().categories.clone(),
            marcadas => item.labels.clone(),
            contem => expected.contains.join("\n"),
            nao_contem => expected.not_contains.join("\n"),
            acao => expected.action,
            nunca => expected.never,
            teste => item.test_file.clone(),
            ..frame(Some(&staff), "revisao", &format!("Revisão {id}"))
        },
    )
}

fn lines_of(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Labels an item and writes its test. The form's checkboxes arrive as one `categorias` per box, so
/// the body is read as its pairs.
pub(super) async fn label(
    State(state): State<AppState>,
    staff: Staff,
    Path(id): Path<i64>,
    body: String,
) -> Response {
    let fields: Vec<(String, String)> = serde_urlencoded::from_str(&body).unwrap_or_default();
    let all = |name: &'static str| {
        fields
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let one = |name| all(name).next().unwrap_or_default();
    if let Some(refused) = admin_form(&staff, one("csrf")) {
        return refused;
    }
    let labels: Vec<String> = all("categorias").map(str::to_owned).collect();
    let expectation = Expectation {
        contains: lines_of(one("contem")),
        not_contains: lines_of(one("nao_contem")),
        action: Some(one("acao").to_owned()),
        never: Some(one("nunca").to_owned()),
    };
    let page = format!("/console/revisao/{id}");
    let labelled = state
        .service
        .review()
        .label(
            tenant_filter(&staff).as_deref(),
            id,
            &staff.caller.name,
            labels,
            expectation,
        )
        .await;
    match labelled {
        Ok(file) => back_saying(
            &page,
            "ok",
            &format!("Teste {file} gravado; ele falha até a resposta ser corrigida."),
        ),
        Err(ReviewError::Store(e)) => store_failed(&staff, &e),
        Err(ReviewError::NotFound) => not_found(&staff, "Item não encontrado."),
        Err(e) => back_saying(&page, "erro", &format!("Não rotulado: {e}.")),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct PlainForm {
    csrf: String,
}

pub(super) async fn dismiss(
    State(state): State<AppState>,
    staff: Staff,
    Path(id): Path<i64>,
    Form(form): Form<PlainForm>,
) -> Response {
    if let Some(refused) = admin_form(&staff, &form.csrf) {
        return refused;
    }
    match state
        .service
        .review()
        .dismiss(tenant_filter(&staff).as_deref(), id, &staff.caller.name)
        .await
    {
        Ok(()) => back_saying("/console/revisao", "ok", &format!("Item {id} descartado.")),
        Err(e) => refused(&staff, &e),
    }
}

/// The FAQ's suggestions, and the questions no rule nor the FAQ answered.
pub(super) async fn suggestions(
    State(state): State<AppState>,
    staff: Staff,
    Query(said): Query<Said>,
) -> Response {
    if !staff.is_admin() {
        return admins_only(&staff);
    }
    let found = match state.service.review().suggestions(&staff.caller.tenant).await {
        Ok(s) => s,
        Err(e) => return store_failed(&staff, &e),
    };
    let unanswered = match super::usage::unanswered(&state, &staff).await {
        Ok(lines) => lines,
        Err(e) => return store_failed(&staff, &e),
    };
    let rows: Vec<Value> = found
        .iter()
        .map(|s| {
            context! {
                chave => s.key.clone(),
                casos => s.source_count,
                perguntas => s.questions.iter().map(|q| masked(q)).collect::<Vec<_>>(),
                respostas => s.answers.iter().map(|a| masked(a)).collect::<Vec<_>>(),
                titulo => s.questions.first().map(|q| masked(q)).unwrap_or_default(),
                palavras => s.keywords.join(", "),
                resposta => s.answers.first().map(|a| masked(a)).unwrap_or_default(),
                coberta => s.covered_by.clone(),
            }
        })
        .collect();
    render(
        StatusCode::OK,
        "sugestoes.html",
        context! {
            ok => said.ok,
            erro => said.erro,
            sugestoes => rows,
            sem_resposta => unanswered,
            dias => state.service.review().settings().suggestion_days,
            ..frame(Some(&staff), "sugestoes", "Sugestões para a FAQ")
        },
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ApproveForm {
    csrf: String,
    titulo: String,
    palavras: String,
    resposta: String,
}

pub(super) async fn approve(
    State(state): State<AppState>,
    staff: Staff,
    Path(key): Path<String>,
    Form(form): Form<ApproveForm>,
) -> Response {
    if let Some(refused) = admin_form(&staff, &form.csrf) {
        return refused;
    }
    let approval = Approval {
        title: form.titulo,
        keywords: form.palavras,
        answer: form.resposta,
    };
    match state
        .service
        .review()
        .approve(&staff.caller.tenant, &key, &staff.caller.name, approval)
        .await
    {
        Ok(entry) => back_saying(
            "/console/sugestoes",
            "ok",
            &format!(
                "Entrada {entry}.md gravada na FAQ, com o teste faq-{entry}.yaml; vale a partir do próximo início do serviço."
            ),
        ),
        Err(ReviewError::Store(e)) => store_failed(&staff, &e),
        Err(e) => back_saying("/console/sugestoes", "erro", &format!("Não aprovada: {e}.")),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct AttachForm {
    csrf: String,
    palavras: String,
}

pub(super) async fn attach(
    State(state): State<AppState>,
    staff: Staff,
    Path(key): Path<String>,
    Form(form): Form<AttachForm>,
) -> Response {
    if let Some(refused) = admin_form(&staff, &form.csrf) {
        return refused;
    }
    match state
        .service
        .review()
        .attach(&staff.caller.tenant, &key, &staff.caller.name, &form.palavras)
        .await
    {
        Ok(entry) => back_saying(
            "/console/sugestoes",
            "ok",
            &format!(
                "Palavras-chave acrescentadas à entrada {entry}.md, com o teste faq-{entry}-{key}.yaml; vale a partir do próximo início do serviço."
            ),
        ),
        Err(ReviewError::Store(e)) => store_failed(&staff, &e),
        Err(e) => back_saying("/console/sugestoes", "erro", &format!("Não acrescentada: {e}.")),
    }
}

pub(super) async fn dismiss_suggestion(
    State(state): State<AppState>,
    staff: Staff,
    Path(key): Path<String>,
    Form(form): Form<PlainForm>,
) -> Response {
    if let Some(refused) = admin_form(&staff, &form.csrf) {
        return refused;
    }
    match state
        .service
        .review()
        .dismiss_suggestion(&staff.caller.tenant, &key, &staff.caller.name)
        .await
    {
        Ok(()) => back_saying("/console/sugestoes", "ok", "Sugestão descartada."),
        Err(ReviewError::Store(e)) => store_failed(&staff, &e),
        Err(e) => back_saying("/console/sugestoes", "erro", &format!("Não descartada: {e}.")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_flag_goes_back_to_the_page_it_came_from_only() {
        let back = |r| super::back_to(r, "c 1", 9);
        assert_eq!(
            back(Some("http://x/console/cases/k-1?a=b")),
            "/console/cases/k-1#msg-9"
        );
        assert_eq!(
            back(Some("http://evil/elsewhere")),
            "/console/conversations/c+1#msg-9"
        );
        assert_eq!(back(None), "/console/conversations/c+1#msg-9");
    }
}
