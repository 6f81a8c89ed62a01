//! Sending outbox items through the Graph API.

use std::time::Duration;

use async_trait::async_trait;

use std::sync::Arc;

use super::templates::{Template, Templates};
use super::window::{Decision, HOLDS_THE_MESSAGE, Window};
use super::{CANCEL_PREFIX, CHANNEL, CONFIRM_PREFIX, PICK_PREFIX, WhatsAppConfig, orders, wire};
use crate::outbox::{ChannelSender, ReplyPayload, SendError};
use vt_store::{ContactStore, OutboxItem, PixStore, ReportStore};

/// The longest text message WhatsApp takes.
const MAX_TEXT: usize = 4096;
/// The longest body of an interactive message.
const MAX_BUTTON_BODY: usize = 1024;
/// Error codes that mean "slow down": retried (they come as HTTP 400).
const RATE_LIMITS: [i64; 3] = [130429, 131056, 80007];
/// The user has not written in 24 hours: only templates may be sent; retrying cannot help.
const OUTSIDE_WINDOW: i64 = 131047;
/// This kind of message cannot go to a business-scoped user id (authentication templates need a phone).
const NOT_TO_A_BSUID: i64 = 131062;

pub struct Sender {
    client: reqwest::Client,
    url: String,
    /// The business number (`phone_number_id`): whom its people are is kept per number.
    number: String,
    /// Where images are uploaded (`/{phone-number-id}/media`).
    media_url: String,
    token: String,
    /// The 24-hour window's rules; `None`: every reply as free text (Meta refuses it outside).
    window: Option<Window>,
    /// Who is reached where ([`super::identity`]); `None`: a reply goes to its user id as it is.
    people: Option<Arc<dyn ContactStore>>,
    /// The pace of sends per number and per person ([`super::pacer`]); `None`: as fast as they come.
    pacer: Option<super::pacer::Pacer>,
    /// Where a reply's files are drawn from (Pix charges); `None`: a reply with files is refused.
    files: Option<Arc<dyn PixStore>>,
    /// The operator's Pix key, where the account takes payments (`[pix] whatsapp_order_details`):
    /// charges go as native orders.
    pix_key: Option<String>,
    /// Where a template sent outside the window is put on record with its cost; `None`: not costed.
    costs: Option<Costs>,
}

/// What paid messages are costed at, for which tenant, and where that is kept.
struct Costs {
    store: Arc<dyn ReportStore>,
    prices: crate::costs::CustosConfig,
    tenant: String,
}

impl Sender {
    /// `None` when the channel is off.
    pub fn new(config: &WhatsAppConfig) -> Option<Self> {
        let (Some(phone), Some(token)) = (&config.phone_number_id, &config.access_token) else {
            return None;
        };
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .build()
            .ok()?;
        let base = format!(
            "{}/{}/{}",
            config.graph_url.trim_end_matches('/'),
            config.api_version,
            phone
        );
        Some(Self {
            client,
            number: phone.clone(),
            url: format!("{base}/messages"),
            media_url: format!("{base}/media"),
            token: token.clone(),
            window: None,
            people: None,
            pacer: None,
            files: None,
            pix_key: None,
            costs: None,
        })
    }

    /// Sending a reply's files (Pix QR codes) as images, drawn from the charges in `store`.
    pub fn with_files(mut self, store: Arc<dyn PixStore>) -> Self {
        self.files = Some(store);
        self
    }

    /// Charges shown as WhatsApp's native orders, paid to the operator's Pix key `key` (accounts Meta
    /// enabled for payments).
    pub fn with_pix_orders(mut self, key: Option<String>) -> Self {
        self.pix_key = key;
        self
    }

