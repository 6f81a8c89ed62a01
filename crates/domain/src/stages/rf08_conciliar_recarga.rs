//! RF8 — reconciles the recharge answer into a final state.
//!
//! Mapping (SPEC §7): 200/201 with body status `aprovada|confirmed` → `aprovada`; 202 or body status
//! `pendente|in_process` → `pendente`; 4xx with `motivo: pagamento_negado` → `negada`; other 4xx and 5xx
//! → `erro`. A transport error or timeout means the outcome is unknown: `pendente`, with
//! `reconsulta_necessaria` and `resultado_indeterminado` — never a second charge. A 2xx whose body
//! status we do not know is treated the same way. A payload that was never sent (validation) is `erro`.
//! An answer replayed from the system's idempotency store (`Idempotent-Replayed: true`) is the answer
//! to an earlier request, never a new approval: `replay_idempotente` says so, and RF9's text says the
//! recharge had already been made. A key reused from an identical request with an unknown outcome
//! (RF6) is carried into the observations too.
//! `novo_saldo` is the source's updated balance when returned, else the previous balance plus the value
//! when approved; `reconsulta_necessaria` when pending or when the source returned no updated balance.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::iso_local;
use super::rf03_normalizar_saldo::SaldoNormalizado;
use super::rf06_preparar_recarga::moeda_iso;
use super::rf07_executar_recarga::{MEMORY_CHAVE, MEMORY_OBSERVACOES_RF6};
use crate::boleto::Boleto;
use crate::journal::SharedJournal;
use crate::systems::HttpResult;
use crate::vt::card::clean;
use crate::vt::input::lenient_money;
use crate::vt::texts::RecargaStatus;
use crate::vt::{FlowInput, decimal_from_json, round_half_up};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::ActionResponse;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct Conciliacao {
    pub cartao: String,
    /// `aprovada`, `pendente`, `negada` or `erro`.
    pub status_recarga: String,
    #[serde(with = "lenient_money")]
    #[schemars(with = "Option<f64>")]
    pub valor_recarga: Option<Decimal>,
    pub moeda: String,
    #[serde(with = "lenient_money")]
    #[schemars(with = "Option<f64>")]
    pub novo_saldo: Option<Decimal>,
    pub data_atualizacao: String,
    pub transacao: Transacao,
    pub reconsulta_necessaria: bool,
    pub observacoes: Vec<String>,
    /// The boleto the card holder pays, for a recharge paid by boleto that waits for its payment: its
    /// line, amount and due date checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boleto: Option<Boleto>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct Transacao {
    pub id: Option<String>,
    pub nsu: Option<String>,
    pub autorizacao: Option<String>,
}

/// Observation: the recharge request never left (an invalid payload, or no record before sending).
pub(crate) const NAO_ENVIADA: &str = "recarga_nao_enviada";
/// Observation: the recharge system's boleto did not check (digits, amount or due date): never shown.
pub const BOLETO_INVALIDO: &str = "boleto_invalido";
/// Observation: the boleto fell due unpaid; nothing was credited.
pub const BOLETO_VENCIDO: &str = "boleto_vencido";

fn text(body: Option<&Value>, keys: &[&str]) -> Option<String> {
    let b = body?;
    keys.iter().find_map(|k| match b.get(*k)? {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    })
}

/// What the recharge API's answer says of the recharge; anything unclear is `Pendente`, never a failure
/// that could lead to a second charge.
fn recharge_status(resp: &HttpResult, body: Option<&Value>, observacoes: &mut Vec<String>) -> RecargaStatus {
    let body_status = text(body, &["status"]).map(|s| s.to_ascii_lowercase());
    match (resp.status, &resp.erro) {
        (None, Some(e)) if e.tipo == "validacao" || e.tipo == "nao_enviado" => {
            observacoes.extend(e.codigo.iter().flat_map(|c| c.split(',').map(str::to_owned)));
            observacoes.push(NAO_ENVIADA.into());
            RecargaStatus::Erro
        }
        (None, _) => {
            observacoes.push("resultado_indeterminado".into());
            RecargaStatus::Pendente
        }
        (Some(s), _) => match (s, body_status.as_deref()) {
            (200 | 201, Some("aprovada" | "confirmed")) => RecargaStatus::Aprovada,
            (202, _) | (200..=299, Some("pendente" | "in_process")) => RecargaStatus::Pendente,
            (200..=299, _) => {
                observacoes.push("status_desconhecido".into());
                observacoes.push("resultado_indeterminado".into());
                RecargaStatus::Pendente
            }
            (400..=499, _) if text(body, &["motivo"]).as_deref() == Some("pagamento_negado") => {
                RecargaStatus::Negada
            }
            (400..=499, _) if text(body, &["motivo"]).as_deref() == Some(BOLETO_VENCIDO) => {
                observacoes.push(BOLETO_VENCIDO.into());
                RecargaStatus::Negada
            }
            (s, _) => {
                observacoes.push(format!("http_{s}"));
                RecargaStatus::Erro
            }
        },
    }
}

