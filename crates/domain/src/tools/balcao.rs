//! What the card desk's tools share: the card system read with the operator's headers, and its
//! answers read into the contract's types and said in the card holder's words (pt-BR).

use std::collections::BTreeMap;

use chrono::{DateTime, FixedOffset};
use serde::de::DeserializeOwned;

use super::settings::VtSettings;
use crate::systems::HttpResult;
use crate::systems::contract::Recusa;
use crate::vt::timezone::Timezone;

/// The headers every call to the systems carries.
pub(super) fn headers(settings: &VtSettings) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("x-tenant-id".to_owned(), settings.tenant_id.clone()),
        ("x-origin".to_owned(), settings.origem.clone()),
    ])
}

/// What a read of the card system gave, as the tools tell it apart.
pub(super) enum Lido<T> {
    Ok(T),
    /// The system does not know the card (`404 cartao_desconhecido`).
    Desconhecido,
    /// No answer in the contract's shape: down, refused, or a system without the desk.
    Falhou(String),
}

pub(super) fn read<T: DeserializeOwned>(r: &HttpResult) -> Lido<T> {
    let body = r.body.clone().unwrap_or_default();
    match r.status {
        // Not the parser's words: they may quote a value of the body (a card), and this goes to the model.
        Some(200) => vt_contract::json::from_value(body)
            .map_or_else(|_| Lido::Falhou("resposta fora do contrato".to_owned()), Lido::Ok),
        Some(404)
            if vt_contract::json::from_value::<Recusa>(body)
                .is_ok_and(|b| b.motivo == "cartao_desconhecido") =>
        {
            Lido::Desconhecido
        }
        Some(s) => Lido::Falhou(format!("HTTP {s}")),
        None => Lido::Falhou(
            r.erro
                .as_ref()
                .map_or_else(|| "sem resposta".to_owned(), |e| e.tipo.clone()),
        ),
    }
}

/// An ISO 8601 time of the system as the card holder reads it: `21/11 às 09:00`, in the operator's
/// time zone (the text itself when it is no time).
pub(super) fn quando(iso: &str, tz: &Timezone) -> String {
    DateTime::<FixedOffset>::parse_from_rfc3339(iso).map_or_else(
        |_| iso.to_owned(),
        |t| tz.local(t.to_utc()).format("%d/%m às %H:%M").to_string(),
    )
}

/// The same, the day only: `21/11/2026`.
pub(super) fn dia(iso: &str, tz: &Timezone) -> String {
    DateTime::<FixedOffset>::parse_from_rfc3339(iso).map_or_else(
        |_| iso.to_owned(),
        |t| tz.local(t.to_utc()).format("%d/%m/%Y").to_string(),
    )
}

/// An amount of the card system (a JSON number) as the card holder reads it: `R$ 4,40`.
pub(super) fn brl(valor: f64) -> String {
    let v = rust_decimal::Decimal::try_from(valor).unwrap_or_default();
    crate::vt::money_for_people("BRL", v, crate::vt::Idioma::PtBr)
}

/// The answer when the card system could not say: nothing invented, a person offered.
pub(super) const SEM_RESPOSTA: &str = "Não consegui consultar o sistema de cartões agora. Tente de novo em alguns minutos ou, se preferir, peça para falar com um atendente.";

/// The answer for a card the system does not know.
pub(super) fn desconhecido(masked: &str) -> String {
    format!(
        "O sistema de cartões não encontrou o cartão {masked}. Confira o número (ele está no verso do cartão) e me envie de novo."
    )
}

#[cfg(test)]
mod tests {
    use vt_contract::action::{Action, DynAction};

    use super::super::{BloquearCartao, ConfirmarPedidoCartao, ConsultarSituacao, Extrato, PedirSegundaVia};

    /// What offering a tool costs a model turn, in characters of its spec.
    fn spec_size<A: Action>(a: &A) -> usize {
        vt_contract::json::to_text(&a.parameters()).expect("json").len() + A::DESCRIPTION.len()
    }

    /// Every model turn of the conversation skill carries the desk's specs (the confirmation's only
    /// while a request waits): they stay small.
    #[test]
    fn the_desks_tools_are_strict_and_cheap_to_offer() {
        for (name, size, schema) in [
            (
                "consultar_situacao",
                spec_size(&ConsultarSituacao),
                ConsultarSituacao.parameters(),
            ),
            ("extrato", spec_size(&Extrato), Extrato.parameters()),
            (
                "bloquear_cartao",
                spec_size(&BloquearCartao),
                BloquearCartao.parameters(),
            ),
            (
                "pedir_segunda_via",
                spec_size(&PedirSegundaVia),
                PedirSegundaVia.parameters(),
            ),
            (
                "confirmar_pedido_cartao",
                spec_size(&ConfirmarPedidoCartao),
                ConfirmarPedidoCartao.parameters(),
            ),
        ] {
            println!("{name}: {size} characters of tool spec");
            assert_eq!(schema["additionalProperties"], false, "{name}");
            assert!(size < 700, "{name}: {size}");
        }
    }
}
