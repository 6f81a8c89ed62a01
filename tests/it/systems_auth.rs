//! The external systems behind authentication, as an operator's are: the simulator guarded on
//! loopback by a real OAuth2 token endpoint (client credentials, Basic or in the body), a bearer token
//! or an API key in a header. A flow runs with each kind; one token serves a burst of calls; a token
//! that expires is renewed; a 401 is answered once with a new token and charges once; a wrong secret
//! is an error that names nothing secret, even when the server echoes it back.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::json;
use vt_connectors::systems::{SystemsConfig, VtSystems};
use vt_connectors::{AuthConfig, AuthMethod};
use vt_domain::systems::{Systems as _, SystemsPort};
use vt_simulators::systems::Simulator;

use crate::support::quick_simulator;

const CLIENT_ID: &str = "vt-agent";
const CLIENT_SECRET: &str = "segredo-do-cliente-0123456789";
const API_KEY: &str = "chave-da-api-0123456789";
const STATIC_TOKEN: &str = "token-estatico-0123456789";

/// What the fake authorization server and systems know and saw.
#[derive(Default)]
struct Auth {
    /// Tokens issued and still honoured.
    valid: Mutex<HashSet<String>>,
    fetches: AtomicUsize,
    expires_in: u64,
}

struct Guarded {
    url: String,
    auth: Arc<Auth>,
    sim: Simulator,
    _task: tokio::task::JoinHandle<()>,
}

impl Guarded {
    async fn start(expires_in: u64) -> Self {
        let sim = Simulator::new(quick_simulator());
        let auth = Arc::new(Auth {
            expires_in,
            ..Auth::default()
        });
        let systems = sim
            .router()
            .layer(axum::middleware::from_fn_with_state(auth.clone(), require));
        let app = Router::new()
            .route("/oauth/token", axum::routing::post(token))
            .with_state(auth.clone())
            .merge(systems);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url,
            auth,
            sim,
            _task: task,
        }
    }

    fn systems(&self, auth: AuthConfig) -> SystemsConfig {
        SystemsConfig {
            timeout_cap_ms: Some(2_000),
            max_retry_wait_ms: 20,
            auth,
            ..SystemsConfig::single(&self.url)
        }
    }

    fn oauth2(&self, method: AuthMethod, secret: &str) -> AuthConfig {
        AuthConfig::Oauth2 {
            token_url: format!("{}/oauth/token", self.url),
            client_id: CLIENT_ID.into(),
            client_secret: secret.into(),
            scope: Some("saldo recarga notificacao".into()),
            auth_method: method,
        }
    }

    /// Each kind of authentication the systems accept: OAuth2 (Basic), the bearer token, the key.
    fn kinds(&self) -> [AuthConfig; 3] {
        [
            self.oauth2(AuthMethod::Basic, CLIENT_SECRET),
            AuthConfig::Bearer {
                token: STATIC_TOKEN.into(),
            },
            AuthConfig::Header {
                header: "x-api-key".into(),
                token: API_KEY.into(),
            },
        ]
    }

    fn fetches(&self) -> usize {
        self.auth.fetches.load(Ordering::SeqCst)
    }

    /// The server revokes every token it issued (a rotation on their side).
    fn revoke_all(&self) {
        self.auth.valid.lock().expect("lock").clear();
    }
}

/// The token endpoint (RFC 6749 §4.4): the client's credentials in Basic auth or in the body.
async fn token(
    State(auth): State<Arc<Auth>>,
    headers: HeaderMap,
    axum::Form(form): axum::Form<std::collections::HashMap<String, String>>,
) -> Response {
    use base64::Engine as _;
    let basic = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok());
    let field = |k: &str| form.get(k).cloned();
    let by_basic = basic.as_deref() == Some(&format!("{CLIENT_ID}:{CLIENT_SECRET}"));
    let by_body = field("client_id").as_deref() == Some(CLIENT_ID)
        && field("client_secret").as_deref() == Some(CLIENT_SECRET);
    if field("grant_type").as_deref() != Some("client_credentials") || !(by_basic || by_body) {
        // Echoes what it was sent, as careless servers do: nothing of it may reach our records.
        let echo = basic.or_else(|| field("client_secret")).unwrap_or_default();
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "invalid_client", "error_description": format!("recebido: {echo}")})),
        )
            .into_response();
    }
    let n = auth.fetches.fetch_add(1, Ordering::SeqCst) + 1;
    let token = format!("tok-{n}-0123456789abcdef");
    auth.valid.lock().expect("lock").insert(token.clone());
    Json(json!({"access_token": token, "token_type": "Bearer", "expires_in": auth.expires_in}))
        .into_response()
}

