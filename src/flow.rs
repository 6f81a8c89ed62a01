//! The ten-stage VT flow as a job: parse the flow input, run the `vt_fluxo` agent's deterministic
//! skill chain through the engine, and shape the result as the flow output (SPEC §7).
#![warn(clippy::too_many_lines)] // on the main path: see clippy.toml

use std::sync::{Arc, OnceLock, Weak};

use chrono::{DateTime, Utc};

use serde::Serialize;
use serde_json::Value;
use vt_contract::{ActionContext, ActionError};
use vt_domain::journal::SharedJournal;
use vt_domain::tools::{FlowResult, FlowRunner, SharedFlowRunner, VtSettings};
use vt_domain::vt::FlowInput;
use vt_domain::vt::input::{InputDefaults, InputError};

use vt_domain::stages::Conclusao;

use vt_engine::{
    Conversation, Engine, EngineError, ExecutionStatus, InnerRun, InnerRuns, Participant, TurnInput,
    TurnOutcome, TurnStart,
};
use vt_store::{FlowRunRecord, RunStatus, Store, StoreJournal};

/// The agent whose skills are the ten stages.
pub const FLOW_AGENT: &str = "vt_fluxo";

/// The channel name of the flow's conversations (its output is read in the answer or the run).
pub(crate) const API_CHANNEL: &str = "api";

/// The last stage of a dry run: the recharge is prepared (and checked against the policies), never sent.
pub(crate) const DRY_RUN_LAST_STAGE: &str = "rf06_preparar_recarga";

/// How far a flow run goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlowMode {
    /// All ten stages.
    #[default]
    Full,
    /// RF1–RF6: the balance is read and the recharge prepared; nothing is charged.
    DryRun,
}

impl FlowMode {
    pub fn start(self) -> TurnStart {
        match self {
            Self::Full => TurnStart::Model,
            Self::DryRun => TurnStart::ChainUntil {
                last: DRY_RUN_LAST_STAGE.to_owned(),
            },
        }
    }
}

/// How a flow run ended, as its caller needs to know: did it reach its outcome?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FlowStatus {
    /// The flow reached its outcome: the balance was read (and the recharge, if asked, approved).
    Concluido,
    /// The outcome is not known yet: the recharge is pending, or its answer never came.
    Pendente,
    /// It did not reach its outcome: invalid card, systems down, recharge denied or failed, or a stage
    /// that could not run.
    Falhou,
}

/// A flow that ended, as its run is put on record.
impl From<FlowStatus> for vt_store::RunStatus {
    fn from(status: FlowStatus) -> Self {
        match status {
            FlowStatus::Concluido => Self::Concluido,
            FlowStatus::Pendente => Self::Pendente,
            FlowStatus::Falhou => Self::Falhou,
        }
    }
}

/// A batch line whose flow ran.
impl From<FlowStatus> for vt_store::LineStatus {
    fn from(status: FlowStatus) -> Self {
        match status {
            FlowStatus::Concluido => Self::Concluido,
            FlowStatus::Pendente => Self::Pendente,
            FlowStatus::Falhou => Self::Falhou,
        }
    }
}

impl FlowStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Concluido => "concluido",
            Self::Pendente => "pendente",
            Self::Falhou => "falhou",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FlowOutput {
    pub execucao_id: String,
    pub status: FlowStatus,
    pub etapas: Vec<Etapa>,
    /// The last stage's output.
    #[schema(value_type = Object)]
    pub resultado: Value,
}

impl FlowOutput {
    /// The output as it leaves the process (`run-flow`'s stdout, the HTTP answer, a batch's results):
    /// every card number in it masked (`****7890`), as in every text the product shows. The stored
    /// run keeps the full one, sealed ([`vt_store::seal`]); the payment token is its fingerprint
    /// everywhere already.
    pub fn for_caller(mut self) -> Self {
        for etapa in &mut self.etapas {
            mask_strings(&mut etapa.saida);
        }
        mask_strings(&mut self.resultado);
        self
    }
}

/// Masks the card numbers of every string in `value`, leaving ids, keys and times whole: a digit run
/// inside an idempotency key is no card, and a key a caller copies must exist.
fn mask_strings(value: &mut Value) {
    *value = masked_json(value, vt_domain::vt::card::mask_cards_in);
}

