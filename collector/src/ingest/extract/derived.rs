//! Outcomes derived from the spans that standard instrumentation already emits (the contract's
//! section 10.7): GenAI `execute_tool` spans, MCP `tools/call` spans and HTTP client spans.
//!
//! Such a span carries no Candor class. A span with `error.type`, or with status ERROR, is a
//! failed call ([`super::failure_type::classify`]), stored as an `access_failure` event of its source;
//! a span without error says only that contact was made, so it is counted as `unverified`,
//! never as a success. Every recognised call is counted in a delta point of `outcome_counts`
//! per service, instance, source, tool, target, class and minute, which gives a derived group
//! a denominator without a counter.
//!
//! **One call counted once**, decided here, within one request:
//! - a derived span under an adapter's `tool.call` span (or the adapter's span itself) is the
//!   adapter's call: its declaration wins and the derived span is not counted;
//! - GenAI and MCP spans of one call (nested, or sharing `gen_ai.tool.call.id` in one trace)
//!   count once, as the outermost of them, failed when any of them failed;
//! - an HTTP span under a GenAI or MCP span is a request the tool made, and counts on its own.
//!
//! Spans of one call that travel in different requests are not joined (see ARCHITECTURE.md).

use std::borrow::Cow;
use std::sync::Mutex;
use std::time::Duration;

use candor_records::proto::{
    CountClass, OutcomeCount, OutcomeSource, RECORD_SCHEMA_VERSION, Temporality,
};
use candor_schema::names::{self, attr, semconv};
use candor_schema::{EvidenceKind, FailureKind, OutcomeClass};
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::{Span, span, status};
use sha2::{Digest, Sha256};

use super::failure_type::{DerivedOutcome, SpanError, classify};
use super::outcome::status_message;

/// Maps and sets keyed by span ids and short texts, hashed with foldhash: the keys come from one
/// request, and SipHash's resistance to chosen keys would cost a few times more per key here.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
use super::{
    OutcomeEventRef, Received, Refusal, RejectReason, Service, bounded, content_id, refuse,
};

/// What a target past a service's cap is recorded as.
pub const OTHER_TARGET: &str = "other";

/// How the collector derives outcomes from standard spans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerivedConfig {
    /// Derive from GenAI `execute_tool` spans.
    pub genai: bool,
    /// Derive from MCP `tools/call` spans.
    pub mcp: bool,
    /// Derive from HTTP client spans.
    pub http: bool,
    /// The attributes that name a GenAI or MCP span's tool, the first present winning.
    pub tool_name_attributes: Vec<String>,
    /// The attributes that identify one tool call across its GenAI and MCP spans.
    pub tool_call_id_attributes: Vec<String>,
    /// The attributes of an HTTP span that hold the request id its server assigned (captured
    /// response headers), the first present winning: a failed call's evidence.
    pub request_id_attributes: Vec<String>,
    /// The most distinct derived targets and tools kept per service (counted together); a
    /// later one is recorded as [`OTHER_TARGET`] and counted.
    pub max_targets_per_service: usize,
    /// The most distinct derived targets kept over all services, which bounds the memory the
    /// cap needs.
    pub max_targets: usize,
    /// A kept target or tool that no call named for this long gives up its place under the cap.
    pub forget_targets_after: Duration,
}

impl Default for DerivedConfig {
    fn default() -> Self {
        Self {
            genai: true,
            mcp: true,
            http: true,
            tool_name_attributes: vec![
                semconv::GEN_AI_TOOL_NAME.to_owned(),
                semconv::MCP_TOOL_NAME.to_owned(),
            ],
            tool_call_id_attributes: vec![semconv::GEN_AI_TOOL_CALL_ID.to_owned()],
            request_id_attributes: vec![
                semconv::HTTP_RESPONSE_HEADER_X_REQUEST_ID.to_owned(),
                semconv::HTTP_RESPONSE_HEADER_X_REQUEST_ID_OLD.to_owned(),
            ],
            max_targets_per_service: 500,
            max_targets: 200_000,
            forget_targets_after: Duration::from_secs(3600),
        }
    }
}

