//! Outcomes derived from the spans that instrumentation already emits (the contract's section
//! 10.7): tool calls recognised by one table of conventions ([`conventions`]), among them the
//! OpenTelemetry GenAI, MCP and HTTP conventions, OpenInference, OpenLLMetry, the Vercel AI SDK
//! and Spring AI.
//!
//! Such a span carries no Candor class. A span with status ERROR, `error.type` or a failure
//! signal of its convention is a failed call ([`super::failure_type::classify`]), stored as an
//! `access_failure` event of its layer (the records' `source`: `genai`, `mcp` or `http`) and
//! convention. A span without error whose captured result holds a failure marker of its
//! convention (an MCP result's `isError: true`, a LangChain `ToolMessage`'s `status: "error"`) is
//! a failed call of kind `tool_error` too. Any other span says only that contact was made, so it
//! is counted as `unverified`, never as a success. Every recognised call is counted in a delta
//! point of `outcome_counts` per service, instance, source, convention, tool, target, class and
//! minute, which gives a derived group a denominator without a counter.
//!
//! **Sampling.** A call is weighted as the span that names it was sampled: a span whose trace
//! state carries OpenTelemetry's consistent sampling threshold (`th` in the `ot` entry) stands
//! for the inverse of its sampling probability, and its point (`sampling` = `weighted`) counts
//! the calls its spans stand for, rounded; a span without one is counted as one call, in a
//! point whose `sampling` is `unknown`: a head sampler's left-out calls are not in it, and a tail
//! sampler that keeps errors makes its failure share too high. Failure events are not weighted:
//! one per failed span kept.
//!
//! The module's parts: [`conventions`] (the table and recognition), `read` (a span's
//! attributes), `join` (which spans are one call), `cap` (the bound on targets per service) and
//! `target` (an HTTP call's target).
//!
//! **One call counted once**, decided here, within one request:
//! - a derived span under an adapter's `tool.call` span (or the adapter's span itself) is the
//!   adapter's call: its declaration wins and the derived span is not counted;
//! - GenAI and MCP spans of one call (nested, or sharing a call id in one trace) count once, as
//!   the outermost of them, failed when any of them failed;
//! - an HTTP span under a GenAI or MCP span is a request the tool made, and counts on its own.
//!
//!
//! **Across requests** (`calls`): a GenAI or MCP call counted in an earlier request is
//! remembered for `join_window` (by its spans' ids, their parents' ids and its tool call ids),
//! once Kafka holds that request. A later call whose span is the child, the parent or a copy of
//! a remembered span, or shares its call id in the trace, is the same call and is not counted
//! again, unless it shows a failure (or a cancellation) the counted one did not: then it is
//! counted at its own class too, so a failure seen only in the later request is never lost
//! (`revised_across_requests`). Requests handled at the same time are not joined.

use std::borrow::Cow;
use std::sync::Mutex;
use std::time::Duration;

use candor_records::proto::{
    CountClass, OutcomeCount, OutcomeSource, RECORD_SCHEMA_VERSION, Sampling, Temporality,
};
use candor_schema::names::semconv;
use candor_schema::{EvidenceKind, FailureKind, OutcomeClass};
use opentelemetry_proto::tonic::trace::v1::Span;
use sha2::{Digest, Sha256};

use super::failure_type::{DerivedKind, DerivedOutcome, classify};
use super::outcome::status_message;

mod call;
mod calls;
mod cap;
pub mod conventions;
mod declared;
mod join;
mod read;
mod target;

use call::{describe, event_id};
use calls::{CallBook, Earlier, Lookup, Rank};
pub use calls::{Remember, Remembered};
use cap::{Kept, TargetBook};
use conventions::ResultCheck;
pub use conventions::{Convention, Conventions, ConventionsError, RawConvention};
use join::{join, joinable_traces};
use read::{Facts, SpanSampling, exception_of, first_string, first_text, sampling_of, span_error};

/// Maps and sets keyed by span ids and short texts, hashed with foldhash: the keys come from one
/// request, and SipHash's resistance to chosen keys would cost a few times more per key here.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
use super::{EventText, OutcomeEventRef, Received, Refusal, Service, bounded, content_id};

/// What a target past a service's cap is recorded as.
pub const OTHER_TARGET: &str = "other";

