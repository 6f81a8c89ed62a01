//! Money, card numbers and secrets: the defects an outside test campaign found (issue "Step 6"), each
//! pinned by a test that failed before the fix. In process here; across processes (several binaries on
//! one data directory, kill -9) in `processes`.

use std::sync::Arc;

use serde_json::json;
use vt_agent::{FlowStatus, run_flow};
use vt_domain::tools::VtSettings;
use vt_engine::llm::scripted::Scripted;
use vt_engine::llm::scripted::ScriptedProvider;
use vt_simulators::systems::Efeito;

use crate::support::{chat_harness, flow_harness, quick_simulator};

fn posts_with_key(h: &crate::support::ChatHarness) -> Vec<(Option<String>, Option<Efeito>)> {
    h.sim
        .ledger()
        .into_iter()
        .filter(|e| e.sistema == "recarga")
        .map(|e| (e.idempotency_key, e.efeito))
        .collect()
}

#[tokio::test]
async fn two_separately_confirmed_recharges_are_two_charges_and_a_repeated_yes_is_none() {
    let h = chat_harness(None, VtSettings::default()).await;
    for _ in 0..2 {
        let ask = h.say("k1", "recarrega 50 no 2345678901 via pix").await;
        assert!(ask.reply_text().starts_with("Confirma"), "{}", ask.reply_text());
        let done = h.say("k1", "sim").await;
        assert!(
            done.reply_text().contains("foi aprovada") && !done.reply_text().contains("já tinha"),
            "{}",
            done.reply_text()
        );
    }
    let again = h.say("k1", "sim").await;
    assert!(
        again.reply_text().contains("Não há nenhuma recarga"),
        "{}",
        again.reply_text()
    );
    assert_eq!(h.recharges(), 2, "two confirmed requests, two charges");
    let posts = posts_with_key(&h);
    assert_eq!(posts.len(), 2);
    assert_ne!(posts[0].0, posts[1].0, "each confirmation has its own key");
    assert!(
        posts.iter().all(|(_, e)| *e == Some(Efeito::RecargaEfetivada)),
        "{posts:?}"
    );
}

#[tokio::test]
async fn a_retry_after_an_unknown_outcome_reuses_the_key_and_is_not_charged_twice() {
    let h = chat_harness(None, VtSettings::default()).await;
    h.say("t1", "recarrega 50 no 9999999999 via pix").await;
    let first = h.say("t1", "sim").await;
    assert!(
        first.reply_text().contains("processamento"),
        "{}",
        first.reply_text()
    );
    // The person tries again, as people do after a timeout.
    let ask = h.say("t1", "recarrega 50 no 9999999999 via pix").await;
    assert!(
        ask.reply_text().contains("ainda está sem resultado"),
        "the reuse is said before the confirmation: {}",
        ask.reply_text()
    );
    let second = h.say("t1", "sim").await;
    assert!(
        second.reply_text().contains("já tinha sido feita") && !second.reply_text().contains("foi aprovada"),
        "a replay is never told as a new approval: {}",
        second.reply_text()
    );
    assert_eq!(h.recharges(), 1);
    let posts = posts_with_key(&h);
    assert_eq!(posts.len(), 2);
    assert_eq!(posts[0].0, posts[1].0, "the same key");
    assert_eq!(posts[1].1, Some(Efeito::Replay));
}

#[tokio::test]
async fn a_flow_rerun_is_a_replay_reported_as_such() {
    let h = flow_harness(quick_simulator()).await;
    let input = r#"{"cartao": "1234567890", "recarga": {"valor": 50, "meio_pagamento": {"tipo": "pix"}}}"#;
    let first = run_flow(&h.engine, input).await.expect("flow").output;
    assert_eq!(first.status, FlowStatus::Concluido);
    let again = run_flow(&h.engine, input).await.expect("flow").output;
    let rf08 = &again.etapas[7].saida;
    assert!(
        rf08["observacoes"]
            .as_array()
            .is_some_and(|o| o.contains(&json!("replay_idempotente"))),
        "{rf08}"
    );
    let mensagem = again.etapas[8].saida["payload"]["mensagem"]
        .as_str()
        .unwrap_or_default();
    assert!(mensagem.contains("já tinha sido feita"), "{mensagem}");
    assert_eq!(h.sim.charges("1234567890"), 1);
    // A caller's own key scopes the request: a new key is a new charge, the same key is not.
    let keyed = |k: &str| {
        format!(
            r#"{{"cartao": "1234567890", "recarga": {{"valor": 50, "meio_pagamento": {{"tipo": "pix"}}, "idempotency_key": "{k}"}}}}"#
        )
    };
    run_flow(&h.engine, &keyed("pedido-1")).await.expect("flow");
    run_flow(&h.engine, &keyed("pedido-1")).await.expect("flow");
    run_flow(&h.engine, &keyed("pedido-2")).await.expect("flow");
    assert_eq!(h.sim.charges("1234567890"), 3);
}

