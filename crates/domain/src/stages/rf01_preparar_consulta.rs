//! RF1 — builds the balance query payload from the card and the policies.
//!
//! Rules: separators removed, digits only, length within `validacoes_cartao` (else `query.cartao` is
//! null and `x-validation-error: cartao_invalido`); `x-tenant-id` and `x-origin` always present; an
//! idempotency key per card + endpoint + hour window in the policy's timezone; `timeout_ms` 8 s within
//! 5–10 s; at most 2 attempts with a backoff of at least 300 ms; nothing but the card in the query.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::systems::SALDO_ENDPOINT;
use crate::vt::card::clean;
use crate::vt::{CardNumber, FlowInput, keys};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::ActionResponse;

pub(crate) const TIMEOUT_MS: u64 = 8_000;
pub(crate) const MAX_ATTEMPTS: u32 = 2;
pub(crate) const BACKOFF_MS: u64 = 300;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct ConsultaPayload {
    pub endpoint: String,
    pub method: String,
    pub query: ConsultaQuery,
    pub headers: BTreeMap<String, String>,
    pub timeout_ms: u64,
    pub retry_policy: RetryPolicyOut,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct ConsultaQuery {
    pub cartao: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RetryPolicyOut {
    pub max_attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_ms: Option<u64>,
}

/// The rule function.
pub(crate) fn preparar_consulta(input: &FlowInput, now: DateTime<Utc>) -> ConsultaPayload {
    let policy = &input.politicas;
    let v = policy.validacoes_cartao;
    let card = CardNumber::parse(&input.cartao, v.tamanho_min, v.tamanho_max);
    let hour = policy.timezone.local(now).format("%Y%m%d-%H").to_string();
    let key_card = card
        .as_ref()
        .map(|c| c.digits().to_owned())
        .unwrap_or_else(|_| clean(&input.cartao));
    let mut headers = BTreeMap::from([
        ("x-tenant-id".to_owned(), input.tenant_id.clone()),
        ("x-origin".to_owned(), input.origem.clone()),
        (
            "x-idempotency-key".to_owned(),
            keys::consulta(&key_card, SALDO_ENDPOINT, &hour),
        ),
    ]);
    if card.is_err() {
        headers.insert("x-validation-error".into(), "cartao_invalido".into());
    }
    ConsultaPayload {
        endpoint: SALDO_ENDPOINT.into(),
        method: "GET".into(),
        query: ConsultaQuery {
            cartao: card.ok().map(|c| c.digits().to_owned()),
        },
        headers,
        timeout_ms: TIMEOUT_MS,
        retry_policy: RetryPolicyOut {
            max_attempts: MAX_ATTEMPTS,
            backoff_ms: Some(BACKOFF_MS),
        },
    }
}

pub(crate) struct Rf01;

/// RF1 takes nothing from its arguments: the flow input comes typed with the turn ([`super::entrada`]).
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct SemArgumentos {}

#[async_trait]
impl Action for Rf01 {
    type Args = SemArgumentos;

    const NAME: &'static str = "rf01_preparar_consulta";
    const DESCRIPTION: &'static str =
        "RF1: prepara o payload padronizado de consulta de saldo a partir do cartão e das políticas.";

    async fn call(&self, ctx: &ActionContext, _: SemArgumentos) -> Result<ActionResponse, ActionError> {
        let out = preparar_consulta(super::entrada(ctx)?, ctx.now);
        Ok(super::pass(&out)?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(json: &str) -> FlowInput {
        FlowInput::parse(json).expect("valid input")
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).expect("time").into()
    }

    #[test]
    fn builds_the_prd_shape() {
        let out = preparar_consulta(
            &input(r#"{"cartao": "1234 5678-90", "tenant_id": "TENANT", "origem": "PORTAL"}"#),
            at("2025-12-05T14:07:00Z"),
        );
        assert_eq!(out.endpoint, "/api/v1/saldos/consultar");
        assert_eq!(out.method, "GET");
        assert_eq!(out.query.cartao.as_deref(), Some("1234567890"));
        assert_eq!(out.headers["x-tenant-id"], "TENANT");
        assert_eq!(out.headers["x-origin"], "PORTAL");
        assert!(!out.headers.contains_key("x-validation-error"));
        assert_eq!(out.timeout_ms, 8_000);
        assert!((5_000..=10_000).contains(&out.timeout_ms));
        assert_eq!(
            out.retry_policy,
            RetryPolicyOut {
                max_attempts: 2,
                backoff_ms: Some(300)
            }
        );
    }

    #[test]
    fn invalid_cards_null_the_query_and_flag_the_header() {
        for card in ["12345abc90", "1234567", "12345678901234567890", ""] {
            let out = preparar_consulta(&input(&format!(r#"{{"cartao": "{card}"}}"#)), Utc::now());
            assert_eq!(out.query.cartao, None, "{card}");
            assert_eq!(out.headers["x-validation-error"], "cartao_invalido", "{card}");
        }
    }

    #[test]
    fn policy_length_bounds_are_applied() {
        let policy = r#""politicas": {"validacoes_cartao": {"tamanho_min": 10, "tamanho_max": 16}}"#;
        let ok = preparar_consulta(
            &input(&format!(r#"{{"cartao": "1234567890", {policy}}}"#)),
            Utc::now(),
        );
        assert!(ok.query.cartao.is_some());
        let short = preparar_consulta(
            &input(&format!(r#"{{"cartao": "123456789", {policy}}}"#)),
            Utc::now(),
        );
        assert!(short.query.cartao.is_none());
    }

    #[test]
    fn idempotency_key_is_per_card_and_hour_in_the_policy_timezone() {
        let a = r#"{"cartao": "1234567890"}"#;
        let key =
            |json: &str, t: &str| preparar_consulta(&input(json), at(t)).headers["x-idempotency-key"].clone();
        assert_eq!(
            key(a, "2025-12-05T14:01:00Z"),
            key(a, "2025-12-05T14:59:00Z"),
            "same hour"
        );
        assert_ne!(
            key(a, "2025-12-05T14:59:00Z"),
            key(a, "2025-12-05T15:00:00Z"),
            "next hour"
        );
        assert_ne!(
            key(a, "2025-12-05T14:01:00Z"),
            key(r#"{"cartao": "1234567891"}"#, "2025-12-05T14:01:00Z")
        );
        // Spaces and dashes do not change the card.
        assert_eq!(
            key(a, "2025-12-05T14:01:00Z"),
            key(r#"{"cartao": "1234 5678-90"}"#, "2025-12-05T14:01:00Z")
        );
        // 02:30 UTC is 23:30 of the day before in São Paulo and 02:30 in UTC: different windows.
        let sp = key(a, "2025-12-05T02:30:00Z");
        let utc = key(
            r#"{"cartao": "1234567890", "politicas": {"timezone": "UTC"}}"#,
            "2025-12-05T02:30:00Z",
        );
        assert_ne!(sp, utc);
    }

    #[test]
    fn no_personal_data_reaches_the_payload() {
        let out = preparar_consulta(
            &input(r#"{"cartao": "1234567890", "cpf": "123.456.789-00", "nome": "Ana"}"#),
            Utc::now(),
        );
        let text = vt_contract::json::to_text(&out).expect("json");
        assert!(!text.contains("123.456.789-00") && !text.contains("Ana"));
    }
}
