//! A second copy's fee charged before the order, where a provider here takes the means the card holder
//! chose: a Pix code (`[pix]`) or a card provider's checkout link. The charge is the request's own
//! (its key, `segunda_via:<id>`), so the payments job, once the provider says it was paid, orders the
//! second copy under that key with the payment as its token — never before, and once. Paid by boleto, or
//! with no provider for the means, nothing is charged here: the order carries the means and the card
//! system charges the fee, as a recharge without a provider does.

use rust_decimal::Decimal;
use serde_json::{Value, json};

use super::checkout::{LinkCartao, STATE_CARTAO, SharedCardCheckouts};
use super::pedido_cartao::{AcaoCartao, PedidoCartao, STATE_PEDIDO_CARTAO};
use super::pix::{CodigoPix, STATE_PIX, SharedPixCharges};
use super::settings::VtSettings;
use crate::vt::{Idioma, MeioPagamento, Recarga, money_for_people};
use vt_contract::action::ActionError;
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, HandoffReason, ResponseToUser, TransferToHuman};

/// The fee of `p`, a confirmed second copy, charged at the provider of its means: what the card holder
/// is shown (the code or the link). `None` when nothing is charged here (no fee, boleto, no provider).
pub(super) async fn charged_first(
    ctx: &ActionContext,
    p: &PedidoCartao,
    settings: &VtSettings,
) -> Option<ActionResponse> {
    let AcaoCartao::SegundaVia { taxa, meio, .. } = &p.acao else {
        return None;
    };
    if taxa.is_zero() {
        return None;
    }
    let meio = meio.as_deref()?;
    let fee = Recarga {
        valor: Some(*taxa),
        moeda: Some("BRL".into()),
        meio_pagamento: MeioPagamento {
            tipo: meio.into(),
            token: None,
        },
        idempotency_key: None,
    };
    let input = settings.flow_input(ctx, &p.cartao, Some(fee));
    match meio {
        "pix" => {
            let port = ctx.get::<SharedPixCharges>()?;
            let issued = port.issue(ctx, &input, &p.key(), 0).await;
            Some(by_pix(ctx, p, *taxa, issued))
        }
        "cartao_credito" => {
            let port = ctx.get::<SharedCardCheckouts>()?;
            let issued = port.link(ctx, &input, &p.key(), 0).await;
            Some(by_link(p, *taxa, issued))
        }
        _ => None,
    }
}

/// No code or link could be issued: nothing was charged nor ordered, and a person looks.
fn not_charged(p: &PedidoCartao, means: &str, e: &ActionError) -> ActionResponse {
    let masked = p.masked();
    ResponseToUser::new(
        format!("Não consegui gerar o {means} da taxa da segunda via do cartão {masked} agora, e nada foi cobrado nem pedido. Uma pessoa da nossa equipe vai verificar."),
        format!("Segunda via do cartão {masked} confirmada, mas o {means} da taxa falhou ({}): nada foi cobrado nem pedido; atendimento passado a uma pessoa.", e.operator_message()),
    )
    .with_state(STATE_PEDIDO_CARTAO, Value::Null)
    .with_function(
        TransferToHuman::new(format!("o {means} da taxa de uma segunda via falhou")).because(HandoffReason::FalhaDeSistema),
    )
    .error()
    .into()
}

/// The fee charged by Pix: the line (the port's: what it pays for, until when), the code, its QR.
fn by_pix(
    ctx: &ActionContext,
    p: &PedidoCartao,
    taxa: Decimal,
    issued: Result<CodigoPix, ActionError>,
) -> ActionResponse {
    let codigo = match issued {
        Ok(c) => c,
        Err(e) => return not_charged(p, "Pix", &e),
    };
    let masked = p.masked();
    let fee = money_for_people("BRL", taxa, Idioma::PtBr);
    let instruction = format!(
        "Segunda via do cartão {masked} confirmada pelo usuário; cobrança Pix {} da taxa de {fee} emitida. O pedido só é feito quando o provedor confirmar o pagamento; o usuário recebeu o código e será avisado.",
        codigo.txid
    );
    super::pix::mostrar(ctx, &codigo, instruction)
        .with_state(STATE_PEDIDO_CARTAO, Value::Null)
        .with_state(
            STATE_PIX,
            json!({"recarga": p.key(), "codigo": 0, "txid": codigo.txid, "descricao": description(p)}),
        )
        .into()
}

/// The fee on the card provider's checkout: the port's line with the link (a channel that shows buttons
/// adds one), never a card number asked in the chat.
fn by_link(p: &PedidoCartao, taxa: Decimal, issued: Result<LinkCartao, ActionError>) -> ActionResponse {
    let link = match issued {
        Ok(l) => l,
        Err(e) => return not_charged(p, "link de pagamento", &e),
    };
    let masked = p.masked();
    let fee = money_for_people("BRL", taxa, Idioma::PtBr);
    let instruction = format!(
        "Segunda via do cartão {masked} confirmada pelo usuário; link de pagamento no cartão {} da taxa de {fee} emitido. O pedido só é feito quando o provedor confirmar o pagamento; o usuário recebeu o link e será avisado. Nunca peça o número do cartão de crédito.",
        link.id
    );
    super::checkout::mostrar(&link, instruction)
        .with_state(STATE_PEDIDO_CARTAO, Value::Null)
        .with_state(
            STATE_CARTAO,
            json!({"recarga": p.key(), "id": link.id, "descricao": description(p)}),
        )
        .into()
}

/// What the charge pays for, as a new code's or link's line names it.
fn description(p: &PedidoCartao) -> String {
    format!("taxa da segunda via do cartão {}", p.masked())
}
