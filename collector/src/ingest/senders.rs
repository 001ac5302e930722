//! The senders the collector heard from, kept between two heartbeats: what lets a reader judge
//! a sender seen only through its standard spans for silence, as it judges an adapter instance
//! by its exports.
//!
//! Every export request (traces, metrics, logs) that Kafka took is recorded per resource: the
//! sender (`service.name` and its instance, as the records name them) and the intervals its data
//! fell in, one heartbeat interval wide, with how many spans, log records and metrics fell in
//! each. A span falls in the interval of its end, a log record in that of its time, a metrics
//! export in that of its arrival. Each heartbeat writes one sender's heartbeat per sender and
//! interval heard since the previous one ([`Senders::take`]).
//!
//! Data that a cut-off sender held and sent later falls in the intervals it is about, so the
//! silence it seemed to be closes. A time more than a day before the request's arrival, or after
//! it, is taken as the arrival: a sender's clock is not trusted to place data in the future.
//!
//! The book is bounded: past `max_intervals` entries between two heartbeats, what a request
//! adds is not kept, and counted. A sender whose intervals were not kept may be judged silent
//! when it was not: an answer turns partial, never falsely complete.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use candor_records::proto::{Heartbeat, RECORD_SCHEMA_VERSION};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::resource::v1::Resource;

use super::extract::service_of;

/// How far before its arrival a datum's time is believed.
const MAX_AGE_NANOS: u64 = 24 * 3_600 * 1_000_000_000;

/// The most distinct intervals one resource of one request is recorded in; data past them is
/// recorded at the request's arrival.
const MAX_INTERVALS_PER_RESOURCE: usize = 64;

/// What one request said of its senders: per resource, the sender and its items per interval.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heard {
    senders: Vec<HeardFrom>,
}

/// One resource of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HeardFrom {
    service: String,
    instance: String,
    /// `(interval start, items)`, in the order first seen.
    intervals: Vec<(u64, u64)>,
}

/// Places data times in intervals of one width, relative to a request's arrival.
#[derive(Debug, Clone, Copy)]
struct Placer {
    width: u64,
    arrival: u64,
}

impl Placer {
    fn new(width: Duration, arrival: u64) -> Self {
        Self {
            width: u64::try_from(width.as_nanos()).unwrap_or(u64::MAX).max(1),
            arrival,
        }
    }

    /// The start of the interval `time` falls in; an unbelievable time is the arrival.
    fn start(&self, time: u64) -> u64 {
        let believed = if time > self.arrival || time < self.arrival.saturating_sub(MAX_AGE_NANOS) {
            self.arrival
        } else {
            time
        };
        believed - believed % self.width
    }

    /// The resource's entry in `heard`, with `items` data times counted in their intervals.
    fn add(
        &self,
        heard: &mut Heard,
        resource: Option<&Resource>,
        times: impl Iterator<Item = u64>,
    ) {
        let service = service_of(resource);
        let mut from = HeardFrom {
            service: service.name.into_owned(),
            instance: service.instance.into_owned(),
            intervals: Vec::new(),
        };
        for time in times {
            let mut start = self.start(time);
            if from
                .intervals
                .last()
                .is_some_and(|&(last, _)| last == start)
            {
                // Most of a request's data falls in one interval.
            } else if !from.intervals.iter().any(|&(known, _)| known == start)
                && from.intervals.len() >= MAX_INTERVALS_PER_RESOURCE
            {
                start = self.start(self.arrival);
            }
            match from
                .intervals
                .iter_mut()
                .rev()
                .find(|(known, _)| *known == start)
            {
                Some((_, items)) => *items += 1,
                None => from.intervals.push((start, 1)),
            }
        }
        if !from.intervals.is_empty() {
            heard.senders.push(from);
        }
    }
}

impl Heard {
    /// The senders of a trace export that arrived at `arrival` (Unix nanoseconds), placed in
    /// intervals `width` wide by their spans' ends.
    pub fn of_traces(request: &ExportTraceServiceRequest, width: Duration, arrival: u64) -> Self {
        let placer = Placer::new(width, arrival);
        let mut heard = Heard::default();
        for resource_spans in &request.resource_spans {
            let ends = resource_spans
                .scope_spans
                .iter()
                .flat_map(|scope| &scope.spans)
                .map(|span| span.end_time_unix_nano);
            placer.add(&mut heard, resource_spans.resource.as_ref(), ends);
        }
        heard
    }

    /// The senders of a logs export, by their records' times (the observed time when a record
    /// has none).
    pub fn of_logs(request: &ExportLogsServiceRequest, width: Duration, arrival: u64) -> Self {
        let placer = Placer::new(width, arrival);
        let mut heard = Heard::default();
        for resource_logs in &request.resource_logs {
            let times = resource_logs
                .scope_logs
                .iter()
                .flat_map(|scope| &scope.log_records)
                .map(|record| match record.time_unix_nano {
                    0 => record.observed_time_unix_nano,
                    time => time,
                });
            placer.add(&mut heard, resource_logs.resource.as_ref(), times);
        }
        heard
    }

