//! Level 1 by meaning: what the keyword readers did not recognise, the intent classifier reads
//! ([`super::classifier`]). A sure reading is acted on as level 1 acts — the parameters still read and
//! checked by code, a missing one asked for, money only after the yes; two close readings become one
//! question naming both; an unsure one is left to the model, or to the help without one.

use serde_json::json;
use vt_domain::tools::cartao::remembered_in;

use super::classifier::{self, Reading};
use super::known::{Known, WithParams};
use super::{Read, Route, Router, act, complaint_route, keywords, reply, restate, texts};
use vt_engine::Conversation;

/// What is conversation rather than a request — chat, an open question, what is outside the product:
/// with a model configured, the model answers it; with a recharge waiting, its question is asked again.
const CONVERSATION: [&str; 5] = [
    "ajuda",
    "saudacao",
    "agradecimento",
    "pergunta_aberta",
    "fora_do_escopo",
];

/// What cannot be taken back — the conversation ended, the cards forgotten — is acted on only when the
/// classifier is this sure ("fica avisando até eu mandar parar" is no goodbye).
const SURE_TO_UNDO: f32 = 0.75;
const CANNOT_UNDO: [&str; 3] = ["encerrar_atendimento", "esquecer_cartoes", "apagar_dados"];

/// The intent a question of ours waits a parameter for, if one does.
fn awaiting_intent(conv: &Conversation) -> Option<String> {
    super::awaiting(conv).map(|a| a.intent)
}

/// The label to act on: sure, and surer still for what cannot be undone.
fn acted_on(r: &Reading) -> Option<&'static str> {
    let label = r.sure()?;
    (!CANNOT_UNDO.contains(&label) || r.best.1 >= SURE_TO_UNDO).then_some(label)
}

/// The classifier's reading of the message past its greeting ("boa tarde, vcs atendem no sábado?": the
/// question is read, the greeting is answered apart) — classified once per message, however many
/// readers ask (the desk, then meaning, or an overruling).
fn reading<'m>(m: &'m Read<'_>) -> &'m Reading {
    m.reading.get_or_init(|| {
        let asked = keywords::after_greeting(&m.n);
        classifier::classify(if asked.is_empty() { &m.n } else { asked })
    })
}

/// `route` with argument `key` set to `value` — now, or once the card asked for is given: the
/// situation asked why the card did not pass the turnstile (`nao_passou`, explained by the balance and
/// the last uses too), a block's reason (`motivo`).
pub(super) fn with_arg(route: Route, key: &str, value: serde_json::Value) -> Route {
    match route {
        Route::Action {
            action,
            mut arguments,
        } => {
            if let Some(args) = arguments.as_object_mut() {
                args.insert(key.into(), value);
            }
            Route::Action { action, arguments }
        }
        Route::Ask {
            question,
            mut awaiting,
            choose,
        } => {
            awaiting.params.insert(key.into(), value);
            Route::Ask {
                question,
                awaiting,
                choose,
            }
        }
        other => other,
    }
}

impl Router {
    /// The classifier's reading of a message level 1's readers left alone.
    pub(super) fn by_meaning(&self, m: &Read<'_>, conv: &Conversation) -> Option<(String, Route)> {
        let r = reading(m);
        // A sure reading of a request is acted on with a model configured too: the model is asked only
        // what level 1 is unsure of, or what is conversation rather than a request, so it cannot make a
        // sure request's answer worse.
        if let Some(label) = acted_on(r) {
            if m.model && CONVERSATION.contains(&label) {
                return None;
            }
            return self.meant(label, m, conv);
        }
        if m.model {
            return None;
        }
        self.which_of(r)
    }

    /// A question the card desk answers from the card system — the card's situation, why it did not
    /// pass the turnstile, its statement — where the deployment offers it. Read before the FAQ and the
    /// list of what needs a person, which share its words ("bloqueado", "catraca"): the FAQ answers
    /// only where the system says nothing.
    pub(super) fn desk(&self, m: &Read<'_>, conv: &Conversation) -> Option<(String, Route)> {
        let label = acted_on(reading(m))?;
        let offered = match label {
            "consultar_situacao" | "nao_passou" => self.active(Known::ConsultarSituacao),
            "extrato" => self.active(Known::Extrato),
            "bloquear_cartao" => self.active(Known::BloquearCartao),
            "pedir_segunda_via" => self.active(Known::SegundaVia),
            _ => false,
        };
        if offered { self.meant(label, m, conv) } else { None }
    }

