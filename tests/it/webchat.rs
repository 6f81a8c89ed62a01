//! The web chat on an operator's site: the widget's file and its budget, sessions and user tokens,
//! origins, CSRF, limits and bad input over real HTTP on loopback; the conversation as Server-Sent
//! Events resumed without a loss or a double; and a person's whole visit in a real headless Chromium
//! (`crate::browser`) — a page on a test origin, the balance, a Pix recharge paid by the simulator,
//! a second browser profile, a case answered from the console while the connection is cut, and a page
//! of another origin. Screenshots go to `target/tmp/webchat/`.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use vt_agent::testkit::ConsoleConfig;
use vt_agent::testkit::{WebchatConfig, WebchatTenant};
use vt_agent::{ApiKeyConfig, AppState, HttpConfig, Role, Wiring, key_hash};

use crate::support::{ChatHarness, Served, chat_harness_paying, serve_state};

pub(crate) const SECRET: &str = "segredo-do-chat-de-teste-com-32-bytes!";
pub(crate) const ACME_KEY: &str = "chave-de-usuario-da-acme-com-32-bytes!";
pub(crate) const BETA_KEY: &str = "chave-de-usuario-da-beta-com-32-bytes!";
pub(crate) const BETA_ORIGIN: &str = "https://beta.example.com.br";
pub(crate) const SUPPORT: &str = "chave-suporte-acme-123456";
pub(crate) const CONSOLE_SECRET: &str = "segredo-do-console-de-teste-com-32+";
pub(crate) const CARD: &str = "2345678901";

pub(crate) fn webchat(origin: &str, per_minute: u32) -> WebchatConfig {
    WebchatConfig {
        segredo: Some(SECRET.into()),
        mensagens_por_minuto: per_minute,
        clientes: vec![
            WebchatTenant {
                tenant: "acme".into(),
                origens: vec![origin.into()],
                nome: "Acme Transportes".into(),
                cor: "#7b1fa2".into(),
                chave_usuario: Some(ACME_KEY.into()),
                ..Default::default()
            },
            WebchatTenant {
                tenant: "beta".into(),
                origens: vec![BETA_ORIGIN.into()],
                nome: "Beta".into(),
                chave_usuario: Some(BETA_KEY.into()),
                ..Default::default()
            },
        ],
        ..Default::default()
    }
}

/// `serve` in process with the web chat of `config`, the console, and a support agent of `acme`.
pub(crate) async fn serve(chat: Arc<ChatHarness>, config: &WebchatConfig) -> Served {
    let wiring = Wiring {
        service: chat.service.clone(),
        agent: "vt".into(),
        tenant: "default".into(),
    };
    let http = HttpConfig {
        api_keys: vec![ApiKeyConfig {
            name: "suporte".into(),
            sha256: key_hash(SUPPORT),
            tenant: "acme".into(),
            role: Role::Support,
        }],
        ..HttpConfig::default()
    };
    let state = AppState::new(chat.service.clone(), "vt", http)
        .with_console(&ConsoleConfig {
            secret: Some(CONSOLE_SECRET.into()),
            ..ConsoleConfig::default()
        })
        .with_channel(&vt_agent::testkit::webchat_channel(config, &wiring));
    serve_state(chat, state).await
}

/// An operator's user token for `sub` of `tenant`, signed with `key`, living `secs`.
pub(crate) fn user_token(key: &str, tenant: &str, sub: &str, secs: i64) -> String {
    let now = chrono::Utc::now().timestamp();
    let claims = json!({"sub": sub, "tenant": tenant, "iat": now, "exp": now + secs, "name": "Cliente 42"});
    jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(key.as_bytes()),
    )
    .expect("token")
}

/// A page's view of the chat's API: its origin, its session cookie and CSRF token.
pub(crate) struct Page {
    pub(crate) url: String,
    pub(crate) origin: String,
    pub(crate) client: reqwest::Client,
    pub(crate) cookie: Option<String>,
    pub(crate) csrf: String,
}

impl Page {
    pub(crate) fn new(url: &str, origin: &str) -> Self {
        Self {
            url: url.to_owned(),
            origin: origin.to_owned(),
            client: reqwest::Client::new(),
            cookie: None,
            csrf: String::new(),
        }
    }