/// The systems accept a valid issued token, the static bearer token or the API key; anything else is
/// a 401 that echoes the credential it got.
async fn require(State(auth): State<Arc<Auth>>, request: Request, next: Next) -> Response {
    match refusal(&auth, request.headers()) {
        None => next.run(request).await,
        Some(echo) => (
            StatusCode::UNAUTHORIZED,
            Json(json!({"erro": "nao_autorizado", "recebido": echo})),
        )
            .into_response(),
    }
}

/// `None` when the credential is good; else what the request carried.
fn refusal(auth: &Auth, headers: &HeaderMap) -> Option<String> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let bearer = header("authorization").and_then(|v| v.strip_prefix("Bearer ").map(str::to_owned));
    let issued = bearer
        .as_deref()
        .is_some_and(|t| t == STATIC_TOKEN || auth.valid.lock().expect("lock").contains(t));
    if issued || header("x-api-key").as_deref() == Some(API_KEY) {
        return None;
    }
    Some(bearer.or_else(|| header("x-api-key")).unwrap_or_default())
}

async fn engine(systems: SystemsConfig) -> vt_engine::Engine {
    let ext = vt_contract::context::Extensions::default()
        .with(SystemsPort::new(VtSystems::new(systems).expect("client")));
    vt_agent::build_engine(&vt_agent::Config::default(), None, ext).expect("engine")
}

fn flow_input(card: &str, key: &str) -> String {
    json!({
        "cartao": card,
        "recarga": {"valor": 50, "meio_pagamento": {"tipo": "pix", "token": "tok_x"}, "idempotency_key": key},
    })
    .to_string()
}

/// A flow runs through every kind of authentication; the systems saw the credential each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_runs_with_oauth2_a_bearer_token_or_a_header() {
    let g = Guarded::start(3600).await;
    let every = std::iter::once(g.oauth2(AuthMethod::Post, CLIENT_SECRET)).chain(g.kinds());
    for (i, auth) in every.enumerate() {
        let engine = engine(g.systems(auth.clone())).await;
        let ran = vt_agent::run_flow(&engine, &flow_input("1234567890", &format!("pedido-{i}")))
            .await
            .expect("flow runs");
        assert_eq!(
            ran.output.status,
            vt_agent::FlowStatus::Concluido,
            "{auth:?}: {:?}",
            ran.output
        );
    }
    assert_eq!(g.sim.charges("1234567890"), 4, "one charge a flow");
    assert_eq!(
        g.fetches(),
        2,
        "one token for each OAuth2 client (Basic, then in the body)"
    );
}

/// Two hundred flows at once (a balance each, with its notice), on a client with no token yet: one
/// token request; a token that expires is renewed before the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_token_serves_a_burst_and_an_expired_one_is_renewed() {
    // 6 s of life: the burst must finish inside the token's first half (3 s) even on a loaded
    // machine (it took over a second with a release build beside the tests, and a 2 s token was
    // renewed during it).
    let g = Guarded::start(6).await;
    let engine = Arc::new(engine(g.systems(g.oauth2(AuthMethod::Basic, CLIENT_SECRET))).await);
    let flows = (0..200).map(|i| {
        let engine = engine.clone();
        async move {
            let input = json!({"cartao": format!("20000{i:05}")}).to_string();
            vt_agent::run_flow(&engine, &input)
                .await
                .expect("flow")
                .output
                .status
        }
    });
    let statuses = futures::future::join_all(flows).await;
    assert!(
        statuses.iter().all(|s| *s == vt_agent::FlowStatus::Concluido),
        "{statuses:?}"
    );
    assert_eq!(g.fetches(), 1, "one token for 200 concurrent flows");
    // Renewed in its second half.
    tokio::time::sleep(std::time::Duration::from_millis(3_100)).await;
    let again = vt_agent::run_flow(&engine, r#"{"cartao": "1234567890"}"#)
        .await
        .expect("flow");
    assert_eq!(again.output.status, vt_agent::FlowStatus::Concluido);
    assert_eq!(g.fetches(), 2, "the expiring token was renewed");
}

