//! The deterministic router (SPEC §5): decides, before any model, what a message is and what to do.
//!
//! Level 1 ([`keywords`]) recognises the VT requests and extracts their parameters with zero tokens;
//! missing or ambiguous parameters are asked for, never guessed. Level 2, only when a model is
//! configured, is a micro classification call (tiny prompt, small `max_tokens`) into the intent list,
//! cached by the normalised message's hash for 24 h; an answer outside the list is `general_chat`.
//! Without a model, whatever level 1 does not recognise gets the help text.
#![warn(clippy::too_many_lines)] // on the main path: see clippy.toml

mod cards;
pub(crate) mod classifier;
pub(crate) mod corpus;
pub(crate) mod intents;
pub(crate) mod keywords;
mod known;
mod level2;
mod meaning;
mod params;
use params::{Found, awaiting};
mod several;
mod texts;

use known::{Known, WithParams};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
pub(crate) use texts::HELP_TEXT;
use vt_domain::tools::cartao::remembered_in;
use vt_domain::tools::{RecargaPendente, STATE_PENDENTE, user_confirms};
use vt_domain::vt::Idioma;
use vt_domain::vt::parse::{
    AutomaticTerms, automatic_terms, is_confirmation, is_refusal, is_yes_with_details, normalize,
    speaks_of_automatic_in,
};

/// Where the conversation keeps the protocol of the last case it opened (`{"protocolo", "aberto_em"}`).
pub(crate) const STATE_PROTOCOLO: &str = "ultimo_protocolo";

/// The language `text` was written in, as the router reads it: `pt`, `en` or `es` (a channel's own
/// words follow the person's).
pub(crate) fn language_of(text: &str) -> &'static str {
    match keywords::language(&normalize(text)) {
        Lang::Pt => "pt",
        Lang::En => "en",
        Lang::Es => "es",
    }
}

/// The answer to what only the model could answer, when the tenant's budget is spent: the help and
/// the offer of a person.
pub(crate) fn over_budget_reply() -> String {
    format!("{HELP_TEXT}\n\n{}", texts::PERSON_OFFER)
}
use texts::Lang;

use vt_domain::faq::Faq;
use vt_engine::Conversation;
use vt_engine::llm::LlmProvider;
use vt_store::IntentRecord;

/// State key of a request waiting for a missing parameter.
pub(crate) const STATE_AGUARDANDO: &str = "aguardando";

/// A request waiting for parameters, kept in conversation state between turns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Awaiting {
    pub intent: String,
    pub params: Map<String, Value>,
}

/// Whether routing may call the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ModelUse {
    Allowed,
    /// The tenant's monthly budget is spent: no model call until the month turns or it is raised.
    OverBudget,
}

/// What to do with a message.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// Run this action with these arguments, no model.
    Action { action: String, arguments: Value },
    /// Ask for what is missing and remember the request; `choose`: the remembered cards the question
    /// asks to choose from (a channel shows them as a list).
    Ask {
        question: String,
        awaiting: Awaiting,
        choose: Vec<String>,
    },
    /// Answer with this text.
    Reply { text: String },
    /// Answer with this text, which asks again to confirm the recharge `pending` (a "sim" after it
    /// confirms that recharge).
    Restate { text: String, pending: String },
    /// Forget the cards the conversation remembers, and answer with this text.
    ForgetCards { text: String },
    /// Let the model handle it (the active skill's tools, compressed context).
    Model,
    /// Plan it with the model, execute the plan with code (hybrid intent).
    Plan,
    /// Each card's balance, a plan written by code (zero tokens).
    EachCard { cards: Vec<String> },
    /// Each card's balance first, then `then` (a balance and a recharge asked in one message).
    BalanceFirst { cards: Vec<String>, then: Box<Route> },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub intent: String,
    pub action_type: String,
    pub route: Route,
    /// Level 1 recognised it.
    pub keyword_matched: bool,
    /// The model was called to classify it (not answered from the cache): a replay must script it.
    pub classified: bool,
    /// Tokens spent deciding (level 2), `(input, output)`.
    pub tokens: (u64, u64),
    /// A line to add to the action's answer: the message was in English or Spanish, and the answer
    /// comes in Portuguese.
    pub note: Option<&'static str>,
}

