//! The `VT_*` variables over the file: each section takes its own ([`EnvSection`]), so loading is one loop
//! over the sections (a plugged channel's section takes its own as it is read,
//! [`crate::channels::Section::override_from`]). Secrets (API keys, tokens, client secrets) come from
//! here only, never from the file.

use std::collections::HashMap;
use std::path::PathBuf;

use vt_connectors::systems::SystemsConfig;

use super::{Config, ConfigError, LlmConfig, ProviderKind, SimulatorSettings};

/// The process environment as loading reads it: a variable set to empty is unset.
pub(super) struct Env<'a>(pub(super) &'a HashMap<String, String>);

impl Env<'_> {
    /// Variable `name`, when set and not empty.
    pub(super) fn get(&self, name: &str) -> Option<String> {
        self.0.get(name).filter(|v| !v.is_empty()).cloned()
    }

    /// Variable `name` parsed, when set; a value that does not parse is named, never echoed.
    fn parse<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        self.get(name)
            .map(|value| {
                value.parse::<T>().map_err(|e| ConfigError::Env {
                    name: name.to_owned(),
                    message: vt_contract::redact::serde_message(&e.to_string()),
                })
            })
            .transpose()
    }

    /// Variable `name`, parsed, over `field`.
    fn set<T: std::str::FromStr>(&self, name: &str, field: &mut T) -> Result<(), ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        if let Some(value) = self.parse(name)? {
            *field = value;
        }
        Ok(())
    }
}

