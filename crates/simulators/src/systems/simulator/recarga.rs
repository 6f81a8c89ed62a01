//! The recharge system, simulated: a recharge checked, answered by the card's behaviour (approved,
//! pending, denied, failed, charged and never answered), kept under its idempotency key, and — for a
//! pending one — approved when the same request comes again after it was processed.

use super::*;

pub(super) const PAYMENT_TYPES: [&str; 3] = ["cartao_credito", "boleto", "pix"];

/// Checks a recharge body; the reason names the first problem.
fn check_recharge(body: &Value) -> Result<(String, Decimal, String), String> {
    let cartao = body
        .get("cartao")
        .and_then(Value::as_str)
        .filter(|c| valid_card(c))
        .ok_or("cartao")?;
    let valor = body
        .get("valor")
        .and_then(decimal_from_json)
        .filter(|v| *v > Decimal::ZERO)
        .ok_or("valor")?;
    let moeda = body
        .get("moeda")
        .and_then(Value::as_str)
        .filter(|m| m.len() == 3)
        .ok_or("moeda")?;
    let tipo = body
        .pointer("/meio_pagamento/tipo")
        .and_then(Value::as_str)
        .ok_or("meio_pagamento")?;
    if !PAYMENT_TYPES.contains(&tipo) {
        return Err("meio_pagamento".into());
    }
    Ok((cartao.to_owned(), valor, moeda.to_owned()))
}

/// The ledger's line of a recharge request, before it is answered.
fn recharge_entry(key: Option<String>, body: &Value) -> LedgerEntry {
    LedgerEntry {
        seq: 0,
        sistema: "recarga".into(),
        method: "POST".into(),
        path: vt_domain::systems::RECARGA_ENDPOINT.into(),
        idempotency_key: key,
        cartao: body.get("cartao").and_then(Value::as_str).map(str::to_owned),
        status: 0,
        efeito: None,
        body: Some(body.clone()),
    }
}

