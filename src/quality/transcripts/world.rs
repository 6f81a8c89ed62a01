//! A transcript's hermetic world: the pinned clock, the simulated systems on loopback with the
//! transcript's cards, the model (none, scripted per turn, or a cassette), the product composed as
//! `serve` composes it over an in-memory store, and the conversation as the setup leaves it. A turn
//! played in it gives what the checks look at ([`Observed`]).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use vt_connectors::systems::{SystemsConfig, VtSystems};
use vt_contract::context::Extensions;
use vt_domain::tools::{RecargaPendente, STATE_PENDENTE, VtSettings};
use vt_simulators::systems::{CardBehavior, magic_cards};
use vt_simulators::systems::{LedgerEntry, RunningSimulator, Simulator, SimulatorConfig};

use super::{Mismatch, RunOptions, overridden, parse_time, setup_error};
use crate::config::Config;
use crate::service::{Handled, Inbound, ServiceError, Services, SupportAgent};
use crate::transcript::cassette::{Cassette, RecordingProvider, ReplayProvider};
use crate::transcript::format::{Fault, ModelReply, Setup, SupportStep, Transcript, Turn};
use vt_engine::llm::{LlmError, LlmProvider, Scripted, ScriptedProvider};
use vt_engine::{
    Clock, Conversation, EngineConfig, ExecutionRecord, IdSource, ManualClock, Participant, RetryPolicy,
    TurnEvent,
};
use vt_store::{ChargeMeans, Claim, PixCharge, SqliteStore, Store};

pub(super) enum Model {
    None,
    /// A model nobody scripted (`vt-agent eval`).
    Live(Arc<dyn LlmProvider>),
    Scripted(Arc<ScriptedProvider>),
    Replay(Arc<ReplayProvider>),
    Record(Arc<RecordingProvider>),
}

impl Model {
    pub(super) fn provider(&self) -> Option<Arc<dyn LlmProvider>> {
        match self {
            Self::None => None,
            Self::Live(p) => Some(p.clone()),
            Self::Scripted(p) => Some(p.clone()),
            Self::Replay(p) => Some(p.clone()),
            Self::Record(p) => Some(p.clone()),
        }
    }
}

/// A scripted (or recorded) model reply as the model's answer.
pub(crate) fn scripted(reply: &ModelReply) -> Result<Scripted, String> {
    Ok(match reply {
        ModelReply::Text(t) => Scripted::text(t.clone()),
        ModelReply::ToolCall(c) => Scripted::raw_tools(vec![(c.name.as_str(), call_args(c))]),
        ModelReply::ToolCalls(cs) => {
            Scripted::raw_tools(cs.iter().map(|c| (c.name.as_str(), call_args(c))).collect())
        }
        ModelReply::RawOpenai(v) => {
            Scripted::Reply(vt_engine::llm::parse_openai(v.to_string(), "openai").map_err(|e| e.to_string())?)
        }
        ModelReply::RawAnthropic(v) => Scripted::Reply(
            vt_engine::llm::parse_anthropic(v.to_string(), "anthropic").map_err(|e| e.to_string())?,
        ),
        ModelReply::Fault(f) => Scripted::fail(match f {
            Fault::Status(s) => LlmError::from_status(*s, format!("HTTP {s}"), None),
            Fault::Detailed { status, retry_after } => LlmError::from_status(
                *status,
                format!("HTTP {status}"),
                retry_after.map(Duration::from_secs),
            ),
            Fault::Named(n) if n == "timeout" => LlmError::Transient {
                status: None,
                message: "timeout".into(),
                retry_after: None,
            },
            Fault::Named(n) if n == "malformed" => LlmError::Malformed("resposta ilegível".into()),
            Fault::Named(other) => {
                return Err(format!(
                    "unknown fault {other:?}: use a status, timeout or malformed"
                ));
            }
        }),
    })
}

