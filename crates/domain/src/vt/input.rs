//! The flow input (SPEC §7) with its defaults. Unknown fields (CPF, name, e-mail...) are dropped by
//! parsing, so they can never be copied into a payload, header, message or trace.

use rust_decimal::Decimal;
use rust_decimal::dec;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::money::{decimal_from_json, round_half_up};
use super::secret::PaymentToken;
use super::timezone::Timezone;
use vt_contract::redact::serde_message;

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
    /// The conversation that tells the card holder of this recharge itself (a charge paid in a chat:
    /// its receipt, or why the money went back): RF9 prepares no notice of its own, which would say
    /// something else. Set by the product, never read from an input.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub avisado_na_conversa: Option<String>,
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
    /// How many digits a card number may have.
    pub validacoes_cartao: ValidacoesCartao,
    /// Below this balance a card is low: its holder is notified and a recharge proposed.
    #[serde(with = "money_serde")]
    #[schemars(with = "f64")]
    pub limite_saldo_baixo: Decimal,
    /// The currency of amounts that name none (ISO 4217).
    pub moeda_padrao: String,
    /// The time zone of dates shown, quiet hours and business hours (IANA name).
    #[serde(with = "tz_serde")]
    #[schemars(with = "String")]
    pub timezone: Timezone,
    /// The smallest recharge taken.
    #[serde(with = "money_serde")]
    #[schemars(with = "f64")]
    pub valor_min: Decimal,
    /// The largest recharge taken.
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
            timezone: Timezone::sao_paulo(),
            valor_min: dec!(1.00),
            valor_max: dec!(1000.00),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ValidacoesCartao {
    /// The fewest digits a card number may have.
    pub tamanho_min: usize,
    /// The most digits a card number may have.
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
    /// `None` when absent or `null`; RF6 reports it as invalid.
    #[serde(default, with = "optional_money")]
    #[schemars(with = "Option<f64>")]
    pub valor: Option<Decimal>,
    #[serde(default)]
    pub moeda: Option<String>,
    pub meio_pagamento: MeioPagamento,
    /// The caller's own key for this request (as payment APIs accept one): the recharge's
    /// idempotency key is derived from it, so a new request is a new charge and a repeated one is not.
    /// Without it the key is the PRD's, per (card, value, currency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// The longest caller key accepted (as payment APIs bound theirs).
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 255;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MeioPagamento {
    pub tipo: String,
    /// Written out as its fingerprint, never its value ([`PaymentToken`]).
    #[serde(default)]
    pub token: Option<PaymentToken>,
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

/// What a flow input gets where it says nothing, the same for every way in (`run-flow`, the HTTP flow,
/// batch lines, chat): the configured policies (`[vt.politicas]`) and, when a caller is known, the
/// caller's tenant — which an input may repeat but never replace.
#[derive(Debug, Clone, Copy)]
pub struct InputDefaults<'a> {
    pub politicas: &'a Politicas,
    /// The tenant of the caller's key; `None` where the operator runs the command (the input's own
    /// `tenant_id` is then taken as it is).
    pub tenant: Option<&'a str>,
}

impl FlowInput {
    /// Parses and checks a flow input text, with the built-in policies where it has none.
    pub fn parse(text: &str) -> Result<Self, InputError> {
        Self::from_value(&Self::json(text)?)
    }

    /// Parses and checks a flow input text, filling what it leaves out from `defaults`; an input that
    /// names another tenant than the caller's is refused.
    pub fn parse_with(text: &str, defaults: InputDefaults<'_>) -> Result<Self, InputError> {
        let value = Self::json(text)?;
        let mut input = Self::from_value(&value)?;
        if value.get("politicas").is_none() {
            input.politicas = defaults.politicas.clone();
        }
        if let Some(tenant) = defaults.tenant {
            if value.get("tenant_id").is_some() && input.tenant_id != tenant {
                return Err(InputError::Field {
                    path: "tenant_id".into(),
                    message: "é de outro cliente: use a chave de API desse cliente".into(),
                });
            }
            tenant.clone_into(&mut input.tenant_id);
        }
        Ok(input)
    }

    fn json(text: &str) -> Result<Value, InputError> {
        let chars = text.chars().count();
        if chars > MAX_INPUT_CHARS {
            return Err(InputError::TooLong(chars));
        }
        vt_contract::json::from_text(text).map_err(|e| InputError::NotJson(e.to_string()))
    }

    /// Reads a flow input from JSON already parsed (borrowed: every stage reads it from memory).
    pub fn from_value(value: &Value) -> Result<Self, InputError> {
        if !value.is_object() {
            return Err(InputError::NotObject(json_kind(value)));
        }
        vt_contract::json::counted_here();
        let input: FlowInput = serde_path_to_error::deserialize(value).map_err(|e| InputError::Field {
            path: e.path().to_string(),
            message: serde_message(&e.inner().to_string()),
        })?;
        input
            .politicas
            .validate()
            .map_err(|(field, message)| InputError::Field {
                path: format!("politicas.{field}"),
                message: message.into(),
            })?;
        if let Some(key) = input.recarga.as_ref().and_then(|r| r.idempotency_key.as_deref()) {
            check_idempotency_key(key)?;
        }
        Ok(input)
    }

    /// The recharge's idempotency key set to the request's `key` (an HTTP `Idempotency-Key`), unless
    /// the input names its own; checked as a key in the input is.
    pub fn with_request_key(mut self, key: &str) -> Result<Self, InputError> {
        if let Some(recarga) = self.recarga.as_mut()
            && recarga.idempotency_key.is_none()
        {
            check_idempotency_key(key)?;
            recarga.idempotency_key = Some(key.to_owned());
        }
        Ok(self)
    }
}

fn check_idempotency_key(key: &str) -> Result<(), InputError> {
    let len = key.chars().count();
    if len == 0 || len > MAX_IDEMPOTENCY_KEY_CHARS || key.chars().any(char::is_control) {
        return Err(InputError::Field {
            path: "recarga.idempotency_key".into(),
            message: format!(
                "deve ter de 1 a {MAX_IDEMPOTENCY_KEY_CHARS} caracteres, sem caracteres de controle"
            ),
        });
    }
    Ok(())
}

impl Politicas {
    /// Checks that the policies make sense on their own: `0 < valor_min ≤ valor_max` (after rounding to
    /// cents, so no policy lets a zero or negative recharge through), `1 ≤ tamanho_min ≤ tamanho_max`,
    /// `limite_saldo_baixo ≥ 0`, a known ISO 4217 currency. The time zone was checked when parsed. The
    /// error is `(field, why)`, naming the field that is wrong, never its value.
    pub fn validate(&self) -> Result<(), (&'static str, &'static str)> {
        let v = self.validacoes_cartao;
        if v.tamanho_min == 0 {
            return Err(("validacoes_cartao.tamanho_min", "deve ser pelo menos 1"));
        }
        if v.tamanho_max < v.tamanho_min {
            return Err((
                "validacoes_cartao.tamanho_max",
                "deve ser maior ou igual a tamanho_min",
            ));
        }
        if round_half_up(self.valor_min) <= Decimal::ZERO {
            return Err(("valor_min", "deve ser maior que zero (no mínimo 0.01)"));
        }
        if round_half_up(self.valor_max) < round_half_up(self.valor_min) {
            return Err(("valor_max", "deve ser maior ou igual a valor_min"));
        }
        if self.limite_saldo_baixo < Decimal::ZERO {
            return Err(("limite_saldo_baixo", "não pode ser negativo"));
        }
        if !known_currency(&self.moeda_padrao) {
            return Err(("moeda_padrao", "deve ser um código de moeda ISO 4217 (ex.: BRL)"));
        }
        Ok(())
    }
}

/// An ISO 4217 code (`BRL`, `USD`…), upper case.
pub(crate) fn known_currency(code: &str) -> bool {
    iso_currency::Currency::from_code(code).is_some()
}

fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) => Ok(s),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(serde::de::Error::custom(format!(
            "esperado texto ou número, veio {}",
            json_kind(&other)
        ))),
    }
}