/// The boleto of a recharge waiting for one, checked. Nobody can pay a line that does not check: the
/// recharge fails here (`erro`, [`BOLETO_INVALIDO`]), before anyone sees it.
fn boleto_of(
    body: Option<&Value>,
    valor: Option<Decimal>,
    status: &mut RecargaStatus,
    observacoes: &mut Vec<String>,
) -> Option<Boleto> {
    let answer = body?
        .get("boleto")
        .filter(|_| *status == RecargaStatus::Pendente)?;
    let checked = Boleto::from_answer(answer, valor);
    if let Err(e) = &checked {
        tracing::error!(error = %e, "the recharge system's boleto does not check; not shown");
        observacoes.push(BOLETO_INVALIDO.into());
        *status = RecargaStatus::Erro;
    }
    checked.ok()
}

/// The rule function. `saldo_anterior` is RF3's balance when that query succeeded.
pub(crate) fn conciliar(
    resp: &HttpResult,
    input: &FlowInput,
    saldo_anterior: Option<Decimal>,
    now: DateTime<Utc>,
) -> Conciliacao {
    let tz = &input.politicas.timezone;
    let recarga = input.recarga.as_ref();
    let valor = recarga.and_then(|r| r.valor).map(round_half_up);
    let moeda = moeda_iso(recarga.and_then(|r| r.moeda.as_deref()))
        .unwrap_or_else(|| input.politicas.moeda_padrao.clone());
    let body = resp.body.as_ref().filter(|b| b.is_object());
    let mut observacoes = Vec::new();

    let mut status = recharge_status(resp, body, &mut observacoes);
    let boleto = boleto_of(body, valor, &mut status, &mut observacoes);

    if resp.replayed {
        observacoes.push(REPLAY.into());
    }
    let da_fonte = body.and_then(|b| {
        ["saldo_atualizado", "novo_saldo"]
            .iter()
            .find_map(|k| b.get(*k).and_then(decimal_from_json))
    });
    let (novo_saldo, sem_saldo_da_fonte) = match status {
        RecargaStatus::Aprovada => match da_fonte {
            Some(s) => (Some(round_half_up(s)), false),
            None => (saldo_anterior.zip(valor).map(|(a, v)| round_half_up(a + v)), true),
        },
        _ => (None, false),
    };
    let transacao = Transacao {
        id: text(body, &["transacao_id", "id"]),
        nsu: text(body, &["nsu"]),
        autorizacao: text(body, &["autorizacao"]),
    };
    let houve_transacao =
        matches!(status, RecargaStatus::Aprovada | RecargaStatus::Pendente) && resp.status.is_some();
    if houve_transacao
        && (transacao.id.is_none() || transacao.nsu.is_none() || transacao.autorizacao.is_none())
    {
        observacoes.push("identificadores_transacao_ausentes".into());
    }
    let data_atualizacao = text(body, &["data_processamento"])
        .and_then(|d| DateTime::parse_from_rfc3339(&d).ok())
        .map_or_else(|| iso_local(now, tz), |d| iso_local(d.with_timezone(&Utc), tz));
    Conciliacao {
        cartao: clean(&input.cartao),
        status_recarga: status.as_str().into(),
        valor_recarga: valor,
        moeda,
        novo_saldo,
        data_atualizacao,
        transacao,
        reconsulta_necessaria: status == RecargaStatus::Pendente || sem_saldo_da_fonte,
        observacoes,
        boleto,
    }
}

/// The observation for an answer replayed from the system's idempotency store.
pub(crate) const REPLAY: &str = "replay_idempotente";

impl Conciliacao {
    /// The answer was replayed: the recharge had already been made by an earlier request.
    pub(crate) fn replay(&self) -> bool {
        self.observacoes.iter().any(|o| o == REPLAY)
    }

    /// The recharge was never sent (its payload was invalid, or it could not be put on record): there
    /// is no recharge to tell anybody about.
    pub(crate) fn nunca_enviada(&self) -> bool {
        self.observacoes.iter().any(|o| o == NAO_ENVIADA)
    }
}

pub(crate) struct Rf08;

#[async_trait]
impl Action for Rf08 {
    type Args = HttpResult;

    const NAME: &'static str = "rf08_conciliar_recarga";
    const DESCRIPTION: &'static str =
        "RF8: concilia a resposta da recarga e produz o estado final, com reconsulta quando necessário.";

