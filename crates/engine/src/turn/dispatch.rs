//! A turn's actions: the tool calls of a completion run in order, a deterministic skill's one action,
//! each dispatched with a timeout and a panic guard, and what their responses do to the turn (a reply,
//! a skill switch, updates to state and memory, an error result).

use serde_json::{Map, Value};
use tracing::Instrument as _;
use vt_contract::{
    ActionContext, ActionError, ActionResponse, AgentFunction, ResponseStatus, ResponseToAgent,
    ResponseToUser,
};

use super::{STEP_FAILED_REPLY, Step, Turn, locked, shared_maps};
use crate::conversation::{Handoff, Reply, StageOutput, TurnEvent};
use crate::llm::{ChatMessage, ToolCall};
use crate::skills::SkillDef;
use crate::telemetry::spans;

/// A call's arguments: the model's text, parsed at dispatch, or a value code already has (the
/// router's choice, the previous deterministic skill's output).
pub(super) enum Arguments<'a> {
    Text(&'a str),
    Value(Value),
}

impl Arguments<'_> {
    fn parse(self) -> Result<Value, ActionError> {
        match self {
            Self::Value(v) => Ok(v),
            Self::Text(raw) if raw.trim().is_empty() => Ok(Value::Object(Map::new())),
            Self::Text(raw) => vt_contract::json::from_text(raw).map_err(|e| {
                ActionError::InvalidArguments(format!("os argumentos não são JSON válido ({e})"))
            }),
        }
    }
}

/// After one call of a batch: on to the next, or the batch (and the step) ends here.
pub(super) enum AfterCall {
    Next,
    Ends(Step),
}

