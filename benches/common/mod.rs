//! What the benches share: the process's CPU time and a simulator that is not what they measure.

use std::time::Duration;

use vt_actions::systems::{RunningSimulator, Simulator, SimulatorConfig};

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
