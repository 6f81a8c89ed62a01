//! The action contract: a typed trait for authors, an object-safe trait for the engine, one registry.
//!
//! Authors implement [`Action`] with a typed `Args` (`Deserialize + JsonSchema`); the blanket impl of
//! [`DynAction`] parses the model's JSON into it once, at dispatch, so an action body never sees raw
//! JSON. The tool schema shown to the model is derived from `Args` and normalised by [`strict_schema`]
//! so it is valid for OpenAI strict function calling and for Anthropic's `input_schema` alike.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::context::ActionContext;
use crate::response::ActionResponse;

/// Why an action did not answer. Split once into what the model may read and what the operator reads.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ActionError {
    /// The arguments did not fit the action's type. The model may correct them.
    #[error("argumentos inválidos: {0}")]
    InvalidArguments(String),
    /// The action failed. `public` is safe to show the model; `internal` is for logs only.
    #[error("{public}")]
    Failed {
        public: String,
        internal: String,
        retryable: bool,
    },
}

impl ActionError {
    pub fn failed(public: impl Into<String>, internal: impl Into<String>) -> Self {
        Self::Failed {
            public: public.into(),
            internal: internal.into(),
            retryable: false,
        }
    }

    /// A failure worth another attempt (for actions that declare themselves retry-safe).
    pub fn transient(public: impl Into<String>, internal: impl Into<String>) -> Self {
        Self::Failed {
            public: public.into(),
            internal: internal.into(),
            retryable: true,
        }
    }

    /// The text the model gets as the error tool result.
    pub fn model_message(&self) -> String {
        self.to_string()
    }

    /// The text for logs and the execution record.
    pub fn operator_message(&self) -> String {
        match self {
            Self::InvalidArguments(e) => format!("argumentos inválidos: {e}"),
            Self::Failed { internal, .. } => internal.clone(),
        }
    }

    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Failed { retryable: true, .. })
    }
}

/// An action as its author writes it.
#[async_trait]
pub trait Action: Send + Sync + 'static {
    /// The arguments the model must supply. Never identity: that comes from the context.
    type Args: DeserializeOwned + JsonSchema + Send + 'static;

    /// The tool name the model sees (snake_case, unique in a registry).
    const NAME: &'static str;

    /// What the tool does, for the model.
    const DESCRIPTION: &'static str;

    /// Whether a failed call may be attempted again automatically. Actions that can move money or
    /// send a message to a person must keep the default `false`.
    fn retry_safe(&self) -> bool {
        false
    }

    /// Whether a model is offered this tool in a conversation whose state is `state`, on an engine
    /// holding `extensions`. A tool with nothing to act on (a confirmation with no recharge waiting,
    /// a port the deployment has not got) is not offered: a small model picks whatever it sees, and
    /// "nothing to cancel" is no answer to a question — and a tool never offered costs no tokens.
    fn offered(
        &self,
        state: &serde_json::Map<String, Value>,
        extensions: &crate::context::Extensions,
    ) -> bool {
        let _ = (state, extensions);
        true
    }

    async fn call(&self, ctx: &ActionContext, args: Self::Args) -> Result<ActionResponse, ActionError>;
}

/// The object-safe form of [`Action`] the engine holds.
#[async_trait]
pub trait DynAction: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    fn retry_safe(&self) -> bool;
    fn offered(
        &self,
        state: &serde_json::Map<String, Value>,
        extensions: &crate::context::Extensions,
    ) -> bool;
    /// The strict JSON Schema of the arguments.
    fn parameters(&self) -> Value;
    /// Parses `args` into the action's type and calls it.
    async fn call_json(&self, ctx: &ActionContext, args: Value) -> Result<ActionResponse, ActionError>;
}

#[async_trait]
impl<A: Action> DynAction for A {
    fn name(&self) -> &str {
        A::NAME
    }

    fn description(&self) -> &str {
        A::DESCRIPTION
    }

    fn retry_safe(&self) -> bool {
        Action::retry_safe(self)
    }

