//! The bot account: direct messages and mentions arrive over the websocket (`{url}/api/v4/websocket`),
//! replies go out through the outbox and `POST /api/v4/posts` ([`PostSender`]).
//!
//! The socket authenticates with an `authentication_challenge`, keeps the `hello`'s connection id and
//! the last event's `seq`, and after a drop reconnects with a growing backoff and jitter, resuming with
//! `?connection_id=…&sequence_number=…` so the server replays what was missed. `posted` events carry
//! the post as a JSON *string* inside the JSON; the bot's own posts and system posts are ignored, and
//! in channels only posts that mention the bot are turns.
//!
//! In the support channel (`[mattermost] canal_suporte`) a post in a case's thread is the support
//! side of the case: the owner's words go to the card holder, anyone else's stay an internal note.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::{CHANNEL, MattermostConfig, audit, conversation_id};
use crate::outbox::{ChannelSender, ReplyPayload, SendError};
use crate::service::{Delivery, Inbound, Services};
use vt_engine::Participant;
use vt_store::OutboxItem;

/// The longest wait between two reconnections.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub struct Bot {
    service: Arc<Services>,
    agent: String,
    config: Arc<MattermostConfig>,
    tenant: String,
    client: reqwest::Client,
    first_backoff: Duration,
}

#[derive(Debug, Deserialize)]
struct Event {
    #[serde(default)]
    event: Option<String>,
    #[serde(default)]
    data: Value,
    #[serde(default)]
    seq: Option<i64>,
}

#[derive(Debug, Deserialize)]
struct Post {
    id: String,
    user_id: String,
    channel_id: String,
    #[serde(default)]
    root_id: String,
    #[serde(default)]
    message: String,
    #[serde(default, rename = "type")]
    kind: String,
}

/// Where the socket is, for resuming after a drop.
#[derive(Debug, Default)]
struct Session {
    connection_id: Option<String>,
    sequence: i64,
}

impl Bot {
    /// `None` when no bot token or URL is configured.
    /// `agent` is who the posts talk to; `tenant`, where its conversations belong.
    pub fn new(
        service: Arc<Services>,
        agent: &str,
        config: Arc<MattermostConfig>,
        tenant: &str,
    ) -> Option<Self> {
        (config.bot_token.is_some() && config.url.is_some()).then(|| Self {
            service,
            agent: agent.to_owned(),
            config,
            tenant: tenant.to_owned(),
            client: reqwest::Client::new(),
            first_backoff: Duration::from_secs(1),
        })
    }

    /// The first wait after a drop (tests shorten it).
    pub fn with_backoff(mut self, first: Duration) -> Self {
        self.first_backoff = first;
        self
    }

    fn base(&self) -> &str {
        self.config
            .url
            .as_deref()
            .unwrap_or_default()
            .trim_end_matches('/')
    }

    fn token(&self) -> &str {
        self.config.bot_token.as_deref().unwrap_or_default()
    }

