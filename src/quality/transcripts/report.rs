//! Reports: the closing line, and JUnit XML for CI dashboards.

use super::TranscriptReport;

/// `N passaram, M falharam` — the line CI reads.
pub(crate) fn summary_line(reports: &[TranscriptReport]) -> String {
    let failed = reports.iter().filter(|r| !r.passed).count();
    let passed = reports.len() - failed;
    let verb = |n: usize, one: &'static str, many: &'static str| if n == 1 { one } else { many };
    format!(
        "{passed} {}, {failed} {}",
        verb(passed, "passou", "passaram"),
        verb(failed, "falhou", "falharam")
    )
}

pub(crate) fn escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '&' => "&amp;".into(),
            '<' => "&lt;".into(),
            '>' => "&gt;".into(),
            '"' => "&quot;".into(),
            '\'' => "&apos;".into(),
            c if c.is_control() && c != '\n' && c != '\t' => " ".into(),
            c => c.to_string(),
        })
        .collect()
}

/// One `<testcase>` per transcript, with the first mismatch as the failure.
pub(crate) fn junit_xml(reports: &[TranscriptReport]) -> String {
    let failed = reports.iter().filter(|r| !r.passed).count();
    let total_s: f64 = reports.iter().map(|r| r.duration_ms as f64 / 1000.0).sum();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"{}\" failures=\"{failed}\" time=\"{total_s:.3}\">\n  <testsuite name=\"transcripts\" tests=\"{}\" failures=\"{failed}\" time=\"{total_s:.3}\">\n",
        reports.len(),
        reports.len()
    );
    for r in reports {
        out.push_str(&format!(
            "    <testcase classname=\"transcripts\" name=\"{}\" file=\"{}\" time=\"{:.3}\"",
            escape(&r.name),
            escape(&r.file),
            r.duration_ms as f64 / 1000.0
        ));
        match &r.failure {
            None => out.push_str("/>\n"),
            Some(m) => {
                out.push_str(&format!(
                    ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                    escape(&m.headline()),
                    escape(&m.to_string())
                ));
            }
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}
