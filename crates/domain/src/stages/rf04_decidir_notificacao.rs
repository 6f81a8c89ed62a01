//! RF4 — decides whether to send a low-balance notice and prepares it.
//!
//! Rules: send only when `saldo_baixo` and `status_consulta == "sucesso"`; the first preferred channel,
//! else `app`; money formatted per currency and language in the text only, numbers in the metadata;
//! texts in the preferred language (pt-BR by default); metadata holds card, balance, limit and date;
//! the full card never appears in the message.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::notificacao::DecisaoNotificacao;
use super::rf03_normalizar_saldo::SaldoNormalizado;
use crate::vt::{FlowInput, mask_card, money_json, texts};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::ActionResponse;

/// The rule function.
pub(crate) fn decidir_notificacao(saldo: &SaldoNormalizado, input: &FlowInput) -> DecisaoNotificacao {
    let valor = match (saldo.sucesso(), saldo.saldo_baixo, saldo.saldo) {
        (false, _, _) | (_, _, None) => {
            return DecisaoNotificacao {
                enviar_notificacao: false,
                payload: None,
                motivo: Some("consulta_com_erro".into()),
            };
        }
        (true, false, _) => {
            return DecisaoNotificacao {
                enviar_notificacao: false,
                payload: None,
                motivo: Some("saldo_acima_do_limite".into()),
            };
        }
        (true, true, Some(v)) => v,
    };
    let idioma = input.preferencias.idioma();
    let (assunto, mensagem) = texts::saldo_baixo(
        idioma,
        &mask_card(&saldo.cartao),
        &saldo.moeda,
        valor,
        saldo.limite_saldo_baixo,
    );
    let mut metadados = Map::new();
    metadados.insert("cartao".into(), json!(saldo.cartao));
    metadados.insert("saldo".into(), money_json(valor));
    metadados.insert("limite".into(), money_json(saldo.limite_saldo_baixo));
    metadados.insert("moeda".into(), json!(saldo.moeda));
    metadados.insert("data".into(), Value::String(saldo.data_verificacao.clone()));
    DecisaoNotificacao::enviar(input, assunto, mensagem, metadados)
}

pub(crate) struct Rf04;

#[async_trait]
impl Action for Rf04 {
    type Args = SaldoNormalizado;

    const NAME: &'static str = "rf04_decidir_notificacao";
    const DESCRIPTION: &'static str =
        "RF4: decide se avisa sobre saldo baixo e prepara o payload da notificação.";

    async fn call(
        &self,
        ctx: &ActionContext,
        saldo: SaldoNormalizado,
    ) -> Result<ActionResponse, ActionError> {
        let input = super::entrada(ctx)?;
        Ok(super::pass(&decidir_notificacao(&saldo, input))?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::Decimal;
    use rust_decimal::dec;

    fn saldo(valor: Option<Decimal>, status: &str, baixo: bool) -> SaldoNormalizado {
        SaldoNormalizado {
            cartao: "1234567890".into(),
            saldo: valor,
            moeda: "BRL".into(),
            data_verificacao: "2025-12-05T11:07:00-03:00".into(),
            fonte: "SISTEMA_VT".into(),
            status_consulta: status.into(),
            saldo_baixo: baixo,
            limite_saldo_baixo: dec!(20.00),
            observacoes: vec![],
        }
    }

    fn input(extra: &str) -> FlowInput {
        FlowInput::parse(&format!(r#"{{"cartao": "1234567890"{extra}}}"#)).expect("valid")
    }

    #[test]
    fn sends_only_for_a_successful_low_balance() {
        let d = decidir_notificacao(&saldo(Some(dec!(12.5)), "sucesso", true), &input(""));
        assert!(d.enviar_notificacao);
        let p = d.payload.expect("payload");
        assert_eq!(p.canal, "app");
        assert_eq!(p.assunto, "Saldo de VT baixo");
        assert!(p.mensagem.contains("BRL 12,50") && p.mensagem.contains("BRL 20,00"));
        assert!(!p.mensagem.contains("1234567890") && p.mensagem.contains("****7890"));
        assert_eq!(p.metadados["cartao"], "1234567890");
        assert_eq!(p.metadados["saldo"], json!(12.5));
        assert_eq!(p.metadados["limite"], json!(20.0));
        assert_eq!(p.metadados["data"], "2025-12-05T11:07:00-03:00");
        assert_eq!(p.destinatario.tipo, "usuario");

        let high = decidir_notificacao(&saldo(Some(dec!(50)), "sucesso", false), &input(""));
        assert_eq!(
            (high.enviar_notificacao, high.payload, high.motivo.as_deref()),
            (false, None, Some("saldo_acima_do_limite"))
        );
        let erro = decidir_notificacao(&saldo(Some(dec!(0)), "erro", true), &input(""));
        assert_eq!(
            (erro.enviar_notificacao, erro.motivo.as_deref()),
            (false, Some("consulta_com_erro"))
        );
    }

    #[test]
    fn channel_and_language_follow_the_preferences() {
        let extra = r#", "preferencias": {"canais": ["whatsapp", "app"], "idioma": "en-US"}, "destinatario": {"tipo": "usuario", "id": "u-123"}"#;
        let d = decidir_notificacao(&saldo(Some(dec!(1234.5)), "sucesso", true), &input(extra));
        let p = d.payload.expect("payload");
        assert_eq!(p.canal, "whatsapp");
        assert_eq!(p.assunto, "Low transit pass balance");
        assert!(p.mensagem.contains("BRL 1,234.50"), "{}", p.mensagem);
        assert_eq!(p.destinatario.id, "u-123");
        let es = decidir_notificacao(
            &saldo(Some(dec!(5)), "sucesso", true),
            &input(r#", "preferencias": {"idioma": "es"}"#),
        );
        assert_eq!(es.payload.expect("p").assunto, "Saldo de VT bajo");
        let empty = decidir_notificacao(
            &saldo(Some(dec!(5)), "sucesso", true),
            &input(r#", "preferencias": {"canais": []}"#),
        );
        assert_eq!(empty.payload.expect("p").canal, "app");
    }

    #[test]
    fn nothing_to_send_has_the_spec_shape() {
        let d = decidir_notificacao(&saldo(Some(dec!(50)), "sucesso", false), &input(""));
        let v = vt_contract::json::to_value(&d).expect("json");
        assert_eq!(
            v,
            json!({"enviar_notificacao": false, "payload": null, "motivo": "saldo_acima_do_limite"})
        );
    }
}
