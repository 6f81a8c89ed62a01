//! `vt-agent serve`, composed: the API with the console and the channels that are configured, the
//! outbox worker, the Mattermost bot, batch jobs in the background, the recovery of messages a stop
//! left unprocessed, retention, and the outbox gauges for exported metrics. Every task it starts is
//! told to stop when the server stops, and joined before [`Server::run`] returns.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use vt_actions::systems::{Simulator, VtSystems};

use super::{App, CHAT_AGENT};
use crate::batch::background::Background;
use crate::channels::Wiring;
use crate::config::Config;
use crate::http::AppState;
use crate::outbox::Worker;
use crate::service::Services;

/// How often exported metrics refresh the outbox gauges (`/metrics` refreshes them when scraped).
const GAUGES_EVERY: Duration = Duration::from_secs(15);
/// How often `serve` looks for cases whose claim time ran out.
const CASE_NOTICES_EVERY: Duration = Duration::from_secs(15);
/// How often an instance looks for batch work it could share (another instance's job, a chunk whose
/// instance died).
const BATCHES_EVERY: Duration = Duration::from_secs(2);

/// Everything `serve` runs, composed and not started yet.
pub(crate) struct Server {
    service: Arc<Services>,
    /// The embedded simulator, when no external systems are configured: it lives as long as the server.
    simulator: Option<Simulator>,
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
    pub(crate) async fn compose(config: &Config) -> anyhow::Result<Self> {
        let App { service, simulator } = App::start(config, None, crate::store::Usage::Service).await?;
        let service = Arc::new(service);
        let mut notices = Vec::new();
        let mut state = AppState::new(service.clone(), CHAT_AGENT, config.http.clone())
            .with_console(&config.console)
            .with_simulator_book(config.retencao.simulator_book.clone());
        let mut worker = Worker::new(service.stores().outbox.clone(), config.outbox.retry);
        let wiring = Wiring {
            service: service.clone(),
            agent: CHAT_AGENT.to_owned(),
            tenant: config.vt.tenant_id.clone(),
        };
        // Checked now, when WhatsApp is on: a bad template file stops the start, naming its field.
        let templates = match config.whatsapp.is_on() {
            true => Some(Arc::new(crate::channels::whatsapp::Templates::load(
                &config.templates_dir(),
            )?)),
            false => None,
        };
        // The channels `serve` runs, one line each.
        let channels = [
            templates.as_ref().map_or_else(Default::default, |templates| {
                crate::channels::whatsapp::channel(&config.whatsapp, templates, &wiring)
            }),
            crate::channels::mattermost::channel(
                &config.mattermost,
                config.handoff.mattermost_channel_id.as_deref(),
                &wiring,
            ),
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
        ];
        let mut jobs = Vec::new();
        for channel in channels.into_iter().filter(crate::channels::Channel::is_on) {
            state = state.with_channel(&channel);
            for sender in channel.senders {
                worker = worker.with_sender(sender);
            }
            jobs.extend(channel.jobs);
            notices.extend(channel.notices);
        }
        if let Some(templates) = templates {
            state = state.with_templates(templates);
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
    pub(crate) async fn run(
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
        // The systems checked as `vt-agent systems check` checks them: logged, never fatal (a system
        // down at start may be up by the first turn).
        if let Some(systems) = self.service.engine().extensions().get::<VtSystems>().cloned() {
            tasks.spawn(async move {
                for check in systems.check(vt_actions::systems::CHECK_CARD).await {
                    if check.ok {
                        tracing::info!(system = check.system, "{}", check.line());
                    } else {
                        tracing::warn!(system = check.system, "{}", check.line());
                    }
                }
            });
        }
        let stopped = |stop: &watch::Sender<bool>| {
            let mut rx = stop.subscribe();
            async move {
                let _ = rx.wait_for(|stop| *stop).await;
            }
        };
        // Batch jobs a stop interrupted go on, and every instance joins the jobs the others run;
        // messages acknowledged and never processed get their turn.
        let (batches, stop) = (self.batches.clone(), stopped(&self.stop));
        tasks.spawn(async move {
            tokio::pin!(stop);
            loop {
                let joined = batches.join().await;
                if joined > 0 {
                    tracing::info!(joined, "batch jobs joined");
                }
                tokio::select! {
                    () = &mut stop => return,
                    () = tokio::time::sleep(BATCHES_EVERY) => {}
                }
            }
        });
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
        // Cases nobody claimed in time: the due time is in the store, so a restart loses none.
        let (service, stop) = (self.service.clone(), stopped(&self.stop));
        tasks.spawn(async move {
            tokio::pin!(stop);
            loop {
                let sent = service.cases().send_due_case_notices().await;
                if sent > 0 {
                    tracing::info!(sent, "unclaimed-case notices sent");
                }
                tokio::select! {
                    () = &mut stop => return,
                    () = tokio::time::sleep(CASE_NOTICES_EVERY) => {}
                }
            }
        });
        // Recharges whose outcome came late: the follow-ups are in the store, so a restart loses none,
        // and each is checked by one instance.
        let (service, stop) = (self.service.clone(), stopped(&self.stop));
        tasks.spawn(async move {
            tokio::pin!(stop);
            let every = service.recargas().poll_every();
            loop {
                let checked = service.followups().run_due_followups().await;
                if checked > 0 {
                    tracing::info!(checked, "recharge follow-ups checked");
                }
                tokio::select! {
                    () = &mut stop => return,
                    () = tokio::time::sleep(every) => {}
                }
            }
        });
        // Stretches of conversations that went quiet or ended: their outcomes, the satisfaction question.
        let (service, stop) = (self.service.clone(), stopped(&self.stop));
        tasks.spawn(async move {
            tokio::pin!(stop);
            let every = service.resultados().every();
            loop {
                let closed = service.outcomes().close_stretches().await;
                if closed > 0 {
                    tracing::info!(closed, "conversation outcomes recorded");
                }
                tokio::select! {
                    () = &mut stop => return,
                    () = tokio::time::sleep(every) => {}
                }
            }
        });
        tasks.spawn(crate::retention::run(
            self.service.stores().keeping.clone(),
            self.retention,
            self.stop.subscribe(),
        ));
        if self.refresh_gauges {
            let (metrics, service, stop) = (
                self.state.metrics.clone(),
                self.service.clone(),
                stopped(&self.stop),
            );
            tasks.spawn(async move {
                tokio::pin!(stop);
                loop {
                    metrics.refresh_outbox(&service).await;
                    tokio::select! {
                        () = &mut stop => return,
                        () = tokio::time::sleep(GAUGES_EVERY) => {}
                    }
                }
            });
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

/// How often open charges are read back: `[pix]`'s and `[cartao]`'s `varredura_segundos`, or their defaults.
fn sweep_every(config: &Config) -> Duration {
    let pix = config.pix.as_ref().map_or_else(
        || vt_actions::pix::PixConfig::default().varredura_segundos,
        |p| p.varredura_segundos,
    );
    // One sweep reads every open charge, Pix and card: as often as the more eager of the two asks.
    let seconds = match config.cartao.checkout() {
        true => pix.min(config.cartao.varredura_segundos),
        false => pix,
    };
    Duration::from_secs(seconds.into())
}
