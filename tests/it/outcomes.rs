//! How conversations end (Step 22): each stretch's outcome computed by code once it has been quiet
//! for `[resultados] encerrar_apos_minutos` or ended, `reaberta` on a return, and the satisfaction
//! question — on SQLite and, with `VT_TEST_POSTGRES_URL`, on PostgreSQL.

use std::sync::Arc;

use chrono::Duration;
use vt_agent::Inbound;
use vt_agent::testkit::SupportAgent;
use vt_domain::tools::VtSettings;
use vt_engine::Participant;
use vt_store::Store;
use vt_store::records::Desfecho;
use vt_store::records::OutcomeRecord;

use crate::support::{ChatHarness, chat_harness_on};
use vt_store::testkit::PgFixture;

const QUESTION: &str = "Como você avalia este atendimento?";

async fn sqlite() -> Arc<dyn Store> {
    Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    )
}

/// `text` from person `user` in conversation `conv`, on the terminal.
async fn say(h: &ChatHarness, (conv, user): (&str, &str), text: &str) -> String {
    let msg = Inbound {
        agent_id: "vt".into(),
        conversation_id: Some(conv.into()),
        user: Participant {
            user_id: user.into(),
            user_login: user.into(),
            channel: "terminal".into(),
        },
        text: text.into(),
        ..Default::default()
    };
    h.service
        .messages()
        .handle(msg)
        .await
        .expect("handled")
        .reply_text()
}

/// The outcomes on record, by conversation, oldest first.
async fn outcomes(h: &ChatHarness, conv: &str) -> Vec<OutcomeRecord> {
    let since = chrono::DateTime::UNIX_EPOCH;
    let all = h.store.outcomes_since(since).await.expect("outcomes");
    all.into_iter().filter(|o| o.conversation_id == conv).collect()
}

fn later(h: &ChatHarness, minutes: i64) {
    h.clock.set(h.clock.now() + Duration::minutes(minutes));
}

/// What was said in `conv` by the bot, newest last.
async fn said_in(h: &ChatHarness, conv: &str) -> Vec<String> {
    h.store
        .messages(conv)
        .await
        .expect("messages")
        .into_iter()
        .filter_map(|m| match m.message {
            vt_engine::llm::ChatMessage::Assistant { content, .. } => content,
            _ => None,
        })
        .collect()
}

