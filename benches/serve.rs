//! Reported figures (not asserted) for the message path:
//!
//! 1. **A turn's cost does not grow with the conversation**: zero-token balance turns in one
//!    conversation, CPU per turn (whole process: service, store, embedded simulator) and wall time, for
//!    turns 10–110, 1,000–1,100 and 4,900–5,000 — with the simulator served on loopback (the balance
//!    read an HTTP request, as to an operator; the simulator's side of it is this process's CPU too)
//!    and, on SQLite, in process (as `vt-agent serve` runs with no configuration).
//! 2. **HTTP turns**: `vt-agent serve` in process, clients on loopback, p50/p99 latency and turns/s with
//!    1, 50 and 200 conversations at once — closed loop (each conversation sends its next turn as soon
//!    as it has the reply: the saturation figure) and open loop (200 conversations each sending a turn
//!    every second, as people typing would: the latency a person sees at that load).
//!
//! Both on SQLite (a file, as in production) and — when `VT_BENCH_POSTGRES_URL` or
//! `VT_TEST_POSTGRES_URL` is set — on PostgreSQL.
//!
//! `cargo bench --bench serve`
#![allow(clippy::disallowed_methods)] // tests and benches convert JSON freely; see `vt_contract::json`

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use vt_agent::Config;
use vt_agent::{Inbound, Services};
use vt_connectors::systems::{SystemsConfig, VtSystems};
use vt_contract::context::Extensions;
use vt_engine::Participant;
use vt_simulators::systems::RunningSimulator;
use vt_store::Store;

use common::{cpu, simulator};

// The allocator the binary uses (`src/main.rs`): what a turn costs is what `serve` pays.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Where the service finds the operator's systems: the simulator on loopback, or in process.
#[derive(Clone, Copy, PartialEq)]
enum Systems {
    Http,
    InProcess,
}

async fn service(store: Arc<dyn Store>, systems: Systems) -> (Arc<Services>, RunningSimulator) {
    let sim = simulator().await;
    let config = Config::default();
    let client = match systems {
        Systems::Http => VtSystems::new(SystemsConfig::single(&sim.url)).expect("client"),
        Systems::InProcess => VtSystems::in_process(sim.simulator.local()),
    };
    let ext = Extensions::default().with(vt_domain::systems::SystemsPort::new(client));
    let engine = vt_agent::share(
        vt_agent::build_engine(&config, None, ext).expect("engine"),
        Some(store.clone()),
        config.recargas.clone(),
    );
    let service = vt_agent::build_service(&config, engine, store)
        .await
        .expect("service");
    (Arc::new(service), sim)
}

fn turn(conversation: &str) -> Inbound {
    Inbound {
        agent_id: "vt".into(),
        conversation_id: Some(conversation.into()),
        user: Participant::default(),
        text: "saldo do cartão 1234567890".into(),
        ..Default::default()
    }
}

async fn flat(label: &str, store: Arc<dyn Store>, systems: Systems) {
    let (service, _sim) = service(store.clone(), systems).await;
    let label = match systems {
        Systems::Http => label.to_owned(),
        Systems::InProcess => format!("{label}, simulator in process,"),
    };
    let conversation = format!("bench-flat-{}", uuid::Uuid::new_v4().simple());
    // What a turn asks of the store, counted over 100 turns (one after the other) before anything is
    // timed: queries — each a round trip (a hop to sqlx's SQLite worker thread, or to PostgreSQL),
    // however many statements it holds; `BEGIN` and `COMMIT` are not counted — and commits, on SQLite
    // each a sync of the WAL (`synchronous = FULL`).
    let (queries, commits) = (common::queries::count(), store.commits());
    common::queries::counting(true);
    for _ in 0..100 {
        service
            .messages()
            .handle(turn(&format!("{conversation}-contada")))
            .await
            .expect("turn");
    }
    common::queries::counting(false);
    let per_turn = |n: u64| n as f64 / 100.0;
    let asks = format!(
        "{:.1} queries/turn, {}",
        per_turn(common::queries::count() - queries),
        match (commits, store.commits()) {
            (Some(before), Some(after)) => format!("{:.1} WAL syncs/turn", per_turn(after - before)),
            _ => "commits on the server".to_owned(),
        }
    );
    let windows = [(10, 110), (1_000, 1_100), (4_900, 5_000)];
    let mut marks = Vec::new();
    for i in 0..5_000 {
        if windows.iter().any(|(from, to)| i == *from || i == *to) {
            marks.push((i, cpu(), Instant::now()));
        }
        service
            .messages()
            .handle(turn(&conversation))
            .await
            .expect("turn");
    }
    marks.push((5_000, cpu(), Instant::now()));
    for (from, to) in windows {
        let at = |n| marks.iter().find(|m| m.0 == n).expect("mark");
        let (a, b) = (at(from), at(to));
        let n = f64::from(to - from);
        println!(
            "{label:<10} turns {from:>5}–{to:<5}  {:>6.3} ms CPU/turn  {:>6.3} ms wall/turn  {asks}",
            (b.1 - a.1).as_secs_f64() * 1e3 / n,
            (b.2 - a.2).as_secs_f64() * 1e3 / n
        );
    }
}

