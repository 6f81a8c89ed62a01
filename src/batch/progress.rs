//! How a running batch shows itself on stderr: a progress bar on a terminal (done/total, rate, ETA,
//! counts by status), plain lines every few seconds otherwise (logs, CI), and the closing summary.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Summary;
use vt_store::LineStatus;

/// How often plain progress lines are written.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

pub(crate) struct Progress {
    job: String,
    total: usize,
    done: usize,
    ran: usize,
    counts: BTreeMap<String, usize>,
    bar: Option<ProgressBar>,
    started: Instant,
    last_line: Instant,
}

impl Progress {
    /// A bar when `terminal`, else plain lines.
    pub(crate) fn new(job: &str, total: usize, terminal: bool) -> Self {
        let bar = terminal.then(|| {
            let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{prefix} [{bar:30}] {pos}/{len} · {per_sec} · faltam {eta} · {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(format!("lote {job}"));
            bar
        });
        Self {
            job: job.to_owned(),
            total,
            done: 0,
            ran: 0,
            counts: BTreeMap::new(),
            bar,
            started: Instant::now(),
            last_line: Instant::now(),
        }
    }

    /// A line ended: `ran` now, or recorded by an earlier run of the job.
    pub(crate) fn line(&mut self, status: &str, ran: bool) {
        self.done += 1;
        self.ran += usize::from(ran);
        *self.counts.entry(status.to_owned()).or_default() += 1;
        if let Some(bar) = &self.bar {
            if ran {
                bar.inc(1);
            } else {
                // Lines of an earlier run are not part of this run's rate.
                bar.set_position(self.done as u64);
                bar.reset_eta();
            }
            bar.set_message(counts(&self.counts));
        } else if self.last_line.elapsed() >= PLAIN_EVERY {
            self.last_line = Instant::now();
            eprintln!("{}", self.plain());
        }
    }

    fn plain(&self) -> String {
        let secs = self.started.elapsed().as_secs_f64();
        let rate = if secs > 0.0 { self.ran as f64 / secs } else { 0.0 };
        let left = self.total.saturating_sub(self.done);
        let eta = if rate > 0.0 {
            format!(", faltam ~{:.0} s", left as f64 / rate)
        } else {
            String::new()
        };
        format!(
            "lote {}: {}/{} linhas ({rate:.0} fluxos/s{eta}) · {}",
            self.job,
            self.done,
            self.total,
            counts(&self.counts)
        )
    }

    /// Clears the bar (the summary follows).
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn counts(counts: &BTreeMap<String, usize>) -> String {
    let parts: Vec<String> = counts.iter().map(|(s, n)| format!("{s} {n}")).collect();
    parts.join(" · ")
}

/// The closing summary: counts by status, this run's p50/p99 per flow and flows/s, and what to do when
/// it stopped early.
pub(crate) fn summary(job: &str, s: &Summary) -> String {
    let mut out = format!("lote {job}: {} de {} linhas terminadas", s.ended(), s.total);
    if s.skipped > 0 {
        let _ = write!(out, " ({} já estavam de uma execução anterior)", s.skipped);
    }
    let _ = write!(out, "\n  {}", counts(&s.counts));
    if let (Some(p50), Some(p99)) = (s.quantile(0.5), s.quantile(0.99)) {
        let _ = write!(
            out,
            "\n  {} fluxos em {:.2} s: {:.0} fluxos/s · por fluxo p50 {:.1} ms, p99 {:.1} ms",
            s.durations.len(),
            s.elapsed.as_secs_f64(),
            s.rate(),
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    }
    if s.not_run > 0 {
        let _ = write!(
            out,
            "\n  interrompido: {} linhas não rodaram. Rode o mesmo comando (ou --job {job}) para continuar; \
             nenhuma linha é cobrada duas vezes.",
            s.not_run
        );
    }
    if s.unrecorded > 0 || s.counts.contains_key(LineStatus::Erro.as_str()) {
        let _ = write!(
            out,
            "\n  {} resultados não puderam ser gravados e {} linhas não puderam rodar (veja o log): \
             rodar o lote de novo as roda com as mesmas chaves.",
            s.unrecorded,
            s.counts.get(LineStatus::Erro.as_str()).copied().unwrap_or(0)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_says_counts_rate_and_how_to_continue() {
        let s = Summary {
            total: 10,
            counts: BTreeMap::from([("concluido".into(), 6), ("falhou".into(), 1)]),
            skipped: 2,
            durations: vec![Duration::from_millis(2); 5],
            elapsed: Duration::from_millis(100),
            not_run: 3,
            unrecorded: 0,
        };
        let text = summary("j", &s);
        assert!(text.contains("7 de 10 linhas"), "{text}");
        assert!(text.contains("concluido 6 · falhou 1"), "{text}");
        assert!(text.contains("50 fluxos/s"), "{text}");
        assert!(
            text.contains("interrompido: 3 linhas") && text.contains("--job j"),
            "{text}"
        );
    }
}
