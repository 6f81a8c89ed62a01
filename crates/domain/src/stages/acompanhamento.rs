//! Recharges whose outcome came late: what a follow-up does with a recharge left `pendente` (the
//! recharge system answered 202) or `enviando` (a timeout, a process that died while sending). The
//! application's timer calls it; the rules are the stages' own:
//! - the same request is sent again under the same idempotency key ([`reenviar`]): the recharge system
//!   answers from its idempotency store, or processes it once if it never arrived — the user confirmed
//!   it, and a key is one charge;
//! - RF8 reconciles the answer ([`conciliar`]); a replayed approval is still news to the card holder,
//!   so the text tells the outcome, not "already made";
//! - RF9's text and RF10's send tell the flow's recipient ([`avisar_destinatario`]); a chat's card holder
//!   is told by the application on the conversation's channel with the same text ([`Aviso`]);
//! - when the follow-ups give up, the card holder is told a person will check ([`aviso_verificacao`]).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::notificacao::{DecisaoNotificacao, EnvioNotificacao};
use super::rf08_conciliar_recarga::{Conciliacao, REPLAY};
use crate::journal::RechargeRequest;
use crate::stages::channel_notices::ChannelNoticesPort;
use crate::systems::{HttpResult, Systems};
use crate::vt::texts::{self, RecargaStatus};
use crate::vt::{FlowInput, mask_card, money_json, round_half_up};

/// The `status_recarga` of the notice that a person checks the recharge.
pub use super::rf10_enviar_notificacao_recarga::EM_VERIFICACAO;

/// Sends `request` again: the same body under the same key.
pub async fn reenviar(systems: &dyn Systems, request: &RechargeRequest) -> HttpResult {
    super::rf07_executar_recarga::enviar(systems, request).await
}

/// `now` in the input's time zone, as the stages write times.
pub fn hora_local(now: DateTime<Utc>, input: &FlowInput) -> String {
    super::iso_local(now, &input.politicas.timezone)
}

/// What a follow-up learnt: RF8's reconciliation of the answer.
#[derive(Debug, Clone)]
pub struct Desfecho {
    pub status: RecargaStatus,
    /// RF8's output, as a stage's `saida`.
    pub saida: Value,
    conciliacao: Conciliacao,
}

/// RF8 over the answer to a follow-up; `saldo_anterior` unknown (the balance was read long ago).
pub fn conciliar(resp: &HttpResult, input: &FlowInput, now: DateTime<Utc>) -> Desfecho {
    let conciliacao = super::rf08_conciliar_recarga::conciliar(resp, input, None, now);
    Desfecho {
        status: RecargaStatus::parse(&conciliacao.status_recarga).unwrap_or(RecargaStatus::Erro),
        saida: vt_contract::json::to_value(&conciliacao).unwrap_or(Value::Null),
        conciliacao,
    }
}

impl Desfecho {
    /// The boleto the recharge waits for, when it was paid by boleto and is not yet.
    pub fn boleto(&self) -> Option<&crate::boleto::Boleto> {
        self.conciliacao.boleto.as_ref()
    }

    /// Whether the recharge system said what became of it (anything but `pendente`).
    pub fn resolvido(&self) -> bool {
        self.status != RecargaStatus::Pendente
    }

    /// The notice of the outcome, RF9's text in the input's language: news to the card holder even
    /// when the system replayed an approval made earlier.
    pub fn aviso(&self, input: &FlowInput) -> Aviso {
        let mut c = self.conciliacao.clone();
        c.observacoes.retain(|o| o != REPLAY);
        Aviso::from_decisao(super::rf09_preparar_notificacao_recarga::preparar_notificacao_recarga(&c, input))
    }
}

/// Until when a recharge waiting for `boleto` is followed before a person checks it: the end of the
/// [`COMPENSACAO_DIAS_UTEIS`](crate::boleto::COMPENSACAO_DIAS_UTEIS)-th business day after its due date
/// in the input's time zone — a payment on the due date is cleared by then. Weekends are skipped; bank
/// holidays are not known here, so one in the way hands the recharge to a person a day early, never
/// lets it be forgotten.
pub fn prazo_boleto(boleto: &crate::boleto::Boleto, input: &FlowInput) -> DateTime<Utc> {
    use chrono::{Datelike, Days, Weekday};
    let mut day = boleto.vencimento;
    let mut left = crate::boleto::COMPENSACAO_DIAS_UTEIS;
    while left > 0 {
        day = day + Days::new(1);
        if !matches!(day.weekday(), Weekday::Sat | Weekday::Sun) {
            left -= 1;
        }
    }
    let end = (day + Days::new(1)).and_time(chrono::NaiveTime::MIN);
    let offset = *input.politicas.timezone.local(end.and_utc()).offset();
    (end - chrono::Duration::seconds(i64::from(offset.local_minus_utc()))).and_utc()
}

