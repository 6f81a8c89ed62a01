//! WhatsApp Cloud API as a channel of the pipeline: the webhook (`GET` verification, `POST`
//! notifications) turns Meta's JSON into `Inbound`s, and [`Sender`] sends outbox items through the
//! Graph API. A conversation is keyed by (channel, phone_number_id, the user's `wa_id`).
//!
//! - A `POST` is checked with `X-Hub-Signature-256` over the **raw body bytes**, in constant time; a
//!   missing or wrong signature stores nothing (401).
//! - Each message is stored (deduplicated by its `wamid`) **before** the 200, which comes at once; the
//!   turn runs after the answer. A redelivered wamid is never processed twice, also after a restart.
//! - Text is a user turn. A tap on one of our reply buttons acts on the id we set (`confirmar:<id>` /
//!   `cancelar:<id>`), never on its title: it confirms or cancels exactly like "sim"/"não", and only the
//!   recharge it names. Statuses are recorded against our message and are never turns. Any other type
//!   gets a polite text answer.
//! - Sending: text (≤ 4096 characters, longer replies split), reply buttons for a recharge waiting for
//!   confirmation, the inbound marked read. Errors by `error.code`: rate limits (130429, 131056, 80007,
//!   sent as HTTP 400) and 5xx are retried; 131047 (outside the 24 h window) and other 4xx are final.
#![warn(clippy::too_many_lines)] // on the main path: see clippy.toml

mod identity;
mod media;
pub(crate) mod notices;
mod orders;
mod pacer;
pub(crate) mod sender;
pub(crate) mod templates;
mod webhook;
mod window;
mod wire;

use std::sync::Arc;

use serde::Deserialize;

pub(crate) use notices::{NoticesConfig, WhatsAppNotices};
pub(crate) use sender::Sender;
pub(crate) use templates::Templates;
pub(crate) use webhook::WebhookState;

/// The channel name on conversations and outbox items.
pub(crate) const CHANNEL: &str = "whatsapp";

/// Meta delivers free text only within 24 hours of the person's last message; after that, only an
/// approved template, with their opt-in.
pub(crate) const WINDOW: chrono::Duration = chrono::Duration::hours(24);

/// What the service must know of WhatsApp: its window, its native Pix orders.
pub(crate) fn rules() -> crate::service::ChannelRules {
    crate::service::ChannelRules {
        window: Some(WINDOW),
        native_orders: true,
        label: "WhatsApp",
        read_in_conversation: false,
        visitor: None,
    }
}
/// Ids of our confirmation buttons.
const CONFIRM_PREFIX: &str = "confirmar:";
const CANCEL_PREFIX: &str = "cancelar:";
/// Ids of a list's rows: the offered option's index follows (`Inbound::pick`).
const PICK_PREFIX: &str = "cartao:";

/// The WhatsApp Cloud API channel (on when `phone_number_id` and `access_token` are set; `VT_WHATSAPP_*`
/// in the environment).
#[derive(Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct WhatsAppConfig {
    /// Meta's Graph API (`VT_WHATSAPP_GRAPH_URL`; a fake's address in tests).
    pub graph_url: String,
    /// The Graph API version (`VT_WHATSAPP_API_VERSION`).
    pub api_version: String,
    /// The business number's id at Meta (`VT_WHATSAPP_PHONE_NUMBER_ID`).
    pub phone_number_id: Option<String>,
    /// A system user's token (`VT_WHATSAPP_ACCESS_TOKEN`); never logged.
    pub access_token: Option<String>,
    /// The app's secret, which signs each webhook call (`X-Hub-Signature-256`,
    /// `VT_WHATSAPP_APP_SECRET`).
    pub app_secret: Option<String>,
    /// What Meta echoes when the webhook is registered (`VT_WHATSAPP_VERIFY_TOKEN`).
    pub verify_token: Option<String>,
    /// Said once, before the answer, to a person's first message: what is kept of them and their
    /// rights as a data subject (LGPD), with a link. Empty: none.
    pub aviso_privacidade: String,
    /// A person's messages that arrive within this many milliseconds of each other are answered as
    /// one turn (a yes, a no, a tap or a voice note always alone); 0: each alone.
    pub juntar_ms: u64,
    /// Messages a second the business number may send (its tier at Meta: 80 by default, up to 1,000;
    /// 20 for a number also used in the WhatsApp Business app), shared by every instance.
    pub mensagens_por_segundo: u32,
    /// One message to a person every this many milliseconds once their burst is spent (Meta's pair
    /// rate: about one every 6 s).
    pub pessoa_intervalo_ms: u64,
    /// Messages a person may get at once before the interval applies (a reply with its code and QR).
    pub pessoa_rajada: u32,
}

