//! `consultar_situacao`: a card's situation read from the card system and said as it is — blocked
//! since when, cancelled, a credit waiting to be validated on board (where and until when), a use
//! limit reached. Asked why the card did not pass the turnstile (`nao_passou`), an active card with
//! nothing pending is explained by its balance and last uses: no balance → a recharge offered.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::balcao::{self, Lido};
use super::cartao;
use super::settings::VtSettings;
use crate::systems::contract::{ExtratoResposta, SaldoResposta, Situacao, SituacaoResposta, TipoMovimento};
use crate::systems::{ExtratoPedido, ReadPolicy, SystemsPort};
use crate::vt::timezone::Timezone;
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, ResponseToUser};

pub struct ConsultarSituacao;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Args {
    /// Número do cartão de VT como o usuário escreveu (ou mascarado, `****7890`, se já foi dado).
    pub cartao: String,
    /// `true` se o cartão não passou na catraca.
    pub nao_passou: Option<bool>,
}

#[async_trait]
impl Action for ConsultarSituacao {
    type Args = Args;

    const NAME: &'static str = "consultar_situacao";
    const DESCRIPTION: &'static str = "Situação de um cartão de VT (bloqueado, cancelado, crédito a validar a bordo, \
         limite) dita ao usuário; com nao_passou, por que ele não passou na catraca.";

    fn retry_safe(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ActionContext, args: Args) -> Result<ActionResponse, ActionError> {
        let settings = VtSettings::of(ctx);
        let card = match cartao::parsed(ctx, &args.cartao) {
            Ok(card) => card,
            Err(answer) => return Ok(*answer),
        };
        let systems = ctx.require::<SystemsPort>()?.get();
        let headers = balcao::headers(&settings);
        let tz = &settings.politicas.timezone;
        let masked = card.masked();
        let read = systems
            .consultar_situacao(card.digits(), &headers, ReadPolicy::default())
            .await;
        let situacao: SituacaoResposta = match balcao::read(&read) {
            Lido::Ok(s) => s,
            Lido::Desconhecido => {
                return Ok(answer(
                    balcao::desconhecido(&masked),
                    "cartão desconhecido do sistema",
                    &masked,
                )
                .into());
            }
            Lido::Falhou(why) => {
                let instruction = format!(
                    "A consulta da situação do cartão {masked} falhou ({why}); o usuário foi avisado. Não invente uma situação."
                );
                return Ok(ResponseToUser::new(balcao::SEM_RESPOSTA, instruction)
                    .error()
                    .into());
            }
        };
        let mut text = said(&situacao, &masked, tz);
        let nao_passou = args.nao_passou.unwrap_or(false);
        let clear = situacao.situacao == Situacao::Ativo
            && situacao.creditos_pendentes.is_empty()
            && situacao.limite.is_none();
        if nao_passou && clear {
            text = explained(systems, (card.digits(), &masked), &settings, ctx).await;
        }
        let summary = format!("situação {:?}", situacao.situacao).to_lowercase();
        Ok(answer(text, &summary, &masked)
            .with_memory(cartao::MEMORY_CARTOES, cartao::remember(ctx, card.digits()))
            .into())
    }
}

/// The answer the user reads, with what the model keeps of it.
fn answer(text: String, what: &str, masked: &str) -> ResponseToUser {
    ResponseToUser::new(
        text,
        format!(
            "Situação do cartão {masked} consultada no sistema ({what}); o usuário já recebeu a resposta."
        ),
    )
}

/// The situation in the card holder's words.
pub(super) fn said(s: &SituacaoResposta, masked: &str, tz: &Timezone) -> String {
    let mut parts = Vec::new();
    match (s.situacao, &s.bloqueio) {
        (Situacao::Bloqueado, Some(b)) => parts.push(format!(
            "O cartão {masked} está bloqueado desde {} ({}). Cartão bloqueado não passa na catraca. Para voltar a usar o benefício, peça a segunda via: o saldo passa para o cartão novo. Se quiser, peça para falar com um atendente.",
            balcao::dia(&b.desde, tz),
            b.motivo
        )),
        (Situacao::Bloqueado, None) => parts.push(format!(
            "O cartão {masked} está bloqueado e não passa na catraca. Para voltar a usar o benefício, peça a segunda via; se quiser, peça para falar com um atendente."
        )),
        (Situacao::Cancelado, _) => parts.push(format!(
            "O cartão {masked} está cancelado e não passa mais na catraca. Se você já recebeu um cartão novo, use o novo; se não, peça para falar com um atendente."
        )),
        (Situacao::Ativo, _) => parts.push(format!("O cartão {masked} está ativo.")),
    }
    for c in &s.creditos_pendentes {
        let onde = c.onde.as_deref().unwrap_or("em um validador a bordo");
        parts.push(format!(
            "Há {} comprados em {} que ainda não estão no cartão: eles entram quando você encosta o cartão {onde}, até {}. Depois desse prazo o crédito volta.",
            balcao::brl(c.valor),
            balcao::quando(&c.desde, tz),
            balcao::quando(&c.validar_ate, tz)
        ));
    }
    if let Some(l) = &s.limite {
        let tipo = if l.tipo == "mensal" { "mensal" } else { "diário" };
        parts.push(format!(
            "O limite {tipo} de usos do benefício foi atingido: o cartão volta a passar em {}.",
            balcao::quando(&l.libera_em, tz)
        ));
    }
    parts.join(" ")
}