/// What kind of JSON value `v` is, in words, for errors that must not show the value itself.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "um booleano",
        Value::Number(_) => "um número",
        Value::String(_) => "um texto",
        Value::Array(_) => "uma lista",
        Value::Object(_) => "um objeto",
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
        decimal_from_json(&v).ok_or_else(|| {
            serde::de::Error::custom(format!("esperado um valor numérico, veio {}", json_kind(&v)))
        })
    }
}

/// Optional money that never fails to parse: anything that is not a number becomes `None` (what an
/// external system answers, which the stages report on).
pub mod lenient_money {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Option<Decimal>, s: S) -> Result<S::Ok, S::Error> {
        d.map(crate::vt::money::money_json).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Decimal>, D::Error> {
        Ok(decimal_from_json(&Value::deserialize(d)?))
    }
}

/// Optional money: absent or `null` is `None` (RF6 reports the value missing); anything else must be
/// a number (or a numeric string) — `"abc"` breaks the input's schema and is refused where the input
/// enters, naming the field, before any stage runs or anybody is notified.
pub mod optional_money {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(d: &Option<Decimal>, s: S) -> Result<S::Ok, S::Error> {
        d.map(crate::vt::money::money_json).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Decimal>, D::Error> {
        let v = Value::deserialize(d)?;
        if v.is_null() {
            return Ok(None);
        }
        decimal_from_json(&v).map(Some).ok_or_else(|| {
            serde::de::Error::custom(format!("esperado um valor numérico, veio {}", json_kind(&v)))
        })
    }
}

mod tz_serde {
    use super::*;