    /// A reply with files: its text (if any), then each file: a charge's QR uploaded and sent as an
    /// image, a charge's native order (`order_details`) or its status (`order_status`). The first
    /// message's id is the item's.
    async fn send_files(&self, to: &str, reply: &ReplyPayload) -> Result<Option<String>, GraphFailure> {
        let Some(store) = &self.files else {
            return Err(SendError::Permanent("a reply with files, and no way to draw them".into()).into());
        };
        let mut first = self.send_text(to, &reply.text).await?;
        for file in &reply.files {
            if let Some((pedido, txid)) = vt_domain::tools::PedidoPix::of(file) {
                let key = self.pix_key.as_deref().ok_or_else(|| {
                    SendError::Permanent("a native Pix order, and no Pix key to show".into())
                })?;
                let charge = crate::channels::charge_of(store.as_ref(), txid).await?;
                if let Some(message) = orders::message(pedido, to, &charge, key) {
                    first = first.or(self.post(&message).await?);
                }
                continue;
            }
            // A card checkout's link: a button that opens the provider's page.
            if let Some(id) = vt_domain::tools::link_of(file) {
                let charge = crate::channels::charge_of(store.as_ref(), id).await?;
                let message = link_button(to, LINK_BODY, charge.copia_e_cola);
                first = first.or(self.post(&message).await?);
                continue;
            }
            let upload = crate::channels::upload_of(store.as_ref(), file).await?;
            let media = self.upload(upload).await?;
            let image = wire::Outgoing {
                messaging_product: "whatsapp",
                recipient_type: "individual",
                to: wire::Addressee::of(to),
                kind: "image",
                text: None,
                interactive: None,
                image: Some(wire::MediaRef { id: &media }),
            };
            first = first.or(self.post(&image).await?);
        }
        Ok(first)
    }

    /// `text` as text messages within WhatsApp's limit (none when it is empty); the first one's id.
    async fn send_text(&self, to: &str, text: &str) -> Result<Option<String>, GraphFailure> {
        let mut first = None;
        for part in split(text, MAX_TEXT).into_iter().filter(|p| !p.is_empty()) {
            first = first.or(self.post(&text_message(to, &part)).await?);
        }
        Ok(first)
    }

    /// `POST /{phone-number-id}/media`: the image uploaded; its media id.
    async fn upload(&self, upload: crate::channels::Upload) -> Result<String, SendError> {
        let part = reqwest::multipart::Part::bytes(upload.bytes)
            .file_name(upload.name)
            .mime_str(&upload.mime)
            .map_err(|_| SendError::Permanent("a file of an unknown type".into()))?;
        let form = reqwest::multipart::Form::new()
            .text("messaging_product", "whatsapp")
            .text("type", upload.mime)
            .part("file", part);
        let request = self.client.post(&self.media_url).multipart(form);
        let text = self.call(request).await?;
        vt_contract::json::from_text::<wire::Uploaded>(&text)
            .map(|u| u.id)
            .map_err(|_| SendError::Permanent("graph api: an upload answered without a media id".into()))
    }

    /// Where `person` (the user id of their conversation) is reached now: their phone where one is
    /// theirs, else their BSUID; a person with nothing on record (known by their phone from before
    /// identities were kept) at their key.
    async fn address(&self, person: &str) -> Result<String, SendError> {
        let Some(people) = &self.people else {
            return Ok(person.to_owned());
        };
        let ids = people
            .whatsapp_address(&self.number, person)
            .await
            .map_err(|_| SendError::Retry {
                reason: "store unavailable".into(),
                after: None,
            })?;
        Ok(ids.phone.or(ids.bsuid).unwrap_or_else(|| person.to_owned()))
    }

    /// Deciding every send by the user's 24-hour window (times in `store`), with `templates` outside it.
    pub fn with_window(mut self, store: Arc<dyn ContactStore>, templates: Arc<Templates>) -> Self {
        self.people = Some(store.clone());
        self.window = Some(Window { store, templates });
        self
    }

