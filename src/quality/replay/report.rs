//! A replay's reports, in its output folder: `report.json` (everything), `junit.xml` (`<error>` for
//! the world's, `<failure>` for the behaviour's, `<properties>` with the figures), `summary.md` (for
//! a pull request) and `cases/<id>.yaml`, each case as a transcript to keep — personal data replaced.

use std::fmt::Write as _;
use std::path::Path;

use super::cases::Case;
use super::{CaseResult, ReplayRun, Verdict};
use crate::quality::transcripts::escape;

pub(super) fn write(run: &ReplayRun, cases: &[Case], out: &Path) -> anyhow::Result<()> {
    let written = |name: &str, text: String| {
        let path = out.join(name);
        std::fs::write(&path, text)
            .map_err(|e| anyhow::anyhow!("não foi possível gravar {}: {e}", path.display()))
    };
    std::fs::create_dir_all(out.join("cases"))
        .map_err(|e| anyhow::anyhow!("não foi possível criar {}: {e}", out.display()))?;
    written("report.json", vt_contract::json::to_pretty(run)?)?;
    written("junit.xml", junit(run))?;
    written("summary.md", markdown(run))?;
    for case in cases {
        written(
            &format!("cases/{}.yaml", case.id),
            serde_yaml::to_string(&case.transcript)?,
        )?;
    }
    Ok(())
}

fn properties(c: &CaseResult) -> String {
    let mutating = c
        .effects
        .iter()
        .filter(|e| e.class == super::effects::Class::Mutating)
        .count();
    let props = [
        ("efeitos_mutaveis", mutating.to_string()),
        ("efeitos_leitura", (c.effects.len() - mutating).to_string()),
        ("reais", c.reais.clone()),
        ("modelo_gravado", c.model.recorded.to_string()),
        ("modelo_ao_vivo", c.model.live.to_string()),
        ("modelo_sem_resposta", c.model.unanswered.to_string()),
        ("tokens", "0".to_owned()),
        ("similaridade", format!("{:.3}", c.similarity)),
        ("latencia_ms", c.latency_ms.to_string()),
        ("execucoes", format!("{}/{}", c.passes, c.plays)),
        ("veredito", c.verdict.as_str().to_owned()),
    ];
    let mut out = String::from("      <properties>\n");
    for (name, value) in props {
        let _ = writeln!(
            out,
            "        <property name=\"{name}\" value=\"{}\"/>",
            escape(&value)
        );
    }
    out.push_str("      </properties>\n");
    out
}

fn effect_diff(c: &CaseResult) -> String {
    c.diff
        .as_ref()
        .map(|rows| {
            rows.iter()
                .map(|(was, now)| format!("esperado: {was}\nobtido:   {now}"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

pub(super) fn junit(run: &ReplayRun) -> String {
    let count = |v: Verdict| run.cases.iter().filter(|c| c.verdict == v).count();
    let (failures, errors) = (count(Verdict::Fail), count(Verdict::Error));
    let time = run.duration_ms as f64 / 1000.0;
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{time:.3}\">\n  <testsuite name=\"replay\" tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{time:.3}\">\n",
        n = run.cases.len()
    );
    for problem in &run.problems {
        let _ = writeln!(
            out,
            "    <testcase classname=\"replay\" name=\"baseline\">\n      <failure message=\"{0}\">{0}</failure>\n    </testcase>",
            escape(problem)
        );
    }
    for c in &run.cases {
        let _ = write!(
            out,
            "    <testcase classname=\"replay\" name=\"{}\" time=\"{:.3}\">\n{}",
            escape(&c.id),
            c.latency_ms as f64 / 1000.0,
            properties(c)
        );
        match c.verdict {
            Verdict::Error => {
                let _ = writeln!(
                    out,
                    "      <error message=\"{}\">{}</error>",
                    escape(c.errors.first().map_or("", String::as_str)),
                    escape(&c.errors.join("\n"))
                );
            }
            Verdict::Fail => {
                let _ = writeln!(
                    out,
                    "      <failure message=\"um efeito que muda o mundo difere da {}\">{}</failure>",
                    if c.reference == "baseline" {
                        "referência aprovada"
                    } else {
                        "gravação"
                    },
                    escape(&effect_diff(c))
                );
            }
            _ => {}
        }
        let words: Vec<String> = c.words.iter().filter_map(|w| w.diff.clone()).collect();
        if !words.is_empty() {
            let _ = writeln!(
                out,
                "      <system-out>{}</system-out>",
                escape(&words.join("\n"))
            );
        }
        out.push_str("    </testcase>\n");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

pub(super) fn markdown(run: &ReplayRun) -> String {
    let mut out = format!("## Replay: {}\n\n", run.summary_line());
    let _ = writeln!(
        out,
        "Avaliador {}, corpus `{}`, {:.1} s.\n",
        run.evaluator,
        run.corpus,
        run.duration_ms as f64 / 1000.0
    );
    for p in &run.problems {
        let _ = writeln!(out, "- **{p}**");
    }
    out.push_str("| caso | veredito | efeitos que mudam o mundo | leituras | palavras | modelo (gravado/ao vivo/sem resposta) | valor movido |\n|---|---|---|---|---|---|---:|\n");
    for c in &run.cases {
        let mutating = c
            .effects
            .iter()
            .filter(|e| e.class == super::effects::Class::Mutating)
            .count();
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {:.0} % | {}/{}/{} | {} |",
            c.id,
            c.verdict.label(),
            mutating,
            if c.reads_differ { "diferem" } else { "iguais" },
            c.similarity * 100.0,
            c.model.recorded,
            c.model.live,
            c.model.unanswered,
            c.reais
        );
    }
    for c in run
        .cases
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::Fail | Verdict::Error))
    {
        let _ = writeln!(out, "\n### `{}` — {}\n", c.id, c.verdict.label());
        if let Some(rows) = &c.diff {
            let reference = if c.reference == "baseline" {
                "referência aprovada"
            } else {
                "gravação"
            };
            let _ = writeln!(out, "| {reference} | candidato |\n|---|---|");
            for (was, now) in rows {
                let _ = writeln!(out, "| {was} | {now} |");
            }
        }
        for e in &c.errors {
            let _ = writeln!(out, "- {e}");
        }
    }
    out
}
