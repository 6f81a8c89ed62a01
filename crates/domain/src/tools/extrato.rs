//! `extrato`: a card's last credits and uses, read from the card system for the last days the policy
//! allows (30 at most), said as a short list — the card masked, amounts in R$, the newest first.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::balcao::{self, Lido};
use super::cartao;
use super::settings::VtSettings;
use crate::systems::contract::{ExtratoResposta, ItemExtrato, TipoMovimento};
use crate::systems::{ExtratoPedido, ReadPolicy, SystemsPort};
use crate::vt::timezone::Timezone;
use vt_contract::action::{Action, ActionError};
use vt_contract::context::ActionContext;
use vt_contract::response::{ActionResponse, ResponseToUser};

/// The longest period a statement covers here, in days.
const EXTRATO_DIAS_MAX: u32 = 30;
/// How many lines the answer lists (the newest).
const LINES: usize = 10;

pub struct Extrato;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Args {
    /// Número do cartão de VT como o usuário escreveu (ou mascarado, `****7890`, se já foi dado).
    pub cartao: String,
    /// Quantos dias para trás (1 a 30); sem valor, 30.
    pub dias: Option<u32>,
}

#[async_trait]
impl Action for Extrato {
    type Args = Args;

    const NAME: &'static str = "extrato";
    const DESCRIPTION: &'static str = "Mostra ao usuário os últimos créditos e usos de um cartão de VT (até 30 dias), os mais recentes primeiro.";

    fn retry_safe(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ActionContext, args: Args) -> Result<ActionResponse, ActionError> {
        let settings = VtSettings::of(ctx);
        let card = match cartao::parsed(ctx, &args.cartao) {
            Ok(card) => card,
            Err(answer) => return Ok(*answer),
        };
        let dias = args.dias.unwrap_or(EXTRATO_DIAS_MAX).clamp(1, EXTRATO_DIAS_MAX);
        let tz = &settings.politicas.timezone;
        let today = tz.local(ctx.now).date_naive();
        let pedido = ExtratoPedido {
            cartao: card.digits().to_owned(),
            de: today - chrono::Days::new(u64::from(dias - 1)),
            ate: today,
            pagina: 1,
        };
        let systems = ctx.require::<SystemsPort>()?.get();
        let read = systems
            .extrato(&pedido, &balcao::headers(&settings), ReadPolicy::default())
            .await;
        let masked = card.masked();
        let extrato: ExtratoResposta = match balcao::read(&read) {
            Lido::Ok(e) => e,
            Lido::Desconhecido => {
                return Ok(ResponseToUser::new(
                    balcao::desconhecido(&masked),
                    format!(
                        "Extrato do cartão {masked}: o sistema não conhece o cartão; o usuário foi avisado."
                    ),
                )
                .into());
            }
            Lido::Falhou(why) => {
                return Ok(ResponseToUser::new(
                    balcao::SEM_RESPOSTA,
                    format!("O extrato do cartão {masked} não pôde ser lido ({why}); o usuário foi avisado. Não invente movimentos."),
                )
                .error()
                .into());
            }
        };
        let text = listed(&extrato, &masked, dias, tz);
        let instruction = format!(
            "Extrato do cartão {masked} dos últimos {dias} dias mostrado ao usuário ({} movimentos na primeira página).",
            extrato.itens.len()
        );
        Ok(ResponseToUser::new(text, instruction)
            .with_memory(cartao::MEMORY_CARTOES, cartao::remember(ctx, card.digits()))
            .into())
    }
}

pub(super) fn line(i: &ItemExtrato, tz: &Timezone) -> String {
    let what = match (i.tipo, &i.linha, &i.local) {
        (TipoMovimento::Credito, _, _) => "crédito".to_owned(),
        (TipoMovimento::Uso, Some(linha), _) => format!("uso, linha {linha}"),
        (TipoMovimento::Uso, None, Some(local)) => format!("uso, {local}"),
        (TipoMovimento::Uso, None, None) => "uso".to_owned(),
    };
    let sign = if i.tipo == TipoMovimento::Credito {
        "+"
    } else {
        "−"
    };
    format!(
        "• {} — {what} — {sign}{}",
        balcao::quando(&i.data, tz),
        balcao::brl(i.valor)
    )
}

/// The statement as the card holder reads it.
fn listed(e: &ExtratoResposta, masked: &str, dias: u32, tz: &Timezone) -> String {
    let period = if dias == 1 {
        "de hoje".to_owned()
    } else {
        format!("dos últimos {dias} dias")
    };
    if e.itens.is_empty() {
        return format!("O cartão {masked} não tem créditos nem usos {period}.");
    }
    let shown: Vec<String> = e.itens.iter().take(LINES).map(|i| line(i, tz)).collect();
    let more = e.itens.len() > LINES || e.proxima_pagina.is_some();
    let head = if more {
        format!("Extrato do cartão {masked} {period} — os {LINES} movimentos mais recentes:")
    } else {
        format!("Extrato do cartão {masked} {period}:")
    };
    format!("{head}\n{}", shown.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(data: &str, tipo: TipoMovimento, valor: f64, linha: Option<&str>) -> ItemExtrato {
        ItemExtrato {
            data: data.into(),
            tipo,
            valor,
            local: None,
            linha: linha.map(str::to_owned),
        }
    }

    #[test]
    fn a_statement_lists_the_newest_lines_with_signs_and_lines() {
        let e = ExtratoResposta {
            cartao: "2424242424".into(),
            de: "2026-10-24".into(),
            ate: "2026-11-22".into(),
            itens: vec![
                item(
                    "2026-11-21T18:10:00-03:00",
                    TipoMovimento::Uso,
                    4.4,
                    Some("8012-10"),
                ),
                item("2026-11-21T09:00:00-03:00", TipoMovimento::Credito, 100.0, None),
            ],
            proxima_pagina: None,
        };
        let text = listed(&e, "****2424", 30, &Timezone::sao_paulo());
        assert_eq!(
            text,
            "Extrato do cartão ****2424 dos últimos 30 dias:\n\
             • 21/11 às 18:10 — uso, linha 8012-10 — −R$ 4,40\n\
             • 21/11 às 09:00 — crédito — +R$ 100,00"
        );
    }

    #[test]
    fn a_long_statement_says_it_shows_the_newest_and_an_empty_one_says_so() {
        let many: Vec<ItemExtrato> = (0..20)
            .map(|_| item("2026-11-21T07:30:00-03:00", TipoMovimento::Uso, 4.4, None))
            .collect();
        let e = ExtratoResposta {
            cartao: "2424242424".into(),
            de: "2026-10-24".into(),
            ate: "2026-11-22".into(),
            itens: many,
            proxima_pagina: Some(2),
        };
        let text = listed(&e, "****2424", 30, &Timezone::sao_paulo());
        assert!(
            text.starts_with(
                "Extrato do cartão ****2424 dos últimos 30 dias — os 10 movimentos mais recentes:"
            )
        );
        assert_eq!(text.lines().count(), 11);
        let empty = ExtratoResposta {
            itens: Vec::new(),
            proxima_pagina: None,
            ..e
        };
        assert_eq!(
            listed(&empty, "****2424", 7, &Timezone::sao_paulo()),
            "O cartão ****2424 não tem créditos nem usos dos últimos 7 dias."
        );
    }
}
