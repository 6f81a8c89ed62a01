//! `verificar_pagamento`: a complaint about a payment ("paguei e não caiu", "cobraram duas vezes")
//! answered from the conversation's own charges — paid and credited, paid and on its way, refunded,
//! still waiting for the bank — or, when nothing on record explains it, a case for a person with
//! reason `pagamento_nao_creditado`. **Never a new recharge, never a new code**: a person who says
//! they paid is not invited to pay again.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::Deserialize;
use std::sync::Arc;

use super::VtSettings;
use crate::vt::{Idioma, card::ascii_digits, mask_card, money_for_people, timezone::Timezone};
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, HandoffReason, ResponseToUser, TransferToHuman};

/// A charge of the conversation as a complaint reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct PagamentoVisto {
    /// The card the recharge was for (clear: only masked in what is said).
    pub cartao: String,
    pub valor: Decimal,
    /// `pix` or `cartao_credito`.
    pub meio: &'static str,
    pub situacao: Situacao,
    pub criado_em: DateTime<Utc>,
    pub expira_em: DateTime<Utc>,
    pub pago_em: Option<DateTime<Utc>>,
    /// A payment returned to the payer, and the provider's word on it (`DEVOLVIDO`, …).
    pub devolucao: Option<String>,
}

/// Where a charge stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Situacao {
    /// Issued; no payment read back yet.
    Aguardando,
    /// Paid; the recharge is being sent.
    Paga,
    /// Paid and sent; the recharge system has not answered yet.
    Enviada,
    /// Paid and credited.
    Creditada,
    /// Paid, not credited: the money goes back.
    Devolvida,
    /// Expired unpaid.
    Expirada,
}

impl Situacao {
    fn paid(self) -> bool {
        !matches!(self, Self::Aguardando | Self::Expirada)
    }
}

/// The port the service implements: the charges (Pix codes and card checkouts) of the calling
/// turn's conversation, oldest first.
#[async_trait]
pub trait Pagamentos: Send + Sync {
    async fn da_conversa(&self, ctx: &ActionContext) -> Result<Vec<PagamentoVisto>, ActionError>;
}

/// How tools find the port in their context.
pub type SharedPagamentos = Arc<dyn Pagamentos>;

pub struct VerificarPagamento;

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct Args {
    /// O cartão da recarga paga, quando o usuário disse qual (só dígitos).
    #[serde(default)]
    pub cartao: Option<String>,
    /// O usuário diz que foi cobrado duas vezes.
    #[serde(default)]
    pub duplicada: bool,
}

/// What the complaint's answer is: a text for the person, and whether a person must look into it.
#[derive(Debug, Clone, PartialEq)]
pub struct Veredito {
    pub texto: String,
    /// What the model keeps of it.
    pub instrucao: String,
    /// Nothing on record explains it: a case with reason `pagamento_nao_creditado`.
    pub chamado: Option<String>,
}

fn brl(v: Decimal) -> String {
    money_for_people("BRL", v, Idioma::PtBr)
}

fn hora(t: DateTime<Utc>, tz: &Timezone) -> String {
    tz.local(t).format("%d/%m às %H:%M").to_string()
}

fn meio(p: &PagamentoVisto) -> &'static str {
    if p.meio == "cartao_credito" {
        "no cartão de crédito"
    } else {
        "por Pix"
    }
}

/// The answer to a complaint about the payments `charges` (oldest first), for `cartao` when the
/// person named one, at `now`. Pure: the rules are tested here.
pub fn veredito(
    charges: &[PagamentoVisto],
    cartao: Option<&str>,
    duplicada: bool,
    now: DateTime<Utc>,
    tz: &Timezone,
) -> Veredito {
    let mine: Vec<&PagamentoVisto> = charges
        .iter()
        .filter(|c| cartao.is_none_or(|card| c.cartao == card))
        .collect();
    let para = cartao.map_or_else(String::new, |c| format!(" para o cartão {}", mask_card(c)));
    if duplicada {
        return charged_twice(&mine, &para);
    }
    // The payment the person most likely means: the last one paid, else the last one issued.
    match mine
        .iter()
        .rev()
        .find(|c| c.situacao.paid())
        .or_else(|| mine.last())
    {
        Some(last) => what_happened(last, now, tz),
        None => case(
            format!(
                "Não encontrei nenhum pagamento feito nesta conversa{para}. Abri um chamado para uma pessoa verificar; tenha o comprovante em mãos. Não faça outro pagamento enquanto isso."
            ),
            "pagamento sem registro na conversa",
        ),
    }
}

/// Nothing on record explains it: a person looks into it.
fn case(texto: String, motivo: &str) -> Veredito {
    Veredito {
        instrucao: format!(
            "Reclamação de pagamento: {motivo}. Um chamado foi aberto para uma pessoa verificar; não ofereça nova recarga nem novo pagamento."
        ),
        chamado: Some(motivo.to_owned()),
        texto,
    }
}

fn told(texto: String, instrucao: &str) -> Veredito {
    Veredito {
        texto,
        instrucao: instrucao.to_owned(),
        chamado: None,
    }
}

