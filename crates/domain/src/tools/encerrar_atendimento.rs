//! `encerrar_atendimento`: says goodbye and ends the conversation (EndChat).

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, EndChat, ResponseToUser};

pub struct EncerrarAtendimento;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Args {
    /// Motivo do encerramento, se houver.
    pub motivo: Option<String>,
}

#[async_trait]
impl Action for EncerrarAtendimento {
    type Args = Args;

    const NAME: &'static str = "encerrar_atendimento";
    const DESCRIPTION: &'static str =
        "Encerra o atendimento quando o usuário se despede ou diz que não precisa de mais nada.";

    async fn call(&self, _ctx: &ActionContext, args: Args) -> Result<ActionResponse, ActionError> {
        let motivo = args
            .motivo
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| "usuário se despediu".into());
        Ok(ResponseToUser::new(
            "Foi um prazer ajudar! Se precisar de algo sobre o seu vale-transporte, é só chamar. Até logo!",
            format!("Atendimento encerrado ({motivo})."),
        )
        .with_function(EndChat::new(motivo))
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vt_contract::response::UserFunction;

    #[tokio::test]
    async fn ends_the_chat() {
        let ctx = ActionContext::new("vt", "c1", chrono::Utc::now());
        let r = EncerrarAtendimento
            .call(&ctx, Args { motivo: None })
            .await
            .expect("ok");
        let ActionResponse::ToUser(r) = r else {
            panic!("expected ResponseToUser")
        };
        assert!(matches!(&r.functions[..], [UserFunction::EndChat(e)] if e.reason == "usuário se despediu"));
    }
}
