//! The usage summary as a terminal table. Input tokens count the cached ones too; `em cache` says how
//! many of them the provider read from its prompt cache.

pub(crate) mod outcomes;

use vt_store::UsageSummaryRow;

/// Renders the rows with a total line: tokens per intent, share answered with zero tokens, mean time.
pub(crate) fn table(rows: &[UsageSummaryRow]) -> String {
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

/// What turns, paid messages and flow runs cost on one day for one tenant.
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
    /// Flow runs started.
    pub flows: usize,
    /// Of `known`, what flows' paid notices cost (a flow calls no model).
    pub flow_known: rust_decimal::Decimal,
    /// Flows' paid notices whose price was missing.
    pub flow_unknown: usize,
}

impl CostRow {
    fn new(day: chrono::NaiveDate, tenant: &str) -> Self {
        Self {
            day,
            tenant: tenant.to_owned(),
            conversations: 0,
            turns: 0,
            messages: 0,
            known: rust_decimal::Decimal::ZERO,
            unknown: 0,
            flows: 0,
            flow_known: rust_decimal::Decimal::ZERO,
            flow_unknown: 0,
        }
    }

    /// A period's spending, summed by the store, as one row (its day is no day; the store does not
    /// count turns and paid messages apart, so they stay 0).
    pub(crate) fn of_period(s: &vt_store::TenantSpending) -> Self {
        let count = |n: i64| usize::try_from(n).unwrap_or_default();
        Self {
            conversations: count(s.conversations),
            known: crate::costs::from_micro_brl(s.known_micro_brl),
            unknown: count(s.unknown),
            flows: count(s.flows),
            flow_known: crate::costs::from_micro_brl(s.flow_known_micro_brl),
            flow_unknown: count(s.flow_unknown),
            ..Self::new(chrono::NaiveDate::MIN, s.tenant_id.as_deref().unwrap_or("—"))
        }
    }

    /// What a conversation cost on average; `None` when a turn's cost is unknown (an average of what
    /// is known would look like a cost).
    pub(crate) fn per_conversation(&self) -> Option<rust_decimal::Decimal> {
        (self.unknown == 0 && self.conversations > 0)
            .then(|| self.known / rust_decimal::Decimal::from(self.conversations))
    }

    /// What a flow run cost on average (its paid notices over the runs, those that sent none
    /// included); `None` without runs or when a notice's cost is unknown.
    pub(crate) fn per_flow(&self) -> Option<rust_decimal::Decimal> {
        (self.flow_unknown == 0 && self.flows > 0)
            .then(|| self.flow_known / rust_decimal::Decimal::from(self.flows))
    }

    /// What the row cost; `None` when anything in it had no price.
    pub fn total(&self) -> Option<rust_decimal::Decimal> {
        (self.unknown == 0).then_some(self.known)
    }
}

/// What [`costs`] counts: the turns, the paid messages and the flow runs of a period.
#[derive(Clone, Copy)]
pub struct Spending<'a> {
    pub turns: &'a [vt_store::UsageRecord],
    pub messages: &'a [vt_store::MessageCost],
    pub flows: &'a [vt_store::FlowRunAt],
}

/// One thing that cost something (or nothing): a turn, a paid message or a flow run.
struct Item<'a> {
    at: chrono::DateTime<chrono::Utc>,
    tenant: &'a str,
    conversation: Option<&'a str>,
    kind: ItemKind,
}

enum ItemKind {
    Turn(Option<i64>),
    Message { micro: Option<i64>, of_flow: bool },
    Flow,
}

