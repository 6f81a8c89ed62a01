//! The cases a person works: where one stands, what opening or claiming it did, its log.

use super::*;

/// Where a case stands ([`CaseStore`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseState {
    /// Opened, waiting for someone to claim it.
    #[default]
    Aguardando,
    /// Claimed by one support agent, its owner.
    EmAtendimento,
    /// Handed back to the bot.
    Devolvido,
    /// Closed with the conversation.
    Encerrado,
}

impl CaseState {
    const ALL: [Self; 4] = [
        Self::Aguardando,
        Self::EmAtendimento,
        Self::Devolvido,
        Self::Encerrado,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Aguardando => "aguardando",
            Self::EmAtendimento => "em_atendimento",
            Self::Devolvido => "devolvido",
            Self::Encerrado => "encerrado",
        }
    }

    /// A state as a row holds it.
    pub fn from_row(text: &str) -> Result<Self, StoreError> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| StoreError::Invalid(format!("estado de atendimento desconhecido: {text:?}")))
    }

    /// A person has the conversation (or is about to): the bot stays silent.
    pub fn is_open(self) -> bool {
        matches!(self, Self::Aguardando | Self::EmAtendimento)
    }
}

/// A case to open for a conversation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewCase {
    pub id: String,
    pub conversation_id: String,
    pub tenant_id: String,
    pub channel: String,
    pub reason: String,
    /// Built by code when the case opens: what a support agent needs to pick the conversation up.
    pub case_file: Value,
    /// `AAAAMMDD-NNNNNN`, taken before the case is written ([`CaseStore::next_protocol`]).
    pub protocol: String,
    /// The team whose queue it joins.
    pub team: String,
    pub motivo: vt_contract::HandoffReason,
    /// When the card holder is told nobody has claimed it yet, unless someone has.
    pub notice_due_at: Option<DateTime<Utc>>,
}

/// When a case was opened, claimed and closed, and where it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseTimes {
    pub state: CaseState,
    pub opened_at: DateTime<Utc>,
    pub claimed_at: Option<DateTime<Utc>>,
    pub closed_at: Option<DateTime<Utc>>,
}

/// A case on record.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Case {
    pub id: String,
    pub conversation_id: String,
    pub tenant_id: String,
    pub channel: String,
    pub reason: String,
    pub state: CaseState,
    /// The support agent who claimed it.
    pub owner: Option<String>,
    pub opened_at: DateTime<Utc>,
    pub claimed_at: Option<DateTime<Utc>>,
    pub closed_at: Option<DateTime<Utc>>,
    /// Whether the card holder was told, once, that their messages are passed on.
    pub acknowledged: bool,
    pub case_file: Value,
    pub notice_due_at: Option<DateTime<Utc>>,
    /// Whether the unclaimed-case notice went.
    pub noticed: bool,
    /// The case's root post on the support board, once posted.
    pub board_post: Option<String>,
    /// Said to the card holder at opening (cases opened before protocols have none).
    pub protocol: Option<String>,
    /// The team whose queue it is in.
    pub team: String,
    pub motivo: vt_contract::HandoffReason,
    /// The agent it is offered to, until `offer_due_at`.
    pub offered_to: Option<String>,
    pub offer_due_at: Option<DateTime<Utc>>,
    /// The last SLA warning sent (clock and cycle).
    pub sla_warned: Option<String>,
    /// How a person resolved it when they closed it (a category of the product's list).
    pub resolution: Option<String>,
}

impl CaseEvent {
    fn of(case_id: &str, conversation_id: &str, at: DateTime<Utc>, who: &str, what: &str) -> Self {
        Self {
            case_id: case_id.to_owned(),
            conversation_id: conversation_id.to_owned(),
            at,
            who: who.to_owned(),
            what: what.to_owned(),
            detail: None,
        }
    }
}

impl Case {
    /// A line of this case's log.
    pub fn event(&self, at: DateTime<Utc>, who: &str, what: &str, detail: Option<String>) -> CaseEvent {
        CaseEvent {
            detail,
            ..CaseEvent::of(&self.id, &self.conversation_id, at, who, what)
        }
    }
}

impl NewCase {
    /// The `aberto` line of its log, naming the team it opened in (what a later transfer moved it from).
    pub fn opened(&self, at: DateTime<Utc>) -> CaseEvent {
        CaseEvent {
            detail: (!self.team.is_empty()).then(|| self.team.clone()),
            ..CaseEvent::of(&self.id, &self.conversation_id, at, "sistema", "aberto")
        }
    }
}

/// What a turn writes about a case, in its own commit.
#[derive(Debug, Clone, PartialEq)]
pub enum CaseWrite {
    /// The turn's transfer opens this case (unless the conversation has one open).
    Open(NewCase),
    /// The turn's message arrived while a case is open: its line in the case's log and, for the first
    /// one while the case waits, the mark that the acknowledgement went.
    Held { line: CaseEvent, acknowledged: bool },
}

/// What opening a case did.
#[derive(Debug, Clone, PartialEq)]
pub enum CaseOpened {
    Opened(Case),
    /// The conversation has an open case already: that one.
    AlreadyOpen(Case),
}

/// What a claim did: one conditional update, so of two agents claiming at once exactly one wins.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    Claimed(Box<Case>),
    /// Someone has it: who.
    TakenBy(String),
    /// It is closed.
    Closed(CaseState),
    NotFound,
}

/// One line of a case's log: who did what, when.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseEvent {
    pub case_id: String,
    pub conversation_id: String,
    pub at: DateTime<Utc>,
    /// A support agent's login, `cliente`, or `sistema`.
    pub who: String,
    /// `aberto`, `assumido`, `devolvido`, `encerrado`, `mensagem_cliente`, `mensagem_atendente`, …
    pub what: String,
    /// A note, or the text relayed (sealed at rest).
    pub detail: Option<String>,
}

/// An answer an administrator keeps for the support agents of a tenant (all its teams, or one), inserted
/// in a reply with `/` and its shortcut; its placeholders are filled per case when inserted.
#[derive(Debug, Clone, PartialEq)]
pub struct CannedAnswer {
    pub tenant_id: String,
    /// What follows the `/`: lowercase letters, digits, `-` and `_`.
    pub shortcut: String,
    /// The team it is for; `None`: every team.
    pub team: Option<String>,
    pub body: String,
    pub updated_by: String,
    pub updated_at: DateTime<Utc>,
}

/// A line of the desk's log as the live console reads it: the line, and the case it is about (its
/// tenant and team now, its protocol number).
#[derive(Debug, Clone, PartialEq)]
pub struct DeskLine {
    /// The log's sequence: lines are read after the last one seen.
    pub seq: i64,
    pub tenant_id: String,
    pub team: String,
    pub protocol: Option<String>,
    pub line: CaseEvent,
}