/// "Cobraram duas vezes": a second payment of one recharge is returned by itself — said where it was;
/// none on record goes to a person.
fn charged_twice(mine: &[&PagamentoVisto], para: &str) -> Veredito {
    let Some(back) = mine.iter().rev().find(|c| c.devolucao.is_some()) else {
        return case(
            format!(
                "Não encontrei uma cobrança em dobro nos pagamentos desta conversa{para}. Abri um chamado para uma pessoa verificar com o seu banco; tenha o comprovante dos dois pagamentos em mãos. Você não precisa pagar nada de novo."
            ),
            "cobrança em dobro sem registro",
        );
    };
    let estado = match back.devolucao.as_deref() {
        Some("DEVOLVIDO") => "já foi devolvido",
        Some("NAO_REALIZADO") => "não pôde ser devolvido automaticamente",
        _ => "está sendo devolvido",
    };
    told(
        format!(
            "Encontrei: um segundo pagamento de {} {} da recarga no cartão {} {estado} para a conta que pagou; a recarga foi cobrada uma vez só.",
            brl(back.valor),
            meio(back),
            mask_card(&back.cartao)
        ),
        &format!("Pagamento duplicado: a devolução {estado}. Nenhuma nova cobrança."),
    )
}

/// Where the payment `last` stands, said; an expired code nobody paid goes to a person.
fn what_happened(last: &PagamentoVisto, now: DateTime<Utc>, tz: &Timezone) -> Veredito {
    let (valor, card, via) = (brl(last.valor), mask_card(&last.cartao), meio(last));
    let pago = last
        .pago_em
        .map_or_else(String::new, |t| format!(" em {}", hora(t, tz)));
    match last.situacao {
        Situacao::Creditada => told(
            format!(
                "Encontrei: o pagamento de {valor} {via}{pago} foi recebido e a recarga de {valor} foi creditada no cartão {card}. Se o crédito ainda não aparece na catraca, ele pode precisar ser validado no validador a bordo. Se mesmo assim não aparecer, responda *atendente*."
            ),
            "Pagamento recebido e recarga creditada.",
        ),
        Situacao::Paga => told(
            format!(
                "Encontrei: o pagamento de {valor} {via}{pago} foi recebido e a recarga no cartão {card} está sendo feita agora. Aviso aqui assim que ela for creditada; você não precisa pagar de novo."
            ),
            "Pagamento recebido; a recarga está sendo enviada.",
        ),
        Situacao::Enviada => told(
            format!(
                "Encontrei: o pagamento de {valor} {via}{pago} foi recebido e a recarga no cartão {card} foi enviada; o sistema de recarga ainda não confirmou. Estou acompanhando e aviso aqui assim que cair; você não precisa pagar de novo."
            ),
            "Pagamento recebido; recarga enviada, aguardando o sistema de recarga.",
        ),
        Situacao::Devolvida => {
            let estado = if last.devolucao.as_deref() == Some("DEVOLVIDO") {
                "o valor já foi devolvido"
            } else {
                "o valor está sendo devolvido"
            };
            told(
                format!(
                    "Encontrei: o pagamento de {valor} {via}{pago} foi recebido, mas o sistema de recarga recusou a recarga no cartão {card}, e {estado} para a conta que pagou."
                ),
                "Pagamento recebido, recarga recusada, valor devolvido.",
            )
        }
        Situacao::Aguardando if now < last.expira_em => told(
            format!(
                "Ainda não recebi a confirmação do pagamento de {valor} {via} para o cartão {card}. Se você já pagou, a confirmação do banco costuma levar poucos minutos: a recarga é feita assim que ela chegar, e aviso aqui. Não pague de novo."
            ),
            "Pagamento ainda não confirmado pelo banco; nenhum código novo foi gerado.",
        ),
        Situacao::Aguardando | Situacao::Expirada => case(
            format!(
                "O código de {valor} {via} para o cartão {card} expirou em {} sem que o pagamento chegasse até nós. Abri um chamado para uma pessoa verificar com o comprovante; não pague de novo enquanto isso.",
                hora(last.expira_em, tz)
            ),
            "pagamento não encontrado para um código expirado",
        ),
    }
}

#[async_trait]
impl Action for VerificarPagamento {
    type Args = Args;

    const NAME: &'static str = "verificar_pagamento";
    const DESCRIPTION: &'static str = "Verifica uma reclamação de pagamento (pagou e a recarga não caiu, cobrança em dobro) nos \
         pagamentos da conversa e diz o que aconteceu, ou abre um chamado. Nunca inicia uma recarga.";

