//! The router's level 1 against how people really write in pt-BR: each message with its expected
//! intent and parameters (or the question it must ask). No model, zero tokens.

use serde_json::{Value, json};
use vt_agent::{Route, Router};
use vt_engine::Participant;
use vt_engine::conversation::Conversation;

/// What a routed message must come out as.
enum Want {
    /// The action runs with these arguments (a subset is checked).
    Act(&'static str, Value),
    /// The router asks, mentioning this text.
    Ask(&'static str, &'static str),
    /// A fixed reply for this intent.
    Reply(&'static str),
    /// Not level 1: without a model, the help text.
    Help,
    /// Each of these cards' balance, by a plan code writes.
    Each(&'static [&'static str]),
}

use Want::{Act, Ask, Each, Help, Reply};

fn cases() -> Vec<(&'static str, bool, Want)> {
    let none = json!({});
    vec![
        // Balance, with the card in every shape people type it.
        (
            "qual meu saldo",
            false,
            Ask("consultar_saldo", "número do cartão"),
        ),
        (
            "qual é o meu saldo?",
            false,
            Ask("consultar_saldo", "número do cartão"),
        ),
        ("saldo", false, Ask("consultar_saldo", "número do cartão")),
        (
            "saldo do cartão 1234 5678-90",
            false,
            Act("consultar_saldo", json!({"cartao": "1234567890"})),
        ),
        (
            "quanto tem no vt 1234567890",
            false,
            Act("consultar_saldo", json!({"cartao": "1234567890"})),
        ),
        (
            "quanto tenho no cartão 1111111111?",
            false,
            Act("consultar_saldo", json!({"cartao": "1111111111"})),
        ),
        (
            "Saldo VT 1111.1111.11",
            false,
            Act("consultar_saldo", json!({"cartao": "1111111111"})),
        ),
        (
            "consulta o vt 2222222222 pra mim",
            false,
            Act("consultar_saldo", json!({"cartao": "2222222222"})),
        ),
        (
            "quero ver o saldo do meu cartão 3333-3333-33",
            false,
            Act("consultar_saldo", json!({"cartao": "3333333333"})),
        ),
        (
            "me passa o extrato do 4444444444",
            false,
            Act("extrato", json!({"cartao": "4444444444"})),
        ),
        (
            "quanto resta no bilhete 5555555555",
            false,
            Act("consultar_saldo", json!({"cartao": "5555555555"})),
        ),
        (
            "SALDO 1414141414",
            false,
            Act("consultar_saldo", json!({"cartao": "1414141414"})),
        ),
        (
            "boa tarde, qual o saldo do cartão 12345678?",
            false,
            Act("consultar_saldo", json!({"cartao": "12345678"})),
        ),
        (
            "saldo dos cartões 1111111111 e 2222222222",
            false,
            Each(&["1111111111", "2222222222"]),
        ),
        (
            "quanto ta no meu vt",
            false,
            Ask("consultar_saldo", "número do cartão"),
        ),
        (
            "saldo do cartão 12345",
            false,
            Ask("consultar_saldo", "número do cartão"),
        ),
        // Recharge: values as 50, 50,00, R$ 50, 50 reais, 1.234,56; payment types.
        (
            "recarrega 50 no cartão 1234567890 via pix",
            false,
            Act(
                "preparar_recarga",
                json!({"cartao": "1234567890", "valor": "50", "meio_pagamento": "pix"}),
            ),
        ),
        (
            "recarregar 50 reais no 1234567890 via pix",
            false,
            Act(
                "preparar_recarga",
                json!({"cartao": "1234567890", "valor": "50", "meio_pagamento": "pix"}),
            ),
        ),
        (
            "coloca R$ 50,00 via pix no 1234567890",
            false,
            Act(
                "preparar_recarga",
                json!({"cartao": "1234567890", "valor": "50.00", "meio_pagamento": "pix"}),
            ),
        ),
        (
            "coloca R$ 50,00 via pix",
            false,
            Ask("preparar_recarga", "número do cartão"),
        ),
        (
            "quero recarregar R$ 1.234,56 no cartão 1234567890 no boleto",
            false,
            Act(
                "preparar_recarga",
                json!({"valor": "1234.56", "meio_pagamento": "boleto"}),
            ),
        ),
        (
            "põe 30 conto no 1234567890 no cartão de crédito",
            false,
            Act(
                "preparar_recarga",
                json!({"valor": "30", "meio_pagamento": "cartao_credito"}),
            ),
        ),
        (
            "adiciona 20 reais no vt 1234567890 pelo PIX",
            false,
            Act("preparar_recarga", json!({"valor": "20"})),
        ),
        (
            "bota 100 no 1234567890 com boleto",
            false,
            Act(
                "preparar_recarga",
                json!({"valor": "100", "meio_pagamento": "boleto"}),
            ),
        ),
        (
            "quero fazer uma recarga",
            false,
            Ask(
                "preparar_recarga",
                "o número do cartão de VT, o valor da recarga e o meio de pagamento",
            ),
        ),
        (
            "recarga de 50",
            false,
            Ask(
                "preparar_recarga",
                "o número do cartão de VT e o meio de pagamento",
            ),
        ),
        (
            "recarregar o 1234567890",
            false,
            Ask("preparar_recarga", "o valor da recarga e o meio de pagamento"),
        ),
        (
            "recarrega 50 no 1234567890",
            false,
            Ask("preparar_recarga", "meio de pagamento"),
        ),
        (
            "recarrega 50 no 1234567890 pix ou boleto",
            false,
            Ask("preparar_recarga", "meio de pagamento"),
        ),
        (
            "recarrega 50 ou 60 no 1234567890 via pix",
            false,
            Ask("preparar_recarga", "mais de um valor"),
        ),
        (
            "recarregar 50 nos cartões 1111111111 e 2222222222 via pix",
            false,
            Ask("preparar_recarga", "mais de um cartão"),
        ),
        (
            "carregar R$50 no cartão 1234567890 pix",
            false,
            Act(
                "preparar_recarga",
                json!({"valor": "50", "meio_pagamento": "pix"}),
            ),
        ),
        (
            "deposita 15,50 no vt 1234567890 via pix",
            false,
            Act("preparar_recarga", json!({"valor": "15.50"})),
        ),
        (
            "meu saldo tá baixo, quero recarregar 40 no 1234567890 no pix",
            false,
            Act("preparar_recarga", json!({"valor": "40"})),
        ),
        // Confirmations and refusals, with and without a recharge waiting.
        ("sim", true, Act("confirmar_recarga", none.clone())),
        ("Sim!", true, Act("confirmar_recarga", none.clone())),
        ("confirmo", true, Act("confirmar_recarga", none.clone())),
        ("pode fazer", true, Act("confirmar_recarga", none.clone())),
        ("ok", true, Act("confirmar_recarga", none.clone())),
        ("isso mesmo", true, Act("confirmar_recarga", none.clone())),
        ("sim", false, Act("confirmar_recarga", none.clone())),
        ("não", true, Act("cancelar_recarga", none.clone())),
        ("nao", true, Act("cancelar_recarga", none.clone())),
        ("cancelar", true, Act("cancelar_recarga", none.clone())),
        ("cancela", false, Act("cancelar_recarga", none.clone())),
        ("desisto", true, Act("cancelar_recarga", none.clone())),
        ("não, obrigado", false, Reply("ajuda")),
        // Handoff.
        (
            "falar com atendente",
            false,
            Act("transferir_para_humano", none.clone()),
        ),
        (
            "quero falar com um humano",
            false,
            Act("transferir_para_humano", none.clone()),
        ),
        (
            "me passa pra uma pessoa de verdade",
            false,
            Act("transferir_para_humano", none.clone()),
        ),
        (
            "Atendente, por favor",
            false,
            Act("transferir_para_humano", none.clone()),
        ),
        (
            "preciso de atendimento humano",
            false,
            Act("transferir_para_humano", none.clone()),
        ),
        // Goodbye.
        ("tchau", false, Act("encerrar_atendimento", none.clone())),
        (
            "Tchau, obrigado!",
            false,
            Act("encerrar_atendimento", none.clone()),
        ),
        (
            "obrigado, era só isso",
            false,
            Act("encerrar_atendimento", none.clone()),
        ),
        ("até logo", false, Act("encerrar_atendimento", none.clone())),
        ("valeu, falou", false, Act("encerrar_atendimento", none.clone())),
        // Greetings and help.
        ("oi", false, Reply("ajuda")),
        ("Olá!", false, Reply("ajuda")),
        ("bom dia", false, Reply("ajuda")),
        ("o que você faz?", false, Reply("ajuda")),
        ("menu", false, Reply("ajuda")),
        // Not for level 1.
        ("qual a diferença entre VT e VR?", false, Reply("ajuda")),
        ("😀😀😀", false, Help),
        ("asdfgh", false, Help),
    ]
}

/// The router as the product has it: the default intents and the default FAQ.
fn router() -> Router {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let faq = vt_domain::faq::Faq::load(&root.join("faq")).expect("faq");
    Router::new(
        "vt",
        vt_agent::testkit::load_file(&root.join("intents/default.toml")).expect("intents"),
        None,
    )
    .with_faq(Some(std::sync::Arc::new(faq)))
}

fn conversation(pending: bool) -> Conversation {
    let mut c = Conversation::new("c".into(), "vt", "atendimento".into(), Participant::default());
    if pending {
        c.state.insert("recarga_pendente".into(), json!({"id": "p"}));
    }
    c
}

#[tokio::test]
async fn level_one_table() {
    let router = router();
    let cases = cases();
    assert!(cases.len() >= 60, "{} cases", cases.len());
    let mut failures = Vec::new();
    for (text, pending, want) in &cases {
        let d = router.route(text, &conversation(*pending)).await;
        let ok = match (want, &d.route) {
            (Act(intent, args), Route::Action { action, arguments }) => {
                action == intent
                    && d.intent == *intent
                    && args
                        .as_object()
                        .is_some_and(|want| want.iter().all(|(k, v)| arguments.get(k) == Some(v)))
            }
            (Ask(intent, words), Route::Ask { question, .. }) => {
                d.intent == *intent && question.contains(words)
            }
            (Reply(intent), Route::Reply { .. }) => d.intent == *intent,
            (Each(want), Route::EachCard { cards }) => d.intent == "tarefa_composta" && cards == want,
            (Help, Route::Reply { text }) => {
                d.intent == "ajuda" && !d.keyword_matched && text.contains("Posso ajudar")
            }
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "{text:?} (pending={pending}) → {} {:?}",
                d.intent, d.route
            ));
        }
        assert_eq!(d.tokens, (0, 0));
    }
    assert!(
        failures.is_empty(),
        "{} of {} wrong:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn an_answer_completes_the_waiting_request() {
    let router = router();
    let mut conv = conversation(false);
    let first = router.route("quero recarregar 50 via pix", &conv).await;
    let Route::Ask { awaiting, .. } = first.route else {
        panic!("expected a question, got {:?}", first.route)
    };
    conv.state.insert(
        "aguardando".into(),
        serde_json::to_value(&awaiting).expect("json"),
    );
    let second = router.route("1234 5678-90", &conv).await;
    assert_eq!(
        second.route,
        Route::Action {
            action: "preparar_recarga".into(),
            arguments: json!({"valor": "50", "meio_pagamento": "pix", "cartao": "1234567890"})
        }
    );
    assert!(second.keyword_matched);
}