/// The derivation: its configuration, and the derived targets each service has been seen with
/// (the one state extraction keeps between requests).
#[derive(Debug, Default)]
pub struct Derivation {
    config: DerivedConfig,
    targets: Mutex<TargetBook>,
}

/// The targets and tools each service keeps under the cap. Time is cut into periods of
/// `forget_targets_after`; an entry remembers the last period a call named it, and when a new
/// period starts, the entries not named in the one before are forgotten. A target named at
/// least once a period keeps its place; one that stops being named frees it within two periods.
#[derive(Debug, Default)]
struct TargetBook {
    /// Per service (by hash), the hashes of the targets and tools it keeps, with the last period
    /// that named each.
    by_service: HashMap<u64, HashMap<u64, u64>>,
    total: usize,
    /// The period of the latest call seen.
    period: u64,
}

impl Derivation {
    /// A derivation configured by `config`.
    pub fn new(config: DerivedConfig) -> Self {
        Self {
            config,
            targets: Mutex::default(),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &DerivedConfig {
        &self.config
    }

    /// Which source a span is a call of, if any: a cheap look at its kind, name and a few
    /// attributes, done for every span that carries no `tool.outcome` event.
    pub(super) fn recognise(&self, span: &Span) -> Option<OutcomeSource> {
        let config = &self.config;
        if !(config.genai || config.mcp || config.http) {
            return None;
        }
        let mut genai = false;
        let mut mcp = false;
        let mut http = false;
        for kv in &span.attributes {
            match kv.key.as_str() {
                semconv::GEN_AI_OPERATION_NAME => {
                    genai = string(kv) == Some(semconv::EXECUTE_TOOL);
                }
                semconv::MCP_METHOD_NAME => {
                    mcp = string(kv) == Some(semconv::MCP_TOOLS_CALL);
                }
                semconv::HTTP_REQUEST_METHOD | semconv::HTTP_METHOD => http = true,
                _ => {}
            }
        }
        if !genai {
            genai = span
                .name
                .strip_prefix(semconv::EXECUTE_TOOL)
                .is_some_and(|rest| rest.starts_with(' '));
        }
        if mcp {
            config.mcp.then_some(OutcomeSource::Mcp)
        } else if genai {
            config.genai.then_some(OutcomeSource::Genai)
        } else if http && span.kind == span::SpanKind::Client as i32 {
            config.http.then_some(OutcomeSource::Http)
        } else {
            None
        }
    }
}

/// A span recognised as a derived call, waiting for the request's other spans.
pub(super) struct Candidate<'a> {
    /// Its resource's index in the request's list of services.
    pub service: usize,
    pub span: &'a Span,
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
    /// Calls counted, by source and class.
    pub calls: Vec<(OutcomeSource, CountClass, u64)>,
    /// Derived spans not counted because an adapter's span declared their call.
    pub joined_into_adapter: u64,
    /// GenAI or MCP spans counted as part of another span of the same call.
    pub joined_into_derived: u64,
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
            .filter(|(_, class, _)| *class == CountClass::Outcome(OutcomeClass::AccessFailure))
            .map(|(_, _, n)| n)
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
    for call_members in members.chunk_by(|a, b| a.0 == b.0) {
        let index = call_members[0].0;
        let candidate = &candidates[index];
        let service = &services[candidate.service];
        let config = derivation.config();
        let own_facts = Facts::read(candidate.span, config);
        let call = match describe(candidate, &own_facts, received) {
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
        // when one of them was; else contact was made.
        let own_outcome = classify(span_error(candidate.span, &own_facts));
        let outcomes: Vec<(usize, Facts<'a>, DerivedOutcome)> =
            std::iter::once((index, own_facts, own_outcome))
                .chain(
                    call_members
                        .iter()
                        .map(|&(_, member)| member)
                        .filter(|m| *m != index)
                        .map(|member| {
                            let span = candidates[member].span;
                            let facts = Facts::read(span, config);
                            let outcome = classify(span_error(span, &facts));
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
        let class = match ending {
            // Only a failure or a cancellation is looked for: no span of the call had either.
            None | Some((_, _, DerivedOutcome::Contact)) => CountClass::Unverified,
            Some((_, _, DerivedOutcome::Cancelled { .. })) => CountClass::Cancelled,
            Some((member, _, DerivedOutcome::Failure { .. }))
                if out.events.len() >= room_for_events =>
            {
                out.stats.events_over_limit += 1;
                out.first_over_limit
                    .get_or_insert((candidate.service, candidates[*member].span));
                CountClass::Outcome(OutcomeClass::AccessFailure)
            }
            Some((member, facts, DerivedOutcome::Failure { kind, error_type })) => {
                let failed = candidates[*member].span;
                let limit = received.limits.max_value_bytes;
                let owned = |text: &str| Cow::Owned(bounded(text, limit).into_owned());
                let exception = exception_of(failed);
                let tool_call_id = outcomes.iter().find_map(|(member, _, _)| {
                    first_string(
                        &candidates[*member].span.attributes,
                        &config.tool_call_id_attributes,
                    )
                });
                let request_id = outcomes.iter().find_map(|(member, _, _)| {
                    first_text(
                        &candidates[*member].span.attributes,
                        &config.request_id_attributes,
                    )
                });
                out.events.push(OutcomeEventRef {
                    event_id: event_id(service, candidate.source, candidate.span),
                    trace_id: call.trace_id,
                    span_id: call.span_id,
                    event_time_unix_nano: call.time_unix_nano,
                    service_name: service.name.clone(),
                    service_instance_id: service.instance.clone(),
                    outcome_class: OutcomeClass::AccessFailure,
                    tool_name,
                    tool_target: Cow::Owned(target.clone()),
                    failure_kind: FailureKind::from(*kind),
                    retry_action: None,
                    retry_attempt: facts.attempt(),
                    retry_max_attempts: 0,
                    retry_backoff_ms: None,
                    http_status_code: facts
                        .http_status
                        .and_then(|status| u16::try_from(status).ok())
                        .map(u32::from),
                    error_type: Some(Cow::Owned(
                        bounded(error_type, received.limits.max_value_bytes).into_owned(),
                    )),
                    partial_returned: None,
                    partial_expected: None,
                    coverage: None,
                    dropped: None,
                    authority: None,
                    received_time_unix_nano: received.time_unix_nano,
                    collector_id: received.collector_id,
                    source: candidate.source,
                    error_message: status_message(failed).or(exception.message).map(owned),
                    exception_type: exception.exception_type.map(owned),
                    rpc_status_code: facts.rpc_status.map(|code| Cow::Owned(code.to_string())),
                    tool_call_id: tool_call_id.map(owned),
                    evidence_kind: request_id.map(|_| EvidenceKind::RequestId),
                    evidence_value: request_id.map(owned),
                });
                CountClass::Outcome(OutcomeClass::AccessFailure)
            }
        };
        let key = PointKey {
            service: candidate.service,
            source: candidate.source,
            tool: tool_name,
            target,
            class,
            minute: call.time_unix_nano / NANOS_PER_MINUTE,
        };
        let point = points.entry(key).or_insert_with(|| Point {
            start: call.time_unix_nano,
            time: call.time_unix_nano,
            value: 0,
            ids: Sha256::new(),
        });
        point.start = point.start.min(call.time_unix_nano);
        point.time = point.time.max(call.time_unix_nano);
        point.value += 1;
        point.ids.update(call.trace_id);
        point.ids.update(call.span_id);
    }
    drop(book);
    let mut calls: HashMap<(OutcomeSource, CountClass), u64> = HashMap::default();
    for (key, point) in points {
        *calls.entry((key.source, key.class)).or_default() += point.value;
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
            value: point.value,
            temporality: Temporality::Delta.into(),
            received_time_unix_nano: received.time_unix_nano,
            collector_id: received.collector_id.to_owned(),
            export_interval_ms: None,
            source: Some(key.source.as_str().to_owned()),
        });
    }
    // The points of one request in a stable order, so that a retried request is the same.
    out.counts.sort_by(|a, b| a.point_id.cmp(&b.point_id));
    let mut calls: Vec<_> = calls
        .into_iter()
        .map(|((source, class), n)| (source, class, n))
        .collect();
    calls.sort_unstable();
    out.stats.calls = calls;
    out
}

const NANOS_PER_MINUTE: u64 = 60_000_000_000;

#[derive(PartialEq, Eq, Hash)]
struct PointKey<'a> {
    service: usize,
    source: OutcomeSource,
    tool: &'a str,
    target: String,
    class: CountClass,
    minute: u64,
}

struct Point {
    start: u64,
    time: u64,
    value: u64,
    /// The calls' span ids, in request order: the point's identity.
    ids: Sha256,
}

/// The traces in which one span's call can be another's: those holding an adapter's span and a
/// candidate, or two GenAI or MCP candidates. Most requests have none, and skip the join.
fn joinable_traces<'a>(
    candidates: &[Candidate<'a>],
    adapter_spans: &[SpanKey<'a>],
) -> HashSet<&'a [u8]> {
    // Per trace: its GenAI and MCP candidates, and whether it has any candidate.
    let mut traces: HashMap<&'a [u8], (u32, bool)> = HashMap::default();
    for candidate in candidates {
        let entry = traces
            .entry(candidate.span.trace_id.as_slice())
            .or_default();
        entry.0 += u32::from(candidate.source != OutcomeSource::Http);
        entry.1 = true;
    }
    let mut joinable: HashSet<&'a [u8]> = traces
        .iter()
        .filter(|(_, (tool_calls, _))| *tool_calls >= 2)
        .map(|(trace, _)| *trace)
        .collect();
    for (trace, _) in adapter_spans {
        if traces.get(trace).is_some_and(|(_, any)| *any) {
            joinable.insert(trace);
        }
    }
    joinable
}

/// Decides which candidates' calls another span stands for (see the module's rules). Spans are
/// gathered into calls with a union-find: a GenAI or MCP span joins its nearest GenAI or MCP
/// ancestor, spans sharing a tool call id in a trace join each other, a copy joins its first;
/// a call with any span under an adapter's span is the adapter's. The outermost span (one
/// without a GenAI or MCP ancestor; a GenAI one before an MCP one, then the first) stands for
/// its call.
///
/// Returns, for each adapter's span under a GenAI or MCP span that carries a tool call id, the
/// nearest such id.
fn join<'a>(
    candidates: &[Candidate<'a>],
    copy_of: &[Option<usize>],
    adapter_spans: &HashSet<SpanKey<'a>>,
    all_spans: &[&'a Span],
    derivation: &Derivation,
    stands_for: &mut [Option<usize>],
) -> Vec<(SpanKey<'a>, &'a str)> {
    let parents: HashMap<SpanKey<'a>, &'a [u8]> = all_spans
        .iter()
        .filter(|span| !span.parent_span_id.is_empty())
        .map(|span| {
            (
                (span.trace_id.as_slice(), span.span_id.as_slice()),
                span.parent_span_id.as_slice(),
            )
        })
        .collect();
    let mut candidate_at: HashMap<SpanKey<'a>, usize> = HashMap::default();
    for (index, c) in candidates.iter().enumerate() {
        candidate_at
            .entry((c.span.trace_id.as_slice(), c.span.span_id.as_slice()))
            .or_insert(index);
    }
    let tool_call = |index: usize| candidates[index].source != OutcomeSource::Http;
    let mut calls = UnionFind::new(candidates.len());
    let mut under_adapter = vec![false; candidates.len()];
    let mut nested = vec![false; candidates.len()];
    for (index, candidate) in candidates.iter().enumerate() {
        if let Some(first) = copy_of[index] {
            calls.union(index, first);
            nested[index] = true;
            continue;
        }
        let trace = candidate.span.trace_id.as_slice();
        let mut at = candidate.span.span_id.as_slice();
        // A cycle or a very deep trace stops the walk: the bound is far past real nesting, and
        // a span past it still joins its call through the spans between.
        for _ in 0..MAX_ANCESTORS {
            let Some(parent) = parents.get(&(trace, at)) else {
                break;
            };
            at = parent;
            if adapter_spans.contains(&(trace, at)) {
                under_adapter[index] = true;
                break;
            }
            if !nested[index]
                && let Some(&outer) = candidate_at.get(&(trace, at))
                && tool_call(index)
                && tool_call(outer)
            {
                calls.union(index, outer);
                nested[index] = true;
            }
        }
    }
    let ids = &derivation.config().tool_call_id_attributes;
    let mut first_with_id: HashMap<(&[u8], &str), usize> = HashMap::default();
    for (index, candidate) in candidates.iter().enumerate() {
        if copy_of[index].is_some() || !tool_call(index) {
            continue;
        }
        let Some(id) = first_string(&candidate.span.attributes, ids) else {
            continue;
        };
        let first = *first_with_id
            .entry((candidate.span.trace_id.as_slice(), id))
            .or_insert(index);
        calls.union(index, first);
    }
    // Per call (its union-find root): whether an adapter declared it, and its outermost span.
    let mut adapters: HashSet<usize> = HashSet::default();
    let mut outermost: HashMap<usize, usize> = HashMap::default();
    for index in 0..candidates.len() {
        let root = calls.find(index);
        if under_adapter[index] {
            adapters.insert(root);
        }
        if !nested[index] {
            let best = outermost.entry(root).or_insert(index);
            let genai = |i: usize| candidates[i].source == OutcomeSource::Genai;
            if genai(index) && !genai(*best) {
                *best = index;
            }
        }
    }
    for (index, slot) in stands_for.iter_mut().enumerate() {
        let root = calls.find(index);
        *slot = if adapters.contains(&root) {
            None
        } else {
            // Every call has a span without an ancestor in it, but for a cycle of parents;
            // then its root stands for it.
            Some(outermost.get(&root).copied().unwrap_or(root))
        };
    }
    let mut adapter_call_ids = Vec::new();
    for &(trace, span) in adapter_spans {
        let mut at = span;
        for _ in 0..MAX_ANCESTORS {
            let Some(parent) = parents.get(&(trace, at)) else {
                break;
            };
            at = parent;
            let id = candidate_at
                .get(&(trace, at))
                .filter(|&&index| tool_call(index))
                .and_then(|&index| first_string(&candidates[index].span.attributes, ids));
            if let Some(id) = id {
                adapter_call_ids.push(((trace, span), id));
                break;
            }
        }
    }
    adapter_call_ids
}

/// Disjoint sets of candidates, by index: path halving and union by size keep every operation
/// near constant time, however the spans of a request are joined.
struct UnionFind {
    parent: Vec<usize>,
    size: Vec<usize>,
}

impl UnionFind {
    fn new(n: usize) -> Self {
        Self {
            parent: (0..n).collect(),
            size: vec![1; n],
        }
    }

    fn find(&mut self, mut at: usize) -> usize {
        while self.parent[at] != at {
            self.parent[at] = self.parent[self.parent[at]];
            at = self.parent[at];
        }
        at
    }

    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a == b {
            return;
        }
        let (big, small) = if self.size[a] >= self.size[b] {
            (a, b)
        } else {
            (b, a)
        };
        self.parent[small] = big;
        self.size[big] += self.size[small];
    }
}

/// How far up a trace the join looks for the span that declared a call.
const MAX_ANCESTORS: usize = 128;

/// What names a derived call: its ids, time, tool and target.
struct Call<'a> {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    time_unix_nano: u64,
    tool_name: &'a str,
    target: String,
}

fn describe<'a>(
    candidate: &Candidate<'a>,
    facts: &Facts<'a>,
    received: &Received<'_>,
) -> Result<Call<'a>, Refusal> {
    let span = candidate.span;
    let trace_id: [u8; 16] = match span.trace_id.as_slice().try_into() {
        Ok(id) if id != [0; 16] => id,
        _ => {
            return Err(refuse(
                RejectReason::InvalidTraceId,
                format!("trace id of {} bytes", span.trace_id.len()),
            ));
        }
    };
    let span_id: [u8; 8] = match span.span_id.as_slice().try_into() {
        Ok(id) if id != [0; 8] => id,
        _ => {
            return Err(refuse(
                RejectReason::InvalidSpanId,
                format!("span id of {} bytes", span.span_id.len()),
            ));
        }
    };
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
                .or_else(|| tool_in_span_name(&span.name, source))
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

/// The tool named in a span's name: `execute_tool {name}`, `tools/call {name}` or
/// `MCP send tools/call {name}`.
fn tool_in_span_name(name: &str, source: OutcomeSource) -> Option<&str> {
    let marker = match source {
        OutcomeSource::Mcp => semconv::MCP_TOOLS_CALL,
        _ => semconv::EXECUTE_TOOL,
    };
    let (_, rest) = name.split_once(marker)?;
    let tool = rest.trim();
    (!tool.is_empty()).then_some(tool)
}

/// The standard attributes of a recognised span, read in one pass.
#[derive(Default)]
struct Facts<'a> {
    tool_name: Option<&'a str>,
    error_type: Option<&'a str>,
    http_method: Option<&'a str>,
    http_status: Option<i64>,
    rpc_status: Option<i64>,
    resend_count: Option<i64>,
    url: Option<&'a str>,
    url_scheme: Option<&'a str>,
    url_template: Option<&'a str>,
    server_address: Option<&'a str>,
    server_port: Option<i64>,
    network_transport: Option<&'a str>,
}