#[tokio::test]
async fn a_digit_of_another_script_never_turns_a_card_into_another() {
    let h = chat_harness(None, VtSettings::default()).await;
    let ask = h.say("u1", "recarrega 20 no 98765432１0 via pix").await;
    assert!(ask.reply_text().contains("****3210"), "{}", ask.reply_text());
    h.say("u1", "sim").await;
    assert_eq!(h.sim.charges("9876543210"), 1);
    assert_eq!(h.sim.charges("987654320"), 0);
    let r = h.say("u2", "saldo 1234567٨90").await;
    assert!(r.reply_text().contains("****7890"), "{}", r.reply_text());
    let r = h.say("u3", "saldo 98765432O10").await;
    assert!(
        !r.reply_text().contains("****5432"),
        "a card with a letter in it is not read as a shorter card: {}",
        r.reply_text()
    );
}

#[tokio::test]
async fn the_model_sees_masked_cards_only_and_the_tools_find_the_real_one() {
    let llm = Arc::new(ScriptedProvider::new([]));
    let h = chat_harness(Some(llm.clone()), VtSettings::default()).await;
    // The router prepares the recharge: the full card is now in the conversation's state and memory.
    h.say("m1", "recarrega 50 no 1234567890 via pix").await;
    llm.push([
        Scripted::text("general_chat"),
        Scripted::tool(
            "preparar_recarga",
            json!({"cartao": "****7890", "valor": 60, "meio_pagamento": "pix"}),
        ),
    ]);
    let r = h.say("m1", "mudei de ideia: prefiro o dobro, no mesmo").await;
    assert!(
        r.reply_text().contains("R$ 60,00 no cartão ****7890"),
        "the tool took the real card from what the user wrote: {}",
        r.reply_text()
    );
    let requests = llm.requests();
    assert!(!requests.is_empty());
    for request in &requests {
        let seen = format!("{} {} {:?}", request.system, request.context, request.messages);
        assert!(
            !seen.contains("1234567890"),
            "a full card reached the model: {seen}"
        );
    }
    assert!(
        requests
            .iter()
            .any(|r| format!("{} {} {:?}", r.system, r.context, r.messages).contains("****7890")),
        "the model still sees which card (masked)"
    );
    // A masked card the user never wrote is asked for, never guessed.
    llm.push([
        Scripted::text("general_chat"),
        Scripted::tool("consultar_saldo", json!({"cartao": "****0001"})),
    ]);
    let r = h.say("m1", "e aquele outro, como está?").await;
    assert!(r.reply_text().contains("número completo"), "{}", r.reply_text());
}

