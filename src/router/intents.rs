//! Intents as data: the file default (`intents/default.toml`) and the copy in the database that the
//! router actually reads.

use std::path::Path;

use chrono::Utc;
use serde::Deserialize;

use vt_store::{IntentRecord, ReportStore, StoreError};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IntentFile {
    intent: Vec<IntentEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IntentEntry {
    key: String,
    description: String,
    action_type: String,
    #[serde(default)]
    required_params: Vec<String>,
    #[serde(default)]
    optional_params: Vec<String>,
    #[serde(default)]
    prompt_template: Option<String>,
    #[serde(default = "default_max_tokens")]
    max_tokens: i64,
    #[serde(default = "default_active")]
    active: bool,
}

fn default_max_tokens() -> i64 {
    200
}

fn default_active() -> bool {
    true
}

#[derive(Debug, thiserror::Error)]
pub enum IntentError {
    #[error("não foi possível ler o arquivo de intenções {path}: {message}")]
    File { path: String, message: String },
    #[error("intenção {0:?}: action_type deve ser deterministic, reasoning ou hybrid")]
    ActionType(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Parses an intents file.
pub(crate) fn parse(text: &str, label: &str) -> Result<Vec<IntentRecord>, IntentError> {
    let file: IntentFile = toml::from_str(text).map_err(|e| IntentError::File {
        path: label.to_owned(),
        message: e.to_string(),
    })?;
    file.intent
        .into_iter()
        .map(|e| {
            if !["deterministic", "reasoning", "hybrid"].contains(&e.action_type.as_str()) {
                return Err(IntentError::ActionType(e.key));
            }
            Ok(IntentRecord {
                intent_key: e.key,
                description: e.description,
                action_type: e.action_type,
                required_params: e.required_params,
                optional_params: e.optional_params,
                prompt_template: e.prompt_template,
                max_tokens: e.max_tokens,
                is_active: e.active,
            })
        })
        .collect()
}

/// The default intents file shipped with the source (or the configured one).
pub fn load_file(path: &Path) -> Result<Vec<IntentRecord>, IntentError> {
    let text = std::fs::read_to_string(path).map_err(|e| IntentError::File {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    parse(&text, &path.display().to_string())
}

/// Writes the file's intents that the database does not have yet, then returns the database's set.
pub(crate) async fn sync(
    store: &dyn ReportStore,
    defaults: &[IntentRecord],
) -> Result<Vec<IntentRecord>, IntentError> {
    let existing = store.intents().await?;
    let missing: Vec<&IntentRecord> = defaults
        .iter()
        .filter(|d| existing.iter().all(|e| e.intent_key != d.intent_key))
        .collect();
    if missing.is_empty() {
        return Ok(existing);
    }
    for intent in missing {
        store.upsert_intent(intent, Utc::now()).await?;
    }
    Ok(store.intents().await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_file_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("intents/default.toml");
        let intents = load_file(&path).expect("valid intents file");
        let keys: Vec<&str> = intents.iter().map(|i| i.intent_key.as_str()).collect();
        for k in [
            "consultar_saldo",
            "preparar_recarga",
            "confirmar_recarga",
            "general_chat",
            "tarefa_composta",
        ] {
            assert!(keys.contains(&k), "{k} missing");
        }
    }

    #[test]
    fn a_bad_action_type_is_named() {
        let err = parse(
            "[[intent]]\nkey = \"x\"\ndescription = \"d\"\naction_type = \"magic\"\n",
            "f",
        )
        .expect_err("invalid");
        assert!(err.to_string().contains("\"x\""), "{err}");
    }
}
