//! The usage dashboard's numbers, from the turns' usage records and the flow runs of a period: turns
//! per day (per hour over one day), the share answered with zero tokens, tokens by intent, latency
//! p50/p99, flows by outcome, and the cases handed to people (opened, time to claim and to close,
//! waiting now). Pure: the page renders them as tables and hands them to the charts; `/metrics` reads
//! the case figures too.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, DurationRound, Utc};
use serde::Serialize;

use crate::store::{Case, CaseState, UsageRecord};

/// The periods the dashboard offers, in days.
pub(crate) const PERIODS: [u32; 3] = [1, 7, 30];

/// One bucket of time (an hour over one day, else a day).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bucket {
    /// `22/11` or `14h` (UTC).
    pub label: String,
    pub turns: i64,
    pub zero_token_turns: i64,
    /// Share of the turns answered with zero tokens, in percent; `None` without turns (a gap in the
    /// chart, not a fall to 0 %).
    pub zero_token_pct: Option<f64>,
    /// `None` without turns.
    pub p50_ms: Option<i64>,
    pub p99_ms: Option<i64>,
}

/// The cases of a period: how many people asked for a person, how long they waited for one, how long
/// a case lasted, and how many wait now.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CaseFigures {
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
    pub fn of(cases: &[Case], since: DateTime<Utc>) -> Self {
        let recent: Vec<&Case> = cases.iter().filter(|c| c.opened_at >= since).collect();
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

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dashboard {
    pub days: u32,
    pub buckets: Vec<Bucket>,
    pub turns: i64,
    pub zero_token_pct: f64,
    pub p50_ms: i64,
    pub p99_ms: i64,
    /// `(intent, tokens in + out)`, most first.
    pub tokens_by_intent: Vec<(String, i64)>,
    /// `(status, flows)`.
    pub flows_by_outcome: Vec<(String, i64)>,
    pub cases: CaseFigures,
}

impl Dashboard {
    /// The dashboard of the `days` up to `now` (records outside the period are ignored).
    pub fn build(
        days: u32,
        now: DateTime<Utc>,
        usage: &[UsageRecord],
        flows_by_outcome: Vec<(String, i64)>,
        cases: CaseFigures,
    ) -> Self {
        let (step, count, format) = if days <= 1 {
            (Duration::hours(1), 24, "%Hh")
        } else {
            (Duration::days(1), i64::from(days), "%d/%m")
        };
        let last = now.duration_trunc(step).unwrap_or(now);
        let first = last - step * (count as i32 - 1);
        let mut per_bucket: Vec<Vec<&UsageRecord>> = vec![Vec::new(); count as usize];
        let mut tokens: BTreeMap<&str, i64> = BTreeMap::new();
        let mut all_ms = Vec::new();
        let mut zero = 0;
        for r in usage {
            if r.created_at < first || r.created_at > now {
                continue;
            }
            let i = ((r.created_at - first).num_seconds() / step.num_seconds()) as usize;
            if let Some(b) = per_bucket.get_mut(i) {
                b.push(r);
            }
            *tokens.entry(&r.intent_key).or_default() += r.tokens_input + r.tokens_output;
            all_ms.push(r.execution_time_ms);
            zero += i64::from(r.tokens_input + r.tokens_output == 0);
        }
        let buckets = per_bucket
            .iter()
            .enumerate()
            .map(|(i, records)| {
                let mut ms: Vec<i64> = records.iter().map(|r| r.execution_time_ms).collect();
                let zero = records
                    .iter()
                    .filter(|r| r.tokens_input + r.tokens_output == 0)
                    .count() as i64;
                let any = !records.is_empty();
                Bucket {
                    label: (first + step * i as i32).format(format).to_string(),
                    turns: records.len() as i64,
                    zero_token_turns: zero,
                    zero_token_pct: any.then(|| pct(zero, records.len() as i64)),
                    p50_ms: any.then(|| percentile(&mut ms, 50)),
                    p99_ms: any.then(|| percentile(&mut ms, 99)),
                }
            })
            .collect();
        let mut tokens_by_intent: Vec<(String, i64)> =
            tokens.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        tokens_by_intent.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let turns = all_ms.len() as i64;
        Self {
            days,
            buckets,
            turns,
            zero_token_pct: pct(zero, turns),
            p50_ms: percentile(&mut all_ms, 50),
            p99_ms: percentile(&mut all_ms, 99),
            tokens_by_intent,
            flows_by_outcome,
            cases,
        }
    }
}

fn pct(part: i64, whole: i64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        (part as f64 * 1000.0 / whole as f64).round() / 10.0
    }
}

