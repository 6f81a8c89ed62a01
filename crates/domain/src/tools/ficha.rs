//! What the console's card page asks of the card desk: a card's [`Ficha`] (its situation and its last
//! 30 days, as the tools say them) and a block on its holder's behalf.

use chrono::{DateTime, Utc};

use super::balcao::{self, Lido};
use super::settings::VtSettings;
use crate::systems::contract::{BloqueioResposta, ExtratoResposta, MotivoBloqueio, Recusa, SituacaoResposta};
use crate::systems::{ExtratoPedido, ORDEM_TIMEOUT_MS, OrdemCartao, ReadPolicy, Systems};

/// A card as a support agent sees it on the console: its situation as the card holder hears it, and
/// the newest lines of its last 30 days — read from the card system; a failure said, never raised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ficha {
    pub situacao: String,
    pub extrato: Vec<String>,
    /// The card is active: there is something to block.
    pub bloqueavel: bool,
}

/// `cartao`'s [`Ficha`], read at `now` with `settings`' headers.
pub async fn ficha(systems: &dyn Systems, settings: &VtSettings, cartao: &str, now: DateTime<Utc>) -> Ficha {
    let headers = balcao::headers(settings);
    let tz = &settings.politicas.timezone;
    let masked = crate::vt::mask_card(cartao);
    let read = systems
        .consultar_situacao(cartao, &headers, ReadPolicy::default())
        .await;
    let (situacao, bloqueavel) = match balcao::read::<SituacaoResposta>(&read) {
        Lido::Ok(s) => (
            super::situacao::said(&s, &masked, tz),
            s.situacao == crate::systems::contract::Situacao::Ativo,
        ),
        Lido::Desconhecido => (balcao::desconhecido(&masked), false),
        // Unread, the block is still offered: the block's own answer will say.
        Lido::Falhou(why) => (format!("O sistema de cartões não respondeu ({why})."), true),
    };
    let today = tz.local(now).date_naive();
    let pedido = ExtratoPedido {
        cartao: cartao.to_owned(),
        de: today - chrono::Days::new(29),
        ate: today,
        pagina: 1,
    };
    let read = systems.extrato(&pedido, &headers, ReadPolicy::default()).await;
    let extrato = match balcao::read::<ExtratoResposta>(&read) {
        Lido::Ok(e) => e
            .itens
            .iter()
            .take(20)
            .map(|i| super::extrato::line(i, tz))
            .collect(),
        _ => Vec::new(),
    };
    Ficha {
        situacao,
        extrato,
        bloqueavel,
    }
}

/// A card blocked by a support agent on its holder's behalf (the console), under `key` (one block per
/// form sent, however often it is sent): the system's answer, or why there is none.
pub async fn bloquear_por_atendente(
    systems: &dyn Systems,
    settings: &VtSettings,
    cartao: &str,
    motivo: MotivoBloqueio,
    key: &str,
) -> Result<BloqueioResposta, String> {
    let mut headers = balcao::headers(settings);
    headers.insert("x-idempotency-key".into(), key.to_owned());
    let body = serde_json::json!({"cartao": cartao, "motivo": motivo});
    let sent = systems
        .ordem_cartao(OrdemCartao::Bloqueio, &body, &headers, ORDEM_TIMEOUT_MS)
        .await;
    match (sent.status, sent.body.clone()) {
        (Some(200 | 201), Some(b)) => {
            vt_contract::json::from_value(b).map_err(|_| "resposta fora do contrato".to_owned())
        }
        (Some(s), b) => Err(b
            .and_then(|b| vt_contract::json::from_value::<Recusa>(b).ok())
            .map_or_else(|| format!("HTTP {s}"), |r| r.motivo.replace('_', " "))),
        (None, _) => Err(sent.erro.map_or_else(|| "sem resposta".to_owned(), |e| e.tipo)),
    }
}