    pub(super) fn serialize<S: Serializer>(tz: &Timezone, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(tz.name())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timezone, D::Error> {
        let name = String::deserialize(d)?;
        Timezone::named(&name).ok_or_else(|| {
            serde::de::Error::custom(
                "fuso horário desconhecido: use um nome da base IANA, como America/Sao_Paulo",
            )
        })
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
        assert_eq!(p.timezone, Timezone::sao_paulo());
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
        let back = vt_contract::json::to_text(&input).expect("json");
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
            err.to_string().contains("politicas.timezone") && !err.to_string().contains("Marte/Base"),
            "{err}"
        );
        let err = FlowInput::parse(r#"{"politicas": {}}"#).expect_err("no card");
        assert!(err.to_string().contains("cartao"), "{err}");
    }

    #[test]
    fn errors_name_the_field_and_the_type_never_the_value() {
        for (text, field) in [
            (r#"{"cartao": ["9876543210"]}"#, "cartao"),
            (
                r#"{"cartao": "1234567890", "tenant_id": ["123.456.789-00"]}"#,
                "tenant_id",
            ),
            (
                r#"{"cartao": "1234567890", "recarga": {"meio_pagamento": {"tipo": ["9876543210"]}}}"#,
                "recarga.meio_pagamento.tipo",
            ),
            (
                r#"{"cartao": "1234567890", "politicas": {"valor_min": "9876543210x"}}"#,
                "politicas.valor_min",
            ),
            (
                r#"{"cartao": "1234567890", "preferencias": {"canais": "9876543210"}}"#,
                "preferencias.canais",
            ),
        ] {
            let err = FlowInput::parse(text).expect_err(text).to_string();
            assert!(err.contains(field), "{err}");
            for secret in ["9876543210", "123.456.789-00"] {
                assert!(!err.contains(secret), "value echoed: {err}");
            }
        }
    }

    #[test]
    fn policies_that_would_allow_zero_or_negative_recharges_are_refused() {
        let with = |politicas: &str| {
            FlowInput::parse(&format!(
                r#"{{"cartao": "1234567890", "politicas": {politicas}}}"#
            ))
            .map(|_| ())
            .map_err(|e| e.to_string())
        };
        for (politicas, field) in [
            (r#"{"valor_min": -10}"#, "politicas.valor_min"),
            (r#"{"valor_min": 0}"#, "politicas.valor_min"),
            (r#"{"valor_min": 0.004}"#, "politicas.valor_min"),
            (r#"{"valor_min": 10, "valor_max": -10}"#, "politicas.valor_max"),
            (r#"{"valor_min": 10, "valor_max": 5}"#, "politicas.valor_max"),
            (r#"{"limite_saldo_baixo": -1}"#, "politicas.limite_saldo_baixo"),
            (
                r#"{"validacoes_cartao": {"tamanho_min": 0}}"#,
                "politicas.validacoes_cartao.tamanho_min",
            ),
            (
                r#"{"validacoes_cartao": {"tamanho_min": 12, "tamanho_max": 10}}"#,
                "politicas.validacoes_cartao.tamanho_max",
            ),
            (r#"{"moeda_padrao": "XYZ"}"#, "politicas.moeda_padrao"),
            (r#"{"moeda_padrao": "reais"}"#, "politicas.moeda_padrao"),
            (r#"{"timezone": "Marte/Base"}"#, "politicas.timezone"),
        ] {
            let err = with(politicas).expect_err(politicas);
            assert!(err.contains(&format!("{field}:")), "{politicas} → {err}");
        }
        assert!(with(r#"{"valor_min": 0.01, "valor_max": 0.01, "moeda_padrao": "USD"}"#).is_ok());
    }

    #[test]
    fn defaults_fill_what_the_input_leaves_out_and_the_tenant_is_the_callers() {
        let configured = Politicas {
            valor_max: dec!(200.00),
            ..Politicas::default()
        };
        let caller = InputDefaults {
            politicas: &configured,
            tenant: Some("empresa-a"),
        };
        let input = FlowInput::parse_with(r#"{"cartao": "1234567890"}"#, caller).expect("valid");
        assert_eq!(
            (input.politicas.valor_max, input.tenant_id.as_str()),
            (dec!(200.00), "empresa-a")
        );
        let own = FlowInput::parse_with(
            r#"{"cartao": "1234567890", "tenant_id": "empresa-a", "politicas": {"valor_max": 50}}"#,
            caller,
        )
        .expect("valid");
        assert_eq!(own.politicas.valor_max, dec!(50));
        let err = FlowInput::parse_with(r#"{"cartao": "1234567890", "tenant_id": "empresa-b"}"#, caller)
            .expect_err("another tenant");
        assert!(
            err.to_string().contains("tenant_id") && !err.to_string().contains("empresa-b"),
            "{err}"
        );
        let operator = InputDefaults {
            politicas: &configured,
            tenant: None,
        };
        let input = FlowInput::parse_with(r#"{"cartao": "1234567890", "tenant_id": "empresa-b"}"#, operator)
            .expect("valid");
        assert_eq!(input.tenant_id, "empresa-b");
    }

    #[test]
    fn a_caller_key_is_bounded() {
        let with = |key: &str| {
            FlowInput::parse(&format!(
                r#"{{"cartao": "1234567890", "recarga": {{"valor": 10, "meio_pagamento": {{"tipo": "pix"}}, "idempotency_key": {key}}}}}"#
            ))
        };
        assert_eq!(
            with(r#""pedido-42""#)
                .expect("valid")
                .recarga
                .and_then(|r| r.idempotency_key)
                .as_deref(),
            Some("pedido-42")
        );
        for bad in [r#""""#, r#""a\u0000b""#] {
            let err = with(bad).expect_err(bad).to_string();
            assert!(err.contains("recarga.idempotency_key"), "{err}");
        }
        let long = format!(r#""{}""#, "k".repeat(MAX_IDEMPOTENCY_KEY_CHARS + 1));
        assert!(with(&long).is_err());
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
    fn a_numeric_card_is_tolerated_and_a_non_numeric_value_refused_by_name() {
        let input = FlowInput::parse(
            r#"{"cartao": 1234567890, "recarga": {"valor": null, "meio_pagamento": {"tipo": "pix"}}}"#,
        )
        .expect("valid");
        assert_eq!(input.cartao, "1234567890");
        assert_eq!(input.recarga.expect("recarga").valor, None);
        let refused = FlowInput::parse(
            r#"{"cartao": "1234567890", "recarga": {"valor": "abc", "meio_pagamento": {"tipo": "pix"}}}"#,
        )
        .expect_err("not a number");
        let said = refused.to_string();
        assert!(said.contains("recarga.valor") && !said.contains("abc"), "{said}");
    }
}
