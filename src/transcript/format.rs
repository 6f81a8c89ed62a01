//! The transcript file format (documented in `tests/transcripts/README.md`). Unknown keys are errors,
//! so a typo in an expectation fails loudly instead of checking nothing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transcript {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The class of message the case stands for, for `vt-agent eval`'s figures per class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    #[serde(default)]
    pub setup: Setup,
    /// Rules checked after every turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub never: Vec<Never>,
    pub turns: Vec<Turn>,
    /// Checks on the whole conversation, after the last turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_total: Option<TotalExpect>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Setup {
    pub agent: String,
    pub channel: String,
    pub user: String,
    /// The user's login (the name a prompt calls them by); default: `user`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub login: Option<String>,
    /// Time of the first turn (ISO 8601); each turn may move it with `at`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
    /// Start of the id counter (execution, conversation and call ids).
    pub seed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// Starting skill, state and memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub state: Map<String, Value>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub memory: Map<String, Value>,
    /// `none`, `scripted` (default when any turn scripts the model) or `cassette`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Cassette file, relative to the transcript.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cassette: Option<String>,
    #[serde(skip_serializing_if = "SimulatorSetup::is_default")]
    pub simulator: SimulatorSetup,
    /// Pix codes and card checkouts issued by the embedded simulator, as `vt-agent replay` plays a
    /// conversation (a case it writes says so); off: as the configuration says.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub simulated_payments: bool,
    /// The model's script may be left partly unused: a case from the review queue, whose fix may
    /// answer a turn without the model it once needed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub spare_replies: bool,
    /// Overrides of the `[vt]` settings (for example `confirmation_ttl_secs`).
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub vt: Map<String, Value>,
    /// Overrides of the engine limits (for example `max_model_calls`).
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub engine: Map<String, Value>,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            agent: "vt".into(),
            channel: vt_engine::TERMINAL.into(),
            user: "u-teste".into(),
            login: None,
            clock: None,
            seed: 1,
            conversation: None,
            skill: None,
            state: Map::new(),
            memory: Map::new(),
            model: None,
            cassette: None,
            simulator: SimulatorSetup::default(),
            simulated_payments: false,
            spare_replies: false,
            vt: Map::new(),
            engine: Map::new(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimulatorSetup {
    /// Cards added to (or replacing) the magic table, as in a fixture file.
    pub cards: BTreeMap<String, Value>,
    pub replace_cards: bool,
    pub notifications_per_second: Option<u32>,
}

impl SimulatorSetup {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// One user turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// A text message (empty: an empty message). A turn has one of `user`, `voice`, `image` and
    /// `burst`.
    #[serde(default)]
    pub user: String,
    /// A voice note: what the transcription fake hears in it (empty: the transcription fails).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice: Option<String>,
    /// A photo: the text the photo reader's fake reads in it (empty: it reads nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Messages sent in quick succession, answered as a channel that joins bursts answers them
    /// (`[whatsapp] juntar_ms`): the replies of every turn they make, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub burst: Vec<String>,
    /// Sends `user` repeated this many times (to script very long messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<usize>,
    /// Moves the clock to this time before the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The router's micro classification answer (a scripted model reply given first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classify: Option<String>,
    /// The model's replies during this turn, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model: Vec<ModelReply>,
    /// What a support agent does in the conversation's open case before the user's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub support: Option<SupportStep>,
    /// After the turn, the card holder pays these of the conversation's charges (0: the first it
    /// issued), each settled as the provider's notice would (with `setup.simulated_payments`, or a
    /// `[pix]`/`[cartao]` the simulator serves).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pays: Vec<usize>,
    #[serde(default)]
    pub expect: Expect,
}

impl Turn {
    /// What the person sent, message by message: `user` (repeated), a voice note's words, a photo (as
    /// `[foto]`: its text is not something they said), or a burst.
    pub fn messages(&self) -> Vec<String> {
        match (&self.voice, self.burst.is_empty()) {
            (Some(words), _) => vec![words.clone()],
            (None, _) if self.image.is_some() => vec!["[foto]".to_owned()],
            (None, false) => self.burst.clone(),
            (None, true) => vec![self.user.repeat(self.repeat.unwrap_or(1))],
        }
    }

    /// Everything the person sent in this turn, one message a line.
    pub fn said(&self) -> String {
        self.messages().join("\n")
    }

    /// A turn that sends more than one kind of message, named.
    pub fn problem(&self) -> Option<&'static str> {
        let kinds = usize::from(!self.user.is_empty())
            + usize::from(self.voice.is_some())
            + usize::from(self.image.is_some())
            + usize::from(!self.burst.is_empty());
        (kinds > 1).then_some("a turn has one of user, voice, image and burst")
    }
}

/// A support agent's actions on the conversation's open case, in this order: claim, say, hand back
/// or close.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SupportStep {
    /// The support agent's login (also the name the card holder reads).
    pub agent: String,
    #[serde(default)]
    pub claim: bool,
    /// What the agent writes to the card holder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub says: Option<String>,
    /// Hands the conversation back to the bot with this note (empty: no note).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hand_back: Option<String>,
    #[serde(default)]
    pub close: bool,
}

/// A scripted model reply. Written as a one-key map (`text: ...`, `tool_call: {...}`, `fault: 500`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ReplyRepr", into = "ReplyRepr")]
pub enum ModelReply {
    Text(String),
    ToolCall(ScriptedCall),
    ToolCalls(Vec<ScriptedCall>),
    /// A real OpenAI Chat Completions response body.
    RawOpenai(Value),
    /// A real Anthropic Messages response body.
    RawAnthropic(Value),
    /// A provider failure: `500`, `429`, `timeout`, `malformed`, `{status: 429, retry_after: 1}`.
    Fault(Fault),
}