/// The server revokes the token between the balance and the recharge: the recharge's 401 drops it,
/// the request goes once more — the same body under the same key — with a new token and is charged
/// once. A flow after the revocation runs too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_is_answered_once_with_a_new_token_and_charges_once() {
    let g = Guarded::start(3600).await;
    let systems = g.systems(g.oauth2(AuthMethod::Basic, CLIENT_SECRET));
    let client = VtSystems::new(systems.clone()).expect("client");
    let read = client
        .consultar_saldo("2345678901", &BTreeMap::new(), 2_000, 1, 0)
        .await;
    assert_eq!((read.status, g.fetches()), (Some(200), 1));
    g.revoke_all();
    let headers: BTreeMap<String, String> = [("x-idempotency-key".to_owned(), "chave-401".to_owned())].into();
    let body =
        json!({"cartao": "2345678901", "valor": 50.0, "moeda": "BRL", "meio_pagamento": {"tipo": "pix"}});
    let charged = client.recarregar(&body, &headers, 2_000).await;
    assert_eq!(charged.status, Some(201), "{charged:?}");
    assert_eq!(g.fetches(), 2, "one new token after the 401");
    assert_eq!(g.sim.charges("2345678901"), 1, "charged once");
    let received = g.sim.ledger().iter().filter(|e| e.sistema == "recarga").count();
    assert_eq!(
        received, 1,
        "the refused request stopped at the guard: the system saw one recharge"
    );
    // Refused again after the new token too: reported, not retried a second time.
    g.revoke_all();
    let twice = VtSystems::new(SystemsConfig {
        auth: AuthConfig::Bearer {
            token: "token-recusado-0123456789".into(),
        },
        ..systems
    })
    .expect("client")
    .recarregar(&body, &headers, 2_000)
    .await;
    assert_eq!(twice.status, Some(401));
    let engine = engine(g.systems(g.oauth2(AuthMethod::Basic, CLIENT_SECRET))).await;
    let ran = vt_agent::run_flow(&engine, &flow_input("1234567890", "pedido-b"))
        .await
        .expect("flow");
    assert_eq!(
        ran.output.status,
        vt_agent::FlowStatus::Concluido,
        "{:?}",
        ran.output
    );
}

/// A wrong client secret: the token endpoint refuses (and echoes it); the balance is not read and the
/// recharge not sent, with an error that names the cause and carries no secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_is_a_clear_error_with_no_secret_in_it() {
    let g = Guarded::start(3600).await;
    let wrong = "segredo-errado-9876543210";
    let engine = engine(g.systems(g.oauth2(AuthMethod::Post, wrong))).await;
    let ran = vt_agent::run_flow(&engine, &flow_input("1234567890", "pedido-x"))
        .await
        .expect("flow");
    assert_eq!(ran.output.status, vt_agent::FlowStatus::Falhou);
    let text = serde_json::to_string(&ran.output).expect("json");
    assert!(text.contains("autentica"), "the cause is named: {text}");
    assert!(!text.contains(wrong), "no secret: {text}");
    assert_eq!(g.sim.charges("1234567890"), 0);
    assert!(g.sim.ledger().is_empty(), "nothing reached the systems");
    // A static credential the system refuses: its 401 (which echoes it) is reported, never retried
    // with the same credential, and the echo is scrubbed.
    let engine = engine_refused(&g).await;
    let ran = vt_agent::run_flow(&engine, &flow_input("1234567890", "pedido-y"))
        .await
        .expect("flow");
    let text = serde_json::to_string(&ran.output).expect("json");
    assert!(!text.contains("token-recusado-0123456789"), "{text}");
}

async fn engine_refused(g: &Guarded) -> vt_engine::Engine {
    engine(g.systems(AuthConfig::Bearer {
        token: "token-recusado-0123456789".into(),
    }))
    .await
}

