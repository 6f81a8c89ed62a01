//! Runs every transcript under `tests/transcripts/` as its own test (libtest-mimic), so a failure
//! names the file and shows the first mismatch.
#![allow(clippy::disallowed_methods)] // tests and benches convert JSON freely; see `vt_contract::json`

use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};
use vt_agent::testkit::collect_transcripts as collect;
use vt_agent::testkit::{RunOptions, run_file};

fn main() {
    let args = Arguments::from_args();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/transcripts");
    let files = collect(&[dir]).unwrap_or_else(|e| panic!("{e}"));
    assert!(!files.is_empty(), "no transcripts under tests/transcripts");
    let trials = files
        .into_iter()
        .map(|path: PathBuf| {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            Trial::test(name, move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .map_err(|e| Failed::from(e.to_string()))?;
                let report = runtime.block_on(run_file(&path, &RunOptions::default()));
                match report.failure {
                    None => Ok(()),
                    Some(m) => Err(Failed::from(format!("{}: {m}", path.display()))),
                }
            })
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
