//! The ingest core shared by the gRPC and HTTP receivers: extract, produce, acknowledge.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use super::extract::derived::{Derivation, DerivedStats, Remember};
use super::extract::{self, Limits, Received, Rejection};
use super::senders::{Heard, Senders};
use crate::error::{ErrorCode, ServiceError};
use crate::ingest::metrics::CollectorMetrics;
use crate::sink::kafka::spool::Spool;
use crate::sink::kafka::{DeliveryError, KafkaRecord, Producer, encode};

/// What an export request came to, once Kafka holds all of it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Acknowledged {
    /// Events or data points refused (and kept in the rejected topic).
    pub rejected: u64,
    /// Why, for OTLP's `partial_success.error_message`; empty when nothing was refused.
    pub message: String,
}

impl Acknowledged {
    /// For OTLP's `partial_success`: how many were refused and why, when any were.
    pub fn refused(self) -> Option<(i64, String)> {
        (self.rejected > 0).then(|| {
            (
                i64::try_from(self.rejected).unwrap_or(i64::MAX),
                self.message,
            )
        })
    }
}

/// A request's records, encoded for Kafka, and its rejections: what extraction leaves once the
/// request itself is dropped.
struct Extracted {
    records: Vec<KafkaRecord>,
    /// Of `records`, the count points of derived calls.
    derived_counts: u64,
    /// Of `records`, the operation lifecycle events.
    operations: u64,
    /// Operation lifecycle events seen, valid or not.
    operations_seen: u64,
    /// What derivation made of the request's standard spans.
    derived: DerivedStats,
    rejections: Vec<Rejection>,
    /// Events or points seen, valid or not.
    seen: u64,
    /// Spans or metrics that carried none.
    ignored: u64,
    /// Values a credential was removed from.
    redacted: u64,
    /// Who sent the request, and when its data is from.
    heard: Heard,
    /// The derived calls it counted, for the join across requests.
    remember: Remember,
}

/// Counts since the last heartbeat.
#[derive(Debug, Default)]
pub struct SinceHeartbeat {
    /// Events accepted.
    pub accepted_events: AtomicU64,
    /// Count points accepted.
    pub accepted_counts: AtomicU64,
    /// Events and points rejected.
    pub rejected: AtomicU64,
}

/// Turns export requests into records in Kafka.
pub struct Ingest {
    producer: Arc<Producer>,
    /// One permit per request being handled: past the limit, clients are told to retry later.
    in_flight: tokio::sync::Semaphore,
    metrics: Arc<CollectorMetrics>,
    limits: Limits,
    collector_id: String,
    retry_after: Duration,
    since_heartbeat: SinceHeartbeat,
    spool: Option<Arc<Spool>>,
    derivation: Arc<Derivation>,
    senders: Arc<Senders>,
}

/// Where a request's records went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered {
    /// Kafka acknowledged them.
    Kafka,
    /// The spool holds them, durably, until Kafka takes them.
    Spooled,
}

impl Ingest {
    /// An ingest core producing through `producer`.
    pub fn new(
        producer: Arc<Producer>,
        metrics: Arc<CollectorMetrics>,
        limits: Limits,
        collector_id: String,
        retry_after: Duration,
        max_in_flight_requests: usize,
    ) -> Self {
        Self {
            producer,
            in_flight: tokio::sync::Semaphore::new(max_in_flight_requests),
            metrics,
            limits,
            collector_id,
            retry_after,
            since_heartbeat: SinceHeartbeat::default(),
            spool: None,
            derivation: Arc::default(),
            senders: Arc::default(),
        }
    }

    /// Keeps the senders heard between two heartbeats in `senders`, whose intervals are as
    /// wide as the heartbeat interval.
    pub fn with_senders(mut self, senders: Senders) -> Self {
        self.senders = Arc::new(senders);
        self
    }

    /// The senders heard since the last heartbeat.
    pub fn senders(&self) -> &Senders {
        &self.senders
    }

    /// Derives calls from standard spans as `derivation` says (by default from every source).
    pub fn with_derivation(mut self, derivation: Derivation) -> Self {
        self.derivation = Arc::new(derivation);
        self
    }

    /// Keeps what Kafka cannot take yet in `spool` and acknowledges it once it is durable there.
    pub fn with_spool(mut self, spool: Arc<Spool>) -> Self {
        self.spool = Some(spool);
        self
    }