fn call_args(c: &crate::transcript::format::ScriptedCall) -> String {
    c.raw_arguments.clone().unwrap_or_else(|| {
        c.arguments
            .clone()
            .unwrap_or(Value::Object(Map::new()))
            .to_string()
    })
}

/// Everything one transcript runs in.
pub(super) struct World {
    pub(super) clock: ManualClock,
    pub(super) sim: Simulator,
    _running: RunningSimulator,
    pub(super) model: Model,
    store: Arc<dyn Store>,
    service: Arc<Services>,
    who: Participant,
    conversation: String,
    agent: String,
    /// What the transcription fake hears next (a `voice` turn's words).
    heard: Heard,
    /// What the photo reader's fake reads next (an `image` turn's text).
    seen: Heard,
    /// Bursts played so far: their messages' channel ids stay apart.
    bursts: std::sync::atomic::AtomicUsize,
}

/// The words the world's transcription fake answers, in order; an empty one is a failure.
type Heard = Arc<std::sync::Mutex<std::collections::VecDeque<String>>>;

/// How long the world waits for a burst to end (real time: the clock is pinned).
const BURST_WINDOW: Duration = Duration::from_millis(30);

/// A voice note's or a photo's stand-in bytes: the fakes do not listen to them or look at them.
struct Recordings;

#[async_trait::async_trait]
impl crate::service::MediaSource for Recordings {
    async fn fetch(
        &self,
        media: &vt_store::Media,
        _max_bytes: u64,
    ) -> Result<Vec<u8>, crate::service::MediaError> {
        Ok(match media.kind {
            vt_store::MediaKind::Audio => b"OggS transcript voice note".to_vec(),
            vt_store::MediaKind::Image => b"\x89PNG transcript photo".to_vec(),
        })
    }
}

/// The photo reader's fake: it reads the next `image` turn's text (Tesseract is not run, so a
/// transcript reads the same on every machine).
struct Photos(Heard);

#[async_trait::async_trait]
impl crate::ocr::PhotoReader for Photos {
    async fn read(&self, _image: Vec<u8>) -> Result<String, crate::ocr::OcrError> {
        Ok(self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop_front()
            .unwrap_or_default())
    }
}

/// The OpenAI-compatible transcription endpoint on loopback, answering what `heard` holds; its
/// `base_url`.
async fn transcription(heard: Heard) -> Result<String, Mismatch> {
    let answer = move || {
        let next = heard
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop_front()
            .unwrap_or_default();
        async move {
            if next.is_empty() {
                return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, String::new());
            }
            (
                axum::http::StatusCode::OK,
                serde_json::json!({"text": next}).to_string(),
            )
        }
    };
    let app = axum::Router::new().route("/v1/audio/transcriptions", axum::routing::post(answer));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| setup_error("transcription", e))?;
    let url = format!(
        "http://{}/v1",
        listener
            .local_addr()
            .map_err(|e| setup_error("transcription", e))?
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(url)
}

/// What one turn did, as the checks see it.
pub(super) struct Observed {
    pub(super) handled: Handled,
    pub(super) replies: Vec<String>,
    pub(super) reply: String,
    pub(super) events: Vec<TurnEvent>,
    pub(super) execution: Option<ExecutionRecord>,
    pub(super) conversation: Option<Conversation>,
    /// What the simulated systems received during the turn.
    pub(super) ledger: Vec<LedgerEntry>,
    pub(super) model_calls: usize,
    /// The recharge waiting for confirmation when the turn began.
    pub(super) pending_before: Option<RecargaPendente>,
    pub(super) latency_ms: u64,
}