/// The privacy notice a person gets with their first message, unless `[whatsapp] aviso_privacidade`
/// says otherwise.
pub const AVISO_PRIVACIDADE: &str = "Antes de começar: para atender você, guardamos o seu número de WhatsApp, as mensagens desta conversa e os cartões de VT que você informar (cifrados, e sempre mascarados nas respostas), pelo prazo da nossa política de retenção. Pela LGPD, você pode pedir a qualquer momento uma cópia dos seus dados ou que eles sejam apagados. Seus direitos como titular: https://www.gov.br/anpd/pt-br/assuntos/titular-de-dados-1";

/// A number's highest throughput tier at Meta.
const MAX_PER_SECOND: u32 = 1000;
/// The longest interval between two messages to one person this accepts.
const MAX_PERSON_INTERVAL_MS: u64 = 60_000;
/// Meta lets a person get up to 45 messages in 6 s (borrowing from later).
const MAX_PERSON_BURST: u32 = 45;

/// The longest a burst is waited for.
const MAX_JUNTAR_MS: u64 = 10_000;

/// WhatsApp's limit on a text message's body.
const MAX_TEXT_CHARS: usize = 4096;

impl Default for WhatsAppConfig {
    fn default() -> Self {
        Self {
            graph_url: "https://graph.facebook.com".into(),
            api_version: "v23.0".into(),
            phone_number_id: None,
            access_token: None,
            app_secret: None,
            verify_token: None,
            aviso_privacidade: AVISO_PRIVACIDADE.into(),
            juntar_ms: 1500,
            mensagens_por_segundo: 80,
            pessoa_intervalo_ms: 6000,
            pessoa_rajada: 10,
        }
    }
}

impl std::fmt::Debug for WhatsAppConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = |o: &Option<String>| o.as_ref().map(|_| "<set>");
        f.debug_struct("WhatsAppConfig")
            .field("graph_url", &self.graph_url)
            .field("api_version", &self.api_version)
            .field("phone_number_id", &self.phone_number_id)
            .field("access_token", &set(&self.access_token))
            .field("app_secret", &set(&self.app_secret))
            .field("verify_token", &set(&self.verify_token))
            .field("aviso_privacidade", &self.aviso_privacidade.chars().count())
            .field("juntar_ms", &self.juntar_ms)
            .field("mensagens_por_segundo", &self.mensagens_por_segundo)
            .field("pessoa_intervalo_ms", &self.pessoa_intervalo_ms)
            .field("pessoa_rajada", &self.pessoa_rajada)
            .finish()
    }
}

impl WhatsAppConfig {
    /// The channel is on when it can send.
    pub(crate) fn is_on(&self) -> bool {
        self.phone_number_id.is_some() && self.access_token.is_some()
    }

