//! What the dashboards know, built from the stream of records. Pure: records go in with
//! [`Model::apply`], answers come out of the query methods, and the clock is always a parameter.
//!
//! - **Calls** come from the `tool.outcomes` counter points: each point becomes an increase of
//!   its series (the read rules of [`candor_query::rates`]) and lands in the time bucket of the
//!   point, under its service, tool and target.
//! - **Failure events** (`tool.outcome`) are counted per bucket by service, tool, target, class,
//!   failure kind and retry action.
//! - A client's retried copy of a record carries the same id: a copy seen again within the
//!   dedupe window is counted as a duplicate and not applied twice.
//! - **Operations** (`tool.lifecycle`) are folded to their latest state ([`Operations`]); the
//!   newest rule evaluation's judgement of them is kept beside them for the snapshots the
//!   pages and `/metrics` read ([`Model::keep_operations_judgement`]).
//! - **Heartbeats** tell how far each collector is known to have reported; the newest counter
//!   point of each adapter instance tells when it was last seen.
//!
//! Buckets older than the history are dropped; so the model says from when it holds data
//! ([`Model::holds_from`]), and every answer built on it states that coverage.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use candor_query::coverage::SeenBy;
use candor_query::rates::{ClassCounts, cumulative_increase, id_key, key};
use candor_query::window::Micros;
use candor_records::proto::{CountClass, OutcomeCount, OutcomeSource, Temporality};
use candor_records::rows::{EventView, Meta, Row};
use candor_records::tables::Table;
use candor_schema::OutcomeClass;
use serde::Serialize;

pub use crate::instances::InstanceSeen;
pub use crate::keys::{CallKey, FailureKey, GroupBy, group_value};
use crate::operations::{Judgement, Operations};

mod ids;
mod seen;
mod tallies;
mod totals;

use ids::{Ids, RecentIds};

pub use tallies::Tallies;
use totals::Totals;
pub use totals::{Counters, Positions, StoredFailure, StoredTotals};

/// Microseconds per second.
pub const SECOND: Micros = 1_000_000;
/// Microseconds per minute.
pub const MINUTE: Micros = 60 * SECOND;

/// How much the model keeps and how it cuts time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelSettings {
    /// How far back buckets are kept.
    pub history: Micros,
    /// Bucket width.
    pub step: Micros,
    /// How long a record's id is remembered to recognise a retried copy.
    pub dedupe_window: Micros,
}

impl Default for ModelSettings {
    fn default() -> Self {
        Self {
            history: 6 * 60 * MINUTE,
            step: MINUTE,
            dedupe_window: Micros::try_from(candor_records::ids::DEDUPE_WINDOW.as_micros())
                .unwrap_or(Micros::MAX),
        }
    }
}

/// The previous point of one cumulative counter series.
#[derive(Debug, Clone, Copy)]
struct SeriesState {
    start: Micros,
    value: i64,
    time: Micros,
}

/// A collector, as its heartbeats show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CollectorSeen {
    /// Its id.
    pub id: String,
    /// Its newest heartbeat's time.
    #[serde(serialize_with = "candor_query::window::serialize_micros")]
    pub time: Micros,
    /// The interval it promises between heartbeats.
    pub interval_micros: Micros,
    /// When it started.
    #[serde(serialize_with = "candor_query::window::serialize_micros")]
    pub started: Micros,
}

/// What the model did with the records it was given; each is also a `/metrics` counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Applied {
    /// Records applied.
    pub records: u64,
    /// Retried copies recognised by id and not applied again.
    pub duplicates: u64,
    /// Cumulative points older than their series' newest, which carry nothing new.
    pub stale_points: u64,
    /// Points or events whose time was before the history: they only serve as baselines.
    pub before_history: u64,
    /// Points or events more than a step in the future of the clock: counted in the totals,
    /// kept out of the buckets.
    pub future: u64,
    /// First points of series whose counter started before the model holds data: baselines
    /// only, so what they counted before is not in the buckets.
    pub baselines: u64,
    /// Records the compactor's decoder refused (also counted by reason).
    pub rejected: u64,
}

/// The counts of one group over a range of buckets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GroupCounts {
    /// Calls by class, from the counters.
    pub calls: ClassCounts,
    /// Failure events that ended a call (`exhausted`, `permanent`, `accept_partial`).
    pub terminal_events: u64,
}

