//! The web console at `/console` on `vt-agent serve`, for support agents (role `support`) and
//! operators (role `admin`): card lookup, conversations with their events, flow runs and batches, the
//! outbox and a usage dashboard. Server-rendered HTML (minijinja, as the prompts) in pt-BR that works
//! with JavaScript off; only the dashboard's charts need it, drawn by Chart.js, vendored into the
//! binary with the stylesheet (no CDN, no build step).
//!
//! What it reads comes from the store and what it does goes through the same paths as every other way
//! in: a lookup is a chat turn of the `vt` agent (and is audited), a retry is the outbox's requeue.
//! Card numbers are masked in everything it renders. It never sees an API key after the sign-in form:
//! the session cookie names the key ([`session`]).

mod cards;

/// The channel name of the console's own conversations (a support agent's card lookups).
pub(crate) const CHANNEL: &str = "console";
mod answers;
mod cases;
mod chat;
mod feed;
mod live;
mod conversations;
mod flows;
mod outbox;
mod usage;
mod queue;
mod recurrences;
mod replay;
mod review;
mod report;
mod dashboard;
pub(crate) mod keys;
mod pages;
mod stages;
pub(crate) mod session;

pub(crate) use keys::ConsoleConfig;

use axum::Router;
use axum::extract::Request;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};

use super::state::AppState;

/// The console's routes (state: the API's).
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/console", get(pages::sign_in_page))
        .route("/console/entrar", post(pages::sign_in))
        .route("/console/sair", post(pages::sign_out))
        .route("/console/lookup", get(pages::lookup_page).post(pages::lookup))
        .route("/console/conversations", get(conversations::conversations))
        .route("/console/conversations/{id}", get(conversations::conversation))
        .route(
            "/console/conversations/{id}/transcript.yaml",
            get(conversations::transcript),
        )
        .route("/console/conversations/{id}/sinalizar", post(review::flag))
        .route("/console/revisao", get(review::queue))
        .route("/console/revisao/{id}", get(review::item))
        .route("/console/revisao/{id}/rotular", post(review::label))
        .route("/console/revisao/{id}/descartar", post(review::dismiss))
        .route("/console/sugestoes", get(review::suggestions))
        .route("/console/sugestoes/{chave}/aprovar", post(review::approve))
        .route("/console/sugestoes/{chave}/anexar", post(review::attach))
        .route(
            "/console/sugestoes/{chave}/descartar",
            post(review::dismiss_suggestion),
        )
        .route("/console/cards", post(cards::history))
        .route("/console/cards/bloqueio", post(cards::block))
        .route("/console/fila", get(queue::page))
        .route("/console/eventos", get(live::events))
        .route("/console/contagem", get(live::counts))
        .route("/console/respostas", get(answers::page).post(answers::save))
        .route("/console/respostas/{atalho}/apagar", post(answers::delete))
        .route("/console/presenca", post(queue::presence))
        .route("/console/relatorio", get(report::page))
        .route("/console/recorrencias", get(recurrences::page))
        .route("/console/replay", get(replay::page))
        .route("/console/replay/casos/{file}", get(replay::case_file))
        .route("/console/cases", get(cases::list))
        .route("/console/cases/{id}", get(cases::page))
        .route("/console/cases/{id}/mensagens", get(cases::messages_fragment))
        .route("/console/cases/{id}/assumir", post(cases::claim))
        .route("/console/cases/{id}/responder", post(cases::reply))
        .route("/console/cases/{id}/propor", post(cases::propose))
        .route("/console/cases/{id}/devolver", post(cases::hand_back))
        .route("/console/cases/{id}/encerrar", post(cases::close))
        .route("/console/cases/{id}/transferir", post(cases::transfer))
        .route("/console/cases/{id}/nota", post(cases::note))
        .route("/console/flows", get(flows::flows))
        .route("/console/flows/{id}", get(flows::flow))
        .route("/console/batches/{id}", get(flows::batch))
        .route("/console/outbox", get(outbox::outbox))
        .route("/console/outbox/{id}/retry", post(outbox::retry))
        .route("/console/usage", get(usage::usage))
        .route("/console/assets/{name}", get(asset))
        .layer(middleware::from_fn(security_headers))
}