    /// The senders of a metrics export, at its arrival, one item per metric.
    pub fn of_metrics(
        request: &ExportMetricsServiceRequest,
        width: Duration,
        arrival: u64,
    ) -> Self {
        let placer = Placer::new(width, arrival);
        let mut heard = Heard::default();
        for resource_metrics in &request.resource_metrics {
            let arrivals = resource_metrics
                .scope_metrics
                .iter()
                .flat_map(|scope| &scope.metrics)
                .map(|_| arrival);
            placer.add(&mut heard, resource_metrics.resource.as_ref(), arrivals);
        }
        heard
    }
}

/// Items per interval start, per instance, per service.
type Book = HashMap<String, HashMap<String, BTreeMap<u64, u64>>>;

/// The senders heard since the last heartbeat.
#[derive(Debug)]
pub struct Senders {
    width: Duration,
    max_intervals: usize,
    book: Mutex<(Book, usize)>,
}

/// The default bound on the sender intervals kept between two heartbeats.
pub const DEFAULT_MAX_INTERVALS: usize = 100_000;

impl Default for Senders {
    fn default() -> Self {
        Self::new(Duration::from_secs(10), DEFAULT_MAX_INTERVALS)
    }
}

impl Senders {
    /// A book of intervals `width` wide (the heartbeat interval), holding at most
    /// `max_intervals` sender intervals between two heartbeats.
    pub fn new(width: Duration, max_intervals: usize) -> Self {
        Self {
            width,
            max_intervals,
            book: Mutex::default(),
        }
    }

    /// The width of an interval.
    pub fn width(&self) -> Duration {
        self.width
    }

    /// Records what a request said of its senders, once Kafka holds the request. Returns how
    /// many of its sender intervals were not kept, the book being full.
    pub fn record(&self, heard: Heard) -> u64 {
        let mut guard = self
            .book
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (book, held) = &mut *guard;
        let mut dropped = 0;
        for from in heard.senders {
            let intervals = book
                .entry(from.service)
                .or_default()
                .entry(from.instance)
                .or_default();
            for (start, items) in from.intervals {
                match intervals.get_mut(&start) {
                    Some(known) => *known = known.saturating_add(items),
                    None if *held < self.max_intervals => {
                        intervals.insert(start, items);
                        *held += 1;
                    }
                    None => dropped += 1,
                }
            }
        }
        dropped
    }

    /// The senders' heartbeats of `collector_id` for everything heard since the last call,
    /// which empties the book.
    pub fn take(&self, collector_id: &str, started_time_unix_nano: u64) -> Vec<Heartbeat> {
        let book = {
            let mut guard = self
                .book
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            std::mem::take(&mut *guard).0
        };
        let interval_ms = u64::try_from(self.width.as_millis()).unwrap_or(u64::MAX);
        let mut beats = Vec::new();
        for (service, instances) in book {
            for (instance, intervals) in instances {
                for (start, items) in intervals {
                    beats.push(Heartbeat {
                        schema_version: RECORD_SCHEMA_VERSION,
                        collector_id: collector_id.to_owned(),
                        time_unix_nano: start,
                        started_time_unix_nano,
                        interval_ms,
                        service_name: Some(service.clone()),
                        service_instance_id: Some(instance.clone()),
                        sender_items: Some(items),
                        ..Heartbeat::default()
                    });
                }
            }
        }
        beats
    }

    /// Puts back the senders' heartbeats that could not be sent, for the next heartbeat.
    pub fn restore(&self, beats: Vec<Heartbeat>) -> u64 {
        let mut heard = Heard::default();
        for beat in beats {
            let (Some(service), Some(instance)) = (beat.service_name, beat.service_instance_id)
            else {
                continue;
            };
            heard.senders.push(HeardFrom {
                service,
                instance,
                intervals: vec![(beat.time_unix_nano, beat.sender_items.unwrap_or(0))],
            });
        }
        self.record(heard)
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};

    use super::*;

    const SECOND: u64 = 1_000_000_000;
    /// A whole number of 10 s intervals, so that interval starts are easy to read.
    const ARRIVAL: u64 = 1_800_000_000 * SECOND;

