//! Configuration: an optional TOML file, then `VT_*` environment variables on top. Every command runs
//! with no configuration at all (SQLite under `./data`, the embedded simulator, no model).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

mod env;
mod parse;
pub(crate) mod reference;

use vt_connectors::systems::SystemsConfig;
use vt_domain::tools::VtSettings;

use vt_engine::EngineConfig;
use vt_engine::llm::{AnthropicProvider, LlmProvider, OpenAiProvider, ProviderSettings};

/// The file read when neither `--config` nor `VT_CONFIG` names one (only if it exists).
pub(crate) const DEFAULT_CONFIG_FILE: &str = "vt-agent.toml";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("não foi possível ler o arquivo de configuração {path}")]
    Read { path: String, source: std::io::Error },
    /// The message never quotes the file's text: the offending line could be `api_key = "…"`.
    #[error("o arquivo de configuração {path} é inválido{at}: {message}")]
    Parse {
        path: String,
        at: String,
        message: String,
    },
    /// Names the variable, never its value.
    #[error("a variável de ambiente {name} é inválida: {message}")]
    Env { name: String, message: String },
    /// A value that parsed but makes no sense; names the key, never the value.
    #[error("o valor de configuração {field} é inválido: {message}")]
    Invalid { field: String, message: String },
    #[error("o provedor do modelo não pôde ser configurado: {0}")]
    Provider(String),
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where the SQLite file and other local data live.
    pub data_dir: PathBuf,
    /// `postgres://...` to share state between instances; SQLite under `data_dir` otherwise.
    pub database_url: Option<String>,
    /// Skill files; defaults to `./skills`, else the folder shipped with the source.
    pub skills_dir: Option<PathBuf>,
    /// WhatsApp templates (one TOML file each); defaults to `./templates`, else the folder shipped with
    /// the source.
    pub templates_dir: Option<PathBuf>,
    /// Prompt templates; defaults to `./prompts`, else the folder shipped with the source.
    pub prompts_dir: Option<PathBuf>,
    /// The router's default intents (copied into the database when missing there).
    pub intents_file: Option<PathBuf>,
    /// The operator's FAQ (one Markdown file an answer); defaults to `./faq`, else the folder shipped
    /// with the source.
    pub faq_dir: Option<PathBuf>,
    pub llm: LlmConfig,
    pub engine: EngineConfig,
    /// How a turn's commit is retried.
    pub service: crate::service::ServiceConfig,
    /// How a failed send is retried.
    pub outbox: crate::outbox::OutboxConfig,
    /// A transfer to a person: how long a case waits before the card holder is told.
    pub handoff: crate::service::HandoffConfig,
    /// `[notificacoes]`: restraint in the notices the product sends itself.
    pub notificacoes: crate::channels::whatsapp::NoticesConfig,
    /// `[recargas]`: how recharges whose outcome came late are followed up.
    pub recargas: vt_store::RecargasConfig,
    /// The external systems. Absent: every command starts the embedded simulator.
    pub systems: Option<SystemsConfig>,
    /// The operator's payment provider (API Pix). Absent: the embedded simulator is the provider
    /// where it runs the systems too.
    pub pix: Option<vt_connectors::pix::PixConfig>,
    /// `[cartao]`: who takes a chat recharge paid by card. Absent beside real systems: such a recharge
    /// is refused.
    pub cartao: vt_connectors::cartao::CartaoConfig,
    /// `[transcricao]`: voice notes heard through an OpenAI-compatible transcription endpoint. Absent:
    /// a voice note gets the text-only answer.
    pub transcricao: Option<vt_engine::llm::TranscricaoConfig>,
    /// `[fotos]`: card photos read locally with Tesseract, when it is installed.
    pub fotos: crate::ocr::FotosConfig,
    /// `[custos]`: prices, for what each turn costs in reais.
    pub custos: crate::costs::CustosConfig,
    /// `[[orcamentos]]`: a monthly budget in reais per tenant.
    pub orcamentos: Vec<crate::service::Orcamento>,
    /// `[[equipes]]`: support teams — who answers which cases, how they are assigned, business hours,
    /// holidays and SLA. None: one team, `atendimento`, whose cases are claimed by hand.
    pub equipes: Vec<crate::service::Equipe>,
    /// `[autoatendimento]`: what a card holder may do to their card alone (block it, order its second
    /// copy), and how a card the conversation has no record of is checked first.
    pub autoatendimento: vt_domain::tools::Autoatendimento,
    /// `[resultados]`: when a conversation's stretch is over (its outcome), the satisfaction question.
    pub resultados: crate::service::ResultadosConfig,
    /// `[revisao]`: the review queue (flagged answers labelled into tests) and the FAQ's suggestions.
    pub revisao: crate::service::RevisaoConfig,
    pub simulator: SimulatorSettings,
    /// Tenant, policies and confirmation time of the conversational tools.
    pub vt: VtSettings,
    /// `vt-agent serve`: address, limits, API keys.
    pub http: crate::http::HttpConfig,
    /// The web console at `/console` (session secret, session length).
    pub console: crate::http::console::ConsoleConfig,
    /// OTLP export of traces and metrics (off unless configured here or by `OTEL_*`/`LANGFUSE_*`).
    pub otlp: vt_engine::telemetry::otlp::OtlpConfig,
    /// The data keys of what is sealed at rest (else the key file beside the database).
    pub storage: vt_store::seal::StorageConfig,
    /// How long conversations and flow runs are kept.
    pub retencao: crate::retention::RetentionConfig,
    /// Where traces go, resolved from `[otlp]` and the environment when loaded.
    #[serde(skip)]
    pub otlp_target: Option<vt_engine::telemetry::otlp::OtlpTarget>,
    /// Each plugged channel's section (`[whatsapp]`, `[mattermost]`, `[webchat]`…), read by the channel
    /// itself ([`crate::channels::Plug`]).
    #[serde(skip)]
    #[schemars(skip)]
    pub channels: crate::channels::Sections,
}

