//! The collector's own telemetry: typed counters, gauges and histograms in one
//! `prometheus-client` registry ([`candor_service::metrics`]), rendered in the Prometheus text
//! exposition format 0.0.4 for `/metrics`.
//!
//! Every metric name is a constant in [`names`]. Anything that is more than routine (a rejection, a
//! failed delivery, a refused request) goes through one method of [`CollectorMetrics`] that both
//! counts it and logs it, so it is never only a log line.
//!
//! ```
//! use std::time::Duration;
//! use candor_collector::ingest::metrics::{CollectorMetrics, names::{signal, status, transport}};
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
//! Counters and gauges are atomics; a labelled family takes a short lock per lookup, so a hot path
//! may keep the series it returns instead of looking it up again.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use candor_service::metrics::{Counter, Family, Gauge, Histogram, Metrics, observe};

pub use candor_service::metrics::{LATENCY_BUCKETS, MAX_SERIES_PER_FAMILY};

/// Metric names (with their help texts), label names and the closed sets of label values.
pub mod names {
    candor_service::metric_names! {
        REQUESTS_RECEIVED_TOTAL = "candor_collector_requests_received_total",
            "OTLP export requests received, by signal and transport.";
        REQUESTS_ANSWERED_TOTAL = "candor_collector_requests_answered_total",
            "OTLP export requests answered, by signal, transport and status.";
        EVENTS_RECEIVED_TOTAL = "candor_collector_events_received_total",
            "Outcome span events received.";
        EVENTS_ACCEPTED_TOTAL = "candor_collector_events_accepted_total",
            "Outcome span events accepted.";
        OPERATION_EVENTS_RECEIVED_TOTAL = "candor_collector_operation_events_received_total",
            "Operation lifecycle events (tool.lifecycle) received.";
        OPERATION_EVENTS_ACCEPTED_TOTAL = "candor_collector_operation_events_accepted_total",
            "Operation lifecycle events (tool.lifecycle) accepted.";
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
        IGNORED_LOG_RECORDS_TOTAL = "candor_collector_ignored_log_records_total",
            "Log records ignored for not being an outcome event.";
        DERIVED_CALLS_TOTAL = "candor_collector_derived_calls_total",
            "Calls derived from the spans of a convention the collector recognises (GenAI execute_tool, MCP tools/call, HTTP client, OpenInference, OpenLLMetry, the Vercel AI SDK, Spring AI, declared ones), by source, convention and class. A derived call without error is unverified, never a success: a derived failure rate is a lower bound.";
        DERIVED_RESULT_FAILURES_TOTAL = "candor_collector_derived_result_failures_total",
            "Derived calls whose spans reported no error but whose captured result holds a failure marker of their convention (an MCP result's isError, a LangChain ToolMessage's status error): counted as access_failure, kind tool_error.";
        DERIVED_SAMPLING_UNKNOWN_TOTAL = "candor_collector_derived_sampling_unknown_total",
            "Derived calls counted from spans that carried no sampling threshold (th in the ot entry of their trace state): their counts are of the spans the senders kept, whatever their samplers left out.";
        DERIVED_RESULTS_UNREAD_TOTAL = "candor_collector_derived_results_unread_total",
            "Captured results of derived calls longer than derived.max_result_bytes, not read for failure markers: their calls stay unverified.";
        DERIVED_JOINED_TOTAL = "candor_collector_derived_joined_total",
            "Derived spans counted as part of another span's call, by what counted it: adapter (an adapter declared the call), derived (a GenAI or MCP span of the same call in the same request) or earlier_request (a span of the same call that an earlier request counted, within derived.join_window).";
        DERIVED_REVISED_TOTAL = "candor_collector_derived_revised_total",
            "Derived calls an earlier request counted without a failure (or cancellation) that a later request's spans of the same call showed: counted again at that class, so the failure is not lost, and the call is in two classes.";
        DERIVED_JOIN_KEYS_DROPPED_TOTAL = "candor_collector_derived_join_keys_dropped_total",
            "Keys of counted derived calls the join across requests forgot before derived.join_window ended, or did not keep, to stay under derived.max_join_keys: a later span of such a call may count it again.";
        DERIVED_JOIN_KEYS = "candor_collector_derived_join_keys",
            "Keys of counted derived calls the join across requests holds (a 17-byte slot each in a table that holds up to twice as many slots as keys).";
        DERIVED_TARGETS_FOLDED_TOTAL = "candor_collector_derived_targets_folded_total",
            "Derived calls recorded with the target or tool \"other\": their service had reached its cap of distinct derived targets and tools.";
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
        SENDER_HEARTBEATS_SENT_TOTAL = "candor_collector_sender_heartbeats_sent_total",
            "Senders' heartbeats sent: one per sender and interval its data fell in, written with each heartbeat.";
        SENDER_INTERVALS_DROPPED_TOTAL = "candor_collector_sender_intervals_dropped_total",
            "Intervals a sender was heard in that were not kept, past heartbeat.max_sender_intervals between two heartbeats: the sender may be judged silent in them.";
        KAFKA_REACHABLE = "candor_collector_kafka_reachable",
            "1 when Kafka answered at the last contact, else 0.";
        UNAUTHENTICATED_TOTAL = "candor_collector_unauthenticated_total",
            "Requests refused for missing or wrong credentials.";
        TOO_LARGE_TOTAL = "candor_collector_too_large_total",
            "Requests refused for exceeding the size limit.";
        DECODE_ERRORS_TOTAL = "candor_collector_decode_errors_total",
            "Request bodies that could not be decoded, by signal.";
        SPOOL_RECORDS = "candor_collector_spool_records",
            "Records held in the local spool, waiting for Kafka.";
        SPOOL_BYTES = "candor_collector_spool_bytes",
            "Bytes of records held in the local spool.";
        SPOOL_OLDEST_AGE_SECONDS = "candor_collector_spool_oldest_age_seconds",
            "Age of the oldest record in the local spool; 0 when it is empty.";
        SPOOL_RECORDS_TOTAL = "candor_collector_spool_records_total",
            "Records through the local spool, by action: appended, drained (Kafka acknowledged them), expired (older than spool.max_age), unreadable, refused (the spool was full).";
        SPOOL_FAILURES_TOTAL = "candor_collector_spool_failures_total",
            "Reads and writes of the local spool's store that failed.";
        HEARTBEATS_SPOOLED_TOTAL = "candor_collector_heartbeats_spooled_total",
            "Heartbeat records spooled behind records waiting for Kafka.";
        METRIC_SERIES_OVERFLOW_TOTAL = "candor_collector_metric_series_overflow_total",
            "Lookups folded into the series labelled \"other\" of a family at its series limit.";
    }

