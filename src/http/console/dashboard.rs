//! The usage dashboard's numbers, from the turns' usage records and the flow runs of a period: turns
//! per day (per hour over one day), the share answered with zero tokens, tokens by intent, latency
//! p50/p99, flows by outcome, and the cases handed to people (opened, time to claim and to close,
//! waiting now). Pure: the page renders them as tables and hands them to the charts; `/metrics` reads
//! the case figures too.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, DurationRound, Utc};
use serde::Serialize;

use crate::service::{CaseFigures, percentile};
use vt_store::{MessageCost, UsageRecord};

/// The periods the dashboard offers, in days.
pub(crate) const PERIODS: [u32; 3] = [1, 7, 30];

/// One bucket of time (an hour over one day, else a day).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Bucket {
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
    /// What the period's turns and paid messages whose price is known cost, in reais.
    pub cost_brl: f64,
    /// Turns and paid messages of the period without a price (their cost unknown).
    pub cost_unknown: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Dashboard {
    pub days: u32,
    pub buckets: Vec<Bucket>,
    pub turns: i64,
    pub zero_token_pct: f64,
    pub p50_ms: i64,
    pub p99_ms: i64,
    /// `(intent, tokens in + out, of them read from the provider's prompt cache)`, most first.
    pub tokens_by_intent: Vec<(String, i64, i64)>,
    /// `(status, flows)`.
    pub flows_by_outcome: Vec<(String, i64)>,
    pub cases: CaseFigures,
}

impl Dashboard {
    /// The dashboard of the `days` up to `now` (records outside the period are ignored); `messages`:
    /// the paid messages sent, for the cost per period.
    pub(crate) fn build(
        days: u32,
        now: DateTime<Utc>,
        (usage, messages): (&[UsageRecord], &[MessageCost]),
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
        let mut tokens: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
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
            let intent = tokens.entry(&r.intent_key).or_default();
            intent.0 += r.tokens_input + r.tokens_output;
            intent.1 += r.tokens_cached;
            all_ms.push(r.execution_time_ms);
            zero += i64::from(r.tokens_input + r.tokens_output == 0);
        }
        // Each period's cost: its turns' and its paid messages'.
        let mut costs: Vec<(i64, i64)> = vec![(0, 0); count as usize];
        let slot = |at: DateTime<Utc>| {
            (at >= first && at <= now).then(|| ((at - first).num_seconds() / step.num_seconds()) as usize)
        };
        let priced = usage
            .iter()
            .map(|r| (r.created_at, r.custo_micro_brl))
            .chain(messages.iter().map(|m| (m.created_at, m.custo_micro_brl)));
        for (at, micro) in priced {
            if let Some(c) = slot(at).and_then(|i| costs.get_mut(i)) {
                match micro {
                    Some(m) => c.0 += m,
                    None => c.1 += 1,
                }
            }
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
                    cost_brl: costs[i].0 as f64 / 1_000_000.0,
                    cost_unknown: costs[i].1,
                }
            })
            .collect();
        let mut tokens_by_intent: Vec<(String, i64, i64)> = tokens
            .into_iter()
            .map(|(k, (all, cached))| (k.to_owned(), all, cached))
            .collect();
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
            audio_ms: 0,
            tokens_cached: 0,
            tenant_id: "default".into(),
            custo_micro_brl: Some(0),
            marcas: String::new(),
        }
    }

    #[test]
    fn turns_fall_in_their_day_and_old_ones_are_left_out() {
        let now: DateTime<Utc> = "2026-11-22T15:30:00Z".parse().expect("t");
        let usage = [
            turn(now - Duration::days(9), "saudacao", 0, 1),
            turn(now - Duration::days(2), "consultar_saldo", 0, 10),
            turn(now - Duration::hours(1), "consultar_saldo", 0, 20),
            UsageRecord {
                tokens_cached: 256,
                custo_micro_brl: Some(12_000),
                ..turn(now, "fora_do_escopo", 300, 900)
            },
        ];
        let templates = [
            MessageCost {
                custo_micro_brl: Some(34_000),
                created_at: now - Duration::hours(2),
                ..Default::default()
            },
            MessageCost {
                custo_micro_brl: None,
                created_at: now - Duration::days(2),
                ..Default::default()
            },
        ];
        let d = Dashboard::build(
            7,
            now,
            (&usage, &templates),
            vec![("concluido".into(), 3)],
            CaseFigures::default(),
        );
        // Today: a turn's R$ 0,012 and a template's R$ 0,034; two days ago a template without a price.
        assert_eq!((d.buckets[6].cost_brl, d.buckets[6].cost_unknown), (0.046, 0));
        assert_eq!((d.buckets[4].cost_brl, d.buckets[4].cost_unknown), (0.0, 1));
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
            [
                ("fora_do_escopo".into(), 300, 256),
                ("consultar_saldo".into(), 0, 0)
            ]
        );
        let day = Dashboard::build(1, now, (&usage, &[]), Vec::new(), CaseFigures::default());
        assert_eq!(day.buckets.len(), 24);
        assert_eq!(day.buckets[23].label, "15h");
        assert_eq!(day.turns, 2);
    }
}
