//! How a stretch of a conversation ended, and the stretch as its outcome is computed from.

use super::*;

/// How a stretch of a conversation ended (issue "Step 22"), computed by code when it went quiet or
/// ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Desfecho {
    /// A balance read or a recharge credited, and no case.
    ResolvidaPeloBot,
    /// A case closed or handed back.
    ResolvidaPorPessoa,
    /// A question of ours left unanswered, a recharge never confirmed or never paid.
    Abandonada,
    /// None of the above.
    SemObjetivo,
}

impl Desfecho {
    pub const ALL: [Self; 4] = [
        Self::ResolvidaPeloBot,
        Self::ResolvidaPorPessoa,
        Self::Abandonada,
        Self::SemObjetivo,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ResolvidaPeloBot => "resolvida_pelo_bot",
            Self::ResolvidaPorPessoa => "resolvida_por_pessoa",
            Self::Abandonada => "abandonada",
            Self::SemObjetivo => "sem_objetivo",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == s)
    }

    /// Resolved, by the bot or by a person.
    pub fn resolved(self) -> bool {
        matches!(self, Self::ResolvidaPeloBot | Self::ResolvidaPorPessoa)
    }
}

/// A stretch's outcome on record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeRecord {
    pub id: String,
    pub conversation_id: String,
    pub tenant_id: String,
    pub channel: String,
    /// The previous outcome's end (`None`: the conversation's start).
    pub desde: Option<DateTime<Utc>>,
    /// The conversation's last activity in the stretch.
    pub ate: DateTime<Utc>,
    pub desfecho: Desfecho,
    /// The stretch's main intent.
    pub intencao: String,
    /// What the person came for: a return on the same subject within 7 days reopens the stretch.
    pub assunto: String,
    pub caso_id: Option<String>,
    /// Its turns and paid messages, in millionths of a real; `None`: a price was missing.
    pub custo_micro_brl: Option<i64>,
    /// The same person came back on the same subject within 7 days.
    pub reaberta: bool,
    /// The earlier outcome this one reopened.
    pub reabre: Option<String>,
    /// When the satisfaction question went.
    pub pesquisa_em: Option<DateTime<Utc>>,
    /// The 1–5 answer.
    pub nota: Option<i32>,
    pub created_at: DateTime<Utc>,
}

/// A conversation whose stretch may be over: quiet since `ate`, or ended then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StretchHead {
    pub conversation_id: String,
    pub tenant_id: String,
    pub channel: String,
    pub user_id: String,
    pub desde: Option<DateTime<Utc>>,
    pub ate: DateTime<Utc>,
}

/// One turn of a stretch, as its usage row keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StretchTurn {
    pub intent_key: String,
    /// What the turn achieved (`saldo`, `creditada`, …; see `service::outcomes`).
    pub marcas: Vec<String>,
    pub custo_micro_brl: Option<i64>,
    pub at: DateTime<Utc>,
}

/// What happened in a stretch, read for its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stretch {
    pub turns: Vec<StretchTurn>,
    /// The case opened in it, with its state.
    pub case: Option<(String, CaseState)>,
    /// Its Pix charges' statuses (`ativa`, `paga`, `creditada`…).
    pub pix: Vec<String>,
    /// Its paid messages' costs (`None`: unknown).
    pub paid_messages: Vec<Option<i64>>,
}
