//! What every handler may use: the service and its agent, the keys, the limits, the metrics, and the
//! parts that are on (channels, batches, the console's keys).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use tokio::sync::Semaphore;

use super::auth::{self, Caller};
use super::config::HttpConfig;
use super::console::keys::{Console, ConsoleConfig};
use super::error::ApiError;
use super::metrics::Metrics;
use crate::service::Services;

/// Everything a handler may use; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub service: Arc<Services>,
    /// What handlers read, each concern as its narrow trait.
    pub(crate) stores: vt_store::Stores,
    /// The agent the conversations API, the console's lookups and the channels talk to.
    pub agent: String,
    pub config: Arc<HttpConfig>,
    pub(super) keys: Arc<auth::ApiKeys>,
    limiter: Arc<DefaultKeyedRateLimiter<String>>,
    turns: Arc<Semaphore>,
    pub metrics: Arc<Metrics>,
    /// The channels' routes: `(channel, path, handlers)`, merged into the API's router.
    pub(super) channel_routes: Vec<(&'static str, &'static str, axum::routing::MethodRouter)>,
    /// Batch jobs in the background (`/v1/batches`).
    pub(super) batches: Option<Arc<crate::batch::background::Background>>,
    /// The WhatsApp templates in use, for the console.
    pub(crate) templates: Option<Arc<crate::channels::whatsapp::Templates>>,
    /// WhatsApp's pace (messages a second), for the console's time left of the queue.
    pub(crate) pace: Option<u32>,
    /// The web console's keys.
    pub(crate) console: Arc<Console>,
    /// The embedded simulator's book, which a data subject's erasure reaches too.
    pub(crate) simulator_book: Option<std::path::PathBuf>,
    /// Where `vt-agent replay` writes its reports by default (the console's Replay page).
    pub(crate) replay_dir: Option<std::path::PathBuf>,
}

impl AppState {
    /// The API of `service`'s agent `agent`.
    pub fn new(service: Arc<Services>, agent: &str, config: HttpConfig) -> Self {
        let per_minute = NonZeroU32::new(config.rate_per_minute).unwrap_or(NonZeroU32::MIN);
        Self {
            stores: service.stores().clone(),
            service,
            agent: agent.to_owned(),
            keys: Arc::new(auth::ApiKeys::new(&config.api_keys)),
            limiter: Arc::new(RateLimiter::keyed(Quota::per_minute(per_minute))),
            turns: Arc::new(Semaphore::new(config.max_turns_in_flight)),
            metrics: Arc::new(Metrics::default()),
            config: Arc::new(config),
            channel_routes: Vec::new(),
            batches: None,
            templates: None,
            pace: None,
            console: Arc::new(Console::new(&ConsoleConfig::default())),
            simulator_book: None,
            replay_dir: None,
        }
    }

    /// A data subject's erasure reaches the embedded simulator's `book` too.
    /// The folder the console's Replay page reads (`DATA_DIR/replay`).
    pub fn with_replay_dir(mut self, dir: std::path::PathBuf) -> Self {
        self.replay_dir = Some(dir);
        self
    }

    pub(crate) fn with_simulator_book(mut self, book: Option<std::path::PathBuf>) -> Self {
        self.simulator_book = book;
        self
    }

    /// The console signs its sessions with `config`'s secret (else a random one of this process's).
    pub fn with_console(mut self, config: &ConsoleConfig) -> Self {
        self.console = Arc::new(Console::new(config));
        self
    }

    /// The caller of the configured key named `name`.
    pub(crate) fn caller_named(&self, name: &str) -> Option<Caller> {
        self.keys.by_name(name)
    }

    /// The caller of an API key typed into the console's sign-in form.
    pub(crate) fn caller_of_key(&self, key: &str) -> Result<Caller, ApiError> {
        self.keys.by_key(key)
    }

    /// Runs batch jobs (`/v1/batches`) on `background`.
    pub fn with_batches(mut self, background: Arc<crate::batch::background::Background>) -> Self {
        self.batches = Some(background);
        self
    }

    /// Serves `channel`'s routes too (its senders and jobs are the outbox worker's and the server's).
    pub fn with_channel(mut self, channel: &crate::channels::Channel) -> Self {
        for (path, handlers) in &channel.routes {
            self.channel_routes.push((channel.name, path, handlers.clone()));
        }
        if let Some(media) = &channel.media {
            self.service.hearing().hear_from(channel.name, media.clone());
        }
        self.pace = channel.pace.or(self.pace);
        match &channel.templates {
            Some(templates) => self.with_templates(templates.clone()),
            None => self,
        }
    }

    /// The approved templates a channel sends outside its window, shown in the console with their state.
    pub fn with_templates(mut self, templates: Arc<crate::channels::whatsapp::Templates>) -> Self {
        self.templates = Some(templates);
        self
    }

    /// The channels' routes this state serves: `(channel, path)`.
    pub fn channel_routes(&self) -> Vec<(&'static str, &'static str)> {
        self.channel_routes.iter().map(|(c, p, _)| (*c, *p)).collect()
    }

    /// Whether the service is open (no API key configured).
    pub(crate) fn is_open(&self) -> bool {
        self.keys.is_open()
    }

    /// Counts a request against its key's rate.
    pub(super) fn limit(&self, caller: &Caller) -> Result<(), ApiError> {
        self.limit_named(&caller.name)
    }

    /// Counts a request against the rate of `name` (a key's name, or the console's sign-in form).
    pub(crate) fn limit_named(&self, name: &str) -> Result<(), ApiError> {
        self.limiter.check_key(&name.to_owned()).map_err(|not_until| {
            let wait = not_until.wait_time_from(governor::clock::Clock::now(
                &governor::clock::DefaultClock::default(),
            ));
            ApiError::rate_limited(wait.as_secs() + 1)
        })
    }

    /// Runs `work` (a turn or a flow) in its own task, within the bound of work in flight and the
    /// request timeout. The task is not cancelled when the caller goes away or time runs out.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Result<T, ApiError> {
        let permit = self
            .turns
            .clone()
            .try_acquire_owned()
            .map_err(|_| ApiError::busy())?;
        let task = self.service.messages().spawn(async move {
            let out = work.await;
            drop(permit);
            out
        });
        let timeout = Duration::from_millis(self.config.request_timeout_ms);
        match tokio::time::timeout(timeout, task).await {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(join)) => Err(ApiError::internal("request task failed", &join)),
            Err(_) => Err(ApiError::timeout()),
        }
    }
}