    /// Sending at the pace of `config` (the number's messages per second, a person's pair rate), kept
    /// in `store` and shared with every instance on it.
    pub fn with_pace(mut self, store: Arc<dyn vt_store::OutboxStore>, config: &WhatsAppConfig) -> Self {
        self.pacer = Some(super::pacer::Pacer::new(
            store,
            &self.number,
            config.mensagens_por_segundo,
            (
                Duration::from_millis(config.pessoa_intervalo_ms),
                config.pessoa_rajada,
            ),
        ));
        self
    }

    /// Sending to each person where they are reached now (their phone, else their BSUID), by `store`.
    pub fn with_people(mut self, store: Arc<dyn ContactStore>) -> Self {
        self.people = Some(store);
        self
    }

    /// Every template sent outside the window put on record in `store` with its cost at `prices`
    /// (the channel serves `tenant`).
    pub fn with_costs(
        mut self,
        store: Arc<dyn ReportStore>,
        prices: crate::costs::CustosConfig,
        tenant: &str,
    ) -> Self {
        self.costs = Some(Costs {
            store,
            prices,
            tenant: tenant.to_owned(),
        });
        self
    }

    /// A template that went out, on record with its category's price. The message is sent: a record
    /// that cannot be written is logged, never a failed send.
    async fn cost(&self, reply: &ReplyPayload, template: &Template) {
        let conversation = reply.conversation_id.as_str();
        let Some(costs) = &self.costs else {
            return;
        };
        let record = vt_store::MessageCost {
            tenant_id: costs.tenant.clone(),
            conversation_id: (!conversation.is_empty()).then(|| conversation.to_owned()),
            channel: CHANNEL.into(),
            category: template.category.to_ascii_lowercase(),
            custo_micro_brl: costs
                .prices
                .message_brl(&template.category)
                .map(crate::costs::micro_brl),
            created_at: chrono::Utc::now(),
            execucao_id: reply.fluxo.clone(),
        };
        if let Err(e) = costs.store.record_message_cost(&record).await {
            tracing::error!(error = %e, template = %template.name, "a template's cost could not be recorded");
        }
    }

    /// Outside the window: the template in the reply's place. A template that stands in for a message
    /// (a support agent's late reply) holds the item until the user answers.
    async fn send_template(
        &self,
        window: &Window,
        (to, reply): (&str, &ReplyPayload),
        template: &Template,
        body: serde_json::Value,
    ) -> Result<Option<String>, GraphFailure> {
        let (field, address) = wire::Addressee::of(to).field();
        let mut message = serde_json::json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "type": "template",
            "template": body,
        });
        message[field] = serde_json::json!(address);
        let id = match self.post(&message).await {
            Ok(id) => id,
            Err(failure) => {
                window.template_refused(template, &failure).await;
                return Err(failure);
            }
        };
        self.cost(reply, template).await;
        if template.purpose == HOLDS_THE_MESSAGE {
            return Err(SendError::Held(format!(
                "fora da janela de 24 h: modelo '{}' enviado; a mensagem segue quando o cliente responder",
                template.name
            ))
            .into());
        }
        Ok(id)
    }

    async fn post(&self, body: &impl serde::Serialize) -> Result<Option<String>, GraphFailure> {
        let text = self.call(self.client.post(&self.url).json(body)).await?;
        let sent: Option<wire::Sent> = vt_contract::json::from_text(&text).ok();
        Ok(sent.and_then(|s| s.messages.into_iter().next()).map(|m| m.id))
    }

    /// Sends `request` with the token; the body of a 2xx, else the failure as the outbox treats it.
    async fn call(&self, request: reqwest::RequestBuilder) -> Result<String, GraphFailure> {
        let response = request
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| SendError::Retry {
                reason: if e.is_timeout() {
                    "graph api: timeout".into()
                } else {
                    "graph api: connection failed".into()
                },
                after: None,
            })
            .map_err(|error| GraphFailure { error, code: None })?;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        if (200..300).contains(&status) {
            return Ok(text);
        }
        let code = vt_contract::json::from_text::<wire::ErrorEnvelope>(&text)
            .ok()
            .map(|e| e.error.code);
        Err(GraphFailure {
            error: classify(status, &text),
            code,
        })
    }
}