async fn each_outcome_is_computed_when_the_stretch_is_over(store: Arc<dyn Store>) {
    let h = chat_harness_on(store, None, VtSettings::default()).await;
    say(&h, ("c-saldo", "u-saldo"), "saldo do cartão 1234567890").await;
    say(
        &h,
        ("c-recarga", "u-recarga"),
        "recarregar 50 reais no cartão 1234567890 via pix",
    )
    .await;
    say(&h, ("c-recarga", "u-recarga"), "sim").await;
    say(
        &h,
        ("c-desistiu", "u-desistiu"),
        "recarregar 50 reais no cartão 1234567890 via pix",
    )
    .await;
    let asked = say(&h, ("c-pergunta", "u-pergunta"), "qual o saldo?").await;
    assert!(asked.contains("número do cartão"), "a question of ours: {asked}");
    say(&h, ("c-oi", "u-oi"), "oi").await;
    say(&h, ("c-pessoa", "u-pessoa"), "quero falar com um atendente").await;

    // Nothing is over yet.
    assert_eq!(h.service.outcomes().close_stretches().await, 0);
    later(&h, 10);
    // The case is closed: that stretch ended, and gets its outcome without waiting.
    let case = h
        .store
        .open_case_of("c-pessoa")
        .await
        .expect("read")
        .expect("case");
    let agent = SupportAgent {
        login: "fulana",
        name: "Fulana",
        tenant: None,
    };
    h.service
        .cases()
        .close_case(&case.id, agent)
        .await
        .expect("closed");
    assert_eq!(h.service.outcomes().close_stretches().await, 1);
    let person = outcomes(&h, "c-pessoa").await;
    assert_eq!(person.len(), 1);
    assert_eq!(person[0].desfecho, Desfecho::ResolvidaPorPessoa);
    assert_eq!(person[0].caso_id.as_deref(), Some(case.id.as_str()));
    assert_eq!(person[0].intencao, "transferir_para_humano");

    // Quiet for 30 minutes: every other stretch is over.
    later(&h, 21);
    assert_eq!(h.service.outcomes().close_stretches().await, 5);
    let of = |conv: &'static str| {
        let h = &h;
        async move {
            let o = outcomes(h, conv).await;
            assert_eq!(o.len(), 1, "{conv}: {o:?}");
            o[0].clone()
        }
    };
    let read = of("c-saldo").await;
    assert_eq!(
        (read.desfecho, read.assunto.as_str()),
        (Desfecho::ResolvidaPeloBot, "saldo")
    );
    assert_eq!(
        read.custo_micro_brl,
        Some(0),
        "no model, no paid message: zero, known"
    );
    let credited = of("c-recarga").await;
    assert_eq!(
        (credited.desfecho, credited.assunto.as_str()),
        (Desfecho::ResolvidaPeloBot, "recarga")
    );
    assert_eq!(
        of("c-desistiu").await.desfecho,
        Desfecho::Abandonada,
        "a recharge never confirmed"
    );
    assert_eq!(
        of("c-pergunta").await.desfecho,
        Desfecho::Abandonada,
        "our question unanswered"
    );
    assert_eq!(of("c-oi").await.desfecho, Desfecho::SemObjetivo);
    // A sweep later finds nothing new.
    later(&h, 60);
    assert_eq!(h.service.outcomes().close_stretches().await, 0);
}

async fn a_return_on_the_same_subject_within_seven_days_reopens_the_resolved_stretch(store: Arc<dyn Store>) {
    let h = chat_harness_on(store, None, VtSettings::default()).await;
    let who = ("c-volta", "u-volta");
    say(&h, who, "saldo do cartão 1234567890").await;
    later(&h, 31);
    assert_eq!(h.service.outcomes().close_stretches().await, 1);
    // Two days later, the same subject.
    later(&h, 2 * 24 * 60);
    say(&h, who, "saldo do cartão 1234567890").await;
    later(&h, 31);
    assert_eq!(h.service.outcomes().close_stretches().await, 1);
    // Another subject, the next day: no return on the balance.
    later(&h, 24 * 60);
    say(&h, who, "oi").await;
    later(&h, 31);
    assert_eq!(h.service.outcomes().close_stretches().await, 1);
    // Ten days after the second: too late to be a return.
    later(&h, 10 * 24 * 60);
    say(&h, who, "saldo do cartão 1234567890").await;
    later(&h, 31);
    assert_eq!(h.service.outcomes().close_stretches().await, 1);

    let all = outcomes(&h, "c-volta").await;
    assert_eq!(all.len(), 4, "{all:?}");
    assert!(all[0].reaberta, "the first balance was reopened two days later");
    assert_eq!(all[1].reabre.as_deref(), Some(all[0].id.as_str()));
    assert!(!all[1].reaberta, "nobody came back on it within seven days");
    assert_eq!(
        (all[2].reabre.as_deref(), all[2].desfecho),
        (None, Desfecho::SemObjetivo)
    );
    assert_eq!(all[3].reabre, None, "ten days later is a new matter");
    // Each stretch starts where the last ended.
    assert_eq!(all[1].desde, Some(all[0].ate));
}

