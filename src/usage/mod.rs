//! The usage summary as a terminal table. Input tokens count the cached ones too; `em cache` says how
//! many of them the provider read from its prompt cache.

pub mod outcomes;

use crate::store::UsageSummaryRow;

/// Renders the rows with a total line: tokens per intent, share answered with zero tokens, mean time.
pub fn table(rows: &[UsageSummaryRow]) -> String {
    let header = [
        "intent",
        "tipo",
        "turnos",
        "tokens entrada",
        "em cache",
        "tokens saída",
        "zero tokens",
        "por palavra-chave",
        "tempo médio",
    ];
    let pct = |part: i64, total: i64| {
        if total == 0 {
            "0%".to_owned()
        } else {
            format!("{:.0}%", part as f64 * 100.0 / total as f64)
        }
    };
    let mut lines: Vec<[String; 9]> = rows
        .iter()
        .map(|r| {
            [
                r.intent_key.clone(),
                r.action_type.clone(),
                r.turns.to_string(),
                r.tokens_input.to_string(),
                r.tokens_cached.to_string(),
                r.tokens_output.to_string(),
                pct(r.zero_token_turns, r.turns),
                pct(r.keyword_matched, r.turns),
                format!("{:.0} ms", r.mean_time_ms),
            ]
        })
        .collect();
    let turns: i64 = rows.iter().map(|r| r.turns).sum();
    let weighted_ms: f64 = rows.iter().map(|r| r.mean_time_ms * r.turns as f64).sum();
    lines.push([
        "total".into(),
        String::new(),
        turns.to_string(),
        rows.iter().map(|r| r.tokens_input).sum::<i64>().to_string(),
        rows.iter().map(|r| r.tokens_cached).sum::<i64>().to_string(),
        rows.iter().map(|r| r.tokens_output).sum::<i64>().to_string(),
        pct(rows.iter().map(|r| r.zero_token_turns).sum(), turns),
        pct(rows.iter().map(|r| r.keyword_matched).sum(), turns),
        format!(
            "{:.0} ms",
            if turns == 0 {
                0.0
            } else {
                weighted_ms / turns as f64
            }
        ),
    ]);
    grid(&header, &lines, 2)
}

/// `lines` under `header` in aligned columns (the first `left` to the left, numbers to the right),
/// the last line a total under a rule.
fn grid<const N: usize>(header: &[&str; N], lines: &[[String; N]], left: usize) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for line in lines {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let render = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                let pad = w.saturating_sub(c.chars().count());
                if i < left {
                    format!("{c}{}", " ".repeat(pad))
                } else {
                    format!("{}{c}", " ".repeat(pad))
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let rule = widths
        .iter()
        .map(|w| "-".repeat(*w))
        .collect::<Vec<_>>()
        .join("  ");
    let mut out = vec![render(header.to_vec()), rule.clone()];
    let last = lines.len().saturating_sub(1);
    for (i, line) in lines.iter().enumerate() {
        if i == last {
            out.push(rule.clone());
        }
        out.push(render(line.iter().map(String::as_str).collect()));
    }
    out.join("\n")
}

/// What turns and paid messages cost on one day for one tenant.
#[derive(Debug, Clone, PartialEq)]
pub struct CostRow {
    pub day: chrono::NaiveDate,
    pub tenant: String,
    pub conversations: usize,
    pub turns: usize,
    /// Paid messages sent (WhatsApp templates outside the 24-hour window).
    pub messages: usize,
    /// The turns and messages whose cost is known, summed.
    pub known: rust_decimal::Decimal,
    /// Turns and messages whose price was missing.
    pub unknown: usize,
}

impl CostRow {
    /// What a conversation cost on average; `None` when a turn's cost is unknown (an average of what
    /// is known would look like a cost).
    pub fn per_conversation(&self) -> Option<rust_decimal::Decimal> {
        (self.unknown == 0 && self.conversations > 0)
            .then(|| self.known / rust_decimal::Decimal::from(self.conversations))
    }

    fn total(&self) -> Option<rust_decimal::Decimal> {
        (self.unknown == 0).then_some(self.known)
    }
}

/// Turns (`records`) and paid messages (`messages`) from `first` on (a day in the time zone `tz`),
/// per day and tenant, oldest first.
pub fn costs(
    (records, messages): (&[crate::store::UsageRecord], &[crate::store::MessageCost]),
    tz: &vt_actions::vt::timezone::Timezone,
    first: chrono::NaiveDate,
) -> Vec<CostRow> {
    use std::collections::{BTreeMap, BTreeSet};
    type Day<'a> = (BTreeSet<&'a str>, CostRow);
    let mut by: BTreeMap<(chrono::NaiveDate, &str), Day<'_>> = BTreeMap::new();
    let items = records
        .iter()
        .map(|r| {
            (
                r.created_at,
                r.tenant_id.as_str(),
                Some(r.conversation_id.as_str()),
                r.custo_micro_brl,
                true,
            )
        })
        .chain(messages.iter().map(|m| {
            (
                m.created_at,
                m.tenant_id.as_str(),
                m.conversation_id.as_deref(),
                m.custo_micro_brl,
                false,
            )
        }));
    for (at, tenant, conversation, micro, turn) in items {
        let day = tz.local(at).date_naive();
        if day < first {
            continue;
        }
        let (conversations, row) = by.entry((day, tenant)).or_insert_with(|| {
            (
                BTreeSet::new(),
                CostRow {
                    day,
                    tenant: tenant.to_owned(),
                    conversations: 0,
                    turns: 0,
                    messages: 0,
                    known: rust_decimal::Decimal::ZERO,
                    unknown: 0,
                },
            )
        });
        conversations.extend(conversation);
        if turn {
            row.turns += 1;
        } else {
            row.messages += 1;
        }
        match micro {
            Some(micro) => row.known += crate::costs::from_micro_brl(micro),
            None => row.unknown += 1,
        }
    }
    by.into_values()
        .map(|(conversations, row)| CostRow {
            conversations: conversations.len(),
            ..row
        })
        .collect()
}