impl Turn<'_> {
    /// Runs the tool calls of one completion in order. A `ResponseToUser` or a skill switch ends the
    /// batch: later calls are answered as skipped, never run.
    pub(super) async fn tool_batch(&mut self, skill: &SkillDef, calls: &[ToolCall]) -> Step {
        for (i, call) in calls.iter().enumerate() {
            let args = Arguments::Text(&call.arguments);
            if let AfterCall::Ends(step) = self.tool_call(skill, call, args).await {
                self.close_batch(&calls[i + 1..]);
                return step;
            }
        }
        Step::Continue
    }

    /// Ends a batch early: the calls left are answered as skipped, then the reply a tool gave is sent
    /// (the assistant message comes after every tool result of the batch).
    pub(super) fn close_batch(&mut self, rest: &[ToolCall]) {
        self.skip(rest);
        for reply in std::mem::take(&mut self.held_replies) {
            self.send(reply);
        }
    }

    /// Runs one tool call of the active (model) skill and applies its response.
    pub(super) async fn tool_call(
        &mut self,
        skill: &SkillDef,
        call: &ToolCall,
        args: Arguments<'_>,
    ) -> AfterCall {
        if self.repeats(call) {
            self.repeated(call);
            return AfterCall::Next;
        }
        self.events.push(TurnEvent::ToolCall {
            call_id: call.id.clone(),
            skill: skill.name.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            deterministic: false,
        });
        match self.dispatch_traced(skill, call, None, args).await {
            Err(e) => self.tool_error(call, &e),
            Ok(ActionResponse::ToUser(r)) => {
                self.held_replies = self.answer_user(call, r);
                return AfterCall::Ends(Step::Done);
            }
            Ok(ActionResponse::ToAgent(r)) => {
                let redirect = r.redirect().cloned();
                let instruction = r.instruction.clone();
                self.answer_agent(call, r);
                if let Some(target) = redirect {
                    match self.switch_skill(&target.skill_name, &target.reason, instruction) {
                        Ok(()) => return AfterCall::Ends(Step::Continue),
                        // The model has the instruction; it may still answer the user itself.
                        Err(e) => self.events.push(TurnEvent::Error { message: e }),
                    }
                }
            }
        }
        AfterCall::Next
    }

    /// Runs a deterministic skill's one action with the previous skill's output (or, on the entry
    /// skill, the user's message unless the input came typed) as its arguments. No model is called.
    pub(super) async fn deterministic_step(&mut self, skill: &SkillDef) -> Step {
        let Some(call) = self.deterministic_call(skill) else {
            self.fail(
                STEP_FAILED_REPLY,
                format!("skill determinística {:?} sem ação", skill.name),
            );
            return Step::Done;
        };
        // A stage's input is the previous stage's output, already on that stage's span: said by
        // reference, the trace carries each stage's JSON once (half the bytes of a flow's trace).
        let from = self.conv.handoff.as_ref().map(|h| h.from_skill.clone());
        let args = match self.handed_on.take() {
            Some(value) => Arguments::Value(value),
            None => Arguments::Text(&call.arguments),
        };
        match self.dispatch_traced(skill, &call, from, args).await {
            Err(e) => {
                self.tool_error(&call, &e);
                self.stage_output(skill, None, &format!("erro: {}", e.model_message()));
                let error = format!("etapa {} falhou: {}", skill.name, e.operator_message());
                self.fail(STEP_FAILED_REPLY, error);
                Step::Done
            }
            Ok(ActionResponse::ToUser(mut r)) => {
                let given = r.output.is_some();
                self.stage_output(skill, r.output.take(), &r.instruction);
                self.keep_once(skill, given, &mut r.instruction);
                for reply in self.answer_user(&call, r) {
                    self.send(reply);
                }
                Step::Done
            }
            Ok(ActionResponse::ToAgent(mut r)) => {
                let given = r.output.is_some();
                let output = self.stage_output(skill, r.output.take(), &r.instruction);
                self.keep_once(skill, given, &mut r.instruction);
                self.next_stage(skill, &call, r, output)
            }
        }
    }

    /// Keeps a deterministic skill's answer with the turn's outcome and returns it: its value, or its
    /// text read as JSON (a string when it is not JSON).
    fn stage_output(&mut self, skill: &SkillDef, output: Option<Value>, text: &str) -> Value {
        let output = output.unwrap_or_else(|| {
            vt_contract::json::from_text(text).unwrap_or_else(|_| Value::String(text.to_owned()))
        });
        self.stages.push(StageOutput {
            skill: skill.name.clone(),
            output: output.clone(),
        });
        output
    }

    /// A chain's stage output is kept once, in [`TurnOutcome::stages`](crate::TurnOutcome):
    /// where no model reads the history, its instruction (the output's JSON text) and the next
    /// stage's arguments become a reference to it (`{"$etapa": "<skill>"}`). The value still goes on
    /// to the next stage, handed on.
    fn keep_once(&self, skill: &SkillDef, given: bool, instruction: &mut String) {
        if given && self.agent.is_chain() {
            *instruction = stage_reference(&skill.name);
        }
    }

    /// The call of a deterministic skill's action, on record in the turn (`None`: it has none).
    fn deterministic_call(&mut self, skill: &SkillDef) -> Option<ToolCall> {
        let action = skill.actions.first()?;
        // The chain's first skill reads the user's text as its arguments, unless the turn carries its
        // input typed (a flow's, parsed where it entered): then there is no text to parse again.
        let input = match &self.conv.handoff {
            Some(h) => h.response.clone(),
            None if self.typed_input => "{}".to_owned(),
            None => self.user_text.clone(),
        };
        let call = ToolCall {
            id: self.engine.ids.next("det"),
            name: action.clone(),
            arguments: input,
        };
        self.events.push(TurnEvent::ToolCall {
            call_id: call.id.clone(),
            skill: skill.name.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            deterministic: true,
        });
        self.push(ChatMessage::Assistant {
            content: None,
            tool_calls: vec![call.clone()],
        });
        Some(call)
    }

    /// After a deterministic skill answered the agent: on to the skill it names, or to its `next`,
    /// which gets `output` as its arguments.
    fn next_stage(&mut self, skill: &SkillDef, call: &ToolCall, r: ResponseToAgent, output: Value) -> Step {
        let target = r
            .redirect()
            .map(|t| (t.skill_name.clone(), t.reason.clone()))
            .or_else(|| skill.next.clone().map(|n| (n, "próxima etapa".to_owned())));
        let instruction = r.instruction.clone();
        self.answer_agent(call, r);
        if self.stop_after.as_deref() == Some(skill.name.as_str()) {
            return Step::Done;
        }
        let Some((to, reason)) = target else {
            let error = format!(
                "skill determinística {:?} respondeu ao agente sem próxima etapa",
                skill.name
            );
            self.fail(STEP_FAILED_REPLY, error);
            return Step::Done;
        };
        match self.switch_skill(&to, &reason, instruction) {
            Ok(()) => {
                self.handed_on = Some(output);
                Step::Continue
            }
            Err(e) => {
                self.fail(STEP_FAILED_REPLY, e);
                Step::Done
            }
        }
    }

    /// [`Self::dispatch`] in the call's `tool` span, which stays current while the response is
    /// applied (its updates become the span's events).
    async fn dispatch_traced(
        &mut self,
        skill: &SkillDef,
        call: &ToolCall,
        output_of: Option<String>,
        args: Arguments<'_>,
    ) -> Result<ActionResponse, ActionError> {
        let span = spans::tool(&call.name, || match output_of {
            Some(stage) => vt_contract::json::text(&serde_json::json!({"saida_de": stage})),
            None => call.arguments.clone(),
        });
        let result = self
            .dispatch(skill, &call.name, args)
            .instrument(span.clone())
            .await;
        match &result {
            Ok(ActionResponse::ToUser(r)) => spans::output(
                &span,
                || serde_json::json!({"status": r.status, "message": r.message, "instruction": r.instruction}),
            ),
            Ok(ActionResponse::ToAgent(r)) => spans::output(
                &span,
                || serde_json::json!({"status": r.status, "instruction": r.instruction}),
            ),
            Err(e) => spans::failed(&span, &e.operator_message()),
        }
        self.tool_span = span;
        result
    }

    /// Finds, parses and runs one action. Everything that can go wrong comes back as an
    /// [`ActionError`], which the caller turns into an error tool result: never a crash.
    async fn dispatch(
        &self,
        skill: &SkillDef,
        name: &str,
        args: Arguments<'_>,
    ) -> Result<ActionResponse, ActionError> {
        // Only the active skill's actions exist for the model, whatever else is registered.
        let action = skill
            .actions
            .iter()
            .any(|a| a == name)
            .then(|| self.engine.registry.get(name))
            .flatten()
            .ok_or_else(|| {
                ActionError::failed(
                    format!(
                        "ferramenta desconhecida: {name}. Ferramentas disponíveis: {}",
                        skill.actions.join(", ")
                    ),
                    format!("unknown tool {name:?} in skill {:?}", skill.name),
                )
            })?;
        let args = args.parse()?;
        let ctx = self.action_context(skill);
        self.engine.invoke(action, &ctx, name, args).await
    }

    fn action_context(&self, skill: &SkillDef) -> ActionContext {
        let maps = locked(&self.maps)
            .get_or_insert_with(|| shared_maps(self.conv))
            .clone();
        let mut ctx = self
            .engine
            .action_context(self.conv, &skill.name, &self.user_text, &self.turn_id, Some(maps))
            .with_more(&self.data);
        ctx.message_id.clone_from(&self.message_id);
        ctx
    }

    fn tool_result(&mut self, call: &ToolCall, status: ResponseStatus, content: String, to_user: bool) {
        self.events.push(TurnEvent::ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            status,
            content: content.clone(),
            to_user,
        });
        self.push(ChatMessage::Tool {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content,
            is_error: status == ResponseStatus::Error,
        });
    }

    fn tool_error(&mut self, call: &ToolCall, e: &ActionError) {
        self.events.push(TurnEvent::Error {
            message: format!("{}: {}", call.name, e.operator_message()),
        });
        self.tool_result(
            call,
            ResponseStatus::Error,
            format!("erro: {}", e.model_message()),
            false,
        );
    }

    /// Writes the tool result with the instruction and applies the response; returns the replies that
    /// end the turn (the message, then each of `then` on its own, then the files, if any, in a reply
    /// with no text), to be sent once the batch is closed.
    fn answer_user(&mut self, call: &ToolCall, r: ResponseToUser) -> Vec<Reply> {
        self.tool_result(call, r.status, r.instruction, true);
        self.apply_updates(r.state_updates, r.memory_updates);
        for f in r.functions {
            self.system_function(f.into());
        }
        // What the card holder reads says reais as people write them, whatever wrote the text.
        let texts = std::iter::once(r.message).chain(r.then).map(|text| Reply {
            text: vt_domain::vt::reais_in(&text).into_owned(),
            files: Vec::new(),
        });
        let files = (!r.files.is_empty()).then(|| Reply {
            text: String::new(),
            files: r.files,
        });
        texts.chain(files).collect()
    }

    fn answer_agent(&mut self, call: &ToolCall, r: ResponseToAgent) {
        self.tool_result(call, r.status, r.instruction, false);
        self.apply_updates(r.state_updates, r.memory_updates);
        for f in r.functions {
            self.system_function(f);
        }
    }

    fn send(&mut self, reply: Reply) {
        // A reply of files only says nothing the history could keep.
        if !reply.text.is_empty() {
            self.push(ChatMessage::assistant(reply.text.clone()));
        }
        self.events.push(TurnEvent::Reply(reply.clone()));
        self.replies.push(reply);
    }

    /// Whether this turn already ran this very call (same tool, same arguments).
    fn repeats(&self, call: &ToolCall) -> bool {
        !self.engine.config().run_repeated_calls
            && self.events.iter().any(|e| {
                matches!(e, TurnEvent::ToolCall { name, arguments, deterministic: false, .. }
                if *name == call.name && *arguments == call.arguments)
            })
    }

    /// A call the model already has the result of is not run again: it is told so, and its next
    /// request lets it write text only (a small model otherwise asks again up to the turn's bound).
    fn repeated(&mut self, call: &ToolCall) {
        let told = "Esta chamada já foi feita neste turno e o resultado está acima. Responda agora ao usuário, em texto, com esse resultado.";
        self.not_run(call, told, false);
        self.text_only = true;
    }

    /// A call not run, on record and in the history with why (`is_error`: the model must not take
    /// it for a result).
    fn not_run(&mut self, call: &ToolCall, why: &str, is_error: bool) {
        self.events.push(TurnEvent::ToolSkipped {
            call_id: call.id.clone(),
            name: call.name.clone(),
        });
        self.push(ChatMessage::Tool {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: why.to_owned(),
            is_error,
        });
    }

    fn skip(&mut self, calls: &[ToolCall]) {
        for call in calls {
            self.not_run(call, "não executada: o turno terminou antes desta chamada", true);
        }
    }

    fn system_function(&mut self, f: AgentFunction) {
        match f {
            AgentFunction::EndChat(e) => {
                self.conv.ended = true;
                self.events.push(TurnEvent::EndChat(e));
            }
            AgentFunction::TransferToHuman(t) => self.events.push(TurnEvent::TransferToHuman(t)),
            // Skill switches are followed by the caller, which knows whether the batch goes on.
            AgentFunction::RedirectToSkill(_) => {}
        }
    }

    /// Merges updates into the conversation; a `null` value removes the key.
    fn apply_updates(&mut self, state: Map<String, Value>, memory: Map<String, Value>) {
        fn merge(target: &mut Map<String, Value>, updates: &Map<String, Value>) {
            for (k, v) in updates {
                if v.is_null() {
                    target.remove(k);
                } else {
                    target.insert(k.clone(), v.clone());
                }
            }
        }
        if !state.is_empty() || !memory.is_empty() {
            *self
                .maps
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        }
        spans::updates(&self.tool_span, "state_updates", &state);
        spans::updates(&self.tool_span, "memory_updates", &memory);
        if !state.is_empty() {
            merge(&mut self.conv.state, &state);
            self.events.push(TurnEvent::StateUpdated { updates: state });
        }
        if !memory.is_empty() {
            merge(&mut self.conv.memory, &memory);
            self.events.push(TurnEvent::MemoryUpdated { updates: memory });
        }
    }

    /// Makes `to` the active skill. It starts with a fresh window (this turn's user message) and sees
    /// only the previous skill's response, never its prompt or its tool traffic.
    fn switch_skill(&mut self, to: &str, reason: &str, response: String) -> Result<(), String> {
        if self.agent.skill(to).is_none() {
            return Err(format!(
                "RedirectToSkill para skill inexistente {to:?} no agente {:?}",
                self.agent.id
            ));
        }
        let from = std::mem::replace(&mut self.conv.active_skill, to.to_owned());
        tracing::info!(from = %from, to, "skill changed");
        self.events.push(TurnEvent::SkillChanged {
            from: from.clone(),
            to: to.to_owned(),
            reason: reason.to_owned(),
        });
        self.conv.handoff = Some(Handoff {
            from_skill: from,
            response,
        });
        self.conv.window = vec![ChatMessage::user(self.user_text.clone())];
        Ok(())
    }
}

/// Where a chain's history points at a stage's output instead of copying it. A skill's name is an
/// identifier (`[A-Za-z0-9_-]`, checked when the catalog loads): written as is, no JSON conversion.
fn stage_reference(skill: &str) -> String {
    format!(r#"{{"$etapa":"{skill}"}}"#)
}

pub(super) fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}
