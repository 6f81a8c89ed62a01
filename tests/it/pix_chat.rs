//! A Pix recharge as people meet it: in the chat (charged first, credited when paid; a new code up to
//! the limit; none once paid), in `vt-agent flows`, in traces, with the embedded simulator as the provider
//! (in process and over HTTP), on Mattermost (the QR code uploaded), and a complaint about a payment.

use crate::pix::*;
use crate::pix_credits::*;
use crate::support::{quick_simulator, said};
use std::sync::{Arc, Mutex};
use vt_connectors::pix::Psp;
use vt_domain::pix::api::CobStatus;
use vt_domain::pix::{BrCode, txid};
use vt_simulators::systems::Simulator;

/// The card holder's journey with a provider configured: ask, confirm, get the code on its own; nothing
/// is recharged until the provider says it was paid; then one recharge and the receipt.
#[tokio::test]
async fn a_pix_recharge_in_the_chat_is_charged_first_and_credited_when_paid() {
    let h = crate::support::chat_harness_paying().await;
    let card = "1234567890";
    let ask = h
        .say("c-jornada", "recarregar 20 no cartão 1234567890 via pix")
        .await;
    assert!(
        ask.replies.iter().any(|r| r.text.contains("Confirma")),
        "{:?}",
        ask.replies
    );
    let yes = h.say("c-jornada", "sim").await;
    // The line, then the code alone, then (this user is in a terminal) the QR drawn in text, then the
    // QR as a file for the channels that show images (a reply with no text).
    assert_eq!(yes.replies.len(), 4, "{:?}", yes.replies);
    assert!(yes.replies[2].text.lines().count() > 20 && yes.replies[2].text.contains('▀'));
    assert!(yes.replies[3].text.is_empty());
    let qr = vt_domain::tools::qr_of(&yes.replies[3].files[0]).expect("the QR names its charge");
    assert!(yes.replies[0].text.contains("R$ 20,00") && yes.replies[0].text.contains("****7890"));
    assert!(!yes.replies[0].text.contains(card));
    let code = &yes.replies[1].text;
    BrCode::checked(code, reais("20")).expect("the code sent checks");
    assert_eq!(h.sim.charges(card), 0, "confirmed, not paid: nothing recharged");

    let charges = h
        .store
        .charges_in(vt_store::records::ChargeStatus::Ativa, 10)
        .await
        .expect("open");
    assert_eq!(charges.len(), 1);
    assert_eq!(&charges[0].copia_e_cola, code);
    assert_eq!(charges[0].txid, qr);
    // "sim" again charges nothing more.
    h.say("c-jornada", "sim").await;
    assert_eq!(
        h.store
            .charges_in(vt_store::records::ChargeStatus::Ativa, 10)
            .await
            .expect("open")
            .len(),
        1
    );

    h.sim.pix().pay(&charges[0].txid, false).expect("paid");
    assert_eq!(
        h.service
            .payments()
            .settle(&charges[0].txid)
            .await
            .expect("settle"),
        vt_agent::testkit::Settled::Credited
    );
    assert_eq!(h.sim.charges(card), 1, "one payment, one recharge");
    let receipt = said(&h, "c-jornada").await.pop().expect("receipt");
    assert!(
        receipt.contains("Pagamento recebido") && receipt.contains("R$ 20,00"),
        "{receipt}"
    );
}

/// A provider whose code does not check (a wrong CRC): the code is never shown, nothing is charged
/// or recorded, the card holder is told so, and the conversation goes to a person.
#[tokio::test]
async fn a_code_whose_crc_does_not_check_is_never_shown_and_a_person_gets_the_case() {
    let h = crate::support::chat_harness_pix(crate::support::Pix::Tampering).await;
    h.say("c-crc", "recarregar 20 no cartão 1234567890 via pix").await;
    let yes = h.say("c-crc", "sim").await;
    let said = vt_engine::conversation::Reply::join(&yes.replies);
    assert!(!said.contains("000201"), "no code shown: {said}");
    assert!(
        said.contains("nada foi cobrado") && said.contains("pessoa"),
        "{said}"
    );
    assert!(yes.replies.iter().all(|r| r.files.is_empty()), "no QR either");
    assert!(
        h.store
            .charges_in(vt_store::records::ChargeStatus::Ativa, 10)
            .await
            .expect("read")
            .is_empty(),
        "no charge on record"
    );
    assert!(
        h.store.open_case_of("c-crc").await.expect("read").is_some(),
        "a person gets the case"
    );
    assert_eq!(h.recharges(), 0);
}

