//! A Pix charge as WhatsApp's native order, on accounts Meta enabled for its Payments API in Brazil
//! (`[pix] whatsapp_order_details`): `order_details` (`review_and_pay`) carries the amount and the
//! dynamic code, which the card holder copies with WhatsApp's own button; `order_status`
//! (`review_order`, the same `reference_id`: the txid) says where it ended. Meta does not reconcile
//! payments: the charge on record, read back from the provider, is what these messages say.

use rust_decimal::prelude::ToPrimitive as _;
use serde_json::{Value, json};
use vt_domain::tools::PedidoPix;

use vt_store::{ChargeStatus, PixCharge};

/// The message for `pedido` of `charge`, to `to`; `None` when there is nothing to say yet (the
/// status of a charge still waiting).
pub(super) fn message(pedido: PedidoPix, to: &str, charge: &PixCharge, key: &str) -> Option<Value> {
    let interactive = match pedido {
        PedidoPix::Pagar => order_details(charge, key),
        PedidoPix::Situacao => order_status(charge)?,
    };
    let (field, address) = super::wire::Addressee::of(to).field();
    let mut message = json!({
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "type": "interactive",
        "interactive": interactive,
    });
    message[field] = json!(address);
    Some(message)
}

/// The order to pay: the amount in cents (`offset` 100) and the code, paid to `key`.
fn order_details(charge: &PixCharge, key: &str) -> Value {
    let valor = vt_domain::vt::money_for_people("BRL", charge.amount, vt_domain::vt::Idioma::PtBr);
    let cents = (charge.amount * rust_decimal::Decimal::ONE_HUNDRED)
        .round()
        .to_i64()
        .unwrap_or_default();
    let merchant = vt_domain::pix::BrCode::parse(&charge.copia_e_cola)
        .ok()
        .and_then(|c| c.nome().map(str::to_owned))
        .unwrap_or_default();
    json!({
        "type": "order_details",
        "body": {"text": format!("Recarga de vale-transporte: {valor}. Toque em *Revisar e pagar* para copiar o código Pix.")},
        "action": {
            "name": "review_and_pay",
            "parameters": {
                "reference_id": charge.txid,
                "type": "digital-goods",
                "payment_type": "br",
                "currency": "BRL",
                "total_amount": {"value": cents, "offset": 100},
                "payment_settings": [{
                    "type": "pix_dynamic_code",
                    "pix_dynamic_code": {
                        "code": charge.copia_e_cola,
                        "merchant_name": merchant,
                        "key": key,
                        "key_type": vt_domain::pix::tipo_chave(key),
                    },
                }],
            },
        },
    })
}

/// Where the order stands, from the charge on record.
fn order_status(charge: &PixCharge) -> Option<Value> {
    let (status, text) = match charge.status {
        ChargeStatus::Ativa => return None,
        ChargeStatus::Paga | ChargeStatus::Enviada => {
            ("processing", "Pagamento recebido; recarga em processamento.")
        }
        ChargeStatus::Creditada => ("completed", "Pagamento recebido e recarga feita."),
        ChargeStatus::Expirada => ("canceled", "O código expirou sem pagamento."),
        ChargeStatus::Devolvida => (
            "canceled",
            "A recarga não pôde ser feita; o pagamento foi devolvido.",
        ),
    };
    Some(json!({
        "type": "order_status",
        "body": {"text": text},
        "action": {
            "name": "review_order",
            "parameters": {
                "reference_id": charge.txid,
                "order": {"status": status, "description": text},
            },
        },
    }))
}
