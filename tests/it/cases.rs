//! A transfer to a person, at the service: the case it opens, the bot's silence while a person has
//! the conversation (one acknowledgement while the case waits), and the bot back after a hand-back.

use vt_agent::testkit::{CaseError, SupportAgent};
use vt_domain::tools::VtSettings;
use vt_engine::llm::ChatMessage;
use vt_store::records::CaseState;
use vt_store::records::Claim;

use crate::support::chat_harness;

#[tokio::test]
async fn a_transfer_opens_a_case_and_the_bot_is_silent_until_the_case_is_handed_back() {
    let h = chat_harness(None, VtSettings::default()).await;
    h.say("c-humano", "saldo do cartão 1234567890").await;
    let transfer = h.say("c-humano", "quero falar com um atendente").await;
    assert!(
        transfer.reply_text().contains("atendente"),
        "{}",
        transfer.reply_text()
    );
    let case = h
        .store
        .open_case_of("c-humano")
        .await
        .expect("read")
        .expect("the transfer opened a case");
    assert_eq!(case.state, CaseState::Aguardando);
    assert_eq!(case.channel, "terminal");
    let file = case.case_file.to_string();
    assert!(file.contains("****7890"), "{file}");
    assert!(
        !file.contains("1234567890"),
        "no full card in the case file: {file}"
    );

    // While it waits: the first message is acknowledged once, the next ones get nothing.
    let first = h
        .say("c-humano", "alô? meu cartão 1234567890 não recarrega")
        .await;
    assert_eq!(first.replies.len(), 1);
    assert!(
        first.reply_text().contains("encaminhada"),
        "{}",
        first.reply_text()
    );
    let second = h.say("c-humano", "saldo do cartão 1234567890").await;
    assert!(
        second.replies.is_empty(),
        "the bot is silent: {:?}",
        second.replies
    );
    // Asking again while the case is open opens no other case.
    let again = h.say("c-humano", "quero falar com um atendente").await;
    assert!(again.replies.is_empty());
    assert_eq!(h.store.cases(None, 10).await.expect("cases").len(), 1);

    // Claimed: still silent, no acknowledgement either.
    let Claim::Claimed(claimed) = h
        .store
        .claim_case(&case.id, "fulana", chrono::Utc::now())
        .await
        .expect("claim")
    else {
        panic!("the only claim wins");
    };
    assert_eq!(claimed.owner.as_deref(), Some("fulana"));
    assert!(h.say("c-humano", "oi?").await.replies.is_empty());
    let relayed: Vec<String> = h
        .store
        .case_events(&case.id)
        .await
        .expect("log")
        .into_iter()
        .filter(|e| e.what == "mensagem_cliente")
        .filter_map(|e| e.detail)
        .collect();
    assert_eq!(
        relayed.len(),
        4,
        "every message is kept for the agent: {relayed:?}"
    );

    // Handed back: the next message is the bot's again.
    h.store
        .close_case(
            &case.id,
            "fulana",
            CaseState::Devolvido,
            vt_store::Closing {
                note: Some("orientado"),
                resolution: None,
            },
            chrono::Utc::now(),
        )
        .await
        .expect("close")
        .expect("was open");
    let back = h.say("c-humano", "saldo do cartão 1111111111").await;
    assert!(back.reply_text().contains("****1111"), "{}", back.reply_text());
    // The silent turns left nothing in the compressed context.
    let context = h.store.context("c-humano").await.expect("read").expect("context");
    assert!(
        !context
            .key_facts
            .iter()
            .any(|f| f.starts_with("atendimento_humano: ") && f.len() <= 20),
        "{:?}",
        context.key_facts
    );
}

fn agent<'a>(login: &'a str, tenant: Option<&'a str>) -> SupportAgent<'a> {
    SupportAgent {
        login,
        name: "Fulana",
        tenant,
    }
}