pub(super) async fn recarga(
    State(sim): State<Simulator>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Response {
    let body = body.map(|Json(b)| b).unwrap_or(Value::Null);
    let key = idempotency_key(&headers);
    let mut entry = recharge_entry(key.clone(), &body);
    let refused = |entry: LedgerEntry, answer: Value| {
        sim.record(LedgerEntry { status: 400, ..entry });
        reply(400, answer)
    };
    let (cartao, valor, moeda) = match check_recharge(&body) {
        Ok(v) => v,
        Err(field) => return refused(entry, json!({"motivo": "payload_invalido", "campo": field})),
    };
    let Some(key) = key else {
        return refused(entry, json!({"motivo": "idempotency_key_ausente"}));
    };
    let body_hash = hash(&body);
    let card = sim.card(&cartao);
    if let Some(answered) = sim.settled_since((&key, &body_hash), &card, (valor, &moeda), &entry) {
        return answered;
    }
    if let Some(stored) = sim.answer_stored(&key, &body_hash, &entry) {
        return stored;
    }
    if waits_for_a_boleto(&body, &card) {
        return sim.issue_boleto((&key, body_hash), (valor, &moeda), entry);
    }
    let approve = |with_balance: bool, with_ids: bool| {
        sim.approve(&cartao, card.saldo, valor, &moeda, (with_balance, with_ids))
    };
    let (status, response, charged) = match card.recarga {
        RechargeMode::Aprovada => (201, approve(true, true), true),
        RechargeMode::AprovadaSemSaldo => (201, approve(false, true), true),
        RechargeMode::AprovadaSemIds => (201, approve(true, false), true),
        RechargeMode::Pendente | RechargeMode::PendenteDepoisAprovada => {
            (202, sim.pending(valor, &moeda), false)
        }
        RechargeMode::Negada => (402, json!({"motivo": "pagamento_negado"}), false),
        RechargeMode::Erro500 => (500, json!({"erro": "falha_interna"}), false),
        RechargeMode::TimeoutAposCobranca => {
            // The charge happens and is remembered under the key; the answer never arrives in time.
            let response = approve(true, true);
            sim.store(&key, body_hash, 201, response);
            entry.status = 201;
            entry.efeito = Some(Efeito::RecargaEfetivada);
            sim.record(entry);
            tokio::time::sleep(sim.inner.config.slow).await;
            return reply(504, json!({"erro": "tarde_demais"}));
        }
    };
    // Only answers that settle the request are stored; a 500 may be retried by the caller with the key.
    if status < 500 {
        sim.store(&key, body_hash, status, response.clone());
    }
    entry.status = status;
    entry.efeito = charged.then_some(Efeito::RecargaEfetivada);
    sim.record(entry);
    reply(status, response)
}

impl Simulator {
    /// The same request again for a recharge answered 202 before (`PendenteDepoisAprovada`): processed
    /// since, so the approval is this answer's news, not a replay — the charge happens now, once.
    fn approve_pending(
        &self,
        key: &str,
        body_hash: String,
        card: &CardBehavior,
        (valor, moeda): (Decimal, &str),
        mut entry: LedgerEntry,
    ) -> Response {
        let cartao = entry.cartao.clone().unwrap_or_default();
        let response = self.approve(&cartao, card.saldo, valor, moeda, (true, true));
        self.store(key, body_hash, 201, response.clone());
        entry.status = 201;
        entry.efeito = Some(Efeito::RecargaEfetivada);
        self.record(entry);
        reply(201, response)
    }

    /// The same request again for a recharge answered 202 before, when something happened since: a
    /// `PendenteDepoisAprovada` recharge processed, a boleto paid or fallen due. `None`: the stored
    /// answer still holds.
    fn settled_since(
        &self,
        (key, body_hash): (&str, &str),
        card: &CardBehavior,
        (valor, moeda): (Decimal, &str),
        entry: &LedgerEntry,
    ) -> Option<Response> {
        let Ok(Some((202, stored))) = self.replay(key, body_hash) else {
            return None;
        };
        if card.recarga == RechargeMode::PendenteDepoisAprovada {
            let answer = self.approve_pending(key, body_hash.to_owned(), card, (valor, moeda), entry.clone());
            return Some(answer);
        }
        self.boleto_again((key, body_hash), &stored, card, (valor, moeda), entry)
    }

    /// A recharge still being processed.
    pub(super) fn pending(&self, valor: Decimal, moeda: &str) -> Value {
        json!({"status": "pendente", "transacao_id": self.next_id("tx"), "valor": money_json(valor), "moeda": moeda, "data_processamento": self.now_sp()})
    }

    /// An approved recharge: the card's balance credited, the answer with the new balance and the
    /// transaction's ids as `(with_balance, with_ids)` say.
    pub(super) fn approve(
        &self,
        cartao: &str,
        saldo_inicial: Decimal,
        valor: Decimal,
        moeda: &str,
        parts: (bool, bool),
    ) -> Value {
        let (with_balance, with_ids) = parts;
        let novo = if let Some(book) = self.inner.book.get() {
            saldo_inicial + book.credit(cartao, valor)
        } else {
            let mut balances = lock(&self.inner.balances);
            let b = balances.entry(cartao.to_owned()).or_insert(saldo_inicial);
            *b += valor;
            *b
        };
        let mut r = json!({"status": "aprovada", "valor": money_json(valor), "moeda": moeda, "data_processamento": self.now_sp()});
        if with_ids {
            r["transacao_id"] = json!(self.next_id("tx"));
            r["autorizacao"] = json!(format!("A{:05}", self.inner.seq.load(Ordering::Relaxed)));
            r["nsu"] = json!(format!("{:06}", self.inner.seq.load(Ordering::Relaxed)));
        }
        if with_balance {
            r["saldo_atualizado"] = money_json(novo);
        }
        r
    }
}
