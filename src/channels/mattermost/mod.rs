//! Mattermost as a channel of the pipeline: the slash command (`/vt saldo <cartão>`, `/vt recarga …`,
//! `/vt ajuda`), the outgoing webhook, and the recharge confirmation as message buttons whose clicks
//! come back to `/channels/mattermost/actions`. Support agents (`support_users`) may look any card of
//! their tenant up; every such lookup is written to the audit table.
//!
//! - The slash command carries `Authorization: Token <slash_token>`, the outgoing webhook a `token` in
//!   its body: both are compared in constant time.
//! - A click carries no auth header, so the button's `context` carries the pending recharge's id, the
//!   conversation and an HMAC of both made with `actions_secret`: a forged click is refused, and a click
//!   on a recharge that is no longer waiting (a second click, a replay) moves no money.
//! - A conversation is keyed by (channel, Mattermost channel id, user id).
//!
//! - The bot account ([`Bot`]) gets direct messages and mentions over the websocket and answers through
//!   the outbox and `POST /api/v4/posts` ([`PostSender`]), threaded outside DMs.

mod actions;
pub(crate) mod board;
pub(crate) mod bot;
mod cases;
mod slash;
mod webhook;

pub(crate) use board::BoardSender;
pub(crate) use bot::{Bot, PostSender};

use std::sync::Arc;

use axum::routing::post;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::service::Services;

/// The channel name on conversations.
pub(crate) const CHANNEL: &str = "mattermost";

/// The Mattermost channel (on when a slash or webhook token is set; `VT_MATTERMOST_*` in the
/// environment).
#[derive(Clone, Default, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct MattermostConfig {
    /// The Mattermost server (`VT_MATTERMOST_URL`), for the bot and the support board.
    pub url: Option<String>,
    /// The bot account's token (`VT_MATTERMOST_BOT_TOKEN`): the bot answers direct messages.
    pub bot_token: Option<String>,
    /// The slash command's token (`VT_MATTERMOST_SLASH_TOKEN`).
    pub slash_token: Option<String>,
    /// The outgoing webhook's token (`VT_MATTERMOST_WEBHOOK_TOKEN`).
    pub webhook_token: Option<String>,
    /// Signs the confirm/cancel buttons' callbacks (`VT_MATTERMOST_ACTIONS_SECRET`).
    pub actions_secret: Option<String>,
    /// How Mattermost reaches `serve` (for button callbacks), e.g. `https://vt.example.com`.
    pub public_url: Option<String>,
    /// User ids or usernames of support agents.
    pub support_users: Vec<String>,
    /// The support board: the channel support agents watch cases in, one thread per case (the bot
    /// must be a member; needs `url` and `bot_token`). Unset: no board (cases are worked from the
    /// console and the slash command). Was `[handoff] mattermost_channel_id`.
    pub canal_suporte: Option<String>,
}

impl std::fmt::Debug for MattermostConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = |o: &Option<String>| o.as_ref().map(|_| "<set>");
        f.debug_struct("MattermostConfig")
            .field("url", &self.url)
            .field("bot_token", &set(&self.bot_token))
            .field("slash_token", &set(&self.slash_token))
            .field("webhook_token", &set(&self.webhook_token))
            .field("actions_secret", &set(&self.actions_secret))
            .field("public_url", &self.public_url)
            .field("support_users", &self.support_users)
            .field("canal_suporte", &self.canal_suporte)
            .finish()
    }
}

impl MattermostConfig {
    /// Some way in is configured.
    pub(crate) fn is_on(&self) -> bool {
        self.slash_token.is_some() || self.webhook_token.is_some() || self.bot_token.is_some()
    }

    /// What a way in needs; the error is `(field, why)`.
    pub(crate) fn validate(&self) -> Result<(), (&'static str, &'static str)> {
        if self.canal_suporte.is_some() && (self.bot_token.is_none() || self.url.is_none()) {
            return Err((
                "mattermost.canal_suporte",
                "precisa do bot do Mattermost (url e bot_token) para publicar os atendimentos",
            ));
        }
        if !self.is_on() {
            return Ok(());
        }
        if self.actions_secret.as_deref().is_none_or(|s| s.len() < 16) {
            return Err((
                "mattermost.actions_secret",
                "precisa de pelo menos 16 caracteres: assina os botões de confirmação e é a chave do hash da auditoria",
            ));
        }
        if self.bot_token.is_some()
            && self
                .url
                .as_deref()
                .is_none_or(|u| reqwest::Url::parse(u).is_err())
        {
            return Err(("mattermost.url", "o bot precisa da URL do servidor do Mattermost"));
        }
        if self
            .public_url
            .as_deref()
            .is_none_or(|u| reqwest::Url::parse(u).is_err())
        {
            return Err((
                "mattermost.public_url",
                "deve ser a URL pela qual o Mattermost chega a este serviço",
            ));
        }
        Ok(())
    }