    fn offered(
        &self,
        state: &serde_json::Map<String, Value>,
        extensions: &crate::context::Extensions,
    ) -> bool {
        Action::offered(self, state, extensions)
    }

    fn parameters(&self) -> Value {
        strict_schema(schema_value::<A::Args>())
    }

    async fn call_json(&self, ctx: &ActionContext, args: Value) -> Result<ActionResponse, ActionError> {
        let args: A::Args = crate::json::from_value(args)
            .map_err(|e| ActionError::InvalidArguments(crate::redact::serde_message(&e.to_string())))?;
        self.call(ctx, args).await
    }
}

/// A tool as offered to a model: provider-neutral; each provider module turns it into its wire shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments: an object, every property required, no extra properties.
    pub parameters: Value,
}

/// Every action the product knows, by name.
#[derive(Clone, Default)]
pub struct ActionRegistry {
    /// Each action with its spec, built at the first [`Self::spec`]: the JSON Schema of the arguments
    /// is generated then, not at registration — a process that calls no model (`run-flow`, a batch)
    /// never needs one, and generating the ~20 schemas was a tenth of `run-flow`'s set-up.
    actions: BTreeMap<String, (Arc<dyn DynAction>, LazySpec)>,
}

/// An action's tool spec, made at the first call that needs it, then shared.
type LazySpec = std::sync::OnceLock<Arc<ToolSpec>>;

/// Registering two actions under one name is a programming error worth a clear message.
#[derive(Debug, thiserror::Error)]
#[error("a ação {0:?} foi registrada duas vezes")]
pub struct DuplicateAction(pub String);

impl ActionRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&mut self, action: impl DynAction + 'static) -> Result<(), DuplicateAction> {
        self.register_arc(Arc::new(action))
    }

    pub(crate) fn register_arc(&mut self, action: Arc<dyn DynAction>) -> Result<(), DuplicateAction> {
        let name = action.name().to_owned();
        if self.actions.contains_key(&name) {
            return Err(DuplicateAction(name));
        }
        self.actions.insert(name, (action, LazySpec::new()));
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn DynAction>> {
        self.actions.get(name).map(|(a, _)| a)
    }

    pub fn spec(&self, name: &str) -> Option<&Arc<ToolSpec>> {
        self.actions.get_key_value(name).map(|(name, (action, spec))| {
            spec.get_or_init(|| {
                Arc::new(ToolSpec {
                    name: name.clone(),
                    description: action.description().to_owned(),
                    parameters: action.parameters(),
                })
            })
        })
    }

    pub fn contains(&self, name: &str) -> bool {
        self.actions.contains_key(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.actions.keys().map(String::as_str)
    }
}

impl std::fmt::Debug for ActionRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.actions.keys()).finish()
    }
}

/// The JSON Schema of `T`, with every subschema inlined (no `$ref`, which some providers reject).
pub(crate) fn schema_value<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    generator.into_root_schema_for::<T>().to_value()
}

