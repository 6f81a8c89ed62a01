//! The world a case is replayed in, built from what was recorded: the systems answer each request as
//! they answered it then (matched by method, path and body, in order; a payment token never counts),
//! and the model gives its recorded answer to a request identical to the recorded one. A request the
//! recording never saw is the case's infrastructure error — never a pass, never a behaviour failure.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use axum::body::Bytes;
use axum::http::{Method, StatusCode, Uri};
use axum::response::IntoResponse;
use vt_connectors::tape::{Exchange, normalized};

use crate::transcript::format::ModelReply;
use crate::transcript::pseudonym::Pseudonyms;
use vt_engine::llm::{Completion, CompletionRequest, LlmError, LlmProvider, Scripted};

/// The systems' recorded answers of one case, each given once.
#[derive(Default)]
pub(crate) struct Systems {
    left: Mutex<Vec<Option<Exchange>>>,
    /// Requests nobody recorded an answer to: the case's infrastructure errors.
    misses: Mutex<Vec<String>>,
}

impl Systems {
    pub(crate) fn new(exchanges: Vec<Exchange>) -> Arc<Self> {
        Arc::new(Self {
            left: Mutex::new(exchanges.into_iter().map(Some).collect()),
            misses: Mutex::default(),
        })
    }

    pub(crate) fn misses(&self) -> Vec<String> {
        self.misses.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The first answer not given yet to a request like this one.
    fn answer(&self, method: &Method, path: &str, body: &Bytes) -> Option<Exchange> {
        let body = (!body.is_empty())
            .then(|| vt_contract::json::from_bytes::<serde_json::Value>(body).ok())
            .flatten()
            .map(|b| normalized(&b));
        let mut left = self.left.lock().unwrap_or_else(PoisonError::into_inner);
        let found = left.iter_mut().find(|x| {
            x.as_ref()
                .is_some_and(|x| x.method == method.as_str() && x.path == path && x.body == body)
        })?;
        found.take()
    }

    /// The systems as a router the client calls in this process.
    pub(crate) fn router(self: &Arc<Self>) -> axum::Router {
        let me = self.clone();
        axum::Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
            let me = me.clone();
            async move {
                let path = uri
                    .path_and_query()
                    .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned());
                match me.answer(&method, &path, &body) {
                    Some(x) => recorded(&x),
                    None => {
                        let shown = path.split('?').next().unwrap_or_default();
                        me.misses
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(format!(
                                "{method} {shown}: a gravação não tem resposta para esta requisição"
                            ));
                        (
                            StatusCode::BAD_GATEWAY,
                            "{\"erro\":\"replay: resposta não gravada\"}",
                        )
                            .into_response()
                    }
                }
            }
        })
    }
}

/// A recorded answer as the system gave it (no answer at all: a gateway timeout).
fn recorded(x: &Exchange) -> axum::response::Response {
    let status = x
        .status
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::GATEWAY_TIMEOUT);
    let body = x.answer.as_ref().map(ToString::to_string).unwrap_or_default();
    let mut response = (status, [("content-type", "application/json")], body).into_response();
    if x.replayed {
        response.headers_mut().insert(
            "idempotent-replayed",
            axum::http::HeaderValue::from_static("true"),
        );
    }
    response
}

/// How a case's model calls were answered.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub(crate) struct ModelCount {
    /// Answered from the recording (the request was identical).
    pub recorded: usize,
    /// Sent to the candidate's model.
    pub live: usize,
    /// Neither: no recording matched and no model was given.
    pub unanswered: usize,
}

/// The model of a replay: the recorded answer to an identical request, else the candidate's model,
/// else none.
pub(crate) struct Model {
    answers: Mutex<HashMap<String, VecDeque<Scripted>>>,
    /// The run's map back, to take a request's fingerprint over its real form, as it was recorded.
    pseudonyms: Arc<Mutex<Pseudonyms>>,
    live: Option<Arc<dyn LlmProvider>>,
    count: Mutex<ModelCount>,
}

impl Model {
    pub(crate) fn new(
        calls: Vec<(String, ModelReply)>,
        pseudonyms: Arc<Mutex<Pseudonyms>>,
        live: Option<Arc<dyn LlmProvider>>,
    ) -> Self {
        let mut answers: HashMap<String, VecDeque<Scripted>> = HashMap::new();
        // A recorded reply is text or tool calls (`model_answers` keeps no failed call): it converts.
        for (fingerprint, reply) in calls {
            if let Ok(answer) = crate::quality::transcripts::scripted(&reply) {
                answers.entry(fingerprint).or_default().push_back(answer);
            }
        }
        Self {
            answers: Mutex::new(answers),
            pseudonyms,
            live,
            count: Mutex::default(),
        }
    }

    pub(crate) fn count(&self) -> ModelCount {
        *self.count.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn counted(&self, f: impl FnOnce(&mut ModelCount)) {
        f(&mut self.count.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

#[async_trait]
impl LlmProvider for Model {
    fn model(&self) -> &str {
        self.live.as_ref().map_or("gravado", |l| l.model())
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let summary = vt_engine::llm::fingerprint::summary_text(request);
        let real = self
            .pseudonyms
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .restore(&summary);
        let fingerprint = vt_engine::llm::fingerprint::of_text(&real);
        let recorded = self
            .answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(&fingerprint)
            .and_then(VecDeque::pop_front);
        if let Some(answer) = recorded {
            self.counted(|c| c.recorded += 1);
            return match answer {
                Scripted::Reply(completion) => Ok(completion),
                Scripted::Fail(e) => Err(e),
            };
        }
        match &self.live {
            Some(live) => {
                self.counted(|c| c.live += 1);
                live.complete(request).await
            }
            None => {
                self.counted(|c| c.unanswered += 1);
                Err(LlmError::Unavailable(
                    "replay: nenhuma resposta gravada para este pedido e nenhum modelo".into(),
                ))
            }
        }
    }
}
