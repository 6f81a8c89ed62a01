//! Prompt templates: files under `prompts/`, rendered with minijinja and strict undefined variables, so a
//! template that names a variable the engine does not supply fails loudly at load instead of rendering
//! an empty string to the model.

use std::path::Path;

use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("não foi possível ler a pasta de prompts {path}")]
    Read { path: String, source: std::io::Error },
    #[error("o modelo de prompt {name:?} é inválido")]
    Template { name: String, source: minijinja::Error },
    #[error("o modelo de prompt {0:?} não existe")]
    Missing(String),
}

/// The variables every skill prompt may use, borrowed from the turn: a prompt is rendered at every
/// model call, and copying the conversation's state and memory for it each time was for nothing.
#[derive(Debug, Clone, Serialize)]
pub struct PromptVars<'a> {
    pub agent: &'a str,
    pub skill: &'a str,
    pub skill_description: &'a str,
    pub user_id: &'a str,
    pub user_login: &'a str,
    pub channel: &'a str,
    /// Local date and time of the turn, ISO 8601.
    pub now: String,
    pub state: &'a serde_json::Map<String, serde_json::Value>,
    pub memory: &'a serde_json::Map<String, serde_json::Value>,
}

impl PromptVars<'static> {
    /// Plausible values, used to check every template when it is loaded.
    pub fn sample() -> Self {
        static EMPTY: std::sync::LazyLock<serde_json::Map<String, serde_json::Value>> =
            std::sync::LazyLock::new(serde_json::Map::new);
        Self {
            agent: "agente",
            skill: "skill",
            skill_description: "descrição",
            user_id: "u-1",
            user_login: "usuario",
            channel: super::TERMINAL,
            now: "2026-01-01T12:00:00-03:00".into(),
            state: &EMPTY,
            memory: &EMPTY,
        }
    }
}

/// Loaded templates, by file name (`atendimento.md`).
pub struct Prompts {
    env: Environment<'static>,
}

impl Prompts {
    pub fn load(dir: &Path) -> Result<Self, PromptError> {
        let read_err = |source| PromptError::Read {
            path: dir.display().to_string(),
            source,
        };
        let mut sources = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(read_err)? {
            let path = entry.map_err(read_err)?.path();
            if !path.is_file() {
                continue;
            }
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            let source = std::fs::read_to_string(&path).map_err(|source| PromptError::Read {
                path: path.display().to_string(),
                source,
            })?;
            sources.push((name, source));
        }
        Self::from_sources(sources)
    }

    pub fn from_sources(sources: impl IntoIterator<Item = (String, String)>) -> Result<Self, PromptError> {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        // Block tags on their own lines leave no blank lines behind in the prompt.
        if let Ok(syntax) = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
        {
            env.set_syntax(syntax);
        }
        let mut names = Vec::new();
        for (name, source) in sources {
            env.add_template_owned(name.clone(), source)
                .map_err(|source| PromptError::Template {
                    name: name.clone(),
                    source,
                })?;
            names.push(name);
        }
        let prompts = Self { env };
        for name in names {
            prompts.render(&name, &PromptVars::sample())?;
        }
        Ok(prompts)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.env.get_template(name).is_ok()
    }

    pub fn render(&self, name: &str, vars: &impl Serialize) -> Result<String, PromptError> {
        let template = self
            .env
            .get_template(name)
            .map_err(|_| PromptError::Missing(name.to_owned()))?;
        template
            .render(minijinja::value::Serde(vars))
            .map_err(|source| PromptError::Template {
                name: name.to_owned(),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undefined_variables_fail_at_load() {
        let err = Prompts::from_sources([("x.md".to_owned(), "Olá {{ nome_inexistente }}".to_owned())])
            .err()
            .expect("strict undefined");
        assert!(err.to_string().contains("x.md"), "{err}");
    }

    #[test]
    fn known_variables_render() {
        let p = Prompts::from_sources([(
            "x.md".to_owned(),
            "Skill {{ skill }} para {{ user_login }}".to_owned(),
        )])
        .expect("valid");
        assert_eq!(
            p.render("x.md", &PromptVars::sample()).expect("render"),
            "Skill skill para usuario"
        );
        assert!(matches!(
            p.render("y.md", &PromptVars::sample()),
            Err(PromptError::Missing(_))
        ));
    }
}