/// Normalises a schema for strict function calling: every object closed (`additionalProperties:
/// false`) with all its properties required (optional ones stay nullable), and the keywords strict mode
/// rejects (`format`, `$schema`, `title`, `default`) removed.
pub(crate) fn strict_schema(mut schema: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                for key in ["$schema", "title", "format", "default", "$defs", "definitions"] {
                    map.remove(key);
                }
                if let Some(Value::Object(props)) = map.get("properties") {
                    let required: Vec<Value> = props.keys().cloned().map(Value::String).collect();
                    map.insert("required".into(), Value::Array(required));
                    map.insert("additionalProperties".into(), Value::Bool(false));
                    map.insert("type".into(), Value::String("object".into()));
                }
                for (_, child) in map.iter_mut() {
                    walk(child);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut schema);
    // A tool without arguments still needs an object schema.
    if let Value::Object(map) = &mut schema
        && !map.contains_key("properties")
    {
        map.insert("type".into(), Value::String("object".into()));
        map.insert("properties".into(), Value::Object(Map::new()));
        map.insert("required".into(), Value::Array(Vec::new()));
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::{ResponseToAgent, ResponseToUser};
    use schemars::JsonSchema;
    use serde::Deserialize;

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)] // only the schema of these fields matters
    struct Inner {
        /// Tipo do meio.
        tipo: String,
        token: Option<String>,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)] // only the schema of `meio` and `lista` matters
    struct EchoArgs {
        /// O texto.
        texto: String,
        vezes: Option<u8>,
        meio: Inner,
        lista: Vec<Inner>,
    }

    struct Echo;

    #[async_trait]
    impl Action for Echo {
        type Args = EchoArgs;
        const NAME: &'static str = "eco";
        const DESCRIPTION: &'static str = "Repete o texto.";
        async fn call(&self, _ctx: &ActionContext, args: EchoArgs) -> Result<ActionResponse, ActionError> {
            if args.texto == "fim" {
                return Ok(ResponseToUser::new("fim", "o usuário pediu fim").into());
            }
            Ok(ResponseToAgent::new(args.texto.repeat(usize::from(args.vezes.unwrap_or(1)))).into())
        }
    }

    #[derive(Deserialize, JsonSchema)]
    struct NoArgs {}

    fn assert_strict(v: &Value, path: &str) {
        match v {
            Value::Object(map) => {
                assert!(!map.contains_key("format"), "format left at {path}");
                assert!(!map.contains_key("$ref"), "$ref left at {path}");
                if let Some(Value::Object(props)) = map.get("properties") {
                    assert_eq!(
                        map.get("additionalProperties"),
                        Some(&Value::Bool(false)),
                        "open object at {path}"
                    );
                    let mut required: Vec<&str> = map["required"]
                        .as_array()
                        .expect("required array")
                        .iter()
                        .filter_map(Value::as_str)
                        .collect();
                    required.sort_unstable();
                    let mut keys: Vec<&str> = props.keys().map(String::as_str).collect();
                    keys.sort_unstable();
                    assert_eq!(required, keys, "not every property required at {path}");
                }
                for (k, child) in map {
                    assert_strict(child, &format!("{path}/{k}"));
                }
            }
            Value::Array(items) => items.iter().for_each(|i| assert_strict(i, path)),
            _ => {}
        }
    }

    #[test]
    fn derived_schema_is_strict_everywhere() {
        let schema = DynAction::parameters(&Echo);
        assert_eq!(schema["type"], "object");
        assert_strict(&schema, "");
        // Optional fields stay nullable so strict mode can send null for them.
        let vezes = &schema["properties"]["vezes"]["type"];
        assert!(
            vezes.as_array().is_some_and(|t| t.contains(&Value::from("null"))),
            "{vezes}"
        );
        assert_eq!(schema["properties"]["texto"]["description"], "O texto.");
    }

    #[test]
    fn empty_args_still_give_an_object_schema() {
        let schema = strict_schema(schema_value::<NoArgs>());
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], serde_json::json!([]));
    }

    #[tokio::test]
    async fn call_json_parses_once_and_reports_bad_arguments() {
        let ctx = ActionContext::new("a", "c", chrono::Utc::now());
        let ok = Echo
            .call_json(&ctx, serde_json::json!({"texto": "ab", "vezes": 2, "meio": {"tipo": "x", "token": null}, "lista": []}))
            .await
            .expect("valid args");
        assert_eq!(ok.instruction(), "abab");
        let err = Echo
            .call_json(&ctx, serde_json::json!({"vezes": "dois"}))
            .await
            .expect_err("invalid");
        assert!(matches!(err, ActionError::InvalidArguments(_)));
        assert!(err.model_message().starts_with("argumentos inválidos"));
    }

    #[test]
    fn registry_refuses_duplicates_and_caches_specs() {
        let mut reg = ActionRegistry::new();
        reg.register(Echo).expect("first");
        assert!(reg.register(Echo).is_err());
        let spec = reg.spec("eco").expect("spec");
        assert_eq!(spec.description, "Repete o texto.");
        assert!(reg.contains("eco") && !reg.contains("outro"));
    }
}