#[tokio::test]
async fn an_inactive_intent_is_not_routed() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("intents/default.toml");
    let mut intents = vt_agent::testkit::load_file(&path).expect("intents");
    intents
        .iter_mut()
        .filter(|i| i.intent_key == "consultar_saldo")
        .for_each(|i| i.is_active = false);
    let router = Router::new("vt", intents, None);
    let d = router
        .route("saldo do cartão 1234567890", &conversation(false))
        .await;
    assert_eq!(d.intent, "ajuda");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

    /// Any chat text is routed without a panic, and a card the router hands to a tool is a whole run of
    /// the message's digits (read as ASCII), never a run with a character dropped.
    #[test]
    fn any_chat_text_is_routed_and_never_changes_a_card(
        text in "(saldo|recarrega 50 no|quero recarregar|sim|oi)? ?[0-9０-９٠-٩ .\\-OlxR$,]{0,30}( via pix)?",
        pending in proptest::bool::ANY,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let d = rt.block_on(router().route(&text, &conversation(pending)));
        if let Route::Action { arguments, .. } = &d.route
            && let Some(card) = arguments.get("cartao").and_then(Value::as_str)
        {
            let digits = vt_domain::vt::card::ascii_digits(&text).replace([' ', '-', '.'], "");
            proptest::prop_assert!(digits.contains(card), "{card} not in {text:?}");
        }
    }
}