/// The embedded simulator, when it is used.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SimulatorSettings {
    /// A JSON file that replaces or extends the magic card table.
    pub fixture: Option<PathBuf>,
    /// Notifications it accepts per second before answering 429, as a real notification system would
    /// (default 50). Raise it to measure the product rather than the limit.
    pub notifications_per_second: Option<u32>,
    /// After how many seconds the simulated payment provider pays a Pix code (and a card holder
    /// authorises a Pix Automático recurrence) by itself, as the card holder would (default 5, so a
    /// newcomer sees the whole journey); 0: only `POST /_simulador/pix/{txid}/pagar` pays (and
    /// `POST /_simulador/pix/rec/{id_rec}/autorizar` authorises).
    pub pix_pagar_apos_segundos: Option<u64>,
    /// After how many seconds a recharge's boleto counts as paid and cleared, as if its holder paid it
    /// at once (default 30: `serve`'s first follow-up, a minute after the recharge, credits it); 0: only
    /// `POST /_simulador/boletos/{linha}/pagar` pays.
    pub boleto_pagar_apos_segundos: Option<u64>,
}

impl SimulatorSettings {
    /// Seconds before the simulated provider pays a code by itself, when nothing else is said.
    pub const PIX_PAGAR_APOS_SEGUNDOS: u64 = 5;

    /// After how long the simulated provider pays by itself; `None`: it does not.
    pub(crate) fn pix_pagar_apos(&self) -> Option<std::time::Duration> {
        let secs = self
            .pix_pagar_apos_segundos
            .unwrap_or(Self::PIX_PAGAR_APOS_SEGUNDOS);
        (secs > 0).then(|| std::time::Duration::from_secs(secs))
    }

    /// Seconds before a simulated boleto counts as paid, when nothing else is said.
    pub const BOLETO_PAGAR_APOS_SEGUNDOS: u64 = 30;

