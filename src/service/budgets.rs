//! Monthly budgets per tenant (`[[orcamentos]]`): what the tenant's turns and paid messages cost this
//! month (the policy's time zone), against its budget. At 80 % the operator is told (a log line once
//! a month per process, the `/metrics` gauge, the console); at 100 % the model is not called for the
//! tenant — level-1 answers, flows and recharges already asked go on, everything else gets the help
//! and the offer of a person — until the month turns or the budget is raised. Unknown costs are not
//! counted (they are no figure), so a table without prices never stops anything.
//!
//! The month's spending is read from the store, then kept in memory with each turn this process
//! commits added; it is read again after [`REREAD`], so what other instances spent is seen too.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Datelike, Utc};
use rust_decimal::Decimal;
use serde::Deserialize;

use super::Spending;

/// How long a tenant's month read from the store stands before it is read again.
const REREAD: Duration = Duration::from_secs(30);

/// The share of the budget at which the operator is told.
const WARN_AT: Decimal = Decimal::from_parts(80, 0, 0, false, 2);

/// One `[[orcamentos]]` entry.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Orcamento {
    /// The tenant whose model calls the budget covers.
    pub tenant: String,
    /// Reais a month.
    pub mensal_brl: Decimal,
}

/// `[[orcamentos]]`, checked: one per tenant, each above zero.
pub(crate) fn problem(budgets: &[Orcamento]) -> Option<(String, &'static str)> {
    for (i, b) in budgets.iter().enumerate() {
        if b.tenant.trim().is_empty() {
            return Some((format!("orcamentos[{i}].tenant"), "não pode ser vazio"));
        }
        if b.mensal_brl <= Decimal::ZERO {
            return Some((format!("orcamentos[{i}].mensal_brl"), "deve ser maior que zero"));
        }
        if budgets[..i].iter().any(|o| o.tenant == b.tenant) {
            return Some((
                format!("orcamentos[{i}].tenant"),
                "repetido: um orçamento por tenant",
            ));
        }
    }
    None
}

/// Where a tenant stands this month.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// No budget for the tenant.
    Unlimited,
    /// Spent this share of the budget (0.0–1.0+).
    Within(Decimal),
    /// 80 % or more spent.
    Warning(Decimal),
    /// The budget is spent: no model.
    Spent(Decimal),
}

impl Standing {
    pub fn model_allowed(self) -> bool {
        !matches!(self, Self::Spent(_))
    }

    /// The share spent, when there is a budget.
    pub fn share(self) -> Option<Decimal> {
        match self {
            Self::Unlimited => None,
            Self::Within(s) | Self::Warning(s) | Self::Spent(s) => Some(s),
        }
    }
}

/// A tenant's month as this process knows it.
struct Month {
    /// `(year, month)` in the policy's time zone.
    month: (i32, u32),
    micro: i64,
    read_at: Instant,
    warned: bool,
}

#[derive(Default)]
pub(super) struct Budgets {
    limits: HashMap<String, Decimal>,
    months: Mutex<HashMap<String, Month>>,
}

impl Budgets {
    pub(super) fn new(budgets: &[Orcamento]) -> Self {
        Self {
            limits: budgets.iter().map(|b| (b.tenant.clone(), b.mensal_brl)).collect(),
            months: Mutex::default(),
        }
    }

    fn months(&self) -> std::sync::MutexGuard<'_, HashMap<String, Month>> {
        self.months.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Spending<'_> {
    /// Where `tenant` stands this month.
    pub async fn standing(&self, tenant: &str) -> Standing {
        let Some(limit) = self.budgets.limits.get(tenant).copied() else {
            return Standing::Unlimited;
        };
        let now = self.engine.now();
        let (month, since) = self.month_of(now);
        let cached = self
            .budgets
            .months()
            .get(tenant)
            .filter(|m| m.month == month && m.read_at.elapsed() < REREAD)
            .map(|m| m.micro);
        let micro = match cached {
            Some(micro) => micro,
            None => match self.reports.spent_since(tenant, since).await {
                Ok(micro) => {
                    let mut months = self.budgets.months();
                    let warned = months.get(tenant).is_some_and(|m| m.month == month && m.warned);
                    months.insert(
                        tenant.to_owned(),
                        Month {
                            month,
                            micro,
                            read_at: Instant::now(),
                            warned,
                        },
                    );
                    micro
                }
                Err(e) => {
                    // The figure cannot be read: the tenant is served (a budget is a limit on
                    // spending, not on service when the store hiccups).
                    tracing::warn!(error = %e, tenant, "the month's spending could not be read");
                    return Standing::Within(Decimal::ZERO);
                }
            },
        };
        let share = crate::costs::from_micro_brl(micro) / limit;
        let standing = if share >= Decimal::ONE {
            Standing::Spent(share)
        } else if share >= WARN_AT {
            Standing::Warning(share)
        } else {
            Standing::Within(share)
        };
        self.warn_once(tenant, month, standing);
        standing
    }

