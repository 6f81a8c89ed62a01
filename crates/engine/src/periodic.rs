//! Background work as a value: [`every`] runs a pass now and again each period until told to stop.
//! `serve`'s periodic jobs (follow-ups, case notices, outcomes, batches, retention, gauges) and the
//! channels' (the payment sweep) all loop this one way.

use std::future::Future;
use std::time::Duration;

/// Runs `work` at once, then `period` after each pass ends, until `stop` resolves. A stop waits for
/// the pass under way: a pass is never cut short (a credit, a send, a follow-up half done).
pub async fn every(period: Duration, stop: impl Future<Output = ()>, mut work: impl AsyncFnMut()) {
    tokio::pin!(stop);
    loop {
        work().await;
        tokio::select! {
            () = &mut stop => return,
            () = tokio::time::sleep(period) => {}
        }
    }
}

/// Logs `what` at info level when a pass did something (`count` > 0): a quiet pass says nothing.
pub fn log_count(count: usize, what: &'static str) {
    if count > 0 {
        tracing::info!(count, "{what}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn passes_run_until_the_stop_and_a_stop_never_cuts_a_pass() {
        let (tx, mut rx) = tokio::sync::watch::channel(false);
        let mut passes = 0;
        let mut finished = 0;
        every(
            Duration::from_millis(1),
            async move {
                let _ = rx.wait_for(|s| *s).await;
            },
            async || {
                passes += 1;
                if passes == 3 {
                    // The stop comes during the third pass: the pass still ends.
                    tx.send(true).expect("stop");
                    tokio::task::yield_now().await;
                }
                finished += 1;
            },
        )
        .await;
        assert_eq!((passes, finished), (3, 3));
    }
}
