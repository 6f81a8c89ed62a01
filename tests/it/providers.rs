//! The OpenAI and Anthropic adapters against loopback fakes that speak their wire formats: the request
//! shapes are checked, the responses follow the APIs' documented shapes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use vt_engine::conversation::ExecutionStatus;
use vt_engine::llm::LlmProvider;
use vt_engine::llm::ProviderSettings;
use vt_engine::llm::anthropic::AnthropicProvider;
use vt_engine::llm::openai::OpenAiProvider;

use crate::support::{FakeServer, fast_config, test_engine, user};

fn settings(url: &str, key: &str) -> ProviderSettings {
    ProviderSettings {
        base_url: url.into(),
        model: "modelo-teste".into(),
        api_key: Some(key.into()),
        temperature: Some(0.2),
        max_tokens: 300,
        timeout: Duration::from_secs(5),
    }
}

fn openai_tool_call() -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "modelo-teste-2026",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_abc", "type": "function",
                            "function": {"name": "consultar", "arguments": "{\"cartao\":\"1234567890\"}"}}]}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 18, "total_tokens": 138}
    })
}

fn openai_text(text: &str) -> Value {
    json!({
        "id": "chatcmpl-2", "object": "chat.completion", "created": 2, "model": "modelo-teste-2026",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 150, "completion_tokens": 9, "total_tokens": 159}
    })
}

#[tokio::test]
async fn openai_ca02_against_the_wire_fake() {
    let server = FakeServer::start(vec![
        (200, vec![], openai_tool_call()),
        (200, vec![], openai_text("Saldo: R$ 50,00")),
    ])
    .await;
    let llm: Arc<dyn LlmProvider> =
        Arc::new(OpenAiProvider::new(settings(&server.url, "sk-test")).expect("provider"));
    let engine = test_engine(Some(llm), fast_config());
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "status sprint").await.expect("turn");
    assert_eq!(out.reply_text(), "Saldo: R$ 50,00");
    assert_eq!(out.execution.model_calls[0].tokens_input, 120);
    assert_eq!(out.execution.model_calls[0].stop_reason, "tool_use");
    assert_eq!(out.execution.model_calls[1].model, "modelo-teste-2026");

    let received = server.received();
    assert_eq!(received.len(), 2);
    let first = &received[0];
    assert_eq!(first.path, "/chat/completions");
    assert_eq!(first.headers["authorization"], "Bearer sk-test");
    assert_eq!(first.body["model"], "modelo-teste");
    assert_eq!(first.body["max_tokens"], 300, "compatible servers get max_tokens");
    assert_eq!(first.body["messages"][0]["role"], "system");
    assert_eq!(
        first.body["messages"][1],
        json!({"role": "user", "content": "status sprint"})
    );
    let tool = first.body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["function"]["name"] == "consultar")
        .expect("consultar");
    assert_eq!(tool["type"], "function");
    assert_eq!(tool["function"]["strict"], true);
    assert_eq!(tool["function"]["parameters"]["additionalProperties"], false);
    assert_eq!(tool["function"]["parameters"]["required"], json!(["cartao"]));

    let second = &received[1].body["messages"];
    let n = second.as_array().expect("messages").len();
    assert_eq!(second[n - 2]["tool_calls"][0]["id"], "call_abc");
    assert_eq!(
        second[n - 2]["tool_calls"][0]["function"]["arguments"],
        "{\"cartao\":\"1234567890\"}"
    );
    assert_eq!(second[n - 1]["role"], "tool");
    assert_eq!(second[n - 1]["tool_call_id"], "call_abc");
    assert!(
        second[n - 1]["content"]
            .as_str()
            .is_some_and(|c| c.contains("consultado"))
    );
}

#[tokio::test]
async fn openai_429_is_retried_after_retry_after_and_401_is_not() {
    let rate_limited = json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}});
    let server = FakeServer::start(vec![
        (429, vec![("retry-after", "0")], rate_limited),
        (200, vec![], openai_text("depois do limite")),
    ])
    .await;
    let llm: Arc<dyn LlmProvider> =
        Arc::new(OpenAiProvider::new(settings(&server.url, "k")).expect("provider"));
    let engine = test_engine(Some(llm), fast_config());
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "oi").await.expect("turn");
    assert_eq!(out.reply_text(), "depois do limite");
    assert_eq!(out.execution.model_calls[0].attempts, 2);

    let bad_key = json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}});
    let server = FakeServer::start(vec![(401, vec![], bad_key)]).await;
    let llm: Arc<dyn LlmProvider> =
        Arc::new(OpenAiProvider::new(settings(&server.url, "k")).expect("provider"));
    let engine = test_engine(Some(llm), fast_config());
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "oi").await.expect("turn");
    assert_eq!(server.received().len(), 1);
    assert_eq!(out.execution.status, ExecutionStatus::Falhou);
    assert!(
        out.execution
            .error
            .as_deref()
            .is_some_and(|e| e.contains("Incorrect API key"))
    );
}

