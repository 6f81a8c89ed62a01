//! `confirmar_pedido_cartao`: the card holder's answer to a request that changes a card — the check of
//! the holder (the CPF's last digits, checked by the card system and never kept), a "não" that drops
//! it, or the "sim" that sends it. Only the *user's* message of a later turn confirms, never the
//! model's arguments. The confirmation is consumed in the journal like a recharge's; the request goes
//! to the card system under a key of its own, so whichever message or process sends it — the winner of
//! a race, a message processed again after a kill — the card is blocked, or its balance moved, once:
//! the system answers the same key with the same answer.

use async_trait::async_trait;
use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::balcao;
use super::bloquear_cartao::asked;
use super::pedido_cartao::{AcaoCartao, PedidoCartao, STATE_PEDIDO_CARTAO, STATE_ULTIMO_PEDIDO, said_means};
use super::settings::VtSettings;
use crate::journal::{Confirmation, SharedJournal};
use crate::systems::contract::{BloqueioResposta, Recusa, SegundaViaResposta};
use crate::systems::{HttpResult, ORDEM_TIMEOUT_MS, OrdemCartao, SystemsPort};
use crate::vt::parse::{is_confirmation, is_refusal};
use crate::vt::{Idioma, money_for_people};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, HandoffReason, ResponseToUser, TransferToHuman};

pub struct ConfirmarPedidoCartao;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {}

#[async_trait]
impl Action for ConfirmarPedidoCartao {
    type Args = Args;

    const NAME: &'static str = "confirmar_pedido_cartao";
    const DESCRIPTION: &'static str = "Responde ao pedido de bloqueio ou segunda via pendente com a mensagem do próprio \
         usuário neste turno (sim, não, ou os dígitos pedidos). Sem argumentos.";

    fn offered(&self, state: &serde_json::Map<String, Value>, _: &vt_contract::context::Extensions) -> bool {
        PedidoCartao::in_state(state).is_some()
    }

    async fn call(&self, ctx: &ActionContext, _args: Args) -> Result<ActionResponse, ActionError> {
        let Some(p) = PedidoCartao::from_state(ctx) else {
            return Ok(ResponseToUser::new(
                "Não há nenhum pedido de bloqueio ou segunda via esperando resposta.",
                "Nenhum pedido de cartão pendente: nada foi feito.",
            )
            .into());
        };
        if p.perguntado_no_turno == ctx.turn_id {
            return Ok(ResponseToUser::new(
                p.question(),
                format!(
                    "Pedido {} NÃO enviado: só a resposta do usuário, numa mensagem seguinte, o confirma.",
                    p.id
                ),
            )
            .error()
            .into());
        }
        let text = ctx.user_message.as_str();
        if is_refusal(text) {
            return Ok(dropped(&p));
        }
        if ctx.now > p.expira_em {
            return Ok(ResponseToUser::new(
                format!("O pedido do cartão {} expirou sem resposta, e nada foi feito. Se ainda quiser, é só pedir de novo.", p.masked()),
                format!("Pedido de cartão {} expirado; descartado.", p.id),
            )
            .with_state(STATE_PEDIDO_CARTAO, Value::Null)
            .into());
        }
        if !p.verificado {
            return check_holder(ctx, p).await;
        }
        if !is_confirmation(text) {
            let mut again = p;
            again.perguntado_no_turno.clone_from(&ctx.turn_id);
            return Ok(asked(again));
        }
        consume(ctx, &p).await?;
        // Should the answer not settle it, the request stands for the next message (a new "sim").
        let mut p = p;
        p.perguntado_no_turno.clone_from(&ctx.turn_id);
        send(ctx, &p).await
    }
}