/// The failure events of a range, summed three ways.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FailureBreakdown {
    /// Events by failure kind.
    pub by_kind: BTreeMap<String, u64>,
    /// Events by retry action.
    pub by_action: BTreeMap<String, u64>,
    /// Terminal events by target.
    pub by_target: BTreeMap<String, u64>,
}

/// Everything the dashboards know from the stream.
#[derive(Debug)]
pub struct Model {
    settings: ModelSettings,
    holds_from: Option<Micros>,
    /// While the history is read from the tables, the model holds part of it.
    loading: bool,
    names: HashSet<Arc<str>>,
    /// The counts per bucket and the label sets of their ids.
    tallies: Tallies,
    calls: Ids<CallKey>,
    failure_keys: Ids<FailureKey>,
    series: HashMap<u128, SeriesState>,
    /// The counters `/metrics` serves, continuous across restarts.
    totals: Totals,
    event_ids: RecentIds,
    point_ids: RecentIds,
    instances: HashMap<(Arc<str>, Arc<str>), InstanceSeen>,
    /// The instances with derived calls, with their newest point's time: a sender is judged
    /// only when it has some.
    derived_instances: HashMap<(Arc<str>, Arc<str>), Micros>,
    collectors: BTreeMap<String, CollectorSeen>,
    applied: Applied,
    operations: Operations,
}

impl Model {
    /// An empty model.
    pub fn new(settings: ModelSettings) -> Self {
        Self {
            settings,
            holds_from: None,
            loading: false,
            names: HashSet::new(),
            tallies: Tallies::default(),
            calls: Ids::default(),
            failure_keys: Ids::default(),
            series: HashMap::new(),
            totals: Totals::default(),
            event_ids: RecentIds::default(),
            point_ids: RecentIds::default(),
            instances: HashMap::new(),
            derived_instances: HashMap::new(),
            collectors: BTreeMap::new(),
            applied: Applied::default(),
            operations: Operations::default(),
        }
    }

    /// The settings.
    pub fn settings(&self) -> ModelSettings {
        self.settings
    }

    /// Says from when the records given are complete: the stream calls it once it knows where
    /// it starts reading. Counter series whose counters started since then count from zero.
    pub fn hold_from(&mut self, at: Micros) {
        self.holds_from = Some(at);
    }

    /// From when the model holds every record, within the history; `None` before the stream
    /// has started and while the history is read ([`Model::set_loading`]).
    pub fn holds_from(&self, now: Micros) -> Option<Micros> {
        if self.loading {
            return None;
        }
        self.holds_from
            .map(|from| from.max(self.history_start(now)))
    }

    /// Says that the history is being read (`true`) or has been: meanwhile the model says it
    /// holds nothing, so that no panel shows a half-read history as complete.
    pub fn set_loading(&mut self, loading: bool) {
        self.loading = loading;
    }

    fn history_start(&self, now: Micros) -> Micros {
        self.bucket_of(now.saturating_sub(self.settings.history))
    }

    /// The start of the bucket holding `at`.
    pub fn bucket_of(&self, at: Micros) -> Micros {
        at.div_euclid(self.settings.step) * self.settings.step
    }

    fn name(&mut self, text: &str) -> Arc<str> {
        if let Some(known) = self.names.get(text) {
            return Arc::clone(known);
        }
        let name: Arc<str> = Arc::from(text);
        self.names.insert(Arc::clone(&name));
        name
    }

    /// What the model did with the records so far.
    pub fn applied(&self) -> Applied {
        self.applied
    }

    /// Applies one decoded record at clock time `now`.
    pub fn apply(&mut self, meta: &Meta, row: &Row, now: Micros) {
        // A record the decoder refused keeps the topic it was read from.
        let origin = match row {
            Row::Rejected(rejected) => Table::from_topic(rejected.topic).unwrap_or(Table::Rejected),
            _ => row.table(),
        };
        let counts = self.totals.admit(origin, meta);
        match row {
            Row::Event(event) => self.apply_event(meta, &event.view(), counts, now),
            Row::Count(count) => self.apply_count(meta, count, counts, now),
            Row::Heartbeat(beat) => self.apply_heartbeat(beat),
            Row::Rejected(rejected) => {
                let total = self
                    .totals
                    .rejected
                    .entry(rejected.reason.clone())
                    .or_default();
                if counts {
                    *total += u64::try_from(rejected.count).unwrap_or(1);
                }
                self.applied.rejected += 1;
            }
            Row::Operation(operation) => self.operations.apply(operation),
        }
        self.applied.records += 1;
    }

