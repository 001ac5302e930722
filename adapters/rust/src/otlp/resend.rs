//! The queue between the SDK's exporters and the collector: a batch the collector cannot take
//! yet is kept and sent again.
//!
//! The SDK's batch span processor and periodic metric reader call their exporters from threads
//! of their own, never from a call. The exporters ([`super::export`]) turn what they are given
//! into the OTLP request at once and hand it to one [`Resender`]; its sender thread sends the
//! batches in the order they came. A batch the collector refuses for now (UNAVAILABLE, a
//! connection error, RESOURCE_EXHAUSTED with RetryInfo, ...) goes back to the head of the queue
//! and is sent again after a backoff that honours RetryInfo. A resent batch is the same request,
//! so downstream `event_id` removes a copy when an acknowledgement was lost.
//!
//! Memory stays bounded: past `max_batches` or `max_bytes` the oldest batch is dropped, and a
//! batch older than `max_age` is given up. Every batch ends counted in [`ExportStats`]: sent,
//! dropped or rejected.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

use crate::Jitter;

/// How batches the collector could not take are kept and sent again.
#[derive(Debug, Clone)]
pub struct ResendConfig {
    /// Whether a refused batch is sent again (default true). Off, a batch refused once is lost
    /// and counted, as a plain OTLP exporter does.
    pub enabled: bool,
    /// The oldest a batch may grow before it is given up (default 10 min).
    pub max_age: Duration,
    /// The most batches kept (default 4096: ten minutes of a service exporting a span batch
    /// every 500 ms and counters every 10 s, three times over).
    pub max_batches: usize,
    /// The most encoded bytes kept (default 64 MiB).
    pub max_bytes: usize,
    /// The first wait before a batch is sent again (default 250 ms); it doubles after each
    /// refusal up to `max_backoff`, and a RetryInfo that asks for longer wins.
    pub initial_backoff: Duration,
    /// The longest wait between two sends (default 10 s).
    pub max_backoff: Duration,
    /// The longest one send may take, connecting included (default 10 s).
    pub attempt_timeout: Duration,
}

impl Default for ResendConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_age: Duration::from_secs(600),
            max_batches: 4096,
            max_bytes: 64 << 20,
            initial_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(10),
            attempt_timeout: Duration::from_secs(10),
        }
    }
}

impl ResendConfig {
    /// No resending: a refused batch is lost and counted.
    pub fn off() -> Self {
        Self {
            enabled: false,
            ..Self::default()
        }
    }
}

/// What the exporters have done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Batches the collector took (span batches and metric exports).
    pub sent_batches: u64,
    /// Spans in the span batches the collector took.
    pub sent_spans: u64,
    /// Sends that were refused for now and left their batch queued to be sent again.
    pub refused_sends: u64,
    /// Span batches dropped unsent: the queue was full, the batch grew older than `max_age`,
    /// or shutdown's deadline passed.
    pub dropped_span_batches: u64,
    /// Metric exports dropped unsent, for the same reasons.
    pub dropped_metric_batches: u64,
    /// Batches the collector refused for good (a malformed request, a missing token).
    pub rejected_batches: u64,
    /// Spans in every span batch dropped or rejected: spans lost before the collector.
    pub lost_spans: u64,
    /// Log records (events recorded at the moment they happened) in the log batches the
    /// collector took.
    pub sent_log_records: u64,
    /// Log batches dropped unsent, for the same reasons as span batches.
    pub dropped_log_batches: u64,
    /// Log records in every log batch dropped or rejected.
    pub lost_log_records: u64,
    /// Batches waiting to be sent now, the one being sent included.
    pub queued_batches: u64,
    /// Encoded bytes waiting to be sent now, the batch being sent included.
    pub queued_bytes: u64,
}

impl std::fmt::Display for ExportStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} batches sent ({} spans, {} log records), {} sends refused and kept to send \
             again, {} batches queued ({} bytes), {} span batches, {} log batches and {} metric \
             exports dropped, {} batches rejected: {} spans and {} log records lost",
            self.sent_batches,
            self.sent_spans,
            self.sent_log_records,
            self.refused_sends,
            self.queued_batches,
            self.queued_bytes,
            self.dropped_span_batches,
            self.dropped_log_batches,
            self.dropped_metric_batches,
            self.rejected_batches,
            self.lost_spans,
            self.lost_log_records
        )
    }
}

