//! Atendimentos: the support side of cases in the console. The list (waiting first, oldest first), a
//! case's page — its file, the conversation so far, a reply box, **Propor recarga**, **Devolver ao
//! bot**, **Encerrar** — and the messages' fragment the page polls for. Every action is a form with the
//! session's CSRF token and goes through the same service calls as the Mattermost side, which write
//! who did what in the case's log; a support agent sees and acts on their tenant's cases only.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use minijinja::context;
use serde::Deserialize;

use super::pages::{bad_form, frame, masked, not_found, see_other, store_failed, when};
use super::render;
use super::session::Staff;
use crate::http::state::AppState;
use crate::service::{CaseError, Proposal, QueueEntry, SlaStatus, SupportAgent};
use vt_store::{Case, CaseState, Claim};

/// Cases the list shows.
const LISTED: i64 = 100;

/// The signed-in user as a support agent: an administrator sees every tenant.
pub(super) fn agent(staff: &Staff) -> SupportAgent<'_> {
    SupportAgent {
        login: &staff.caller.name,
        name: &staff.caller.name,
        tenant: (!staff.is_admin()).then_some(staff.caller.tenant.as_str()),
    }
}

/// How long until a clock runs out (or since it did), as the page's script also writes it.
pub(super) fn time_left(due: chrono::DateTime<Utc>) -> String {
    let minutes = (due - Utc::now()).num_seconds() as f64 / 60.0;
    if minutes >= 0.0 {
        let m = minutes.ceil() as i64;
        if m >= 120 {
            format!("vence em {} h", m / 60)
        } else {
            format!("vence em {m} min")
        }
    } else {
        format!("venceu há {} min", (-minutes).ceil() as i64)
    }
}

/// How long ago, in words a person reads at a glance.
pub(super) fn age(since: chrono::DateTime<Utc>) -> String {
    let minutes = (Utc::now() - since).num_minutes().max(0);
    match minutes {
        0 => "agora".into(),
        m if m < 60 => format!("há {m} min"),
        m if m < 24 * 60 => format!("há {} h {} min", m / 60, m % 60),
        m => format!("há {} dias", m / (24 * 60)),
    }
}

fn state_label(state: CaseState) -> &'static str {
    match state {
        CaseState::Aguardando => "aguardando",
        CaseState::EmAtendimento => "em atendimento",
        CaseState::Devolvido => "devolvido ao bot",
        CaseState::Encerrado => "encerrado",
    }
}

/// A case as a row of a list (the queue, the cases): protocol, person, cards, what was said last, team,
/// reason, wait and clocks.
pub(super) fn row(state: &AppState, e: &QueueEntry) -> minijinja::Value {
    let c = &e.case;
    let waiting = e.waiting_since();
    let due = e
        .clocks
        .all()
        .filter(|k| k.running)
        .filter_map(|k| k.due_at)
        .min();
    context! {
        id => c.id.clone(),
        protocolo => c.protocol.clone().unwrap_or_else(|| c.id.clone()),
        pessoa => masked(&e.person),
        cartoes => e.cards.join(", "),
        ultima => masked(&super::pages::cut(&e.last_line, 90)),
        equipe => c.team.clone(),
        motivo => c.motivo.label(),
        canal => c.channel.clone(),
        idade => age(c.opened_at),
        aberto_em => when(state, c.opened_at),
        espera => waiting.map(age),
        situacao => state_label(c.state),
        aguardando => c.state == CaseState::Aguardando,
        dono => c.owner.clone(),
        oferecido => c.offered_to.clone(),
        sla => e.clocks.at_risk().map(SlaStatus::label),
        sla_chave => e.clocks.at_risk().map(SlaStatus::as_str),
        vence_em => due.map(|d| d.to_rfc3339()),
        falta => due.map(time_left),
    }
}

/// The list's search: words of an internal note (or a protocol number).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Search {
    q: String,
}

/// How far back the notes are searched.
const NOTES_SEARCHED_DAYS: i64 = 365;