impl<'a> Facts<'a> {
    fn read(span: &'a Span, config: &DerivedConfig) -> Self {
        let mut facts = Facts::default();
        let mut tool_rank = usize::MAX;
        for kv in &span.attributes {
            let key = kv.key.as_str();
            match key {
                attr::ERROR_TYPE => facts.error_type = string(kv),
                semconv::HTTP_REQUEST_METHOD => facts.http_method = string(kv),
                semconv::HTTP_METHOD => facts.http_method = facts.http_method.or(string(kv)),
                attr::HTTP_STATUS_CODE => facts.http_status = integer(kv),
                semconv::HTTP_STATUS_CODE_OLD => {
                    facts.http_status = facts.http_status.or(integer(kv));
                }
                semconv::RPC_RESPONSE_STATUS_CODE => facts.rpc_status = integer(kv),
                semconv::HTTP_REQUEST_RESEND_COUNT => facts.resend_count = integer(kv),
                semconv::URL_FULL => facts.url = string(kv),
                semconv::HTTP_URL => facts.url = facts.url.or(string(kv)),
                semconv::URL_SCHEME => facts.url_scheme = string(kv),
                semconv::URL_TEMPLATE => facts.url_template = string(kv),
                semconv::SERVER_ADDRESS => facts.server_address = string(kv),
                semconv::SERVER_PORT => facts.server_port = integer(kv),
                semconv::NETWORK_TRANSPORT => facts.network_transport = string(kv),
                _ => {
                    if let Some(rank) = config.tool_name_attributes.iter().position(|k| k == key)
                        && rank < tool_rank
                        && let Some(name) = string(kv).filter(|name| !name.is_empty())
                    {
                        tool_rank = rank;
                        facts.tool_name = Some(name);
                    }
                }
            }
        }
        facts
    }