/// One OTLP request, encoded from what the SDK handed over.
#[derive(Debug, Clone)]
pub(crate) enum Payload {
    /// A batch of spans.
    Spans {
        /// The request.
        request: ExportTraceServiceRequest,
        /// How many spans it holds.
        spans: u64,
    },
    /// One collection of counters.
    Metrics(ExportMetricsServiceRequest),
    /// A batch of log records: events recorded at the moment they happened.
    Logs {
        /// The request.
        request: ExportLogsServiceRequest,
        /// How many records it holds.
        records: u64,
    },
}

impl Payload {
    fn encoded_len(&self) -> usize {
        match self {
            Self::Spans { request, .. } => request.encoded_len(),
            Self::Metrics(request) => request.encoded_len(),
            Self::Logs { request, .. } => request.encoded_len(),
        }
    }

    fn spans(&self) -> u64 {
        match self {
            Self::Spans { spans, .. } => *spans,
            Self::Metrics(_) | Self::Logs { .. } => 0,
        }
    }

    fn log_records(&self) -> u64 {
        match self {
            Self::Logs { records, .. } => *records,
            Self::Spans { .. } | Self::Metrics(_) => 0,
        }
    }
}

/// Why the collector did not take a batch.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    /// Whether sending the same batch later may succeed.
    pub retryable: bool,
    /// How long the collector asked to wait (RetryInfo).
    pub retry_after: Option<Duration>,
    /// What was refused and why, for the log and the exporter's error.
    pub reason: String,
}

/// Sends one batch to the collector.
pub(crate) trait Transport: Send + 'static {
    /// Sends `payload` once.
    fn send(&mut self, payload: &Payload) -> impl Future<Output = Result<(), Refusal>> + Send;
}

/// What became of a batch, told to the exporter call that queued it.
#[derive(Debug)]
enum Fate {
    Delivered,
    Queued(String),
    Lost(String),
}

struct Batch {
    payload: Payload,
    bytes: usize,
    queued_at: Instant,
    /// The exporter call waiting for this batch's first result, if one waits.
    waiter: Option<SyncSender<Fate>>,
}

impl Batch {
    fn tell(&mut self, fate: Fate) {
        if let Some(waiter) = self.waiter.take() {
            // A waiter that gave up has dropped its receiver; nobody is left to tell.
            let _ = waiter.try_send(fate);
        }
    }
}

/// The batches waiting, oldest first, within the configured bounds.
struct Queue {
    batches: VecDeque<Batch>,
    bytes: usize,
    max_batches: usize,
    max_bytes: usize,
}

impl Queue {
    fn new(config: &ResendConfig) -> Self {
        Self {
            batches: VecDeque::new(),
            bytes: 0,
            max_batches: config.max_batches.max(1),
            max_bytes: config.max_bytes,
        }
    }

    /// Adds the newest batch; returns the oldest ones that no longer fit.
    fn push_back(&mut self, batch: Batch) -> Vec<Batch> {
        self.bytes += batch.bytes;
        self.batches.push_back(batch);
        self.evict()
    }

    /// Puts a batch that was being sent back at the head; returns the oldest ones that no
    /// longer fit (it first among them).
    fn push_front(&mut self, batch: Batch) -> Vec<Batch> {
        self.bytes += batch.bytes;
        self.batches.push_front(batch);
        self.evict()
    }

    fn pop_front(&mut self) -> Option<Batch> {
        let batch = self.batches.pop_front()?;
        self.bytes -= batch.bytes;
        Some(batch)
    }

    /// Removes the batches queued before `oldest` (they are at the head: batches are queued in
    /// time order, and one put back was queued before all others).
    fn expire(&mut self, oldest: Option<Instant>) -> Vec<Batch> {
        let mut expired = Vec::new();
        while let Some(front) = self.batches.front() {
            if oldest.is_none_or(|oldest| front.queued_at >= oldest) {
                break;
            }
            expired.extend(self.pop_front());
        }
        expired
    }

