//! `preparar_recarga`: runs the RF6 checks and, if they pass, asks the user to confirm. Nothing is
//! charged here: the recharge waits in conversation state for a confirmation in a later user message.

use async_trait::async_trait;
use chrono::Duration;
use schemars::JsonSchema;
use serde::Deserialize;

use super::cartao;
use super::pendente::{Perguntada, RecargaPendente, STATE_PENDENTE, STATE_PERGUNTADA};
use super::settings::VtSettings;
use crate::journal::SharedJournal;
use crate::stages::rf06_preparar_recarga::{RecargaPayload, escopo, impressao, preparar_recarga};
use crate::vt::money::MoneyArg;
use crate::vt::texts::duracao;
use crate::vt::{FlowInput, Idioma, MeioPagamento, Recarga, money_for_people};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, ResponseToUser};

pub struct PrepararRecarga;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Args {
    /// Número do cartão de VT.
    pub cartao: String,
    /// Valor da recarga em reais.
    pub valor: MoneyArg,
    /// Meio de pagamento: pix, boleto ou cartao_credito.
    pub meio_pagamento: String,
}

#[async_trait]
impl Action for PrepararRecarga {
    type Args = Args;

    const NAME: &'static str = "preparar_recarga";
    const DESCRIPTION: &'static str = "Prepara uma recarga de VT e pede ao usuário que confirme. Não cobra nada: a recarga só acontece \
         se o usuário confirmar na mensagem seguinte.";

    async fn call(&self, ctx: &ActionContext, args: Args) -> Result<ActionResponse, ActionError> {
        let settings = VtSettings::of(ctx);
        let p = &settings.politicas;
        let card = match cartao::parsed(ctx, &args.cartao) {
            Ok(card) => card,
            Err(answer) => return Ok(*answer),
        };
        let id = uuid::Uuid::new_v4().simple().to_string();
        let recarga = Recarga {
            valor: Some(args.valor.0),
            moeda: Some(p.moeda_padrao.clone()),
            meio_pagamento: MeioPagamento {
                tipo: args.meio_pagamento.clone(),
                token: None,
            },
            idempotency_key: Some(RecargaPendente::request_key(&id)),
        };
        let input = settings.flow_input(ctx, card.digits(), Some(recarga));
        let payload = preparar_recarga(&input);
        let errors = payload.validation_errors();
        if !errors.is_empty() {
            return Ok(not_prepared(&errors, p));
        }
        let body = &payload.body;
        if let Some(refused) = refused_means(ctx, body["meio_pagamento"]["tipo"].as_str()) {
            return Ok(refused);
        }
        // A twin with an unknown outcome will lend its key at confirmation (RF6): say so now.
        let gemea = twin_key(ctx, &input, &payload).await?;
        let pendente = RecargaPendente {
            id,
            cartao: card.digits().to_owned(),
            valor: crate::vt::round_half_up(args.valor.0),
            moeda: body["moeda"].as_str().unwrap_or("BRL").to_owned(),
            meio_pagamento: body["meio_pagamento"]["tipo"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            token: None,
            idempotency_key: gemea
                .clone()
                .unwrap_or_else(|| payload.idempotency_key().to_owned()),
            criada_no_turno: ctx.turn_id.clone(),
            expira_em: ctx.now + Duration::seconds(settings.confirmation_ttl_secs),
        };
        let twin = gemea.is_some();
        // A recharge already waiting is replaced by this one: the person is told it is gone.
        let replaced = RecargaPendente::from_state(ctx).filter(|old| old.id != pendente.id);
        let ask = ask(&pendente, twin, replaced.as_ref(), settings.confirmation_ttl_secs);
        Ok(ask
            .with_state(STATE_PERGUNTADA, Perguntada::mark(&pendente.id, &ctx.turn_id))
            .with_state(STATE_PENDENTE, pendente.to_value())
            .with_memory(cartao::MEMORY_CARTOES, cartao::remember(ctx, card.digits()))
            .into())
    }
}

/// A recharge paid by a means no provider takes here, refused before anything is prepared.
fn refused_means(ctx: &ActionContext, meio: Option<&str>) -> Option<ActionResponse> {
    let (meios, meio) = (ctx.get::<super::MeiosIndisponiveis>()?, meio?);
    meios.recusa(meio).then(|| meios.resposta(meio).into())
}

/// The question that asks the user to confirm `pendente` (and says when an identical recharge's key
/// will be reused), and what the model keeps of it.
fn ask(
    pendente: &RecargaPendente,
    twin: bool,
    replaced: Option<&RecargaPendente>,
    ttl_secs: i64,
) -> ResponseToUser {
    let validade = duracao(ttl_secs);
    let mut aviso = match replaced {
        Some(old) => format!(
            " Ela substitui o pedido de {}, que foi cancelado.",
            old.describe()
        ),
        None => String::new(),
    };
    if twin {
        aviso.push_str(" Uma recarga igual a esta ainda está sem resultado confirmado: se você confirmar, ela será reenviada com a mesma identificação, e você não será cobrado duas vezes.");
    }
    ResponseToUser::new(
        format!(
            "Confirma a recarga de {}?{aviso} Responda *sim* para confirmar ou *não* para cancelar. O pedido vale por {validade}.",
            pendente.describe()
        ),
        format!(
            "Recarga de {} aguardando confirmação do usuário (pedido {}). Nada foi cobrado. A recarga só será feita se o \
             próprio usuário confirmar na próxima mensagem dele; não chame confirmar_recarga sem isso.",
            pendente.describe(),
            pendente.id
        ),
    )
}

/// A recharge RF6 would refuse, told to the user in words (the limits, the accepted means of payment).
fn not_prepared(errors: &[&str], p: &crate::vt::Politicas) -> ActionResponse {
    let reasons: Vec<String> = errors
        .iter()
        .map(|code| match *code {
            "valor_recarga_invalido" => format!(
                "o valor precisa estar entre {} e {}",
                money_for_people(&p.moeda_padrao, p.valor_min, Idioma::PtBr),
                money_for_people(&p.moeda_padrao, p.valor_max, Idioma::PtBr)
            ),
            "meio_pagamento_invalido" => {
                "os meios de pagamento aceitos são PIX, boleto e cartão de crédito".into()
            }
            other => other.replace('_', " "),
        })
        .collect();
    ResponseToUser::new(
        format!("Não consigo preparar essa recarga: {}.", reasons.join("; ")),
        format!(
            "Recarga não preparada ({}); nada foi cobrado. Peça ao usuário um pedido válido.",
            errors.join(",")
        ),
    )
    .error()
    .into()
}

/// The key of an identical recharge whose outcome is still unknown, if there is one.
async fn twin_key(
    ctx: &ActionContext,
    input: &FlowInput,
    payload: &RecargaPayload,
) -> Result<Option<String>, ActionError> {
    Ok(match (ctx.get::<SharedJournal>(), impressao(payload)) {
        (Some(journal), Some(fingerprint)) => journal
            .unresolved(&escopo(input), &fingerprint)
            .await
            .map_err(|e| ActionError::failed("registro de recargas indisponível", e.to_string()))?,
        _ => None,
    })
}
