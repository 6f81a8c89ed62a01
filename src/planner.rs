//! Hybrid tasks (SPEC §5): the model writes a JSON plan, code executes it. Deterministic steps run
//! actions as code; reasoning steps are small model calls that see only the earlier steps' results,
//! never the conversation history. Only read-only actions may appear in a plan: a plan can look
//! things up, never move money. Every step is recorded in the task run.

use chrono::Utc;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use vt_contract::ActionResponse;

use vt_engine::llm::{ChatMessage, CompletionRequest, LlmProvider};
use vt_engine::{Conversation, Engine};
use vt_store::{IntentRecord, TaskRun, TaskStatus};

/// Actions a plan may use: they read, they never charge.
pub(crate) const PLAN_ACTIONS: &[(&str, &str)] = &[(
    "consultar_saldo",
    "consulta o saldo de um cartão; argumentos {\"cartao\": \"...\"}",
)];
const MAX_STEPS: usize = 6;

/// Told to the user when no valid plan comes out of the model.
pub(crate) const PLAN_FAILED_REPLY: &str =
    "Não consegui organizar esse pedido em etapas. Pode me pedir uma coisa de cada vez?";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Plan {
    pub passos: Vec<Passo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "tipo", rename_all = "snake_case")]
pub(crate) enum Passo {
    Deterministico { acao: String, argumentos: Value },
    Raciocinio { instrucao: String },
}

/// What a hybrid task produced.
pub(crate) struct PlanOutcome {
    pub reply: String,
    pub task: TaskRun,
    pub tokens: (u64, u64),
}

/// Parses and checks a plan; the error says what is wrong, for the repair attempt.
pub(crate) fn parse_plan(text: &str) -> Result<Plan, String> {
    let trimmed = text
        .trim()
        .trim_start_matches("```json")
        .trim_start_matches("```")
        .trim_end_matches("```")
        .trim();
    let plan: Plan = vt_contract::json::from_text(trimmed).map_err(|e| format!("JSON inválido: {e}"))?;
    if plan.passos.is_empty() || plan.passos.len() > MAX_STEPS {
        return Err(format!("o plano deve ter de 1 a {MAX_STEPS} passos"));
    }
    for (i, p) in plan.passos.iter().enumerate() {
        if let Passo::Deterministico { acao, argumentos } = p {
            if PLAN_ACTIONS.iter().all(|(a, _)| a != acao) {
                return Err(format!("passo {}: ação {acao:?} não permitida", i + 1));
            }
            if !argumentos.is_object() {
                return Err(format!("passo {}: argumentos devem ser um objeto", i + 1));
            }
        }
    }
    Ok(plan)
}

fn planner_prompt() -> String {
    let actions: Vec<String> = PLAN_ACTIONS.iter().map(|(a, d)| format!("- {a}: {d}")).collect();
    format!(
        "Você planeja tarefas de um assistente de vale-transporte. Responda APENAS com JSON, sem texto em volta, no formato \
         {{\"passos\": [{{\"tipo\": \"deterministico\", \"acao\": \"...\", \"argumentos\": {{...}}}}, {{\"tipo\": \"raciocinio\", \"instrucao\": \"...\"}}]}}.\n\
         Ações permitidas nos passos determinísticos:\n{}\nUse no máximo {MAX_STEPS} passos. Passos de raciocínio só veem os resultados dos passos anteriores.",
        actions.join("\n")
    )
}

/// Plans and executes `text` for `conv`.
pub(crate) async fn run(
    engine: &Engine,
    llm: &dyn LlmProvider,
    conv: &Conversation,
    text: &str,
    intent: &IntentRecord,
    task_id: String,
) -> PlanOutcome {
    let started = Utc::now();
    let mut tokens = (0u64, 0u64);
    let mut task = started_task(task_id, conv, &intent.intent_key, started);
    let max_tokens = u32::try_from(intent.max_tokens.max(64)).unwrap_or(400);
    let mut messages = vec![ChatMessage::user(text)];
    let mut plan = None;
    let mut last_error = String::new();
    // One attempt, plus one repair attempt that is told what was wrong.
    for _ in 0..2 {
        let request = CompletionRequest {
            system: planner_prompt(),
            messages: messages.clone(),
            tools: Vec::new(),
            max_tokens: Some(max_tokens),
            ..Default::default()
        };
        match vt_engine::telemetry::spans::complete("planejar", llm, &request).await {
            Ok(c) => {
                tokens.0 += c.usage.input_tokens;
                tokens.1 += c.usage.output_tokens;
                let answer = c.text.unwrap_or_default();
                match parse_plan(&answer) {
                    Ok(p) => {
                        plan = Some(p);
                        break;
                    }
                    Err(e) => {
                        last_error = e.clone();
                        messages.push(ChatMessage::assistant(answer));
                        messages.push(ChatMessage::user(format!(
                            "O plano é inválido ({e}). Responda de novo só com o JSON válido."
                        )));
                    }
                }
            }
            Err(e) => {
                last_error = e.to_string();
                break;
            }
        }
    }
    let Some(plan) = plan else {
        task.status = TaskStatus::Failed;
        task.error_message = Some(format!("plano inválido: {last_error}"));
        task.tokens_used = (tokens.0 + tokens.1) as i64;
        task.completed_at = Some(Utc::now());
        return PlanOutcome {
            reply: PLAN_FAILED_REPLY.into(),
            task,
            tokens,
        };
    };
    execute(engine, Some(llm), (conv, text), &plan, task, (tokens, max_tokens)).await
}

