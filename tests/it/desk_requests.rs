//! The desk's requests that change a card (step 35): a lost card blocked and its second copy ordered,
//! each only after the holder's own "sim" and once, each branch by a magic card of the simulator, on
//! the harnesses' fixed clock (Sunday 2026-11-22, 09:00 in São Paulo), with no model (zero tokens).

use vt_simulators::systems::{Efeito, Simulator};

use crate::support::{chat_harness, chat_harness_checking_holders};

/// How many times the card system really did `efeito` (replays excluded).
fn done(sim: &Simulator, efeito: Efeito) -> usize {
    sim.ledger().iter().filter(|e| e.efeito == Some(efeito)).count()
}

fn settings() -> vt_domain::tools::VtSettings {
    vt_domain::tools::VtSettings::default()
}

#[tokio::test]
async fn a_lost_card_on_record_is_blocked_once_after_the_yes_then_its_second_copy_moves_the_balance() {
    let h = chat_harness(None, settings()).await;
    let c = "c-perdi";
    h.say(c, "qual o saldo do 2345678901?").await;
    let asked = h.say(c, "perdi meu cartão").await;
    assert!(
        asked
            .reply_text()
            .starts_with("Confirma o bloqueio do cartão ****8901 por perda?"),
        "{}",
        asked.reply_text()
    );
    assert_eq!(asked.tokens, (0, 0), "level 1, zero tokens");
    assert_eq!(done(&h.sim, Efeito::CartaoBloqueado), 0, "nothing before the yes");

    let blocked = h.say(c, "sim").await;
    let text = blocked.reply_text();
    assert!(
        text.starts_with("Pronto: o cartão ****8901 está bloqueado desde 22/11 às 09:00 (protocolo 20261122"),
        "{text}"
    );
    assert!(text.contains("segunda via"), "the second copy offered: {text}");
    assert_eq!(done(&h.sim, Efeito::CartaoBloqueado), 1);

    let quoted = h.say(c, "quero a segunda via").await;
    let text = quoted.reply_text();
    assert!(
        text.contains("segunda via do cartão ****8901, com taxa de R$ 15,00 paga por Pix")
            && text.contains("O saldo de R$ 50,00 passa para o cartão novo"),
        "{text}"
    );
    assert_eq!(
        done(&h.sim, Efeito::SegundaViaEmitida),
        0,
        "nothing before the yes"
    );

    let ordered = h.say(c, "sim").await;
    let text = ordered.reply_text();
    assert!(text.starts_with("Segunda via pedida (protocolo"), "{text}");
    assert!(
        text.contains("fica pronto para retirada em 5 dias úteis em Posto de atendimento Centro"),
        "{text}"
    );
    assert!(
        text.contains("O saldo de R$ 50,00 passou para ele; o cartão ****8901 foi cancelado"),
        "{text}"
    );
    assert!(!text.contains("2345678901"), "masked: {text}");
    assert_eq!(done(&h.sim, Efeito::SegundaViaEmitida), 1);

    // Another yes finds nothing waiting: nothing is sent again.
    h.say(c, "sim").await;
    assert_eq!(done(&h.sim, Efeito::SegundaViaEmitida), 1);
    assert_eq!(done(&h.sim, Efeito::CartaoBloqueado), 1);
    let situation = h.say(c, "qual a situação do cartão 2345678901?").await;
    assert!(
        situation.reply_text().contains("está cancelado"),
        "{}",
        situation.reply_text()
    );
}

#[tokio::test]
async fn a_card_not_on_record_is_refused_without_the_holders_check_and_handed_to_a_person() {
    let h = chat_harness(None, settings()).await;
    let r = h.say("c-estranho", "perdi meu cartão 2345678901").await;
    let text = r.reply_text();
    assert!(
        text.starts_with("Por segurança, só consigo bloquear o cartão ****8901"),
        "{text}"
    );
    assert!(text.contains("pessoa da equipe"), "{text}");
    let yes = h.say("c-estranho", "sim").await;
    assert!(
        !yes.reply_text().contains("bloqueado desde"),
        "{}",
        yes.reply_text()
    );
    assert!(
        h.sim.ledger().iter().all(|e| e.method != "POST"),
        "the card system never heard of it"
    );
}

