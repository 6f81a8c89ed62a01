//! Late messages pushed to an HTTP integrator (step 24): `serve` with `[[http.webhooks]]` signs each
//! delivery as Standard Webhooks says; a receiver that checks the signature itself gets each late
//! message once, in order, a failed delivery retried under the same `webhook-id`, and again after a
//! restart; `GET /v1/conversations/{id}/events` streams the same messages as Server-Sent Events.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// What the receiver took: `(webhook-id, body)`, and how many deliveries it refused on purpose.
#[derive(Default)]
struct Received {
    taken: Vec<(String, Value)>,
    refused: usize,
    forged: usize,
}

/// Standard Webhooks' check, written here from its specification (not the product's code): one of
/// the `v1,` signatures is the HMAC-SHA256 of `id.timestamp.body` under the secret's key.
fn verifies(headers: &HeaderMap, body: &[u8]) -> bool {
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (id, ts, sigs) = (
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
    );
    let key = base64::engine::general_purpose::STANDARD
        .decode(SECRET.trim_start_matches("whsec_"))
        .expect("key");
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&key).expect("mac");
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(body);
    let expected = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    let fresh = ts
        .parse::<i64>()
        .is_ok_and(|t| (chrono::Utc::now().timestamp() - t).abs() < 300);
    fresh && sigs.split(' ').any(|s| s == format!("v1,{expected}"))
}