    /// Applies one `outcome_events` row given as its fields (as a table's reader gives them),
    /// as [`Model::apply`] applies the record.
    pub fn apply_event_fields(&mut self, meta: &Meta, event: &EventView<'_>, now: Micros) {
        let counts = self.totals.admit(Table::OutcomeEvents, meta);
        self.apply_event(meta, event, counts, now);
        self.applied.records += 1;
    }

    /// Where a time goes: its bucket, or why it has none.
    fn place(&mut self, at: Micros, now: Micros) -> Option<Micros> {
        if at < self.history_start(now) {
            self.applied.before_history += 1;
            return None;
        }
        if at > now.saturating_add(self.settings.step) {
            self.applied.future += 1;
            return None;
        }
        Some(self.bucket_of(at))
    }

    fn call_key(&mut self, service: &str, tool: &str, target: &str, source: &str) -> CallKey {
        CallKey {
            service: self.name(service),
            tool: self.name(tool),
            target: self.name(target),
            source: self.name(source),
        }
    }

    fn apply_event(&mut self, meta: &Meta, event: &EventView<'_>, counts: bool, now: Micros) {
        if !self.event_ids.insert(
            id_key(event.event_id),
            meta.kafka_micros,
            self.settings.dedupe_window,
        ) {
            self.applied.duplicates += 1;
            return;
        }
        let Ok(class) = event.outcome_class.parse::<OutcomeClass>() else {
            // The decoder admits only the contract's classes; nothing else reaches here.
            return;
        };
        let source = event.source.unwrap_or(OutcomeSource::Adapter.as_str());
        let failure = FailureKey {
            call: self.call_key(
                event.service_name,
                event.tool_name,
                event.tool_target,
                source,
            ),
            class,
            kind: self.name(event.failure_kind),
            action: self.name(event.retry_action),
        };
        let failure = self.failure_id(failure);
        let total = self.totals.failures.entry(failure).or_default();
        if counts {
            *total += 1;
        }
        let time = i64::try_from(event.event_time_unix_nano / 1000).unwrap_or(i64::MAX);
        if let Some(bucket) = self.place(time, now) {
            let slot = self
                .tallies
                .bucket_mut(bucket)
                .failures
                .entry(failure)
                .or_default();
            *slot = slot.saturating_add(1);
        }
    }

    fn apply_count(&mut self, meta: &Meta, count: &OutcomeCount, counts: bool, now: Micros) {
        if !self.point_ids.insert(
            id_key(&count.point_id),
            meta.kafka_micros,
            self.settings.dedupe_window,
        ) {
            self.applied.duplicates += 1;
            return;
        }
        let source = count
            .source
            .as_deref()
            .map_or(Some(OutcomeSource::Adapter), |name| {
                OutcomeSource::from_bytes(name.as_bytes())
            });
        let Some(source) = source else {
            // The decoder admits only the closed set of sources; nothing else reaches here.
            return;
        };
        let Ok(class) = CountClass::parse(&count.outcome_class, Some(source)) else {
            return;
        };
        let time = i64::try_from(count.time_unix_nano / 1000).unwrap_or(i64::MAX);
        let start = i64::try_from(count.start_time_unix_nano / 1000).unwrap_or(i64::MAX);
        let value = i64::try_from(count.value).unwrap_or(i64::MAX);
        // Only an adapter exports on a schedule; a derived point comes when spans do, and its
        // instance is seen by the senders' heartbeats.
        if source.is_derived() {
            let instance = (
                self.name(&count.service_name),
                self.name(&count.service_instance_id),
            );
            let newest = self.derived_instances.entry(instance).or_insert(time);
            *newest = (*newest).max(time);
        } else {
            self.see_instance(count, time);
        }
        let increase = if count.temporality == Temporality::Cumulative as i32 {
            let series = key(&[
                &count.service_name,
                &count.service_instance_id,
                &count.tool_name,
                &count.tool_target,
                class.as_str(),
            ]);
            let previous = self.series.get(&series).copied();
            if previous.is_some_and(|prev| prev.time >= time && prev.start == start) {
                self.applied.stale_points += 1;
                return;
            }
            self.series
                .insert(series, SeriesState { start, value, time });
            let counted_from = self.holds_from.unwrap_or(Micros::MAX);
            match cumulative_increase(
                previous.map(|prev| (prev.start, prev.value)),
                start,
                value,
                counted_from,
            ) {
                Some(increase) => increase,
                None => {
                    self.applied.baselines += 1;
                    return;
                }
            }
        } else {
            u64::try_from(value).unwrap_or(0)
        };
        let call = self.call_key(
            &count.service_name,
            &count.tool_name,
            &count.tool_target,
            source.as_str(),
        );
        let call = self.call_id(call);
        let total = self.totals.outcomes.entry((call, class)).or_default();
        if counts {
            *total += increase;
        }
        if let Some(bucket) = self.place(time, now) {
            add(
                self.tallies
                    .bucket_mut(bucket)
                    .calls
                    .entry(call)
                    .or_default(),
                class,
                increase,
            );
        }
    }