    fn drain(&mut self) -> Vec<Batch> {
        self.bytes = 0;
        self.batches.drain(..).collect()
    }

    fn evict(&mut self) -> Vec<Batch> {
        let mut evicted = Vec::new();
        while self.batches.len() > self.max_batches || self.bytes > self.max_bytes {
            evicted.extend(self.pop_front());
        }
        evicted
    }
}

/// Exponential backoff with equal jitter; a RetryInfo that asks for longer wins.
struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
    jitter: Jitter,
}

impl Backoff {
    fn new(config: &ResendConfig, jitter: Jitter) -> Self {
        Self {
            initial: config.initial_backoff,
            max: config.max_backoff.max(config.initial_backoff),
            next: config.initial_backoff,
            jitter,
        }
    }

    fn delay(&mut self, retry_after: Option<Duration>) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        let jittered = base / 2 + base.mul_f64(self.jitter.next_fraction() / 2.0);
        retry_after.map_or(jittered, |asked| asked.max(jittered))
    }

    fn reset(&mut self) {
        self.next = self.initial;
    }
}

#[derive(Debug, Default)]
struct Counters {
    sent_batches: AtomicU64,
    sent_spans: AtomicU64,
    refused_sends: AtomicU64,
    dropped_span_batches: AtomicU64,
    dropped_metric_batches: AtomicU64,
    rejected_batches: AtomicU64,
    lost_spans: AtomicU64,
    sent_log_records: AtomicU64,
    dropped_log_batches: AtomicU64,
    lost_log_records: AtomicU64,
}

impl Counters {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

struct State {
    queue: Queue,
    /// The last send was refused and the collector has not taken a batch since.
    backing_off: bool,
    /// The encoded size of the batch the sender took from the queue and is sending, if any.
    sending: Option<usize>,
    /// Set by [`Resender::close`]: the sender ends when the queue is empty or at this instant.
    closing_at: Option<Instant>,
    /// The sender thread has ended; batches handed over now are dropped.
    finished: bool,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    counters: Counters,
    config: ResendConfig,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the queue itself consistent (every change to it
        // is one call), so the state is used as it is.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, state: MutexGuard<'a, State>, timeout: Duration) -> MutexGuard<'a, State> {
        self.changed
            .wait_timeout(state, timeout)
            .unwrap_or_else(PoisonError::into_inner)
            .0
    }

    /// Counts batches that leave unsent and tells their waiters.
    fn drop_batches(&self, batches: Vec<Batch>, why: &str) {
        for mut batch in batches {
            let spans = batch.payload.spans();
            let log_records = batch.payload.log_records();
            match batch.payload {
                Payload::Spans { .. } => {
                    Counters::add(&self.counters.dropped_span_batches, 1);
                    Counters::add(&self.counters.lost_spans, spans);
                }
                Payload::Metrics(_) => Counters::add(&self.counters.dropped_metric_batches, 1),
                Payload::Logs { .. } => {
                    Counters::add(&self.counters.dropped_log_batches, 1);
                    Counters::add(&self.counters.lost_log_records, log_records);
                }
            }
            tracing::warn!(
                spans,
                log_records,
                why,
                "candor: telemetry batch dropped before the collector"
            );
            batch.tell(Fate::Lost(format!("dropped unsent: {why}")));
        }
    }

    /// The next batch to send, waiting for one; `None` when the sender should end.
    fn next_batch(&self) -> Option<Batch> {
        let mut state = self.lock();
        loop {
            let now = Instant::now();
            let oldest = now.checked_sub(self.config.max_age);
            let expired = state.queue.expire(oldest);
            if !expired.is_empty() {
                self.drop_batches(expired, "older than the resend queue's max_age");
            }
            let closing = state.closing_at;
            if closing.is_some_and(|at| now >= at) {
                let left = state.queue.drain();
                self.drop_batches(left, "shutdown's deadline passed");
            }
            if let Some(batch) = state.queue.pop_front() {
                state.sending = Some(batch.bytes);
                return Some(batch);
            }
            if closing.is_some() {
                state.finished = true;
                self.changed.notify_all();
                return None;
            }
            state = self.wait(state, self.config.max_age.max(Duration::from_secs(1)));
        }
    }