    /// The attempt this span was: 1 plus how often the request was sent again.
    fn attempt(&self) -> u32 {
        self.resend_count
            .and_then(|n| u32::try_from(n).ok())
            .map_or(1, |n| n.saturating_add(1))
    }
}

/// What a span says of its error: its status and `exception` event, and the attributes
/// [`Facts::read`] read.
fn span_error<'a>(span: &'a Span, facts: &Facts<'a>) -> SpanError<'a> {
    SpanError {
        error_type: facts.error_type,
        status_error: span
            .status
            .as_ref()
            .is_some_and(|s| s.code == status::StatusCode::Error as i32),
        exception_type: exception_of(span).exception_type,
        http_status: facts.http_status,
        rpc_status: facts.rpc_status,
    }
}

/// What a span's first `exception` event says.
#[derive(Default)]
struct Exception<'a> {
    exception_type: Option<&'a str>,
    message: Option<&'a str>,
}

fn exception_of(span: &Span) -> Exception<'_> {
    let Some(event) = span
        .events
        .iter()
        .find(|event| event.name == semconv::EXCEPTION_EVENT)
    else {
        return Exception::default();
    };
    let attribute = |key: &str| {
        event
            .attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(string)
            .filter(|text| !text.is_empty())
    };
    Exception {
        exception_type: attribute(semconv::EXCEPTION_TYPE),
        message: attribute(semconv::EXCEPTION_MESSAGE),
    }
}

