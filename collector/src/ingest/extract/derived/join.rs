//! Which spans of one request are one call: a union-find over the recognised spans, by
//! nesting, shared call ids and copies, and the adapter's `tool.call` spans that declare a call.

use candor_records::proto::OutcomeSource;
use opentelemetry_proto::tonic::trace::v1::Span;

use super::read::first_string;
use super::{Candidate, Derivation, HashMap, HashSet, SpanKey};

/// The traces in which one span's call can be another's: those holding an adapter's span and a
/// candidate, or two GenAI or MCP candidates. Most requests have none, and skip the join.
pub(super) fn joinable_traces<'a>(
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
pub(super) fn join<'a>(
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
    let ids = |index: usize| &derivation.convention(candidates[index].convention).call_id;
    let mut first_with_id: HashMap<(&[u8], &str), usize> = HashMap::default();
    for (index, candidate) in candidates.iter().enumerate() {
        if copy_of[index].is_some() || !tool_call(index) {
            continue;
        }
        let Some(id) = first_string(&candidate.span.attributes, ids(index)) else {
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
                .and_then(|&index| first_string(&candidates[index].span.attributes, ids(index)));
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