    fn delivered(&self, mut batch: Batch) {
        Counters::add(&self.counters.sent_batches, 1);
        Counters::add(&self.counters.sent_spans, batch.payload.spans());
        Counters::add(&self.counters.sent_log_records, batch.payload.log_records());
        batch.tell(Fate::Delivered);
        let mut state = self.lock();
        if state.backing_off {
            tracing::info!(
                queued = state.queue.batches.len(),
                "candor: the collector takes telemetry again"
            );
        }
        state.backing_off = false;
        state.sending = None;
        self.changed.notify_all();
    }

    fn rejected(&self, mut batch: Batch, refusal: &Refusal) {
        Counters::add(&self.counters.rejected_batches, 1);
        Counters::add(&self.counters.lost_spans, batch.payload.spans());
        Counters::add(&self.counters.lost_log_records, batch.payload.log_records());
        tracing::warn!(
            spans = batch.payload.spans(),
            log_records = batch.payload.log_records(),
            reason = refusal.reason.as_str(),
            "candor: the collector rejected a telemetry batch"
        );
        batch.tell(Fate::Lost(refusal.reason.clone()));
        let mut state = self.lock();
        state.sending = None;
        self.changed.notify_all();
    }

    /// Puts a refused batch back and waits `delay` (or until shutdown's deadline).
    fn refused(&self, mut batch: Batch, refusal: &Refusal, delay: Duration) {
        Counters::add(&self.counters.refused_sends, 1);
        batch.tell(Fate::Queued(refusal.reason.clone()));
        let mut state = self.lock();
        if !state.backing_off {
            tracing::warn!(
                reason = refusal.reason.as_str(),
                "candor: the collector cannot take telemetry now; batches are kept and sent again"
            );
        }
        state.backing_off = true;
        state.sending = None;
        let evicted = state.queue.push_front(batch);
        self.drop_batches(evicted, "the resend queue is full");
        self.changed.notify_all();
        let until = Instant::now() + delay;
        loop {
            let now = Instant::now();
            let end = state.closing_at.map_or(until, |closing| closing.min(until));
            if now >= end {
                return;
            }
            state = self.wait(state, end - now);
        }
    }
}

/// The queue and its sender thread, shared by one service's span and metric exporters.
pub(crate) struct Resender {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Resender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resender")
            .field("stats", &self.stats())
            .finish()
    }
}

