//! The command line: argument parsing and the commands themselves, kept thin over the library.

use std::io::IsTerminal as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use vt_actions::context::Extensions;

use crate::config::Config;
use crate::engine::{Conversation, Engine, Participant};

/// Agent for transit-pass (vale-transporte) credits: balances, recharges with confirmation and
/// notifications, over chat or as a ten-stage flow.
///
/// Runs with no configuration at all: SQLite under ./data, the embedded simulator, no model. Set
/// VT_LLM_API_KEY (or [llm] in vt-agent.toml) to let a model handle free-form conversation.
#[derive(Debug, Parser)]
#[command(name = "vt-agent", version, about, long_about)]
pub struct Cli {
    /// Configuration file (TOML); default: $VT_CONFIG, else ./vt-agent.toml when present.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Talk to the agent in the terminal (interactive), or line by line from a pipe.
    ///
    /// Each input line is one user message and gets one reply block. With --message, runs a single
    /// turn and exits.
    Chat(ChatArgs),
}

#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    /// Send one message, print the reply and exit.
    #[arg(long, short, value_name = "TEXT")]
    pub message: Option<String>,
    /// Continue the conversation with this id.
    #[arg(long, value_name = "ID")]
    pub conversation: Option<String>,
    /// The agent to talk to.
    #[arg(long, default_value = "vt", value_name = "AGENT")]
    pub agent: String,
    /// Who is talking (recorded on the conversation).
    #[arg(long, default_value = "terminal-user", value_name = "USER")]
    pub user: String,
}

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = Config::load(cli.config.as_deref())?;
    match cli.command {
        Command::Chat(args) => chat(&config, args).await,
    }
}

async fn chat(config: &Config, args: ChatArgs) -> anyhow::Result<()> {
    let engine = crate::app::engine(config, None, Extensions::default())?;
    let who = Participant {
        user_id: args.user.clone(),
        user_login: args.user.clone(),
        channel: "terminal".into(),
    };
    let mut conv = engine.start_conversation(&args.agent, who)?;
    if let Some(id) = args.conversation {
        conv.id = id;
    }
    if let Some(message) = args.message {
        let reply = turn(&engine, &mut conv, &message).await?;
        println!("{reply}");
        return Ok(());
    }
    let interactive = std::io::stdin().is_terminal();
    let mut out = tokio::io::stdout();
    if interactive {
        let model = if engine.has_model() {
            "com modelo"
        } else {
            "sem modelo: só os comandos de VT"
        };
        out.write_all(
            format!(
                "vt-agent — conversa {} ({model}). Ctrl-D para sair.\n\nvocê> ",
                conv.id
            )
            .as_bytes(),
        )
        .await?;
        out.flush().await?;
    }
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await.context("reading standard input")? {
        let line = line.trim();
        if !line.is_empty() {
            let reply = turn(&engine, &mut conv, line).await?;
            let block = if interactive {
                format!("vt> {reply}\n\nvocê> ")
            } else {
                format!("{reply}\n\n")
            };
            out.write_all(block.as_bytes()).await?;
        } else if interactive {
            out.write_all(b"voc\xc3\xaa> ").await?;
        }
        out.flush().await?;
        if conv.ended {
            break;
        }
    }
    if interactive {
        out.write_all(b"\n").await?;
    }
    Ok(())
}

async fn turn(engine: &Engine, conv: &mut Conversation, text: &str) -> anyhow::Result<String> {
    let outcome = engine.run_turn(conv, text).await?;
    Ok(outcome.reply_text())
}
