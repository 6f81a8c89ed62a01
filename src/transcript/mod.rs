//! Transcript regression tests (SPEC §13): conversations as YAML files with scripted (or recorded)
//! model replies and expectations on what the agent did — the format, loading, the model cassettes
//! and the export of a stored conversation (`vt-agent transcript export`), with its personal data
//! replaced (`pseudonym.rs`: replay's cases, the review queue's items and tests, `review.rs`). The runner, which composes
//! the product, is `quality::transcripts`: `vt-agent test PATH...` runs them with a readable
//! report, JUnit XML and a JSON report; `cargo test` runs every file under `tests/transcripts/`.

pub(crate) mod cassette;
pub(crate) mod export;
pub(crate) mod format;
pub(crate) mod pseudonym;
pub(crate) mod review;

pub(crate) use format::Transcript;

use std::path::{Path, PathBuf};

/// Reads a transcript file.
pub(crate) fn load(path: &Path) -> Result<Transcript, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_yaml::from_str(&text).map_err(|e| format!("{} is not a valid transcript: {e}", path.display()))
}

/// The transcript files named by `paths` (files as given, folders searched for `*.yaml`/`*.yml`),
/// sorted, without duplicates.
pub fn collect(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let entries =
                std::fs::read_dir(p).map_err(|e| format!("cannot read folder {}: {e}", p.display()))?;
            for entry in entries.filter_map(Result::ok) {
                let path = entry.path();
                if path.is_file() && path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                    files.push(path);
                }
            }
        } else if p.is_file() {
            files.push(p.clone());
        } else {
            return Err(format!("{} does not exist", p.display()));
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}
