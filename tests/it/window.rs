//! WhatsApp's 24-hour window against the Graph API fake, in Meta's payloads: free text inside it, the
//! purpose's template outside (named parameters, cleaned), a dead letter with its reason — before
//! anything is sent — when no template fits or a parameter cannot be, a template stopped by its
//! lifecycle webhook and resumed by the next, and a support agent's late reply: the template that asks
//! the card holder back, the agent's words held and delivered when they answer.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{Duration, Utc};
use serde_json::{Value, json};
use vt_agent::ReplyPayload;
use vt_agent::testkit::TemplateUse;
use vt_agent::testkit::WhatsAppConfig;
use vt_agent::testkit::{Sender, Templates};
use vt_store::records::NewOutboxItem;
use vt_store::records::OutboxStatus;

use crate::support::{FakeServer, Served};

pub(crate) const PHONE: &str = "106540352242922";

pub(crate) struct Wa {
    pub(crate) served: Served,
    pub(crate) graph: FakeServer,
    pub(crate) worker: vt_agent::Worker,
}

pub(crate) fn config(graph: &str) -> WhatsAppConfig {
    WhatsAppConfig {
        graph_url: graph.into(),
        api_version: "v23.0".into(),
        phone_number_id: Some(PHONE.into()),
        access_token: Some("EAAtesttokenvalue0123456789".into()),
        app_secret: Some(crate::whatsapp::SECRET.into()),
        verify_token: Some("vibecoding".into()),
        // The privacy notice has its own test (whatsapp.rs); here it would be one more message.
        aviso_privacidade: String::new(),
        juntar_ms: 0,
        ..Default::default()
    }
}

/// The shipped templates (`templates/`).
pub(crate) fn templates() -> Arc<Templates> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("templates");
    Arc::new(Templates::load(&dir).expect("the shipped templates load"))
}

/// WhatsApp's prices per message in dollars, at R$ 5 to the dollar.
pub(crate) fn prices() -> vt_agent::testkit::CustosConfig {
    toml::from_str("moeda = \"USD\"\ncambio_brl = 5.0\n[whatsapp]\nutility = 0.0068\nmarketing = 0.0625\n")
        .expect("prices")
}

pub(crate) async fn whatsapp(graph_answers: Vec<crate::support::Canned<'static>>) -> Wa {
    let chat = crate::support::chat_harness(None, vt_domain::tools::VtSettings::default()).await;
    whatsapp_on(chat, graph_answers).await
}

/// [`whatsapp`] in front of the service of `chat`.
pub(crate) async fn whatsapp_on(
    chat: crate::support::ChatHarness,
    graph_answers: Vec<crate::support::Canned<'static>>,
) -> Wa {
    whatsapp_with(chat, graph_answers, templates()).await
}

/// [`whatsapp_on`] with `templates` approved.
pub(crate) async fn whatsapp_with(
    chat: crate::support::ChatHarness,
    graph_answers: Vec<crate::support::Canned<'static>>,
    templates: Arc<Templates>,
) -> Wa {
    let chat = Arc::new(chat);
    let graph = FakeServer::start(graph_answers).await.answering_read_receipts();
    let config = config(&graph.url);
    let wiring = vt_agent::Wiring {
        service: chat.service.clone(),
        agent: "vt".into(),
        tenant: vt_engine::conversation::DEFAULT_TENANT.into(),
    };
    let channel = vt_agent::testkit::whatsapp_channel(&config, &templates, &wiring);
    let state =
        vt_agent::AppState::new(chat.service.clone(), "vt", Default::default()).with_channel(&channel);
    let sender = Sender::new(&config)
        .expect("on")
        .with_window(chat.store.clone(), templates)
        .with_costs(
            chat.store.clone(),
            prices(),
            vt_engine::conversation::DEFAULT_TENANT,
        );
    let worker = vt_agent::Worker::new(chat.store.clone(), vt_engine::retry::RetryPolicy::new(5, 1))
        .with_sender(Arc::new(sender));
    let served = crate::support::serve_state(chat, state).await;
    Wa {
        served,
        graph,
        worker,
    }
}