#[tokio::test]
async fn a_provider_that_never_answers_times_out() {
    // A listener that accepts and never replies.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let mut s = settings(&url, "k");
    s.timeout = Duration::from_millis(200);
    let provider = OpenAiProvider::new(s).expect("provider");
    let request = vt_engine::llm::CompletionRequest::default();
    let err = provider.complete(&request).await.expect_err("timeout");
    assert!(err.is_transient(), "{err}");
}

#[tokio::test]
async fn anthropic_ca02_against_the_wire_fake() {
    let tool_use = json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-teste",
        "content": [{"type": "text", "text": "Vou consultar."},
                    {"type": "tool_use", "id": "toolu_01", "name": "consultar", "input": {"cartao": "1234567890"}}],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 200, "output_tokens": 30}
    });
    let text = json!({
        "id": "msg_02", "type": "message", "role": "assistant", "model": "claude-teste",
        "content": [{"type": "text", "text": "Saldo: R$ 50,00"}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 60, "cache_read_input_tokens": 180, "cache_creation_input_tokens": 20, "output_tokens": 12}
    });
    let server = FakeServer::start(vec![(200, vec![], tool_use), (200, vec![], text)]).await;
    let llm: Arc<dyn LlmProvider> =
        Arc::new(AnthropicProvider::new(settings(&server.url, "sk-ant")).expect("provider"));
    let engine = test_engine(Some(llm), fast_config());
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "status sprint").await.expect("turn");
    assert_eq!(out.reply_text(), "Saldo: R$ 50,00");
    assert_eq!(out.execution.model_calls[0].tokens_input, 200);
    assert_eq!(out.execution.model_calls[0].stop_reason, "tool_use");
    // Anthropic counts cached tokens apart from `input_tokens`: every input token, and the cached ones.
    let cached = &out.execution.model_calls[1];
    assert_eq!(
        (
            cached.tokens_input,
            cached.tokens_cached,
            cached.tokens_cache_write
        ),
        (260, 180, 20)
    );

    let received = server.received();
    let first = &received[0];
    assert_eq!(first.path, "/v1/messages");
    assert_eq!(first.headers["x-api-key"], "sk-ant");
    assert_eq!(first.headers["anthropic-version"], "2023-06-01");
    assert_eq!(first.body["max_tokens"], 300);
    // The fixed instructions are a text block ending in a cache breakpoint; so is the tool list.
    let system = &first.body["system"][0];
    assert!(
        system["text"]
            .as_str()
            .is_some_and(|s| s.contains("PROMPT_A_SECRETO"))
    );
    assert_eq!(system["cache_control"], json!({"type": "ephemeral"}));
    let tools = first.body["tools"].as_array().expect("tools");
    assert_eq!(
        tools.last().expect("a tool")["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert!(
        tools[..tools.len() - 1]
            .iter()
            .all(|t| t.get("cache_control").is_none())
    );
    let tool = first.body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "consultar")
        .expect("consultar");
    assert_eq!(tool["input_schema"]["type"], "object");
    assert_eq!(tool["input_schema"]["properties"]["cartao"]["type"], "string");

    let messages = received[1].body["messages"].as_array().expect("messages").clone();
    assert_eq!(
        messages.len(),
        3,
        "user, assistant(tool_use), user(tool_result): {messages:?}"
    );
    assert_eq!(messages[1]["content"][1]["type"], "tool_use");
    assert_eq!(
        messages[1]["content"][1]["input"],
        json!({"cartao": "1234567890"})
    );
    let result = &messages[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_01");
    assert!(
        result["content"]
            .as_str()
            .is_some_and(|c| c.contains("consultado"))
    );
}

