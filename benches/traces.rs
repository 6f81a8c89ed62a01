//! What trace export costs (reported, not asserted): CPU per zero-token chat turn and per ten-stage
//! flow run with traces off and on, exported over OTLP/HTTP to a collector on loopback.
//!
//! The global tracing subscriber can be installed once per process, so this bench runs itself twice as
//! child processes (`off`, then `on`); the parent serves the simulator and the collector, so the
//! children's CPU (`getrusage`, every thread: turns, store, exporter) is the product's alone. The
//! exporter's shutdown flush is inside the measured span: every span is paid for.
//!
//! `cargo bench --bench traces`
#![allow(clippy::disallowed_methods)] // tests and benches convert JSON freely; see `vt_contract::json`

mod common;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use vt_agent::Config;
use vt_agent::Inbound;
use vt_connectors::systems::{SystemsConfig, VtSystems};
use vt_contract::context::Extensions;
use vt_domain::systems::SystemsPort;
use vt_engine::Participant;
use vt_store::Store;
use vt_store::sqlite::SqliteStore;

use common::{cpu, simulator};

const TURNS: u32 = 2_000;
const FLOWS: u32 = 500;

fn main() {
    match std::env::var("VT_BENCH_TRACES_CHILD").as_deref() {
        Ok(mode) => child(mode == "on"),
        Err(_) => parent(),
    }
}

/// Serves the simulator and a collector, runs the two children and compares them.
fn parent() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let received = Arc::new(AtomicUsize::new(0));
    let (sim, collector) = rt.block_on(async {
        let sim = simulator().await;
        let seen = received.clone();
        let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
            let seen = seen.clone();
            async move {
                seen.fetch_add(body.len(), Ordering::Relaxed);
                ([("content-type", "application/x-protobuf")], Vec::<u8>::new())
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        (sim, url)
    });
    let sim_url = sim.url.clone();
    let exe = std::env::current_exe().expect("exe");
    // Alternating runs, three of each, compared by their medians: one run's CPU moves by ±10 % with
    // the disk's fsyncs, more than what is measured.
    let modes = std::env::var("VT_BENCH_TRACES_MODES").unwrap_or_else(|_| "off,on,off,on,off,on".into());
    let mut figures: std::collections::BTreeMap<String, Vec<Vec<f64>>> = Default::default();
    for mode in modes.split(',') {
        let out = Command::new(&exe)
            .env("VT_BENCH_TRACES_CHILD", mode)
            .env("VT_SYSTEMS_URL", &sim_url)
            .env("VT_BENCH_COLLECTOR", &collector)
            .output()
            .expect("child");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        print!("{text}");
        let nums: Vec<f64> = text
            .lines()
            .filter_map(|l| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix("cpu_ms=")?.parse().ok())
            })
            .collect();
        figures.entry(mode.to_owned()).or_default().push(nums);
    }
    let median = |mode: &str, i: usize| {
        let mut v: Vec<f64> = figures.get(mode)?.iter().map(|n| n[i]).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    for (i, what) in ["chat turn", "ten-stage flow"].iter().enumerate() {
        let (Some(off), Some(on)) = (median("off", i), median("on", i)) else {
            return;
        };
        println!(
            "{what:<16} median CPU: off {off:.3} ms, on {on:.3} ms: traces on cost {:+.1} %",
            (on / off - 1.0) * 100.0
        );
    }
    println!(
        "collector received {} KB of OTLP protobuf",
        received.load(Ordering::Relaxed) / 1024
    );
}

/// Runs the turns and flows with traces `on` or off; prints CPU per turn and per flow.
fn child(on: bool) {
    let collector = std::env::var("VT_BENCH_COLLECTOR").expect("collector");
    let sim_url = std::env::var("VT_SYSTEMS_URL").expect("simulator");
    let mut env: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    if on {
        env.insert("OTEL_EXPORTER_OTLP_ENDPOINT".into(), collector);
    }
    let config = Config::from_sources(None, "", &env).expect("config");
    let telemetry = vt_engine::telemetry::init("warn", config.otlp_target.as_ref());
    assert_eq!(telemetry.tracing(), on);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tmp");
    let (turn_cpu, flow_cpu) = rt.block_on(async {
        let store: Arc<dyn Store> = Arc::new(
            SqliteStore::connect(&format!("sqlite://{}/vt.db?mode=rwc", dir.path().display()))
                .await
                .expect("store"),
        );
        let ext = Extensions::default().with(SystemsPort::new(
            VtSystems::new(SystemsConfig::single(&sim_url)).expect("client"),
        ));
        let engine = vt_agent::share(
            vt_agent::build_engine(&config, None, ext).expect("engine"),
            Some(store.clone()),
            config.recargas.clone(),
        );
        let service = vt_agent::build_service(&config, engine, store)
            .await
            .expect("service");
        // Warm up: connections, caches, the first spans.
        for i in 0..50 {
            service.messages().handle(turn(i)).await.expect("turn");
        }
        let before = cpu();
        for i in 0..TURNS {
            service.messages().handle(turn(i)).await.expect("turn");
        }
        let turns = cpu() - before;
        let input =
            r#"{"cartao": "1234567890", "recarga": {"valor": 50, "meio_pagamento": {"tipo": "pix"}}}"#;
        let before = cpu();
        for _ in 0..FLOWS {
            service
                .flows()
                .run_flow(input, Default::default())
                .await
                .expect("flow");
        }
        (turns, cpu() - before)
    });
    // The export of every span is paid for before the figures are taken.
    let before = cpu();
    let started = Instant::now();
    telemetry.shutdown();
    let flush = cpu() - before;
    let mode = if on { "on " } else { "off" };
    let per = |d: Duration, n: u32| d.as_secs_f64() * 1e3 / f64::from(n);
    // The flush is shared out over the turns and flows in proportion to their CPU.
    let share = |d: Duration| {
        let total = (turn_cpu + flow_cpu).as_secs_f64();
        d.as_secs_f64() + flush.as_secs_f64() * d.as_secs_f64() / total
    };
    println!(
        "traces {mode}  chat turn (zero tokens, SQLite)  {TURNS} turns  cpu_ms={:.3} per turn",
        share(turn_cpu) * 1e3 / f64::from(TURNS)
    );
    println!(
        "traces {mode}  ten-stage flow (SQLite)         {FLOWS} flows  cpu_ms={:.3} per flow  (flush {:.0} ms, {:.0} ms wall; {:.3} ms before it)",
        share(flow_cpu) * 1e3 / f64::from(FLOWS),
        flush.as_secs_f64() * 1e3,
        started.elapsed().as_secs_f64() * 1e3,
        per(flow_cpu, FLOWS),
    );
}

fn turn(i: u32) -> Inbound {
    Inbound {
        agent_id: "vt".into(),
        conversation_id: Some(format!("bench-{}", i % 20)),
        user: Participant::default(),
        text: "saldo do cartão 1234567890".into(),
        ..Default::default()
    }
}
