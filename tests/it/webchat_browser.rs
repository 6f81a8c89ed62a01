//! The web chat in a real browser on an operator's site, through a relay that is cut and restored: a
//! person chats, pays and is answered by a person.

use crate::browser::Browser;
use crate::support::chat_harness_paying;
use crate::webchat::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

// ---- a person's visit in a real browser ----

/// A TCP relay between the browser and `serve` that can be cut (every connection dropped, new ones
/// refused) and restored: a network that goes away and comes back.
pub(crate) struct Relay {
    pub(crate) url: String,
    pub(crate) cut: Arc<std::sync::atomic::AtomicBool>,
    pub(crate) links: Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Relay {
    /// A relay on a port of its own, relaying to what `target` will hold (`serve`'s address, known
    /// later: the page that embeds the chat names the relay first).
    pub(crate) async fn to(target: Arc<std::sync::OnceLock<String>>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let links: Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let (is_cut, held) = (cut.clone(), links.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if is_cut.load(std::sync::atomic::Ordering::SeqCst) {
                    continue; // dropped: the browser sees the connection fail
                }
                let target = target
                    .get()
                    .expect("serve's address")
                    .trim_start_matches("http://")
                    .to_owned();
                let link = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                held.lock().expect("links").push(link.abort_handle());
            }
        });
        Self { url, cut, links }
    }

    pub(crate) fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for link in self.links.lock().expect("links").drain(..) {
            link.abort();
        }
    }

    pub(crate) fn restore(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The operator's site: `/` embeds the chat from `chat` with a fresh user token of `cliente-42`, as a
/// signed-in page would; it records every console call the page makes. Returns its port.
pub(crate) async fn operator_site(chat: String) -> u16 {
    let page = move || {
        let token = user_token(ACME_KEY, "acme", "cliente-42", 600);
        let html = format!(
            r##"<!doctype html><html lang="pt-BR"><head><meta charset="utf-8"><title>Acme</title>
<script>window.__logs = []; ['log','info','warn','error','debug'].forEach(function (k) {{
  var o = console[k]; console[k] = function () {{ window.__logs.push([].slice.call(arguments).join(' ')); o.apply(console, arguments); }};
}}); window.__marca = 'sem recarregar';</script></head>
<body><h1>Acme Transportes</h1><a id="inicio" href="#">Início</a>
<script src="{chat}/webchat/widget.js" data-tenant="acme" data-user-token="{token}" async></script></body></html>"##
        );
        axum::response::Html(html)
    };
    let app = axum::Router::new().route("/", axum::routing::get(move || async move { page() }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

/// Runs `script` in the page with the chat's shadow root as `r` (`null` before the widget is there).
pub(crate) async fn in_widget(b: &Browser, script: &str) -> Value {
    let body =
        format!("const h = document.querySelector('#vt-webchat'); const r = h && h.shadowRoot; {script}");
    b.client.execute(&body, vec![]).await.expect("script")
}

/// Waits (up to `secs`) for `check` (a script returning a boolean, over `r`) to hold.
pub(crate) async fn until_widget(b: &Browser, check: &str, secs: u64, what: &str) {
    for _ in 0..secs * 10 {
        if in_widget(b, check).await == Value::Bool(true) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = in_widget(b, "return r ? r.querySelector('.log').innerText : 'no widget'").await;
    panic!("{what}: not in {secs} s; the chat shows: {log}");
}

/// Presses `keys` (each a key; WebDriver's codes for special keys) wherever the focus is.
pub(crate) async fn press(b: &Browser, keys: &str) {
    use fantoccini::actions::{InputSource, KeyAction, KeyActions};
    let mut actions = KeyActions::new("teclado".into());
    for key in keys.chars() {
        actions = actions
            .then(KeyAction::Down { value: key })
            .then(KeyAction::Up { value: key });
    }
    b.client.perform_actions(actions).await.expect("keys");
}

/// Types `text` into the chat's box and sends it with Enter, as a person does.
pub(crate) async fn type_and_send(b: &Browser, text: &str) {
    in_widget(b, "r.querySelector('textarea').focus()").await;
    press(b, &format!("{text}\u{E007}")).await;
}

/// Clicks the chat's element `css` (the last that matches).
pub(crate) async fn click_in_widget(b: &Browser, css: &str) {
    let done = in_widget(
        b,
        &format!("const all = r.querySelectorAll({css:?}); if (!all.length) return false; all[all.length - 1].click(); return true;"),
    )
    .await;
    assert_eq!(done, Value::Bool(true), "{css} to click");
}

/// How many messages of the chat's log contain `needle`, and whether their ids are each once.
pub(crate) async fn count(b: &Browser, needle: &str) -> (u64, bool) {
    let v = in_widget(
        b,
        &format!(
            "const items = [...r.querySelectorAll('.log li')]; const ids = items.map(i => i.dataset.id).filter(Boolean);
             return [items.filter(i => i.innerText.includes({needle:?})).length, new Set(ids).size === ids.length];"
        ),
    )
    .await;
    (v[0].as_u64().expect("count"), v[1].as_bool().expect("unique"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_chats_pays_and_is_answered_by_a_person_on_a_site_in_a_real_browser() {
    let chat = Arc::new(chat_harness_paying().await);
    // The relay, then the site that embeds the chat through it, then `serve` with the site's origin.
    let target = Arc::new(std::sync::OnceLock::new());
    let relay = Relay::to(target.clone()).await;
    let port = operator_site(relay.url.clone()).await;
    let site = format!("http://localhost:{port}");
    let s = serve(chat.clone(), &webchat(&site, 20)).await;
    target.set(s.url.clone()).expect("once");
    let Some(b) = Browser::start_for("webchat").await else {
        return;
    };

    // Keyboard only: from the page's first link to the bubble, Enter opens the chat in its box.
    b.client.goto(&format!("{site}/")).await.expect("the site");
    until_widget(
        &b,
        "return !!h && h.dataset.estado === 'conectado'",
        10,
        "the chat connects",
    )
    .await;
    b.shot("01-pagina").await;
    in_widget(&b, "document.querySelector('#inicio').focus()").await;
    press(&b, "\u{E004}").await;
    let focused = in_widget(
        &b,
        "return document.activeElement === h && r.activeElement.className",
    )
    .await;
    assert_eq!(focused, json!("bolha"), "Tab reaches the bubble");
    press(&b, "\u{E007}").await;
    let open = in_widget(
        &b,
        "return [r.querySelector('.painel').hidden, r.activeElement.tagName]",
    )
    .await;
    assert_eq!(
        open,
        json!([false, "TEXTAREA"]),
        "Enter opens it, the focus in the box"
    );
    let unlabelled = in_widget(
        &b,
        "return [...r.querySelectorAll('button, textarea, a')].filter(e => !e.getAttribute('aria-label') && !e.textContent.trim() && !(e.labels && e.labels.length)).map(e => e.outerHTML)",
    )
    .await;
    assert_eq!(unlabelled, json!([]), "every control has a label");

    // The balance, typed; the card masked once the message is on record.
    type_and_send(&b, &format!("saldo do cartão {CARD}")).await;
    until_widget(
        &b,
        "return r.querySelector('.log').innerText.includes('é R$')",
        15,
        "the balance",
    )
    .await;
    until_widget(
        &b,
        "return !r.querySelector('.pendente')",
        10,
        "the message on record",
    )
    .await;
    let shown = in_widget(&b, "return r.innerHTML + document.documentElement.outerHTML").await;
    assert!(
        !shown.as_str().expect("html").contains(CARD),
        "no card in clear on the page"
    );
    b.shot("02-saldo").await;

    // A Pix recharge: confirmed with the button, the QR shown, the code copied.
    type_and_send(&b, &format!("recarregar 20 no cartão {CARD} via pix")).await;
    until_widget(
        &b,
        "return [...r.querySelectorAll('.opcoes button')].some(x => x.textContent === 'Confirmar')",
        15,
        "the confirm button",
    )
    .await;
    // The product's emphasis is bold in the widget, never raw WhatsApp markup ("Responda \*sim\*" on
    // 80722d3).
    let asked = in_widget(
        &b,
        "const li = [...r.querySelectorAll('.log li.assistant')].pop(); return [li.innerText, [...li.querySelectorAll('strong')].map(s => s.textContent)]",
    )
    .await;
    let text = asked[0].as_str().unwrap_or_default();
    assert!(
        text.contains("****8901") && !text.contains("*sim*") && !text.contains("*não*"),
        "the card's stars stay, the marks go: {asked}"
    );
    assert_eq!(asked[1], json!(["sim", "não"]), "{asked}");
    click_in_widget(&b, ".opcoes button:first-child").await;
    until_widget(
        &b,
        "return !!r.querySelector('.pix img') && r.querySelector('.pix img').naturalWidth > 0",
        15,
        "the QR",
    )
    .await;
    let code = in_widget(&b, "return r.querySelector('.pix .texto').textContent").await;
    let code = code.as_str().expect("code").to_owned();
    assert!(code.starts_with("000201"), "{code}");
    click_in_widget(&b, ".pix .copiar").await;
    until_widget(
        &b,
        "return r.querySelector('.pix .copiar').textContent === 'Copiado'",
        5,
        "copied",
    )
    .await;
    b.shot("03-pix").await;

    // The simulator pays; the receipt appears without a reload.
    let txid = chat.sim.pix().charge_with_code(&code).expect("charge").txid;
    chat.sim.pix().pay(&txid, false).expect("paid");
    chat.service.payments().sweep().await;
    until_widget(
        &b,
        "return r.querySelector('.log').innerText.includes('Pagamento recebido')",
        15,
        "the receipt",
    )
    .await;
    assert_eq!(
        b.client
            .execute("return window.__marca", vec![])
            .await
            .expect("mark"),
        json!("sem recarregar")
    );
    b.shot("04-recibo").await;

    // A second browser profile, the same person signed in at the site: their history, their card.
    let Some(other) = Browser::start_for("webchat").await else {
        return;
    };
    other.client.goto(&format!("{site}/")).await.expect("the site");
    until_widget(
        &other,
        "return !!h && h.dataset.estado === 'conectado'",
        10,
        "the chat connects",
    )
    .await;
    click_in_widget(&other, ".bolha").await;
    until_widget(
        &other,
        "return r.querySelector('.log').innerText.includes('Pagamento recebido')",
        10,
        "the history",
    )
    .await;
    type_and_send(&other, "saldo").await;
    until_widget(
        &other,
        "return [...r.querySelectorAll('.log li.assistant')].pop().innerText.includes('****8901')",
        15,
        "the remembered card",
    )
    .await;
    other.shot("05-outro-perfil").await;

    // A person: the case opens; the connection is cut; the support agent answers in the console.
    type_and_send(&b, "quero falar com um atendente").await;
    until_widget(
        &b,
        "return !r.querySelector('.pendente') && !r.querySelector('.estado').textContent",
        15,
        "the hand-off",
    )
    .await;
    let case = chat
        .store
        .cases(Some("acme"), 10)
        .await
        .expect("cases")
        .into_iter()
        .next();
    let case = case.unwrap_or_else(|| panic!("a case of acme's"));
    relay.cut();
    until_widget(
        &b,
        "return h.dataset.estado === 'reconectando'",
        15,
        "the cut seen",
    )
    .await;
    other.sign_in(&s.url, SUPPORT).await;
    other.wait_path("/console/fila").await;
    other
        .client
        .goto(&format!("{}/console/cases/{}", s.url, case.id))
        .await
        .expect("case");
    other.submit("#assumir").await;
    other
        .type_into("#texto", "Olá, aqui é a Ana. Já vejo seu pedido.")
        .await;
    other.submit("#enviar").await;
    relay.restore();
    until_widget(
        &b,
        "return r.querySelector('.log').innerText.includes('aqui é a Ana')",
        30,
        "the person's reply after the cut",
    )
    .await;
    // A little longer: a double would come now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (replies, unique) = count(&b, "aqui é a Ana").await;
    assert_eq!((replies, unique), (1, true), "the reply once, every message once");
    assert_eq!(count(&b, "Pagamento recebido").await.0, 1);
    let agent = in_widget(
        &b,
        "return [...r.querySelectorAll('.log li.human_agent .quem')].map(e => e.textContent)",
    )
    .await;
    assert_eq!(agent, json!(["suporte · atendente"]));
    b.shot("06-atendente").await;

    // Nothing of the card in the page's storage or console.
    let kept = b
        .client
        .execute(
            "return [localStorage.length, sessionStorage.length, document.cookie, window.__logs]",
            vec![],
        )
        .await
        .expect("storage");
    assert_eq!(
        kept,
        json!([0, 0, "", []]),
        "no storage, no readable cookie, no console output"
    );

    // A page of another origin (the site's host by its address): no session, and its own calls fail.
    b.client
        .goto(&format!("http://127.0.0.1:{port}/"))
        .await
        .expect("other origin");
    until_widget(&b, "return !!h && h.dataset.estado === 'recusado'", 10, "refused").await;
    let post = b
        .client
        .execute_async(
            &format!(
                "const done = arguments[arguments.length - 1];
                 fetch('{}/webchat/api/mensagens', {{method: 'POST', credentials: 'include',
                   headers: {{'content-type': 'application/json'}}, body: JSON.stringify({{id: 'x', texto: 'oi'}})}})
                 .then(r => done('status ' + r.status), e => done('blocked'));",
                relay.url
            ),
            vec![],
        )
        .await
        .expect("fetch");
    assert_eq!(post, json!("blocked"), "CORS refuses another origin");
    b.shot("07-outra-origem").await;
    other.close().await;
    b.close().await;
}