#[tokio::test]
async fn with_the_cpf_check_the_holders_digits_open_the_way_and_wrong_ones_close_it() {
    let h = chat_harness_checking_holders(vt_domain::tools::Autoatendimento {
        verificacao: vt_domain::tools::Verificacao::CpfFinal,
    })
    .await;
    let asked = h.say("c-cpf", "roubaram meu vt 2345678901").await;
    assert!(
        asked.reply_text().contains("3 últimos dígitos do CPF"),
        "{}",
        asked.reply_text()
    );
    // The simulated holder's CPF ends in the card's first three digits.
    let checked = h.say("c-cpf", "234").await;
    assert!(
        checked
            .reply_text()
            .starts_with("Confirma o bloqueio do cartão ****8901 por roubo ou furto?"),
        "{}",
        checked.reply_text()
    );
    let blocked = h.say("c-cpf", "sim").await;
    assert!(
        blocked.reply_text().contains("está bloqueado desde"),
        "{}",
        blocked.reply_text()
    );

    let asked = h.say("c-outro", "perdi o cartão 3456789012").await;
    assert!(asked.reply_text().contains("CPF"), "{}", asked.reply_text());
    let wrong = h.say("c-outro", "999").await;
    assert!(
        wrong
            .reply_text()
            .starts_with("Não consegui confirmar que o cartão ****9012 é seu"),
        "{}",
        wrong.reply_text()
    );
    let yes = h.say("c-outro", "sim").await;
    assert!(
        !yes.reply_text().contains("bloqueado desde"),
        "{}",
        yes.reply_text()
    );
    assert_eq!(done(&h.sim, Efeito::CartaoBloqueado), 1, "only the checked card");
    // The digits are checked by the system and never kept.
    let conv = h
        .store
        .conversation("c-outro")
        .await
        .expect("read")
        .expect("conv");
    // (Cards are kept as 32-hex fingerprints, which may hold "999" by chance: only other text counts.)
    fn texts(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(t) => out.push(t.clone()),
            serde_json::Value::Array(a) => a.iter().for_each(|x| texts(x, out)),
            serde_json::Value::Object(o) => o.values().for_each(|x| texts(x, out)),
            _ => {}
        }
    }
    let mut kept = Vec::new();
    texts(&serde_json::Value::Object(conv.state), &mut kept);
    let fingerprint = |t: &str| t.len() == 32 && t.chars().all(|c| c.is_ascii_hexdigit());
    let digits: Vec<_> = kept
        .iter()
        .filter(|t| !fingerprint(t) && t.contains("999"))
        .collect();
    assert!(digits.is_empty(), "{kept:?}");
}

#[tokio::test]
async fn a_yes_that_does_not_follow_the_question_and_a_no_block_nothing() {
    let h = chat_harness(None, settings()).await;
    let c = "c-depois";
    h.say(c, "saldo do 2345678901").await;
    h.say(c, "meu cartão foi roubado").await;
    h.say(c, "qual o saldo?").await;
    let late = h.say(c, "sim").await;
    assert!(
        !late.reply_text().contains("bloqueado desde"),
        "{}",
        late.reply_text()
    );
    h.say(c, "perdi meu vt").await;
    let no = h.say(c, "não").await;
    assert!(
        no.reply_text()
            .starts_with("Tudo bem: o cartão não foi bloqueado"),
        "{}",
        no.reply_text()
    );
    assert_eq!(done(&h.sim, Efeito::CartaoBloqueado), 0);
}

