//! `vt-agent replay`: stored conversations replayed through a candidate configuration.

use std::process::ExitCode;

use super::{ReplayArgs, cannot_run};
use crate::config::Config;
use vt_store::Usage;

/// A window as `7d`, `24h` or `30m`.
pub(super) fn window(text: &str) -> anyhow::Result<chrono::Duration> {
    let bad = || cannot_run("--since: use um número e d, h ou m (7d, 24h, 30m)");
    let unit = text.chars().last().ok_or_else(bad)?;
    let n: i64 = text[..text.len() - unit.len_utf8()].parse().map_err(|_| bad())?;
    let window = match unit {
        'd' => chrono::Duration::try_days(n),
        'h' => chrono::Duration::try_hours(n),
        'm' => chrono::Duration::try_minutes(n),
        _ => None,
    };
    window.filter(|w| *w > chrono::Duration::zero()).ok_or_else(bad)
}

/// `vt-agent replay`: see [`Command::Replay`](super::Command::Replay).
pub(super) async fn replay(
    config: &Config,
    store_usage: Usage,
    args: ReplayArgs,
) -> anyhow::Result<ExitCode> {
    let repeat = args.repeat.max(1);
    let min_pass = args.min_pass.unwrap_or(repeat);
    if min_pass > repeat {
        return Err(cannot_run("--min-pass: não pode passar de --repeat"));
    }
    // A baseline that is not there is compared with nothing: only --approve may write it first.
    if let Some(b) = args.baseline.as_ref().filter(|b| !args.approve && !b.exists()) {
        return Err(cannot_run(format!(
            "--baseline: {} não existe (aprove uma execução antes com --approve)",
            b.display()
        )));
    }
    let ids = args
        .ids
        .as_ref()
        .map(|f| {
            std::fs::read_to_string(f)
                .map_err(|e| cannot_run(format!("--ids: não foi possível ler {}: {e}", f.display())))
                .map(|t| {
                    t.lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
        })
        .transpose()?;
    let since = match ids {
        Some(_) => None,
        None => Some(chrono::Utc::now() - window(&args.since)?),
    };
    let candidate = match &args.candidate {
        Some(path) => Config::load(Some(path)).map_err(|e| cannot_run(format!("--candidate: {e:#}")))?,
        None => config.clone(),
    };
    let live_model = if args.live_model {
        Some(
            candidate
                .llm
                .provider()?
                .ok_or_else(|| cannot_run("--live-model: a configuração candidata não tem modelo ([llm])"))?,
        )
    } else {
        None
    };
    let store = crate::app::store(config, store_usage).await?;
    let options = crate::quality::replay::ReplayOptions {
        selection: crate::quality::replay::Selection {
            since,
            ids,
            tenant: args.tenant,
        },
        candidate,
        live_model,
        baseline: args.baseline,
        approve: args.approve,
        out: args.out.unwrap_or_else(|| config.data_dir.join("replay")),
        repeat,
        min_pass,
    };
    let run = crate::quality::replay::run(store.as_ref(), &options).await?;
    for c in &run.cases {
        println!(
            "{:<8} {}  similaridade {:.0} %{}",
            c.verdict.label(),
            c.id,
            c.similarity * 100.0,
            c.errors.first().map(|e| format!("  — {e}")).unwrap_or_default()
        );
    }
    println!("{}", run.summary_line());
    println!("relatórios: {}", options.out.display());
    Ok(ExitCode::from(run.exit_code() as u8))
}

#[cfg(test)]
mod window_tests {
    #[test]
    fn a_window_is_a_number_and_a_unit_and_anything_else_is_named() {
        assert_eq!(super::window("7d").expect("7d"), chrono::Duration::days(7));
        assert_eq!(super::window("30m").expect("30m"), chrono::Duration::minutes(30));
        for bad in ["", "d", "7", "7é", "sete dias", "-1d", "0h", "99999999999999d"] {
            let e = super::window(bad).expect_err(bad).to_string();
            assert!(e.contains("--since"), "{bad}: {e}");
        }
    }
}