impl Resender {
    /// Starts the sender thread. `transport` is built inside the thread's Tokio runtime, which
    /// a gRPC channel needs.
    pub(crate) fn start<T, E>(
        config: ResendConfig,
        transport: impl FnOnce() -> Result<T, E>,
    ) -> Result<Self, StartError<E>>
    where
        T: Transport,
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(StartError::Thread)?;
        let transport = {
            let _inside = runtime.enter();
            transport().map_err(StartError::Transport)?
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: Queue::new(&config),
                backing_off: false,
                sending: None,
                closing_at: None,
                finished: false,
            }),
            changed: Condvar::new(),
            counters: Counters::default(),
            config,
        });
        let sender = shared.clone();
        std::thread::Builder::new()
            .name("candor-otlp-sender".into())
            .spawn(move || send_in_order(&sender, &runtime, transport))
            .map_err(StartError::Thread)?;
        Ok(Self { shared })
    }

    /// Queues a batch. Waits for its first send when nothing is queued ahead of it and the
    /// collector is not known to be away, so a flush returns once the collector has the batch;
    /// otherwise returns at once.
    pub(crate) fn submit(&self, payload: Payload) -> Result<(), String> {
        let (waiter, fate) = sync_channel(1);
        let mut batch = Batch {
            bytes: payload.encoded_len(),
            payload,
            queued_at: Instant::now(),
            waiter: Some(waiter),
        };
        let (waits, ahead) = {
            let mut state = self.shared.lock();
            if state.finished {
                drop(state);
                self.shared
                    .drop_batches(vec![batch], "the exporter was shut down");
                return Err("the exporter was shut down".into());
            }
            let ahead = state.queue.batches.len();
            let waits = ahead == 0 && !state.backing_off;
            if !waits {
                batch.waiter = None;
            }
            let evicted = state.queue.push_back(batch);
            self.shared
                .drop_batches(evicted, "the resend queue is full");
            self.shared.changed.notify_all();
            (waits, ahead)
        };
        if !waits {
            return Err(format!(
                "queued to be sent again: {ahead} batch(es) ahead while the collector is away"
            ));
        }
        let patience = self.shared.config.attempt_timeout + Duration::from_secs(1);
        match fate.recv_timeout(patience) {
            Ok(Fate::Delivered) => Ok(()),
            Ok(Fate::Queued(reason)) => Err(format!("queued to be sent again: {reason}")),
            Ok(Fate::Lost(reason)) => Err(reason),
            Err(_) => Err(format!(
                "not sent within {patience:?}; it stays queued to be sent again"
            )),
        }
    }

    /// Waits up to `timeout` for every queued batch to be sent; returns early, false, when the
    /// collector is away.
    pub(crate) fn drained(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        loop {
            if state.queue.batches.is_empty() && state.sending.is_none() {
                return true;
            }
            let now = Instant::now();
            if state.backing_off || state.finished || now >= deadline {
                return false;
            }
            state = self.shared.wait(state, deadline - now);
        }
    }

    /// Sends what is queued until `timeout` passes, then drops (and counts) the rest and ends
    /// the sender. Returns true when nothing was dropped.
    pub(crate) fn close(&self, timeout: Duration) -> bool {
        let before = self.stats();
        let closing_at = Instant::now() + timeout;
        let mut state = self.shared.lock();
        state.closing_at = Some(state.closing_at.map_or(closing_at, |at| at.min(closing_at)));
        self.shared.changed.notify_all();
        // A send in flight ends within the attempt timeout.
        let give_up = closing_at + self.shared.config.attempt_timeout;
        while !state.finished {
            let now = Instant::now();
            if now >= give_up {
                break;
            }
            state = self.shared.wait(state, give_up - now);
        }
        drop(state);
        let after = self.stats();
        after.dropped_span_batches == before.dropped_span_batches
            && after.dropped_metric_batches == before.dropped_metric_batches
            && after.queued_batches == 0
    }

    /// The counts so far.
    pub(crate) fn stats(&self) -> ExportStats {
        let counters = &self.shared.counters;
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let (queued_batches, queued_bytes) = {
            let state = self.shared.lock();
            let (sending, sending_bytes) = state.sending.map_or((0, 0), |bytes| (1, bytes));
            (
                state.queue.batches.len() + sending,
                state.queue.bytes + sending_bytes,
            )
        };
        ExportStats {
            sent_batches: load(&counters.sent_batches),
            sent_spans: load(&counters.sent_spans),
            refused_sends: load(&counters.refused_sends),
            dropped_span_batches: load(&counters.dropped_span_batches),
            dropped_metric_batches: load(&counters.dropped_metric_batches),
            rejected_batches: load(&counters.rejected_batches),
            lost_spans: load(&counters.lost_spans),
            sent_log_records: load(&counters.sent_log_records),
            dropped_log_batches: load(&counters.dropped_log_batches),
            lost_log_records: load(&counters.lost_log_records),
            queued_batches: queued_batches as u64,
            queued_bytes: queued_bytes as u64,
        }
    }
}

impl Drop for Resender {
    fn drop(&mut self) {
        // Ends the sender thread without waiting: what is queued is dropped and counted.
        let mut state = self.shared.lock();
        state.closing_at = Some(Instant::now());
        self.shared.changed.notify_all();
    }
}

/// Why the sender could not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError<E> {
    /// Its thread or runtime could not be created.
    #[error("starting the telemetry sender thread: {0}")]
    Thread(std::io::Error),
    /// The transport could not be built.
    #[error("{0}")]
    Transport(E),
}