#[tokio::test]
async fn a_second_copy_asked_of_an_active_card_asks_the_block_first_and_pending_credits_move_too() {
    let h = chat_harness(None, settings()).await;
    let c = "c-pendente";
    h.say(c, "qual a situação do cartão 1919191919?").await;
    let first = h.say(c, "quero a segunda via").await;
    assert!(
        first.reply_text().starts_with(
            "Antes da segunda via, o cartão ****1919 precisa ser bloqueado. Confirma o bloqueio"
        ),
        "{}",
        first.reply_text()
    );
    h.say(c, "sim").await;
    h.say(c, "quero a segunda via no boleto").await;
    let ordered = h.say(c, "sim").await;
    let text = ordered.reply_text();
    assert!(
        text.contains(
            "O saldo de R$ 50,00 passou para ele, e também R$ 50,00 em créditos que esperavam validação"
        ),
        "{text}"
    );
    assert!(text.contains("A taxa de R$ 15,00 é cobrada por boleto"), "{text}");
    assert_eq!(done(&h.sim, Efeito::SegundaViaEmitida), 1);
}

#[tokio::test]
async fn a_second_copy_the_system_says_needs_a_person_opens_a_case_and_a_free_one_says_so() {
    let h = chat_harness(None, settings()).await;
    h.say("c-bo", "situação do cartão 2525252525").await;
    let r = h.say("c-bo", "quero a segunda via").await;
    let text = r.reply_text();
    assert!(
        text.contains("não sai por aqui: a segunda via de um cartão roubado pede o boletim de ocorrência"),
        "{text}"
    );
    assert!(text.contains("pessoa da equipe"), "{text}");

    h.say("c-gratis", "saldo do 2626262626").await;
    h.say("c-gratis", "bloqueia meu cartão 2626262626, ele quebrou")
        .await;
    h.say("c-gratis", "sim").await;
    let quoted = h.say("c-gratis", "segunda via do 2626262626").await;
    assert!(
        quoted.reply_text().contains(", sem taxa?"),
        "{}",
        quoted.reply_text()
    );
    assert_eq!(done(&h.sim, Efeito::SegundaViaEmitida), 0);
}

/// With a Pix provider, the second copy's fee is charged first: nothing is ordered until the provider
/// says it was paid; then the payments job orders it once under the request's key, however many times
/// the payment is read back, and tells the holder.
#[tokio::test]
async fn a_second_copy_whose_fee_is_paid_by_pix_is_ordered_once_when_the_payment_is_read_back() {
    let h = crate::support::chat_harness_pix(crate::support::Pix::Provider).await;
    let c = "c-taxa-pix";
    h.say(c, "qual o saldo do 2345678901?").await;
    h.say(c, "perdi meu cartão").await;
    h.say(c, "sim").await;
    h.say(c, "quero a segunda via").await;
    let charged = h.say(c, "sim").await;
    let line = &charged.replies[0].text;
    assert!(
        line.starts_with(
            "Para a segunda via do cartão ****8901, pague a taxa de R$ 15,00 pelo Pix abaixo até"
        ),
        "{line}"
    );
    vt_domain::pix::BrCode::checked(&charged.replies[1].text, rust_decimal::dec!(15.00))
        .expect("the code checks");
    assert_eq!(
        done(&h.sim, Efeito::SegundaViaEmitida),
        0,
        "nothing ordered before the payment"
    );

    let open = h
        .store
        .charges_in(vt_store::records::ChargeStatus::Ativa, 10)
        .await
        .expect("open");
    assert_eq!(open.len(), 1);
    let txid = open[0].txid.clone();
    h.sim.pix().pay(&txid, false).expect("paid");
    for _ in 0..3 {
        h.service.payments().settle(&txid).await.expect("settled");
    }
    assert_eq!(done(&h.sim, Efeito::SegundaViaEmitida), 1, "ordered once");
    assert_eq!(h.sim.charges("2345678901"), 0, "no recharge: a fee");
    let told = crate::support::said(&h, c).await.pop().expect("told");
    assert!(
        told.starts_with("Segunda via pedida (protocolo")
            && told.contains("A taxa de R$ 15,00 é cobrada por Pix"),
        "{told}"
    );
    let order = h
        .sim
        .ledger()
        .into_iter()
        .find(|e| e.efeito == Some(Efeito::SegundaViaEmitida))
        .expect("the order");
    assert_eq!(order.body.as_ref().expect("body")["pagamento"]["tipo"], "pix");
    assert!(
        order
            .idempotency_key
            .as_deref()
            .is_some_and(|k| k.starts_with("segunda_via:"))
    );
}

