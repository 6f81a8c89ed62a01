//! A recharge paid by boleto: the simulated recharge system issues a bank slip for the amount, answers
//! 202 until it is paid (its payer's magic card pays it, or `BOLETO_PAY_PATH` does) or falls due.

use super::*;

impl Simulator {
    /// A recharge paid by boleto, waiting for it: 202 `pendente` with the boleto, due in
    /// [`BOLETO_VENCE_EM_DIAS`] days, its free field drawn from the key (the same request, the same line).
    pub(super) fn issue_boleto(
        &self,
        (key, body_hash): (&str, String),
        (valor, moeda): (Decimal, &str),
        mut entry: LedgerEntry,
    ) -> Response {
        let response = self.boleto_answer(key, valor, moeda);
        self.store(key, body_hash, 202, response.clone());
        entry.status = 202;
        self.record(entry);
        reply(202, response)
    }

    pub(super) fn boleto_answer(&self, key: &str, valor: Decimal, moeda: &str) -> Value {
        let today = vt_domain::vt::timezone::Timezone::sao_paulo()
            .local(self.now())
            .date_naive();
        let vencimento = today + chrono::Days::new(BOLETO_VENCE_EM_DIAS);
        let livre: String = hash(&json!(key))
            .bytes()
            .map(|b| char::from(b'0' + b % 10))
            .take(25)
            .collect();
        let linha = vt_domain::boleto::LinhaDigitavel::emitir(BOLETO_BANCO, vencimento, valor, &livre);
        let mut response = self.pending(valor, moeda);
        if let Some(linha) = linha {
            self.store(
                &boleto_key(linha.digits()),
                "emitido".into(),
                200,
                json!({"boleto": linha.digits(), "chave": key}),
            );
            response["boleto"] = json!({
                "linha_digitavel": linha.digits(),
                "vencimento": vencimento.format("%Y-%m-%d").to_string(),
            });
        }
        response
    }

    /// The same request again for a recharge waiting for its boleto (`stored`): paid since → approved
    /// now, the charge happening once (news, not a replay); past its due date unpaid → 402
    /// `boleto_vencido`, kept under the key. `None` when it still waits (the stored answer is replayed)
    /// or `stored` holds no boleto.
    pub(super) fn boleto_again(
        &self,
        (key, body_hash): (&str, &str),
        stored: &Value,
        card: &CardBehavior,
        (valor, moeda): (Decimal, &str),
        entry: &LedgerEntry,
    ) -> Option<Response> {
        let boleto = stored.get("boleto")?;
        let linha = boleto.get("linha_digitavel").and_then(Value::as_str)?;
        let vencimento = boleto
            .get("vencimento")
            .and_then(Value::as_str)
            .and_then(|d| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())?;
        let issued = stored
            .get("data_processamento")
            .and_then(Value::as_str)
            .and_then(|d| chrono::DateTime::parse_from_rfc3339(d).ok());
        let now = self.now();
        let paid_by_itself = card.pix != PixPayer::NuncaPaga
            && issued
                .zip(self.inner.config.boleto_pagar_apos)
                .is_some_and(|(at, after)| {
                    now - at.with_timezone(&chrono::Utc)
                        >= chrono::Duration::from_std(after).unwrap_or(chrono::Duration::MAX)
                });
        let (status, response, efeito) = if paid_by_itself || self.boleto_paid(linha) {
            let cartao = entry.cartao.clone().unwrap_or_default();
            let response = self.approve(&cartao, card.saldo, valor, moeda, (true, true));
            (201, response, Some(Efeito::RecargaEfetivada))
        } else if vt_domain::vt::timezone::Timezone::sao_paulo()
            .local(now)
            .date_naive()
            > vencimento
        {
            (402, json!({"motivo": "boleto_vencido"}), None)
        } else {
            return None;
        };
        self.store(key, body_hash.to_owned(), status, response.clone());
        self.record(LedgerEntry {
            status,
            efeito,
            ..entry.clone()
        });
        Some(reply(status, response))
    }

    /// Whether the boleto with line `linha` was paid ([`Self::pay_boleto`]).
    pub(super) fn boleto_paid(&self, linha: &str) -> bool {
        matches!(self.replay(&boleto_paid_key(linha), "pago"), Ok(Some(_)))
    }

    /// Pays the boleto with line `linha` (digits, with or without dots and spaces), as the card holder's
    /// bank would: the recharge is credited when its request comes again. `false`: no such boleto.
    pub fn pay_boleto(&self, linha: &str) -> bool {
        let digits: String = linha.chars().filter(char::is_ascii_digit).collect();
        if !matches!(self.replay(&boleto_key(&digits), "emitido"), Ok(Some(_))) {
            return false;
        }
        self.store(
            &boleto_paid_key(&digits),
            "pago".into(),
            200,
            json!({"boleto": digits, "pago": true}),
        );
        true
    }
}

/// Where the simulator's card holder pays a boleto: `POST /_simulador/boletos/{linha}/pagar`.
pub const BOLETO_PAY_PATH: &str = "/_simulador/boletos/{linha}/pagar";
/// The bank code of the simulator's boletos (no bank has it).
const BOLETO_BANCO: &str = "999";
/// Days from issue to a simulated boleto's due date.
const BOLETO_VENCE_EM_DIAS: u64 = 3;

pub(super) fn boleto_key(digits: &str) -> String {
    format!("boleto:{digits}")
}

pub(super) fn boleto_paid_key(digits: &str) -> String {
    format!("boleto-pago:{digits}")
}

/// Whether the recharge `body` is paid by boleto and the card's system would approve it: then it waits
/// for its boleto to be paid.
pub(super) fn waits_for_a_boleto(body: &Value, card: &CardBehavior) -> bool {
    body.pointer("/meio_pagamento/tipo").and_then(Value::as_str) == Some("boleto")
        && matches!(
            card.recarga,
            RechargeMode::Aprovada | RechargeMode::AprovadaSemSaldo | RechargeMode::AprovadaSemIds
        )
}

/// Whether a stored answer is about a boleto — a recharge waiting for one, or a boleto's own record
/// (issued, paid): a live transaction the system answers for until it is paid or falls due (days),
/// not a cached answer that expires with the idempotency window.
pub(super) fn about_a_boleto(response: &Value) -> bool {
    response.get("boleto").is_some()
}

pub(super) async fn pagar_boleto(
    State(sim): State<Simulator>,
    axum::extract::Path(linha): axum::extract::Path<String>,
) -> Response {
    if sim.pay_boleto(&linha) {
        reply(200, json!({"pago": true}))
    } else {
        reply(404, json!({"motivo": "boleto_desconhecido"}))
    }
}