/// The request sent to the card system under its own key, and its answer as the holder hears it. A
/// second copy whose fee a provider here takes (Pix, a card checkout) is charged first
/// ([`super::taxa`]): the order goes when the provider says it was paid (the payments job), never before.
async fn send(ctx: &ActionContext, p: &PedidoCartao) -> Result<ActionResponse, ActionError> {
    let settings = VtSettings::of(ctx);
    if let Some(charged) = super::taxa::charged_first(ctx, p, &settings).await {
        return Ok(charged);
    }
    let systems = ctx.require::<SystemsPort>()?.get();
    let mut headers = balcao::headers(&settings);
    headers.insert("x-idempotency-key".into(), p.key());
    let (ordem, body) = match &p.acao {
        AcaoCartao::Bloqueio { motivo } => (
            OrdemCartao::Bloqueio,
            json!({"cartao": p.cartao, "motivo": motivo}),
        ),
        AcaoCartao::SegundaVia { taxa, meio, .. } => (
            OrdemCartao::SegundaVia,
            json!({"cartao": p.cartao, "pagamento": (!taxa.is_zero()).then(|| json!({"tipo": meio.as_deref().unwrap_or("pix")}))}),
        ),
    };
    let sent = systems
        .ordem_cartao(ordem, &body, &headers, ORDEM_TIMEOUT_MS)
        .await;
    Ok(match &p.acao {
        AcaoCartao::Bloqueio { .. } => blocked(p, &sent, &settings),
        AcaoCartao::SegundaVia { .. } => replacement_refused(p, &sent).unwrap_or_else(|| replaced(p, &sent)),
    })
}

/// What a second copy whose fee was paid became, as the payments job tells the card holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegundaViaPaga {
    /// Ordered: what the holder is told.
    Pedida(String),
    /// The card system refused it (why, in its words): the fee goes back.
    Recusada(String),
    /// No answer in the contract's shape: it may have been ordered; asked again under the same key.
    Incerta,
}

/// What the card system's answer `sent` to the order of `cartao`'s second copy, its fee `taxa` paid
/// by `meio`, means.
pub fn segunda_via_paga(cartao: &str, (taxa, meio): (Decimal, &str), sent: &HttpResult) -> SegundaViaPaga {
    match sent.status {
        Some(200 | 201) => sent
            .body
            .clone()
            .and_then(|b| vt_contract::json::from_value::<SegundaViaResposta>(b).ok())
            .map_or(SegundaViaPaga::Incerta, |r| {
                SegundaViaPaga::Pedida(ordered_text(
                    &crate::vt::mask_card(cartao),
                    &r,
                    Some((taxa, meio)),
                ))
            }),
        Some(s) if s < 500 => SegundaViaPaga::Recusada(
            recusa(sent)
                .map(|r| r.mensagem.unwrap_or_else(|| r.motivo.replace('_', " ")))
                .unwrap_or_else(|| format!("HTTP {s}")),
        ),
        _ => SegundaViaPaga::Incerta,
    }
}

/// Consumes the confirmation in the journal. Whoever consumed it — this message now, this message
/// before a kill, another message — the request is sent under its own key, which the card system
/// answers once; so the result is told to each, and the change happens once.
async fn consume(ctx: &ActionContext, p: &PedidoCartao) -> Result<(), ActionError> {
    let Some(journal) = ctx.get::<SharedJournal>() else {
        return Ok(());
    };
    let consumer = ctx.message_id.as_deref().unwrap_or(&ctx.turn_id);
    let confirmation = Confirmation {
        pending_id: &p.id,
        origin: &ctx.conversation_id,
        consumer,
    };
    let consumed = journal.consume_confirmation(confirmation, None).await;
    consumed.map(|_| ()).map_err(|e| {
        ActionError::failed(
            "não foi possível registrar a confirmação agora; nada foi feito",
            e.to_string(),
        )
    })
}

/// The request dropped at the card holder's "não".
fn dropped(p: &PedidoCartao) -> ActionResponse {
    let what = match p.acao {
        AcaoCartao::Bloqueio { .. } => "o cartão não foi bloqueado",
        AcaoCartao::SegundaVia { .. } => "a segunda via não foi pedida",
    };
    ResponseToUser::new(
        format!("Tudo bem: {what}, e nada foi feito no cartão {}.", p.masked()),
        format!("Pedido de cartão {} recusado pelo usuário: descartado.", p.id),
    )
    .with_state(STATE_PEDIDO_CARTAO, Value::Null)
    .into()
}

