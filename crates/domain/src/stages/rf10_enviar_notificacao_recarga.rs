//! RF10 — sends the recharge notice (deduplicated, rate limits respected) and ends the run: its
//! response is the flow's deliverable.

use async_trait::async_trait;
use serde_json::Value;

use super::notificacao::{DecisaoNotificacao, EnvioNotificacao, enviar};
use crate::systems::{Systems, SystemsPort};
use crate::vt::keys;
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, ResponseToUser};

/// One notice per recharge outcome: a repeated run never notifies twice.
pub(crate) fn dedup_key(decisao: &DecisaoNotificacao) -> String {
    let field = |k: &str| decisao.meta_text(k);
    // Without a transaction id, the day stands in for it.
    let id = match field("transacao_id") {
        id if !id.is_empty() => id,
        _ => field("data").get(..10).unwrap_or_default().to_owned(),
    };
    keys::notificacao(&[
        "recarga",
        &field("cartao"),
        &field("valor"),
        &field("moeda"),
        &field("status_recarga"),
        &id,
    ])
}

/// RF9's notice as a channel port sends it (`None`: nothing to tell).
pub(crate) fn recharge_result(
    decisao: &DecisaoNotificacao,
) -> Option<crate::stages::channel_notices::RechargeResult> {
    let payload = decisao.payload.as_ref().filter(|_| decisao.enviar_notificacao)?;
    let moeda = decisao.meta_text("moeda");
    let valor = decisao
        .meta_text("valor")
        .parse::<rust_decimal::Decimal>()
        .map(|v| crate::vt::money_for_people(&moeda, v, crate::vt::Idioma::PtBr))
        .unwrap_or_else(|_| decisao.meta_text("valor"));
    Some(crate::stages::channel_notices::RechargeResult {
        cartao: decisao.meta_text("cartao"),
        valor,
        resultado: resultado_em_palavras(&decisao.meta_text("status_recarga")),
        mensagem: payload.mensagem.clone(),
        execucao_id: None,
    })
}

/// Sends RF9's notice for run `execucao`: through the channel port when the recipient is on a channel
/// the product serves itself, else to the notification system.
pub(crate) async fn avisar(
    systems: &dyn Systems,
    port: Option<&crate::stages::channel_notices::ChannelNoticesPort>,
    (input, execucao): (&crate::vt::FlowInput, &str),
    decisao: &DecisaoNotificacao,
) -> EnvioNotificacao {
    let port = port.filter(|p| p.0.delivers_to(&input.destinatario));
    let notice = recharge_result(decisao).map(|n| crate::stages::channel_notices::RechargeResult {
        execucao_id: Some(execucao.to_owned()),
        ..n
    });
    match (port, notice) {
        // A recipient on a channel the product serves: the product tells them itself.
        (Some(port), Some(notice)) => port.0.recharge_result(&input.destinatario, &notice).await,
        _ => enviar(systems, decisao, &dedup_key(decisao), &input.tenant_id).await,
    }
}

/// The `status_recarga` of the notice that a person checks a recharge whose outcome stayed unknown
/// (`stages::acompanhamento`).
pub const EM_VERIFICACAO: &str = "em_verificacao";

/// What became of a recharge, in the few pt-BR words a template's parameter carries.
fn resultado_em_palavras(status: &str) -> String {
    match status {
        "aprovada" => "aprovada".into(),
        "pendente" => "em processamento".into(),
        "negada" => "não aprovada pelo meio de pagamento".into(),
        "erro" => "não concluída, sem cobrança confirmada".into(),
        EM_VERIFICACAO => "em verificação por um atendente".into(),
        other => other.replace('_', " "),
    }
}

pub(crate) struct Rf10;

#[async_trait]
impl Action for Rf10 {
    type Args = DecisaoNotificacao;

    const NAME: &'static str = "rf10_enviar_notificacao_recarga";
    const DESCRIPTION: &'static str = "RF10: envia a notificação da recarga e encerra o fluxo.";

    async fn call(
        &self,
        ctx: &ActionContext,
        decisao: DecisaoNotificacao,
    ) -> Result<ActionResponse, ActionError> {
        let input = super::entrada(ctx)?;
        let port = ctx.get::<crate::stages::channel_notices::ChannelNoticesPort>();
        let out = avisar(
            ctx.require::<SystemsPort>()?.get(),
            port,
            (input, &ctx.turn_id),
            &decisao,
        )
        .await;
        let mut message = decisao
            .payload
            .as_ref()
            .map(|p| p.mensagem.clone())
            .unwrap_or_default();
        if !out.enviado {
            message.push_str(" (Não consegui enviar a notificação da recarga agora.)");
        }
        Ok(ResponseToUser::new(message.trim().to_owned(), String::new())
            .with_output(super::saida(&out)?)
            .with_metadata("enviado", Value::Bool(out.enviado))
            .into())
    }
}