/// With a card provider, a fee paid by card gets the provider's checkout link first; the second copy is
/// ordered once, when the provider says the page was paid, with the payment as its token.
#[tokio::test]
async fn a_second_copy_whose_fee_is_paid_by_card_gets_a_link_and_is_ordered_once_when_paid() {
    let h = crate::support::chat_harness_cards().await;
    let c = "c-taxa-cartao";
    h.say(c, "qual o saldo do 2345678901?").await;
    h.say(c, "perdi meu cartão").await;
    h.say(c, "sim").await;
    let quoted = h.say(c, "quero a segunda via, pago no cartão de crédito").await;
    assert!(
        quoted.reply_text().contains("cartão de crédito"),
        "{}",
        quoted.reply_text()
    );
    let linked = h.say(c, "sim").await;
    let line = linked.reply_text();
    assert!(
        line.starts_with(
            "Para a segunda via do cartão ****8901, pague a taxa de R$ 15,00 com o seu cartão de crédito"
        ) && line.contains("/_simulador/checkout/")
            && line.contains("nunca digite o número do seu cartão"),
        "{line}"
    );
    let id = linked
        .replies
        .iter()
        .flat_map(|r| r.files.iter())
        .find_map(|f| vt_domain::tools::link_of(f).map(str::to_owned))
        .expect("the link's file");
    assert_eq!(
        done(&h.sim, Efeito::SegundaViaEmitida),
        0,
        "nothing ordered before the payment"
    );

    let payment = h.sim.cartao().pay(&id, false).expect("paid on the page");
    let payments = h.service.payments();
    let (first, second) = tokio::join!(payments.settle(&id), payments.settle(&id));
    let outcomes = [first.expect("settle"), second.expect("settle")];
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == vt_agent::testkit::Settled::Credited)
            .count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(done(&h.sim, Efeito::SegundaViaEmitida), 1, "ordered once");
    assert_eq!(h.sim.charges("2345678901"), 0, "no recharge: a fee");
    let order = h
        .sim
        .ledger()
        .into_iter()
        .find(|e| e.efeito == Some(Efeito::SegundaViaEmitida))
        .expect("the order");
    let body = order.body.expect("body");
    assert_eq!(body["pagamento"]["tipo"], "cartao_credito");
    assert_eq!(
        body["pagamento"]["token"],
        payment.as_str(),
        "the payment is the token"
    );
    let told = crate::support::said(&h, c).await.pop().expect("told");
    assert!(
        told.starts_with("Segunda via pedida (protocolo")
            && told.contains("A taxa de R$ 15,00 é cobrada por cartão de crédito"),
        "{told}"
    );
}

/// A card blocked by itself is a stretch the bot resolved — no person; a block asked and never
/// confirmed is abandoned.
#[tokio::test]
async fn a_card_blocked_by_the_desk_counts_as_resolved_without_a_person() {
    let h = chat_harness(None, settings()).await;
    h.say("c-sozinho", "qual o saldo do 2345678901?").await;
    h.say("c-sozinho", "perdi meu cartão").await;
    h.say("c-sozinho", "sim").await;
    h.say("c-largou", "qual o saldo do 3456789012?").await;
    h.say("c-largou", "bloqueia meu cartão 3456789012").await;
    h.clock.set(h.clock.now() + chrono::Duration::minutes(45));
    assert!(h.service.outcomes().close_stretches().await >= 2);
    let all = h
        .store
        .outcomes_since(chrono::DateTime::UNIX_EPOCH)
        .await
        .expect("outcomes");
    let of = |conv: &str| {
        all.iter()
            .find(|o| o.conversation_id == conv)
            .map(|o| o.desfecho)
            .expect("an outcome")
    };
    assert_eq!(of("c-sozinho"), vt_store::records::Desfecho::ResolvidaPeloBot);
    assert_eq!(of("c-largou"), vt_store::records::Desfecho::Abandonada);
}
