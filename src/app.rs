//! Wiring: builds the engine (actions, prompts, skills, model) from a [`Config`]. The one place that
//! knows every part; commands and tests start here.

use std::sync::Arc;

use anyhow::Context as _;
use vt_actions::ActionRegistry;
use vt_actions::context::Extensions;

use crate::config::Config;
use crate::engine::{Catalog, Engine, Prompts};
use crate::llm::LlmProvider;

/// Every action the product ships.
pub fn registry() -> anyhow::Result<ActionRegistry> {
    let mut registry = ActionRegistry::new();
    vt_actions::register_all(&mut registry)?;
    Ok(registry)
}

/// Loads prompts and skills from the configured folders and checks them against the registry.
pub fn catalog(config: &Config, registry: &ActionRegistry) -> anyhow::Result<(Catalog, Prompts)> {
    let prompts_dir = config.prompts_dir();
    let prompts = Prompts::load(&prompts_dir)
        .with_context(|| format!("loading prompts from {}", prompts_dir.display()))?;
    let skills_dir = config.skills_dir();
    let catalog = Catalog::load(&skills_dir, &prompts, registry)
        .with_context(|| format!("loading skills from {}", skills_dir.display()))?;
    Ok((catalog, prompts))
}

/// The engine as the configuration describes it. `llm` overrides the configured model (tests pass a
/// scripted one).
pub fn engine(
    config: &Config,
    llm: Option<Arc<dyn LlmProvider>>,
    extensions: Extensions,
) -> anyhow::Result<Engine> {
    let registry = registry()?;
    let (catalog, prompts) = catalog(config, &registry)?;
    let llm = match llm {
        Some(l) => Some(l),
        None => config.llm.provider()?,
    };
    Ok(Engine::new(catalog, prompts, registry, config.engine.clone())
        .with_llm(llm)
        .with_extensions(extensions))
}
