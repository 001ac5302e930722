//! The collector's own telemetry: typed counters, gauges and histograms, rendered in the Prometheus
//! text exposition format 0.0.4 for `/metrics`.
//!
//! Every metric name is a constant in [`names`]. Anything that is more than routine (a rejection, a
//! failed delivery, a refused request) goes through one method of [`CollectorMetrics`] that both
//! counts it and logs it, so it is never only a log line.
//!
//! ```
//! use std::time::Duration;
//! use candor_collector::metrics::{CollectorMetrics, names::{signal, status, transport}};
//!
//! let metrics = CollectorMetrics::new();
//! let in_flight = metrics.request_received(signal::TRACES, transport::GRPC);
//! metrics.rejected(&[("missing_target", 1)], "outcome event without a target");
//! let elapsed = Duration::from_millis(3);
//! metrics.request_answered(signal::TRACES, transport::GRPC, status::PARTIAL, elapsed);
//! drop(in_flight);
//! let text = metrics.render();
//! assert!(text.contains("candor_collector_rejected_total{reason=\"missing_target\"} 1\n"));
//! ```
//!
//! Counters, gauges and histograms are plain atomics updated with `Relaxed` ordering: they
//! synchronise nothing but themselves. A labelled family takes one short mutex per lookup (and
//! while it is rendered); a hot path may keep the `Arc` it returns instead of looking it up again.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use candor_schema::names::topic;

/// Declares each metric's name and help text together; the help is also the constant's rustdoc.
macro_rules! metric_names {
    ($($name:ident = $value:literal, $help:literal;)*) => {
        $(#[doc = $help] pub const $name: &str = $value;)*
        /// Every metric family above.
        pub const ALL: &[&str] = &[$($name),*];
        /// The `# HELP` text of a family named above.
        pub(super) fn help(name: &str) -> &'static str {
            match name { $($value => $help,)* _ => "" }
        }
    };
}

/// Metric names (with their help texts), label names and the closed sets of label values.
pub mod names {
    metric_names! {
        REQUESTS_RECEIVED_TOTAL = "candor_collector_requests_received_total",
            "OTLP export requests received, by signal and transport.";
        REQUESTS_ANSWERED_TOTAL = "candor_collector_requests_answered_total",
            "OTLP export requests answered, by signal, transport and status.";
        EVENTS_RECEIVED_TOTAL = "candor_collector_events_received_total",
            "Outcome span events received.";
        EVENTS_ACCEPTED_TOTAL = "candor_collector_events_accepted_total",
            "Outcome span events accepted.";
        COUNTS_RECEIVED_TOTAL = "candor_collector_counts_received_total",
            "Outcome counter data points received.";
        COUNTS_ACCEPTED_TOTAL = "candor_collector_counts_accepted_total",
            "Outcome counter data points accepted.";
        REJECTED_TOTAL = "candor_collector_rejected_total",
            "Outcome events and data points refused, by reason.";
        IGNORED_SPANS_TOTAL = "candor_collector_ignored_spans_total",
            "Spans ignored for carrying no outcome event.";
        IGNORED_METRICS_TOTAL = "candor_collector_ignored_metrics_total",
            "Metrics ignored for not being the outcome counter.";
        REDACTED_VALUES_TOTAL = "candor_collector_redacted_values_total",
            "Values a credential was removed from before anything was recorded (targets, texts, copies of refused input).";
        RECORDS_PRODUCED_TOTAL = "candor_collector_records_produced_total",
            "Records Kafka acknowledged, by topic.";
        DELIVERY_FAILURES_TOTAL = "candor_collector_delivery_failures_total",
            "Records Kafka did not take, by topic and error code.";
        PRODUCER_RENEWALS_TOTAL = "candor_collector_producer_renewals_total",
            "Times the Kafka producer was replaced by a fresh one (a new producer id) after a record failed.";
        IN_FLIGHT_REQUESTS = "candor_collector_in_flight_requests",
            "OTLP requests being handled.";
        PRODUCER_QUEUE_DEPTH = "candor_collector_producer_queue_depth",
            "Records waiting in the Kafka producer's queue.";
        REQUEST_DURATION_SECONDS = "candor_collector_request_duration_seconds",
            "Time from receiving an OTLP request to answering it, by signal.";
        HEARTBEATS_SENT_TOTAL = "candor_collector_heartbeats_sent_total",
            "Heartbeat records sent.";
        HEARTBEAT_FAILURES_TOTAL = "candor_collector_heartbeat_failures_total",
            "Heartbeat records that could not be sent.";
        KAFKA_REACHABLE = "candor_collector_kafka_reachable",
            "1 when Kafka answered at the last contact, else 0.";
        UNAUTHENTICATED_TOTAL = "candor_collector_unauthenticated_total",
            "Requests refused for missing or wrong credentials.";
        TOO_LARGE_TOTAL = "candor_collector_too_large_total",
            "Requests refused for exceeding the size limit.";
        DECODE_ERRORS_TOTAL = "candor_collector_decode_errors_total",
            "Request bodies that could not be decoded, by signal.";
        METRIC_SERIES_OVERFLOW_TOTAL = "candor_collector_metric_series_overflow_total",
            "Lookups folded into the series labelled \"other\" of a family at its series limit.";
    }