/// The spending from `first` on (a day in the time zone `tz`), per day and tenant, oldest first.
/// A flow run written before runs kept their tenant counts under `—`.
pub fn costs(
    spending: Spending<'_>,
    tz: &vt_domain::vt::timezone::Timezone,
    first: chrono::NaiveDate,
) -> Vec<CostRow> {
    use std::collections::{BTreeMap, BTreeSet};
    let turns = spending.turns.iter().map(|r| Item {
        at: r.created_at,
        tenant: r.tenant_id.as_str(),
        conversation: Some(r.conversation_id.as_str()),
        kind: ItemKind::Turn(r.custo_micro_brl),
    });
    let messages = spending.messages.iter().map(|m| Item {
        at: m.created_at,
        tenant: m.tenant_id.as_str(),
        conversation: m.conversation_id.as_deref(),
        kind: ItemKind::Message {
            micro: m.custo_micro_brl,
            of_flow: m.execucao_id.is_some(),
        },
    });
    let flows = spending.flows.iter().map(|f| Item {
        at: f.created_at,
        tenant: f.tenant_id.as_deref().unwrap_or("—"),
        conversation: None,
        kind: ItemKind::Flow,
    });
    let mut by: BTreeMap<(chrono::NaiveDate, &str), (BTreeSet<&str>, CostRow)> = BTreeMap::new();
    for item in turns.chain(messages).chain(flows) {
        let day = tz.local(item.at).date_naive();
        if day < first {
            continue;
        }
        let (conversations, row) = by
            .entry((day, item.tenant))
            .or_insert_with(|| (BTreeSet::new(), CostRow::new(day, item.tenant)));
        conversations.extend(item.conversation);
        let micro = match item.kind {
            ItemKind::Flow => {
                row.flows += 1;
                continue;
            }
            ItemKind::Turn(micro) => {
                row.turns += 1;
                micro
            }
            ItemKind::Message { micro, of_flow } => {
                row.messages += 1;
                if of_flow {
                    match micro {
                        Some(micro) => row.flow_known += crate::costs::from_micro_brl(micro),
                        None => row.flow_unknown += 1,
                    }
                }
                micro
            }
        };
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
        "fluxos",
        "por fluxo",
        "sem preço",
    ];
    let mut lines: Vec<[String; 10]> = rows
        .iter()
        .map(|r| {
            [
                r.day.format("%d/%m/%Y").to_string(),
                r.tenant.clone(),
                r.conversations.to_string(),
                r.turns.to_string(),
                r.messages.to_string(),
                reais(r.total()),
                per(r.conversations, r.per_conversation()),
                r.flows.to_string(),
                per(r.flows, r.per_flow()),
                r.unknown.to_string(),
            ]
        })
        .collect();
    let mut total = CostRow::new(chrono::NaiveDate::MIN, "");
    for r in rows {
        total.conversations += r.conversations;
        total.turns += r.turns;
        total.messages += r.messages;
        total.known += r.known;
        total.unknown += r.unknown;
        total.flows += r.flows;
        total.flow_known += r.flow_known;
        total.flow_unknown += r.flow_unknown;
    }
    lines.push([
        "total".into(),
        String::new(),
        total.conversations.to_string(),
        total.turns.to_string(),
        total.messages.to_string(),
        reais(total.total()),
        String::new(),
        total.flows.to_string(),
        per(total.flows, total.per_flow()),
        total.unknown.to_string(),
    ]);
    grid(&header, &lines, 2)
}