    /// After how long a simulated boleto counts as paid; `None`: only when paid through its route.
    pub(crate) fn boleto_pagar_apos(&self) -> Option<std::time::Duration> {
        let secs = self
            .boleto_pagar_apos_segundos
            .unwrap_or(Self::BOLETO_PAGAR_APOS_SEGUNDOS);
        (secs > 0).then(|| std::time::Duration::from_secs(secs))
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("data"),
            database_url: None,
            skills_dir: None,
            templates_dir: None,
            prompts_dir: None,
            intents_file: None,
            faq_dir: None,
            llm: LlmConfig::default(),
            engine: EngineConfig::default(),
            service: crate::service::ServiceConfig::default(),
            outbox: crate::outbox::OutboxConfig::default(),
            handoff: crate::service::HandoffConfig::default(),
            notificacoes: crate::channels::whatsapp::NoticesConfig::default(),
            recargas: vt_store::RecargasConfig::default(),
            systems: None,
            pix: None,
            cartao: Default::default(),
            transcricao: None,
            fotos: crate::ocr::FotosConfig::default(),
            custos: crate::costs::CustosConfig::default(),
            orcamentos: Vec::new(),
            equipes: Vec::new(),
            resultados: crate::service::ResultadosConfig::default(),
            revisao: crate::service::RevisaoConfig::default(),
            autoatendimento: vt_domain::tools::Autoatendimento::default(),
            simulator: SimulatorSettings::default(),
            vt: VtSettings::default(),
            http: crate::http::HttpConfig::default(),
            channels: crate::channels::Sections::default(),
            console: crate::http::console::ConsoleConfig::default(),
            otlp: vt_engine::telemetry::otlp::OtlpConfig::default(),
            storage: vt_store::seal::StorageConfig::default(),
            retencao: crate::retention::RetentionConfig::default(),
            otlp_target: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Openai,
    Anthropic,
}

/// The model. It is used only when a provider, a base URL or an API key is configured: no key, no
/// model, and the product still runs. A local server (Ollama, vLLM) needs a base URL and no key.
#[derive(Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// `openai` (any Chat Completions server: OpenAI, Ollama, vLLM, llama.cpp) or `anthropic`
    /// (`VT_LLM_PROVIDER`).
    pub provider: Option<ProviderKind>,
    /// The provider's API, e.g. `http://127.0.0.1:11434/v1` for Ollama; default the provider's own
    /// (`VT_LLM_BASE_URL`).
    pub base_url: Option<String>,
    /// Default `gpt-5-mini` (openai) or `claude-sonnet-4-5` (anthropic) (`VT_LLM_MODEL`).
    pub model: Option<String>,
    /// `VT_LLM_API_KEY`; never logged, scrubbed from errors. A local server needs none.
    pub api_key: Option<String>,
    /// Default: the provider's (`VT_LLM_TEMPERATURE`).
    pub temperature: Option<f32>,
    /// Tokens a reply may take (`VT_LLM_MAX_TOKENS`).
    pub max_tokens: u32,
    /// Seconds one call may take (`VT_LLM_TIMEOUT_SECS`).
    pub timeout_secs: u64,
    /// Failures in a row after which calls fail fast (the circuit opens), default 5.
    pub circuit_failures: u32,
    /// Seconds the circuit stays open before one call probes the provider, default 30.
    pub circuit_open_secs: u64,
    /// Models asked in order when this one cannot answer (rate limit, quota, unavailable, timeout,
    /// context too long); never on a bad request or a refusal.
    pub fallback: Vec<FallbackModel>,
}

/// One `[[llm.fallback]]` entry: the same temperature, limits and timeout as `[llm]`.
#[derive(Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FallbackModel {
    /// `openai` or `anthropic`.
    pub provider: ProviderKind,
    /// Default: the provider's own API.
    pub base_url: Option<String>,
    /// The model asked.
    pub model: String,
    /// Better given as `VT_LLM_FALLBACK_N_API_KEY` (N counts the entries from 1).
    pub api_key: Option<String>,
}

impl std::fmt::Debug for FallbackModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FallbackModel")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            provider: None,
            base_url: None,
            model: None,
            api_key: None,
            temperature: None,
            max_tokens: 1024,
            timeout_secs: 60,
            circuit_failures: 5,
            circuit_open_secs: 30,
            fallback: Vec::new(),
        }
    }
}

impl std::fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .field("timeout_secs", &self.timeout_secs)
            .field("circuit_failures", &self.circuit_failures)
            .field("circuit_open_secs", &self.circuit_open_secs)
            .field("fallback", &self.fallback)
            .finish()
    }
}