impl World {
    pub(super) async fn build(t: &Transcript, path: &Path, options: &RunOptions) -> Result<Self, Mismatch> {
        let setup = &t.setup;
        let start = parse_time(setup.clock.as_deref().unwrap_or("2026-11-22T12:00:00Z"))
            .map_err(|e| setup_error("clock", e))?;
        let clock = ManualClock::new(start);
        let (sim, running) = simulator(setup, &clock).await?;
        let model = model(t, path, options)?;
        let heard = Heard::default();
        let hearing = transcription(heard.clone()).await?;
        let seen = Heard::default();
        let photos = Arc::new(Photos(seen.clone()));
        let (service, store) = product(
            setup,
            options,
            (&clock, (&sim, &running), &hearing, photos),
            &model,
        )
        .await?;
        service.hearing().hear_from(&setup.channel, Arc::new(Recordings));
        let world = Self {
            clock,
            sim,
            _running: running,
            model,
            store,
            service: Arc::new(service),
            who: Participant {
                user_id: setup.user.clone(),
                user_login: setup.login.clone().unwrap_or_else(|| setup.user.clone()),
                channel: setup.channel.clone(),
            },
            conversation: setup.conversation.clone().unwrap_or_else(|| "transcript".into()),
            agent: setup.agent.clone(),
            heard,
            seen,
            bursts: Default::default(),
        };
        world.seed_conversation(setup).await?;
        Ok(world)
    }

    /// The conversation as the setup describes it (a skill, state, memory), when it describes one.
    async fn seed_conversation(&self, setup: &Setup) -> Result<(), Mismatch> {
        if setup.skill.is_none() && setup.state.is_empty() && setup.memory.is_empty() {
            return Ok(());
        }
        let mut conv = self
            .service
            .engine()
            .start_conversation(&setup.agent, self.who.clone())
            .map_err(|e| setup_error("agent", e))?;
        conv.id = self.conversation.clone();
        if let Some(skill) = &setup.skill {
            conv.active_skill = skill.clone();
        }
        conv.state = setup.state.clone();
        conv.memory = setup.memory.clone();
        self.store
            .save_conversation(&conv, self.clock.now())
            .await
            .map_err(|e| setup_error("conversation", e))
    }

    /// The turn's scripted model replies, queued (a scripted model only).
    pub(super) fn script(&self, turn: &Turn) -> Result<(), String> {
        if let Model::Scripted(p) = &self.model {
            let mut replies = Vec::new();
            if let Some(intent) = &turn.classify {
                replies.push(Scripted::text(intent.clone()));
            }
            for r in &turn.model {
                replies.push(scripted(r)?);
            }
            p.push(replies);
        }
        Ok(())
    }