#[tokio::test]
async fn the_owner_answers_the_card_holder_and_hands_back_with_a_note_the_bot_then_reads() {
    let h = chat_harness(None, VtSettings::default()).await;
    h.say("c-agente", "quero falar com um atendente").await;
    let case = h
        .store
        .open_case_of("c-agente")
        .await
        .expect("read")
        .expect("case");
    let service = &h.service;
    // Another tenant's agent does not see it; nobody answers before claiming.
    let other = service
        .cases()
        .claim_case(&case.id, agent("beltrano", Some("outra")))
        .await;
    assert!(matches!(other, Err(CaseError::NotFound(_))), "{other:?}");
    let early = service
        .cases()
        .agent_reply(&case.id, agent("fulana", None), "oi")
        .await;
    assert!(matches!(early, Err(CaseError::NotClaimed)), "{early:?}");
    // Two agents of the tenant claim at once: one owner.
    let (a, b) = tokio::join!(
        service
            .cases()
            .claim_case(&case.id, agent("fulana", Some("default"))),
        service
            .cases()
            .claim_case(&case.id, agent("ciclana", Some("default")))
    );
    let claims = [a.expect("a"), b.expect("b")];
    let owner = claims
        .iter()
        .find_map(|c| match c {
            Claim::Claimed(case) => case.owner.clone(),
            _ => None,
        })
        .expect("one wins");
    let other_one = if owner == "fulana" { "ciclana" } else { "fulana" };
    assert!(claims.contains(&Claim::TakenBy(owner.clone())), "{claims:?}");
    let refused = service
        .cases()
        .agent_reply(&case.id, agent(other_one, Some("default")), "eu também")
        .await;
    assert!(
        matches!(refused, Err(CaseError::NotOwner(ref o)) if *o == owner),
        "{refused:?}"
    );

    // The owner's words reach the conversation, as a support agent's message.
    service
        .cases()
        .agent_reply(
            &case.id,
            agent(&owner, Some("default")),
            "Olá! Já vejo o seu cartão.",
        )
        .await
        .expect("reply");
    let messages = h.store.messages("c-agente").await.expect("messages");
    let last = &messages.last().expect("a message").message;
    assert_eq!(
        last,
        &ChatMessage::HumanAgent {
            name: "Fulana".into(),
            content: "Olá! Já vejo o seu cartão.".into()
        }
    );

    // Handed back with a note: the bot answers again, and its context holds the note.
    service
        .cases()
        .hand_back(
            &case.id,
            agent(&owner, Some("default")),
            Some("cliente pediu 2ª via do cartão"),
        )
        .await
        .expect("hand back");
    assert!(h.store.open_case_of("c-agente").await.expect("read").is_none());
    let back = h.say("c-agente", "saldo do cartão 1111111111").await;
    assert!(back.reply_text().contains("****1111"), "{}", back.reply_text());
    let context = h.store.context("c-agente").await.expect("read").expect("context");
    assert!(
        context
            .key_facts
            .iter()
            .any(|f| f.contains("cliente pediu 2ª via do cartão")),
        "{:?}",
        context.key_facts
    );
    assert!(
        context
            .key_facts
            .iter()
            .any(|f| f.contains("atendimento humano (Fulana)")),
        "{:?}",
        context.key_facts
    );
    let late = service
        .cases()
        .hand_back(&case.id, agent(&owner, None), None)
        .await;
    assert!(matches!(late, Err(CaseError::Closed)), "{late:?}");
}

#[tokio::test]
async fn closing_a_case_ends_the_conversation_with_a_polite_message() {
    let h = chat_harness(None, VtSettings::default()).await;
    h.say("c-fim", "quero falar com um atendente").await;
    let case = h.store.open_case_of("c-fim").await.expect("read").expect("case");
    let closed = h
        .service
        .cases()
        .close_case(&case.id, agent("fulana", None))
        .await
        .expect("close");
    assert_eq!(closed.state, CaseState::Encerrado);
    let conv = h.store.conversation("c-fim").await.expect("read").expect("conv");
    assert!(conv.ended);
    let messages = h.store.messages("c-fim").await.expect("messages");
    let last = messages
        .last()
        .expect("message")
        .message
        .text()
        .unwrap_or_default()
        .to_owned();
    assert!(last.contains("Atendimento encerrado"), "{last}");
}