/// Real systems and no provider: a Pix recharge in the chat is refused before anything is prepared —
/// it would be credited unpaid — and the other ways are offered; a boleto goes on, with its boleto.
#[tokio::test]
async fn without_a_provider_a_pix_recharge_is_refused_politely() {
    let h = crate::support::chat_harness_pix(crate::support::Pix::Refused).await;
    let ask = h
        .say("c-sem-pix", "recarregar 20 no cartão 1234567890 via pix")
        .await;
    let text = ask
        .replies
        .iter()
        .map(|r| r.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(text.contains("Pix ainda não está disponível"), "{text}");
    let yes = h.say("c-sem-pix", "sim").await;
    assert!(
        !yes.replies.iter().any(|r| r.text.contains("aprovada")),
        "{:?}",
        yes.replies
    );
    assert_eq!(h.sim.charges("1234567890"), 0, "nothing credited unpaid");
    // No card provider either: a card recharge is refused the same way, and only the boleto is offered.
    let card = h
        .say("c-sem-pix", "recarregar 20 no cartão 1234567890 no crédito")
        .await
        .reply_text();
    assert!(
        card.contains("cartão de crédito ainda não está disponível")
            && card.contains("Posso fazer a recarga no boleto"),
        "{card}"
    );
    let yes = h.say("c-sem-pix", "sim").await;
    assert!(
        !yes.replies.iter().any(|r| r.text.contains("aprovada")),
        "{:?}",
        yes.replies
    );
    assert_eq!(h.sim.charges("1234567890"), 0, "nothing credited unpaid");
    h.say("c-sem-pix", "recarregar 20 no cartão 1234567890 no boleto")
        .await;
    let boleto = h.say("c-sem-pix", "sim").await.reply_text();
    assert!(boleto.contains("Boleto da recarga de R$ 20,00"), "{boleto}");
    assert_eq!(
        h.sim.charges("1234567890"),
        0,
        "a boleto recharge waits for its boleto"
    );
}

/// The code expired: "novo código" issues the recharge's next charge (the old one withdrawn), which is
/// paid and credited once; while a code holds the same one is shown again; the limit is kept.
#[tokio::test]
async fn novo_codigo_issues_the_next_charge_of_the_same_recharge_up_to_the_limit() {
    use vt_store::records::ChargeStatus;
    let h = crate::support::chat_harness_paying().await;
    let conv = "c-novo";
    let card = "1234567890";
    let none = h.say(conv, "novo código").await;
    assert!(
        none.replies[0].text.contains("Não há nenhum código Pix"),
        "{:?}",
        none.replies
    );
    h.say(conv, "recarregar 20 no cartão 1234567890 via pix").await;
    let first = h.say(conv, "sim").await.replies[1].text.clone();
    // Still valid: the same code again, no new charge.
    let again = h.say(conv, "manda outro código pix").await;
    assert_eq!(again.replies[1].text, first);
    assert_eq!(
        h.store
            .charges_in(ChargeStatus::Ativa, 10)
            .await
            .expect("open")
            .len(),
        1
    );

    // Sixteen minutes later (no sweep yet): a new code, the old one withdrawn first.
    h.clock.set(h.clock.now() + chrono::Duration::minutes(16));
    let renewed = h.say(conv, "o código expirou").await;
    let second = renewed.replies[1].text.clone();
    assert_ne!(second, first);
    BrCode::checked(&second, reais("20")).expect("the new code checks");
    let open = h.store.charges_in(ChargeStatus::Ativa, 10).await.expect("open");
    assert_eq!(open.len(), 1, "one payable code at a time");
    assert_eq!(open[0].n, 1);
    assert_eq!(
        h.store
            .charges_in(ChargeStatus::Expirada, 10)
            .await
            .expect("expired")
            .len(),
        1
    );

    // Three new codes at most (the default): the fourth is refused.
    for n in 2..=3 {
        h.clock.set(h.clock.now() + chrono::Duration::minutes(16));
        let next = h.say(conv, "novo código").await;
        assert!(
            BrCode::checked(&next.replies[1].text, reais("20")).is_ok(),
            "code {n}"
        );
    }
    h.clock.set(h.clock.now() + chrono::Duration::minutes(16));
    let limit = h.say(conv, "novo código").await;
    assert!(
        limit.replies[0].text.contains("todos os códigos"),
        "{:?}",
        limit.replies
    );

    assert_eq!(h.sim.charges(card), 0, "no code was paid: nothing recharged");
}

#[tokio::test]
async fn a_paid_recharge_gets_no_new_code() {
    let h = crate::support::chat_harness_paying().await;
    let conv = "c-pago";
    h.say(conv, "recarregar 20 no cartão 1234567890 via pix").await;
    h.say(conv, "sim").await;
    let open = h
        .store
        .charges_in(vt_store::records::ChargeStatus::Ativa, 10)
        .await
        .expect("open");
    h.sim.pix().pay(&open[0].txid, false).expect("paid");
    h.service.payments().settle(&open[0].txid).await.expect("settle");
    let paid = h.say(conv, "novo código").await;
    assert!(paid.replies[0].text.contains("já foi pago"), "{:?}", paid.replies);
    assert_eq!(h.sim.charges("1234567890"), 1);
}

/// `vt-agent flows --pendentes` lists the charges waiting for payment beside the late recharges: the
/// txid, the amount, which code, when it expires — no card.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_pendentes_lists_the_charges_waiting_for_payment() {
    let data = tempfile::tempdir().expect("tmp");
    crate::support::test_keys();
    let store = vt_store::open(None, data.path(), vt_store::Usage::Service)
        .await
        .expect("store");
    let now = chrono::Utc::now();
    let charge = vt_store::records::PixCharge {
        meio: vt_store::records::ChargeMeans::Pix,
        txid: txid("k-lista", 1),
        recharge_key: "k-lista".into(),
        n: 1,
        conversation_id: "c-lista".into(),
        request: serde_json::json!({"cartao": "1234567890", "recarga": {"valor": 20}}),
        amount: reais("20"),
        copia_e_cola: "000201…".into(),
        status: vt_store::records::ChargeStatus::Ativa,
        expires_at: now + chrono::Duration::minutes(15),
        end_to_end_id: None,
        paid_at: None,
        created_at: now,
        refund: None,
        execucao_id: None,
    };
    store.open_charge(&charge).await.expect("charge");
    drop(store);
    let out = crate::cli::vt_agent_in(&data)
        .args(["flows", "--pendentes"])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("Cobranças Pix esperando pagamento"), "{text}");
    assert!(
        text.contains(&charge.txid) && text.contains("BRL 20,00"),
        "{text}"
    );
    assert!(!text.contains("1234567890"), "no card: {text}");
}