    /// The spool, when one is configured.
    pub fn spool(&self) -> Option<&Arc<Spool>> {
        self.spool.as_ref()
    }

    /// How long a client is told to wait before it sends a refused request again.
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// Delivers heartbeats like a request's records: behind whatever is spooled.
    pub async fn deliver_heartbeats(
        &self,
        records: &[KafkaRecord],
    ) -> Result<Delivered, ServiceError> {
        self.deliver(records).await
    }

    /// The collector's id.
    pub fn collector_id(&self) -> &str {
        &self.collector_id
    }

    /// The self-telemetry.
    pub fn metrics(&self) -> &Arc<CollectorMetrics> {
        &self.metrics
    }

    /// The producer.
    pub fn producer(&self) -> &Arc<Producer> {
        &self.producer
    }

    /// The limits applied to every request.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Counts since the last heartbeat.
    pub fn since_heartbeat(&self) -> &SinceHeartbeat {
        &self.since_heartbeat
    }

    /// Runs one export request, counting it as received, in flight and answered (with its
    /// status and latency).
    pub async fn answered<F>(
        &self,
        signal: &'static str,
        transport: &'static str,
        export: F,
    ) -> Result<Acknowledged, ServiceError>
    where
        F: std::future::Future<Output = Result<Acknowledged, ServiceError>>,
    {
        let started = Instant::now();
        let _in_flight = self.metrics.request_received(signal, transport);
        let result = match self.in_flight.try_acquire() {
            Ok(_permit) => export.await,
            Err(_) => Err(ServiceError::unavailable(
                "the collector is handling as many requests as it may; retry later",
                self.retry_after,
            )),
        };
        let status = match &result {
            Ok(ack) if ack.rejected > 0 => "partial",
            Ok(_) => "ok",
            Err(error) => error.code.label(),
        };
        self.metrics
            .request_answered(signal, transport, status, started.elapsed());
        result
    }

    /// Extracts the `tool.outcome` events of a trace export and delivers them (and the
    /// rejections) to Kafka.
    pub async fn export_traces(
        &self,
        request: ExportTraceServiceRequest,
    ) -> Result<Acknowledged, ServiceError> {
        let (extracted, received_at) = self
            .extract(move |received, width| {
                let heard = Heard::of_traces(&request, width, received.time_unix_nano);
                events(extract::extract_traces(&request, received), heard)
            })
            .await?;
        self.metrics.ignored_spans(extracted.ignored);
        self.deliver_events(extracted, received_at).await
    }

    /// Delivers the extracted `tool.outcome` events of one request, counting them.
    async fn deliver_events(
        &self,
        mut extracted: Extracted,
        received_at: u64,
    ) -> Result<Acknowledged, ServiceError> {
        self.metrics.events_received(extracted.seen);
        self.metrics.redacted_values(extracted.redacted);
        self.metrics
            .operation_events_received(extracted.operations_seen);
        let derived_counts = extracted.derived_counts;
        let operations = extracted.operations;
        // Event records: an adapter's outcome and lifecycle events, and one per failed derived
        // call.
        let accepted = extracted.records.len() as u64 - derived_counts;
        let derived_events = extracted.derived.failed_calls() - extracted.derived.events_over_limit;
        self.deliver_request(&mut extracted, received_at).await?;
        // Beside `events_received`, which counts an adapter's events only.
        self.metrics.events_accepted(
            accepted
                .saturating_sub(derived_events)
                .saturating_sub(operations),
        );
        self.metrics.operation_events_accepted(operations);
        // Counted once Kafka holds them, so that a request answered "retry" counts once.
        self.metrics.derived(&extracted.derived);
        let counts = &self.since_heartbeat;
        counts
            .accepted_events
            .fetch_add(accepted, Ordering::Relaxed);
        counts
            .accepted_counts
            .fetch_add(derived_counts, Ordering::Relaxed);
        Ok(self.acknowledge(
            &extracted.rejections,
            "tool.outcome or tool.lifecycle event(s)",
        ))
    }

    /// Extracts the log-based `tool.outcome` events of a logs export and delivers them (and the
    /// rejections) to Kafka, exactly as the span events of a trace export.
    pub async fn export_logs(
        &self,
        request: ExportLogsServiceRequest,
    ) -> Result<Acknowledged, ServiceError> {
        let (extracted, received_at) = self
            .extract(move |received, width| {
                let heard = Heard::of_logs(&request, width, received.time_unix_nano);
                events(extract::extract_logs(&request, received), heard)
            })
            .await?;
        self.metrics.ignored_log_records(extracted.ignored);
        self.deliver_events(extracted, received_at).await
    }

