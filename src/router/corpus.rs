//! How well level 1 reads people: a corpus of messages as card holders write them, each with the
//! intent, route and parameters it should come out as (`tests/fixtures/router/corpus.yaml`), scored
//! here — intent accuracy, parameters exact, bare menus. The integration tests hold the router to
//! it; `cargo bench --bench tokens` reports it; a held-out set kept outside the repo is scored by the
//! same function.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use vt_domain::tools::cartao::MEMORY_CARTOES;
use vt_domain::tools::{Perguntada, STATE_PENDENTE, STATE_PERGUNTADA};

use super::{Awaiting, Route, Router, STATE_AGUARDANDO};
use vt_engine::{Conversation, Participant};

/// One message of the corpus, with its context and what it must come out as.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub texto: String,
    /// A recharge of BRL 40,00 on card 1111111111 via pix waits, and was the last thing asked.
    #[serde(default)]
    pub pendente: bool,
    /// An automatic recharge was offered for card 1111111111 (`****1111`) and waits for the answer.
    #[serde(default)]
    pub oferta: bool,
    /// The cards the conversation remembers, oldest first.
    #[serde(default)]
    pub cartoes: Vec<String>,
    /// The router asked for a missing parameter of `saldo` or `recarga`.
    #[serde(default)]
    pub aguardando: Option<String>,
    pub intencao: String,
    /// `acao` | `pergunta` | `resposta` | `reafirma` | `esquece`.
    #[serde(default)]
    pub rota: Option<String>,
    /// The action's arguments exactly (`acao`), or what the question keeps (`pergunta`).
    #[serde(default)]
    pub parametros: Option<Map<String, Value>>,
    /// A part of the text the person reads (`resposta`, `pergunta`, `reafirma`).
    #[serde(default)]
    pub contem: Option<String>,
}

/// The corpus's figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Score {
    pub messages: usize,
    /// Intent and route as expected, and the text's expected part present.
    pub intent_right: usize,
    /// Messages with expected parameters.
    pub with_params: usize,
    pub params_exact: usize,
    /// Answered with the bare help menu though something else was meant.
    pub menu_answers: usize,
    /// What went wrong, one line a message.
    pub misses: Vec<String>,
}

impl Score {
    pub fn intent_accuracy(&self) -> f64 {
        ratio(self.intent_right, self.messages)
    }

    pub fn params_accuracy(&self) -> f64 {
        ratio(self.params_exact, self.with_params)
    }

    /// `intent accuracy 97.0 % (160/165), parameters exact 98.0 % (…), menu answers 0`.
    pub fn summary(&self) -> String {
        format!(
            "intent accuracy {:.1} % ({}/{}), parameters exact {:.1} % ({}/{}), menu answers {}",
            self.intent_accuracy() * 100.0,
            self.intent_right,
            self.messages,
            self.params_accuracy() * 100.0,
            self.params_exact,
            self.with_params,
            self.menu_answers
        )
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 1.0 } else { a as f64 / b as f64 }
}

/// Reads a corpus file (YAML: a list of entries).
pub fn load(path: &Path) -> Result<Vec<Entry>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

impl Entry {
    /// What the entry's conversation holds before the message: its state (a recharge waiting, a
    /// request waiting for a parameter) and its memory (the cards it remembers).
    pub fn context(&self) -> (Map<String, Value>, Map<String, Value>) {
        let mut state = Map::new();
        let mut memory = Map::new();
        if self.pendente {
            let pending = json!({
                "id": "p1", "cartao": "1111111111", "valor": 40.00, "moeda": "BRL", "meio_pagamento": "pix",
                "idempotency_key": "k", "criada_no_turno": "t0", "expira_em": "2099-01-01T00:00:00Z",
            });
            state.insert(STATE_PENDENTE.into(), pending);
            state.insert(STATE_PERGUNTADA.into(), Perguntada::mark("p1", "t0"));
        }
        if !self.cartoes.is_empty() {
            memory.insert(MEMORY_CARTOES.into(), json!(self.cartoes));
        }
        if self.oferta {
            state.insert(
                vt_domain::tools::STATE_OFERTA_AUTOMATICA.into(),
                json!({"cartao": "****1111"}),
            );
        }
        if let Some(which) = &self.aguardando {
            let awaiting = match which.as_str() {
                "recarga" => Awaiting {
                    intent: "preparar_recarga".into(),
                    params: json!({"valor": "50", "meio_pagamento": "pix"})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                },
                _ => Awaiting {
                    intent: "consultar_saldo".into(),
                    params: Map::new(),
                },
            };
            state.insert(
                STATE_AGUARDANDO.into(),
                vt_contract::json::to_value(awaiting).unwrap_or(Value::Null),
            );
        }
        (state, memory)
    }
}

/// The conversation an entry is read in.
fn conversation(entry: &Entry) -> Conversation {
    let mut c = Conversation::new(
        "corpus".into(),
        "vt",
        "atendimento".into(),
        Participant::default(),
    );
    (c.state, c.memory) = entry.context();
    c
}

/// Scores `router` (level 1, and the answer without a model) on `entries`.
pub async fn score(router: &Router, entries: &[Entry]) -> Score {
    let mut score = Score::default();
    for entry in entries {
        // The service remembers a card as the message arrives, before routing.
        let mut conv = conversation(entry);
        vt_domain::tools::cartao::remember_written(&mut conv.memory, &entry.texto);
        let d = router.route(&entry.texto, &conv).await;
        score.messages += 1;
        let (kind, text, params) = match &d.route {
            Route::Action { arguments, .. } => ("acao", None, arguments.as_object().cloned()),
            Route::Ask {
                question, awaiting, ..
            } => ("pergunta", Some(question.as_str()), Some(awaiting.params.clone())),
            Route::Reply { text } => ("resposta", Some(text.as_str()), None),
            Route::Restate { text, .. } => ("reafirma", Some(text.as_str()), None),
            Route::ForgetCards { text } => ("esquece", Some(text.as_str()), None),
            Route::Model => ("modelo", None, None),
            Route::Plan => ("plano", None, None),
            Route::EachCard { .. } => ("cada_cartao", None, None),
            Route::BalanceFirst { .. } => ("saldo_e", None, None),
        };
        let bare_menu = text.is_some_and(|t| t.starts_with("Posso ajudar com o seu vale-transporte"));
        if bare_menu && entry.intencao != "ajuda" {
            score.menu_answers += 1;
        }
        let route_ok = entry.rota.as_deref().is_none_or(|r| r == kind);
        let text_ok = entry
            .contem
            .as_deref()
            .is_none_or(|want| text.is_some_and(|t| t.contains(want)));
        if d.intent == entry.intencao && route_ok && text_ok {
            score.intent_right += 1;
        } else {
            score.misses.push(format!(
                "{:?}: want {} {:?} {:?}, got {} {kind} {:?}",
                entry.texto,
                entry.intencao,
                entry.rota.as_deref().unwrap_or("-"),
                entry.contem.as_deref().unwrap_or(""),
                d.intent,
                text.unwrap_or_default()
            ));
        }
        if let Some(want) = &entry.parametros {
            score.with_params += 1;
            if params.as_ref() == Some(want) {
                score.params_exact += 1;
            } else {
                score
                    .misses
                    .push(format!("{:?}: parameters {want:?}, got {params:?}", entry.texto));
            }
        }
    }
    score
}