/// Paid, and the recharge system answers "pendente": the charge is handed to the recharge's follow-up
/// (step 15) and the sweep leaves it — no second request, no message every sweep.
#[tokio::test]
async fn a_paid_recharge_still_pending_is_left_to_its_follow_up() {
    use vt_agent::testkit::Settled;
    use vt_store::records::ChargeStatus;
    let h = crate::support::chat_harness_paying().await;
    h.say("c-pendente", "oi").await;
    // The recharge system answers this magic card's recharges "pendente".
    let cobranca = issued(&h, "c-pendente", "6666666666", 20, "k-pendente").await;
    h.sim.pix().pay(&cobranca.txid, false).expect("paid");
    assert_eq!(
        h.service.payments().settle(&cobranca.txid).await.expect("settle"),
        Settled::Processing
    );
    let told = said(&h, "c-pendente").await.len();
    let requests =
        |h: &crate::support::ChatHarness| h.sim.ledger().iter().filter(|e| e.sistema == "recarga").count();
    let sent = requests(&h);
    h.clock.set(h.clock.now() + chrono::Duration::minutes(5));
    assert_eq!(h.service.payments().sweep().await, 0);
    assert_eq!(requests(&h), sent, "not sent again by the sweep");
    assert_eq!(said(&h, "c-pendente").await.len(), told, "nothing said again");
    assert_eq!(on_record(&h, &cobranca.txid).await.status, ChargeStatus::Enviada);
}

/// The names of the spans opened while it is the thread's subscriber.
#[derive(Clone, Default)]
pub(crate) struct SpanNames(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for SpanNames {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _id: &tracing::span::Id,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct Name(Option<String>);
        impl tracing::field::Visit for Name {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                if field.name() == "otel.name" {
                    self.0 = Some(value.to_owned());
                }
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "otel.name" {
                    self.0 = Some(format!("{value:?}").trim_matches('"').to_owned());
                }
            }
        }
        let mut name = Name(None);
        attrs.record(&mut name);
        if let Some(n) = name.0 {
            self.0.lock().expect("lock").push(n);
        }
    }
}

