//! A router called in this process as a connector would call it over HTTP
//! (`vt_connectors::exchange::Local`): the embedded simulators without a socket.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tower::ServiceExt as _;
use vt_connectors::exchange::Local;

/// `router`, answering requests made in this process.
#[derive(Debug, Clone)]
pub struct InProcess(pub axum::Router);

impl InProcess {
    /// `router` as a connector's transport.
    pub fn shared(router: axum::Router) -> Arc<dyn Local> {
        Arc::new(Self(router))
    }
}

#[async_trait]
impl Local for InProcess {
    async fn call(&self, request: http::Request<Bytes>) -> Option<http::Response<Bytes>> {
        let request = request.map(axum::body::Body::from);
        let response = self
            .0
            .clone()
            .oneshot(request)
            .await
            .unwrap_or_else(|e| match e {});
        let (parts, body) = response.into_parts();
        let body = axum::body::to_bytes(body, usize::MAX).await.ok()?;
        Some(http::Response::from_parts(parts, body))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use serde_json::json;
    use vt_connectors::systems::{SystemsConfig, VtSystems};
    use vt_domain::systems::{HttpResult, Systems};

    use crate::systems::{Simulator, SimulatorConfig};

    fn simulator() -> Simulator {
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-22T12:00:00Z")
            .expect("time")
            .to_utc();
        Simulator::new(SimulatorConfig {
            slow: Duration::from_millis(400),
            notifications_per_second: 1,
            now: Some(std::sync::Arc::new(move || at)),
            ..SimulatorConfig::default()
        })
    }

    /// The same calls, in the same order, against a fresh simulator.
    async fn exchanges(client: &VtSystems) -> Vec<HttpResult> {
        let key = |k: &str| BTreeMap::from([("x-idempotency-key".to_owned(), k.to_owned())]);
        let none = BTreeMap::new();
        let recharge = |card: &str| json!({"cartao": card, "valor": 30.0, "moeda": "BRL", "meio_pagamento": {"tipo": "pix"}});
        let notice = json!({"canal": "email", "destinatario": "a@b.c", "mensagem": "oi", "metadados": {"cartao": "1234567890"}});
        let mut out = Vec::new();
        for card in ["1111111111", "2222222222", "3333333333", "5555555555", "123"] {
            out.push(client.consultar_saldo(card, &none, 1_000, 2, 1).await);
        }
        // Never answers: the client's timeout, not the server's.
        out.push(client.consultar_saldo("4444444444", &none, 50, 1, 0).await);
        for card in ["1234567890", "6666666666", "7777777777", "8888888888"] {
            out.push(client.recarregar(&recharge(card), &key(card), 1_000).await);
        }
        // Charged, then never answers: the client gives up; the charge stays on the ledger.
        out.push(
            client
                .recarregar(&recharge("9999999999"), &key("9999999999"), 50)
                .await,
        );
        // The same key and body again: the stored answer, marked replayed.
        out.push(
            client
                .recarregar(&recharge("1234567890"), &key("1234567890"), 1_000)
                .await,
        );
        // One notification a second: the second gets a 429 (with Retry-After, not waited for here).
        out.push(client.notificar(&notice, &key("n1"), 1_000, 1, 0).await);
        out.push(client.notificar(&notice, &key("n2"), 1_000, 1, 0).await);
        out
    }

    #[tokio::test]
    async fn the_embedded_simulator_answers_in_process_as_it_does_over_http() {
        // Each simulator is made just before its calls: its notification window starts then.
        let over_http = simulator().spawn(0).await.expect("simulator");
        let http = VtSystems::new(SystemsConfig::single(&over_http.url)).expect("client");
        let a = exchanges(&http).await;
        let embedded = simulator();
        let in_process = VtSystems::in_process(embedded.local());
        let b = exchanges(&in_process).await;
        assert_eq!(a.len(), b.len());
        for (i, (a, b)) in a.iter().zip(&b).enumerate() {
            assert_eq!(a, b, "exchange {i}");
        }
        // What the comparison covers: answers, server errors, timeouts, replays and limits.
        let statuses: Vec<Option<u16>> = b.iter().map(|r| r.status).collect();
        assert_eq!(
            statuses,
            [
                Some(200),
                Some(200),
                Some(500),
                Some(200),
                Some(400),
                None,
                Some(201),
                Some(202),
                Some(402),
                Some(500),
                None,
                Some(201),
                Some(202),
                Some(429)
            ]
        );
        assert_eq!(b[5].erro.as_ref().map(|e| e.tipo.as_str()), Some("timeout"));
        assert_eq!(b[10].erro.as_ref().map(|e| e.tipo.as_str()), Some("timeout"));
        assert!(b[11].replayed && !b[6].replayed);
        // A call the client gave up on still did what it did before: both simulators charged the card
        // that times out after charging, once.
        for card in ["9999999999", "1234567890"] {
            assert_eq!(over_http.simulator.charges(card), 1, "{card} over HTTP");
            assert_eq!(embedded.charges(card), 1, "{card} in process");
        }
    }
}
