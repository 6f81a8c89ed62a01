//! `consultar_saldo`: runs RF1..RF5 through the stage chain and answers the balance: masked card,
//! amount, when it was checked, whether a low-balance notice went out.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::cartao;
use super::runner::SharedFlowRunner;
use super::settings::VtSettings;
use crate::stages::EnvioNotificacao;
use crate::stages::rf03_normalizar_saldo::SaldoNormalizado;
use crate::stages::rf05_enviar_notificacao::resumo;
use crate::vt::{Idioma, mask_card, money_for_people};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, ResponseToUser};

pub struct ConsultarSaldo;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Args {
    /// Número do cartão de VT como o usuário escreveu (espaços e traços são aceitos).
    pub cartao: String,
}

/// The answer for a card that fails the policy (shared with the recharge tools).
pub(crate) fn invalid_card(raw: &str, why: &str) -> ActionResponse {
    ResponseToUser::new(
        format!("O número de cartão {} não é válido: {why}. Confira o número do seu cartão de VT e me envie de novo.", mask_card(raw)),
        format!("Cartão inválido ({why}); nada foi consultado. Peça ao usuário o número correto."),
    )
    .error()
    .into()
}

#[async_trait]
impl Action for ConsultarSaldo {
    type Args = Args;

    const NAME: &'static str = "consultar_saldo";
    const DESCRIPTION: &'static str =
        "Consulta o saldo de um cartão de VT e responde ao usuário (avisa se o saldo estiver baixo).";

    async fn call(&self, ctx: &ActionContext, args: Args) -> Result<ActionResponse, ActionError> {
        let settings = VtSettings::of(ctx);
        let card = match cartao::parsed(ctx, &args.cartao) {
            Ok(card) => card,
            Err(answer) => return Ok(*answer),
        };
        let runner = ctx.require::<SharedFlowRunner>()?;
        let result = runner
            .run(ctx, &settings.flow_input(ctx, card.digits(), None))
            .await?;
        let saldo: Option<SaldoNormalizado> = result.stage("rf03_normalizar_saldo");
        let envio: EnvioNotificacao = result
            .stage("rf05_enviar_notificacao")
            .unwrap_or_else(|| EnvioNotificacao::not_sent("etapa_nao_executada"));
        let message = resumo(saldo.as_ref(), &envio);
        let Some(s) = saldo.filter(|s| s.sucesso() && !s.divergente()) else {
            return Ok(ResponseToUser::new(
                message,
                format!("Consulta de saldo do cartão {card} falhou (execução {}); o usuário foi avisado. Não invente um saldo.", result.execucao_id),
            )
            .error()
            .into());
        };
        let valor = s.saldo.unwrap_or_default();
        let texto = money_for_people(&s.moeda, valor, Idioma::PtBr);
        let instruction = format!(
            "Saldo consultado (execução {}): cartão {card}, {texto} em {}; saldo baixo: {}; aviso de saldo baixo enviado: {}. O usuário já recebeu esta resposta.",
            result.execucao_id,
            s.data_verificacao,
            if s.saldo_baixo { "sim" } else { "não" },
            if envio.enviado { "sim" } else { "não" },
        );
        let mut response = ResponseToUser::new(message, instruction)
            .with_state(
                "ultimo_saldo",
                json!({"cartao": card.masked(), "saldo": texto, "data": s.data_verificacao}),
            )
            .with_memory(cartao::MEMORY_CARTOES, cartao::remember(ctx, card.digits()));
        // A low balance, where recharges can happen by themselves: the offer, for the next message.
        if s.saldo_baixo
            && let Some(offer) = super::automatica::offer_for(ctx, &card.masked()).await
        {
            response = response.then(offer).with_state(
                super::automatica::STATE_OFERTA_AUTOMATICA,
                json!({"cartao": card.masked()}),
            );
        }
        Ok(response.into())
    }
}
