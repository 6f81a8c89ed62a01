//! What RF4/RF9 prepare and RF5/RF10 send: the notification decision and the send result, and the one
//! function that sends.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::systems::{Erro, Systems};
use crate::vt::{Destinatario, FlowInput};

/// Notification calls: dedup key makes retries safe, so 5xx/429 get up to 3 attempts.
const TIMEOUT_MS: u64 = 8_000;
const ATTEMPTS: u32 = 3;
const BACKOFF_MS: u64 = 300;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DecisaoNotificacao {
    pub enviar_notificacao: bool,
    pub payload: Option<NotificacaoPayload>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub motivo: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NotificacaoPayload {
    pub canal: String,
    pub assunto: String,
    /// Text for a person: money formatted, card masked.
    pub mensagem: String,
    pub destinatario: Destinatario,
    /// Internal metadata: numbers stay numbers, the card is complete here only.
    pub metadados: Map<String, Value>,
}

impl DecisaoNotificacao {
    /// A notice to send, on the preferred channel, to the flow's recipient.
    pub(crate) fn enviar(
        input: &FlowInput,
        assunto: String,
        mensagem: String,
        metadados: Map<String, Value>,
    ) -> Self {
        Self {
            enviar_notificacao: true,
            payload: Some(NotificacaoPayload {
                canal: input.preferencias.canal(),
                assunto,
                mensagem,
                destinatario: input.destinatario.clone(),
                metadados,
            }),
            motivo: None,
        }
    }

    /// A metadata field as text (empty when absent or null), for dedup keys.
    pub(crate) fn meta_text(&self, key: &str) -> String {
        self.payload
            .as_ref()
            .and_then(|p| p.metadados.get(key))
            .filter(|v| !v.is_null())
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .unwrap_or_default()
    }
}

/// What RF5/RF10 report: always `enviado`; `status`/`body` when there was an answer; `motivo` when
/// nothing was delivered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EnvioNotificacao {
    pub enviado: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub motivo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erro: Option<Erro>,
}

impl EnvioNotificacao {
    pub fn not_sent(motivo: impl Into<String>) -> Self {
        Self {
            enviado: false,
            status: None,
            body: None,
            motivo: Some(motivo.into()),
            erro: None,
        }
    }
}

/// Sends `decisao`'s payload (if it asks for one) with the dedup key `key`.
pub(super) async fn enviar(
    systems: &dyn Systems,
    decisao: &DecisaoNotificacao,
    key: &str,
    tenant: &str,
) -> EnvioNotificacao {
    let payload = match (&decisao.payload, decisao.enviar_notificacao) {
        (Some(p), true) => p,
        _ => {
            return EnvioNotificacao::not_sent(
                decisao.motivo.clone().unwrap_or_else(|| "nao_solicitado".into()),
            );
        }
    };
    let body = match vt_contract::json::to_value(payload) {
        Ok(b) => b,
        Err(e) => return EnvioNotificacao::not_sent(format!("payload_invalido: {e}")),
    };
    let headers = BTreeMap::from([
        ("x-idempotency-key".to_owned(), key.to_owned()),
        ("x-tenant-id".to_owned(), tenant.to_owned()),
    ]);
    let resp = systems
        .notificar(&body, &headers, TIMEOUT_MS, ATTEMPTS, BACKOFF_MS)
        .await;
    let accepted = resp.is_success()
        && resp
            .body
            .as_ref()
            .and_then(|b| b.get("aceito"))
            .and_then(Value::as_bool)
            != Some(false);
    match (resp.status, accepted) {
        (Some(status), true) => EnvioNotificacao {
            enviado: true,
            status: Some(status),
            body: resp.body,
            motivo: None,
            erro: None,
        },
        (Some(status), false) => EnvioNotificacao {
            enviado: false,
            status: Some(status),
            body: resp.body,
            motivo: Some(format!("http_{status}")),
            erro: None,
        },
        (None, _) => {
            let motivo = resp
                .erro
                .as_ref()
                .map_or("falha_envio".to_owned(), |e| e.tipo.clone());
            EnvioNotificacao {
                enviado: false,
                status: None,
                body: None,
                motivo: Some(motivo),
                erro: resp.erro,
            }
        }
    }
}