    /// Drops the buckets that fell out of the history.
    pub fn prune(&mut self, now: Micros) {
        let start = self.history_start(now);
        self.tallies.buckets = self.tallies.buckets.split_off(&start);
        // An instance whose last point left the history is no longer judged, as its calls no
        // longer are; otherwise one that died without a replacement would mark every panel
        // partial for as long as the dashboards run.
        self.instances.retain(|_, seen| seen.last >= start);
        self.derived_instances.retain(|_, newest| *newest >= start);
        self.operations.prune(start);
    }

    /// The interned id of the call label set `key`.
    fn call_id(&mut self, key: CallKey) -> u32 {
        self.calls.id(key, &mut self.tallies.calls)
    }

    /// The interned id of the failure label set `key`, its call's interned too.
    fn failure_id(&mut self, key: FailureKey) -> u32 {
        let call = self.call_id(key.call.clone());
        let failure = self.failure_keys.id(key, &mut self.tallies.failure_keys);
        if self.tallies.failure_call.len() <= failure as usize {
            Arc::make_mut(&mut self.tallies.failure_call).push(call);
        }
        failure
    }

    /// The counts per bucket, for the panels and the rules; clone it to keep the counts of
    /// this instant ([`Tallies`]).
    pub fn tallies(&self) -> &Tallies {
        &self.tallies
    }

    /// The counters `/metrics` serves, as they stand (restored totals included).
    pub fn counters(&self) -> Counters {
        self.totals.counters(&self.tallies)
    }

    /// Every instance seen (an adapter's, or one with derived calls whose senders' heartbeats
    /// arrived), by service then instance, each marked replaced when a new instance of its
    /// service started after its newest export.
    pub fn instances(&self) -> Vec<InstanceSeen> {
        let mut all: Vec<InstanceSeen> = self
            .instances
            .iter()
            .filter(|(key, seen)| {
                seen.seen_by == SeenBy::Adapter || self.derived_instances.contains_key(*key)
            })
            .map(|(_, seen)| seen.clone())
            .collect();
        all.sort_by(|a, b| (&a.service, &a.instance).cmp(&(&b.service, &b.instance)));
        let firsts: Vec<(Arc<str>, Arc<str>, Micros)> = all
            .iter()
            .map(|seen| (seen.service.clone(), seen.instance.clone(), seen.first))
            .collect();
        for seen in &mut all {
            seen.replaced = firsts.iter().any(|(service, instance, first)| {
                *service == seen.service && *instance != seen.instance && *first > seen.last
            });
        }
        all
    }

    /// Every collector seen.
    pub fn collectors(&self) -> impl Iterator<Item = &CollectorSeen> {
        self.collectors.values()
    }

    /// The newest heartbeat of any collector.
    pub fn newest_heartbeat(&self) -> Option<&CollectorSeen> {
        self.collectors.values().max_by_key(|seen| seen.time)
    }

    /// The asynchronous operations seen.
    pub fn operations(&self) -> &Operations {
        &self.operations
    }

    /// Keeps a rule evaluation's judgement of the operations, for the readers after it
    /// ([`Operations::judgement`]).
    pub fn keep_operations_judgement(&mut self, judgement: Judgement) {
        self.operations.keep_judgement(judgement);
    }
}

