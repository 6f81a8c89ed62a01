//! `[cartao]`: who takes a chat recharge paid by card, and how.

use serde::Deserialize;

use crate::auth::AuthConfig;
use crate::tls::TlsConfig;

/// `[cartao]`. Absent beside real systems, a card recharge in the chat is refused (it would go to the
/// recharge system with nobody paying); with the embedded simulator, the simulator is the provider.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct CartaoConfig {
    /// `"stripe"`: a hosted checkout at Stripe (or any provider speaking its Checkout Sessions API at
    /// `api_url`); `"sistema_de_recarga"`: the recharge system charges a card it keeps for the holder,
    /// and a card recharge goes to it as it is.
    pub provedor: Option<ProvedorCartao>,
    /// The provider's API base (`https://api.stripe.com/v1`).
    pub api_url: String,
    /// Where the card holder lands after paying (the operator's page).
    pub retorno_url: String,
    /// How long a link can be paid for (Stripe takes 30 minutes to 24 hours).
    pub expiracao_minutos: u32,
    /// How many new links a card holder may ask for one recharge.
    pub novos_links_max: u32,
    /// The longest a call to the provider may take.
    pub timeout_ms: u64,
    /// How long after its payment a checkout still not credited is taken for one whose credit a stop
    /// interrupted, and credited again under the same key.
    pub retomar_credito_segundos: u32,
    /// How often `serve` reads open checkouts back (a notice missed, a link expired, a credit resumed).
    pub varredura_segundos: u32,
    /// The secret the provider signs its notices with (`VT_CARTAO_WEBHOOK_SECRET`).
    #[serde(skip)]
    pub webhook_secret: Option<String>,
    /// How the API is authenticated: `bearer` with the secret key (`VT_CARTAO_TOKEN`), or OAuth2
    /// (`VT_CARTAO_CLIENT_SECRET`).
    pub auth: AuthConfig,
    pub tls: TlsConfig,
}

impl Default for CartaoConfig {
    fn default() -> Self {
        Self {
            provedor: None,
            api_url: String::new(),
            retorno_url: String::new(),
            expiracao_minutos: 30,
            novos_links_max: 3,
            timeout_ms: 10_000,
            retomar_credito_segundos: 120,
            varredura_segundos: 30,
            webhook_secret: None,
            auth: AuthConfig::None,
            tls: TlsConfig::default(),
        }
    }
}

/// Who charges a card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProvedorCartao {
    /// The recharge system, on a card it keeps for the holder.
    SistemaDeRecarga,
    /// Stripe Checkout Sessions.
    Stripe,
}

impl std::str::FromStr for ProvedorCartao {
    type Err = &'static str;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sistema_de_recarga" => Ok(Self::SistemaDeRecarga),
            "stripe" => Ok(Self::Stripe),
            _ => Err("expected stripe or sistema_de_recarga"),
        }
    }
}

impl CartaoConfig {
    /// Whether a hosted checkout takes card recharges (`provedor = "stripe"`).
    pub fn checkout(&self) -> bool {
        self.provedor == Some(ProvedorCartao::Stripe)
    }

