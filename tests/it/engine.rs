//! The engine's acceptance paths (BPMN §4.3 CA01–CA06) and the action contract's rules, against the
//! scripted provider.

use serde_json::json;
use vt_engine::conversation::ExecutionStatus;
use vt_engine::conversation::TurnEvent;
use vt_engine::llm::ChatMessage;
use vt_engine::llm::LlmError;
use vt_engine::llm::scripted::Scripted;

use crate::support::{fast_config, scripted, test_engine, user};

fn tool_results(messages: &[ChatMessage]) -> Vec<(String, bool)> {
    messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn ca01_direct_answer() {
    let (engine, llm) = scripted(vec![Scripted::text("Olá, Maria!")]);
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "oi").await.expect("turn");
    assert_eq!(out.reply_text(), "Olá, Maria!");
    assert_eq!(out.execution.status, ExecutionStatus::Concluido);
    assert_eq!(out.model_calls(), 1);
    assert_eq!(
        out.messages,
        vec![ChatMessage::user("oi"), ChatMessage::assistant("Olá, Maria!")]
    );
    let req = &llm.requests()[0];
    assert!(req.system.contains("PROMPT_A_SECRETO"));
    assert_eq!(req.tools.len(), 4);
    let call = &out.execution.model_calls[0];
    assert_eq!(
        (call.tokens_input, call.tokens_output, call.stop_reason.as_str()),
        (10, 5, "end_turn")
    );
    assert!(out.execution.execucao_id.starts_with("exec_"));
}

#[tokio::test]
async fn ca02_one_tool_then_answer() {
    let (engine, llm) = scripted(vec![
        Scripted::tool("consultar", json!({"cartao": "1234567890"})),
        Scripted::text("Seu saldo é R$ 50,00."),
    ]);
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "saldo").await.expect("turn");
    assert_eq!(out.reply_text(), "Seu saldo é R$ 50,00.");
    assert_eq!(out.model_calls(), 2);
    // The second model call sees the tool result.
    let second = &llm.requests()[1];
    assert!(
        matches!(second.messages.last(), Some(ChatMessage::Tool { content, .. }) if content.contains("consultado"))
    );
    assert_eq!(conv.state["ultimo_cartao"], "1234567890");
    assert!(
        out.events
            .iter()
            .any(|e| matches!(e, TurnEvent::StateUpdated { .. }))
    );
}

#[tokio::test]
async fn ca03_several_tools_in_sequence() {
    let (engine, llm) = scripted(vec![
        Scripted::tool("consultar", json!({"cartao": "111"})),
        Scripted::tools(&[
            ("consultar", json!({"cartao": "222"})),
            ("consultar", json!({"cartao": "333"})),
        ]),
        Scripted::text("Pronto."),
    ]);
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine
        .run_turn(&mut conv, "criar arquivo e salvar")
        .await
        .expect("turn");
    assert_eq!(out.reply_text(), "Pronto.");
    assert_eq!(llm.requests().len(), 3);
    let results = tool_results(&out.messages);
    let cards: Vec<bool> = ["111", "222", "333"]
        .iter()
        .map(|c| results[..].iter().any(|(r, _)| r.contains(c)))
        .collect();
    assert_eq!(cards, vec![true, true, true]);
    // In the order the model asked for them.
    assert!(results[1].0.contains("222") && results[2].0.contains("333"));
}

#[tokio::test]
async fn ca04_unknown_agent_is_a_clear_error() {
    let (engine, llm) = scripted(vec![]);
    let err = engine
        .start_conversation("inexistente", user())
        .expect_err("unknown agent");
    assert_eq!(err.to_string(), "agente não encontrado: inexistente");
    assert!(llm.requests().is_empty());
    // A stored conversation whose agent is gone fails the same way, before any model call.
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    conv.agent_id = "sumiu".into();
    let err = engine.run_turn(&mut conv, "oi").await.expect_err("agent gone");
    assert!(err.to_string().contains("agente não encontrado"));
    assert!(conv.window.is_empty(), "nothing half-written");
}