fn add(counts: &mut ClassCounts, class: CountClass, increase: u64) {
    let slot = match class {
        CountClass::Outcome(OutcomeClass::Success) => &mut counts.success,
        CountClass::Outcome(OutcomeClass::Empty) => &mut counts.empty,
        CountClass::Outcome(OutcomeClass::Partial) => &mut counts.partial,
        CountClass::Outcome(OutcomeClass::AccessFailure) => &mut counts.access_failure,
        CountClass::Unverified => &mut counts.unverified,
        CountClass::Cancelled => &mut counts.cancelled,
        CountClass::Accepted => &mut counts.accepted,
    };
    *slot = slot.saturating_add(increase);
}

#[cfg(test)]
mod tests {
    use super::*;
    use candor_records::proto::{Heartbeat, OutcomeEvent};
    use candor_records::rows::Event;
    use candor_records::tables::Arrival;

    // A whole minute, so that buckets start at T0.
    const T0: Micros = 1_700_000_040 * SECOND;

    fn meta(at: Micros) -> Meta {
        Meta {
            partition: 0,
            offset: 0,
            kafka_micros: at,
            arrival: Arrival::OnTime,
        }
    }

    fn nanos(at: Micros) -> u64 {
        u64::try_from(at).expect("positive") * 1000
    }

    fn point(target: &str, class: OutcomeClass, start: Micros, at: Micros, value: u64) -> Row {
        Row::Count(Box::new(OutcomeCount {
            point_id: format!("{target}/{}/{start}/{at}", class.as_str()),
            service_name: "svc".into(),
            service_instance_id: "i-1".into(),
            tool_name: "search".into(),
            tool_target: target.into(),
            outcome_class: class.as_str().into(),
            start_time_unix_nano: nanos(start),
            time_unix_nano: nanos(at),
            value,
            temporality: Temporality::Cumulative as i32,
            ..OutcomeCount::default()
        }))
    }

    fn event(id: &str, target: &str, action: &str, at: Micros) -> Row {
        Row::Event(Event::from_record(&OutcomeEvent {
            event_id: id.into(),
            service_name: "svc".into(),
            tool_name: "search".into(),
            tool_target: target.into(),
            outcome_class: "access_failure".into(),
            failure_kind: "timeout".into(),
            retry_action: action.into(),
            event_time_unix_nano: nanos(at),
            ..OutcomeEvent::default()
        }))
    }

    fn model() -> Model {
        let mut model = Model::new(ModelSettings::default());
        model.hold_from(T0);
        model
    }

    fn apply(model: &mut Model, row: Row, at: Micros) {
        model.apply(&meta(at), &row, at);
    }

    #[test]
    fn cumulative_points_become_increases_in_their_buckets() {
        let mut m = model();
        let af = OutcomeClass::AccessFailure;
        // A counter that started before the model holds data: its first point is a baseline.
        apply(
            &mut m,
            point("a", af, T0 - MINUTE, T0 + 10 * SECOND, 5),
            T0 + 10 * SECOND,
        );
        apply(
            &mut m,
            point("a", af, T0 - MINUTE, T0 + 70 * SECOND, 8),
            T0 + 70 * SECOND,
        );
        // A restart: a new start time, the whole new value counts.
        apply(
            &mut m,
            point("a", af, T0 + 100 * SECOND, T0 + 130 * SECOND, 2),
            T0 + 130 * SECOND,
        );
        let series = m
            .tallies()
            .series_by(GroupBy::Target, T0, T0 + 10 * MINUTE, None);
        let a = &series["a"];
        assert_eq!(a.len(), 2, "{a:?}");
        assert_eq!(a[&(T0 + MINUTE)].access_failure, 3);
        assert_eq!(a[&(T0 + 2 * MINUTE)].access_failure, 2);
        assert_eq!(m.applied().baselines, 1);
        let totals: u64 = m.counters().outcomes().map(|(_, _, total)| total).sum();
        assert_eq!(totals, 5);
    }