/// How the collector derives outcomes from standard spans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerivedConfig {
    /// The conventions spans are recognised by, in the order they are tried.
    pub conventions: Conventions,
    /// The attributes of an HTTP span that hold the request id its server assigned (captured
    /// response headers), the first present winning: a failed call's evidence.
    pub request_id_attributes: Vec<String>,
    /// The longest captured result read for failure markers, in bytes; a longer one is not
    /// read, and counted.
    pub max_result_bytes: usize,
    /// The most distinct derived targets and tools kept per service (counted together); a
    /// later one is recorded as [`OTHER_TARGET`] and counted.
    pub max_targets_per_service: usize,
    /// The most distinct derived targets kept over all services, which bounds the memory the
    /// cap needs.
    pub max_targets: usize,
    /// A kept target or tool that no call named for this long gives up its place under the cap.
    pub forget_targets_after: Duration,
    /// How long a counted GenAI or MCP call is remembered, so that its spans in later requests
    /// are not counted again (kept between this and twice this).
    pub join_window: Duration,
    /// The most keys the join across requests keeps (a call has one per span, per parent and
    /// per tool call id); past it the oldest are forgotten early, and counted. The default keeps
    /// the table at 2^22 slots of 17 bytes (about 72 MiB).
    pub max_join_keys: usize,
}

impl Default for DerivedConfig {
    fn default() -> Self {
        Self {
            conventions: Conventions::default(),
            request_id_attributes: vec![
                semconv::HTTP_RESPONSE_HEADER_X_REQUEST_ID.to_owned(),
                semconv::HTTP_RESPONSE_HEADER_X_REQUEST_ID_OLD.to_owned(),
            ],
            max_result_bytes: 65_536,
            max_targets_per_service: 500,
            max_targets: 200_000,
            forget_targets_after: Duration::from_secs(3600),
            join_window: Duration::from_secs(30),
            max_join_keys: 3_500_000,
        }
    }
}

/// The derivation: its configuration, and the derived targets each service has been seen with
/// (the one state extraction keeps between requests).
#[derive(Debug, Default)]
pub struct Derivation {
    config: DerivedConfig,
    targets: Mutex<TargetBook>,
    calls: Mutex<CallBook>,
}

impl Derivation {
    /// A derivation configured by `config`.
    pub fn new(config: DerivedConfig) -> Self {
        Self {
            config,
            targets: Mutex::default(),
            calls: Mutex::default(),
        }
    }

    /// Remembers the calls of a request Kafka now holds (received at `now`, Unix nanoseconds),
    /// so that their spans in later requests join them.
    pub fn remember(&self, calls: Remember, now: u64) -> Remembered {
        let mut book = self
            .calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        book.advance(now, self.config.join_window);
        book.remember(calls, self.config.max_join_keys)
    }

    /// Its configuration.
    pub fn config(&self) -> &DerivedConfig {
        &self.config
    }

    /// Which convention a span of the instrumentation scope `scope` is a call of, if any (its
    /// index in the table): done for every span that carries no `tool.outcome` event.
    pub(super) fn recognise(&self, span: &Span, scope: &str) -> Option<usize> {
        self.config.conventions.recognise(span, scope)
    }

    fn convention(&self, index: usize) -> &Convention {
        self.config.conventions.get(index)
    }
}

/// A span recognised as a derived call, waiting for the request's other spans.
pub(super) struct Candidate<'a> {
    /// Its resource's index in the request's list of services.
    pub service: usize,
    pub span: &'a Span,
    /// The index of the convention it was recognised by.
    pub convention: usize,
    /// That convention's layer.
    pub source: OutcomeSource,
}

/// A span's place in its trace: (trace id, span id).
pub(super) type SpanKey<'a> = (&'a [u8], &'a [u8]);

