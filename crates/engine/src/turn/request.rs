//! A turn's model step: the request built from the active skill (its prompt, the previous skill's
//! response, the compressed context, its tools, the recent window), the call with its retries within
//! the turn's deadline, and the call on record.

use std::time::Instant;

use tracing::Instrument as _;

use super::{EMPTY_ANSWER_REPLY, LLM_DOWN_REPLY, STEP_FAILED_REPLY, Step, Turn, recent};
use crate::conversation::{ModelCallRecord, TurnEvent};
use crate::llm::{ChatMessage, Completion, CompletionRequest, LlmError, LlmProvider};
use crate::prompts::PromptVars;
use crate::retry::{Retried, retry};
use crate::skills::SkillDef;
use crate::telemetry::spans;

/// What a model call took: its time and its attempts.
#[derive(Debug, Clone)]
struct CallTook {
    latencia_ms: u64,
    attempts: u32,
    fingerprint: String,
}

/// The line of a prompt file below which its instructions are the conversation's own (who, when, its
/// state): sent after the fixed part, which the provider caches.
const CONTEXT_MARKER: &str = "<!-- contexto -->";

/// The prompt cache's key for a skill's fixed part: the agent, the skill and a hash of its
/// instructions and tool names (a new prompt version is a new key). Not a secret, not a content hash
/// anyone relies on: a key that changes only costs a cache miss.
fn cache_key(
    agent: &str,
    skill: &str,
    system: &str,
    tools: &[std::sync::Arc<vt_contract::ToolSpec>],
) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    system.hash(&mut h);
    for t in tools {
        t.name.hash(&mut h);
    }
    format!("{agent}:{skill}:{:016x}", h.finish())
}

