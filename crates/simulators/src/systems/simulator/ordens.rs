//! The card system's requests that change a card, simulated: a block (a card blocked already answers
//! its block, never a second one), an unblock (where the operator allows it: a loss blocked here less
//! than a day ago), and a second copy of a blocked card — its quote, and its order, which moves the
//! balance and the credits waiting to be validated to a new card once per idempotency key and cancels
//! the old card. Every POST honours its key as a recharge does (the same key and body: the stored
//! answer, `Idempotent-Replayed: true`; another body: 409), and what a card became is kept in the book
//! where there is one, so the next process of the embedded world sees it.

use chrono::{DateTime, Duration as Span, Utc};
use rust_decimal::dec;

use super::super::book::CardState;
use super::super::cards::{NEW_CARD_PREFIX, ReplacementMode};
use super::recarga::PAYMENT_TYPES;
use super::*;
use vt_domain::systems::OrdemCartao;

/// The second copy's fee, where the card's behaviour charges one.
const TAXA: Decimal = dec!(15.00);
/// Where a second copy is picked up, and in how many working days.
const RETIRADA: &str = "Posto de atendimento Centro — Rua Boa Vista, 100 (seg. a sex., 8h às 17h)";
const PRAZO_DIAS: u32 = 5;
/// A loss blocked here may be undone for this long (the card was found).
const UNBLOCK_WITHIN: Span = Span::hours(24);
/// What a card with a credit waiting to be validated has waiting ([`SituationMode::CreditoPendente`]).
pub(super) const PENDING_CREDIT: Decimal = dec!(50.00);

/// Where a card stands now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Standing {
    Ativo,
    Bloqueado {
        motivo: String,
        desde: String,
        /// The block's protocol, when this simulator made it.
        protocolo: Option<String>,
    },
    Cancelado,
}

impl Simulator {
    /// What the desk's requests made of `cartao`, if they changed it.
    fn card_state(&self, cartao: &str) -> Option<CardState> {
        if let Some(book) = self.inner.book.get() {
            return book.card_state(cartao);
        }
        lock(&self.inner.card_states).get(cartao).cloned()
    }

    fn set_card_state(&self, cartao: &str, estado: CardState) {
        if let Some(book) = self.inner.book.get() {
            book.keep_card_state(cartao, estado);
            return;
        }
        lock(&self.inner.card_states).insert(cartao.to_owned(), estado);
    }

    /// Where `cartao` stands: as the desk left it, else as its behaviour says.
    pub(super) fn standing(&self, cartao: &str) -> Standing {
        match self.card_state(cartao) {
            Some(s) if s.situacao == "bloqueado" => Standing::Bloqueado {
                motivo: s.motivo.unwrap_or_else(|| "perda".into()),
                desde: s.desde,
                protocolo: Some(s.protocolo),
            },
            Some(s) if s.situacao == "cancelado" => Standing::Cancelado,
            Some(_) => Standing::Ativo,
            None => match self.card(cartao).situacao {
                SituationMode::Bloqueado => Standing::Bloqueado {
                    motivo: "perda".into(),
                    desde: self.iso(self.now() - Span::days(3)),
                    protocolo: None,
                },
                SituationMode::Cancelado => Standing::Cancelado,
                _ => Standing::Ativo,
            },
        }
    }

    pub(super) fn iso(&self, t: DateTime<Utc>) -> String {
        vt_domain::vt::timezone::Timezone::sao_paulo()
            .local(t)
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, false)
    }

    /// The protocol of the request under `key`: the day and six digits of the key's hash — the same
    /// for the same request, and not the same for two requests of two processes of the embedded world.
    fn protocol(&self, key: &str) -> String {
        let day = vt_domain::vt::timezone::Timezone::sao_paulo()
            .local(self.now())
            .format("%Y%m%d");
        format!("{day}{:06}", digits_of(key, 1_000_000))
    }

    /// Credits waiting to be validated on board for `cartao`.
    fn pending_credits(&self, cartao: &str) -> Decimal {
        if self.card(cartao).situacao == SituationMode::CreditoPendente {
            PENDING_CREDIT
        } else {
            Decimal::ZERO
        }
    }

    /// `valor` taken off `from` and put on `to`.
    fn move_balance(&self, from: &str, to: &str, saldo: Decimal, creditos: Decimal) {
        if let Some(book) = self.inner.book.get() {
            book.credit(from, -saldo);
            book.credit(to, saldo + creditos);
            return;
        }
        let start_to = self.card(to).saldo;
        let mut balances = lock(&self.inner.balances);
        balances.insert(from.to_owned(), Decimal::ZERO);
        *balances.entry(to.to_owned()).or_insert(start_to) += saldo + creditos;
    }
}

/// A number below `below` drawn from `key`'s hash: the same for the same key, in every process.
fn digits_of(key: &str, below: u64) -> u64 {
    let digest = Sha256::digest(key.as_bytes());
    u64::from_be_bytes(digest[..8].try_into().unwrap_or_default()) % below
}

