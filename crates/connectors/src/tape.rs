//! What the systems answered during a turn, kept so that a release gate (`vt-agent replay`) can play
//! the same conversation against the same world later. The caller of a turn opens a [`Tape`] around
//! it ([`Tape::around`]); every exchange the client makes inside that task is written on it, in order.
//! Outside a tape (batches, sweeps, tests) nothing is kept and nothing is paid for.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One request to a system and what came back, as the stage saw it after its retries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    /// `saldo`, `recarga` or `notificacao`.
    pub system: String,
    pub method: String,
    /// Path and query, as sent (a balance's card is in its query).
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// The final answer's status; none when no answer came (a timeout, a connection that failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The answer's body, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Value>,
    /// Why no answer came (`timeout`, `conexao`, `nao_enviado`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erro: Option<String>,
    /// The system said this was a replay of an earlier request with the same key.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
}

/// `body` as a tape keeps it and a replay matches it: a payment token (`meio_pagamento.token`, any
/// `token`) is never kept, so it stands as `<token>`; nor are the digits of a CPF a card holder gave to
/// be checked (`cpf_final`), which stand as `<cpf>`.
pub fn normalized(body: &Value) -> Value {
    match body {
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| {
                    let v = if k == "token" {
                        Value::String("<token>".into())
                    } else if k == "cpf_final" {
                        Value::String("<cpf>".into())
                    } else {
                        normalized(v)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        other => other.clone(),
    }
}

tokio::task_local! {
    static TAPE: Tape;
}

/// The exchanges of one turn, in order.
#[derive(Debug, Clone, Default)]
pub struct Tape(Arc<Mutex<Vec<Exchange>>>);

impl Tape {
    /// Runs `work` with this tape open: the systems' exchanges it makes in this task are kept.
    pub async fn around<F: std::future::Future>(&self, work: F) -> F::Output {
        TAPE.scope(self.clone(), work).await
    }

    /// What was kept, emptied.
    /// Whether a tape is open in this task (a run inside a taped turn is on that turn's tape).
    pub fn is_open() -> bool {
        TAPE.try_with(|_| ()).is_ok()
    }

    pub fn take(&self) -> Vec<Exchange> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Keeps `exchange` when a tape is open in this task; `exchange` is built only then.
    pub(crate) fn record(exchange: impl FnOnce() -> Exchange) {
        let _ = TAPE.try_with(|tape| {
            tape.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(exchange());
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(path: &str) -> Exchange {
        Exchange {
            system: "saldo".into(),
            method: "GET".into(),
            path: path.into(),
            body: None,
            status: Some(200),
            answer: None,
            erro: None,
            replayed: false,
        }
    }

    #[test]
    fn a_payment_token_is_never_kept() {
        let body =
            serde_json::json!({"valor": 10.0, "meio_pagamento": {"tipo": "pix", "token": "tok_secreto"}});
        let kept = normalized(&body);
        assert_eq!(kept["meio_pagamento"]["token"], "<token>");
        let check = normalized(&serde_json::json!({"cartao": "2345678901", "cpf_final": "234"}));
        assert_eq!(check["cpf_final"], "<cpf>");
        assert_eq!(kept["valor"], 10.0);
    }

    #[tokio::test]
    async fn only_a_task_with_an_open_tape_keeps_its_exchanges() {
        Tape::record(|| exchange("/fora"));
        let tape = Tape::default();
        tape.around(async {
            Tape::record(|| exchange("/a"));
            Tape::record(|| exchange("/b"));
        })
        .await;
        let kept: Vec<String> = tape.take().into_iter().map(|e| e.path).collect();
        assert_eq!(kept, ["/a", "/b"]);
        assert!(tape.take().is_empty(), "taken once");
    }
}
