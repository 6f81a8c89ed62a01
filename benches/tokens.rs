//! Token economy (reported, not asserted): the committed scenario set (`benches/tokens/scenarios.yaml`,
//! mixed conversations and flow inputs) run two ways against a fake model that reports tokens from the
//! request size (a token per 4 characters of system prompt, messages and tool schemas as JSON):
//!
//! - **product**: the product as it is — router, deterministic chains, compressed context — with the
//!   fake as its configured model; whatever it asks the model is counted.
//! - **model per stage**: the same conversations as a design that sends every turn and every flow stage
//!   through the model, with the active skill's prompt and tools and the full history: one call after
//!   each user message and after each tool result, the input being everything so far, the output each
//!   assistant message. Counted over the messages the product's own run stored, so both designs do the
//!   same work.
//!
//! The product's column `cached` is what a provider's prompt cache would have served of its input,
//! simulated as OpenAI documents it: requests under one `prompt_cache_key` share the longest prefix
//! (system prompt, tools, then the messages, as the request writes them) with an earlier one, counted
//! when it is 1,024 tokens or more, in steps of 128.
//!
//! Then level 1 of the router on the corpus of how card holders write
//! (`tests/fixtures/router/corpus.yaml`): intent accuracy, parameters exact, bare menus — the share of
//! messages answered with zero tokens as meant; and the intent classifier on the held-out splits of
//! `corpus/intencoes/`, per intent.
//!
//! `cargo bench --bench tokens` — prints a table per scenario class and the total, then the corpus.
#![allow(clippy::disallowed_methods)] // tests and benches convert JSON freely; see `vt_contract::json`

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use serde::Deserialize;
use vt_agent::Config;
use vt_agent::Inbound;
use vt_connectors::systems::{SystemsConfig, VtSystems};
use vt_contract::context::Extensions;
use vt_domain::systems::SystemsPort;
use vt_engine::Engine;
use vt_engine::Participant;
use vt_engine::llm::ChatMessage;
use vt_engine::llm::Completion;
use vt_engine::llm::CompletionRequest;
use vt_engine::llm::LlmError;
use vt_engine::llm::LlmProvider;
use vt_engine::llm::StopReason;
use vt_engine::llm::Usage;
use vt_store::Store;
use vt_store::sqlite::SqliteStore;

#[derive(Debug, Deserialize)]
struct Scenario {
    name: String,
    class: String,
    #[serde(default)]
    turns: Vec<String>,
    #[serde(default)]
    flow: Option<String>,
}

/// Model calls and tokens (`cached`: of `input`, what a prompt cache would have served).
#[derive(Debug, Default, Clone, Copy)]
struct Cost {
    calls: u64,
    input: u64,
    output: u64,
    cached: u64,
}

impl Cost {
    fn add(&mut self, o: Cost) {
        self.calls += o.calls;
        self.input += o.input;
        self.output += o.output;
        self.cached += o.cached;
    }

    fn tokens(&self) -> u64 {
        self.input + self.output
    }
}

fn tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

fn json_len<T: serde::Serialize>(v: &T) -> usize {
    serde_json::to_string(v).map_or(0, |s| s.len())
}

fn tools_len(tools: &[std::sync::Arc<vt_contract::ToolSpec>]) -> usize {
    tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
        .sum()
}

/// The fake model: answers every request with a short text, counting what it was sent and what its
/// prompt cache would have served.
#[derive(Default)]
struct CountingModel {
    calls: AtomicU64,
    input: AtomicU64,
    output: AtomicU64,
    cached: AtomicU64,
    /// Earlier requests as the wire writes them, by cache key (the last few of each).
    seen: std::sync::Mutex<BTreeMap<String, Vec<String>>>,
}

/// OpenAI's prompt cache: a prefix of 1,024 tokens or more, counted in steps of 128.
fn cacheable(prefix_tokens: u64) -> u64 {
    if prefix_tokens < 1024 {
        0
    } else {
        prefix_tokens / 128 * 128
    }
}

/// How many earlier requests of a key the cache simulation compares with.
const SEEN_PER_KEY: usize = 32;

const ANSWER: &str = "Posso ajudar com saldo e recarga do seu vale-transporte. O que você precisa?";

impl CountingModel {
    fn take(&self) -> Cost {
        Cost {
            calls: self.calls.swap(0, Ordering::Relaxed),
            input: self.input.swap(0, Ordering::Relaxed),
            output: self.output.swap(0, Ordering::Relaxed),
            cached: self.cached.swap(0, Ordering::Relaxed),
        }
    }

