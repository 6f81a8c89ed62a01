//! The data a deployment keeps: `keys rotate`, `retencao aplicar`, `optins import`, `titular exportar|apagar`, `transcript export`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use super::{EXIT_INPUT, TitularCommand, say_error};
use crate::config::Config;
use vt_store::Usage;

/// `vt-agent keys rotate`: see [`KeysCommand::Rotate`](super::KeysCommand::Rotate).
pub(super) async fn rotate_keys(config: &Config, store_usage: Usage) -> anyhow::Result<ExitCode> {
    use vt_store::seal::{DataKey, KEY_FILE, KeyRing, read_key_file, write_key_file};
    let file = config.data_dir.join(KEY_FILE);
    let from_file = config.storage.encryption_key.is_none();
    if from_file {
        let Some(ring) = read_key_file(&file)? else {
            eprintln!(
                "erro: não há arquivo de chave em {}: nada foi selado ainda",
                file.display()
            );
            return Ok(ExitCode::from(EXIT_INPUT));
        };
        // One key: a new rotation. More: one that stopped half-way goes on with the same new key.
        if ring.ids().len() == 1 {
            let mut next = KeyRing::new(DataKey::generate(), vec![ring.current_key().clone()]);
            if let Some(index) = ring.index() {
                next = next.with_index(index);
            }
            write_key_file(&file, &next)?;
        }
    }
    let store = crate::app::store(config, store_usage).await?;
    let ring = vt_store::seal::ring();
    eprintln!("selando de novo sob a chave {}", ring.current_id());
    let sealed = store
        .reseal(&|column, n| eprintln!("  {column}: {n} valores"))
        .await?;
    if from_file {
        // The file's own ring (the process's holds keys of its own too), less the old key.
        let Some(kept) = read_key_file(&file)? else {
            anyhow::bail!("o arquivo de chaves {} sumiu durante a rotação", file.display());
        };
        let mut last = KeyRing::new(kept.current_key().clone(), Vec::new());
        if let Some(index) = kept.index() {
            last = last.with_index(index);
        }
        write_key_file(&file, &last)?;
        println!(
            "{sealed} valores selados de novo sob a chave {}; as chaves antigas saíram de {}",
            ring.current_id(),
            file.display()
        );
    } else {
        println!(
            "{sealed} valores selados de novo sob a chave {}; agora remova [storage] previous_keys",
            ring.current_id()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `vt-agent retencao aplicar`.
pub(super) async fn apply_retention(config: &Config, store_usage: Usage) -> anyhow::Result<ExitCode> {
    let store = crate::app::store(config, store_usage).await?;
    let gone = crate::retention::apply(store.as_ref(), &config.retencao, chrono::Utc::now()).await?;
    println!(
        "retenção de {} dias: {} conversa(s) e {} execução(ões) de fluxo apagadas",
        config.retencao.dias,
        gone.conversations.len(),
        gone.flow_runs.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// `vt-agent optins import FILE`: see [`OptinsCommand::Import`](super::OptinsCommand::Import).
pub(super) async fn import_opt_ins(
    config: &Config,
    store_usage: Usage,
    file: &std::path::Path,
) -> anyhow::Result<ExitCode> {
    let rows = match read_opt_ins(file) {
        Ok(rows) => rows,
        Err(why) => {
            say_error(&format!("{}: {why}", file.display()));
            return Ok(ExitCode::from(2));
        }
    };
    let changes = match crate::service::OptIn::changes(&rows, "cli:optins import", chrono::Utc::now()) {
        Ok(c) => c,
        Err(e) => {
            // `optins[3].telefone` is the CSV's line 5 (after the header).
            let (index, field) = e
                .field
                .strip_prefix("optins[")
                .and_then(|r| r.split_once("]."))
                .map_or((None, e.field.as_str()), |(i, f)| (i.parse::<usize>().ok(), f));
            match index {
                Some(i) => say_error(&format!(
                    "{}: linha {}, {field}: {}",
                    file.display(),
                    i + 2,
                    e.why
                )),
                None => say_error(&format!("{}: {}", file.display(), e.why)),
            }
            return Ok(ExitCode::from(2));
        }
    };
    let app = crate::app::App::start(config, None, store_usage).await?;
    let recorded = app.service.contacts().import_opt_ins(&changes).await?;
    println!(
        "{recorded} opt-in(s) registrado(s) de {} linha(s).",
        changes.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// The rows of an opt-in CSV; the error names the line and the column, never a value.
pub(super) fn read_opt_ins(file: &std::path::Path) -> Result<Vec<crate::service::OptIn>, String> {
    let mut reader = csv::Reader::from_path(file).map_err(|e| format!("não foi possível ler: {e}"))?;
    let headers = reader
        .headers()
        .map_err(|_| "sem cabeçalho: telefone,origem,em".to_owned())?
        .clone();
    let mut rows = Vec::new();
    for (i, row) in reader.deserialize::<crate::service::OptIn>().enumerate() {
        rows.push(row.map_err(|e| {
            let line = e.position().map_or(i as u64 + 2, |p| p.line());
            let why = match e.kind() {
                csv::ErrorKind::Deserialize { err, .. } => {
                    match err.field().and_then(|f| headers.get(f as usize)) {
                        Some(column) => format!("{column} inválido"),
                        // A column we do not know, or one missing: serde's words name it.
                        None => err.kind().to_string(),
                    }
                }
                _ => "linha ilegível".to_owned(),
            };
            format!("linha {line}: {why}")
        })?);
    }
    Ok(rows)
}

/// `vt-agent titular exportar|apagar`.
pub(super) async fn data_subject(
    config: &Config,
    store_usage: Usage,
    command: TitularCommand,
) -> anyhow::Result<ExitCode> {
    let who = match &command {
        TitularCommand::Exportar { who, .. } | TitularCommand::Apagar { who } => who,
    };
    let subject = match crate::retention::subject(who.usuario.as_deref(), who.cartao.as_deref()) {
        Ok(s) => s,
        Err(why) => {
            say_error(why);
            return Ok(ExitCode::from(EXIT_INPUT));
        }
    };
    let store = crate::app::store(config, store_usage).await?;
    match command {
        TitularCommand::Exportar { output, .. } => {
            let export = crate::retention::export(&vt_store::Stores::of(&store), &subject).await?;
            let text = vt_contract::json::to_pretty(&export)?;
            match output {
                Some(path) => {
                    std::fs::write(&path, text).with_context(|| format!("gravando {}", path.display()))?
                }
                None => println!("{text}"),
            }
        }
        TitularCommand::Apagar { .. } => {
            let operator = std::env::var("USER").unwrap_or_else(|_| "operador".into());
            let gone = crate::retention::erase(
                &vt_store::Stores::of(&store),
                &subject,
                (&operator, &config.vt.tenant_id),
                config.retencao.simulator_book.as_deref(),
            )
            .await?;
            println!(
                "apagadas {} conversa(s) e {} execução(ões) de fluxo; a auditoria registra que houve um apagamento",
                gone.conversations.len(),
                gone.flow_runs.len()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn export(
    config: &Config,
    store_usage: Usage,
    conversation: &str,
    output: Option<PathBuf>,
) -> anyhow::Result<()> {
    let store = crate::app::store(config, store_usage).await?;
    let transcript = crate::transcript::export::export(store.as_ref(), conversation).await?;
    let text = format!(
        "{}{}",
        crate::transcript::export::CLEAR_HEADER,
        serde_yaml::to_string(&transcript)?
    );
    match output {
        Some(path) => std::fs::write(&path, text).with_context(|| format!("gravando {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(())
}