    /// Extracts the `tool.outcomes` points of a metrics export and delivers them (and the
    /// rejections) to Kafka.
    pub async fn export_metrics(
        &self,
        request: ExportMetricsServiceRequest,
    ) -> Result<Acknowledged, ServiceError> {
        let (mut extracted, received_at) = self
            .extract(move |received, width| {
                let out = extract::extract_metrics(&request, received);
                let heard = Heard::of_metrics(&request, width, received.time_unix_nano);
                Extracted {
                    records: out.counts.iter().map(encode::outcome_count).collect(),
                    derived_counts: 0,
                    operations: 0,
                    operations_seen: 0,
                    derived: DerivedStats::default(),
                    rejections: out.rejections,
                    seen: out.points_seen,
                    ignored: out.ignored_metrics,
                    redacted: out.redacted,
                    heard,
                    remember: Remember::default(),
                }
            })
            .await?;
        self.metrics.counts_received(extracted.seen);
        self.metrics.ignored_metrics(extracted.ignored);
        self.metrics.redacted_values(extracted.redacted);
        let accepted = extracted.records.len() as u64;
        self.deliver_request(&mut extracted, received_at).await?;
        self.metrics.counts_accepted(accepted);
        let counts = &self.since_heartbeat;
        counts
            .accepted_counts
            .fetch_add(accepted, Ordering::Relaxed);
        Ok(self.acknowledge(&extracted.rejections, "tool.outcomes data point(s)"))
    }

    /// Delivers a request's records and rejections together ([`Self::deliver_all`]), then records
    /// who sent it and the calls it asks to remember.
    async fn deliver_request(
        &self,
        extracted: &mut Extracted,
        received_at: u64,
    ) -> Result<(), ServiceError> {
        let records = std::mem::take(&mut extracted.records);
        self.deliver_all(records, &extracted.rejections, received_at)
            .await?;
        self.heard(std::mem::take(&mut extracted.heard));
        let remember = std::mem::take(&mut extracted.remember);
        if !remember.is_empty() {
            let remembered = self.derivation.remember(remember, received_at);
            self.metrics.derived_remembered(remembered);
        }
        Ok(())
    }

    /// Records who sent a request Kafka now holds.
    fn heard(&self, heard: Heard) {
        let dropped = self.senders.record(heard);
        self.metrics.sender_intervals_dropped(dropped);
    }

