//! The command line: argument parsing and the commands themselves, kept thin over the library.

// The command docs below are `--help` text, where `[llm]`, `[http]`… name sections of vt-agent.toml,
// not items to link.
#![allow(rustdoc::broken_intra_doc_links)]

mod chat;
mod data;
mod eval;
mod flow;
mod records;
mod replay;
mod serve;
mod systems;

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use std::process::ExitCode;

use crate::config::Config;
use vt_store::Usage;

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
        #[arg(long, value_name = "N", default_value = vt_connectors::systems::CHECK_CARD)]
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
    fn auth(&self) -> anyhow::Result<vt_simulators::systems::SimulatorAuth> {
        use vt_simulators::systems::SimulatorAuth;
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
    use vt_domain::vt::card::{card_numbers_in, replace_cards_in};
    let typed: Vec<String> = std::env::args()
        .skip(1)
        .flat_map(|a| card_numbers_in(&a))
        .collect();
    let masked = replace_cards_in(text, |found| {
        let digits: String = found.chars().filter(char::is_ascii_digit).collect();
        if typed.contains(&digits) {
            vt_domain::vt::mask_card(found)
        } else {
            found.to_owned()
        }
    });
    let text = vt_contract::redact::secrets(&masked);
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
    let telemetry = vt_engine::telemetry::init(log_filter, config.otlp_target.as_ref());
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
            vt_contract::json::to_pretty(&crate::config::reference::schema())? + "\n"
        }
        Command::Openapi => vt_contract::json::to_pretty(&crate::http::openapi())? + "\n",
        _ => return Ok(None),
    }))
}

/// Runs `command`; `store_usage` says what it will do with the store (one-shot commands open it lighter).
async fn command(command: Command, config: Config, store_usage: Usage) -> anyhow::Result<ExitCode> {
    let u = store_usage;
    match command {
        Command::Chat(args) => chat::chat(&config, u, args).await.map(|()| ExitCode::SUCCESS),
        Command::RunFlow(args) => flow::run_flow(&config, u, args).await,
        Command::Batch(args) => flow::batch(&config, u, args).await,
        Command::Flows(args) => records::flows(&config, u, args).await,
        Command::Outbox(args) => records::outbox(&config, u, args).await,
        Command::Cases(args) => records::cases(&config, u, args).await,
        Command::Recorrencias(args) => records::recorrencias(&config, u, args).await,
        Command::Replay(args) => replay::replay(&config, u, args).await,
        Command::Serve(args) => serve::serve(config, args).await,
        Command::Audit(args) => records::audit(&config, u, args).await.map(|()| ExitCode::SUCCESS),
        Command::Simulator(args) => systems::simulator(args).await.map(|()| ExitCode::SUCCESS),
        Command::Usage(args) => records::usage(&config, u, args).await.map(|()| ExitCode::SUCCESS),
        Command::Test(args) => eval::test(&config, args).await,
        Command::Eval(args) => eval::eval(&config, args).await,
        Command::Keys(KeysCommand::Rotate) => data::rotate_keys(&config, u).await,
        Command::Retencao(RetencaoCommand::Aplicar) => data::apply_retention(&config, u).await,
        Command::Titular(command) => data::data_subject(&config, u, command).await,
        Command::Optins(OptinsCommand::Import { file }) => data::import_opt_ins(&config, u, &file).await,
        Command::Systems(SystemsCommand::Check { cartao }) => systems::check_systems(&config, &cartao).await,
        Command::Config(ConfigCommand::Check) => {
            println!("configuração válida");
            Ok(ExitCode::SUCCESS)
        }
        described @ (Command::Openapi | Command::Config(_)) => {
            print!("{}", description(&described)?.unwrap_or_default());
            Ok(ExitCode::SUCCESS)
        }
        Command::Systems(SystemsCommand::Contract) => {
            let document = vt_domain::systems::contract::openapi();
            println!("{}", vt_contract::json::to_pretty(&document)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Transcript(TranscriptCommand::Export { conversation, output }) => {
            data::export(&config, u, &conversation, output)
                .await
                .map(|()| ExitCode::SUCCESS)
        }
    }
}