pub struct Router {
    /// The agent whose conversations are routed.
    agent: String,
    intents: Vec<IntentRecord>,
    llm: Option<Arc<dyn LlmProvider>>,
    cache: Mutex<HashMap<String, (String, Instant)>>,
    cache_ttl: Duration,
    /// The operator's FAQ, answered at level 1 when one entry clearly matches.
    faq: Option<Arc<Faq>>,
}

/// What the keyword readers of a request find: a recharge (once, or by itself), the balance, a sum.
const REQUESTS: [&str; 4] = [
    "preparar_recarga",
    "consultar_saldo",
    "recarga_automatica",
    "calcular",
];

/// Words that may stand around a card number sent alone ("meu cartão é 1234567890").
const CARD_ALONE_WORDS: [&str; 19] = [
    "cartao", "meu", "o", "numero", "n", "no", "vt", "e", "eh", "do", "bilhete", "vale", "segue", "aqui",
    "ta", "esta", "ai", "esse", "card",
];

/// The message is a card number and nothing else worth reading.
fn only_a_card(n: &str) -> bool {
    n.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && !w.bytes().all(|b| b.is_ascii_digit()))
        .all(|w| CARD_ALONE_WORDS.contains(&w))
}

/// A message as level 1 reads it, with what waits in its conversation.
struct Read<'a> {
    text: &'a str,
    /// The text normalised (lowercase, no accents).
    n: String,
    pending: Option<RecargaPendente>,
    /// A recharge waits (even one whose record this version cannot read).
    waiting: bool,
    /// A block or a second copy waits for the holder's answer.
    card_request: Option<vt_domain::tools::PedidoCartao>,
    found: Found,
    lang: Lang,
    /// A model may be called for this message: level 1 answers only what it is sure of.
    model: bool,
    /// An open question (how, why, what if…) or a problem told, once its greeting is set aside.
    open: bool,
    /// The classifier's reading, made once for all who ask ([`meaning`]'s readers).
    reading: std::sync::OnceLock<classifier::Reading>,
}

impl<'a> Read<'a> {
    /// The message answers the question we asked for a parameter ("meu bilhete é o …" after we asked
    /// for the card): read as that answer, never as a new request by meaning.
    fn answers_our_question(&self, conv: &Conversation) -> bool {
        conv.state.contains_key(STATE_AGUARDANDO) && self.text.chars().any(|c| c.is_ascii_digit())
    }

    fn of(text: &'a str, conv: &Conversation, model: bool) -> Self {
        let n = normalize(text);
        Self {
            text,
            pending: pending_of(conv),
            waiting: conv.state.get(STATE_PENDENTE).is_some_and(|v| !v.is_null()),
            card_request: vt_domain::tools::PedidoCartao::in_state(&conv.state),
            found: Found::of(text),
            lang: keywords::language(&n),
            model,
            open: keywords::is_open_question(keywords::after_greeting(&n)),
            n,
            reading: std::sync::OnceLock::new(),
        }
    }

    /// A greeting followed by something more than greetings or a plea for help ("oi, meu vt não
    /// passou…").
    fn greets_and_asks(&self) -> bool {
        let rest = keywords::after_greeting(&self.n);
        rest.split_whitespace().count() >= 2 && !keywords::is_greeting(rest)
    }

    /// The message changes something of the recharge waiting (another value, card or means of
    /// payment — "sim, mas 60" too): it replaces that recharge. Naming what it already is ("40 reais,
    /// tá certo") changes nothing.
    fn correction(&self) -> bool {
        self.pending.as_ref().is_some_and(|p| {
            self.found.differs_from(p) && !keywords::is_balance(&self.n) && !user_confirms(self.text, p)
        })
    }
}

fn act(intent: Known, arguments: Value) -> Option<(String, Route)> {
    let route = Route::Action {
        action: intent.key().into(),
        arguments,
    };
    Some((intent.key().to_owned(), route))
}

