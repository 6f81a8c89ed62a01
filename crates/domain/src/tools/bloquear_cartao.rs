//! `bloquear_cartao`: a lost, stolen or damaged card, on its way to being blocked — never blocked
//! here. The card's holder is checked first (a card the conversation has on record, or the operator's
//! check), its situation read (a card blocked or cancelled already is said so), then the question that
//! only the card holder's own "sim" answers ([`super::ConfirmarPedidoCartao`] sends the block).

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::balcao::{self, Lido};
use super::cartao;
use super::pedido_cartao::{AcaoCartao, Autoatendimento, PedidoCartao, STATE_PEDIDO_CARTAO, Verificacao};
use super::settings::VtSettings;
use crate::systems::contract::{MotivoBloqueio, Situacao, SituacaoResposta};
use crate::systems::{ReadPolicy, SystemsPort};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, HandoffReason, ResponseToUser, TransferToHuman};

pub struct BloquearCartao;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Número do cartão de VT como o usuário escreveu (ou mascarado, `****7890`, se já foi dado).
    pub cartao: String,
    /// Por que bloquear; perda se o usuário não disse.
    pub motivo: Option<MotivoBloqueio>,
}

#[async_trait]
impl Action for BloquearCartao {
    type Args = Args;

    const NAME: &'static str = "bloquear_cartao";
    const DESCRIPTION: &'static str = "Pede o bloqueio de um cartão de VT perdido, roubado ou danificado: pergunta ao usuário \
         se confirma; só o sim dele bloqueia.";

    async fn call(&self, ctx: &ActionContext, args: Args) -> Result<ActionResponse, ActionError> {
        let card = match cartao::parsed(ctx, &args.cartao) {
            Ok(card) => card,
            Err(answer) => return Ok(*answer),
        };
        let acao = AcaoCartao::Bloqueio {
            motivo: args.motivo.unwrap_or(MotivoBloqueio::Perda),
        };
        prepare(ctx, card.digits(), acao).await
    }
}

/// A request that changes `cartao`, asked: refused when its holder cannot be checked, the check asked
/// when the operator configures one, else (a block: the card's situation read first) the question.
pub(crate) async fn prepare(
    ctx: &ActionContext,
    cartao: &str,
    acao: AcaoCartao,
) -> Result<ActionResponse, ActionError> {
    let masked = crate::vt::mask_card(cartao);
    let on_record = cartao::on_record_before(ctx, cartao);
    if !on_record {
        return Ok(match Autoatendimento::of(ctx).verificacao {
            Verificacao::CartaoLembrado => not_on_record(&masked, &acao),
            Verificacao::CpfFinal => {
                let pedido = PedidoCartao::new(ctx, cartao, acao, false);
                ResponseToUser::new(
                    format!(
                        "Para mexer no cartão {masked}, preciso confirmar que ele é seu: me diga os *3 últimos dígitos do CPF* do titular do cartão."
                    ),
                    format!(
                        "Pedido de {} do cartão {masked} à espera da verificação do titular (os dígitos do CPF, conferidos pelo sistema de cartões). Nada foi feito ainda.",
                        pedido.acao.name()
                    ),
                )
                .with_state(STATE_PEDIDO_CARTAO, pedido.to_value())
                .into()
            }
        });
    }
    checked(ctx, PedidoCartao::new(ctx, cartao, acao, true)).await
}

/// The question of `pedido`, whose holder is checked — for a block, once the card's situation says
/// there is something to block.
pub(crate) async fn checked(
    ctx: &ActionContext,
    pedido: PedidoCartao,
) -> Result<ActionResponse, ActionError> {
    if matches!(pedido.acao, AcaoCartao::Bloqueio { .. })
        && let Some(said) = already(ctx, &pedido.cartao, &pedido.masked()).await?
    {
        return Ok(said);
    }
    Ok(asked(pedido))
}

/// The question of `pedido`, waiting for the yes.
pub(crate) fn asked(pedido: PedidoCartao) -> ActionResponse {
    ResponseToUser::new(
        pedido.question(),
        format!(
            "Pedido de {} do cartão {} preparado e perguntado ao usuário; só a resposta *sim* dele o envia ao sistema de cartões. Nada foi feito ainda.",
            pedido.acao.name(),
            pedido.masked()
        ),
    )
    .with_state(STATE_PEDIDO_CARTAO, pedido.to_value())
    .into()
}

/// A card blocked or cancelled already, or one the system does not know: said, nothing asked. A
/// situation that could not be read asks the block anyway (the block's own answer will say).
async fn already(
    ctx: &ActionContext,
    cartao: &str,
    masked: &str,
) -> Result<Option<ActionResponse>, ActionError> {
    let settings = VtSettings::of(ctx);
    let systems = ctx.require::<SystemsPort>()?.get();
    let read = systems
        .consultar_situacao(cartao, &balcao::headers(&settings), ReadPolicy::default())
        .await;
    let text = match balcao::read::<SituacaoResposta>(&read) {
        Lido::Desconhecido => balcao::desconhecido(masked),
        Lido::Ok(s) if s.situacao == Situacao::Bloqueado => {
            let since = s
                .bloqueio
                .map(|b| format!(" desde {}", balcao::dia(&b.desde, &settings.politicas.timezone)))
                .unwrap_or_default();
            format!(
                "O cartão {masked} já está bloqueado{since}: ele não passa na catraca e o saldo está guardado. Se quiser, peça a *segunda via* para receber um cartão novo com o saldo."
            )
        }
        Lido::Ok(s) if s.situacao == Situacao::Cancelado => format!(
            "O cartão {masked} já está cancelado e não passa mais na catraca. Se não recebeu o cartão novo, peça para falar com um atendente."
        ),
        _ => return Ok(None),
    };
    Ok(Some(
        ResponseToUser::new(
            text,
            format!("Cartão {masked}: nada a bloquear (situação dita ao usuário)."),
        )
        .with_state(STATE_PEDIDO_CARTAO, Value::Null)
        .into(),
    ))
}

/// A card the conversation has no record of, where the operator checks no holder: refused, a person
/// offered.
fn not_on_record(masked: &str, acao: &AcaoCartao) -> ActionResponse {
    let what = match acao {
        AcaoCartao::Bloqueio { .. } => "bloquear o cartão",
        AcaoCartao::SegundaVia { .. } => "pedir a segunda via do cartão",
    };
    ResponseToUser::new(
        format!(
            "Por segurança, só consigo {what} {masked} por aqui se ele já estiver com você nesta conversa (consultado antes). Vou passar você para uma pessoa da equipe, que confirma a sua identidade e faz o pedido."
        ),
        format!(
            "Pedido de {} do cartão {masked} recusado: o cartão não está entre os que o usuário informou antes, e o operador não configurou outra verificação. Atendimento passado a uma pessoa.",
            acao.name()
        ),
    )
    .with_function(
        TransferToHuman::new("pedido de bloqueio ou segunda via de um cartão sem verificação do titular")
            .because(HandoffReason::CartaoPerdidoOuBloqueado),
    )
    .into()
}