    /// What the cache would serve of `request` (written as the wire writes it), remembering it.
    fn cached(&self, request: &CompletionRequest) -> u64 {
        let Some(key) = &request.cache_key else {
            return 0;
        };
        let written = format!(
            "{}{}{}{}",
            request.system,
            tools_json(&request.tools),
            serde_json::to_string(&request.messages).unwrap_or_default(),
            request.context
        );
        let mut seen = self.seen.lock().expect("lock");
        let earlier = seen.entry(key.clone()).or_default();
        let shared = earlier
            .iter()
            .map(|e| e.bytes().zip(written.bytes()).take_while(|(a, b)| a == b).count())
            .max()
            .unwrap_or(0);
        if earlier.len() == SEEN_PER_KEY {
            earlier.remove(0);
        }
        earlier.push(written);
        cacheable(tokens(shared))
    }
}

fn tools_json(tools: &[std::sync::Arc<vt_contract::ToolSpec>]) -> String {
    tools
        .iter()
        .map(|t| format!("{}{}{}", t.name, t.description, t.parameters))
        .collect()
}

#[async_trait]
impl LlmProvider for CountingModel {
    fn model(&self) -> &str {
        "contador"
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let chars = request.system.len()
            + request.context.len()
            + request.messages.iter().map(json_len).sum::<usize>()
            + tools_len(&request.tools);
        let usage = Usage {
            input_tokens: tokens(chars),
            output_tokens: tokens(ANSWER.len()),
            cached_input_tokens: self.cached(request).min(tokens(chars)),
            ..Usage::default()
        };
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.input.fetch_add(usage.input_tokens, Ordering::Relaxed);
        self.output.fetch_add(usage.output_tokens, Ordering::Relaxed);
        self.cached
            .fetch_add(usage.cached_input_tokens, Ordering::Relaxed);
        Ok(Completion {
            model: "contador".into(),
            text: Some(ANSWER.into()),
            tool_calls: Vec::new(),
            stop_reason: StopReason::EndTurn,
            usage,
        })
    }
}

/// What a model-per-stage design sends for the stored messages of a conversation: the skill's prompt
/// and tools are `context(message index)`.
fn per_stage(messages: &[ChatMessage], context: impl Fn(usize) -> (usize, usize)) -> Cost {
    let mut cost = Cost::default();
    let mut history = 0usize;
    for (i, m) in messages.iter().enumerate() {
        let len = json_len(m);
        match m {
            // A support agent's words are output the model did not have to write: free.
            ChatMessage::HumanAgent { .. } => {}
            ChatMessage::Assistant { .. } => cost.output += tokens(len),
            ChatMessage::User { .. } | ChatMessage::Tool { .. } => {
                let (system, tools) = context(i);
                cost.calls += 1;
                cost.input += tokens(system + tools + history + len);
            }
        }
        history += len;
    }
    cost
}

/// Prompt and tool sizes of a skill.
fn skill_context(engine: &Engine, agent: &str, skill: &str) -> (usize, usize) {
    let Some(def) = engine.catalog().agent(agent).and_then(|a| a.skill(skill)) else {
        return (0, 0);
    };
    let prompt = std::fs::read_to_string(format!("prompts/{}", def.prompt)).map_or(0, |p| p.len());
    let specs: Vec<_> = def
        .actions
        .iter()
        .filter_map(|a| engine.registry().spec(a).cloned())
        .collect();
    (prompt, tools_len(&specs))
}

