//! `pedir_segunda_via`: a new card for a blocked one, on its way to being ordered — never ordered
//! here. The card system quotes it (the fee, the balance and the credits that move, the delivery);
//! a card not blocked yet gets the block's question first; one the system says needs a person
//! (documents, a police report) goes to one. Only the card holder's own "sim" orders it
//! ([`super::ConfirmarPedidoCartao`]).

use async_trait::async_trait;
use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::balcao::{self, Lido};
use super::bloquear_cartao::prepare;
use super::cartao;
use super::pedido_cartao::{AcaoCartao, STATE_PEDIDO_CARTAO};
use super::settings::VtSettings;
use crate::systems::contract::{MotivoBloqueio, Recusa, SegundaViaCotacao};
use crate::systems::{ReadPolicy, SystemsPort};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, HandoffReason, ResponseToUser, TransferToHuman};

pub struct PedirSegundaVia;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Número do cartão de VT como o usuário escreveu (ou mascarado, `****7890`, se já foi dado).
    pub cartao: String,
    /// Como pagar a taxa, se houver: pix, boleto ou cartao_credito (pix se o usuário não disse).
    pub meio_pagamento: Option<String>,
}

#[async_trait]
impl Action for PedirSegundaVia {
    type Args = Args;

    const NAME: &'static str = "pedir_segunda_via";
    const DESCRIPTION: &'static str = "Pede a segunda via de um cartão de VT bloqueado (o saldo passa para o novo): \
         diz a taxa e pergunta se o usuário confirma; só o sim dele pede.";

    async fn call(&self, ctx: &ActionContext, args: Args) -> Result<ActionResponse, ActionError> {
        let card = match cartao::parsed(ctx, &args.cartao) {
            Ok(card) => card,
            Err(answer) => return Ok(*answer),
        };
        let masked = card.masked();
        let settings = VtSettings::of(ctx);
        let systems = ctx.require::<SystemsPort>()?.get();
        let read = systems
            .cotar_segunda_via(card.digits(), &balcao::headers(&settings), ReadPolicy::default())
            .await;
        let cotacao: SegundaViaCotacao = match quoted(&read, &masked) {
            Quoted::Ok(c) => c,
            Quoted::NotBlocked => {
                // Blocked first: its question now; the second copy is offered once it is.
                let block = AcaoCartao::Bloqueio {
                    motivo: MotivoBloqueio::Perda,
                };
                let mut answer = prepare(ctx, card.digits(), block).await?;
                if let ActionResponse::ToUser(r) = &mut answer
                    && r.message.starts_with("Confirma o bloqueio")
                {
                    r.message = format!(
                        "Antes da segunda via, o cartão {masked} precisa ser bloqueado. {}",
                        r.message
                    );
                }
                return Ok(answer);
            }
            Quoted::Said(answer) => return Ok(*answer),
        };
        let money = |v: f64| Decimal::try_from(v).unwrap_or_default().round_dp(2);
        let taxa = money(cotacao.taxa);
        let meio = (!taxa.is_zero()).then(|| args.meio_pagamento.unwrap_or_else(|| "pix".into()));
        let acao = AcaoCartao::SegundaVia {
            taxa,
            saldo: money(cotacao.saldo),
            creditos: money(cotacao.creditos_pendentes),
            meio,
        };
        prepare(ctx, card.digits(), acao).await
    }
}

enum Quoted {
    Ok(SegundaViaCotacao),
    /// The card must be blocked first.
    NotBlocked,
    /// What the card holder is told instead.
    Said(Box<ActionResponse>),
}

/// The card system's quote, or why there is none, as the card holder hears it.
fn quoted(read: &crate::systems::HttpResult, masked: &str) -> Quoted {
    let recusa = || {
        read.body
            .clone()
            .and_then(|b| vt_contract::json::from_value::<Recusa>(b).ok())
    };
    let said = |text: String, instruction: String| {
        Quoted::Said(Box::new(
            ResponseToUser::new(text, instruction)
                .with_state(STATE_PEDIDO_CARTAO, Value::Null)
                .into(),
        ))
    };
    match (read.status, recusa()) {
        (Some(409), Some(r)) if r.motivo == "cartao_nao_bloqueado" => return Quoted::NotBlocked,
        (Some(409), Some(r)) if r.motivo == "cartao_cancelado" => {
            return said(
                format!(
                    "O cartão {masked} já foi cancelado (substituído por outro). Se não recebeu o cartão novo, peça para falar com um atendente."
                ),
                format!("Segunda via do cartão {masked}: o cartão já está cancelado; nada foi pedido."),
            );
        }
        (Some(422), Some(r)) if r.motivo == "precisa_atendimento" => {
            let why = r
                .mensagem
                .unwrap_or_else(|| "a segunda via precisa de documentos".into());
            return Quoted::Said(Box::new(
                ResponseToUser::new(
                    format!("A segunda via do cartão {masked} não sai por aqui: {why}. Vou passar você para uma pessoa da equipe, que cuida disso com você."),
                    format!("Segunda via do cartão {masked}: o sistema de cartões pede atendimento ({why}); atendimento passado a uma pessoa."),
                )
                .with_state(STATE_PEDIDO_CARTAO, Value::Null)
                .with_function(
                    TransferToHuman::new(format!("segunda via do cartão {masked}: {why}"))
                        .because(HandoffReason::CartaoPerdidoOuBloqueado),
                )
                .into(),
            ));
        }
        _ => {}
    }
    match balcao::read::<SegundaViaCotacao>(read) {
        Lido::Ok(c) => Quoted::Ok(c),
        Lido::Desconhecido => said(
            balcao::desconhecido(masked),
            format!("Segunda via: o sistema não conhece o cartão {masked}."),
        ),
        Lido::Falhou(why) => Quoted::Said(Box::new(
            ResponseToUser::new(
                balcao::SEM_RESPOSTA,
                format!("A cotação da segunda via do cartão {masked} falhou ({why}); nada foi pedido. Não invente valores."),
            )
            .error()
            .into(),
        )),
    }
}
