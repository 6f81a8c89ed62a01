//! The flow input (SPEC §7) with its defaults. Unknown fields (CPF, name, e-mail...) are dropped by
//! parsing, so they can never be copied into a payload, header, message or trace.

use chrono_tz::Tz;
use rust_decimal::Decimal;
use rust_decimal::dec;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::money::decimal_from_json;

/// Inputs longer than this are refused before anything runs (PRD RF1: up to 5,000 characters).
pub const MAX_INPUT_CHARS: usize = 5_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FlowInput {
    /// Card number as typed (spaces and dashes allowed).
    #[serde(deserialize_with = "string_or_number")]
    pub cartao: String,
    #[serde(default = "default_tenant")]
    pub tenant_id: String,
    #[serde(default = "default_origem")]
    pub origem: String,
    #[serde(default)]
    pub politicas: Politicas,
    /// Absent: the run ends after RF5 (no recharge requested).
    #[serde(default)]
    pub recarga: Option<Recarga>,
    #[serde(default)]
    pub preferencias: Preferencias,
    #[serde(default)]
    pub destinatario: Destinatario,
}

fn default_tenant() -> String {
    "default".into()
}

fn default_origem() -> String {
    "API".into()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Politicas {
    pub validacoes_cartao: ValidacoesCartao,
    #[serde(with = "money_serde")]
    #[schemars(with = "f64")]
    pub limite_saldo_baixo: Decimal,
    pub moeda_padrao: String,
    #[serde(with = "tz_serde")]
    #[schemars(with = "String")]
    pub timezone: Tz,
    #[serde(with = "money_serde")]
    #[schemars(with = "f64")]
    pub valor_min: Decimal,
    #[serde(with = "money_serde")]
    #[schemars(with = "f64")]
    pub valor_max: Decimal,
}

impl Default for Politicas {
    fn default() -> Self {
        Self {
            validacoes_cartao: ValidacoesCartao::default(),
            limite_saldo_baixo: dec!(20.00),
            moeda_padrao: "BRL".into(),
            timezone: chrono_tz::America::Sao_Paulo,
            valor_min: dec!(1.00),
            valor_max: dec!(1000.00),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ValidacoesCartao {
    pub tamanho_min: usize,
    pub tamanho_max: usize,
}

impl Default for ValidacoesCartao {
    fn default() -> Self {
        Self {
            tamanho_min: 8,
            tamanho_max: 19,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Recarga {
    /// `None` when the value is not a number at all; RF6 reports it as invalid.
    #[serde(default, with = "lenient_money")]
    #[schemars(with = "Option<f64>")]
    pub valor: Option<Decimal>,
    #[serde(default)]
    pub moeda: Option<String>,
    pub meio_pagamento: MeioPagamento,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MeioPagamento {
    pub tipo: String,
    #[serde(default)]
    pub token: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Preferencias {
    pub canais: Vec<String>,
    pub idioma: Option<String>,
}

impl Preferencias {
    /// The first preferred channel, else `app`.
    pub fn canal(&self) -> String {
        self.canais
            .iter()
            .map(|c| c.trim())
            .find(|c| !c.is_empty())
            .unwrap_or("app")
            .to_owned()
    }

    pub fn idioma(&self) -> Idioma {
        Idioma::parse(self.idioma.as_deref())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Destinatario {
    pub tipo: String,
    pub id: String,
}

impl Default for Destinatario {
    fn default() -> Self {
        Self {
            tipo: "usuario".into(),
            id: String::new(),
        }
    }
}

/// The languages the texts exist in; anything else falls back to pt-BR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idioma {
    PtBr,
    En,
    Es,
}

impl Idioma {
    pub fn parse(tag: Option<&str>) -> Self {
        let tag = tag.unwrap_or("pt-BR").trim().to_ascii_lowercase();
        if tag.starts_with("en") {
            Self::En
        } else if tag.starts_with("es") {
            Self::Es
        } else {
            Self::PtBr
        }
    }
}

/// Why a flow input was refused: the message names the field and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("entrada com {0} caracteres: o limite é {MAX_INPUT_CHARS}")]
    TooLong(usize),
    #[error("entrada não é JSON válido: {0}")]
    NotJson(String),
    #[error("entrada deve ser um objeto JSON, veio {0}")]
    NotObject(&'static str),
    #[error("campo inválido {path}: {message}")]
    Field { path: String, message: String },
}

impl FlowInput {
    /// Parses and checks a flow input text.
    pub fn parse(text: &str) -> Result<Self, InputError> {
        let chars = text.chars().count();
        if chars > MAX_INPUT_CHARS {
            return Err(InputError::TooLong(chars));
        }
        let value: Value = serde_json::from_str(text).map_err(|e| InputError::NotJson(e.to_string()))?;
        Self::from_value(value)
    }

    pub fn from_value(value: Value) -> Result<Self, InputError> {
        let kind = match &value {
            Value::Object(_) => None,
            Value::Array(_) => Some("uma lista"),
            Value::String(_) => Some("um texto"),
            Value::Number(_) => Some("um número"),
            Value::Bool(_) => Some("um booleano"),
            Value::Null => Some("null"),
        };
        if let Some(kind) = kind {
            return Err(InputError::NotObject(kind));
        }
        let input: FlowInput = serde_path_to_error::deserialize(value).map_err(|e| InputError::Field {
            path: e.path().to_string(),
            message: e.inner().to_string(),
        })?;
        let v = input.politicas.validacoes_cartao;
        if v.tamanho_min == 0 || v.tamanho_min > v.tamanho_max {
            return Err(InputError::Field {
                path: "politicas.validacoes_cartao".into(),
                message: format!(
                    "tamanho_min {} e tamanho_max {} não formam um intervalo",
                    v.tamanho_min, v.tamanho_max
                ),
            });
        }
        if input.politicas.valor_min > input.politicas.valor_max {
            return Err(InputError::Field {
                path: "politicas.valor_min".into(),
                message: "valor_min maior que valor_max".into(),
            });
        }
        Ok(input)
    }
}

fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) => Ok(s),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(serde::de::Error::custom(format!(
            "esperado texto ou número, veio {other}"
        ))),
    }
}

/// Money as a JSON number in, a JSON number out; strings with a number are accepted.
pub mod money_serde {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Decimal, s: S) -> Result<S::Ok, S::Error> {
        crate::vt::money::money_json(*d).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Decimal, D::Error> {
        let v = Value::deserialize(d)?;
        decimal_from_json(&v)
            .ok_or_else(|| serde::de::Error::custom(format!("esperado um valor numérico, veio {v}")))
    }
}

/// Optional money that never fails to parse: anything that is not a number becomes `None`.
pub mod lenient_money {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Option<Decimal>, s: S) -> Result<S::Ok, S::Error> {
        d.map(crate::vt::money::money_json).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Decimal>, D::Error> {
        Ok(decimal_from_json(&Value::deserialize(d)?))
    }
}

mod tz_serde {
    use super::*;

    pub fn serialize<S: Serializer>(tz: &Tz, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(tz.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Tz, D::Error> {
        let name = String::deserialize(d)?;
        name.parse::<Tz>()
            .map_err(|_| serde::de::Error::custom(format!("fuso horário desconhecido {name:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_spec() {
        let input = FlowInput::parse(r#"{"cartao": "1234567890"}"#).expect("valid");
        let p = &input.politicas;
        assert_eq!(
            (p.validacoes_cartao.tamanho_min, p.validacoes_cartao.tamanho_max),
            (8, 19)
        );
        assert_eq!(p.limite_saldo_baixo, dec!(20.00));
        assert_eq!(p.moeda_padrao, "BRL");
        assert_eq!(p.timezone, chrono_tz::America::Sao_Paulo);
        assert_eq!((p.valor_min, p.valor_max), (dec!(1.00), dec!(1000.00)));
        assert_eq!(input.preferencias.canal(), "app");
        assert_eq!(input.preferencias.idioma(), Idioma::PtBr);
        assert!(input.recarga.is_none());
    }

    #[test]
    fn unknown_fields_are_dropped() {
        let input = FlowInput::parse(
            r#"{"cartao": "1234567890", "cpf": "123.456.789-00", "nome": "Ana", "email": "a@b.c"}"#,
        )
        .expect("valid");
        let back = serde_json::to_string(&input).expect("json");
        assert!(
            !back.contains("123.456.789-00") && !back.contains("Ana") && !back.contains("a@b.c"),
            "{back}"
        );
    }

    #[test]
    fn bad_input_is_named() {
        assert!(matches!(FlowInput::parse("{"), Err(InputError::NotJson(_))));
        assert_eq!(FlowInput::parse("[1]"), Err(InputError::NotObject("uma lista")));
        let long = format!(r#"{{"cartao": "1", "x": "{}"}}"#, "a".repeat(5_000));
        assert!(matches!(FlowInput::parse(&long), Err(InputError::TooLong(_))));
        let err =
            FlowInput::parse(r#"{"cartao": "1", "politicas": {"timezone": "Marte/Base"}}"#).expect_err("tz");
        assert!(
            err.to_string().contains("politicas.timezone") && err.to_string().contains("Marte/Base"),
            "{err}"
        );
        let err = FlowInput::parse(r#"{"politicas": {}}"#).expect_err("no card");
        assert!(err.to_string().contains("cartao"), "{err}");
    }

    #[test]
    fn exactly_the_limit_is_accepted() {
        let base = r#"{"cartao": "1234567890", "x": ""}"#;
        let pad = "a".repeat(MAX_INPUT_CHARS - base.len());
        let text = format!(r#"{{"cartao": "1234567890", "x": "{pad}"}}"#);
        assert_eq!(text.chars().count(), MAX_INPUT_CHARS);
        assert!(FlowInput::parse(&text).is_ok());
    }

    #[test]
    fn a_numeric_card_and_a_non_numeric_value_are_tolerated() {
        let input = FlowInput::parse(
            r#"{"cartao": 1234567890, "recarga": {"valor": "muito", "meio_pagamento": {"tipo": "pix"}}}"#,
        )
        .expect("valid");
        assert_eq!(input.cartao, "1234567890");
        assert_eq!(input.recarga.expect("recarga").valor, None);
    }
}
