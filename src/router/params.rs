//! A request's parameters: what the message names ([`Found`]: the card, the amount, the means of
//! payment) and the conversation holds (the remembered cards; the request waiting for a parameter),
//! the doubts when something is said twice, and the question that asks for what is missing.

use rust_decimal::Decimal;
use serde_json::{Map, Value, json};
use vt_domain::tools::RecargaPendente;
use vt_domain::tools::cartao::remembered_in;
use vt_domain::vt::parse::{amounts, cards as cards_in, final_digits, odd_card_lengths, payment_type};
use vt_domain::vt::{Idioma, mask_card};

use super::cards::{self, Pick};
use super::known::WithParams;
use super::{Awaiting, Read, Route, Router, STATE_AGUARDANDO, texts};
use vt_engine::Conversation;

impl Router {
    /// The action with its parameters when they are all known without doubt, else the question.
    pub(super) fn params_route(&self, intent: WithParams, m: &Read<'_>, conv: &Conversation) -> Route {
        let key = intent.intent().key();
        let mut params = awaiting(conv)
            .filter(|a| a.intent == key)
            .map(|a| a.params)
            .unwrap_or_default();
        // A correction starts from the waiting recharge: what the message brings replaces its part.
        if intent == WithParams::Recarga
            && let Some(p) = &m.pending
        {
            params.insert("cartao".into(), json!(p.cartao));
            params.insert("valor".into(), json!(format!("{:.2}", p.valor)));
            params.insert("meio_pagamento".into(), json!(p.meio_pagamento));
        }
        let mut doubts = gather_params(intent, &m.found, &mut params);
        // Asked which of the known cards: the question need not ask for a number too.
        let asked = (!params.contains_key("cartao") && doubts.is_empty())
            .then(|| known_card(m, conv, &mut params, &mut doubts))
            .flatten();
        let card_asked = asked.is_some();
        let missing: Vec<&str> = intent
            .required()
            .iter()
            .copied()
            .filter(|k| !(params.contains_key(*k) || (card_asked && *k == "cartao")))
            .collect();
        if doubts.is_empty() && missing.is_empty() {
            return Route::Action {
                action: key.into(),
                arguments: Value::Object(params),
            };
        }
        Route::Ask {
            question: question(intent, &doubts, &missing),
            awaiting: Awaiting {
                intent: key.into(),
                params,
            },
            choose: asked.unwrap_or_default(),
        }
    }
}

/// The card a request without one means, from the cards the conversation remembers — or why
/// none can be taken (a number of the wrong length, several cards, no card ending so). `Some` when
/// the doubt it adds already asks for the card: the cards it asks to choose from (none when no card
/// ends as the message said).
fn known_card(
    m: &Read<'_>,
    conv: &Conversation,
    params: &mut Map<String, Value>,
    doubts: &mut Vec<String>,
) -> Option<Vec<String>> {
    if let Some(len) = m.found.odd_cards.first() {
        doubts.push(texts::odd_length(*len));
        return None;
    }
    let known = remembered_in(&conv.memory);
    match cards::pick(m.found.final_digits.as_deref(), &m.n, &known) {
        Pick::One(card) => {
            params.insert("cartao".into(), json!(card));
            None
        }
        Pick::Choose(many) => {
            doubts.push(format!(
                "De qual cartão: {}? Pode responder com o final (\"o final {}\") ou com outro número.",
                texts::masked_list(&many, "ou"),
                many.last()
                    .map(|c| &c[c.len().saturating_sub(4)..])
                    .unwrap_or_default()
            ));
            Some(many)
        }
        Pick::NoSuchFinal(tail) => {
            doubts.push(format!(
                "Não tenho nenhum cartão seu com final {tail}; me diga o número completo."
            ));
            Some(Vec::new())
        }
        Pick::None => None,
    }
}

pub(super) fn awaiting(conv: &Conversation) -> Option<Awaiting> {
    conv.state
        .get(STATE_AGUARDANDO)
        .cloned()
        .and_then(|v| vt_contract::json::from_value(v).ok())
}