/// Each card's balance: a plan code writes (one read-only step a card), executed as a model's plan
/// would be and recorded the same way, with zero tokens.
pub(crate) async fn each_card(
    engine: &Engine,
    conv: &Conversation,
    text: &str,
    cards: &[String],
    task_id: String,
) -> PlanOutcome {
    let plan = Plan {
        passos: cards
            .iter()
            .take(MAX_STEPS)
            .map(|c| Passo::Deterministico {
                acao: "consultar_saldo".into(),
                argumentos: json!({"cartao": c}),
            })
            .collect(),
    };
    let task = started_task(task_id, conv, "tarefa_composta", Utc::now());
    execute(engine, None, (conv, text), &plan, task, ((0, 0), 0)).await
}

/// A task run of `intent` for `conv`, started at `at`, before its plan.
fn started_task(id: String, conv: &Conversation, intent: &str, at: chrono::DateTime<Utc>) -> TaskRun {
    TaskRun {
        id,
        conversation_id: conv.id.clone(),
        user_id: conv.user_id.clone(),
        intent_key: intent.to_owned(),
        status: TaskStatus::Running,
        plan: None,
        steps: json!([]),
        final_result: None,
        tokens_used: 0,
        error_message: None,
        created_at: at,
        completed_at: None,
    }
}

/// Runs `plan`'s steps in order: actions as code, reasoning steps (only in a model's plan) as small
/// model calls that see the earlier results.
async fn execute(
    engine: &Engine,
    llm: Option<&dyn LlmProvider>,
    (conv, text): (&Conversation, &str),
    plan: &Plan,
    mut task: TaskRun,
    (mut tokens, max_tokens): ((u64, u64), u32),
) -> PlanOutcome {
    task.plan = vt_contract::json::to_value(plan).ok();
    let mut results: Vec<String> = Vec::new();
    let mut steps = Vec::new();
    let mut last_reasoning = None;
    for passo in &plan.passos {
        let (step, result) = match passo {
            Passo::Deterministico { acao, argumentos } => {
                let result = match engine.call_action(conv, acao, argumentos.clone(), text).await {
                    Ok(ActionResponse::ToUser(r)) => r.message,
                    Ok(ActionResponse::ToAgent(r)) => r.instruction,
                    Err(e) => format!("erro: {}", e.model_message()),
                };
                (
                    json!({"tipo": "deterministico", "acao": acao, "resultado": result, "tokens": 0}),
                    result,
                )
            }
            Passo::Raciocinio { instrucao } => {
                let earlier: Vec<String> = results
                    .iter()
                    .enumerate()
                    .map(|(i, r)| format!("{}. {r}", i + 1))
                    .collect();
                let request = CompletionRequest {
                    system: "Você executa um passo de raciocínio de um assistente de vale-transporte. Use só os resultados dados; \
                             responda em português, curto, sem números de cartão completos."
                        .into(),
                    messages: vec![ChatMessage::user(format!("{instrucao}\n\nResultados anteriores:\n{}", earlier.join("\n")))],
                    tools: Vec::new(),
                    max_tokens: Some(max_tokens),
                    ..Default::default()
                };
                let answer = match llm {
                    Some(llm) => vt_engine::telemetry::spans::complete("raciocinar", llm, &request).await,
                    None => Err(vt_engine::llm::LlmError::Unavailable("sem modelo".into())),
                };
                let (result, used) = match answer {
                    Ok(c) => (
                        c.text.unwrap_or_default(),
                        (c.usage.input_tokens, c.usage.output_tokens),
                    ),
                    Err(e) => (format!("erro: {e}"), (0, 0)),
                };
                tokens.0 += used.0;
                tokens.1 += used.1;
                last_reasoning = Some(result.clone());
                (
                    json!({"tipo": "raciocinio", "instrucao": instrucao, "resultado": result, "tokens": used.0 + used.1}),
                    result,
                )
            }
        };
        steps.push(step);
        results.push(result);
    }
    let reply = last_reasoning
        .filter(|r| !r.trim().is_empty())
        .unwrap_or_else(|| results.join("\n"));
    task.steps = Value::Array(steps);
    task.status = TaskStatus::Completed;
    task.final_result = Some(reply.clone());
    task.tokens_used = (tokens.0 + tokens.1) as i64;
    task.completed_at = Some(Utc::now());
    PlanOutcome { reply, task, tokens }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_checked() {
        let ok = r#"{"passos": [{"tipo": "deterministico", "acao": "consultar_saldo", "argumentos": {"cartao": "1111111111"}},
                                {"tipo": "raciocinio", "instrucao": "compare"}]}"#;
        assert_eq!(parse_plan(ok).expect("valid").passos.len(), 2);
        assert!(
            parse_plan(&format!("```json\n{ok}\n```")).is_ok(),
            "fenced JSON is accepted"
        );
        let money =
            r#"{"passos": [{"tipo": "deterministico", "acao": "confirmar_recarga", "argumentos": {}}]}"#;
        assert!(
            parse_plan(money)
                .expect_err("not allowed")
                .contains("não permitida")
        );
        assert!(parse_plan(r#"{"passos": []}"#).is_err());
        assert!(
            parse_plan("vou consultar")
                .expect_err("not json")
                .contains("JSON")
        );
    }
}