    /// What the classifier is sure the message means, when that is none of `keep` (what a keyword
    /// reader found): "botei a recarga no cartão errado, consigo desfazer?" names a recharge and asks a
    /// question; "não quero mais papo com máquina" says "não quero mais" and asks for a person.
    pub(super) fn overruled(
        &self,
        m: &Read<'_>,
        conv: &Conversation,
        keep: &[&str],
    ) -> Option<(String, Route)> {
        let r = reading(m);
        let label = acted_on(r)?;
        // Without a model, an open question is answered here; with one, the model answers it.
        let chat = ["ajuda", "saudacao", "agradecimento", "fora_do_escopo"];
        if keep.contains(&label) || chat.contains(&label) || (m.model && label == "pergunta_aberta") {
            return None;
        }
        self.meant(label, m, conv)
    }

    /// The route of an intent the classifier is sure of.
    pub(super) fn meant(&self, label: &str, m: &Read<'_>, conv: &Conversation) -> Option<(String, Route)> {
        if let Some(id) = label.strip_prefix("faq/") {
            return self.faq_entry(id, m);
        }
        let with_params = |intent: WithParams| {
            self.active(intent.intent()).then(|| {
                (
                    intent.intent().key().to_owned(),
                    self.params_route(intent, m, conv),
                )
            })
        };
        match label {
            "consultar_saldo" => {
                if m.found.cards.len() >= 2 && self.active(Known::TarefaComposta) {
                    let route = Route::EachCard {
                        cards: m.found.cards.clone(),
                    };
                    return Some((Known::TarefaComposta.key().to_owned(), route));
                }
                with_params(WithParams::Saldo)
            }
            "preparar_recarga" => match m.pending.as_ref().filter(|_| !m.found.changes_recharge()) {
                Some(p) => Some(restate(p)),
                None => with_params(WithParams::Recarga),
            },
            // A recharge waiting is confirmed or cancelled by words code reads (or its buttons), never by
            // a reading: "mudei de ideia: prefiro o dobro" is no cancel — its question is asked again.
            "cancelar_recarga" if m.waiting => {
                if m.model {
                    return None;
                }
                m.pending.as_ref().map(restate)
            }
            "cancelar_recarga" => reply(Known::Ajuda, texts::NOTHING_TO_DO.into()),
            "verificar_pagamento" | "cobranca_duplicada" if self.active(Known::VerificarPagamento) => {
                Some(complaint_route(label == "cobranca_duplicada", &m.found))
            }
            "recarga_automatica" if self.active(Known::RecargaAutomatica) => self.automatic_request(m, conv),
            "calcular" => self.fare_sum(m),
            "consultar_situacao" | "nao_passou" | "extrato" | "bloquear_cartao" | "pedir_segunda_via" => {
                self.desk_route(label, m, conv)
            }
            "protocolo" => reply(Known::Ajuda, texts::protocol(super::last_protocol(conv))),
            "meus_cartoes" => reply(
                Known::MeusCartoes,
                texts::cards_list(&remembered_in(&conv.memory)),
            ),
            "esquecer_cartoes" | "apagar_dados" => {
                let count = remembered_in(&conv.memory).len();
                let mut text = texts::cards_forgotten(count);
                if label == "apagar_dados" {
                    text = format!("{text} {}", texts::ERASURE);
                }
                Some((
                    Known::EsquecerCartoes.key().to_owned(),
                    Route::ForgetCards { text },
                ))
            }
            _ => self.said_plainly(label, m),
        }
    }

    /// The card desk's route for `label`: the card's situation (why it did not pass), its statement,
    /// its block (the reason the message gives), its second copy.
    fn desk_route(&self, label: &str, m: &Read<'_>, conv: &Conversation) -> Option<(String, Route)> {
        let (intent, arg) = match label {
            "consultar_situacao" => (WithParams::Situacao, None),
            "nao_passou" => (WithParams::Situacao, Some(("nao_passou", json!(true)))),
            "extrato" => (WithParams::Extrato, None),
            "bloquear_cartao" => (
                WithParams::Bloqueio,
                Some(("motivo", json!(keywords::block_reason(&m.n)))),
            ),
            _ => (WithParams::SegundaVia, None),
        };
        let asked_for_another = awaiting_intent(conv).is_some_and(|a| a != intent.intent().key());
        if !self.active(intent.intent()) || (asked_for_another && m.answers_our_question(conv)) {
            return None;
        }
        let route = self.params_route(intent, m, conv);
        let route = match arg {
            Some((key, value)) => with_arg(route, key, value),
            None => route,
        };
        Some((intent.intent().key().to_owned(), route))
    }

