//! Follow-ups of recharges whose outcome is unknown (`pendente`, `enviando`): the records, and
//! `[recargas]`, which says how often a follow-up checks and when it gives up.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use vt_domain::journal::RechargeRequest;

use super::RechargeAttemptRecord;

/// `[recargas]`: recharges whose outcome came late.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RecargasConfig {
    /// Minutes after a recharge was sent within which follow-ups try to learn its outcome; past them a
    /// person checks it (default 60).
    pub resolver_em_minutos: u32,
    /// Seconds before the first follow-up (default 60); each next one waits twice as long.
    pub primeira_verificacao_segundos: u32,
}

impl Default for RecargasConfig {
    fn default() -> Self {
        Self {
            resolver_em_minutos: 60,
            primeira_verificacao_segundos: 60,
        }
    }
}

impl RecargasConfig {
    /// `Err((field, why))` for a value that cannot work.
    pub fn validate(&self) -> Result<(), (String, &'static str)> {
        if self.resolver_em_minutos == 0 {
            return Err(("recargas.resolver_em_minutos".into(), "deve ser pelo menos 1"));
        }
        if self.primeira_verificacao_segundos == 0 {
            return Err((
                "recargas.primeira_verificacao_segundos".into(),
                "deve ser pelo menos 1",
            ));
        }
        if i64::from(self.primeira_verificacao_segundos) > 60 * i64::from(self.resolver_em_minutos) {
            return Err((
                "recargas.primeira_verificacao_segundos".into(),
                "não pode passar de recargas.resolver_em_minutos",
            ));
        }
        Ok(())
    }

    /// The follow-up of a recharge sent at `now`.
    pub fn follow_up(&self, request: RechargeRequest, now: DateTime<Utc>) -> NewFollowUp {
        let deadline_at = now + Duration::minutes(i64::from(self.resolver_em_minutos));
        NewFollowUp {
            request,
            next_check_at: (now + self.first()).min(deadline_at),
            deadline_at,
        }
    }

    /// When the check after `checks` checks is due (1, 2, 4… times the first wait), never past the
    /// deadline — the last check is at the deadline, and hands the recharge to a person.
    pub fn next_check(&self, checks: i64, now: DateTime<Utc>, deadline: DateTime<Utc>) -> DateTime<Utc> {
        let doubling = u32::try_from(checks.clamp(0, 20)).unwrap_or(20);
        (now + self.first() * 2_i32.pow(doubling)).min(deadline)
    }

    /// How often `serve` looks for due follow-ups: often enough for the first wait, at most every 15 s.
    pub fn poll_every(&self) -> std::time::Duration {
        std::time::Duration::from_secs(u64::from(self.primeira_verificacao_segundos).clamp(1, 15))
    }

    /// When the check after `checks` checks of a recharge waiting for its boleto is due: as
    /// [`Self::next_check`], but at least every [`BOLETO_CHECK_EVERY_MINUTES`] — a payment clears any
    /// day until the deadline, and the card holder should hear of it soon after.
    pub fn next_boleto_check(
        &self,
        checks: i64,
        now: DateTime<Utc>,
        deadline: DateTime<Utc>,
    ) -> DateTime<Utc> {
        self.next_check(checks, now, deadline)
            .min(now + Duration::minutes(BOLETO_CHECK_EVERY_MINUTES))
    }

    fn first(&self) -> Duration {
        Duration::seconds(i64::from(self.primeira_verificacao_segundos))
    }
}

/// The longest wait between two checks of a recharge waiting for its boleto.
const BOLETO_CHECK_EVERY_MINUTES: i64 = 30;

/// A follow-up put on record with its recharge attempt, before the recharge is sent.
#[derive(Debug, Clone, PartialEq)]
pub struct NewFollowUp {
    /// Sealed in the store until the outcome is known.
    pub request: RechargeRequest,
    pub next_check_at: DateTime<Utc>,
    pub deadline_at: DateTime<Utc>,
}

/// A follow-up claimed for a check: the attempt, and the request to send again.
#[derive(Debug, Clone, PartialEq)]
pub struct FollowUp {
    pub attempt: RechargeAttemptRecord,
    pub request: RechargeRequest,
    /// Checks made so far.
    pub checks: i64,
    pub deadline_at: DateTime<Utc>,
}

/// A follow-up as an operator lists it (never its request).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FollowUpView {
    pub attempt: RechargeAttemptRecord,
    pub checks: i64,
    pub next_check_at: DateTime<Utc>,
    pub deadline_at: DateTime<Utc>,
    /// `aprovada`, `negada`, `erro` or `caso`; `None` while the outcome is unknown.
    pub outcome: Option<String>,
    pub settled_at: Option<DateTime<Utc>>,
}

/// What a check left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// Still unknown: the next check is due at `next`; the follow-ups give up at `deadline` (later
    /// than the first one for a recharge waiting for its boleto).
    Again {
        next: DateTime<Utc>,
        deadline: DateTime<Utc>,
    },
    /// Over: the outcome (`aprovada`, `negada`, `erro`, `caso`); the request is dropped.
    Settled(String),
}

/// What a person has, once follow-ups gave up.
pub const OUTCOME_CASE: &str = "caso";
