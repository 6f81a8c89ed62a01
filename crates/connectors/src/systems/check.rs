//! `vt-agent systems check`: the configured systems called the way a turn calls them, moving no
//! money — the balance read for a card, the recharge and notification endpoints asked with `OPTIONS`
//! (which no recharge or messaging API takes as an order), each with its system's credentials. One
//! result per system: reachable, authenticated, answering in the contract's shape.

use std::collections::BTreeMap;
use std::time::Instant;

use super::client::{System, VtSystems};
use crate::exchange::{Failure, Request, Retry};

/// The card a check reads the balance of unless told another (a plain card of the simulator; a real
/// balance system needs one it knows: `vt-agent systems check --cartao`).
pub const CHECK_CARD: &str = "1234567890";

/// What the check of one system found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemCheck {
    /// `saldo`, `recarga` or `notificacao`.
    pub system: &'static str,
    pub url: String,
    /// The kind of authentication configured.
    pub auth: &'static str,
    /// What TLS did: `não` (plain HTTP), `servidor verificado`, or `certificado de cliente aceito`
    /// (mutual TLS) — only once the system answered; `—` when it did not.
    pub tls: &'static str,
    pub ok: bool,
    pub status: Option<u16>,
    pub latency_ms: u128,
    /// What was found, or why it failed (never a secret).
    pub detail: String,
}

impl SystemCheck {
    /// One line for a terminal or a log.
    pub fn line(&self) -> String {
        let status = self
            .status
            .map_or_else(|| "sem resposta".to_owned(), |s| format!("HTTP {s}"));
        format!(
            "{} {:<11} {}  auth: {}  tls: {}  {status}  {} ms  {}",
            if self.ok { "ok   " } else { "FALHA" },
            self.system,
            self.url,
            self.auth,
            self.tls,
            self.latency_ms,
            self.detail
        )
    }
}

impl VtSystems {
    /// Checks the three systems; `cartao` is the card whose balance is read.
    pub async fn check(&self, cartao: &str) -> Vec<SystemCheck> {
        let mut found = Vec::with_capacity(3);
        for system in System::ALL {
            found.push(self.check_one(system, cartao).await);
        }
        found
    }

    async fn check_one(&self, system: System, cartao: &str) -> SystemCheck {
        let headers = BTreeMap::new();
        let (method, url) = match system {
            System::Saldo => (reqwest::Method::GET, self.url_of(system, Some(cartao))),
            _ => (reqwest::Method::OPTIONS, self.url_of(system, None)),
        };
        let mut check = SystemCheck {
            system: system.name(),
            url: shown(url.as_ref().ok()),
            auth: self.config().auth_of(system).kind(),
            tls: "—",
            ok: false,
            status: None,
            latency_ms: 0,
            detail: String::new(),
        };
        let Ok(url) = url else {
            check.detail = "a URL configurada não é uma URL".into();
            return check;
        };
        let request = Request {
            method,
            url: &url,
            headers: &headers,
            body: None,
            timeout: self.timeout(10_000),
        };
        let started = Instant::now();
        let answer = self.peer(system).send(&request, &Retry::ONCE).await;
        check.latency_ms = started.elapsed().as_millis();
        match answer {
            Err(Failure::Unauthenticated(e)) => check.detail = e.to_string(),
            Err(Failure::Timeout) => check.detail = "não respondeu a tempo".into(),
            Err(Failure::Connection) => {
                check.detail = "inalcançável (conexão recusada ou TLS recusado)".into()
            }
            Ok(answer) => {
                check.tls = self.tls_shown(system, &check.url);
                check.status = Some(answer.status);
                let body = answer
                    .body
                    .ok()
                    .and_then(|b| vt_contract::json::from_bytes::<serde_json::Value>(&b).ok());
                (check.ok, check.detail) = judge(system, answer.status, body.as_ref());
            }
        }
        check
    }
}

impl VtSystems {
    /// What TLS did for a system that answered.
    fn tls_shown(&self, system: System, url: &str) -> &'static str {
        let https = url.starts_with("https://");
        match (https, self.config().tls_of(system).client_cert.is_some()) {
            (false, _) => "não",
            (true, false) => "servidor verificado",
            (true, true) => "certificado de cliente aceito",
        }
    }
}

/// The endpoint as the line shows it: no query (the card stays out of it).
fn shown(url: Option<&reqwest::Url>) -> String {
    url.map_or_else(
        || "(URL inválida)".to_owned(),
        |u| {
            let mut u = u.clone();
            u.set_query(None);
            u.to_string()
        },
    )
}

/// Whether an answer passes, and what it says.
fn judge(system: System, status: u16, body: Option<&serde_json::Value>) -> (bool, String) {
    match (system, status) {
        (_, 401 | 403) => (false, "credenciais recusadas pelo sistema".into()),
        (_, s) if s >= 500 => (false, "o sistema respondeu com erro".into()),
        (System::Saldo, 200) if body.is_some_and(|b| b.get("saldo").is_some()) => {
            (true, "saldo lido; resposta no formato do contrato".into())
        }
        (System::Saldo, 200) => (false, "resposta fora do formato do contrato (sem `saldo`)".into()),
        (System::Saldo, s) => (false, format!("a consulta de saldo respondeu {s}")),
        (_, 404) => (false, "o endpoint não existe nesse endereço".into()),
        _ => (
            true,
            "alcançável e autenticado (OPTIONS: nada é cobrado nem enviado)".into(),
        ),
    }
}