    /// Plays the user's message of `turn` through the service: what it did, or the service's error.
    /// The card holder pays the conversation's charges `which` (0: the first it issued) in the
    /// simulator, each then settled as the provider's notice would have it: each charge as it then is,
    /// with the events of the run that sent its recharge.
    pub(super) async fn pay(&self, which: &[usize]) -> Result<Vec<(PixCharge, Vec<TurnEvent>)>, String> {
        let mut paid = Vec::new();
        for &i in which {
            let charges = self
                .store
                .conversation_charges(&self.conversation)
                .await
                .map_err(|e| e.to_string())?;
            let charge = charges
                .get(i)
                .ok_or_else(|| format!("a conversa não emitiu a cobrança {i} para pagar"))?;
            let paid_there = match charge.meio {
                ChargeMeans::Pix => self.sim.pix().pay(&charge.txid, false).is_some(),
                ChargeMeans::CartaoCredito => self.sim.cartao().pay(&charge.txid, false).is_some(),
            };
            paid_there
                .then_some(())
                .ok_or_else(|| format!("a cobrança {i} não pôde ser paga no simulador"))?;
            self.service
                .payments()
                .settle(&charge.txid)
                .await
                .map_err(|e| e.to_string())?;
            let settled = self
                .store
                .pix_charge(&charge.txid)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("a cobrança {i} sumiu"))?;
            let events = match &settled.execucao_id {
                Some(run) => self
                    .store
                    .execution(run)
                    .await
                    .map_err(|e| e.to_string())?
                    .map(|(_, events)| events)
                    .unwrap_or_default(),
                None => Vec::new(),
            };
            paid.push((settled, events));
        }
        Ok(paid)
    }

    /// A support agent's `step` on the conversation's open case.
    pub(super) async fn support(&self, step: &SupportStep) -> Result<(), String> {
        let case = self
            .store
            .open_case_of(&self.conversation)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the conversation has no open case")?;
        let agent = SupportAgent {
            login: &step.agent,
            name: &step.agent,
            tenant: None,
        };
        let refused = |e: crate::service::CaseError| e.to_string();
        if step.claim {
            match self
                .service
                .cases()
                .claim_case(&case.id, agent)
                .await
                .map_err(refused)?
            {
                Claim::Claimed(_) => {}
                other => return Err(format!("claim: {other:?}")),
            }
        }
        if let Some(text) = &step.says {
            self.service
                .cases()
                .agent_reply(&case.id, agent, text)
                .await
                .map_err(refused)?;
        }
        if let Some(note) = &step.hand_back {
            let note = Some(note.as_str()).filter(|n| !n.is_empty());
            self.service
                .cases()
                .hand_back(&case.id, agent, note)
                .await
                .map_err(refused)?;
        }
        if step.close {
            self.service
                .cases()
                .close_case(&case.id, agent)
                .await
                .map_err(refused)?;
        }
        Ok(())
    }

    pub(super) async fn play(&self, turn: &Turn) -> Result<Observed, ServiceError> {
        let before = self.store.conversation(&self.conversation).await.ok().flatten();
        let pending_before: Option<RecargaPendente> = before
            .as_ref()
            .and_then(|c| c.state.get(STATE_PENDENTE).cloned())
            .and_then(|v| vt_contract::json::from_value(v).ok());
        let ledger_before = self.sim.ledger().len();
        let started = Instant::now();
        let (handled, replies) = if turn.burst.is_empty() {
            let handled = self.service.messages().handle(self.message(turn)).await?;
            let replies = handled.replies.iter().map(|r| r.text.clone()).collect();
            (handled, replies)
        } else {
            self.burst(turn).await?
        };
        let latency_ms = started.elapsed().as_millis() as u64;
        let (execution, events) = match &handled.execucao_id {
            Some(id) => self
                .store
                .execution(id)
                .await
                .ok()
                .flatten()
                .map_or((None, Vec::new()), |(e, ev)| (Some(e), ev)),
            None => (None, Vec::new()),
        };
        Ok(Observed {
            reply: handled.reply_text(),
            model_calls: execution.as_ref().map_or(0, |e| e.model_calls.len()),
            conversation: self.store.conversation(&self.conversation).await.ok().flatten(),
            ledger: self.sim.ledger().into_iter().skip(ledger_before).collect(),
            handled,
            replies,
            events,
            execution,
            pending_before,
            latency_ms,
        })
    }
}

impl World {
    /// The charges (means, amount) the conversation issued, in order.
    pub(super) async fn charges(&self) -> Vec<(String, String)> {
        self.store
            .conversation_charges(&self.conversation)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.meio.as_str().to_owned(), c.amount.to_string()))
            .collect()
    }

    /// The one message of a `user`, `voice` or `image` turn (a voice note's words, a photo's text
    /// queued for its fake).
    fn message(&self, turn: &Turn) -> Inbound {
        let queue = |fake: &Heard, text: &String| {
            fake.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push_back(text.clone());
        };
        let voice = turn.voice.as_ref().map(|words| {
            queue(&self.heard, words);
            vt_store::Media {
                kind: vt_store::MediaKind::Audio,
                id: "nota".into(),
                mime: "audio/ogg; codecs=opus".into(),
            }
        });
        let photo = turn.image.as_ref().map(|text| {
            queue(&self.seen, text);
            vt_store::Media {
                kind: vt_store::MediaKind::Image,
                id: "foto".into(),
                mime: "image/jpeg".into(),
            }
        });
        let media = voice.or(photo);
        Inbound {
            agent_id: self.agent.clone(),
            conversation_id: Some(self.conversation.clone()),
            user: self.who.clone(),
            text: if media.is_some() {
                String::new()
            } else {
                turn.said()
            },
            media,
            ..Default::default()
        }
    }

    /// A burst as a webhook plays it: every message stored, then each processed (they join as the
    /// service joins them). The last turn that ran, and every reply in order.
    async fn burst(&self, turn: &Turn) -> Result<(Handled, Vec<String>), ServiceError> {
        let mut received = Vec::new();
        let burst = self.bursts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for (i, text) in turn.burst.iter().enumerate() {
            let msg = Inbound {
                agent_id: self.agent.clone(),
                conversation_id: Some(self.conversation.clone()),
                user: self.who.clone(),
                text: text.clone(),
                channel_message_id: Some(format!("rajada-{burst}-{i}")),
                ..Default::default()
            };
            if let Some(mut r) = self.service.messages().receive(&msg).await? {
                r.join_within = BURST_WINDOW;
                received.push(r);
            }
        }
        let (mut last, mut replies) = (None, Vec::new());
        for r in received {
            let handled = self.service.messages().process(r).await?;
            if !handled.duplicate {
                replies.extend(handled.replies.iter().map(|r| r.text.clone()));
                last = Some(handled);
            }
        }
        let last = last.ok_or_else(|| ServiceError::NotFound(self.conversation.clone()))?;
        Ok((last, replies))
    }
}