    /// Who the bot is (its own posts are ignored).
    async fn me(&self) -> Result<String, String> {
        let r = self
            .client
            .get(format!("{}/api/v4/users/me", self.base()))
            .bearer_auth(self.token())
            .send()
            .await
            .map_err(|_| "mattermost unreachable".to_owned())?;
        let status = r.status();
        let body: Value = r
            .json()
            .await
            .map_err(|_| format!("users/me answered {status}"))?;
        body["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("users/me answered {status}"))
    }

    /// Runs until `shutdown` resolves, reconnecting after every drop.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut session = Session::default();
        let mut backoff = self.first_backoff;
        let mut me = None;
        loop {
            let attempt = async {
                let id = match &me {
                    Some(id) => id,
                    None => me.insert(self.me().await?),
                };
                self.connect(id, &mut session).await
            };
            let outcome = tokio::select! {
                () = &mut shutdown => return,
                outcome = attempt => outcome,
            };
            match outcome {
                Ok(()) => backoff = self.first_backoff,
                Err(e) => {
                    tracing::warn!(error = %vt_contract::redact::secrets(&e), "mattermost websocket dropped")
                }
            }
            // Jitter keeps many instances from reconnecting in step.
            let jitter = Duration::from_millis(u64::from(uuid::Uuid::new_v4().as_u128() as u16) % 250);
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(backoff + jitter) => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// One connection: authenticate, then handle events until the socket closes.
    async fn connect(&self, me: &str, session: &mut Session) -> Result<(), String> {
        let mut url = format!("{}/api/v4/websocket", self.base())
            .replacen("https://", "wss://", 1)
            .replacen("http://", "ws://", 1);
        if let Some(id) = &session.connection_id {
            url.push_str(&format!(
                "?connection_id={id}&sequence_number={}",
                session.sequence
            ));
        }
        let (mut socket, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .map_err(|e| format!("websocket connect: {e}"))?;
        let challenge =
            json!({"seq": 1, "action": "authentication_challenge", "data": {"token": self.token()}});
        socket
            .send(Message::text(challenge.to_string()))
            .await
            .map_err(|e| format!("websocket auth: {e}"))?;
        // Our own actions' sequence (1 was the authentication).
        let mut seq = 1;
        while let Some(frame) = socket.next().await {
            let text = match frame.map_err(|e| format!("websocket read: {e}"))? {
                Message::Text(t) => t.to_string(),
                Message::Close(_) => break,
                _ => continue,
            };
            let Ok(event) = vt_contract::json::from_text::<Event>(&text) else {
                continue;
            };
            if let Some(seq) = event.seq {
                session.sequence = seq;
            }
            match event.event.as_deref() {
                Some("hello") => {
                    session.connection_id = event.data["connection_id"].as_str().map(str::to_owned);
                }
                Some("posted") => {
                    if let Some((channel_id, parent_id)) = self.posted(me, &event.data).await {
                        // "typing…" while the turn runs: best effort, never waited on by the reply.
                        seq += 1;
                        let typing = json!({"action": "user_typing", "seq": seq,
                            "data": {"channel_id": channel_id, "parent_id": parent_id}});
                        if let Err(e) = socket.send(Message::text(typing.to_string())).await {
                            tracing::info!(error = %e, "mattermost typing indicator not sent");
                        }
                    }
                }
                _ => {}
            }
        }
        Err("websocket closed".into())
    }

    /// A post the bot can see: a turn when it is a DM to the bot or mentions it. Returns where to show
    /// "typing…" (channel, thread root) when a turn started.
    async fn posted(&self, me: &str, data: &Value) -> Option<(String, String)> {
        let post = data["post"]
            .as_str()
            .and_then(|p| vt_contract::json::from_text::<Post>(p).ok())?;
        if post.user_id == me || post.kind.starts_with("system_") || post.message.trim().is_empty() {
            return None;
        }
        let sender = data["sender_name"]
            .as_str()
            .unwrap_or(&post.user_id)
            .trim_start_matches('@')
            .to_owned();
        if self.config.canal_suporte.as_deref() == Some(post.channel_id.as_str()) {
            if !post.root_id.is_empty() {
                self.board_thread(&post, &sender).await;
            }
            return None;
        }
        let direct = data["channel_type"].as_str() == Some("D");
        let mentioned = data["mentions"]
            .as_str()
            .and_then(|m| vt_contract::json::from_text::<Vec<String>>(m).ok())
            .is_some_and(|m| m.iter().any(|u| u == me));
        if !direct && !mentioned {
            return None;
        }
        // Outside DMs the reply goes in the post's thread.
        let thread = (!direct).then(|| {
            if post.root_id.is_empty() {
                post.id.clone()
            } else {
                post.root_id.clone()
            }
        });
        let support = self.config.is_support(&post.user_id, &sender);
        let msg = Inbound {
            agent_id: self.agent.clone(),
            conversation_id: Some(conversation_id(&post.channel_id, &post.user_id)),
            tenant_id: Some(self.tenant.clone()),
            user: Participant {
                user_id: post.user_id.clone(),
                user_login: sender.clone(),
                channel: CHANNEL.into(),
            },
            text: strip_mention(&post.message),
            channel_message_id: Some(post.id.clone()),
            delivery: Delivery::Outbox,
            thread,
            ..Default::default()
        };
        let typing_at = (post.channel_id.clone(), msg.thread.clone().unwrap_or_default());
        match self.service.messages().receive(&msg).await {
            Ok(Some(received)) => {
                let (service, config, tenant) =
                    (self.service.clone(), self.config.clone(), self.tenant.clone());
                self.service.messages().spawn(async move {
                    match service.messages().process(received).await {
                        Ok(h) if support => audit(&service, &config, &tenant, &sender, &msg.text, &h).await,
                        Ok(_) => {}
                        Err(e) => tracing::error!(error = %e, "mattermost turn failed"),
                    }
                });
                Some(typing_at)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::error!(error = %e, "mattermost post could not be stored");
                None
            }
        }
    }
}

impl Bot {
    /// A post in a case's thread on the support board, by `sender` (a username).
    async fn board_thread(&self, post: &Post, sender: &str) {
        let agent = crate::service::SupportAgent {
            login: sender,
            name: sender,
            tenant: Some(&self.tenant),
        };
        let text = strip_mention(&post.message);
        let relayed = self
            .service
            .cases()
            .board_thread_post(&post.root_id, agent, &post.user_id, &text)
            .await;
        match relayed {
            Ok(Some(relayed)) => tracing::info!(?relayed, "support thread post"),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "support thread post not relayed"),
        }
    }
}

/// A leading `@bot` mention is not part of what the person asks.
fn strip_mention(message: &str) -> String {
    let m = message.trim();
    match m.strip_prefix('@') {
        Some(rest) => rest
            .split_once(char::is_whitespace)
            .map_or("", |(_, r)| r)
            .trim()
            .to_owned(),
        None => m.to_owned(),
    }
}

/// Replies through `POST /api/v4/posts`.
pub struct PostSender {
    client: reqwest::Client,
    config: Arc<MattermostConfig>,
    /// Where a reply's files are drawn from (Pix charges); `None`: a reply with files is refused.
    files: Option<Arc<dyn vt_store::PixStore>>,
}

impl PostSender {
    pub fn new(config: Arc<MattermostConfig>) -> Option<Self> {
        (config.bot_token.is_some() && config.url.is_some()).then(|| Self {
            client: reqwest::Client::new(),
            config,
            files: None,
        })
    }

    /// Attaching a reply's files (Pix QR codes), drawn from the charges in `store`.
    pub fn with_files(mut self, store: Arc<dyn vt_store::PixStore>) -> Self {
        self.files = Some(store);
        self
    }

    /// A checkout link per file, as an attachment whose title opens the provider's page.
    async fn link_attachments(
        &self,
        links: &[vt_contract::FileContent],
    ) -> Result<Vec<serde_json::Value>, SendError> {
        let Some(store) = &self.files else {
            return Err(SendError::Permanent(
                "a reply with files, and no way to draw them".into(),
            ));
        };
        let mut attachments = Vec::new();
        for id in links.iter().filter_map(vt_domain::tools::link_of) {
            let charge = crate::channels::charge_of(store.as_ref(), id).await?;
            attachments.push(json!({
                "fallback": format!("Pagar com cartão: {}", charge.copia_e_cola),
                "title": "Pagar com cartão de crédito",
                "title_link": charge.copia_e_cola,
            }));
        }
        Ok(attachments)
    }

    /// `POST /api/v4/files`: a reply's files uploaded to `channel_id`; their ids, for the post.
    async fn upload(
        &self,
        channel_id: &str,
        files: &[vt_contract::FileContent],
    ) -> Result<Vec<String>, SendError> {
        let Some(store) = &self.files else {
            return Err(SendError::Permanent(
                "a reply with files, and no way to draw them".into(),
            ));
        };
        let mut form = reqwest::multipart::Form::new().text("channel_id", channel_id.to_owned());
        // Mattermost takes at most five files per post.
        for file in files.iter().take(5) {
            let upload = crate::channels::upload_of(store.as_ref(), file).await?;
            let part = reqwest::multipart::Part::bytes(upload.bytes)
                .file_name(upload.name)
                .mime_str(&upload.mime)
                .map_err(|_| SendError::Permanent("a file of an unknown type".into()))?;
            form = form.part("files", part);
        }
        let request = self.client.post(self.config.api_url("files")).multipart(form);
        let uploaded = super::call(&self.config, request).await?;
        let ids: Vec<String> = uploaded["file_infos"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["id"].as_str().map(str::to_owned))
            .collect();
        if ids.is_empty() {
            return Err(SendError::Permanent(
                "mattermost: an upload answered without file ids".into(),
            ));
        }
        Ok(ids)
    }
}

#[async_trait]
impl ChannelSender for PostSender {
    fn channel(&self) -> &str {
        CHANNEL
    }

    async fn send(&self, item: &OutboxItem, reply: &ReplyPayload) -> Result<Option<String>, SendError> {
        // `mm:{channel}:{user}`.
        let channel_id = item
            .conversation_id
            .as_deref()
            .and_then(|c| c.strip_prefix("mm:"))
            .and_then(|c| c.split(':').next())
            .ok_or_else(|| SendError::Permanent("item without a Mattermost channel".into()))?;
        // Mattermost's Markdown reads one `*` as italics: the product's emphasis is its `**`.
        let text = crate::outbox::emphasis(&reply.text, "**");
        let text = text.as_str();
        let mut body = json!({"channel_id": channel_id, "message": text});
        if let Some(root) = &reply.thread {
            body["root_id"] = json!(root);
        }
        // A card checkout's link is an attachment whose title opens the provider's page; other files
        // (Pix QR codes) are uploaded.
        let (links, uploads): (Vec<_>, Vec<_>) = reply
            .files
            .iter()
            .cloned()
            .partition(|f| vt_domain::tools::link_of(f).is_some());
        if !uploads.is_empty() {
            body["file_ids"] = json!(self.upload(channel_id, &uploads).await?);
        }
        if !links.is_empty() {
            body["props"] = json!({"attachments": self.link_attachments(&links).await?});
        }
        if let (Some(pending), Some(conversation)) =
            (reply.confirmation.as_deref(), item.conversation_id.as_deref())
        {
            body["message"] = json!("");
            body["props"] = json!({"attachments": self.config.buttons(text, pending, conversation)});
        } else if let (false, Some(conversation)) =
            (reply.choices.is_empty(), item.conversation_id.as_deref())
        {
            body["message"] = json!("");
            body["props"] =
                json!({"attachments": self.config.choice_buttons(text, &reply.choices, conversation)});
        }
        super::create_post(&self.config, &self.client, &body).await
    }
}

#[cfg(test)]
mod tests {
    use super::strip_mention;

    #[test]
    fn a_leading_mention_is_dropped() {
        assert_eq!(strip_mention("@vt saldo 1234567890"), "saldo 1234567890");
        assert_eq!(strip_mention("saldo 1234567890"), "saldo 1234567890");
        assert_eq!(strip_mention("@vt"), "");
    }
}
