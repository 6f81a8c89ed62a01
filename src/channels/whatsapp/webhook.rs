//! `GET|POST /channels/whatsapp/webhook`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::{
    CANCEL_PREFIX, CHANNEL, CONFIRM_PREFIX, PICK_PREFIX, WhatsAppConfig, conversation_id, identity, wire,
};
use crate::channels::same_secret;
use crate::service::{Delivery, Inbound, NotWaiting, Received, Services, Tap};
use vt_engine::Participant;
use vt_store::{Media, MediaKind};

/// Meta sends notifications of up to 3 MB.
const BODY_LIMIT: usize = 3 * 1024 * 1024;

#[derive(Clone)]
pub(crate) struct WebhookState {
    pub service: Arc<Services>,
    /// The agent this channel's people talk to.
    pub agent: String,
    pub config: Arc<WhatsAppConfig>,
    /// The tenant the channel's conversations belong to.
    pub tenant: String,
    /// The Graph API, for the read receipt and typing indicator of a message being worked on.
    pub graph: Option<Arc<super::Sender>>,
}

/// The webhook's routes, with their own body limit.
pub(super) fn routes(state: WebhookState) -> Vec<(&'static str, axum::routing::MethodRouter)> {
    vec![(
        "/channels/whatsapp/webhook",
        get(verify)
            .post(receive)
            .layer(DefaultBodyLimit::max(BODY_LIMIT))
            .with_state(state),
    )]
}

/// Meta's subscription check: the right token gets the challenge back verbatim, as plain text.
async fn verify(State(state): State<WebhookState>, Query(q): Query<HashMap<String, String>>) -> Response {
    let expected = state.config.verify_token.as_deref().unwrap_or_default();
    let token_ok = q
        .get("hub.verify_token")
        .is_some_and(|t| same_secret(t, expected));
    match (q.get("hub.mode").map(String::as_str), q.get("hub.challenge")) {
        (Some("subscribe"), Some(challenge)) if token_ok => {
            ([("content-type", "text/plain")], challenge.clone()).into_response()
        }
        _ => StatusCode::FORBIDDEN.into_response(),
    }
}

/// `sha256=<hex HMAC-SHA256(app secret, raw body)>`, checked in constant time.
pub(super) fn signature_ok(app_secret: &str, body: &[u8], header: Option<&str>) -> bool {
    let Some(hex_sig) = header.and_then(|h| h.trim().strip_prefix("sha256=")) else {
        return false;
    };
    let Ok(sig) = hex::decode(hex_sig) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(app_secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&sig).is_ok()
}

/// A notification: every status and message in it stored (the 200 says so), then each message's
/// turn run in a task of its own. Anything not stored is a 503, so Meta delivers it again.
async fn receive(State(state): State<WebhookState>, headers: HeaderMap, body: Bytes) -> Response {
    let notification = match verified(&state, &headers, &body) {
        Ok(n) => n,
        Err(status) => return status.into_response(),
    };
    let mut accepted = Vec::new();
    let answer = store_all(&state, notification, &mut accepted).await;
    // What was stored runs even when a later message was not (and the 503 makes Meta deliver the
    // notification again): the stored ones are redeliveries then, never processed otherwise.
    for received in accepted {
        let (service, graph) = (state.service.clone(), state.graph.clone());
        let wamid = received.message.channel_message_id.clone();
        state.service.messages().spawn(async move {
            // "typing…" goes out beside the turn, never before it.
            let typing = async {
                if let (Some(graph), Some(id)) = (&graph, wamid.as_deref()) {
                    graph.read_and_typing(id).await;
                }
            };
            let messages = service.messages();
            let (_, turn) = tokio::join!(typing, messages.process(received));
            if let Err(e) = turn {
                tracing::error!(error = %e, "whatsapp turn failed");
            }
        });
    }
    answer.into_response()
}