    /// Opens (or renews) the session of `tenant`, with `token` if any: the status, the body and the
    /// `Set-Cookie` header.
    pub(crate) async fn open(
        &mut self,
        tenant: &str,
        token: Option<&str>,
    ) -> (StatusCode, Value, Option<String>) {
        let mut body = json!({"tenant": tenant});
        if let Some(t) = token {
            body["token"] = json!(t);
        }
        self.session(body).await
    }

    /// Renews the session the page opened (the widget's stream reconnecting).
    pub(crate) async fn renew(&mut self, tenant: &str) -> (StatusCode, Value, Option<String>) {
        self.session(json!({"tenant": tenant, "renovar": true})).await
    }

    pub(crate) async fn session(&mut self, body: Value) -> (StatusCode, Value, Option<String>) {
        let mut r = self
            .client
            .post(format!("{}/webchat/api/sessao", self.url))
            .header("origin", &self.origin)
            .json(&body);
        if let Some(c) = &self.cookie {
            r = r.header("cookie", c);
        }
        let answer = r.send().await.expect("session");
        let status = answer.status();
        let set = answer
            .headers()
            .get("set-cookie")
            .map(|v| v.to_str().expect("cookie").to_owned());
        let body: Value = answer.json().await.expect("json");
        if let Some(set) = &set {
            self.cookie = Some(set.split(';').next().expect("pair").to_owned());
            self.csrf = body["csrf"].as_str().expect("csrf").to_owned();
        }
        (status, body, set)
    }

    /// The conversation the session's cookie opens (read from its payload, as the server signed it).
    pub(crate) fn conversation_id(&self) -> String {
        let cookie = self.cookie.as_deref().expect("a session");
        let payload = cookie.split('.').nth(1).expect("a JWT");
        let claims: Value = serde_json::from_slice(
            &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, payload)
                .expect("base64"),
        )
        .expect("claims");
        format!(
            "webchat:{}:{}",
            claims["ten"].as_str().expect("ten"),
            claims["who"].as_str().expect("who")
        )
    }

    pub(crate) async fn post(&self, body: &Value) -> reqwest::Response {
        let mut r = self
            .client
            .post(format!("{}/webchat/api/mensagens", self.url))
            .header("origin", &self.origin)
            .header("x-csrf-token", &self.csrf)
            .json(body);
        if let Some(c) = &self.cookie {
            r = r.header("cookie", c);
        }
        r.send().await.expect("message")
    }

    /// Says `text`: the answer's body (what to offer).
    pub(crate) async fn say(&self, text: &str) -> Value {
        let id = uuid::Uuid::new_v4().to_string();
        let r = self.post(&json!({"id": id, "texto": text})).await;
        assert_eq!(r.status(), 200, "{text}");
        r.json().await.expect("json")
    }

    pub(crate) async fn events(&self, last: Option<&str>) -> Events {
        let mut r = self
            .client
            .get(format!("{}/webchat/api/eventos", self.url))
            .header("origin", &self.origin);
        if let Some(c) = &self.cookie {
            r = r.header("cookie", c);
        }
        if let Some(l) = last {
            r = r.header("last-event-id", l);
        }
        let response = r.send().await.expect("events");
        assert_eq!(response.status(), 200);
        Events {
            response,
            text: String::new(),
            taken: 0,
        }
    }
}

/// An event stream being read.
pub(crate) struct Events {
    pub(crate) response: reqwest::Response,
    pub(crate) text: String,
    pub(crate) taken: usize,
}

impl Events {
    /// Every event that came until the stream was quiet for `quiet`: ids and bodies.
    pub(crate) async fn until_quiet(&mut self, quiet: Duration) -> Vec<(i64, Value)> {
        while let Ok(Some(chunk)) = tokio::time::timeout(quiet, self.response.chunk())
            .await
            .map(|c| c.expect("stream"))
        {
            self.text.push_str(&String::from_utf8_lossy(&chunk));
        }
        let all: Vec<(i64, Value)> = self
            .text
            .split("\n\n")
            .filter_map(|block| {
                let line = |p: &str| block.lines().find_map(|l| l.strip_prefix(p)).map(str::trim);
                Some((
                    line("id:")?.parse().ok()?,
                    serde_json::from_str(line("data:")?).ok()?,
                ))
            })
            .collect();
        let fresh = all[self.taken..].to_vec();
        self.taken = all.len();
        fresh
    }

