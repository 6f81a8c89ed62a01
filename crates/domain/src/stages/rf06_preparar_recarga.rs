//! RF6 — builds the recharge payload.
//!
//! Rules: the value is rounded half up to 2 places and must lie in `[valor_min, valor_max]` (else the
//! body is emptied and `x-validation-error: valor_recarga_invalido`); the currency is ISO 4217 (BRL when
//! absent); the payment type is normalised case-insensitively to `cartao_credito | boleto | pix` (else
//! `meio_pagamento_invalido`); an invalid card is flagged too; 12 s timeout and a single attempt, so a
//! charge is never duplicated. Several problems are listed in the one header, comma-separated. Rounding
//! comes before the range check: 9.995 is 10.00, and whatever the policy says a value must be above zero.
//!
//! The idempotency key is scoped to the *request*: derived from `recarga.idempotency_key` when the caller
//! gives one (a chat passes its pending confirmation's id), else the PRD's per (card, value, currency).
//! The action then asks the journal whether an identical request of the same user still has an unknown
//! outcome; if so it reuses *that* key and says so (`chave_reutilizada_resultado_indeterminado`), so a
//! person retrying after a timeout is never charged twice.

use std::collections::BTreeMap;

use async_trait::async_trait;
use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::rf01_preparar_consulta::RetryPolicyOut;
use crate::journal::SharedJournal;
use crate::systems::RECARGA_ENDPOINT;
use crate::vt::card::clean;
use crate::vt::{CardNumber, FlowInput, keys, money_json, round_half_up};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::ActionResponse;

pub(crate) const TIMEOUT_MS: u64 = 12_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecargaPayload {
    pub endpoint: String,
    pub method: String,
    /// The request body; `{}` when the value is invalid.
    pub body: Value,
    pub headers: BTreeMap<String, String>,
    pub timeout_ms: u64,
    pub retry_policy: RetryPolicyOut,
    /// Codes about the key: `chave_reutilizada_resultado_indeterminado`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observacoes: Vec<String>,
}

/// The observation when a request reuses the key of an identical one with an unknown outcome.
pub(crate) const CHAVE_REUTILIZADA: &str = "chave_reutilizada_resultado_indeterminado";

impl RecargaPayload {
    pub fn idempotency_key(&self) -> &str {
        self.headers.get("x-idempotency-key").map_or("", String::as_str)
    }

    /// The validation codes, if any.
    pub(crate) fn validation_errors(&self) -> Vec<&str> {
        self.headers
            .get("x-validation-error")
            .map(|h| h.split(',').collect())
            .unwrap_or_default()
    }
}

/// `cartao_credito | boleto | pix`, whatever the case, accents or separators people use.
pub(crate) fn normalizar_meio(tipo: &str) -> Option<&'static str> {
    let folded: String = tipo
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| match c {
            'á' | 'à' | 'â' | 'ã' => 'a',
            'é' | 'ê' => 'e',
            'í' => 'i',
            'ó' | 'ô' | 'õ' => 'o',
            'ú' => 'u',
            'ç' => 'c',
            ' ' | '-' => '_',
            c => c,
        })
        .collect();
    match folded.as_str() {
        "pix" => Some("pix"),
        "boleto" | "boleto_bancario" => Some("boleto"),
        "cartao_credito" | "cartao_de_credito" | "credito" | "credit_card" | "cartao" => {
            Some("cartao_credito")
        }
        _ => None,
    }
}

/// A known ISO 4217 code, upper-cased (BRL when absent).
pub(crate) fn moeda_iso(raw: Option<&str>) -> Option<String> {
    let m = raw.unwrap_or("BRL").trim().to_ascii_uppercase();
    crate::vt::input::known_currency(&m).then_some(m)
}

/// Whose request it is, for the journal: tenant and user.
pub(crate) fn escopo(input: &FlowInput) -> String {
    format!("{}|{}", input.tenant_id, input.destinatario.id)
}

