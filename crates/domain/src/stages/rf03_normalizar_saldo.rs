//! RF3 — normalises the balance answer to the canonical shape and flags business conditions.
//!
//! Decisions where the PRD leaves room: a `null`/non-numeric `saldo` becomes 0.00 with
//! `saldo_informado_nulo`, and the query counts as `erro` (there is no usable balance, so no
//! low-balance notice goes out for it); a missing or unparseable `data_servidor` becomes the processing
//! time; `status_consulta` is `sucesso` only for 200/201 with a numeric balance.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::iso_local;
use crate::systems::HttpResult;
use crate::vt::card::clean;
use crate::vt::input::{lenient_money, money_serde};
use crate::vt::timezone::Timezone;
use crate::vt::{FlowInput, decimal_from_json, round_half_up};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::ActionResponse;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SaldoNormalizado {
    pub cartao: String,
    #[serde(with = "lenient_money")]
    #[schemars(with = "Option<f64>")]
    pub saldo: Option<Decimal>,
    pub moeda: String,
    pub data_verificacao: String,
    pub fonte: String,
    /// `sucesso` or `erro`.
    pub status_consulta: String,
    pub saldo_baixo: bool,
    #[serde(with = "money_serde")]
    #[schemars(with = "f64")]
    pub limite_saldo_baixo: Decimal,
    pub observacoes: Vec<String>,
}

impl SaldoNormalizado {
    pub fn sucesso(&self) -> bool {
        self.status_consulta == "sucesso"
    }

    /// The source answered for another card: its balance cannot be told as this card's.
    pub fn divergente(&self) -> bool {
        self.observacoes.iter().any(|o| o == CARTAO_DIVERGENTE)
    }
}

/// The observation when the balance body carries another card number.
pub(crate) const CARTAO_DIVERGENTE: &str = "cartao_divergente_na_fonte";

fn moeda_iso(raw: &str) -> Option<String> {
    let m = raw.trim().to_ascii_uppercase();
    (m.len() == 3 && m.chars().all(|c| c.is_ascii_uppercase())).then_some(m)
}

/// The rule function.
pub(crate) fn normalizar_saldo(resp: &HttpResult, input: &FlowInput, now: DateTime<Utc>) -> SaldoNormalizado {
    let policy = &input.politicas;
    let consultado = clean(&input.cartao);
    let body = resp.body.as_ref().filter(|b| b.is_object());
    let get = |k: &str| body.and_then(|b| b.get(k));
    let mut observacoes = Vec::new();
    let data_verificacao = data_verificacao(get("data_servidor"), now, &policy.timezone, &mut observacoes);
    let fonte = get("fonte")
        .and_then(Value::as_str)
        .unwrap_or("SISTEMA_VT")
        .to_owned();
    let limite = round_half_up(policy.limite_saldo_baixo);
    if !matches!(resp.status, Some(200 | 201)) {
        observacoes.push(why_not_ok(resp));
        return SaldoNormalizado {
            cartao: consultado,
            saldo: None,
            moeda: policy.moeda_padrao.clone(),
            data_verificacao,
            fonte,
            status_consulta: "erro".into(),
            saldo_baixo: false,
            limite_saldo_baixo: limite,
            observacoes,
        };
    }
    let saldo = get("saldo").and_then(decimal_from_json).map(round_half_up);
    if saldo.is_none() {
        observacoes.push("saldo_informado_nulo".to_owned());
    }
    let moeda = moeda(get("moeda"), &policy.moeda_padrao, &mut observacoes);
    // The card is always the one asked about; another one in the answer is only observed.
    if get("cartao")
        .and_then(Value::as_str)
        .map(clean)
        .is_some_and(|fonte_cartao| fonte_cartao != consultado)
    {
        observacoes.push(CARTAO_DIVERGENTE.to_owned());
    }
    let valor = saldo.unwrap_or(Decimal::ZERO);
    SaldoNormalizado {
        cartao: consultado,
        saldo: Some(valor),
        moeda,
        data_verificacao,
        fonte,
        status_consulta: if saldo.is_some() { "sucesso" } else { "erro" }.into(),
        saldo_baixo: valor <= limite,
        limite_saldo_baixo: limite,
        observacoes,
    }
}

/// The server's time in the policy's timezone, else now (an unreadable one is observed).
fn data_verificacao(
    servidor: Option<&Value>,
    now: DateTime<Utc>,
    timezone: &Timezone,
    observacoes: &mut Vec<String>,
) -> String {
    match servidor.and_then(Value::as_str) {
        Some(s) => match DateTime::parse_from_rfc3339(s) {
            Ok(t) => iso_local(t.with_timezone(&Utc), timezone),
            Err(_) => {
                observacoes.push("data_servidor_invalida".to_owned());
                iso_local(now, timezone)
            }
        },
        None => iso_local(now, timezone),
    }
}

/// Why a balance answer is not a success, as an observation.
fn why_not_ok(resp: &HttpResult) -> String {
    match (&resp.status, &resp.erro) {
        (Some(s), _) => format!("http_{s}"),
        (None, Some(e)) => e.codigo.clone().unwrap_or_else(|| e.tipo.clone()),
        (None, None) => "sem_resposta".to_owned(),
    }
}

/// The answer's ISO currency, else the policy's (a missing or invalid one is observed).
fn moeda(raw: Option<&Value>, padrao: &str, observacoes: &mut Vec<String>) -> String {
    match raw.and_then(Value::as_str) {
        Some(m) => moeda_iso(m).unwrap_or_else(|| {
            observacoes.push("moeda_invalida".to_owned());
            padrao.to_owned()
        }),
        None => {
            observacoes.push("moeda_ausente".to_owned());
            padrao.to_owned()
        }
    }
}

