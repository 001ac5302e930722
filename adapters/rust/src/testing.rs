//! Fakes for tests of code that uses the adapter: a clock that never waits and a scripted tool.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use crate::adapter::AttemptContext;
use crate::clock::Clock;

#[derive(Debug)]
struct FakeState {
    origin: Instant,
    wall_origin: SystemTime,
    offset: Duration,
    slept: Vec<Duration>,
}

/// A clock whose sleeps complete at once, moving its time forward by the amount slept.
///
/// A sleep takes effect when it is first polled, so a timeout raced against an operation that
/// answers at once costs no time. Every sleep that took effect is recorded.
#[derive(Debug, Clone)]
pub struct FakeClock {
    state: Arc<Mutex<FakeState>>,
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000))
    }
}

impl FakeClock {
    /// A clock whose wall time starts at `wall`.
    pub fn new(wall: SystemTime) -> Self {
        Self {
            state: Arc::new(Mutex::new(FakeState {
                origin: Instant::now(),
                wall_origin: wall,
                offset: Duration::ZERO,
                slept: Vec::new(),
            })),
        }
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        // A poisoned lock only means another test thread panicked; the state is still usable.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Moves time forward without a sleep.
    pub fn advance(&self, by: Duration) {
        self.state().offset += by;
    }

    /// Every sleep that took effect, in order.
    pub fn slept(&self) -> Vec<Duration> {
        self.state().slept.clone()
    }

    /// How far time has moved.
    pub fn elapsed(&self) -> Duration {
        self.state().offset
    }
}

/// The sleep of a [`FakeClock`].
#[derive(Debug)]
pub struct FakeSleep {
    clock: FakeClock,
    duration: Duration,
}

impl Future for FakeSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        let mut state = self.clock.state();
        state.offset += self.duration;
        state.slept.push(self.duration);
        Poll::Ready(())
    }
}

impl Clock for FakeClock {
    type Sleep = FakeSleep;

    fn now(&self) -> Instant {
        let state = self.state();
        state.origin + state.offset
    }

    fn wall(&self) -> SystemTime {
        let state = self.state();
        state.wall_origin + state.offset
    }

    fn sleep(&self, duration: Duration) -> FakeSleep {
        FakeSleep {
            clock: self.clone(),
            duration,
        }
    }
}

/// One step of a [`ScriptedTool`].
#[derive(Debug, Clone)]
pub enum Step<R> {
    /// The attempt returns this raw result.
    Return(R),
    /// The attempt never answers (the adapter's timeout must end it).
    Hang,
}

/// A tool that answers each attempt with the next step of a script.
#[derive(Debug)]
pub struct ScriptedTool<R> {
    script: Mutex<VecDeque<Step<R>>>,
    attempts: AtomicU32,
}

impl<R> ScriptedTool<R> {
    /// A tool that plays `steps` in order.
    pub fn new(steps: impl IntoIterator<Item = Step<R>>) -> Self {
        Self {
            script: Mutex::new(steps.into_iter().collect()),
            attempts: AtomicU32::new(0),
        }
    }

    /// A tool that returns each of `results` in order.
    pub fn returning(results: impl IntoIterator<Item = R>) -> Self {
        Self::new(results.into_iter().map(Step::Return))
    }

    /// How many attempts were made.
    pub fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::SeqCst)
    }

    /// Plays the next step. Panics when the script has run out: the code under test made more
    /// attempts than the test allowed for.
    pub async fn attempt(&self, context: AttemptContext) -> R {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        let step = self
            .script
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop_front();
        match step {
            Some(Step::Return(result)) => result,
            Some(Step::Hang) => std::future::pending().await,
            None => panic!("scripted tool has no step for attempt {}", context.number),
        }
    }
}