/// A stored JSON value as people read it (the console, `vt-agent flows --id`): card numbers masked wherever they are, but ids,
/// keys and times left whole (a long run of digits in an id is not a card, and a copied id must
/// exist).
pub(crate) fn masked_json(v: &Value, mask: impl Fn(&str) -> String + Copy) -> Value {
    fn walk(key: &str, v: &Value, mask: &dyn Fn(&str) -> String) -> Value {
        match v {
            Value::Object(map) => {
                Value::Object(map.iter().map(|(k, v)| (k.clone(), walk(k, v, mask))).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(|v| walk(key, v, mask)).collect()),
            Value::String(s) if names_an_id_or_time(key) => {
                Value::String(vt_contract::redact::secrets(s).into_owned())
            }
            Value::String(s) => Value::String(mask(s)),
            Value::Number(n) if key.contains("cartao") => {
                Value::String(vt_domain::vt::mask_card(&n.to_string()))
            }
            // A card written as a number: masked like one.
            Value::Number(n) if !names_an_id_or_time(key) => {
                let text = n.to_string();
                let shown = mask(&text);
                if shown == text {
                    v.clone()
                } else {
                    Value::String(shown)
                }
            }
            other => other.clone(),
        }
    }
    walk("", v, &mask)
}

/// Keys whose values are ids, keys or times, never a card.
fn names_an_id_or_time(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    !key.contains("cartao")
        && (key == "id"
            || key.ends_with("_id")
            || key == "nsu"
            || key.contains("autorizacao")
            || key.ends_with("key")
            || key.starts_with("chave")
            || key.ends_with("_em")
            || key.ends_with("_at")
            || key.ends_with("_ms")
            || key.contains("timestamp")
            || key.contains("data_hora"))
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Etapa {
    /// The stage id (`rf01_preparar_consulta` … `rf10_enviar_notificacao_recarga`).
    pub etapa: String,
    /// The stage's output, in the PRD's shape.
    #[schema(value_type = Object)]
    pub saida: Value,
}

#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    /// The input was refused before anything ran.
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// A finished run: the output plus what the caller may persist.
pub struct FlowRun {
    pub output: FlowOutput,
    pub outcome: TurnOutcome,
    pub conversation: Conversation,
    /// The sanitised input, as stored.
    pub input: Value,
}

/// A flow's input as its caller has it: a text to parse and check, or an input parsed and checked
/// already (where it entered: `run-flow` before it opens the store, the HTTP handler before it keeps
/// an idempotency record, a chat tool that built it).
pub enum FlowRequest<'a> {
    Text(&'a str),
    Parsed(Box<FlowInput>),
}

impl<'a> From<&'a str> for FlowRequest<'a> {
    fn from(text: &'a str) -> Self {
        Self::Text(text)
    }
}

impl<'a> From<&'a String> for FlowRequest<'a> {
    fn from(text: &'a String) -> Self {
        Self::Text(text)
    }
}

impl From<FlowInput> for FlowRequest<'_> {
    fn from(input: FlowInput) -> Self {
        Self::Parsed(Box::new(input))
    }
}

/// A parsed flow input, ready to run: a new `vt_fluxo` conversation, the sanitised input (unknown
/// fields are gone from here on) as stored and as the text of its user message, and the typed input
/// the stages read.
pub(crate) struct PreparedFlow {
    pub conversation: Conversation,
    pub input: Value,
    pub text: String,
    /// The parsed input, which the turn carries typed to every stage ([`TurnInput::with_data`]). It
    /// also holds the payment token's value, which the stages only see as its fingerprint and RF7
    /// finds again for the request while the input lives ([`PaymentToken`]).
    ///
    /// [`PaymentToken`]: vt_domain::vt::PaymentToken
    pub parsed: FlowInput,
}

/// A flow's turn: its input text, begun as `mode` says, carrying the parsed input.
pub(crate) fn turn(text: &str, parsed: FlowInput, mode: FlowMode) -> TurnInput<'_> {
    TurnInput::new(text, mode.start()).with_data(parsed)
}