/// An active card with nothing pending that did not pass: its balance and its last uses say why, or
/// that the system sees nothing wrong.
async fn explained(
    systems: &dyn crate::systems::Systems,
    (digits, masked): (&str, &str),
    settings: &VtSettings,
    ctx: &ActionContext,
) -> String {
    let headers = balcao::headers(settings);
    let read = ReadPolicy::default();
    let saldo = systems
        .consultar_saldo(digits, &headers, read.timeout_ms, read.attempts, read.backoff_ms)
        .await;
    let saldo = match balcao::read::<SaldoResposta>(&saldo) {
        Lido::Ok(s) if s.cartao == digits => s.saldo,
        _ => None,
    };
    let today = settings.politicas.timezone.local(ctx.now).date_naive();
    let pedido = ExtratoPedido {
        cartao: digits.to_owned(),
        de: today - chrono::Days::new(6),
        ate: today,
        pagina: 1,
    };
    let last_use = match balcao::read::<ExtratoResposta>(&systems.extrato(&pedido, &headers, read).await) {
        Lido::Ok(e) => e.itens.into_iter().find(|i| i.tipo == TipoMovimento::Uso),
        _ => None,
    };
    let tz = &settings.politicas.timezone;
    let used = last_use.map(|u| {
        format!(
            " O último uso registrado foi em {}{}.",
            balcao::quando(&u.data, tz),
            u.linha.map(|l| format!(", linha {l}")).unwrap_or_default()
        )
    });
    match saldo {
        Some(v) if v <= 0.0 => format!(
            "O cartão {masked} está ativo, mas está sem saldo ({}): por isso a catraca não liberou.{} Quer recarregar? É só me dizer o valor e o meio de pagamento.",
            balcao::brl(v),
            used.unwrap_or_default()
        ),
        Some(v) => format!(
            "O cartão {masked} está ativo, com {} de saldo e nada pendente.{} Se a catraca recusou mesmo assim, pode ser o validador ou um dano no cartão: tente outro validador e, se continuar, peça para falar com um atendente.",
            balcao::brl(v),
            used.unwrap_or_default()
        ),
        None => format!(
            "O cartão {masked} está ativo e sem bloqueio. Não consegui ler o saldo agora; se a catraca recusou, pode ser falta de saldo, o validador ou um dano no cartão. Se quiser, peça para falar com um atendente."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::systems::contract::{Bloqueio, CreditoPendente, LimiteAtingido};

    fn situation(situacao: Situacao) -> SituacaoResposta {
        SituacaoResposta {
            cartao: "1234567890".into(),
            situacao,
            bloqueio: None,
            creditos_pendentes: Vec::new(),
            limite: None,
            data_servidor: None,
        }
    }

    #[test]
    fn a_blocked_card_says_since_when_and_why_and_what_to_do() {
        let s = SituacaoResposta {
            bloqueio: Some(Bloqueio {
                motivo: "perda".into(),
                desde: "2026-11-19T09:00:00-03:00".into(),
            }),
            ..situation(Situacao::Bloqueado)
        };
        let text = said(&s, "****7890", &Timezone::sao_paulo());
        assert!(text.contains("bloqueado desde 19/11/2026 (perda)"), "{text}");
        assert!(text.contains("segunda via"), "{text}");
    }

    #[test]
    fn a_credit_waiting_says_where_and_until_when_to_validate_it() {
        let s = SituacaoResposta {
            creditos_pendentes: vec![CreditoPendente {
                valor: 50.0,
                desde: "2026-11-21T09:00:00-03:00".into(),
                validar_ate: "2026-11-24T09:00:00-03:00".into(),
                onde: Some("em qualquer validador a bordo dos ônibus".into()),
            }],
            ..situation(Situacao::Ativo)
        };
        let text = said(&s, "****7890", &Timezone::sao_paulo());
        assert!(text.contains("R$ 50,00 comprados em 21/11 às 09:00"), "{text}");
        assert!(text.contains("a bordo dos ônibus, até 24/11 às 09:00"), "{text}");
    }

    #[test]
    fn a_limit_reached_says_when_the_card_passes_again() {
        let s = SituacaoResposta {
            limite: Some(LimiteAtingido {
                tipo: "diario".into(),
                libera_em: "2026-11-23T00:00:00-03:00".into(),
            }),
            ..situation(Situacao::Ativo)
        };
        let text = said(&s, "****7890", &Timezone::sao_paulo());
        assert!(text.contains("limite diário"), "{text}");
        assert!(text.contains("23/11 às 00:00"), "{text}");
    }
}
