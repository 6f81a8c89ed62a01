//! The command line: argument parsing and the commands themselves, kept thin over the library.

// The command docs below are `--help` text, where `[llm]`, `[http]`… name sections of vt-agent.toml,
// not items to link.
#![allow(rustdoc::broken_intra_doc_links)]

mod chat;

use std::io::IsTerminal as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use std::process::ExitCode;

use crate::app::App;
use crate::config::Config;
use crate::flow::FlowError;
use crate::service::{FlowOptions, ServiceError};
use crate::store::Usage;

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
    /// Run the ten-stage VT flow for one input and print the flow output JSON on stdout.
    ///
    /// FILE is a JSON flow input (see examples/), or - for standard input. The output's `status` tells
    /// the outcome and the exit code follows it: 0 `concluido`; 3 `pendente` or `falhou` (the JSON is
    /// still printed); 2 invalid input (one line on stderr, nothing run); 1 internal error.
    RunFlow(RunFlowArgs),
    /// Run the ten-stage flow for every line of a file: JSON Lines (one flow input a line) or CSV.
    ///
    /// Results go out as JSON Lines (one per input line, in any order: line, execucao_id, status,
    /// resultado — or error for a bad line, which never stops the batch). A CSV has a header with
    /// `cartao` and any of valor, moeda, meio_pagamento, token, idempotency_key, tenant_id, origem,
    /// canais (separated by |), idioma, destinatario_tipo, destinatario_id; its line numbers count rows
    /// after the header. Lines without `politicas` get --politicas, else [vt.politicas] of the config.
    ///
    /// The batch is a job (--job, default derived from the file's content): running it again skips the
    /// lines already done, and a line that was running when it stopped reuses its recharge key — never
    /// charged twice. Ctrl-C stops after the flows in flight. Exit code: 0 every line `concluido`; 3
    /// otherwise (or stopped early); 2 unreadable file, no lines, or a job id used with other input.
    Batch(BatchArgs),
    /// Serve the HTTP API: conversations, the flow, health, metrics and OpenAPI; the web console at
    /// /console (sign in with a support or admin API key).
    ///
    /// Listens on 127.0.0.1:8080 unless --addr (or VT_HTTP_ADDR, or [http] addr) says otherwise. With
    /// no API key configured ([[http.api_keys]]) it serves loopback only. Ctrl-C or SIGTERM stops it
    /// gracefully: no new connections, requests in flight answered, then exit 0.
    Serve(ServeArgs),
    /// List recent flow runs and recharge attempts, interrupted ones included.
    ///
    /// A run that started and never finished shows as `em_andamento` (still running, or its process
    /// was killed); a recharge attempt `enviando` was on its way when its process stopped: rerunning the
    /// same input reuses its idempotency key, so it is never charged twice.
    Flows(FlowsArgs),
    /// List the outbox: replies waiting to be sent and dead-lettered ones, with the reason; retry one.
    ///
    /// Replies to the terminal and HTTP are delivered in the answer itself; the outbox holds those of
    /// channels that send on their own. A dead-lettered item was tried 5 times (or failed with an error
    /// no retry fixes): --retry gives it a fresh set of attempts.
    Outbox(OutboxArgs),
    /// List the cases: conversations handed to a person, open ones first (waiting, then claimed),
    /// with their protocol, team, state, owner, reason and ages; or, with --protocolo, one case and its
    /// log.
    Cases(CasesArgs),
    /// List support agents' card lookups: who, when, the masked card, its keyed hash, the outcome.
    Audit(AuditArgs),
    /// List the automatic recharges (Pix Automático): card masked, terms, status, next debit, how
    /// many were credited, the last outcome — newest first.
    ///
    /// `serve` runs them ([pix.automatico] ativo): a threshold's balance read once a day, a day of
    /// the month's charge sent ahead, each debit credited once.
    Recorrencias(RecorrenciasArgs),
    /// Replay stored conversations through a candidate configuration and compare what they *do*.
    ///
    /// A release gate from real traffic: each conversation (cards, phone numbers and names replaced
    /// by consistent fakes before anything leaves the store) is played turn by turn against a world
    /// built from what the systems answered then, with the model's recorded answers where the request
    /// is the same. Mutating effects (recharges, notices, Pix charges, cases) must match the approved
    /// baseline — or, with none, the recording — in order; reads may differ; words are a similarity
    /// figure. Writes report.json, junit.xml, summary.md and cases/ under --out. Exits 0 when every
    /// case passed, 1 when a behaviour failed (or the baseline does not hold), 2 when it could not run:
    /// the recording could not answer a case, or an argument or file cannot be used (--since abc,
    /// --min-pass above --repeat, a --baseline, --ids or --candidate that is not there).
    Replay(ReplayArgs),
    /// Serve the simulated balance, recharge and notification systems on a port.
    ///
    /// Magic cards (the book: "Your systems") trigger each behaviour; GET /_simulador/ledger lists what it
    /// received.
    Simulator(SimulatorArgs),
    /// Show the last 7 days of usage per intent: turns, tokens (cached apart), share answered with
    /// zero tokens, time. With --custos: what the turns cost in reais per day and tenant.
    Usage(UsageArgs),
    /// Run transcript regression tests (YAML files, or folders of them).
    ///
    /// Prints pass/fail per transcript and, for a failure, the first mismatch with what was expected
    /// and what happened. Exits 1 when any transcript fails.
    Test(TestArgs),
    /// Measure the configured model on the cases card holders bring, against no model.
    ///
    /// Plays the router's corpus and the conversation cases of `eval/` through the whole product
    /// (a hermetic world per case) and prints, per class of message: answered well, intent accuracy,
    /// parameters exact, money surprises, tokens, cost, p50/p95 latency. Exits 1 on any money
    /// surprise or any case the model made worse (with --compare); 2 with no verdict: the model server
    /// failed a case (down, timed out), or the cases or the model could not be had.
    Eval(EvalArgs),
    /// Work with transcripts of stored conversations.
    #[command(subcommand)]
    Transcript(TranscriptCommand),
    /// The data keys of what the store keeps sealed (messages, conversation state, flow inputs…).
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Retention: delete what is older than [retencao] dias (default 180). `serve` does it every hour.
    #[command(subcommand)]
    Retencao(RetencaoCommand),
    /// A data subject's rights (LGPD): everything kept about a person, or its erasure.
    #[command(subcommand)]
    Titular(TitularCommand),
    /// Consent to notices on WhatsApp: a company's import of the people who agreed to them.
    #[command(subcommand)]
    Optins(OptinsCommand),
    /// The external systems (balance, recharge, notification) as configured in [systems].
    #[command(subcommand)]
    Systems(SystemsCommand),
    /// The configuration file: its reference, its JSON Schema, a check of the one in use.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Print the HTTP API's OpenAPI 3.1 document (what `GET /v1/openapi.json` serves), generated from
    /// the handlers' types, to generate a client from. Needs no configuration.
    Openapi,
}

