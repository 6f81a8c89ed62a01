//! Entry point: parses the command line, sets up logging on stderr and runs the command.

use clap::Parser as _;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = vt_agent::cli::Cli::parse();
    // Transcripts provoke failures on purpose; their warnings would drown the report.
    let default_filter = if matches!(cli.command, vt_agent::cli::Command::Test(_)) {
        "error"
    } else {
        "warn"
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(EnvFilter::try_from_env("VT_LOG").unwrap_or_else(|_| EnvFilter::new(default_filter)))
        .init();
    match vt_agent::cli::run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("erro: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
