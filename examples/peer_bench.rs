//! The agent loop's own cost, by the peer benchmark contract shared with LangGraph, the OpenAI Agents
//! SDK and Rig: against one fake OpenAI-compatible server, each conversation is "user message → the
//! model calls the single tool `consultar_saldo(cartao: string)` three times, one call per model turn →
//! final answer". W conversations warm up untimed, then M are timed, C at once. One JSON line at the
//! end: peer, conversations, llm_calls, wall_s, turns_per_s, ms_per_turn, cpu_ms_per_turn, peak_rss_mb,
//! ok (every conversation ended with the model's final text, the tool ran 3×M times, 4×M model calls).
//! CPU and peak RSS come from getrusage, for this process only (the server is another process).
//!
//! ```text
//! cargo build --release --example fake_openai --example peer_bench
//! target/release/examples/fake_openai --port 8765 &
//! target/release/examples/peer_bench --base-url http://127.0.0.1:8765/v1 --conversations 2000 --concurrency 1 --warmup 200
//! ```
//!
//! Without `--base-url` it starts `fake_openai` (built beside it) on a free port itself.
//!
//! Every run also measures the machine's floor beside the engine: the same 4×M round trips to the same
//! server by one blocking socket that writes a fixed request and reads the reply, with no HTTP client,
//! JSON or agent loop — what every peer pays before its own work. The line gives it as
//! `floor_cpu_ms_per_turn` and the distance as `times_floor`. `--floor` measures only the floor (its
//! line says `"peer": "raw-socket"`); `--no-floor` only the engine.
//!
//! On a virtual machine most of that floor is waking a process on the other virtual CPU; pinning the
//! bench and its server to one CPU takes it away, for any peer alike (`fake_openai` inherits it):
//!
//! ```text
//! taskset -c 1 target/release/examples/peer_bench --conversations 2000 --concurrency 1 --warmup 200
//! ```
#![allow(clippy::disallowed_methods)] // tests and benches convert JSON freely; see `vt_contract::json`

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt as _;
use schemars::JsonSchema;
use serde::Deserialize;
use vt_contract::{Action, ActionContext, ActionError, ActionRegistry, ActionResponse, ResponseToAgent};
use vt_engine::Engine;
use vt_engine::EngineConfig;
use vt_engine::Participant;
use vt_engine::conversation::Reply;
use vt_engine::llm::ChatMessage;
use vt_engine::llm::LlmProvider;
use vt_engine::llm::ProviderSettings;
use vt_engine::llm::openai::OpenAiProvider;
use vt_engine::llm::redacted::RedactedProvider;
use vt_engine::prompts::Prompts;
use vt_engine::skills::Catalog;
use vt_engine::skills::SkillDef;

const TOOL_CALLS: usize = 3;

// The allocator the product's binary uses (`src/main.rs`): the loop is measured as it runs.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// O número do cartão.
    cartao: String,
}

/// The trivial tool: counts its calls and answers a fixed balance.
struct ConsultarSaldo(Arc<AtomicUsize>);

#[async_trait]
impl Action for ConsultarSaldo {
    type Args = Args;
    const NAME: &'static str = "consultar_saldo";
    const DESCRIPTION: &'static str = "Consulta o saldo de um cartão.";
    async fn call(&self, _ctx: &ActionContext, args: Args) -> Result<ActionResponse, ActionError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(ResponseToAgent::new(format!("saldo do cartão {}: R$ 50,00", args.cartao.len())).into())
    }
}

struct Options {
    base_url: Option<String>,
    floor: bool,
    no_floor: bool,
    conversations: usize,
    concurrency: usize,
    warmup: usize,
}

fn options() -> Options {
    let mut o = Options {
        base_url: None,
        floor: false,
        no_floor: false,
        conversations: 1000,
        concurrency: 1,
        warmup: 100,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--floor" || flag == "--no-floor" {
            o.floor |= flag == "--floor";
            o.no_floor |= flag == "--no-floor";
            continue;
        }
        let value = args.next().unwrap_or_else(|| usage(&format!("{flag} sem valor")));
        let number = || {
            value
                .parse::<usize>()
                .unwrap_or_else(|_| usage(&format!("{flag}: um número")))
        };
        match flag.as_str() {
            "--base-url" => o.base_url = Some(value.clone()),
            "--conversations" => o.conversations = number(),
            "--concurrency" => o.concurrency = number().max(1),
            "--warmup" => o.warmup = number(),
            _ => usage(&format!("opção desconhecida {flag}")),
        }
    }
    o
}

fn usage(why: &str) -> ! {
    eprintln!(
        "erro: {why}\nuso: peer_bench [--base-url URL] [--conversations M] [--concurrency C] [--warmup W] [--floor | --no-floor]"
    );
    std::process::exit(2)
}