    /// Events until one whose text has `needle` (up to 20 s).
    pub(crate) async fn until(&mut self, needle: &str) -> Vec<(i64, Value)> {
        let mut got = Vec::new();
        for _ in 0..40 {
            got.extend(self.until_quiet(Duration::from_millis(500)).await);
            if got.iter().any(|(_, e)| text(e).contains(needle)) {
                return got;
            }
        }
        panic!("no event with {needle}: {got:?}");
    }
}

pub(crate) fn text(e: &Value) -> &str {
    e["texto"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_widget_is_one_small_hardened_file() {
    let chat = Arc::new(chat_harness_paying().await);
    let s = serve(chat, &webchat("http://localhost:1", 20)).await;
    let r = s.get("/webchat/widget.js", None).await;
    assert_eq!(r.status(), 200);
    let header = |name: &str| r.headers()[name].to_str().expect("header").to_owned();
    assert!(header("content-type").starts_with("text/javascript"));
    assert!(header("content-security-policy").contains("default-src 'none'"));
    assert_eq!(header("x-content-type-options"), "nosniff");
    assert_eq!(header("cross-origin-resource-policy"), "cross-origin");
    let source = r.text().await.expect("source");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(source.as_bytes()).expect("gzip");
    let gzipped = gz.finish().expect("gzip").len();
    eprintln!("widget.js: {} bytes, {gzipped} gzipped", source.len());
    assert!(
        gzipped <= 30 * 1024,
        "over the 30 KB budget: {gzipped} bytes gzipped"
    );
    for never in ["console.", "localStorage", "sessionStorage", "eval("] {
        assert!(!source.contains(never), "the widget uses {never}");
    }
    // What the server says is set as text; the one piece of markup is the bubble's own icon.
    assert_eq!(
        source.matches("innerHTML").count(),
        1,
        "messages are never parsed as HTML"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_page_chats_pays_by_pix_and_resumes_its_stream_without_a_loss_or_a_double() {
    let origin = "http://localhost:8123";
    let chat = Arc::new(chat_harness_paying().await);
    let s = serve(chat.clone(), &webchat(origin, 20)).await;
    let mut page = Page::new(&s.url, origin);
    let (status, body, cookie) = page.open("acme", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["nome"], "Acme Transportes");
    assert_eq!(body["cor"], "#7b1fa2");
    assert_eq!(body["identificado"], false);
    let cookie = cookie.expect("a session cookie");
    for attribute in [
        "HttpOnly",
        "Secure",
        "SameSite=None",
        "Partitioned",
        "Path=/webchat/api",
    ] {
        assert!(cookie.contains(attribute), "{attribute} in {cookie}");
    }
    let mut stream = page.events(None).await;

    // A balance: the card masked everywhere, the privacy notice first.
    page.say(&format!("saldo do cartão {CARD}")).await;
    let first = stream.until("é R$").await;
    let texts: Vec<&str> = first.iter().map(|(_, e)| text(e)).collect();
    assert!(
        texts[0].contains("****8901") && first[0].1["papel"] == "user",
        "{texts:?}"
    );
    assert!(texts[1].contains("LGPD"), "the privacy notice first: {texts:?}");
    assert!(
        !format!("{first:?}").contains(CARD),
        "no card in clear: {first:?}"
    );

    // A Pix recharge: confirm / cancel offered for the recharge; the code with its QR image.
    let asked = page.say(&format!("recarregar 20 no cartão {CARD} via pix")).await;
    let confirm = asked["botoes"][0].clone();
    assert_eq!(confirm["titulo"], "Confirmar", "{asked}");
    let tap = json!({"id": "toque-1", "texto": "Confirmar", "toque": confirm["toque"]});
    assert_eq!(page.post(&tap).await.status(), 200);
    let coded = stream.until("00020101").await;
    let pix = coded
        .iter()
        .find_map(|(_, e)| e.get("pix"))
        .expect("the code's event carries it")
        .clone();
    let code = pix["copia_e_cola"].as_str().expect("code").to_owned();
    let png = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        pix["qr_png_base64"].as_str().expect("qr"),
    )
    .expect("base64");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    // The same tap again (a dropped answer): stored once, nothing new.
    let again: Value = page.post(&tap).await.json().await.expect("json");
    assert_eq!(again["repetida"], true);
    assert!(stream.until_quiet(Duration::from_millis(1500)).await.is_empty());

    // The simulator pays; the sweep credits it; the receipt arrives on the open stream.
    let txid = chat.sim.pix().charge_with_code(&code).expect("charge").txid;
    chat.sim.pix().pay(&txid, false).expect("paid");
    chat.service.payments().sweep().await;
    let receipt = stream.until("Pagamento recebido").await;
    let (receipt_id, _) = receipt
        .iter()
        .find(|(_, e)| text(e).contains("Pagamento recebido"))
        .expect("receipt")
        .clone();

    // A stream resumed after an event gets what came after it, once; the renewed session (a new
    // cookie, a new id) is the same visitor's.
    let (_, _, renewed) = page.open("acme", None).await;
    assert_ne!(renewed.as_deref(), Some(cookie.as_str()), "a new session id");
    let before = first[0].0;
    let mut resumed = page.events(Some(&before.to_string())).await;
    let caught_up = resumed.until("Pagamento recebido").await;
    let ids: Vec<i64> = caught_up.iter().map(|(id, _)| *id).collect();
    assert!(ids.iter().all(|id| *id > before), "{ids:?}");
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique, ids, "no double");
    assert!(ids.contains(&receipt_id));
    assert_eq!(
        caught_up
            .iter()
            .filter(|(_, e)| text(e).contains("Pagamento recebido"))
            .count(),
        1
    );
    // The widget's own words follow the language the router reads in the person's message.
    assert_eq!(page.say("hello, what can you do for me?").await["idioma"], "en");
    assert_eq!(page.say("hola, ¿qué puedes hacer por mí?").await["idioma"], "es");
    assert_eq!(page.say("oi, tudo bem?").await["idioma"], "pt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_checkout_and_a_boleto_line_come_apart_for_their_buttons() {
    let origin = "http://localhost:8127";
    let chat = Arc::new(crate::support::chat_harness_cards().await);
    let s = serve(chat.clone(), &webchat(origin, 20)).await;
    let mut page = Page::new(&s.url, origin);
    page.open("acme", None).await;
    let mut stream = page.events(None).await;
    let confirm = |asked: &Value| json!({"id": uuid::Uuid::new_v4().to_string(), "texto": "Confirmar", "toque": asked["botoes"][0]["toque"]});

    let asked = page
        .say(&format!("recarregar 20 no cartão {CARD} no crédito"))
        .await;
    assert_eq!(page.post(&confirm(&asked)).await.status(), 200);
    let linked = stream.until("http").await;
    let link = linked
        .iter()
        .find_map(|(_, e)| e["cartao"]["link"].as_str())
        .unwrap_or_else(|| panic!("a checkout link apart: {linked:?}"));
    assert!(
        link.contains("/_simulador/checkout/") || link.starts_with("https://"),
        "{link}"
    );

    let asked = page
        .say(&format!("recarregar 50 no cartão {CARD} no boleto"))
        .await;
    assert_eq!(page.post(&confirm(&asked)).await.status(), 200);
    let billed = stream.until("boleto").await;
    let more = stream.until_quiet(Duration::from_millis(1500)).await;
    let line = billed
        .iter()
        .chain(more.iter())
        .find_map(|(_, e)| e["boleto"]["linha"].as_str())
        .unwrap_or_else(|| panic!("the boleto's line apart: {billed:?}"))
        .to_owned();
    assert_eq!(line.len(), 54, "as printed: {line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_origins_forged_sessions_missing_tokens_and_bad_input_are_refused_with_nothing_stored() {
    let origin = "http://localhost:8124";
    let chat = Arc::new(chat_harness_paying().await);
    let s = serve(chat.clone(), &webchat(origin, 20)).await;
    let mut evil = Page::new(&s.url, "https://golpe.example.com");
    let (status, body, cookie) = evil.open("acme", None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("origin_not_allowed"))
    );
    assert!(cookie.is_none());
    // Another tenant's origin does not open this tenant's chat.
    let mut beta = Page::new(&s.url, BETA_ORIGIN);
    assert_eq!(beta.open("acme", None).await.0, StatusCode::FORBIDDEN);
    // CORS answers only a listed origin.
    let preflight = |from: &str| {
        s.client
            .request(
                reqwest::Method::OPTIONS,
                format!("{}/webchat/api/mensagens", s.url),
            )
            .header("origin", from)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type,x-csrf-token")
            .send()
    };
    let ok = preflight(origin).await.expect("preflight");
    assert_eq!(ok.headers()["access-control-allow-origin"], origin);
    assert_eq!(ok.headers()["access-control-allow-credentials"], "true");
    let no = preflight("https://golpe.example.com").await.expect("preflight");
    assert!(no.headers().get("access-control-allow-origin").is_none());

    let mut page = Page::new(&s.url, origin);
    page.open("acme", None).await;
    page.say("oi").await;
    let stored = page_messages(&chat, &page.conversation_id()).await;
    assert_eq!(stored, ["oi"]);
    // The session's cookie from another origin: refused, for posts and streams.
    let stolen = Page {
        cookie: page.cookie.clone(),
        csrf: page.csrf.clone(),
        ..Page::new(&s.url, "https://golpe.example.com")
    };
    assert_eq!(
        stolen.post(&json!({"id": "x1", "texto": "oi"})).await.status(),
        403
    );
    let stream = stolen
        .client
        .get(format!("{}/webchat/api/eventos", s.url))
        .header("origin", &stolen.origin)
        .header("cookie", stolen.cookie.as_deref().expect("cookie"))
        .send()
        .await
        .expect("events");
    assert_eq!(stream.status(), 403);
    // No CSRF token, another session's, a forged cookie, none at all.
    let no_csrf = Page {
        csrf: String::new(),
        cookie: page.cookie.clone(),
        ..Page::new(&s.url, origin)
    };
    let r = no_csrf.post(&json!({"id": "x2", "texto": "oi"})).await;
    assert_eq!(r.status(), 403);
    assert_eq!(
        r.json::<Value>().await.expect("json")["error"]["field"],
        "x-csrf-token"
    );
    let mut other = Page::new(&s.url, origin);
    other.open("acme", None).await;
    let crossed = Page {
        csrf: other.csrf.clone(),
        cookie: page.cookie.clone(),
        ..Page::new(&s.url, origin)
    };
    assert_eq!(
        crossed.post(&json!({"id": "x3", "texto": "oi"})).await.status(),
        403
    );
    let forged = Page {
        cookie: Some("vt_webchat=eyJhbGciOiJIUzI1NiJ9.eyJ0ZW4iOiJhY21lIn0.assinatura".into()),
        csrf: page.csrf.clone(),
        ..Page::new(&s.url, origin)
    };
    assert_eq!(
        forged.post(&json!({"id": "x4", "texto": "oi"})).await.status(),
        401
    );

    // Bad input: the field named, the value never echoed.
    let bad = |body: reqwest::Body, kind: &'static str| {
        let r = s
            .client
            .post(format!("{}/webchat/api/mensagens", s.url))
            .header("origin", origin)
            .header("x-csrf-token", &page.csrf)
            .header("cookie", page.cookie.as_deref().expect("cookie"))
            .header("content-type", kind)
            .body(body);
        async move {
            let r = r.send().await.expect("post");
            (r.status(), r.json::<Value>().await.unwrap_or_default())
        }
    };
    let (status, body) = bad(r#"{"id": "y1", "texto": 5511}"#.into(), "application/json").await;
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("texto"))
    );
    assert!(!body.to_string().contains("5511"), "{body}");
    let (status, body) = bad(
        r#"{"id": "y2", "texto": "oi", "cartao": "1"}"#.into(),
        "application/json",
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, _) = bad(vec![b'{', 0xff, 0xfe, b'}'].into(), "application/json").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = bad("texto=oi".into(), "application/x-www-form-urlencoded").await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let long = json!({"id": "y3", "texto": "a".repeat(5000)}).to_string();
    let (status, body) = bad(long.into(), "application/json").await;
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("texto"))
    );
    let huge = json!({"id": "y4", "texto": "a".repeat(40_000)}).to_string();
    assert_eq!(
        bad(huge.into(), "application/json").await.0,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    let (status, body) = bad(r#"{"id": "../../etc", "texto": "oi"}"#.into(), "application/json").await;
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("id"))
    );
    assert_eq!(
        page_messages(&chat, &page.conversation_id()).await,
        stored,
        "nothing refused was stored"
    );
}