/// The cases whose internal notes hold `q` (any case, without words), `tenant`'s only when given,
/// each with the note that matched.
async fn searched(
    state: &AppState,
    tenant: Option<&str>,
    q: &str,
) -> Result<Vec<(Case, Option<String>)>, vt_store::StoreError> {
    if q.is_empty() {
        let cases = state.stores.cases.cases(tenant, LISTED).await?;
        return Ok(cases.into_iter().map(|c| (c, None)).collect());
    }
    let now = Utc::now();
    let from = now - chrono::Duration::days(NOTES_SEARCHED_DAYS);
    let wanted = q.to_lowercase();
    let mut found: Vec<(Case, Option<String>)> = Vec::new();
    if let Some(case) = state.stores.cases.case_by_protocol(tenant, q).await? {
        found.push((case, None));
    }
    let notes = state
        .stores
        .desk
        .case_lines(tenant, "nota_interna", from, now + chrono::Duration::minutes(1))
        .await?;
    for note in notes.iter().rev() {
        let text = note.detail.as_deref().unwrap_or_default();
        if found.len() as i64 >= LISTED || found.iter().any(|(c, _)| c.id == note.case_id) {
            continue;
        }
        if text.to_lowercase().contains(&wanted)
            && let Some(case) = state.stores.cases.case(&note.case_id).await?
        {
            found.push((case, Some(text.to_owned())));
        }
    }
    Ok(found)
}

pub(super) async fn list(
    State(state): State<AppState>,
    staff: Staff,
    Query(search): Query<Search>,
) -> Response {
    let tenant = agent(&staff).tenant;
    let q = search.q.trim();
    let cases = match searched(&state, tenant, q).await {
        Ok(c) => c,
        Err(e) => return store_failed(&staff, &e),
    };
    let mut rows = Vec::with_capacity(cases.len());
    let mut notes = Vec::new();
    for (case, note) in cases {
        if let Some(note) = note {
            let protocol = case.protocol.clone().unwrap_or_else(|| case.id.clone());
            notes.push(context! { protocolo => protocol, nota => masked(&super::pages::cut(&note, 160)) });
        }
        match state.service.cases().entry(case).await {
            Ok(entry) => rows.push(row(&state, &entry)),
            Err(e) => return store_failed(&staff, &e),
        }
    }
    render(
        StatusCode::OK,
        "atendimentos.html",
        context! { casos => rows, busca => q, notas => notes, ..frame(Some(&staff), "cases", "Atendimentos") },
    )
}

/// The case `id` when the user may see it.
pub(super) async fn visible(state: &AppState, staff: &Staff, id: &str) -> Result<Case, Response> {
    match state.stores.cases.case(id).await {
        Ok(Some(case)) if agent(staff).tenant.is_none_or(|t| t == case.tenant_id) => Ok(case),
        Ok(_) => Err(not_found(staff, "O atendimento")),
        Err(e) => Err(store_failed(staff, &e)),
    }
}

/// The conversation's chat lines as the case page shows them (masked, its payment codes whole).
/// The cards the card holder gave in the case's conversation, as the proposal form offers them: each
/// masked, its value a sealed reference ([`super::keys::Keys::seal_card`]) — the agent picks one
/// without the card on the page, and can propose only to a card the person gave.
async fn cards_to_propose(
    state: &AppState,
    case: &Case,
) -> Result<Vec<minijinja::Value>, vt_store::StoreError> {
    let Some(conv) = state
        .stores
        .conversations
        .conversation(&case.conversation_id)
        .await?
    else {
        return Ok(Vec::new());
    };
    Ok(vt_domain::tools::cartao::cards_held(&conv.state, &conv.memory)
        .iter()
        .map(|card| {
            context! {
                rotulo => vt_domain::vt::card::mask_card(card),
                referencia => state.console.keys.seal_card(card),
            }
        })
        .collect())
}

async fn messages(state: &AppState, case: &Case) -> Result<Vec<minijinja::Value>, vt_store::StoreError> {
    let codes = super::pages::codes_of(state, &case.conversation_id).await?;
    super::chat::lines(state, &case.conversation_id, &codes).await
}

/// What the last action said (after its redirect).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Said {
    ok: Option<String>,
    erro: Option<String>,
}

