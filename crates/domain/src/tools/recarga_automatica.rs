//! `recarga_automatica`: a recharge that happens by itself — created (the card holder then authorises
//! it in their bank app: that authorisation is their confirmation, and no money moves before it),
//! listed, cancelled. The terms are checked against the policy and `[pix.automatico]` before anything
//! reaches the provider.

use async_trait::async_trait;
use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::Deserialize;

use super::automatica::{Gatilho, SharedRecargasAutomaticas, Termos, brl};
use super::{VtSettings, cartao};
use crate::vt::mask_card;
use crate::vt::money::MoneyArg;
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, ResponseToAgent, ResponseToUser};

pub struct RecargaAutomatica;

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Acao {
    /// Create one (a new authorisation, also to change the terms of one that exists).
    Criar,
    /// List the user's.
    Listar,
    /// Cancel the user's (of `cartao` only, when given).
    Cancelar,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Args {
    /// criar, listar ou cancelar.
    pub acao: Acao,
    /// Número do cartão de VT (criar; em cancelar, só o desse cartão).
    pub cartao: Option<String>,
    /// Valor de cada recarga, em reais (criar).
    pub valor: Option<MoneyArg>,
    /// Recarregar quando o saldo ficar abaixo deste valor, em reais (criar; ou `dia`).
    pub limite: Option<MoneyArg>,
    /// Recarregar todo mês neste dia, de 1 a 31 (criar; ou `limite`).
    pub dia: Option<u32>,
}

#[async_trait]
impl Action for RecargaAutomatica {
    type Args = Args;

    const NAME: &'static str = "recarga_automatica";
    const DESCRIPTION: &'static str = "Recarga automática por Pix Automático: criar (quando o saldo ficar abaixo de `limite`, ou todo \
         mês no `dia`, com `valor` por vez; o usuário autoriza no app do banco), listar ou cancelar as \
         do usuário.";

    /// Offered only where recharges can happen by themselves (the port is there).
    fn offered(
        &self,
        _: &serde_json::Map<String, serde_json::Value>,
        extensions: &vt_contract::context::Extensions,
    ) -> bool {
        extensions.get::<SharedRecargasAutomaticas>().is_some()
    }

    async fn call(&self, ctx: &ActionContext, args: Args) -> Result<ActionResponse, ActionError> {
        let Some(port) = ctx.get::<SharedRecargasAutomaticas>() else {
            return Ok(ResponseToUser::new(
                "A recarga automática ainda não está disponível por aqui. Posso fazer uma recarga agora, se quiser.",
                "Recarga automática indisponível (sem Pix Automático configurado); nada foi feito.",
            )
            .into());
        };
        match args.acao {
            Acao::Criar => create(ctx, port, &args).await,
            Acao::Listar => list(ctx, port).await,
            Acao::Cancelar => cancel(ctx, port, args.cartao.as_deref()).await,
        }
    }
}

async fn create(
    ctx: &ActionContext,
    port: &SharedRecargasAutomaticas,
    args: &Args,
) -> Result<ActionResponse, ActionError> {
    let Some(raw) = args.cartao.as_deref().filter(|c| !c.trim().is_empty()) else {
        return Ok(ResponseToAgent::new(
            "Falta o cartão: pergunte ao usuário o número do cartão de VT a recarregar automaticamente.",
        )
        .error()
        .into());
    };
    let card = match cartao::parsed(ctx, raw) {
        Ok(card) => card,
        Err(answer) => return Ok(*answer),
    };
    let settings = VtSettings::of(ctx);
    let p = &settings.politicas;
    let config = port.config();
    let termos = match terms(args, config, (p.valor_min, p.valor_max)) {
        Ok(t) => t,
        Err(why) => {
            return Ok(ResponseToUser::new(
                why.clone(),
                format!("Termos de recarga automática recusados ({why}); nada foi criado."),
            )
            .error()
            .into());
        }
    };
    let input = settings.flow_input(ctx, card.digits(), None);
    let auth = port.autorizar(ctx, &input, termos).await?;
    let mut response = ResponseToUser::new(
        auth.texto.clone(),
        format!(
            "Recarga automática {} ({}) criada para o cartão {}; aguarda a autorização do usuário no app do banco. Nada foi cobrado.",
            auth.id,
            termos.describe(),
            mask_card(card.digits())
        ),
    )
    .then(auth.copia_e_cola.clone());
    if ctx.channel == "terminal"
        && let Ok(qr) = crate::pix::qr::text(&auth.copia_e_cola)
    {
        response = response.then(qr);
    }
    Ok(response
        .with_memory(cartao::MEMORY_CARTOES, cartao::remember(ctx, card.digits()))
        .into())
}

/// The terms asked, checked: a threshold or a day (the offer's threshold when neither), an amount
/// within the policy and `[pix.automatico] valor_maximo` (the offer's when none).
fn terms(
    args: &Args,
    config: &crate::pix::automatico::AutomaticoConfig,
    (min, max): (Decimal, Decimal),
) -> Result<Termos, String> {
    let max = max.min(config.valor_maximo);
    let valor = args.valor.as_ref().map_or(config.valor_padrao, |v| v.0);
    if valor < min || valor > max {
        return Err(format!(
            "Cada recarga automática precisa ficar entre {} e {}. Qual valor você prefere?",
            brl(min),
            brl(max)
        ));
    }
    let gatilho = match (args.limite.as_ref(), args.dia) {
        (Some(_), Some(_)) => {
            return Err(
                "Escolha um jeito: quando o saldo ficar abaixo de um valor, ou num dia do mês.".to_owned(),
            );
        }
        (_, Some(d)) if !(1..=31).contains(&d) => {
            return Err("O dia do mês precisa estar entre 1 e 31.".to_owned());
        }
        (_, Some(d)) => Gatilho::Dia(d),
        (Some(l), None) if l.0 <= Decimal::ZERO || l.0 > max => {
            return Err(format!(
                "O saldo mínimo para recarregar precisa ficar entre BRL 0,01 e {}.",
                brl(max)
            ));
        }
        (Some(l), None) => Gatilho::Limite(l.0),
        (None, None) => Gatilho::Limite(config.limite_padrao),
    };
    Ok(Termos {
        gatilho,
        valor: crate::vt::round_half_up(valor),
    })
}

async fn list(ctx: &ActionContext, port: &SharedRecargasAutomaticas) -> Result<ActionResponse, ActionError> {
    let all = port.listar(ctx).await?;
    if all.is_empty() {
        return Ok(ResponseToUser::new(
            "Você não tem recarga automática. Quer criar uma? Por exemplo: \"recarrega 50 quando o saldo ficar abaixo de 20\" ou \"recarrega 100 todo dia 5\".",
            "O usuário não tem recargas automáticas.",
        )
        .into());
    }
    let lines: Vec<String> = all.iter().map(|r| format!("• {}", r.linha)).collect();
    Ok(ResponseToUser::new(
        format!(
            "Suas recargas automáticas:\n{}\nPara cancelar, diga \"cancelar recarga automática\".",
            lines.join("\n")
        ),
        format!("{} recarga(s) automática(s) listada(s) ao usuário.", all.len()),
    )
    .into())
}

async fn cancel(
    ctx: &ActionContext,
    port: &SharedRecargasAutomaticas,
    cartao: Option<&str>,
) -> Result<ActionResponse, ActionError> {
    let card = match cartao.filter(|c| !c.trim().is_empty()) {
        Some(raw) => match cartao::resolve(ctx, raw) {
            Ok(raw) => Some(raw),
            Err(answer) => return Ok(*answer),
        },
        None => None,
    };
    let cancelled = port.cancelar(ctx, card.as_deref()).await?;
    if cancelled.is_empty() {
        return Ok(ResponseToUser::new(
            "Você não tem recarga automática ativa, então não há nada para cancelar.",
            "Pedido de cancelamento de recarga automática sem nenhuma ativa: nada foi feito.",
        )
        .into());
    }
    let lines: Vec<String> = cancelled.iter().map(|r| format!("• {}", r.linha)).collect();
    Ok(ResponseToUser::new(
        format!(
            "Pronto, cancelei a recarga automática:\n{}\nNenhuma nova cobrança será feita.",
            lines.join("\n")
        ),
        format!(
            "{} recarga(s) automática(s) cancelada(s) a pedido do usuário.",
            cancelled.len()
        ),
    )
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use vt_contract::action::DynAction as _;

    #[test]
    fn its_schema_is_strict_and_small() {
        let schema = RecargaAutomatica.parameters();
        assert_eq!(schema["additionalProperties"], false);
        let required: Vec<&str> = schema["required"]
            .as_array()
            .expect("required")
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert_eq!(required, ["acao", "cartao", "valor", "limite", "dia"]);
        let size =
            vt_contract::json::to_text(&schema).expect("json").len() + RecargaAutomatica::DESCRIPTION.len();
        println!("recarga_automatica: {size} characters of tool spec");
        assert!(size < 1_500, "{size}");
    }

    #[test]
    fn terms_default_to_the_offer_and_stay_within_the_limits() {
        let config = crate::pix::automatico::AutomaticoConfig::default();
        let args = |valor: Option<i64>, limite: Option<i64>, dia: Option<u32>| Args {
            acao: Acao::Criar,
            cartao: None,
            valor: valor.map(|v| MoneyArg(Decimal::new(v, 0))),
            limite: limite.map(|v| MoneyArg(Decimal::new(v, 0))),
            dia,
        };
        let limits = (Decimal::ONE, Decimal::new(1000, 0));
        let offer = terms(&args(None, None, None), &config, limits).expect("the offer");
        assert_eq!(offer.gatilho, Gatilho::Limite(Decimal::new(20, 0)));
        assert_eq!(offer.valor, Decimal::new(50, 0));
        assert!(
            terms(&args(Some(201), None, None), &config, limits).is_err(),
            "over valor_maximo"
        );
        assert!(
            terms(&args(Some(50), Some(10), Some(5)), &config, limits).is_err(),
            "both"
        );
        assert!(terms(&args(Some(50), None, Some(0)), &config, limits).is_err());
        assert_eq!(
            terms(&args(Some(80), None, Some(31)), &config, limits).map(|t| t.gatilho),
            Ok(Gatilho::Dia(31))
        );
    }
}