/// A send the Graph API refused: how the outbox treats it, and Meta's `error.code` when it gave one
/// (a template's own errors stop the template).
#[derive(Debug)]
pub(super) struct GraphFailure {
    pub error: SendError,
    pub code: Option<i64>,
}

impl From<GraphFailure> for SendError {
    fn from(failure: GraphFailure) -> Self {
        failure.error
    }
}

/// A failure of ours (a store, a file): no code of Meta's.
impl From<SendError> for GraphFailure {
    fn from(error: SendError) -> Self {
        Self { error, code: None }
    }
}

/// By `error.code` first (a rate limit comes as HTTP 400), then by status.
fn classify(status: u16, body: &str) -> SendError {
    let error = vt_contract::json::from_text::<wire::ErrorEnvelope>(body)
        .ok()
        .map(|e| e.error);
    let what = match &error {
        Some(e) => format!("graph api {status}, error {}: {}", e.code, e.message),
        None => format!("graph api {status}"),
    };
    match error.map(|e| e.code) {
        Some(code) if RATE_LIMITS.contains(&code) => SendError::Retry {
            reason: what,
            after: None,
        },
        Some(OUTSIDE_WINDOW) => SendError::Permanent(format!(
            "{what} (fora da janela de 24 h: o usuário precisa escrever primeiro)"
        )),
        Some(NOT_TO_A_BSUID) => SendError::Permanent(format!(
            "{what} (esta mensagem não vai a um BSUID: a pessoa só é conhecida pelo nome de usuário)"
        )),
        _ if status >= 500 || status == 429 => SendError::Retry {
            reason: what,
            after: None,
        },
        _ => SendError::Permanent(what),
    }
}

/// `text` in pieces of at most `max` characters, cut at a line break or a space when there is one.
fn split(text: &str, max: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest: Vec<char> = text.chars().collect();
    while rest.len() > max {
        let window = &rest[..max];
        let cut = window
            .iter()
            .rposition(|c| *c == '\n')
            .or_else(|| window.iter().rposition(|c| *c == ' '))
            .filter(|i| *i > max / 2)
            .map_or(max, |i| i + 1);
        parts.push(rest[..cut].iter().collect::<String>().trim_end().to_owned());
        rest.drain(..cut);
    }
    parts.push(rest.into_iter().collect());
    parts
}

fn text_message<'a>(to: &'a str, body: &'a str) -> wire::Outgoing<'a> {
    wire::Outgoing {
        messaging_product: "whatsapp",
        recipient_type: "individual",
        to: wire::Addressee::of(to),
        kind: "text",
        text: Some(wire::OutText {
            body,
            preview_url: false,
        }),
        interactive: None,
        image: None,
    }
}

fn buttons<'a>(to: &'a str, body: &'a str, pending: &str) -> wire::Outgoing<'a> {
    let button = |prefix: &str, title: &str| wire::OutButton {
        kind: "reply",
        reply: wire::OutReply {
            id: format!("{prefix}{pending}"),
            title: title.into(),
        },
    };
    let action = wire::OutAction {
        buttons: vec![
            button(CONFIRM_PREFIX, "Confirmar"),
            button(CANCEL_PREFIX, "Cancelar"),
        ],
        button: None,
        sections: Vec::new(),
        name: None,
        parameters: None,
    };
    interactive(to, "button", body, action)
}

/// The text above a checkout link's button.
const LINK_BODY: &str =
    "Toque no botão para pagar a recarga com o seu cartão de crédito na página segura do pagamento.";