/// The rule function.
pub fn preparar_recarga(input: &FlowInput) -> RecargaPayload {
    let policy = &input.politicas;
    let v = policy.validacoes_cartao;
    let mut errors: Vec<&str> = Vec::new();
    let card = CardNumber::parse(&input.cartao, v.tamanho_min, v.tamanho_max);
    if card.is_err() {
        errors.push("cartao_invalido");
    }
    let cartao = card
        .map(|c| c.digits().to_owned())
        .unwrap_or_else(|_| clean(&input.cartao));
    let Some(recarga) = &input.recarga else {
        errors.push("recarga_ausente");
        return payload(json!({}), input, keys::recarga(&cartao, "", ""), &errors);
    };
    let valor = recarga.valor.map(round_half_up).filter(|v| {
        *v > Decimal::ZERO && *v >= round_half_up(policy.valor_min) && *v <= round_half_up(policy.valor_max)
    });
    if valor.is_none() {
        errors.push("valor_recarga_invalido");
    }
    let moeda = moeda_iso(recarga.moeda.as_deref());
    if moeda.is_none() {
        errors.push("moeda_invalida");
    }
    let tipo = normalizar_meio(&recarga.meio_pagamento.tipo);
    if tipo.is_none() {
        errors.push("meio_pagamento_invalido");
    }
    let valor_texto = valor.map(|v| format!("{v:.2}")).unwrap_or_default();
    let moeda = moeda.unwrap_or_default();
    let body = match valor {
        None => json!({}),
        Some(v) => {
            let mut meio = json!({"tipo": tipo.unwrap_or(recarga.meio_pagamento.tipo.as_str())});
            if let Some(token) = &recarga.meio_pagamento.token {
                meio["token"] = json!(token);
            }
            json!({"cartao": cartao, "valor": money_json(v), "moeda": moeda, "meio_pagamento": meio})
        }
    };
    let key = match &recarga.idempotency_key {
        Some(k) => keys::recarga_pedido(&input.tenant_id, k),
        None => keys::recarga(&cartao, &valor_texto, &moeda),
    };
    payload(body, input, key, &errors)
}

fn payload(body: Value, input: &FlowInput, key: String, errors: &[&str]) -> RecargaPayload {
    let mut headers = BTreeMap::from([
        ("x-tenant-id".to_owned(), input.tenant_id.clone()),
        ("x-origin".to_owned(), input.origem.clone()),
        ("x-idempotency-key".to_owned(), key),
    ]);
    if !errors.is_empty() {
        headers.insert("x-validation-error".into(), errors.join(","));
    }
    RecargaPayload {
        endpoint: RECARGA_ENDPOINT.into(),
        method: "POST".into(),
        body,
        headers,
        timeout_ms: TIMEOUT_MS,
        retry_policy: RetryPolicyOut {
            max_attempts: 1,
            backoff_ms: None,
        },
        observacoes: Vec::new(),
    }
}

/// The journal's fingerprint of a valid payload: the PRD key of its (card, value, currency), the same
/// for identical requests whatever their own keys.
pub(crate) fn impressao(payload: &RecargaPayload) -> Option<String> {
    let b = payload.body.as_object()?;
    let valor = b.get("valor").and_then(crate::vt::decimal_from_json)?;
    Some(keys::recarga(
        b.get("cartao")?.as_str()?,
        &format!("{:.2}", round_half_up(valor)),
        b.get("moeda")?.as_str()?,
    ))
}

/// Reuses the key of an identical request whose outcome is unknown, saying so.
fn reutilizar_chave(payload: &mut RecargaPayload, anterior: String) {
    if payload.idempotency_key() != anterior {
        payload.headers.insert("x-idempotency-key".into(), anterior);
        payload.observacoes.push(CHAVE_REUTILIZADA.into());
    }
}

pub(crate) struct Rf06;

#[async_trait]
impl Action for Rf06 {
    type Args = super::EnvioNotificacao;

    const NAME: &'static str = "rf06_preparar_recarga";
    const DESCRIPTION: &'static str =
        "RF6: prepara o payload de recarga com validação de valor, moeda e meio de pagamento.";

    /// RF6 works from the flow input; RF5's response only tells that the notice step is over.
    async fn call(
        &self,
        ctx: &ActionContext,
        _rf05: super::EnvioNotificacao,
    ) -> Result<ActionResponse, ActionError> {
        let input = super::entrada(ctx)?;
        let payload = preparar_com_registro(input, ctx.get::<SharedJournal>()).await?;
        Ok(super::pass(&payload)?.into())
    }
}