/// The new card a second copy ordered under `key` gets.
fn new_card(key: &str) -> String {
    format!("{NEW_CARD_PREFIX}{:08}", digits_of(key, 100_000_000))
}

fn refusal(status: u16, motivo: &str) -> (u16, Value, Option<Efeito>) {
    (status, json!({"motivo": motivo}), None)
}

fn entrega() -> Value {
    json!({"modo": "retirada", "prazo_dias": PRAZO_DIAS, "local": RETIRADA})
}

/// A POST that changes card `cartao` (read from `body`): the body checked (`fault`: a field of it the
/// handler found wrong), the key, a replay answered from the store, the card system's failures
/// applied, then `act`'s answer kept under the key — each request on the ledger.
async fn order(
    sim: &Simulator,
    (ordem, headers): (OrdemCartao, &HeaderMap),
    (body, fault): (Value, Option<&'static str>),
    act: impl FnOnce(&Simulator, &str, &str) -> (u16, Value, Option<Efeito>),
) -> Response {
    let cartao = body["cartao"].as_str().unwrap_or_default().to_owned();
    let key = idempotency_key(headers);
    let mut entry = LedgerEntry {
        seq: 0,
        sistema: "saldo".into(),
        method: "POST".into(),
        path: ordem.path().into(),
        idempotency_key: key.clone(),
        cartao: Some(cartao.clone()),
        status: 400,
        efeito: None,
        body: Some(body.clone()),
    };
    let invalid = |entry: LedgerEntry, answer: Value| {
        sim.record(entry);
        reply(400, answer)
    };
    if let Some(campo) = (!valid_card(&cartao)).then_some("cartao").or(fault) {
        return invalid(entry, json!({"motivo": "payload_invalido", "campo": campo}));
    }
    let Some(key) = key else {
        return invalid(entry, json!({"motivo": "idempotency_key_ausente"}));
    };
    let body_hash = hash(&body);
    if let Some(stored) = sim.answer_stored(&key, &body_hash, &entry) {
        return stored;
    }
    let card = sim.card(&cartao);
    let (status, response, efeito) = match super::desk::failure(sim, &card).await {
        Some((status, response)) => (status, response, None),
        None => act(sim, &cartao, &key),
    };
    // Only answers that settle the request are kept; after a 500 the same key may be asked again.
    if status < 500 {
        sim.store(&key, body_hash, status, response.clone());
    }
    entry.status = status;
    entry.efeito = efeito;
    sim.record(entry);
    reply(status, response)
}

fn body_of(body: Option<Json<Value>>) -> Value {
    body.map(|Json(b)| b).unwrap_or(Value::Null)
}

pub(super) async fn bloqueio(
    State(sim): State<Simulator>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Response {
    let body = body_of(body);
    let motivo = body["motivo"].as_str().unwrap_or_default().to_owned();
    let fault = (!["perda", "roubo", "dano"].contains(&motivo.as_str())).then_some("motivo");
    order(&sim, (OrdemCartao::Bloqueio, &headers), (body, fault), |sim, cartao, key| {
        match sim.standing(cartao) {
            Standing::Cancelado => refusal(409, "cartao_cancelado"),
            // Blocked already: its block, not a second one.
            Standing::Bloqueado {
                motivo,
                desde,
                protocolo,
            } => (
                200,
                json!({"protocolo": protocolo.unwrap_or_else(|| "anterior".into()), "situacao": "bloqueado", "em": desde, "motivo": motivo}),
                None,
            ),
            Standing::Ativo => {
                let (protocolo, em) = (sim.protocol(key), sim.now_sp());
                sim.set_card_state(
                    cartao,
                    CardState {
                        situacao: "bloqueado".into(),
                        motivo: Some(motivo.clone()),
                        desde: em.clone(),
                        protocolo: protocolo.clone(),
                    },
                );
                (
                    201,
                    json!({"protocolo": protocolo, "situacao": "bloqueado", "em": em, "motivo": motivo}),
                    Some(Efeito::CartaoBloqueado),
                )
            }
        }
    })
    .await
}

pub(super) async fn desbloqueio(
    State(sim): State<Simulator>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Response {
    order(
        &sim,
        (OrdemCartao::Desbloqueio, &headers),
        (body_of(body), None),
        |sim, cartao, key| {
            let (motivo, desde, protocolo) = match sim.standing(cartao) {
                Standing::Cancelado => return refusal(409, "cartao_cancelado"),
                Standing::Ativo => return refusal(409, "cartao_nao_bloqueado"),
                Standing::Bloqueado {
                    motivo,
                    desde,
                    protocolo,
                } => (motivo, desde, protocolo),
            };
            let recent =
                DateTime::parse_from_rfc3339(&desde).is_ok_and(|at| sim.now() - at.to_utc() < UNBLOCK_WITHIN);
            if motivo != "perda" || protocolo.is_none() || !recent {
                return refusal(403, "desbloqueio_nao_permitido");
            }
            let (protocolo, em) = (sim.protocol(key), sim.now_sp());
            sim.set_card_state(
                cartao,
                CardState {
                    situacao: "ativo".into(),
                    motivo: None,
                    desde: em.clone(),
                    protocolo: protocolo.clone(),
                },
            );
            (
                200,
                json!({"protocolo": protocolo, "situacao": "ativo", "em": em}),
                Some(Efeito::CartaoDesbloqueado),
            )
        },
    )
    .await
}

/// Why a second copy of `cartao` cannot be had, if it cannot.
fn replacement_refused(sim: &Simulator, cartao: &str, card: &CardBehavior) -> Option<(u16, Value)> {
    match sim.standing(cartao) {
        Standing::Cancelado => return Some((409, json!({"motivo": "cartao_cancelado"}))),
        Standing::Ativo => return Some((409, json!({"motivo": "cartao_nao_bloqueado"}))),
        Standing::Bloqueado { .. } => {}
    }
    (card.segunda_via == ReplacementMode::PrecisaAtendimento).then(|| {
        (
            422,
            json!({"motivo": "precisa_atendimento", "mensagem": "a segunda via de um cartão roubado pede o boletim de ocorrência e um documento com foto"}),
        )
    })
}

fn fee(card: &CardBehavior) -> Decimal {
    if card.segunda_via == ReplacementMode::Gratuita {
        Decimal::ZERO
    } else {
        TAXA
    }
}

pub(super) async fn cotacao(
    State(sim): State<Simulator>,
    headers: HeaderMap,
    Query(q): Query<super::SaldoQuery>,
) -> Response {
    let cartao = q.cartao.unwrap_or_default();
    let (status, body) = if valid_card(&cartao) {
        let card = sim.card(&cartao);
        match super::desk::failure(&sim, &card).await {
            Some(failed) => failed,
            None => replacement_refused(&sim, &cartao, &card).unwrap_or_else(|| {
                (
                    200,
                    json!({
                        "cartao": cartao, "taxa": money_json(fee(&card)), "saldo": money_json(sim.balance(&cartao)),
                        "creditos_pendentes": money_json(sim.pending_credits(&cartao)), "entrega": entrega(),
                    }),
                )
            }),
        }
    } else {
        (400, json!({"erro": "cartao_invalido"}))
    };
    sim.record(super::desk::desk_entry(
        vt_domain::systems::SEGUNDA_VIA_ENDPOINT,
        &headers,
        &cartao,
        status,
    ));
    reply(status, body)
}

pub(super) async fn segunda_via(
    State(sim): State<Simulator>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Response {
    let body = body_of(body);
    let (paid, fault) = match &body["pagamento"] {
        Value::Null => (false, None),
        p if p["tipo"].as_str().is_some_and(|t| PAYMENT_TYPES.contains(&t)) => (true, None),
        _ => (false, Some("pagamento")),
    };
    order(
        &sim,
        (OrdemCartao::SegundaVia, &headers),
        (body, fault),
        |sim, cartao, key| {
            let card = sim.card(cartao);
            if let Some((status, answer)) = replacement_refused(sim, cartao, &card) {
                return (status, answer, None);
            }
            if fee(&card) > Decimal::ZERO && !paid {
                return refusal(402, "taxa_nao_paga");
            }
            let novo = new_card(key);
            let (saldo, creditos) = (sim.balance(cartao), sim.pending_credits(cartao));
            sim.move_balance(cartao, &novo, saldo, creditos);
            let protocolo = sim.protocol(key);
            sim.set_card_state(
                cartao,
                CardState {
                    situacao: "cancelado".into(),
                    motivo: None,
                    desde: sim.now_sp(),
                    protocolo: protocolo.clone(),
                },
            );
            let answer = json!({
                "protocolo": protocolo, "novo_cartao_final": &novo[novo.len() - 4..],
                "saldo_transferido": money_json(saldo), "creditos_transferidos": money_json(creditos),
                "entrega": entrega(), "data_servidor": sim.now_sp(),
            });
            (201, answer, Some(Efeito::SegundaViaEmitida))
        },
    )
    .await
}

/// The holder's check: in the simulated world, the registered CPF of a card's holder ends in the
/// card's first three digits.
pub(super) async fn titular(
    State(sim): State<Simulator>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Response {
    let body = body_of(body);
    let cartao = body["cartao"].as_str().unwrap_or_default().to_owned();
    let cpf_final = body["cpf_final"].as_str().unwrap_or_default();
    let (status, answer) = if !valid_card(&cartao) {
        (400, json!({"motivo": "payload_invalido", "campo": "cartao"}))
    } else if cpf_final.len() != 3 || !cpf_final.bytes().all(|b| b.is_ascii_digit()) {
        (400, json!({"motivo": "payload_invalido", "campo": "cpf_final"}))
    } else {
        let card = sim.card(&cartao);
        match super::desk::failure(&sim, &card).await {
            Some(failed) => failed,
            None => (200, json!({"confere": cartao.starts_with(cpf_final)})),
        }
    };
    let mut entry = super::desk::desk_entry(OrdemCartao::Titular.path(), &headers, &cartao, status);
    entry.method = "POST".into();
    sim.record(entry);
    reply(status, answer)
}
