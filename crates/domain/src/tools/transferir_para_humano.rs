//! `transferir_para_humano`: hands the conversation to a person (TransferToHuman).

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, HandoffReason, ResponseToUser, TransferToHuman};

pub struct TransferirParaHumano;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Args {
    /// Por que o usuário precisa de um atendente, em poucas palavras.
    pub motivo: String,
    /// O tipo do motivo: pedido_do_cliente (padrão), cartao_perdido_ou_bloqueado,
    /// pagamento_nao_creditado, fora_do_escopo, falha_de_sistema ou limite_do_assistente.
    #[serde(default)]
    pub categoria: Option<HandoffReason>,
}

#[async_trait]
impl Action for TransferirParaHumano {
    type Args = Args;

    const NAME: &'static str = "transferir_para_humano";
    const DESCRIPTION: &'static str = "Transfere o atendimento para um atendente humano. Use quando o usuário pedir uma pessoa ou \
         quando o pedido estiver fora do que as outras ferramentas fazem.";

    async fn call(&self, ctx: &ActionContext, args: Args) -> Result<ActionResponse, ActionError> {
        let motivo = args.motivo.trim();
        let motivo = if motivo.is_empty() {
            "pedido do usuário"
        } else {
            motivo
        };
        let mut transfer = TransferToHuman::new(motivo).because(args.categoria.unwrap_or_default());
        transfer
            .session_info
            .insert("canal".into(), ctx.channel.clone().into());
        Ok(ResponseToUser::new(
            "Certo! Vou transferir você para um de nossos atendentes. Aguarde um momento, por favor.",
            format!("Atendimento transferido para um humano. Motivo: {motivo}. Não continue o atendimento."),
        )
        .with_function(transfer)
        .with_state("transferido", true)
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vt_contract::response::UserFunction;

    #[tokio::test]
    async fn answers_the_user_and_transfers() {
        let ctx = ActionContext::new("vt", "c1", chrono::Utc::now());
        let r = TransferirParaHumano
            .call(
                &ctx,
                Args {
                    motivo: "cartão roubado".into(),
                    categoria: Some(HandoffReason::CartaoPerdidoOuBloqueado),
                },
            )
            .await
            .expect("ok");
        let ActionResponse::ToUser(r) = r else {
            panic!("expected ResponseToUser")
        };
        assert!(r.instruction.contains("cartão roubado"));
        assert!(matches!(&r.functions[..], [UserFunction::TransferToHuman(t)]
            if t.reason == "cartão roubado" && t.motivo == HandoffReason::CartaoPerdidoOuBloqueado));
        assert_eq!(r.state_updates["transferido"], true);
    }
}
