//! The two answers an action can give, and the system functions they may carry.
//!
//! [`ResponseToUser`] ends the turn: its `message` goes to the user and its `instruction` is kept in the
//! model's history as the tool result. [`ResponseToAgent`] sends its `instruction` back to the model and
//! the loop goes on. Only a [`ResponseToAgent`] may switch skills: [`ResponseToUser::functions`] holds
//! [`UserFunction`]s, which have no `RedirectToSkill` variant, so the invalid combination cannot be
//! built at all.
//!
//! ```compile_fail
//! use vt_contract::{RedirectToSkill, ResponseToUser};
//! // `RedirectToSkill` does not convert into a `UserFunction`: this does not compile.
//! let _ = ResponseToUser::new("olá", "saudação enviada").with_function(RedirectToSkill::new("x", "y"));
//! ```
//!
//! The same function is accepted by a [`ResponseToAgent`]:
//!
//! ```
//! use vt_contract::{RedirectToSkill, ResponseToAgent};
//! let r = ResponseToAgent::new("dados prontos").with_function(RedirectToSkill::new("proxima", "etapa concluída"));
//! assert_eq!(r.redirect().map(|r| r.skill_name.as_str()), Some("proxima"));
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Outcome of an action as the model and the operator see it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResponseStatus {
    #[default]
    Success,
    Error,
}

/// A file attached to a reply (stored elsewhere; only its reference travels).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileContent {
    pub file_id: String,
    pub file_name: String,
    pub file_type: String,
}

/// Ends the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndChat {
    pub reason: String,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub session_info: Map<String, Value>,
}

impl EndChat {
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            session_info: Map::new(),
        }
    }
}

/// Why a conversation goes to a person: a fixed list, set by the code that opens the case, shown and
/// counted everywhere; the free text beside it is the detail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HandoffReason {
    /// The card holder asked for a person.
    #[default]
    PedidoDoCliente,
    /// A system failed (a charge, a link, a boleto that does not check, a recharge with no outcome).
    FalhaDeSistema,
    /// Money was paid and the credit did not happen (or did not come back).
    PagamentoNaoCreditado,
    /// A lost, stolen or blocked card.
    CartaoPerdidoOuBloqueado,
    /// What the assistant does not do.
    ForaDoEscopo,
    /// The assistant could not finish (its limits, its budget).
    LimiteDoAssistente,
}

impl HandoffReason {
    pub const ALL: [Self; 6] = [
        Self::PedidoDoCliente,
        Self::FalhaDeSistema,
        Self::PagamentoNaoCreditado,
        Self::CartaoPerdidoOuBloqueado,
        Self::ForaDoEscopo,
        Self::LimiteDoAssistente,
    ];

    /// Its name on record and in configuration (`pedido_do_cliente`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PedidoDoCliente => "pedido_do_cliente",
            Self::FalhaDeSistema => "falha_de_sistema",
            Self::PagamentoNaoCreditado => "pagamento_nao_creditado",
            Self::CartaoPerdidoOuBloqueado => "cartao_perdido_ou_bloqueado",
            Self::ForaDoEscopo => "fora_do_escopo",
            Self::LimiteDoAssistente => "limite_do_assistente",
        }
    }

    /// As a support agent reads it.
    pub fn label(self) -> &'static str {
        match self {
            Self::PedidoDoCliente => "Pedido do cliente",
            Self::FalhaDeSistema => "Falha de sistema",
            Self::PagamentoNaoCreditado => "Pagamento não creditado",
            Self::CartaoPerdidoOuBloqueado => "Cartão perdido ou bloqueado",
            Self::ForaDoEscopo => "Fora do escopo",
            Self::LimiteDoAssistente => "Limite do assistente",
        }
    }

    /// The reason named `name` (as [`HandoffReason::as_str`] writes it).
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

