//! Rejections: the signal and the record of a refusal, its bounded copy of the input, and the
//! tallies of a request's rejections by reason.

use std::collections::BTreeMap;

use candor_records::proto::{RECORD_SCHEMA_VERSION, Rejected};
use candor_records::rejection::{Refusal, RejectReason};
use serde::Serialize;

use super::redaction::{redact_json, scrub};
use super::{Limits, Service, bounded};

/// Which OTLP signal a rejection came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Spans and their events.
    Traces,
    /// Metric data points.
    Metrics,
    /// Log records.
    Logs,
}

impl Signal {
    /// `traces`, `metrics` or `logs`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Signal::Traces => "traces",
            Signal::Metrics => "metrics",
            Signal::Logs => "logs",
        }
    }
}

/// One refused event or data point, with what is needed to find and understand it later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Why: one of the reasons the collector writes
    /// ([`RejectReason::all_written_by`] the collector).
    pub reason: RejectReason,
    /// What exactly, e.g. `tool.outcome.class = "maybe"`; bounded.
    pub detail: String,
    /// Which signal.
    pub signal: Signal,
    /// The sending service, when known.
    pub service_name: String,
    /// A bounded JSON copy of the offending input.
    pub input: Vec<u8>,
    /// Whether `input` was cut to the bound.
    pub input_truncated: bool,
    /// How many events or points this rejection stands for (more than 1 only for the events
    /// past `max_events_per_request`, which share one rejection).
    pub count: u64,
}

impl Rejection {
    /// The record kept in `candor.rejected.v1` for this rejection, received at
    /// `received_time_unix_nano` by the collector `collector_id`.
    pub fn to_record(&self, received_time_unix_nano: u64, collector_id: &str) -> Rejected {
        Rejected {
            schema_version: RECORD_SCHEMA_VERSION,
            reason: self.reason.as_str().to_owned(),
            detail: self.detail.clone(),
            signal: self.signal.as_str().to_owned(),
            service_name: self.service_name.clone(),
            input: self.input.clone(),
            input_truncated: self.input_truncated,
            received_time_unix_nano,
            collector_id: collector_id.to_owned(),
            count: self.count,
        }
    }
}

/// How many events or points `rejections` stand for.
pub fn rejected_count(rejections: &[Rejection]) -> u64 {
    rejections.iter().map(|r| r.count).sum()
}

/// An extraction's output that keeps rejections, each with a redacted copy of its input.
pub(super) trait Rejecting {
    /// The rejections kept so far, and the count of values a credential was removed from.
    fn kept(&mut self) -> (&mut Vec<Rejection>, &mut u64);

    /// Keeps the refusal of `input` ([`rejection`]); returns the kept rejection, to amend.
    fn reject<T: Serialize>(
        &mut self,
        refusal: Refusal,
        signal: Signal,
        service: &Service<'_>,
        input: &T,
        limits: &Limits,
    ) -> &mut Rejection {
        let (rejections, redacted) = self.kept();
        let index = rejections.len();
        rejections.push(rejection(refusal, signal, service, input, limits, redacted));
        // In bounds: `index` is the rejection just pushed.
        &mut rejections[index]
    }
}

impl Rejecting for super::EventsExtract<'_> {
    fn kept(&mut self) -> (&mut Vec<Rejection>, &mut u64) {
        (&mut self.rejections, &mut self.redacted)
    }
}

impl Rejecting for super::MetricsExtract {
    fn kept(&mut self) -> (&mut Vec<Rejection>, &mut u64) {
        (&mut self.rejections, &mut self.redacted)
    }
}

/// The rejection of `input` for `refusal`, from `service`: its detail scrubbed and bounded, its
/// copy redacted (counted in `redacted`) and cut to `limits.max_rejected_copy_bytes`.
fn rejection<T: Serialize>(
    refusal: Refusal,
    signal: Signal,
    service: &Service<'_>,
    input: &T,
    limits: &Limits,
    redacted: &mut u64,
) -> Rejection {
    // The copy is redacted as a structure, before it is cut, so that no credential survives in
    // it and no cut leaves half of one behind.
    let mut copy = match serde_json::to_value(input) {
        Ok(mut value) => {
            redact_json(&mut value, redacted);
            serde_json::to_vec(&value)
                .unwrap_or_else(|err| format!("unserialisable input: {err}").into_bytes())
        }
        Err(err) => format!("unserialisable input: {err}").into_bytes(),
    };
    let input_truncated = copy.len() > limits.max_rejected_copy_bytes;
    copy.truncate(limits.max_rejected_copy_bytes);
    let mut detail = refusal.detail;
    scrub(&mut detail, false, redacted);
    Rejection {
        reason: refusal.reason,
        detail: bounded(&detail, 1024).into_owned(),
        signal,
        service_name: service.name.clone().into_owned(),
        input: copy,
        input_truncated,
        count: 1,
    }
}

/// How many events or points each reason refused, by reason.
pub fn count_by_reason(rejections: &[Rejection]) -> Vec<(&'static str, u64)> {
    let mut by_reason: BTreeMap<&'static str, u64> = BTreeMap::new();
    for rejection in rejections {
        *by_reason.entry(rejection.reason.as_str()).or_default() += rejection.count;
    }
    by_reason.into_iter().collect()
}

/// One line for OTLP's `partial_success.error_message`: how many were refused, and why.
pub fn summarize(rejections: &[Rejection], what: &str) -> String {
    let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
    for rejection in rejections {
        *by_reason.entry(rejection.reason.as_str()).or_default() += rejection.count as usize;
    }
    let reasons: Vec<String> = by_reason
        .iter()
        .map(|(reason, n)| format!("{reason} ({n})"))
        .collect();
    let first = rejections
        .first()
        .map(|r| format!("; first: {}", r.detail))
        .unwrap_or_default();
    format!(
        "rejected {} {what}: {}{first}",
        rejected_count(rejections),
        reasons.join(", ")
    )
}