/// The holder's check: the CPF's last three digits in the message, checked by the card system. Right,
/// the request's question; wrong or absent, refused with a person offered (one try: no guessing).
async fn check_holder(ctx: &ActionContext, mut p: PedidoCartao) -> Result<ActionResponse, ActionError> {
    let digits: String = ctx.user_message.chars().filter(char::is_ascii_digit).collect();
    // Three digits, or a whole CPF (its last three count).
    if digits.len() != 3 && digits.len() != 11 {
        return Ok(holder_refused(&p, "a mensagem não trouxe os 3 dígitos"));
    }
    if let Err(why) = holder_confirmed(ctx, &p, &digits[digits.len() - 3..]).await? {
        return Ok(holder_refused(&p, &why));
    }
    p.verificado = true;
    p.perguntado_no_turno.clone_from(&ctx.turn_id);
    let card = p.cartao.clone();
    let block = matches!(p.acao, AcaoCartao::Bloqueio { .. });
    let mut answer = if block {
        super::bloquear_cartao::checked(ctx, p).await?
    } else {
        asked(p)
    };
    // Checked: the card is on record from now on, as if the person had consulted it.
    if let ActionResponse::ToUser(r) = &mut answer {
        r.memory_updates.insert(
            super::cartao::MEMORY_CARTOES.into(),
            super::cartao::remember(ctx, &card),
        );
    }
    Ok(answer)
}

/// Whether the card system says `cpf_final` is the holder's; `Err` says why not.
async fn holder_confirmed(
    ctx: &ActionContext,
    p: &PedidoCartao,
    cpf_final: &str,
) -> Result<Result<(), String>, ActionError> {
    let settings = VtSettings::of(ctx);
    let systems = ctx.require::<SystemsPort>()?.get();
    let body = json!({"cartao": p.cartao, "cpf_final": cpf_final});
    let read = systems
        .ordem_cartao(
            OrdemCartao::Titular,
            &body,
            &balcao::headers(&settings),
            ORDEM_TIMEOUT_MS,
        )
        .await;
    if !read.is_success() {
        return Ok(Err(format!("o sistema não confirmou: {}", why(&read))));
    }
    let confere = read
        .body
        .as_ref()
        .and_then(|b| b.get("confere"))
        .and_then(Value::as_bool);
    Ok(if confere == Some(true) {
        Ok(())
    } else {
        Err("os dígitos não conferem".to_owned())
    })
}

/// The holder could not be checked: nothing done, a person offered (one try: no guessing).
fn holder_refused(p: &PedidoCartao, why: &str) -> ActionResponse {
    ResponseToUser::new(
        format!("Não consegui confirmar que o cartão {} é seu, então nada foi feito. Vou passar você para uma pessoa da equipe, que confere seus dados.", p.masked()),
        format!("Verificação do titular do cartão {} não confirmada ({why}); nada foi feito; atendimento passado a uma pessoa.", p.masked()),
    )
    .with_state(STATE_PEDIDO_CARTAO, Value::Null)
    .with_function(
        TransferToHuman::new("o titular do cartão não pôde ser verificado para um bloqueio ou segunda via")
            .because(HandoffReason::CartaoPerdidoOuBloqueado),
    )
    .into()
}

fn recusa(r: &HttpResult) -> Option<Recusa> {
    r.body
        .clone()
        .and_then(|b| vt_contract::json::from_value::<Recusa>(b).ok())
}