/// Hands the conversation to a person or to an external skill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferToHuman {
    /// The detail, in words.
    pub reason: String,
    /// The reason, from the fixed list.
    #[serde(default)]
    pub motivo: HandoffReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_skill_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_skill_id: Option<String>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub session_info: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

impl TransferToHuman {
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            motivo: HandoffReason::default(),
            external_skill_name: None,
            external_skill_id: None,
            session_info: Map::new(),
            user_id: None,
        }
    }

    /// The same, for `motivo`.
    #[must_use]
    pub fn because(mut self, motivo: HandoffReason) -> Self {
        self.motivo = motivo;
        self
    }
}

/// Switches the conversation to another skill of the same agent, deterministically.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RedirectToSkill {
    pub skill_name: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub session_info: Map<String, Value>,
}

impl RedirectToSkill {
    pub fn new(skill_name: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            skill_name: skill_name.into(),
            reason: reason.into(),
            session_info: Map::new(),
        }
    }
}

/// System functions a [`ResponseToUser`] may carry. There is deliberately no `RedirectToSkill` here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "function", rename_all = "snake_case")]
pub enum UserFunction {
    EndChat(EndChat),
    TransferToHuman(TransferToHuman),
}

/// System functions a [`ResponseToAgent`] may carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "function", rename_all = "snake_case")]
pub enum AgentFunction {
    EndChat(EndChat),
    TransferToHuman(TransferToHuman),
    RedirectToSkill(RedirectToSkill),
}

impl From<EndChat> for UserFunction {
    fn from(f: EndChat) -> Self {
        Self::EndChat(f)
    }
}
impl From<TransferToHuman> for UserFunction {
    fn from(f: TransferToHuman) -> Self {
        Self::TransferToHuman(f)
    }
}
impl From<EndChat> for AgentFunction {
    fn from(f: EndChat) -> Self {
        Self::EndChat(f)
    }
}
impl From<TransferToHuman> for AgentFunction {
    fn from(f: TransferToHuman) -> Self {
        Self::TransferToHuman(f)
    }
}
impl From<RedirectToSkill> for AgentFunction {
    fn from(f: RedirectToSkill) -> Self {
        Self::RedirectToSkill(f)
    }
}
impl From<UserFunction> for AgentFunction {
    fn from(f: UserFunction) -> Self {
        match f {
            UserFunction::EndChat(f) => Self::EndChat(f),
            UserFunction::TransferToHuman(f) => Self::TransferToHuman(f),
        }
    }
}

/// A message straight to the user; ends the turn without calling the model again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseToUser {
    /// What the user reads.
    pub message: String,
    /// Messages sent after `message`, each on its own (a code to copy, which must be alone to be).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub then: Vec<String>,
    /// What the model reads next time, as the tool result: it must say what happened.
    pub instruction: String,
    #[serde(default)]
    pub status: ResponseStatus,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileContent>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<UserFunction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub state_updates: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub memory_updates: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// The result as a value, for code that reads it: the next deterministic skill gets it as its
    /// arguments and a flow keeps it as the stage's output, with no text in between. The model reads
    /// `instruction` (the same value as text, when [`Self::with_output`] set both). In process only.
    #[serde(skip)]
    pub output: Option<Value>,
}

/// An instruction back to the model; the loop asks for a new completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseToAgent {
    pub instruction: String,
    #[serde(default)]
    pub status: ResponseStatus,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<AgentFunction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub state_updates: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub memory_updates: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// The result as a value, for code that reads it: the next deterministic skill gets it as its
    /// arguments and a flow keeps it as the stage's output, with no text in between. The model reads
    /// `instruction` (the same value as text, when [`Self::with_output`] set both). In process only.
    #[serde(skip)]
    pub output: Option<Value>,
}