/// Each call to the provider is a span of its own in the trace of what made it.
#[tokio::test]
async fn each_call_to_the_provider_is_a_span() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let h = crate::support::chat_harness_paying().await;
    h.say("c-spans", "oi").await;
    let names = SpanNames::default();
    let _traced = tracing::subscriber::set_default(tracing_subscriber::registry().with(names.clone()));
    let cobranca = issued(&h, "c-spans", "7777777777", 20, "k-spans").await;
    h.sim.pix().pay(&cobranca.txid, false).expect("paid");
    h.service.payments().settle(&cobranca.txid).await.expect("settle");
    let seen = names.0.lock().expect("lock").clone();
    for call in ["pix: criar cobrança", "pix: ler cobrança", "pix: devolução"] {
        assert!(seen.iter().any(|n| n == call), "{call} in {seen:?}");
    }
}

/// The embedded simulator as the provider, called in this process (no network, no credentials): the
/// same API Pix as over HTTP.
#[tokio::test]
async fn the_embedded_simulator_is_a_provider_in_process() {
    let sim = Simulator::new(quick_simulator());
    let psp = Psp::in_process(sim.local());
    let id = txid("k-no-processo", 0);
    let cob = psp.criar_cob(&id, &pedido("12.50")).await.expect("created");
    BrCode::checked(cob.pix_copia_e_cola.as_deref().expect("code"), reais("12.50")).expect("checks");
    assert_eq!(psp.cob(&id).await.expect("read").status, CobStatus::Ativa);
    sim.pix().pay(&id, false).expect("paid");
    let paid = psp.cob(&id).await.expect("read");
    assert_eq!(paid.status, CobStatus::Concluida);
    let missing = psp.cob(&txid("outra", 0)).await.expect_err("unknown");
    assert!(missing.is_not_found(), "{missing}");
}

