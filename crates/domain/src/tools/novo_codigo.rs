//! `novo_codigo_pix`: a new Pix code for the conversation's recharge whose code expired — a new charge
//! (the recharge's next code), at most `[pix] novos_codigos_max` times; the same code again while it
//! still holds; nothing once the recharge was paid. No argument: the recharge is the conversation's.
//! The same for a recharge paid by card: a new checkout link (`[cartao] novos_links_max`), by the same
//! rules — one tool, since the card holder asks for "another one" of whatever they were shown.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::checkout::{NovoLink, STATE_CARTAO, SharedCardCheckouts};
use super::pix::{NovoCodigo, STATE_PIX, SharedPixCharges, mostrar};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, ResponseToUser};

pub struct NovoCodigoPix;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Args {}

#[async_trait]
impl Action for NovoCodigoPix {
    type Args = Args;

    const NAME: &'static str = "novo_codigo_pix";
    const DESCRIPTION: &'static str = "Gera um novo código Pix (ou um novo link de pagamento no cartão) para a recarga da conversa cujo \
         código ou link expirou. Sem argumentos.";

    async fn call(&self, ctx: &ActionContext, _args: Args) -> Result<ActionResponse, ActionError> {
        let pendente = ctx.state.get(STATE_PIX).filter(|v| !v.is_null());
        let cartao = ctx.state.get(STATE_CARTAO).filter(|v| !v.is_null());
        let asks_for_a_link = crate::vt::parse::normalize(&ctx.user_message).contains("link");
        if let Some(cartao) = cartao
            && (pendente.is_none() || asks_for_a_link)
        {
            return novo_link(ctx, cartao).await;
        }
        let (Some(port), Some(recarga)) = (
            ctx.get::<SharedPixCharges>(),
            pendente.and_then(|p| p.get("recarga")).and_then(Value::as_str),
        ) else {
            return Ok(ResponseToUser::new(
                "Não há nenhum código Pix esperando pagamento nesta conversa. Se quiser recarregar, me diga o cartão, o valor e o meio de pagamento.",
                "Nenhuma cobrança Pix pendente nesta conversa: nenhum código foi gerado.",
            )
            .into());
        };
        let descricao = pendente
            .and_then(|p| p.get("descricao"))
            .and_then(Value::as_str)
            .unwrap_or("sua recarga")
            .to_owned();
        Ok(match port.novo_codigo(ctx, recarga).await? {
            NovoCodigo::Emitido(codigo) => {
                let instruction = format!(
                    "Novo código Pix emitido para a recarga ({}): cobrança {}, válida até {}. A recarga só é enviada quando o pagamento for confirmado.",
                    descricao,
                    codigo.txid,
                    codigo.expira_em.to_rfc3339()
                );
                mostrar(ctx, &codigo, instruction)
                    .with_state(
                        STATE_PIX,
                        json!({"recarga": recarga, "txid": codigo.txid, "descricao": descricao}),
                    )
                    .into()
            }
            NovoCodigo::AindaValido(codigo) => {
                let instruction = format!(
                    "O código Pix {} da recarga ({}) ainda vale: mostrado de novo, nenhuma cobrança nova.",
                    codigo.txid, descricao
                );
                mostrar(ctx, &codigo, instruction).into()
            }
            NovoCodigo::Limite => ResponseToUser::new(
                format!("Já gerei todos os códigos Pix possíveis para a recarga de {descricao}. Se ainda quiser recarregar, é só pedir a recarga de novo."),
                "Limite de novos códigos Pix da recarga atingido: nenhum código gerado.",
            )
            .with_state(STATE_PIX, Value::Null)
            .into(),
            NovoCodigo::JaPago => ResponseToUser::new(
                format!("O Pix da recarga de {descricao} já foi pago: não é preciso outro código."),
                "A recarga já foi paga: nenhum código novo.",
            )
            .with_state(STATE_PIX, Value::Null)
            .into(),
        })
    }
}

/// A new checkout link for the conversation's card recharge (`cartao`: its [`STATE_CARTAO`]).
async fn novo_link(ctx: &ActionContext, cartao: &Value) -> Result<ActionResponse, ActionError> {
    let (Some(port), Some(recarga)) = (
        ctx.get::<SharedCardCheckouts>(),
        cartao.get("recarga").and_then(Value::as_str),
    ) else {
        return Ok(ResponseToUser::new(
            "Não há nenhum link de pagamento esperando nesta conversa. Se quiser recarregar, me diga o cartão, o valor e o meio de pagamento.",
            "Nenhum link de pagamento no cartão pendente nesta conversa: nenhum link foi gerado.",
        )
        .into());
    };
    let descricao = cartao
        .get("descricao")
        .and_then(Value::as_str)
        .unwrap_or("sua recarga")
        .to_owned();
    Ok(match port.novo_link(ctx, recarga).await? {
        NovoLink::Emitido(link) => {
            let instruction = format!(
                "Novo link de pagamento no cartão emitido para a recarga ({}): {}, válido até {}. A recarga só é enviada quando o pagamento for confirmado.",
                descricao,
                link.id,
                link.expira_em.to_rfc3339()
            );
            super::checkout::mostrar(&link, instruction)
                .with_state(
                    STATE_CARTAO,
                    json!({"recarga": recarga, "id": link.id, "descricao": descricao}),
                )
                .into()
        }
        NovoLink::AindaValido(link) => {
            let instruction = format!(
                "O link de pagamento {} da recarga ({}) ainda vale: mostrado de novo, nenhum link novo.",
                link.id, descricao
            );
            super::checkout::mostrar(&link, instruction).into()
        }
        NovoLink::Limite => ResponseToUser::new(
            format!("Já gerei todos os links de pagamento possíveis para a recarga de {descricao}. Se ainda quiser recarregar, é só pedir a recarga de novo."),
            "Limite de novos links de pagamento da recarga atingido: nenhum link gerado.",
        )
        .with_state(STATE_CARTAO, Value::Null)
        .into(),
        NovoLink::JaPago => ResponseToUser::new(
            format!("A recarga de {descricao} já foi paga no cartão: não é preciso outro link."),
            "A recarga já foi paga: nenhum link novo.",
        )
        .with_state(STATE_CARTAO, Value::Null)
        .into(),
    })
}