/// Parses and checks a flow input as every way in does: the configured policies where it has none,
/// the caller's tenant (`None` for the operator's own commands) and no other.
pub(crate) fn parse_input(
    engine: &Engine,
    text: &str,
    tenant: Option<&str>,
) -> Result<FlowInput, InputError> {
    let settings = engine.extensions().get::<VtSettings>();
    let builtin;
    let politicas = match settings {
        Some(s) => &s.politicas,
        None => {
            builtin = vt_domain::vt::Politicas::default();
            &builtin
        }
    };
    FlowInput::parse_with(text, InputDefaults { politicas, tenant })
}

/// Parses and checks the input (unless it comes parsed) and opens the conversation, in the input's
/// tenant; nothing runs yet.
pub(crate) fn prepare(
    engine: &Engine,
    request: FlowRequest<'_>,
    tenant: Option<&str>,
) -> Result<PreparedFlow, FlowError> {
    let parsed = match request {
        FlowRequest::Text(text) => parse_input(engine, text, tenant)?,
        FlowRequest::Parsed(input) => *input,
    };
    let input = vt_contract::json::to_value(&parsed).map_err(|e| InputError::NotJson(e.to_string()))?;
    let user = if parsed.destinatario.id.is_empty() {
        API_CHANNEL.to_owned()
    } else {
        parsed.destinatario.id.clone()
    };
    let who = Participant {
        user_id: user.clone(),
        user_login: user,
        channel: API_CHANNEL.into(),
    };
    let mut conversation = engine.start_conversation(FLOW_AGENT, who)?;
    conversation.tenant_id = parsed.tenant_id.clone();
    Ok(PreparedFlow {
        conversation,
        text: vt_contract::json::text(&input),
        input,
        parsed,
    })
}

/// Runs the flow for one input, without storing anything (the service stores).
pub async fn run_flow(engine: &Engine, request: impl Into<FlowRequest<'_>>) -> Result<FlowRun, FlowError> {
    let PreparedFlow {
        mut conversation,
        input,
        text,
        parsed,
    } = prepare(engine, request.into(), None)?;
    let outcome = engine
        .run_turn(&mut conversation, turn(&text, parsed, FlowMode::Full))
        .await?;
    let output = flow_output(&outcome);
    Ok(FlowRun {
        output,
        outcome,
        conversation,
        input,
    })
}

/// One `etapa` per stage that ran, in order, from the values the stages handed on.
pub(crate) fn flow_output(outcome: &TurnOutcome) -> FlowOutput {
    let etapas = outcome
        .stages
        .iter()
        .map(|s| Etapa {
            etapa: s.skill.clone(),
            saida: s.output.clone(),
        })
        .collect();
    FlowOutput::new(outcome.execution.execucao_id.clone(), status_of(outcome), etapas)
}

impl FlowOutput {
    fn new(execucao_id: String, status: FlowStatus, etapas: Vec<Etapa>) -> Self {
        Self {
            execucao_id,
            status,
            resultado: etapas.last().map_or(Value::Null, |e| e.saida.clone()),
            etapas,
        }
    }

    /// A stored run's output, built from its stages (where the output is kept) and its status (a
    /// run still on record as running shows as pending: its outcome is not known).
    pub fn of_run(run: &FlowRunRecord) -> Self {
        let status = match run.status {
            RunStatus::Concluido => FlowStatus::Concluido,
            RunStatus::Pendente | RunStatus::EmAndamento => FlowStatus::Pendente,
            RunStatus::Falhou => FlowStatus::Falhou,
        };
        let etapas = run
            .stages
            .iter()
            .map(|(etapa, saida)| Etapa {
                etapa: etapa.clone(),
                saida: saida.clone(),
            })
            .collect();
        Self::new(run.execucao_id.clone(), status, etapas)
    }
}

/// The run's status: failed when its chain could not run, else what its stages' typed outputs say
/// ([`vt_domain::stages::conclusao`]).
fn status_of(outcome: &TurnOutcome) -> FlowStatus {
    if outcome.execution.status != ExecutionStatus::Concluido {
        return FlowStatus::Falhou;
    }
    let etapas = outcome.stages.iter().map(|s| (s.skill.as_str(), &s.output));
    match vt_domain::stages::conclusao(etapas) {
        Conclusao::Concluido => FlowStatus::Concluido,
        Conclusao::Pendente => FlowStatus::Pendente,
        Conclusao::Falhou => FlowStatus::Falhou,
    }
}

