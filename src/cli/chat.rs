//! `vt-agent chat`: the terminal's conversation — one message (`--message`), lines from a pipe, or a
//! line editor. What the product says later in the conversation, outside a turn (a Pix receipt, a
//! late recharge's outcome), is printed as it is said ([`crate::service::Services::said`]).
//!
//! With the embedded simulator as the Pix provider, the chat runs the provider's side itself while it
//! lasts (its notices in process, open charges read back every [`SWEEP_EVERY`]); when the input ends
//! with a code the simulator is paying, it waits for the receipt (at most [`WAIT_AT_MOST`]), so a
//! newcomer sees the whole journey.

use std::io::IsTerminal as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::sync::broadcast;
use vt_simulators::systems::Simulator;

use super::ChatArgs;
use crate::app::App;
use crate::config::Config;
use crate::service::{Inbound, Said, Services};
use vt_engine::Participant;
use vt_store::{ChargeStatus, Usage};

/// How often the chat reads its open charges back at the embedded simulator (in process: free).
const SWEEP_EVERY: Duration = Duration::from_secs(2);
/// The longest the chat waits, at the end of its input, for the simulator to pay a code.
const WAIT_AT_MOST: Duration = Duration::from_secs(60);

pub(super) async fn chat(config: &Config, store_usage: Usage, args: ChatArgs) -> anyhow::Result<()> {
    let App {
        service, simulator, ..
    } = App::start(config, None, store_usage).await?;
    let service = Arc::new(service);
    let who = Participant {
        user_id: args.user.clone(),
        user_login: args.user.clone(),
        channel: vt_engine::TERMINAL.into(),
    };
    if service.engine().catalog().agent(&args.agent).is_none() {
        anyhow::bail!("agente não encontrado: {}", args.agent);
    }
    let conversation = args
        .conversation
        .clone()
        .unwrap_or_else(|| service.engine().next_id("conv"));
    if let Some(id) = &args.conversation
        && service.stores().conversations.conversation(id).await?.is_none()
    {
        eprintln!("conversa {id} não existe: começando uma nova com esse id");
    }
    let psp = simulator.as_ref();
    // The simulated card checkout's pages are served here, where its links say (no `serve` runs).
    let _pages = match psp {
        Some(sim) => Some(serve_checkout_pages(sim).await?),
        None => None,
    };
    let background = run_payments(&service, config, psp);
    let mut said = Later {
        said: service.said(),
        conversation: conversation.clone(),
    };
    let send = async |text: &str| -> anyhow::Result<(String, bool)> {
        let msg = Inbound {
            agent_id: args.agent.clone(),
            conversation_id: Some(conversation.clone()),
            user: who.clone(),
            text: text.to_owned(),
            ..Default::default()
        };
        let handled = service.messages().handle(msg).await?;
        Ok((handled.reply_text(), handled.ended))
    };
    if let Some(message) = &args.message {
        let (reply, _) = send(message).await?;
        println!("{reply}");
        wait_for_payments(&service, psp, &mut said).await;
        background.finish(&service).await;
        said.print_ready();
        if args.conversation.is_none() {
            // The id goes to stderr so scripts reading the reply on stdout are not disturbed.
            eprintln!("(conversa {conversation}: continue com --conversation {conversation})");
        }
        Ok(())
    } else if std::io::stdin().is_terminal() {
        let model = if service.engine().has_model() {
            "com modelo"
        } else {
            "sem modelo: só os comandos de VT"
        };
        println!("vt-agent — conversa {conversation} ({model}). Ctrl-D para sair.\n");
        let result = edit_lines(send, said).await;
        background.finish(&service).await;
        result
    } else {
        let result = read_pipe(send, &mut said).await;
        wait_for_payments(&service, psp, &mut said).await;
        background.finish(&service).await;
        said.print_ready();
        result
    }
}

/// The embedded simulator's card checkout pages on a loopback port of the chat's own, which its links
/// then name: a link printed in the terminal opens a page that pays. Stops with the returned task.
async fn serve_checkout_pages(
    sim: &vt_simulators::systems::Simulator,
) -> anyhow::Result<tokio_util::task::AbortOnDropHandle<()>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    sim.cartao()
        .served_at(&format!("http://{}", listener.local_addr()?));
    let pages = sim.cartao().page_router();
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, pages).await {
            tracing::warn!(error = %e, "the simulated checkout pages stopped");
        }
    });
    Ok(tokio_util::task::AbortOnDropHandle::new(task))
}

/// The Pix channel's jobs the chat runs (none without the embedded simulator).
struct Background {
    stop: tokio::sync::watch::Sender<bool>,
    jobs: Vec<tokio::task::JoinHandle<()>>,
}

impl Background {
    /// Stops the jobs (a pass under way ends first) and waits for the payments they started.
    async fn finish(self, service: &Services) {
        let _ = self.stop.send(true);
        for job in self.jobs {
            let _ = job.await;
        }
        service.stopped().await;
    }
}

/// What is said later in one conversation.
struct Later {
    said: broadcast::Receiver<Said>,
    conversation: String,
}

