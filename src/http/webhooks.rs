//! Late messages of HTTP conversations, pushed to the integrator: a receipt, a person's reply in a
//! case, a recharge's late outcome, a Pix code that expired — whatever the product says outside a turn.
//! Two ways, the same events:
//!
//! - **Signed webhooks** (`[[http.webhooks]]`, one per tenant), in the Standard Webhooks format:
//!   `webhook-id` (the message's, the same on every retry, so a receiver dedupes),
//!   `webhook-timestamp` (seconds) and `webhook-signature: v1,<base64 HMAC-SHA256 of
//!   "id.timestamp.body">`, one per secret during a rotation. They go out from the outbox as any
//!   channel's replies do: in order per conversation, retried, dead-lettered with their reason.
//! - **Server-Sent Events** at `GET /v1/conversations/{id}/events`, for clients that hold a connection:
//!   each late message stored since the connection (or since `Last-Event-ID`), its id the message's.
//!
//! The body is one JSON object: `{"type": "message.created", "timestamp", "data": {"conversation_id",
//! "message_id", "role", "name"?, "text", "pix"?, "cartao"?, "buttons"?}}`; the card masked, payment
//! codes whole. A message is one message everywhere: its id (`msg_<n>`), time and role are the stored
//! message's in the webhook, the event stream and `GET /v1/conversations/{id}` (a person's words are
//! `human_agent`, their name in `name`, never in the text).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use base64::Engine as _;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use super::auth::Caller;
use super::config::{WebhookConfig, key_of};
use super::error::ApiError;
use super::state::AppState;
use crate::outbox::{ChannelSender, ReplyPayload, SendError};
use vt_engine::llm::ChatMessage;
use vt_store::{ConversationStore, OutboxItem, PixStore};

/// The channel HTTP conversations are recorded under (their late messages' outbox destination).
pub(crate) const CHANNEL: &str = "http";
/// How often an event stream looks for new messages.
const POLL: Duration = Duration::from_millis(300);
/// The longest a delivery may take before it is tried again.
const TIMEOUT: Duration = Duration::from_secs(10);

