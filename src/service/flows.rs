//! The ten-stage flow through the service: a run on record, its stages, its commit, one trace.

use super::*;

impl Flows<'_> {
    /// A batch line's flow: stored by the caller — a batch records its ended lines with their runs in
    /// groups, one transaction for many flows, and its lines' recharge keys are fixed by job and line,
    /// so no per-flow record is needed before the run.
    pub(super) async fn run_unrecorded_flow(
        &self,
        prepared: PreparedFlow,
        mode: FlowMode,
    ) -> Result<FlowRan, ServiceError> {
        let PreparedFlow {
            mut conversation,
            input,
            text,
            parsed,
        } = prepared;
        let now = self.engine.now();
        let execucao_id = self.engine.next_id("exec");
        let turn = crate::flow::turn(&text, parsed, mode).under(execucao_id);
        let outcome = self.engine.run_turn(&mut conversation, turn).await?;
        let output = flow_output(&outcome);
        let record = crate::flow::record(&output, input, None, now);
        Ok(FlowRan {
            output,
            persisted: false,
            record: Some(record),
        })
    }

    pub(super) async fn run_prepared_flow(
        &self,
        prepared: PreparedFlow,
        mode: FlowMode,
    ) -> Result<FlowRan, ServiceError> {
        let PreparedFlow {
            conversation: mut conv,
            input: sanitized,
            text,
            parsed,
        } = prepared;
        let now = self.engine.now();
        // On record as started before the first external call: a killed run stays visible.
        let execucao_id = self.engine.next_id("exec");
        // A flow's conversation is new and its own: no other turn can race it, no lock is needed.
        self.flows
            .begin_flow_run(&conv, &ChatMessage::user(&text), &execucao_id, &sanitized, now)
            .instrument(spans::step("accept"))
            .await
            .map_err(ServiceError::NotRecorded)?;
        let started = Instant::now();
        // The systems' answers go on record with the run (a paid charge's recharge is replayed from
        // them), unless a turn that started it keeps them on its own tape.
        let input = crate::flow::turn(&text, parsed, mode).under(execucao_id);
        let outcome = if vt_connectors::tape::Tape::is_open() {
            self.engine.run_turn(&mut conv, input).await?
        } else {
            let tape = vt_connectors::tape::Tape::default();
            let mut outcome = tape.around(self.engine.run_turn(&mut conv, input)).await?;
            outcome
                .events
                .extend(tape.take().into_iter().map(vt_engine::TurnEvent::Exchanged));
            outcome
        };
        let output = flow_output(&outcome);
        let usage = IntentTag::new(crate::flow::FLOW_AGENT, "deterministic", false).usage(
            &conv,
            (0, 0),
            started.elapsed().as_millis(),
            now,
        );
        let mut runs = vec![crate::flow::record(&output, sanitized, None, now)];
        runs.extend(crate::flow::inner_records(&outcome));
        let record = TurnRecord {
            conversation: &conv,
            messages: &outcome.messages[1..],
            execution: &outcome.execution,
            events: &outcome.events,
            usage: Some(&usage),
            flow_runs: &runs,
            context: None,
            outbox: &[],
            accepted_message: None,
            case: None,
        };
        let commit = spans::step("commit");
        let persisted = commit::save_turn(self.conversations, self.config, self.engine.now(), record)
            .instrument(commit)
            .await;
        Ok(FlowRan {
            output,
            persisted,
            record: None,
        })
    }
}

impl Flows<'_> {
    /// Runs the ten-stage flow for one input (all ten stages or a dry run, as `options` say) and, unless
    /// the caller records it itself, stores the run with its stage outputs. Input errors come back
    /// before anything is written. One trace: accept (the run on record), run (the stages), commit.
    pub async fn run_flow(
        self,
        request: impl Into<FlowRequest<'_>>,
        options: FlowOptions<'_>,
    ) -> Result<FlowRan, ServiceError> {
        let prepared = crate::flow::prepare(self.engine, request.into(), options.tenant)?;
        let (conv, text) = (prepared.conversation.clone(), prepared.text.clone());
        let run = async {
            match options.recording {
                Recording::Here => self.run_prepared_flow(prepared, options.mode).await,
                Recording::ByCaller => self.run_unrecorded_flow(prepared, options.mode).await,
            }
        };
        flow_traced(&conv, &text, run).await
    }
}

/// Runs a flow as its own trace: accept, run (the stages), commit; the status and result are the
/// trace's output, a failed flow its status.
pub(super) async fn flow_traced(
    conv: &Conversation,
    text: &str,
    run: impl std::future::Future<Output = Result<FlowRan, ServiceError>>,
) -> Result<FlowRan, ServiceError> {
    let scope = conv.scope();
    let span = spans::turn(&scope, "flow", text);
    let result = spans::in_trace(&span, &scope, run).await;
    match &result {
        Ok(ran) => {
            let output = &ran.output;
            spans::output(
                &span,
                || serde_json::json!({"status": output.status.as_str(), "resultado": output.resultado}),
            );
            if output.status == crate::flow::FlowStatus::Falhou {
                spans::failed(&span, "o fluxo falhou");
            }
        }
        Err(e) => spans::failed(&span, &e.to_string()),
    }
    result
}