#[tokio::test]
async fn invalid_arguments_from_the_model_are_named_never_echoed() {
    let llm = Arc::new(ScriptedProvider::new([
        Scripted::text("general_chat"),
        Scripted::tool("consultar_saldo", json!({"cartao": ["9876543210"]})),
        Scripted::text("Não consegui consultar."),
    ]));
    let h = chat_harness(Some(llm.clone()), VtSettings::default()).await;
    let r = h.say("e1", "me ajuda com uma coisa do meu bilhete").await;
    let execucao = r.execucao_id.expect("execution");
    let (_, events) = h.store.execution(&execucao).await.expect("read").expect("stored");
    let stored = serde_json::to_string(&events).expect("json");
    assert!(
        stored.contains("argumentos inválidos"),
        "the error is recorded: {stored}"
    );
    let results: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            vt_engine::conversation::TurnEvent::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert!(!results.is_empty());
    assert!(
        results.iter().all(|c| !c.contains("9876543210")),
        "the error names the type, not the value: {results:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_that_showed_help_exports_to_a_transcript_that_replays_green() {
    let h = chat_harness(None, VtSettings::default()).await;
    let help = h.say("ajuda", "oi").await;
    assert!(
        help.reply_text().contains("Posso ajudar"),
        "{}",
        help.reply_text()
    );
    h.say("ajuda", "saldo do cartão 1234567890").await;
    let exported = vt_agent::testkit::export_transcripts(h.store.as_ref(), "ajuda")
        .await
        .expect("export");
    crate::support::assert_replays_green(&exported).await;
}

#[tokio::test]
async fn the_confirmation_time_is_said_as_it_is() {
    for (secs, words) in [
        (90, "1 minuto e 30 segundos"),
        (2, "2 segundos"),
        (600, "10 minutos"),
    ] {
        let h = chat_harness(
            None,
            VtSettings {
                confirmation_ttl_secs: secs,
                ..VtSettings::default()
            },
        )
        .await;
        let r = h.say("ttl", "recarrega 50 no 2345678901 via pix").await;
        assert!(
            r.reply_text().contains(&format!("vale por {words}.")),
            "{}",
            r.reply_text()
        );
    }
}

#[tokio::test]
async fn a_model_that_is_down_gets_the_user_an_answer_within_the_turn_bound() {
    use vt_engine::llm::LlmError;
    let down = || {
        Scripted::Fail(LlmError::Transient {
            status: Some(503),
            message: "down".into(),
            retry_after: None,
        })
    };
    let llm = Arc::new(ScriptedProvider::new([
        down(),
        down(),
        down(),
        down(),
        down(),
        down(),
    ]));
    let (engine, _) = (
        vt_agent::build_engine(
            &vt_agent::Config {
                engine: vt_engine::EngineConfig {
                    // The BPMN's background backoff, and a person waiting: the bound wins.
                    llm_retry: vt_engine::retry::RetryPolicy::new(3, 30_000),
                    turn_timeout_ms: 300,
                    ..Default::default()
                },
                ..Default::default()
            },
            Some(llm.clone()),
            Default::default(),
        )
        .expect("engine"),
        (),
    );
    let mut conv = engine
        .start_conversation("vt", crate::support::user())
        .expect("conversation");
    let started = std::time::Instant::now();
    let outcome = engine.run_turn(&mut conv, "me explica o VT").await.expect("turn");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        outcome.reply_text().contains("instabilidade"),
        "{}",
        outcome.reply_text()
    );
    assert!(
        outcome
            .execution
            .error
            .as_deref()
            .is_some_and(|e| e.contains("deadline")),
        "{:?}",
        outcome.execution.error
    );
}

#[tokio::test]
async fn a_model_never_reaches_a_card_the_user_did_not_give() {
    let llm = Arc::new(ScriptedProvider::new([]));
    let h = chat_harness(Some(llm.clone()), VtSettings::default()).await;
    let recharge = |cartao: &str| json!({"cartao": cartao, "valor": 50, "meio_pagamento": "pix"});
    for (i, (tool, args, refused)) in [
        ("consultar_saldo", json!({"cartao": "1234567890"}), true),
        ("preparar_recarga", recharge("1234 5678-90"), true),
        ("consultar_saldo", json!({"cartao": "****7890"}), false),
        ("preparar_recarga", recharge("****7890"), false),
    ]
    .into_iter()
    .enumerate()
    {
        llm.push([Scripted::text("general_chat"), Scripted::tool(tool, args.clone())]);
        if refused {
            llm.push([Scripted::text(
                "Lá vai uma: por que o ônibus foi ao médico? Estava cansado da rota.",
            )]);
        }
        // Each a new text: the classification of a text is cached.
        let asks = [
            "me conta uma piada",
            "conta outra piada",
            "uma piada curta",
            "quero ouvir uma piada",
        ];
        let r = h.say(&format!("alheio-{i}"), asks[i]).await;
        let reply = r.reply_text();
        assert!(
            !reply.contains("saldo") && !reply.contains("Confirma") && !reply.contains("1234567890"),
            "{tool} {args}: {reply}"
        );
        if refused {
            // The model was told why, and answered the user itself.
            assert!(reply.contains("piada") || reply.contains("ônibus"), "{reply}");
            let told = format!("{:?}", llm.requests().last().expect("a request").messages);
            assert!(told.contains("Recusado"), "{told}");
        } else {
            assert!(reply.contains("número completo"), "{reply}");
        }
        let conv = h
            .store
            .conversation(&format!("alheio-{i}"))
            .await
            .expect("read")
            .expect("stored");
        assert!(
            conv.state.get("recarga_pendente").is_none(),
            "{tool}: nothing prepared"
        );
    }
    assert!(
        h.sim.ledger().is_empty(),
        "no external call for a card the user never gave: {:?}",
        h.sim.ledger()
    );
}
