//! Skills as data: `skills/*.toml`, one skill a file, grouped into agents and ordered.
//!
//! A skill names its prompt template and the actions it exposes. A *deterministic* skill has exactly
//! one action, which the engine runs directly with the previous skill's response as its arguments,
//! without a model. Everything is checked when the catalog is built: a missing action, template or
//! next skill is an error naming the file, never a surprise in the middle of a conversation.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use vt_contract::ActionRegistry;

use super::prompts::Prompts;

/// One skill file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillDef {
    /// The agent this skill belongs to (`agente_id`).
    pub agent: String,
    pub name: String,
    /// Position in the agent; the lowest is the agent's entry skill.
    pub order: u32,
    pub description: String,
    /// Template file under `prompts/`.
    pub prompt: String,
    #[serde(default)]
    pub actions: Vec<String>,
    #[serde(default)]
    pub deterministic: bool,
    /// The skill a deterministic skill hands over to when its action answers the agent.
    #[serde(default)]
    pub next: Option<String>,
}

#[derive(Debug, Clone)]
pub struct AgentDef {
    pub id: String,
    /// Sorted by `order`.
    pub skills: Vec<SkillDef>,
}

impl AgentDef {
    pub fn entry(&self) -> &SkillDef {
        // Non-empty by construction in `Catalog::from_defs`.
        &self.skills[0]
    }

    pub fn skill(&self, name: &str) -> Option<&SkillDef> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// Every skill is deterministic: no model ever reads this agent's history (a flow's chain).
    pub fn is_chain(&self) -> bool {
        self.skills.iter().all(|s| s.deterministic)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("não foi possível ler as skills de {path}: {message}")]
    Read { path: String, message: String },
    #[error("skill {skill:?}: {problem}")]
    Invalid { skill: String, problem: String },
}

/// Every agent and its skills.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    agents: BTreeMap<String, AgentDef>,
}

impl Catalog {
    /// Reads every `*.toml` under `dir`.
    pub fn load(dir: &Path, prompts: &Prompts, registry: &ActionRegistry) -> Result<Self, CatalogError> {
        let read_err = |e: std::io::Error| CatalogError::Read {
            path: dir.display().to_string(),
            message: e.to_string(),
        };
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .map_err(read_err)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        paths.sort();
        let mut defs = Vec::with_capacity(paths.len());
        for path in paths {
            let text = std::fs::read_to_string(&path).map_err(read_err)?;
            let def: SkillDef = toml::from_str(&text).map_err(|e| CatalogError::Read {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
            defs.push(def);
        }
        Self::from_defs(defs, prompts, registry)
    }

    pub fn from_defs(
        defs: Vec<SkillDef>,
        prompts: &Prompts,
        registry: &ActionRegistry,
    ) -> Result<Self, CatalogError> {
        let mut agents: BTreeMap<String, AgentDef> = BTreeMap::new();
        for def in defs {
            let invalid = |problem: String| CatalogError::Invalid {
                skill: def.name.clone(),
                problem,
            };
            if def.name.trim().is_empty() || def.agent.trim().is_empty() {
                return Err(invalid("name e agent não podem ser vazios".into()));
            }
            // A skill's name is written into traces, events and references as it is.
            if !def
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(invalid(
                    "name só pode ter letras sem acento, dígitos, _ e -".into(),
                ));
            }
            if !prompts.contains(&def.prompt) {
                return Err(invalid(format!(
                    "modelo de prompt {:?} não encontrado",
                    def.prompt
                )));
            }
            if let Some(missing) = def.actions.iter().find(|a| !registry.contains(a)) {
                return Err(invalid(format!("a ação {missing:?} não está registrada")));
            }
            if def.deterministic && def.actions.len() != 1 {
                return Err(invalid(format!(
                    "uma skill determinística precisa de exatamente uma ação; tem {}",
                    def.actions.len()
                )));
            }
            let agent = agents.entry(def.agent.clone()).or_insert_with(|| AgentDef {
                id: def.agent.clone(),
                skills: Vec::new(),
            });
            if agent.skills.iter().any(|s| s.name == def.name) {
                return Err(invalid(format!("defined twice in agent {:?}", def.agent)));
            }
            agent.skills.push(def);
        }
        for agent in agents.values_mut() {
            agent.skills.sort_by_key(|s| s.order);
            for s in &agent.skills {
                if let Some(next) = &s.next
                    && agent.skills.iter().all(|o| &o.name != next)
                {
                    return Err(CatalogError::Invalid {
                        skill: s.name.clone(),
                        problem: format!("a próxima skill {next:?} não é do agente {:?}", agent.id),
                    });
                }
            }
        }
        Ok(Self { agents })
    }

    pub fn agent(&self, id: &str) -> Option<&AgentDef> {
        self.agents.get(id)
    }
}