/// A finished flow run as stored: its stages are where its output is kept.
pub(crate) fn record(
    output: &FlowOutput,
    input: Value,
    parent_execucao_id: Option<String>,
    at: DateTime<Utc>,
) -> FlowRunRecord {
    FlowRunRecord {
        execucao_id: output.execucao_id.clone(),
        parent_execucao_id,
        status: output.status.into(),
        input,
        stages: output
            .etapas
            .iter()
            .map(|e| (e.etapa.clone(), e.saida.clone()))
            .collect(),
        created_at: at,
    }
}

/// The flow runs a chat turn's tools started, as stored with the turn.
pub(crate) fn inner_records(outcome: &TurnOutcome) -> Vec<FlowRunRecord> {
    let parent = &outcome.execution.execucao_id;
    outcome
        .inner_runs
        .iter()
        .map(|run| {
            record(
                &flow_output(&run.outcome),
                run.input.clone(),
                Some(parent.clone()),
                run.at,
            )
        })
        .collect()
}

/// The stage chain as the conversational tools see it: a sub-run of the `vt_fluxo` agent on the same
/// engine. The engine is reached through a weak handle set once it is shared, so the engine does not
/// keep itself alive.
struct EngineFlowRunner {
    engine: Arc<OnceLock<Weak<Engine>>>,
}

#[async_trait::async_trait]
impl FlowRunner for EngineFlowRunner {
    async fn run(&self, ctx: &ActionContext, input: &FlowInput) -> Result<FlowResult, ActionError> {
        let engine = self.engine.get().and_then(Weak::upgrade).ok_or_else(|| {
            ActionError::failed(
                "serviço de etapas indisponível",
                "flow runner used before the engine was shared",
            )
        })?;
        let FlowRun {
            output,
            outcome,
            input,
            ..
        } = run_flow(&engine, input.clone())
            .await
            .map_err(|e| ActionError::failed("fluxo de VT indisponível", e.to_string()))?;
        let failed = (outcome.execution.status != ExecutionStatus::Concluido)
            .then(|| outcome.execution.error.clone().unwrap_or_default());
        // The run goes back with the turn whose tool started it, which stores both.
        match ctx.get::<InnerRuns>() {
            Some(runs) => runs.push(InnerRun {
                input,
                outcome,
                at: engine.now(),
            }),
            None => {
                tracing::warn!(execucao_id = %output.execucao_id, "a flow run outside a turn is not kept")
            }
        }
        // A denied recharge or a failed balance query is an outcome the tool tells the user; only a
        // chain that could not run at all is an error.
        if let Some(why) = failed {
            return Err(ActionError::failed("o fluxo de VT não pôde ser concluído", why));
        }
        Ok(FlowResult {
            execucao_id: output.execucao_id,
            etapas: output.etapas.into_iter().map(|e| (e.etapa, e.saida)).collect(),
        })
    }
}

/// Shares the engine and gives its actions the stage chain ([`FlowRunner`]) running on it and, with a
/// store, the recharge journal written in it ([`StoreJournal`]): confirmations consumed once, recharge
/// attempts on record before they are sent.
pub fn share(
    mut engine: Engine,
    store: Option<Arc<dyn Store>>,
    recargas: vt_store::RecargasConfig,
) -> Arc<Engine> {
    let slot = Arc::new(OnceLock::new());
    let runner: SharedFlowRunner = Arc::new(EngineFlowRunner { engine: slot.clone() });
    engine.extensions_mut().insert(runner);
    if let Some(store) = store {
        let journal: SharedJournal = Arc::new(StoreJournal::new(store, engine.clock().clone(), recargas));
        engine.extensions_mut().insert(journal);
    }
    let engine = Arc::new(engine);
    // The slot was created just above and is set once, here.
    let _ = slot.set(Arc::downgrade(&engine));
    engine
}