fn engine(base_url: &str, calls: Arc<AtomicUsize>) -> Engine {
    let prompts = Prompts::from_sources([(
        "saldo.md".to_owned(),
        "Você consulta saldos de vale-transporte com a ferramenta consultar_saldo.".to_owned(),
    )])
    .expect("prompt");
    let mut registry = ActionRegistry::new();
    registry.register(ConsultarSaldo(calls)).expect("register");
    let skill = SkillDef {
        agent: "peer".into(),
        name: "saldo".into(),
        order: 1,
        description: "consulta saldos".into(),
        prompt: "saldo.md".into(),
        actions: vec!["consultar_saldo".into()],
        deterministic: false,
        next: None,
    };
    let catalog = Catalog::from_defs(vec![skill], &prompts, &registry).expect("catalog");
    let provider = OpenAiProvider::new(ProviderSettings {
        base_url: base_url.to_owned(),
        model: "fake".into(),
        api_key: Some("sk-peer-bench".into()),
        temperature: None,
        max_tokens: 256,
        timeout: Duration::from_secs(30),
    })
    .expect("provider");
    // As the product runs it: every request passes the card masking first.
    let llm = RedactedProvider::wrap(Arc::new(provider), vt_domain::vt::card::mask_cards_in);
    // The contract's model asks for the same call three times and every peer runs it each time.
    let config = EngineConfig {
        run_repeated_calls: true,
        ..EngineConfig::default()
    };
    Engine::new(catalog, prompts, registry, config).with_llm(Some(llm as Arc<dyn LlmProvider>))
}

/// One conversation: (model calls, ended with the final text).
async fn conversation(engine: &Engine, i: usize) -> (usize, bool) {
    let who = Participant {
        user_id: format!("u{i}"),
        user_login: format!("u{i}"),
        channel: "bench".into(),
    };
    let Ok(mut conv) = engine.start_conversation("peer", who) else {
        return (0, false);
    };
    match engine
        .run_turn(&mut conv, "Qual é o saldo do meu cartão 1234567890?")
        .await
    {
        Ok(outcome) => {
            // Whatever the server's model says last, the conversation must end with it: a final
            // message of text and no tool calls, given back as the reply, and no error on the turn.
            let last = outcome.messages.iter().rev().find_map(|m| match m {
                ChatMessage::Assistant {
                    content: Some(text),
                    tool_calls,
                } if tool_calls.is_empty() && !text.is_empty() => Some(text.as_str()),
                _ => None,
            });
            let ended =
                outcome.execution.error.is_none() && last == Some(Reply::join(&outcome.replies).as_str());
            (outcome.execution.model_calls.len(), ended)
        }
        Err(_) => (0, false),
    }
}

async fn run(engine: &Engine, n: usize, concurrency: usize) -> (usize, usize) {
    futures::stream::iter(0..n)
        .map(|i| conversation(engine, i))
        .buffer_unordered(concurrency)
        .fold((0, 0), |(calls, ok), (c, good)| async move {
            (calls + c, ok + usize::from(good))
        })
        .await
}

fn rusage() -> (Duration, f64) {
    use nix::sys::resource::{UsageWho, getrusage};
    let u = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let t = |tv: nix::sys::time::TimeVal| {
        Duration::from_micros(tv.tv_sec() as u64 * 1_000_000 + tv.tv_usec() as u64)
    };
    // Linux reports ru_maxrss in KiB.
    (t(u.user_time()) + t(u.system_time()), u.max_rss() as f64 / 1024.0)
}

