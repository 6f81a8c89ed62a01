//! What the card holder reads about a Pix recharge (pt-BR): the charge, the receipt, a refund.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use crate::vt::input::Idioma;
use crate::vt::money::money_for_people;
use crate::vt::timezone::Timezone;

fn brl(v: Decimal) -> String {
    money_for_people("BRL", v, Idioma::PtBr)
}

fn hora(t: DateTime<Utc>, tz: &Timezone) -> String {
    tz.local(t).format("%d/%m/%Y às %H:%M").to_string()
}

/// The line before the code: amount, masked card, until when it can be paid.
pub fn cobranca(valor: Decimal, cartao: &str, expira: DateTime<Utc>, tz: &Timezone) -> String {
    format!(
        "Para recarregar {} no cartão {cartao}, pague o Pix abaixo até {} (copie o código da próxima mensagem ou leia o QR code).",
        brl(valor),
        hora(expira, tz)
    )
}

/// The line before the code of a second copy's fee: the fee, the masked card, until when, and that the
/// order goes once it is paid.
pub fn cobranca_taxa(valor: Decimal, cartao: &str, expira: DateTime<Utc>, tz: &Timezone) -> String {
    format!(
        "Para a segunda via do cartão {cartao}, pague a taxa de {} pelo Pix abaixo até {} (copie o código da próxima mensagem ou leia o QR code). O pedido sai assim que o pagamento for confirmado, e eu aviso aqui.",
        brl(valor),
        hora(expira, tz)
    )
}

/// The receipt once the recharge is credited.
pub fn comprovante(
    valor: Decimal,
    cartao: &str,
    novo_saldo: Option<Decimal>,
    pago_em: DateTime<Utc>,
    end_to_end_id: &str,
    tz: &Timezone,
) -> String {
    let saldo = novo_saldo.map_or_else(String::new, |s| format!(" Novo saldo: {}.", brl(s)));
    format!(
        "Pagamento recebido e recarga feita: {} no cartão {cartao}.{saldo} Pago em {}. Identificador do Pix: {end_to_end_id}.",
        brl(valor),
        hora(pago_em, tz)
    )
}

/// The receipt's parameters for the `comprovante_recarga` WhatsApp template (outside the 24-hour
/// window): what [`comprovante`] says, one value each (`cartao_final`: the card's last four digits).
pub fn comprovante_parametros(
    valor: Decimal,
    cartao_final: &str,
    novo_saldo: Option<Decimal>,
    pago_em: DateTime<Utc>,
    end_to_end_id: &str,
    tz: &Timezone,
) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("valor".to_owned(), brl(valor)),
        ("cartao_final".to_owned(), cartao_final.to_owned()),
        (
            "novo_saldo".to_owned(),
            novo_saldo.map_or_else(|| "não informado".to_owned(), brl),
        ),
        ("pago_em".to_owned(), hora(pago_em, tz)),
        ("identificador".to_owned(), end_to_end_id.to_owned()),
    ])
}

/// Paid, but the recharge system did not credit it: the money goes back and a person looks.
pub fn devolvido(valor: Decimal, cartao: &str) -> String {
    format!(
        "Recebemos seu Pix de {}, mas a recarga no cartão {cartao} não pôde ser feita. O valor foi devolvido para a sua conta e uma pessoa da nossa equipe vai verificar.",
        brl(valor)
    )
}

/// Paid; the recharge system's answer is still to come.
pub fn em_processamento(valor: Decimal, cartao: &str) -> String {
    format!(
        "Recebemos seu Pix de {}. A recarga no cartão {cartao} está em processamento; avisaremos quando for concluída.",
        brl(valor)
    )
}

/// The code expired unpaid and was withdrawn.
pub fn expirado(valor: Decimal, cartao: &str) -> String {
    format!(
        "O código Pix da recarga de {} no cartão {cartao} expirou sem pagamento. Responda *novo código* para gerar outro.",
        brl(valor)
    )
}

/// A second code of the same recharge was paid too: that payment goes back.
pub fn duplicado(valor: Decimal, cartao: &str) -> String {
    format!(
        "Recebemos um segundo Pix de {} para a mesma recarga no cartão {cartao}. A recarga é feita uma vez só: esse segundo pagamento foi devolvido para a sua conta.",
        brl(valor)
    )
}