/// What the person said in conversation `id`, in order, as stored.
pub(crate) async fn page_messages(chat: &ChatHarness, id: &str) -> Vec<String> {
    let messages = chat.store.messages(id).await.expect("messages");
    messages
        .into_iter()
        .filter_map(|m| match m.message {
            vt_engine::llm::ChatMessage::User { content } => Some(content),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_token_opens_the_persons_conversation_on_any_device_of_its_own_tenant_only() {
    let origin = "http://localhost:8125";
    let chat = Arc::new(chat_harness_paying().await);
    let s = serve(chat.clone(), &webchat(origin, 20)).await;
    let mut laptop = Page::new(&s.url, origin);
    let (status, body, _) = laptop
        .open("acme", Some(&user_token(ACME_KEY, "acme", "cliente-42", 600)))
        .await;
    assert_eq!(
        (status, body["identificado"].as_bool()),
        (StatusCode::OK, Some(true)),
        "{body}"
    );
    laptop.say(&format!("saldo do cartão {CARD}")).await;

    // Another device, a fresh token of the same person: their history, and the card remembered.
    let mut phone = Page::new(&s.url, origin);
    phone
        .open("acme", Some(&user_token(ACME_KEY, "acme", "cliente-42", 600)))
        .await;
    let mut stream = phone.events(None).await;
    let history = stream.until("é R$").await;
    assert!(text(&history[0].1).contains("****8901"), "{history:?}");
    phone.say("saldo").await;
    let answer = stream.until("8901").await;
    assert!(
        answer
            .iter()
            .any(|(_, e)| e["papel"] == "assistant" && text(e).contains("****8901")),
        "the remembered card: {answer:?}"
    );

    // A token of another tenant's key, or naming another tenant, or too long, or expired: refused.
    let mut stranger = Page::new(&s.url, origin);
    for (token, why) in [
        (
            user_token(BETA_KEY, "acme", "cliente-42", 600),
            "another tenant's key",
        ),
        (
            user_token(ACME_KEY, "beta", "cliente-42", 600),
            "another tenant named",
        ),
        (user_token(ACME_KEY, "acme", "cliente-42", 86_400), "a day long"),
        (user_token(ACME_KEY, "acme", "cliente-42", -120), "expired"),
    ] {
        let (status, body, cookie) = stranger.open("acme", Some(&token)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{why}: {body}");
        assert_eq!(body["error"]["field"], "token", "{why}");
        assert!(cookie.is_none() && !body.to_string().contains(&token), "{why}");
    }
    // A beta page with an acme token opens nothing of acme's.
    let mut beta = Page::new(&s.url, BETA_ORIGIN);
    let (status, _, _) = beta
        .open("beta", Some(&user_token(ACME_KEY, "acme", "cliente-42", 600)))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // The page renews its session (its token expired meanwhile): still the person's conversation.
    let signed_in = laptop.conversation_id();
    let (_, body, _) = laptop.renew("acme").await;
    assert_eq!(body["identificado"], true);
    assert_eq!(laptop.conversation_id(), signed_in);
    // Signed out at the operator (a page loads with no token): a new visitor, none of the person's history.
    let (_, body, _) = laptop.open("acme", None).await;
    assert_eq!(body["identificado"], false);
    let mut anonymous = laptop.events(None).await;
    let seen = anonymous.until_quiet(Duration::from_millis(1500)).await;
    assert!(seen.is_empty(), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_past_its_rate_is_told_to_wait_and_its_message_is_not_stored() {
    let origin = "http://localhost:8126";
    let chat = Arc::new(chat_harness_paying().await);
    let s = serve(chat.clone(), &webchat(origin, 2)).await;
    let mut page = Page::new(&s.url, origin);
    page.open("acme", None).await;
    page.say("oi").await;
    page.say("ajuda").await;
    let third = page.post(&json!({"id": "z3", "texto": "de novo"})).await;
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(third.headers().contains_key("retry-after"));
    assert_eq!(
        page_messages(&chat, &page.conversation_id()).await,
        ["oi", "ajuda"]
    );
}
