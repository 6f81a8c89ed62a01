//! The support board on Mattermost (`[mattermost] canal_suporte`): a new case is a root post in
//! the support channel — its case file and **Assumir** / **Encerrar** — and everything after is in its
//! thread. A change of state edits the root (`PUT /api/v4/posts/{id}/patch`) with the buttons the new
//! state offers. Posts are rendered from the case as it is when sent.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::MattermostConfig;
use crate::outbox::{ChannelSender, ReplyPayload, SendError};
use crate::service::{BOARD, BoardKind, Services};
use vt_store::{Case, CaseState, OutboxItem};

/// Sends the support board's items to the support channel.
pub struct BoardSender {
    client: reqwest::Client,
    config: Arc<MattermostConfig>,
    service: Arc<Services>,
    channel_id: String,
}

impl BoardSender {
    /// `None` without a bot to post as, or without a support channel.
    pub fn new(config: Arc<MattermostConfig>, service: Arc<Services>) -> Option<Self> {
        let channel_id = config.canal_suporte.clone()?;
        (config.bot_token.is_some() && config.url.is_some()).then(|| Self {
            client: reqwest::Client::new(),
            config,
            service,
            channel_id,
        })
    }

    /// The root post's message and buttons for `case` now.
    fn root(&self, case: &Case) -> Value {
        let actions: &[(&str, &str)] = match case.state {
            CaseState::Aguardando => &[("assumir", "Assumir"), ("encerrar", "Encerrar")],
            CaseState::EmAtendimento => &[
                ("devolver", "Devolver ao bot"),
                ("propor", "Propor recarga"),
                ("encerrar", "Encerrar"),
            ],
            CaseState::Devolvido | CaseState::Encerrado => &[],
        };
        json!({
            "message": self.service.cases().case_text(case),
            "props": {"attachments": self.config.case_buttons(case, actions)},
        })
    }
}

#[async_trait]
impl ChannelSender for BoardSender {
    fn channel(&self) -> &str {
        BOARD
    }

    async fn send(&self, item: &OutboxItem, reply: &ReplyPayload) -> Result<Option<String>, SendError> {
        let kind = BoardKind::parse(&item.kind)
            .ok_or_else(|| SendError::Permanent(format!("não é um item do quadro: {}", item.kind)))?;
        // A board item names its case where a reply names its user.
        let case = match self.service.stores().cases.case(&reply.user_id).await {
            Ok(Some(case)) => case,
            Ok(None) => return Err(SendError::Permanent("o atendimento não existe mais".into())),
            Err(_) => {
                return Err(SendError::Retry {
                    reason: "store unavailable".into(),
                    after: None,
                });
            }
        };
        let root = case.board_post.clone();
        match (kind, root) {
            (BoardKind::Opened, Some(post)) => Ok(Some(post)),
            (BoardKind::Opened, None) => {
                let mut body = self.root(&case);
                body["channel_id"] = json!(self.channel_id);
                let posted = super::api(
                    &self.config,
                    self.client.post(self.config.api_url("posts")),
                    &body,
                )
                .await?;
                let post = posted["id"].as_str().unwrap_or_default().to_owned();
                if post.is_empty() {
                    return Err(SendError::Permanent(
                        "mattermost answered without a post id".into(),
                    ));
                }
                self.service
                    .cases()
                    .board_posted(&case.id, &post)
                    .await
                    .map_err(|_| SendError::Retry {
                        reason: "store unavailable".into(),
                        after: None,
                    })?;
                Ok(Some(post))
            }
            // A warning to the team: a post of its own in the team's channel (else the board's).
            (BoardKind::Alert, _) => {
                let channel = reply.reply_to.as_deref().unwrap_or(&self.channel_id);
                let body = json!({"channel_id": channel, "message": reply.text});
                super::create_post(&self.config, &self.client, &body).await
            }
            // Items of a case go out in order: the root is posted before anything under it.
            (_, None) => Err(SendError::Permanent(
                "o atendimento não tem publicação no quadro".into(),
            )),
            (BoardKind::Line, Some(root)) => {
                let body = json!({"channel_id": self.channel_id, "root_id": root, "message": reply.text});
                super::create_post(&self.config, &self.client, &body).await
            }
            (BoardKind::State, Some(root)) => {
                let body = self.root(&case);
                super::api(
                    &self.config,
                    self.client
                        .put(self.config.api_url(&format!("posts/{root}/patch"))),
                    &body,
                )
                .await?;
                Ok(None)
            }
        }
    }
}
