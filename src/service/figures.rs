//! Figures of the cases handed to people, for the console's dashboard and `/metrics`: pure.

use chrono::{DateTime, Utc};
use serde::Serialize;

use vt_store::{CaseState, CaseTimes};

/// The cases of a period: how many people asked for a person, how long they waited for one, how long
/// a case lasted, and how many wait now.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct CaseFigures {
    pub opened: i64,
    pub waiting_now: i64,
    /// Time to claim, of the cases claimed: nearest-rank p50 and p90 in seconds (`None`: none).
    pub claim_p50_s: Option<i64>,
    pub claim_p90_s: Option<i64>,
    /// Time from opened to closed, of the cases closed: p50 in seconds.
    pub close_p50_s: Option<i64>,
}

impl CaseFigures {
    /// The figures of `cases` opened since `since` (the waiting count is of every case given).
    pub(crate) fn of(cases: &[CaseTimes], since: DateTime<Utc>) -> Self {
        let recent: Vec<&CaseTimes> = cases.iter().filter(|c| c.opened_at >= since).collect();
        let mut claim: Vec<i64> = recent
            .iter()
            .filter_map(|c| c.claimed_at.map(|t| (t - c.opened_at).num_seconds()))
            .collect();
        let mut close: Vec<i64> = recent
            .iter()
            .filter_map(|c| c.closed_at.map(|t| (t - c.opened_at).num_seconds()))
            .collect();
        let some = |values: &mut Vec<i64>, p| (!values.is_empty()).then(|| percentile(values, p));
        Self {
            opened: recent.len() as i64,
            waiting_now: cases.iter().filter(|c| c.state == CaseState::Aguardando).count() as i64,
            claim_p50_s: some(&mut claim, 50),
            claim_p90_s: some(&mut claim, 90),
            close_p50_s: some(&mut close, 50),
        }
    }
}

/// The nearest-rank percentile `p` of `values` (0 when empty).
pub(crate) fn percentile(values: &mut [i64], p: usize) -> i64 {
    if values.is_empty() {
        return 0;
    }
    values.sort_unstable();
    let rank = (p * values.len()).div_ceil(100).max(1);
    values[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    #[test]
    fn case_figures_count_the_periods_cases_and_time_their_claims() {
        let now: DateTime<Utc> = "2026-11-22T15:30:00Z".parse().expect("t");
        let case = |opened_min_ago: i64, claimed_after_s: Option<i64>, closed_after_s: Option<i64>| {
            let opened_at = now - Duration::minutes(opened_min_ago);
            CaseTimes {
                state: match (claimed_after_s, closed_after_s) {
                    (_, Some(_)) => CaseState::Devolvido,
                    (Some(_), None) => CaseState::EmAtendimento,
                    (None, None) => CaseState::Aguardando,
                },
                opened_at,
                claimed_at: claimed_after_s.map(|s| opened_at + Duration::seconds(s)),
                closed_at: closed_after_s.map(|s| opened_at + Duration::seconds(s)),
            }
        };
        let cases = [
            case(30, Some(60), Some(600)),
            case(20, Some(120), None),
            case(10, Some(600), None),
            case(5, None, None),
            // Before the period: counted as waiting now, not in the period's figures.
            case(60 * 48, None, None),
        ];
        let f = CaseFigures::of(&cases, now - Duration::days(1));
        assert_eq!((f.opened, f.waiting_now), (4, 2));
        assert_eq!((f.claim_p50_s, f.claim_p90_s), (Some(120), Some(600)));
        assert_eq!(f.close_p50_s, Some(600));
        assert_eq!(CaseFigures::of(&[], now).claim_p50_s, None);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<i64> = (1..=100).rev().collect();
        assert_eq!((percentile(&mut v, 50), percentile(&mut v, 99)), (50, 99));
        assert_eq!(percentile(&mut [7], 99), 7);
        assert_eq!(percentile(&mut [], 50), 0);
    }
}