fn reply(intent: Known, text: String) -> Option<(String, Route)> {
    Some((intent.key().to_owned(), Route::Reply { text }))
}

/// The card (masked) an automatic recharge was offered for, when the offer is what the person answers.
fn offered_card(conv: &Conversation) -> Option<String> {
    let offer = conv.state.get(vt_domain::tools::STATE_OFERTA_AUTOMATICA)?;
    offer.get("cartao")?.as_str().map(str::to_owned)
}

fn pending_of(conv: &Conversation) -> Option<RecargaPendente> {
    conv.state
        .get(STATE_PENDENTE)
        .filter(|v| !v.is_null())
        .and_then(|v| vt_contract::json::from_ref(v).ok())
}

impl Router {
    pub fn new(agent: &str, intents: Vec<IntentRecord>, llm: Option<Arc<dyn LlmProvider>>) -> Self {
        Self {
            agent: agent.to_owned(),
            intents,
            llm,
            cache: Mutex::new(HashMap::new()),
            cache_ttl: Duration::from_secs(24 * 3600),
            faq: None,
        }
    }

    /// With the operator's FAQ (answered at level 1 when one entry clearly matches).
    #[must_use]
    pub fn with_faq(mut self, faq: Option<Arc<Faq>>) -> Self {
        self.faq = faq.filter(|f| !f.is_empty());
        self
    }

    pub fn agent(&self) -> &str {
        &self.agent
    }

    pub fn intent(&self, key: &str) -> Option<&IntentRecord> {
        self.intents.iter().find(|i| i.intent_key == key && i.is_active)
    }

    fn action_type(&self, key: &str) -> String {
        self.intent(key)
            .map_or_else(|| "deterministic".to_owned(), |i| i.action_type.clone())
    }

    /// Decides what to do with `text` in `conv`.
    pub async fn route(&self, text: &str, conv: &Conversation) -> Decision {
        self.route_within(text, conv, ModelUse::Allowed).await
    }

    /// [`Self::route`], calling the model only when `model` allows: with the tenant's budget spent
    /// the router answers as if it had none, its help offering a person.
    pub(crate) async fn route_within(&self, text: &str, conv: &Conversation, model: ModelUse) -> Decision {
        // The message is read once; every reader below works from it.
        let llm = self.llm.as_ref().filter(|_| model == ModelUse::Allowed);
        let m = Read::of(text, conv, llm.is_some());
        if let Some((intent, mut route)) = self.level1(&m, conv) {
            // "oi, quero recarregar": the greeting is answered before the question.
            if let Route::Ask { question, .. } = &mut route
                && let Some(hello) = keywords::greeting_back(&m.n)
            {
                *question = format!("{hello} {question}");
            }
            // Written in English or Spanish: what is answered in Portuguese says so.
            let note = texts::portuguese_note(m.lang);
            let mut action_note = None;
            match &mut route {
                Route::Ask { question: t, .. } | Route::Restate { text: t, .. } => {
                    if let Some(line) = note {
                        t.push('\n');
                        t.push_str(line);
                    }
                }
                Route::Action { .. } => action_note = note,
                _ => {}
            }
            return Decision {
                action_type: self.action_type(&intent),
                intent,
                route,
                keyword_matched: true,
                classified: false,
                tokens: (0, 0),
                note: action_note,
            };
        }
        let Some(llm) = llm else {
            // Without a model, a recharge waiting is what the person is most likely answering.
            if let Some(p) = &m.pending {
                let (intent, route) = restate(p);
                return self.decision(&intent, route);
            }
            let mut help = texts::help(m.lang, keywords::greeting_back(&m.n));
            if model == ModelUse::OverBudget {
                help = format!("{help}\n\n{}", texts::PERSON_OFFER);
            }
            return self.decision("ajuda", Route::Reply { text: help });
        };
        // An open question is the model's to answer: a label would only stand in its way.
        if m.open {
            return self.decision("general_chat", Route::Model);
        }
        let (intent, tokens, called) = self.level2(llm.as_ref(), text).await;
        let checked = Known::of(&intent).is_none_or(|k| level2::supported(k, &m, conv));
        if !checked {
            tracing::info!(intent = %intent, "level-2 intent not supported by the message; general chat");
        }
        let mut d = match self.resolve(&intent, &m, conv).filter(|_| checked) {
            Some(route) => self.decision(&intent, route),
            None => self.decision("general_chat", Route::Model),
        };
        d.tokens = tokens;
        d.classified = called;
        d
    }