/// The HTTP methods kept as they are; any other is `_OTHER`, as the HTTP conventions say, so
/// that a client sending arbitrary methods cannot make new tools.
const HTTP_METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

fn http_method(method: Option<&str>) -> &'static str {
    method
        .and_then(|method| {
            HTTP_METHODS
                .iter()
                .find(|known| known.eq_ignore_ascii_case(method))
        })
        .copied()
        .unwrap_or("_OTHER")
}

/// An HTTP call's target: scheme, host and port, and the URL template when the span has one.
/// Never the path itself, the query string or the user information: they are high-cardinality
/// and may hold secrets.
fn http_target(facts: &Facts<'_>) -> String {
    let parsed = facts.url.map(split_url).unwrap_or_default();
    let scheme = facts.url_scheme.or(parsed.scheme).unwrap_or("http");
    let host = facts.server_address.or(parsed.host).unwrap_or("unknown");
    let template = facts
        .url_template
        .filter(|t| t.starts_with('/'))
        .map(|t| t.split(['?', '#']).next().unwrap_or_default())
        .unwrap_or_default();
    // Written in place, lower-cased as it goes: one allocation per target.
    let mut target = String::with_capacity(scheme.len() + host.len() + template.len() + 10);
    push_lowercase(&mut target, scheme);
    target.push_str("://");
    push_lowercase(&mut target, host);
    target.push(':');
    match (facts.server_port, parsed.port) {
        (Some(port), _) => {
            use std::fmt::Write as _;
            // Writing to a String cannot fail.
            let _ = write!(target, "{port}");
        }
        (None, Some(port)) => target.push_str(port),
        (None, None) if scheme.eq_ignore_ascii_case("https") => target.push_str("443"),
        (None, None) => target.push_str("80"),
    }
    target.push_str(template);
    target
}