/// `systems check` against the guarded systems: all pass with good credentials; a wrong secret, a
/// refused token or a system that is not there each fail with a line that says why (and no secret).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_passes_with_good_credentials_and_names_each_failure() {
    let g = Guarded::start(3600).await;
    let good = VtSystems::new(g.systems(g.oauth2(AuthMethod::Basic, CLIENT_SECRET)))
        .expect("client")
        .check("1234567890")
        .await;
    assert!(good.iter().all(|c| c.ok), "{good:?}");
    let named: Vec<&str> = good.iter().map(|c| c.system).collect();
    assert_eq!(named, ["saldo", "recarga", "notificacao", "situacao"]);
    assert!(good[3].detail.contains("situação do cartão lida"), "{good:?}");
    assert_eq!(g.sim.charges("1234567890"), 0, "the check charges nothing");
    assert_eq!(g.sim.deliveries(), 0, "and notifies nobody");

    let wrong = "segredo-errado-9876543210";
    let bad = VtSystems::new(g.systems(g.oauth2(AuthMethod::Basic, wrong)))
        .expect("client")
        .check("1234567890")
        .await;
    assert!(bad.iter().all(|c| !c.ok), "{bad:?}");
    let lines: Vec<String> = bad
        .iter()
        .map(vt_connectors::systems::SystemCheck::line)
        .collect();
    assert!(
        lines[0].contains("FALHA") && lines[0].contains("recusou as credenciais"),
        "{lines:?}"
    );
    assert!(lines.iter().all(|l| !l.contains(wrong)), "{lines:?}");

    let refused = VtSystems::new(g.systems(AuthConfig::Bearer {
        token: "token-recusado-0123456789".into(),
    }))
    .expect("client")
    .check("1234567890")
    .await;
    assert!(
        refused.iter().all(|c| !c.ok && c.status == Some(401)),
        "{refused:?}"
    );
    assert!(refused[0].detail.contains("credenciais recusadas"), "{refused:?}");

    let gone = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let url = format!("http://{}", gone.local_addr().expect("addr"));
    drop(gone);
    let unreachable = VtSystems::new(SystemsConfig::single(&url))
        .expect("client")
        .check("1234567890")
        .await;
    assert!(
        unreachable
            .iter()
            .all(|c| !c.ok && c.detail.contains("inalcançável")),
        "{unreachable:?}"
    );
}

/// The binary, as an operator runs it: the configuration file names the systems and OAuth2, the
/// secret comes from the environment; exit 0 when all pass, 1 naming the failure otherwise, and the
/// secret in no byte of what it prints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_command_exits_by_what_it_found() {
    let g = Guarded::start(3600).await;
    let data = tempfile::tempdir().expect("tmp");
    let file = data.path().join("vt-agent.toml");
    std::fs::write(
        &file,
        format!(
            "[systems]\nsaldo_url = \"{u}\"\nrecarga_url = \"{u}\"\nnotificacao_url = \"{u}\"\n[systems.auth]\nkind = \"oauth2\"\ntoken_url = \"{u}/oauth/token\"\nclient_id = \"{CLIENT_ID}\"\n",
            u = g.url
        ),
    )
    .expect("config");
    let run = |secret: &str| {
        let mut cmd = crate::cli::vt_agent_in(&data);
        cmd.env("VT_SYSTEMS_CLIENT_SECRET", secret)
            .arg("--config")
            .arg(&file)
            .args(["systems", "check"]);
        cmd
    };
    let mut good = run(CLIENT_SECRET);
    let out = tokio::task::spawn_blocking(move || good.output().expect("run"))
        .await
        .expect("join");
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert_eq!(said.lines().filter(|l| l.starts_with("ok")).count(), 4, "{said}");
    assert!(!said.contains(CLIENT_SECRET), "{said}");
    let wrong = "segredo-errado-9876543210";
    let mut bad = run(wrong);
    let out = tokio::task::spawn_blocking(move || bad.output().expect("run"))
        .await
        .expect("join");
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("FALHA") && said.contains("saldo"), "{said}");
    assert!(!said.contains(wrong), "{said}");
}

