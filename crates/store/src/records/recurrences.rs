//! Automatic recharges (Pix Automático recurrences) and the charges of their cycles.

use super::*;

/// When an automatic recharge happens ([`Recurrence`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecurrenceKind {
    /// When the balance is below this, read once a day.
    Limite(rust_decimal::Decimal),
    /// On this day of the month (its last day in a month without it).
    Dia(u32),
}

/// Where a recurrence stands: the provider's status, or `falhou` (never created there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecurrenceStatus {
    /// Created at the provider, waiting for the card holder's authorisation in their bank.
    Criada,
    /// Authorised (read back from the provider): it charges.
    Aprovada,
    Rejeitada,
    Expirada,
    /// Cancelled by the card holder (in the chat or in their bank) or replaced by a new one.
    Cancelada,
    /// The provider did not create it (nothing to authorise).
    Falhou,
}

impl RecurrenceStatus {
    pub const ALL: [Self; 6] = [
        Self::Criada,
        Self::Aprovada,
        Self::Rejeitada,
        Self::Expirada,
        Self::Cancelada,
        Self::Falhou,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Criada => "criada",
            Self::Aprovada => "aprovada",
            Self::Rejeitada => "rejeitada",
            Self::Expirada => "expirada",
            Self::Cancelada => "cancelada",
            Self::Falhou => "falhou",
        }
    }

    pub fn from_row(text: &str) -> Result<Self, StoreError> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| StoreError::Invalid(format!("status de recorrência desconhecido: {text:?}")))
    }

    /// Whether it may still charge (or will, once authorised).
    pub fn live(self) -> bool {
        matches!(self, Self::Criada | Self::Aprovada)
    }
}

/// A card holder's automatic recharge: a Pix Automático recurrence and its terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Recurrence {
    /// Ours: the contract the provider's recurrence carries (`vinculo.contrato`).
    pub id: String,
    /// The provider's `idRec`, once created.
    pub id_rec: Option<String>,
    pub tenant_id: String,
    /// Where it was asked for: its notices and receipts are said there.
    pub conversation_id: String,
    pub user_id: String,
    /// The card's blind index: one charge per cycle and card.
    pub card_index: String,
    pub card_masked: String,
    /// The recharge to send each time (card, tenant, policy), sealed at rest.
    pub request: Value,
    pub kind: RecurrenceKind,
    pub amount: rust_decimal::Decimal,
    /// `MENSAL`, `SEMANAL`… (the provider's).
    pub periodicidade: String,
    pub status: RecurrenceStatus,
    /// The BR Code that authorises it, while it waits.
    pub copia_e_cola: Option<String>,
    /// The local day a threshold's balance was last read.
    pub checked_on: Option<String>,
    /// The last thing that happened, as the operator reads it.
    pub last_outcome: Option<String>,
    pub created_at: DateTime<Utc>,
    pub approved_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
}

impl Recurrence {
    /// Its terms, as the tools and the card holder read them.
    pub fn termos(&self) -> vt_domain::tools::Termos {
        let gatilho = match self.kind {
            RecurrenceKind::Limite(l) => vt_domain::tools::Gatilho::Limite(l),
            RecurrenceKind::Dia(d) => vt_domain::tools::Gatilho::Dia(d),
        };
        vt_domain::tools::Termos {
            gatilho,
            valor: self.amount,
        }
    }
}

/// A recurrence as the operator lists it ([`RecurrenceStore::recurrence_listing`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RecurrenceListed {
    pub recurrence: Recurrence,
    /// `YYYY-MM-DD` of the next debit, when one is scheduled.
    pub next_debit: Option<String>,
    /// How many of its charges were credited.
    pub credited: i64,
}

/// Where a recurring charge stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecurringChargeStatus {
    /// On record, not yet created at the provider (or its answer not yet seen).
    Nova,
    /// Created at the provider: debited on its date (the card holder told the date).
    Agendada,
    /// Debited (its payment claimed): the recharge is on its way.
    Paga,
    /// Debited and credited: the receipt was sent.
    Creditada,
    /// Debited and sent; the recharge system has not said yet.
    Enviada,
    /// Debited, not credited: the money went back.
    Devolvida,
    /// Not debited: the attempts failed, or the provider refused it.
    Falhou,
    /// Cancelled before its date (with its recurrence).
    Cancelada,
}

impl RecurringChargeStatus {
    pub const ALL: [Self; 8] = [
        Self::Nova,
        Self::Agendada,
        Self::Paga,
        Self::Creditada,
        Self::Enviada,
        Self::Devolvida,
        Self::Falhou,
        Self::Cancelada,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Nova => "nova",
            Self::Agendada => "agendada",
            Self::Paga => "paga",
            Self::Creditada => "creditada",
            Self::Enviada => "enviada",
            Self::Devolvida => "devolvida",
            Self::Falhou => "falhou",
            Self::Cancelada => "cancelada",
        }
    }

    pub fn from_row(text: &str) -> Result<Self, StoreError> {
        Self::ALL.into_iter().find(|s| s.as_str() == text).ok_or_else(|| {
            StoreError::Invalid(format!("status de cobrança recorrente desconhecido: {text:?}"))
        })
    }
}

/// One cycle's charge of a recurrence.
#[derive(Debug, Clone, PartialEq)]
pub struct RecurringCharge {
    /// From the recurrence and the cycle ([`vt_domain::pix::automatico::txid_ciclo`]).
    pub txid: String,
    pub recurrence_id: String,
    pub tenant_id: String,
    pub card_index: String,
    /// `2026-12` (monthly), `2026-W49` (weekly)…
    pub cycle: String,
    /// `YYYY-MM-DD`: when it is debited.
    pub due_on: String,
    pub amount: rust_decimal::Decimal,
    pub status: RecurringChargeStatus,
    /// Retries asked of the provider.
    pub retries: i64,
    /// Whether the card holder was told an attempt failed for funds (once).
    pub funds_told: bool,
    pub end_to_end_id: Option<String>,
    pub paid_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}