impl Turn<'_> {
    fn request(&self, skill: &SkillDef) -> Result<CompletionRequest, String> {
        let vars = PromptVars {
            agent: &self.agent.id,
            skill: &skill.name,
            skill_description: &skill.description,
            user_id: &self.conv.user_id,
            user_login: &self.conv.user_login,
            channel: &self.conv.channel,
            now: self
                .engine
                .clock
                .now()
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, false),
            state: &self.conv.state,
            memory: &self.conv.memory,
        };
        let rendered = self
            .engine
            .prompts
            .render(&skill.prompt, &vars)
            .map_err(|e| e.to_string())?;
        // Above the marker, the skill's fixed instructions; below it, this conversation's.
        let (system, own) = rendered
            .split_once(CONTEXT_MARKER)
            .map_or((rendered.as_str(), ""), |(fixed, own)| {
                (fixed.trim_end(), own.trim())
            });
        let mut context = own.to_owned();
        if let Some(h) = &self.conv.handoff {
            context.push_str(&format!(
                "\n\n## Resposta da etapa anterior ({})\n{}",
                h.from_skill, h.response
            ));
        }
        if let Some(ctx) = &self.context {
            context.push_str(&ctx.render());
        }
        let tools: Vec<_> = skill
            .actions
            .iter()
            .filter(|a| {
                self.engine
                    .registry
                    .get(a)
                    .is_some_and(|action| action.offered(&self.conv.state, &self.engine.extensions))
            })
            .filter_map(|a| self.engine.registry.spec(a))
            .cloned()
            .collect();
        let messages = recent(&self.conv.window, self.engine.config.context_messages);
        Ok(CompletionRequest {
            cache_key: Some(cache_key(&self.agent.id, &skill.name, system, &tools)),
            system: system.to_owned(),
            context: context.trim_start().to_owned(),
            messages,
            tools,
            max_tokens: None,
            choice: None,
            text_only: self.text_only,
        })
    }

    pub(super) async fn model_step(&mut self, skill: &SkillDef) -> Step {
        let request = match self.request(skill) {
            Ok(r) => r,
            Err(e) => {
                self.fail(STEP_FAILED_REPLY, format!("falha ao montar o contexto: {e}"));
                return Step::Done;
            }
        };
        let Some(llm) = self.engine.llm.clone() else {
            self.answer(self.engine.no_model_reply.clone());
            return Step::Done;
        };
        let span = spans::generation(
            &skill.name,
            llm.model(),
            || serde_json::json!({"system": request.system, "context": request.context, "messages": request.messages}),
        );
        let started = Instant::now();
        let retried = self
            .complete(llm.as_ref(), &request)
            .instrument(span.clone())
            .await;
        let took = CallTook {
            latencia_ms: started.elapsed().as_millis() as u64,
            attempts: retried.attempts,
            fingerprint: crate::llm::fingerprint::of(&request),
        };
        let completion = match retried.result {
            Ok(c) => c,
            Err(e) => {
                self.model_failed(skill, llm.model(), took, &e, &span);
                return Step::Done;
            }
        };
        self.model_answered(skill, &completion, took, &span);
        if completion.tool_calls.is_empty() {
            let text = completion.text.filter(|t| !t.trim().is_empty());
            let text = text.unwrap_or_else(|| EMPTY_ANSWER_REPLY.to_owned());
            // What a model may say is checked before anyone reads it (`guard.rs`).
            match super::guard::held_back(&text, self.conv) {
                None => self.answer(text),
                Some(why) => {
                    tracing::warn!(why, "a model's reply was held back");
                    self.events.push(TurnEvent::Error {
                        message: format!("resposta do modelo retida: {why}"),
                    });
                    self.answer(super::guard::HELD_BACK_REPLY.to_owned());
                }
            }
            return Step::Done;
        }
        self.push(ChatMessage::Assistant {
            content: completion.text,
            tool_calls: completion.tool_calls.clone(),
        });
        self.tool_batch(skill, &completion.tool_calls).await
    }

    /// One completion, retried while the error is transient, within the turn's deadline.
    async fn complete(
        &self,
        llm: &dyn LlmProvider,
        request: &CompletionRequest,
    ) -> Retried<Completion, LlmError> {
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        tokio::time::timeout(
            remaining,
            retry(
                self.engine.config.llm_retry,
                LlmError::is_transient,
                LlmError::retry_after,
                // Each retry is an event of the generation span: the helper's warning, emitted inside it.
                |_| llm.complete(request),
            ),
        )
        .await
        .unwrap_or_else(|_| Retried {
            result: Err(LlmError::Transient {
                status: None,
                message: format!(
                    "turn deadline of {} ms reached",
                    self.engine.config.turn_timeout_ms
                ),
                retry_after: None,
            }),
            attempts: 0,
        })
    }

    /// A model call that gave no completion: on record, and the turn ends with the "model down" reply.
    fn model_failed(
        &mut self,
        skill: &SkillDef,
        model: &str,
        CallTook {
            latencia_ms,
            attempts,
            fingerprint,
        }: CallTook,
        e: &LlmError,
        span: &tracing::Span,
    ) {
        let record = ModelCallRecord {
            skill: skill.name.clone(),
            model: model.to_owned(),
            tokens_input: 0,
            tokens_output: 0,
            tokens_cached: 0,
            tokens_cache_write: 0,
            latencia_ms,
            stop_reason: "error".into(),
            attempts,
            error: Some(e.to_string()),
            request: Some(fingerprint),
        };
        spans::failed(span, &e.to_string());
        self.events.push(TurnEvent::ModelCall(record.clone()));
        self.model_calls.push(record);
        if matches!(e, LlmError::Unavailable(_)) {
            // The provider is known to be down: at once, what works without a model.
            let reply = format!("{LLM_DOWN_REPLY}\n\n{}", self.engine.no_model_reply);
            self.fail(&reply, format!("modelo não chamado: {e}"));
            return;
        }
        let error = if attempts == 0 {
            format!("modelo sem resposta dentro do limite do turno: {e}")
        } else {
            format!("modelo indisponível após {attempts} tentativa(s): {e}")
        };
        self.fail(LLM_DOWN_REPLY, error);
    }

    /// A completion, on record: the turn's events, its log line and its generation span.
    fn model_answered(
        &mut self,
        skill: &SkillDef,
        completion: &Completion,
        CallTook {
            latencia_ms,
            attempts,
            fingerprint,
        }: CallTook,
        span: &tracing::Span,
    ) {
        let record = ModelCallRecord {
            skill: skill.name.clone(),
            model: completion.model.clone(),
            tokens_input: completion.usage.input_tokens,
            tokens_output: completion.usage.output_tokens,
            tokens_cached: completion.usage.cached_input_tokens,
            tokens_cache_write: completion.usage.cache_write_tokens,
            latencia_ms,
            stop_reason: completion.stop_reason.as_str().to_owned(),
            attempts,
            error: None,
            request: Some(fingerprint),
        };
        tracing::info!(
            "gen_ai.request.model" = %record.model,
            "gen_ai.usage.input_tokens" = record.tokens_input,
            "gen_ai.usage.output_tokens" = record.tokens_output,
            latencia_ms,
            stop_reason = %record.stop_reason,
            "model call"
        );
        spans::generated(
            span,
            &record.model,
            &completion.usage,
            || serde_json::json!({"content": completion.text, "tool_calls": completion.tool_calls}),
        );
        self.events.push(TurnEvent::ModelCall(record.clone()));
        self.model_calls.push(record);
    }
}
