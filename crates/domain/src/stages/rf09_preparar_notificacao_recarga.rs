//! RF9 — prepares the notice about the recharge: sent for every recharge that was sent (success,
//! processing, or failure with what to do) — none for one whose payload never left — in the preferred language and channel (`app` when none), money formatted in the text
//! and numeric in the metadata, the card masked in the text.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::notificacao::DecisaoNotificacao;
use super::rf08_conciliar_recarga::{BOLETO_VENCIDO, Conciliacao};
use crate::vt::texts::{self, RecargaStatus};
use crate::vt::{FlowInput, mask_card, money_json};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::ActionResponse;

/// Why a recharge paid in a conversation has no notice of the flow's: the conversation tells it.
pub const AVISADO_NA_CONVERSA: &str = "avisado_na_conversa";

/// The rule function.
pub(crate) fn preparar_notificacao_recarga(c: &Conciliacao, input: &FlowInput) -> DecisaoNotificacao {
    // Nobody is told of a recharge that never existed (a value outside the policy, say): the flow's
    // output says why.
    if c.nunca_enviada() {
        return DecisaoNotificacao {
            enviar_notificacao: false,
            payload: None,
            motivo: Some(super::rf08_conciliar_recarga::NAO_ENVIADA.into()),
        };
    }
    // A recharge paid in a conversation is told there, by the product, in its own words (the receipt,
    // or that the money went back): a notice of the flow's would be a second, different one.
    if input.avisado_na_conversa.is_some() {
        return DecisaoNotificacao {
            enviar_notificacao: false,
            payload: None,
            motivo: Some(AVISADO_NA_CONVERSA.into()),
        };
    }
    let status = RecargaStatus::parse(&c.status_recarga).unwrap_or(RecargaStatus::Erro);
    let texto = if c.replay() && status == RecargaStatus::Aprovada {
        texts::recarga_ja_feita
    } else {
        texts::recarga
    };
    let (idioma, cartao) = (input.preferencias.idioma(), mask_card(&c.cartao));
    let (assunto, mensagem) = match &c.boleto {
        // The boleto to pay, its line in the same message: a flow's recipient has no other.
        Some(boleto) => {
            let (assunto, linha, rotulo) =
                texts::recarga_boleto(idioma, &cartao, &c.moeda, c.valor_recarga, boleto);
            (assunto, format!("{linha}\n{rotulo}: {}", boleto.linha_digitavel))
        }
        None if c.observacoes.iter().any(|o| o == BOLETO_VENCIDO) => {
            texts::recarga_boleto_vencido(idioma, &cartao, &c.moeda, c.valor_recarga)
        }
        None => texto(idioma, status, &cartao, &c.moeda, c.valor_recarga, c.novo_saldo),
    };
    let mut metadados = Map::new();
    metadados.insert("cartao".into(), json!(c.cartao));
    metadados.insert("valor".into(), c.valor_recarga.map_or(Value::Null, money_json));
    metadados.insert("novo_saldo".into(), c.novo_saldo.map_or(Value::Null, money_json));
    metadados.insert("moeda".into(), json!(c.moeda));
    metadados.insert("status_recarga".into(), json!(c.status_recarga));
    metadados.insert("transacao_id".into(), json!(c.transacao.id));
    metadados.insert("data".into(), json!(c.data_atualizacao));
    DecisaoNotificacao::enviar(input, assunto, mensagem, metadados)
}

pub(crate) struct Rf09;

#[async_trait]
impl Action for Rf09 {
    type Args = Conciliacao;

    const NAME: &'static str = "rf09_preparar_notificacao_recarga";
    const DESCRIPTION: &'static str = "RF9: prepara a notificação ao usuário sobre o resultado da recarga.";

    async fn call(&self, ctx: &ActionContext, c: Conciliacao) -> Result<ActionResponse, ActionError> {
        let input = super::entrada(ctx)?;
        Ok(super::pass(&preparar_notificacao_recarga(&c, input))?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::rf08_conciliar_recarga::Transacao;
    use rust_decimal::dec;

    fn conc(status: &str) -> Conciliacao {
        Conciliacao {
            cartao: "1234567890".into(),
            status_recarga: status.into(),
            valor_recarga: Some(dec!(100)),
            moeda: "BRL".into(),
            novo_saldo: (status == "aprovada").then_some(dec!(150)),
            data_atualizacao: "2025-12-05T11:07:31-03:00".into(),
            transacao: Transacao::default(),
            reconsulta_necessaria: false,
            observacoes: vec![],
            boleto: None,
        }
    }

    #[test]
    fn every_status_notifies_with_its_text() {
        let input = FlowInput::parse(r#"{"cartao": "1234567890"}"#).expect("valid");
        for (status, assunto) in [
            ("aprovada", "Recarga de VT aprovada"),
            ("pendente", "Recarga de VT em processamento"),
            ("negada", "Recarga de VT não aprovada"),
            ("erro", "Falha na recarga de VT"),
        ] {
            let d = preparar_notificacao_recarga(&conc(status), &input);
            assert!(d.enviar_notificacao, "{status}");
            let p = d.payload.expect("payload");
            assert_eq!(p.assunto, assunto);
            assert_eq!(p.canal, "app");
            assert!(!p.mensagem.contains("1234567890"));
            assert_eq!(p.metadados["status_recarga"], status);
            assert_eq!(p.metadados["valor"], json!(100.0));
        }
        let p = preparar_notificacao_recarga(&conc("aprovada"), &input)
            .payload
            .expect("payload");
        assert_eq!(
            p.mensagem,
            "Sua recarga de BRL 100,00 no cartão ****7890 foi aprovada. Novo saldo: BRL 150,00."
        );
        assert_eq!(p.metadados["novo_saldo"], json!(150.0));
    }
}