/// The map form of [`ModelReply`] in YAML: exactly one key.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReplyRepr {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_call: Option<ScriptedCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<ScriptedCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    raw_openai: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    raw_anthropic: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fault: Option<Fault>,
}

impl TryFrom<ReplyRepr> for ModelReply {
    type Error = String;
    fn try_from(r: ReplyRepr) -> Result<Self, String> {
        let mut found = Vec::new();
        if let Some(v) = r.text {
            found.push(Self::Text(v));
        }
        if let Some(v) = r.tool_call {
            found.push(Self::ToolCall(v));
        }
        if let Some(v) = r.tool_calls {
            found.push(Self::ToolCalls(v));
        }
        if let Some(v) = r.raw_openai {
            found.push(Self::RawOpenai(v));
        }
        if let Some(v) = r.raw_anthropic {
            found.push(Self::RawAnthropic(v));
        }
        if let Some(v) = r.fault {
            found.push(Self::Fault(v));
        }
        match found.len() {
            1 => Ok(found.remove(0)),
            n => Err(format!(
                "a model reply has exactly one of text, tool_call, tool_calls, raw_openai, raw_anthropic, fault (found {n})"
            )),
        }
    }
}

impl From<ModelReply> for ReplyRepr {
    fn from(m: ModelReply) -> Self {
        let mut r = Self::default();
        match m {
            ModelReply::Text(v) => r.text = Some(v),
            ModelReply::ToolCall(v) => r.tool_call = Some(v),
            ModelReply::ToolCalls(v) => r.tool_calls = Some(v),
            ModelReply::RawOpenai(v) => r.raw_openai = Some(v),
            ModelReply::RawAnthropic(v) => r.raw_anthropic = Some(v),
            ModelReply::Fault(v) => r.fault = Some(v),
        }
        r
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    pub name: String,
    /// Arguments as JSON; `raw_arguments` gives the text as is (to script malformed JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_arguments: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Fault {
    Status(u16),
    Named(String),
    Detailed { status: u16, retry_after: Option<u64> },
}

/// What one turn must show. Every field is optional; an absent field checks nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Expect {
    /// Tool calls in order (routed and model calls alike; stage calls of sub-runs are not counted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ExpectCall>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_called: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reply_contains: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_regex: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reply_not_contains: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replies: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill_changes: Option<Vec<SkillChange>>,
    /// `transfer_to_human`, `end_chat`; exactly these, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_functions: Option<Vec<String>>,
    /// Requests the simulated systems received during this turn.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<ExpectRequest>,
    /// Effects in the simulator's ledger during this turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ledger: Option<LedgerExpect>,
    /// Conversation state after the turn (`null`: the key is absent).
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub state: Map<String, Value>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub memory: Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_calls: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// `concluido` or `falhou`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The router's intent for this turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
    /// The turn is refused with an error containing this text (for example an unknown agent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectCall {
    pub name: String,
    /// Partial match: every given field must be there with this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// Exact match, except the fields in `ignore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_exact: Option<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillChange {
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectRequest {
    pub method: String,
    pub path: String,
    /// How many such requests (default: at least one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    /// Headers that must be present (`"*"`: any value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Body fields (partial match).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LedgerExpect {
    /// Recharges actually charged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recharges: Option<usize>,
    /// Notifications actually delivered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notifications: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TotalExpect {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_calls: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recharges: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notifications: Option<usize>,
}

/// A rule that holds after every turn. Written as a name (`full_card_in_reply`) or a one-key map
/// (`reply_contains: "..."`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "NeverRepr", into = "NeverRepr")]
pub enum Never {
    /// No recharge is charged unless the turn's user message confirmed a recharge pending before it.
    RechargeWithoutConfirmation,
    /// No assistant message carries a full card number (8 or more digits in a run).
    FullCardInReply,
    /// No assistant message contains this text.
    ReplyContains(String),
    /// No turn makes more model calls than this.
    ModelCallsAbove(usize),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum NeverRepr {
    Named(String),
    ReplyContains { reply_contains: String },
    ModelCallsAbove { model_calls_above: usize },
}

impl TryFrom<NeverRepr> for Never {
    type Error = String;
    fn try_from(r: NeverRepr) -> Result<Self, String> {
        match r {
            NeverRepr::Named(n) if n == "recharge_without_confirmation" => {
                Ok(Self::RechargeWithoutConfirmation)
            }
            NeverRepr::Named(n) if n == "full_card_in_reply" => Ok(Self::FullCardInReply),
            NeverRepr::Named(n) => Err(format!(
                "unknown never rule {n:?}: recharge_without_confirmation, full_card_in_reply, reply_contains, model_calls_above"
            )),
            NeverRepr::ReplyContains { reply_contains } => Ok(Self::ReplyContains(reply_contains)),
            NeverRepr::ModelCallsAbove { model_calls_above } => Ok(Self::ModelCallsAbove(model_calls_above)),
        }
    }
}

impl From<Never> for NeverRepr {
    fn from(n: Never) -> Self {
        match n {
            Never::RechargeWithoutConfirmation => Self::Named("recharge_without_confirmation".into()),
            Never::FullCardInReply => Self::Named("full_card_in_reply".into()),
            Never::ReplyContains(s) => Self::ReplyContains { reply_contains: s },
            Never::ModelCallsAbove(n) => Self::ModelCallsAbove { model_calls_above: n },
        }
    }
}