async fn http(label: &str, store: Arc<dyn Store>) {
    let (service, _sim) = service(store.clone(), Systems::Http).await;
    let state = vt_agent::AppState::new(
        service,
        vt_agent::CHAT_AGENT,
        vt_agent::HttpConfig {
            rate_per_minute: u32::MAX,
            max_turns_in_flight: 1_000,
            ..Default::default()
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let server = tokio::spawn(vt_agent::serve(listener, state, std::future::pending()));
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .expect("client");
    let body = serde_json::json!({"text": "saldo do cartão 1234567890", "user": {"id": "u"}});
    for conversations in [1usize, 50, 200] {
        let turns = (2_000 / conversations).max(10);
        let before = store.commits();
        let m = load(&client, &url, &body, conversations, turns, None).await;
        m.print(
            label,
            &format!("{conversations:>3} at once"),
            syncs(before, store.as_ref()),
        );
    }
    // Open loop: 200 conversations, one turn a second each, phases spread over the second.
    let before = store.commits();
    let m = load(&client, &url, &body, 200, 10, Some(Duration::from_secs(1))).await;
    m.print(label, "200 people, 1 turn/s each", syncs(before, store.as_ref()));
    server.abort();
}

/// Latencies of a load, with its wall and CPU time.
struct Measured {
    latencies: Vec<Duration>,
    wall: Duration,
    cpu: Duration,
}

impl Measured {
    fn print(mut self, label: &str, what: &str, syncs: Option<u64>) {
        self.latencies.sort();
        let n = self.latencies.len();
        let pct = |p: f64| self.latencies[((n as f64 * p) as usize).min(n - 1)].as_secs_f64() * 1e3;
        let syncs = syncs.map_or_else(String::new, |s| {
            format!("  {:.2} WAL syncs/turn", s as f64 / n as f64)
        });
        println!(
            "{label:<10} HTTP {what}  {n:>5} turns  p50 {:>7.2} ms  p99 {:>7.2} ms  {:>7.0} turns/s  {:>6.3} ms CPU/turn{syncs}",
            pct(0.50),
            pct(0.99),
            n as f64 / self.wall.as_secs_f64(),
            self.cpu.as_secs_f64() * 1e3 / n as f64,
        );
    }
}

/// The commits since `before`, where the store counts them.
fn syncs(before: Option<u64>, store: &dyn Store) -> Option<u64> {
    Some(store.commits()? - before?)
}

/// `conversations` conversations sending `turns` turns each: back to back (`pace: None`, closed loop)
/// or one every `pace`, their phases spread over it (open loop).
async fn load(
    client: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
    conversations: usize,
    turns: usize,
    pace: Option<Duration>,
) -> Measured {
    let run = uuid::Uuid::new_v4().simple().to_string();
    let started = Instant::now();
    let cpu_before = cpu();
    let workers = (0..conversations).map(|c| {
        let (client, body) = (client.clone(), body.clone());
        let path = format!("{url}/v1/conversations/b-{run}-{c}/messages");
        tokio::spawn(async move {
            let mut ticks = pace.map(|every| {
                let phase = every * c as u32 / conversations as u32;
                tokio::time::interval_at(tokio::time::Instant::now() + phase, every)
            });
            let mut latencies = Vec::with_capacity(turns);
            for _ in 0..turns {
                if let Some(t) = ticks.as_mut() {
                    t.tick().await;
                }
                let t = Instant::now();
                let r = client.post(&path).json(&body).send().await.expect("request");
                assert!(r.status().is_success(), "{}", r.status());
                r.bytes().await.expect("body");
                latencies.push(t.elapsed());
            }
            latencies
        })
    });
    let latencies = futures::future::join_all(workers)
        .await
        .into_iter()
        .flat_map(|r| r.expect("join"))
        .collect();
    Measured {
        latencies,
        wall: started.elapsed(),
        cpu: cpu() - cpu_before,
    }
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().expect("tmp");
    let sqlite = || async {
        vt_store::open(
            None,
            &dir.path().join(uuid::Uuid::new_v4().simple().to_string()),
            vt_store::Usage::Service,
        )
        .await
        .expect("sqlite")
    };
    flat("SQLite", sqlite().await, Systems::Http).await;
    flat("SQLite", sqlite().await, Systems::InProcess).await;
    http("SQLite", sqlite().await).await;
    let pg = std::env::var("VT_BENCH_POSTGRES_URL")
        .or_else(|_| std::env::var("VT_TEST_POSTGRES_URL"))
        .ok()
        .filter(|u| !u.is_empty());
    match pg {
        Some(url) => {
            let store = || async {
                vt_store::open(Some(&url), dir.path(), vt_store::Usage::Service)
                    .await
                    .expect("postgres")
            };
            flat("PostgreSQL", store().await, Systems::Http).await;
            http("PostgreSQL", store().await).await;
        }
        None => println!("PostgreSQL: set VT_BENCH_POSTGRES_URL to measure it too"),
    }
}