    /// Runs `extract` (extraction and encoding, CPU work proportional to the request) off the
    /// reactor, stamped with the time of receipt and given the width of the senders' intervals.
    async fn extract<F>(&self, extract: F) -> Result<(Extracted, u64), ServiceError>
    where
        F: FnOnce(&Received<'_>, Duration) -> Extracted + Send + 'static,
    {
        let width = self.senders.width();
        let received_at = unix_nanos(SystemTime::now());
        let limits = self.limits;
        let collector_id = self.collector_id.clone();
        let derivation = Arc::clone(&self.derivation);
        let extracted = tokio::task::spawn_blocking(move || {
            let received = Received {
                collector_id: &collector_id,
                time_unix_nano: received_at,
                limits: &limits,
                derivation: &derivation,
            };
            extract(&received, width)
        })
        .await
        .map_err(|err| {
            ServiceError::unavailable(format!("extraction failed: {err}"), self.retry_after)
        })?;
        Ok((extracted, received_at))
    }

    /// Delivers the records and the rejections of one request together.
    async fn deliver_all(
        &self,
        mut records: Vec<KafkaRecord>,
        rejections: &[Rejection],
        received_at: u64,
    ) -> Result<(), ServiceError> {
        records.extend(self.rejection_records(rejections, received_at));
        self.deliver(&records).await.map(|_| ())
    }

    /// Keeps a request that could not be decoded at all, with its reason, in the rejected topic.
    pub async fn reject_undecodable(
        &self,
        signal: extract::Signal,
        error: &str,
        body: &[u8],
    ) -> Result<(), ServiceError> {
        let cap = self.limits.max_rejected_copy_bytes;
        // Credentials are removed before the copy is cut, so no half of one is left behind.
        let (mut input, mut redacted) = extract::redact_bytes(body);
        let input_truncated = input.len() > cap;
        input.truncate(cap);
        let detail = match candor_schema::redact::redact_text(error) {
            std::borrow::Cow::Borrowed(detail) => detail.to_owned(),
            std::borrow::Cow::Owned(detail) => {
                redacted += 1;
                detail
            }
        };
        self.metrics.redacted_values(redacted);
        let rejection = Rejection {
            reason: extract::RejectReason::MalformedRequest,
            detail: detail.chars().take(1024).collect(),
            signal,
            service_name: String::new(),
            input,
            input_truncated,
            count: 1,
        };
        let rejections = std::slice::from_ref(&rejection);
        let records = self.rejection_records(rejections, unix_nanos(SystemTime::now()));
        self.deliver(&records).await?;
        // Counted once Kafka holds it, like every rejection.
        self.metrics.decode_error(signal.as_str(), error);
        self.acknowledge(rejections, "undecodable request(s)");
        Ok(())
    }

    fn rejection_records(&self, rejections: &[Rejection], received_at: u64) -> Vec<KafkaRecord> {
        rejections
            .iter()
            .map(|rejection| encode::rejected(rejection, received_at, &self.collector_id))
            .collect()
    }

    /// Delivers records to Kafka, or, with a spool, keeps them there when Kafka cannot take them
    /// (and while earlier records wait there, so that none overtakes them).
    async fn deliver(&self, records: &[KafkaRecord]) -> Result<Delivered, ServiceError> {
        if records.is_empty() {
            return Ok(Delivered::Kafka);
        }
        if let Some(spool) = &self.spool
            && !spool.is_empty()
        {
            return self
                .spool_records(spool, records, "records spooled earlier wait for Kafka")
                .await;
        }
        let refused = match self.producer.deliver(records).await {
            Ok(()) => return Ok(Delivered::Kafka),
            Err(err @ DeliveryError::Refused { .. }) => {
                return Err(ServiceError::new(
                    ErrorCode::PayloadTooLarge,
                    err.to_string(),
                ));
            }
            Err(
                err @ (DeliveryError::QueueFull { .. } | DeliveryError::NotAcknowledged { .. }),
            ) => err.to_string(),
        };
        match &self.spool {
            Some(spool) => self.spool_records(spool, records, &refused).await,
            None => Err(ServiceError::unavailable(refused, self.retry_after)),
        }
    }

    async fn spool_records(
        &self,
        spool: &Spool,
        records: &[KafkaRecord],
        why: &str,
    ) -> Result<Delivered, ServiceError> {
        let count = records.len() as u64;
        match spool.append(records).await {
            Ok(()) => {
                self.metrics.spool_appended(count);
                Ok(Delivered::Spooled)
            }
            Err(err) => {
                self.metrics.spool_refused(count, &err);
                Err(ServiceError::unavailable(
                    format!("{why}, and the spool cannot keep them: {err}"),
                    self.retry_after,
                ))
            }
        }
    }

    /// What the client is told, once Kafka holds everything; rejections are counted only now,
    /// so that a request answered "retry" is not counted twice.
    fn acknowledge(&self, rejections: &[Rejection], what: &str) -> Acknowledged {
        let rejected = extract::rejected_count(rejections);
        self.since_heartbeat
            .rejected
            .fetch_add(rejected, Ordering::Relaxed);
        if rejections.is_empty() {
            return Acknowledged::default();
        }
        let message = extract::summarize(rejections, what);
        self.metrics
            .rejected(&extract::count_by_reason(rejections), &message);
        Acknowledged { rejected, message }
    }
}

/// The records of a trace or logs extract, encoded, with its counts and who sent it.
fn events(out: extract::EventsExtract<'_>, heard: Heard) -> Extracted {
    let mut records: Vec<KafkaRecord> = out.events.iter().map(encode::outcome_event).collect();
    records.extend(out.counts.iter().map(encode::outcome_count));
    records.extend(out.operations.iter().map(encode::operation_event));
    Extracted {
        records,
        derived_counts: out.counts.len() as u64,
        operations: out.operations.len() as u64,
        operations_seen: out.lifecycle_events_seen,
        derived: out.derived,
        rejections: out.rejections,
        seen: out.outcome_events_seen,
        ignored: out.ignored,
        redacted: out.redacted,
        heard,
        remember: out.remember,
    }
}

/// Unix nanoseconds, or zero for times before the epoch.
pub fn unix_nanos(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
