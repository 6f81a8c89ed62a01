//! Configuration: an optional TOML file, then `VT_*` environment variables on top. Every command runs
//! with no configuration at all (SQLite under `./data`, the embedded simulator, no model).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

pub(crate) mod reference;

use vt_actions::systems::SystemsConfig;
use vt_actions::tools::VtSettings;

use crate::engine::EngineConfig;
use crate::llm::{AnthropicProvider, LlmProvider, OpenAiProvider, ProviderSettings};

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
    pub recargas: crate::store::RecargasConfig,
    /// The external systems. Absent: every command starts the embedded simulator.
    pub systems: Option<SystemsConfig>,
    /// The operator's payment provider (API Pix). Absent: the embedded simulator is the provider
    /// where it runs the systems too.
    pub pix: Option<vt_actions::pix::PixConfig>,
    /// `[cartao]`: who takes a chat recharge paid by card. Absent beside real systems: such a recharge
    /// is refused.
    pub cartao: vt_actions::cartao::CartaoConfig,
    /// `[transcricao]`: voice notes heard through an OpenAI-compatible transcription endpoint. Absent:
    /// a voice note gets the text-only answer.
    pub transcricao: Option<crate::llm::TranscricaoConfig>,
    /// `[fotos]`: card photos read locally with Tesseract, when it is installed.
    pub fotos: crate::ocr::FotosConfig,
    /// `[custos]`: prices, for what each turn costs in reais.
    pub custos: crate::costs::CustosConfig,
    /// `[[orcamentos]]`: a monthly budget in reais per tenant.
    pub orcamentos: Vec<crate::service::Orcamento>,
    /// `[[equipes]]`: support teams — who answers which cases, how they are assigned, business hours,
    /// holidays and SLA. None: one team, `atendimento`, whose cases are claimed by hand.
    pub equipes: Vec<crate::service::Equipe>,
    /// `[resultados]`: when a conversation's stretch is over (its outcome), the satisfaction question.
    pub resultados: crate::service::ResultadosConfig,
    pub simulator: SimulatorSettings,
    /// Tenant, policies and confirmation time of the conversational tools.
    pub vt: VtSettings,
    /// `vt-agent serve`: address, limits, API keys.
    pub http: crate::http::HttpConfig,
    /// The WhatsApp Cloud API channel (on when `phone_number_id` and `access_token` are set).
    pub whatsapp: crate::channels::whatsapp::WhatsAppConfig,
    /// The Mattermost channel (on when a slash or webhook token is set).
    pub mattermost: crate::channels::mattermost::MattermostConfig,
    /// The chat on the operators' own sites (on when it lists a tenant): `/webchat/widget.js`.
    pub webchat: crate::channels::webchat::WebchatConfig,
    /// The web console at `/console` (session secret, session length).
    pub console: crate::http::console::ConsoleConfig,
    /// OTLP export of traces and metrics (off unless configured here or by `OTEL_*`/`LANGFUSE_*`).
    pub otlp: crate::telemetry::otlp::OtlpConfig,
    /// The data keys of what is sealed at rest (else the key file beside the database).
    pub storage: crate::store::seal::StorageConfig,
    /// How long conversations and flow runs are kept.
    pub retencao: crate::retention::RetentionConfig,
    /// Where traces go, resolved from `[otlp]` and the environment when loaded.
    #[serde(skip)]
    pub otlp_target: Option<crate::telemetry::otlp::OtlpTarget>,
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
            recargas: crate::store::RecargasConfig::default(),
            systems: None,
            pix: None,
            cartao: Default::default(),
            transcricao: None,
            fotos: crate::ocr::FotosConfig::default(),
            custos: crate::costs::CustosConfig::default(),
            orcamentos: Vec::new(),
            equipes: Vec::new(),
            resultados: crate::service::ResultadosConfig::default(),
            simulator: SimulatorSettings::default(),
            vt: VtSettings::default(),
            http: crate::http::HttpConfig::default(),
            whatsapp: crate::channels::whatsapp::WhatsAppConfig::default(),
            webchat: crate::channels::webchat::WebchatConfig::default(),
            mattermost: crate::channels::mattermost::MattermostConfig::default(),
            console: crate::http::console::ConsoleConfig::default(),
            otlp: crate::telemetry::otlp::OtlpConfig::default(),
            storage: crate::store::seal::StorageConfig::default(),
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
            (None, Some(ProviderKind::Anthropic)) => crate::llm::ANTHROPIC_DEFAULT_BASE_URL.to_owned(),
            (None, _) => crate::llm::OPENAI_DEFAULT_BASE_URL.to_owned(),
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
        Ok(Some(crate::llm::Fallback::wrap(primary, fallbacks)))
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
            ProviderKind::Openai => (crate::llm::OPENAI_DEFAULT_BASE_URL, "gpt-5-mini"),
            ProviderKind::Anthropic => (crate::llm::ANTHROPIC_DEFAULT_BASE_URL, "claude-sonnet-4-5"),
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
        let breaker = crate::llm::BreakerConfig {
            failures: self.circuit_failures.max(1),
            open_for: Duration::from_secs(self.circuit_open_secs),
        };
        Ok(crate::llm::CircuitBreaker::wrap(provider, breaker))
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
        let mut config: Config = match toml_text {
            Some(t) => parse_toml(t, label)?,
            None => Config::default(),
        };
        let get = |name: &str| env.get(name).filter(|v| !v.is_empty()).cloned();
        fn parse<T: std::str::FromStr>(name: &str, value: String) -> Result<T, ConfigError>
        where
            T::Err: std::fmt::Display,
        {
            value.parse::<T>().map_err(|e| ConfigError::Env {
                name: name.to_owned(),
                message: vt_actions::redact::serde_message(&e.to_string()),
            })
        }
        if let Some(v) = get("VT_DATA_DIR") {
            config.data_dir = PathBuf::from(v);
        }
        if let Some(v) = get("VT_DATABASE_URL") {
            config.database_url = Some(v);
        }
        if let Some(v) = get("VT_FAQ_DIR") {
            config.faq_dir = Some(PathBuf::from(v));
        }
        if let Some(v) = get("VT_TEMPLATES_DIR") {
            config.templates_dir = Some(PathBuf::from(v));
        }
        if let Some(v) = get("VT_SKILLS_DIR") {
            config.skills_dir = Some(PathBuf::from(v));
        }
        if let Some(v) = get("VT_PROMPTS_DIR") {
            config.prompts_dir = Some(PathBuf::from(v));
        }
        if let Some(v) = get("VT_LLM_PROVIDER") {
            config.llm.provider = Some(match v.to_ascii_lowercase().as_str() {
                "openai" => ProviderKind::Openai,
                "anthropic" => ProviderKind::Anthropic,
                _ => {
                    return Err(ConfigError::Env {
                        name: "VT_LLM_PROVIDER".into(),
                        message: "expected openai or anthropic".into(),
                    });
                }
            });
        }
        if let Some(v) = get("VT_LLM_BASE_URL") {
            config.llm.base_url = Some(v);
        }
        if let Some(v) = get("VT_LLM_MODEL") {
            config.llm.model = Some(v);
        }
        if let Some(v) = get("VT_LLM_API_KEY") {
            config.llm.api_key = Some(v);
        }
        // A fallback's key stays out of the file: `VT_LLM_FALLBACK_1_API_KEY` for the first entry.
        for (i, f) in config.llm.fallback.iter_mut().enumerate() {
            if let Some(v) = get(&format!("VT_LLM_FALLBACK_{}_API_KEY", i + 1)) {
                f.api_key = Some(v);
            }
        }
        if let Some(v) = get("VT_TRANSCRICAO_API_KEY") {
            // The key alone turns nothing on: `[transcricao]` names the endpoint.
            if let Some(t) = config.transcricao.as_mut() {
                t.api_key = Some(v);
            }
        }
        if let Some(v) = get("VT_LLM_TEMPERATURE") {
            config.llm.temperature = Some(parse("VT_LLM_TEMPERATURE", v)?);
        }
        if let Some(v) = get("VT_LLM_MAX_TOKENS") {
            config.llm.max_tokens = parse("VT_LLM_MAX_TOKENS", v)?;
        }
        if let Some(v) = get("VT_LLM_TIMEOUT_SECS") {
            config.llm.timeout_secs = parse("VT_LLM_TIMEOUT_SECS", v)?;
        }
        if let Some(v) = get("VT_SYSTEMS_URL") {
            // The base URL moves; how the systems are reached (caps, auth) stays as the file says.
            let file = config.systems.take().unwrap_or_default();
            let base = SystemsConfig::single(&v);
            config.systems = Some(SystemsConfig {
                saldo_url: base.saldo_url,
                recarga_url: base.recarga_url,
                notificacao_url: base.notificacao_url,
                ..file
            });
        }
        if let Some(systems) = config.systems.take() {
            // Secrets may come from the environment only, never written in the file.
            let token = get("VT_SYSTEMS_TOKEN");
            let secret = get("VT_SYSTEMS_CLIENT_SECRET");
            config.systems = Some(systems.with_secrets(token.as_deref(), secret.as_deref()));
        }
        if let Some(pix) = config.pix.take() {
            let token = get("VT_PIX_TOKEN");
            let secret = get("VT_PIX_CLIENT_SECRET");
            config.pix = Some(pix.with_secrets(token.as_deref(), secret.as_deref()));
        }
        if let Some(v) = get("VT_CARTAO_PROVEDOR") {
            config.cartao.provedor = Some(parse("VT_CARTAO_PROVEDOR", v)?);
        }
        if let Some(v) = get("VT_CARTAO_API_URL") {
            config.cartao.api_url = v;
        }
        // Secrets from the environment only, never written in the file.
        config.cartao = config.cartao.clone().with_secrets(
            get("VT_CARTAO_TOKEN").as_deref(),
            get("VT_CARTAO_CLIENT_SECRET").as_deref(),
            get("VT_CARTAO_WEBHOOK_SECRET").as_deref(),
        );
        if let Some(v) = get("VT_SIMULATOR_FIXTURE") {
            config.simulator.fixture = Some(PathBuf::from(v));
        }
        if let Some(v) = get("VT_SIMULATOR_NOTIFICATIONS_PER_SECOND") {
            config.simulator.notifications_per_second =
                Some(parse("VT_SIMULATOR_NOTIFICATIONS_PER_SECOND", v)?);
        }
        if let Some(v) = get("VT_SIMULATOR_PIX_PAGAR_APOS_SEGUNDOS") {
            config.simulator.pix_pagar_apos_segundos =
                Some(parse("VT_SIMULATOR_PIX_PAGAR_APOS_SEGUNDOS", v)?);
        }
        if let Some(v) = get("VT_SIMULATOR_BOLETO_PAGAR_APOS_SEGUNDOS") {
            config.simulator.boleto_pagar_apos_segundos =
                Some(parse("VT_SIMULATOR_BOLETO_PAGAR_APOS_SEGUNDOS", v)?);
        }
        if let Some(v) = get("VT_RECARGAS_RESOLVER_EM_MINUTOS") {
            config.recargas.resolver_em_minutos = parse("VT_RECARGAS_RESOLVER_EM_MINUTOS", v)?;
        }
        if let Some(v) = get("VT_RECARGAS_PRIMEIRA_VERIFICACAO_SEGUNDOS") {
            config.recargas.primeira_verificacao_segundos =
                parse("VT_RECARGAS_PRIMEIRA_VERIFICACAO_SEGUNDOS", v)?;
        }
        if let Some(v) = get("VT_MAX_MODEL_CALLS") {
            config.engine.max_model_calls = parse("VT_MAX_MODEL_CALLS", v)?;
        }
        if let Some(v) = get("VT_HTTP_ADDR") {
            config.http.addr = v;
        }
        // A channel's section takes its own `VT_*` variables.
        config.whatsapp.override_from(&get);
        config.mattermost.override_from(&get);
        config.webchat.override_from(&get);
        if let Some(v) = get("VT_CONSOLE_SECRET") {
            config.console.secret = Some(v);
        }
        if let Some(v) = get("VT_ENCRYPTION_KEY") {
            config.storage.encryption_key = Some(v);
        }
        if let Some(v) = get("VT_TURN_TIMEOUT_MS") {
            config.engine.turn_timeout_ms = parse("VT_TURN_TIMEOUT_MS", v)?;
        }
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
            config.retencao.simulator_book = Some(config.data_dir.join(vt_actions::systems::book::FILE));
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
            vt_actions::redact::register_secret(key);
        }
        config.http.register_secrets();
        config.whatsapp.register_secrets();
        config.mattermost.register_secrets();
        config.webchat.register_secrets();
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
        if let Some((field, message)) = self.pix.as_ref().and_then(vt_actions::pix::PixConfig::problem) {
            return invalid(&field, message);
        }
        if let Some((field, message)) = self.cartao.problem() {
            return invalid(&field, message);
        }
        if let Some((field, message)) = self
            .transcricao
            .as_ref()
            .and_then(crate::llm::TranscricaoConfig::problem)
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
        if let Err((field, message)) = self.retencao.validate() {
            return invalid(field, message);
        }
        if let Err((field, message)) = self.recargas.validate() {
            return invalid(&field, message);
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
        if self.handoff.mattermost_channel_id.is_some()
            && (self.mattermost.bot_token.is_none() || self.mattermost.url.is_none())
        {
            return invalid(
                "handoff.mattermost_channel_id",
                "precisa do bot do Mattermost ([mattermost] url e bot_token) para publicar os atendimentos",
            );
        }
        if self.engine.turn_timeout_ms == 0 {
            return invalid("engine.turn_timeout_ms", "deve ser pelo menos 1");
        }
        if let Err((field, message)) = self.http.validate() {
            return invalid(&field, message);
        }
        if let Err((field, message)) = self.whatsapp.validate() {
            return invalid(field, message);
        }
        if let Err((field, message)) = self.mattermost.validate() {
            return invalid(field, message);
        }
        if let Err((field, message)) = self.webchat.validate() {
            return invalid(&field, message);
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

/// A TOML error as the line and column plus what was wrong, without the file's text (which toml's own
/// message quotes, and which can be a secret) and without the values serde quotes.
/// Keys that moved to another section, read where they were as well: (old section, old key, new
/// section, new key).
const MOVED: [(&str, &str, &str, &str); 2] = [
    ("engine", "channel_retry", "outbox", "retry"),
    ("engine", "persist_retry", "service", "persist_retry"),
];

/// The TOML text as a configuration, with [`MOVED`] keys taken to their sections (said once on
/// stderr; the new place wins when both are set).
fn parse_toml(text: &str, label: &str) -> Result<Config, ConfigError> {
    let mut table: toml::Table = text.parse().map_err(|e| syntax_error(label, text, &e))?;
    let mut moved = false;
    for (section, key, to_section, to_key) in MOVED {
        let Some(value) = table
            .get_mut(section)
            .and_then(toml::Value::as_table_mut)
            .and_then(|s| s.remove(key))
        else {
            continue;
        };
        moved = true;
        eprintln!("aviso: {label}: [{section}] {key} mudou para [{to_section}] {to_key}");
        let target = table
            .entry(to_section)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let Some(target) = target.as_table_mut() {
            target.entry(to_key).or_insert(value);
        }
    }
    // The error names the key whose value is wrong (`llm.max_tokens`), as well as where it is.
    let keyed = |e: serde_path_to_error::Error<toml::de::Error>| {
        let key = e.path().to_string();
        parse_error(label, text, e.inner(), &key)
    };
    if !moved {
        // Parsed from the text, errors keep their line and column.
        let de = toml::Deserializer::parse(text).map_err(|e| syntax_error(label, text, &e))?;
        return serde_path_to_error::deserialize(de).map_err(keyed);
    }
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(keyed)
}

/// A file that is not TOML, where (line and column) and what, in pt-BR words: the parser's English
/// ("unclosed table, expected `]`") never reaches the operator, nor the text there.
fn syntax_error(path: &str, text: &str, e: &toml::de::Error) -> ConfigError {
    let raw = e.message();
    let what = [
        ("unclosed table", "tabela sem o ] que a fecha"),
        ("unclosed array", "lista sem o ] que a fecha"),
        ("invalid table header", "cabeçalho de tabela inválido"),
        ("duplicate key", "chave repetida"),
        ("invalid key", "chave inválida"),
        ("invalid string", "texto inválido (aspas sem fechamento?)"),
        ("invalid basic string", "texto inválido (aspas sem fechamento?)"),
        ("invalid literal string", "texto inválido (aspas sem fechamento?)"),
        ("invalid inline table", "tabela em linha inválida"),
        ("invalid array", "lista inválida"),
        ("invalid number", "número inválido"),
        ("invalid date", "data inválida"),
        ("missing value", "falta o valor depois do ="),
        ("expected newline", "esperada uma nova linha"),
    ]
    .iter()
    .find(|(english, _)| raw.trim_start().starts_with(english))
    .map_or("sintaxe TOML inválida", |(_, pt)| pt);
    match parse_error(path, text, e, "") {
        ConfigError::Parse { path, at, .. } => ConfigError::Parse {
            path,
            at,
            message: what.to_owned(),
        },
        other => other,
    }
}

/// The file's error at `path`, where it is (line and column) and on which `key` when known, never the
/// text there (it could be a secret).
fn parse_error(path: &str, text: &str, e: &toml::de::Error, key: &str) -> ConfigError {
    let mut at = e
        .span()
        .map(|span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!(" na linha {line}, coluna {column}")
        })
        .unwrap_or_default();
    if !key.is_empty() && key != "." {
        at.push_str(&format!(" (chave {key})"));
    }
    let message = vt_actions::redact::serde_message(e.message());
    ConfigError::Parse {
        path: path.to_owned(),
        at,
        message: vt_actions::redact::secrets(&message).into_owned(),
    }
}

/// The configured folder, else the one in the working directory, else the one shipped with the source
/// (so `cargo run` works from any directory of a checkout).
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
mod tests {
    use super::*;
    use crate::engine::RetryPolicy;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn no_configuration_means_no_model() {
        let c = Config::from_sources(None, "", &HashMap::new()).expect("defaults");
        assert!(!c.llm.is_configured());
        assert!(c.llm.provider().expect("ok").is_none());
        assert_eq!(c.engine.max_model_calls, 10);
        assert_eq!(c.data_dir, PathBuf::from("data"));
    }

    #[test]
    fn retries_that_moved_out_of_engine_are_still_read_there() {
        let old = "[engine]\nmax_model_calls = 4\npersist_retry = { attempts = 2, backoff_ms = 10 }\n\
                   channel_retry = { attempts = 7, backoff_ms = 20 }\n";
        let c = Config::from_sources(Some(old), "f", &HashMap::new()).expect("valid");
        assert_eq!(c.service.persist_retry, RetryPolicy::new(2, 10));
        assert_eq!(c.outbox.retry, RetryPolicy::new(7, 20));
        assert_eq!(c.engine.max_model_calls, 4);
        // The new place wins when both are set; a bad key in it is still named.
        let both = "[engine]\npersist_retry = { attempts = 2, backoff_ms = 10 }\n\
                    [service]\npersist_retry = { attempts = 4, backoff_ms = 1 }\n";
        let c = Config::from_sources(Some(both), "f", &HashMap::new()).expect("valid");
        assert_eq!(c.service.persist_retry, RetryPolicy::new(4, 1));
        let bad = "[engine]\npersist_retry = { attempts = 2, backoff_ms = 10 }\n[outbox]\nretri = 3\n";
        let err = Config::from_sources(Some(bad), "f", &HashMap::new()).expect_err("unknown key");
        assert!(err.to_string().contains("retri"), "{err}");
    }

    #[test]
    fn support_teams_are_checked_when_loaded_naming_the_field() {
        let ok = "[[equipes]]\nnome = \"financeiro\"\nmembros = [\"ana\"]\natribuicao = \"rodizio\"\n\
                  horario = \"seg-sex 08:00-12:00,13:00-18:00\"\nferiados = [\"2026-01-25\"]\n\
                  motivos = [\"pagamento_nao_creditado\"]\n[equipes.sla]\nprimeira_resposta = 30\n";
        let c = Config::from_sources(Some(ok), "f", &HashMap::new()).expect("valid");
        assert_eq!(c.equipes[0].sla.primeira_resposta, Some(30));
        for (bad, field) in [
            (
                "[[equipes]]\nnome = \"a\"\natribuicao = \"rodizio\"\n",
                "equipes[0].membros",
            ),
            ("[[equipes]]\nnome = \"a\"\nmotivos = [\"qualquer\"]\n", "motivos"),
            ("[[equipes]]\nnome = \"a\"\nhorario = \"sempre\"\n", "horario"),
            ("[[equipes]]\nnome = \"a\"\nferiados = [\"25/01\"]\n", "feriados"),
        ] {
            let err = Config::from_sources(Some(bad), "f", &HashMap::new()).expect_err(bad);
            assert!(err.to_string().contains(field), "{field}: {err}");
        }
    }

    #[test]
    fn handoff_hours_are_checked_when_loaded() {
        let ok = "[handoff]\nclaim_timeout_minutes = 5\nhours = \"seg-sex 08:00-18:00\"\n";
        let c = Config::from_sources(Some(ok), "f", &HashMap::new()).expect("valid");
        assert_eq!(c.handoff.claim_timeout_minutes, 5);
        assert!(c.handoff.hours.is_some());
        let bad = "[handoff]\nhours = \"sempre\"\n";
        let err = Config::from_sources(Some(bad), "f", &HashMap::new()).expect_err("bad hours");
        assert!(err.to_string().contains("handoff.hours"), "{err}");
        let zero = "[handoff]\nclaim_timeout_minutes = 0\n";
        let err = Config::from_sources(Some(zero), "f", &HashMap::new()).expect_err("zero");
        assert!(err.to_string().contains("handoff.claim_timeout_minutes"), "{err}");
    }

    #[test]
    fn the_pix_provider_is_checked_when_loaded_and_its_secret_comes_from_the_environment() {
        let pix = "[pix]\napi_url = \"https://pix.banco.example.com/api/v2\"\nchave = \"recargas@operadora.example.com.br\"\n[pix.auth]\nkind = \"oauth2\"\ntoken_url = \"https://pix.banco.example.com/oauth/token\"\nclient_id = \"vt-agent\"\n[pix.tls]\nclient_cert = \"certs/vt.pem\"\nclient_key = \"certs/vt.key\"\n";
        let err = Config::from_sources(Some(pix), "f", &HashMap::new()).expect_err("no secret");
        assert!(err.to_string().contains("pix.auth.client_secret"), "{err}");
        assert!(err.to_string().contains("VT_PIX_CLIENT_SECRET"), "{err}");
        let env: HashMap<String, String> =
            [("VT_PIX_CLIENT_SECRET".to_owned(), "segredo-pix-456".to_owned())].into();
        let c = Config::from_sources(Some(pix), "f", &env).expect("the secret from the environment");
        let loaded = c.pix.expect("pix");
        assert_eq!(
            (loaded.expiracao_minutos, loaded.novos_codigos_max),
            (15, 3),
            "the defaults"
        );
        assert!(
            !format!("{loaded:?}").contains("segredo-pix-456"),
            "Debug hides it"
        );
        let plain = pix.replace("https://pix.banco", "http://pix.banco");
        let err = Config::from_sources(Some(&plain), "f", &env).expect_err("http provider");
        assert!(err.to_string().contains("pix.api_url"), "{err}");
        let zero = pix.replace("[pix.auth]", "expiracao_minutos = 0\n[pix.auth]");
        let err = Config::from_sources(Some(&zero), "f", &env).expect_err("zero minutes");
        assert!(err.to_string().contains("pix.expiracao_minutos"), "{err}");
        let unknown = pix.replace("[pix.auth]", "chave_pix = \"x\"\n[pix.auth]");
        let err = Config::from_sources(Some(&unknown), "f", &env).expect_err("unknown field");
        assert!(err.to_string().contains("chave_pix"), "{err}");
    }

    #[test]
    fn the_systems_auth_is_checked_when_loaded_and_its_secrets_come_from_the_environment() {
        use vt_actions::systems::AuthConfig;
        let oauth2 = "[systems]\nsaldo_url = \"https://vt.example.com\"\nrecarga_url = \"https://pag.example.com\"\nnotificacao_url = \"https://msg.example.com\"\n[systems.auth]\nkind = \"oauth2\"\ntoken_url = \"https://auth.example.com/oauth/token\"\nclient_id = \"vt-agent\"\n";
        let err = Config::from_sources(Some(oauth2), "f", &HashMap::new()).expect_err("no secret");
        assert!(err.to_string().contains("systems.auth.client_secret"), "{err}");
        let env: HashMap<String, String> = [(
            "VT_SYSTEMS_CLIENT_SECRET".to_owned(),
            "segredo-do-cliente-123".to_owned(),
        )]
        .into();
        let c = Config::from_sources(Some(oauth2), "f", &env).expect("the secret from the environment");
        let systems = c.systems.expect("systems");
        assert!(
            matches!(&systems.auth, AuthConfig::Oauth2 { client_secret, .. } if client_secret == "segredo-do-cliente-123")
        );
        assert!(
            !format!("{systems:?}").contains("segredo-do-cliente-123"),
            "Debug hides it"
        );
        let plain = oauth2.replace("https://auth.example.com", "http://auth.example.com");
        let err = Config::from_sources(Some(&plain), "f", &env).expect_err("http token endpoint");
        assert!(err.to_string().contains("systems.auth.token_url"), "{err}");
        let loopback = oauth2.replace("https://auth.example.com", "http://127.0.0.1:9");
        assert!(
            Config::from_sources(Some(&loopback), "f", &env).is_ok(),
            "loopback may be http"
        );
        let own = "[systems]\nsaldo_url = \"https://vt.example.com\"\n[systems.recarga.auth]\nkind = \"header\"\nheader = \"x-api-key\"\n";
        let err = Config::from_sources(Some(own), "f", &HashMap::new()).expect_err("no token");
        assert!(err.to_string().contains("systems.recarga.auth.token"), "{err}");
        let unknown = "[systems.auth]\nkind = \"kerberos\"\n";
        let err = Config::from_sources(Some(unknown), "f", &HashMap::new()).expect_err("unknown kind");
        assert!(!err.to_string().contains("kerberos"), "{err}");
    }

    #[test]
    fn the_examples_commented_price_table_loads_when_uncommented() {
        let text = include_str!("../../examples/vt-agent.toml");
        let block: String = text
            .lines()
            .skip_while(|l| !l.starts_with("# [custos]"))
            .take_while(|l| !l.is_empty())
            .filter(|l| !l.starts_with("# Public") && !l.starts_with("# their"))
            .map(|l| format!("{}\n", l.trim_start_matches("# ")))
            .collect();
        let c = Config::from_sources(Some(&block), "f", &HashMap::new()).expect("it loads");
        assert_eq!(c.custos.moeda, "USD");
        assert!(c.custos.modelos.contains_key("gpt-5-mini") && c.custos.modelos.contains_key("whisper-1"));
        assert!(c.custos.message_brl("UTILITY").is_some());
        let bad = "[custos]\ncambio_brl = 0\n";
        let err = Config::from_sources(Some(bad), "f", &HashMap::new()).expect_err("a zero rate");
        assert!(err.to_string().contains("custos.cambio_brl"), "{err}");
    }

    #[test]
    fn the_example_file_loads_and_says_the_defaults() {
        let text = include_str!("../../examples/vt-agent.toml");
        let c =
            Config::from_sources(Some(text), "examples/vt-agent.toml", &HashMap::new()).expect("it loads");
        let d = Config::default();
        assert_eq!(c.data_dir, d.data_dir);
        assert_eq!(c.llm.max_tokens, d.llm.max_tokens);
        assert_eq!(c.engine.max_model_calls, d.engine.max_model_calls);
        assert_eq!(c.engine.turn_timeout_ms, d.engine.turn_timeout_ms);
        assert_eq!(c.outbox, d.outbox);
        assert_eq!(c.handoff, d.handoff);
        assert_eq!(c.notificacoes, d.notificacoes);
        assert_eq!(c.http.addr, d.http.addr);
        assert_eq!(c.http.rate_per_minute, d.http.rate_per_minute);
        assert_eq!(c.whatsapp, d.whatsapp);
        assert_eq!(c.vt.politicas, d.vt.politicas);
        assert_eq!(c.retencao.dias, d.retencao.dias);
        // The commented [pix] and [cartao] sections, uncommented, load; [pix] says its defaults.
        let pix: String = text
            [text.find("# [pix]").expect("[pix]")..text.find("[simulator]").expect("after")]
            .lines()
            .map(|l| l.trim_start_matches('#').trim_start())
            .filter(|l| !l.is_empty())
            .map(|l| format!("{l}\n"))
            .collect();
        let env: HashMap<String, String> = ["VT_PIX_CLIENT_SECRET", "VT_CARTAO_WEBHOOK_SECRET"]
            .iter()
            .map(|k| ((*k).to_owned(), "s".to_owned()))
            .collect();
        let pix = Config::from_sources(Some(&pix), "pix", &env)
            .expect("[pix] loads")
            .pix
            .expect("pix");
        let defaults = vt_actions::pix::PixConfig::default();
        assert_eq!(
            (
                pix.expiracao_minutos,
                pix.novos_codigos_max,
                pix.whatsapp_order_details,
                pix.timeout_ms,
                pix.varredura_segundos,
                pix.retomar_credito_segundos
            ),
            (
                defaults.expiracao_minutos,
                defaults.novos_codigos_max,
                defaults.whatsapp_order_details,
                defaults.timeout_ms,
                defaults.varredura_segundos,
                defaults.retomar_credito_segundos
            )
        );
    }

    #[test]
    fn automatic_recharges_are_checked_when_loaded_and_alone_serve_the_simulator() {
        let alone = "[pix.automatico]\nativo = true\n";
        let c = Config::from_sources(Some(alone), "f", &HashMap::new()).expect("valid");
        let pix = c.pix.expect("the section");
        assert!(
            pix.automatico.ativo && pix.simulated(),
            "no provider: the embedded simulator's"
        );
        for (bad, field) in [
            ("antecedencia_dias = 1", "pix.automatico.antecedencia_dias"),
            ("antecedencia_dias = 11", "pix.automatico.antecedencia_dias"),
            ("periodicidades = []", "pix.automatico.periodicidades"),
            ("valor_padrao = 500.00", "pix.automatico.valor_padrao"),
            ("valor_maximo = -1", "pix.automatico.valor_maximo"),
        ] {
            let text = format!("{alone}{bad}\n");
            let err = Config::from_sources(Some(&text), "f", &HashMap::new()).expect_err(bad);
            assert!(err.to_string().contains(field), "{bad}: {err}");
        }
        let unknown = format!("{alone}periodicidade = \"MENSAL\"\n");
        let err = Config::from_sources(Some(&unknown), "f", &HashMap::new()).expect_err("unknown key");
        assert!(err.to_string().contains("periodicidade"), "{err}");
    }

    #[test]
    fn notices_restraint_is_checked_when_loaded() {
        let ok = "[notificacoes]\nintervalo_minimo_horas = 12\nsilencio = \"22:00-07:00\"\n";
        let c = Config::from_sources(Some(ok), "f", &HashMap::new()).expect("valid");
        assert_eq!(c.notificacoes.intervalo_minimo_horas, 12);
        let bad = "[notificacoes]\nsilencio = \"de noite\"\n";
        let err = Config::from_sources(Some(bad), "f", &HashMap::new()).expect_err("bad quiet hours");
        assert!(err.to_string().contains("notificacoes.silencio"), "{err}");
        assert!(!err.to_string().contains("de noite"), "never the value: {err}");
    }

    #[test]
    fn environment_overrides_the_file() {
        let toml = "[llm]\nprovider = \"openai\"\nmodel = \"from-file\"\nmax_tokens = 200\n[engine]\nmax_model_calls = 4\n";
        let c = Config::from_sources(
            Some(toml),
            "f",
            &env(&[("VT_LLM_MODEL", "from-env"), ("VT_LLM_PROVIDER", "anthropic")]),
        )
        .expect("valid");
        assert_eq!(c.llm.model.as_deref(), Some("from-env"));
        assert_eq!(c.llm.provider, Some(ProviderKind::Anthropic));
        assert_eq!(c.llm.max_tokens, 200);
        assert_eq!(c.engine.max_model_calls, 4);
        assert!(c.llm.provider().expect("ok").is_some());
    }

    #[test]
    fn a_channels_section_takes_its_own_variables_and_an_empty_one_changes_nothing() {
        let toml =
            "[whatsapp]\nphone_number_id = \"do-arquivo\"\n[mattermost]\nurl = \"https://mm.example\"\n";
        let c = Config::from_sources(
            Some(toml),
            "f",
            &env(&[
                ("VT_WHATSAPP_ACCESS_TOKEN", "EAAtoken"),
                ("VT_WHATSAPP_APP_SECRET", "segredo"),
                ("VT_WHATSAPP_VERIFY_TOKEN", "verifica"),
                ("VT_WHATSAPP_PHONE_NUMBER_ID", ""),
                ("VT_WHATSAPP_API_VERSION", "v99.0"),
                ("VT_MATTERMOST_URL", "https://mm.example.com.br"),
            ]),
        )
        .expect("valid");
        assert_eq!(c.whatsapp.access_token.as_deref(), Some("EAAtoken"));
        assert_eq!(c.whatsapp.phone_number_id.as_deref(), Some("do-arquivo"));
        assert_eq!(c.whatsapp.api_version, "v99.0");
        assert_eq!(c.mattermost.url.as_deref(), Some("https://mm.example.com.br"));
    }

    #[test]
    fn bad_values_are_named_never_echoed() {
        let err =
            Config::from_sources(None, "", &env(&[("VT_LLM_MAX_TOKENS", "muitos")])).expect_err("invalid");
        assert!(
            err.to_string().contains("VT_LLM_MAX_TOKENS") && !err.to_string().contains("muitos"),
            "{err}"
        );
        let err = Config::from_sources(Some("[llm]\nmodelo = 1\n"), "x.toml", &HashMap::new())
            .expect_err("unknown");
        assert!(err.to_string().contains("x.toml"), "{err}");
    }

    #[test]
    fn the_console_secret_comes_from_the_environment_and_is_checked() {
        let c =
            Config::from_sources(None, "", &env(&[("VT_CONSOLE_SECRET", &"s".repeat(40))])).expect("valid");
        assert_eq!(c.console.secret.as_deref().map(str::len), Some(40));
        let err =
            Config::from_sources(None, "", &env(&[("VT_CONSOLE_SECRET", "curtinho")])).expect_err("short");
        let shown = err.to_string();
        assert!(
            shown.contains("console.secret") && !shown.contains("curtinho"),
            "{shown}"
        );
        let err = Config::from_sources(Some("[console]\nsession_minutes = 0\n"), "", &HashMap::new())
            .expect_err("zero");
        assert!(err.to_string().contains("console.session_minutes"), "{err}");
    }

    #[test]
    fn a_toml_error_never_prints_the_line_it_is_on() {
        let text =
            "[llm]\napi_key = \"sk-live-abcdefghijklmnop\"\nmax_tokens = \"sk-live-abcdefghijklmnop\"\n";
        let err = Config::from_sources(Some(text), "vt.toml", &HashMap::new()).expect_err("type");
        let shown = err.to_string();
        assert!(shown.contains("vt.toml") && shown.contains("linha 3"), "{shown}");
        assert!(!shown.contains("sk-live"), "{shown}");
        let text = "[llm]\napi_key = \"sk-live-abcdefghijklmnop\nmodel = 1\n";
        let err = Config::from_sources(Some(text), "vt.toml", &HashMap::new()).expect_err("syntax");
        assert!(!err.to_string().contains("sk-live"), "{err}");
    }

    #[test]
    fn values_are_checked_when_loaded() {
        for (toml, field) in [
            ("[vt]\nconfirmation_ttl_secs = -1\n", "vt.confirmation_ttl_secs"),
            ("[vt]\nconfirmation_ttl_secs = 0\n", "vt.confirmation_ttl_secs"),
            ("[vt.politicas]\nvalor_min = -10.0\n", "vt.politicas.valor_min"),
            (
                "[vt.politicas]\nvalor_min = 10.0\nvalor_max = -10.0\n",
                "vt.politicas.valor_max",
            ),
            (
                "[vt.politicas]\nmoeda_padrao = \"XXZ\"\n",
                "vt.politicas.moeda_padrao",
            ),
            ("[llm]\ntemperature = 9.0\n", "llm.temperature"),
            ("[engine]\nmax_model_calls = 0\n", "engine.max_model_calls"),
            ("[engine]\nturn_timeout_ms = 0\n", "engine.turn_timeout_ms"),
            ("[retencao]\ndias = 0\n", "retencao.dias"),
            (
                "[storage]\nencryption_key = \"curta-demais\"\n",
                "storage.encryption_key",
            ),
        ] {
            let err = Config::from_sources(Some(toml), "f", &HashMap::new()).expect_err(toml);
            assert!(err.to_string().contains(field), "{toml} → {err}");
        }
        let ok = Config::from_sources(Some("[vt]\nconfirmation_ttl_secs = 90\n"), "f", &HashMap::new());
        assert!(ok.is_ok());
    }

    /// Every section refuses a key it does not know, `[vt.politicas]` too (a flow input drops them), and
    /// an error is one language: pt-BR, the accepted names listed, never the value sent.
    #[test]
    fn an_unknown_key_or_value_is_refused_in_one_language_with_what_is_accepted() {
        for (toml, want) in [
            ("[vt.politicas]\nvalor_minimo = 5.0\n", "valor_minimo"),
            (
                "[vt.politicas.validacoes_cartao]\ntamanho = 5\n",
                "validacoes_cartao.tamanho",
            ),
            ("[vt]\ntenant = \"acme\"\n", "tenant"),
        ] {
            let err = Config::from_sources(Some(toml), "f", &HashMap::new())
                .expect_err(toml)
                .to_string();
            assert!(
                err.contains(&format!("campo desconhecido: {want}")),
                "{toml} → {err}"
            );
            assert!(err.contains("aceitos: "), "{toml} → {err}");
        }
        let err = Config::from_sources(Some("[llm]\nprovider = \"openia\"\n"), "f", &HashMap::new())
            .expect_err("unknown provider")
            .to_string();
        assert!(err.contains("openai ou anthropic"), "{err}");
        assert!(!err.contains("openia"), "{err}");
        for english in [" at line ", "expected", "one of", "unknown"] {
            assert!(!err.contains(english), "{err}");
        }
        // An unclosed table header ends on words, not a bare "expected".
        let err = Config::from_sources(Some("[vt\nx = 1\n"), "f", &HashMap::new())
            .expect_err("unclosed")
            .to_string();
        assert!(err.contains("linha 1"), "{err}");
        assert!(!err.contains("expected"), "{err}");
    }

    #[test]
    fn a_bad_data_key_from_the_environment_is_named_never_echoed() {
        let err = Config::from_sources(None, "", &env(&[("VT_ENCRYPTION_KEY", "nao-e-base64-de-32")]))
            .expect_err("bad key");
        assert!(err.to_string().contains("storage.encryption_key"), "{err}");
        assert!(!err.to_string().contains("nao-e-base64-de-32"), "{err}");
        let c = Config::from_sources(
            None,
            "",
            &env(&[(
                "VT_ENCRYPTION_KEY",
                "dGVzdGVzLWRvLXZ0LWFnZW50LWNoYXZlLWRhZG9zISE=",
            )]),
        )
        .expect("valid");
        assert!(
            !format!("{c:?}").contains("dGVzdGVz"),
            "the key stays out of Debug"
        );
    }

    #[test]
    fn api_key_never_shows_in_debug() {
        let c = Config::from_sources(None, "", &env(&[("VT_LLM_API_KEY", "sk-secret-123")])).expect("valid");
        assert!(!format!("{c:?}").contains("sk-secret-123"));
    }
}