/// Appends `text` to `out` with its ASCII letters in lower case.
fn push_lowercase(out: &mut String, text: &str) {
    if text.bytes().any(|b| b.is_ascii_uppercase()) {
        out.extend(text.chars().map(|c| c.to_ascii_lowercase()));
    } else {
        out.push_str(text);
    }
}

#[derive(Default)]
struct UrlParts<'a> {
    scheme: Option<&'a str>,
    host: Option<&'a str>,
    port: Option<&'a str>,
}

/// The scheme, host and port of a URL, without the user information; nothing of a URL whose
/// scheme, host or port is not well formed, so that no other part of it can pass for one.
///
/// User information may hold any character, a `/`, `?` or `#` that its client failed to encode
/// included: everything up to the last `@` before the query is taken for it. An `@` in the path
/// can then make the host wrong (and usually not well formed, so unknown), never a secret part
/// of the target.
fn split_url(url: &str) -> UrlParts<'_> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return UrlParts::default();
    };
    let valid_scheme = scheme
        .as_bytes()
        .first()
        .is_some_and(u8::is_ascii_alphabetic)
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !valid_scheme {
        return UrlParts::default();
    }
    let before_query = rest.split('?').next().unwrap_or_default();
    let rest = match before_query.rfind('@') {
        Some(at) => &rest[at + 1..],
        None => rest,
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        match v6.split_once(']') {
            Some((host, rest)) => (host, rest.strip_prefix(':')),
            None => return UrlParts::default(),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':'));
    let port_ok =
        port.is_none_or(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
    if !host_ok || !port_ok || (host.contains(':') && !authority.starts_with('[')) {
        return UrlParts {
            scheme: Some(scheme),
            ..UrlParts::default()
        };
    }
    UrlParts {
        scheme: Some(scheme),
        host: Some(host),
        port,
    }
}