/// A case's clocks as the case page lists them.
fn clock_rows(state: &AppState, clocks: &crate::service::Clocks) -> Vec<minijinja::Value> {
    clocks
        .all()
        .map(|c| {
            let standing = if c.stopped {
                if c.status == SlaStatus::Vencido {
                    "não cumprido"
                } else {
                    "cumprido"
                }
            } else if !c.running {
                "pausado: aguardando o cliente"
            } else {
                c.status.label()
            };
            context! {
                nome => c.kind.label(),
                situacao => standing,
                chave => c.status.as_str(),
                usado => format!("{:.0} de {} min úteis", c.elapsed, c.target),
                vence => c.due_at.map(|d| when(state, d)),
                vence_em => c.due_at.map(|d| d.to_rfc3339()),
                falta => c.due_at.map(time_left),
            }
        })
        .collect()
}

pub(super) async fn page(
    State(state): State<AppState>,
    staff: Staff,
    Path(id): Path<String>,
    Query(said): Query<Said>,
) -> Response {
    let case = match visible(&state, &staff, &id).await {
        Ok(c) => c,
        Err(page) => return page,
    };
    let (msgs, payments, clocks, cards) = match (
        messages(&state, &case).await,
        super::chat::payments(&state, &case.conversation_id).await,
        state.service.cases().clocks(&case.id).await,
        cards_to_propose(&state, &case).await,
    ) {
        (Ok(m), Ok(p), Ok(c), Ok(k)) => (m, p, c, k),
        (Err(e), ..) | (_, Err(e), ..) | (.., Err(e)) => return store_failed(&staff, &e),
        (_, _, Err(e), _) => return store_failed(&staff, &e),
    };
    let mine =
        case.state == CaseState::EmAtendimento && case.owner.as_deref() == Some(staff.caller.name.as_str());
    let title = format!("Atendimento {}", case.protocol.as_deref().unwrap_or(&case.id));
    let file: Vec<_> = state
        .service
        .cases()
        .case_fields(&case)
        .into_iter()
        .map(|(label, value)| context! { rotulo => label, valor => masked(&value) })
        .collect();
    let (activity, canned, around) = match (
        activity(&state, &case).await,
        state.service.cases().canned_for(&case).await,
        neighbours(&state, &staff, &case.id).await,
    ) {
        (Ok(a), Ok(c), Ok(n)) => (a, c, n),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return store_failed(&staff, &e),
    };
    let canned: Vec<_> = canned
        .into_iter()
        .map(|a| serde_json::json!({"atalho": a.shortcut, "texto": a.text}))
        .collect();
    let (teams, members) = match transfer_choices(&state).await {
        Ok(t) => t,
        Err(e) => return store_failed(&staff, &e),
    };
    let resolutions: Vec<_> = crate::service::RESOLUTIONS
        .iter()
        .map(|(k, label)| context! { chave => *k, rotulo => *label })
        .collect();
    // The case file as stored, cards masked and ids, keys and times whole: for administrators, behind
    // "Detalhes técnicos".
    let technical = staff.is_admin().then(|| {
        let shown = crate::flow::masked_json(&case.case_file, vt_domain::vt::card::mask_cards_in);
        vt_contract::json::to_pretty(&shown).unwrap_or_default()
    });
    render(
        StatusCode::OK,
        "atendimento.html",
        context! {
            id => case.id.clone(),
            conversa => case.conversation_id.clone(),
            ok => said.ok.as_deref().map(masked),
            erro => said.erro.as_deref().map(masked),
            ficha => file,
            prazos => clock_rows(&state, &clocks),
            situacao => crate::service::state_line(&case),
            aguardando => case.state == CaseState::Aguardando,
            aberto => case.state.is_open(),
            meu => mine,
            mensagens => msgs,
            motivos_sinal => super::review::reasons(),
            pagamentos => payments,
            equipes => teams,
            membros => members,
            equipe => case.team.clone(),
            cartoes => cards,
            tecnico => technical,
            atividade => activity,
            // Read by the page's script as JSON, never run: nothing in it may close the element.
            prontas => serde_json::Value::Array(canned).to_string().replace('<', "\\u003c"),
            resolucoes => resolutions,
            anterior => around.0,
            proximo => around.1,
            protocolo => case.protocol.clone().unwrap_or_else(|| case.id.clone()),
            ..frame(Some(&staff), "cases", &title)
        },
    )
}

