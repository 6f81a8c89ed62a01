//! WhatsApp Cloud API JSON, as Meta documents it: the webhook notification we receive and the bodies we
//! send. Private to the channel: nothing here crosses into the service.

use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize)]
pub(super) struct Notification {
    #[serde(default)]
    pub entry: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Entry {
    #[serde(default)]
    pub changes: Vec<Change>,
}

/// One change of an entry: messages and statuses (`field` "messages"), or a template's lifecycle
/// (`message_template_status_update`, `template_category_update`), each with its own `value`.
#[derive(Debug, Deserialize)]
pub(super) struct Change {
    #[serde(default)]
    pub field: String,
    pub value: serde_json::Value,
}

/// `message_template_status_update`'s value.
#[derive(Debug, Deserialize)]
pub(super) struct TemplateStatusUpdate {
    pub event: String,
    pub message_template_name: String,
    pub message_template_language: String,
    #[serde(default)]
    pub reason: Option<String>,
}

/// `template_category_update`'s value.
#[derive(Debug, Deserialize)]
pub(super) struct TemplateCategoryUpdate {
    pub message_template_name: String,
    pub message_template_language: String,
    pub new_category: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct Value {
    pub metadata: Metadata,
    #[serde(default)]
    pub contacts: Vec<Contact>,
    #[serde(default)]
    pub messages: Vec<Message>,
    #[serde(default)]
    pub statuses: Vec<Status>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Metadata {
    pub phone_number_id: String,
}

/// Who wrote: their phone (`wa_id`, withheld from a username adopter) and their business-scoped user
/// id (`user_id`, `CC.…`).
#[derive(Debug, Deserialize)]
pub(super) struct Contact {
    #[serde(default)]
    pub wa_id: Option<String>,
    #[serde(default)]
    pub user_id: Option<String>,
    #[serde(default)]
    pub profile: Option<Profile>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Profile {
    #[serde(default)]
    pub name: Option<String>,
    /// Their WhatsApp username (`@ana`): shown, never a key (it changes).
    #[serde(default)]
    pub username: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Message {
    /// The sender's phone — or, for a username adopter with no recent contact, absent or their BSUID.
    #[serde(default)]
    pub from: Option<String>,
    /// The sender's business-scoped user id.
    #[serde(default)]
    pub from_user_id: Option<String>,
    pub id: String,
    /// When the user sent it, in Unix seconds (a string, as Meta sends it).
    #[serde(default)]
    pub timestamp: Option<String>,
    /// A tap on a template's quick-reply button.
    #[serde(default)]
    pub button: Option<TemplateButton>,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<Text>,
    #[serde(default)]
    pub interactive: Option<Interactive>,
    /// A voice note (`voice: true`) or an audio file.
    #[serde(default)]
    pub audio: Option<IncomingMedia>,
    /// A photo (its `caption`, if any, is not read).
    #[serde(default)]
    pub image: Option<IncomingMedia>,
    /// A change of who the sender is (`user_id_update`: a new BSUID; `user_changed_number`).
    #[serde(default)]
    pub system: Option<System>,
}

/// A system message: the sender's new identifier (`user_id` for a BSUID, `wa_id` for a phone).
#[derive(Debug, Deserialize)]
pub(super) struct System {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub user_id: Option<String>,
    #[serde(default)]
    pub wa_id: Option<String>,
}

/// A media message's object: its handle, never bytes or a URL.
#[derive(Debug, Deserialize)]
pub(super) struct IncomingMedia {
    pub id: String,
    #[serde(default)]
    pub mime_type: String,
}

/// `GET /{media-id}`: where the bytes are, for a few minutes.
#[derive(Debug, Deserialize)]
pub(super) struct MediaUrl {
    pub url: String,
    #[serde(default)]
    pub sha256: Option<String>,
    #[serde(default)]
    pub file_size: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(super) struct TemplateButton {
    #[serde(default)]
    pub text: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct Text {
    pub body: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct Interactive {
    #[serde(default)]
    pub button_reply: Option<Reply>,
    #[serde(default)]
    pub list_reply: Option<Reply>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Reply {
    pub id: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct Status {
    /// The wamid of *our* message.
    pub id: String,
    pub status: String,
    /// Who it went to: their phone, when sent to it or known.
    #[serde(default)]
    pub recipient_id: Option<String>,
    /// Who it went to: their business-scoped user id.
    #[serde(default)]
    pub recipient_user_id: Option<String>,
    #[serde(default)]
    pub errors: Vec<StatusError>,
}

#[derive(Debug, Deserialize)]
pub(super) struct StatusError {
    pub code: i64,
}

/// `POST /{phone_number_id}/messages`.
#[derive(Debug, Serialize)]
pub(super) struct Outgoing<'a> {
    pub messaging_product: &'static str,
    pub recipient_type: &'static str,
    #[serde(flatten)]
    pub to: Addressee<'a>,
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<OutText<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interactive: Option<OutInteractive<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<MediaRef<'a>>,
}

/// Who a message goes to: a phone in `to`, a business-scoped user id in `recipient` (Meta's rule: `to`
/// wins when both are sent, so only one is).
#[derive(Debug, Serialize)]
pub(super) enum Addressee<'a> {
    #[serde(rename = "to")]
    Phone(&'a str),
    #[serde(rename = "recipient")]
    Bsuid(&'a str),
}

impl<'a> Addressee<'a> {
    /// `address` in the field Meta takes it in.
    pub(super) fn of(address: &'a str) -> Self {
        if super::identity::is_bsuid(address) {
            Self::Bsuid(address)
        } else {
            Self::Phone(address)
        }
    }

    /// The field's name and value, for a body built as JSON.
    pub(super) fn field(&self) -> (&'static str, &'a str) {
        match self {
            Self::Phone(p) => ("to", p),
            Self::Bsuid(b) => ("recipient", b),
        }
    }
}

/// An uploaded medium, by its id.
#[derive(Debug, Serialize)]
pub(super) struct MediaRef<'a> {
    pub id: &'a str,
}

/// What `POST /{phone-number-id}/media` answers.
#[derive(Debug, Deserialize)]
pub(super) struct Uploaded {
    pub id: String,
}

#[derive(Debug, Serialize)]
pub(super) struct OutText<'a> {
    pub body: &'a str,
    pub preview_url: bool,
}

#[derive(Debug, Serialize)]
pub(super) struct OutInteractive<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub body: OutBody<'a>,
    pub action: OutAction,
}

#[derive(Debug, Serialize)]
pub(super) struct OutBody<'a> {
    pub text: &'a str,
}

/// Reply buttons, or a list's button and sections.
#[derive(Debug, Serialize)]
pub(super) struct OutAction {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub buttons: Vec<OutButton>,
    /// The button that opens a list (at most 20 characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub button: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sections: Vec<OutSection>,
    /// `cta_url`: a button that opens a link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<OutCta>,
}

/// A `cta_url` button: its text (at most 20 characters) and the link it opens.
#[derive(Debug, Serialize)]
pub(super) struct OutCta {
    pub display_text: &'static str,
    pub url: String,
}

/// A list's section: at most ten rows in all sections together.
#[derive(Debug, Serialize)]
pub(super) struct OutSection {
    pub title: &'static str,
    pub rows: Vec<OutRow>,
}

/// A list's row: an id of at most 200 characters, a title of at most 24.
#[derive(Debug, Serialize)]
pub(super) struct OutRow {
    pub id: String,
    pub title: String,
}

#[derive(Debug, Serialize)]
pub(super) struct OutButton {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub reply: OutReply,
}

#[derive(Debug, Serialize)]
pub(super) struct OutReply {
    pub id: String,
    pub title: String,
}

/// Marks an inbound message read.
#[derive(Debug, Serialize)]
pub(super) struct MarkRead<'a> {
    pub messaging_product: &'static str,
    pub status: &'static str,
    pub message_id: &'a str,
    /// Shows "typing…" until we reply (or 25 s pass).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub typing_indicator: Option<TypingIndicator>,
}

#[derive(Debug, Serialize)]
pub(super) struct TypingIndicator {
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// The answer to a send.
#[derive(Debug, Deserialize)]
pub(super) struct Sent {
    #[serde(default)]
    pub messages: Vec<SentMessage>,
}

#[derive(Debug, Deserialize)]
pub(super) struct SentMessage {
    pub id: String,
}

/// The error envelope: branch on `error.code`, never on the HTTP status (rate limits come as 400).
#[derive(Debug, Deserialize)]
pub(super) struct ErrorEnvelope {
    pub error: GraphError,
}

#[derive(Debug, Deserialize)]
pub(super) struct GraphError {
    pub code: i64,
    #[serde(default)]
    pub message: String,
}
