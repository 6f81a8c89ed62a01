//! A chat recharge paid by boleto, where the recharge system returns one: the line and its due date
//! shown (the digitable line a message of its own, its check digits, amount and due date verified),
//! nothing credited before the boleto is paid, the late outcome — credited, or fallen due unpaid — told
//! through the follow-ups, and a line that does not check never shown.

use axum::Router;
use axum::http::StatusCode;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use rust_decimal::dec;
use serde_json::{Value, json};
use vt_domain::boleto::LinhaDigitavel;
use vt_domain::tools::VtSettings;

use crate::support::{ChatHarness, chat_harness, said};

/// The due date of a boleto issued by the harness's simulator on its first day (Sunday 2026-11-22 in
/// São Paulo): three days later.
fn due() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 11, 25).expect("date")
}

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).expect("t").into()
}

/// Confirms a boleto recharge of R$ 50 on `card` in `conv`; the replies of the "sim".
async fn confirmed(h: &ChatHarness, conv: &str, card: &str) -> Vec<String> {
    let asked = h
        .say(conv, &format!("recarregar 50 no cartão {card} no boleto"))
        .await;
    assert!(
        asked.reply_text().contains("via boleto"),
        "{}",
        asked.reply_text()
    );
    let handled = h.say(conv, "sim").await;
    handled.replies.into_iter().map(|r| r.text).collect()
}

async fn last_said(h: &ChatHarness, conv: &str) -> String {
    said(h, conv).await.pop().unwrap_or_default()
}

/// Checks due now, with the clock at `when`.
async fn follow_up_at(h: &ChatHarness, when: DateTime<Utc>) -> usize {
    h.clock.set(when);
    h.service.followups().run_due_followups().await
}

#[tokio::test]
async fn a_boleto_recharge_shows_its_line_and_is_credited_once_when_the_follow_up_finds_it_paid() {
    let h = chat_harness(None, VtSettings::default()).await;
    let replies = confirmed(&h, "c-boleto", "1234567890").await;
    assert_eq!(
        replies.len(),
        2,
        "the line, then the boleto's line on its own: {replies:?}"
    );
    assert!(
        replies[0].contains("R$ 50,00")
            && replies[0].contains("****7890")
            && replies[0].contains("pague até 25/11/2026")
            && !replies[0].contains("1234567890"),
        "{}",
        replies[0]
    );
    let linha = LinhaDigitavel::checked(&replies[1], dec!(50), due())
        .expect("the line shown checks: digits, amount, due date");
    assert_eq!(replies[1], linha.formatted(), "only the line, as banks print it");
    assert_eq!(h.recharges(), 0, "nothing credited before the boleto is paid");

    // Followed past the usual hour: until three business days after the due date (Wed → Mon).
    assert_eq!(follow_up_at(&h, t("2026-11-22T12:01:00Z")).await, 1);
    let waiting = &h.store.followups(true, 10).await.expect("followups")[0];
    assert_eq!(waiting.deadline_at, t("2026-12-01T03:00:00Z"));
    assert_eq!(h.recharges(), 0);
    // Still unpaid a day later: checked at least every half hour, nothing said.
    let said_before = last_said(&h, "c-boleto").await;
    let mut at = t("2026-11-23T12:00:00Z");
    assert_eq!(follow_up_at(&h, at).await, 1);
    let next = h.store.followups(true, 10).await.expect("followups")[0].next_check_at;
    assert!(next <= at + Duration::minutes(30), "{next}");
    assert_eq!(last_said(&h, "c-boleto").await, said_before);

    assert!(h.sim.pay_boleto(linha.digits()), "the simulator knows the boleto");
    at += Duration::minutes(30);
    assert_eq!(follow_up_at(&h, at).await, 1);
    assert_eq!(h.recharges(), 1, "credited once the boleto was paid");
    let told = last_said(&h, "c-boleto").await;
    assert!(
        told.contains("foi aprovada") && told.contains("****7890") && !told.contains("1234567890"),
        "{told}"
    );
    let settled = &h.store.followups(false, 10).await.expect("followups")[0];
    assert_eq!(settled.outcome.as_deref(), Some("aprovada"));
    assert_eq!(follow_up_at(&h, at + Duration::days(2)).await, 0, "nothing more");
    assert_eq!(h.recharges(), 1);
}

