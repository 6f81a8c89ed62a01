//! The web chat: a chat bubble on the operator's own site, from one tag —
//! `<script src="https://HOST/webchat/widget.js" data-tenant="acme" async></script>`.
//!
//! - `GET /webchat/widget.js` is the widget ([`widget.js`](widget.js)): no framework, a shadow root on
//!   the host page, keyboard and screen-reader ready, themed by the tenant's `[[webchat.clientes]]`.
//! - `POST /webchat/api/sessao` opens (or renews) the visitor's session ([`session`]): a signed,
//!   `HttpOnly`, `Secure`, `SameSite=None`, `Partitioned` cookie whose session id rotates on every
//!   renewal, and, from an operator's signed user token, the person's own conversation on any device.
//! - `POST /webchat/api/mensagens` stores the person's message before anything else, then runs its
//!   turn ([`api`]); `GET /webchat/api/eventos` is the conversation as Server-Sent Events, each event
//!   a stored message with its id, so a dropped connection resumes after `Last-Event-ID` with nothing
//!   lost or doubled ([`events`]).
//!
//! Only a tenant's listed origins (`origens`) are answered, every post carries the session's CSRF
//! token, visitors and addresses are rate limited, and no card is in a URL, in the page's storage or
//! in the widget's console: what the widget shows comes masked from the store.

mod api;
mod events;
mod session;

use std::sync::Arc;

use serde::Deserialize;

/// The channel name on conversations.
pub(crate) const CHANNEL: &str = "webchat";

/// The privacy notice a person gets with their first message, unless `[webchat] aviso_privacidade`
/// says otherwise.
pub(crate) const AVISO_PRIVACIDADE: &str = "Antes de começar: para atender você, guardamos as mensagens desta conversa e os cartões de VT que você informar (cifrados, e sempre mascarados nas respostas), pelo prazo da nossa política de retenção. Pela LGPD, você pode pedir a qualquer momento uma cópia dos seus dados ou que eles sejam apagados. Seus direitos como titular: https://www.gov.br/anpd/pt-br/assuntos/titular-de-dados-1";

/// The shortest key that signs sessions or user tokens (HS256 wants at least its hash's size).
const MIN_KEY_BYTES: usize = 32;
/// The longest privacy notice, as a chat message.
const MAX_NOTICE_CHARS: usize = 4096;

/// The chat on the operators' own sites (on when it lists a tenant): `/webchat/widget.js`
/// (`VT_WEBCHAT_SEGREDO` in the environment).
#[derive(Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct WebchatConfig {
    /// Signs the visitors' session cookies (`VT_WEBCHAT_SEGREDO`, at least 32 characters). Unset: a
    /// random key of this process — every visitor starts over when it restarts, and instances do not
    /// share sessions.
    pub segredo: Option<String>,
    /// Said once, before the answer, to a person's first message. Empty: none.
    pub aviso_privacidade: String,
    /// How long a visitor's session lasts without a visit, in days.
    pub sessao_dias: u32,
    /// Messages a visitor may send per minute.
    pub mensagens_por_minuto: u32,
    /// Requests one address may make per minute (sessions, messages, event streams).
    pub pedidos_por_ip_por_minuto: u32,
    /// The header a proxy in front of `serve` puts the visitor's address in (its first address is
    /// taken), e.g. `x-forwarded-for`. Unset: the connection's address.
    pub cabecalho_ip: Option<String>,
    /// The tenants whose sites embed the chat.
    pub clientes: Vec<WebchatTenant>,
}

/// A tenant's chat: where it may be embedded, how it looks, and the key of its user tokens.
#[derive(Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct WebchatTenant {
    /// The tenant (the `data-tenant` of the tag), whose conversations these are.
    pub tenant: String,
    /// The pages' origins allowed to use the chat, e.g. `https://www.acme.com.br` (scheme, host and
    /// port; no path).
    pub origens: Vec<String>,
    /// The operator's name in the chat's header.
    pub nome: String,
    /// The operator's logo (an `https` address; `http` only on `localhost`), shown in the header.
    pub logo: Option<String>,
    /// The bubble's and the header's colour, `#rrggbb`.
    pub cor: String,
    /// The text's colour on `cor`, `#rrggbb`.
    pub cor_texto: String,
    /// Verifies the user tokens the operator's signed-in pages pass (`data-user-token`: an HS256 JWT
    /// with `sub`, `tenant`, `iat` and `exp` at most an hour after it). At least 32 characters. Unset:
    /// anonymous visitors only.
    pub chave_usuario: Option<String>,
}

impl Default for WebchatConfig {
    fn default() -> Self {
        Self {
            segredo: None,
            aviso_privacidade: AVISO_PRIVACIDADE.into(),
            sessao_dias: 30,
            mensagens_por_minuto: 20,
            pedidos_por_ip_por_minuto: 240,
            cabecalho_ip: None,
            clientes: Vec::new(),
        }
    }
}