/// Conversation `conv` read from `url` once its Pix receipt is there (or after 10 s), as JSON text.
pub(crate) async fn receipt_in(http: &reqwest::Client, url: &str, conv: &str) -> String {
    let mut conversation = String::new();
    for _ in 0..100 {
        conversation = http
            .get(format!("{url}/v1/conversations/{conv}"))
            .send()
            .await
            .expect("get")
            .text()
            .await
            .expect("text");
        if conversation.contains("Pagamento recebido") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    conversation
}

/// `vt-agent serve` on `data` with no configuration: the embedded simulator, paying only when told.
pub(crate) fn serve_unconfigured(data: &tempfile::TempDir) -> (std::process::Child, String) {
    let mut cmd = crate::cli::vt_agent_in(data);
    cmd.env("VT_SIMULATOR_PIX_PAGAR_APOS_SEGUNDOS", "0")
        .args(["serve", "--addr", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let url = crate::support::listening_on(&mut stderr);
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, url)
}

/// `vt-agent serve` with no configuration, over HTTP: the embedded simulator is the provider. "sim"
/// answers the code with its QR (`pix` fields), nothing is recharged until it is paid; paying it at
/// `POST /_simulador/pix/{txid}/pagar` (as a payer's bank would) is noticed in process and the receipt
/// lands in the conversation. The charge survives in the simulator's book: a code shown by a
/// `chat --message` process before is paid through this server too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_configuration_serve_takes_pix_from_the_embedded_simulator_over_http() {
    use base64::Engine as _;
    let data = tempfile::tempdir().expect("tmp");
    let (mut child, url) = serve_unconfigured(&data);
    let http = reqwest::Client::new();
    let say = |text: &str| {
        http.post(format!("{url}/v1/conversations/c-http/messages"))
            .json(&serde_json::json!({"text": text, "user": {"id": "u-http"}}))
            .send()
    };
    let ask: serde_json::Value = say("recarregar 20 no cartão 1234567890 via pix")
        .await
        .expect("ask")
        .json()
        .await
        .expect("json");
    assert!(ask.to_string().contains("Confirma"), "{ask}");
    let yes: serde_json::Value = say("sim").await.expect("yes").json().await.expect("json");
    let replies = yes["replies"].as_array().expect("replies");
    let pix = replies
        .iter()
        .find_map(|r| r.get("pix"))
        .unwrap_or_else(|| panic!("a reply with the code: {yes}"));
    let code = pix["copia_e_cola"].as_str().expect("code");
    BrCode::checked(code, reais("20")).expect("checks");
    assert!(
        replies.iter().any(|r| r["text"] == code),
        "the code is a message of its own too: {yes}"
    );
    let png = base64::engine::general_purpose::STANDARD
        .decode(pix["qr_png_base64"].as_str().expect("qr"))
        .expect("base64");
    assert_eq!(png, vt_domain::pix::qr::png(code).expect("png"));
    assert!(pix["expira_em"].as_str().is_some_and(|t| t.ends_with('Z')));
    let txid = code
        .split("/qr/v2/")
        .nth(1)
        .map(|rest| &rest[..34])
        .expect("the charge's location names its txid")
        .to_owned();

    let read = || async {
        http.get(format!("{url}/v1/conversations/c-http"))
            .send()
            .await
            .expect("get")
            .json::<serde_json::Value>()
            .await
            .expect("json")
            .to_string()
    };
    assert!(
        !read().await.contains("Pagamento recebido"),
        "not paid: no receipt"
    );
    let paid = http
        .post(format!("{url}/_simulador/pix/{txid}/pagar"))
        .send()
        .await
        .expect("pay");
    assert_eq!(paid.status(), 200);
    let conversation = receipt_in(&http, &url, "c-http").await;
    assert!(
        conversation.contains("Pagamento recebido e recarga feita: R$ 20,00 no cartão ****7890"),
        "{conversation}"
    );
    assert!(!conversation.contains("1234567890"), "masked: {conversation}");
    let again = http
        .post(format!("{url}/_simulador/pix/{txid}/pagar"))
        .send()
        .await
        .expect("pay again");
    assert_eq!(again.status(), 400, "a paid code cannot be paid again");
    let _ = child.kill();
    let _ = child.wait();

    // A code shown by another process (a one-shot chat) is in the book: this server pays it.
    let mut chat = crate::cli::vt_agent_in(&data);
    chat.env("VT_SIMULATOR_PIX_PAGAR_APOS_SEGUNDOS", "0").args([
        "chat",
        "--conversation",
        "c-cli",
        "-m",
        "recarregar 30 no cartão 1111111111 via pix",
    ]);
    assert!(chat.output().expect("chat").status.success());
    let mut chat = crate::cli::vt_agent_in(&data);
    chat.env("VT_SIMULATOR_PIX_PAGAR_APOS_SEGUNDOS", "0").args([
        "chat",
        "--conversation",
        "c-cli",
        "-m",
        "sim",
    ]);
    let shown = String::from_utf8_lossy(&chat.output().expect("chat").stdout).into_owned();
    let code = shown
        .lines()
        .find(|l| l.starts_with("000201"))
        .unwrap_or_else(|| panic!("{shown}"))
        .to_owned();
    let txid = code
        .split("/qr/v2/")
        .nth(1)
        .map(|rest| rest[..34].to_owned())
        .expect("txid");
    let (mut child, url) = serve_unconfigured(&data);
    let paid = http
        .post(format!("{url}/_simulador/pix/{txid}/pagar"))
        .send()
        .await
        .expect("pay");
    assert_eq!(paid.status(), 200, "the other process's charge is known here");
    let conversation = receipt_in(&http, &url, "c-cli").await;
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        conversation.contains("Pagamento recebido e recarga feita: R$ 30,00 no cartão ****1111"),
        "{conversation}"
    );
}