/// What derivation made of one request.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct DerivedStats {
    /// Spans recognised as calls of a derived source: each is counted, joined into another
    /// span's call, or refused.
    pub spans: u64,
    /// Calls refused, one rejection each (with the spans joined into them).
    pub refused: u64,
    /// Calls counted, by source, convention and class.
    pub calls: Vec<(OutcomeSource, String, CountClass, u64)>,
    /// Calls without an error on their spans that their captured result showed failed.
    pub result_failures: u64,
    /// Captured results longer than `max_result_bytes`, not read: their calls stay unverified.
    pub results_unread: u64,
    /// Calls counted from spans without a sampling threshold (their count is of the spans
    /// kept).
    pub sampling_unknown: u64,
    /// Derived spans not counted because an adapter's span declared their call.
    pub joined_into_adapter: u64,
    /// GenAI or MCP spans counted as part of another span of the same call.
    pub joined_into_derived: u64,
    /// GenAI or MCP calls not counted because an earlier request counted them: the span that
    /// names each (its other spans are in `joined_into_derived`).
    pub joined_across_requests: u64,
    /// Calls an earlier request counted that a later one counted again, at the failure or
    /// cancellation its spans showed and the earlier ones did not.
    pub revised_across_requests: u64,
    /// Calls whose target or tool was folded into [`OTHER_TARGET`] by the cap.
    pub folded_targets: u64,
    /// Failed calls past the request's `max_events_per_request` (with the adapter's events
    /// before them): counted, but without an event of their own; one rejection stands for them.
    pub events_over_limit: u64,
}

impl DerivedStats {
    /// Calls counted as `access_failure`: one event each, but for those over the limit.
    pub fn failed_calls(&self) -> u64 {
        self.calls
            .iter()
            .filter(|(_, _, class, _)| *class == CountClass::Outcome(OutcomeClass::AccessFailure))
            .map(|(_, _, _, n)| n)
            .sum()
    }
}

