//! A closed-loop HTTP load on a running `vt-agent serve`, as an outside measure takes it: C keep-alive
//! connections, each its own conversation, each sending its next message as soon as it has the
//! answer; a warm-up, then a timed window. One JSON line at the end: connections, turns, turns_per_s,
//! p50/p99/max latency in ms, errors, this client's CPU per turn and — with `--pid` — the server's
//! CPU per turn (from `/proc/<pid>/stat`, the whole process).
//!
//! The client is a bare HTTP/1.1 writer and reader on tokio's current-thread runtime (a prebuilt
//! request per connection, `content-length` framing), so that on its own CPU it is not the limit.
//!
//! ```text
//! cargo build --release --bin vt-agent --example http_load
//! scripts/bench-http.sh            # serve on CPU 0, this on CPU 1, 200 conversations, 3 s + 20 s
//! ```
#![allow(clippy::disallowed_methods)] // a bench client: plain timers and JSON

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

struct Options {
    addr: String,
    connections: usize,
    warmup: Duration,
    seconds: Duration,
    text: String,
    pid: Option<u32>,
}

fn options() -> Options {
    let mut o = Options {
        addr: "127.0.0.1:8080".into(),
        connections: 200,
        warmup: Duration::from_secs(3),
        seconds: Duration::from_secs(20),
        text: "saldo do cartão 1234567890".into(),
        pid: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            usage("");
        }
        let value = args
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        let number = || {
            value
                .parse::<u64>()
                .unwrap_or_else(|_| usage(&format!("{flag}: a whole number")))
        };
        match flag.as_str() {
            "--addr" => o.addr = value.clone(),
            "--connections" => o.connections = usize::try_from(number().max(1)).unwrap_or(1),
            "--warmup" => o.warmup = Duration::from_secs(number()),
            "--seconds" => o.seconds = Duration::from_secs(number().max(1)),
            "--text" => o.text = value.clone(),
            "--pid" => o.pid = Some(u32::try_from(number()).unwrap_or_else(|_| usage("--pid"))),
            _ => usage(&format!("unknown option {flag}")),
        }
    }
    o
}

fn usage(why: &str) -> ! {
    if !why.is_empty() {
        eprintln!("error: {why}");
    }
    eprintln!(
        "usage: http_load [--addr HOST:PORT (127.0.0.1:8080)] [--connections C (200)] \
         [--warmup S (3)] [--seconds S (20)] [--text T] [--pid SERVER_PID]"
    );
    std::process::exit(2)
}

/// One connection's record: latencies of the turns answered inside the timed window, errors.
#[derive(Default)]
struct Record {
    latencies: Vec<Duration>,
    errors: usize,
    first_error: Option<String>,
}

fn request(addr: &str, conversation: &str, text: &str) -> Vec<u8> {
    let body = serde_json::json!({"text": text, "user": {"id": conversation}}).to_string();
    let mut r = format!(
        "POST /v1/conversations/{conversation}/messages HTTP/1.1\r\nhost: {addr}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body.as_bytes());
    r
}

/// Reads one response; `Ok(status)` once its `content-length` bytes are in.
async fn response(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Result<u16, String> {
    buffer.clear();
    let mut chunk = [0u8; 8192];
    loop {
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the server closed the connection".into());
        }
        buffer.extend_from_slice(&chunk[..n]);
        let Some(head_end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
        let status = head
            .get(9..12)
            .and_then(|s| s.parse().ok())
            .ok_or("no status line")?;
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or("an answer without content-length")?;
        if buffer.len() >= head_end + 4 + length {
            return Ok(status);
        }
    }
}

async fn connection(o: &Options, i: usize, run: &str, from: Instant, until: Instant) -> Record {
    let mut record = Record::default();
    let fail = |record: &mut Record, why: String| {
        record.errors += 1;
        record.first_error.get_or_insert(why);
    };
    let mut stream = match TcpStream::connect(&o.addr).await {
        Ok(s) => s,
        Err(e) => {
            fail(&mut record, format!("connect: {e}"));
            return record;
        }
    };
    let _ = stream.set_nodelay(true);
    let request = request(&o.addr, &format!("load-{run}-{i}"), &o.text);
    let mut buffer = Vec::with_capacity(4096);
    while Instant::now() < until {
        let started = Instant::now();
        if let Err(e) = stream.write_all(&request).await {
            fail(&mut record, format!("write: {e}"));
            return record;
        }
        match response(&mut stream, &mut buffer).await {
            Ok(200) if started >= from => record.latencies.push(started.elapsed()),
            Ok(200) => {}
            Ok(status) => fail(&mut record, format!("status {status}")),
            Err(e) => {
                fail(&mut record, e);
                return record;
            }
        }
    }
    record
}

/// utime + stime of a process, from `/proc/<pid>/stat` (clock ticks of 10 ms).
fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: count fields after its end.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn own_cpu() -> Duration {
    process_cpu(std::process::id()).unwrap_or_default()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let o = options();
    let run = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let start = Instant::now();
    let from = start + o.warmup;
    let until = from + o.seconds;
    let o = &o;
    let connections = (0..o.connections).map(|i| connection(o, i, &run, from, until));
    let timed = async {
        tokio::time::sleep_until(from.into()).await;
        (own_cpu(), o.pid.and_then(process_cpu))
    };
    let (records, (client_before, server_before)) =
        futures::future::join(futures::future::join_all(connections), timed).await;
    let (client_after, server_after) = (own_cpu(), o.pid.and_then(process_cpu));
    // The window ends when the last turn begun inside it is answered.
    let wall = start.elapsed() - o.warmup;
    let mut latencies: Vec<Duration> = records.iter().flat_map(|r| r.latencies.clone()).collect();
    latencies.sort();
    let turns = latencies.len();
    let pct = |p: f64| {
        latencies
            .get(((turns as f64 * p) as usize).min(turns.saturating_sub(1)))
            .map_or(0.0, |d| round(d.as_secs_f64() * 1e3, 2))
    };
    let errors: usize = records.iter().map(|r| r.errors).sum();
    let per_turn = |d: Duration| round(d.as_secs_f64() * 1e3 / turns.max(1) as f64, 3);
    let line = serde_json::json!({
        "connections": o.connections,
        "seconds": round(wall.as_secs_f64(), 2),
        "turns": turns,
        "turns_per_s": round(turns as f64 / wall.as_secs_f64(), 0),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "max_ms": pct(1.0),
        "errors": errors,
        "first_error": records.iter().find_map(|r| r.first_error.clone()),
        "client_cpu_ms_per_turn": per_turn(client_after - client_before),
        "server_cpu_ms_per_turn": server_before.zip(server_after).map(|(b, a)| per_turn(a - b)),
    });
    println!("{line}");
    if errors > 0 || turns == 0 {
        std::process::exit(1);
    }
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}