/// The simulated systems, on loopback, with the transcript's cards and the pinned clock.
async fn simulator(setup: &Setup, clock: &ManualClock) -> Result<(Simulator, RunningSimulator), Mismatch> {
    let mut cards = if setup.simulator.replace_cards {
        Default::default()
    } else {
        magic_cards()
    };
    for (card, behaviour) in &setup.simulator.cards {
        let b: CardBehavior = vt_contract::json::from_value(behaviour.clone())
            .map_err(|e| setup_error(&format!("simulator card {card}"), e))?;
        cards.insert(card.clone(), b);
    }
    let sim_clock = clock.clone();
    let sim_config = SimulatorConfig {
        slow: Duration::from_secs(2),
        notifications_per_second: setup.simulator.notifications_per_second.unwrap_or(50),
        now: Some(Arc::new(move || sim_clock.now())),
        ..SimulatorConfig::default()
    };
    let sim = Simulator::with_cards(sim_config, cards);
    let running = sim
        .clone()
        .spawn(0)
        .await
        .map_err(|e| setup_error("simulator", e))?;
    Ok((sim, running))
}

/// The model: none, scripted per turn, or a cassette (replayed, or recorded with `--record`).
fn model(t: &Transcript, path: &Path, options: &RunOptions) -> Result<Model, Mismatch> {
    let setup = &t.setup;
    match &options.model {
        Some(super::ModelChoice::Live(p)) => return Ok(Model::Live(p.clone())),
        Some(super::ModelChoice::None) => return Ok(Model::None),
        // The cases as written: their own scripts, or no model where they script none.
        Some(super::ModelChoice::Scripted) | None => {}
    }
    let scripts = t
        .turns
        .iter()
        .any(|turn| !turn.model.is_empty() || turn.classify.is_some());
    let mode = setup
        .model
        .clone()
        .unwrap_or_else(|| if scripts { "scripted".into() } else { "none".into() });
    let cassette = setup
        .cassette
        .as_ref()
        .map(|c| path.parent().unwrap_or(Path::new(".")).join(c));
    match mode.as_str() {
        "none" => Ok(Model::None),
        "scripted" => Ok(Model::Scripted(Arc::new(ScriptedProvider::new([])))),
        "cassette" => {
            let path =
                cassette.ok_or_else(|| setup_error("cassette", "model: cassette needs `cassette: FILE`"))?;
            if !options.record {
                let cassette = Cassette::load(&path).map_err(|e| setup_error("cassette", e))?;
                return Ok(Model::Replay(Arc::new(ReplayProvider::new(cassette))));
            }
            let inner = match &options.record_with {
                Some(p) => p.clone(),
                None => options
                    .config
                    .llm
                    .provider()
                    .map_err(|e| setup_error("model", e))?
                    .ok_or_else(|| {
                        setup_error(
                            "model",
                            "--record needs a model: set VT_LLM_API_KEY (or [llm] in the config)",
                        )
                    })?,
            };
            Ok(Model::Record(Arc::new(RecordingProvider::new(inner, path))))
        }
        other => Err(setup_error(
            "model",
            format!("unknown model mode {other:?}: none, scripted or cassette"),
        )),
    }
}