/// A notice about a recharge, for the flow's recipient (through RF10's send) or a chat's card holder.
#[derive(Debug, Clone)]
pub struct Aviso {
    decisao: DecisaoNotificacao,
}

impl Aviso {
    fn from_decisao(decisao: DecisaoNotificacao) -> Self {
        Self { decisao }
    }

    /// The text, as the notification system gets it (the card masked).
    pub fn mensagem(&self) -> String {
        self.decisao
            .payload
            .as_ref()
            .map(|p| p.mensagem.clone())
            .unwrap_or_default()
    }

    /// The parameters of the `resultado_recarga` WhatsApp template: `cartao_final` (the last four
    /// digits), `valor`, `resultado`.
    pub fn parametros(&self) -> Vec<(String, String)> {
        let Some(r) = super::rf10_enviar_notificacao_recarga::recharge_result(&self.decisao) else {
            return Vec::new();
        };
        vec![
            (
                "cartao_final".into(),
                mask_card(&r.cartao).trim_start_matches('*').to_owned(),
            ),
            ("valor".into(), r.valor),
            ("resultado".into(), r.resultado),
        ]
    }
}

/// The notice when the follow-ups gave up: a person checks the recharge; nothing is sent again.
pub fn aviso_verificacao(input: &FlowInput) -> Aviso {
    let recarga = input.recarga.as_ref();
    let valor = recarga.and_then(|r| r.valor).map(round_half_up);
    let moeda = super::rf06_preparar_recarga::moeda_iso(recarga.and_then(|r| r.moeda.as_deref()))
        .unwrap_or_else(|| input.politicas.moeda_padrao.clone());
    let cartao = crate::vt::card::clean(&input.cartao);
    let (assunto, mensagem) =
        texts::recarga_em_verificacao(input.preferencias.idioma(), &mask_card(&cartao), &moeda, valor);
    let mut metadados = Map::new();
    metadados.insert("cartao".into(), json!(cartao));
    metadados.insert("valor".into(), valor.map_or(Value::Null, money_json));
    metadados.insert("moeda".into(), json!(moeda));
    metadados.insert("status_recarga".into(), json!(EM_VERIFICACAO));
    Aviso::from_decisao(DecisaoNotificacao::enviar(input, assunto, mensagem, metadados))
}

/// Tells the flow's recipient as RF10 would: through the channel the product serves itself, else the
/// notification system (deduplicated by the notice's key).
pub async fn avisar_destinatario(
    systems: &dyn Systems,
    port: Option<&ChannelNoticesPort>,
    (input, execucao): (&FlowInput, &str),
    aviso: &Aviso,
) -> EnvioNotificacao {
    super::rf10_enviar_notificacao_recarga::avisar(systems, port, (input, execucao), &aviso.decisao).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> FlowInput {
        FlowInput::parse(
            r#"{"cartao": "6161616161", "recarga": {"valor": 50, "meio_pagamento": {"tipo": "pix"}}}"#,
        )
        .expect("input")
    }

    fn answer(status: u16, body: Value, replayed: bool) -> HttpResult {
        HttpResult {
            status: Some(status),
            body: Some(body),
            erro: None,
            replayed,
        }
    }

    #[test]
    fn a_replayed_approval_is_told_as_the_news_it_is_to_the_card_holder() {
        let body = json!({"status": "aprovada", "transacao_id": "tx_1", "saldo_atualizado": 100.0});
        let d = conciliar(&answer(201, body, true), &input(), Utc::now());
        assert!(d.resolvido());
        assert_eq!(d.status, RecargaStatus::Aprovada);
        assert!(
            d.saida["observacoes"].to_string().contains(REPLAY),
            "kept for the record"
        );
        let aviso = d.aviso(&input());
        assert!(aviso.mensagem().contains("foi aprovada"), "{}", aviso.mensagem());
        assert!(!aviso.mensagem().contains("6161616161"));
        assert_eq!(
            aviso.parametros(),
            [
                ("cartao_final".to_owned(), "6161".to_owned()),
                ("valor".to_owned(), "R$ 50,00".to_owned()),
                ("resultado".to_owned(), "aprovada".to_owned()),
            ]
        );
    }

    #[test]
    fn a_202_again_is_not_resolved_and_the_person_notice_says_not_to_pay_again() {
        let d = conciliar(
            &answer(202, json!({"status": "pendente"}), true),
            &input(),
            Utc::now(),
        );
        assert!(!d.resolvido());
        let aviso = aviso_verificacao(&input());
        assert!(
            aviso.mensagem().contains("Um atendente vai verificar"),
            "{}",
            aviso.mensagem()
        );
        assert_eq!(aviso.parametros()[2].1, "em verificação por um atendente");
    }
}