    /// The intents whose answer is fixed: a person, a new code, goodbye, thanks, the help.
    fn said_plainly(&self, label: &str, m: &Read<'_>) -> Option<(String, Route)> {
        // With a recharge waiting, what is no request ("um instante", "oi") is answered by its question
        // again: the yes that follows answers that question.
        if let Some(p) = m.pending.as_ref().filter(|_| CONVERSATION.contains(&label)) {
            return Some(restate(p));
        }
        match label {
            "novo_codigo_pix" if self.active(Known::NovoCodigoPix) => act(Known::NovoCodigoPix, json!({})),
            "transferir_para_humano" if self.active(Known::TransferirParaHumano) => act(
                Known::TransferirParaHumano,
                json!({"motivo": "o usuário pediu para falar com um atendente"}),
            ),
            "encerrar_atendimento" if self.active(Known::EncerrarAtendimento) => {
                act(Known::EncerrarAtendimento, json!({"motivo": null}))
            }
            "agradecimento" => reply(Known::Ajuda, texts::THANKS.into()),
            "saudacao" | "ajuda" => reply(Known::Ajuda, texts::help(m.lang, keywords::greeting_back(&m.n))),
            "pergunta_aberta" => reply(Known::Ajuda, texts::OPEN_UNANSWERED.into()),
            "fora_do_escopo" => reply(Known::Ajuda, texts::OUT_OF_SCOPE.into()),
            _ => None,
        }
    }

    /// "Quanto dá 22 dias, duas passagens por dia, a 4,40?": computed by code with every factor said
    /// back; without the factors, the question that asks for them.
    fn fare_sum(&self, m: &Read<'_>) -> Option<(String, Route)> {
        match self.arithmetic_answer(m) {
            Some(text) => reply(Known::Calcular, text),
            // With a model, a question about fares it can read is its to answer.
            None if m.model => None,
            None => reply(Known::Calcular, texts::FARE_FACTORS.into()),
        }
    }

    /// The operator's FAQ entry the classifier recognised, if the operator's FAQ has it.
    fn faq_entry(&self, id: &str, m: &Read<'_>) -> Option<(String, Route)> {
        let entry = self.faq.as_ref()?.entries().iter().find(|e| e.id == id)?;
        Some((Known::Faq.key().to_owned(), super::faq_route(entry.answer(), m)))
    }

    /// Two close readings, neither sure: one question that names both.
    fn which_of(&self, r: &Reading) -> Option<(String, Route)> {
        let (a, b) = r.torn()?;
        let (a, b) = (self.option(a)?, self.option(b)?);
        if a == b {
            return None;
        }
        reply(Known::Ajuda, texts::which_of(&a, &b))
    }

    /// An intent as the clarifying question names it to the person.
    fn option(&self, label: &str) -> Option<String> {
        if let Some(id) = label.strip_prefix("faq/") {
            let entry = self.faq.as_ref()?.entries().iter().find(|e| e.id == id)?;
            return Some(format!("saber \"{}\"", entry.titulo));
        }
        let words = match label {
            "consultar_saldo" => "ver o saldo do cartão",
            "preparar_recarga" => "fazer uma recarga",
            "cancelar_recarga" => "cancelar a recarga",
            "novo_codigo_pix" => "um novo código Pix",
            "transferir_para_humano" => "falar com um atendente",
            "encerrar_atendimento" => "encerrar o atendimento",
            "recarga_automatica" => "uma recarga automática",
            "verificar_pagamento" => "saber de um pagamento que não virou crédito",
            "cobranca_duplicada" => "resolver uma cobrança em dobro",
            "protocolo" => "o número do protocolo",
            "calcular" => "calcular quanto recarregar",
            "meus_cartoes" => "ver os cartões que guardei",
            "consultar_situacao" => "ver a situação do cartão",
            "nao_passou" => "saber por que o cartão não passou na catraca",
            "extrato" => "ver o extrato do cartão",
            "bloquear_cartao" => "bloquear um cartão perdido ou roubado",
            "pedir_segunda_via" => "pedir a segunda via do cartão",
            "esquecer_cartoes" | "apagar_dados" => "apagar os seus dados",
            _ => return None,
        };
        Some(words.to_owned())
    }
}