/// A line of the case's activity as an agent reads it (`None`: the line is a message, shown in the
/// conversation).
fn activity_line(line: &vt_store::CaseEvent) -> Option<(String, Option<String>)> {
    let detail = line.detail.clone().unwrap_or_default();
    let what = match line.what.as_str() {
        "mensagem_cliente" | "mensagem_atendente" => return None,
        "aberto" => format!("aberto na equipe {detail}"),
        "oferecido" => format!("oferecido a {detail}"),
        "oferta_expirada" => format!("oferta a {detail} expirou"),
        "assumido" => "assumiu".into(),
        "transferido" => format!("transferiu para {detail}"),
        "nota_interna" => return Some(("nota interna".into(), Some(detail))),
        "resposta_pronta" => format!("enviou a resposta pronta /{detail}"),
        "proposta_recarga" => "propôs uma recarga".into(),
        "devolvido" => "devolveu ao bot".into(),
        "encerrado" => return Some(("encerrou".into(), line.detail.clone())),
        "aviso_sem_atendente" => "avisou o cliente de que ninguém assumiu ainda".into(),
        "aviso_transferencia" => "avisou o cliente da transferência".into(),
        other => other.replace('_', " "),
    };
    Some((what, None))
}

/// The case's log but its messages: who offered, claimed, transferred, noted, closed, and when.
async fn activity(state: &AppState, case: &Case) -> Result<Vec<minijinja::Value>, vt_store::StoreError> {
    let log = state.stores.cases.case_events(&case.id).await?;
    let resolution = case.resolution.as_deref().and_then(|key| {
        crate::service::RESOLUTIONS
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, l)| *l)
    });
    Ok(log
        .iter()
        .filter_map(|line| {
            let (what, note) = activity_line(line)?;
            let what = match (line.what.as_str(), resolution) {
                ("encerrado", Some(r)) => format!("encerrou: {r}"),
                _ => what,
            };
            Some(context! {
                quem => line.who.clone(),
                o_que => what,
                nota => note.filter(|n| !n.is_empty()).map(|n| masked(&n)),
                quando => when(state, line.at),
                interna => line.what == "nota_interna",
            })
        })
        .collect())
}

/// The teams a case may go to, and every team's members with whether they are away now.
async fn transfer_choices(
    state: &AppState,
) -> Result<(Vec<String>, Vec<minijinja::Value>), vt_store::StoreError> {
    let away = state.stores.cases.away_agents().await?;
    let desk = state.service.desk();
    let teams = desk.team_names();
    let members = desk
        .teams()
        .iter()
        .map(|t| {
            let people: Vec<_> = t
                .config
                .membros
                .iter()
                .map(|m| context! { login => m.clone(), ausente => away.contains(m) })
                .collect();
            context! { equipe => t.name().to_owned(), pessoas => people }
        })
        .collect();
    Ok((teams, members))
}

/// The cases before and after `id` in the agent's queue (open cases, in the queue's order).
async fn neighbours(
    state: &AppState,
    staff: &Staff,
    id: &str,
) -> Result<(Option<String>, Option<String>), vt_store::StoreError> {
    let queue = state.service.cases().queue(agent(staff).tenant).await?;
    let at = queue.iter().position(|e| e.case.id == id);
    let link = |i: usize| {
        queue
            .get(i)
            .map(|e| format!("/console/cases/{}", super::pages::path_segment(&e.case.id)))
    };
    Ok(match at {
        Some(i) => (i.checked_sub(1).and_then(link), link(i + 1)),
        None => (None, link(0)),
    })
}

