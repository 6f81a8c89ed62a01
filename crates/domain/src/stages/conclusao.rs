//! A run's outcome, read from its stages' typed outputs: RF8's reconciliation when a recharge was
//! asked, RF6's refusal when the policies stopped it, else RF3's balance query. Each output is read as
//! its stage's type, never by a JSON key.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::rf03_normalizar_saldo::SaldoNormalizado;
use super::rf06_preparar_recarga::RecargaPayload;
use super::rf08_conciliar_recarga::Conciliacao;
use crate::vt::texts::RecargaStatus;

/// Did the run reach its outcome?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conclusao {
    /// The balance was read (and the recharge, if asked, approved).
    Concluido,
    /// The recharge's outcome is not known yet.
    Pendente,
    /// Invalid card, systems down, recharge refused, denied or failed, or a stage's output that is
    /// not its type.
    Falhou,
}

/// The outcome of a chain whose stages all ran, from `(etapa, saida)` in order.
pub fn conclusao<'a>(etapas: impl IntoIterator<Item = (&'a str, &'a Value)> + Clone) -> Conclusao {
    let saida = |id: &str| etapas.clone().into_iter().find(|(e, _)| *e == id).map(|(_, v)| v);
    // A recharge the policies refuse is not sent: the run failed (a dry run has no RF8 to say so).
    if let Some(rf06) = saida("rf06_preparar_recarga") {
        match typed::<RecargaPayload>(rf06) {
            Some(p) if p.validation_errors().is_empty() => {}
            _ => return Conclusao::Falhou,
        }
    }
    if let Some(rf08) = saida("rf08_conciliar_recarga") {
        return match typed::<Conciliacao>(rf08).and_then(|c| RecargaStatus::parse(&c.status_recarga)) {
            Some(RecargaStatus::Aprovada) => Conclusao::Concluido,
            Some(RecargaStatus::Pendente) => Conclusao::Pendente,
            _ => Conclusao::Falhou,
        };
    }
    match saida("rf03_normalizar_saldo").and_then(typed::<SaldoNormalizado>) {
        Some(s) if s.sucesso() && !s.divergente() => Conclusao::Concluido,
        _ => Conclusao::Falhou,
    }
}

/// The balance RF8 reconciled after an approved recharge, read as its type.
pub fn novo_saldo<'a>(
    mut etapas: impl Iterator<Item = (&'a str, &'a Value)>,
) -> Option<rust_decimal::Decimal> {
    let (_, rf08) = etapas.find(|(e, _)| *e == "rf08_conciliar_recarga")?;
    typed::<Conciliacao>(rf08)?.novo_saldo
}

/// The balance RF3 read, when the reading succeeded and the source named the card asked.
pub fn saldo_lido<'a>(
    mut etapas: impl Iterator<Item = (&'a str, &'a Value)>,
) -> Option<rust_decimal::Decimal> {
    let (_, rf03) = etapas.find(|(e, _)| *e == "rf03_normalizar_saldo")?;
    typed::<SaldoNormalizado>(rf03)
        .filter(|s| s.sucesso() && !s.divergente())
        .and_then(|s| s.saldo)
}

fn typed<T: DeserializeOwned>(v: &Value) -> Option<T> {
    vt_contract::json::from_ref(v).ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::vt::FlowInput;

    fn saldo(status: &str, observacoes: &[&str]) -> Value {
        json!({
            "cartao": "1234567890", "saldo": 50.0, "moeda": "BRL", "data_verificacao": "2026-11-24T10:00:00-03:00",
            "fonte": "SISTEMA_VT", "status_consulta": status, "saldo_baixo": false, "limite_saldo_baixo": 20.0,
            "observacoes": observacoes,
        })
    }

    fn recarga(valor: f64) -> Value {
        let input = FlowInput::parse(&format!(
            r#"{{"cartao": "1234567890", "recarga": {{"valor": {valor}, "meio_pagamento": {{"tipo": "pix"}}}}}}"#
        ))
        .expect("input");
        vt_contract::json::to_value(super::super::rf06_preparar_recarga::preparar_recarga(&input))
            .expect("json")
    }

    fn conciliacao(status: &str) -> Value {
        json!({
            "cartao": "1234567890", "status_recarga": status, "valor_recarga": 50.0, "moeda": "BRL",
            "novo_saldo": 100.0, "data_atualizacao": "2026-11-24T10:00:00-03:00",
            "transacao": {"id": "tx_1", "nsu": null, "autorizacao": null},
            "reconsulta_necessaria": false, "observacoes": [],
        })
    }

    fn of(etapas: &[(&str, Value)]) -> Conclusao {
        conclusao(etapas.iter().map(|(e, v)| (*e, v)))
    }

    #[test]
    fn a_balance_read_is_the_outcome_of_a_run_without_a_recharge() {
        assert_eq!(
            of(&[("rf03_normalizar_saldo", saldo("sucesso", &[]))]),
            Conclusao::Concluido
        );
        assert_eq!(
            of(&[("rf03_normalizar_saldo", saldo("erro", &[]))]),
            Conclusao::Falhou
        );
        let divergente = saldo("sucesso", &["cartao_divergente_na_fonte"]);
        assert_eq!(of(&[("rf03_normalizar_saldo", divergente)]), Conclusao::Falhou);
        assert_eq!(of(&[]), Conclusao::Falhou, "no balance read");
    }

    #[test]
    fn the_reconciliation_decides_a_run_with_a_recharge() {
        let run = |status: &str| {
            of(&[
                ("rf03_normalizar_saldo", saldo("sucesso", &[])),
                ("rf06_preparar_recarga", recarga(50.0)),
                ("rf08_conciliar_recarga", conciliacao(status)),
            ])
        };
        assert_eq!(run("aprovada"), Conclusao::Concluido);
        assert_eq!(run("pendente"), Conclusao::Pendente);
        assert_eq!(run("negada"), Conclusao::Falhou);
        assert_eq!(run("erro"), Conclusao::Falhou);
        assert_eq!(
            run("talvez"),
            Conclusao::Falhou,
            "an unknown status is no approval"
        );
    }

    #[test]
    fn a_recharge_the_policies_refuse_fails_the_run_even_without_rf08() {
        let refused = recarga(5_000.0);
        let ok = of(&[
            ("rf03_normalizar_saldo", saldo("sucesso", &[])),
            ("rf06_preparar_recarga", recarga(50.0)),
        ]);
        assert_eq!(ok, Conclusao::Concluido, "a dry run whose recharge is valid");
        let run = of(&[
            ("rf03_normalizar_saldo", saldo("sucesso", &[])),
            ("rf06_preparar_recarga", refused),
        ]);
        assert_eq!(run, Conclusao::Falhou);
    }

    #[test]
    fn an_output_that_is_not_its_stages_type_is_a_failure() {
        let run = of(&[
            ("rf03_normalizar_saldo", saldo("sucesso", &[])),
            ("rf08_conciliar_recarga", json!({"status_recarga": "aprovada"})),
        ]);
        assert_eq!(run, Conclusao::Falhou);
        let run = of(&[("rf03_normalizar_saldo", json!("erro: sistema indisponível"))]);
        assert_eq!(run, Conclusao::Falhou);
    }
}