    /// The value of every label of the series a full family folds new label sets into.
    pub use candor_service::metrics::OVERFLOW_VALUE;

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
        /// See [`super::spool_action`].
        pub const ACTION: &str = "action";
        /// Where a derived call came from: `genai`, `mcp` or `http`.
        pub const SOURCE: &str = "source";
        /// The convention a derived call was recognised by, e.g. `openinference`.
        pub const CONVENTION: &str = "convention";
        /// A derived call's class: `access_failure`, `unverified` or `cancelled`.
        pub const CLASS: &str = "class";
        /// What counted a joined span: `adapter`, `derived` or `earlier_request`.
        pub const INTO: &str = "into";
    }

    /// Values of the `action` label of the spool's record counter.
    pub mod spool_action {
        /// Made durable in the spool, and the request acknowledged.
        pub const APPENDED: &str = "appended";
        /// Produced to Kafka and acknowledged, then removed.
        pub const DRAINED: &str = "drained";
        /// Older than `spool.max_age`: removed unsent.
        pub const EXPIRED: &str = "expired";
        /// Stored bytes that could not be read back: removed unsent.
        pub const UNREADABLE: &str = "unreadable";
        /// Not taken: the spool was full, and the request answered "retry later".
        pub const REFUSED: &str = "refused";
        /// Every action.
        pub const ALL: &[&str] = &[APPENDED, DRAINED, EXPIRED, UNREADABLE, REFUSED];
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

/// Keeps a request counted in `in_flight_requests` until it is dropped.
#[derive(Debug)]
#[must_use = "the request counts as in flight only while this guard lives"]
pub struct InFlight<'a>(&'a Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
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
    registry: Metrics,
    requests_received: Family<Counter>,
    requests_answered: Family<Counter>,
    rejected: Family<Counter>,
    records_produced: Family<Counter>,
    delivery_failures: Family<Counter>,
    decode_errors: Family<Counter>,
    request_duration: Family<Histogram>,
    events_received: Counter,
    events_accepted: Counter,
    operation_events_received: Counter,
    operation_events_accepted: Counter,
    counts_received: Counter,
    counts_accepted: Counter,
    ignored_spans: Counter,
    ignored_metrics: Counter,
    ignored_log_records: Counter,
    derived_calls: Family<Counter>,
    derived_joined: Family<Counter>,
    derived_targets_folded: Counter,
    derived_revised: Counter,
    derived_join_keys_dropped: Counter,
    derived_join_keys: Gauge,
    sender_heartbeats_sent: Counter,
    sender_intervals_dropped: Counter,
    derived_result_failures: Counter,
    derived_results_unread: Counter,
    derived_sampling_unknown: Counter,
    redacted_values: Counter,
    heartbeats_sent: Counter,
    heartbeat_failures: Counter,
    unauthenticated: Counter,
    too_large: Counter,
    producer_renewals: Counter,
    spool_records_total: Family<Counter>,
    spool_failures: Counter,
    heartbeats_spooled: Counter,
    spool_records: Gauge,
    spool_bytes: Gauge,
    spool_oldest_age: Gauge,
    in_flight_requests: Gauge,
    producer_queue_depth: Gauge,
    kafka_reachable: Gauge,
    kafka_reported: AtomicBool,
}

