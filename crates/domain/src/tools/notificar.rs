//! `notificar`: sends a notification to the conversation's user through the notification system,
//! deduplicated; any card-like number in the text is masked first.

use std::collections::BTreeMap;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::settings::VtSettings;
use crate::systems::SystemsPort;
use crate::vt::card::mask_cards_in;
use crate::vt::keys;
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, ResponseToAgent};

pub struct Notificar;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Args {
    /// Assunto curto.
    pub assunto: String,
    /// Texto da notificação.
    pub mensagem: String,
    /// Canal (app, whatsapp, email, sms); o preferido do usuário se vazio.
    pub canal: Option<String>,
}

#[async_trait]
impl Action for Notificar {
    type Args = Args;

    const NAME: &'static str = "notificar";
    const DESCRIPTION: &'static str =
        "Envia uma notificação ao usuário desta conversa (app, WhatsApp, e-mail ou SMS).";

    async fn call(&self, ctx: &ActionContext, args: Args) -> Result<ActionResponse, ActionError> {
        let settings = VtSettings::of(ctx);
        let canal = args
            .canal
            .filter(|c| !c.trim().is_empty())
            .or_else(|| settings.canais.first().cloned())
            .unwrap_or_else(|| "app".into());
        let assunto = mask_cards_in(args.assunto.trim());
        let mensagem = mask_cards_in(args.mensagem.trim());
        if mensagem.is_empty() {
            return Err(ActionError::InvalidArguments(
                "a mensagem não pode ser vazia".into(),
            ));
        }
        let body = json!({"canal": canal, "assunto": assunto, "mensagem": mensagem,
                          "destinatario": {"tipo": "usuario", "id": ctx.user_id}, "metadados": {"conversa": ctx.conversation_id}});
        let key = keys::notificacao(&["conversa", &ctx.conversation_id, &canal, &assunto, &mensagem]);
        let headers = BTreeMap::from([
            ("x-idempotency-key".to_owned(), key),
            ("x-tenant-id".to_owned(), settings.tenant_id.clone()),
        ]);
        let resp = ctx
            .require::<SystemsPort>()?
            .get()
            .notificar(&body, &headers, 8_000, 3, 300)
            .await;
        Ok(if resp.is_success() {
            ResponseToAgent::new(format!("Notificação enviada ao usuário pelo canal {canal}."))
        } else {
            let why = resp.status.map_or_else(
                || resp.erro.map(|e| e.tipo).unwrap_or_default(),
                |s| format!("HTTP {s}"),
            );
            ResponseToAgent::new(format!(
                "A notificação não pôde ser enviada ({why}). Avise o usuário."
            ))
            .error()
        }
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_numbers_are_masked_in_texts() {
        assert_eq!(mask_cards_in("cartão 1234 5678-90 ok"), "cartão ****7890 ok");
        assert_eq!(mask_cards_in("valor 50 e 1.234,56"), "valor 50 e 1.234,56");
    }
}