macro_rules! common_builders {
    ($ty:ty, $func:ty) => {
        impl $ty {
            /// Marks the response as an error.
            pub fn error(mut self) -> Self {
                self.status = ResponseStatus::Error;
                self
            }
            pub fn with_function(mut self, f: impl Into<$func>) -> Self {
                self.functions.push(f.into());
                self
            }
            pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
                self.detail = Some(detail.into());
                self
            }
            pub fn with_state(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
                self.state_updates.insert(key.into(), value.into());
                self
            }
            pub fn with_memory(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
                self.memory_updates.insert(key.into(), value.into());
                self
            }
            pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
                self.metadata.insert(key.into(), value.into());
                self
            }
            /// `output` as the result code reads, and as its JSON text the instruction the model reads.
            pub fn with_output(mut self, output: Value) -> Self {
                self.instruction = crate::json::text(&output);
                self.output = Some(output);
                self
            }
        }
    };
}

impl ResponseToUser {
    /// Both fields are required: a reply without an instruction leaves the model blind.
    pub fn new(message: impl Into<String>, instruction: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            then: Vec::new(),
            instruction: instruction.into(),
            status: ResponseStatus::Success,
            files: Vec::new(),
            functions: Vec::new(),
            detail: None,
            state_updates: Map::new(),
            memory_updates: Map::new(),
            metadata: Map::new(),
            output: None,
        }
    }

    pub fn with_file(mut self, file: FileContent) -> Self {
        self.files.push(file);
        self
    }

    /// With `text` sent after the message, as a message of its own.
    pub fn then(mut self, text: impl Into<String>) -> Self {
        self.then.push(text.into());
        self
    }
}

impl ResponseToAgent {
    pub fn new(instruction: impl Into<String>) -> Self {
        Self {
            instruction: instruction.into(),
            status: ResponseStatus::Success,
            functions: Vec::new(),
            detail: None,
            state_updates: Map::new(),
            memory_updates: Map::new(),
            metadata: Map::new(),
            output: None,
        }
    }

    /// The skill switch this response asks for, if any (the first one wins).
    pub fn redirect(&self) -> Option<&RedirectToSkill> {
        self.functions.iter().find_map(|f| match f {
            AgentFunction::RedirectToSkill(r) => Some(r),
            _ => None,
        })
    }
}

common_builders!(ResponseToUser, UserFunction);
common_builders!(ResponseToAgent, AgentFunction);

/// What an action returns on success.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ActionResponse {
    ToUser(ResponseToUser),
    ToAgent(ResponseToAgent),
}

impl From<ResponseToUser> for ActionResponse {
    fn from(r: ResponseToUser) -> Self {
        Self::ToUser(r)
    }
}
impl From<ResponseToAgent> for ActionResponse {
    fn from(r: ResponseToAgent) -> Self {
        Self::ToAgent(r)
    }
}

impl ActionResponse {
    pub fn instruction(&self) -> &str {
        match self {
            Self::ToUser(r) => &r.instruction,
            Self::ToAgent(r) => &r.instruction,
        }
    }

    pub fn status(&self) -> ResponseStatus {
        match self {
            Self::ToUser(r) => r.status,
            Self::ToAgent(r) => r.status,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_response_carries_only_user_functions() {
        let r = ResponseToUser::new("tchau", "atendimento encerrado").with_function(EndChat::new("fim"));
        assert!(matches!(r.functions.as_slice(), [UserFunction::EndChat(e)] if e.reason == "fim"));
    }

    #[test]
    fn agent_response_finds_its_redirect() {
        let r = ResponseToAgent::new("ok")
            .with_function(TransferToHuman::new("x"))
            .with_function(RedirectToSkill::new("b", "próxima"));
        assert_eq!(r.redirect().map(|r| r.skill_name.as_str()), Some("b"));
        assert!(ResponseToAgent::new("ok").redirect().is_none());
    }

    #[test]
    fn status_defaults_to_success_and_serializes_lowercase() {
        let r = ResponseToAgent::new("ok");
        assert_eq!(r.status, ResponseStatus::Success);
        let v = crate::json::to_value(r.error()).expect("serializes");
        assert_eq!(v["status"], "error");
    }
}