    fn decision(&self, intent: &str, route: Route) -> Decision {
        Decision {
            intent: intent.into(),
            action_type: self.action_type(intent),
            route,
            keyword_matched: false,
            classified: false,
            tokens: (0, 0),
            note: None,
        }
    }

    /// Level 1: patterns and parameters, zero tokens.
    fn level1(&self, m: &Read<'_>, conv: &Conversation) -> Option<(String, Route)> {
        // "Me passa o protocolo de novo": the last case's number, from the conversation.
        if keywords::asks_protocol(&m.n) {
            return reply(Known::Ajuda, texts::protocol(last_protocol(conv)));
        }
        // A credit or debit card's number is never a transit card: not looked up, not said back.
        if !vt_domain::vt::parse::payment_cards(m.text).is_empty() {
            return reply(Known::Ajuda, texts::PAYMENT_CARD.into());
        }
        // A block or a second copy waiting is answered first: its yes, its no, the check's digits.
        if let Some(found) = self.card_request_answer(m) {
            return Some(found);
        }
        // A recharge that happens by itself is named as such ("cancelar recarga automática" cancels
        // no waiting recharge); the offer of one is answered by a yes or a no.
        if let Some(found) = self.automatic(m, conv) {
            return Some(found);
        }
        // With nothing waiting, a question the FAQ clearly answers is answered first ("a recarga
        // demora?" is no refusal); with a recharge waiting, its yes or no comes first.
        // A complaint about a payment is looked up before anything reads money in it: "paguei 50 e
        // não caiu" is never a recharge of 50 (nor a FAQ's general answer).
        if let Some(found) = self.complaint(m) {
            return Some(found);
        }
        // The person's own cards, listed or forgotten, before a FAQ entry that shares the word.
        if keywords::names_my_cards(&m.n)
            && let Some(found) = self.fixed(m, conv)
        {
            return Some(found);
        }
        // A balance and a recharge in one message: both, the balance first.
        if let Some(found) = self.several(m, conv) {
            return Some(found);
        }
        // The card's situation or statement, from the card system, before the FAQ's general answer.
        if !m.waiting
            && let Some(found) = self.desk(m, conv)
        {
            return Some(found);
        }
        if m.waiting {
            self.yes_or_no(m, conv).or_else(|| self.faq(m))
        } else {
            self.faq(m).or_else(|| self.yes_or_no(m, conv))
        }
        .or_else(|| self.fixed(m, conv))
        .or_else(|| self.arithmetic(m))
        .or_else(|| self.request(m, conv))
        .or_else(|| self.by_meaning(m, conv))
    }

    /// A recharge that happens by itself: the offer's yes (its card) or no; a list or a cancellation
    /// asked; terms given ("recarrega 100 todo dia 5", "sempre que ficar abaixo de 15 põe 40") for the
    /// card named or the one remembered. An open question about it is the FAQ's or the model's.
    fn automatic(&self, m: &Read<'_>, conv: &Conversation) -> Option<(String, Route)> {
        if !self.active(Known::RecargaAutomatica) {
            return None;
        }
        if !speaks_of_automatic_in(&m.n) {
            let offered = offered_card(conv).filter(|_| !m.waiting)?;
            if is_refusal(m.text) || keywords::starts_with_no(&m.n) {
                return reply(Known::RecargaAutomatica, texts::AUTOMATIC_DECLINED.into());
            }
            let yes = is_confirmation(m.text) && !m.found.changes_recharge();
            return yes.then(|| {
                act(
                    Known::RecargaAutomatica,
                    automatic_args("criar", Some(offered), AutomaticTerms::default()),
                )
            })?;
        }
        if (m.open || m.text.trim_end().ends_with('?')) && !keywords::lists_automatic(&m.n) {
            return None;
        }
        self.automatic_request(m, conv)
    }