#[tokio::test]
async fn ca05_model_down_retries_then_apologises() {
    let (engine, llm) = scripted(vec![
        Scripted::server_error(),
        Scripted::server_error(),
        Scripted::server_error(),
    ]);
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "oi").await.expect("turn");
    assert_eq!(llm.requests().len(), 3, "three attempts");
    assert_eq!(out.execution.status, ExecutionStatus::Falhou);
    assert!(
        out.execution
            .error
            .as_deref()
            .is_some_and(|e| e.contains("3 tentativa"))
    );
    assert!(out.reply_text().contains("Desculpe"));
    assert_eq!(out.execution.model_calls[0].attempts, 3);
}

#[tokio::test]
async fn model_recovers_on_a_retry() {
    let (engine, llm) = scripted(vec![Scripted::server_error(), Scripted::text("voltei")]);
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "oi").await.expect("turn");
    assert_eq!(out.reply_text(), "voltei");
    assert_eq!(llm.requests().len(), 2);
    assert_eq!(out.execution.status, ExecutionStatus::Concluido);
}

#[tokio::test]
async fn a_rejected_request_is_not_retried() {
    let rejected = LlmError::Rejected {
        status: 401,
        message: "invalid api key".into(),
    };
    let (engine, llm) = scripted(vec![Scripted::fail(rejected), Scripted::text("nunca")]);
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "oi").await.expect("turn");
    assert_eq!(llm.requests().len(), 1);
    assert_eq!(out.execution.status, ExecutionStatus::Falhou);
}

#[tokio::test]
async fn ca06_five_tool_calls_loop_then_answer() {
    let mut script: Vec<Scripted> = (0..5)
        .map(|i| Scripted::tool("consultar", json!({"cartao": format!("{i}")})))
        .collect();
    script.push(Scripted::text("cinco consultas feitas"));
    let (engine, llm) = scripted(script);
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "consulte cinco").await.expect("turn");
    assert_eq!(out.reply_text(), "cinco consultas feitas");
    assert_eq!(llm.requests().len(), 6);
    assert_eq!(tool_results(&out.messages).len(), 5);
    assert_eq!(out.execution.status, ExecutionStatus::Concluido);
}

#[tokio::test]
async fn response_to_user_ends_the_turn_with_two_history_entries() {
    let (engine, llm) = scripted(vec![
        Scripted::tool("responder", json!({})),
        Scripted::text("não deve ser usado"),
    ]);
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "me responda").await.expect("turn");
    assert_eq!(llm.requests().len(), 1, "the model is not called again");
    assert_eq!(llm.remaining(), 1);
    assert_eq!(out.reply_text(), "Mensagem pronta para você.");
    // user, assistant(tool call), then exactly: tool result with the instruction, assistant with the message.
    assert_eq!(out.messages.len(), 4);
    assert!(
        matches!(&out.messages[2], ChatMessage::Tool { content, .. } if content == "INSTRUCAO_RESPONDER: usuário informado.")
    );
    assert_eq!(
        out.messages[3],
        ChatMessage::assistant("Mensagem pronta para você.")
    );
    // The instruction stays in the model's history for the next turn.
    llm.push([Scripted::text("ok")]);
    engine.run_turn(&mut conv, "e agora?").await.expect("turn 2");
    let next = &llm.requests()[1];
    assert!(next.messages.iter().any(
        |m| matches!(m, ChatMessage::Tool { content, .. } if content.starts_with("INSTRUCAO_RESPONDER"))
    ));
}

#[tokio::test]
async fn calls_after_a_response_to_user_in_the_same_batch_are_skipped() {
    let (engine, _llm) = scripted(vec![Scripted::tools(&[
        ("responder", json!({})),
        ("consultar", json!({"cartao": "999"})),
    ])]);
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "x").await.expect("turn");
    assert!(
        out.events
            .iter()
            .any(|e| matches!(e, TurnEvent::ToolSkipped { name, .. } if name == "consultar"))
    );
    assert!(
        !conv.state.contains_key("ultimo_cartao"),
        "the skipped tool never ran"
    );
    assert_eq!(
        out.messages.last(),
        Some(&ChatMessage::assistant("Mensagem pronta para você."))
    );
}