impl Wa {
    /// What the Graph fake was asked to send (read receipts apart).
    pub(crate) fn sends(&self) -> Vec<Value> {
        self.graph
            .received()
            .into_iter()
            .map(|r| r.body)
            .filter(|b| b["status"] != "read")
            .collect()
    }

    pub(crate) async fn enqueue(&self, to: &str, text: &str, template: Option<TemplateUse>) -> i64 {
        let store = &self.served.chat.store;
        let conversation = vt_agent::testkit::whatsapp_conversation_id(PHONE, to);
        store
            .enqueue(
                &NewOutboxItem {
                    kind: "reply".into(),
                    destination: "whatsapp".into(),
                    payload: ReplyPayload {
                        conversation_id: conversation.clone(),
                        user_id: to.into(),
                        text: text.into(),
                        files: Vec::new(),
                        reply_to: None,
                        thread: None,
                        confirmation: None,
                        choices: Vec::new(),
                        trace: None,
                        template,
                        fluxo: None,
                    }
                    .to_value(),
                    max_attempts: 5,
                    next_attempt_at: Utc::now(),
                    conversation_id: Some(conversation),
                    status: OutboxStatus::Pending,
                },
                Utc::now(),
            )
            .await
            .expect("enqueue")
    }

    pub(crate) async fn item(&self, id: i64) -> vt_store::records::OutboxItem {
        self.served
            .chat
            .store
            .outbox_item(id)
            .await
            .expect("read")
            .expect("item")
    }

    pub(crate) async fn deliver(&self, body: &[u8]) -> u16 {
        self.served
            .client
            .post(format!("{}/channels/whatsapp/webhook", self.served.url))
            .header("content-type", "application/json")
            .header("x-hub-signature-256", crate::whatsapp::sign(body))
            .body(body.to_vec())
            .send()
            .await
            .expect("sent")
            .status()
            .as_u16()
    }
}

/// The company's import says `wa_id` agreed to notices.
pub(crate) async fn opt_in(wa: &Wa, wa_id: &str) {
    wa.served
        .chat
        .store
        .record_consent(&vt_store::concerns::ConsentChange {
            wa_id: wa_id.into(),
            opted_in: true,
            source: "importacao".into(),
            who: "teste".into(),
            at: Utc::now() - Duration::days(30),
        })
        .await
        .expect("opt-in");
}

pub(crate) fn low_balance(card_end: &str, balance: &str) -> Option<TemplateUse> {
    Some(TemplateUse {
        purpose: "saldo_baixo".into(),
        parameters: BTreeMap::from([
            ("cartao_final".to_owned(), card_end.to_owned()),
            ("saldo".to_owned(), balance.to_owned()),
        ]),
    })
}

/// A template's lifecycle webhook as Meta documents it.
pub(crate) fn template_event(event: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"entry": [{"id": "102290129340398", "time": 1763900000, "changes": [{
        "field": "message_template_status_update",
        "value": {"event": event, "message_template_id": 1234567890, "message_template_name": "saldo_baixo_v1",
                  "message_template_language": "pt_BR", "reason": "NONE", "message_template_category": "UTILITY"}}]}],
        "object": "whatsapp_business_account"}))
    .expect("bytes")
}