    /// A clone of the tallies (what a published snapshot holds) keeps the counts of its instant
    /// while the model goes on, and shares every bucket the model has not written since.
    #[test]
    fn taken_tallies_keep_their_instant_and_share_the_buckets_not_written_since() {
        let mut m = model();
        let ok = OutcomeClass::Success;
        apply(
            &mut m,
            point("a", ok, T0, T0 + 10 * SECOND, 1),
            T0 + 10 * SECOND,
        );
        apply(
            &mut m,
            point("b", ok, T0, T0 + 70 * SECOND, 4),
            T0 + 70 * SECOND,
        );
        let taken = m.tallies().clone();
        // A later point of the first minute's bucket (late), and one in the second minute's.
        apply(
            &mut m,
            point("a", ok, T0, T0 + 20 * SECOND, 3),
            T0 + 80 * SECOND,
        );
        let success = |tallies: &Tallies, target: &str| {
            tallies.counts_by(GroupBy::Target, T0, T0 + 10 * MINUTE)[target]
                .calls
                .success
        };
        assert_eq!(success(&taken, "a"), 1);
        assert_eq!(success(m.tallies(), "a"), 3);
        assert_eq!(success(&taken, "b"), 4);
        let shared =
            |at: Micros| std::sync::Arc::ptr_eq(&taken.buckets[&at], &m.tallies().buckets[&at]);
        assert!(
            !shared(T0),
            "the bucket written since is the model's own copy"
        );
        assert!(
            shared(T0 + MINUTE),
            "the bucket not written since is shared"
        );
    }

    #[test]
    fn a_derived_groups_name_links_to_its_targets_value() {
        assert_eq!(
            group_value("https://api.test:443 [http]"),
            "https://api.test:443"
        );
        assert_eq!(group_value("search [genai]"), "search");
        assert_eq!(group_value("search"), "search");
        // Only a derived source's suffix is one.
        assert_eq!(group_value("x [adapter]"), "x [adapter]");
        assert_eq!(group_value("x [other]"), "x [other]");
    }