    async fn call(&self, ctx: &ActionContext, resp: HttpResult) -> Result<ActionResponse, ActionError> {
        let input = super::entrada(ctx)?;
        let anterior = ctx
            .memory
            .get(super::MEMORY_SALDO)
            .cloned()
            .and_then(|v| vt_contract::json::from_value::<SaldoNormalizado>(v).ok())
            .filter(SaldoNormalizado::sucesso)
            .and_then(|s| s.saldo);
        let mut out = conciliar(&resp, input, anterior, ctx.now);
        let chave = ctx.memory.get(MEMORY_CHAVE).and_then(Value::as_str);
        if let (Some(journal), Some(chave)) = (ctx.get::<SharedJournal>(), chave) {
            let status = RecargaStatus::parse(&out.status_recarga).unwrap_or(RecargaStatus::Erro);
            // The charge is over either way; a journal that cannot be written is the operator's problem,
            // not a reason to hide the outcome from the user.
            if let Err(e) = journal.resolve(chave, status).await {
                tracing::error!(error = %e, "recharge outcome could not be recorded");
            }
        }
        if let Some(reuso) = ctx.memory.get(MEMORY_OBSERVACOES_RF6).and_then(Value::as_array) {
            out.observacoes
                .extend(reuso.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        Ok(super::pass(&out)?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::dec;
    use serde_json::json;

    fn input() -> FlowInput {
        FlowInput::parse(
            r#"{"cartao": "1234567890", "recarga": {"valor": 100, "meio_pagamento": {"tipo": "pix"}}}"#,
        )
        .expect("valid")
    }

    fn http(status: u16, body: Value) -> HttpResult {
        HttpResult {
            status: Some(status),
            body: Some(body),
            erro: None,
            replayed: false,
        }
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2025-12-05T14:07:31Z")
            .expect("t")
            .into()
    }

    fn approved(extra: Value) -> Value {
        let mut b = json!({"transacao_id": "tx_123", "status": "aprovada", "autorizacao": "A1B2C3", "nsu": "000123",
                           "valor": 100.0, "moeda": "BRL", "data_processamento": "2025-12-05T14:07:30Z"});
        if let (Some(b), Some(e)) = (b.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        b
    }

    #[test]
    fn approved_with_the_source_balance() {
        let c = conciliar(
            &http(201, approved(json!({"saldo_atualizado": 150.0}))),
            &input(),
            Some(dec!(50)),
            now(),
        );
        assert_eq!(c.status_recarga, "aprovada");
        assert_eq!(c.novo_saldo, Some(dec!(150.00)));
        assert_eq!(c.valor_recarga, Some(dec!(100.00)));
        assert!(!c.reconsulta_necessaria);
        assert_eq!(
            c.transacao,
            Transacao {
                id: Some("tx_123".into()),
                nsu: Some("000123".into()),
                autorizacao: Some("A1B2C3".into())
            }
        );
        assert_eq!(c.data_atualizacao, "2025-12-05T11:07:30-03:00");
        assert!(c.observacoes.is_empty());
        let c = conciliar(
            &http(200, json!({"status": "confirmed", "saldo_atualizado": 10})),
            &input(),
            None,
            now(),
        );
        assert_eq!(c.status_recarga, "aprovada");
    }

    #[test]
    fn approved_without_the_source_balance_is_computed_and_rechecked() {
        let c = conciliar(&http(201, approved(json!({}))), &input(), Some(dec!(50)), now());
        assert_eq!(c.novo_saldo, Some(dec!(150.00)));
        assert!(c.reconsulta_necessaria);
        let c = conciliar(&http(201, approved(json!({}))), &input(), None, now());
        assert_eq!(c.novo_saldo, None, "nothing to add to");
        assert!(c.reconsulta_necessaria);
    }

    #[test]
    fn pending_statuses() {
        let c = conciliar(
            &http(202, json!({"status": "pendente", "transacao_id": "tx_9"})),
            &input(),
            Some(dec!(50)),
            now(),
        );
        assert_eq!(c.status_recarga, "pendente");
        assert!(c.reconsulta_necessaria);
        assert_eq!(c.novo_saldo, None);
        let c = conciliar(&http(200, json!({"status": "in_process"})), &input(), None, now());
        assert_eq!(c.status_recarga, "pendente");
    }

    #[test]
    fn every_http_status_class() {
        let denied = conciliar(
            &http(402, json!({"motivo": "pagamento_negado"})),
            &input(),
            None,
            now(),
        );
        assert_eq!(
            (denied.status_recarga.as_str(), denied.reconsulta_necessaria),
            ("negada", false)
        );
        let other_4xx = conciliar(
            &http(409, json!({"motivo": "idempotency_key_reutilizada"})),
            &input(),
            None,
            now(),
        );
        assert_eq!(other_4xx.status_recarga, "erro");
        assert_eq!(other_4xx.observacoes, vec!["http_409"]);
        let server = conciliar(&http(500, json!({"erro": "x"})), &input(), None, now());
        assert_eq!(server.status_recarga, "erro");
        assert_eq!(server.observacoes, vec!["http_500"]);
        let redirect = conciliar(&http(302, json!(null)), &input(), None, now());
        assert_eq!(redirect.status_recarga, "erro");
        let odd = conciliar(&http(200, json!({"status": "???"})), &input(), None, now());
        assert_eq!(odd.status_recarga, "pendente");
        assert!(odd.reconsulta_necessaria);
    }

    #[test]
    fn a_timeout_after_sending_is_unknown_never_an_error_to_retry() {
        let c = conciliar(
            &HttpResult::not_sent("timeout", None, "sem resposta"),
            &input(),
            Some(dec!(50)),
            now(),
        );
        assert_eq!(c.status_recarga, "pendente");
        assert!(c.reconsulta_necessaria);
        assert_eq!(c.observacoes, vec!["resultado_indeterminado"]);
        assert_eq!(c.data_atualizacao, "2025-12-05T11:07:31-03:00");
    }

    #[test]
    fn an_unsent_invalid_payload_is_an_error_with_its_codes() {
        let resp = HttpResult::not_sent(
            "validacao",
            Some("valor_recarga_invalido,meio_pagamento_invalido"),
            "x",
        );
        let c = conciliar(&resp, &input(), None, now());
        assert_eq!(c.status_recarga, "erro");
        assert_eq!(
            c.observacoes,
            vec!["valor_recarga_invalido", "meio_pagamento_invalido", NAO_ENVIADA]
        );
        assert!(c.nunca_enviada());
        assert!(!c.reconsulta_necessaria);
    }

    #[test]
    fn missing_transaction_ids_are_observed() {
        let c = conciliar(
            &http(201, json!({"status": "aprovada", "saldo_atualizado": 150})),
            &input(),
            None,
            now(),
        );
        assert_eq!(c.transacao, Transacao::default());
        assert!(
            c.observacoes
                .contains(&"identificadores_transacao_ausentes".to_owned())
        );
    }

    #[test]
    fn a_boleto_is_kept_when_it_checks_and_fails_the_recharge_when_it_does_not() {
        let due = chrono::NaiveDate::from_ymd_opt(2025, 12, 8).expect("date");
        let livre = "1234567890123456789012345";
        let line = crate::boleto::LinhaDigitavel::emitir("999", due, dec!(100), livre).expect("line");
        let answer = |linha: &str, vencimento: &str| {
            http(
                202,
                json!({"status": "pendente", "transacao_id": "tx_1", "boleto": {"linha_digitavel": linha, "vencimento": vencimento}}),
            )
        };
        let c = conciliar(&answer(line.digits(), "2025-12-08"), &input(), None, now());
        assert_eq!(c.status_recarga, "pendente");
        let boleto = c.boleto.expect("kept");
        assert_eq!(
            (boleto.linha_digitavel, boleto.vencimento),
            (line.formatted(), due)
        );

        let other = crate::boleto::LinhaDigitavel::emitir("999", due, dec!(10), livre).expect("line");
        for (linha, vencimento) in [
            (other.digits(), "2025-12-08"),
            (line.digits(), "2025-12-09"),
            (line.digits(), "08/12/2025"),
        ] {
            let c = conciliar(&answer(linha, vencimento), &input(), None, now());
            assert_eq!(
                (c.status_recarga.as_str(), c.boleto.is_none()),
                ("erro", true),
                "{linha} {vencimento}"
            );
            assert!(c.observacoes.contains(&BOLETO_INVALIDO.to_owned()));
        }
    }

    #[test]
    fn a_boleto_fallen_due_is_a_refusal_said_as_such() {
        let c = conciliar(
            &http(402, json!({"motivo": "boleto_vencido"})),
            &input(),
            None,
            now(),
        );
        assert_eq!(c.status_recarga, "negada");
        assert!(c.observacoes.contains(&BOLETO_VENCIDO.to_owned()));
        let aviso =
            crate::stages::rf09_preparar_notificacao_recarga::preparar_notificacao_recarga(&c, &input());
        let text = aviso.payload.expect("told").mensagem;
        assert!(
            text.contains("venceu sem pagamento") && text.contains("****7890"),
            "{text}"
        );
    }
}
