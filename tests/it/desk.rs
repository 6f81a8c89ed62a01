//! The card's service desk in the conversation (step 35): a card's situation, why it did not pass the
//! turnstile and its statement, answered from the card system with zero tokens (no model configured),
//! each branch by a magic card of the simulator, on the harnesses' fixed clock (Sunday 2026-11-22,
//! 09:00 in São Paulo).

use crate::support::chat_harness;

#[tokio::test]
async fn a_blocked_card_that_did_not_pass_says_since_when_and_what_to_do() {
    let h = chat_harness(None, vt_domain::tools::VtSettings::default()).await;
    let r = h
        .say("c-bloq", "meu cartão 1818181818 não passou na catraca")
        .await;
    let text = r.reply_text();
    assert!(
        text.contains("****1818 está bloqueado desde 19/11/2026 (perda)"),
        "{text}"
    );
    assert!(text.contains("segunda via"), "{text}");
    assert!(!text.contains("1818181818"), "the card stays masked: {text}");
}

#[tokio::test]
async fn a_credit_waiting_to_be_validated_explains_itself() {
    let h = chat_harness(None, vt_domain::tools::VtSettings::default()).await;
    let r = h.say("c-pend", "o vt 1919191919 nao passou hoje").await;
    let text = r.reply_text();
    assert!(text.contains("R$ 50,00 comprados em 21/11 às 09:00"), "{text}");
    assert!(
        text.contains("validador a bordo dos ônibus ou nas estações, até 24/11 às 09:00"),
        "{text}"
    );
}

#[tokio::test]
async fn an_active_card_without_balance_is_offered_a_recharge_and_its_last_ride_named() {
    let h = chat_harness(None, vt_domain::tools::VtSettings::default()).await;
    let r = h.say("c-zero", "a catraca recusou meu cartão 2424242424").await;
    let text = r.reply_text();
    assert!(
        text.contains("****2424 está ativo, mas está sem saldo (R$ 0,00)"),
        "{text}"
    );
    assert!(
        text.contains("O último uso registrado foi em 20/11 às 18:10, linha 8012-10"),
        "{text}"
    );
    assert!(text.contains("Quer recarregar?"), "{text}");
}

#[tokio::test]
async fn the_situation_asked_names_a_limit_and_a_cancelled_card_and_an_unknown_one() {
    let h = chat_harness(None, vt_domain::tools::VtSettings::default()).await;
    let limited = h.say("c-lim", "meu cartão 2020202020 está bloqueado?").await;
    assert!(
        limited.reply_text().contains("limite diário"),
        "{}",
        limited.reply_text()
    );
    assert!(
        limited.reply_text().contains("23/11 às 00:00"),
        "{}",
        limited.reply_text()
    );
    let cancelled = h.say("c-canc", "qual a situação do cartão 2121212121").await;
    assert!(
        cancelled.reply_text().contains("está cancelado"),
        "{}",
        cancelled.reply_text()
    );
    let unknown = h.say("c-desc", "qual a situação do cartão 2323232323").await;
    assert!(
        unknown.reply_text().contains("não encontrou o cartão ****2323"),
        "{}",
        unknown.reply_text()
    );
}

/// Asked without a card, the desk asks which one; the answer carries the question's meaning ("did
/// not pass") to the tool.
#[tokio::test]
async fn without_a_card_the_desk_asks_for_it_and_remembers_why() {
    let h = chat_harness(None, vt_domain::tools::VtSettings::default()).await;
    let asked = h.say("c-qual", "meu bilhete não passou no validador").await;
    assert!(
        asked.reply_text().contains("situação do cartão"),
        "{}",
        asked.reply_text()
    );
    let r = h.say("c-qual", "2424242424").await;
    assert!(r.reply_text().contains("sem saldo"), "{}", r.reply_text());
}

#[tokio::test]
async fn a_statement_of_thirty_days_lists_the_newest_lines_masked() {
    let h = chat_harness(None, vt_domain::tools::VtSettings::default()).await;
    let r = h.say("c-ext", "quero o extrato do cartão 2424242424").await;
    let text = r.reply_text();
    assert!(
        text.starts_with("Extrato do cartão ****2424 dos últimos 30 dias — os 10 movimentos mais recentes:"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 11, "{text}");
    assert!(
        text.contains("• 20/11 às 18:10 — uso, linha 8012-10 — −R$ 4,40"),
        "{text}"
    );
    assert!(!text.contains("2424242424"), "{text}");
    assert_eq!(h.recharges(), 0, "reading moves no money");
}