impl Default for CollectorMetrics {
    fn default() -> Self {
        use names::{label, signal, spool_action, status, transport};
        let mut m = Metrics::new(names::help, names::METRIC_SERIES_OVERFLOW_TOTAL);
        let metrics = Self {
            requests_received: m.counters(
                names::REQUESTS_RECEIVED_TOTAL,
                &[label::SIGNAL, label::TRANSPORT],
            ),
            requests_answered: m.counters(
                names::REQUESTS_ANSWERED_TOTAL,
                &[label::SIGNAL, label::TRANSPORT, label::STATUS],
            ),
            rejected: m.counters(names::REJECTED_TOTAL, &[label::REASON]),
            records_produced: m.counters(names::RECORDS_PRODUCED_TOTAL, &[label::TOPIC]),
            delivery_failures: m.counters(
                names::DELIVERY_FAILURES_TOTAL,
                &[label::TOPIC, label::ERROR],
            ),
            decode_errors: m.counters(names::DECODE_ERRORS_TOTAL, &[label::SIGNAL]),
            request_duration: m.histograms(names::REQUEST_DURATION_SECONDS, &[label::SIGNAL]),
            events_received: m.counter(names::EVENTS_RECEIVED_TOTAL),
            events_accepted: m.counter(names::EVENTS_ACCEPTED_TOTAL),
            operation_events_received: m.counter(names::OPERATION_EVENTS_RECEIVED_TOTAL),
            operation_events_accepted: m.counter(names::OPERATION_EVENTS_ACCEPTED_TOTAL),
            counts_received: m.counter(names::COUNTS_RECEIVED_TOTAL),
            counts_accepted: m.counter(names::COUNTS_ACCEPTED_TOTAL),
            ignored_spans: m.counter(names::IGNORED_SPANS_TOTAL),
            ignored_metrics: m.counter(names::IGNORED_METRICS_TOTAL),
            ignored_log_records: m.counter(names::IGNORED_LOG_RECORDS_TOTAL),
            derived_calls: m.counters(
                names::DERIVED_CALLS_TOTAL,
                &[label::SOURCE, label::CONVENTION, label::CLASS],
            ),
            derived_joined: m.counters(names::DERIVED_JOINED_TOTAL, &[label::INTO]),
            derived_targets_folded: m.counter(names::DERIVED_TARGETS_FOLDED_TOTAL),
            derived_revised: m.counter(names::DERIVED_REVISED_TOTAL),
            derived_join_keys_dropped: m.counter(names::DERIVED_JOIN_KEYS_DROPPED_TOTAL),
            derived_join_keys: m.gauge(names::DERIVED_JOIN_KEYS),
            sender_heartbeats_sent: m.counter(names::SENDER_HEARTBEATS_SENT_TOTAL),
            sender_intervals_dropped: m.counter(names::SENDER_INTERVALS_DROPPED_TOTAL),
            derived_result_failures: m.counter(names::DERIVED_RESULT_FAILURES_TOTAL),
            derived_results_unread: m.counter(names::DERIVED_RESULTS_UNREAD_TOTAL),
            derived_sampling_unknown: m.counter(names::DERIVED_SAMPLING_UNKNOWN_TOTAL),
            redacted_values: m.counter(names::REDACTED_VALUES_TOTAL),
            heartbeats_sent: m.counter(names::HEARTBEATS_SENT_TOTAL),
            heartbeat_failures: m.counter(names::HEARTBEAT_FAILURES_TOTAL),
            unauthenticated: m.counter(names::UNAUTHENTICATED_TOTAL),
            too_large: m.counter(names::TOO_LARGE_TOTAL),
            producer_renewals: m.counter(names::PRODUCER_RENEWALS_TOTAL),
            spool_records_total: m.counters(names::SPOOL_RECORDS_TOTAL, &[label::ACTION]),
            spool_failures: m.counter(names::SPOOL_FAILURES_TOTAL),
            heartbeats_spooled: m.counter(names::HEARTBEATS_SPOOLED_TOTAL),
            spool_records: m.gauge(names::SPOOL_RECORDS),
            spool_bytes: m.gauge(names::SPOOL_BYTES),
            spool_oldest_age: m.gauge(names::SPOOL_OLDEST_AGE_SECONDS),
            in_flight_requests: m.gauge(names::IN_FLIGHT_REQUESTS),
            producer_queue_depth: m.gauge(names::PRODUCER_QUEUE_DEPTH),
            kafka_reachable: m.gauge(names::KAFKA_REACHABLE),
            kafka_reported: AtomicBool::new(false),
            registry: m,
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
        for &action in spool_action::ALL {
            metrics.spool_records_total.with(&[action]);
        }
        for t in candor_records::tables::TOPICS {
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
        self.in_flight_requests.inc();
        InFlight(&self.in_flight_requests)
    }
    /// Counts an answer and records how long the request took.
    pub fn request_answered(&self, signal: &str, transport: &str, status: &str, elapsed: Duration) {
        self.requests_answered
            .with(&[signal, transport, status])
            .inc();
        observe(&self.request_duration.with(&[signal]), elapsed);
        tracing::debug!(signal, transport, status, ?elapsed, "request answered");
    }
    /// Counts outcome span events received.
    pub fn events_received(&self, n: u64) {
        self.events_received.inc_by(n);
    }
    /// Counts outcome span events accepted.
    pub fn events_accepted(&self, n: u64) {
        self.events_accepted.inc_by(n);
    }
    /// Counts operation lifecycle events received.
    pub fn operation_events_received(&self, n: u64) {
        self.operation_events_received.inc_by(n);
    }
    /// Counts operation lifecycle events accepted.
    pub fn operation_events_accepted(&self, n: u64) {
        self.operation_events_accepted.inc_by(n);
    }
    /// Counts outcome counter data points received.
    pub fn counts_received(&self, n: u64) {
        self.counts_received.inc_by(n);
    }
    /// Counts outcome counter data points accepted.
    pub fn counts_accepted(&self, n: u64) {
        self.counts_accepted.inc_by(n);
    }
    /// Counts spans skipped for carrying no outcome event.
    pub fn ignored_spans(&self, n: u64) {
        self.ignored_spans.inc_by(n);
    }
    /// Counts metrics skipped for not being the outcome counter.
    pub fn ignored_metrics(&self, n: u64) {
        self.ignored_metrics.inc_by(n);
    }
    /// Counts log records skipped for not being an outcome event.
    pub fn ignored_log_records(&self, n: u64) {
        self.ignored_log_records.inc_by(n);
    }
    /// Counts what derivation made of one request's standard spans.
    pub fn derived(&self, stats: &crate::ingest::extract::derived::DerivedStats) {
        for (source, convention, class, n) in &stats.calls {
            self.derived_calls
                .with(&[source.as_str(), convention.as_str(), class.as_str()])
                .inc_by(*n);
        }
        self.derived_result_failures.inc_by(stats.result_failures);
        self.derived_results_unread.inc_by(stats.results_unread);
        self.derived_sampling_unknown.inc_by(stats.sampling_unknown);
        if stats.joined_into_adapter > 0 {
            self.derived_joined
                .with(&["adapter"])
                .inc_by(stats.joined_into_adapter);
        }
        if stats.joined_into_derived > 0 {
            self.derived_joined
                .with(&["derived"])
                .inc_by(stats.joined_into_derived);
        }
        if stats.joined_across_requests > 0 {
            self.derived_joined
                .with(&["earlier_request"])
                .inc_by(stats.joined_across_requests);
        }
        self.derived_revised.inc_by(stats.revised_across_requests);
        self.derived_targets_folded.inc_by(stats.folded_targets);
    }
    /// Counts what the join across requests kept of a stored request's derived calls.
    pub fn derived_remembered(&self, remembered: crate::ingest::extract::derived::Remembered) {
        self.derived_join_keys_dropped.inc_by(remembered.dropped);
        self.derived_join_keys
            .set(i64::try_from(remembered.held).unwrap_or(i64::MAX));
    }
    /// Counts values a credential was removed from.
    pub fn redacted_values(&self, n: u64) {
        self.redacted_values.inc_by(n);
    }
    /// Counts records Kafka acknowledged on `topic`.
    pub fn records_produced(&self, topic: &str, n: u64) {
        self.records_produced.with(&[topic]).inc_by(n);
    }
    /// Sets how many records wait in the producer's queue.
    pub fn set_producer_queue_depth(&self, depth: i64) {
        self.producer_queue_depth.set(depth);
    }
    /// Records made durable in the spool, their request acknowledged.
    pub fn spool_appended(&self, n: u64) {
        use names::spool_action;
        self.spool_records_total
            .with(&[spool_action::APPENDED])
            .inc_by(n);
    }

    /// Records the spool could not take (full or failing): their request is answered "retry
    /// later". Logged.
    pub fn spool_refused(&self, n: u64, error: &crate::sink::kafka::spool::SpoolError) {
        use names::spool_action;
        self.spool_records_total
            .with(&[spool_action::REFUSED])
            .inc_by(n);
        tracing::warn!(records = n, %error, "spool refused records; the client is told to retry");
    }

    /// Spooled records Kafka acknowledged.
    pub fn spool_drained(&self, n: u64) {
        use names::spool_action;
        self.spool_records_total
            .with(&[spool_action::DRAINED])
            .inc_by(n);
    }

    /// A spooled record older than `spool.max_age`, removed unsent. Logged.
    pub fn spool_expired(&self, seq: u64, max_age: Duration) {
        use names::spool_action;
        self.spool_records_total
            .with(&[spool_action::EXPIRED])
            .inc();
        tracing::error!(
            seq,
            ?max_age,
            "spooled record older than spool.max_age dropped unsent"
        );
    }

    /// A spooled record whose stored bytes could not be read, removed unsent. Logged.
    pub fn spool_unreadable(&self, seq: u64, reason: &str) {
        use names::spool_action;
        self.spool_records_total
            .with(&[spool_action::UNREADABLE])
            .inc();
        tracing::error!(
            seq,
            reason,
            "spooled record could not be read back; dropped"
        );
    }

    /// A read or write of the spool's store that failed. Logged.
    pub fn spool_failed(&self, error: &crate::sink::kafka::spool::SpoolError) {
        self.spool_failures.inc();
        tracing::error!(%error, "spool store failed");
    }

    /// What the spool holds now, and the age of its oldest record in seconds.
    pub fn set_spool_level(
        &self,
        level: crate::sink::kafka::spool::Level,
        oldest_age_seconds: u64,
    ) {
        let gauge = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        self.spool_records.set(gauge(level.records));
        self.spool_bytes.set(gauge(level.bytes));
        self.spool_oldest_age.set(gauge(oldest_age_seconds));
    }

    /// A heartbeat spooled behind records waiting for Kafka, with the senders' heartbeats
    /// beside it.
    pub fn heartbeat_spooled(&self, senders: u64) {
        self.heartbeats_spooled.inc();
        self.sender_heartbeats_sent.inc_by(senders);
    }
    /// Counts a heartbeat sent, with the senders' heartbeats sent beside it.
    pub fn heartbeat_sent(&self, senders: u64) {
        self.heartbeats_sent.inc();
        self.sender_heartbeats_sent.inc_by(senders);
    }
    /// Counts sender intervals not kept, the book being full.
    pub fn sender_intervals_dropped(&self, dropped: u64) {
        self.sender_intervals_dropped.inc_by(dropped);
    }
    /// Records whether Kafka answered; logs the first report and every change.
    pub fn set_kafka_reachable(&self, reachable: bool) {
        let previous = self.kafka_reachable.set(i64::from(reachable));
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
            self.rejected.with(&[reason]).inc_by(*count);
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
        self.registry.encode()
    }

    /// The value of one sample of [`render`](Self::render), named as it is written there, e.g.
    /// `candor_collector_rejected_total{reason="x"}`; for tests and diagnostics.
    pub fn sample(&self, series: &str) -> Option<f64> {
        candor_service::metrics::sample(&self.render(), series)
    }
}

#[cfg(test)]
mod tests {
    use super::names::{signal, status, transport};
    use super::*;
    use candor_schema::names::topic;

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
        m.heartbeat_sent(0);
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
        let mut registry = Metrics::new(names::help, names::METRIC_SERIES_OVERFLOW_TOTAL);
        let family = registry
            .counters(names::REJECTED_TOTAL, &["k"])
            .with_max_series(2);
        for key in ["a", "b", "c", "d", "a"] {
            family.with(&[key]).inc();
        }
        let text = registry.encode();
        let overflow = candor_service::metrics::sample(&text, names::METRIC_SERIES_OVERFLOW_TOTAL);
        assert_eq!(overflow, Some(2.0), "{text}");
        assert!(
            text.contains("candor_collector_rejected_total{k=\"a\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("candor_collector_rejected_total{k=\"other\"} 2\n"),
            "{text}"
        );
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