/// Starts `fake_openai` from beside this binary on a free port.
fn own_server() -> (std::process::Child, String) {
    let exe = std::env::current_exe().expect("exe");
    let server = exe.with_file_name("fake_openai");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let child = std::process::Command::new(&server)
        .args(["--port", &port.to_string()])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            usage(&format!(
                "{} não pôde ser iniciado ({e}): cargo build --release --example fake_openai",
                server.display()
            ))
        });
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "fake_openai did not start"
        );
        // A plain program waiting for a server, outside any runtime.
        #[allow(clippy::disallowed_methods)]
        std::thread::sleep(Duration::from_millis(10));
    }
    (child, format!("http://127.0.0.1:{port}/v1"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let o = options();
    let (server, base_url) = match o.base_url.clone() {
        Some(url) => (None, url),
        None => {
            let (child, url) = own_server();
            (Some(child), url)
        }
    };
    let m = o.conversations;
    let tools = Arc::new(AtomicUsize::new(0));
    let engine = engine(&base_url, tools.clone());
    let engine_line = if o.floor {
        None
    } else {
        run(&engine, o.warmup, o.concurrency).await;
        tools.store(0, Ordering::Relaxed);
        let (measured, (llm_calls, finished)) = measure(|| run(&engine, m, o.concurrency)).await;
        let ok = finished == m
            && tools.load(Ordering::Relaxed) == TOOL_CALLS * m
            && llm_calls == (TOOL_CALLS + 1) * m;
        Some((measured.per(llm_calls), llm_calls, ok))
    };
    // The floor: as many round trips, by a bare socket, to the same server, right after.
    let floor = (o.floor || !o.no_floor).then(|| {
        let mut raw = RawClient::connect(&base_url);
        (0..(TOOL_CALLS + 1) * o.warmup).for_each(|_| raw.round_trip());
        let calls = (TOOL_CALLS + 1) * m;
        let started = (rusage().0, Instant::now());
        (0..calls).for_each(|_| raw.round_trip());
        Measured::since(started).per(calls)
    });
    if let Some(mut server) = server {
        let _ = server.kill();
        let _ = server.wait();
    }
    let (peak_rss_mb, line) = (
        rusage().1,
        match (engine_line, floor) {
            (Some((engine, llm_calls, ok)), floor) => {
                let mut line = engine.json("vt-agent", m, llm_calls, ok);
                if let Some(floor) = floor {
                    line["floor_cpu_ms_per_turn"] = round(floor.cpu_ms, 4).into();
                    line["times_floor"] = round(engine.cpu_ms / floor.cpu_ms, 2).into();
                }
                line
            }
            (None, Some(floor)) => floor.json("raw-socket", m, (TOOL_CALLS + 1) * m, true),
            (None, None) => unreachable!("--floor measures the floor"),
        },
    );
    let mut line = line;
    line["peak_rss_mb"] = round(peak_rss_mb, 1).into();
    println!("{line}");
    if line["ok"] != true {
        std::process::exit(1);
    }
}

/// What a timed run cost: wall and CPU time, over its model calls.
struct Measured {
    wall: Duration,
    cpu: Duration,
}

/// Per model call.
struct PerCall {
    wall_s: f64,
    calls: usize,
    cpu_ms: f64,
}

impl Measured {
    fn since((cpu, started): (Duration, Instant)) -> Self {
        Self {
            wall: started.elapsed(),
            cpu: rusage().0 - cpu,
        }
    }

    fn per(&self, calls: usize) -> PerCall {
        PerCall {
            wall_s: self.wall.as_secs_f64(),
            calls,
            cpu_ms: self.cpu.as_secs_f64() * 1e3 / calls.max(1) as f64,
        }
    }
}

impl PerCall {
    fn json(&self, peer: &str, conversations: usize, llm_calls: usize, ok: bool) -> serde_json::Value {
        serde_json::json!({
            "peer": peer,
            "conversations": conversations,
            "llm_calls": llm_calls,
            "wall_s": round(self.wall_s, 4),
            "turns_per_s": round(self.calls as f64 / self.wall_s, 1),
            "ms_per_turn": round(self.wall_s * 1e3 / self.calls.max(1) as f64, 4),
            "cpu_ms_per_turn": round(self.cpu_ms, 4),
            "ok": ok,
        })
    }
}

/// Runs `work`, timing it.
async fn measure<F, Fut, T>(work: F) -> (Measured, T)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let started = (rusage().0, Instant::now());
    let out = work().await;
    (Measured::since(started), out)
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

/// `--floor`: one blocking connection sending the same request again and again.
struct RawClient {
    stream: std::net::TcpStream,
    request: Vec<u8>,
    buffer: Vec<u8>,
}

impl RawClient {
    fn connect(base_url: &str) -> Self {
        let url = reqwest::Url::parse(base_url).unwrap_or_else(|_| usage("--base-url: uma URL http://"));
        let (host, port) = (url.host_str().unwrap_or("127.0.0.1"), url.port().unwrap_or(80));
        let stream = std::net::TcpStream::connect((host, port)).expect("connect to the fake server");
        stream.set_nodelay(true).expect("nodelay");
        // A first model call of the contract's conversation, as the engine sends it.
        let body = serde_json::json!({
            "model": "fake",
            "messages": [
                {"role": "system", "content": "Você consulta saldos de vale-transporte com a ferramenta consultar_saldo."},
                {"role": "user", "content": "Qual é o saldo do meu cartão ****7890?"}
            ],
            "tools": [{"type": "function", "function": {"name": "consultar_saldo",
                "description": "Consulta o saldo de um cartão.", "strict": true,
                "parameters": {"type": "object", "properties": {"cartao": {"type": "string"}},
                    "required": ["cartao"], "additionalProperties": false}}}],
            "tool_choice": "auto",
            "max_tokens": 256
        })
        .to_string();
        let path = format!("{}/chat/completions", url.path().trim_end_matches('/'));
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n\
             authorization: Bearer sk-peer-bench\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body.as_bytes());
        Self {
            stream,
            request,
            buffer: Vec::with_capacity(4096),
        }
    }

    /// Writes the request and reads one whole response (headers, then `content-length` bytes).
    fn round_trip(&mut self) {
        use std::io::{Read, Write};
        self.stream.write_all(&self.request).expect("write");
        self.buffer.clear();
        let mut chunk = [0u8; 4096];
        loop {
            let n = self.stream.read(&mut chunk).expect("read");
            assert!(n > 0, "the fake server closed the connection");
            self.buffer.extend_from_slice(&chunk[..n]);
            let Some(head_end) = self.buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8_lossy(&self.buffer[..head_end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .expect("a content-length");
            if self.buffer.len() >= head_end + 4 + length {
                return;
            }
        }
    }
}
