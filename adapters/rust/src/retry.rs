//! The retry policy: a pure decision from (attempt, elapsed time, outcome) to what happens next.
//!
//! The rules of the contract live here: Success, Empty and Partial end the call; a permanent
//! AccessFailure is never retried; a transient one is retried with exponential backoff and full
//! jitter while the budget lasts; `Retry-After` is honoured up to a cap; and a budget that runs
//! out ends the call as an AccessFailure marked `exhausted`, never as anything else.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use candor_schema::{Failure, Outcome, RetryAction};

/// What the policy decided after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The call is over with this attempt's outcome (Success, Empty, or an accepted Partial).
    Done,
    /// Try again after the wait.
    Retry {
        /// How long to wait before the next attempt.
        after: Duration,
    },
    /// The call is over with this attempt's AccessFailure.
    GiveUp {
        /// `exhausted` (transient, budget spent) or `permanent` (asking again cannot help).
        action: RetryAction,
    },
}

impl Decision {
    /// The `tool.retry.action` this decision records for an attempt of the given outcome, if any.
    pub fn action<P>(&self, outcome: &Outcome<P>) -> Option<RetryAction> {
        match (self, outcome) {
            (Decision::Retry { .. }, _) => Some(RetryAction::Retry),
            (Decision::GiveUp { action }, _) => Some(*action),
            (Decision::Done, Outcome::Partial { .. }) => Some(RetryAction::AcceptPartial),
            (Decision::Done, _) => None,
        }
    }
}

/// A refused retry setting, naming the setting and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidRetryPolicy {
    /// `max_attempts` must be at least 1.
    #[error("retry max_attempts must be at least 1, got {0}")]
    MaxAttempts(u32),
    /// The initial backoff must be positive and no longer than the maximum backoff.
    #[error("retry initial_backoff {initial:?} must be positive and at most max_backoff {max:?}")]
    Backoff {
        /// The initial backoff given.
        initial: Duration,
        /// The maximum backoff given.
        max: Duration,
    },
}

/// How a call retries transient AccessFailures.
///
/// | setting | default | meaning |
/// |---|---|---|
/// | `max_attempts` | 3 | attempts in all, the first included |
/// | `initial_backoff` | 100 ms | the ceiling of the first wait; doubles each retry |
/// | `max_backoff` | 5 s | the largest ceiling |
/// | `max_elapsed` | 30 s | no retry is started once this much time has passed |
/// | `retry_after_cap` | 30 s | the longest `Retry-After` honoured; a longer one ends the call |
///
/// Waits use full jitter: a uniform draw between zero and the ceiling. A `Retry-After` is a floor
/// under that draw, never shortened: when it is longer than the cap or than the time left, the
/// call ends as `exhausted` rather than asking the source again early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: NonZeroU32,
    initial_backoff: Duration,
    max_backoff: Duration,
    max_elapsed: Duration,
    retry_after_cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: NonZeroU32::MIN.saturating_add(2),
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            max_elapsed: Duration::from_secs(30),
            retry_after_cap: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// A policy that makes exactly one attempt.
    pub fn no_retry() -> Self {
        Self {
            max_attempts: NonZeroU32::MIN,
            ..Self::default()
        }
    }

    /// Sets the number of attempts in all.
    pub fn with_max_attempts(self, max_attempts: u32) -> Result<Self, InvalidRetryPolicy> {
        let max_attempts =
            NonZeroU32::new(max_attempts).ok_or(InvalidRetryPolicy::MaxAttempts(max_attempts))?;
        Ok(Self {
            max_attempts,
            ..self
        })
    }

    /// Sets the first and the largest backoff ceiling.
    pub fn with_backoff(
        self,
        initial: Duration,
        max: Duration,
    ) -> Result<Self, InvalidRetryPolicy> {
        if initial.is_zero() || initial > max {
            return Err(InvalidRetryPolicy::Backoff { initial, max });
        }
        Ok(Self {
            initial_backoff: initial,
            max_backoff: max,
            ..self
        })
    }

    /// Sets the time after which no new attempt is started.
    pub fn with_max_elapsed(self, max_elapsed: Duration) -> Self {
        Self {
            max_elapsed,
            ..self
        }
    }

    /// Sets the longest `Retry-After` that is honoured.
    pub fn with_retry_after_cap(self, cap: Duration) -> Self {
        Self {
            retry_after_cap: cap,
            ..self
        }
    }

    /// Attempts in all.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts.get()
    }

    /// The ceiling of the wait after attempt `attempt` (1-based), before jitter.
    pub fn backoff_ceiling(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(31);
        self.initial_backoff
            .saturating_mul(1u32 << doublings)
            .min(self.max_backoff)
    }

    /// Decides what follows attempt `attempt` (1-based), `elapsed` after the call started.
    ///
    /// `jitter` is a uniform draw from `[0, 1)`; [`Jitter`] provides a seeded source.
    pub fn decide<P>(
        &self,
        attempt: u32,
        elapsed: Duration,
        outcome: &Outcome<P>,
        jitter: f64,
    ) -> Decision {
        let failure = match outcome {
            Outcome::Success { .. } | Outcome::Empty { .. } | Outcome::Partial { .. } => {
                return Decision::Done;
            }
            Outcome::AccessFailure { failure } => failure,
        };
        if !failure.retryable {
            return Decision::GiveUp {
                action: RetryAction::Permanent,
            };
        }
        let exhausted = Decision::GiveUp {
            action: RetryAction::Exhausted,
        };
        if attempt >= self.max_attempts.get() {
            return exhausted;
        }
        let mut wait = self
            .backoff_ceiling(attempt)
            .mul_f64(jitter.clamp(0.0, 1.0));
        if let Some(retry_after) = failure.retry_after_ms.map(Duration::from_millis) {
            if retry_after > self.retry_after_cap {
                return exhausted;
            }
            wait = wait.max(retry_after);
        }
        if elapsed.saturating_add(wait) >= self.max_elapsed {
            return exhausted;
        }
        Decision::Retry { after: wait }
    }
}