pub(crate) struct Rf03;

#[async_trait]
impl Action for Rf03 {
    type Args = HttpResult;

    const NAME: &'static str = "rf03_normalizar_saldo";
    const DESCRIPTION: &'static str =
        "RF3: normaliza a resposta de saldo para o formato canônico e sinaliza saldo baixo.";

    async fn call(&self, ctx: &ActionContext, resp: HttpResult) -> Result<ActionResponse, ActionError> {
        let input = super::entrada(ctx)?;
        let out = normalizar_saldo(&resp, input, ctx.now);
        let memory = vt_contract::json::to_value(&out)
            .map_err(|e| ActionError::failed("saída inválida", e.to_string()))?;
        Ok(super::pass(&out)?.with_memory(super::MEMORY_SALDO, memory).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::dec;
    use serde_json::json;

    fn input() -> FlowInput {
        FlowInput::parse(r#"{"cartao": "1234 5678-90"}"#).expect("valid")
    }

    fn ok(body: Value) -> HttpResult {
        HttpResult {
            status: Some(200),
            body: Some(body),
            erro: None,
            replayed: false,
        }
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2025-12-05T14:07:00Z")
            .expect("t")
            .into()
    }

    #[test]
    fn canonical_shape_for_a_normal_answer() {
        let body = json!({"cartao": "1234567890", "saldo": 50.0, "moeda": "brl", "data_servidor": "2025-12-05T14:07:00Z", "fonte": "SISTEMA_VT"});
        let out = normalizar_saldo(&ok(body), &input(), now());
        assert_eq!(out.cartao, "1234567890");
        assert_eq!(out.saldo, Some(dec!(50.00)));
        assert_eq!(out.moeda, "BRL");
        assert_eq!(
            out.data_verificacao, "2025-12-05T11:07:00-03:00",
            "converted to the policy timezone"
        );
        assert_eq!(out.status_consulta, "sucesso");
        assert!(!out.saldo_baixo);
        assert!(out.observacoes.is_empty());
        let text = vt_contract::json::to_value(&out).expect("json");
        assert_eq!(text["saldo"], json!(50.0));
        assert_eq!(text["limite_saldo_baixo"], json!(20.0));
    }

    #[test]
    fn low_balance_includes_the_limit_itself() {
        let at_limit = normalizar_saldo(&ok(json!({"saldo": 20.00, "moeda": "BRL"})), &input(), now());
        assert!(at_limit.saldo_baixo, "saldo == limite is low");
        let above = normalizar_saldo(&ok(json!({"saldo": 20.01, "moeda": "BRL"})), &input(), now());
        assert!(!above.saldo_baixo);
        // 19.995 rounds half up to 20.00, which is low.
        let rounded = normalizar_saldo(&ok(json!({"saldo": 20.004, "moeda": "BRL"})), &input(), now());
        assert_eq!(rounded.saldo, Some(dec!(20.00)));
        assert!(rounded.saldo_baixo);
    }

    #[test]
    fn error_statuses_give_erro_with_the_code_and_no_balance() {
        let out = normalizar_saldo(
            &HttpResult {
                status: Some(500),
                body: Some(json!({"erro": "x"})),
                erro: None,
                replayed: false,
            },
            &input(),
            now(),
        );
        assert_eq!(out.status_consulta, "erro");
        assert_eq!(out.saldo, None);
        assert_eq!(out.observacoes, vec!["http_500"]);
        let out = normalizar_saldo(&HttpResult::not_sent("timeout", None, "x"), &input(), now());
        assert_eq!(out.observacoes, vec!["timeout"]);
        let out = normalizar_saldo(
            &HttpResult::not_sent("validacao", Some("cartao_invalido"), "x"),
            &input(),
            now(),
        );
        assert_eq!(out.observacoes, vec!["cartao_invalido"]);
        assert!(!out.saldo_baixo);
        let out = normalizar_saldo(
            &HttpResult {
                status: Some(204),
                body: None,
                erro: None,
                replayed: false,
            },
            &input(),
            now(),
        );
        assert_eq!(out.status_consulta, "erro", "only 200 and 201 are successes");
    }

    #[test]
    fn null_balance_becomes_zero_with_an_observation() {
        let out = normalizar_saldo(&ok(json!({"saldo": null, "moeda": "BRL"})), &input(), now());
        assert_eq!(out.saldo, Some(dec!(0.00)));
        assert_eq!(out.status_consulta, "erro");
        assert!(out.observacoes.contains(&"saldo_informado_nulo".to_owned()));
        let out = normalizar_saldo(&ok(json!({"saldo": "NaN", "moeda": "BRL"})), &input(), now());
        assert!(out.observacoes.contains(&"saldo_informado_nulo".to_owned()));
    }

    #[test]
    fn missing_currency_and_date_fall_back() {
        let out = normalizar_saldo(&ok(json!({"saldo": 50})), &input(), now());
        assert_eq!(out.moeda, "BRL");
        assert!(out.observacoes.contains(&"moeda_ausente".to_owned()));
        assert_eq!(
            out.data_verificacao, "2025-12-05T11:07:00-03:00",
            "processing time in the policy timezone"
        );
        assert_eq!(out.status_consulta, "sucesso");
    }

    #[test]
    fn a_divergent_card_keeps_the_queried_one() {
        let out = normalizar_saldo(
            &ok(json!({"cartao": "0000000000", "saldo": 50, "moeda": "BRL"})),
            &input(),
            now(),
        );
        assert_eq!(out.cartao, "1234567890");
        assert!(out.observacoes.contains(&"cartao_divergente_na_fonte".to_owned()));
    }
}