    /// The value of every label of the series a full family folds new label sets into.
    pub const OVERFLOW_VALUE: &str = "other";

    /// Label names.
    pub mod label {
        /// See [`super::signal`].
        pub const SIGNAL: &str = "signal";
        /// See [`super::transport`].
        pub const TRANSPORT: &str = "transport";
        /// See [`super::status`].
        pub const STATUS: &str = "status";
        /// Why input was refused: a short code.
        pub const REASON: &str = "reason";
        /// A Kafka topic.
        pub const TOPIC: &str = "topic";
        /// A short, stable error code, e.g. a Kafka error name.
        pub const ERROR: &str = "error";
    }

    /// Values of the `signal` label.
    pub mod signal {
        /// OTLP traces.
        pub const TRACES: &str = "traces";
        /// OTLP metrics.
        pub const METRICS: &str = "metrics";
        /// Both.
        pub const ALL: &[&str] = &[TRACES, METRICS];
    }

    /// Values of the `transport` label.
    pub mod transport {
        /// OTLP/gRPC.
        pub const GRPC: &str = "grpc";
        /// OTLP/HTTP.
        pub const HTTP: &str = "http";
        /// Both.
        pub const ALL: &[&str] = &[GRPC, HTTP];
    }

    /// Values of the `status` label: how a request was answered.
    pub mod status {
        /// Everything accepted.
        pub const OK: &str = "ok";
        /// Some input accepted, some rejected.
        pub const PARTIAL: &str = "partial";
        /// All input rejected.
        pub const REJECTED: &str = "rejected";
        /// Not taken now (e.g. Kafka did not acknowledge in time); the client should retry.
        pub const UNAVAILABLE: &str = "unavailable";
        /// Missing or wrong credentials.
        pub const UNAUTHENTICATED: &str = "unauthenticated";
        /// The body exceeded the size limit.
        pub const TOO_LARGE: &str = "too_large";
        /// The body could not be decoded.
        pub const BAD_REQUEST: &str = "bad_request";
        /// Every status.
        pub const ALL: &[&str] = &[
            OK,
            PARTIAL,
            REJECTED,
            UNAVAILABLE,
            UNAUTHENTICATED,
            TOO_LARGE,
            BAD_REQUEST,
        ];
    }
}

/// How many label sets a family holds before it folds new ones into its `other` series.
pub const MAX_SERIES_PER_FAMILY: usize = 1000;

/// The bucket bounds of every [`Histogram`], in seconds (`+Inf` is implied). They are fixed: other
/// bounds are a change to this constant.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A monotonic count.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// A counter at zero.
    pub const fn new() -> Self {
        Self(AtomicU64::new(0))
    }
    /// Adds one.
    pub fn inc(&self) {
        self.add(1);
    }
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }
    /// The current count.
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// A value that goes up and down.
#[derive(Debug, Default)]
pub struct Gauge(AtomicI64);

impl Gauge {
    /// A gauge at zero.
    pub const fn new() -> Self {
        Self(AtomicI64::new(0))
    }
    /// Sets the value.
    pub fn set(&self, value: i64) {
        self.0.store(value, Relaxed);
    }
    /// Adds `n`.
    pub fn add(&self, n: i64) {
        self.0.fetch_add(n, Relaxed);
    }
    /// Subtracts `n`.
    pub fn sub(&self, n: i64) {
        self.0.fetch_sub(n, Relaxed);
    }
    /// The current value.
    pub fn get(&self) -> i64 {
        self.0.load(Relaxed)
    }
}