/// Stores every status and message of the notification, the messages into `accepted`: 200 when
/// everything is stored, 503 at the first that is not.
async fn store_all(
    state: &WebhookState,
    notification: wire::Notification,
    accepted: &mut Vec<Received>,
) -> StatusCode {
    for change in notification.entry.into_iter().flat_map(|e| e.changes) {
        let value = match change.field.as_str() {
            "" | "messages" => match vt_contract::json::from_value::<wire::Value>(change.value) {
                Ok(v) => v,
                Err(_) => return StatusCode::BAD_REQUEST,
            },
            "message_template_status_update" | "template_category_update" => {
                if let Err(status) = record_template(state, &change.field, change.value).await {
                    return status;
                }
                continue;
            }
            other => {
                tracing::info!(field = other, "whatsapp webhook change of a kind we do not use");
                continue;
            }
        };
        if let Err(status) = record_statuses(state, &value).await {
            return status;
        }
        for m in &value.messages {
            if m.kind == "system" {
                if let Err(status) = record_change(state, &value.metadata.phone_number_id, m).await {
                    return status;
                }
                continue;
            }
            let person = match person(state, &value, m).await {
                Ok(Some(person)) => person,
                Ok(None) => continue,
                Err(status) => return status,
            };
            // Stored with the message: when the user wrote, from which their 24-hour window counts (what
            // waited for it goes out, in the same transaction).
            let msg = inbound(state, &value, m, &person);
            match state.service.messages().receive(&msg).await {
                Ok(Some(mut received)) => {
                    greet(state, &received).await;
                    received.join_within = std::time::Duration::from_millis(state.config.juntar_ms);
                    accepted.push(received);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(error = %e, "whatsapp message could not be stored");
                    return StatusCode::SERVICE_UNAVAILABLE;
                }
            }
        }
    }
    StatusCode::OK
}

/// A person's first message gets the privacy notice before its answer, once: `greet` says it only in
/// a conversation the message opened. Not said (the store failed), it is logged and the answer goes
/// on: the message is stored, and a 503 now would only make Meta deliver a message this process
/// already has.
async fn greet(state: &WebhookState, received: &Received) {
    let notice = state.config.aviso_privacidade.trim();
    if notice.is_empty() {
        return;
    }
    if let Err(e) = state.service.messages().greet(received, notice).await {
        tracing::error!(error = %e, "the privacy notice could not be said");
    }
}

/// The notification, when its signature is Meta's (over the raw bytes) and its body is one.
fn verified(
    state: &WebhookState,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<wire::Notification, StatusCode> {
    let secret = state.config.app_secret.as_deref().unwrap_or_default();
    let header = headers.get("x-hub-signature-256").and_then(|v| v.to_str().ok());
    if secret.is_empty() || !signature_ok(secret, body, header) {
        tracing::warn!("whatsapp webhook with a missing or wrong signature refused");
        return Err(StatusCode::UNAUTHORIZED);
    }
    vt_contract::json::from_bytes(body).map_err(|e| {
        tracing::warn!(error = %vt_contract::redact::serde_message(&e.to_string()), "whatsapp webhook body unreadable");
        StatusCode::BAD_REQUEST
    })
}

/// When the user wrote `m`, by Meta's timestamp: a clock ahead of ours counts from now.
fn wrote_at(m: &wire::Message) -> chrono::DateTime<chrono::Utc> {
    let now = chrono::Utc::now();
    m.timestamp
        .as_deref()
        .and_then(|t| t.parse::<i64>().ok())
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .map_or(now, |t| t.min(now))
}

/// A template's lifecycle as Meta reports it, on record: a paused, disabled, rejected or
/// re-categorised template is not used until approved again.
async fn record_template(
    state: &WebhookState,
    field: &str,
    value: serde_json::Value,
) -> Result<(), StatusCode> {
    let now = chrono::Utc::now();
    let template_state = if field == "message_template_status_update" {
        let u: wire::TemplateStatusUpdate =
            vt_contract::json::from_value(value).map_err(|_| StatusCode::BAD_REQUEST)?;
        vt_store::TemplateState {
            name: u.message_template_name,
            language: u.message_template_language,
            status: Some(u.event),
            category: None,
            reason: u.reason,
            updated_at: now,
        }
    } else {
        let u: wire::TemplateCategoryUpdate =
            vt_contract::json::from_value(value).map_err(|_| StatusCode::BAD_REQUEST)?;
        vt_store::TemplateState {
            name: u.message_template_name,
            language: u.message_template_language,
            status: None,
            category: Some(u.new_category),
            reason: None,
            updated_at: now,
        }
    };
    tracing::info!(template = %template_state.name, status = ?template_state.status, category = ?template_state.category, "whatsapp template update");
    state
        .service
        .contacts()
        .template_changed(&template_state)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "whatsapp template update could not be stored");
            StatusCode::SERVICE_UNAVAILABLE
        })
}