    /// An automatic recharge asked for: cancelled, listed, or created with the terms the message
    /// gives, for the card named or the one remembered.
    fn automatic_request(&self, m: &Read<'_>, conv: &Conversation) -> Option<(String, Route)> {
        let card = || m.found.cards.first().cloned();
        if keywords::stops_automatic(&m.n) {
            return act(
                Known::RecargaAutomatica,
                automatic_args("cancelar", card(), AutomaticTerms::default()),
            );
        }
        let terms = automatic_terms(m.text);
        if terms == AutomaticTerms::default() && keywords::lists_automatic(&m.n) {
            return act(Known::RecargaAutomatica, automatic_args("listar", None, terms));
        }
        let remembered = remembered_in(&conv.memory);
        let cartao = card().or_else(|| match remembered.as_slice() {
            [one] => Some(one.clone()),
            _ => None,
        });
        match cartao {
            Some(c) => act(Known::RecargaAutomatica, automatic_args("criar", Some(c), terms)),
            None => reply(Known::RecargaAutomatica, texts::automatic_which_card(&remembered)),
        }
    }

    /// The operator's answer to a question (an open one, or one asked with "?") one FAQ entry clearly
    /// matches (zero tokens); with a recharge waiting, its question asked again after it.
    fn faq(&self, m: &Read<'_>) -> Option<(String, Route)> {
        let faq = self.faq.as_ref()?;
        let asks = m.open || m.text.trim_end().ends_with('?');
        // A wish for a person is acted on, not explained.
        if !asks
            || keywords::is_handoff(&m.n)
            || !m.found.cards.is_empty()
            || !m.found.amounts.is_empty()
            || m.correction()
        {
            return None;
        }
        // An open question with a subject may name it in one word ("como faço pra recarregar?").
        let subject = keywords::after_greeting(&m.n).split_whitespace().count() >= 3;
        let words = if m.open && subject { 1 } else { 2 };
        let entry = faq.clear_match_of(m.text, words)?;
        tracing::debug!(faq = %entry.id, "answered from the FAQ");
        Some((Known::Faq.key().to_owned(), faq_route(entry.answer(), m)))
    }

    /// "Paguei o pix e não caiu", "cobraram duas vezes": the conversation's charges looked up by code
    /// (the card named, if one is), never a new recharge. A plain yes or no is no complaint.
    fn complaint(&self, m: &Read<'_>) -> Option<(String, Route)> {
        if !self.active(Known::VerificarPagamento) || is_confirmation(m.text) || is_refusal(m.text) {
            return None;
        }
        let twice = keywords::complains_of_payment(&m.n)?;
        Some(complaint_route(twice, &m.found))
    }

    /// "Quanto dá 22 dias a 4,40 ida e volta?": computed by `calcular`'s code, with a model configured
    /// (without one, level 1 reads it as today).
    fn arithmetic(&self, m: &Read<'_>) -> Option<(String, Route)> {
        if !m.model || !self.active(Known::Calcular) {
            return None;
        }
        let text = self.arithmetic_answer(m)?;
        Some((Known::Calcular.key().to_owned(), Route::Reply { text }))
    }

    /// The fare sum the message asks for, computed by `calcular`'s code with its factors said back.
    fn arithmetic_answer(&self, m: &Read<'_>) -> Option<String> {
        let sum = keywords::fare_sum(&m.n)?;
        let value = vt_domain::tools::evaluate(&sum.expression()).ok()?;
        Some(format!(
            "{} = {}. Se quiser, posso recarregar esse valor: me diga o cartão e o meio de pagamento.",
            sum.said(),
            vt_domain::vt::money_for_people("BRL", value, Idioma::PtBr)
        ))
    }

    fn active(&self, k: Known) -> bool {
        self.intent(k.key()).is_some()
    }