/// A list message: `body`, and a button that opens the `choices` as rows (at most ten, titles of at
/// most 24 characters), each row's id the option's index.
fn list<'a>(to: &'a str, body: &'a str, choices: &[String]) -> wire::Outgoing<'a> {
    let rows = choices
        .iter()
        .take(MAX_LIST_ROWS)
        .enumerate()
        .map(|(i, title)| wire::OutRow {
            id: format!("{PICK_PREFIX}{i}"),
            title: title.chars().take(MAX_ROW_TITLE).collect(),
        })
        .collect();
    let action = wire::OutAction {
        buttons: Vec::new(),
        button: Some("Escolher cartão"),
        sections: vec![wire::OutSection {
            title: "Cartões",
            rows,
        }],
        name: None,
        parameters: None,
    };
    interactive(to, "list", body, action)
}

/// A checkout link as a button that opens it (`cta_url`), under `body`.
fn link_button<'a>(to: &'a str, body: &'a str, url: String) -> wire::Outgoing<'a> {
    let action = wire::OutAction {
        buttons: Vec::new(),
        button: None,
        sections: Vec::new(),
        name: Some("cta_url"),
        parameters: Some(wire::OutCta {
            display_text: "Pagar com cartão",
            url,
        }),
    };
    interactive(to, "cta_url", body, action)
}

/// An interactive message of `kind` (`button`, `list`, `cta_url`).
fn interactive<'a>(
    to: &'a str,
    kind: &'static str,
    body: &'a str,
    action: wire::OutAction,
) -> wire::Outgoing<'a> {
    wire::Outgoing {
        messaging_product: "whatsapp",
        recipient_type: "individual",
        to: wire::Addressee::of(to),
        kind: "interactive",
        text: None,
        interactive: Some(wire::OutInteractive {
            kind,
            body: wire::OutBody { text: body },
            action,
        }),
        image: None,
    }
}

/// Meta's limits on a list message: ten rows in all, a row's title 24 characters.
const MAX_LIST_ROWS: usize = 10;
const MAX_ROW_TITLE: usize = 24;

impl Sender {
    /// Marks the user's message read and shows them "typing…" while the product works on it (Meta's
    /// typing indicator, dismissed by our reply). Best effort, bounded: a failure is logged and
    /// nothing waits for it.
    pub(crate) async fn read_and_typing(&self, message_id: &str) {
        let read = wire::MarkRead {
            messaging_product: "whatsapp",
            status: "read",
            message_id,
            typing_indicator: Some(wire::TypingIndicator { kind: "text" }),
        };
        match tokio::time::timeout(TYPING_WAIT, self.post(&read)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::info!(error = ?e, "whatsapp typing indicator not shown"),
            Err(_) => tracing::info!("whatsapp typing indicator timed out"),
        }
    }
}

/// The longest the typing indicator's call may take (it never holds up the reply).
const TYPING_WAIT: Duration = Duration::from_secs(5);

#[async_trait]
impl ChannelSender for Sender {
    fn channel(&self) -> &str {
        CHANNEL
    }

    async fn send(&self, _item: &OutboxItem, reply: &ReplyPayload) -> Result<Option<String>, SendError> {
        let person = reply.user_id.as_str();
        if person.is_empty() {
            return Err(SendError::Permanent("item without a recipient".into()));
        }
        match self.send_to(person, reply).await {
            Ok(id) => Ok(id),
            Err(failure) => {
                // Meta's "slow down" moves the pace every instance keeps.
                if let (Some(pacer), Some(code)) = (&self.pacer, failure.code) {
                    pacer.told(code, person).await;
                }
                Err(failure.error)
            }
        }
    }
}

