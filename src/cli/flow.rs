//! `vt-agent run-flow` and `vt-agent batch`: the ten stages for one input, or for every line of a file.

use std::io::IsTerminal as _;
use std::process::ExitCode;

use anyhow::Context as _;

use super::{BatchArgs, EXIT_INPUT, EXIT_NOT_CONCLUDED, RunFlowArgs, say_error};
use crate::app::App;
use crate::config::Config;
use crate::flow::FlowError;
use crate::service::{FlowOptions, ServiceError};
use vt_store::Usage;

pub(super) async fn run_flow(
    config: &Config,
    store_usage: Usage,
    args: RunFlowArgs,
) -> anyhow::Result<ExitCode> {
    let bytes = if args.input == "-" {
        let mut bytes = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut bytes)
            .await
            .context("lendo a entrada do fluxo da entrada padrão")?;
        bytes
    } else {
        // Read on this thread: one small file, and `tokio::fs` would start a blocking thread for it.
        match std::fs::read(&args.input) {
            Ok(b) => b,
            Err(e) => {
                say_error(&format!("não foi possível ler {}: {e}", args.input));
                return Ok(ExitCode::from(EXIT_INPUT));
            }
        }
    };
    // The same rule for a file and for standard input: bytes that are not UTF-8 are invalid input.
    let Ok(text) = String::from_utf8(bytes) else {
        say_error("a entrada não é texto UTF-8 válido");
        return Ok(ExitCode::from(EXIT_INPUT));
    };
    // Parsed once, here: bad input is refused before anything starts or is written.
    let defaults = vt_domain::vt::input::InputDefaults {
        politicas: &config.vt.politicas,
        tenant: None,
    };
    let input = match vt_domain::vt::FlowInput::parse_with(&text, defaults) {
        Ok(input) => input,
        Err(e) => {
            say_error(&e.to_string());
            return Ok(ExitCode::from(EXIT_INPUT));
        }
    };
    let app = App::start(config, None, store_usage).await?;
    let (output, persisted) = match app.service.flows().run_flow(input, FlowOptions::default()).await {
        Ok(ran) => (ran.output, ran.persisted),
        Err(ServiceError::Flow(FlowError::Input(e))) => {
            say_error(&e.to_string());
            return Ok(ExitCode::from(EXIT_INPUT));
        }
        Err(e) => return Err(e.into()),
    };
    if !persisted {
        eprintln!(
            "aviso: a execução {} não pôde ser gravada no banco (veja o log)",
            output.execucao_id
        );
    }
    let output = output.for_caller();
    let json = if args.compact {
        vt_contract::json::to_text(&output)?
    } else {
        vt_contract::json::to_pretty(&output)?
    };
    println!("{json}");
    app.leave();
    Ok(if output.status == crate::flow::FlowStatus::Concluido {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_NOT_CONCLUDED)
    })
}

/// Reads a whole input file, or standard input for `-`.
pub(super) async fn read_input(path: &str) -> std::io::Result<Vec<u8>> {
    if path == "-" {
        let mut bytes = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut bytes).await?;
        Ok(bytes)
    } else {
        tokio::fs::read(path).await
    }
}