/// The messages alone, for the case page to refresh without a reload.
pub(super) async fn messages_fragment(
    State(state): State<AppState>,
    staff: Staff,
    Path(id): Path<String>,
) -> Response {
    let case = match visible(&state, &staff, &id).await {
        Ok(c) => c,
        Err(page) => return page,
    };
    match messages(&state, &case).await {
        Ok(msgs) => render(
            StatusCode::OK,
            "atendimento_mensagens.html",
            context! { mensagens => msgs, csrf => staff.csrf.clone(), motivos_sinal => super::review::reasons() },
        ),
        Err(e) => store_failed(&staff, &e),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ActionForm {
    csrf: String,
    texto: String,
    nota: String,
    valor: String,
    cartao: String,
    meio: String,
    equipe: String,
    agente: String,
    /// The canned answer the reply came from (its shortcut), when one was inserted.
    pronta: String,
    resolucao: String,
}

/// What a case action on the case page does; the answer is shown on the case's page.
#[derive(Debug, Clone, Copy)]
enum Action {
    Claim,
    Reply,
    Propose,
    HandBack,
    Close,
    Transfer,
    Note,
}

async fn act(
    state: &AppState,
    staff: &Staff,
    id: &str,
    action: Action,
    form: &ActionForm,
) -> Result<String, String> {
    let service = &state.service;
    let who = agent(staff);
    let outcome = match action {
        Action::Claim => match service.cases().claim_case(id, who).await {
            Ok(Claim::Claimed(_)) => Ok("Atendimento assumido.".to_owned()),
            Ok(Claim::TakenBy(owner)) => Err(format!("O atendimento já está com {owner}.")),
            Ok(Claim::Closed(_)) => Err("O atendimento já foi encerrado.".to_owned()),
            Ok(Claim::NotFound) => Err("O atendimento não existe.".to_owned()),
            Err(e) => Err(said(e)),
        },
        Action::Reply if form.texto.trim().is_empty() => Err("Escreva a mensagem.".to_owned()),
        Action::Reply => reply_with(state, id, who, form).await,
        Action::Note => service
            .cases()
            .note(id, who, &form.nota)
            .await
            .map(|()| "Nota interna guardada (o cliente não a vê).".to_owned())
            .map_err(said),
        Action::Propose => {
            // The card comes as the sealed reference the page offered, never typed.
            let Some(card) = state.console.keys.open_card(form.cartao.trim()) else {
                return Err("Proposta não enviada: escolha um dos cartões do cliente (recarregue a página se ela ficou aberta por muito tempo).".to_owned());
            };
            let typed = format!("{} {card} {}", form.valor.trim(), form.meio.trim());
            match Proposal::parse(&typed) {
                Err(why) => Err(format!("Proposta não enviada: {why}.")),
                Ok(p) => service
                    .cases()
                    .propose_recharge(id, who, &p)
                    .await
                    .map(|what| format!("Proposta enviada: {what}. Só o cliente confirma."))
                    .map_err(said),
            }
        }
        Action::HandBack => service
            .cases()
            .hand_back(id, who, Some(form.nota.as_str()))
            .await
            .map(|_| "Atendimento devolvido ao bot.".to_owned())
            .map_err(said),
        Action::Close if form.resolucao.trim().is_empty() => {
            Err("Escolha a resolução antes de encerrar.".to_owned())
        }
        Action::Close => service
            .cases()
            .close_resolved(id, who, Some(form.resolucao.trim()), Some(&form.nota))
            .await
            .map(|_| "Atendimento encerrado.".to_owned())
            .map_err(said),
        Action::Transfer if form.nota.trim().is_empty() => {
            Err("Escreva uma nota para quem recebe o atendimento.".to_owned())
        }
        Action::Transfer => {
            let to = Some(form.agente.trim()).filter(|a| !a.is_empty());
            service
                .cases()
                .transfer_case(id, who, form.equipe.trim(), to, Some(&form.nota))
                .await
                .map(|c| match to {
                    Some(a) => format!("Atendimento passado para {a}, da equipe {}.", c.team),
                    None => format!("Atendimento passado para a fila da equipe {}.", c.team),
                })
                .map_err(said)
        }
    };
    tracing::info!(case = %id, by = %staff.caller.name, ?action, ok = outcome.is_ok(), "case action from the console");
    outcome
}

/// A reply: a canned answer inserted (`pronta`), or typed whole as `/atalho` with the page's script
/// off, is counted as one; anything else goes as typed.
async fn reply_with(
    state: &AppState,
    id: &str,
    who: SupportAgent<'_>,
    form: &ActionForm,
) -> Result<String, String> {
    let cases = state.service.cases();
    let typed = form.texto.trim();
    let sent = if let Some(shortcut) = typed
        .strip_prefix('/')
        .filter(|s| !s.contains(char::is_whitespace))
    {
        let case = cases.owned_case_of(id, who).await.map_err(said)?;
        let answers = cases.canned_for(&case).await.map_err(|e| said(e.into()))?;
        match answers.into_iter().find(|a| a.shortcut == shortcut) {
            Some(a) => cases.reply_canned(id, who, &a.text, shortcut).await,
            None => return Err(format!("Não há resposta pronta /{shortcut}.")),
        }
    } else if !form.pronta.trim().is_empty() {
        cases.reply_canned(id, who, typed, form.pronta.trim()).await
    } else {
        cases.agent_reply(id, who, typed).await
    };
    sent.map(|()| "Mensagem enviada.".to_owned()).map_err(said)
}

fn said(e: CaseError) -> String {
    match e {
        CaseError::Store(e) => {
            tracing::error!(error = %e, "case action failed");
            "Não foi possível agora. Tente de novo em instantes.".into()
        }
        refused => {
            let text = refused.to_string();
            let mut chars = text.chars();
            chars
                .next()
                .map(|c| format!("{}{}.", c.to_uppercase(), chars.as_str()))
                .unwrap_or_default()
        }
    }
}

async fn run(state: AppState, staff: Staff, id: String, action: Action, form: ActionForm) -> Response {
    if !staff.csrf_ok(&form.csrf) {
        return bad_form(&staff);
    }
    if let Err(page) = visible(&state, &staff, &id).await {
        return page;
    }
    let (key, text) = match act(&state, &staff, &id, action, &form).await {
        Ok(t) => ("ok", t),
        Err(t) => ("erro", t),
    };
    let query = serde_urlencoded::to_string([(key, text)]).unwrap_or_default();
    let path = super::pages::path_segment(&id);
    // After a reply, the page opens at the conversation, scrolled to its newest line, the reply box
    // right below.
    let anchor = if matches!(action, Action::Reply | Action::Note) {
        "#mensagens"
    } else {
        ""
    };
    see_other(&format!("/console/cases/{path}?{query}{anchor}")).into_response()
}

pub(super) async fn claim(
    State(state): State<AppState>,
    staff: Staff,
    Path(id): Path<String>,
    Form(form): Form<ActionForm>,
) -> Response {
    run(state, staff, id, Action::Claim, form).await
}

pub(super) async fn reply(
    State(state): State<AppState>,
    staff: Staff,
    Path(id): Path<String>,
    Form(form): Form<ActionForm>,
) -> Response {
    run(state, staff, id, Action::Reply, form).await
}

pub(super) async fn propose(
    State(state): State<AppState>,
    staff: Staff,
    Path(id): Path<String>,
    Form(form): Form<ActionForm>,
) -> Response {
    run(state, staff, id, Action::Propose, form).await
}

pub(super) async fn hand_back(
    State(state): State<AppState>,
    staff: Staff,
    Path(id): Path<String>,
    Form(form): Form<ActionForm>,
) -> Response {
    run(state, staff, id, Action::HandBack, form).await
}

pub(super) async fn close(
    State(state): State<AppState>,
    staff: Staff,
    Path(id): Path<String>,
    Form(form): Form<ActionForm>,
) -> Response {
    run(state, staff, id, Action::Close, form).await
}

pub(super) async fn transfer(
    State(state): State<AppState>,
    staff: Staff,
    Path(id): Path<String>,
    Form(form): Form<ActionForm>,
) -> Response {
    run(state, staff, id, Action::Transfer, form).await
}

pub(super) async fn note(
    State(state): State<AppState>,
    staff: Staff,
    Path(id): Path<String>,
    Form(form): Form<ActionForm>,
) -> Response {
    run(state, staff, id, Action::Note, form).await
}