/// A distribution of durations over [`LATENCY_BUCKETS`].
///
/// An observation adds one to the single bucket it falls in (the exposition cumulates) and its
/// length to a sum kept in whole nanoseconds in a `u64`, so no float CAS loop is needed; the sum
/// wraps after 584 years of summed time. The count is the total over the buckets, so `le="+Inf"`
/// and `_count` always agree.
#[derive(Debug)]
pub struct Histogram {
    /// One slot per bound, then the `+Inf` slot.
    counts: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_nanos: AtomicU64::new(0),
        }
    }
    /// Records one duration; a bucket counts the durations less than or equal to its bound.
    pub fn observe(&self, elapsed: Duration) {
        // `n ns / 1e9` rounds to the same f64 as the bound's literal, so a duration equal to a
        // bound lands in that bound's bucket.
        let secs = elapsed.as_secs_f64();
        let slot = LATENCY_BUCKETS.partition_point(|&bound| bound < secs);
        if let Some(count) = self.counts.get(slot) {
            count.fetch_add(1, Relaxed);
        }
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Relaxed);
    }
}

/// The series of one labelled family, one per label set, bounded: see [`CounterVec`] and
/// [`HistogramVec`].
#[derive(Debug)]
pub struct Family<M> {
    name: &'static str,
    label_names: &'static [&'static str],
    max_series: usize,
    series: Mutex<BTreeMap<Vec<String>, Arc<M>>>,
    other_key: Vec<String>,
    overflow: Arc<Counter>,
    overflow_logged: AtomicBool,
}

/// A family of counters.
pub type CounterVec = Family<Counter>;

/// A family of histograms.
pub type HistogramVec = Family<Histogram>;