impl Sender {
    /// `reply` sent to `person` where they are reached, at the pace, as what the window allows.
    async fn send_to(&self, person: &str, reply: &ReplyPayload) -> Result<Option<String>, GraphFailure> {
        let text = reply.text.as_str();
        let address = self.address(person).await?;
        let to = address.as_str();
        // Outside the window only a template goes: a reply's files (a QR, an order) cannot.
        if let Some(window) = &self.window
            && let Decision::Template { template, body } =
                window.decide(person, reply, chrono::Utc::now()).await?
        {
            if template.category == "AUTHENTICATION" && super::identity::is_bsuid(to) {
                return Err(SendError::Permanent(format!(
                    "fora da janela de 24 h e o modelo '{}' é de autenticação, que só vai a um número de telefone: \
                     a pessoa só é conhecida pelo BSUID",
                    template.name
                ))
                .into());
            }
            self.pace(person, 1).await?;
            return self.send_template(window, (to, reply), &template, body).await;
        }
        self.pace(person, messages_in(reply)).await?;
        if !reply.files.is_empty() {
            return self.send_files(to, reply).await;
        }
        match reply.confirmation.as_deref() {
            Some(pending) if text.chars().count() <= MAX_BUTTON_BODY => {
                Ok(self.post(&buttons(to, text, pending)).await?)
            }
            Some(pending) => {
                for part in split(text, MAX_TEXT) {
                    self.post(&text_message(to, &part)).await?;
                }
                Ok(self.post(&buttons(to, "Confirma?", pending)).await?)
            }
            None if reply.choices.is_empty() => self.send_text(to, text).await,
            None if text.chars().count() <= MAX_BUTTON_BODY => {
                Ok(self.post(&list(to, text, &reply.choices)).await?)
            }
            None => {
                for part in split(text, MAX_TEXT) {
                    self.post(&text_message(to, &part)).await?;
                }
                Ok(self.post(&list(to, "Qual deles?", &reply.choices)).await?)
            }
        }
    }

    /// Waits for the pace of `cost` messages to `person` (none without a pacer).
    async fn pace(&self, person: &str, cost: u32) -> Result<(), SendError> {
        match &self.pacer {
            Some(pacer) => pacer.wait(person, cost).await,
            None => Ok(()),
        }
    }
}

/// How many messages `reply` goes as: its text's parts (an interactive body takes a short one in
/// itself), one more for buttons or a list after a long text, one per file.
fn messages_in(reply: &ReplyPayload) -> u32 {
    let parts = split(&reply.text, MAX_TEXT)
        .iter()
        .filter(|p| !p.is_empty())
        .count();
    let interactive = reply.confirmation.is_some() || !reply.choices.is_empty();
    let short = reply.text.chars().count() <= MAX_BUTTON_BODY;
    let text = match (interactive, short) {
        (true, true) => 1,
        (true, false) => parts + 1,
        (false, _) => parts,
    };
    u32::try_from((text + reply.files.len()).max(1)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_classified_by_code_not_status() {
        let rate = include_str!("../../../tests/fixtures/payloads/wa-error-130429.json");
        assert!(
            matches!(classify(400, rate), SendError::Retry { .. }),
            "a rate limit comes as 400"
        );
        let window = r#"{"error": {"code": 131047, "message": "Re-engagement message"}}"#;
        assert!(matches!(classify(400, window), SendError::Permanent(r) if r.contains("131047")));
        assert!(matches!(classify(503, "oops"), SendError::Retry { .. }));
        assert!(matches!(
            classify(400, r#"{"error": {"code": 100, "message": "Invalid parameter"}}"#),
            SendError::Permanent(_)
        ));
    }

    #[test]
    fn long_text_is_split_within_the_limit_without_losing_a_character() {
        let text = format!("{} {}", "a".repeat(3000), "b".repeat(3000));
        let parts = split(&text, MAX_TEXT);
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| p.chars().count() <= MAX_TEXT));
        assert_eq!(parts.join(" "), text);
        assert_eq!(split("curto", MAX_TEXT), vec!["curto"]);
        let unbroken = "x".repeat(9000);
        assert_eq!(split(&unbroken, MAX_TEXT).concat(), unbroken);
    }
}