#[tokio::test]
async fn a_boleto_that_falls_due_unpaid_is_told_and_nothing_is_credited() {
    let h = chat_harness(None, VtSettings::default()).await;
    // 1515151515's holder never pays, even where the simulator pays by itself.
    confirmed(&h, "c-vence", "1515151515").await;
    assert_eq!(follow_up_at(&h, t("2026-11-22T12:01:00Z")).await, 1);
    // The day after the due date, in São Paulo.
    assert_eq!(follow_up_at(&h, t("2026-11-26T03:30:00Z")).await, 1);
    let told = last_said(&h, "c-vence").await;
    assert!(
        told.contains("venceu sem pagamento") && told.contains("****1515"),
        "{told}"
    );
    assert_eq!(h.recharges(), 0);
    let settled = &h.store.followups(false, 10).await.expect("followups")[0];
    assert_eq!(settled.outcome.as_deref(), Some("negada"));
    assert!(
        h.store.open_case_of("c-vence").await.expect("read").is_none(),
        "an unpaid boleto is the card holder's choice, not a person's work"
    );
}

/// A recharge system answering every recharge with a boleto whose line is `linha`, due `vencimento`.
async fn boleto_system(linha: String, vencimento: &'static str) -> String {
    let recarga = move |axum::Json(pedido): axum::Json<Value>| {
        let linha = linha.clone();
        async move {
            let body = json!({
                "status": "pendente", "transacao_id": "tx_1", "valor": pedido["valor"], "moeda": "BRL",
                "boleto": {"linha_digitavel": linha, "vencimento": vencimento},
            });
            (StatusCode::ACCEPTED, axum::Json(body))
        }
    };
    let app = Router::new().route("/api/v1/recargas", axum::routing::post(recarga));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test]
async fn a_boleto_whose_line_does_not_check_is_never_shown_and_goes_to_a_person() {
    let good = LinhaDigitavel::emitir("999", due(), dec!(50), "1234567890123456789012345").expect("line");
    // One digit of the second field changed; the same line for another amount; another due date.
    let mut tampered = good.digits().as_bytes().to_vec();
    tampered[12] = b'0' + (tampered[12] - b'0' + 1) % 10;
    let other_amount =
        LinhaDigitavel::emitir("999", due(), dec!(5), "1234567890123456789012345").expect("line");
    for (case, linha, vencimento) in [
        (
            "a digit",
            String::from_utf8(tampered).expect("digits"),
            "2026-11-25",
        ),
        ("the amount", other_amount.digits().to_owned(), "2026-11-25"),
        ("the due date", good.digits().to_owned(), "2026-11-26"),
    ] {
        let url = boleto_system(linha.clone(), vencimento).await;
        let vt = VtSettings::default();
        let h = crate::support::chat_harness_against(&url, vt).await;
        let replies = confirmed(&h, "c-torto", "1234567890").await;
        let all = replies.join("\n");
        assert!(
            all.contains("Não consegui gerar um boleto válido") && !all.contains(&linha[..20]),
            "{case}: {all}"
        );
        let case_opened = h.store.open_case_of("c-torto").await.expect("read");
        assert!(case_opened.is_some(), "{case}: a person looks at the recharge");
    }
}

#[tokio::test]
async fn a_flow_paid_by_boleto_tells_its_recipient_the_line_and_settles_when_paid() {
    let h = chat_harness(None, VtSettings::default()).await;
    let input = r#"{"cartao": "2345678901", "destinatario": {"tipo": "email", "id": "rh@example.com"},
        "recarga": {"valor": 30, "meio_pagamento": {"tipo": "boleto"}}}"#;
    let ran = h
        .service
        .flows()
        .run_flow(input, vt_agent::FlowOptions::default())
        .await
        .expect("ran");
    assert_eq!(ran.output.status.as_str(), "pendente");
    assert_eq!(h.recharges(), 0);
    let notice = h
        .sim
        .ledger()
        .into_iter()
        .rfind(|e| e.sistema == "notificacao")
        .and_then(|e| e.body)
        .expect("notice");
    let text = notice["mensagem"].as_str().expect("text").to_owned();
    let linha = text
        .split("Linha digitável: ")
        .nth(1)
        .expect("the line in the notice");
    let linha = LinhaDigitavel::checked(linha, dec!(30), due()).expect("a line that checks");
    assert!(
        text.contains("****8901") && !text.contains("2345678901"),
        "{text}"
    );

    assert!(h.sim.pay_boleto(linha.digits()));
    assert_eq!(follow_up_at(&h, t("2026-11-22T12:01:00Z")).await, 1);
    assert_eq!(h.recharges(), 1);
    let run = h
        .store
        .flow_run(&ran.output.execucao_id)
        .await
        .expect("read")
        .expect("run");
    assert_eq!(run.status.as_str(), "concluido");
}
