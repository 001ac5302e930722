//! Time as the adapter sees it, injected so that retry and timeout logic is testable.

use std::future::Future;
use std::time::{Duration, Instant, SystemTime};

/// A source of time: a monotonic clock for deadlines, a wall clock for timestamps, and sleeping.
pub trait Clock: Send + Sync + 'static {
    /// What [`Clock::sleep`] returns.
    type Sleep: Future<Output = ()> + Send;

    /// Monotonic now, for deadlines and durations.
    fn now(&self) -> Instant;

    /// Wall-clock now, for timestamps that leave the process.
    fn wall(&self) -> SystemTime;

    /// Completes after `duration`.
    fn sleep(&self, duration: Duration) -> Self::Sleep;
}

/// The real clock, sleeping on Tokio's timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

impl Clock for TokioClock {
    type Sleep = tokio::time::Sleep;

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall(&self) -> SystemTime {
        SystemTime::now()
    }

    fn sleep(&self, duration: Duration) -> Self::Sleep {
        tokio::time::sleep(duration)
    }
}
