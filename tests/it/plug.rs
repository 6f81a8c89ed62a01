//! A channel from outside the product, plugged in with one line: the toy channel `brinquedo` reads its
//! own section of the file (its variables, its checks, its secrets), builds its route and says what is
//! on, and `serve` runs it beside the product's own channels — nothing of the product changes but the
//! list of plugs it joins (`PLUGS` plus one).

use std::collections::HashMap;

use axum::Json;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Deserialize;
use serde_json::{Value, json};
use vt_agent::{
    Channel, ChannelRules, Config, Inbound, PLUGS, Plug, Section, SectionType, Sections, Server, Settings,
    Wiring,
};

const NAME: &str = "brinquedo";
const TOKEN: &str = "token-do-brinquedo-0123456789";

/// `[brinquedo]`: the toy channel's own section.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
struct ToyConfig {
    /// What a caller must send in `x-brinquedo-token` (`VT_BRINQUEDO_TOKEN`); unset: the channel is off.
    token: Option<String>,
    /// Said at start.
    saudacao: String,
}

impl Section for ToyConfig {
    fn override_from(&mut self, get: &dyn Fn(&str) -> Option<String>) {
        if let Some(token) = get("VT_BRINQUEDO_TOKEN") {
            self.token = Some(token);
        }
    }

    fn problem(&self) -> Option<(String, String)> {
        let short = self.token.as_ref().is_some_and(|t| t.len() < 16);
        short.then(|| {
            (
                "brinquedo.token".into(),
                "deve ter pelo menos 16 caracteres".into(),
            )
        })
    }

    fn register_secrets(&self) {
        if let Some(token) = &self.token {
            vt_contract::redact::register_secret(token);
        }
    }
}

/// The toy channel: one route that takes `{"de", "texto"}` and answers `{"resposta"}`.
struct Toy;

impl Plug for Toy {
    fn name(&self) -> &'static str {
        NAME
    }

    fn rules(&self) -> ChannelRules {
        ChannelRules {
            label: "Brinquedo",
            ..ChannelRules::default()
        }
    }

    fn section(&self) -> SectionType {
        SectionType::of::<ToyConfig>()
    }

    fn build(&self, settings: &dyn Settings, wiring: &Wiring) -> anyhow::Result<Channel> {
        let Some(config) = settings
            .sections()
            .get::<ToyConfig>()
            .filter(|c| c.token.is_some())
        else {
            return Ok(Channel::default());
        };
        let (token, wiring) = (config.token.clone().unwrap_or_default(), wiring.clone());
        let route = post(move |headers: HeaderMap, Json(body): Json<Value>| async move {
            if headers.get("x-brinquedo-token").and_then(|v| v.to_str().ok()) != Some(token.as_str()) {
                return StatusCode::UNAUTHORIZED.into_response();
            }
            answer(&wiring, &body).await
        });
        let mut channel = Channel::default();
        channel.name = NAME;
        channel.routes = vec![("/channels/brinquedo", route)];
        channel.notices = vec![format!("brinquedo ligado: {}", config.saudacao)];
        Ok(channel)
    }
}

