//! Settings of the conversational tools: the tenant and the policies a conversation's requests carry,
//! and how long a recharge waits for the user's confirmation.

use serde::{Deserialize, Serialize};

use crate::vt::{Destinatario, FlowInput, Politicas, Preferencias, Recarga};
use vt_contract::context::ActionContext;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct VtSettings {
    /// The tenant of the chat's conversations and recharges (the deployment's).
    pub tenant_id: String,
    /// The origin the systems are told a chat recharge came from.
    pub origem: String,
    /// The flow's policies, for the chat's recharges too.
    #[serde(deserialize_with = "strict_politicas")]
    pub politicas: Politicas,
    /// Notification channels in order of preference.
    pub canais: Vec<String>,
    /// The language of amounts and dates in replies.
    pub idioma: String,
    /// A pending recharge is forgotten after this long without the user's confirmation.
    pub confirmation_ttl_secs: i64,
}

impl Default for VtSettings {
    fn default() -> Self {
        Self {
            tenant_id: "default".into(),
            origem: "CHAT".into(),
            politicas: Politicas::default(),
            canais: vec!["app".into()],
            idioma: "pt-BR".into(),
            confirmation_ttl_secs: 600,
        }
    }
}

impl VtSettings {
    /// The settings the engine was given, or the defaults.
    pub fn of(ctx: &ActionContext) -> Self {
        ctx.get::<VtSettings>().cloned().unwrap_or_default()
    }

    /// A flow input for `cartao` on behalf of the conversation's user.
    pub(crate) fn flow_input(
        &self,
        ctx: &ActionContext,
        cartao: &str,
        recarga: Option<Recarga>,
    ) -> FlowInput {
        FlowInput {
            cartao: cartao.to_owned(),
            tenant_id: self.tenant_id.clone(),
            origem: self.origem.clone(),
            politicas: self.politicas.clone(),
            recarga,
            preferencias: Preferencias {
                canais: self.canais.clone(),
                idioma: Some(self.idioma.clone()),
            },
            destinatario: Destinatario {
                tipo: "usuario".into(),
                id: ctx.user_id.clone(),
            },
            avisado_na_conversa: None,
        }
    }
}

/// The operator's policies, where a key that is no policy is refused — unlike a flow input, which
/// drops what it does not know (the PRD's input carries other fields): in a configuration file a
/// misspelt policy would leave its default in force without a word.
fn strict_politicas<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Politicas, D::Error> {
    use serde::de::Error as _;
    let value = serde_json::Value::deserialize(d)?;
    let known = vt_contract::json::to_value(Politicas::default()).map_err(D::Error::custom)?;
    if let Some(unknown) = unknown_key(&value, &known) {
        let accepted = known
            .as_object()
            .map(|o| o.keys().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "))
            .unwrap_or_default();
        return Err(D::Error::custom(format!(
            "unknown field `{unknown}`, expected one of {accepted}"
        )));
    }
    vt_contract::json::from_value(value).map_err(D::Error::custom)
}

/// The first key of `value` that `known` (a default, serialised) does not have, nested keys as
/// `a.b`.
fn unknown_key(value: &serde_json::Value, known: &serde_json::Value) -> Option<String> {
    let (serde_json::Value::Object(value), serde_json::Value::Object(known)) = (value, known) else {
        return None;
    };
    value.iter().find_map(|(k, v)| match known.get(k) {
        None => Some(k.clone()),
        Some(inner) => unknown_key(v, inner).map(|rest| format!("{k}.{rest}")),
    })
}
