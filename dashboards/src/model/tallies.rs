//! The model's counts as a value: its time buckets and the label sets their ids stand for.
//!
//! A [`Tallies`] is cheap to clone and a clone never changes: the buckets and the key lists are
//! shared behind [`Arc`]s, and the model writes to a shared one only through
//! [`Arc::make_mut`], which copies it first. So a reader that took a clone (the published
//! snapshot the pages read) keeps the counts of the instant it took them while the stream goes
//! on, and the model pays one copy of a bucket only when it writes to it after a snapshot.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use candor_query::rates::ClassCounts;
use candor_query::window::Micros;

use candor_schema::action_ends_call;

use super::{FailureBreakdown, GroupCounts};
use crate::keys::{CallKey, FailureKey, GroupBy};

/// One bucket's counts, keyed by interned ids: a week of a thousand targets is millions of
/// entries, so each holds two small numbers rather than label strings.
#[derive(Debug, Default, Clone)]
pub(super) struct Bucket {
    pub(super) calls: HashMap<u32, ClassCounts>,
    /// Failure events per failure label set; a bucket never holds 2^32 events of one.
    pub(super) failures: HashMap<u32, u32>,
}

/// The counts per bucket, and the keys of their ids.
#[derive(Debug, Clone, Default)]
pub struct Tallies {
    pub(super) buckets: BTreeMap<Micros, Arc<Bucket>>,
    /// The call label set of each call id.
    pub(super) calls: Arc<Vec<CallKey>>,
    /// The failure label set of each failure id.
    pub(super) failure_keys: Arc<Vec<FailureKey>>,
    /// The call id of each failure id.
    pub(super) failure_call: Arc<Vec<u32>>,
}

impl Tallies {
    /// The call label set of `id`.
    pub(super) fn call(&self, id: u32) -> &CallKey {
        // Every call id was handed out by the model's interning, which pushed its key.
        &self.calls[id as usize]
    }

    /// The failure label set of `id`.
    pub(super) fn failure(&self, id: u32) -> &FailureKey {
        // As for call ids.
        &self.failure_keys[id as usize]
    }

    /// The bucket starting at `at`, to write to (a copy, when a reader holds it).
    pub(super) fn bucket_mut(&mut self, at: Micros) -> &mut Bucket {
        Arc::make_mut(self.buckets.entry(at).or_default())
    }

    /// Calls and terminal failure events per call label set over `[since, until)`, summed by
    /// id first: a long range touches millions of bucket entries, and names are looked up once
    /// per label set at the end.
    fn sum_by_call(&self, since: Micros, until: Micros) -> HashMap<u32, GroupCounts> {
        let mut sums: HashMap<u32, GroupCounts> = HashMap::new();
        let mut terminal: HashMap<u32, u64> = HashMap::new();
        for bucket in self.buckets.range(since..until).map(|(_, bucket)| bucket) {
            for (&call, counts) in &bucket.calls {
                merge(&mut sums.entry(call).or_default().calls, counts);
            }
            for (&failure, &events) in &bucket.failures {
                *terminal.entry(failure).or_default() += u64::from(events);
            }
        }
        for (failure, events) in terminal {
            if action_ends_call(&self.failure(failure).action) {
                // Every failure id got its call id when it was interned.
                let call = self.failure_call[failure as usize];
                sums.entry(call).or_default().terminal_events += events;
            }
        }
        sums
    }

    /// Calls and terminal failure events per group over `[since, until)`.
    pub fn counts_by(
        &self,
        group: GroupBy,
        since: Micros,
        until: Micros,
    ) -> BTreeMap<String, GroupCounts> {
        let mut out: BTreeMap<String, GroupCounts> = BTreeMap::new();
        for (call, counts) in self.sum_by_call(since, until) {
            let entry = out.entry(group.of(self.call(call))).or_default();
            merge(&mut entry.calls, &counts.calls);
            entry.terminal_events += counts.terminal_events;
        }
        out
    }

    /// Calls per group and bucket over `[since, until)` for the groups in `only` (all groups
    /// when `None`): the series of a chart.
    pub fn series_by(
        &self,
        group: GroupBy,
        since: Micros,
        until: Micros,
        only: Option<&BTreeSet<String>>,
    ) -> BTreeMap<String, BTreeMap<Micros, ClassCounts>> {
        // Which call ids feed which group, decided once.
        let mut member: HashMap<u32, Option<String>> = HashMap::new();
        let mut out: BTreeMap<String, BTreeMap<Micros, ClassCounts>> = BTreeMap::new();
        for (&at, bucket) in self.buckets.range(since..until) {
            for (&call, counts) in &bucket.calls {
                let name = member.entry(call).or_insert_with(|| {
                    let name = group.of(self.call(call));
                    only.is_none_or(|only| only.contains(&name)).then_some(name)
                });
                if let Some(name) = name {
                    let entry = out.entry(name.clone()).or_default().entry(at).or_default();
                    merge(entry, counts);
                }
            }
        }
        out
    }

    /// AccessFailure and call counts per target over `[since, until)`, as
    /// [`candor_query::rates::spikes`] takes them.
    pub fn calls_by_target(&self, since: Micros, until: Micros) -> BTreeMap<String, ClassCounts> {
        self.counts_by(GroupBy::Target, since, until)
            .into_iter()
            .map(|(target, counts)| (target, counts.calls))
            .collect()
    }

    /// The failure events of `[since, until)` by kind, by action, and (terminal ones) by target.
    pub fn failures(&self, since: Micros, until: Micros) -> FailureBreakdown {
        let mut sums: HashMap<u32, u64> = HashMap::new();
        for bucket in self.buckets.range(since..until).map(|(_, bucket)| bucket) {
            for (&failure, &events) in &bucket.failures {
                *sums.entry(failure).or_default() += u64::from(events);
            }
        }
        let mut out = FailureBreakdown::default();
        for (failure, events) in sums {
            let key = self.failure(failure);
            *out.by_kind.entry(key.kind.to_string()).or_default() += events;
            *out.by_action.entry(key.action.to_string()).or_default() += events;
            if action_ends_call(&key.action) {
                *out.by_target
                    .entry(GroupBy::Target.of(&key.call))
                    .or_default() += events;
            }
        }
        out
    }
}

/// Adds `from` to `into`, class by class.
pub(super) fn merge(into: &mut ClassCounts, from: &ClassCounts) {
    into.success += from.success;
    into.empty += from.empty;
    into.partial += from.partial;
    into.access_failure += from.access_failure;
    into.unverified += from.unverified;
    into.cancelled += from.cancelled;
    into.accepted += from.accepted;
}