    /// The answer to a block or a second copy waiting: a yes, a no — or, while the holder's check is
    /// asked, a message with its digits. The action reads the message itself again; anything else
    /// is routed as usual, and the request no longer stands after it.
    fn card_request_answer(&self, m: &Read<'_>) -> Option<(String, Route)> {
        let p = m.card_request.as_ref()?;
        let digits = m.text.chars().filter(char::is_ascii_digit).count();
        let words = m.n.split_whitespace().count();
        let answers = is_confirmation(m.text)
            || is_refusal(m.text)
            || keywords::starts_with_no(&m.n)
            || (!p.verificado && (digits == 3 || digits == 11) && words <= 8);
        (answers && self.active(Known::ConfirmarPedidoCartao))
            .then(|| act(Known::ConfirmarPedidoCartao, json!({})))?
    }

    /// A yes, a no, a cancel — to the recharge waiting, if one is. A no is read first: a message that
    /// says both ("pode cancelar") moves no money.
    fn yes_or_no(&self, m: &Read<'_>, conv: &Conversation) -> Option<(String, Route)> {
        let cancels = keywords::says_cancel(&m.n) && !m.found.changes_recharge();
        // "não", "não confirmo", "nao, tá errado" — but "não, coloca 60" is a correction.
        let refuses = is_refusal(m.text) || (keywords::starts_with_no(&m.n) && !m.found.changes_recharge());
        if refuses || cancels {
            // With nothing waiting, "não quero mais papo com máquina" is read for what it asks.
            if !m.waiting
                && let Some(found) = self.overruled(m, conv, &["cancelar_recarga", "recarga_automatica"])
            {
                return Some(found);
            }
            if (m.waiting || cancels) && self.active(Known::CancelarRecarga) {
                return act(Known::CancelarRecarga, json!({}));
            }
            return reply(Known::Ajuda, texts::NOTHING_TO_DO.into());
        }
        // A plain yes, or — with a recharge waiting — a yes whose details match it (the action itself
        // checks them again, and that the question was the last thing we said).
        if !m.correction()
            && (is_confirmation(m.text) || (m.waiting && is_yes_with_details(m.text)))
            && self.active(Known::ConfirmarRecarga)
        {
            return act(Known::ConfirmarRecarga, json!({}));
        }
        None
    }

    /// What has a fixed answer: a new Pix code, a person, what the product cannot do, the cards kept,
    /// goodbye, thanks.
    fn fixed(&self, m: &Read<'_>, conv: &Conversation) -> Option<(String, Route)> {
        let n = m.n.as_str();
        if keywords::is_new_code(n) && self.active(Known::NovoCodigoPix) {
            return act(Known::NovoCodigoPix, json!({}));
        }
        if keywords::is_handoff(n) && self.active(Known::TransferirParaHumano) {
            let motivo = json!({"motivo": "o usuário pediu para falar com um atendente"});
            return act(Known::TransferirParaHumano, motivo);
        }
        // A lost card and its second copy are the desk's, where the deployment offers them; what is
        // left of the list of what needs a person is answered with it.
        if keywords::asks_if_blocked(n, m.text) && self.active(Known::ConsultarSituacao) {
            let route = self.params_route(WithParams::Situacao, m, conv);
            return Some((Known::ConsultarSituacao.key().to_owned(), route));
        }
        if keywords::asks_second_copy(n) && self.active(Known::SegundaVia) {
            let route = self.params_route(WithParams::SegundaVia, m, conv);
            return Some((Known::SegundaVia.key().to_owned(), route));
        }
        if keywords::is_lost_card(n) && self.active(Known::BloquearCartao) {
            let route = self.params_route(WithParams::Bloqueio, m, conv);
            let motivo = json!(keywords::block_reason(n));
            let route = meaning::with_arg(route, "motivo", motivo);
            return Some((Known::BloquearCartao.key().to_owned(), route));
        }
        if keywords::is_unsupported(n) {
            return reply(Known::Ajuda, texts::unsupported(m.lang).into());
        }
        if keywords::forgets_cards(n) {
            let count = remembered_in(&conv.memory).len();
            let route = Route::ForgetCards {
                text: texts::cards_forgotten(count),
            };
            return Some((Known::EsquecerCartoes.key().to_owned(), route));
        }
        if keywords::lists_cards(n) {
            return reply(
                Known::MeusCartoes,
                texts::cards_list(&remembered_in(&conv.memory)),
            );
        }
        if keywords::is_goodbye(n) && self.active(Known::EncerrarAtendimento) {
            return act(Known::EncerrarAtendimento, json!({"motivo": null}));
        }
        if keywords::is_thanks(n) {
            return reply(Known::Ajuda, texts::THANKS.into());
        }
        None
    }