/// `webhook-signature` for `id`, `timestamp` and `body` under each of `keys`: `v1,<base64>` each,
/// separated by spaces.
pub(crate) fn sign(keys: &[Vec<u8>], id: &str, timestamp: i64, body: &[u8]) -> String {
    keys.iter()
        .map(|key| {
            let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes a key of any length");
            mac.update(format!("{id}.{timestamp}.").as_bytes());
            mac.update(body);
            format!(
                "v1,{}",
                base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A late message as an integrator reads it, in the webhook, the event stream and
/// `GET /v1/conversations/{id}` alike: the stored message's id and time, `assistant` or `human_agent`
/// (with the person's `name`), its own words.
struct Late<'a> {
    /// Its public id ([`message_public_id`]).
    id: String,
    at: DateTime<Utc>,
    role: &'static str,
    name: Option<&'a str>,
    text: &'a str,
}

impl<'a> Late<'a> {
    /// `m` as a late message: said outside a turn (no execution), by the product or a person.
    fn of(m: &'a vt_store::StoredMessage) -> Option<Self> {
        if m.execucao_id.is_some() {
            return None;
        }
        Self::said(m)
    }

    /// `m` as the product or a person said it, in a turn or not (a webhook pushes a turn's reply when
    /// the turn was not the caller's: a support agent's proposal).
    fn said(m: &'a vt_store::StoredMessage) -> Option<Self> {
        let (role, name, text) = match &m.message {
            ChatMessage::Assistant { content: Some(t), .. } if !t.trim().is_empty() => {
                ("assistant", None, t.as_str())
            }
            ChatMessage::HumanAgent { name, content } => {
                ("human_agent", Some(name.as_str()), content.as_str())
            }
            _ => return None,
        };
        Some(Self {
            id: message_public_id(m.id),
            at: m.created_at,
            role,
            name,
            text,
        })
    }
}

/// The public id of the stored message `id`: `msg_<id>`, the same in every way it is read.
pub(crate) fn message_public_id(id: i64) -> String {
    format!("msg_{id}")
}

/// The stored message id in a public one (`msg_<id>`, or the bare number).
fn message_id_in(public: &str) -> Option<i64> {
    let public = public.trim();
    public.strip_prefix("msg_").unwrap_or(public).parse().ok()
}

/// The event a late message is: `data` holds the text and, for a reply that carries a payment, its
/// fields as the HTTP reply has them.
async fn event_body(
    pix: &dyn PixStore,
    conversation_id: &str,
    late: &Late<'_>,
    files: &[vt_contract::FileContent],
) -> Value {
    // Cards masked; the conversation's own payment codes whole (its person's to copy).
    let codes: Vec<String> = pix
        .conversation_charges(conversation_id)
        .await
        .unwrap_or_default()
        .iter()
        .flat_map(vt_store::PixCharge::codes)
        .collect();
    let mut data = json!({
        "conversation_id": conversation_id,
        "message_id": late.id,
        "role": late.role,
        "text": vt_domain::vt::card::mask_cards_except(late.text, &codes),
    });
    if let Some(name) = late.name {
        data["name"] = json!(name);
    }
    if let Some(p) = super::conversations::pix_of(pix, files).await {
        data["pix"] = json!({"copia_e_cola": p.copia_e_cola, "qr_png_base64": p.qr_png_base64, "expira_em": p.expira_em});
    }
    if let Some(c) = super::conversations::cartao_of(pix, files).await {
        data["cartao"] = json!({"link": c.link, "expira_em": c.expira_em});
    }
    // Quick replies (the satisfaction question's 1–5): send the `id` back as the next text.
    if let Some(choices) = crate::service::late_choices(late.text) {
        let buttons: Vec<Value> = choices
            .iter()
            .enumerate()
            .map(|(i, title)| json!({"id": (i + 1).to_string(), "title": title}))
            .collect();
        data["buttons"] = json!(buttons);
    }
    json!({"type": "message.created", "timestamp": late.at, "data": data})
}

/// Where each tenant's webhook goes, and its keys.
struct Target {
    url: String,
    keys: Vec<Vec<u8>>,
}

/// The outbox sender of HTTP conversations' late messages: each to its tenant's webhook, signed.
pub(crate) struct WebhookSender {
    targets: HashMap<String, Target>,
    conversations: Arc<dyn ConversationStore>,
    pix: Arc<dyn PixStore>,
    client: reqwest::Client,
}

impl WebhookSender {
    pub(crate) fn new(
        webhooks: &[WebhookConfig],
        conversations: Arc<dyn ConversationStore>,
        pix: Arc<dyn PixStore>,
    ) -> Self {
        let targets = webhooks
            .iter()
            .map(|w| {
                let keys = w.secrets.iter().filter_map(|s| key_of(s)).collect();
                (
                    w.tenant.clone(),
                    Target {
                        url: w.url.clone(),
                        keys,
                    },
                )
            })
            .collect();
        Self {
            targets,
            conversations,
            pix,
            client: reqwest::Client::builder()
                .timeout(TIMEOUT)
                .build()
                .unwrap_or_default(),
        }
    }

    /// The stored message `item` carries: the one it names, else the newest with its words (`text`).
    async fn stored_message(
        &self,
        conversation_id: &str,
        item: &OutboxItem,
        text: &str,
    ) -> Result<Option<vt_store::StoredMessage>, SendError> {
        let store_failed = |e: vt_store::StoreError| SendError::Retry {
            reason: format!("store: {e}"),
            after: None,
        };
        let Some(id) = item.message_id else {
            // A turn's reply sent by the outbox (a proposal the caller did not ask for): the newest of
            // the conversation's messages with its words.
            let all = self
                .conversations
                .messages(conversation_id)
                .await
                .map_err(store_failed)?;
            return Ok(all.into_iter().rev().find(
                |m| matches!(&m.message, ChatMessage::Assistant { content: Some(t), .. } if t == text),
            ));
        };
        let after = self
            .conversations
            .messages_after(conversation_id, id - 1)
            .await
            .map_err(store_failed)?;
        Ok(after.into_iter().find(|m| m.id == id))
    }

    /// The tenants whose late messages it pushes.
    pub(crate) fn tenants(&self) -> impl Iterator<Item = &str> {
        self.targets.keys().map(String::as_str)
    }
}

#[async_trait::async_trait]
impl ChannelSender for WebhookSender {
    fn channel(&self) -> &str {
        CHANNEL
    }

    async fn send(&self, item: &OutboxItem, reply: &ReplyPayload) -> Result<Option<String>, SendError> {
        let conv = self
            .conversations
            .conversation(&reply.conversation_id)
            .await
            .map_err(|e| SendError::Retry {
                reason: format!("store: {e}"),
                after: None,
            })?
            .ok_or_else(|| {
                SendError::Permanent("a late message of a conversation no longer on record".into())
            })?;
        // A tenant with no webhook reads its conversations (and their events) itself.
        let Some(target) = self.targets.get(&conv.tenant_id) else {
            return Ok(None);
        };
        let stored = self.stored_message(&conv.id, item, &reply.text).await?;
        let late = stored.as_ref().and_then(Late::said);
        // A message not on record (an item queued before items named their message): the item's own
        // id, its text as it was queued.
        let late = late.unwrap_or(Late {
            id: format!("outbox_{}", item.id),
            at: Utc::now(),
            role: "assistant",
            name: None,
            text: &reply.text,
        });
        let id = late.id.clone();
        let mut body = event_body(self.pix.as_ref(), &conv.id, &late, &reply.files).await;
        // A recharge waiting for the card holder's confirmation (a support agent's proposal): the
        // same buttons as a turn's answer has.
        if reply.confirmation.is_some() {
            body["data"]["buttons"] =
                json!([{"id": "sim", "title": "Confirmar"}, {"id": "não", "title": "Cancelar"}]);
        }
        let body = vt_contract::json::to_bytes(&body).map_err(|e| SendError::Permanent(e.to_string()))?;
        let timestamp = Utc::now().timestamp();
        let answer = self
            .client
            .post(&target.url)
            .header("content-type", "application/json")
            .header("webhook-id", &id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", sign(&target.keys, &id, timestamp, &body))
            .body(body)
            .send()
            .await
            .map_err(|e| SendError::Retry {
                reason: if e.is_timeout() {
                    "webhook: no answer in time".into()
                } else {
                    "webhook: connection failed".into()
                },
                after: None,
            })?;
        let status = answer.status();
        if status.is_success() {
            return Ok(Some(id));
        }
        // The receiver's own words stay out: only its status is on record.
        let reason = format!("webhook answered {}", status.as_u16());
        if status.is_server_error() || status.as_u16() == 429 || status.as_u16() == 408 {
            Err(SendError::Retry { reason, after: None })
        } else {
            Err(SendError::Permanent(reason))
        }
    }
}

/// `GET /v1/conversations/{id}/events`: the conversation's late messages as Server-Sent Events, from
/// the connection on (or after `Last-Event-ID`, to catch up without a duplicate), each once. A
/// conversation its first POST has not created yet may be opened first: it streams from its first
/// message; another tenant's conversation is 404.
#[utoipa::path(get, path = "/v1/conversations/{id}/events",
    params(("id" = String, Path, description = "The conversation"),
           ("Last-Event-ID" = Option<String>, Header, description = "The last event received, to resume after it")),
    responses((status = 200, description = "text/event-stream of message.created events"),
              (status = 401, body = super::error::ErrorBody), (status = 404, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn events(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Sse<impl futures::Stream<Item = Result<Event, std::convert::Infallible>>>, ApiError> {
    let store = state.stores.conversations.clone();
    let existing = store
        .conversation(&id)
        .await
        .map_err(|e| ApiError::internal("conversation could not be read", &e))?;
    // Another tenant's conversation is not found; one that does not exist yet may be opened first (an
    // app listens before its first POST creates it) and is watched from its first message.
    if existing.as_ref().is_some_and(|c| c.tenant_id != caller.tenant) {
        return Err(ApiError::not_found("a conversa"));
    }
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(message_id_in);
    // Without a place to resume from, only what is said from now on.
    let after = match (resume, &existing) {
        (Some(last), _) => last,
        (None, None) => 0,
        (None, Some(_)) => store
            .messages(&id)
            .await
            .map_err(|e| ApiError::internal("messages could not be read", &e))?
            .last()
            .map_or(0, |m| m.id),
    };
    let pix = state.stores.pix.clone();
    let tenant = caller.tenant.clone();
    let stream = futures::stream::unfold(
        (after, std::collections::VecDeque::new(), existing.is_some()),
        move |(mut after, mut ready, mut owned)| {
            let (store, pix, id, tenant) = (store.clone(), pix.clone(), id.clone(), tenant.clone());
            async move {
                loop {
                    if let Some(event) = ready.pop_front() {
                        return Some((Ok(event), (after, ready, owned)));
                    }
                    tokio::time::sleep(POLL).await;
                    // A stream opened before its conversation existed reads nothing until it is the
                    // caller's tenant's; created by another tenant, the stream ends.
                    if !owned {
                        match store.conversation(&id).await {
                            Ok(Some(c)) if c.tenant_id == tenant => owned = true,
                            Ok(Some(_)) => return None,
                            _ => continue,
                        }
                    }
                    let Ok(messages) = store.messages_after(&id, after).await else {
                        continue;
                    };
                    for m in messages {
                        after = m.id;
                        if let Some(event) = late_event(pix.as_ref(), &id, &m).await {
                            ready.push_back(event);
                        }
                    }
                }
            }
        },
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// A stored message as an event, when it is a late one ([`Late::of`]).
async fn late_event(pix: &dyn PixStore, conversation_id: &str, m: &vt_store::StoredMessage) -> Option<Event> {
    let late = Late::of(m)?;
    let body = event_body(pix, conversation_id, &late, &[]).await;
    Some(
        Event::default()
            .id(late.id)
            .event("message.created")
            .data(body.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Standard Webhooks' own example: the secret, id, timestamp and body of its specification give
    /// this signature.
    #[test]
    fn signs_as_standard_webhooks_says() {
        let key = key_of("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("key");
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(
                std::slice::from_ref(&key),
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                body
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        let two = sign(&[key.clone(), b"outra".to_vec()], "msg_1", 1, body);
        assert_eq!(
            two.split(' ').count(),
            2,
            "one signature per secret during a rotation"
        );
        assert!(key_of("whsec_").is_none() && key_of("").is_none());
        assert_eq!(key_of("texto").as_deref(), Some(&b"texto"[..]));
    }
}