/// The person who wrote `m`, by what it names them ([`super::identity`]), on record before their message
/// is; `None` for a message that names no one (logged: nothing could answer it).
async fn person(
    state: &WebhookState,
    value: &wire::Value,
    m: &wire::Message,
) -> Result<Option<String>, StatusCode> {
    let ids = identity::of_message(&value.contacts, m);
    if ids.phone.is_none() && ids.bsuid.is_none() {
        tracing::warn!(kind = %m.kind, "whatsapp message without a phone or a BSUID ignored");
        return Ok(None);
    }
    let contacts = &state.service.stores().contacts;
    match contacts
        .whatsapp_person(&value.metadata.phone_number_id, &ids, chrono::Utc::now())
        .await
    {
        Ok(person) => Ok(Some(person)),
        Err(e) => {
            tracing::error!(error = %e, "whatsapp person could not be stored");
            Err(StatusCode::SERVICE_UNAVAILABLE)
        }
    }
}

/// A system message: who the sender is changed (a new BSUID, a new phone), on record — their
/// conversation goes on, sent to what is theirs now. Never a turn.
async fn record_change(state: &WebhookState, number: &str, m: &wire::Message) -> Result<(), StatusCode> {
    let Some(change) = identity::change_of(m) else {
        tracing::info!("whatsapp system message of a kind we do not use");
        return Ok(());
    };
    let contacts = &state.service.stores().contacts;
    match contacts
        .whatsapp_moved(number, (&change.0, &change.1), chrono::Utc::now())
        .await
    {
        Ok(Some(_)) => Ok(()),
        Ok(None) => {
            tracing::info!("whatsapp identity change of someone not on record");
            Ok(())
        }
        Err(e) => {
            tracing::error!(error = %e, "whatsapp identity change could not be stored");
            Err(StatusCode::SERVICE_UNAVAILABLE)
        }
    }
}

/// What Meta reports of the messages we sent, on record; a status that names both the recipient's
/// phone and BSUID links them.
async fn record_statuses(state: &WebhookState, value: &wire::Value) -> Result<(), StatusCode> {
    for s in &value.statuses {
        if let Some(ids) = identity::of_status(s)
            && let Err(e) = state
                .service
                .stores()
                .contacts
                .whatsapp_person(&value.metadata.phone_number_id, &ids, chrono::Utc::now())
                .await
        {
            tracing::error!(error = %e, "whatsapp status's identities could not be stored");
            return Err(StatusCode::SERVICE_UNAVAILABLE);
        }
        let code = s.errors.first().map(|e| e.code.to_string());
        match state
            .service
            .contacts()
            .delivery_status(&s.id, &s.status, code.as_deref(), chrono::Utc::now())
            .await
        {
            Ok(true) => {}
            Ok(false) => tracing::info!(status = %s.status, "status for a message that is not ours"),
            Err(e) => {
                tracing::error!(error = %e, "whatsapp status could not be stored");
                return Err(StatusCode::SERVICE_UNAVAILABLE);
            }
        }
    }
    Ok(())
}

