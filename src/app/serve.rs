//! `vt-agent serve`, composed: the API with the console and the channels that are configured, the
//! outbox worker, the Mattermost bot, batch jobs in the background, the recovery of messages a stop
//! left unprocessed, retention, and the outbox gauges for exported metrics. Every task it starts is
//! told to stop when the server stops, and joined before [`Server::run`] returns.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use vt_connectors::systems::VtSystems;
use vt_simulators::systems::Simulator;

use super::{App, CHAT_AGENT};
use crate::batch::background::Background;
use crate::channels::Wiring;
use crate::config::Config;
use crate::http::AppState;
use crate::outbox::Worker;
use crate::service::Services;
use vt_engine::periodic::{every, log_count};

/// How often exported metrics refresh the outbox gauges (`/metrics` refreshes them when scraped).
const GAUGES_EVERY: Duration = Duration::from_secs(15);
/// How often `serve` looks for cases whose claim time ran out.
const CASE_NOTICES_EVERY: Duration = Duration::from_secs(15);
/// How often an instance looks for batch work it could share (another instance's job, a chunk whose
/// instance died).
const BATCHES_EVERY: Duration = Duration::from_secs(2);

/// Everything `serve` runs, composed and not started yet.
pub struct Server {
    service: Arc<Services>,
    /// The embedded simulator, when no external systems are configured: it lives as long as the server.
    simulator: Option<Simulator>,
    /// The systems' client, checked at start.
    systems: VtSystems,
    state: AppState,
    worker: Worker,
    /// The channels' background jobs (Mattermost's websocket bot).
    jobs: Vec<crate::channels::Job>,
    batches: Arc<Background>,
    retention: crate::retention::RetentionConfig,
    /// Exported metrics read the outbox gauges, which `/metrics` refreshes only when scraped.
    refresh_gauges: bool,
    stop: watch::Sender<bool>,
    /// What is on, for the operator: one line each.
    pub notices: Vec<String>,
}

impl Server {
    pub async fn compose(config: &Config) -> anyhow::Result<Self> {
        let App {
            service,
            simulator,
            systems,
        } = App::start(config, None, vt_store::Usage::Service).await?;
        let service = Arc::new(service);
        let mut notices = Vec::new();
        let mut state = AppState::new(service.clone(), CHAT_AGENT, config.http.clone())
            .with_console(&config.console)
            .with_simulator_book(config.retencao.simulator_book.clone())
            .with_replay_dir(config.data_dir.join("replay"));
        let mut worker = Worker::new(service.stores().outbox.clone(), config.outbox.retry)
            .with_concurrency(config.outbox.envios_simultaneos);
        let wiring = Wiring {
            service: service.clone(),
            agent: CHAT_AGENT.to_owned(),
            tenant: config.vt.tenant_id.clone(),
        };
        // The channels `serve` runs: each plugged channel, then the payment providers' webhooks.
        let mut channels = Vec::new();
        for plug in config.channels.plugs() {
            channels.push(plug.build(config, &wiring)?);
        }
        channels.extend([
            crate::channels::pix::channel(
                &wiring,
                simulator.as_ref().map(Simulator::pix),
                sweep_every(config),
            ),
            crate::channels::cartao::channel(
                &wiring,
                simulator.as_ref().map(Simulator::cartao),
                sweep_every(config),
            ),
        ]);
        let mut jobs = Vec::new();
        for channel in channels.into_iter().filter(crate::channels::Channel::is_on) {
            state = state.with_channel(&channel);
            for sender in channel.senders {
                worker = worker.with_sender(sender);
            }
            jobs.extend(channel.jobs);
            notices.extend(channel.notices);
        }
        if !config.http.webhooks.is_empty() {
            let stores = service.stores();
            let sender = crate::http::webhooks::WebhookSender::new(
                &config.http.webhooks,
                stores.conversations.clone(),
                stores.pix.clone(),
            );
            notices.push(format!(
                "HTTP: mensagens tardias enviadas por webhook assinado aos clientes {}",
                sender.tenants().collect::<Vec<_>>().join(", ")
            ));
            worker = worker.with_sender(Arc::new(sender));
        }
        let (stop, stopped) = watch::channel(false);
        let batches = Background::new(service.clone(), config.vt.politicas.clone(), stopped);
        let state = state.with_batches(batches.clone());
        Ok(Self {
            service,
            simulator,
            systems,
            state,
            worker,
            jobs,
            batches,
            retention: config.retencao.clone(),
            refresh_gauges: config
                .otlp_target
                .as_ref()
                .is_some_and(|t| t.metrics_endpoint.is_some()),
            stop,
            notices,
        })
    }

    /// Whether the API is open (no API key configured).
    pub(crate) fn is_open(&self) -> bool {
        self.state.is_open()
    }