#[tokio::test]
async fn anthropic_overload_is_transient() {
    let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let server = FakeServer::start(vec![(529, vec![], overloaded)]).await;
    let provider = AnthropicProvider::new(settings(&server.url, "k")).expect("provider");
    let request = vt_engine::llm::CompletionRequest::default();
    let err = provider.complete(&request).await.expect_err("overloaded");
    assert!(err.is_transient());
    assert!(err.to_string().contains("Overloaded"));
}

/// The VT agent composed as `serve` composes it, over an in-memory store and a simulator of its own
/// (kept running while the second value lives), its model the one `config` names.
async fn vt_service(
    config: &vt_agent::Config,
) -> (
    vt_agent::Services,
    vt_simulators::systems::RunningSimulator,
    Arc<dyn vt_store::Store>,
) {
    vt_service_at(config, None).await
}

/// [`vt_service`] on `clock` (the engine's, and so the turns' and the budgets' time).
async fn vt_service_at(
    config: &vt_agent::Config,
    clock: Option<vt_engine::ManualClock>,
) -> (
    vt_agent::Services,
    vt_simulators::systems::RunningSimulator,
    Arc<dyn vt_store::Store>,
) {
    let store: std::sync::Arc<dyn vt_store::Store> = std::sync::Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    );
    let sim = vt_simulators::systems::Simulator::new(vt_simulators::systems::SimulatorConfig::default())
        .spawn(0)
        .await
        .expect("simulator");
    let systems =
        vt_connectors::systems::VtSystems::new(vt_connectors::systems::SystemsConfig::single(&sim.url))
            .expect("systems");
    let ext = vt_contract::context::Extensions::default()
        .with(vt_domain::systems::SystemsPort::new(systems))
        .with(vt_domain::tools::VtSettings::default());
    let engine = vt_agent::share(
        match clock {
            Some(c) => vt_agent::build_engine(config, None, ext)
                .expect("engine")
                .with_clock(vt_engine::Clock::Manual(c)),
            None => vt_agent::build_engine(config, None, ext).expect("engine"),
        },
        Some(store.clone()),
        config.recargas.clone(),
    );
    let service = vt_agent::build_service(config, engine, store.clone())
        .await
        .expect("service");
    (service, sim, store)
}

#[tokio::test]
async fn with_the_model_down_the_circuit_opens_and_turns_answer_at_once_with_what_works_without_it() {
    // Every call answered 500.
    let model = crate::support::FakeServer::start(vec![]).await;
    let mut config = vt_agent::Config::default();
    config.llm.base_url = Some(format!("{}/v1", model.url));
    config.llm.api_key = Some("sk-circuito-0123456789".into());
    config.llm.circuit_failures = 3;
    config.engine = crate::support::fast_config();
    let (service, _sim, _store) = vt_service(&config).await;
    let say = |text: &str| service.messages().handle(to_vt("c-circuito", text));
    let questions = [
        "qual a previsão do tempo para amanhã?",
        "me conta uma piada",
        "quem ganhou o jogo ontem?",
        "você gosta de música?",
        "qual é a capital da Austrália?",
    ];
    let mut calls = Vec::new();
    let mut replies = Vec::new();
    for q in questions {
        replies.push(say(q).await.expect("turn").reply_text());
        calls.push(model.received().len());
    }
    let opened = calls
        .iter()
        .position(|n| *n >= 3)
        .unwrap_or_else(|| panic!("three failures reach the provider: {calls:?}"));
    assert!(opened + 2 < calls.len(), "{calls:?}");
    assert!(
        calls[opened..].iter().all(|n| *n == calls[opened]),
        "open: the provider is not called: {calls:?}"
    );
    for reply in &replies[opened + 1..] {
        assert!(
            reply.contains("consultar o saldo"),
            "the router's help at once: {reply}"
        );
    }
    // What works without a model still works.
    let balance = say("saldo do cartão 1234567890").await.expect("turn");
    assert!(
        balance.reply_text().contains("****7890"),
        "{}",
        balance.reply_text()
    );
}

/// An OpenAI answer whose usage says `cached` of its prompt tokens came from the cache.
fn openai_text_cached(text: &str, cached: u64) -> Value {
    let mut answer = openai_text(text);
    answer["usage"]["prompt_tokens_details"] = json!({"cached_tokens": cached});
    answer
}