impl<M: Default> Family<M> {
    /// An empty family of at most [`MAX_SERIES_PER_FAMILY`] label sets (plus `other`); lookups
    /// folded into `other` are counted on `overflow`.
    pub fn new(
        name: &'static str,
        label_names: &'static [&'static str],
        overflow: Arc<Counter>,
    ) -> Self {
        Self {
            name,
            label_names,
            max_series: MAX_SERIES_PER_FAMILY,
            series: Mutex::new(BTreeMap::new()),
            other_key: vec![names::OVERFLOW_VALUE.to_owned(); label_names.len()],
            overflow,
            overflow_logged: AtomicBool::new(false),
        }
    }

    /// The same family with another series limit.
    pub fn with_max_series(mut self, max_series: usize) -> Self {
        self.max_series = max_series;
        self
    }

    /// The series for these label values, given in the order of the label names.
    ///
    /// Past the series limit, or given the wrong number of values (a bug, which panics in debug
    /// builds), it is the `other` series, and the fold is counted on the overflow counter.
    pub fn with(&self, values: &[&str]) -> Arc<M> {
        let arity_ok = values.len() == self.label_names.len();
        debug_assert!(arity_ok, "wrong number of label values for {}", self.name);
        let mut series = self.lock();
        if arity_ok {
            let key: Vec<String> = values.iter().map(|v| (*v).to_owned()).collect();
            if let Some(found) = series.get(&key) {
                return Arc::clone(found);
            }
            if series.len() - usize::from(series.contains_key(&self.other_key)) < self.max_series {
                return Arc::clone(series.entry(key).or_default());
            }
        }
        self.overflow.inc();
        if !self.overflow_logged.swap(true, Relaxed) {
            let max_series = self.max_series;
            tracing::warn!(metric = self.name, max_series, "metric series overflow");
        }
        Arc::clone(series.entry(self.other_key.clone()).or_default())
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<Vec<String>, Arc<M>>> {
        // A panic elsewhere cannot leave the map half-written (its only write is one `insert`), so
        // the data behind a poisoned lock is sound, and metrics must keep working after a panic.
        self.series.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A family of gauges.
pub type GaugeVec = Family<Gauge>;

impl GaugeVec {
    pub(crate) fn render(&self, out: &mut String) {
        write_header(out, self.name, "gauge");
        for (values, gauge) in self.lock().iter() {
            let labels = (self.label_names, values.as_slice());
            write_sample(out, self.name, labels, None, gauge.get());
        }
    }
}

impl CounterVec {
    pub(crate) fn render(&self, out: &mut String) {
        write_header(out, self.name, "counter");
        for (values, counter) in self.lock().iter() {
            let labels = (self.label_names, values.as_slice());
            write_sample(out, self.name, labels, None, counter.get());
        }
    }
}

impl HistogramVec {
    pub(crate) fn render(&self, out: &mut String) {
        write_header(out, self.name, "histogram");
        let [bucket, sum, count] =
            ["_bucket", "_sum", "_count"].map(|s| format!("{}{s}", self.name));
        for (values, histogram) in self.lock().iter() {
            let labels = (self.label_names, values.as_slice());
            // Each slot is read once, so the cumulative counts never decrease and `+Inf` is the
            // count, even while observations race the scrape.
            let mut total = 0;
            for (slot, bound) in histogram.counts.iter().zip(LATENCY_BUCKETS) {
                total += slot.load(Relaxed);
                write_sample(out, &bucket, labels, Some(bound), total);
            }
            total += histogram.counts.last().map_or(0, |slot| slot.load(Relaxed));
            write_sample(out, &bucket, labels, Some(&"+Inf"), total);
            let seconds = histogram.sum_nanos.load(Relaxed) as f64 / 1e9;
            write_sample(out, &sum, labels, None, seconds);
            write_sample(out, &count, labels, None, total);
        }
    }
}

/// `# HELP` and `# TYPE` of a family; the help text is looked up among the collector's and the
/// compactor's metric names.
pub(crate) fn write_header(out: &mut String, name: &str, kind: &str) {
    let help = match names::help(name) {
        "" => crate::compact::metrics::names::help(name),
        help => help,
    };
    // Writing to a String cannot fail.
    let _ = write!(out, "# HELP {name} ");
    escape_into(out, help, false);
    let _ = writeln!(out, "\n# TYPE {name} {kind}");
}

/// One line: `name{label="value",...,le="bound"} value`, braces only when there are labels.
pub(crate) fn write_sample(
    out: &mut String,
    name: &str,
    (label_names, values): (&[&str], &[String]),
    le: Option<&dyn fmt::Display>,
    value: impl fmt::Display,
) {
    out.push_str(name);
    let mut separator = '{';
    for (label, label_value) in label_names.iter().zip(values) {
        out.push(separator);
        out.push_str(label);
        out.push_str("=\"");
        escape_into(out, label_value, true);
        out.push('"');
        separator = ',';
    }
    if let Some(le) = le {
        // Writing to a String cannot fail.
        let _ = write!(out, "{separator}le=\"{le}\"");
        separator = ',';
    }
    if separator == ',' {
        out.push('}');
    }
    // Writing to a String cannot fail.
    let _ = writeln!(out, " {value}");
}

/// Escapes `\` and newlines, and in a label value `"` as well, as the text format asks.
fn escape_into(out: &mut String, text: &str, quote: bool) {
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quote => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

/// Keeps a request counted in `in_flight_requests` until it is dropped.
#[derive(Debug)]
#[must_use = "the request counts as in flight only while this guard lives"]
pub struct InFlight<'a>(&'a Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.sub(1);
    }
}

/// Every metric of the collector, and the functions that count, and where it matters log, what
/// happens.
///
/// Label values come from the closed sets in [`names`]; `reason`, `topic` and `error` must be
/// short, stable codes, never free text. Families stop at [`MAX_SERIES_PER_FAMILY`] label sets.
/// Read it with [`render`](Self::render) or, in tests, [`sample`](Self::sample).
#[derive(Debug)]
pub struct CollectorMetrics {
    requests_received: CounterVec,
    requests_answered: CounterVec,
    rejected: CounterVec,
    records_produced: CounterVec,
    delivery_failures: CounterVec,
    decode_errors: CounterVec,
    request_duration: HistogramVec,
    events_received: Counter,
    events_accepted: Counter,
    counts_received: Counter,
    counts_accepted: Counter,
    ignored_spans: Counter,
    ignored_metrics: Counter,
    redacted_values: Counter,
    heartbeats_sent: Counter,
    heartbeat_failures: Counter,
    unauthenticated: Counter,
    too_large: Counter,
    producer_renewals: Counter,
    series_overflow: Arc<Counter>,
    in_flight_requests: Gauge,
    producer_queue_depth: Gauge,
    kafka_reachable: Gauge,
    kafka_reported: AtomicBool,
}

impl Default for CollectorMetrics {
    fn default() -> Self {
        use names::{label, signal, status, transport};
        let overflow = Arc::new(Counter::new());
        let counters = |name: &'static str, labels: &'static [&'static str]| {
            CounterVec::new(name, labels, Arc::clone(&overflow))
        };
        let metrics = Self {
            requests_received: counters(
                names::REQUESTS_RECEIVED_TOTAL,
                &[label::SIGNAL, label::TRANSPORT],
            ),
            requests_answered: counters(
                names::REQUESTS_ANSWERED_TOTAL,
                &[label::SIGNAL, label::TRANSPORT, label::STATUS],
            ),
            rejected: counters(names::REJECTED_TOTAL, &[label::REASON]),
            records_produced: counters(names::RECORDS_PRODUCED_TOTAL, &[label::TOPIC]),
            delivery_failures: counters(
                names::DELIVERY_FAILURES_TOTAL,
                &[label::TOPIC, label::ERROR],
            ),
            decode_errors: counters(names::DECODE_ERRORS_TOTAL, &[label::SIGNAL]),
            request_duration: HistogramVec::new(
                names::REQUEST_DURATION_SECONDS,
                &[label::SIGNAL],
                Arc::clone(&overflow),
            ),
            events_received: Counter::new(),
            events_accepted: Counter::new(),
            counts_received: Counter::new(),
            counts_accepted: Counter::new(),
            ignored_spans: Counter::new(),
            ignored_metrics: Counter::new(),
            redacted_values: Counter::new(),
            heartbeats_sent: Counter::new(),
            heartbeat_failures: Counter::new(),
            unauthenticated: Counter::new(),
            too_large: Counter::new(),
            producer_renewals: Counter::new(),
            series_overflow: Arc::clone(&overflow),
            in_flight_requests: Gauge::new(),
            producer_queue_depth: Gauge::new(),
            kafka_reachable: Gauge::new(),
            kafka_reported: AtomicBool::new(false),
        };
        // The closed label sets start at zero, so that rates have a series from the first scrape.
        for &s in signal::ALL {
            metrics.decode_errors.with(&[s]);
            metrics.request_duration.with(&[s]);
            for &t in transport::ALL {
                metrics.requests_received.with(&[s, t]);
                for &st in status::ALL {
                    metrics.requests_answered.with(&[s, t, st]);
                }
            }
        }
        for t in [
            topic::OUTCOME_EVENTS,
            topic::OUTCOME_COUNTS,
            topic::REJECTED,
            topic::HEARTBEATS,
        ] {
            metrics.records_produced.with(&[t]);
        }
        metrics
    }
}

impl CollectorMetrics {
    /// All metrics at zero, shared.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Counts a request as received, and as in flight until the returned guard is dropped.
    pub fn request_received(&self, signal: &str, transport: &str) -> InFlight<'_> {
        self.requests_received.with(&[signal, transport]).inc();
        self.in_flight_requests.add(1);
        InFlight(&self.in_flight_requests)
    }
    /// Counts an answer and records how long the request took.
    pub fn request_answered(&self, signal: &str, transport: &str, status: &str, elapsed: Duration) {
        self.requests_answered
            .with(&[signal, transport, status])
            .inc();
        self.request_duration.with(&[signal]).observe(elapsed);
        tracing::debug!(signal, transport, status, ?elapsed, "request answered");
    }
    /// Counts outcome span events received.
    pub fn events_received(&self, n: u64) {
        self.events_received.add(n);
    }
    /// Counts outcome span events accepted.
    pub fn events_accepted(&self, n: u64) {
        self.events_accepted.add(n);
    }
    /// Counts outcome counter data points received.
    pub fn counts_received(&self, n: u64) {
        self.counts_received.add(n);
    }
    /// Counts outcome counter data points accepted.
    pub fn counts_accepted(&self, n: u64) {
        self.counts_accepted.add(n);
    }
    /// Counts spans skipped for carrying no outcome event.
    pub fn ignored_spans(&self, n: u64) {
        self.ignored_spans.add(n);
    }
    /// Counts metrics skipped for not being the outcome counter.
    pub fn ignored_metrics(&self, n: u64) {
        self.ignored_metrics.add(n);
    }
    /// Counts values a credential was removed from.
    pub fn redacted_values(&self, n: u64) {
        self.redacted_values.add(n);
    }
    /// Counts records Kafka acknowledged on `topic`.
    pub fn records_produced(&self, topic: &str, n: u64) {
        self.records_produced.with(&[topic]).add(n);
    }
    /// Sets how many records wait in the producer's queue.
    pub fn set_producer_queue_depth(&self, depth: i64) {
        self.producer_queue_depth.set(depth);
    }
    /// Counts a heartbeat sent.
    pub fn heartbeat_sent(&self) {
        self.heartbeats_sent.inc();
    }
    /// Records whether Kafka answered; logs the first report and every change.
    pub fn set_kafka_reachable(&self, reachable: bool) {
        let previous = self.kafka_reachable.0.swap(i64::from(reachable), Relaxed);
        let first = !self.kafka_reported.swap(true, Relaxed);
        match (first || previous != i64::from(reachable), reachable) {
            (false, _) => {}
            (true, true) => tracing::info!("kafka reachable"),
            (true, false) => tracing::warn!("kafka unreachable"),
        }
    }

    /// Counts the rejections of one request by reason and logs them once, as one line: a
    /// client cannot turn its invalid events into a flood of log lines.
    pub fn rejected(&self, by_reason: &[(&str, u64)], summary: impl fmt::Display) {
        let mut total = 0;
        for (reason, count) in by_reason {
            self.rejected.with(&[reason]).add(*count);
            total += count;
        }
        tracing::warn!(rejected = total, summary = %summary, "events rejected");
    }
    /// Counts and logs a record Kafka did not take; `error` is a short code (e.g. the Kafka error
    /// name) and becomes a label.
    pub fn delivery_failed(&self, topic: &str, error: &str) {
        self.delivery_failures.with(&[topic, error]).inc();
        tracing::warn!(topic, error, "delivery failed");
    }
    /// Counts and logs that the Kafka producer was replaced by a fresh one after a record failed
    /// (see `Producer`).
    pub fn producer_renewed(&self) {
        self.producer_renewals.inc();
        tracing::warn!("a record failed: the kafka producer was replaced by a fresh one");
    }
    /// Counts and logs a request refused for its credentials. Like the other refusals, the answer
    /// itself is counted by [`request_answered`](Self::request_answered).
    pub fn unauthenticated(&self, transport: &str) {
        self.unauthenticated.inc();
        tracing::warn!(transport, "request unauthenticated");
    }
    /// Counts and logs a request refused for its size.
    pub fn too_large(&self, transport: &str, bytes: usize, limit: usize) {
        self.too_large.inc();
        tracing::warn!(transport, bytes, limit, "request too large");
    }
    /// Counts and logs a request body that could not be decoded.
    pub fn decode_error(&self, signal: &str, error: impl fmt::Display) {
        self.decode_errors.with(&[signal]).inc();
        tracing::warn!(signal, error = %error, "request not decodable");
    }
    /// Counts and logs a heartbeat that could not be sent.
    pub fn heartbeat_failed(&self, error: impl fmt::Display) {
        self.heartbeat_failures.inc();
        tracing::warn!(error = %error, "heartbeat failed");
    }

    /// Every family in the Prometheus text exposition format 0.0.4.
    pub fn render(&self) -> String {
        let mut text = String::with_capacity(16 * 1024);
        let out = &mut text;
        for family in [
            &self.requests_received,
            &self.requests_answered,
            &self.rejected,
            &self.records_produced,
            &self.delivery_failures,
            &self.decode_errors,
        ] {
            family.render(out);
        }
        self.request_duration.render(out);
        for (name, counter) in [
            (names::EVENTS_RECEIVED_TOTAL, &self.events_received),
            (names::EVENTS_ACCEPTED_TOTAL, &self.events_accepted),
            (names::COUNTS_RECEIVED_TOTAL, &self.counts_received),
            (names::COUNTS_ACCEPTED_TOTAL, &self.counts_accepted),
            (names::IGNORED_SPANS_TOTAL, &self.ignored_spans),
            (names::IGNORED_METRICS_TOTAL, &self.ignored_metrics),
            (names::REDACTED_VALUES_TOTAL, &self.redacted_values),
            (names::HEARTBEATS_SENT_TOTAL, &self.heartbeats_sent),
            (names::HEARTBEAT_FAILURES_TOTAL, &self.heartbeat_failures),
            (names::UNAUTHENTICATED_TOTAL, &self.unauthenticated),
            (names::TOO_LARGE_TOTAL, &self.too_large),
            (names::PRODUCER_RENEWALS_TOTAL, &self.producer_renewals),
            (names::METRIC_SERIES_OVERFLOW_TOTAL, &*self.series_overflow),
        ] {
            write_header(out, name, "counter");
            write_sample(out, name, (&[], &[]), None, counter.get());
        }
        for (name, gauge) in [
            (names::IN_FLIGHT_REQUESTS, &self.in_flight_requests),
            (names::PRODUCER_QUEUE_DEPTH, &self.producer_queue_depth),
            (names::KAFKA_REACHABLE, &self.kafka_reachable),
        ] {
            write_header(out, name, "gauge");
            write_sample(out, name, (&[], &[]), None, gauge.get());
        }
        text
    }

    /// The value of one sample of [`render`](Self::render), named as it is written there, e.g.
    /// `candor_collector_rejected_total{reason="x"}`; for tests and diagnostics.
    pub fn sample(&self, series: &str) -> Option<f64> {
        let text = self.render();
        let value = |line: &str| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok();
        text.lines().find_map(value)
    }
}