    /// The first field that cannot serve, with its whole path (`cartao.auth.token`), and why
    /// (checked when the configuration loads). Only a checkout provider has fields to check.
    pub fn problem(&self) -> Option<(String, &'static str)> {
        if !self.checkout() {
            return None;
        }
        let field = |f: &str| format!("cartao.{f}");
        for (name, url) in [("api_url", &self.api_url), ("retorno_url", &self.retorno_url)] {
            match reqwest::Url::parse(url) {
                Ok(u) if u.scheme() == "https" || crate::auth::is_loopback(&u) => {}
                Ok(_) => return Some((field(name), "deve ser https (http só em loopback)")),
                Err(_) => return Some((field(name), "precisa ser uma URL")),
            }
        }
        let problem = if !(30..=24 * 60).contains(&self.expiracao_minutos) {
            Some(("expiracao_minutos", "precisa estar entre 30 e 1440"))
        } else if self.novos_links_max > 10 {
            Some(("novos_links_max", "precisa estar entre 0 e 10"))
        } else if !(1_000..=60_000).contains(&self.timeout_ms) {
            Some(("timeout_ms", "precisa estar entre 1000 e 60000"))
        } else if !(1..=3_600).contains(&self.retomar_credito_segundos) {
            Some(("retomar_credito_segundos", "precisa estar entre 1 e 3600"))
        } else if !(1..=600).contains(&self.varredura_segundos) {
            Some(("varredura_segundos", "precisa estar entre 1 e 600"))
        } else if self.webhook_secret.as_deref().is_none_or(str::is_empty) {
            Some((
                "webhook_secret",
                "está faltando (defina VT_CARTAO_WEBHOOK_SECRET)",
            ))
        } else {
            None
        };
        if let Some((f, why)) = problem {
            return Some((field(f), why));
        }
        match &self.auth {
            AuthConfig::None => Some((
                field("auth"),
                "o provedor de cartão pede autenticação (bearer ou oauth2)",
            )),
            auth => auth.problem().map(|(f, why)| match f {
                "client_secret" => (
                    field("auth.client_secret"),
                    "está faltando (ou defina VT_CARTAO_CLIENT_SECRET)",
                ),
                "token" => (field("auth.token"), "está faltando (ou defina VT_CARTAO_TOKEN)"),
                other => (field(&format!("auth.{other}")), why),
            }),
        }
    }

    /// With the secrets the environment gives, never written in the file.
    #[must_use]
    pub fn with_secrets(
        mut self,
        token: Option<&str>,
        client_secret: Option<&str>,
        webhook: Option<&str>,
    ) -> Self {
        self.auth = self.auth.with_secrets(token, client_secret);
        if let Some(w) = webhook {
            self.webhook_secret = Some(w.to_owned());
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stripe() -> CartaoConfig {
        CartaoConfig {
            provedor: Some(ProvedorCartao::Stripe),
            api_url: "https://api.stripe.com/v1".into(),
            retorno_url: "https://operadora.example.com.br/pago".into(),
            auth: AuthConfig::Bearer {
                token: "sk_live_segredo_4242".into(),
            },
            ..CartaoConfig::default()
        }
        .with_secrets(None, None, Some("whsec_segredo"))
    }

    #[test]
    fn a_checkout_configuration_names_the_field_that_cannot_serve_never_its_value() {
        assert_eq!(stripe().problem(), None);
        let field = |c: CartaoConfig| c.problem().map(|(f, _)| f);
        assert_eq!(
            field(CartaoConfig {
                api_url: "http://api.stripe.com".into(),
                ..stripe()
            })
            .as_deref(),
            Some("cartao.api_url")
        );
        assert_eq!(
            field(CartaoConfig {
                expiracao_minutos: 10,
                ..stripe()
            })
            .as_deref(),
            Some("cartao.expiracao_minutos")
        );
        assert_eq!(
            field(CartaoConfig {
                webhook_secret: None,
                ..stripe()
            })
            .as_deref(),
            Some("cartao.webhook_secret")
        );
        assert_eq!(
            field(CartaoConfig {
                auth: AuthConfig::None,
                ..stripe()
            })
            .as_deref(),
            Some("cartao.auth")
        );
        let empty_token = CartaoConfig {
            auth: AuthConfig::Bearer { token: String::new() },
            ..stripe()
        };
        let (f, why) = empty_token.problem().expect("a problem");
        assert_eq!(f, "cartao.auth.token");
        assert!(
            why.contains("VT_CARTAO_TOKEN") && !why.contains("sk_live"),
            "{why}"
        );
        // Nothing to check where the recharge system charges the card itself, or nobody does.
        assert_eq!(CartaoConfig::default().problem(), None);
        let sistema = CartaoConfig {
            provedor: Some(ProvedorCartao::SistemaDeRecarga),
            ..CartaoConfig::default()
        };
        assert_eq!(sistema.problem(), None);
        assert!(!sistema.checkout() && stripe().checkout());
    }
}
