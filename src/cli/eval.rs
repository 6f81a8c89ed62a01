//! `vt-agent eval` and `vt-agent test`: the model measured on the cases, transcripts as regression tests.

use std::process::ExitCode;

use anyhow::Context as _;

use super::{EvalArgs, TestArgs, cannot_run, say_error};
use crate::config::Config;

pub(super) async fn eval(config: &Config, args: EvalArgs) -> anyhow::Result<ExitCode> {
    use crate::quality::transcripts::ModelChoice;
    // What keeps `eval` from giving a verdict exits 2, like a case the model server failed: 1 is the
    // verdict "worse".
    let no_verdict = |message: String| {
        say_error(&message);
        Ok(ExitCode::from(2))
    };
    let paths = if args.corpus.is_empty() {
        crate::quality::eval::default_corpus()
    } else {
        args.corpus.clone()
    };
    let cases = match crate::quality::eval::load(&paths) {
        Ok(cases) if cases.is_empty() => {
            return no_verdict("nenhum caso de avaliação nos caminhos dados".into());
        }
        Ok(cases) => cases,
        Err(e) => return no_verdict(e),
    };
    let (model, model_name) = if args.scripted {
        (
            ModelChoice::Scripted,
            "roteirizado (as respostas dos casos)".to_owned(),
        )
    } else {
        match config.llm.provider()? {
            Some(llm) => {
                // A server that is not there is said at once, by its address: not a table of cases
                // each waiting out its timeout.
                let address = config.llm.address();
                if let Err(why) = reachable(&address).await {
                    return no_verdict(format!(
                        "o servidor do modelo em {address} não responde ({why}): nenhum caso foi avaliado"
                    ));
                }
                let name = llm.model().to_owned();
                (ModelChoice::Live(llm), name)
            }
            None => {
                return no_verdict(
                    "nenhum modelo configurado: defina [llm] (ou VT_LLM_BASE_URL / VT_LLM_API_KEY), ou use --scripted"
                        .into(),
                );
            }
        }
    };
    let options = crate::quality::eval::EvalOptions {
        config: config.clone(),
        model,
        model_name,
        repeat: usize::from(args.repeat),
        compare: args.compare,
    };
    let quiet = args.json;
    let report = crate::quality::eval::run(&cases, &options, |done, total| {
        if !quiet && done < total {
            eprint!("\r{done}/{total} casos");
        }
    })
    .await;
    if !quiet {
        eprintln!("\r{n}/{n} casos", n = cases.len());
    }
    if args.json {
        println!("{}", vt_contract::json::text(&report.json()));
    } else if let Some(why) = report.infrastructure_errors() {
        // Cases the model server failed are no verdict: no score is printed as if it were one.
        return no_verdict(why);
    } else {
        print!("{}", report.table(args.compare));
    }
    Ok(ExitCode::from(report.exit_code()))
}

/// Whether a TCP connection opens to `address`'s host and port within 3 s; why not.
pub(super) async fn reachable(address: &str) -> Result<(), String> {
    let url = reqwest::Url::parse(address).map_err(|_| "endereço inválido".to_owned())?;
    let host = url.host_str().ok_or_else(|| "endereço sem host".to_owned())?;
    let port = url
        .port_or_known_default()
        .ok_or_else(|| "endereço sem porta".to_owned())?;
    match tokio::time::timeout(
        std::time::Duration::from_secs(3),
        tokio::net::TcpStream::connect((host, port)),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Err("conexão recusada".into()),
        Ok(Err(_)) => Err("não foi possível conectar".into()),
        Err(_) => Err("sem resposta em 3 s".into()),
    }
}

pub(super) async fn test(config: &Config, args: TestArgs) -> anyhow::Result<ExitCode> {
    let files = crate::transcript::collect(&args.paths).map_err(anyhow::Error::msg)?;
    if files.is_empty() {
        return Err(cannot_run("nenhuma transcrição (*.yaml) nos caminhos dados"));
    }
    let options = crate::quality::transcripts::RunOptions {
        config: config.clone(),
        record: args.record,
        record_with: None,
        model: None,
        systems: None,
    };
    let mut reports = Vec::with_capacity(files.len());
    for file in &files {
        let report = crate::quality::transcripts::run_file(file, &options).await;
        match &report.failure {
            None => println!(
                "ok    {} ({}, {} ms)",
                report.name, report.file, report.duration_ms
            ),
            Some(m) => println!(
                "FAIL  {} ({})\n  {}",
                report.name,
                report.file,
                m.to_string().replace('\n', "\n  ")
            ),
        }
        reports.push(report);
    }
    if let Some(path) = &args.junit {
        std::fs::write(path, crate::quality::transcripts::junit_xml(&reports))
            .with_context(|| format!("gravando {}", path.display()))?;
    }
    if let Some(path) = &args.json {
        std::fs::write(path, vt_contract::json::to_pretty(&reports)?)
            .with_context(|| format!("gravando {}", path.display()))?;
    }
    println!(
        "\ntranscrições: {}",
        crate::quality::transcripts::summary_line(&reports)
    );
    Ok(if reports.iter().all(|r| r.passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
