//! Batch throughput (reported, not asserted): `vt-agent batch` as a user runs it — SQLite file under a
//! fresh data directory, the embedded simulator (its notification limit raised, so the product is what
//! is measured), every flow stored — over N recharge lines of distinct cards.
//!
//! `cargo bench --bench batch` (VT_BENCH_BATCH_LINES, default 4000; VT_BENCH_BATCH_CONCURRENCY,
//! default 256). Prints flows/s, CPU per flow (the whole process: product, store and simulator) and the
//! run's p50/p99 per flow.
#![allow(clippy::disallowed_methods)] // tests and benches convert JSON freely; see `vt_contract::json`

mod common;

use std::sync::Arc;

use vt_agent::App;
use vt_agent::Config;
use vt_agent::FlowMode;
use vt_agent::{LineDefaults, Options};

// The allocator the binary uses (`src/main.rs`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let lines = env("VT_BENCH_BATCH_LINES", 4000);
    let concurrency = env("VT_BENCH_BATCH_CONCURRENCY", 256);
    let data = tempfile::tempdir().expect("tmp");
    let config = Config {
        data_dir: data.path().to_owned(),
        simulator: vt_agent::SimulatorSettings {
            notifications_per_second: Some(u32::MAX),
            ..Default::default()
        },
        ..Default::default()
    };
    let input: String = (0..lines)
        .map(|i| {
            format!(
                "{{\"cartao\": \"{}\", \"recarga\": {{\"valor\": 50, \"meio_pagamento\": {{\"tipo\": \"pix\"}}}}}}\n",
                3_000_000_000u64 + i as u64
            )
        })
        .collect();
    let app = App::start(&config, None, vt_store::Usage::Service)
        .await
        .expect("app");
    let service = Arc::new(app.service);
    let id = vt_agent::batch_id(None, input.as_bytes(), FlowMode::Full);
    let defaults = LineDefaults {
        job_id: id.clone(),
        politicas: config.vt.politicas.clone(),
        tenant: None,
    };
    let source =
        vt_agent::read_batch_source(input.as_bytes(), vt_agent::Format::Jsonl, &defaults).expect("lines");
    let job = vt_agent::Job::new(id, "bench", input.as_bytes(), source, FlowMode::Full);
    let (_stop, stop_rx) = tokio::sync::watch::channel(false);
    let options = Options {
        concurrency,
        ..Options::default()
    };
    let cpu = common::cpu();
    let summary = vt_agent::run_batch(&service, &job, options, stop_rx, |_, _| {})
        .await
        .expect("batch");
    let cpu = common::cpu() - cpu;
    assert_eq!(
        summary.counts.get("concluido"),
        Some(&lines),
        "every flow concluded"
    );
    let ms = |d: Option<std::time::Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1e3);
    println!(
        "batch: {lines} ten-stage flows, concurrency {concurrency}: {:.0} flows/s, {:.2} ms CPU per flow, p50 {:.1} ms, p99 {:.1} ms",
        summary.rate(),
        cpu.as_secs_f64() * 1e3 / lines as f64,
        ms(summary.quantile(0.5)),
        ms(summary.quantile(0.99)),
    );
}
