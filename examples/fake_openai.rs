//! A fake OpenAI-compatible server for the peer benchmark (`examples/peer_bench.rs`) and the agent
//! frameworks it is compared with: `POST /v1/chat/completions` answers with a call of the one tool
//! `consultar_saldo` until the request carries three tool results, then with the final text. Stateless:
//! the answer depends only on the request, so any number of clients and conversations can share it.
//! `GET /stats` tells how many completions it served.
//!
//! ```text
//! cargo run --release --example fake_openai -- --port 8765
//! ```
#![allow(clippy::disallowed_methods)] // tests and benches convert JSON freely; see `vt_contract::json`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Json;
use axum::extract::State;
use axum::routing::{get, post};
use serde_json::{Value, json};

/// The final answer every conversation ends with (unless `--final-text` says another).
pub const FINAL_TEXT: &str = "O saldo do cartão é R$ 50,00.";
static FINAL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
/// Tool calls per conversation before the final answer.
pub const TOOL_CALLS: usize = 3;

async fn completion(State(calls): State<Arc<AtomicU64>>, Json(request): Json<Value>) -> Json<Value> {
    let n = calls.fetch_add(1, Ordering::Relaxed);
    let messages = request["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let tool_results = messages.iter().filter(|m| m["role"] == "tool").count();
    let prompt_tokens: usize = messages.iter().map(|m| m.to_string().len().div_ceil(4)).sum();
    let message = if tool_results < TOOL_CALLS {
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": format!("call_{n}"), "type": "function",
            "function": {"name": "consultar_saldo", "arguments": "{\"cartao\":\"1234567890\"}"}
        }]})
    } else {
        json!({"role": "assistant", "content": FINAL.get().map_or(FINAL_TEXT, String::as_str)})
    };
    let finish = if tool_results < TOOL_CALLS {
        "tool_calls"
    } else {
        "stop"
    };
    Json(json!({
        "id": format!("chatcmpl-{n}"),
        "object": "chat.completion",
        "created": 1_790_000_000,
        "model": request["model"].as_str().unwrap_or("fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 12, "total_tokens": prompt_tokens + 12}
    }))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut port = 8765u16;
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--port", Some(p)) => port = p.parse().map_err(std::io::Error::other)?,
            ("--final-text", Some(t)) => {
                let _ = FINAL.set(t);
            }
            _ => {
                eprintln!("uso: fake_openai [--port PORTA] [--final-text TEXTO]");
                std::process::exit(2);
            }
        }
    }
    let calls = Arc::new(AtomicU64::new(0));
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(completion))
        .route("/chat/completions", post(completion))
        .route(
            "/stats",
            get(|State(c): State<Arc<AtomicU64>>| async move {
                Json(json!({"calls": c.load(Ordering::Relaxed)}))
            }),
        )
        .with_state(calls);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    eprintln!("fake OpenAI em http://{}/v1", listener.local_addr()?);
    axum::serve(listener, app).await
}
