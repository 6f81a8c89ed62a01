//! Configuration: an optional TOML file, then `VT_*` environment variables on top. Every command runs
//! with no configuration at all (SQLite under `./data`, the embedded simulator, no model).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use vt_actions::systems::SystemsConfig;
use vt_actions::tools::VtSettings;

use crate::engine::EngineConfig;
use crate::llm::{AnthropicProvider, LlmProvider, OpenAiProvider, ProviderSettings};

/// The file read when neither `--config` nor `VT_CONFIG` names one (only if it exists).
pub const DEFAULT_CONFIG_FILE: &str = "vt-agent.toml";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("config file {path} is invalid: {message}")]
    Parse { path: String, message: String },
    #[error("environment variable {name}={value:?} is invalid: {message}")]
    Env {
        name: String,
        value: String,
        message: String,
    },
    #[error("model provider could not be set up: {0}")]
    Provider(String),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where the SQLite file and other local data live.
    pub data_dir: PathBuf,
    /// `postgres://...` to share state between instances; SQLite under `data_dir` otherwise.
    pub database_url: Option<String>,
    /// Skill files; defaults to `./skills`, else the folder shipped with the source.
    pub skills_dir: Option<PathBuf>,
    /// Prompt templates; defaults to `./prompts`, else the folder shipped with the source.
    pub prompts_dir: Option<PathBuf>,
    /// The router's default intents (copied into the database when missing there).
    pub intents_file: Option<PathBuf>,
    pub llm: LlmConfig,
    pub engine: EngineConfig,
    /// The external systems. Absent: every command starts the embedded simulator.
    pub systems: Option<SystemsConfig>,
    pub simulator: SimulatorSettings,
    /// Tenant, policies and confirmation time of the conversational tools.
    pub vt: VtSettings,
}

/// The embedded simulator, when it is used.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimulatorSettings {
    /// A JSON file that replaces or extends the magic card table.
    pub fixture: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("data"),
            database_url: None,
            skills_dir: None,
            prompts_dir: None,
            intents_file: None,
            llm: LlmConfig::default(),
            engine: EngineConfig::default(),
            systems: None,
            simulator: SimulatorSettings::default(),
            vt: VtSettings::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Openai,
    Anthropic,
}

/// The model. It is used only when a provider, a base URL or an API key is configured: no key, no
/// model, and the product still runs. A local server (Ollama, vLLM) needs a base URL and no key.
#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    pub provider: Option<ProviderKind>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key: Option<String>,
    pub temperature: Option<f32>,
    pub max_tokens: u32,
    pub timeout_secs: u64,
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
            .finish()
    }
}

impl LlmConfig {
    pub fn is_configured(&self) -> bool {
        self.provider.is_some() || self.base_url.is_some() || self.api_key.is_some()
    }

    /// The provider this configuration asks for, or `None` when no model is configured.
    pub fn provider(&self) -> Result<Option<Arc<dyn LlmProvider>>, ConfigError> {
        if !self.is_configured() {
            return Ok(None);
        }
        let kind = self.provider.unwrap_or(ProviderKind::Openai);
        let (default_url, default_model) = match kind {
            ProviderKind::Openai => (crate::llm::OPENAI_DEFAULT_BASE_URL, "gpt-5-mini"),
            ProviderKind::Anthropic => (crate::llm::ANTHROPIC_DEFAULT_BASE_URL, "claude-sonnet-4-5"),
        };
        let settings = ProviderSettings {
            base_url: self.base_url.clone().unwrap_or_else(|| default_url.to_owned()),
            model: self.model.clone().unwrap_or_else(|| default_model.to_owned()),
            api_key: self.api_key.clone().filter(|k| !k.trim().is_empty()),
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
        Ok(Some(provider))
    }
}

impl Config {
    /// Reads the file (`path`, else `VT_CONFIG`, else `./vt-agent.toml` when present) and the
    /// process environment.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let env: HashMap<String, String> = std::env::vars().filter(|(k, _)| k.starts_with("VT_")).collect();
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

    /// Builds a configuration from a TOML text and `VT_*` variables (the variables win).
    pub fn from_sources(
        toml_text: Option<&str>,
        label: &str,
        env: &HashMap<String, String>,
    ) -> Result<Self, ConfigError> {
        let mut config: Config = match toml_text {
            Some(t) => toml::from_str(t).map_err(|e| ConfigError::Parse {
                path: label.to_owned(),
                message: e.to_string(),
            })?,
            None => Config::default(),
        };
        let get = |name: &str| env.get(name).filter(|v| !v.is_empty()).cloned();
        fn parse<T: std::str::FromStr>(name: &str, value: String) -> Result<T, ConfigError>
        where
            T::Err: std::fmt::Display,
        {
            value.parse::<T>().map_err(|e| ConfigError::Env {
                name: name.to_owned(),
                message: e.to_string(),
                value,
            })
        }
        if let Some(v) = get("VT_DATA_DIR") {
            config.data_dir = PathBuf::from(v);
        }
        if let Some(v) = get("VT_DATABASE_URL") {
            config.database_url = Some(v);
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
                        value: v,
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
            let cap = config.systems.as_ref().and_then(|s| s.timeout_cap_ms);
            config.systems = Some(SystemsConfig {
                timeout_cap_ms: cap,
                ..SystemsConfig::single(&v)
            });
        }
        if let Some(v) = get("VT_SIMULATOR_FIXTURE") {
            config.simulator.fixture = Some(PathBuf::from(v));
        }
        if let Some(v) = get("VT_MAX_MODEL_CALLS") {
            config.engine.max_model_calls = parse("VT_MAX_MODEL_CALLS", v)?;
        }
        Ok(config)
    }

    pub fn skills_dir(&self) -> PathBuf {
        resolve(self.skills_dir.as_deref(), "skills")
    }

    pub fn prompts_dir(&self) -> PathBuf {
        resolve(self.prompts_dir.as_deref(), "prompts")
    }

    pub fn intents_file(&self) -> PathBuf {
        match &self.intents_file {
            Some(p) => p.clone(),
            None => resolve(None, "intents").join("default.toml"),
        }
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
    fn bad_values_are_named() {
        let err =
            Config::from_sources(None, "", &env(&[("VT_LLM_MAX_TOKENS", "muitos")])).expect_err("invalid");
        assert!(
            err.to_string().contains("VT_LLM_MAX_TOKENS") && err.to_string().contains("muitos"),
            "{err}"
        );
        let err = Config::from_sources(Some("[llm]\nmodelo = 1\n"), "x.toml", &HashMap::new())
            .expect_err("unknown");
        assert!(err.to_string().contains("x.toml"), "{err}");
    }

    #[test]
    fn api_key_never_shows_in_debug() {
        let c = Config::from_sources(None, "", &env(&[("VT_LLM_API_KEY", "sk-secret-123")])).expect("valid");
        assert!(!format!("{c:?}").contains("sk-secret-123"));
    }
}