/// The cost rows as a terminal table with a total line.
pub fn costs_table(rows: &[CostRow]) -> String {
    use crate::costs::reais;
    let header = [
        "dia",
        "tenant",
        "conversas",
        "turnos",
        "mensagens pagas",
        "custo",
        "por conversa",
        "sem preço",
    ];
    let mut lines: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            [
                r.day.format("%d/%m/%Y").to_string(),
                r.tenant.clone(),
                r.conversations.to_string(),
                r.turns.to_string(),
                r.messages.to_string(),
                reais(r.total()),
                reais(r.per_conversation()),
                r.unknown.to_string(),
            ]
        })
        .collect();
    let unknown: usize = rows.iter().map(|r| r.unknown).sum();
    let known: rust_decimal::Decimal = rows.iter().map(|r| r.known).sum();
    lines.push([
        "total".into(),
        String::new(),
        rows.iter().map(|r| r.conversations).sum::<usize>().to_string(),
        rows.iter().map(|r| r.turns).sum::<usize>().to_string(),
        rows.iter().map(|r| r.messages).sum::<usize>().to_string(),
        reais((unknown == 0).then_some(known)),
        String::new(),
        unknown.to_string(),
    ]);
    grid(&header, &lines, 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_the_zero_token_share_and_a_total() {
        let rows = vec![
            UsageSummaryRow {
                intent_key: "consultar_saldo".into(),
                action_type: "deterministic".into(),
                turns: 3,
                tokens_input: 0,
                tokens_output: 0,
                zero_token_turns: 3,
                keyword_matched: 3,
                mean_time_ms: 12.0,
                tokens_cached: 0,
            },
            UsageSummaryRow {
                intent_key: "general_chat".into(),
                action_type: "reasoning".into(),
                turns: 1,
                tokens_input: 120,
                tokens_output: 30,
                zero_token_turns: 0,
                keyword_matched: 0,
                mean_time_ms: 800.0,
                tokens_cached: 96,
            },
        ];
        let t = table(&rows);
        assert!(t.contains("consultar_saldo") && t.contains("100%"), "{t}");
        assert!(t.lines().next().is_some_and(|h| h.contains("em cache")), "{t}");
        let chat = t.lines().find(|l| l.starts_with("general_chat")).expect("row");
        assert!(chat.contains(" 120  ") && chat.contains(" 96  "), "{chat}");
        let total = t.lines().last().expect("total line");
        assert!(
            total.starts_with("total") && total.contains("75%") && total.contains("209 ms"),
            "{total}"
        );
    }

    fn turn(at: &str, tenant: &str, conversation: &str, micro: Option<i64>) -> crate::store::UsageRecord {
        crate::store::UsageRecord {
            conversation_id: conversation.into(),
            created_at: at.parse().expect("time"),
            tenant_id: tenant.into(),
            custo_micro_brl: micro,
            ..Default::default()
        }
    }

    #[test]
    fn costs_fall_in_the_local_day_and_an_unknown_one_is_never_summed_as_known() {
        let tz = vt_actions::vt::timezone::Timezone::sao_paulo();
        let records = [
            // 01:30 UTC is still the 21st in São Paulo (UTC−3).
            turn("2026-11-22T01:30:00Z", "acme", "c1", Some(10_000)),
            turn("2026-11-22T12:00:00Z", "acme", "c1", Some(5_000)),
            turn("2026-11-22T12:05:00Z", "acme", "c2", Some(1_000)),
            turn("2026-11-22T13:00:00Z", "beta", "c3", None),
            turn("2026-11-20T13:00:00Z", "acme", "c0", Some(99_000)),
        ];
        let first = chrono::NaiveDate::from_ymd_opt(2026, 11, 21).expect("day");
        let messages = [crate::store::MessageCost {
            tenant_id: "acme".into(),
            conversation_id: Some("c2".into()),
            category: "utility".into(),
            custo_micro_brl: Some(34_000),
            created_at: "2026-11-22T18:00:00Z".parse().expect("time"),
            ..Default::default()
        }];
        let rows = costs((&records, &messages), &tz, first);
        let day = |d: u32| chrono::NaiveDate::from_ymd_opt(2026, 11, d).expect("day");
        assert_eq!(
            rows.iter()
                .map(|r| (r.day, r.tenant.as_str(), r.turns))
                .collect::<Vec<_>>(),
            vec![(day(21), "acme", 1), (day(22), "acme", 2), (day(22), "beta", 1)]
        );
        assert_eq!((rows[1].conversations, rows[1].messages), (2, 1));
        assert_eq!(
            rows[1].per_conversation(),
            Some(reais_of(20_000)),
            "(5,000 + 1,000 + 34,000) / 2"
        );
        assert_eq!(
            rows[2].per_conversation(),
            None,
            "unknown, not an average of what is known"
        );
        let t = costs_table(&rows);
        assert!(t.contains("R$ 0,04"), "{t}");
        let total = t.lines().last().expect("total");
        assert!(
            total.starts_with("total") && total.contains("desconhecido"),
            "{total}"
        );
    }

    /// Millionths of a real as reais.
    fn reais_of(micro: i64) -> rust_decimal::Decimal {
        crate::costs::from_micro_brl(micro)
    }
}