/// The product as `serve` composes it, over an in-memory store, with the world's clock, seeded ids
/// and fast retries.
async fn product(
    setup: &Setup,
    options: &RunOptions,
    (clock, (sim, running), hearing, photos): (
        &ManualClock,
        (&Simulator, &RunningSimulator),
        &str,
        Arc<Photos>,
    ),
    model: &Model,
) -> Result<(Services, Arc<dyn Store>), Mismatch> {
    let systems = SystemsConfig {
        timeout_cap_ms: Some(300),
        max_retry_wait_ms: 20,
        ..SystemsConfig::single(&running.url)
    };
    let vt: VtSettings = overridden(&options.config.vt, &setup.vt).map_err(|e| setup_error("vt", e))?;
    let fast = EngineConfig {
        llm_retry: RetryPolicy::new(3, 1),
        tool_retry: RetryPolicy::new(2, 1),
        ..options.config.engine.clone()
    };
    let config = Config {
        // The world's model is the one given here (`model.provider()`): a transcript or an eval case
        // played with no model must not find the operator's `[llm]` instead.
        llm: crate::config::LlmConfig::default(),
        engine: overridden(&fast, &setup.engine).map_err(|e| setup_error("engine", e))?,
        service: crate::service::ServiceConfig {
            persist_retry: RetryPolicy::new(3, 1),
        },
        transcricao: Some(vt_engine::llm::TranscricaoConfig {
            base_url: hearing.to_owned(),
            timeout_secs: 5,
            ..Default::default()
        }),
        // Photos are read by the world's fake (`Photos`), never by a Tesseract the machine may have.
        fotos: crate::ocr::FotosConfig {
            ler: false,
            ..Default::default()
        },
        ..options.config.clone()
    };
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::connect("sqlite::memory:")
            .await
            .map_err(|e| setup_error("store", e))?,
    );
    let client = match &options.systems {
        Some(recorded) => recorded.clone(),
        None => VtSystems::new(systems).map_err(|e| setup_error("client", e))?,
    };
    let mut ext = Extensions::default()
        .with(vt_domain::systems::SystemsPort::new(client))
        .with(vt);
    let payments = if options.systems.is_some() || setup.simulated_payments {
        let pix = crate::app::simulated_pix(sim, &config);
        let card = crate::app::simulated_card(sim, &config);
        ext = ext
            .with(crate::service::pix_port(
                store.clone(),
                pix.clone(),
                crate::app::channel_book(),
            ))
            .with(crate::service::card_port(store.clone(), card.clone()));
        (Some(pix), Some(card))
    } else {
        (
            crate::app::pix_setup(&config).map_err(|e| setup_error("pix", format!("{e:#}")))?,
            crate::app::card_setup(&config).map_err(|e| setup_error("cartao", format!("{e:#}")))?,
        )
    };
    let engine = crate::app::engine(&config, model.provider(), ext)
        .map_err(|e| setup_error("engine", format!("{e:#}")))?
        .with_clock(Clock::Manual(clock.clone()))
        .with_ids(IdSource::seeded(setup.seed));
    let engine = crate::flow::share(engine, Some(store.clone()), vt_store::RecargasConfig::default());
    let mut setup = crate::app::services_config(&config, &engine, store.as_ref(), payments)
        .await
        .map_err(|e| setup_error("service", format!("{e:#}")))?;
    // Photos are read by the world's fake, which says what it saw.
    setup.photos = Some((photos, 5 * 1024 * 1024));
    Ok((Services::new(engine, store.clone(), setup), store))
}