#[tokio::test]
async fn redirect_switches_skill_and_hides_the_earlier_instructions() {
    let (engine, llm) = scripted(vec![
        Scripted::tool("consultar", json!({"cartao": "CONSULTA_EM_A"})),
        Scripted::tool("redirecionar", json!({})),
        Scripted::text("Sou a skill b."),
    ]);
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "mude").await.expect("turn");
    assert_eq!(out.reply_text(), "Sou a skill b.");
    assert_eq!(conv.active_skill, "b");
    assert!(
        out.events
            .iter()
            .any(|e| matches!(e, TurnEvent::SkillChanged { from, to, .. } if from == "a" && to == "b"))
    );
    let in_b = &llm.requests()[2];
    assert!(in_b.system.contains("PROMPT_B") && !in_b.system.contains("PROMPT_A_SECRETO"));
    assert!(
        in_b.context.contains("RESPOSTA_DE_A"),
        "the previous skill's response is visible"
    );
    let seen = serde_json::to_string(&in_b.messages).expect("json");
    assert!(
        !seen.contains("CONSULTA_EM_A"),
        "earlier tool traffic is hidden: {seen}"
    );
    assert_eq!(in_b.messages, vec![ChatMessage::user("mude")]);
    let names: Vec<&str> = in_b.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, vec!["consultar"], "only the active skill's tools");
}

#[tokio::test]
async fn deterministic_chain_runs_with_zero_model_calls() {
    let (engine, llm) = scripted(vec![]);
    let mut conv = engine.start_conversation("calc", user()).expect("agent");
    let out = engine.run_turn(&mut conv, r#"{"valor": 0}"#).await.expect("turn");
    assert_eq!(out.reply_text(), "resultado 3");
    assert!(llm.requests().is_empty());
    assert_eq!(out.model_calls(), 0);
    let changes: Vec<(String, String)> = out
        .events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::SkillChanged { from, to, .. } => Some((from.clone(), to.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        changes,
        vec![("p1".into(), "p2".into()), ("p2".into(), "p3".into())]
    );
    // The next message starts the chain over.
    let out = engine
        .run_turn(&mut conv, r#"{"valor": 1}"#)
        .await
        .expect("turn 2");
    assert_eq!(out.reply_text(), "resultado 3");
}

#[tokio::test]
async fn deterministic_step_with_bad_input_fails_clearly() {
    let (engine, _llm) = scripted(vec![]);
    let mut conv = engine.start_conversation("calc", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "isto não é json").await.expect("turn");
    assert_eq!(out.execution.status, ExecutionStatus::Falhou);
    assert!(out.execution.error.as_deref().is_some_and(|e| e.contains("p1")));
    assert!(out.reply_text().contains("Desculpe"));
}

#[tokio::test]
async fn invalid_arguments_are_recovered() {
    let (engine, llm) = scripted(vec![
        Scripted::tool("consultar", json!({"numero": 5})),
        Scripted::raw_tools(vec![("consultar", "{\"cartao\": ".into())]),
        Scripted::tool("consultar", json!({"cartao": "123"})),
        Scripted::text("feito"),
    ]);
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "x").await.expect("turn");
    assert_eq!(out.reply_text(), "feito");
    let results = tool_results(&out.messages);
    assert!(
        results[0].1 && results[0].0.contains("argumentos inválidos"),
        "{results:?}"
    );
    assert!(results[1].1 && results[1].0.contains("JSON"), "{results:?}");
    assert!(!results[2].1);
    assert_eq!(llm.requests().len(), 4);
    assert_eq!(out.execution.status, ExecutionStatus::Concluido);
}

#[tokio::test]
async fn unknown_and_unexposed_tools_are_recovered() {
    let (engine, _llm) = scripted(vec![
        Scripted::tool("apagar_tudo", json!({})),
        Scripted::tool("redirecionar", json!({})),
        // In skill b, `responder` is registered but not exposed: it is unknown there.
        Scripted::tool("responder", json!({})),
        Scripted::text("ok"),
    ]);
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "x").await.expect("turn");
    let results = tool_results(&out.messages);
    assert!(
        results[0].0.contains("ferramenta desconhecida: apagar_tudo"),
        "{results:?}"
    );
    assert!(results[0].0.contains("consultar"), "lists what exists");
    assert!(
        results[2].0.contains("ferramenta desconhecida: responder"),
        "{results:?}"
    );
    assert_eq!(out.reply_text(), "ok");
}

#[tokio::test]
async fn a_panicking_action_becomes_an_error_result() {
    let (engine, _llm) = scripted(vec![
        Scripted::tool("explodir", json!({})),
        Scripted::text("contornado"),
    ]);
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "x").await.expect("turn");
    assert_eq!(out.reply_text(), "contornado");
    assert!(
        out.events
            .iter()
            .any(|e| matches!(e, TurnEvent::Error { message } if message.contains("panicked")))
    );
}