#[tokio::main]
async fn main() {
    let text = std::fs::read_to_string("benches/tokens/scenarios.yaml").expect("scenarios");
    let scenarios: Vec<Scenario> = serde_yaml::from_str(&text).expect("scenarios parse");
    let config = Config::default();
    let running = common::simulator().await;
    let ext = Extensions::default()
        .with(SystemsPort::new(
            VtSystems::new(SystemsConfig::single(&running.url)).expect("client"),
        ))
        .with(config.vt.clone());
    let model = Arc::new(CountingModel::default());
    let store: Arc<dyn Store> = Arc::new(SqliteStore::connect("sqlite::memory:").await.expect("store"));
    let llm: Arc<dyn LlmProvider> = model.clone();
    let engine = vt_agent::share(
        vt_agent::build_engine(&config, Some(llm), ext).expect("engine"),
        Some(store.clone()),
        config.recargas.clone(),
    );
    let service = vt_agent::build_service(&config, engine.clone(), store.clone())
        .await
        .expect("service");
    let chat = skill_context(&engine, "vt", "atendimento");

    let mut by_class: BTreeMap<String, (usize, Cost, Cost)> = BTreeMap::new();
    for s in &scenarios {
        model.take();
        let (conversation, flow) = match &s.flow {
            Some(input) => {
                let output = service
                    .flows()
                    .run_flow(input, Default::default())
                    .await
                    .expect("flow")
                    .output;
                let (record, _) = store
                    .execution(&output.execucao_id)
                    .await
                    .expect("execution")
                    .expect("stored");
                (record.conversation_id, true)
            }
            None => {
                for turn in &s.turns {
                    let msg = Inbound {
                        agent_id: "vt".into(),
                        conversation_id: Some(s.name.clone()),
                        user: Participant {
                            user_id: "u1".into(),
                            user_login: "u1".into(),
                            channel: "bench".into(),
                        },
                        text: turn.clone(),
                        ..Default::default()
                    };
                    service.messages().handle(msg).await.expect("turn");
                }
                (s.name.clone(), false)
            }
        };
        let product = model.take();
        let messages: Vec<ChatMessage> = store
            .messages(&conversation)
            .await
            .expect("messages")
            .into_iter()
            .map(|m| m.message)
            .collect();
        let per_stage = if flow {
            // Stage k answers the k-th user/tool message: the input, then each stage's result.
            let stages: Vec<String> = engine
                .catalog()
                .agent(vt_agent::FLOW_AGENT)
                .map(|a| a.skills.iter().map(|s| s.name.clone()).collect())
                .unwrap_or_default();
            let mut asked = 0usize;
            let contexts: Vec<(usize, usize)> = messages
                .iter()
                .map(|m| match m {
                    ChatMessage::Assistant { .. } => (0, 0),
                    _ => {
                        let stage = stages.get(asked).or(stages.last()).cloned().unwrap_or_default();
                        asked += 1;
                        skill_context(&engine, vt_agent::FLOW_AGENT, &stage)
                    }
                })
                .collect();
            per_stage(&messages, |i| contexts[i])
        } else {
            per_stage(&messages, |_| chat)
        };
        let entry = by_class.entry(s.class.clone()).or_default();
        entry.0 += 1;
        entry.1.add(product);
        entry.2.add(per_stage);
    }

    println!(
        "{:<20} {:>4} | {:>12} {:>10} {:>8} {:>8} | {:>12} {:>10} {:>8} | {:>7}",
        "class", "n", "product calls", "in", "cached", "out", "per-stage calls", "in", "out", "saving"
    );
    let mut total = (0, Cost::default(), Cost::default());
    for (class, (n, product, stage)) in &by_class {
        row(class, *n, product, stage);
        total.0 += n;
        total.1.add(*product);
        total.2.add(*stage);
    }
    row("total", total.0, &total.1, &total.2);
    corpus(&config).await;
}

/// The router (level 1, no model) on the corpus of how card holders write.
async fn corpus(config: &Config) {
    let intents = vt_agent::testkit::load_file(&config.intents_file()).expect("intents");
    let faq = vt_domain::faq::Faq::load(&config.faq_dir()).expect("faq");
    let router = vt_agent::Router::new("vt", intents, None).with_faq(Some(std::sync::Arc::new(faq)));
    let entries = vt_agent::testkit::load_corpus(std::path::Path::new("tests/fixtures/router/corpus.yaml"))
        .expect("corpus");
    let score = vt_agent::testkit::score_corpus(&router, &entries).await;
    println!();
    println!("router corpus ({} messages): {}", entries.len(), score.summary());
    for miss in &score.misses {
        println!("  miss: {miss}");
    }
    classifier();
}

/// The intent classifier on the corpus's held-out splits, per intent.
fn classifier() {
    for split in ["avaliacao", "reserva"] {
        let e = vt_agent::testkit::evaluate_intents(&std::path::Path::new("corpus/intencoes").join(split));
        println!();
        println!("intent classifier, held-out split {split}: {}", e.summary());
        for (intent, (right, n)) in &e.per_intent {
            println!(
                "  {intent:<32} {right:>3}/{n:<3} {:>6.1} %",
                100.0 * *right as f64 / *n as f64
            );
        }
    }
}

fn row(class: &str, n: usize, product: &Cost, stage: &Cost) {
    let saving = if stage.tokens() > 0 {
        100.0 * (1.0 - product.tokens() as f64 / stage.tokens() as f64)
    } else {
        0.0
    };
    println!(
        "{class:<20} {n:>4} | {:>12} {:>10} {:>8} {:>8} | {:>12} {:>10} {:>8} | {saving:>6.1}%",
        product.calls, product.input, product.cached, product.output, stage.calls, stage.input, stage.output
    );
}