/// The calls of one request's candidates: failure events, count points, refusals.
pub(super) struct Derived<'a> {
    pub events: Vec<OutcomeEventRef<'a>>,
    pub counts: Vec<OutcomeCount>,
    pub refusals: Vec<(Refusal, usize, &'a Span)>,
    /// The service and span of the first failed call past the event limit.
    pub first_over_limit: Option<(usize, &'a Span)>,
    /// For an adapter's span under a GenAI or MCP span with a tool call id, that id: the
    /// adapter's events on the span take it.
    pub adapter_call_ids: Vec<(SpanKey<'a>, &'a str)>,
    /// The counted GenAI and MCP calls, to remember once Kafka holds the request.
    pub remember: Remember,
    pub stats: DerivedStats,
}

/// Derives the calls of `candidates`; `adapter_spans` are the request's spans that an adapter
/// declared (its `tool.call` spans), and `all_spans` every span of the request, for the joins.
pub(super) fn derive<'a>(
    candidates: &[Candidate<'a>],
    adapter_spans: &[SpanKey<'a>],
    all_spans: impl Fn() -> Vec<&'a Span>,
    services: &[Service<'a>],
    received: &Received<'a>,
    derivation: &Derivation,
    room_for_events: usize,
) -> Derived<'a> {
    let mut out = Derived {
        first_over_limit: None,
        adapter_call_ids: Vec::new(),
        events: Vec::new(),
        counts: Vec::new(),
        refusals: Vec::new(),
        remember: Remember::default(),
        stats: DerivedStats::default(),
    };
    // Where each candidate's call is counted: itself, or the candidate that stands for the
    // call (`None`: an adapter's span does).
    out.stats.spans = candidates.len() as u64;
    // A span sent twice in one request is one call: its copies stand for it.
    // Keyed by the ids as numbers: hashed and compared without a call per byte string. A span
    // whose ids are not of their lengths is refused below, whatever its copies.
    let mut first_copy: HashMap<(u128, u64), usize> = HashMap::default();
    let copy_of: Vec<Option<usize>> = candidates
        .iter()
        .enumerate()
        .map(|(index, c)| {
            let trace = <[u8; 16]>::try_from(c.span.trace_id.as_slice()).ok()?;
            let span = <[u8; 8]>::try_from(c.span.span_id.as_slice()).ok()?;
            let key = (u128::from_ne_bytes(trace), u64::from_ne_bytes(span));
            let first = *first_copy.entry(key).or_insert(index);
            (first != index).then_some(first)
        })
        .collect();
    let mut stands_for: Vec<Option<usize>> = copy_of
        .iter()
        .enumerate()
        .map(|(index, copy)| Some(copy.unwrap_or(index)))
        .collect();
    let joinable = joinable_traces(candidates, adapter_spans);
    if !joinable.is_empty() {
        let adapter_spans: HashSet<SpanKey<'a>> = adapter_spans.iter().copied().collect();
        let spans: Vec<&'a Span> = all_spans()
            .into_iter()
            .filter(|span| joinable.contains(span.trace_id.as_slice()))
            .collect();
        out.adapter_call_ids = join(
            candidates,
            &copy_of,
            &adapter_spans,
            &spans,
            derivation,
            &mut stands_for,
        );
    }
    // (call, member) for every counted span, sorted: each call's spans are one run, in request
    // order (the call's own span among them, wherever the request put it).
    let mut members: Vec<(usize, usize)> = Vec::with_capacity(candidates.len());
    for (index, call) in stands_for.iter().enumerate() {
        match call {
            None => out.stats.joined_into_adapter += 1,
            Some(call) => {
                if *call != index {
                    out.stats.joined_into_derived += 1;
                }
                members.push((*call, index));
            }
        }
    }
    members.sort_unstable();
    let mut points: HashMap<PointKey, Point> = HashMap::default();
    let service_keys: Vec<u64> = services
        .iter()
        .map(|service| TargetBook::service_key(&service.name))
        .collect();
    let mut book = derivation
        .targets
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    book.advance(received.time_unix_nano, derivation.config());
    let mut earlier = derivation
        .calls
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    earlier.advance(received.time_unix_nano, derivation.config().join_window);
    let mut lookup = Lookup::default();
    for call_members in members.chunk_by(|a, b| a.0 == b.0) {
        let index = call_members[0].0;
        let candidate = &candidates[index];
        let service = &services[candidate.service];
        let config = derivation.config();
        let convention = derivation.convention(candidate.convention);
        let own_facts = Facts::read(candidate.span, convention);
        let call = match describe(candidate, convention, &own_facts, received) {
            Ok(call) => call,
            Err(refusal) => {
                out.stats.refused += 1;
                out.refusals
                    .push((refusal, candidate.service, candidate.span));
                continue;
            }
        };
        // The outermost span names the call. It failed when any of its spans failed (the
        // call's own span first, then the others in request order); else it was cancelled
        // when one of them was; else its captured result decides, when one holds a failure
        // marker; else contact was made.
        let own_outcome = outcome_of(candidate.span, convention, &own_facts);
        let outcomes: Vec<(usize, Facts<'a>, DerivedOutcome)> =
            std::iter::once((index, own_facts, own_outcome))
                .chain(
                    call_members
                        .iter()
                        .map(|&(_, member)| member)
                        .filter(|m| *m != index)
                        .map(|member| {
                            let span = candidates[member].span;
                            let convention = derivation.convention(candidates[member].convention);
                            let facts = Facts::read(span, convention);
                            let outcome = outcome_of(span, convention, &facts);
                            (member, facts, outcome)
                        }),
                )
                .collect();
        let ending = outcomes
            .iter()
            .find(|(_, _, outcome)| matches!(outcome, DerivedOutcome::Failure { .. }))
            .or_else(|| {
                outcomes
                    .iter()
                    .find(|(_, _, outcome)| matches!(outcome, DerivedOutcome::Cancelled { .. }))
            });
        let failure: Option<Failure<'_, 'a>> = match ending {
            Some((member, facts, DerivedOutcome::Failure { kind, error_type })) => {
                let failed = candidates[*member].span;
                let exception = exception_of(failed);
                Some(Failure {
                    from_result: false,
                    member: *member,
                    facts,
                    kind: *kind,
                    error_type: Cow::Borrowed(error_type),
                    message: status_message(failed)
                        .or(exception.message)
                        .map(Cow::Borrowed),
                    exception_type: exception.exception_type,
                })
            }
            Some(_) => None,
            None => outcomes.iter().find_map(|(member, facts, _)| {
                let span = candidates[*member].span;
                let convention = derivation.convention(candidates[*member].convention);
                match convention.check_result(span, config.max_result_bytes) {
                    ResultCheck::Failure { attribute, marker } => Some(Failure {
                        from_result: true,
                        member: *member,
                        facts,
                        kind: DerivedKind::ToolError,
                        error_type: Cow::Borrowed(DerivedKind::ToolError.as_str()),
                        message: Some(Cow::Owned(format!(
                            "the captured result in {attribute} holds {marker}, though its \
                                 span reports no error"
                        ))),
                        exception_type: None,
                    }),
                    ResultCheck::TooLarge => {
                        out.stats.results_unread += 1;
                        None
                    }
                    ResultCheck::NotCaptured | ResultCheck::Clean => None,
                }
            }),
        };
        if candidate.source != OutcomeSource::Http {
            let rank = match (ending, &failure) {
                (_, Some(_)) => Rank::Failed,
                (Some((_, _, DerivedOutcome::Cancelled { .. })), None) => Rank::Cancelled,
                _ => Rank::Contact,
            };
            let spans = call_members.iter().map(|&(_, member)| {
                let span = candidates[member].span;
                let convention = derivation.convention(candidates[member].convention);
                (span, first_string(&span.attributes, &convention.call_id))
            });
            let trace = candidate.span.trace_id.as_slice();
            match lookup.call(&earlier, trace, spans, rank, &mut out.remember) {
                Earlier::Joined => {
                    out.stats.joined_across_requests += 1;
                    continue;
                }
                Earlier::Revised => out.stats.revised_across_requests += 1,
                Earlier::New => {}
            }
        }
        // Counted only for a call that is counted, not for one an earlier request counted.
        if failure.as_ref().is_some_and(|f| f.from_result) {
            out.stats.result_failures += 1;
        }
        let service_key = service_keys[candidate.service];
        let keep_target = book.admit(service_key, Kept::Target, &call.target, config);
        let keep_tool = book.admit(service_key, Kept::Tool, call.tool_name, config);
        if !(keep_target && keep_tool) {
            out.stats.folded_targets += 1;
        }
        let target = if keep_target {
            call.target
        } else {
            OTHER_TARGET.to_owned()
        };
        let tool_name = if keep_tool {
            call.tool_name
        } else {
            OTHER_TARGET
        };
        let class = match (ending, failure) {
            (_, Some(failure)) if out.events.len() >= room_for_events => {
                out.stats.events_over_limit += 1;
                out.first_over_limit
                    .get_or_insert((candidate.service, candidates[failure.member].span));
                CountClass::Outcome(OutcomeClass::AccessFailure)
            }
            (_, Some(failure)) => {
                let limit = received.limits.max_value_bytes;
                let owned = |text: &str| EventText::from(bounded(text, limit).into_owned());
                let tool_call_id = outcomes.iter().find_map(|(member, _, _)| {
                    let convention = derivation.convention(candidates[*member].convention);
                    first_string(&candidates[*member].span.attributes, &convention.call_id)
                });
                let request_id = outcomes.iter().find_map(|(member, _, _)| {
                    first_text(
                        &candidates[*member].span.attributes,
                        &config.request_id_attributes,
                    )
                });
                let facts = failure.facts;
                out.events.push(OutcomeEventRef {
                    schema_version: RECORD_SCHEMA_VERSION,
                    event_id: event_id(service, candidate.source, candidate.span).into(),
                    trace_id: call.trace_id.into(),
                    span_id: call.span_id.into(),
                    event_time_unix_nano: call.time_unix_nano,
                    service_name: service.name.clone().into(),
                    service_instance_id: service.instance.clone().into(),
                    outcome_class: OutcomeClass::AccessFailure.as_str().into(),
                    tool_name: tool_name.into(),
                    tool_target: target.clone().into(),
                    failure_kind: FailureKind::from(failure.kind).as_str().into(),
                    // A derived call's span does not say what the caller did next.
                    retry_action: "".into(),
                    retry_attempt: facts.attempt(),
                    retry_max_attempts: 0,
                    retry_backoff_ms: None,
                    http_status_code: facts
                        .http_status
                        .and_then(|status| u16::try_from(status).ok())
                        .map(u32::from),
                    error_type: Some(owned(&failure.error_type)),
                    partial_returned: None,
                    partial_expected: None,
                    coverage: None,
                    dropped: None,
                    authority: None,
                    received_time_unix_nano: received.time_unix_nano,
                    collector_id: received.collector_id.into(),
                    source: Some(candidate.source.as_str().into()),
                    error_message: failure.message.as_deref().map(owned),
                    exception_type: failure.exception_type.map(owned),
                    rpc_status_code: facts.rpc_status.map(|code| code.to_string().into()),
                    tool_call_id: tool_call_id.map(owned),
                    evidence_kind: request_id.map(|_| EvidenceKind::RequestId.as_str().into()),
                    evidence_value: request_id.map(owned),
                    convention: Some(convention.name.clone().into()),
                    // A derived call has no adapter to say where it ran.
                    source_system: None,
                    actor: None,
                    adapter: None,
                });
                CountClass::Outcome(OutcomeClass::AccessFailure)
            }
            (Some((_, _, DerivedOutcome::Cancelled { .. })), None) => CountClass::Cancelled,
            // No span of the call had a failure or a cancellation, and no result a marker.
            _ => CountClass::Unverified,
        };
        // The call is sampled as the span that names it was.
        let sampling = sampling_of(&candidate.span.trace_state);
        let key = PointKey {
            service: candidate.service,
            source: candidate.source,
            convention: candidate.convention,
            tool: tool_name,
            target,
            class,
            minute: call.time_unix_nano / NANOS_PER_MINUTE,
            sampling: match sampling {
                SpanSampling::Known { .. } => Sampling::Weighted,
                SpanSampling::Unknown => Sampling::Unknown,
            },
        };
        let point = points.entry(key).or_insert_with(|| Point {
            start: call.time_unix_nano,
            time: call.time_unix_nano,
            value: 0,
            weight: 0.0,
            ids: Sha256::new(),
        });
        point.start = point.start.min(call.time_unix_nano);
        point.time = point.time.max(call.time_unix_nano);
        point.value += 1;
        if let SpanSampling::Known { adjusted_count } = sampling {
            point.weight += adjusted_count;
        }
        point.ids.update(call.trace_id);
        point.ids.update(call.span_id);
    }
    drop(book);
    drop(earlier);
    let mut calls: HashMap<(OutcomeSource, usize, CountClass), u64> = HashMap::default();
    for (key, point) in points {
        *calls
            .entry((key.source, key.convention, key.class))
            .or_default() += point.value;
        if key.sampling == Sampling::Unknown {
            out.stats.sampling_unknown += point.value;
        }
        // A weighted point counts the calls its spans stand for, rounded to a whole call: at
        // least the spans themselves, each standing for one call or more.
        let value = match key.sampling {
            Sampling::Weighted => (point.weight.round() as u64).max(point.value),
            Sampling::Unknown => point.value,
        };
        let service = &services[key.service];
        let ids = point.ids.finalize();
        out.counts.push(OutcomeCount {
            schema_version: RECORD_SCHEMA_VERSION,
            point_id: content_id(&[
                service.name.as_bytes(),
                service.instance.as_bytes(),
                key.source.as_str().as_bytes(),
                key.class.as_str().as_bytes(),
                &ids,
            ]),
            service_name: service.name.clone().into_owned(),
            service_instance_id: service.instance.clone().into_owned(),
            tool_name: key.tool.to_owned(),
            tool_target: key.target,
            outcome_class: key.class.as_str().to_owned(),
            start_time_unix_nano: point.start,
            time_unix_nano: point.time,
            value,
            temporality: Temporality::Delta.into(),
            received_time_unix_nano: received.time_unix_nano,
            collector_id: received.collector_id.to_owned(),
            export_interval_ms: None,
            source: Some(key.source.as_str().to_owned()),
            convention: Some(derivation.convention(key.convention).name.clone()),
            sampling: Some(key.sampling.as_str().to_owned()),
        });
    }
    // The points of one request in a stable order, so that a retried request is the same.
    out.counts.sort_by(|a, b| a.point_id.cmp(&b.point_id));
    let mut calls: Vec<_> = calls
        .into_iter()
        .map(|((source, convention, class), n)| {
            let name = derivation.convention(convention).name.clone();
            (source, name, class, n)
        })
        .collect();
    calls.sort_unstable();
    out.stats.calls = calls;
    out
}

const NANOS_PER_MINUTE: u64 = 60_000_000_000;

/// A failed call: the span that says so, and what it says.
struct Failure<'o, 'a> {
    /// Whether a captured result said so, when no span reported an error.
    from_result: bool,
    /// The failed span's index among the candidates.
    member: usize,
    facts: &'o Facts<'a>,
    kind: DerivedKind,
    error_type: Cow<'o, str>,
    message: Option<Cow<'a, str>>,
    exception_type: Option<&'a str>,
}

/// What one span of a call says it came to, read by its convention.
fn outcome_of<'a>(span: &'a Span, convention: &Convention, facts: &Facts<'a>) -> DerivedOutcome {
    classify(span_error(span, convention, facts))
}

#[derive(PartialEq, Eq, Hash)]
struct PointKey<'a> {
    service: usize,
    source: OutcomeSource,
    convention: usize,
    tool: &'a str,
    target: String,
    class: CountClass,
    minute: u64,
    sampling: Sampling,
}

struct Point {
    start: u64,
    time: u64,
    /// The spans counted.
    value: u64,
    /// The sum of their adjusted counts, for a weighted point.
    weight: f64,
    /// The calls' span ids, in request order: the point's identity.
    ids: Sha256,
}
