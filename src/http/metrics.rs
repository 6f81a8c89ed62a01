//! The figures `/metrics` serves in Prometheus text: turns, zero-token turns, tokens, turn latency,
//! flows by status, and — read from the store at scrape time — the outbox's depth and dead letters.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Direction {
    pub direction: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Status {
    pub status: &'static str,
}

pub struct Metrics {
    registry: Registry,
    turns: Counter,
    zero_token_turns: Counter,
    tokens: Family<Direction, Counter>,
    turn_seconds: Histogram,
    flows: Family<Status, Counter>,
    pub outbox_depth: Gauge,
    pub dead_letters: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("vt");
        let turns = Counter::default();
        let zero_token_turns = Counter::default();
        let tokens = Family::<Direction, Counter>::default();
        let buckets = [
            0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
        ];
        let turn_seconds = Histogram::new(buckets);
        let flows = Family::<Status, Counter>::default();
        let outbox_depth = Gauge::default();
        let dead_letters = Gauge::default();
        registry.register("turns", "Conversation turns handled", turns.clone());
        registry.register(
            "zero_token_turns",
            "Turns answered without any model token",
            zero_token_turns.clone(),
        );
        registry.register("tokens", "Model tokens spent, by direction", tokens.clone());
        registry.register(
            "turn_latency_seconds",
            "Time to handle one turn, accept to commit",
            turn_seconds.clone(),
        );
        registry.register("flows", "Ten-stage flow runs, by status", flows.clone());
        registry.register(
            "outbox_depth",
            "Outbox items waiting to be sent",
            outbox_depth.clone(),
        );
        registry.register(
            "outbox_dead_letters",
            "Outbox items dead-lettered",
            dead_letters.clone(),
        );
        Self {
            registry,
            turns,
            zero_token_turns,
            tokens,
            turn_seconds,
            flows,
            outbox_depth,
            dead_letters,
        }
    }
}

impl Metrics {
    pub fn turn(&self, tokens: (u64, u64), seconds: f64) {
        self.turns.inc();
        if tokens == (0, 0) {
            self.zero_token_turns.inc();
        }
        self.tokens
            .get_or_create(&Direction { direction: "input" })
            .inc_by(tokens.0);
        self.tokens
            .get_or_create(&Direction { direction: "output" })
            .inc_by(tokens.1);
        self.turn_seconds.observe(seconds);
    }

    pub fn flow(&self, status: crate::flow::FlowStatus) {
        self.flows
            .get_or_create(&Status {
                status: status.as_str(),
            })
            .inc();
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "metrics could not be encoded");
        }
        out
    }
}
