//! A flow run's stages as a support agent reads them: one line each, in pt-BR, cards masked and
//! amounts in R$ — the stage's JSON stays an administrator's "Detalhes técnicos".

use serde_json::Value;

/// What stage `etapa` did, in one line, from its output `saida` (as stored, cards masked or not).
pub(super) fn summary(etapa: &str, saida: &Value) -> String {
    let text = |k: &str| saida.get(k).and_then(Value::as_str).unwrap_or_default();
    let yes = |k: &str| saida.get(k).and_then(Value::as_bool).unwrap_or(false);
    let money = |k: &str| {
        saida.get(k).and_then(Value::as_f64).map(|v| {
            let moeda = saida.get("moeda").and_then(Value::as_str).unwrap_or("BRL");
            let v = rust_decimal::Decimal::try_from(v).unwrap_or_default();
            vt_domain::vt::money_for_people(moeda, v, vt_domain::vt::Idioma::PtBr)
        })
    };
    let status = saida.get("status").map(Value::to_string).unwrap_or_default();
    let stage = etapa.get(..4).unwrap_or(etapa);
    match stage {
        "rf01" if saida.pointer("/query/cartao").is_some_and(Value::is_null) => {
            "Cartão inválido: a consulta não foi feita.".into()
        }
        "rf01" => "Consulta de saldo preparada.".into(),
        "rf02" => format!("O sistema de saldo respondeu (HTTP {status})."),
        "rf03" => match (text("status_consulta"), money("saldo")) {
            ("sucesso", Some(saldo)) if yes("saldo_baixo") => {
                format!("Saldo {saldo}, no limite de saldo baixo ou abaixo.")
            }
            ("sucesso", Some(saldo)) => format!("Saldo {saldo}."),
            (outro, _) => format!("Saldo não obtido ({outro})."),
        },
        "rf04" | "rf09" if yes("enviar_notificacao") => {
            let canal = saida
                .pointer("/payload/canal")
                .and_then(Value::as_str)
                .unwrap_or("?");
            format!("Aviso preparado, pelo canal {canal}.")
        }
        "rf04" | "rf09" => "Nenhum aviso a enviar.".into(),
        "rf05" | "rf10" if yes("enviado") => "Aviso enviado.".into(),
        "rf05" | "rf10" => "Nenhum aviso enviado.".into(),
        "rf06" => match saida.pointer("/body/valor").and_then(Value::as_f64) {
            Some(v) => format!(
                "Recarga de {} preparada.",
                vt_domain::vt::money_for_people(
                    saida
                        .pointer("/body/moeda")
                        .and_then(Value::as_str)
                        .unwrap_or("BRL"),
                    rust_decimal::Decimal::try_from(v).unwrap_or_default(),
                    vt_domain::vt::Idioma::PtBr
                )
            ),
            None => "Recarga não preparada (dados inválidos).".into(),
        },
        "rf07" => format!("O sistema de recarga respondeu (HTTP {status})."),
        "rf08" => {
            let novo = money("novo_saldo")
                .map(|s| format!("; novo saldo {s}"))
                .unwrap_or_default();
            format!("Recarga {}{novo}.", text("status_recarga"))
        }
        _ => "Etapa concluída.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_stage_reads_as_a_line_in_reais() {
        let rf03 = json!({"cartao": "****1111", "saldo": 12.5, "moeda": "BRL", "status_consulta": "sucesso", "saldo_baixo": true});
        assert_eq!(
            summary("rf03_normalizar_saldo", &rf03),
            "Saldo R$ 12,50, no limite de saldo baixo ou abaixo."
        );
        let rf08 = json!({"status_recarga": "aprovada", "novo_saldo": 112.5, "moeda": "BRL"});
        assert_eq!(
            summary("rf08_conciliar_recarga", &rf08),
            "Recarga aprovada; novo saldo R$ 112,50."
        );
        assert_eq!(
            summary("rf01_preparar_consulta", &json!({"query": {"cartao": null}})),
            "Cartão inválido: a consulta não foi feita."
        );
        assert_eq!(
            summary("rf07_executar_recarga", &json!({"status": 201})),
            "O sistema de recarga respondeu (HTTP 201)."
        );
    }
}
