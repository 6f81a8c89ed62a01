//! The corpus of how card holders write, as files: one folder per split (`treino/`, `avaliacao/`), one
//! file per intent, one message per line (`#` starts a comment). Shared, as source, by the build script
//! (which trains on `treino/`) and the tests and benches (which score `avaliacao/`).

use std::fs;
use std::path::{Path, PathBuf};

/// A corpus file's messages, labelled by its name (`treino/faq/catraca.txt` → `faq/catraca`).
pub(crate) fn read(dir: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    collect(dir, &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let rel = file.strip_prefix(dir).expect("under the corpus");
        let label = rel.with_extension("").to_string_lossy().replace('\\', "/");
        let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for line in text.lines().map(str::trim) {
            if !line.is_empty() && !line.starts_with('#') {
                out.push((label.clone(), line.to_owned()));
            }
        }
    }
    out
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("corpus entry").path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "txt") {
            out.push(path);
        }
    }
}