    /// A channel that is on must be able to check what it receives; the error is `(field, why)`.
    pub(crate) fn validate(&self) -> Result<(), (&'static str, &'static str)> {
        if !self.is_on() {
            return Ok(());
        }
        if self.app_secret.as_deref().is_none_or(str::is_empty) {
            return Err((
                "whatsapp.app_secret",
                "é necessário para conferir as assinaturas do webhook",
            ));
        }
        if self.verify_token.as_deref().is_none_or(str::is_empty) {
            return Err((
                "whatsapp.verify_token",
                "é necessário para responder à verificação do webhook",
            ));
        }
        if reqwest::Url::parse(&self.graph_url).is_err() {
            return Err(("whatsapp.graph_url", "deve ser uma URL"));
        }
        if self.juntar_ms > MAX_JUNTAR_MS {
            return Err((
                "whatsapp.juntar_ms",
                "deve ser de 0 a 10000 (10 segundos): a resposta espera por ele",
            ));
        }
        if !(1..=MAX_PER_SECOND).contains(&self.mensagens_por_segundo) {
            return Err((
                "whatsapp.mensagens_por_segundo",
                "deve ser de 1 a 1000 (o limite de um número na Meta)",
            ));
        }
        if !(100..=MAX_PERSON_INTERVAL_MS).contains(&self.pessoa_intervalo_ms) {
            return Err((
                "whatsapp.pessoa_intervalo_ms",
                "deve ser de 100 a 60000 (a Meta aceita cerca de uma mensagem a cada 6 s por pessoa)",
            ));
        }
        if !(1..=MAX_PERSON_BURST).contains(&self.pessoa_rajada) {
            return Err(("whatsapp.pessoa_rajada", "deve ser de 1 a 45"));
        }
        if self.aviso_privacidade.chars().count() > MAX_TEXT_CHARS {
            return Err((
                "whatsapp.aviso_privacidade",
                "passa de 4096 caracteres, o limite de uma mensagem do WhatsApp",
            ));
        }
        Ok(())
    }
}

impl super::Section for WhatsAppConfig {
    fn override_from(&mut self, get: &dyn Fn(&str) -> Option<String>) {
        super::set_from_env(
            &get,
            [
                ("VT_WHATSAPP_PHONE_NUMBER_ID", &mut self.phone_number_id),
                ("VT_WHATSAPP_ACCESS_TOKEN", &mut self.access_token),
                ("VT_WHATSAPP_APP_SECRET", &mut self.app_secret),
                ("VT_WHATSAPP_VERIFY_TOKEN", &mut self.verify_token),
            ],
        );
        if let Some(v) = get("VT_WHATSAPP_GRAPH_URL") {
            self.graph_url = v;
        }
        if let Some(v) = get("VT_WHATSAPP_API_VERSION") {
            self.api_version = v;
        }
    }

    fn problem(&self) -> Option<(String, String)> {
        self.validate()
            .err()
            .map(|(field, why)| (field.to_owned(), why.to_owned()))
    }

    fn register_secrets(&self) {
        for s in [&self.access_token, &self.app_secret, &self.verify_token]
            .into_iter()
            .flatten()
        {
            vt_contract::redact::register_secret(s);
        }
    }
}

/// WhatsApp, plugged in ([`super::PLUGS`]): `[whatsapp]`, its templates, its notices.
pub(crate) struct WhatsApp;

impl super::Plug for WhatsApp {
    fn name(&self) -> &'static str {
        CHANNEL
    }

    fn rules(&self) -> crate::service::ChannelRules {
        rules()
    }

    fn section(&self) -> super::SectionType {
        super::SectionType::of::<WhatsAppConfig>()
    }

    fn build(
        &self,
        settings: &dyn super::Settings,
        wiring: &super::Wiring,
    ) -> anyhow::Result<super::Channel> {
        let Some(config) = settings.sections().get::<WhatsAppConfig>().filter(|c| c.is_on()) else {
            return Ok(super::Channel::default());
        };
        // Checked now, when WhatsApp is on: a bad template file stops the start, naming its field.
        let templates = Arc::new(Templates::load(&settings.templates_dir())?);
        Ok(channel(config, &templates, wiring))
    }

    fn notices(
        &self,
        settings: &dyn super::Settings,
        stores: &vt_store::Stores,
    ) -> Option<Arc<dyn vt_domain::stages::channel_notices::ChannelNotices>> {
        // WhatsApp recipients of a flow's notices are told by the product itself.
        let phone = settings
            .sections()
            .get::<WhatsAppConfig>()?
            .phone_number_id
            .as_deref()?;
        let notices = WhatsAppNotices::new(stores, phone, settings.notices().clone(), settings.timezone());
        Some(Arc::new(notices))
    }
}

