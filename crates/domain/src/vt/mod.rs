//! Vale-transporte domain types shared by the stages, tools, clients and simulator: parsed at the
//! edge (`CardNumber`, money as `Decimal`, `FlowInput` with its policies), so the rules below never
//! handle raw JSON.

pub mod card;
pub mod input;
pub mod keys;
pub mod money;
pub mod parse;
pub mod secret;
pub mod texts;
pub mod timezone;

#[cfg(test)]
mod proptests;

pub use card::{CardError, CardNumber, mask_card};
pub use input::{
    Destinatario, FlowInput, Idioma, MeioPagamento, Politicas, Preferencias, Recarga, ValidacoesCartao,
};
pub use money::{decimal_from_json, format_money, money_for_people, money_json, reais_in, round_half_up};
pub use secret::PaymentToken;
