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

const PHONE: &str = "106540352242922";

struct Wa {
    served: Served,
    graph: FakeServer,
    worker: vt_agent::Worker,
}

fn config(graph: &str) -> WhatsAppConfig {
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
    }
}

/// The shipped templates (`templates/`).
fn templates() -> Arc<Templates> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("templates");
    Arc::new(Templates::load(&dir).expect("the shipped templates load"))
}

/// WhatsApp's prices per message in dollars, at R$ 5 to the dollar.
fn prices() -> vt_agent::testkit::CustosConfig {
    toml::from_str("moeda = \"USD\"\ncambio_brl = 5.0\n[whatsapp]\nutility = 0.0068\nmarketing = 0.0625\n")
        .expect("prices")
}

async fn whatsapp(graph_answers: Vec<crate::support::Canned<'static>>) -> Wa {
    let chat = crate::support::chat_harness(None, vt_domain::tools::VtSettings::default()).await;
    whatsapp_on(chat, graph_answers).await
}

/// [`whatsapp`] in front of the service of `chat`.
async fn whatsapp_on(
    chat: crate::support::ChatHarness,
    graph_answers: Vec<crate::support::Canned<'static>>,
) -> Wa {
    let chat = Arc::new(chat);
    let graph = FakeServer::start(graph_answers).await.answering_read_receipts();
    let config = config(&graph.url);
    let wiring = vt_agent::Wiring {
        service: chat.service.clone(),
        agent: "vt".into(),
        tenant: vt_engine::conversation::DEFAULT_TENANT.into(),
    };
    let channel = vt_agent::testkit::whatsapp_channel(&config, &templates(), &wiring);
    let state =
        vt_agent::AppState::new(chat.service.clone(), "vt", Default::default()).with_channel(&channel);
    let sender = Sender::new(&config)
        .expect("on")
        .with_window(chat.store.clone(), templates())
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
    fn sends(&self) -> Vec<Value> {
        self.graph
            .received()
            .into_iter()
            .map(|r| r.body)
            .filter(|b| b["status"] != "read")
            .collect()
    }

    async fn enqueue(&self, to: &str, text: &str, template: Option<TemplateUse>) -> i64 {
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

    async fn item(&self, id: i64) -> vt_store::records::OutboxItem {
        self.served
            .chat
            .store
            .outbox_item(id)
            .await
            .expect("read")
            .expect("item")
    }

    async fn deliver(&self, body: &[u8]) -> u16 {
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
async fn opt_in(wa: &Wa, wa_id: &str) {
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

fn low_balance(card_end: &str, balance: &str) -> Option<TemplateUse> {
    Some(TemplateUse {
        purpose: "saldo_baixo".into(),
        parameters: BTreeMap::from([
            ("cartao_final".to_owned(), card_end.to_owned()),
            ("saldo".to_owned(), balance.to_owned()),
        ]),
    })
}

/// A template's lifecycle webhook as Meta documents it.
fn template_event(event: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"entry": [{"id": "102290129340398", "time": 1763900000, "changes": [{
        "field": "message_template_status_update",
        "value": {"event": event, "message_template_id": 1234567890, "message_template_name": "saldo_baixo_v1",
                  "message_template_language": "pt_BR", "reason": "NONE", "message_template_category": "UTILITY"}}]}],
        "object": "whatsapp_business_account"}))
    .expect("bytes")
}

/// A user's text as Meta delivers it, sent at `sent_at`.
fn text_at(from: &str, text: &str, wamid: &str, sent_at: chrono::DateTime<Utc>) -> Vec<u8> {
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

/// A flow whose recipient is a WhatsApp user: the product tells them itself — once per crossing of the
/// limit, never without an opt-in, never in the quiet hours (the item is due at their end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_low_balance_flow_for_a_whatsapp_user_is_told_once_with_consent_and_outside_quiet_hours() {
    use vt_agent::testkit::NoticesConfig;
    let memory = || async {
        std::sync::Arc::new(
            vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
                .await
                .expect("store"),
        ) as std::sync::Arc<dyn vt_store::Store>
    };
    let flow = |wa: &str, recharge: bool| {
        let recarga = if recharge {
            r#", "recarga": {"valor": 50, "meio_pagamento": {"tipo": "pix"}}"#
        } else {
            ""
        };
        format!(
            r#"{{"cartao": "1111111111", "destinatario": {{"tipo": "whatsapp", "id": "{wa}"}}, "cpf": "123.456.789-00"{recarga}}}"#
        )
    };
    let notices = |store: &std::sync::Arc<dyn vt_store::Store>| {
        let store = store.clone();
        async move {
            store
                .outbox_items(OutboxStatus::Pending, 100)
                .await
                .expect("outbox")
                .into_iter()
                .filter(|i| i.kind == "aviso_saldo_baixo")
                .collect::<Vec<_>>()
        }
    };
    let consent = |store: &std::sync::Arc<dyn vt_store::Store>, wa: &str, opted_in: bool| {
        let (store, wa) = (store.clone(), wa.to_owned());
        async move {
            store
                .record_consent(&vt_store::concerns::ConsentChange {
                    wa_id: wa.clone(),
                    opted_in,
                    source: "importacao".into(),
                    who: "teste".into(),
                    at: "2026-11-01T00:00:00Z".parse().expect("t"),
                })
                .await
                .expect("consent");
        }
    };

    // 09:00 in São Paulo: sent now, once.
    let store = memory().await;
    let h = crate::support::chat_harness_notifying(store.clone(), PHONE, NoticesConfig::default()).await;
    let (user, out) = ("5511912345678", "5511987654321");
    consent(&store, user, true).await;
    let ran = h
        .service
        .flows()
        .run_flow(flow(user, false).as_str(), Default::default())
        .await
        .expect("flow");
    assert!(
        serde_json::to_string(&ran.output)
            .expect("json")
            .contains("\"enviado\":true")
    );
    let sent = notices(&store).await;
    assert_eq!(sent.len(), 1);
    let payload = &sent[0].payload;
    assert_eq!(payload["user_id"], user);
    assert_eq!(payload["template"]["purpose"], "saldo_baixo");
    assert_eq!(payload["template"]["parameters"]["cartao_final"], "1111");
    assert_eq!(payload["template"]["parameters"]["saldo"], "R$ 12,50");
    assert!(!payload.to_string().contains("1111111111"), "no card in clear");
    assert_eq!(sent[0].next_attempt_at, h.clock.now(), "due now");
    // The same card again, still low: nothing more.
    let again = h
        .service
        .flows()
        .run_flow(flow(user, false).as_str(), Default::default())
        .await
        .expect("flow");
    assert!(
        serde_json::to_string(&again.output)
            .expect("json")
            .contains("ja_avisado")
    );
    assert_eq!(notices(&store).await.len(), 1);
    // Opted out: nothing, and the flow says why.
    consent(&store, out, false).await;
    let refused = h
        .service
        .flows()
        .run_flow(flow(out, false).as_str(), Default::default())
        .await
        .expect("flow");
    assert!(
        serde_json::to_string(&refused.output)
            .expect("json")
            .contains("cliente_pediu_parar")
    );
    assert_eq!(notices(&store).await.len(), 1);
    // A recharge lifts the balance above the limit: the next low balance is a new crossing.
    h.service
        .flows()
        .run_flow(flow(user, true).as_str(), Default::default())
        .await
        .expect("recharge");
    // Its result reaches the WhatsApp user the same way (RF10), with the resultado_recarga template.
    let results: Vec<_> = store
        .outbox_items(OutboxStatus::Pending, 100)
        .await
        .expect("outbox")
        .into_iter()
        .filter(|i| i.kind == "aviso_recarga")
        .collect();
    assert_eq!(results.len(), 1);
    let parameters = &results[0].payload["template"]["parameters"];
    assert_eq!(results[0].payload["template"]["purpose"], "resultado_recarga");
    assert_eq!(
        (
            &parameters["cartao_final"],
            &parameters["valor"],
            &parameters["resultado"]
        ),
        (&json!("1111"), &json!("R$ 50,00"), &json!("aprovada"))
    );
    let high = h
        .service
        .flows()
        .run_flow(flow(user, false).as_str(), Default::default())
        .await
        .expect("lookup");
    assert!(
        serde_json::to_string(&high.output)
            .expect("json")
            .contains("saldo_acima_do_limite")
    );

    // 00:00 in São Paulo (03:00 UTC): deferred to 08:00 local, 11:00 UTC — a row, so a restart keeps it.
    let night_store = memory().await;
    let night =
        crate::support::chat_harness_notifying(night_store.clone(), PHONE, NoticesConfig::default()).await;
    night.clock.set("2026-11-23T03:00:00Z".parse().expect("t"));
    consent(&night_store, user, true).await;
    let deferred = night
        .service
        .flows()
        .run_flow(flow(user, false).as_str(), Default::default())
        .await
        .expect("flow");
    assert!(
        serde_json::to_string(&deferred.output)
            .expect("json")
            .contains("adiado_para_o_fim_do_silencio")
    );
    let items = notices(&night_store).await;
    assert_eq!(items.len(), 1);
    assert_eq!(
        items[0].next_attempt_at,
        "2026-11-23T11:00:00Z"
            .parse::<chrono::DateTime<Utc>>()
            .expect("t")
    );
}

/// One notice per crossing and per interval: a card below the limit is told once; after a reading
/// above it, again — but not within the interval.
async fn a_cards_low_balance_notice_is_taken_once_per_crossing_and_interval(
    store: std::sync::Arc<dyn vt_store::Store>,
) {
    let t = |h: i64| {
        "2026-11-22T12:00:00Z"
            .parse::<chrono::DateTime<Utc>>()
            .expect("t")
            + Duration::hours(h)
    };
    let day = Duration::hours(24);
    assert!(
        store
            .take_low_balance_notice("cartao-h", t(0) - day, t(0))
            .await
            .expect("take")
    );
    assert!(
        !store
            .take_low_balance_notice("cartao-h", t(30) - day, t(30))
            .await
            .expect("take"),
        "still below"
    );
    store.balance_recovered("cartao-h").await.expect("recovered");
    assert!(
        !store
            .take_low_balance_notice("cartao-h", t(10) - day, t(10))
            .await
            .expect("take"),
        "within the interval"
    );
    assert!(
        store
            .take_low_balance_notice("cartao-h", t(30) - day, t(30))
            .await
            .expect("take"),
        "a new crossing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cards_low_balance_notice_is_taken_once_per_crossing_and_interval_on_sqlite() {
    let sqlite = vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
        .await
        .expect("store");
    a_cards_low_balance_notice_is_taken_once_per_crossing_and_interval(std::sync::Arc::new(sqlite)).await;
}

#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cards_low_balance_notice_is_taken_once_per_crossing_and_interval_on_postgresql() {
    let pg = vt_store::testkit::PgFixture::start().await;
    a_cards_low_balance_notice_is_taken_once_per_crossing_and_interval(pg.store.clone()).await;
    pg.cleanup().await;
}

/// A template Meta refuses at send time as paused (132015) is stopped as its webhook would stop it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_refused_as_paused_stops_the_template() {
    let paused = json!({"error": {"code": 132015, "message": "Template is paused"}});
    let wa = whatsapp(vec![(400, vec![], paused), crate::whatsapp::sent()]).await;
    let quiet = "5511900000025";
    wa.served
        .chat
        .store
        .touch_contact(quiet, Utc::now() - Duration::hours(30))
        .await
        .expect("touch");
    opt_in(&wa, quiet).await;
    let first = wa
        .enqueue(quiet, "Saldo baixo", low_balance("7890", "R$ 1,00"))
        .await;
    wa.worker.pass().await;
    assert_eq!(wa.item(first).await.status, OutboxStatus::Failed);
    let states = wa.served.chat.store.template_states().await.expect("states");
    assert_eq!(
        (states[0].name.as_str(), states[0].status.as_deref()),
        ("saldo_baixo_v1", Some("PAUSED"))
    );
    // The next one is not even tried.
    let second = wa
        .enqueue(quiet, "Saldo baixo", low_balance("7890", "R$ 1,00"))
        .await;
    wa.worker.pass().await;
    assert!(
        wa.item(second)
            .await
            .last_error
            .unwrap_or_default()
            .contains("PAUSED")
    );
    assert_eq!(wa.graph.received().len(), 1, "one call reached Meta");
}