#[tokio::test]
async fn the_loop_bound_holds() {
    let script: Vec<Scripted> = (0..20)
        .map(|_| Scripted::tool("consultar", json!({"cartao": "1"})))
        .collect();
    let llm = std::sync::Arc::new(vt_engine::llm::scripted::ScriptedProvider::new(script));
    let config = vt_engine::EngineConfig {
        max_model_calls: 4,
        ..fast_config()
    };
    let engine = test_engine(Some(llm.clone()), config);
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "loop").await.expect("turn");
    assert_eq!(llm.requests().len(), 4);
    assert_eq!(out.execution.status, ExecutionStatus::Falhou);
    assert!(
        out.execution
            .error
            .as_deref()
            .is_some_and(|e| e.contains("limite de 4"))
    );
    assert!(out.reply_text().contains("não consegui concluir"));
}

#[tokio::test]
async fn a_repeated_call_runs_again_only_when_the_engine_is_told_to() {
    let script = || {
        let mut s: Vec<Scripted> = (0..3)
            .map(|_| Scripted::tool("consultar", json!({"cartao": "1234567890"})))
            .collect();
        s.push(Scripted::text("pronto"));
        std::sync::Arc::new(vt_engine::llm::scripted::ScriptedProvider::new(s))
    };
    let ran = |events: &[TurnEvent]| {
        let count = |skipped: bool| {
            events
                .iter()
                .filter(|e| match e {
                    TurnEvent::ToolCall { name, .. } => !skipped && name == "consultar",
                    TurnEvent::ToolSkipped { name, .. } => skipped && name == "consultar",
                    _ => false,
                })
                .count()
        };
        (count(false), count(true))
    };
    // By default the repeats are answered without running (the model has the result).
    let engine = test_engine(Some(script()), fast_config());
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "saldo").await.expect("turn");
    assert_eq!(ran(&out.events).0, 1);
    // Told to (a tool whose answer changes, the peer benchmark's contract), each call runs.
    let config = vt_engine::EngineConfig {
        run_repeated_calls: true,
        ..fast_config()
    };
    let engine = test_engine(Some(script()), config);
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "saldo").await.expect("turn");
    assert_eq!(ran(&out.events), (3, 0));
    assert_eq!(out.reply_text(), "pronto");
}

#[tokio::test]
async fn without_a_model_the_user_gets_help() {
    let engine = test_engine(None, fast_config());
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "oi").await.expect("turn");
    assert_eq!(out.reply_text(), vt_engine::NO_MODEL_REPLY);
    assert_eq!(out.model_calls(), 0);
    assert_eq!(out.execution.status, ExecutionStatus::Concluido);
    let engine = test_engine(None, fast_config()).with_no_model_reply("Só sei consultar saldos.");
    let mut conv = engine.start_conversation("genesis", user()).expect("agent");
    let out = engine.run_turn(&mut conv, "oi").await.expect("turn");
    assert_eq!(out.reply_text(), "Só sei consultar saldos.");
}

#[test]
fn the_shipped_skills_and_prompts_load() {
    let config = vt_agent::Config::default();
    let registry = vt_agent::build_registry().expect("registry");
    let (catalog, _prompts) =
        vt_agent::build_catalog(&config, &registry).expect("skills/ and prompts/ are valid");
    assert!(catalog.agent("vt").is_some());
}