/// The rule function, then the journal's word: an identical request of the same user whose outcome is
/// unknown lends its key. Shared by RF6 and by the confirmation, which puts the attempt on record
/// with the key RF6 will send.
pub(crate) async fn preparar_com_registro(
    input: &FlowInput,
    journal: Option<&SharedJournal>,
) -> Result<RecargaPayload, ActionError> {
    let mut payload = preparar_recarga(input);
    if let (Some(journal), Some(fingerprint)) = (journal, impressao(&payload))
        && payload.validation_errors().is_empty()
    {
        let anterior = journal
            .unresolved(&escopo(input), &fingerprint)
            .await
            .map_err(|e| ActionError::failed("registro de recargas indisponível", e.to_string()))?;
        if let Some(k) = anterior {
            reutilizar_chave(&mut payload, k);
        }
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(recarga: &str) -> RecargaPayload {
        let text = format!(
            r#"{{"cartao": "1234567890", "tenant_id": "T", "origem": "PORTAL",
                "politicas": {{"valor_min": 10.00, "valor_max": 500.00}}, "recarga": {recarga}}}"#
        );
        preparar_recarga(&FlowInput::parse(&text).expect("valid"))
    }

    #[test]
    fn builds_the_prd_shape() {
        let p = run(
            r#"{"valor": 100.00, "moeda": "BRL", "meio_pagamento": {"tipo": "pix", "token": "tok_secreto_42"}}"#,
        );
        assert_eq!(p.endpoint, "/api/v1/recargas");
        assert_eq!(p.method, "POST");
        let token = p.body["meio_pagamento"]["token"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            token.starts_with("tok…42#"),
            "the fingerprint, never the value: {token}"
        );
        assert_eq!(
            p.body,
            json!({"cartao": "1234567890", "valor": 100.0, "moeda": "BRL", "meio_pagamento": {"tipo": "pix", "token": token}})
        );
        assert_eq!(p.headers["x-tenant-id"], "T");
        assert_eq!(p.headers["x-origin"], "PORTAL");
        assert!(p.validation_errors().is_empty());
        assert_eq!(p.timeout_ms, 12_000);
        assert_eq!(
            p.retry_policy,
            RetryPolicyOut {
                max_attempts: 1,
                backoff_ms: None
            }
        );
    }

    #[test]
    fn value_bounds_are_inclusive_and_rounded_half_up_first() {
        let meio = r#""meio_pagamento": {"tipo": "pix"}"#;
        assert!(
            run(&format!(r#"{{"valor": 10.00, {meio}}}"#))
                .validation_errors()
                .is_empty()
        );
        assert!(
            run(&format!(r#"{{"valor": 500.00, {meio}}}"#))
                .validation_errors()
                .is_empty()
        );
        assert!(
            run(&format!(r#"{{"valor": 9.995, {meio}}}"#))
                .validation_errors()
                .is_empty(),
            "9.995 → 10.00"
        );
        assert_eq!(
            run(&format!(r#"{{"valor": 9.994, {meio}}}"#)).validation_errors(),
            vec!["valor_recarga_invalido"]
        );
        assert_eq!(
            run(&format!(r#"{{"valor": 500.01, {meio}}}"#)).validation_errors(),
            vec!["valor_recarga_invalido"]
        );
        assert_eq!(
            run(&format!(r#"{{"valor": -50, {meio}}}"#)).validation_errors(),
            vec!["valor_recarga_invalido"]
        );
        assert_eq!(
            run(&format!(r#"{{"valor": null, {meio}}}"#)).validation_errors(),
            vec!["valor_recarga_invalido"]
        );
        let rounded = run(&format!(r#"{{"valor": 100.005, {meio}}}"#));
        assert_eq!(rounded.body["valor"], json!(100.01));
    }

    #[test]
    fn an_invalid_value_empties_the_body() {
        let p = run(r#"{"valor": 5000, "meio_pagamento": {"tipo": "pix"}}"#);
        assert_eq!(p.body, json!({}));
        assert_eq!(p.headers["x-validation-error"], "valor_recarga_invalido");
    }

    #[test]
    fn payment_types_are_normalised() {
        for (raw, want) in [
            ("PIX", "pix"),
            ("Boleto", "boleto"),
            ("cartão de crédito", "cartao_credito"),
            ("CARTAO_CREDITO", "cartao_credito"),
        ] {
            let p = run(&format!(
                r#"{{"valor": 50, "meio_pagamento": {{"tipo": "{raw}"}}}}"#
            ));
            assert_eq!(p.body["meio_pagamento"]["tipo"], want, "{raw}");
            assert!(p.validation_errors().is_empty());
        }
        let p = run(r#"{"valor": 50, "meio_pagamento": {"tipo": "bitcoin"}}"#);
        assert_eq!(p.validation_errors(), vec!["meio_pagamento_invalido"]);
    }

    #[test]
    fn currency_defaults_to_brl_and_must_be_iso() {
        let p = run(r#"{"valor": 50, "meio_pagamento": {"tipo": "pix"}}"#);
        assert_eq!(p.body["moeda"], "BRL");
        let p = run(r#"{"valor": 50, "moeda": "reais", "meio_pagamento": {"tipo": "pix"}}"#);
        assert_eq!(p.validation_errors(), vec!["moeda_invalida"]);
    }

    #[test]
    fn idempotency_key_follows_card_value_and_currency() {
        let key = |r: &str| run(r).headers["x-idempotency-key"].clone();
        let a = key(r#"{"valor": 50, "meio_pagamento": {"tipo": "pix"}}"#);
        assert_eq!(
            a,
            key(r#"{"valor": 50.00, "meio_pagamento": {"tipo": "boleto"}}"#),
            "payment type is not part of it"
        );
        assert_ne!(a, key(r#"{"valor": 51, "meio_pagamento": {"tipo": "pix"}}"#));
        assert_ne!(
            a,
            key(r#"{"valor": 50, "moeda": "USD", "meio_pagamento": {"tipo": "pix"}}"#)
        );
    }

    #[test]
    fn a_request_key_scopes_the_idempotency_key() {
        let key = |r: &str| run(r).headers["x-idempotency-key"].clone();
        let plain = key(r#"{"valor": 50, "meio_pagamento": {"tipo": "pix"}}"#);
        let first = key(r#"{"valor": 50, "meio_pagamento": {"tipo": "pix"}, "idempotency_key": "pedido-1"}"#);
        let again = key(r#"{"valor": 50, "meio_pagamento": {"tipo": "pix"}, "idempotency_key": "pedido-1"}"#);
        let second =
            key(r#"{"valor": 50, "meio_pagamento": {"tipo": "pix"}, "idempotency_key": "pedido-2"}"#);
        assert_eq!(first, again, "one request, one key");
        assert_ne!(first, second, "a new request is a new charge");
        assert_ne!(first, plain);
        let p = run(r#"{"valor": 50, "meio_pagamento": {"tipo": "pix"}, "idempotency_key": "pedido-1"}"#);
        assert_eq!(
            impressao(&p),
            Some(plain),
            "identical requests share the fingerprint"
        );
    }

    #[test]
    fn a_reused_key_is_said() {
        let mut p = run(r#"{"valor": 50, "meio_pagamento": {"tipo": "pix"}, "idempotency_key": "novo"}"#);
        reutilizar_chave(&mut p, "anterior".into());
        assert_eq!(p.idempotency_key(), "anterior");
        assert_eq!(p.observacoes, vec![CHAVE_REUTILIZADA]);
    }

    #[test]
    fn zero_and_negative_values_are_never_valid_whatever_the_policy() {
        // A policy cannot be built with valor_min <= 0 through parsing; this checks the rule itself.
        let mut input = FlowInput::parse(
            r#"{"cartao": "1234567890", "recarga": {"valor": 0.004, "meio_pagamento": {"tipo": "pix"}}}"#,
        )
        .expect("valid");
        input.politicas.valor_min = rust_decimal::dec!(-10);
        for v in ["0.004", "0", "-5", "-999.99"] {
            if let Some(r) = input.recarga.as_mut() {
                r.valor = Some(v.parse().expect("decimal"));
            }
            let p = preparar_recarga(&input);
            assert_eq!(p.validation_errors(), vec!["valor_recarga_invalido"], "{v}");
            assert_eq!(p.body, json!({}));
        }
    }
}
