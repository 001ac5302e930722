//! The events of one request gathered as they are offered: each a record or a rejection, within
//! the request's limit.

use candor_records::rejection::{RejectReason, refuse};
use serde::Serialize;

use super::lifecycle::lifecycle_event;
use super::outcome::{EventInput, outcome_event};
use super::redaction::{redact_event, redact_operation};
use super::rejections::{Rejecting as _, Signal};
use super::{EventsExtract, Received, Service};

/// Which event of the contract an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Offered {
    /// `tool.outcome`.
    Outcome,
    /// `tool.lifecycle`.
    Lifecycle,
}

/// The events of one request as they are offered, each a record or a rejection (with a copy of
/// `T`, what it came in), up to `limits.max_events_per_request`; those past it share one
/// rejection that keeps a copy of the first.
pub(super) struct EventCollector<'a, 'r, T> {
    signal: Signal,
    received: &'r Received<'a>,
    /// What the request held so far.
    pub(super) out: EventsExtract<'a>,
    overflow: Option<(Service<'a>, &'a T)>,
    overflowed: u64,
    /// Reused by every event's id.
    scratch: Vec<u8>,
}

impl<'a, 'r, T: Serialize> EventCollector<'a, 'r, T> {
    pub(super) fn new(signal: Signal, received: &'r Received<'a>) -> Self {
        Self {
            signal,
            received,
            out: EventsExtract::default(),
            overflow: None,
            overflowed: 0,
            scratch: Vec::new(),
        }
    }

    pub(super) fn offer(
        &mut self,
        kind: Offered,
        service: &Service<'a>,
        input: EventInput<'a>,
        copy: &'a T,
    ) {
        let limits = self.received.limits;
        match kind {
            Offered::Outcome => self.out.outcome_events_seen += 1,
            Offered::Lifecycle => self.out.lifecycle_events_seen += 1,
        }
        // Both kinds share the request's limit.
        let seen = self.out.outcome_events_seen + self.out.lifecycle_events_seen;
        if seen > limits.max_events_per_request as u64 {
            if self.overflow.is_none() {
                self.overflow = Some((service.clone(), copy));
            }
            self.overflowed += 1;
            return;
        }
        let checked = match kind {
            Offered::Outcome => outcome_event(input, service, self.received, &mut self.scratch)
                .map(|mut record| {
                    self.out.redacted += redact_event(&mut record);
                    self.out.events.push(record);
                }),
            Offered::Lifecycle => lifecycle_event(input, service, self.received, &mut self.scratch)
                .map(|mut record| {
                    self.out.redacted += redact_operation(&mut record);
                    self.out.operations.push(record);
                }),
        };
        if let Err(refusal) = checked {
            self.out.reject(refusal, self.signal, service, copy, limits);
        }
    }

    pub(super) fn finish(mut self) -> EventsExtract<'a> {
        let limits = self.received.limits;
        if let Some((service, copy)) = self.overflow {
            let detail = format!(
                "{} tool.outcome or tool.lifecycle event(s) past the limit of {} per request",
                self.overflowed, limits.max_events_per_request
            );
            let refusal = refuse(RejectReason::TooManyEvents, detail);
            self.out
                .reject(refusal, self.signal, &service, copy, limits)
                .count = self.overflowed;
        }
        self.out
    }
}
