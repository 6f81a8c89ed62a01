//! `vt-agent systems check`: the configured systems called the way a turn calls them, moving no
//! money — the balance read for a card, the recharge and notification endpoints asked with `OPTIONS`
//! (which no recharge or messaging API takes as an order), each with its system's credentials, and
//! the card's situation read on the balance system (the card holder's service desk). One result per
//! system: reachable, authenticated, answering in the contract's shape.

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
    /// `saldo`, `recarga`, `notificacao` or `situacao` (the card desk, on the balance system).
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
    /// Checks the three systems and the card desk; `cartao` is the card whose balance and situation
    /// are read.
    pub async fn check(&self, cartao: &str) -> Vec<SystemCheck> {
        let mut found = Vec::with_capacity(4);
        for system in System::ALL {
            found.push(self.check_one(Checked::System(system), cartao).await);
        }
        found.push(self.check_one(Checked::Desk, cartao).await);
        found
    }

    async fn check_one(&self, checked: Checked, cartao: &str) -> SystemCheck {
        let headers = BTreeMap::new();
        let system = checked.system();
        let (method, url) = match checked {
            Checked::System(System::Saldo) => (reqwest::Method::GET, self.url_of(system, Some(cartao))),
            Checked::System(_) => (reqwest::Method::OPTIONS, self.url_of(system, None)),
            Checked::Desk => (reqwest::Method::GET, self.desk_url(cartao)),
        };
        let mut check = SystemCheck {
            system: checked.name(),
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
                (check.ok, check.detail) = judge(checked, answer.status, body.as_ref());
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

/// What one line of the check is of.
#[derive(Debug, Clone, Copy)]
enum Checked {
    System(System),
    /// The card's situation, on the balance system.
    Desk,
}

impl Checked {
    /// The system it is called on.
    fn system(self) -> System {
        match self {
            Self::System(s) => s,
            Self::Desk => System::Saldo,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::System(s) => s.name(),
            Self::Desk => "situacao",
        }
    }
}

/// Whether an answer passes, and what it says.
fn judge(checked: Checked, status: u16, body: Option<&serde_json::Value>) -> (bool, String) {
    let system = match (checked, status) {
        (_, 401 | 403) => return (false, "credenciais recusadas pelo sistema".into()),
        (_, s) if s >= 500 => return (false, "o sistema respondeu com erro".into()),
        (Checked::Desk, s) => return judge_desk(s, body),
        (Checked::System(system), _) => system,
    };
    match (system, status) {
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

/// The card desk is optional: a system without it passes, and card holders' lost cards and statements
/// go to a person.
fn judge_desk(status: u16, body: Option<&serde_json::Value>) -> (bool, String) {
    let motivo = body
        .and_then(|b| b.get("motivo"))
        .and_then(serde_json::Value::as_str);
    match status {
        200 if body.is_some_and(|b| b.get("situacao").is_some()) => (
            true,
            "situação do cartão lida; resposta no formato do contrato".into(),
        ),
        200 => (
            false,
            "resposta fora do formato do contrato (sem `situacao`)".into(),
        ),
        404 if motivo == Some("cartao_desconhecido") => (
            true,
            "alcançável; o sistema não conhece o cartão de teste (use --cartao)".into(),
        ),
        404 | 405 | 501 => (
            true,
            "não oferecido: bloqueio, segunda via e extrato passam a uma pessoa".into(),
        ),
        s => (false, format!("a consulta de situação respondeu {s}")),
    }
}