/// The nearest-rank percentile `p` of `values` (0 when empty).
fn percentile(values: &mut [i64], p: usize) -> i64 {
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

    fn turn(at: DateTime<Utc>, intent: &str, tokens: i64, ms: i64) -> UsageRecord {
        UsageRecord {
            conversation_id: "c".into(),
            intent_key: intent.into(),
            action_type: "deterministic".into(),
            tokens_input: tokens,
            tokens_output: 0,
            execution_time_ms: ms,
            was_keyword_matched: tokens == 0,
            created_at: at,
        }
    }

    #[test]
    fn turns_fall_in_their_day_and_old_ones_are_left_out() {
        let now: DateTime<Utc> = "2026-11-22T15:30:00Z".parse().expect("t");
        let usage = [
            turn(now - Duration::days(9), "saudacao", 0, 1),
            turn(now - Duration::days(2), "consultar_saldo", 0, 10),
            turn(now - Duration::hours(1), "consultar_saldo", 0, 20),
            turn(now, "fora_do_escopo", 300, 900),
        ];
        let d = Dashboard::build(
            7,
            now,
            &usage,
            vec![("concluido".into(), 3)],
            CaseFigures::default(),
        );
        assert_eq!(d.buckets.len(), 7);
        assert_eq!(d.buckets[6].label, "22/11");
        assert_eq!(
            d.buckets.iter().map(|b| b.turns).collect::<Vec<_>>(),
            [0, 0, 0, 0, 1, 0, 2]
        );
        assert_eq!(d.turns, 3);
        assert_eq!(d.zero_token_pct, 66.7);
        assert_eq!(d.buckets[6].zero_token_pct, Some(50.0));
        // A day without turns is a gap, not 0 %.
        assert_eq!((d.buckets[5].zero_token_pct, d.buckets[5].p50_ms), (None, None));
        assert_eq!((d.p50_ms, d.p99_ms), (20, 900));
        assert_eq!(
            d.tokens_by_intent,
            [("fora_do_escopo".into(), 300), ("consultar_saldo".into(), 0)]
        );
        let day = Dashboard::build(1, now, &usage, Vec::new(), CaseFigures::default());
        assert_eq!(day.buckets.len(), 24);
        assert_eq!(day.buckets[23].label, "15h");
        assert_eq!(day.turns, 2);
    }

    #[test]
    fn case_figures_count_the_periods_cases_and_time_their_claims() {
        let now: DateTime<Utc> = "2026-11-22T15:30:00Z".parse().expect("t");
        let case = |opened_min_ago: i64, claimed_after_s: Option<i64>, closed_after_s: Option<i64>| {
            let opened_at = now - Duration::minutes(opened_min_ago);
            Case {
                id: "caso".into(),
                conversation_id: "c".into(),
                tenant_id: "t".into(),
                channel: "whatsapp".into(),
                reason: String::new(),
                state: match (claimed_after_s, closed_after_s) {
                    (_, Some(_)) => CaseState::Devolvido,
                    (Some(_), None) => CaseState::EmAtendimento,
                    (None, None) => CaseState::Aguardando,
                },
                owner: None,
                opened_at,
                claimed_at: claimed_after_s.map(|s| opened_at + Duration::seconds(s)),
                closed_at: closed_after_s.map(|s| opened_at + Duration::seconds(s)),
                acknowledged: false,
                case_file: serde_json::Value::Null,
                notice_due_at: None,
                noticed: false,
                board_post: None,
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