    /// A balance or a recharge — a correction of the one waiting, a new request, an answer to the
    /// router's question, a card alone — or a greeting.
    fn request(&self, m: &Read<'_>, conv: &Conversation) -> Option<(String, Route)> {
        let n = m.n.as_str();
        // With a model, how/why/what-if questions are its to answer, even naming "recarga" or "saldo"
        // (a bare "como funciona?" is a plea for help, answered below).
        // A keyword names a recharge or the balance; what the message means may be something else
        // ("onde foi parar a recarga que eu paguei?" is a complaint).
        if (keywords::is_recharge(n) || keywords::is_balance(n))
            && !m.correction()
            && let Some(found) = self.overruled(m, conv, &REQUESTS)
        {
            return Some(found);
        }
        let subject = keywords::after_greeting(n).split_whitespace().count() >= 3;
        if m.model && m.open && subject && !m.correction() {
            return None;
        }
        // Without a model, a what-if question that names the balance or a recharge ("se eu sair da
        // empresa perco o saldo?", "o crédito expira?") is no request for one: said honestly, with a
        // person offered.
        if keywords::asks_what_if(n)
            && !m.correction()
            && m.found.cards.is_empty()
            && m.found.amounts.is_empty()
        {
            return reply(Known::Ajuda, texts::OPEN_UNANSWERED.into());
        }
        let with_params = |intent: WithParams| {
            let route = self.params_route(intent, m, conv);
            Some((intent.intent().key().to_owned(), route))
        };
        if m.correction() && self.active(Known::PrepararRecarga) {
            return with_params(WithParams::Recarga);
        }
        if keywords::is_recharge(n) && self.active(Known::PrepararRecarga) {
            // With a recharge waiting, a request that changes nothing of it is not a new one.
            if let Some(p) = m.pending.as_ref().filter(|_| !m.found.changes_recharge()) {
                return Some(restate(p));
            }
            return with_params(WithParams::Recarga);
        }
        if keywords::is_balance(n) && self.active(Known::ConsultarSaldo) {
            // Several cards: each card's balance (a plan code writes, zero tokens, a model or none).
            if m.found.cards.len() >= 2 && self.active(Known::TarefaComposta) {
                let route = Route::EachCard {
                    cards: m.found.cards.clone(),
                };
                return Some((Known::TarefaComposta.key().to_owned(), route));
            }
            return with_params(WithParams::Saldo);
        }
        // A reply to a question the router asked: the parameters it brings complete the request.
        if let Some(waiting) = awaiting(conv)
            .and_then(|a| Known::of(&a.intent))
            .and_then(WithParams::of)
            && m.found.answers(waiting)
            && self.active(waiting.intent())
        {
            return with_params(waiting);
        }
        // A card number sent alone (or one typed too short or too long): its balance is asked for.
        let card_alone = !m.found.cards.is_empty() || !m.found.odd_cards.is_empty();
        if card_alone && only_a_card(n) && self.active(Known::ConsultarSaldo) {
            return with_params(WithParams::Saldo);
        }
        // Greetings are answered here; a message in English or Spanish, or anything else, is left to
        // the model when there is one (without one, `route` answers it).
        if keywords::is_greeting(n) && m.pending.is_none() && !(m.model && m.greets_and_asks()) {
            return reply(Known::Ajuda, texts::help(m.lang, keywords::greeting_back(n)));
        }
        None
    }