/// Puts what `found` holds for `intent` into `params` when it is one value; says the doubt when it is
/// several.
fn gather_params(intent: WithParams, found: &Found, params: &mut Map<String, Value>) -> Vec<String> {
    let mut doubts = Vec::new();
    match found.cards.as_slice() {
        [] => {}
        [one] => {
            params.insert("cartao".into(), json!(one));
        }
        many => doubts.push(format!(
            "Você mencionou mais de um cartão ({}). Qual deles?",
            many.iter().map(|c| mask_card(c)).collect::<Vec<_>>().join(", ")
        )),
    }
    if intent == WithParams::Recarga {
        match found.amounts.as_slice() {
            [] => {}
            [one] => {
                params.insert("valor".into(), json!(one.to_string()));
            }
            many => doubts.push(format!(
                "Você mencionou mais de um valor ({}). Quanto quer recarregar?",
                many.iter()
                    .map(|v| vt_domain::vt::money_for_people("BRL", *v, Idioma::PtBr))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
        if let Some(meio) = found.meio {
            params.insert("meio_pagamento".into(), json!(meio));
        }
    }
    // The second copy's fee is paid like a recharge: the means named, if one was.
    if intent == WithParams::SegundaVia
        && let Some(meio) = found.meio
    {
        params.insert("meio_pagamento".into(), json!(meio));
    }
    doubts
}

/// The question that asks for what is `missing`, after the `doubts`.
fn question(intent: WithParams, doubts: &[String], missing: &[&str]) -> String {
    let mut question = doubts.join(" ");
    if missing.is_empty() {
        return question;
    }
    let parts: Vec<&str> = missing
        .iter()
        .map(|m| match *m {
            "cartao" => "o número do cartão de VT",
            "valor" => "o valor da recarga",
            _ => "o meio de pagamento (PIX, boleto ou cartão de crédito)",
        })
        .collect();
    let list = match parts.as_slice() {
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} e {last}", init.join(", ")),
        [] => String::new(),
    };
    if !question.is_empty() {
        question.push(' ');
    }
    question.push_str(&format!("{}, me diga {list}.", intent.purpose()));
    question
}

/// Parameters level 1 found in a message.
#[derive(Debug, Default)]
pub(super) struct Found {
    pub(super) cards: Vec<String>,
    pub(super) amounts: Vec<Decimal>,
    pub(super) meio: Option<&'static str>,
    /// "o final 7890": a card named by its last digits.
    pub(super) final_digits: Option<String>,
    /// Numbers typed as a card that cannot be one (their lengths).
    pub(super) odd_cards: Vec<usize>,
}

impl Found {
    pub(super) fn of(text: &str) -> Self {
        Self {
            cards: cards_in(text),
            amounts: amounts(text),
            meio: payment_type(text),
            final_digits: final_digits(text),
            odd_cards: odd_card_lengths(text),
        }
    }

    /// Whether this brings something the waiting request asked for.
    pub(super) fn answers(&self, intent: WithParams) -> bool {
        let card = !self.cards.is_empty() || self.final_digits.is_some() || !self.odd_cards.is_empty();
        match intent {
            WithParams::Recarga => card || !self.amounts.is_empty() || self.meio.is_some(),
            WithParams::Saldo
            | WithParams::Situacao
            | WithParams::Extrato
            | WithParams::Bloqueio
            | WithParams::SegundaVia => card,
        }
    }

    /// Whether this changes something of a recharge: a value, a card, a means of payment.
    pub(super) fn changes_recharge(&self) -> bool {
        self.answers(WithParams::Recarga)
    }

    /// Whether this names something of recharge `p` other than what it is.
    pub(super) fn differs_from(&self, p: &RecargaPendente) -> bool {
        let valor = |v: &Decimal| vt_domain::vt::round_half_up(*v) != p.valor;
        self.amounts.iter().any(valor)
            || self.cards.iter().any(|c| *c != p.cartao)
            || self.meio.is_some_and(|m| m != p.meio_pagamento)
            || self
                .final_digits
                .as_ref()
                .is_some_and(|f| !p.cartao.ends_with(f.as_str()))
            || !self.odd_cards.is_empty()
    }
}