/// A receiver on loopback: it refuses the first delivery it gets with 503 (the sender must try again),
/// then takes each verified one.
async fn receiver() -> (String, Arc<Mutex<Received>>) {
    let received = Arc::new(Mutex::new(Received::default()));
    let state = received.clone();
    let app = axum::Router::new().route(
        "/vt",
        axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
            let state = state.clone();
            async move {
                let mut r = state.lock().expect("lock");
                if !verifies(&headers, &body) {
                    r.forged += 1;
                    return StatusCode::UNAUTHORIZED;
                }
                if r.refused == 0 {
                    r.refused += 1;
                    return StatusCode::SERVICE_UNAVAILABLE;
                }
                let id = headers["webhook-id"].to_str().expect("id").to_owned();
                r.taken.push((id, serde_json::from_slice(&body).expect("json")));
                StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/vt", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

/// `serve` on `data` with the embedded simulator (paying only when told) and the webhook at `url`.
fn serve(data: &tempfile::TempDir, config: &std::path::Path) -> (std::process::Child, String) {
    let mut cmd = crate::cli::vt_agent_in(data);
    cmd.env("VT_SIMULATOR_PIX_PAGAR_APOS_SEGUNDOS", "0")
        .env("VT_CONFIG", config)
        .args(["serve", "--addr", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let url = crate::support::listening_on(&mut stderr);
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, url)
}

fn stop(mut child: std::process::Child) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid")),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
}

/// Asks for a Pix recharge in `conv` over HTTP, confirms it and pays the code; the code.
async fn pix_recharge_paid(http: &reqwest::Client, url: &str, conv: &str) -> String {
    let say = |text: &str| {
        http.post(format!("{url}/v1/conversations/{conv}/messages"))
            .json(&serde_json::json!({"text": text, "user": {"id": "u-webhook"}}))
            .send()
    };
    say("recarregar 20 no cartão 1234567890 via pix")
        .await
        .expect("ask");
    let yes: Value = say("sim").await.expect("yes").json().await.expect("json");
    let code = yes["replies"]
        .as_array()
        .and_then(|r| r.iter().find_map(|r| r["pix"]["copia_e_cola"].as_str()))
        .unwrap_or_else(|| panic!("a code: {yes}"))
        .to_owned();
    let txid = &code.split("/qr/v2/").nth(1).expect("location")[..34];
    let paid = http
        .post(format!("{url}/_simulador/pix/{txid}/pagar"))
        .send()
        .await
        .expect("pay");
    assert_eq!(paid.status(), 200);
    code
}

async fn wait_for(received: &Arc<Mutex<Received>>, n: usize) -> Vec<(String, Value)> {
    for _ in 0..200 {
        let taken = received.lock().expect("lock").taken.clone();
        if taken.len() >= n {
            // A little longer: a duplicate would arrive now.
            tokio::time::sleep(Duration::from_millis(500)).await;
            return received.lock().expect("lock").taken.clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "fewer than {n} deliveries: {:?}",
        received.lock().expect("lock").taken
    );
}

/// Reads `response`'s event stream until `n` events came (or the time ran out): their ids and data.
async fn events(mut response: reqwest::Response, n: usize) -> Vec<(String, Value)> {
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut found = Vec::new();
    while found.len() < n {
        let chunk = tokio::time::timeout_at(deadline, response.chunk())
            .await
            .expect("events in time")
            .expect("stream")
            .expect("open");
        text.push_str(&String::from_utf8_lossy(&chunk));
        found = text
            .split("\n\n")
            .filter(|block| block.contains("data:"))
            .filter_map(|block| {
                let line = |p: &str| {
                    block
                        .lines()
                        .find_map(|l| l.strip_prefix(p))
                        .map(str::trim)
                        .map(str::to_owned)
                };
                Some((line("id:")?, serde_json::from_str(&line("data:")?).ok()?))
            })
            .collect();
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_messages_reach_the_webhook_signed_once_in_order_across_a_restart_and_the_event_stream() {
    let (hook, received) = receiver().await;
    let data = tempfile::tempdir().expect("tmp");
    let config = data.path().join("vt-agent.toml");
    std::fs::write(
        &config,
        format!(
            "[outbox.retry]\nattempts = 5\nbackoff_ms = 200\n\n[[http.webhooks]]\ntenant = \"default\"\nurl = \"{hook}\"\nsecrets = [\"{SECRET}\"]\n"
        ),
    )
    .expect("config");
    let (child, url) = serve(&data, &config);
    let http = reqwest::Client::new();
    // The conversation exists once its first message is in: then a client holds its event stream.
    http.post(format!("{url}/v1/conversations/c-webhook/messages"))
        .json(&serde_json::json!({"text": "oi", "user": {"id": "u-webhook"}}))
        .send()
        .await
        .expect("hello");
    let stream = http
        .get(format!("{url}/v1/conversations/c-webhook/events"))
        .send()
        .await
        .expect("events");
    assert_eq!(stream.status(), 200);
    assert!(
        stream.headers()["content-type"]
            .to_str()
            .expect("type")
            .starts_with("text/event-stream")
    );
    let code = pix_recharge_paid(&http, &url, "c-webhook").await;
    let first = wait_for(&received, 1).await;
    assert_eq!(
        first.len(),
        1,
        "the receipt, once, after one refused delivery: {first:?}"
    );
    let receipt = first[0].1["data"]["text"].as_str().expect("text").to_owned();
    assert!(
        receipt.contains("Pagamento recebido") && receipt.contains("****7890"),
        "{receipt}"
    );
    assert!(!first[0].1.to_string().contains("1234567890"), "the card masked");
    assert_eq!(first[0].1["type"], "message.created");
    assert_eq!(first[0].1["data"]["conversation_id"], "c-webhook");
    let streamed = events(stream, 1).await;
    assert_eq!(
        streamed[0].1["data"]["text"],
        receipt.as_str(),
        "the stream has the same message"
    );
    // Only late messages: the turn's own replies (the code among them) came in the answers.
    assert!(!streamed.iter().any(|(_, e)| e["data"]["text"] == code.as_str()));

    // A restart: what is said after it is pushed too, and nothing before it again.
    stop(child);
    let (child, url) = serve(&data, &config);
    pix_recharge_paid(&http, &url, "c-webhook").await;
    let all = wait_for(&received, 2).await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert_ne!(all[0].0, all[1].0, "each delivery its own webhook-id");
    let ids: Vec<i64> = all
        .iter()
        .map(|(id, _)| id.trim_start_matches("msg_").parse().expect("id"))
        .collect();
    assert!(ids[0] < ids[1], "in order: {ids:?}");
    assert_eq!(
        received.lock().expect("lock").forged,
        0,
        "every delivery verified"
    );
    // A client that lost its connection resumes after the last event it got, with no duplicate.
    let resumed = http
        .get(format!("{url}/v1/conversations/c-webhook/events"))
        .header("last-event-id", &streamed[0].0)
        .send()
        .await
        .expect("events");
    let caught_up = events(resumed, 1).await;
    assert_eq!(caught_up.len(), 1, "{caught_up:?}");
    assert_eq!(caught_up[0].1["data"]["text"], all[1].1["data"]["text"]);
    stop(child);
}

/// An app may open a conversation's event stream before its first POST creates it: the late messages
/// after that POST reach the stream (it answered 404 before, and the app missed them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_may_be_opened_before_its_conversation_exists() {
    let data = tempfile::tempdir().expect("tmp");
    let config = data.path().join("vt-agent.toml");
    std::fs::write(&config, "").expect("config");
    let (child, url) = serve(&data, &config);
    let http = reqwest::Client::new();
    let stream = http
        .get(format!("{url}/v1/conversations/c-stream-first/events"))
        .send()
        .await
        .expect("events");
    assert_eq!(stream.status(), 200, "opened before the conversation exists");
    pix_recharge_paid(&http, &url, "c-stream-first").await;
    let streamed = events(stream, 1).await;
    let text = streamed
        .first()
        .and_then(|(_, e)| e["data"]["text"].as_str())
        .unwrap_or_default();
    assert!(text.contains("Pagamento recebido"), "{streamed:?}");
    stop(child);
}

/// A console form posted with the session `cookie`: `fields` as the browser sends them.
async fn posted(
    http: &reqwest::Client,
    to: String,
    cookie: &str,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    http.post(to)
        .header("cookie", cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(serde_urlencoded::to_string(fields).expect("form"))
        .send()
        .await
        .expect("posted")
}

/// Signs in to the console of the `serve` at `url` with `key`: the session cookie and the CSRF token
/// of the page at `page`.
async fn console_session(http: &reqwest::Client, url: &str, key: &str, page: &str) -> (String, String) {
    let form = http.get(format!("{url}/console")).send().await.expect("page");
    let cookie = form.headers()["set-cookie"]
        .to_str()
        .expect("cookie")
        .split(';')
        .next()
        .expect("pair")
        .to_owned();
    let token = crate::console::csrf_of(&form.text().await.expect("html"));
    let signed = posted(
        http,
        format!("{url}/console/entrar"),
        &cookie,
        &[("chave", key), ("csrf", token.as_str())],
    )
    .await;
    assert_eq!(signed.status(), 303);
    let session = signed
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("vt_console="))
        .expect("a session")
        .split(';')
        .next()
        .expect("pair")
        .to_owned();
    let html = http
        .get(format!("{url}{page}"))
        .header("cookie", &session)
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    (session, crate::console::csrf_of(&html))
}

/// A person's reply in a case reaches the integrator as one message: the webhook, the event stream and
/// `GET /v1/conversations/{id}` give it the same id, time and role (`human_agent`, the name apart from
/// the words); a stream resumes after the id the webhook carried. (On 80722d3 the webhook said
/// `msg_<outbox item>`, `assistant` and "carla: …", the stream `<message>` and `human_agent`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_message_is_one_message_with_one_id_time_and_role_everywhere() {
    const KEY: &str = "chave-suporte-de-teste-0123456789";
    let (hook, received) = receiver().await;
    let data = tempfile::tempdir().expect("tmp");
    let config = data.path().join("vt-agent.toml");
    let hash = vt_agent::key_hash(KEY);
    std::fs::write(
        &config,
        format!(
            "[outbox.retry]\nattempts = 5\nbackoff_ms = 200\n\n[[http.webhooks]]\ntenant = \"default\"\nurl = \"{hook}\"\nsecrets = [\"{SECRET}\"]\n\n[[http.api_keys]]\nname = \"carla\"\nsha256 = \"{hash}\"\ntenant = \"default\"\nrole = \"support\"\n"
        ),
    )
    .expect("config");
    let (child, url) = serve(&data, &config);
    let http = crate::console::no_redirects();
    let say = |text: &str| {
        http.post(format!("{url}/v1/conversations/c-um/messages"))
            .header("authorization", format!("Bearer {KEY}"))
            .json(&serde_json::json!({"text": text, "user": {"id": "u-um"}}))
            .send()
    };
    say("saldo do cartão 1234567890").await.expect("balance");
    say("quero falar com um atendente").await.expect("ask");
    let stream = http
        .get(format!("{url}/v1/conversations/c-um/events"))
        .header("authorization", format!("Bearer {KEY}"))
        .send()
        .await
        .expect("events");
    let (session, _) = console_session(&http, &url, KEY, "/console/fila").await;
    let queue = http
        .get(format!("{url}/console/fila"))
        .header("cookie", &session)
        .send()
        .await
        .expect("queue")
        .text()
        .await
        .expect("html");
    let at = queue.find("/console/cases/").expect("the case in the queue") + 15;
    let case: String = queue[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    let page = format!("/console/cases/{case}");
    let (session, token) = console_session(&http, &url, KEY, &page).await;
    for (action, text) in [("assumir", ""), ("responder", "Olá, posso ajudar.")] {
        let fields = [("csrf", token.as_str()), ("texto", text)];
        let done = posted(&http, format!("{url}{page}/{action}"), &session, &fields).await;
        assert!(
            done.status().is_success() || done.status().is_redirection(),
            "{action}: {}",
            done.status()
        );
    }
    // A proposal names a card by the page's sealed reference: a typed number is refused.
    let typed = posted(
        &http,
        format!("{url}{page}/propor"),
        &session,
        &[
            ("csrf", token.as_str()),
            ("valor", "20"),
            ("cartao", "1234567890"),
            ("meio", "pix"),
        ],
    )
    .await;
    let said = typed
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .map(|l| {
            percent_encoding::percent_decode_str(&l.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        })
        .unwrap_or_default();
    assert!(said.contains("escolha um dos cartões do cliente"), "{said}");
    let pushed = wait_for(&received, 1).await;
    let (hook_id, hooked) = pushed
        .iter()
        .find(|(_, e)| e["data"]["role"] == "human_agent")
        .cloned()
        .unwrap_or_else(|| panic!("the person's reply pushed: {pushed:?}"));
    assert_eq!(
        hooked["data"]["text"], "Olá, posso ajudar.",
        "the words alone: {hooked}"
    );
    assert_eq!(hooked["data"]["name"], "carla");
    assert_eq!(hooked["data"]["message_id"], hook_id.as_str());
    let streamed = events(stream, pushed.len()).await;
    let (event_id, event) = streamed
        .iter()
        .find(|(_, e)| e["data"]["role"] == "human_agent")
        .cloned()
        .unwrap_or_else(|| panic!("the person's reply streamed: {streamed:?}"));
    assert_eq!(event_id, hook_id, "one id");
    assert_eq!(event, hooked, "one message, the same body");
    let view: Value = http
        .get(format!("{url}/v1/conversations/c-um"))
        .header("authorization", format!("Bearer {KEY}"))
        .send()
        .await
        .expect("view")
        .json()
        .await
        .expect("json");
    let read = view["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["message_id"] == hook_id.as_str()))
        .cloned()
        .unwrap_or_else(|| panic!("the same id in the conversation: {view}"));
    assert_eq!(read["role"], "human_agent");
    assert_eq!(read["name"], "carla");
    let time =
        |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap_or_default()).expect("time");
    assert_eq!(time(&read["at"]), time(&hooked["timestamp"]), "one time");
    // Resuming after the webhook's id gives nothing already had.
    let resumed = http
        .get(format!("{url}/v1/conversations/c-um/events"))
        .header("authorization", format!("Bearer {KEY}"))
        .header("last-event-id", &hook_id)
        .send()
        .await
        .expect("events");
    say("obrigado").await.expect("thanks");
    let after = tokio::time::timeout(Duration::from_secs(2), events(resumed, 1)).await;
    assert!(after.is_err(), "nothing after the last message: {after:?}");

    // A recharge the agent proposes, from the card the page lists (masked, a sealed reference): it
    // reaches the webhook with Confirmar / Cancelar, under the id the conversation shows it by.
    let html = http
        .get(format!("{url}{page}"))
        .header("cookie", &session)
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    let select = &html[html
        .find("<select id=\"cartao\"")
        .expect("the cards to propose to")..];
    let option = &select[..select.find("</select>").expect("closed")];
    assert!(
        option.contains("****7890") && !option.contains("1234567890"),
        "{option}"
    );
    let start = option.find("value=\"").expect("a reference") + 7;
    let reference = &option[start..start + option[start..].find('"').expect("quoted")];
    let proposed = posted(
        &http,
        format!("{url}{page}/propor"),
        &session,
        &[
            ("csrf", token.as_str()),
            ("valor", "20"),
            ("cartao", reference),
            ("meio", "pix"),
        ],
    )
    .await;
    let location = proposed
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(location.contains("ok="), "{location}");
    let pushed = wait_for(&received, pushed.len() + 1).await;
    let (asked_id, asked) = pushed.last().cloned().expect("the proposal");
    assert_eq!(
        asked["data"]["buttons"],
        serde_json::json!([{"id": "sim", "title": "Confirmar"}, {"id": "não", "title": "Cancelar"}]),
        "{asked}"
    );
    let view: Value = http
        .get(format!("{url}/v1/conversations/c-um"))
        .header("authorization", format!("Bearer {KEY}"))
        .send()
        .await
        .expect("view")
        .json()
        .await
        .expect("json");
    let shown = view["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["message_id"] == asked_id.as_str()))
        .cloned()
        .unwrap_or_else(|| panic!("{asked_id} in the conversation: {view}"));
    assert_eq!(shown["text"], asked["data"]["text"]);
    stop(child);
}