/// No framing, no script or style from anywhere but here, no caching of pages that show customer data.
async fn security_headers(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let h = response.headers_mut();
    h.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    if !h.contains_key(CACHE_CONTROL) {
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// The files the pages use, built into the binary.
async fn asset(axum::extract::Path(name): axum::extract::Path<String>) -> Response {
    let (body, kind): (&'static str, &'static str) = match name.as_str() {
        "console.css" => (include_str!("assets/console.css"), "text/css; charset=utf-8"),
        "chart.umd.min.js" => (
            include_str!("assets/chart.umd.min.js"),
            "text/javascript; charset=utf-8",
        ),
        "atendimento.js" => (
            include_str!("assets/atendimento.js"),
            "text/javascript; charset=utf-8",
        ),
        "mesa.js" => (include_str!("assets/mesa.js"), "text/javascript; charset=utf-8"),
        "graficos.js" => (
            include_str!("assets/graficos.js"),
            "text/javascript; charset=utf-8",
        ),
        "relatorio.js" => (
            include_str!("assets/relatorio.js"),
            "text/javascript; charset=utf-8",
        ),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    (
        [(CONTENT_TYPE, kind), (CACHE_CONTROL, "public, max-age=3600")],
        body,
    )
        .into_response()
}

/// The pages' templates, built into the binary.
const TEMPLATES: [(&str, &str); 26] = [
    ("revisao.html", include_str!("templates/revisao.html")),
    ("revisao_item.html", include_str!("templates/revisao_item.html")),
    ("sugestoes.html", include_str!("templates/sugestoes.html")),
    ("base.html", include_str!("templates/base.html")),
    ("cartao.html", include_str!("templates/cartao.html")),
    ("atendimentos.html", include_str!("templates/atendimentos.html")),
    ("atendimento.html", include_str!("templates/atendimento.html")),
    (
        "atendimento_mensagens.html",
        include_str!("templates/atendimento_mensagens.html"),
    ),
    ("entrar.html", include_str!("templates/entrar.html")),
    ("aviso.html", include_str!("templates/aviso.html")),
    ("consulta.html", include_str!("templates/consulta.html")),
    ("conversas.html", include_str!("templates/conversas.html")),
    ("conversa.html", include_str!("templates/conversa.html")),
    ("pagamentos.html", include_str!("templates/pagamentos.html")),
    ("fila.html", include_str!("templates/fila.html")),
    ("linha_caso.html", include_str!("templates/linha_caso.html")),
    (
        "cabecalho_casos.html",
        include_str!("templates/cabecalho_casos.html"),
    ),
    ("relatorio.html", include_str!("templates/relatorio.html")),
    ("recorrencias.html", include_str!("templates/recorrencias.html")),
    ("replay.html", include_str!("templates/replay.html")),
    ("fluxos.html", include_str!("templates/fluxos.html")),
    ("fluxo.html", include_str!("templates/fluxo.html")),
    ("lote.html", include_str!("templates/lote.html")),
    ("outbox.html", include_str!("templates/outbox.html")),
    ("uso.html", include_str!("templates/uso.html")),
    ("respostas.html", include_str!("templates/respostas.html")),
];

/// The templates, parsed once.
fn templates() -> &'static minijinja::Environment<'static> {
    static ENV: std::sync::OnceLock<minijinja::Environment<'static>> = std::sync::OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        for (name, source) in TEMPLATES {
            // The templates are part of the binary: one that does not parse fails every test.
            if let Err(e) = env.add_template(name, source) {
                tracing::error!(template = name, error = %e, "console template does not parse");
            }
        }
        env
    })
}

/// `template` rendered with `context` (which names the signed-in user, the form token and the page).
fn render(status: StatusCode, template: &str, context: minijinja::Value) -> Response {
    match templates().get_template(template).and_then(|t| t.render(context)) {
        Ok(html) => (status, Html(html)).into_response(),
        Err(e) => {
            tracing::error!(template, error = %e, "console page could not be rendered");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                Html("<!doctype html><title>Erro</title><p>Erro interno ao montar a página.</p>"),
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_parses() {
        let env = templates();
        for (name, _) in TEMPLATES {
            assert!(env.get_template(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn a_short_or_missing_secret_is_refused_when_loaded() {
        let short = ConsoleConfig {
            secret: Some("curto".into()),
            ..ConsoleConfig::default()
        };
        assert_eq!(short.validate().map_err(|e| e.0), Err("console.secret"));
        let zero = ConsoleConfig {
            session_minutes: 0,
            ..ConsoleConfig::default()
        };
        assert_eq!(zero.validate().map_err(|e| e.0), Err("console.session_minutes"));
        assert!(ConsoleConfig::default().validate().is_ok());
        assert!(
            !format!(
                "{:?}",
                ConsoleConfig {
                    secret: Some("x".repeat(40)),
                    ..ConsoleConfig::default()
                }
            )
            .contains("xxxx")
        );
    }
}
