//! What the benches share: the process's CPU time and a simulator that is not what they measure.

use std::time::Duration;

use vt_simulators::systems::{RunningSimulator, Simulator, SimulatorConfig};

/// User plus system CPU time of this process so far, every thread included.
#[allow(
    dead_code,
    reason = "each bench compiles this module and not every one reads CPU time"
)]
pub(crate) fn cpu() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    let usage = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let t = |tv: nix::sys::time::TimeVal| {
        Duration::from_micros(tv.tv_sec() as u64 * 1_000_000 + tv.tv_usec() as u64)
    };
    t(usage.user_time()) + t(usage.system_time())
}

/// The simulator on loopback, without its notification rate limit (it would be what gets measured).
#[allow(
    dead_code,
    reason = "each bench compiles this module and not every one serves its own simulator"
)]
pub(crate) async fn simulator() -> RunningSimulator {
    Simulator::new(SimulatorConfig {
        notifications_per_second: u32::MAX,
        ..SimulatorConfig::default()
    })
    .spawn(0)
    .await
    .expect("simulator")
}

/// Counts the queries sqlx runs (its `sqlx::query` events: one per query, however many statements it
/// holds) while switched on — off while CPU is timed, since building each event costs what it counts.
#[allow(
    dead_code,
    reason = "each bench compiles this module and not every one counts queries"
)]
pub(crate) mod queries {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};

    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::layer::{Context, SubscriberExt as _};
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{Layer, Registry, reload};

    static COUNT: AtomicU64 = AtomicU64::new(0);
    static SWITCH: OnceLock<reload::Handle<Targets, Registry>> = OnceLock::new();

    struct Counter;

    impl<S: tracing::Subscriber> Layer<S> for Counter {
        fn on_event(&self, _event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
            COUNT.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Switches counting on or off (the first call installs the counter as the global subscriber).
    pub(crate) fn counting(on: bool) {
        let switch = SWITCH.get_or_init(|| {
            let (filter, handle) = reload::Layer::new(Targets::new());
            tracing_subscriber::registry()
                .with(Counter.with_filter(filter))
                .init();
            handle
        });
        let targets = if on {
            Targets::new().with_target("sqlx::query", tracing::Level::TRACE)
        } else {
            Targets::new()
        };
        switch.reload(targets).expect("reload the statement counter");
    }

    /// Statements counted so far.
    pub(crate) fn count() -> u64 {
        COUNT.load(Ordering::Relaxed)
    }
}