#[cfg(test)]
mod tests {
    use super::names::{signal, status, transport};
    use super::*;

    fn is_name(s: &str) -> bool {
        let mut chars = s.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    }

    /// `name="value",name="value"` with only `\\`, `\"` and `\n` escaped in values.
    fn labels_ok(mut s: &str) -> bool {
        loop {
            let Some((name, rest)) = s.split_once("=\"") else {
                return false;
            };
            if !is_name(name) || name.contains(':') {
                return false;
            }
            let (mut escaped, mut end) = (false, None);
            for (i, c) in rest.char_indices() {
                match (escaped, c) {
                    (true, '\\' | '"' | 'n') => escaped = false,
                    (true, _) | (false, '\n') => return false,
                    (false, '\\') => escaped = true,
                    (false, '"') => {
                        end = Some(i);
                        break;
                    }
                    (false, _) => {}
                }
            }
            let Some(end) = end else { return false };
            s = &rest[end + 1..];
            if s.is_empty() {
                return true;
            }
            let Some(next) = s.strip_prefix(',') else {
                return false;
            };
            s = next;
        }
    }

    fn sample_line_ok(line: &str) -> bool {
        let Some((series, value)) = line.rsplit_once(' ') else {
            return false;
        };
        let value_ok = value.parse::<f64>().is_ok() || matches!(value, "+Inf" | "-Inf" | "NaN");
        let series_ok = match series.split_once('{') {
            None => is_name(series),
            Some((name, labels)) => {
                is_name(name) && labels.strip_suffix('}').is_some_and(labels_ok)
            }
        };
        value_ok && series_ok
    }