impl Default for WebchatTenant {
    fn default() -> Self {
        Self {
            tenant: String::new(),
            origens: Vec::new(),
            nome: String::new(),
            logo: None,
            cor: "#0b6e4f".into(),
            cor_texto: "#ffffff".into(),
            chave_usuario: None,
        }
    }
}

impl std::fmt::Debug for WebchatConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebchatConfig")
            .field("segredo", &self.segredo.as_ref().map(|_| "<set>"))
            .field("aviso_privacidade", &self.aviso_privacidade.chars().count())
            .field("sessao_dias", &self.sessao_dias)
            .field("mensagens_por_minuto", &self.mensagens_por_minuto)
            .field("pedidos_por_ip_por_minuto", &self.pedidos_por_ip_por_minuto)
            .field("cabecalho_ip", &self.cabecalho_ip)
            .field("clientes", &self.clientes)
            .finish()
    }
}

impl std::fmt::Debug for WebchatTenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebchatTenant")
            .field("tenant", &self.tenant)
            .field("origens", &self.origens)
            .field("nome", &self.nome)
            .field("logo", &self.logo)
            .field("cor", &self.cor)
            .field("cor_texto", &self.cor_texto)
            .field("chave_usuario", &self.chave_usuario.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// Whether `s` is a colour as `#rrggbb`.
fn is_colour(s: &str) -> bool {
    s.len() == 7 && s.starts_with('#') && s[1..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `s` is an origin as browsers send it: `scheme://host[:port]`, http(s), nothing after.
fn is_origin(s: &str) -> bool {
    reqwest::Url::parse(s).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https")
            && u.host_str().is_some()
            && u.path() == "/"
            && u.query().is_none()
            && u.fragment().is_none()
            && u.username().is_empty()
            && !s.ends_with('/')
    })
}

/// Whether `s` is an address a logo may be loaded from: https, or http on this machine.
fn is_logo(s: &str) -> bool {
    reqwest::Url::parse(s).is_ok_and(|u| {
        u.scheme() == "https"
            || (u.scheme() == "http" && matches!(u.host_str(), Some("localhost" | "127.0.0.1")))
    })
}

impl WebchatConfig {
    /// The channel is on when it lists a tenant.
    pub(crate) fn is_on(&self) -> bool {
        !self.clientes.is_empty()
    }

    /// Each value that parses but cannot work, as `(field, why)`; a tenant's field is named with its
    /// place in the list (`webchat.clientes[0].origens`).
    pub(crate) fn validate(&self) -> Result<(), (String, &'static str)> {
        let bad = |field: String, why: &'static str| Err((format!("webchat.{field}"), why));
        if self.segredo.as_ref().is_some_and(|s| s.len() < MIN_KEY_BYTES) {
            return bad("segredo".into(), "deve ter pelo menos 32 caracteres");
        }
        if self.sessao_dias == 0 || self.sessao_dias > 400 {
            return bad("sessao_dias".into(), "deve ser de 1 a 400 dias");
        }
        if self.mensagens_por_minuto == 0 {
            return bad("mensagens_por_minuto".into(), "deve ser pelo menos 1");
        }
        if self.pedidos_por_ip_por_minuto == 0 {
            return bad("pedidos_por_ip_por_minuto".into(), "deve ser pelo menos 1");
        }
        if self.aviso_privacidade.chars().count() > MAX_NOTICE_CHARS {
            return bad("aviso_privacidade".into(), "passa de 4096 caracteres");
        }
        if self
            .cabecalho_ip
            .as_ref()
            .is_some_and(|h| axum::http::HeaderName::try_from(h.as_str()).is_err())
        {
            return bad("cabecalho_ip".into(), "não é um nome de cabeçalho HTTP");
        }
        for (i, c) in self.clientes.iter().enumerate() {
            let field = |name: &str| format!("clientes[{i}].{name}");
            let id_ok = !c.tenant.is_empty()
                && c.tenant.len() <= 64
                && c.tenant
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
            if !id_ok {
                return bad(field("tenant"), "use até 64 letras, dígitos, '-' ou '_'");
            }
            if self.clientes[..i].iter().any(|o| o.tenant == c.tenant) {
                return bad(field("tenant"), "aparece duas vezes em [[webchat.clientes]]");
            }
            if c.origens.is_empty() {
                return bad(field("origens"), "liste as origens das páginas que usam o chat");
            }
            if !c.origens.iter().all(|o| is_origin(o)) {
                return bad(
                    field("origens"),
                    "cada origem é esquema, host e porta, sem caminho nem barra final (https://www.exemplo.com.br)",
                );
            }
            if !is_colour(&c.cor) {
                return bad(field("cor"), "use uma cor #rrggbb");
            }
            if !is_colour(&c.cor_texto) {
                return bad(field("cor_texto"), "use uma cor #rrggbb");
            }
            if c.logo.as_ref().is_some_and(|l| !is_logo(l)) {
                return bad(field("logo"), "deve ser um endereço https");
            }
            if c.chave_usuario.as_ref().is_some_and(|k| k.len() < MIN_KEY_BYTES) {
                return bad(field("chave_usuario"), "deve ter pelo menos 32 caracteres");
            }
        }
        Ok(())
    }

    /// The tenant named `tenant`.
    fn tenant(&self, tenant: &str) -> Option<&WebchatTenant> {
        self.clientes.iter().find(|c| c.tenant == tenant)
    }
}

impl WebchatTenant {
    /// Whether a page of `origin` may use this tenant's chat.
    fn allows(&self, origin: &str) -> bool {
        self.origens.iter().any(|o| o == origin)
    }
}

/// The web chat's rules: no window, no native orders; its people read what is said in the
/// conversation, whose event stream carries it (no worker sends there).
pub(crate) fn rules() -> crate::service::ChannelRules {
    crate::service::ChannelRules {
        label: "Chat do site",
        read_in_conversation: true,
        visitor: Some("Visitante do site"),
        ..crate::service::ChannelRules::default()
    }
}

impl super::Section for WebchatConfig {
    fn override_from(&mut self, get: &dyn Fn(&str) -> Option<String>) {
        super::set_from_env(&get, [("VT_WEBCHAT_SEGREDO", &mut self.segredo)]);
    }

    fn problem(&self) -> Option<(String, String)> {
        self.validate().err().map(|(field, why)| (field, why.to_owned()))
    }

    fn register_secrets(&self) {
        let keys = self.clientes.iter().filter_map(|c| c.chave_usuario.as_ref());
        for s in self.segredo.iter().chain(keys) {
            vt_contract::redact::register_secret(s);
        }
    }
}

/// The web chat, plugged in ([`super::PLUGS`]): `[webchat]`.
pub(crate) struct Webchat;

impl super::Plug for Webchat {
    fn name(&self) -> &'static str {
        CHANNEL
    }

    fn rules(&self) -> crate::service::ChannelRules {
        rules()
    }

    fn section(&self) -> super::SectionType {
        super::SectionType::of::<WebchatConfig>()
    }

    fn build(
        &self,
        settings: &dyn super::Settings,
        wiring: &super::Wiring,
    ) -> anyhow::Result<super::Channel> {
        let config = settings
            .sections()
            .get::<WebchatConfig>()
            .cloned()
            .unwrap_or_default();
        Ok(channel(&config, wiring))
    }
}