#[tokio::test]
async fn two_turns_of_the_vt_agent_send_one_fixed_prefix_under_one_cache_key() {
    let model = FakeServer::start(
        (0..8)
            .map(|_| (200, vec![], openai_text_cached("general_chat", 1024)))
            .collect(),
    )
    .await;
    let mut config = vt_agent::Config::default();
    config.llm.base_url = Some(format!("{}/v1", model.url));
    config.llm.api_key = Some("sk-cache-0123456789abcdef".into());
    config.engine = crate::support::fast_config();
    let (service, _sim, store) = vt_service(&config).await;
    let say = |text: &str, conversation: &str| service.messages().handle(to_vt(conversation, text));
    let first = say("me conta uma piada", "c-cache-1").await.expect("turn");
    say("qual a previsão do tempo para amanhã?", "c-cache-1")
        .await
        .expect("turn");
    say("você gosta de música?", "c-cache-2").await.expect("turn");
    assert!(first.tokens.0 > 0, "the model answered");

    // The agent's calls (the router's micro calls carry no tools).
    let calls: Vec<_> = model
        .received()
        .into_iter()
        .filter(|r| r.body["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .collect();
    assert_eq!(calls.len(), 3, "one agent call a turn");
    let key = calls[0].body["prompt_cache_key"].as_str().expect("a cache key");
    assert!(key.starts_with("vt:"), "{key}");
    assert!(
        calls.iter().all(|c| c.body["prompt_cache_key"] == key),
        "one key per agent, skill and prompt"
    );

    // Byte for byte, the requests agree up to the end of the fixed instructions: the model, the
    // tools, the system prompt; who, when and the conversation come after.
    let common = |a: &[u8], b: &[u8]| a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let fixed_end = |raw: &[u8]| {
        let text = std::str::from_utf8(raw).expect("utf-8");
        text.find("encerrar_atendimento`")
            .expect("the fixed instructions")
            + 1
    };
    for other in &calls[1..] {
        let shared = common(&calls[0].raw, &other.raw);
        assert!(
            shared >= fixed_end(&calls[0].raw),
            "the fixed prefix differs at byte {shared}"
        );
        let prefix = std::str::from_utf8(&calls[0].raw[..shared]).expect("utf-8");
        assert!(
            prefix.contains("\"tools\"") && prefix.contains("consultar_saldo"),
            "the tools are in it"
        );
        assert!(!prefix.contains("Agora é"), "the time is not in it");
    }
    let messages = calls[1].body["messages"].as_array().expect("messages");
    let last = messages.last().expect("a message");
    assert_eq!(
        last["role"], "system",
        "the conversation's own instructions come last"
    );
    assert!(last["content"].as_str().is_some_and(|c| c.contains("Agora é")));

    // What the cache saved is on record with the call.
    let (execution, _) = store
        .execution(first.execucao_id.as_deref().expect("an execution"))
        .await
        .expect("read")
        .expect("stored");
    let call = execution
        .model_calls
        .iter()
        .find(|c| c.skill != "roteador")
        .expect("the agent's call");
    assert_eq!(call.tokens_cached, 1024);
    let usage = store
        .usage_since(chrono::DateTime::UNIX_EPOCH)
        .await
        .expect("usage");
    assert_eq!(
        usage.iter().map(|u| u.tokens_cached).sum::<i64>(),
        3 * 1024,
        "each turn's cached tokens in the usage table"
    );
    let summary = store
        .usage_summary(chrono::Utc::now() - chrono::Duration::days(7))
        .await
        .expect("summary");
    assert_eq!(summary.iter().map(|r| r.tokens_cached).sum::<i64>(), 3 * 1024);
}

/// A message of the usual person to the VT agent, in `conversation`.
fn to_vt(conversation: &str, text: &str) -> vt_agent::Inbound {
    vt_agent::Inbound {
        agent_id: "vt".into(),
        conversation_id: Some(conversation.into()),
        user: crate::support::user(),
        text: text.into(),
        ..Default::default()
    }
}

/// The VT agent's configuration with its model at the OpenAI fake `model`, as `modelo-teste`.
fn with_model_at(model: &FakeServer, key: &str) -> vt_agent::Config {
    let mut config = vt_agent::Config::default();
    config.llm.base_url = Some(format!("{}/v1", model.url));
    config.llm.model = Some("modelo-teste".into());
    config.llm.api_key = Some(key.into());
    config.engine = crate::support::fast_config();
    config
}

/// An OpenAI answer of `prompt` input tokens (`cached` of them from the cache) and 10 output.
fn openai_usage(prompt: u64, cached: u64) -> Value {
    let mut answer = openai_text("general_chat");
    answer["usage"] = json!({"prompt_tokens": prompt, "completion_tokens": 10, "total_tokens": prompt + 10,
                             "prompt_tokens_details": {"cached_tokens": cached}});
    answer
}

#[tokio::test]
async fn a_turns_cost_in_reais_is_its_calls_at_the_tables_prices_and_unknown_without_one() {
    let model = FakeServer::start((0..4).map(|_| (200, vec![], openai_usage(2000, 1024))).collect()).await;
    let mut config = with_model_at(&model, "sk-custos-0123456789abcdef");
    config.custos = toml::from_str(
        r#"
        moeda = "USD"
        cambio_brl = 5.0
        [modelos."modelo-teste"]
        entrada = 1.00
        entrada_em_cache = 0.10
        saida = 4.00
        "#,
    )
    .expect("prices");
    let (service, _sim, store) = vt_service(&config).await;
    let say = |text: &str| service.messages().handle(to_vt("c-custos", text));
    say("me conta uma piada").await.expect("turn");
    say("saldo do cartão 1234567890").await.expect("turn");
    let usage = store
        .usage_since(chrono::DateTime::UNIX_EPOCH)
        .await
        .expect("usage");
    // By hand, in USD per million tokens: the router's micro call, 2,000 in and 10 out, uncached
    // (2,000 × 1.00 + 10 × 4.00 = 2,040); the agent's call, 976 in, 1,024 cached and 10 out
    // (976 × 1.00 + 1,024 × 0.10 + 10 × 4.00 = 1,118.4). 3,158.4 / 1e6 USD × 5 = R$ 0.015792.
    assert_eq!(usage[0].custo_micro_brl, Some(15_792), "{usage:?}");
    assert_eq!(usage[0].tenant_id, "default");
    assert_eq!(
        usage[1].custo_micro_brl,
        Some(0),
        "a turn with no model costs exactly nothing"
    );

    // Without the model in the table the cost is unknown, never zero.
    let unpriced = FakeServer::start((0..2).map(|_| (200, vec![], openai_usage(2000, 0))).collect()).await;
    config.llm.base_url = Some(format!("{}/v1", unpriced.url));
    config.custos = Default::default();
    let (service, _sim, store) = vt_service(&config).await;
    service
        .messages()
        .handle(to_vt("c-sem-preco", "me conta uma piada"))
        .await
        .expect("turn");
    let usage = store
        .usage_since(chrono::DateTime::UNIX_EPOCH)
        .await
        .expect("usage");
    assert_eq!(usage[0].custo_micro_brl, None);
    let rows = vt_agent::testkit::usage_costs(
        vt_agent::testkit::Spending {
            turns: &usage,
            messages: &[],
            flows: &[],
        },
        &vt_domain::vt::timezone::Timezone::sao_paulo(),
        chrono::NaiveDate::MIN,
    );
    assert!(vt_agent::testkit::usage_costs_table(&rows).contains("desconhecido"));
}

#[tokio::test]
async fn a_tenant_over_its_monthly_budget_gets_no_model_but_level_one_and_a_confirmed_recharge_go_on() {
    // Every model call: 2,000 tokens in, 10 out = (2,000 × 1.00 + 10 × 4.00) / 1e6 USD × 5 = R$ 0,0102.
    let model = FakeServer::start((0..12).map(|_| (200, vec![], openai_usage(2000, 0))).collect()).await;
    let mut config = with_model_at(&model, "sk-orcamento-0123456789abcdef");
    config.custos = toml::from_str(
        "moeda = \"USD\"\ncambio_brl = 5.0\n[modelos.\"modelo-teste\"]\nentrada = 1.00\nsaida = 4.00\n",
    )
    .expect("prices");
    // R$ 0,05 a month: a model turn (the router's call and the agent's) costs R$ 0,0204.
    config.orcamentos = vec![vt_agent::testkit::Orcamento {
        tenant: vt_engine::conversation::DEFAULT_TENANT.into(),
        mensal_brl: rust_decimal::Decimal::new(5, 2),
    }];
    let clock = vt_engine::ManualClock::new("2026-11-30T12:00:00Z".parse().expect("time"));
    let (service, _sim, _store) = vt_service_at(&config, Some(clock.clone())).await;
    let say = |text: &str| service.messages().handle(to_vt("c-orcamento", text));
    let tenant = vt_engine::conversation::DEFAULT_TENANT;
    // A recharge asked for (level 1, no model) before the budget is crossed.
    let asked = say("recarregar 20 reais no cartão 1234567890 via pix")
        .await
        .expect("turn");
    assert!(
        asked.reply_text().contains("Confirma a recarga"),
        "{}",
        asked.reply_text()
    );
    say("me conta uma piada").await.expect("turn");
    assert!(matches!(
        service.spending().standing(tenant).await,
        vt_agent::testkit::Standing::Within(_)
    ));
    say("qual a previsão do tempo para amanhã?").await.expect("turn");
    assert!(
        matches!(
            service.spending().standing(tenant).await,
            vt_agent::testkit::Standing::Warning(_)
        ),
        "R$ 0,0408 of R$ 0,05: past 80 %"
    );
    say("você gosta de música?").await.expect("turn");
    assert!(
        !service.spending().standing(tenant).await.model_allowed(),
        "R$ 0,0612: spent"
    );
    let calls = model.received().len();
    assert_eq!(calls, 6, "two calls a model turn");

    // Spent: the recharge asked for before the crossing is confirmed and charged (level 1; other
    // answers came after its question, so the first "sim" gets the question again).
    let restated = say("sim").await.expect("turn");
    assert!(
        restated.reply_text().contains("espera a sua confirmação"),
        "{}",
        restated.reply_text()
    );
    let charged = say("sim").await.expect("turn");
    assert!(
        charged.reply_text().contains("foi aprovada"),
        "money already asked for goes on: {}",
        charged.reply_text()
    );
    // What needs the model gets the help and a person's offer; a balance is answered as ever.
    let refused = say("me conta outra piada").await.expect("turn");
    assert!(
        refused.reply_text().contains("falar com atendente"),
        "{}",
        refused.reply_text()
    );
    assert_eq!(refused.tokens, (0, 0));
    let balance = say("saldo do cartão 1234567890").await.expect("turn");
    assert!(
        balance.reply_text().contains("****7890"),
        "{}",
        balance.reply_text()
    );
    assert_eq!(model.received().len(), calls, "no model call once spent");

    // The month turns (in São Paulo): the model is called again.
    clock.set("2026-12-01T03:30:00Z".parse().expect("time"));
    assert!(service.spending().standing(tenant).await.model_allowed());
    say("e agora, uma piada?").await.expect("turn");
    assert!(model.received().len() > calls);
}

/// `[llm]` with one `[[llm.fallback]]`, read as an operator writes them.
fn with_fallback(primary: &str, fallback: &str) -> Arc<dyn LlmProvider> {
    let toml = format!(
        "[llm]\nprovider = \"openai\"\nbase_url = \"{primary}\"\nmodel = \"principal\"\napi_key = \"sk-principal-0000000000\"\ntimeout_secs = 1\n\n\
         [[llm.fallback]]\nprovider = \"openai\"\nbase_url = \"{fallback}\"\nmodel = \"reserva\"\napi_key = \"sk-reserva-0000000000\"\n"
    );
    let config =
        vt_agent::Config::from_sources(Some(&toml), "vt-agent.toml", &Default::default()).expect("config");
    config.llm.provider().expect("provider").expect("configured")
}

fn answered_by(model: &str, text: &str) -> Value {
    let mut body = openai_text(text);
    body["model"] = json!(model);
    body
}

/// A 429, a 503 or a timeout of the configured model is answered by the fallback, and the turn
/// records the model that answered (what its usage row and generation span carry).
#[tokio::test]
async fn a_rate_limit_an_outage_or_a_timeout_falls_back_to_the_next_model() {
    for status in [429u16, 503] {
        let primary = FakeServer::start(vec![(status, vec![], json!({"error": {"message": "busy"}}))]).await;
        let fallback =
            FakeServer::start(vec![(200, vec![], answered_by("reserva-2026", "Oi da reserva"))]).await;
        let engine = test_engine(Some(with_fallback(&primary.url, &fallback.url)), fast_config());
        let mut conv = engine.start_conversation("genesis", user()).expect("agent");
        let out = engine.run_turn(&mut conv, "oi").await.expect("turn");
        assert_eq!(out.reply_text(), "Oi da reserva", "after a {status}");
        let call = &out.execution.model_calls[0];
        assert_eq!(
            call.model, "reserva-2026",
            "the answering model is on record after a {status}"
        );
        assert_eq!(fallback.received().len(), 1);
        assert_eq!(fallback.received()[0].body["model"], "reserva");
    }
    // A model that never answers: cut at [llm] timeout_secs, then the fallback.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", silent.local_addr().expect("addr"));
    let hold = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let fallback = FakeServer::start(vec![(200, vec![], answered_by("reserva-2026", "Oi da reserva"))]).await;
    let engine = test_engine(Some(with_fallback(&url, &fallback.url)), fast_config());
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "oi").await.expect("turn");
    assert_eq!(out.reply_text(), "Oi da reserva");
    assert_eq!(out.execution.model_calls[0].model, "reserva-2026");
    hold.abort();
}

/// A bad request is the request's fault and a refusal is an answer: neither goes to another model.
#[tokio::test]
async fn a_bad_request_or_a_refusal_never_falls_back() {
    let primary = FakeServer::start(vec![(
        400,
        vec![],
        json!({"error": {"message": "invalid 'messages'"}}),
    )])
    .await;
    let fallback = FakeServer::start(vec![(200, vec![], answered_by("reserva-2026", "não devia"))]).await;
    let engine = test_engine(Some(with_fallback(&primary.url, &fallback.url)), fast_config());
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "oi").await.expect("turn");
    assert_ne!(out.reply_text(), "não devia");
    assert!(
        fallback.received().is_empty(),
        "a 400 is not another model's to answer"
    );

    let refusal = json!({
        "id": "chatcmpl-3", "object": "chat.completion", "created": 3, "model": "principal-2026",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": null,
            "refusal": "Não posso ajudar com isso."}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    });
    let primary = FakeServer::start(vec![(200, vec![], refusal)]).await;
    let fallback = FakeServer::start(vec![(200, vec![], answered_by("reserva-2026", "não devia"))]).await;
    let engine = test_engine(Some(with_fallback(&primary.url, &fallback.url)), fast_config());
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "oi").await.expect("turn");
    assert_ne!(out.reply_text(), "não devia");
    assert!(fallback.received().is_empty(), "a refusal is an answer");
    assert_eq!(primary.received().len(), 1);
}