    /// Serves on `listener` until `shutdown` resolves; then stops every task and waits for each (requests
    /// in flight, turns, batch lines and sends end first).
    pub async fn run(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let mut tasks = JoinSet::new();
        // The embedded card provider's checkout pages are this server's: its links name the address
        // bound (a port chosen at bind time included).
        if let Some(sim) = &self.simulator {
            sim.cartao()
                .served_at(&format!("http://{}", listener.local_addr()?));
        }
        tasks.spawn(check_systems(self.systems));
        // Messages acknowledged and never processed get their turn.
        let service = self.service.clone();
        tasks.spawn(async move {
            service.messages().recover().await;
        });
        for job in self.jobs {
            tasks.spawn(job(Box::pin(stopped(&self.stop))));
        }
        if self.worker.has_senders() {
            tasks.spawn(self.worker.run(stopped(&self.stop)));
        }
        for job in periodic_jobs(&self.service, &self.batches, self.retention, &self.stop) {
            tasks.spawn(job);
        }
        if self.refresh_gauges {
            let (metrics, service) = (self.state.metrics.clone(), self.service.clone());
            let refresh = async move || metrics.refresh_outbox(&service).await;
            tasks.spawn(every(GAUGES_EVERY, stopped(&self.stop), refresh));
        }
        let stop = self.stop.clone();
        let served = crate::http::serve(listener, self.state, async move {
            shutdown.await;
            let _ = stop.send(true);
        })
        .await;
        // Whatever ended the serving, every task is told to stop; the turns in flight end first.
        let _ = self.stop.send(true);
        self.service.stopped().await;
        while let Some(joined) = tasks.join_next().await {
            if let Err(e) = joined {
                tracing::error!(error = %e, "a serve task failed");
            }
        }
        self.batches.wait().await;
        drop(self.simulator);
        Ok(served?)
    }
}

/// A future that resolves when `stop` says so.
fn stopped(stop: &watch::Sender<bool>) -> impl Future<Output = ()> + Send + 'static {
    let mut rx = stop.subscribe();
    async move {
        let _ = rx.wait_for(|stop| *stop).await;
    }
}

/// The systems checked as `vt-agent systems check` checks them: logged, never fatal (a system down at
/// start may be up by the first turn).
async fn check_systems(systems: VtSystems) {
    for check in systems.check(vt_connectors::systems::CHECK_CARD).await {
        if check.ok {
            tracing::info!(system = check.system, "{}", check.line());
        } else {
            tracing::warn!(system = check.system, "{}", check.line());
        }
    }
}

type Job = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// `serve`'s own periodic work, one entry each, until `stop`. What each pass looks for is in the store
/// (a due time, a follow-up, a lease), so a restart loses none, and each item is taken by one instance.
fn periodic_jobs(
    service: &Arc<Services>,
    batches: &Arc<Background>,
    retention: crate::retention::RetentionConfig,
    stop: &watch::Sender<bool>,
) -> Vec<Job> {
    let (s1, s2, s3) = (service.clone(), service.clone(), service.clone());
    let (batches, keeping) = (batches.clone(), service.stores().keeping.clone());
    vec![
        // Batch jobs a stop interrupted go on, and every instance joins the jobs the others run.
        Box::pin(every(BATCHES_EVERY, stopped(stop), async move || {
            log_count(batches.join().await, "batch jobs joined");
        })),
        // Cases nobody claimed in time; cases offered to a team's members, offers that expired; SLA
        // clocks at risk.
        Box::pin(every(CASE_NOTICES_EVERY, stopped(stop), async move || {
            log_count(
                s1.cases().send_due_case_notices().await,
                "unclaimed-case notices sent",
            );
            log_count(s1.cases().assign_waiting().await, "cases offered to agents");
            log_count(s1.cases().warn_sla_at_risk().await, "SLA warnings sent");
        })),
        // Recharges whose outcome came late.
        Box::pin(every(
            service.followups().every(),
            stopped(stop),
            async move || {
                log_count(
                    s2.followups().run_due_followups().await,
                    "recharge follow-ups checked",
                );
            },
        )),
        // Stretches of conversations that went quiet or ended: their outcomes, the satisfaction question.
        Box::pin(every(
            service.outcomes().every(),
            stopped(stop),
            async move || {
                log_count(
                    s3.outcomes().close_stretches().await,
                    "conversation outcomes recorded",
                );
            },
        )),
        Box::pin(every(crate::retention::EVERY, stopped(stop), async move || {
            crate::retention::pass(keeping.as_ref(), &retention).await;
        })),
    ]
}

/// How often open charges are read back: `[pix]`'s and `[cartao]`'s `varredura_segundos`, or their defaults.
fn sweep_every(config: &Config) -> Duration {
    let pix = config.pix.as_ref().map_or_else(
        || vt_connectors::pix::PixConfig::default().varredura_segundos,
        |p| p.varredura_segundos,
    );
    // One sweep reads every open charge, Pix and card: as often as the more eager of the two asks.
    let seconds = match config.cartao.checkout() {
        true => pix.min(config.cartao.varredura_segundos),
        false => pix,
    };
    Duration::from_secs(seconds.into())
}
