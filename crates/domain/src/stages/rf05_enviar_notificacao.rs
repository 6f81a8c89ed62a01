//! RF5 — sends the low-balance notice RF4 prepared (deduplicated, rate limits respected) and, when no
//! recharge was requested, ends the run with a summary for the user.

use async_trait::async_trait;

use super::notificacao::{DecisaoNotificacao, EnvioNotificacao, enviar};
use super::rf03_normalizar_saldo::SaldoNormalizado;
use crate::systems::SystemsPort;
use crate::vt::{Idioma, keys, mask_card, money_for_people};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, ResponseToUser};

/// One notice per card, balance and hour: a repeated run never notifies twice.
pub(crate) fn dedup_key(decisao: &DecisaoNotificacao) -> String {
    let field = |k: &str| decisao.meta_text(k);
    let data = field("data");
    let hour = data.get(..13).unwrap_or(&data);
    keys::notificacao(&["saldo_baixo", &field("cartao"), &field("saldo"), hour])
}

/// What the user reads when the run ends here.
pub fn resumo(saldo: Option<&SaldoNormalizado>, envio: &EnvioNotificacao) -> String {
    let Some(s) = saldo else {
        return "Consulta de saldo concluída.".into();
    };
    let cartao = mask_card(&s.cartao);
    if s.divergente() {
        // That balance may be another person's: say nothing of it.
        return format!(
            "Não consegui confirmar o saldo do cartão {cartao}: o sistema de saldo respondeu com os dados de outro cartão. Tente de novo em alguns minutos."
        );
    }
    match (s.sucesso(), s.saldo) {
        (true, Some(valor)) => {
            // The date as people read it, in the offset the stage already converted it to.
            let quando = chrono::DateTime::parse_from_rfc3339(&s.data_verificacao)
                .map(|d| d.format("%d/%m/%Y às %H:%M").to_string())
                .unwrap_or_else(|_| s.data_verificacao.clone());
            let mut text = format!(
                "O saldo do cartão {cartao} é {} (consultado em {quando}).",
                money_for_people(&s.moeda, valor, Idioma::PtBr)
            );
            if s.saldo_baixo {
                text.push_str(if envio.enviado {
                    " Como está no limite de saldo baixo ou abaixo dele, enviamos um aviso."
                } else {
                    " O saldo está baixo, mas não consegui enviar o aviso agora."
                });
            }
            text
        }
        _ if s.observacoes.iter().any(|o| o == "cartao_invalido") => {
            "O número do cartão informado não é válido: use só os dígitos do cartão de VT.".into()
        }
        _ => format!(
            "Não consegui consultar o saldo do cartão {cartao} agora. Tente novamente em alguns minutos."
        ),
    }
}

/// RF4's decision as the notice a channel port sends (`None`: nothing to tell — the balance is above
/// the limit, or the lookup failed).
fn low_balance(decisao: &DecisaoNotificacao) -> Option<crate::stages::channel_notices::LowBalance> {
    let payload = decisao.payload.as_ref().filter(|_| decisao.enviar_notificacao)?;
    let moeda = decisao.meta_text("moeda");
    let saldo = decisao
        .meta_text("saldo")
        .parse::<rust_decimal::Decimal>()
        .map(|v| money_for_people(&moeda, v, Idioma::PtBr))
        .unwrap_or_else(|_| decisao.meta_text("saldo"));
    Some(crate::stages::channel_notices::LowBalance {
        cartao: decisao.meta_text("cartao"),
        saldo,
        mensagem: payload.mensagem.clone(),
        execucao_id: None,
    })
}

pub(crate) struct Rf05;

#[async_trait]
impl Action for Rf05 {
    type Args = DecisaoNotificacao;

    const NAME: &'static str = "rf05_enviar_notificacao";
    const DESCRIPTION: &'static str =
        "RF5: envia a notificação de saldo baixo ao sistema de mensagens, com deduplicação.";

    async fn call(
        &self,
        ctx: &ActionContext,
        decisao: DecisaoNotificacao,
    ) -> Result<ActionResponse, ActionError> {
        let input = super::entrada(ctx)?;
        let port = ctx
            .get::<crate::stages::channel_notices::ChannelNoticesPort>()
            .filter(|p| p.0.delivers_to(&input.destinatario));
        let out = match port {
            // A recipient on a channel the product serves: the product tells them itself.
            Some(port) => {
                let notice = low_balance(&decisao).map(|n| crate::stages::channel_notices::LowBalance {
                    execucao_id: Some(ctx.turn_id.clone()),
                    ..n
                });
                port.0
                    .low_balance(&input.destinatario, &input.cartao, notice.as_ref())
                    .await
            }
            None => {
                enviar(
                    ctx.require::<SystemsPort>()?.get(),
                    &decisao,
                    &dedup_key(&decisao),
                    &input.tenant_id,
                )
                .await
            }
        };
        if input.recarga.is_some() {
            return Ok(super::pass(&out)?.into());
        }
        let saldo: Option<SaldoNormalizado> = ctx
            .memory
            .get(super::MEMORY_SALDO)
            .and_then(|v| vt_contract::json::from_ref(v).ok());
        Ok(ResponseToUser::new(resumo(saldo.as_ref(), &out), String::new())
            .with_output(super::saida(&out)?)
            .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::notificacao::NotificacaoPayload;
    use crate::vt::Destinatario;
    use rust_decimal::dec;
    use serde_json::json;

    fn decisao(saldo: f64, data: &str) -> DecisaoNotificacao {
        let metadados = json!({"cartao": "1111111111", "saldo": saldo, "data": data});
        DecisaoNotificacao {
            enviar_notificacao: true,
            payload: Some(NotificacaoPayload {
                canal: "app".into(),
                assunto: "a".into(),
                mensagem: "m".into(),
                destinatario: Destinatario::default(),
                metadados: metadados.as_object().cloned().unwrap_or_default(),
            }),
            motivo: None,
        }
    }

    #[test]
    fn dedup_key_is_stable_within_the_hour() {
        let a = dedup_key(&decisao(12.5, "2025-12-05T11:07:00-03:00"));
        assert_eq!(a, dedup_key(&decisao(12.5, "2025-12-05T11:59:00-03:00")));
        assert_ne!(a, dedup_key(&decisao(12.5, "2025-12-05T12:00:00-03:00")));
        assert_ne!(a, dedup_key(&decisao(10.0, "2025-12-05T11:07:00-03:00")));
    }

    #[test]
    fn summary_masks_the_card_and_formats_money() {
        let s = SaldoNormalizado {
            cartao: "1111111111".into(),
            saldo: Some(dec!(12.5)),
            moeda: "BRL".into(),
            data_verificacao: "2025-12-05T11:07:00-03:00".into(),
            fonte: "SISTEMA_VT".into(),
            status_consulta: "sucesso".into(),
            saldo_baixo: true,
            limite_saldo_baixo: dec!(20),
            observacoes: vec![],
        };
        let sent = EnvioNotificacao {
            enviado: true,
            status: Some(202),
            body: None,
            motivo: None,
            erro: None,
        };
        let text = resumo(Some(&s), &sent);
        assert!(
            text.contains("****1111") && text.contains("R$ 12,50") && text.contains("enviamos um aviso"),
            "{text}"
        );
        assert!(text.contains("05/12/2025 às 11:07"), "{text}");
        assert!(!text.contains("1111111111"));
        assert!(resumo(Some(&s), &EnvioNotificacao::not_sent("x")).contains("não consegui enviar"));
    }
}