/// A Pix payment credited after the card holder's window closed: the receipt goes as the
/// `comprovante_recarga` template (they opted in), its parameters what the text says; the messages
/// that had no template were dead-lettered, never sent as free text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pix_receipt_after_the_window_closed_goes_as_the_comprovante_template() {
    let chat = crate::support::chat_harness_pix(crate::support::Pix::Provider).await;
    let wa = whatsapp_on(chat, vec![crate::whatsapp::sent(); 10]).await;
    let user = "5511900000047";
    opt_in(&wa, user).await;
    // They asked and confirmed a day ago (the messages reach us now, as Meta retries them).
    let ago = |h| Utc::now() - Duration::hours(h);
    let ask = text_at(user, "recarrega 20 no 2345678901 via pix", "wamid.R1", ago(26));
    assert_eq!(wa.deliver(&ask).await, 200);
    crate::support::pending_once(wa.served.chat.store.as_ref(), |items| !items.is_empty()).await;
    assert_eq!(wa.deliver(&text_at(user, "sim", "wamid.R2", ago(25))).await, 200);
    let items = crate::support::pending_once(wa.served.chat.store.as_ref(), |items| {
        items
            .iter()
            .any(|i| !i.payload["files"].is_null() && i.payload["files"][0].is_object())
    })
    .await;
    let txid = items
        .iter()
        .find_map(|i| i.payload["files"][0]["fileId"].as_str())
        .and_then(|id| id.strip_prefix(vt_domain::tools::QR_FILE))
        .expect("a code was shown")
        .to_owned();
    let paid = wa.served.chat.sim.pix().pay(&txid, false).expect("paid");
    let credited = wa
        .served
        .chat
        .service
        .payments()
        .settle(&txid)
        .await
        .expect("settle");
    assert_eq!(credited, vt_agent::testkit::Settled::Credited);
    for _ in 0..8 {
        wa.worker.pass().await;
    }

    let sends = wa.sends();
    assert_eq!(sends.len(), 1, "only the template reached Meta: {sends:?}");
    let template = &sends[0];
    assert_eq!(template["type"], "template", "{template}");
    assert_eq!(template["to"], user);
    assert_eq!(template["template"]["name"], "comprovante_recarga_v1");
    let parameters: BTreeMap<String, String> = template["template"]["components"][0]["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .map(|p| {
            let text = p["text"].as_str().unwrap_or_default();
            (
                p["parameter_name"].as_str().unwrap_or_default().to_owned(),
                text.to_owned(),
            )
        })
        .collect();
    assert_eq!(parameters["valor"], "R$ 20,00");
    assert_eq!(parameters["cartao_final"], "8901");
    assert!(parameters["novo_saldo"].starts_with("R$ "), "{parameters:?}");
    assert_eq!(parameters["identificador"], paid.end_to_end_id);
    assert!(!parameters["pago_em"].is_empty());
    let receipt = told_last(&wa, user).await;
    assert!(
        receipt.contains(&parameters["novo_saldo"]) && receipt.contains(&paid.end_to_end_id),
        "the template says what the conversation holds: {receipt}"
    );
    let dead = wa
        .served
        .chat
        .store
        .outbox_items(OutboxStatus::Failed, 100)
        .await
        .expect("read");
    assert!(
        !dead.is_empty(),
        "the replies without a template were dead-lettered"
    );
}

