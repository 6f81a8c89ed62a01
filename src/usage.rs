//! The usage summary as a terminal table. Input tokens count the cached ones too; `em cache` says how
//! many of them the provider read from its prompt cache.

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
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for line in &lines {
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
                if i < 2 {
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
    let mut out = vec![render(header.to_vec())];
    out.push(
        widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .join("  "),
    );
    let last = lines.len() - 1;
    for (i, line) in lines.iter().enumerate() {
        if i == last {
            out.push(
                widths
                    .iter()
                    .map(|w| "-".repeat(*w))
                    .collect::<Vec<_>>()
                    .join("  "),
            );
        }
        out.push(render(line.iter().map(String::as_str).collect()));
    }
    out.join("\n")
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
}