    fn exercised() -> Arc<CollectorMetrics> {
        let m = CollectorMetrics::new();
        let guard = m.request_received(signal::METRICS, transport::HTTP);
        m.request_answered(
            signal::METRICS,
            transport::HTTP,
            status::OK,
            Duration::from_millis(7),
        );
        drop(guard);
        m.events_received(3);
        m.events_accepted(2);
        m.counts_received(5);
        m.counts_accepted(5);
        m.ignored_spans(4);
        m.ignored_metrics(1);
        m.records_produced(topic::OUTCOME_EVENTS, 2);
        m.set_producer_queue_depth(9);
        m.heartbeat_sent();
        m.set_kafka_reachable(true);
        m.rejected(&[("missing_target", 1)], "no target");
        m.delivery_failed(topic::OUTCOME_EVENTS, "MessageTimedOut");
        m.unauthenticated(transport::GRPC);
        m.too_large(transport::HTTP, 5_000_000, 4_194_304);
        m.decode_error(signal::TRACES, "invalid wire type");
        m.heartbeat_failed("broker down");
        m
    }

    #[test]
    fn every_family_has_help_and_type() {
        let text = exercised().render();
        for name in names::ALL {
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "no HELP for {name}"
            );
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "no TYPE for {name}"
            );
            assert!(!names::help(name).is_empty(), "no help text for {name}");
        }
        for line in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
            let (name, kind) = line.split_once(' ').unwrap();
            assert!(matches!(kind, "counter" | "gauge" | "histogram"), "{line}");
            assert_eq!(kind == "counter", name.ends_with("_total"), "{line}");
        }
    }

    #[test]
    fn every_sample_line_is_well_formed_and_label_values_are_escaped() {
        let m = exercised();
        m.rejected(&[("a\"b\nc\\d", 1)], "quote, newline, backslash");
        let text = m.render();
        let escaped = r#"candor_collector_rejected_total{reason="a\"b\nc\\d"}"#;
        assert!(text.contains(&format!("{escaped} 1\n")), "{text}");
        assert!(text.ends_with('\n'));
        for line in text.lines() {
            if let Some(comment) = line.strip_prefix("# ") {
                assert!(
                    comment.starts_with("HELP ") || comment.starts_with("TYPE "),
                    "{line}"
                );
            } else {
                assert!(sample_line_ok(line), "malformed: {line:?}");
            }
        }
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_inf_equals_count() {
        let m = CollectorMetrics::new();
        for micros in [500, 1_000, 3_000, 20_000, 20_000_000] {
            let elapsed = Duration::from_micros(micros);
            m.request_answered(signal::TRACES, transport::GRPC, status::OK, elapsed);
        }
        let text = m.render();
        let prefix = "candor_collector_request_duration_seconds_bucket{signal=\"traces\",le=\"";
        let buckets: Vec<(&str, u64)> = text
            .lines()
            .filter_map(|l| l.strip_prefix(prefix))
            .map(|rest| {
                let (le, value) = rest.split_once("\"} ").unwrap();
                (le, value.parse().unwrap())
            })
            .collect();
        assert_eq!(buckets.len(), LATENCY_BUCKETS.len() + 1);
        assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{buckets:?}");
        assert_eq!(buckets[0], ("0.001", 2), "a bucket includes its bound");
        assert_eq!(buckets[2], ("0.005", 3));
        assert_eq!(buckets[4], ("0.025", 4));
        assert_eq!(buckets[12], ("10", 4));
        assert_eq!(buckets[13], ("+Inf", 5));
        let series = "candor_collector_request_duration_seconds";
        assert_eq!(
            m.sample(&format!("{series}_count{{signal=\"traces\"}}")),
            Some(5.0)
        );
        assert_eq!(
            m.sample(&format!("{series}_sum{{signal=\"traces\"}}")),
            Some(20.0245)
        );
        assert_eq!(
            m.sample(&format!("{series}_count{{signal=\"metrics\"}}")),
            Some(0.0)
        );
    }

    #[test]
    fn a_full_family_folds_into_other_and_counts_the_overflow() {
        let overflow = Arc::new(Counter::new());
        let family = CounterVec::new("t_total", &["k"], Arc::clone(&overflow)).with_max_series(2);
        for key in ["a", "b", "c", "d", "a"] {
            family.with(&[key]).inc();
        }
        assert_eq!(overflow.get(), 2);
        let mut text = String::new();
        family.render(&mut text);
        assert!(text.contains("t_total{k=\"a\"} 2\n"), "{text}");
        assert!(text.contains("t_total{k=\"other\"} 2\n"), "{text}");
        assert!(!text.contains("\"c\""), "{text}");

        let m = CollectorMetrics::new();
        for i in 0..=MAX_SERIES_PER_FAMILY {
            m.rejected(&[(&format!("reason_{i}"), 1)], "many");
        }
        assert_eq!(
            m.sample("candor_collector_rejected_total{reason=\"other\"}"),
            Some(1.0)
        );
        assert_eq!(m.sample(names::METRIC_SERIES_OVERFLOW_TOTAL), Some(1.0));
    }

    #[test]
    fn in_flight_follows_the_guard_and_kafka_reachable_is_zero_or_one() {
        let m = CollectorMetrics::new();
        let guard = m.request_received(signal::TRACES, transport::GRPC);
        assert_eq!(m.sample(names::IN_FLIGHT_REQUESTS), Some(1.0));
        drop(guard);
        assert_eq!(m.sample(names::IN_FLIGHT_REQUESTS), Some(0.0));
        m.set_kafka_reachable(true);
        assert_eq!(m.sample(names::KAFKA_REACHABLE), Some(1.0));
        m.set_kafka_reachable(false);
        assert_eq!(m.sample(names::KAFKA_REACHABLE), Some(0.0));
    }
}