/// On Mattermost a code's QR is a file of its post: drawn from the charge on record, uploaded to the
/// conversation's channel (`POST /api/v4/files`), then posted with its id.
#[tokio::test]
async fn on_mattermost_a_codes_qr_is_uploaded_and_attached_to_its_post() {
    use vt_agent::ChannelSender as _;
    let h = crate::support::chat_harness_paying().await;
    let conv = "mm:canal1:user1";
    h.say(conv, "oi").await;
    let cobranca = issued(&h, conv, "1234567890", 20, "k-mm").await;
    let mm = crate::support::FakeServer::start(vec![(201, vec![], serde_json::json!({"id": "post-1"}))])
        .await
        .answering_uploads();
    let config = vt_agent::testkit::MattermostConfig {
        url: Some(mm.url.clone()),
        bot_token: Some("token-do-bot".into()),
        ..Default::default()
    };
    let sender = vt_agent::testkit::PostSender::new(Arc::new(config))
        .expect("on")
        .with_files(h.store.clone());
    let mut payload = crate::support::reply_payload(conv, "user1", "");
    payload["files"] = serde_json::to_value([vt_domain::tools::qr_file(&cobranca.txid)]).expect("json");
    let item = vt_store::records::OutboxItem {
        id: 1,
        kind: "reply".into(),
        destination: "mattermost".into(),
        payload,
        conversation_id: Some(conv.into()),
        status: vt_store::records::OutboxStatus::InFlight,
        attempts: 1,
        max_attempts: 5,
        next_attempt_at: chrono::Utc::now(),
        last_error: None,
        message_id: None,
    };
    let reply = vt_agent::ReplyPayload::of(&item).expect("a reply");
    let sent = sender.send(&item, &reply).await.expect("sent");
    assert_eq!(sent.as_deref(), Some("post-1"));
    let received = mm.received();
    assert_eq!(received.len(), 2, "the upload, then the post");
    assert!(received[0].path.ends_with("/api/v4/files"));
    let png = vt_domain::pix::qr::png(&cobranca.copia_e_cola).expect("png");
    assert!(received[0].raw.windows(png.len()).any(|w| w == png.as_slice()));
    assert!(String::from_utf8_lossy(&received[0].raw).contains("canal1"));
    assert!(received[1].path.ends_with("/api/v4/posts"));
    assert_eq!(received[1].body["channel_id"], "canal1");
    assert_eq!(received[1].body["file_ids"], serde_json::json!(["arquivo-1"]));
}

/// A complaint about a payment, without a model: the conversation's charge is looked up and what
/// happened to it is said — waiting for the bank, then credited — and nothing new is charged or sent;
/// with nothing on record, a case `pagamento_nao_creditado` is opened. Never a new recharge: on main
/// (80722d3) "paguei o pix … e a recarga não caiu no cartão …" asked for the amount to recharge.
#[tokio::test]
async fn a_complaint_about_a_payment_is_looked_up_never_a_new_recharge() {
    let h = crate::support::chat_harness_paying().await;
    let card = "1234567890";
    h.say("c-queixa", "recarregar 20 no cartão 1234567890 via pix")
        .await;
    h.say("c-queixa", "sim").await;
    let open = h
        .store
        .charges_in(vt_store::records::ChargeStatus::Ativa, 10)
        .await
        .expect("open");
    assert_eq!(open.len(), 1);
    // Said before the bank confirmed: no new code, no recharge, told not to pay again.
    let early = h
        .say(
            "c-queixa",
            "paguei o pix agora e a recarga não caiu no cartão 1234567890",
        )
        .await;
    assert_eq!(early.intent.as_deref(), Some("verificar_pagamento"));
    let text: String = early.replies.iter().map(|r| r.text.as_str()).collect();
    assert!(text.contains("Não pague de novo"), "{text}");
    assert!(
        !text.contains(card) && !text.contains("me diga o valor"),
        "{text}"
    );
    assert_eq!(h.sim.charges(card), 0);

    h.sim.pix().pay(&open[0].txid, false).expect("paid");
    h.service.payments().settle(&open[0].txid).await.expect("settle");
    let later = h.say("c-queixa", "fiz o pagamento e não creditou").await;
    let text: String = later.replies.iter().map(|r| r.text.as_str()).collect();
    assert!(text.contains("creditada no cartão ****7890"), "{text}");
    assert_eq!(
        h.sim.charges(card),
        1,
        "one payment, one recharge: the complaint sent none"
    );
    let charges = h.store.conversation_charges("c-queixa").await.expect("charges");
    assert_eq!(charges.len(), 1, "no new charge");
    assert!(h.store.open_case_of("c-queixa").await.expect("case").is_none());

    // Nothing paid in this conversation: a person looks into it, with the payment's reason.
    let none = h.say("c-sem-registro", "cobraram duas vezes").await;
    assert_eq!(none.intent.as_deref(), Some("verificar_pagamento"));
    let case = h
        .store
        .open_case_of("c-sem-registro")
        .await
        .expect("case")
        .expect("a case opened");
    assert_eq!(case.motivo, vt_contract::HandoffReason::PagamentoNaoCreditado);
    assert_eq!(h.sim.charges(card), 1);
}