/// A user's text as Meta delivers it, sent at `sent_at`.
pub(crate) fn text_at(from: &str, text: &str, wamid: &str, sent_at: chrono::DateTime<Utc>) -> Vec<u8> {
    let mut v: Value =
        serde_json::from_slice(&crate::whatsapp::text_notification(text, wamid)).expect("json");
    let value = &mut v["entry"][0]["changes"][0]["value"];
    value["contacts"][0]["wa_id"] = json!(from);
    value["messages"][0]["from"] = json!(from);
    value["messages"][0]["timestamp"] = json!(sent_at.timestamp().to_string());
    serde_json::to_vec(&v).expect("bytes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inside_the_window_text_outside_it_the_template_or_a_dead_letter_before_sending() {
    let wa = whatsapp(vec![crate::whatsapp::sent(); 10]).await;
    let store = wa.served.chat.store.clone();
    let (recent, quiet) = ("5511900000023", "5511900000025");
    store
        .touch_contact(recent, Utc::now() - Duration::hours(23))
        .await
        .expect("touch");
    store
        .touch_contact(quiet, Utc::now() - Duration::hours(25))
        .await
        .expect("touch");
    opt_in(&wa, quiet).await;

    // 23 h after the user wrote: the text itself.
    wa.enqueue(
        recent,
        "Seu saldo está baixo: R$ 12,50.",
        low_balance("7890", "R$ 12,50"),
    )
    .await;
    assert_eq!(wa.worker.pass().await.sent, 1);
    assert_eq!(wa.sends()[0]["type"], "text");
    let costs = |store: &Arc<dyn vt_store::Store>| {
        let store = store.clone();
        async move {
            store
                .message_costs_since(chrono::DateTime::UNIX_EPOCH)
                .await
                .expect("costs")
        }
    };
    assert!(
        costs(&store).await.is_empty(),
        "inside the window a reply is free"
    );

    // 25 h: the template, with its named parameters (a newline cleaned away) and its quick reply.
    wa.enqueue(
        quiet,
        "Seu saldo está baixo: R$ 12,50.",
        low_balance("7890", "R$\n12,50"),
    )
    .await;
    assert_eq!(wa.worker.pass().await.sent, 1);
    let template = wa.sends()[1].clone();
    assert_eq!(template["type"], "template", "{template}");
    assert_eq!(template["to"], quiet);
    assert_eq!(template["template"]["name"], "saldo_baixo_v1");
    assert_eq!(template["template"]["language"]["code"], "pt_BR");
    assert_eq!(
        template["template"]["components"][0]["parameters"],
        json!([{"type": "text", "parameter_name": "cartao_final", "text": "7890"},
               {"type": "text", "parameter_name": "saldo", "text": "R$ 12,50"}])
    );
    assert_eq!(template["template"]["components"][1]["sub_type"], "quick_reply");
    // A utility template outside the window is paid: 0.0068 USD × 5 = R$ 0,034.
    let paid = costs(&store).await;
    assert_eq!(paid.len(), 1);
    assert_eq!(
        (
            paid[0].category.as_str(),
            paid[0].custo_micro_brl,
            paid[0].tenant_id.as_str()
        ),
        ("utility", Some(34_000), vt_engine::conversation::DEFAULT_TENANT)
    );

    // No template for a plain reply, or a parameter that cannot be cleaned: dead-lettered with the
    // reason, and the fake never asked.
    let plain = wa.enqueue(quiet, "Olá de novo", None).await;
    let empty = wa
        .enqueue(quiet, "Seu saldo está baixo", low_balance("7890", " \n "))
        .await;
    wa.worker.pass().await;
    wa.worker.pass().await;
    assert_eq!(wa.sends().len(), 2, "nothing else reached Meta");
    assert_eq!(costs(&store).await.len(), 1, "what was not sent costs nothing");
    let plain = wa.item(plain).await;
    assert_eq!(plain.status, OutboxStatus::Failed);
    assert_eq!(
        plain.last_error.as_deref(),
        Some("fora da janela de 24 h e sem modelo para 'resposta'")
    );
    let empty = wa.item(empty).await;
    assert_eq!(empty.status, OutboxStatus::Failed);
    assert!(
        empty
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("parâmetro 'saldo'"),
        "{empty:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_template_is_not_used_until_approved_again() {
    let wa = whatsapp(vec![crate::whatsapp::sent(); 10]).await;
    let quiet = "5511900000025";
    wa.served
        .chat
        .store
        .touch_contact(quiet, Utc::now() - Duration::hours(30))
        .await
        .expect("touch");
    opt_in(&wa, quiet).await;
    assert_eq!(wa.deliver(&template_event("PAUSED")).await, 200);
    let paused = wa
        .enqueue(quiet, "Saldo baixo", low_balance("7890", "R$ 1,00"))
        .await;
    wa.worker.pass().await;
    let paused = wa.item(paused).await;
    assert_eq!(paused.status, OutboxStatus::Failed);
    assert!(
        paused
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("PAUSED"),
        "{paused:?}"
    );
    assert!(wa.sends().is_empty());
    assert_eq!(wa.deliver(&template_event("APPROVED")).await, 200);
    wa.enqueue(quiet, "Saldo baixo", low_balance("7890", "R$ 1,00"))
        .await;
    assert_eq!(wa.worker.pass().await.sent, 1);
    assert_eq!(wa.sends()[0]["type"], "template");
    let states = wa.served.chat.store.template_states().await.expect("states");
    assert_eq!(states[0].status.as_deref(), Some("APPROVED"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_support_agents_late_reply_asks_the_card_holder_back_and_follows_their_answer() {
    use vt_agent::testkit::SupportAgent;
    let wa = whatsapp(vec![crate::whatsapp::sent(); 10]).await;
    let user = "5511988887777";
    let conversation = vt_agent::testkit::whatsapp_conversation_id(PHONE, user);
    // The card holder asked for a person 25 hours ago.
    let asked = text_at(
        user,
        "quero falar com um atendente",
        "wamid.L1",
        Utc::now() - Duration::hours(25),
    );
    assert_eq!(wa.deliver(&asked).await, 200);
    let chat = wa.served.chat.clone();
    let mut case = None;
    for _ in 0..100 {
        case = chat.store.open_case_of(&conversation).await.expect("read");
        if case.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let case = case.expect("a case");
    opt_in(&wa, user).await;
    // The transfer's own answer, a plain reply, finds the window closed and has no template: it is
    // dead-lettered with that reason (the test's clock put the message 25 hours back).
    let _ = wa.worker.pass().await;
    let before = wa.sends().len();
    let agent = SupportAgent {
        login: "ana",
        name: "Ana",
        tenant: None,
    };
    chat.service
        .cases()
        .claim_case(&case.id, agent)
        .await
        .expect("claim");
    chat.service
        .cases()
        .agent_reply(&case.id, agent, "Olá! Seu cartão foi desbloqueado.")
        .await
        .expect("reply");
    chat.service
        .cases()
        .agent_reply(&case.id, agent, "Posso ajudar em algo mais?")
        .await
        .expect("reply");
    let pass = wa.worker.pass().await;
    assert_eq!(pass.held, 1, "{pass:?}");
    assert_eq!(
        chat.store.outbox_count(OutboxStatus::Held).await.expect("count"),
        1,
        "the first of the agent's messages waits; the second waits behind it"
    );
    let sent: Vec<Value> = wa.sends()[before..].to_vec();
    assert_eq!(sent.len(), 1, "only the template: {sent:?}");
    assert_eq!(sent[0]["template"]["name"], "retomar_atendimento_v1");
    assert_eq!(
        sent[0]["template"]["components"][0]["parameters"][0]["text"],
        "Ana"
    );
    assert_eq!(wa.worker.pass().await.sent, 0, "the words wait for the answer");

    // The card holder taps Continuar (a template's quick reply comes as a `button` message).
    let mut tap: Value = serde_json::from_slice(&text_at(user, "-", "wamid.L2", Utc::now())).expect("json");
    let m = &mut tap["entry"][0]["changes"][0]["value"]["messages"][0];
    m["type"] = json!("button");
    m["button"] = json!({"text": "Continuar", "payload": "continuar"});
    m.as_object_mut().map(|o| o.remove("text"));
    assert_eq!(wa.deliver(&serde_json::to_vec(&tap).expect("bytes")).await, 200);
    let mut texts = Vec::new();
    for _ in 0..100 {
        wa.worker.pass().await;
        texts = wa.sends()[before + 1..]
            .iter()
            .filter_map(|b| b["text"]["body"].as_str().map(str::to_owned))
            .collect();
        if texts.len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        texts,
        [
            "Ana: Olá! Seu cartão foi desbloqueado.",
            "Ana: Posso ajudar em algo mais?"
        ],
        "in order, once the card holder answered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parar_opts_out_at_once_voltar_opts_back_in_and_nobody_without_an_opt_in_gets_a_template() {
    let wa = whatsapp(vec![crate::whatsapp::sent(); 10]).await;
    let store = wa.served.chat.store.clone();
    let (user, never) = ("5511977776666", "5511955554444");
    // Never opted in: a notice outside the window is not sent.
    store
        .touch_contact(never, Utc::now() - Duration::hours(30))
        .await
        .expect("touch");
    let refused = wa
        .enqueue(never, "Saldo baixo", low_balance("7890", "R$ 1,00"))
        .await;
    wa.worker.pass().await;
    assert!(
        wa.item(refused)
            .await
            .last_error
            .unwrap_or_default()
            .contains("sem opt-in"),
        "never asked"
    );
    assert!(wa.sends().is_empty());

    // PARAR: out at once, said in one line, with no model.
    opt_in(&wa, user).await;
    assert_eq!(
        wa.deliver(&text_at(user, "PARAR", "wamid.P1", Utc::now())).await,
        200
    );
    let mut said = Vec::new();
    for _ in 0..100 {
        wa.worker.pass().await;
        said = wa
            .sends()
            .iter()
            .filter_map(|b| b["text"]["body"].as_str().map(str::to_owned))
            .collect();
        if !said.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(said.len(), 1, "one line: {said:?}");
    assert!(said[0].contains("não vai mais receber avisos"), "{said:?}");
    assert!(
        !store
            .consent(user)
            .await
            .expect("read")
            .expect("on record")
            .opted_in
    );
    let usage = store
        .usage_since(Utc::now() - Duration::days(3650))
        .await
        .expect("usage");
    assert!(
        usage
            .iter()
            .any(|u| u.intent_key == "consentimento" && u.tokens_input + u.tokens_output == 0),
        "zero tokens"
    );
    // Opted out: a notice after the window closed is refused with that reason.
    let stopped_user = "5511933332222";
    store
        .touch_contact(stopped_user, Utc::now() - Duration::hours(30))
        .await
        .expect("touch");
    store
        .record_consent(&vt_store::concerns::ConsentChange {
            wa_id: stopped_user.into(),
            opted_in: false,
            source: "chat".into(),
            who: stopped_user.into(),
            at: Utc::now(),
        })
        .await
        .expect("out");
    let out = wa
        .enqueue(stopped_user, "Saldo baixo", low_balance("1111", "R$ 1,00"))
        .await;
    wa.worker.pass().await;
    assert!(
        wa.item(out)
            .await
            .last_error
            .unwrap_or_default()
            .contains("PARAR")
    );

    // VOLTAR: back in; every change on record with its source.
    assert_eq!(
        wa.deliver(&text_at(user, "voltar", "wamid.P2", Utc::now())).await,
        200
    );
    for _ in 0..100 {
        if store
            .consent(user)
            .await
            .expect("read")
            .is_some_and(|c| c.opted_in)
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let events = store.consent_events(user).await.expect("events");
    let trail: Vec<(bool, &str)> = events.iter().map(|e| (e.opted_in, e.source.as_str())).collect();
    assert_eq!(trail, [(true, "importacao"), (false, "chat"), (true, "chat")]);
}