    fn text(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(value.into())),
            }),
            ..KeyValue::default()
        }
    }

    fn int(key: &str, value: i64) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::IntValue(value)),
            }),
            ..KeyValue::default()
        }
    }

    /// A request of one resource with these attributes and spans ending at `ends`.
    fn request(resource: Vec<KeyValue>, ends: &[u64]) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: resource,
                    ..Resource::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans: ends
                        .iter()
                        .map(|&end| Span {
                            end_time_unix_nano: end,
                            ..Span::default()
                        })
                        .collect(),
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        }
    }

    fn shop(instance: &str) -> Vec<KeyValue> {
        vec![
            text(candor_schema::names::resource::SERVICE_NAME, "shop"),
            text(
                candor_schema::names::resource::SERVICE_INSTANCE_ID,
                instance,
            ),
        ]
    }

    /// `(service, instance, interval start in seconds, items)` of every sender's heartbeat.
    fn rows(beats: &[Heartbeat]) -> Vec<(String, String, u64, u64)> {
        let mut rows: Vec<_> = beats
            .iter()
            .map(|beat| {
                assert!(beat.is_senders());
                assert_eq!(beat.interval_ms, 10_000);
                assert_eq!(beat.collector_id, "c-1");
                (
                    beat.service_name.clone().unwrap_or_default(),
                    beat.service_instance_id.clone().unwrap_or_default(),
                    beat.time_unix_nano / SECOND,
                    beat.sender_items.unwrap_or_default(),
                )
            })
            .collect();
        rows.sort();
        rows
    }

    #[test]
    fn spans_are_placed_in_the_intervals_of_their_ends_and_unbelievable_times_at_arrival() {
        let senders = Senders::new(Duration::from_secs(10), 100);
        let ends = [
            ARRIVAL - 2 * SECOND,
            ARRIVAL - 3 * SECOND,
            // Held for a minute by a cut-off exporter: placed where it belongs.
            ARRIVAL - 65 * SECOND,
            // In the future, and from before the epoch's day: at arrival.
            ARRIVAL + 3_600 * SECOND,
            0,
        ];
        let heard = Heard::of_traces(
            &request(shop("shop-1"), &ends),
            senders.width(),
            ARRIVAL - SECOND,
        );
        assert_eq!(senders.record(heard), 0);
        let at = ARRIVAL / SECOND;
        assert_eq!(
            rows(&senders.take("c-1", 1)),
            [
                ("shop".into(), "shop-1".into(), at - 70, 1),
                ("shop".into(), "shop-1".into(), at - 10, 4),
            ]
        );
        assert!(senders.take("c-1", 1).is_empty(), "taking empties the book");
    }

    #[test]
    fn an_instance_is_its_host_and_process_when_it_names_none() {
        use candor_schema::names::resource;
        let senders = Senders::new(Duration::from_secs(10), 100);
        let attributes = vec![
            text(resource::SERVICE_NAME, "shop"),
            text(resource::HOST_NAME, "web-1"),
            int(resource::PROCESS_PID, 4242),
        ];
        let width = senders.width();
        senders.record(Heard::of_traces(
            &request(attributes, &[ARRIVAL]),
            width,
            ARRIVAL,
        ));
        senders.record(Heard::of_traces(
            &request(Vec::new(), &[ARRIVAL]),
            width,
            ARRIVAL,
        ));
        let at = ARRIVAL / SECOND;
        assert_eq!(
            rows(&senders.take("c-1", 1)),
            [
                ("shop".into(), "web-1/4242".into(), at, 1),
                ("unknown_service".into(), String::new(), at, 1),
            ]
        );
    }

    #[test]
    fn past_the_bound_intervals_are_not_kept_and_are_counted_and_put_back_ones_add_up() {
        let senders = Senders::new(Duration::from_secs(10), 2);
        let width = senders.width();
        let heard =
            |instance: &str| Heard::of_traces(&request(shop(instance), &[ARRIVAL]), width, ARRIVAL);
        assert_eq!(senders.record(heard("a")), 0);
        assert_eq!(senders.record(heard("b")), 0);
        // A known interval still adds up; a third one is dropped.
        assert_eq!(senders.record(heard("a")), 0);
        assert_eq!(senders.record(heard("c")), 1);
        let beats = senders.take("c-1", 1);
        let at = ARRIVAL / SECOND;
        assert_eq!(
            rows(&beats),
            [
                ("shop".into(), "a".into(), at, 2),
                ("shop".into(), "b".into(), at, 1),
            ]
        );
        // Beats that could not be sent go back, and add to what came since.
        assert_eq!(senders.record(heard("a")), 0);
        assert_eq!(senders.restore(beats), 0);
        assert_eq!(
            rows(&senders.take("c-1", 1)),
            [
                ("shop".into(), "a".into(), at, 3),
                ("shop".into(), "b".into(), at, 1),
            ]
        );
    }

    #[test]
    fn one_request_records_at_most_its_bound_of_intervals_per_resource() {
        let senders = Senders::new(Duration::from_secs(1), 10_000);
        let ends: Vec<u64> = (1..=100).map(|n| ARRIVAL - n * SECOND).collect();
        let heard = Heard::of_traces(&request(shop("a"), &ends), senders.width(), ARRIVAL);
        senders.record(heard);
        let beats = senders.take("c-1", 1);
        assert_eq!(beats.len(), MAX_INTERVALS_PER_RESOURCE + 1);
        let at_arrival: u64 = beats
            .iter()
            .filter(|beat| beat.time_unix_nano == ARRIVAL)
            .filter_map(|beat| beat.sender_items)
            .sum();
        assert_eq!(at_arrival, (100 - MAX_INTERVALS_PER_RESOURCE) as u64);
    }
}