/// What the cap counts: a service's targets and its tools apart.
#[derive(Hash)]
enum Kept {
    Target,
    Tool,
}

impl TargetBook {
    /// The key a service's entries are kept under.
    fn service_key(name: &str) -> u64 {
        use std::hash::BuildHasher as _;
        foldhash::fast::FixedState::default().hash_one(name)
    }

    /// Whether the service may keep `value` as a target or tool: it has it already, or is under
    /// its cap and the book under its total. Values are kept as 64-bit hashes; two values
    /// sharing one would only let the second in without counting it.
    fn admit(&mut self, service: u64, kind: Kept, value: &str, config: &DerivedConfig) -> bool {
        use std::hash::BuildHasher as _;
        let value = foldhash::fast::FixedState::default().hash_one((kind, value));
        if let Some(last) = self
            .by_service
            .get_mut(&service)
            .and_then(|known| known.get_mut(&value))
        {
            *last = self.period;
            return true;
        }
        let seen = self.by_service.get(&service).map_or(0, HashMap::len);
        if seen >= config.max_targets_per_service || self.total >= config.max_targets {
            return false;
        }
        self.total += 1;
        self.by_service
            .entry(service)
            .or_default()
            .insert(value, self.period);
        true
    }

    /// Moves the book to the period of `now` (Unix nanoseconds; an earlier time leaves it
    /// where it is): when a new period starts, the entries no call named in the period before
    /// it are forgotten.
    fn advance(&mut self, now: u64, config: &DerivedConfig) {
        let length = u64::try_from(config.forget_targets_after.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        let period = now / length;
        if period <= self.period {
            return;
        }
        let keep_from = period - 1;
        self.by_service.retain(|_, known| {
            known.retain(|_, last| *last >= keep_from);
            !known.is_empty()
        });
        self.total = self.by_service.values().map(HashMap::len).sum();
        self.period = period;
    }
}

/// A derived event's id: from its service, source and span, so that the same span sent again
/// gets the same id.
fn event_id(service: &Service<'_>, source: OutcomeSource, span: &Span) -> [u8; 16] {
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

fn string(kv: &KeyValue) -> Option<&str> {
    match kv.value.as_ref()?.value.as_ref()? {
        any_value::Value::StringValue(text) => Some(text),
        _ => None,
    }
}

/// An integer attribute, also when sent as a decimal string (some emitters do).
fn integer(kv: &KeyValue) -> Option<i64> {
    match kv.value.as_ref()?.value.as_ref()? {
        any_value::Value::IntValue(n) => Some(*n),
        any_value::Value::StringValue(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// The first of `keys` that `attributes` hold as a non-empty string, or as an array whose first
/// value is one (how HTTP instrumentations record a captured header).
fn first_text<'a>(attributes: &'a [KeyValue], keys: &[String]) -> Option<&'a str> {
    keys.iter().find_map(|key| {
        let value = attributes
            .iter()
            .find(|kv| kv.key == *key)?
            .value
            .as_ref()?;
        let text = match value.value.as_ref()? {
            any_value::Value::StringValue(text) => text.as_str(),
            any_value::Value::ArrayValue(array) => match array.values.first()?.value.as_ref()? {
                any_value::Value::StringValue(text) => text.as_str(),
                _ => return None,
            },
            _ => return None,
        };
        (!text.is_empty()).then_some(text)
    })
}

/// The first of `keys` that `attributes` hold as a non-empty string.
fn first_string<'a>(attributes: &'a [KeyValue], keys: &[String]) -> Option<&'a str> {
    keys.iter().find_map(|key| {
        attributes
            .iter()
            .find(|kv| kv.key == *key)
            .and_then(string)
            .filter(|value| !value.is_empty())
    })
}