#[tokio::test]
async fn a_case_nobody_claims_in_time_tells_the_card_holder_once() {
    let h = chat_harness(None, VtSettings::default()).await;
    let at = |minutes: i64| {
        chrono::DateTime::parse_from_rfc3339("2026-11-22T12:00:00Z")
            .expect("t")
            .with_timezone(&chrono::Utc)
            + chrono::Duration::minutes(minutes)
    };
    h.say("c-espera", "quero falar com um atendente").await;
    h.say("c-assumido", "quero falar com um atendente").await;
    let claimed = h
        .store
        .open_case_of("c-assumido")
        .await
        .expect("read")
        .expect("case");
    h.service
        .cases()
        .claim_case(&claimed.id, agent("fulana", None))
        .await
        .expect("claim");
    h.clock.set(at(9));
    assert_eq!(
        h.service.cases().send_due_case_notices().await,
        0,
        "not yet: 10 minutes by default"
    );
    h.clock.set(at(11));
    assert_eq!(
        h.service.cases().send_due_case_notices().await,
        1,
        "the waiting one, not the claimed one"
    );
    assert_eq!(h.service.cases().send_due_case_notices().await, 0, "once");
    let messages = h.store.messages("c-espera").await.expect("messages");
    let last = messages
        .last()
        .expect("message")
        .message
        .text()
        .unwrap_or_default()
        .to_owned();
    assert!(last.contains("Ainda não há um atendente"), "{last}");
    assert!(
        h.store
            .messages("c-assumido")
            .await
            .expect("messages")
            .iter()
            .all(|m| !m.message.text().unwrap_or_default().contains("Ainda não há"))
    );
    // Another process on the same store (a restart) finds nothing left to send.
    let again = vt_agent::Services::new(
        std::sync::Arc::new(crate::support::test_engine(None, crate::support::fast_config())),
        h.store.clone(),
        vt_agent::ServicesConfig::default(),
    );
    assert_eq!(again.cases().send_due_case_notices().await, 0);
}

#[tokio::test]
async fn a_case_opened_out_of_hours_says_when_a_person_answers() {
    let store: std::sync::Arc<dyn vt_store::Store> = std::sync::Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    );
    let handoff = vt_agent::testkit::HandoffConfig {
        hours: Some(vt_agent::testkit::Hours::try_from("seg-sex 08:00-18:00".to_owned()).expect("hours")),
        ..Default::default()
    };
    // The harness's clock: Sunday 2026-11-22, 09:00 in São Paulo.
    let h = crate::support::chat_harness_handing_off(store, None, VtSettings::default(), None, handoff).await;
    let transfer = h.say("c-domingo", "quero falar com um atendente").await;
    assert_eq!(transfer.replies.len(), 1, "one message: {:?}", transfer.replies);
    let case = h
        .store
        .open_case_of("c-domingo")
        .await
        .expect("read")
        .expect("case");
    // Sunday 09:00: Monday is tomorrow. The protocol number is said with it.
    let protocol = case.protocol.clone().expect("a protocol number");
    assert!(
        transfer.replies[0].text.ends_with(&format!(
            "\nProtocolo do seu atendimento: {protocol}. Nosso atendimento humano está fora do horário agora; \
             uma pessoa responde amanhã às 08:00."
        )),
        "{}",
        transfer.replies[0].text
    );
    assert_eq!(protocol, "20261122-000001");
    assert_eq!(
        case.notice_due_at, None,
        "the answer stands for the unclaimed notice"
    );
    h.clock.set(
        chrono::DateTime::parse_from_rfc3339("2026-11-22T18:00:00Z")
            .expect("t")
            .with_timezone(&chrono::Utc),
    );
    assert_eq!(h.service.cases().send_due_case_notices().await, 0);
}