/// A message of the toy channel, handed to the service as every channel hands its own.
async fn answer(wiring: &Wiring, body: &Value) -> Response {
    let from = body["de"].as_str().unwrap_or_default().to_owned();
    let msg = Inbound {
        agent_id: wiring.agent.clone(),
        conversation_id: Some(format!("{NAME}:{from}")),
        tenant_id: Some(wiring.tenant.clone()),
        user: vt_engine::Participant {
            user_id: from.clone(),
            user_login: from,
            channel: NAME.into(),
        },
        text: body["texto"].as_str().unwrap_or_default().to_owned(),
        ..Default::default()
    };
    match wiring.service.messages().handle(msg).await {
        Ok(handled) => Json(json!({"resposta": handled.reply_text()})).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

static TOY: Toy = Toy;

/// The product's channels and the toy: the one line a new channel adds.
fn plugs() -> Vec<&'static dyn Plug> {
    PLUGS.iter().copied().chain([&TOY as &dyn Plug]).collect()
}

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn a_plugged_channel_reads_checks_and_guards_its_own_section() {
    let text = "[brinquedo]\nsaudacao = \"olá\"\n";
    let config = Config::plugged(
        Some(text),
        "vt.toml",
        &env(&[("VT_BRINQUEDO_TOKEN", TOKEN)]),
        &plugs(),
    )
    .expect("valid");
    let sections: &Sections = &config.channels;
    let toy = sections.get::<ToyConfig>().expect("the toy's section");
    assert_eq!(
        toy.token.as_deref(),
        Some(TOKEN),
        "its variable wins over the file"
    );
    assert_eq!(toy.saudacao, "olá");
    assert_eq!(sections.plugs().count(), PLUGS.len() + 1);
    // With no file at all, its variables still reach it.
    let bare = Config::plugged(None, "", &env(&[("VT_BRINQUEDO_TOKEN", TOKEN)]), &plugs()).expect("valid");
    let toy_bare = bare.channels.get::<ToyConfig>().expect("the toy's section");
    assert_eq!(toy_bare.token.as_deref(), Some(TOKEN));
    // Its secret joined the ones every log line is scrubbed of.
    assert!(!vt_contract::redact::secrets(&format!("token {TOKEN}")).contains(TOKEN));

    // Its check runs when the configuration loads, naming the field, never the value.
    let short = Config::plugged(
        Some("[brinquedo]\ntoken = \"curtinho\"\n"),
        "vt.toml",
        &env(&[]),
        &plugs(),
    )
    .expect_err("short")
    .to_string();
    assert!(
        short.contains("brinquedo.token") && !short.contains("curtinho"),
        "{short}"
    );
    // A key it does not know is refused where it is, as any section's.
    let unknown = Config::plugged(
        Some("[brinquedo]\nsaudacao = \"oi\"\nnada = 1\n"),
        "vt.toml",
        &env(&[]),
        &plugs(),
    )
    .expect_err("unknown key")
    .to_string();
    assert!(
        unknown.contains("linha 3") && unknown.contains("brinquedo"),
        "{unknown}"
    );
    // The product without the plug does not know the section.
    let alone = Config::from_sources(Some(text), "vt.toml", &HashMap::new()).expect_err("not plugged");
    assert!(alone.to_string().contains("linha 1"), "{alone}");
}

#[tokio::test]
async fn serve_runs_a_plugged_channel_beside_the_products_own() {
    let data = tempfile::tempdir().expect("tmp");
    let text = format!(
        "data_dir = \"{}\"\n[brinquedo]\ntoken = \"{TOKEN}\"\nsaudacao = \"pronto\"\n",
        data.path().display()
    );
    let config = Config::plugged(Some(&text), "vt.toml", &HashMap::new(), &plugs()).expect("valid");
    // Opening its store draws this process's index key.
    let server = {
        let _index_key = crate::support::INDEX_KEY.lock().await;
        Server::compose(&config).await.expect("composed")
    };
    assert!(
        server.notices.iter().any(|n| n == "brinquedo ligado: pronto"),
        "{:?}",
        server.notices
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!(
        "http://{}/channels/brinquedo",
        listener.local_addr().expect("addr")
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(server.run(listener, async move {
        let _ = stopped.await;
    }));

    let client = reqwest::Client::new();
    let said = client
        .post(&url)
        .header("x-brinquedo-token", TOKEN)
        .json(&json!({"de": "ana", "texto": "oi"}))
        .send()
        .await
        .expect("sent");
    assert_eq!(said.status(), 200);
    let said: Value = said.json().await.expect("json");
    assert!(
        !said["resposta"].as_str().unwrap_or_default().is_empty(),
        "{said}"
    );
    let refused = client
        .post(&url)
        .header("x-brinquedo-token", "outro")
        .json(&json!({"de": "ana", "texto": "oi"}))
        .send()
        .await
        .expect("sent");
    assert_eq!(refused.status(), 401);

    let _ = stop.send(());
    running.await.expect("joined").expect("served");
}