    fn is_support(&self, user_id: &str, user_name: &str) -> bool {
        self.support_users
            .iter()
            .any(|u| u == user_id || u.trim_start_matches('@') == user_name)
    }

    fn secret(&self) -> &[u8] {
        self.actions_secret.as_deref().unwrap_or_default().as_bytes()
    }

    /// The HMAC binding a button to its conversation and pending recharge.
    fn sign(&self, action: &str, pending: &str, conversation: &str) -> String {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(self.secret()) else {
            return String::new();
        };
        mac.update(format!("{action}|{pending}|{conversation}").as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    fn verify(&self, action: &str, pending: &str, conversation: &str, signature: &str) -> bool {
        let (Ok(sig), Ok(mut mac)) = (
            hex::decode(signature),
            Hmac::<Sha256>::new_from_slice(self.secret()),
        ) else {
            return false;
        };
        mac.update(format!("{action}|{pending}|{conversation}").as_bytes());
        mac.verify_slice(&sig).is_ok()
    }

    /// A keyed hash of a card for the audit table (domain-separated from the button signatures).
    fn card_hash(&self, card: &str) -> String {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(self.secret()) else {
            return String::new();
        };
        mac.update(format!("auditoria|{card}").as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    /// Where Mattermost posts a click on our buttons.
    fn actions_url(&self) -> String {
        format!(
            "{}/channels/mattermost/actions",
            self.public_url
                .as_deref()
                .unwrap_or_default()
                .trim_end_matches('/')
        )
    }

    /// "Confirmar" / "Cancelar" buttons for `pending` in `conversation`, as message attachments.
    fn buttons(&self, text: &str, pending: &str, conversation: &str) -> Value {
        let url = self.actions_url();
        let action = |id: &str, name: &str| {
            json!({"id": id, "name": name, "type": "button", "integration": {"url": url, "context": {
                "acao": id, "pendente": pending, "conversa": conversation,
                "assinatura": self.sign(id, pending, conversation)}}})
        };
        json!([{"text": text, "actions": [action("confirmar", "Confirmar"), action("cancelar", "Cancelar")]}])
    }

    /// One button per option of `choices` (cards to choose from, a score), signed over its index and
    /// `conversation`: a click is the option's pick, as a WhatsApp list's row is.
    fn choice_buttons(&self, text: &str, choices: &[String], conversation: &str) -> Value {
        let url = self.actions_url();
        let actions: Vec<Value> = choices
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let index = i.to_string();
                // Mattermost takes letters and digits only in an action's id.
                json!({"id": format!("{CHOOSE}{i}"), "name": name, "type": "button", "integration": {"url": url, "context": {
                    "acao": CHOOSE, "pendente": index, "conversa": conversation,
                    "assinatura": self.sign(CHOOSE, &index, conversation)}}})
            })
            .collect();
        json!([{"text": text, "actions": actions}])
    }

    /// A case's buttons (`(action, label)`), signed like the recharge's: the context binds each to the
    /// case and its conversation.
    fn case_buttons(&self, case: &vt_store::Case, actions: &[(&str, &str)]) -> Value {
        if actions.is_empty() {
            return json!([]);
        }
        let url = self.actions_url();
        let actions: Vec<Value> = actions
            .iter()
            .map(|(id, name)| {
                json!({"id": id, "name": name, "type": "button", "integration": {"url": url, "context": {
                    "acao": id, "caso": case.id, "conversa": case.conversation_id,
                    "assinatura": self.sign(id, &case.id, &case.conversation_id)}}})
            })
            .collect();
        json!([{"text": "", "actions": actions}])
    }
}

impl MattermostConfig {
    /// `{url}/api/v4/{path}`.
    fn api_url(&self, path: &str) -> String {
        format!(
            "{}/api/v4/{path}",
            self.url.as_deref().unwrap_or_default().trim_end_matches('/')
        )
    }
}

/// One call of Mattermost's REST API as the bot, classified for the outbox: 2xx its JSON; 429 retried
/// after `X-Ratelimit-Reset` (seconds; the body is plain text); 5xx and a connection failure retried;
/// any other status final.
async fn api(
    config: &MattermostConfig,
    request: reqwest::RequestBuilder,
    body: &Value,
) -> Result<Value, crate::outbox::SendError> {
    call(config, request.json(body)).await
}

/// Creates the post `body` describes; its id.
async fn create_post(
    config: &MattermostConfig,
    client: &reqwest::Client,
    body: &Value,
) -> Result<Option<String>, crate::outbox::SendError> {
    let posted = api(config, client.post(config.api_url("posts")), body).await?;
    Ok(posted["id"].as_str().map(str::to_owned))
}

/// Sends `request` (its body set) with the bot's token; the JSON of a 2xx, else the failure as the
/// outbox treats it.
async fn call(
    config: &MattermostConfig,
    request: reqwest::RequestBuilder,
) -> Result<Value, crate::outbox::SendError> {
    use crate::outbox::SendError;
    let r = request
        .bearer_auth(config.bot_token.as_deref().unwrap_or_default())
        .send()
        .await
        .map_err(|_| SendError::Retry {
            reason: "mattermost unreachable".into(),
            after: None,
        })?;
    let status = r.status().as_u16();
    let reset = r
        .headers()
        .get("x-ratelimit-reset")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(std::time::Duration::from_secs);
    let text = r.text().await.unwrap_or_default();
    match status {
        200..=299 => Ok(vt_contract::json::from_text(&text).unwrap_or_default()),
        429 => Err(SendError::Retry {
            reason: "mattermost 429".into(),
            after: reset,
        }),
        s if s >= 500 => Err(SendError::Retry {
            reason: format!("mattermost {s}"),
            after: None,
        }),
        s => Err(SendError::Permanent(format!("mattermost {s}"))),
    }
}

/// The conversation of `user_id` in the Mattermost channel `channel_id`.
/// The action of a button that picks an option ([`MattermostConfig::choice_buttons`]).
const CHOOSE: &str = "escolher";

pub fn conversation_id(channel_id: &str, user_id: &str) -> String {
    format!("mm:{channel_id}:{user_id}")
}

#[derive(Clone)]
pub(crate) struct MattermostState {
    pub service: Arc<Services>,
    /// The agent this channel's people talk to.
    pub agent: String,
    pub config: Arc<MattermostConfig>,
    /// The tenant support agents look cards up in.
    pub tenant: String,
    pub client: reqwest::Client,
}

/// The channel's routes.
fn routes(state: MattermostState) -> Vec<(&'static str, axum::routing::MethodRouter)> {
    vec![
        (
            "/channels/mattermost/slash",
            post(slash::command).with_state(state.clone()),
        ),
        (
            "/channels/mattermost/webhook",
            post(webhook::outgoing).with_state(state.clone()),
        ),
        (
            "/channels/mattermost/actions",
            post(actions::click).with_state(state),
        ),
    ]
}

/// The Mattermost channel as `serve` runs it, each part on when `config` has what it needs: the
/// slash command, outgoing webhook and button routes; the bot's posts as a sender and its websocket as
/// a job; the support board (`canal_suporte`) as a sender.
pub fn channel(config: &MattermostConfig, wiring: &crate::channels::Wiring) -> crate::channels::Channel {
    let config = Arc::new(config.clone());
    let mut channel = crate::channels::Channel {
        name: CHANNEL,
        ..crate::channels::Channel::default()
    };
    if config.is_on() {
        channel.routes = routes(MattermostState {
            service: wiring.service.clone(),
            agent: wiring.agent.clone(),
            config: config.clone(),
            tenant: wiring.tenant.clone(),
            client: reqwest::Client::new(),
        });
        channel
            .notices
            .push("canal Mattermost ligado: /channels/mattermost/{slash,webhook,actions}".into());
    }
    if let Some(sender) = PostSender::new(config.clone()) {
        let sender = sender.with_files(wiring.service.stores().pix.clone());
        channel.senders.push(Arc::new(sender));
    }
    if let Some(board) = BoardSender::new(config.clone(), wiring.service.clone()) {
        channel.senders.push(Arc::new(board));
        channel
            .notices
            .push("atendimentos publicados no canal de suporte do Mattermost".into());
    }
    if let Some(bot) = Bot::new(wiring.service.clone(), &wiring.agent, config, &wiring.tenant) {
        channel.jobs.push(Box::new(|stop| Box::pin(bot.run(stop))));
        channel
            .notices
            .push("bot do Mattermost conectando pelo websocket".into());
    }
    channel
}

impl super::Section for MattermostConfig {
    fn override_from(&mut self, get: &dyn Fn(&str) -> Option<String>) {
        super::set_from_env(
            &get,
            [
                ("VT_MATTERMOST_URL", &mut self.url),
                ("VT_MATTERMOST_BOT_TOKEN", &mut self.bot_token),
                ("VT_MATTERMOST_SLASH_TOKEN", &mut self.slash_token),
                ("VT_MATTERMOST_WEBHOOK_TOKEN", &mut self.webhook_token),
                ("VT_MATTERMOST_ACTIONS_SECRET", &mut self.actions_secret),
                ("VT_MATTERMOST_PUBLIC_URL", &mut self.public_url),
            ],
        );
    }

    fn problem(&self) -> Option<(String, String)> {
        self.validate()
            .err()
            .map(|(field, why)| (field.to_owned(), why.to_owned()))
    }

    fn register_secrets(&self) {
        for s in [
            &self.bot_token,
            &self.slash_token,
            &self.webhook_token,
            &self.actions_secret,
        ]
        .into_iter()
        .flatten()
        {
            vt_contract::redact::register_secret(s);
        }
    }
}

/// Mattermost, plugged in ([`super::PLUGS`]): `[mattermost]`, and the support board when
/// `canal_suporte` names its channel.
pub(crate) struct Mattermost;

impl super::Plug for Mattermost {
    fn name(&self) -> &'static str {
        CHANNEL
    }

    fn rules(&self) -> crate::service::ChannelRules {
        crate::service::ChannelRules {
            label: "Mattermost",
            ..crate::service::ChannelRules::default()
        }
    }

    fn section(&self) -> super::SectionType {
        super::SectionType::of::<MattermostConfig>()
    }

    fn build(
        &self,
        settings: &dyn super::Settings,
        wiring: &super::Wiring,
    ) -> anyhow::Result<super::Channel> {
        let config = settings
            .sections()
            .get::<MattermostConfig>()
            .cloned()
            .unwrap_or_default();
        Ok(channel(&config, wiring))
    }

    fn keeps_board(&self, settings: &dyn super::Settings) -> bool {
        settings
            .sections()
            .get::<MattermostConfig>()
            .is_some_and(|c| c.canal_suporte.is_some())
    }
}

/// A support agent's balance lookup goes to the audit table, its card hashed with `actions_secret`.
async fn audit(
    service: &Services,
    config: &MattermostConfig,
    tenant: &str,
    support_user: &str,
    text: &str,
    handled: &crate::service::Handled,
) {
    let who = crate::service::audit::Lookup {
        support_user,
        tenant,
        channel: CHANNEL,
    };
    crate::service::audit::record_lookup(service.cases(), who, text, handled, |card| config.card_hash(card))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_option_is_a_button_signed_over_its_index_with_an_id_mattermost_takes() {
        let config = MattermostConfig {
            actions_secret: Some("segredo-dos-botoes-0123456789".into()),
            public_url: Some("https://vt.example.com/".into()),
            ..MattermostConfig::default()
        };
        let options = ["1 · Muito ruim".to_owned(), "2 · Ruim".to_owned()];
        let attachments = config.choice_buttons("Como foi?", &options, "mm:canal:pessoa");
        let actions = attachments[0]["actions"].as_array().expect("actions");
        assert_eq!(actions.len(), 2);
        for (i, action) in actions.iter().enumerate() {
            let id = action["id"].as_str().unwrap_or_default();
            assert!(id.chars().all(|c| c.is_ascii_alphanumeric()), "{id}");
            assert_eq!(action["name"], options[i]);
            let c = &action["integration"]["context"];
            let signature = c["assinatura"].as_str().unwrap_or_default();
            assert!(config.verify(CHOOSE, &i.to_string(), "mm:canal:pessoa", signature));
            assert!(!config.verify(CHOOSE, &(i + 1).to_string(), "mm:canal:pessoa", signature));
        }
        assert_eq!(
            actions[0]["integration"]["url"],
            "https://vt.example.com/channels/mattermost/actions"
        );
    }
}
