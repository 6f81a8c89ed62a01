//! Entry point: parses the command line, sets up logging on stderr and runs the command.

use clap::Parser as _;

// mimalloc instead of glibc's allocator: a third less CPU per flow in a batch (`cargo bench --bench
// batch`: 2.56 → 1.73 ms), where glibc spent ~15 % of the time in malloc/free and consolidation.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = vt_agent::cli::Cli::parse();
    // Transcripts provoke failures on purpose; their warnings would drown the report.
    let default_filter = if matches!(cli.command, vt_agent::cli::Command::Test(_)) {
        "error"
    } else {
        "warn"
    };
    match vt_agent::cli::run(cli, default_filter).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("erro: {}", vt_actions::redact::secrets(&format!("{e:#}")));
            std::process::ExitCode::FAILURE
        }
    }
}