/// The web chat as `serve` runs it: off (an empty [`super::Channel`]) unless `config` lists a tenant;
/// then the widget and its API, and what it says at start.
pub fn channel(config: &WebchatConfig, wiring: &super::Wiring) -> super::Channel {
    if !config.is_on() {
        return super::Channel::default();
    }
    let state = api::WebchatState::new(config, wiring);
    let tenants: Vec<_> = config
        .clientes
        .iter()
        .map(|c| format!("{} ({})", c.tenant, c.origens.join(", ")))
        .collect();
    let mut notices = vec![format!(
        "chat do site ligado: /webchat/widget.js, para {}",
        tenants.join("; ")
    )];
    if config.segredo.is_none() {
        notices.push(
            "chat do site: sem [webchat] segredo — as sessões dos visitantes valem só até este processo parar".into(),
        );
    }
    super::Channel {
        name: CHANNEL,
        routes: api::routes(Arc::new(state)),
        notices,
        ..super::Channel::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acme() -> WebchatTenant {
        WebchatTenant {
            tenant: "acme".into(),
            origens: vec!["https://www.acme.com.br".into()],
            nome: "Acme".into(),
            cor: "#0b6e4f".into(),
            cor_texto: "#ffffff".into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_bad_value_is_named_by_its_field() {
        let with = |c: WebchatTenant| WebchatConfig {
            clientes: vec![acme(), c],
            ..Default::default()
        };
        assert_eq!(
            with(acme()).validate().expect_err("refused").0,
            "webchat.clientes[1].tenant"
        );
        let path = WebchatTenant {
            tenant: "b".into(),
            origens: vec!["https://b.com.br/chat".into()],
            ..acme()
        };
        assert_eq!(
            with(path).validate().expect_err("refused").0,
            "webchat.clientes[1].origens"
        );
        let colour = WebchatTenant {
            tenant: "b".into(),
            cor: "verde".into(),
            ..acme()
        };
        assert_eq!(
            with(colour).validate().expect_err("refused").0,
            "webchat.clientes[1].cor"
        );
        let key = WebchatTenant {
            tenant: "b".into(),
            chave_usuario: Some("curta".into()),
            ..acme()
        };
        let (field, why) = with(key).validate().expect_err("refused");
        assert_eq!(field, "webchat.clientes[1].chave_usuario");
        assert!(!why.contains("curta"), "the value is never echoed");
        assert!(
            with(WebchatTenant {
                tenant: "b".into(),
                ..acme()
            })
            .validate()
            .is_ok()
        );
        assert!(is_origin("http://localhost:8080") && !is_origin("https://a.com/"));
    }
}