    /// Calls derived from standard spans are their own groups, apart from what an adapter
    /// declared for the same target, counted as unverified (never success), and say nothing of
    /// an adapter instance's exports.
    #[test]
    fn derived_calls_are_groups_of_their_own_and_no_instance_exports() {
        let mut m = model();
        apply(
            &mut m,
            point("a", OutcomeClass::Success, T0, T0 + 10 * SECOND, 3),
            T0 + 10 * SECOND,
        );
        let derived = |class: &str, value: u64, id: &str| {
            Row::Count(Box::new(OutcomeCount {
                point_id: id.into(),
                service_name: "svc".into(),
                service_instance_id: "i-2".into(),
                tool_name: "GET".into(),
                tool_target: "a".into(),
                outcome_class: class.into(),
                start_time_unix_nano: nanos(T0 + 20 * SECOND),
                time_unix_nano: nanos(T0 + 20 * SECOND),
                value,
                temporality: Temporality::Delta as i32,
                source: Some("http".into()),
                ..OutcomeCount::default()
            }))
        };
        apply(&mut m, derived("unverified", 4, "d1"), T0 + 20 * SECOND);
        apply(&mut m, derived("access_failure", 1, "d2"), T0 + 20 * SECOND);
        // A class a span cannot tell is refused on a derived point.
        apply(&mut m, derived("success", 9, "d3"), T0 + 20 * SECOND);
        let mut failed = OutcomeEvent {
            event_id: "e1".into(),
            service_name: "svc".into(),
            tool_name: "GET".into(),
            tool_target: "a".into(),
            outcome_class: "access_failure".into(),
            failure_kind: "server_error".into(),
            event_time_unix_nano: nanos(T0 + 20 * SECOND),
            ..OutcomeEvent::default()
        };
        failed.source = Some("http".into());
        apply(
            &mut m,
            Row::Event(Event::from_record(&failed)),
            T0 + 20 * SECOND,
        );
        let groups = m.tallies().counts_by(GroupBy::Target, T0, T0 + 10 * MINUTE);
        assert_eq!(groups["a"].calls.success, 3);
        assert!(!groups["a"].calls.lower_bound());
        let http = &groups["a [http]"];
        assert_eq!(
            (
                http.calls.unverified,
                http.calls.access_failure,
                http.calls.success
            ),
            (4, 1, 0)
        );
        assert!(http.calls.lower_bound());
        assert_eq!(http.terminal_events, 1, "a derived failure ends its call");
        let instances: Vec<String> = m
            .instances()
            .iter()
            .map(|seen| seen.instance.to_string())
            .collect();
        assert_eq!(instances, ["i-1"], "a derived point is no export");

        // Senders' heartbeats are the exports of an instance with derived calls; those of a
        // sender without any, and those of an adapter's instance, judge nothing.
        let sender = |instance: &str, at: Micros| {
            Row::Heartbeat(Box::new(Heartbeat {
                collector_id: "c-1".into(),
                time_unix_nano: nanos(at),
                interval_ms: 10_000,
                service_name: Some("svc".into()),
                service_instance_id: Some(instance.into()),
                sender_items: Some(5),
                ..Heartbeat::default()
            }))
        };
        for at in [T0 + 10 * SECOND, T0 + 20 * SECOND, T0 + 30 * SECOND] {
            for instance in ["i-1", "i-2", "i-3"] {
                apply(&mut m, sender(instance, at), T0 + 40 * SECOND);
            }
        }
        let seen: Vec<(String, SeenBy, Option<Micros>)> = m
            .instances()
            .iter()
            .map(|seen| {
                (
                    seen.instance.to_string(),
                    seen.seen_by,
                    seen.interval_micros,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("i-1".to_owned(), SeenBy::Adapter, None),
                ("i-2".to_owned(), SeenBy::Spans, Some(10 * SECOND)),
            ]
        );
        assert!(
            m.collectors().next().is_none(),
            "a sender's heartbeat is not its collector's"
        );
    }

    #[test]
    fn a_counter_started_after_the_model_holds_data_counts_from_zero() {
        let mut m = model();
        let ok = OutcomeClass::Success;
        apply(
            &mut m,
            point("b", ok, T0 + SECOND, T0 + 30 * SECOND, 4),
            T0 + 30 * SECOND,
        );
        let counts = m.tallies().counts_by(GroupBy::Target, T0, T0 + MINUTE);
        assert_eq!(counts["b"].calls.success, 4);
        assert_eq!(m.applied().baselines, 0);
    }

    #[test]
    fn a_retried_copy_or_an_older_point_is_not_counted_twice() {
        let mut m = model();
        let ok = OutcomeClass::Success;
        let p1 = point("c", ok, T0, T0 + 10 * SECOND, 4);
        let p2 = point("c", ok, T0, T0 + 70 * SECOND, 9);
        apply(&mut m, p1.clone(), T0 + 10 * SECOND);
        apply(&mut m, p2.clone(), T0 + 70 * SECOND);
        apply(&mut m, p2, T0 + 75 * SECOND);
        // The same content with a new id (re-exported) but an older time carries nothing new.
        let mut p1_again = p1;
        if let Row::Count(count) = &mut p1_again {
            count.point_id.push_str("-again");
        }
        apply(&mut m, p1_again, T0 + 80 * SECOND);
        assert_eq!(
            m.tallies().calls_by_target(T0, T0 + 5 * MINUTE)["c"].success,
            9
        );
        assert_eq!(m.applied().duplicates, 1);
        assert_eq!(m.applied().stale_points, 1);
    }

    #[test]
    fn failure_events_are_counted_by_kind_action_and_terminal_target() {
        let mut m = model();
        apply(&mut m, event("e1", "x", "retry", T0 + SECOND), T0 + SECOND);
        apply(
            &mut m,
            event("e2", "x", "exhausted", T0 + 2 * SECOND),
            T0 + 2 * SECOND,
        );
        apply(
            &mut m,
            event("e2", "x", "exhausted", T0 + 2 * SECOND),
            T0 + 3 * SECOND,
        );
        apply(
            &mut m,
            event("e3", "y", "permanent", T0 + 3 * SECOND),
            T0 + 3 * SECOND,
        );
        let failures = m.tallies().failures(T0, T0 + MINUTE);
        assert_eq!(failures.by_kind["timeout"], 3);
        assert_eq!(failures.by_action["retry"], 1);
        assert_eq!(failures.by_target["x"], 1);
        assert_eq!(failures.by_target["y"], 1);
        assert_eq!(
            m.tallies().counts_by(GroupBy::Target, T0, T0 + MINUTE)["x"].terminal_events,
            1
        );
        assert_eq!(m.applied().duplicates, 1);
    }

    #[test]
    fn buckets_outside_the_history_are_dropped_and_counted() {
        let mut m = model();
        let now = T0 + 7 * 60 * MINUTE;
        m.apply(&meta(now), &event("old", "x", "exhausted", T0), now);
        m.apply(
            &meta(now),
            &event("future", "x", "exhausted", now + 10 * MINUTE),
            now,
        );
        assert_eq!(m.applied().before_history, 1);
        assert_eq!(m.applied().future, 1);
        assert!(m.tallies().failures(0, Micros::MAX).by_target.is_empty());
        // Both still count in the totals since start.
        assert_eq!(m.counters().failures().map(|(_, n)| n).sum::<u64>(), 2);
        m.apply(&meta(T0), &event("kept", "x", "exhausted", T0), T0);
        m.prune(now);
        assert!(m.tallies().failures(0, Micros::MAX).by_target.is_empty());
        assert_eq!(m.holds_from(now), Some(now - 6 * 60 * MINUTE));
    }

    #[test]
    fn instances_learn_their_export_interval() {
        let mut m = model();
        let ok = OutcomeClass::Success;
        for (i, at) in [10, 70, 130].into_iter().enumerate() {
            let value = u64::try_from(i).expect("small");
            apply(
                &mut m,
                point("d", ok, T0, T0 + at * SECOND, value),
                T0 + at * SECOND,
            );
        }
        let seen = m.instances();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].interval_micros, Some(MINUTE));
        assert_eq!(seen[0].last, T0 + 130 * SECOND);
    }

    #[test]
    fn instances_believe_their_declared_interval_and_say_when_they_stopped() {
        let mut m = model();
        let ok = OutcomeClass::Success;
        for (i, (at, declared)) in [(10, 30_000), (20, 30_000), (25, 0)]
            .into_iter()
            .enumerate()
        {
            let mut count = point(
                "d",
                ok,
                T0,
                T0 + at * SECOND,
                u64::try_from(i).expect("small"),
            );
            if let Row::Count(count) = &mut count {
                count.export_interval_ms = Some(declared);
            }
            apply(&mut m, count, T0 + at * SECOND);
            let seen = &m.instances()[0];
            assert_eq!(seen.interval_micros, Some(30 * SECOND), "at {at} s");
            assert_eq!(seen.stopped, declared == 0, "at {at} s");
        }
        // A later instance of the same service replaces it.
        let mut later = point("d", ok, T0, T0 + 40 * SECOND, 0);
        if let Row::Count(count) = &mut later {
            count.service_instance_id = "d-2".into();
        }
        apply(&mut m, later, T0 + 40 * SECOND);
        let seen = m.instances();
        assert_eq!(seen.len(), 2);
        let replaced: Vec<(&str, bool)> = seen
            .iter()
            .map(|seen| (&*seen.instance, seen.replaced))
            .collect();
        assert_eq!(replaced, [("d-2", false), ("i-1", true)]);
        // Once their last points leave the history, they are no longer judged.
        m.prune(T0 + 7 * 60 * MINUTE);
        assert!(m.instances().is_empty());
    }

    /// The counters a restarted model serves: the stored totals plus what the replay adds past
    /// their offsets, which equals one model that applied every record once.
    #[test]
    fn restored_totals_with_a_replay_count_every_record_once() {
        let af = OutcomeClass::AccessFailure;
        let records: Vec<(Meta, Row)> = (0..8)
            .map(|i| {
                let at = T0 + i * 10 * SECOND;
                let row = if i % 2 == 0 {
                    point("a", af, T0, at, u64::try_from(i).expect("small") * 3)
                } else {
                    event(&format!("e{i}"), "a", "exhausted", at)
                };
                let meta = Meta {
                    offset: i / 2,
                    ..meta(at)
                };
                (meta, row)
            })
            .collect();
        let totals = |m: &Model| {
            let calls: u64 = m.counters().outcomes().map(|(_, _, total)| total).sum();
            let failures: u64 = m.counters().failures().map(|(_, total)| total).sum();
            (calls, failures)
        };
        let mut once = model();
        for (meta, row) in &records {
            once.apply(meta, row, meta.kafka_micros);
        }
        // The first process applied five records and stored its totals, then applied one more
        // it did not store before it was killed.
        let mut first = model();
        for (meta, row) in &records[..5] {
            first.apply(meta, row, meta.kafka_micros);
        }
        let stored = first.stored_totals();
        first.apply(&records[5].0, &records[5].1, records[5].0.kafka_micros);
        // The second replays everything it reads, from the start of the history.
        let mut second = model();
        assert_eq!(second.restore_totals(stored), 0);
        for (meta, row) in &records {
            second.apply(meta, row, meta.kafka_micros);
        }
        assert_eq!(totals(&second), totals(&once));
        assert!(totals(&second).0 > 0 && totals(&second).1 > 0);
        // It then stores the offsets one that read every record once would.
        assert_eq!(
            second.stored_totals().positions,
            once.stored_totals().positions
        );
    }
}