async fn the_satisfaction_question_is_asked_once_and_its_answer_stored(store: Arc<dyn Store>) {
    let h = chat_harness_on(store, None, VtSettings::default()).await;
    let who = ("c-nota", "u-nota");
    say(&h, who, "saldo do cartão 1234567890").await;
    later(&h, 31);
    assert_eq!(h.service.outcomes().close_stretches().await, 1);
    let asked = said_in(&h, "c-nota").await;
    assert!(asked.last().is_some_and(|t| t.starts_with(QUESTION)), "{asked:?}");
    assert!(outcomes(&h, "c-nota").await[0].pesquisa_em.is_some());

    // The answer: stored with the outcome, thanked with zero tokens.
    later(&h, 5);
    let thanks = say(&h, who, "5").await;
    assert!(thanks.contains("Obrigado"), "{thanks}");
    let rated = outcomes(&h, "c-nota").await;
    assert_eq!((rated.len(), rated[0].nota), (1, Some(5)));
    // The answer's own stretch belongs to the stretch it rates: no new outcome.
    later(&h, 31);
    assert_eq!(h.service.outcomes().close_stretches().await, 0);
    assert_eq!(outcomes(&h, "c-nota").await.len(), 1);
    // "5" again is no answer to anything now.
    let again = say(&h, who, "5").await;
    assert!(!again.contains("Obrigado"), "{again}");
    assert_eq!(outcomes(&h, "c-nota").await[0].nota, Some(5));

    // Resolved again the next day: within 30 days of the question, no other.
    later(&h, 24 * 60);
    let before = said_in(&h, "c-nota").await.len();
    say(&h, who, "saldo do cartão 1234567890").await;
    later(&h, 31);
    assert_eq!(h.service.outcomes().close_stretches().await, 1);
    let all = outcomes(&h, "c-nota").await;
    assert_eq!(all.last().map(|o| o.pesquisa_em), Some(None), "{all:?}");
    let questions = said_in(&h, "c-nota").await[before..]
        .iter()
        .filter(|t| t.starts_with(QUESTION))
        .count();
    assert_eq!(questions, 0);
}

async fn a_reply_that_is_no_score_is_a_normal_message_and_a_pick_is_one(store: Arc<dyn Store>) {
    let h = chat_harness_on(store, None, VtSettings::default()).await;
    let who = ("c-outra", "u-outra");
    say(&h, who, "saldo do cartão 1111111111").await;
    later(&h, 31);
    h.service.outcomes().close_stretches().await;
    let answer = say(&h, who, "e o saldo de novo?").await;
    assert!(answer.contains("****1111"), "answered as a message: {answer}");
    assert_eq!(outcomes(&h, "c-outra").await[0].nota, None);
    let late = say(&h, who, "4").await;
    assert!(!late.contains("Obrigado"), "the question was dropped: {late}");
    assert_eq!(outcomes(&h, "c-outra").await[0].nota, None);

    // Someone else picks the fourth row of the scale's list.
    let who = ("c-lista", "u-lista");
    say(&h, who, "saldo do cartão 1234567890").await;
    later(&h, 31);
    h.service.outcomes().close_stretches().await;
    let pick = Inbound {
        agent_id: "vt".into(),
        conversation_id: Some(who.0.into()),
        user: Participant {
            user_id: who.1.into(),
            user_login: who.1.into(),
            channel: "terminal".into(),
        },
        pick: Some(3),
        ..Default::default()
    };
    let thanks = h
        .service
        .messages()
        .handle(pick)
        .await
        .expect("handled")
        .reply_text();
    assert!(thanks.contains("Obrigado"), "{thanks}");
    assert_eq!(outcomes(&h, "c-lista").await[0].nota, Some(4));
}

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod sqlite_suite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                super::$name(super::sqlite().await).await;
            })*
        }
        mod postgres_suite {
            $(#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let pg = super::PgFixture::start().await;
                super::$name(pg.store.clone()).await;
                pg.cleanup().await;
            })*
        }
    };
}

on_both!(
    each_outcome_is_computed_when_the_stretch_is_over,
    a_return_on_the_same_subject_within_seven_days_reopens_the_resolved_stretch,
    the_satisfaction_question_is_asked_once_and_its_answer_stored,
    a_reply_that_is_no_score_is_a_normal_message_and_a_pick_is_one,
);
