//! What an action may know about the turn it runs in.
//!
//! Identity (agent, conversation, user, channel) comes from here and never from model-supplied
//! arguments. Services an action needs (an HTTP client for an external system, a clock) travel as typed
//! extensions, so this crate defines no service registry of its own and the engine stays generic.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::action::ActionError;

/// The turn an action runs in. Cheap to clone: extensions, state and memory are shared.
#[derive(Clone, Debug)]
pub struct ActionContext {
    pub agent_id: String,
    pub conversation_id: String,
    pub user_id: String,
    pub user_login: String,
    pub channel: String,
    /// The skill whose tool is being called.
    pub skill: String,
    /// The user's message that started this turn, verbatim. Rules that need the user's own word (a
    /// recharge confirmation) read it here, never from the model's arguments.
    pub user_message: String,
    /// The turn's id (its `execucao_id`): lets a rule tell "asked in this turn" from "asked before".
    pub turn_id: String,
    /// The stored id of the user's message this turn processes, when the service stored one: unlike
    /// `turn_id`, the same when a message is processed again after its process died.
    pub message_id: Option<String>,
    /// The engine's clock for this turn (fixed in tests).
    pub now: DateTime<Utc>,
    /// Conversation state as it was when the action was called. Shared: a turn's actions see one copy
    /// until an update changes it (each of a flow's ten stages copied state and memory before).
    pub state: Arc<Map<String, Value>>,
    /// Conversation memory as it was when the action was called (shared as `state` is).
    pub memory: Arc<Map<String, Value>>,
    extensions: Extensions,
}

impl ActionContext {
    pub fn new(agent_id: impl Into<String>, conversation_id: impl Into<String>, now: DateTime<Utc>) -> Self {
        Self {
            agent_id: agent_id.into(),
            conversation_id: conversation_id.into(),
            user_id: String::new(),
            user_login: String::new(),
            channel: String::new(),
            skill: String::new(),
            user_message: String::new(),
            turn_id: String::new(),
            message_id: None,
            now,
            state: Arc::default(),
            memory: Arc::default(),
            extensions: Extensions::default(),
        }
    }

    pub fn with_extensions(mut self, extensions: Extensions) -> Self {
        self.extensions = extensions;
        self
    }

    /// With `more` services besides (a turn's own data: a flow's parsed input).
    pub fn with_more(mut self, more: &Extensions) -> Self {
        self.extensions.extend(more);
        self
    }

    /// A service the engine was given for actions, by type.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.extensions.get::<T>()
    }

    /// Like [`get`](Self::get), but a missing service is an action error naming the type.
    pub fn require<T: Any + Send + Sync>(&self) -> Result<&T, ActionError> {
        self.get::<T>().ok_or_else(|| {
            ActionError::failed(
                "serviço interno indisponível",
                format!("missing extension {}", std::any::type_name::<T>()),
            )
        })
    }
}

/// A type map of shared services.
#[derive(Clone, Default)]
pub struct Extensions {
    map: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl Extensions {
    pub fn insert<T: Any + Send + Sync>(&mut self, value: T) {
        self.map.insert(TypeId::of::<T>(), Arc::new(value));
    }

    pub fn with<T: Any + Send + Sync>(mut self, value: T) -> Self {
        self.insert(value);
        self
    }

    /// Adds `other`'s services (replacing those of the same type).
    pub fn extend(&mut self, other: &Self) {
        self.map
            .extend(other.map.iter().map(|(k, v)| (*k, Arc::clone(v))));
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.map
            .get(&TypeId::of::<T>())
            .and_then(|v| v.downcast_ref::<T>())
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("len", &self.map.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Svc(u8);

    #[test]
    fn extensions_are_found_by_type() {
        let ctx =
            ActionContext::new("a", "c", Utc::now()).with_extensions(Extensions::default().with(Svc(7)));
        assert_eq!(ctx.get::<Svc>(), Some(&Svc(7)));
        assert!(ctx.get::<String>().is_none());
        let err = ctx.require::<String>().expect_err("missing");
        assert!(err.operator_message().contains("String"));
    }
}