/// The last thing said in `user`'s conversation.
async fn told_last(wa: &Wa, user: &str) -> String {
    let conversation = vt_agent::testkit::whatsapp_conversation_id(PHONE, user);
    let messages = wa
        .served
        .chat
        .store
        .messages(&conversation)
        .await
        .expect("messages");
    messages
        .into_iter()
        .rev()
        .find_map(|m| m.message.text().map(str::to_owned))
        .expect("a message")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flows_paid_notice_is_costed_under_its_run() {
    use vt_agent::testkit::NoticesConfig;
    let store: Arc<dyn vt_store::Store> = Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    );
    let h = crate::support::chat_harness_notifying(store.clone(), PHONE, NoticesConfig::default()).await;
    let user = "5511912345678";
    store
        .record_consent(&vt_store::concerns::ConsentChange {
            wa_id: user.into(),
            opted_in: true,
            source: "importacao".into(),
            who: "teste".into(),
            at: "2026-11-01T00:00:00Z".parse().expect("t"),
        })
        .await
        .expect("consent");
    let input =
        format!(r#"{{"cartao": "1111111111", "destinatario": {{"tipo": "whatsapp", "id": "{user}"}}}}"#);
    let ran = h
        .service
        .flows()
        .run_flow(input.as_str(), Default::default())
        .await
        .expect("flow");
    let run = ran.output.execucao_id.clone();
    // The user never wrote: the notice goes as the utility template, at its price, under the run.
    let graph = FakeServer::start(vec![crate::whatsapp::sent()]).await;
    let sender = Sender::new(&config(&graph.url))
        .expect("on")
        .with_window(store.clone(), templates())
        .with_costs(store.clone(), prices(), vt_engine::conversation::DEFAULT_TENANT);
    let worker = vt_agent::Worker::new(store.clone(), vt_engine::retry::RetryPolicy::new(5, 1))
        .with_sender(Arc::new(sender));
    let pass = worker.pass().await;
    let items = store
        .outbox_items(OutboxStatus::Failed, 10)
        .await
        .expect("outbox");
    assert_eq!(pass.sent, 1, "{pass:?} {items:?}");
    assert_eq!(graph.received()[0].body["type"], "template");
    let costs = store
        .message_costs_since(chrono::DateTime::UNIX_EPOCH)
        .await
        .expect("costs");
    assert_eq!(costs.len(), 1);
    assert_eq!(costs[0].execucao_id.as_deref(), Some(run.as_str()));
    // US$ 0,0068 at R$ 5,00.
    assert_eq!(costs[0].custo_micro_brl, Some(34_000));
    let runs = store.flow_runs(10).await.expect("runs");
    let report = vt_agent::testkit::runs_report(&runs, (&[], &costs), chrono::Utc::now());
    let line = report.lines().find(|l| l.contains(&run)).expect("the run's line");
    assert!(line.contains("R$ 0,034"), "{report}");
}