/// A cost per conversation or per flow: `—` when there were none (nothing to divide by is not an
/// unknown cost).
pub(crate) fn per(count: usize, cost: Option<rust_decimal::Decimal>) -> String {
    if count == 0 {
        "—".into()
    } else {
        crate::costs::reais(cost)
    }
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

    fn turn(at: &str, tenant: &str, conversation: &str, micro: Option<i64>) -> vt_store::UsageRecord {
        vt_store::UsageRecord {
            conversation_id: conversation.into(),
            created_at: at.parse().expect("time"),
            tenant_id: tenant.into(),
            custo_micro_brl: micro,
            ..Default::default()
        }
    }

    #[test]
    fn costs_fall_in_the_local_day_and_an_unknown_one_is_never_summed_as_known() {
        let tz = vt_domain::vt::timezone::Timezone::sao_paulo();
        let records = [
            // 01:30 UTC is still the 21st in São Paulo (UTC−3).
            turn("2026-11-22T01:30:00Z", "acme", "c1", Some(10_000)),
            turn("2026-11-22T12:00:00Z", "acme", "c1", Some(5_000)),
            turn("2026-11-22T12:05:00Z", "acme", "c2", Some(1_000)),
            turn("2026-11-22T13:00:00Z", "beta", "c3", None),
            turn("2026-11-20T13:00:00Z", "acme", "c0", Some(99_000)),
        ];
        let first = chrono::NaiveDate::from_ymd_opt(2026, 11, 21).expect("day");
        let messages = [vt_store::MessageCost {
            tenant_id: "acme".into(),
            conversation_id: Some("c2".into()),
            category: "utility".into(),
            custo_micro_brl: Some(34_000),
            created_at: "2026-11-22T18:00:00Z".parse().expect("time"),
            ..Default::default()
        }];
        let rows = costs(
            Spending {
                turns: &records,
                messages: &messages,
                flows: &[],
            },
            &tz,
            first,
        );
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

    #[test]
    fn a_flow_costs_its_paid_notices_over_every_run_of_the_day() {
        let tz = vt_domain::vt::timezone::Timezone::sao_paulo();
        let at = |t: &str| t.parse::<chrono::DateTime<chrono::Utc>>().expect("time");
        let run = |t: &str, tenant: Option<&str>| vt_store::FlowRunAt {
            tenant_id: tenant.map(str::to_owned),
            created_at: at(t),
        };
        // Three runs of acme on the 22nd, one of which told its outcome by a paid template; a
        // notice answered in a conversation is no flow's.
        let flows = [
            run("2026-11-22T12:00:00Z", Some("acme")),
            run("2026-11-22T12:01:00Z", Some("acme")),
            run("2026-11-22T12:02:00Z", Some("acme")),
            run("2026-11-22T12:03:00Z", Some("beta")),
            run("2026-11-22T12:04:00Z", None),
        ];
        let notice = |tenant: &str, micro: Option<i64>, run: Option<&str>| vt_store::MessageCost {
            tenant_id: tenant.into(),
            category: "utility".into(),
            custo_micro_brl: micro,
            created_at: at("2026-11-22T12:10:00Z"),
            execucao_id: run.map(str::to_owned),
            ..Default::default()
        };
        let messages = [
            notice("acme", Some(34_000), Some("r1")),
            notice("acme", Some(50_000), None),
            notice("beta", None, Some("r4")),
        ];
        let first = chrono::NaiveDate::from_ymd_opt(2026, 11, 22).expect("day");
        let rows = costs(
            Spending {
                turns: &[],
                messages: &messages,
                flows: &flows,
            },
            &tz,
            first,
        );
        let tenants: Vec<_> = rows.iter().map(|r| (r.tenant.as_str(), r.flows)).collect();
        assert_eq!(tenants, vec![("acme", 3), ("beta", 1), ("—", 1)]);
        assert_eq!(
            rows[0].per_flow(),
            Some(reais_of(34_000) / rust_decimal::Decimal::from(3))
        );
        assert_eq!(
            rows[0].total(),
            Some(reais_of(84_000)),
            "the flow's notice is in the day's cost once"
        );
        assert_eq!(
            rows[1].per_flow(),
            None,
            "an unpriced notice: unknown, never zero"
        );
        assert_eq!(
            rows[2].per_flow(),
            Some(rust_decimal::Decimal::ZERO),
            "a run that sent nothing paid"
        );
        let table = costs_table(&rows);
        let acme = table.lines().find(|l| l.contains("acme")).expect("acme");
        assert!(acme.contains("R$ 0,0113"), "R$ 0,034 over 3 runs: {acme}");
    }

    /// Millionths of a real as reais.
    fn reais_of(micro: i64) -> rust_decimal::Decimal {
        crate::costs::from_micro_brl(micro)
    }
}