    /// The operator is told once a month (per process) that `tenant` passed 80 % or 100 %.
    fn warn_once(&self, tenant: &str, month: (i32, u32), standing: Standing) {
        if matches!(standing, Standing::Within(_) | Standing::Unlimited) {
            return;
        }
        let mut months = self.budgets.months();
        let Some(m) = months.get_mut(tenant).filter(|m| m.month == month) else {
            return;
        };
        if m.warned {
            return;
        }
        m.warned = true;
        let pct = standing.share().unwrap_or_default() * Decimal::ONE_HUNDRED;
        tracing::warn!(
            tenant,
            percent = %pct.round_dp(1),
            model_stopped = !standing.model_allowed(),
            "monthly budget: {}",
            if standing.model_allowed() {
                "80% reached"
            } else {
                "spent; the model is not called for this tenant until the month turns or the budget is raised"
            }
        );
    }

    /// A turn of `tenant` committed at `at` cost `micro`: added to the month this process knows.
    pub(super) fn spent(&self, tenant: &str, at: DateTime<Utc>, micro: Option<i64>) {
        let (Some(micro), true) = (micro, self.budgets.limits.contains_key(tenant)) else {
            return;
        };
        let (month, _) = self.month_of(at);
        if let Some(m) = self.budgets.months().get_mut(tenant).filter(|m| m.month == month) {
            m.micro += micro;
        }
    }

    /// The month of `at` in the policy's time zone, and when it began (UTC).
    fn month_of(&self, at: DateTime<Utc>) -> ((i32, u32), DateTime<Utc>) {
        let local = super::policy_timezone(self.engine).local(at);
        let first = local
            .date_naive()
            .with_day(1)
            .unwrap_or(local.date_naive())
            .and_time(chrono::NaiveTime::MIN);
        let since = first
            .and_local_timezone(*local.offset())
            .single()
            .map_or(at, |t| t.with_timezone(&Utc));
        ((local.year(), local.month()), since)
    }

    /// What each tenant's turns and paid messages whose price is known cost this month, in reais.
    pub(crate) async fn month_costs(&self) -> Result<Vec<(String, Decimal)>, vt_store::StoreError> {
        let (_, since) = self.month_of(self.engine.now());
        Ok(self
            .reports
            .spent_by_tenant_since(since)
            .await?
            .into_iter()
            .map(|(tenant, micro)| (tenant, crate::costs::from_micro_brl(micro)))
            .collect())
    }

    /// Each budgeted tenant's share of its month spent, for `/metrics` and the console.
    pub(crate) async fn budget_shares(&self) -> Vec<(String, Decimal)> {
        let mut tenants: Vec<&String> = self.budgets.limits.keys().collect();
        tenants.sort();
        let mut shares = Vec::with_capacity(tenants.len());
        for tenant in tenants {
            if let Some(share) = self.standing(tenant).await.share() {
                shares.push((tenant.clone(), share));
            }
        }
        shares
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::dec;

    #[test]
    fn budgets_are_checked_when_loaded() {
        let b = |tenant: &str, brl: Decimal| Orcamento {
            tenant: tenant.into(),
            mensal_brl: brl,
        };
        assert_eq!(problem(&[b("acme", dec!(100))]), None);
        assert_eq!(
            problem(&[b("acme", dec!(0))]).map(|p| p.0),
            Some("orcamentos[0].mensal_brl".into())
        );
        assert_eq!(
            problem(&[b("acme", dec!(1)), b("acme", dec!(2))]).map(|p| p.0),
            Some("orcamentos[1].tenant".into())
        );
        assert_eq!(
            problem(&[b(" ", dec!(1))]).map(|p| p.0),
            Some("orcamentos[0].tenant".into())
        );
    }
}