/// The corpus of how card holders write (`tests/fixtures/router/corpus.yaml`): level 1 reads at least
/// 90 % of it as meant, parameters exact, and answers none of it with the bare menu.
#[tokio::test]
async fn the_corpus_of_how_card_holders_write_is_read_as_meant() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/router/corpus.yaml");
    let entries = vt_agent::testkit::load_corpus(&path).expect("corpus");
    assert!(entries.len() >= 150, "a corpus, not a handful: {}", entries.len());
    let score = vt_agent::testkit::score_corpus(&router(), &entries).await;
    println!("router corpus: {}", score.summary());
    for miss in &score.misses {
        println!("  miss: {miss}");
    }
    assert!(score.intent_accuracy() >= 0.90, "{}", score.summary());
    assert!(score.params_accuracy() >= 0.90, "{}", score.summary());
    assert_eq!(score.menu_answers, 0, "{}", score.summary());
}

/// A complaint about a payment is looked up, never read as a recharge or the menu: on the held-out
/// phrasings (`tests/fixtures/router/heldout-reclamacoes.yaml`, never used to grow the patterns) at
/// least 80 % of complaints are read as one, and nothing that is no complaint is.
#[tokio::test]
async fn complaints_about_a_payment_are_told_apart_on_phrasings_held_out() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/router/heldout-reclamacoes.yaml");
    let entries = vt_agent::testkit::load_corpus(&path).expect("held-out complaints");
    let router = router();
    let (mut complaints, mut read, mut false_alarms) = (0, 0, Vec::new());
    for entry in &entries {
        let mut conv = conversation(false);
        conv.state.clear();
        let d = router.route(&entry.texto, &conv).await;
        let is_complaint = entry.intencao == "verificar_pagamento";
        let read_as_complaint = d.intent == "verificar_pagamento";
        if is_complaint {
            complaints += 1;
            if read_as_complaint {
                read += 1;
            } else {
                println!("  missed: {:?} → {} {:?}", entry.texto, d.intent, d.route);
            }
            // Whatever it was read as, a complaint never starts a recharge.
            assert_ne!(d.intent, "preparar_recarga", "{:?}", entry.texto);
        } else if read_as_complaint {
            false_alarms.push(entry.texto.clone());
        }
    }
    println!("held-out complaints read as such: {read}/{complaints}");
    assert!(read * 5 >= complaints * 4, "{read}/{complaints}");
    assert!(false_alarms.is_empty(), "{false_alarms:?}");
}

/// The classes turn 6's held-out batch failed on — the FAQ in other words, complaints and protocol,
/// erasure, what the product does not do, two requests in one, fares per day, requests with none of
/// the old keywords — from phrasings written for this test (`tests/fixtures/router/em-outras-palavras.yaml`),
/// read with the default FAQ and no model.
#[tokio::test]
async fn each_class_the_last_batch_failed_is_read_from_new_phrasings() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let entries = vt_agent::testkit::load_corpus(&root.join("tests/fixtures/router/em-outras-palavras.yaml"))
        .expect("phrasings");
    let score = vt_agent::testkit::score_corpus(&router(), &entries).await;
    for miss in &score.misses {
        println!("  miss: {miss}");
    }
    assert!(score.misses.is_empty(), "{}", score.summary());
}