pub(super) async fn batch(config: &Config, store_usage: Usage, args: BatchArgs) -> anyhow::Result<ExitCode> {
    use crate::batch::{self, BatchError, LineDefaults, Options, progress};
    let refuse = |message: String| {
        say_error(&message);
        Ok(ExitCode::from(EXIT_INPUT))
    };
    let bytes = match read_input(&args.input).await {
        Ok(b) => b,
        Err(e) => return refuse(format!("não foi possível ler {}: {e}", args.input)),
    };
    let politicas = match &args.politicas {
        None => config.vt.politicas.clone(),
        Some(text) => match parse_politicas(text) {
            Ok(p) => p,
            Err(e) => return refuse(e),
        },
    };
    let mode = if args.dry_run {
        crate::flow::FlowMode::DryRun
    } else {
        crate::flow::FlowMode::Full
    };
    let job_id = match args.job {
        Some(id) if !batch::valid_id(&id) => {
            return refuse("--job: use de 1 a 64 letras, dígitos, - ou _".into());
        }
        Some(id) => id,
        None => batch::derived_id(None, &bytes, mode),
    };
    let path = (args.input != "-").then(|| std::path::Path::new(&args.input));
    let format = args.format.unwrap_or_else(|| batch::Format::detect(path, &bytes));
    if format == batch::Format::Csv {
        let unknown = batch::source::unknown_columns(&bytes);
        if !unknown.is_empty() {
            eprintln!("aviso: colunas ignoradas: {}", unknown.join(", "));
        }
    }
    let defaults = LineDefaults {
        job_id: job_id.clone(),
        politicas,
        tenant: None,
    };
    let lines = match batch::source::read(&bytes, format, &defaults) {
        Ok(lines) => lines,
        Err(e) => return refuse(e.to_string()),
    };
    let mut out: Box<dyn std::io::Write> = match &args.output {
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Box::new(std::io::BufWriter::new(f)),
            Err(e) => return refuse(format!("não foi possível criar {}: {e}", path.display())),
        },
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let app = App::start(config, None, store_usage).await?;
    let service = std::sync::Arc::new(app.service);
    let job = batch::Job::new(job_id.clone(), &config.vt.tenant_id, &bytes, lines, mode);
    drop(bytes);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        super::serve::shutdown_signal().await;
        eprintln!("parando: nenhum fluxo novo começa; esperando os que estão em andamento…");
        let _ = stop_tx.send(true);
    });
    let options = Options {
        concurrency: usize::from(args.concurrency),
        rate: args.rate,
        mode,
    };
    if let Some(rate) = crate::channels::whatsapp::pace_of(config) {
        // Said before it starts: the notices leave at the number's pace, after their flows.
        let most = job.lines.len() as u64;
        eprintln!(
            "avisos por WhatsApp: até {most} (um por linha) saem a {rate}/s ([whatsapp] mensagens_por_segundo): {}",
            crate::channels::whatsapp::time_to_send(most, rate)
        );
    }
    let mut progress = progress::Progress::new(&job_id, job.lines.len(), std::io::stderr().is_terminal());
    let mut write_error = None;
    let result = batch::run(&service, &job, options, stop_rx, |line, took| {
        progress.line(line.status.as_str(), took.is_some());
        if write_error.is_none()
            && let Err(e) = serde_json::to_writer(&mut out, &line.result)
                .map_err(std::io::Error::from)
                .and_then(|()| out.write_all(b"\n"))
        {
            write_error = Some(e);
        }
    })
    .await;
    progress.finish();
    let summary = match result {
        Ok(summary) => summary,
        Err(e @ (BatchError::OtherInput(_) | BatchError::OtherMode { .. })) => return refuse(e.to_string()),
        Err(e) => return Err(e.into()),
    };
    if let Some(e) = write_error {
        anyhow::bail!("gravando os resultados: {e}");
    }
    out.flush().context("gravando os resultados")?;
    eprintln!("{}", progress::summary(&job_id, &summary));
    Ok(if summary.all_concluded() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_NOT_CONCLUDED)
    })
}

/// `--politicas`: the flow input's `politicas` object, checked as the flow input checks it. The error
/// names the field, never its value.
pub(super) fn parse_politicas(text: &str) -> Result<vt_domain::vt::input::Politicas, String> {
    vt_contract::json::counted_here();
    let mut de = serde_json::Deserializer::from_str(text);
    let politicas: vt_domain::vt::input::Politicas =
        serde_path_to_error::deserialize(&mut de).map_err(|e| {
            format!(
                "--politicas: campo inválido {}: {}",
                e.path(),
                vt_contract::redact::serde_message(&e.inner().to_string())
            )
        })?;
    politicas
        .validate()
        .map_err(|(field, why)| format!("--politicas: campo inválido {field}: {why}"))?;
    Ok(politicas)
}