/// A label to choose goes out as OpenAI's structured outputs (a JSON-schema enum) and Anthropic's
/// forced tool, and is read back from either.
#[tokio::test]
async fn a_label_is_asked_for_as_each_provider_constrains_it() {
    use vt_engine::llm::ChatMessage;
    use vt_engine::llm::Choice;
    use vt_engine::llm::CompletionRequest;
    let choice = Choice {
        field: "intencao".into(),
        options: vec!["consultar_saldo".into(), "general_chat".into()],
    };
    let request = CompletionRequest {
        system: "Classifique.".into(),
        messages: vec![ChatMessage::user("meu cartão tá zerado?")],
        max_tokens: Some(24),
        choice: Some(choice.clone()),
        ..Default::default()
    };
    let server = FakeServer::start(vec![(
        200,
        vec![],
        openai_text("{\"intencao\": \"consultar_saldo\"}"),
    )])
    .await;
    let openai = OpenAiProvider::new(settings(&server.url, "sk-test")).expect("provider");
    let c = openai.complete(&request).await.expect("completion");
    assert_eq!(c.choice(&choice).as_deref(), Some("consultar_saldo"));
    let body = &server.received()[0].body;
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(
        body["response_format"]["json_schema"]["schema"]["properties"]["intencao"]["enum"],
        json!(["consultar_saldo", "general_chat"])
    );
    assert!(body.get("tools").is_none());

    let tool_use = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-teste",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "intencao", "input": {"intencao": "general_chat"}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 30, "output_tokens": 8}
    });
    let server = FakeServer::start(vec![(200, vec![], tool_use)]).await;
    let anthropic = AnthropicProvider::new(settings(&server.url, "sk-ant-test")).expect("provider");
    let c = anthropic.complete(&request).await.expect("completion");
    assert_eq!(c.choice(&choice).as_deref(), Some("general_chat"));
    let body = &server.received()[0].body;
    assert_eq!(body["tool_choice"], json!({"type": "tool", "name": "intencao"}));
    assert_eq!(
        body["tools"][0]["input_schema"]["properties"]["intencao"]["enum"],
        json!(["consultar_saldo", "general_chat"])
    );
}