/// The whole path offline, as processes: `vt-agent simulator --auth oauth2` asks for a token, and
/// `run-flow` and `systems check` get one with the secret from the environment. Then every byte they
/// left — stdout, stderr, the data directory (database, WAL, the simulator's book) — holds neither the
/// client secret nor any token the simulator issued.
#[test]
fn the_simulator_asks_for_oauth2_and_no_secret_or_token_is_left_anywhere() {
    let secret = "segredo-do-simulador-0123456789";
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let data = tempfile::tempdir().expect("tmp");
    let mut simulator = crate::cli::vt_agent_in(&data)
        .env("VT_SIMULATOR_CLIENT_SECRET", secret)
        .args(["simulator", "--port", &port.to_string(), "--auth", "oauth2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("simulator");
    let up = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(up, "the simulator listens");
    let url = format!("http://127.0.0.1:{port}");
    let file = data.path().join("vt-agent.toml");
    std::fs::write(
        &file,
        format!(
            "[systems]\nsaldo_url = \"{url}\"\nrecarga_url = \"{url}\"\nnotificacao_url = \"{url}\"\n[systems.auth]\nkind = \"oauth2\"\ntoken_url = \"{url}/oauth/token\"\nclient_id = \"vt-agent\"\n"
        ),
    )
    .expect("config");
    let run = |args: &[&str], stdin: Option<&str>| {
        let mut cmd = crate::cli::vt_agent_in(&data);
        cmd.env("VT_SYSTEMS_CLIENT_SECRET", secret)
            .arg("--config")
            .arg(&file)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("run");
        if let Some(text) = stdin {
            use std::io::Write as _;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(text.as_bytes())
                .expect("write");
        }
        child.wait_with_output().expect("wait")
    };
    let input = r#"{"cartao": "1234567890", "recarga": {"valor": 30, "meio_pagamento": {"tipo": "pix", "token": "tok_x"}}}"#;
    let flow = run(&["run-flow", "-"], Some(input));
    let check = run(&["systems", "check"], None);
    let _ = simulator.kill();
    let sim_out = simulator.wait_with_output().expect("simulator output");
    let printed = [
        &flow.stdout,
        &flow.stderr,
        &check.stdout,
        &check.stderr,
        &sim_out.stdout,
        &sim_out.stderr,
    ];
    let text = |b: &Vec<u8>| String::from_utf8_lossy(b).into_owned();
    assert_eq!(
        flow.status.code(),
        Some(0),
        "{}{}",
        text(&flow.stdout),
        text(&flow.stderr)
    );
    assert!(
        text(&flow.stdout).contains("\"concluido\""),
        "{}",
        text(&flow.stdout)
    );
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stdout));
    let mut every_byte: Vec<(String, Vec<u8>)> = printed
        .iter()
        .enumerate()
        .map(|(i, b)| (format!("output {i}"), (*b).clone()))
        .collect();
    for entry in std::fs::read_dir(data.path()).expect("data dir") {
        let path = entry.expect("entry").path();
        if path.is_file() {
            every_byte.push((path.display().to_string(), std::fs::read(&path).expect("read")));
        }
    }
    for (what, bytes) in &every_byte {
        let haystack = String::from_utf8_lossy(bytes);
        assert!(!haystack.contains(secret), "the client secret is in {what}");
        assert!(!haystack.contains("simulador-"), "an issued token is in {what}");
    }
}

/// A chat turn — a balance, then a recharge confirmed — runs through each kind of authentication, and
/// charges once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_turn_runs_with_oauth2_a_bearer_token_or_a_header() {
    let g = Guarded::start(3600).await;
    for (i, auth) in g.kinds().into_iter().enumerate() {
        let config = vt_agent::Config::default();
        let ext = vt_contract::context::Extensions::default()
            .with(SystemsPort::new(
                VtSystems::new(g.systems(auth.clone())).expect("client"),
            ))
            .with(config.vt.clone());
        let store: Arc<dyn vt_store::Store> = Arc::new(
            vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
                .await
                .expect("store"),
        );
        let engine = vt_agent::share(
            vt_agent::build_engine(&config, None, ext).expect("engine"),
            Some(store.clone()),
            config.recargas.clone(),
        );
        let service = vt_agent::build_service(&config, engine, store)
            .await
            .expect("service");
        let card = format!("23456789{i:02}");
        let say = async |text: &str| {
            let msg = vt_agent::Inbound {
                agent_id: "vt".into(),
                conversation_id: Some(format!("c-{i}")),
                user: crate::support::user(),
                text: text.into(),
                ..Default::default()
            };
            service.messages().handle(msg).await.expect("turn").reply_text()
        };
        let balance = say(&format!("saldo {card}")).await;
        assert!(balance.contains("R$ 50,00"), "{auth:?}: {balance}");
        say(&format!("recarrega 20 no {card} via pix")).await;
        let done = say("sim").await;
        assert!(done.contains("foi aprovada"), "{auth:?}: {done}");
        assert_eq!(g.sim.charges(&card), 1, "{auth:?}");
    }
}