/// No answer of the card system in the contract's shape: the request may or may not have arrived. The
/// request stays for one more message: a new "sim" sends it again under the same key (the system
/// answers it once); nothing is sent again on its own.
fn unknown(p: &PedidoCartao, why: &str) -> ActionResponse {
    let again = p.clone();
    ResponseToUser::new(
        "O sistema de cartões não confirmou o pedido agora. Responda *sim* de novo para tentar outra vez (sem risco de fazer duas vezes) ou peça para falar com um atendente.",
        format!("Pedido {} de cartão {} enviado sem resposta conclusiva ({why}); pode ter sido feito. Não diga que foi feito; um novo sim do usuário o envia de novo com a mesma chave.", p.key(), p.masked()),
    )
    .with_state(STATE_PEDIDO_CARTAO, again.to_value())
    .error()
    .into()
}

fn blocked(p: &PedidoCartao, sent: &HttpResult, settings: &VtSettings) -> ActionResponse {
    let masked = p.masked();
    match sent.status {
        Some(200 | 201) => {}
        Some(409) if recusa(sent).is_some_and(|r| r.motivo == "cartao_cancelado") => {
            return ResponseToUser::new(
                format!("O cartão {masked} já está cancelado: ele não passa mais na catraca e não precisa ser bloqueado."),
                format!("Bloqueio do cartão {masked}: o cartão já está cancelado."),
            )
            .with_state(STATE_PEDIDO_CARTAO, Value::Null)
            .into();
        }
        Some(404) => {
            return ResponseToUser::new(
                balcao::desconhecido(&masked),
                format!("Bloqueio: cartão {masked} desconhecido."),
            )
            .with_state(STATE_PEDIDO_CARTAO, Value::Null)
            .into();
        }
        Some(s) if s < 500 => return unknown(p, &format!("HTTP {s}")),
        _ => return unknown(p, &why(sent)),
    }
    let Some(b) = sent
        .body
        .clone()
        .and_then(|b| vt_contract::json::from_value::<BloqueioResposta>(b).ok())
    else {
        return unknown(p, "resposta fora do contrato");
    };
    let quando = balcao::quando(&b.em, &settings.politicas.timezone);
    ResponseToUser::new(
        format!(
            "Pronto: o cartão {masked} está bloqueado desde {quando} (protocolo {}). Ele não passa mais na catraca, e o saldo fica guardado. Quer pedir a *segunda via*? O saldo passa para o cartão novo.",
            b.protocolo
        ),
        format!(
            "Cartão {masked} bloqueado pelo sistema de cartões (protocolo {}, chave {}), uma única vez, com a confirmação do usuário. O usuário já recebeu o resultado e a oferta da segunda via.",
            b.protocolo,
            p.key()
        ),
    )
    .with_state(STATE_PEDIDO_CARTAO, Value::Null)
    .with_state(
        STATE_ULTIMO_PEDIDO,
        json!({"acao": "bloqueio", "protocolo": b.protocolo, "cartao": masked}),
    )
    .into()
}

/// A second copy the card system did not order, as the holder hears it; `None` when it did.
fn replacement_refused(p: &PedidoCartao, sent: &HttpResult) -> Option<ActionResponse> {
    let masked = p.masked();
    let closed = |text: String, instruction: String| -> ActionResponse {
        ResponseToUser::new(text, instruction)
            .with_state(STATE_PEDIDO_CARTAO, Value::Null)
            .into()
    };
    Some(match (sent.status, recusa(sent)) {
        (Some(201 | 200), _) => return None,
        (Some(402), _) => closed(
            format!(
                "A segunda via do cartão {masked} não foi pedida: o sistema de cartões não recebeu o pagamento da taxa. Nada foi cobrado por aqui."
            ),
            format!("Segunda via do cartão {masked} recusada: taxa não paga."),
        ),
        (Some(409), Some(r)) => closed(
            format!(
                "A segunda via do cartão {masked} não pôde ser pedida ({}). Se precisar, peça para falar com um atendente.",
                r.motivo.replace('_', " ")
            ),
            format!(
                "Segunda via do cartão {masked} recusada pelo sistema ({}).",
                r.motivo
            ),
        ),
        (Some(422), r) => {
            let why = r
                .and_then(|r| r.mensagem)
                .unwrap_or_else(|| "precisa de atendimento".into());
            ResponseToUser::new(
                format!("A segunda via do cartão {masked} não sai por aqui: {why}. Vou passar você para uma pessoa da equipe."),
                format!("Segunda via do cartão {masked}: o sistema pede atendimento ({why})."),
            )
            .with_state(STATE_PEDIDO_CARTAO, Value::Null)
            .with_function(TransferToHuman::new(format!("segunda via do cartão {masked}: {why}")).because(HandoffReason::CartaoPerdidoOuBloqueado))
            .into()
        }
        (Some(s), _) if s < 500 => unknown(p, &format!("HTTP {s}")),
        _ => unknown(p, &why(sent)),
    })
}