impl Later {
    /// The next thing said in the conversation; `None` once nothing more can be.
    async fn next(&mut self) -> Option<String> {
        loop {
            match self.said.recv().await {
                Ok(s) if s.conversation_id == self.conversation => return Some(s.text),
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// Prints what was said already, each as a block of its own.
    fn print_ready(&mut self) {
        for text in self.ready() {
            println!("{text}\n");
        }
    }

    /// What was said already, without waiting.
    fn ready(&mut self) -> Vec<String> {
        let mut texts = Vec::new();
        while let Ok(s) = self.said.try_recv() {
            if s.conversation_id == self.conversation {
                texts.push(s.text);
            }
        }
        texts
    }
}

/// With the embedded simulator as the Pix and card provider: its notices and the sweep, in tasks,
/// until the returned sender says stop.
fn run_payments(service: &Arc<Services>, config: &Config, psp: Option<&Simulator>) -> Background {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let Some(psp) = psp else {
        return Background {
            stop,
            jobs: Vec::new(),
        };
    };
    let wiring = crate::channels::Wiring {
        service: service.clone(),
        agent: crate::app::CHAT_AGENT.to_owned(),
        tenant: config.vt.tenant_id.clone(),
    };
    let pix = crate::channels::pix::channel(&wiring, Some(psp.pix()), SWEEP_EVERY);
    let card = crate::channels::cartao::channel(&wiring, Some(psp.cartao()), SWEEP_EVERY);
    let jobs = pix
        .jobs
        .into_iter()
        .chain(card.jobs)
        .map(|job| {
            let mut stopped = stopped.clone();
            let stop = Box::pin(async move {
                let _ = stopped.wait_for(|s| *s).await;
            });
            tokio::spawn(job(stop))
        })
        .collect();
    Background { stop, jobs }
}

/// Whether a charge of the conversation is still on its way to a receipt: paid and not credited yet,
/// or open and being paid by the simulator.
async fn paying(service: &Services, sim: &Simulator, conversation: &str) -> bool {
    let Ok(open) = service.payments().open_in(conversation).await else {
        return false;
    };
    open.iter().any(|c| {
        c.status == ChargeStatus::Paga
            || sim.pix().paid_or_paying(&c.txid)
            || sim.cartao().paid_or_paying(&c.txid)
    })
}

/// Prints what is said in the conversation until no code of it is being paid by the simulator (at
/// most [`WAIT_AT_MOST`]).
async fn wait_for_payments(service: &Services, psp: Option<&Simulator>, said: &mut Later) {
    let Some(psp) = psp else {
        return;
    };
    let deadline = tokio::time::Instant::now() + WAIT_AT_MOST;
    let mut told = false;
    loop {
        said.print_ready();
        if !paying(service, psp, &said.conversation).await {
            return;
        }
        if !told {
            eprintln!("(simulador: aguardando o pagamento…)");
            told = true;
        }
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => return,
            text = said.next() => match text {
                Some(text) => println!("{text}\n"),
                None => return,
            },
            () = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    }
}

/// One turn a line read from a pipe (a line that is not UTF-8 is still a message: stored as read,
/// answered with what is wrong), with what was said meanwhile after its reply.
async fn read_pipe(
    mut send: impl AsyncFnMut(&str) -> anyhow::Result<(String, bool)>,
    said: &mut Later,
) -> anyhow::Result<()> {
    let mut input = BufReader::new(tokio::io::stdin());
    let mut out = tokio::io::stdout();
    let mut line = Vec::new();
    loop {
        line.clear();
        if input
            .read_until(b'\n', &mut line)
            .await
            .context("lendo a entrada padrão")?
            == 0
        {
            break;
        }
        let text = String::from_utf8_lossy(&line);
        let (reply, ended) = send(text.trim()).await?;
        let mut block = format!("{reply}\n\n");
        for later in said.ready() {
            block.push_str(&format!("{later}\n\n"));
        }
        out.write_all(block.as_bytes()).await?;
        out.flush().await?;
        if ended {
            return Ok(());
        }
    }
    Ok(())
}

/// The terminal's conversation: a line editor (arrows, Home/End, history of this session with ↑/↓ —
/// kept in memory only, as it holds the cards typed) reading on a blocking thread, one turn a line;
/// what is said later is printed above the prompt as it comes.
async fn edit_lines(
    mut send: impl AsyncFnMut(&str) -> anyhow::Result<(String, bool)>,
    mut said: Later,
) -> anyhow::Result<()> {
    use rustyline::ExternalPrinter as _;
    use rustyline::error::ReadlineError;
    let mut editor = rustyline::DefaultEditor::new().context("abrindo o editor de linha do terminal")?;
    let printer = editor.create_external_printer().ok().map(|mut printer| {
        tokio::spawn(async move {
            while let Some(text) = said.next().await {
                if printer.print(format!("vt> {text}\n")).is_err() {
                    return;
                }
            }
        })
    });
    loop {
        let (back, read) = tokio::task::spawn_blocking(move || {
            let read = editor.readline("você> ");
            (editor, read)
        })
        .await
        .context("lendo o terminal")?;
        editor = back;
        let line = match read {
            Ok(line) => line,
            Err(ReadlineError::Eof | ReadlineError::Interrupted) => break,
            Err(e) => return Err(e).context("lendo o terminal"),
        };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(text);
        let (reply, ended) = send(text).await?;
        println!("vt> {reply}\n");
        if ended {
            break;
        }
    }
    if let Some(printer) = printer {
        printer.abort();
    }
    println!();
    Ok(())
}