#[derive(Debug, Clone, Copy, clap::Subcommand)]
pub enum ConfigCommand {
    /// Load the configuration as every command does (the file, then VT_* variables) and say whether
    /// it is valid: exit 0, or 1 with the key that is wrong (never its value).
    Check,
    /// Print the reference of every key (Markdown: sections, types, defaults, meanings), generated
    /// from the types the file is read into. Needs no configuration.
    Reference,
    /// Print the JSON Schema of the file, for editors that check TOML against one (Taplo, VS Code's
    /// Even Better TOML). Needs no configuration.
    Schema,
}

#[derive(Debug, clap::Subcommand)]
pub enum SystemsCommand {
    /// Call the configured systems the way a turn would, moving no money: the credentials are
    /// obtained (an OAuth2 token, if so configured), a balance is read, and the recharge and
    /// notification endpoints are asked with OPTIONS (no charge, no message). One line per system:
    /// URL, auth, HTTP status, latency, and what was found. Exit 0 when all pass, 1 otherwise.
    /// With no [systems] configured, the embedded simulator is checked.
    Check {
        /// The card whose balance is read: one your balance system knows (a test card).
        #[arg(long, value_name = "N", default_value = vt_actions::systems::CHECK_CARD)]
        cartao: String,
    },
    /// Print the contract of the three systems as the product calls them: an OpenAPI 3.1 document
    /// (paths, methods, headers such as x-idempotency-key, bodies, and every status and body the
    /// product understands), generated from the types the client is held to. Build a thin facade
    /// over an existing API from it.
    Contract,
}

#[derive(Debug, clap::Subcommand)]
pub enum OptinsCommand {
    /// Record the opt-ins of a CSV file with the header `telefone,origem,em` (the WhatsApp number with
    /// its country code, where the person agreed, when — RFC 3339). Every row is checked before any is
    /// recorded; a person's own PARAR given after the row's date wins.
    Import {
        /// The CSV file.
        file: PathBuf,
    },
}

#[derive(Debug, clap::Args)]
pub struct UsageArgs {
    /// What the turns cost in reais, per day (the policy's time zone) and tenant, at the [custos]
    /// prices each turn ran under; a turn whose price was missing is counted as unknown.
    #[arg(long)]
    pub custos: bool,
    /// How conversations ended, per day, tenant and intent: resolved by the bot or by a person,
    /// abandoned, without an objective, reopened; the satisfaction scores, bot versus person; the
    /// cost per resolved case.
    #[arg(long)]
    pub desfechos: bool,
    /// Days back, today included (with --custos or --desfechos).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=366))]
    pub dias: u32,
}

#[derive(Debug, clap::Subcommand)]
pub enum RetencaoCommand {
    /// Delete conversations untouched and flow runs started more than [retencao] dias ago (usage
    /// figures and the recharge attempts' money trail stay). For cron, where `serve` does not run.
    Aplicar,
}

/// Who: one of --usuario or --cartao.
#[derive(Debug, clap::Args)]
pub struct SubjectArgs {
    /// The person's user id (a WhatsApp number, a Mattermost user id, an API user id…).
    #[arg(long, value_name = "ID")]
    pub usuario: Option<String>,
    /// A card of the person (digits, spaces and dashes allowed).
    #[arg(long, value_name = "NÚMERO")]
    pub cartao: Option<String>,
}