/// The second copy the card system ordered, as the holder hears it.
fn replaced(p: &PedidoCartao, sent: &HttpResult) -> ActionResponse {
    let masked = p.masked();
    let Some(r) = sent
        .body
        .clone()
        .and_then(|b| vt_contract::json::from_value::<SegundaViaResposta>(b).ok())
    else {
        return unknown(p, "resposta fora do contrato");
    };
    let fee = match &p.acao {
        AcaoCartao::SegundaVia { taxa, meio, .. } if !taxa.is_zero() => {
            Some((*taxa, meio.as_deref().unwrap_or("pix")))
        }
        _ => None,
    };
    ResponseToUser::new(
        ordered_text(&masked, &r, fee        ),
        format!(
            "Segunda via do cartão {masked} pedida uma única vez (protocolo {}, chave {}): saldo transferido {} e créditos {} para o cartão final {}. O usuário já recebeu o resultado.",
            r.protocolo,
            p.key(),
            r.saldo_transferido,
            r.creditos_transferidos,
            r.novo_cartao_final
        ),
    )
    .with_state(STATE_PEDIDO_CARTAO, Value::Null)
    .with_state(
        STATE_ULTIMO_PEDIDO,
        json!({"acao": "segunda_via", "protocolo": r.protocolo, "cartao": masked}),
    )
    .into()
}

fn why(r: &HttpResult) -> String {
    r.status.map_or_else(
        || {
            r.erro
                .as_ref()
                .map_or_else(|| "sem resposta".to_owned(), |e| e.tipo.clone())
        },
        |s| format!("HTTP {s}"),
    )
}

/// A second copy ordered, in the card holder's words: the protocol, the new card's last digits, where
/// and when it comes, what moved to it, the fee and how it is paid.
fn ordered_text(masked: &str, r: &SegundaViaResposta, fee: Option<(Decimal, &str)>) -> String {
    let mut moved = format!("O saldo de {} passou para ele", balcao::brl(r.saldo_transferido));
    if r.creditos_transferidos > 0.0 {
        moved.push_str(&format!(
            ", e também {} em créditos que esperavam validação",
            balcao::brl(r.creditos_transferidos)
        ));
    }
    let entrega = match (r.entrega.modo.as_str(), &r.entrega.local) {
        ("retirada", Some(local)) => format!(
            "fica pronto para retirada em {} dias úteis em {local}",
            r.entrega.prazo_dias
        ),
        ("retirada", None) => format!("fica pronto para retirada em {} dias úteis", r.entrega.prazo_dias),
        _ => format!("chega pelo correio em até {} dias úteis", r.entrega.prazo_dias),
    };
    let fee = fee
        .map(|(taxa, meio)| {
            format!(
                " A taxa de {} é cobrada por {}.",
                money_for_people("BRL", taxa, Idioma::PtBr),
                said_means(meio)
            )
        })
        .unwrap_or_default();
    format!(
        "Segunda via pedida (protocolo {}): o cartão novo, final {}, {entrega}. {moved}; o cartão {masked} foi cancelado.{fee}",
        r.protocolo, r.novo_cartao_final
    )
}