/// How long `count` messages take to leave at `per_second` (the number's pace), in words: "cerca de 21
/// min" for 100,000 at 80 a second.
pub(crate) fn time_to_send(count: u64, per_second: u32) -> String {
    let secs = count.div_ceil(u64::from(per_second.max(1)));
    match secs {
        0 => "nada a enviar".into(),
        s if s < 60 => format!("cerca de {s} s"),
        s if s < 3600 => format!("cerca de {} min", s.div_ceil(60)),
        s => format!("cerca de {} h {} min", s / 3600, (s % 3600).div_ceil(60)),
    }
}

/// The pace WhatsApp sends at, when the channel is on in `settings`: its messages a second.
pub(crate) fn pace_of(settings: &dyn super::Settings) -> Option<u32> {
    settings
        .sections()
        .get::<WhatsAppConfig>()
        .filter(|c| c.is_on())
        .map(|c| c.mensagens_por_segundo)
}

/// The conversation of `wa_id` on `phone_number_id`.
pub fn conversation_id(phone_number_id: &str, wa_id: &str) -> String {
    format!("wa:{phone_number_id}:{wa_id}")
}

/// The WhatsApp channel as `serve` runs it: off (an empty [`super::Channel`]) unless `config` has a
/// phone number id and an access token; then the webhook, the sender (text inside the 24-hour
/// window, `templates` outside it) and what it says at start.
pub fn channel(
    config: &WhatsAppConfig,
    templates: &Arc<Templates>,
    wiring: &super::Wiring,
) -> super::Channel {
    let Some(sender) = Sender::new(config) else {
        return super::Channel::default();
    };
    let sender = sender
        .with_window(wiring.service.stores().contacts.clone(), templates.clone())
        .with_pace(wiring.service.stores().outbox.clone(), config)
        .with_files(wiring.service.stores().pix.clone())
        .with_pix_orders(wiring.service.payments().pix_order_key().map(str::to_owned))
        .with_costs(
            wiring.service.stores().reports.clone(),
            wiring.service.spending().costs().clone(),
            &wiring.tenant,
        );
    let webhook = WebhookState {
        service: wiring.service.clone(),
        agent: wiring.agent.clone(),
        config: Arc::new(config.clone()),
        tenant: wiring.tenant.clone(),
        graph: Sender::new(config).map(Arc::new),
    };
    let voice = if wiring.service.hearing().hears_voice() {
        "WhatsApp: notas de voz transcritas ([transcricao])"
    } else {
        "WhatsApp: notas de voz recebem a resposta de só texto (sem [transcricao])"
    };
    let photos = if wiring.service.hearing().reads_photos() {
        "WhatsApp: fotos de cartão lidas localmente (Tesseract, [fotos])"
    } else {
        "WhatsApp: fotos desligadas — recebem a resposta de só texto (Tesseract não encontrado, ou [fotos] ler = false)"
    };
    super::Channel {
        name: CHANNEL,
        routes: webhook::routes(webhook),
        senders: vec![Arc::new(sender)],
        jobs: Vec::new(),
        media: media::GraphMedia::new(config).map(|m| Arc::new(m) as Arc<dyn crate::service::MediaSource>),
        templates: Some(templates.clone()),
        pace: Some(config.mensagens_por_segundo),
        notices: vec![
            format!(
                "WhatsApp fora da janela de 24 h: {} modelo(s) ({})",
                templates.all().count(),
                templates
                    .all()
                    .map(|t| t.purpose.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "canal WhatsApp ligado: webhook em /channels/whatsapp/webhook".into(),
            voice.into(),
            photos.into(),
        ],
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_runs_time_is_said_in_minutes() {
        assert_eq!(super::time_to_send(100_000, 80), "cerca de 21 min");
        assert_eq!(super::time_to_send(40, 80), "cerca de 1 s");
        assert_eq!(super::time_to_send(0, 80), "nada a enviar");
        assert_eq!(super::time_to_send(1_000_000, 80), "cerca de 3 h 29 min");
    }
}
