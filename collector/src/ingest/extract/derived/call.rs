//! What names one derived call: its ids, time, tool and target, read from the span that stands
//! for it, and the id of its failure event.

use candor_records::proto::OutcomeSource;
use candor_schema::names;
use opentelemetry_proto::tonic::trace::v1::Span;
use sha2::{Digest, Sha256};

use super::super::outcome::span_ids;
use super::super::{Received, Refusal, RejectReason, Service, refuse};
use super::read::Facts;
use super::target::{http_method, http_target};
use super::{Candidate, Convention};

/// What names a derived call: its ids, time, tool and target.
pub(super) struct Call<'a> {
    pub(super) trace_id: [u8; 16],
    pub(super) span_id: [u8; 8],
    pub(super) time_unix_nano: u64,
    pub(super) tool_name: &'a str,
    pub(super) target: String,
}

pub(super) fn describe<'a>(
    candidate: &Candidate<'a>,
    convention: &Convention,
    facts: &Facts<'a>,
    received: &Received<'_>,
) -> Result<Call<'a>, Refusal> {
    let span = candidate.span;
    let (trace_id, span_id) = span_ids(&span.trace_id, &span.span_id)?;
    let time_unix_nano = if span.end_time_unix_nano != 0 {
        span.end_time_unix_nano
    } else {
        span.start_time_unix_nano
    };
    if time_unix_nano == 0 {
        return Err(refuse(RejectReason::MissingTime, "the span has no time"));
    }
    let limit = received.limits.max_value_bytes;
    let (tool_name, target) = match candidate.source {
        OutcomeSource::Http => (http_method(facts.http_method), http_target(facts)),
        source => {
            let tool = facts
                .tool_name
                .or_else(|| convention.tool_in_span_name(&span.name))
                .unwrap_or("unknown");
            let target = match (facts.server_address, facts.server_port) {
                (Some(host), Some(port)) => format!("{host}:{port}"),
                (Some(host), None) => host.to_owned(),
                // An MCP server on standard input and output has no address.
                (None, _)
                    if source == OutcomeSource::Mcp && facts.network_transport == Some("pipe") =>
                {
                    "stdio".to_owned()
                }
                (None, _) => tool.to_owned(),
            };
            (tool, target)
        }
    };
    for (what, text) in [("tool name", tool_name), ("target", target.as_str())] {
        if text.len() > limit {
            return Err(refuse(
                RejectReason::ValueTooLong,
                format!("the {what} is {} bytes; the limit is {limit}", text.len()),
            ));
        }
    }
    Ok(Call {
        trace_id,
        span_id,
        time_unix_nano,
        tool_name,
        target,
    })
}

/// A derived event's id: from its service, source and span, so that the same span sent again
/// gets the same id.
pub(super) fn event_id(service: &Service<'_>, source: OutcomeSource, span: &Span) -> [u8; 16] {
    let mut hasher = Sha256::new();
    for part in [
        service.name.as_bytes(),
        service.instance.as_bytes(),
        source.as_str().as_bytes(),
        names::OUTCOME_EVENT.as_bytes(),
        &span.trace_id,
        &span.span_id,
    ] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    let mut id = [0u8; 16];
    id.copy_from_slice(&hasher.finalize()[..16]);
    id
}
