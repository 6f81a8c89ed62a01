//! What the card holder reads about a recharge paid by card (pt-BR): the link, the receipt, a
//! refund. The card number is never asked for: the provider's page takes it.

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

/// The line with the link: amount, masked VT card, until when it can be paid, and that the card is
/// typed on the provider's page, never here.
pub fn link(valor: Decimal, cartao: &str, url: &str, expira: DateTime<Utc>, tz: &Timezone) -> String {
    format!(
        "Para recarregar {} no cartão {cartao}, pague com o seu cartão de crédito na página segura do pagamento até {}: {url} — nunca digite o número do seu cartão de crédito aqui na conversa.",
        brl(valor),
        hora(expira, tz)
    )
}

/// The line with the link of a second copy's fee: the fee, the masked VT card, until when, that the card
/// is typed on the provider's page, and that the order goes once it is paid.
pub fn link_taxa(valor: Decimal, cartao: &str, url: &str, expira: DateTime<Utc>, tz: &Timezone) -> String {
    format!(
        "Para a segunda via do cartão {cartao}, pague a taxa de {} com o seu cartão de crédito na página segura do pagamento até {}: {url} — nunca digite o número do seu cartão de crédito aqui na conversa. O pedido sai assim que o pagamento for confirmado, e eu aviso aqui.",
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
    pagamento: &str,
    tz: &Timezone,
) -> String {
    let saldo = novo_saldo.map_or_else(String::new, |s| format!(" Novo saldo: {}.", brl(s)));
    format!(
        "Pagamento no cartão de crédito recebido e recarga feita: {} no cartão {cartao}.{saldo} Pago em {}. Identificador do pagamento: {pagamento}.",
        brl(valor),
        hora(pago_em, tz)
    )
}

/// Paid, but the recharge system did not credit it: the payment is refunded and a person looks.
pub fn devolvido(valor: Decimal, cartao: &str) -> String {
    format!(
        "Recebemos seu pagamento de {} no cartão de crédito, mas a recarga no cartão {cartao} não pôde ser feita. O valor foi estornado no seu cartão de crédito e uma pessoa da nossa equipe vai verificar.",
        brl(valor)
    )
}

/// Paid; the recharge system's answer is still to come.
pub fn em_processamento(valor: Decimal, cartao: &str) -> String {
    format!(
        "Recebemos seu pagamento de {} no cartão de crédito. A recarga no cartão {cartao} está em processamento; avisaremos quando for concluída.",
        brl(valor)
    )
}

/// The link expired unpaid.
pub fn expirado(valor: Decimal, cartao: &str) -> String {
    format!(
        "O link de pagamento da recarga de {} no cartão {cartao} expirou sem pagamento, e nada foi cobrado. Responda *novo link* para gerar outro.",
        brl(valor)
    )
}

/// A second link of the same recharge was paid too: that payment is refunded.
pub fn duplicado(valor: Decimal, cartao: &str) -> String {
    format!(
        "Recebemos um segundo pagamento de {} no cartão de crédito para a mesma recarga no cartão {cartao}. A recarga é feita uma vez só: esse segundo pagamento foi estornado.",
        brl(valor)
    )
}