/// A section that takes `VT_*` variables over the file's values.
pub(super) trait EnvSection {
    fn override_from(&mut self, env: &Env<'_>) -> Result<(), ConfigError>;
}

/// Every section's variables over `config`: the top level's and each section's.
pub(super) fn apply(config: &mut Config, env: &Env<'_>) -> Result<(), ConfigError> {
    top_level(config, env)?;
    let sections: [&mut dyn EnvSection; 11] = [
        &mut config.llm,
        &mut config.transcricao,
        &mut config.systems,
        &mut config.pix,
        &mut config.cartao,
        &mut config.simulator,
        &mut config.recargas,
        &mut config.engine,
        &mut config.http,
        &mut config.console,
        &mut config.storage,
    ];
    for section in sections {
        section.override_from(env)?;
    }
    Ok(())
}

/// The file's top-level keys: where data, the database and the shipped folders are.
fn top_level(config: &mut Config, env: &Env<'_>) -> Result<(), ConfigError> {
    env.set("VT_DATA_DIR", &mut config.data_dir)?;
    let folders: [(&str, &mut Option<PathBuf>); 4] = [
        ("VT_FAQ_DIR", &mut config.faq_dir),
        ("VT_TEMPLATES_DIR", &mut config.templates_dir),
        ("VT_SKILLS_DIR", &mut config.skills_dir),
        ("VT_PROMPTS_DIR", &mut config.prompts_dir),
    ];
    for (name, field) in folders {
        if let Some(v) = env.get(name) {
            *field = Some(PathBuf::from(v));
        }
    }
    if let Some(v) = env.get("VT_DATABASE_URL") {
        config.database_url = Some(v);
    }
    Ok(())
}

impl EnvSection for LlmConfig {
    fn override_from(&mut self, env: &Env<'_>) -> Result<(), ConfigError> {
        if let Some(v) = env.get("VT_LLM_PROVIDER") {
            self.provider = Some(match v.to_ascii_lowercase().as_str() {
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
        for (name, field) in [
            ("VT_LLM_BASE_URL", &mut self.base_url),
            ("VT_LLM_MODEL", &mut self.model),
            ("VT_LLM_API_KEY", &mut self.api_key),
        ] {
            if let Some(v) = env.get(name) {
                *field = Some(v);
            }
        }
        // A fallback's key stays out of the file: `VT_LLM_FALLBACK_1_API_KEY` for the first entry.
        for (i, f) in self.fallback.iter_mut().enumerate() {
            if let Some(v) = env.get(&format!("VT_LLM_FALLBACK_{}_API_KEY", i + 1)) {
                f.api_key = Some(v);
            }
        }
        if let Some(t) = env.parse("VT_LLM_TEMPERATURE")? {
            self.temperature = Some(t);
        }
        env.set("VT_LLM_MAX_TOKENS", &mut self.max_tokens)?;
        env.set("VT_LLM_TIMEOUT_SECS", &mut self.timeout_secs)
    }
}

impl EnvSection for Option<vt_engine::llm::TranscricaoConfig> {
    fn override_from(&mut self, env: &Env<'_>) -> Result<(), ConfigError> {
        // The key alone turns nothing on: `[transcricao]` names the endpoint.
        if let (Some(v), Some(t)) = (env.get("VT_TRANSCRICAO_API_KEY"), self.as_mut()) {
            t.api_key = Some(v);
        }
        Ok(())
    }
}

impl EnvSection for Option<SystemsConfig> {
    fn override_from(&mut self, env: &Env<'_>) -> Result<(), ConfigError> {
        if let Some(v) = env.get("VT_SYSTEMS_URL") {
            // The base URL moves; how the systems are reached (caps, auth) stays as the file says.
            let file = self.take().unwrap_or_default();
            let base = SystemsConfig::single(&v);
            *self = Some(SystemsConfig {
                saldo_url: base.saldo_url,
                recarga_url: base.recarga_url,
                notificacao_url: base.notificacao_url,
                ..file
            });
        }
        if let Some(systems) = self.take() {
            let (token, secret) = (env.get("VT_SYSTEMS_TOKEN"), env.get("VT_SYSTEMS_CLIENT_SECRET"));
            *self = Some(systems.with_secrets(token.as_deref(), secret.as_deref()));
        }
        Ok(())
    }
}

impl EnvSection for Option<vt_connectors::pix::PixConfig> {
    fn override_from(&mut self, env: &Env<'_>) -> Result<(), ConfigError> {
        if let Some(pix) = self.take() {
            let (token, secret) = (env.get("VT_PIX_TOKEN"), env.get("VT_PIX_CLIENT_SECRET"));
            *self = Some(pix.with_secrets(token.as_deref(), secret.as_deref()));
        }
        Ok(())
    }
}

impl EnvSection for vt_connectors::cartao::CartaoConfig {
    fn override_from(&mut self, env: &Env<'_>) -> Result<(), ConfigError> {
        if let Some(provedor) = env.parse("VT_CARTAO_PROVEDOR")? {
            self.provedor = Some(provedor);
        }
        if let Some(v) = env.get("VT_CARTAO_API_URL") {
            self.api_url = v;
        }
        *self = self.clone().with_secrets(
            env.get("VT_CARTAO_TOKEN").as_deref(),
            env.get("VT_CARTAO_CLIENT_SECRET").as_deref(),
            env.get("VT_CARTAO_WEBHOOK_SECRET").as_deref(),
        );
        Ok(())
    }
}

impl EnvSection for SimulatorSettings {
    fn override_from(&mut self, env: &Env<'_>) -> Result<(), ConfigError> {
        if let Some(v) = env.get("VT_SIMULATOR_FIXTURE") {
            self.fixture = Some(PathBuf::from(v));
        }
        if let Some(v) = env.parse("VT_SIMULATOR_NOTIFICATIONS_PER_SECOND")? {
            self.notifications_per_second = Some(v);
        }
        for (name, field) in [
            (
                "VT_SIMULATOR_PIX_PAGAR_APOS_SEGUNDOS",
                &mut self.pix_pagar_apos_segundos,
            ),
            (
                "VT_SIMULATOR_BOLETO_PAGAR_APOS_SEGUNDOS",
                &mut self.boleto_pagar_apos_segundos,
            ),
        ] {
            if let Some(v) = env.parse(name)? {
                *field = Some(v);
            }
        }
        Ok(())
    }
}

impl EnvSection for vt_store::RecargasConfig {
    fn override_from(&mut self, env: &Env<'_>) -> Result<(), ConfigError> {
        env.set("VT_RECARGAS_RESOLVER_EM_MINUTOS", &mut self.resolver_em_minutos)?;
        env.set(
            "VT_RECARGAS_PRIMEIRA_VERIFICACAO_SEGUNDOS",
            &mut self.primeira_verificacao_segundos,
        )
    }
}

impl EnvSection for vt_engine::EngineConfig {
    fn override_from(&mut self, env: &Env<'_>) -> Result<(), ConfigError> {
        env.set("VT_MAX_MODEL_CALLS", &mut self.max_model_calls)?;
        env.set("VT_TURN_TIMEOUT_MS", &mut self.turn_timeout_ms)
    }
}

impl EnvSection for crate::http::HttpConfig {
    fn override_from(&mut self, env: &Env<'_>) -> Result<(), ConfigError> {
        if let Some(v) = env.get("VT_HTTP_ADDR") {
            self.addr = v;
        }
        Ok(())
    }
}

impl EnvSection for crate::http::console::keys::ConsoleConfig {
    fn override_from(&mut self, env: &Env<'_>) -> Result<(), ConfigError> {
        if let Some(v) = env.get("VT_CONSOLE_SECRET") {
            self.secret = Some(v);
        }
        Ok(())
    }
}

impl EnvSection for vt_store::seal::StorageConfig {
    fn override_from(&mut self, env: &Env<'_>) -> Result<(), ConfigError> {
        if let Some(v) = env.get("VT_ENCRYPTION_KEY") {
            self.encryption_key = Some(v);
        }
        Ok(())
    }
}
