//! The stage chain as a service to the tools. The engine's side implements it (a sub-run of the
//! `vt_fluxo` agent), so the tools go through the very same skills as `run-flow` while this crate
//! still knows nothing of the engine.

use std::sync::Arc;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::vt::FlowInput;
use vt_contract::action::ActionError;
use vt_contract::context::ActionContext;

/// What a run of the chain produced: each stage's output, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowResult {
    pub execucao_id: String,
    pub etapas: Vec<(String, Value)>,
}

impl FlowResult {
    /// A stage's output parsed into its type, if that stage ran.
    pub fn stage<T: DeserializeOwned>(&self, id: &str) -> Option<T> {
        self.etapas
            .iter()
            .find(|(e, _)| e == id)
            .and_then(|(_, v)| vt_contract::json::from_value(v.clone()).ok())
    }
}

#[async_trait]
pub trait FlowRunner: Send + Sync {
    /// Runs the chain for `input`: RF1..RF5, and RF6..RF10 when the input asks for a recharge. `ctx` is
    /// the calling tool's: the run is recorded as started by its turn.
    async fn run(&self, ctx: &ActionContext, input: &FlowInput) -> Result<FlowResult, ActionError>;
}

/// How tools find the runner in their context.
pub type SharedFlowRunner = Arc<dyn FlowRunner>;
