//! Entry point: parses the command line, sets up logging on stderr and runs the command.

use clap::Parser as _;

// mimalloc instead of glibc's allocator: a third less CPU per flow in a batch (`cargo bench --bench
// batch`: 2.56 → 1.73 ms), where glibc spent ~15 % of the time in malloc/free and consolidation. Its v2
// line (the `v2` feature): v3 set up fresh pages for every thread, ~3 ms of a one-shot `run-flow`.
// Without transparent huge pages (the `no_thp` feature: mimalloc turns them off for the process as it
// starts, before `main`): its arenas asked for them, and the kernel zeroed a whole 2 MiB page at the
// first touch of each — interleaved runs, `run-flow` 14.9 → 13.1 ms, `--version` 3.9 → 3.3 ms, and a
// batch of 4,000 flows 1,369–1,520 → 1,483–1,800 flows/s.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let cli = vt_agent::Cli::parse();
    // A one-shot command runs on the thread that started it: the multi-threaded runtime's workers cost
    // more to start, and to hand each step between, than such a command's own work (`run-flow`'s
    // start-up was mostly thread wake-ups and fresh stacks).
    let mut runtime = if cli.command.is_one_shot() {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut workers = tokio::runtime::Builder::new_multi_thread();
        // A turn runs on a worker: its future is deep in a debug build (`cargo run -- serve`), and 8 MiB
        // of address space per thread costs nothing until it is touched.
        workers.thread_stack_size(8 * 1024 * 1024);
        workers
    };
    match runtime.enable_all().build() {
        Ok(runtime) => runtime.block_on(run(cli)),
        Err(e) => {
            eprintln!("erro: não foi possível iniciar o runtime: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: vt_agent::Cli) -> std::process::ExitCode {
    // Transcripts provoke failures on purpose; their warnings would drown the report.
    let default_filter = if matches!(cli.command, vt_agent::Command::Test(_)) {
        "error"
    } else {
        "warn"
    };
    match vt_agent::run(cli, default_filter).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("erro: {}", vt_agent::terminal_safe(&format!("{e:#}")));
            std::process::ExitCode::FAILURE
        }
    }
}