/// The sender thread: one batch at a time, in order.
fn send_in_order<T: Transport>(
    shared: &Shared,
    runtime: &tokio::runtime::Runtime,
    mut transport: T,
) {
    let mut backoff = Backoff::new(&shared.config, Jitter::from_entropy());
    while let Some(batch) = shared.next_batch() {
        match runtime.block_on(transport.send(&batch.payload)) {
            Ok(()) => {
                backoff.reset();
                shared.delivered(batch);
            }
            Err(refusal) if refusal.retryable && shared.config.enabled => {
                let delay = backoff.delay(refusal.retry_after);
                shared.refused(batch, &refusal, delay);
            }
            Err(refusal) => shared.rejected(batch, &refusal),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(spans: u64, bytes: usize, queued_at: Instant) -> Batch {
        Batch {
            payload: Payload::Spans {
                request: ExportTraceServiceRequest::default(),
                spans,
            },
            bytes,
            queued_at,
            waiter: None,
        }
    }

    fn config(max_batches: usize, max_bytes: usize) -> ResendConfig {
        ResendConfig {
            max_batches,
            max_bytes,
            ..ResendConfig::default()
        }
    }

    fn spans_of(batches: &[Batch]) -> Vec<u64> {
        batches.iter().map(|batch| batch.payload.spans()).collect()
    }

    #[test]
    fn a_full_queue_drops_its_oldest_batches() {
        let now = Instant::now();
        let mut queue = Queue::new(&config(3, 1000));
        for n in 1..=3 {
            assert!(queue.push_back(batch(n, 10, now)).is_empty());
        }
        assert_eq!(spans_of(&queue.push_back(batch(4, 10, now))), vec![1]);
        assert_eq!(queue.batches.len(), 3);
        assert_eq!(queue.bytes, 30);
    }

    #[test]
    fn the_byte_bound_drops_as_many_old_batches_as_it_takes() {
        let now = Instant::now();
        let mut queue = Queue::new(&config(100, 100));
        for n in 1..=4 {
            assert!(queue.push_back(batch(n, 25, now)).is_empty());
        }
        assert_eq!(spans_of(&queue.push_back(batch(5, 60, now))), vec![1, 2, 3]);
        assert_eq!(queue.bytes, 85);
        // A batch larger than the whole bound cannot be kept at all.
        let evicted = queue.push_back(batch(6, 101, now));
        assert_eq!(spans_of(&evicted), vec![4, 5, 6]);
        assert_eq!((queue.batches.len(), queue.bytes), (0, 0));
    }

    #[test]
    fn a_batch_put_back_is_the_oldest_and_goes_first_when_the_queue_overflows() {
        let now = Instant::now();
        let mut queue = Queue::new(&config(2, 1000));
        queue.push_back(batch(1, 10, now));
        let sending = queue.pop_front().unwrap();
        queue.push_back(batch(2, 10, now));
        queue.push_back(batch(3, 10, now));
        assert_eq!(spans_of(&queue.push_front(sending)), vec![1]);
        assert_eq!(spans_of(queue.batches.make_contiguous()), vec![2, 3]);
    }

    #[test]
    fn batches_queued_before_the_oldest_kept_instant_expire_from_the_head() {
        let start = Instant::now();
        let mut queue = Queue::new(&config(10, 1000));
        for n in 0..4u64 {
            queue.push_back(batch(n, 10, start + Duration::from_secs(n)));
        }
        assert!(queue.expire(None).is_empty());
        let expired = queue.expire(Some(start + Duration::from_secs(2)));
        assert_eq!(spans_of(&expired), vec![0, 1]);
        assert_eq!((queue.batches.len(), queue.bytes), (2, 20));
    }

    #[test]
    fn backoff_doubles_to_its_cap_with_jitter_and_yields_to_a_longer_retry_info() {
        let config = ResendConfig {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(400),
            ..ResendConfig::default()
        };
        // A fixed draw of 0 waits exactly half of each step.
        let mut backoff = Backoff::new(&config, Jitter::fixed(0.0));
        let delays: Vec<u128> = (0..5).map(|_| backoff.delay(None).as_millis()).collect();
        assert_eq!(delays, vec![50, 100, 200, 200, 200]);
        assert_eq!(
            backoff.delay(Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            backoff.delay(Some(Duration::from_millis(1))),
            Duration::from_millis(200)
        );
        backoff.reset();
        assert_eq!(backoff.delay(None), Duration::from_millis(50));
        // A draw just below 1 waits almost the whole step.
        let mut backoff = Backoff::new(&config, Jitter::fixed(0.999_999));
        assert_eq!(backoff.delay(None).as_millis(), 99);
    }
}