impl LlmConfig {
    /// Where the primary model is reached: the configured base URL, else its provider's own.
    pub(crate) fn address(&self) -> String {
        match (&self.base_url, self.provider) {
            (Some(url), _) => url.clone(),
            (None, Some(ProviderKind::Anthropic)) => vt_engine::llm::ANTHROPIC_DEFAULT_BASE_URL.to_owned(),
            (None, _) => vt_engine::llm::OPENAI_DEFAULT_BASE_URL.to_owned(),
        }
    }

    pub(crate) fn is_configured(&self) -> bool {
        self.provider.is_some() || self.base_url.is_some() || self.api_key.is_some()
    }

    /// The provider this configuration asks for, or `None` when no model is configured.
    pub fn provider(&self) -> Result<Option<Arc<dyn LlmProvider>>, ConfigError> {
        if !self.is_configured() {
            return Ok(None);
        }
        let kind = self.provider.unwrap_or(ProviderKind::Openai);
        let primary = self.one(
            kind,
            self.base_url.clone(),
            self.model.clone(),
            self.api_key.clone(),
        )?;
        let fallbacks = self
            .fallback
            .iter()
            .map(|f| {
                self.one(
                    f.provider,
                    f.base_url.clone(),
                    Some(f.model.clone()),
                    f.api_key.clone(),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(vt_engine::llm::Fallback::wrap(primary, fallbacks)))
    }

    /// One provider with this section's limits, behind its own circuit breaker.
    fn one(
        &self,
        kind: ProviderKind,
        base_url: Option<String>,
        model: Option<String>,
        api_key: Option<String>,
    ) -> Result<Arc<dyn LlmProvider>, ConfigError> {
        let (default_url, default_model) = match kind {
            ProviderKind::Openai => (vt_engine::llm::OPENAI_DEFAULT_BASE_URL, "gpt-5-mini"),
            ProviderKind::Anthropic => (vt_engine::llm::ANTHROPIC_DEFAULT_BASE_URL, "claude-sonnet-4-5"),
        };
        let settings = ProviderSettings {
            base_url: base_url.unwrap_or_else(|| default_url.to_owned()),
            model: model.unwrap_or_else(|| default_model.to_owned()),
            api_key: api_key.filter(|k| !k.trim().is_empty()),
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            timeout: Duration::from_secs(self.timeout_secs.max(1)),
        };
        let provider: Arc<dyn LlmProvider> = match kind {
            ProviderKind::Openai => {
                Arc::new(OpenAiProvider::new(settings).map_err(|e| ConfigError::Provider(e.to_string()))?)
            }
            ProviderKind::Anthropic => {
                Arc::new(AnthropicProvider::new(settings).map_err(|e| ConfigError::Provider(e.to_string()))?)
            }
        };
        let breaker = vt_engine::llm::BreakerConfig {
            failures: self.circuit_failures.max(1),
            open_for: Duration::from_secs(self.circuit_open_secs),
        };
        Ok(vt_engine::llm::CircuitBreaker::wrap(provider, breaker))
    }
}

impl Config {
    /// Reads the file (`path`, else `VT_CONFIG`, else `./vt-agent.toml` when present) and the
    /// process environment.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let env: HashMap<String, String> = std::env::vars()
            .filter(|(k, _)| ["VT_", "OTEL_", "LANGFUSE_"].iter().any(|p| k.starts_with(p)))
            .collect();
        let path = path
            .map(Path::to_path_buf)
            .or_else(|| env.get("VT_CONFIG").map(PathBuf::from))
            .or_else(|| {
                Path::new(DEFAULT_CONFIG_FILE)
                    .exists()
                    .then(|| PathBuf::from(DEFAULT_CONFIG_FILE))
            });
        let text = match &path {
            Some(p) => Some(std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                path: p.display().to_string(),
                source,
            })?),
            None => None,
        };
        let label = path.map(|p| p.display().to_string()).unwrap_or_default();
        Self::from_sources(text.as_deref(), &label, &env)
    }

    /// Builds a configuration from a TOML text and `VT_*` variables (the variables win); `OTEL_*` and
    /// `LANGFUSE_*` variables set the OTLP export.
    pub fn from_sources(
        toml_text: Option<&str>,
        label: &str,
        env: &HashMap<String, String>,
    ) -> Result<Self, ConfigError> {
        Self::plugged(toml_text, label, env, crate::channels::PLUGS)
    }

    /// [`Config::from_sources`] with the channels `plugs` instead of the product's own: each reads its
    /// section.
    pub fn plugged(
        toml_text: Option<&str>,
        label: &str,
        env: &HashMap<String, String>,
        plugs: &[&'static dyn crate::channels::Plug],
    ) -> Result<Self, ConfigError> {
        let env_vars = env::Env(env);
        // A plugged channel's section is read with its variables on top.
        let get = |name: &str| env_vars.get(name);
        let mut config: Config = match toml_text {
            Some(t) => parse::parse_toml(t, label, plugs, &get)?,
            None => Config {
                channels: crate::channels::Sections::defaults(plugs, &get),
                ..Config::default()
            },
        };
        env::apply(&mut config, &env_vars)?;
        config.otlp_target = config
            .otlp
            .resolve(env)
            .map_err(|(field, message)| ConfigError::Invalid {
                field,
                message: message.to_owned(),
            })?;
        // With no real systems the embedded simulator keeps its book here, which retention and a data
        // subject's erasure reach too.
        if config.systems.is_none() {
            config.retencao.simulator_book = Some(config.data_dir.join(vt_simulators::systems::book::FILE));
        }
        config.validate()?;
        for key in [
            config.llm.api_key.as_ref(),
            config.transcricao.as_ref().and_then(|t| t.api_key.as_ref()),
            config.cartao.webhook_secret.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            vt_contract::redact::register_secret(key);
        }
        config.http.register_secrets();
        for section in config.channels.sections() {
            section.register_secrets();
        }
        config.console.register_secrets();
        config.storage.register_secrets();
        Ok(config)
    }

    /// Checks values that parse but make no sense, so a bad one is refused when loaded instead of
    /// misbehaving later (a negative confirmation time, a policy that allows a zero recharge…).
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |field: &str, message: &str| {
            Err(ConfigError::Invalid {
                field: field.to_owned(),
                message: message.to_owned(),
            })
        };
        if let Err((field, message)) = self.storage.validate() {
            return invalid(&field, message);
        }
        if let Some((field, message)) = self.systems.as_ref().and_then(SystemsConfig::problem) {
            return invalid(&field, message);
        }
        if let Some((field, message)) = self.pix.as_ref().and_then(vt_connectors::pix::PixConfig::problem) {
            return invalid(&field, message);
        }
        if let Some((field, message)) = self.cartao.problem() {
            return invalid(&field, message);
        }
        if let Some((field, message)) = self
            .transcricao
            .as_ref()
            .and_then(vt_engine::llm::TranscricaoConfig::problem)
        {
            return invalid(field, message);
        }
        if let Some((field, message)) = self.fotos.problem() {
            return invalid(field, message);
        }
        if let Some((field, message)) = self.custos.problem() {
            return invalid(&field, message);
        }
        if let Some((field, message)) = crate::service::budget_problem(&self.orcamentos) {
            return invalid(&field, message);
        }
        if let Some((field, message)) = self.resultados.problem() {
            return invalid(field, message);
        }
        if let Some((field, message)) = self.revisao.problem() {
            return invalid(field, message);
        }
        if let Err((field, message)) = self.retencao.validate() {
            return invalid(field, message);
        }
        if let Err((field, message)) = self.recargas.validate() {
            return invalid(&field, message);
        }
        if !(1..=crate::outbox::MAX_CONCURRENCY).contains(&self.outbox.envios_simultaneos) {
            return invalid("outbox.envios_simultaneos", "deve ser de 1 a 256");
        }
        if self.simulator.notifications_per_second == Some(0) {
            return invalid("simulator.notifications_per_second", "deve ser pelo menos 1");
        }
        if let Err((field, message)) = self.vt.politicas.validate() {
            return invalid(&format!("vt.politicas.{field}"), message);
        }
        if !(1..=MAX_CONFIRMATION_TTL_SECS).contains(&self.vt.confirmation_ttl_secs) {
            return invalid(
                "vt.confirmation_ttl_secs",
                "deve ser de 1 segundo a 86400 (24 horas)",
            );
        }
        if self.llm.max_tokens == 0 {
            return invalid("llm.max_tokens", "deve ser pelo menos 1");
        }
        if self.llm.circuit_failures == 0 {
            return invalid("llm.circuit_failures", "deve ser pelo menos 1");
        }
        if self.llm.timeout_secs == 0 {
            return invalid("llm.timeout_secs", "deve ser pelo menos 1");
        }
        if self
            .llm
            .temperature
            .is_some_and(|t| !t.is_finite() || !(0.0..=2.0).contains(&t))
        {
            return invalid("llm.temperature", "deve estar entre 0 e 2");
        }
        if self.llm.fallback.iter().any(|f| f.model.trim().is_empty()) {
            return invalid("llm.fallback.model", "não pode ser vazio");
        }
        if !self.llm.fallback.is_empty() && !self.llm.is_configured() {
            return invalid("llm.fallback", "precisa de um modelo principal em [llm]");
        }
        if self.engine.max_model_calls == 0 {
            return invalid("engine.max_model_calls", "deve ser pelo menos 1");
        }
        if let Some((field, message)) = crate::service::teams_problem(&self.equipes) {
            return invalid(&field, message);
        }
        if self.handoff.claim_timeout_minutes == 0 {
            return invalid("handoff.claim_timeout_minutes", "deve ser pelo menos 1");
        }
        if self.engine.turn_timeout_ms == 0 {
            return invalid("engine.turn_timeout_ms", "deve ser pelo menos 1");
        }
        if let Err((field, message)) = self.http.validate() {
            return invalid(&field, message);
        }
        if let Some((field, message)) = self.channels.sections().find_map(|section| section.problem()) {
            return invalid(&field, &message);
        }
        if let Err((field, message)) = self.console.validate() {
            return invalid(field, message);
        }
        Ok(())
    }

    pub(crate) fn templates_dir(&self) -> PathBuf {
        resolve(self.templates_dir.as_deref(), "templates")
    }

    pub(crate) fn skills_dir(&self) -> PathBuf {
        resolve(self.skills_dir.as_deref(), "skills")
    }

    pub fn faq_dir(&self) -> PathBuf {
        resolve(self.faq_dir.as_deref(), "faq")
    }

    /// Where the review queue's tests and the approved suggestions' proofs are written.
    pub(crate) fn review_dir(&self) -> PathBuf {
        self.revisao
            .pasta
            .clone()
            .unwrap_or_else(|| self.data_dir.join("revisao"))
    }

    pub(crate) fn prompts_dir(&self) -> PathBuf {
        resolve(self.prompts_dir.as_deref(), "prompts")
    }

    pub fn intents_file(&self) -> PathBuf {
        match &self.intents_file {
            Some(p) => p.clone(),
            None => resolve(None, "intents").join("default.toml"),
        }
    }
}

/// A pending confirmation lives at most a day.
const MAX_CONFIRMATION_TTL_SECS: i64 = 86_400;

/// The configured folder, else the one in the working directory, else the one shipped with the source
/// (so `cargo run` works from any directory of a checkout).
impl crate::channels::Settings for Config {
    fn sections(&self) -> &crate::channels::Sections {
        &self.channels
    }

    fn templates_dir(&self) -> PathBuf {
        Config::templates_dir(self)
    }

    fn notices(&self) -> &crate::channels::whatsapp::NoticesConfig {
        &self.notificacoes
    }

    fn timezone(&self) -> vt_domain::vt::timezone::Timezone {
        self.vt.politicas.timezone.clone()
    }
}

fn resolve(configured: Option<&Path>, name: &str) -> PathBuf {
    if let Some(p) = configured {
        return p.to_path_buf();
    }
    let local = PathBuf::from(name);
    if local.is_dir() {
        return local;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

#[cfg(test)]
mod tests;
