//! Throughput figures (reported, not asserted): level-1 routing, a full ten-stage flow run, and a
//! zero-token conversation turn, all in process with the simulator on loopback.
//!
//! `cargo bench --bench throughput` — prints one line per figure.
#![allow(clippy::disallowed_methods)] // tests and benches convert JSON freely; see `vt_contract::json`

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use vt_agent::Config;
use vt_agent::Inbound;
use vt_agent::Router;
use vt_connectors::systems::{SystemsConfig, VtSystems};
use vt_contract::context::Extensions;
use vt_domain::systems::SystemsPort;
use vt_engine::Participant;
use vt_engine::conversation::Conversation;
use vt_store::Store;
use vt_store::sqlite::SqliteStore;

const MESSAGES: &[&str] = &[
    "qual meu saldo",
    "saldo do cartão 1234 5678-90",
    "quanto tem no vt 1234567890",
    "recarrega 50 no cartão 1234567890 via pix",
    "coloca R$ 50,00 via pix",
    "quero recarregar R$ 1.234,56 no cartão 1234567890 no boleto",
    "sim",
    "não",
    "falar com atendente",
    "tchau",
    "qual a diferença entre VT e VR?",
];

fn report(what: &str, n: u32, elapsed: Duration) {
    let per = elapsed / n;
    println!(
        "{what:<46} {n:>6} runs  {:>10.1} µs each  {:>9.0} per second",
        per.as_secs_f64() * 1e6,
        f64::from(n) / elapsed.as_secs_f64()
    );
}

/// The time `n` rounds take of sealing values of the sizes `seals` and opening sealed values of the
/// sizes `opens`.
fn sealing(seals: &[usize], opens: &[usize], n: u32) -> Duration {
    let seals: Vec<String> = seals.iter().map(|n| "x".repeat(*n)).collect();
    let opens: Vec<String> = opens
        .iter()
        .map(|n| vt_store::seal::seal(&"x".repeat(*n)))
        .collect();
    let start = Instant::now();
    for _ in 0..n {
        for v in &seals {
            std::hint::black_box(vt_store::seal::seal(std::hint::black_box(v)));
        }
        for v in &opens {
            std::hint::black_box(vt_store::seal::open(std::hint::black_box(v)).expect("opens"));
        }
    }
    start.elapsed()
}

#[tokio::main]
async fn main() {
    let config = Config::default();
    let intents = vt_agent::testkit::load_file(&config.intents_file()).expect("intents");
    // As the product has it: the FAQ is read for every question (level 1's first reader).
    let faq = vt_domain::faq::Faq::load(&config.faq_dir()).expect("faq");
    let router = Router::new("vt", intents.clone(), None).with_faq(Some(Arc::new(faq)));
    let conv = Conversation::new("c".into(), "vt", "atendimento".into(), Participant::default());
    let n = 20_000u32;
    let start = Instant::now();
    for i in 0..n {
        std::hint::black_box(router.route(MESSAGES[i as usize % MESSAGES.len()], &conv).await);
    }
    report("router level 1 (decision + parameters)", n, start.elapsed());

    // What sealing at rest costs: per value, and for the values a stored balance turn seals (18, 6.7 KB
    // in all) and opens (4, 2.6 KB), sizes as counted on that turn. Measured apart from the turn, whose
    // wall time on a shared VM varies by more than sealing costs; the chat turn below gives the ratio.
    let value = "x".repeat(300);
    let n = 100_000u32;
    let start = Instant::now();
    for _ in 0..n {
        let sealed = vt_store::seal::seal(std::hint::black_box(&value));
        std::hint::black_box(vt_store::seal::open(&sealed).expect("opens"));
    }
    report("seal + open, a 300-byte value", n, start.elapsed());
    const TURN_SEALS: [usize; 18] = [
        55, 94, 272, 1987, 150, 341, 112, 2, 953, 351, 1114, 268, 138, 210, 76, 50, 298, 205,
    ];
    const TURN_OPENS: [usize; 4] = [176, 280, 1816, 316];
    report(
        "sealing of one stored balance turn (18 + 4)",
        20_000,
        sealing(&TURN_SEALS, &TURN_OPENS, 20_000),
    );
    // A stored `run-flow` (input, output, stage outputs, the turn that carries it): 46 values, 29.9 KB,
    // sealed; 20 small ones opened.
    const FLOW_SEALS: [usize; 46] = [
        1, 44, 2, 2, 2, 565, 463, 2, 772, 1533, 526, 665, 434, 436, 285, 286, 361, 366, 569, 570, 240, 240,
        515, 517, 367, 370, 433, 446, 599, 599, 248, 116, 2, 11332, 463, 3094, 272, 137, 208, 397, 97, 340,
        210, 269, 410, 97,
    ];
    const FLOW_OPENS: [usize; 20] = [52, 108, 2, 2, 2, 2, 2, 2, 10, 2, 2, 2, 2, 2, 35, 2, 2, 2, 2, 10];
    report(
        "sealing of one stored run-flow (46 + 20)",
        5_000,
        sealing(&FLOW_SEALS, &FLOW_OPENS, 5_000),
    );

    let running = common::simulator().await;
    let ext = Extensions::default().with(SystemsPort::new(
        VtSystems::new(SystemsConfig::single(&running.url)).expect("client"),
    ));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::connect("sqlite::memory:").await.expect("store"));
    let engine = vt_agent::share(
        vt_agent::build_engine(&config, None, ext).expect("engine"),
        Some(store.clone()),
        config.recargas.clone(),
    );
    let input = r#"{"cartao": "1234567890", "recarga": {"valor": 50, "meio_pagamento": {"tipo": "pix"}}}"#;
    let n = 300u32;
    let start = Instant::now();
    for _ in 0..n {
        vt_agent::run_flow(&engine, input).await.expect("flow");
    }
    report("run-flow, ten stages, 3 loopback HTTP calls", n, start.elapsed());

    let service = vt_agent::build_service(&config, engine, store)
        .await
        .expect("service");
    let n = 300u32;
    let start = Instant::now();
    for _ in 0..n {
        service
            .flows()
            .run_flow(input, Default::default())
            .await
            .expect("flow");
    }
    report(
        "run-flow through the service, stored (SQLite)",
        n,
        start.elapsed(),
    );
    let n = 300u32;
    let start = Instant::now();
    for i in 0..n {
        let msg = Inbound {
            agent_id: "vt".into(),
            conversation_id: Some(format!("bench-{}", i % 10)),
            user: Participant::default(),
            text: "saldo do cartão 1234567890".into(),
            ..Default::default()
        };
        service.messages().handle(msg).await.expect("turn");
    }
    report(
        "chat turn: balance, zero tokens, stored (SQLite)",
        n,
        start.elapsed(),
    );
}