/// Whether the source may have applied the request an attempt failed on (rule `RETRY-UNSAFE`):
/// unless it is known not to have been processed, a 408, 429 or 503, or a connection that was
/// never made (`connect_error`, with no status).
pub fn may_have_been_applied(failure: &Failure) -> bool {
    match failure.status {
        Some(408 | 429 | 503) => false,
        Some(_) => true,
        None => failure.error_type.as_deref() != Some("connect_error"),
    }
}

/// A source of jitter draws, shared by concurrent calls without a lock.
///
/// Seeded, it is SplitMix64 over an atomic counter: the same seed gives the same sequence of
/// draws. Fixed, every draw is the same fraction, which the conformance vectors use to pin a
/// schedule in any language.
#[derive(Debug)]
pub struct Jitter {
    source: JitterSource,
}

#[derive(Debug)]
enum JitterSource {
    SplitMix(AtomicU64),
    Fixed(f64),
}

impl Jitter {
    /// A source whose draws are fixed by `seed`.
    pub fn seeded(seed: u64) -> Self {
        Self {
            source: JitterSource::SplitMix(AtomicU64::new(seed)),
        }
    }

    /// A source seeded from the process's random keys.
    pub fn from_entropy() -> Self {
        Self::seeded(RandomState::new().build_hasher().finish())
    }

    /// A source whose every draw is `fraction`, held within `[0, 1)` (a NaN draws 0).
    pub fn fixed(fraction: f64) -> Self {
        let largest_below_one = 1.0 - f64::EPSILON / 2.0;
        let fraction = if fraction.is_nan() {
            0.0
        } else {
            fraction.clamp(0.0, largest_below_one)
        };
        Self {
            source: JitterSource::Fixed(fraction),
        }
    }