    /// Turns an intent level 2 chose into a route (`None` for anything that is not an intent here).
    fn resolve(&self, intent: &str, m: &Read<'_>, conv: &Conversation) -> Option<Route> {
        self.intent(intent)?;
        let Some(known) = Known::of(intent) else {
            return Some(Route::Model);
        };
        let action = |arguments: Value| Route::Action {
            action: intent.into(),
            arguments,
        };
        Some(match known {
            Known::ConsultarSaldo => self.params_route(WithParams::Saldo, m, conv),
            Known::PrepararRecarga => self.params_route(WithParams::Recarga, m, conv),
            Known::ConsultarSituacao => self.params_route(WithParams::Situacao, m, conv),
            Known::Extrato => self.params_route(WithParams::Extrato, m, conv),
            Known::BloquearCartao => meaning::with_arg(
                self.params_route(WithParams::Bloqueio, m, conv),
                "motivo",
                json!(keywords::block_reason(&m.n)),
            ),
            Known::SegundaVia => self.params_route(WithParams::SegundaVia, m, conv),
            // Never from a classification: only code reads the holder's answer.
            Known::ConfirmarPedidoCartao => Route::Model,
            Known::ConfirmarRecarga | Known::CancelarRecarga | Known::NovoCodigoPix => action(json!({})),
            Known::TransferirParaHumano => action(json!({"motivo": "pedido do usuário"})),
            Known::EncerrarAtendimento => action(json!({"motivo": null})),
            Known::Ajuda => Route::Reply {
                text: HELP_TEXT.into(),
            },
            Known::MeusCartoes => Route::Reply {
                text: texts::cards_list(&remembered_in(&conv.memory)),
            },
            Known::EsquecerCartoes => Route::ForgetCards {
                text: texts::cards_forgotten(remembered_in(&conv.memory).len()),
            },
            Known::TarefaComposta => Route::Plan,
            Known::Faq | Known::Calcular | Known::RecargaAutomatica => Route::Model,
            Known::VerificarPagamento => {
                complaint_route(keywords::complains_of_payment(&m.n).unwrap_or(false), &m.found).1
            }
        })
    }
}

/// The protocol of the last case the conversation opened.
fn last_protocol(conv: &Conversation) -> Option<&str> {
    conv.state
        .get(STATE_PROTOCOLO)
        .and_then(|p| p.get("protocolo"))
        .and_then(Value::as_str)
}

/// A FAQ entry's answer; with a recharge waiting, its question asked again after it.
fn faq_route(answer: String, m: &Read<'_>) -> Route {
    match &m.pending {
        Some(p) => Route::Restate {
            text: format!("{answer}\n\n{}", p.restated()),
            pending: p.id.clone(),
        },
        None => Route::Reply { text: answer },
    }
}

/// The arguments of `recarga_automatica`.
fn automatic_args(acao: &str, cartao: Option<String>, t: AutomaticTerms) -> Value {
    let money = |v: Option<Decimal>| v.map(|v| format!("{:.2}", vt_domain::vt::round_half_up(v)));
    json!({"acao": acao, "cartao": cartao, "valor": money(t.valor), "limite": money(t.limite), "dia": t.dia})
}

/// The lookup of a payment complained about: the card named (one), and whether it was charged twice.
fn complaint_route(twice: bool, found: &Found) -> (String, Route) {
    let mut arguments = Map::new();
    if let [card] = found.cards.as_slice() {
        arguments.insert("cartao".into(), json!(card));
    }
    if twice {
        arguments.insert("duplicada".into(), json!(true));
    }
    let route = Route::Action {
        action: Known::VerificarPagamento.key().into(),
        arguments: Value::Object(arguments),
    };
    (Known::VerificarPagamento.key().to_owned(), route)
}

/// The waiting recharge's question, asked again.
fn restate(p: &RecargaPendente) -> (String, Route) {
    let route = Route::Restate {
        text: p.restated(),
        pending: p.id.clone(),
    };
    (Known::ConfirmarRecarga.key().to_owned(), route)
}