#[derive(Debug, clap::Subcommand)]
pub enum TitularCommand {
    /// Write everything kept about a person as JSON, in clear (it is for the person): conversations,
    /// messages, state, flow runs, recharges.
    Exportar {
        #[command(flatten)]
        who: SubjectArgs,
        /// Write here instead of standard output.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Erase everything kept about a person; the audit keeps that an erasure happened (not what).
    Apagar {
        #[command(flatten)]
        who: SubjectArgs,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum KeysCommand {
    /// Seal every stored value again under a new data key.
    ///
    /// With the key file (data/vt-agent.key): a new key goes first in the file, every value is sealed
    /// again under it, then the old key leaves the file. Stopped half-way, run it again: it goes on
    /// with the same new key. With [storage] encryption_key (VT_ENCRYPTION_KEY): put the new key there
    /// and the old one in previous_keys, run this, then remove previous_keys. Run it with `serve`
    /// stopped (or, with several instances, configure previous_keys on all of them first).
    Rotate,
}

impl Command {
    /// Commands that do one thing and exit, with no concurrency of their own to speak of.
    pub fn is_one_shot(&self) -> bool {
        matches!(
            self,
            Self::RunFlow(_)
                | Self::Flows(_)
                | Self::Outbox(_)
                | Self::Cases(_)
                | Self::Audit(_)
                | Self::Usage(_)
                | Self::Transcript(_)
                | Self::Keys(_)
                | Self::Retencao(_)
                | Self::Titular(_)
        )
    }
}

#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Transcript files or folders.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Write a JUnit XML report here.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write a JSON report (per-turn events, tokens, latency) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Record the cassettes of `model: cassette` transcripts against the configured model.
    #[arg(long)]
    pub record: bool,
}

#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// Case files or folders (router corpus lists, lists of transcripts, transcripts); default:
    /// `eval/` and `tests/fixtures/router/corpus.yaml`.
    #[arg(long, value_name = "FILE|DIR")]
    pub corpus: Vec<PathBuf>,
    /// Play each case K times: pass^K and the cases that flip.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=20))]
    pub repeat: u16,
    /// Play each case with no model too, and mark every case the model made worse.
    #[arg(long)]
    pub compare: bool,
    /// Use the cases' own scripted answers (a strong model's) instead of the configured model: proves
    /// the scoring, not a model.
    #[arg(long)]
    pub scripted: bool,
    /// Print the report as JSON (for CI).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum TranscriptCommand {
    /// Write a stored conversation as a transcript, with the expectations it actually produced.
    Export {
        /// The conversation id.
        conversation: String,
        /// Write here instead of standard output.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
pub struct RunFlowArgs {
    /// Flow input file, or - for standard input.
    #[arg(value_name = "FILE|-")]
    pub input: String,
    /// Print the JSON on one line.
    #[arg(long)]
    pub compact: bool,
}

#[derive(Debug, clap::Args)]
pub struct BatchArgs {
    /// JSON Lines or CSV file, or - for standard input.
    #[arg(value_name = "FILE|-")]
    pub input: String,
    /// The input's format; default from the file name, else from its first character (`{`: JSON Lines).
    #[arg(long, value_enum)]
    pub format: Option<crate::batch::Format>,
    /// Write the results here (rewritten whole, earlier runs' lines included) instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Flows running at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub concurrency: u16,
    /// Flows started per second at most (the balance, recharge and notification systems have limits).
    #[arg(long, value_name = "N")]
    pub rate: Option<std::num::NonZeroU32>,
    /// Run RF1–RF6 only: balances read and recharges prepared and checked, nothing charged.
    #[arg(long)]
    pub dry_run: bool,
    /// The job's id (letters, digits, - and _): rerun with it to continue an interrupted batch.
    #[arg(long, value_name = "ID")]
    pub job: Option<String>,
    /// Policies for lines that bring none, as the flow input's `politicas` JSON object.
    #[arg(long, value_name = "JSON")]
    pub politicas: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on, e.g. 127.0.0.1:8080 (0 as the port picks a free one).
    #[arg(long, value_name = "HOST:PORT")]
    pub addr: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// How many lookups to show, newest first.
    #[arg(long, default_value_t = 50)]
    pub limit: i64,
}

#[derive(Debug, clap::Args)]
pub struct OutboxArgs {
    /// Give this dead-lettered item a fresh set of attempts.
    #[arg(long, value_name = "ID")]
    pub retry: Option<i64>,
    /// How many items of each kind to show.
    #[arg(long, default_value_t = 50)]
    pub limit: i64,
}

#[derive(Debug, clap::Args)]
pub struct CasesArgs {
    /// Only this tenant's cases.
    #[arg(long, value_name = "ID")]
    pub tenant: Option<String>,
    /// How many cases to show.
    #[arg(long, default_value_t = 50)]
    pub limit: i64,
    /// The case with this protocol number (AAAAMMDD-NNNNNN, as the card holder was told it), with
    /// its log.
    #[arg(long, value_name = "NUMERO")]
    pub protocolo: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// Conversations with a message in this window: `7d`, `24h`, `30m`.
    #[arg(long, value_name = "WINDOW", default_value = "7d")]
    pub since: String,
    /// Only the conversation ids listed in this file, one a line (instead of --since).
    #[arg(long, value_name = "FILE")]
    pub ids: Option<PathBuf>,
    /// Only this tenant's conversations.
    #[arg(long, value_name = "ID")]
    pub tenant: Option<String>,
    /// The candidate's configuration file (prompts, skills, intents, FAQ, model); default: the
    /// current configuration.
    #[arg(long, value_name = "CONFIG")]
    pub candidate: Option<PathBuf>,
    /// The approved baseline to compare with (with --approve: where to write it).
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Write this run's effects as the baseline when every case passed.
    #[arg(long)]
    pub approve: bool,
    /// Where the reports go (default: the data directory's `replay/`, which the console's Replay
    /// page shows).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Send requests the recording has no answer to to the candidate's model ([llm]); without it
    /// they go unanswered (counted).
    #[arg(long)]
    pub live_model: bool,
    /// Plays per case (a live model's answers vary).
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub repeat: usize,
    /// Plays of a case that must pass (with --repeat; default: all of them): fewer is `fail`, at
    /// least J but not all `flaky`, all `stable`.
    #[arg(long, value_name = "J")]
    pub min_pass: Option<usize>,
}

#[derive(Debug, clap::Args)]
pub struct RecorrenciasArgs {
    /// Only this tenant's recurrences.
    #[arg(long, value_name = "ID")]
    pub tenant: Option<String>,
    /// How many to show.
    #[arg(long, default_value_t = 50)]
    pub limit: i64,
}

#[derive(Debug, clap::Args)]
pub struct FlowsArgs {
    /// How many runs and attempts to show.
    #[arg(long, default_value_t = 20)]
    pub limit: i64,
    /// One run whole instead: its input and every stage's output (cards masked) — why a batch line
    /// `falhou`, say.
    #[arg(long, value_name = "EXECUCAO_ID", conflicts_with = "pendentes")]
    pub id: Option<String>,
    /// Recharges whose outcome is unknown (`pendente`, `enviando`) instead: what `serve` is following
    /// up, with the next check and the deadline past which a person checks it; and the Pix charges
    /// waiting for payment.
    #[arg(long)]
    pub pendentes: bool,
}

#[derive(Debug, clap::Args)]
pub struct SimulatorArgs {
    /// Port on 127.0.0.1.
    #[arg(long, default_value_t = 8090)]
    pub port: u16,
    /// JSON file that replaces or extends the magic card table.
    #[arg(long, value_name = "FILE")]
    pub fixture: Option<PathBuf>,
    /// Ask callers for credentials, as real systems do: `bearer` or `header` (the token in
    /// VT_SIMULATOR_TOKEN), or `oauth2` (a token endpoint at /oauth/token for --client-id with the
    /// secret in VT_SIMULATOR_CLIENT_SECRET; its tokens live --token-ttl-secs).
    #[arg(long, value_name = "KIND", default_value = "none", value_parser = ["none", "bearer", "header", "oauth2"])]
    pub auth: String,
    /// The header `--auth header` reads the token from.
    #[arg(long, value_name = "NAME", default_value = "x-api-key")]
    pub header: String,
    /// The OAuth2 client `--auth oauth2` accepts.
    #[arg(long, value_name = "ID", default_value = "vt-agent")]
    pub client_id: String,
    /// How long the tokens of `--auth oauth2` live.
    #[arg(long, value_name = "SECS", default_value_t = 3600)]
    pub token_ttl_secs: u64,
    /// Serve over TLS asking every client for a certificate (mutual TLS): a private CA and the
    /// certificates are made at start, and a client's files written into DIR (ca.pem, cliente.pem,
    /// cliente.key) for [systems.tls].
    #[arg(long, value_name = "DIR")]
    pub tls: Option<PathBuf>,
}

impl SimulatorArgs {
    /// What the simulator asks of callers; a kind whose secret is not in the environment is refused,
    /// naming the variable.
    fn auth(&self) -> anyhow::Result<vt_actions::systems::SimulatorAuth> {
        use vt_actions::systems::SimulatorAuth;
        let secret = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .with_context(|| format!("--auth {} precisa de {name}", self.auth))
        };
        Ok(match self.auth.as_str() {
            "bearer" => SimulatorAuth::Bearer {
                token: secret("VT_SIMULATOR_TOKEN")?,
            },
            "header" => SimulatorAuth::Header {
                header: self.header.clone(),
                token: secret("VT_SIMULATOR_TOKEN")?,
            },
            "oauth2" => SimulatorAuth::Oauth2 {
                client_id: self.client_id.clone(),
                client_secret: secret("VT_SIMULATOR_CLIENT_SECRET")?,
                token_ttl: std::time::Duration::from_secs(self.token_ttl_secs.max(1)),
            },
            _ => SimulatorAuth::None,
        })
    }
}

#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    /// Send one message, print the reply and exit.
    #[arg(long, short, value_name = "TEXT")]
    pub message: Option<String>,
    /// Continue the stored conversation with this id (state and history included); a new id starts a
    /// conversation under that id.
    #[arg(long, value_name = "ID")]
    pub conversation: Option<String>,
    /// The agent to talk to.
    #[arg(long, default_value = "vt", value_name = "AGENT")]
    pub agent: String,
    /// Who is talking (recorded on the conversation).
    #[arg(long, default_value = "terminal-user", value_name = "USER")]
    pub user: String,
}

/// Exit code for input the command refuses (as with a usage error).
pub(crate) const EXIT_INPUT: u8 = 2;
/// Exit code of a flow run that did not reach its outcome (`pendente` or `falhou`).
pub(crate) const EXIT_NOT_CONCLUDED: u8 = 3;

/// An argument or a file a command cannot run with (a window that does not parse, a file that is not
/// there, options that contradict each other): one line on stderr and exit 2 — "could not run", never
/// 1, which says a behaviour failed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct CannotRun(String);

fn cannot_run(message: impl Into<String>) -> anyhow::Error {
    CannotRun(message.into()).into()
}

/// A line for the terminal: a card number the command line carried masked wherever the line repeats
/// it, secrets out, control characters (escape sequences) shown escaped — what a person typed as an
/// argument is never echoed as it came. (Only the arguments' cards: an id the line must show whole,
/// such as a data key's, may be eight digits too.)
pub fn terminal_safe(text: &str) -> String {
    use vt_actions::vt::card::{card_numbers_in, replace_cards_in};
    let typed: Vec<String> = std::env::args()
        .skip(1)
        .flat_map(|a| card_numbers_in(&a))
        .collect();
    let masked = replace_cards_in(text, |found| {
        let digits: String = found.chars().filter(char::is_ascii_digit).collect();
        if typed.contains(&digits) {
            vt_actions::vt::mask_card(found)
        } else {
            found.to_owned()
        }
    });
    let text = vt_actions::redact::secrets(&masked);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Prints an error line on stderr, terminal-safe.
fn say_error(text: &str) {
    eprintln!("erro: {}", terminal_safe(text));
}

/// Runs the parsed command line: loads the configuration, sets up logging (and trace export when
/// configured, flushed before returning) and runs the command. A [`CannotRun`] is said here and exits 2.
pub async fn run(cli: Cli, log_filter: &str) -> anyhow::Result<ExitCode> {
    match run_command(cli, log_filter).await {
        Err(e) if e.downcast_ref::<CannotRun>().is_some() => {
            say_error(&format!("{e:#}"));
            Ok(ExitCode::from(EXIT_INPUT))
        }
        other => other,
    }
}

async fn run_command(cli: Cli, log_filter: &str) -> anyhow::Result<ExitCode> {
    // What describes the product is printed without reading a configuration.
    if let Some(text) = description(&cli.command)? {
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let config = Config::load(cli.config.as_deref())?;
    let store_usage = if cli.command.is_one_shot() {
        Usage::OneShot
    } else {
        Usage::Service
    };
    let telemetry = crate::telemetry::init(log_filter, config.otlp_target.as_ref());
    let result = command(cli.command, config, store_usage).await;
    // Flushed on a blocking thread: the exporters block, and a one-shot command must not lose its
    // trace. (No thread when nothing is exported.)
    if telemetry.exports() {
        let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    }
    result
}

/// The text of a command that describes the product (the configuration's reference and schema, the
/// API's OpenAPI document), which needs no configuration; `None` for every other command.
fn description(command: &Command) -> anyhow::Result<Option<String>> {
    Ok(Some(match command {
        Command::Config(ConfigCommand::Reference) => crate::config::reference::markdown(),
        Command::Config(ConfigCommand::Schema) => {
            vt_actions::json::to_pretty(&crate::config::reference::schema())? + "\n"
        }
        Command::Openapi => vt_actions::json::to_pretty(&crate::http::openapi())? + "\n",
        _ => return Ok(None),
    }))
}

/// Runs `command`; `store_usage` says what it will do with the store (one-shot commands open it lighter).
async fn command(command: Command, config: Config, store_usage: Usage) -> anyhow::Result<ExitCode> {
    let u = store_usage;
    match command {
        Command::Chat(args) => chat::chat(&config, u, args).await.map(|()| ExitCode::SUCCESS),
        Command::RunFlow(args) => run_flow(&config, u, args).await,
        Command::Batch(args) => batch(&config, u, args).await,
        Command::Flows(args) => flows(&config, u, args).await,
        Command::Outbox(args) => outbox(&config, u, args).await,
        Command::Cases(args) => cases(&config, u, args).await,
        Command::Recorrencias(args) => recorrencias(&config, u, args).await,
        Command::Replay(args) => replay(&config, u, args).await,
        Command::Serve(args) => serve(config, args).await,
        Command::Audit(args) => audit(&config, u, args).await.map(|()| ExitCode::SUCCESS),
        Command::Simulator(args) => simulator(args).await.map(|()| ExitCode::SUCCESS),
        Command::Usage(args) => usage(&config, u, args).await.map(|()| ExitCode::SUCCESS),
        Command::Test(args) => test(&config, args).await,
        Command::Eval(args) => eval(&config, args).await,
        Command::Keys(KeysCommand::Rotate) => rotate_keys(&config, u).await,
        Command::Retencao(RetencaoCommand::Aplicar) => apply_retention(&config, u).await,
        Command::Titular(command) => data_subject(&config, u, command).await,
        Command::Optins(OptinsCommand::Import { file }) => import_opt_ins(&config, u, &file).await,
        Command::Systems(SystemsCommand::Check { cartao }) => check_systems(&config, &cartao).await,
        Command::Config(ConfigCommand::Check) => {
            println!("configuração válida");
            Ok(ExitCode::SUCCESS)
        }
        described @ (Command::Openapi | Command::Config(_)) => {
            print!("{}", description(&described)?.unwrap_or_default());
            Ok(ExitCode::SUCCESS)
        }
        Command::Systems(SystemsCommand::Contract) => {
            let document = vt_actions::systems::contract::openapi();
            println!("{}", vt_actions::json::to_pretty(&document)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Transcript(TranscriptCommand::Export { conversation, output }) => {
            export(&config, u, &conversation, output)
                .await
                .map(|()| ExitCode::SUCCESS)
        }
    }
}

async fn run_flow(config: &Config, store_usage: Usage, args: RunFlowArgs) -> anyhow::Result<ExitCode> {
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
    let defaults = vt_actions::vt::input::InputDefaults {
        politicas: &config.vt.politicas,
        tenant: None,
    };
    let input = match vt_actions::vt::FlowInput::parse_with(&text, defaults) {
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
        vt_actions::json::to_text(&output)?
    } else {
        vt_actions::json::to_pretty(&output)?
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
async fn read_input(path: &str) -> std::io::Result<Vec<u8>> {
    if path == "-" {
        let mut bytes = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut bytes).await?;
        Ok(bytes)
    } else {
        tokio::fs::read(path).await
    }
}

async fn batch(config: &Config, store_usage: Usage, args: BatchArgs) -> anyhow::Result<ExitCode> {
    use crate::batch::{self, BatchError, LineDefaults, Options, progress};
    let refuse = |message: String| {
        say_error(&message.to_string());
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
        shutdown_signal().await;
        eprintln!("parando: nenhum fluxo novo começa; esperando os que estão em andamento…");
        let _ = stop_tx.send(true);
    });
    let options = Options {
        concurrency: usize::from(args.concurrency),
        rate: args.rate,
        mode,
    };
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
fn parse_politicas(text: &str) -> Result<vt_actions::vt::input::Politicas, String> {
    vt_actions::json::counted_here();
    let mut de = serde_json::Deserializer::from_str(text);
    let politicas: vt_actions::vt::input::Politicas =
        serde_path_to_error::deserialize(&mut de).map_err(|e| {
            format!(
                "--politicas: campo inválido {}: {}",
                e.path(),
                vt_actions::redact::serde_message(&e.inner().to_string())
            )
        })?;
    politicas
        .validate()
        .map_err(|(field, why)| format!("--politicas: campo inválido {field}: {why}"))?;
    Ok(politicas)
}

async fn serve(mut config: Config, args: ServeArgs) -> anyhow::Result<ExitCode> {
    if let Some(addr) = args.addr {
        config.http.addr = addr;
    }
    let Ok(addr) = config.http.addr.parse::<std::net::SocketAddr>() else {
        eprintln!(
            "erro: endereço inválido em --addr / VT_HTTP_ADDR / [http] addr (use HOST:PORTA, ex.: 127.0.0.1:8080)"
        );
        return Ok(ExitCode::from(EXIT_INPUT));
    };
    if config.http.api_keys.is_empty() && !addr.ip().is_loopback() {
        eprintln!(
            "erro: sem chaves de API configuradas ([[http.api_keys]]) o serviço só atende em loopback \
             (127.0.0.1 ou ::1); configure chaves para escutar em {}",
            addr.ip()
        );
        return Ok(ExitCode::from(EXIT_INPUT));
    }
    let server = crate::app::serve::Server::compose(&config).await?;
    for notice in &server.notices {
        eprintln!("{notice}");
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("abrindo {addr}"))?;
    let bound = listener.local_addr()?;
    let access = if server.is_open() {
        "sem chaves de API: aberto, só em loopback"
    } else {
        "chaves de API exigidas"
    };
    eprintln!("vt-agent serve em http://{bound} ({access}). Ctrl-C ou SIGTERM para parar.");
    eprintln!(
        "console web em http://{bound}/console{}",
        if config.console.secret.is_none() {
            " (sem console.secret: as sessões terminam quando o serve parar)"
        } else {
            ""
        }
    );
    server.run(listener, shutdown_signal()).await?;
    eprintln!("vt-agent serve parou: pedidos em andamento concluídos.");
    Ok(ExitCode::SUCCESS)
}

/// Ctrl-C, or SIGTERM where there is one.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

async fn outbox(config: &Config, store_usage: Usage, args: OutboxArgs) -> anyhow::Result<ExitCode> {
    use crate::store::OutboxStatus;
    let store = crate::app::store(config, store_usage).await?;
    if let Some(id) = args.retry {
        if store.requeue(id, chrono::Utc::now()).await? {
            println!("item {id} volta para a fila com novas tentativas");
            return Ok(ExitCode::SUCCESS);
        }
        say_error(&format!(
            "o item {id} não existe ou não está na fila de mortos (status failed)"
        ));
        return Ok(ExitCode::from(EXIT_INPUT));
    }
    let pending = store.outbox_items(OutboxStatus::Pending, args.limit).await?;
    let held = store.outbox_items(OutboxStatus::Held, args.limit).await?;
    let failed = store.outbox_items(OutboxStatus::Failed, args.limit).await?;
    print!("{}", crate::runs::outbox_report(&pending, &held, &failed));
    Ok(ExitCode::SUCCESS)
}

/// `vt-agent cases`: see [`Command::Cases`].
async fn cases(config: &Config, store_usage: Usage, args: CasesArgs) -> anyhow::Result<ExitCode> {
    let store = crate::app::store(config, store_usage).await?;
    if let Some(protocol) = &args.protocolo {
        let Some(case) = store.case_by_protocol(args.tenant.as_deref(), protocol).await? else {
            say_error(&format!("nenhum atendimento com o protocolo {}", protocol.trim()));
            return Ok(ExitCode::from(1));
        };
        let log = store.case_events(&case.id).await?;
        let tz = config.vt.politicas.timezone.clone();
        print!("{}", crate::runs::case_report(&case, &log, &tz));
        return Ok(ExitCode::SUCCESS);
    }
    let cases = store.cases(args.tenant.as_deref(), args.limit).await?;
    print!("{}", crate::runs::cases_report(&cases, chrono::Utc::now()));
    Ok(ExitCode::SUCCESS)
}

/// `vt-agent recorrencias`: see [`Command::Recorrencias`].
async fn recorrencias(
    config: &Config,
    store_usage: Usage,
    args: RecorrenciasArgs,
) -> anyhow::Result<ExitCode> {
    let store = crate::app::store(config, store_usage).await?;
    let lines = crate::runs::recurrences(store.as_ref(), args.tenant.as_deref(), args.limit).await?;
    print!("{}", crate::runs::recurrences_report(&lines));
    Ok(ExitCode::SUCCESS)
}

/// A window as `7d`, `24h` or `30m`.
fn window(text: &str) -> anyhow::Result<chrono::Duration> {
    let bad = || cannot_run("--since: use um número e d, h ou m (7d, 24h, 30m)");
    let unit = text.chars().last().ok_or_else(bad)?;
    let n: i64 = text[..text.len() - unit.len_utf8()].parse().map_err(|_| bad())?;
    let window = match unit {
        'd' => chrono::Duration::try_days(n),
        'h' => chrono::Duration::try_hours(n),
        'm' => chrono::Duration::try_minutes(n),
        _ => None,
    };
    window.filter(|w| *w > chrono::Duration::zero()).ok_or_else(bad)
}

/// `vt-agent replay`: see [`Command::Replay`].
async fn replay(config: &Config, store_usage: Usage, args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let repeat = args.repeat.max(1);
    let min_pass = args.min_pass.unwrap_or(repeat);
    if min_pass > repeat {
        return Err(cannot_run("--min-pass: não pode passar de --repeat"));
    }
    // A baseline that is not there is compared with nothing: only --approve may write it first.
    if let Some(b) = args.baseline.as_ref().filter(|b| !args.approve && !b.exists()) {
        return Err(cannot_run(format!(
            "--baseline: {} não existe (aprove uma execução antes com --approve)",
            b.display()
        )));
    }
    let ids = args
        .ids
        .as_ref()
        .map(|f| {
            std::fs::read_to_string(f)
                .map_err(|e| cannot_run(format!("--ids: não foi possível ler {}: {e}", f.display())))
                .map(|t| {
                    t.lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
        })
        .transpose()?;
    let since = match ids {
        Some(_) => None,
        None => Some(chrono::Utc::now() - window(&args.since)?),
    };
    let candidate = match &args.candidate {
        Some(path) => Config::load(Some(path)).map_err(|e| cannot_run(format!("--candidate: {e:#}")))?,
        None => config.clone(),
    };
    let live_model = if args.live_model {
        Some(
            candidate
                .llm
                .provider()?
                .ok_or_else(|| cannot_run("--live-model: a configuração candidata não tem modelo ([llm])"))?,
        )
    } else {
        None
    };
    let store = crate::app::store(config, store_usage).await?;
    let options = crate::app::replay::ReplayOptions {
        selection: crate::app::replay::Selection {
            since,
            ids,
            tenant: args.tenant,
        },
        candidate,
        live_model,
        baseline: args.baseline,
        approve: args.approve,
        out: args.out.unwrap_or_else(|| config.data_dir.join("replay")),
        repeat,
        min_pass,
    };
    let run = crate::app::replay::run(store.as_ref(), &options).await?;
    for c in &run.cases {
        println!(
            "{:<8} {}  similaridade {:.0} %{}",
            c.verdict.label(),
            c.id,
            c.similarity * 100.0,
            c.errors.first().map(|e| format!("  — {e}")).unwrap_or_default()
        );
    }
    println!("{}", run.summary_line());
    println!("relatórios: {}", options.out.display());
    Ok(ExitCode::from(run.exit_code() as u8))
}

/// `vt-agent systems check`: see [`SystemsCommand::Check`].
async fn check_systems(config: &Config, cartao: &str) -> anyhow::Result<ExitCode> {
    let (systems, _simulator) = crate::app::systems(config)?;
    let found = systems.check(cartao).await;
    for check in &found {
        println!("{}", check.line());
    }
    Ok(if found.iter().all(|c| c.ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `vt-agent keys rotate`: see [`KeysCommand::Rotate`].
async fn rotate_keys(config: &Config, store_usage: Usage) -> anyhow::Result<ExitCode> {
    use crate::store::seal::{DataKey, KEY_FILE, KeyRing, read_key_file, write_key_file};
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
    let ring = crate::store::seal::ring();
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
async fn apply_retention(config: &Config, store_usage: Usage) -> anyhow::Result<ExitCode> {
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

/// `vt-agent optins import FILE`: see [`OptinsCommand::Import`].
async fn import_opt_ins(
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
fn read_opt_ins(file: &std::path::Path) -> Result<Vec<crate::service::OptIn>, String> {
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
async fn data_subject(
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
            let export = crate::retention::export(&crate::store::Stores::of(&store), &subject).await?;
            let text = vt_actions::json::to_pretty(&export)?;
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
                &crate::store::Stores::of(&store),
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

async fn audit(config: &Config, store_usage: Usage, args: AuditArgs) -> anyhow::Result<()> {
    let store = crate::app::store(config, store_usage).await?;
    let records = store.audit_records(args.limit).await?;
    print!("{}", crate::runs::audit_report(&records));
    Ok(())
}

async fn flows(config: &Config, store_usage: Usage, args: FlowsArgs) -> anyhow::Result<ExitCode> {
    let store = crate::app::store(config, store_usage).await?;
    if let Some(id) = &args.id {
        let Some(run) = store.flow_run(id).await? else {
            say_error("nenhuma execução com esse id (veja `vt-agent flows`)");
            return Ok(ExitCode::from(EXIT_INPUT));
        };
        print!("{}", crate::runs::flow_report(&run));
        return Ok(ExitCode::SUCCESS);
    }
    if args.pendentes {
        let followups = store.followups(true, args.limit).await?;
        let charges = store
            .charges_in(crate::store::ChargeStatus::Ativa, args.limit)
            .await?;
        let now = chrono::Utc::now();
        print!("{}", crate::runs::followups_report(&followups, now));
        print!("\n{}", crate::runs::pix_report(&charges, now));
        return Ok(ExitCode::SUCCESS);
    }
    let runs = store.flow_runs(args.limit).await?;
    let attempts = store.recharge_attempts(args.limit).await?;
    // What the listed runs' paid notices cost (a flow calls no model).
    let oldest = runs.iter().map(|r| r.created_at).min();
    let costs = match oldest {
        Some(since) => store.message_costs_since(since).await?,
        None => Vec::new(),
    };
    print!(
        "{}",
        crate::runs::report(&runs, (&attempts, &costs), chrono::Utc::now())
    );
    Ok(ExitCode::SUCCESS)
}

async fn simulator(args: SimulatorArgs) -> anyhow::Result<()> {
    let auth = args.auth()?;
    let sim = crate::app::simulator(&crate::config::SimulatorSettings {
        fixture: args.fixture,
        // A system of its own: its Pix charges and boletos are paid through
        // `POST /_simulador/pix/{txid}/pagar` and `POST /_simulador/boletos/{linha}/pagar`.
        pix_pagar_apos_segundos: Some(0),
        boleto_pagar_apos_segundos: Some(0),
        ..crate::config::SimulatorSettings::default()
    })?;
    if let Some(dir) = &args.tls {
        let (url, written) =
            crate::app::tls_simulator::serve(sim.router_behind(auth), args.port, dir).await?;
        eprintln!(
            "simulador de VT em {url} (TLS com certificado de cliente; autenticação: {}); para o cliente: ca_cert = {}, client_cert = {}, client_key = {} (Ctrl-C para parar)",
            args.auth,
            written.ca.display(),
            written.client_cert.display(),
            written.client_key.display()
        );
        tokio::signal::ctrl_c().await.context("esperando o Ctrl-C")?;
        return Ok(());
    }
    let running = sim.spawn_behind(args.port, auth).await?;
    eprintln!(
        "simulador de VT em {} (autenticação: {}; Ctrl-C para parar)",
        running.url, args.auth
    );
    tokio::signal::ctrl_c().await.context("esperando o Ctrl-C")?;
    running.task.abort();
    Ok(())
}

async fn eval(config: &Config, args: EvalArgs) -> anyhow::Result<ExitCode> {
    use crate::app::transcripts::ModelChoice;
    // What keeps `eval` from giving a verdict exits 2, like a case the model server failed: 1 is the
    // verdict "worse".
    let no_verdict = |message: String| {
        say_error(&message.to_string());
        Ok(ExitCode::from(2))
    };
    let paths = if args.corpus.is_empty() {
        crate::app::eval::default_corpus()
    } else {
        args.corpus.clone()
    };
    let cases = match crate::app::eval::load(&paths) {
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
    let options = crate::app::eval::EvalOptions {
        config: config.clone(),
        model,
        model_name,
        repeat: usize::from(args.repeat),
        compare: args.compare,
    };
    let quiet = args.json;
    let report = crate::app::eval::run(&cases, &options, |done, total| {
        if !quiet && done < total {
            eprint!("\r{done}/{total} casos");
        }
    })
    .await;
    if !quiet {
        eprintln!("\r{n}/{n} casos", n = cases.len());
    }
    if args.json {
        println!("{}", vt_actions::json::text(&report.json()));
    } else if let Some(why) = report.infrastructure_errors() {
        // Cases the model server failed are no verdict: no score is printed as if it were one.
        return no_verdict(why);
    } else {
        print!("{}", report.table(args.compare));
    }
    Ok(ExitCode::from(report.exit_code()))
}

/// Whether a TCP connection opens to `address`'s host and port within 3 s; why not.
async fn reachable(address: &str) -> Result<(), String> {
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

async fn test(config: &Config, args: TestArgs) -> anyhow::Result<ExitCode> {
    let files = crate::transcript::collect(&args.paths).map_err(anyhow::Error::msg)?;
    if files.is_empty() {
        return Err(cannot_run("nenhuma transcrição (*.yaml) nos caminhos dados"));
    }
    let options = crate::app::transcripts::RunOptions {
        config: config.clone(),
        record: args.record,
        record_with: None,
        model: None,
        systems: None,
    };
    let mut reports = Vec::with_capacity(files.len());
    for file in &files {
        let report = crate::app::transcripts::run_file(file, &options).await;
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
        std::fs::write(path, crate::app::transcripts::junit_xml(&reports))
            .with_context(|| format!("gravando {}", path.display()))?;
    }
    if let Some(path) = &args.json {
        std::fs::write(path, vt_actions::json::to_pretty(&reports)?)
            .with_context(|| format!("gravando {}", path.display()))?;
    }
    println!(
        "\ntranscripts: {}",
        crate::app::transcripts::summary_line(&reports)
    );
    Ok(if reports.iter().all(|r| r.passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn export(
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

async fn usage(config: &Config, store_usage: Usage, args: UsageArgs) -> anyhow::Result<()> {
    let store = crate::app::store(config, store_usage).await?;
    let tz = &config.vt.politicas.timezone;
    let today = tz.local(chrono::Utc::now()).date_naive();
    let first = today - chrono::Days::new(u64::from(args.dias - 1));
    // From the day before in UTC: the local day starts up to a day earlier or later.
    let since = first.and_time(chrono::NaiveTime::MIN).and_utc() - chrono::Duration::days(1);
    if args.desfechos {
        let records = store.outcomes_since(since).await?;
        let groups = crate::usage::outcomes::by_day(&records, tz, first);
        if groups.is_empty() {
            println!("Nenhum atendimento terminado desde {first}.");
        } else {
            println!("{}", crate::usage::outcomes::table(&groups));
        }
    }
    if args.custos {
        let records = store.usage_since(since).await?;
        let messages = store.message_costs_since(since).await?;
        let flows = store.flow_runs_since(since).await?;
        let spending = crate::usage::Spending {
            turns: &records,
            messages: &messages,
            flows: &flows,
        };
        let rows = crate::usage::costs(spending, tz, first);
        if rows.is_empty() {
            println!("Nenhum turno registrado desde {first}.");
        } else {
            println!("{}", crate::usage::costs_table(&rows));
        }
        return Ok(());
    }
    if args.desfechos {
        return Ok(());
    }
    let rows = store.usage_summary().await?;
    if rows.is_empty() {
        println!("Nenhum turno registrado nos últimos 7 dias.");
        return Ok(());
    }
    println!("{}", crate::usage::table(&rows));
    Ok(())
}

#[cfg(test)]
mod window_tests {
    #[test]
    fn a_window_is_a_number_and_a_unit_and_anything_else_is_named() {
        assert_eq!(super::window("7d").expect("7d"), chrono::Duration::days(7));
        assert_eq!(super::window("30m").expect("30m"), chrono::Duration::minutes(30));
        for bad in ["", "d", "7", "7é", "sete dias", "-1d", "0h", "99999999999999d"] {
            let e = super::window(bad).expect_err(bad).to_string();
            assert!(e.contains("--since"), "{bad}: {e}");
        }
    }
}