    /// The next draw, uniform in `[0, 1)` (or the fixed fraction).
    pub fn next_fraction(&self) -> f64 {
        const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
        let state = match &self.source {
            JitterSource::SplitMix(state) => state,
            JitterSource::Fixed(fraction) => return *fraction,
        };
        let mut z = state
            .fetch_add(GAMMA, Ordering::Relaxed)
            .wrapping_add(GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // The top 53 bits make an exactly representable fraction.
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candor_schema::{AccessFailureKind, Extent, Failure, PartialKind, Truncation};

    fn failure(retryable: bool, retry_after_ms: Option<u64>) -> Outcome<()> {
        Outcome::AccessFailure {
            failure: Failure {
                kind: AccessFailureKind::ServerError,
                retryable,
                message: String::new(),
                status: Some(503),
                error_type: None,
                retry_after_ms,
            },
        }
    }

    #[test]
    fn success_empty_and_partial_end_the_call() {
        let policy = RetryPolicy::default();
        let partial = Outcome::Partial {
            payload: (),
            truncation: Truncation {
                kind: PartialKind::SizeCap,
                covered: String::new(),
                dropped: String::new(),
                returned: None,
                expected: None,
            },
        };
        for outcome in [
            Outcome::Success {
                payload: (),
                extent: Extent::default(),
            },
            Outcome::Empty {
                extent: Extent::default(),
            },
            partial.clone(),
        ] {
            assert_eq!(
                policy.decide(1, Duration::ZERO, &outcome, 0.5),
                Decision::Done
            );
        }
        assert_eq!(
            Decision::Done.action(&partial),
            Some(RetryAction::AcceptPartial)
        );
    }

    #[test]
    fn permanent_failures_are_never_retried() {
        let decision = RetryPolicy::default().decide(1, Duration::ZERO, &failure(false, None), 0.5);
        assert_eq!(
            decision,
            Decision::GiveUp {
                action: RetryAction::Permanent
            }
        );
    }

    #[test]
    fn backoff_ceilings_double_up_to_the_maximum() {
        let policy = RetryPolicy::default()
            .with_backoff(Duration::from_millis(100), Duration::from_millis(700))
            .unwrap();
        let ceilings: Vec<u128> = (1..=5)
            .map(|a| policy.backoff_ceiling(a).as_millis())
            .collect();
        assert_eq!(ceilings, [100, 200, 400, 700, 700]);
    }

    #[test]
    fn full_jitter_scales_the_ceiling() {
        let policy = RetryPolicy::default().with_max_attempts(5).unwrap();
        let decide =
            |attempt, jitter| policy.decide(attempt, Duration::ZERO, &failure(true, None), jitter);
        assert_eq!(
            decide(1, 0.0),
            Decision::Retry {
                after: Duration::ZERO
            }
        );
        assert_eq!(
            decide(2, 0.5),
            Decision::Retry {
                after: Duration::from_millis(100)
            }
        );
        assert_eq!(
            decide(3, 0.25),
            Decision::Retry {
                after: Duration::from_millis(100)
            }
        );
    }

    #[test]
    fn the_last_attempt_is_exhausted() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.decide(3, Duration::ZERO, &failure(true, None), 0.5),
            Decision::GiveUp {
                action: RetryAction::Exhausted
            }
        );
    }

    #[test]
    fn retry_after_is_a_floor_and_beyond_the_cap_ends_the_call() {
        let policy = RetryPolicy::default().with_retry_after_cap(Duration::from_secs(10));
        assert_eq!(
            policy.decide(1, Duration::ZERO, &failure(true, Some(2_000)), 0.5),
            Decision::Retry {
                after: Duration::from_secs(2)
            }
        );
        assert_eq!(
            policy.decide(1, Duration::ZERO, &failure(true, Some(11_000)), 0.5),
            Decision::GiveUp {
                action: RetryAction::Exhausted
            }
        );
    }

    #[test]
    fn no_retry_starts_past_max_elapsed() {
        let policy = RetryPolicy::default().with_max_elapsed(Duration::from_secs(1));
        assert_eq!(
            policy.decide(1, Duration::from_millis(990), &failure(true, Some(20)), 0.0),
            Decision::GiveUp {
                action: RetryAction::Exhausted
            }
        );
    }

    #[test]
    fn invalid_settings_are_refused_by_name() {
        assert_eq!(
            RetryPolicy::default()
                .with_max_attempts(0)
                .unwrap_err()
                .to_string(),
            "retry max_attempts must be at least 1, got 0"
        );
        let err = RetryPolicy::default()
            .with_backoff(Duration::from_secs(2), Duration::from_secs(1))
            .unwrap_err();
        assert!(err.to_string().contains("initial_backoff 2s"), "{err}");
    }

    #[test]
    fn fixed_jitter_draws_its_fraction_held_below_one() {
        assert_eq!(Jitter::fixed(0.25).next_fraction(), 0.25);
        assert_eq!(Jitter::fixed(0.25).next_fraction(), 0.25);
        assert!(Jitter::fixed(1.0).next_fraction() < 1.0);
        assert_eq!(Jitter::fixed(-3.0).next_fraction(), 0.0);
        assert_eq!(Jitter::fixed(f64::NAN).next_fraction(), 0.0);
    }

    #[test]
    fn seeded_jitter_is_replayable_and_in_range() {
        let a = Jitter::seeded(7);
        let b = Jitter::seeded(7);
        for _ in 0..1000 {
            let (x, y) = (a.next_fraction(), b.next_fraction());
            assert_eq!(x.to_bits(), y.to_bits());
            assert!((0.0..1.0).contains(&x));
        }
        assert_ne!(
            Jitter::seeded(7).next_fraction().to_bits(),
            Jitter::seeded(8).next_fraction().to_bits()
        );
    }
}