/// One WhatsApp message as the service's [`Inbound`]: a text as it is, a tap on a button as the
/// words it stands for, anything else named as unsupported.
fn inbound(state: &WebhookState, value: &wire::Value, m: &wire::Message, person: &str) -> Inbound {
    let ids = identity::of_message(&value.contacts, m);
    let profile = identity::contact_of(&value.contacts, ids.phone.as_deref(), ids.bsuid.as_deref())
        .and_then(|c| c.profile.as_ref());
    let name = profile.and_then(|p| p.name.clone().or_else(|| p.username.clone()));
    let conversation = conversation_id(&value.metadata.phone_number_id, person);
    let mut msg = Inbound {
        agent_id: state.agent.clone(),
        conversation_id: Some(conversation.clone()),
        tenant_id: Some(state.tenant.clone()),
        user: Participant {
            user_id: person.to_owned(),
            user_login: name.unwrap_or_else(|| person.to_owned()),
            channel: CHANNEL.into(),
        },
        text: String::new(),
        channel_message_id: Some(m.id.clone()),
        delivery: Delivery::Outbox,
        contact_seen_at: Some(wrote_at(m)),
        ..Default::default()
    };
    let tapped = m
        .interactive
        .as_ref()
        .and_then(|i| i.button_reply.as_ref().or(i.list_reply.as_ref()));
    match (m.kind.as_str(), &m.text, tapped) {
        ("text", Some(t), _) => msg.text = t.body.clone(),
        ("interactive", _, Some(r)) => match pick(&r.id) {
            Some(index) => msg.pick = Some(index),
            None => msg.tap = Some(tap(&r.id)),
        },
        // A template's quick reply ("Continuar"): the words on it.
        ("button", ..) if m.button.as_ref().is_some_and(|b| !b.text.is_empty()) => {
            msg.text = m.button.as_ref().map(|b| b.text.clone()).unwrap_or_default();
        }
        // A voice note: heard under the turn lock, before its turn, when `[transcricao]` is set.
        ("audio", ..) if m.audio.is_some() => {
            msg.media = m.audio.as_ref().map(|a| media(MediaKind::Audio, a))
        }
        // A photo: read under the turn lock, when Tesseract is installed; the cards in it proposed.
        ("image", ..) if m.image.is_some() => {
            msg.media = m.image.as_ref().map(|i| media(MediaKind::Image, i))
        }
        (other, ..) => msg.unsupported = Some(other.to_owned()),
    }
    msg
}

fn media(kind: MediaKind, m: &wire::IncomingMedia) -> Media {
    Media {
        kind,
        id: m.id.clone(),
        mime: m.mime_type.clone(),
    }
}

/// A pick from one of our lists: the offered option's index (the service knows what it was).
fn pick(id: &str) -> Option<usize> {
    id.strip_prefix(PICK_PREFIX)?.parse().ok()
}

/// A tap on one of our buttons: the service makes it "sim" or "não" only for the recharge still
/// waiting in the conversation; an old or foreign id confirms nothing and is said as such.
fn tap(id: &str) -> Tap {
    let (recharge, confirm) = match (id.strip_prefix(CONFIRM_PREFIX), id.strip_prefix(CANCEL_PREFIX)) {
        (Some(pending), _) => (pending, true),
        (_, Some(pending)) => (pending, false),
        _ => ("", false),
    };
    Tap {
        recharge: recharge.to_owned(),
        confirm,
        otherwise: NotWaiting::stale(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metas_own_signature_vector() {
        // From Meta's WhatsApp Node.js SDK tests.
        let sig = "sha256=0c61947b610d4f45e65f3d680e26027121ec2413e77598bcb6cfc6e0d9888221";
        assert!(signature_ok("TEST_APP_SECRET", b"test", Some(sig)));
        assert!(!signature_ok("TEST_APP_SECRET", b"test ", Some(sig)));
        assert!(!signature_ok("other", b"test", Some(sig)));
        assert!(!signature_ok("TEST_APP_SECRET", b"test", None));
        assert!(!signature_ok("TEST_APP_SECRET", b"test", Some("0c61947b")));
    }
}