    async fn call(&self, ctx: &ActionContext, args: Args) -> Result<ActionResponse, ActionError> {
        let cartao = args
            .cartao
            .map(|c| {
                ascii_digits(&c)
                    .chars()
                    .filter(char::is_ascii_digit)
                    .collect::<String>()
            })
            .filter(|c| !c.is_empty());
        let charges = match ctx.get::<SharedPagamentos>() {
            Some(port) => port.da_conversa(ctx).await?,
            None => Vec::new(),
        };
        let tz = ctx
            .get::<VtSettings>()
            .map_or_else(Timezone::sao_paulo, |s| s.politicas.timezone.clone());
        let v = veredito(&charges, cartao.as_deref(), args.duplicada, ctx.now, &tz);
        let mut response = ResponseToUser::new(v.texto, v.instrucao);
        if let Some(motivo) = v.chamado {
            let mut transfer = TransferToHuman::new(motivo).because(HandoffReason::PagamentoNaoCreditado);
            transfer
                .session_info
                .insert("canal".into(), ctx.channel.clone().into());
            response = response.with_function(transfer).with_state("transferido", true);
        }
        Ok(response.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 20, h, 0, 0)
            .single()
            .expect("time")
    }

    fn charge(cartao: &str, situacao: Situacao) -> PagamentoVisto {
        PagamentoVisto {
            cartao: cartao.into(),
            valor: Decimal::new(5000, 2),
            meio: "pix",
            situacao,
            criado_em: at(10),
            expira_em: at(11),
            pago_em: situacao.paid().then(|| at(10)),
            devolucao: None,
        }
    }

    fn say(charges: &[PagamentoVisto], cartao: Option<&str>, duplicada: bool, now: u32) -> Veredito {
        veredito(charges, cartao, duplicada, at(now), &Timezone::sao_paulo())
    }

    #[test]
    fn a_credited_payment_is_told_with_its_card_masked_and_no_case() {
        let v = say(&[charge("1234567890", Situacao::Creditada)], None, false, 12);
        assert!(v.texto.contains("creditada no cartão ****7890"), "{}", v.texto);
        assert!(v.texto.contains("R$ 50,00"), "{}", v.texto);
        assert!(!v.texto.contains("1234567890"));
        assert_eq!(v.chamado, None);
    }

    #[test]
    fn a_payment_on_its_way_or_not_yet_confirmed_never_invites_a_second_one() {
        for (s, want) in [
            (Situacao::Paga, "está sendo feita"),
            (Situacao::Enviada, "ainda não confirmou"),
            (Situacao::Aguardando, "Não pague de novo"),
        ] {
            let v = say(&[charge("1234567890", s)], None, false, 10);
            assert!(v.texto.contains(want), "{s:?}: {}", v.texto);
            assert_eq!(v.chamado, None, "{s:?}");
            assert!(!v.texto.contains("pague o Pix"), "{s:?}: {}", v.texto);
        }
    }

    #[test]
    fn the_last_paid_charge_is_the_one_meant_over_a_later_code_unpaid() {
        let charges = [
            charge("1234567890", Situacao::Creditada),
            charge("1234567890", Situacao::Expirada),
        ];
        let v = say(&charges, None, false, 12);
        assert!(v.texto.contains("creditada"), "{}", v.texto);
    }

    #[test]
    fn nothing_on_record_or_an_expired_code_opens_a_case() {
        let none = say(&[], Some("1234567890"), false, 12);
        assert!(none.chamado.is_some());
        assert!(none.texto.contains("****7890"), "{}", none.texto);
        let expired = say(&[charge("1234567890", Situacao::Aguardando)], None, false, 12);
        assert!(expired.chamado.is_some(), "{}", expired.texto);
        // Another card's charges do not answer for this one.
        let other = say(
            &[charge("2222222222", Situacao::Creditada)],
            Some("1234567890"),
            false,
            12,
        );
        assert!(other.chamado.is_some(), "{}", other.texto);
    }

    #[test]
    fn a_refused_recharge_says_the_money_goes_back() {
        let mut c = charge("1234567890", Situacao::Devolvida);
        c.devolucao = Some("DEVOLVIDO".into());
        let v = say(&[c], None, false, 12);
        assert!(v.texto.contains("já foi devolvido"), "{}", v.texto);
        assert_eq!(v.chamado, None);
    }

    #[test]
    fn a_double_charge_is_told_by_its_refund_or_goes_to_a_person() {
        let mut back = charge("1234567890", Situacao::Creditada);
        back.devolucao = Some("EM_PROCESSAMENTO".into());
        let v = say(&[back], None, true, 12);
        assert!(v.texto.contains("está sendo devolvido"), "{}", v.texto);
        assert_eq!(v.chamado, None);
        let v = say(&[charge("1234567890", Situacao::Creditada)], None, true, 12);
        assert!(v.chamado.is_some(), "{}", v.texto);
    }

    #[tokio::test]
    async fn with_nothing_on_record_the_action_hands_over_as_a_payment_not_credited() {
        let ctx = ActionContext::new("vt", "c1", at(12));
        let r = VerificarPagamento.call(&ctx, Args::default()).await.expect("ok");
        let ActionResponse::ToUser(r) = r else {
            panic!("expected ResponseToUser")
        };
        assert!(
            matches!(&r.functions[..], [vt_contract::response::UserFunction::TransferToHuman(t)]
            if t.motivo == HandoffReason::PagamentoNaoCreditado)
        );
    }
}
