//! Silent-failure rates from the `tool.outcomes` counter points. Pure.
//!
//! A series is one counter stream: (service, instance, tool, target, class, temporality). Its
//! points become per-bucket increases, the way Prometheus' `increase()` reads a counter:
//!
//! - **delta** points are increases already; each counts in the bucket of its time.
//! - **cumulative** points count the difference to the series' previous point. When the start
//!   time changed or the value went down, the counter was reset or its process restarted, and the
//!   whole new value is the increase. The first point of a series has no previous point: if its
//!   counter started inside the window, all of its value counts; otherwise it only serves as the
//!   baseline for the next one, makes no bucket of its own, and the series is reported as
//!   "without a baseline" (what it counted between the window start and that point is unknown).
//!   Points up to a lookback before the window are read to serve as baselines.
//!
//! The silent-failure rate of a bucket is (access_failure + partial) / all calls. When a group has
//! failure events but no counter points, the denominator is missing: the rate is not computed,
//! and that is said, never shown as 0 %. Calls derived from standard spans (the contract's
//! section 10.7) count as `unverified` when their span shows no error, which could have been a
//! partial answer: a rate over them is a lower bound ([`ClassCounts::lower_bound`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use candor_records::proto::CountClass;
use candor_schema::OutcomeClass;
use serde::Serialize;

use crate::window::{Micros, serialize_micros};

/// One counter point, as the rates need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    /// Identifies the series: equal exactly for the points of one series (its number in a
    /// [`SeriesTable`], or a [`key`]).
    pub series: u128,
    /// The group the series belongs to (its target, tool or service).
    pub group: Arc<str>,
    /// The class it counts.
    pub class: CountClass,
    /// Cumulative (true) or delta (false).
    pub cumulative: bool,
    /// When the counter (cumulative) or the interval (delta) started.
    pub start: Micros,
    /// The point's time.
    pub time: Micros,
    /// The value as sent.
    pub value: i64,
    /// The point's id as an [`id_key`]: orders points of equal time and start.
    pub id: u128,
}

/// A 128-bit key of some strings, for series and point ids: comparing and sorting numbers is
/// far cheaper than strings, and two different inputs share a key with a chance of about 2^-128.
pub fn key(parts: &[&str]) -> u128 {
    use std::hash::{Hash as _, Hasher as _};
    let half = |seed: u8| {
        // SipHash with fixed keys: the same input gives the same key in every run.
        let mut hasher = std::hash::DefaultHasher::new();
        seed.hash(&mut hasher);
        parts.hash(&mut hasher);
        hasher.finish()
    };
    (u128::from(half(0)) << 64) | u128::from(half(1))
}

/// The key of a record id: the id itself when it is the 32 lower-case hex digits the collector
/// writes (exact, and no hashing per row), otherwise [`key`] of it.
pub fn id_key(id: &str) -> u128 {
    candor_records::ids::hex_128(id).unwrap_or_else(|| key(&[id]))
}

/// A set of [`id_key`]s (already uniform, so a fast hasher suffices).
pub type IdSet = std::collections::HashSet<u128, foldhash::fast::FixedState>;

/// Numbers the series met while reading rows, each with what the caller derived from it once:
/// the same strings always get the same number, compared exactly, so no two series can merge.
/// Looking up a series that is already known allocates nothing.
pub struct SeriesTable<T> {
    index: hashbrown::HashTable<usize>,
    series: Vec<(Box<[Box<str>]>, T)>,
    hasher: foldhash::fast::FixedState,
}

impl<T> Default for SeriesTable<T> {
    fn default() -> Self {
        Self {
            index: hashbrown::HashTable::new(),
            series: Vec::new(),
            hasher: foldhash::fast::FixedState::default(),
        }
    }
}

impl<T> SeriesTable<T> {
    /// The number of the series `parts` and its value, made by `make` the first time.
    pub fn intern(&mut self, parts: &[&str], make: impl FnOnce() -> T) -> (usize, &T) {
        use std::hash::BuildHasher as _;
        let Self {
            index,
            series,
            hasher,
        } = self;
        // A slice of `&str` and one of `Box<str>` hash alike: the length, then each string.
        let hash = hasher.hash_one(parts);
        let same = |number: &usize| {
            let known = &series[*number].0;
            known.len() == parts.len() && known.iter().zip(parts).all(|(a, b)| **a == **b)
        };
        let number = match index.find(hash, same) {
            Some(number) => *number,
            None => {
                let number = series.len();
                series.push((parts.iter().map(|part| Box::from(*part)).collect(), make()));
                index.insert_unique(hash, number, |number| hasher.hash_one(&series[*number].0));
                number
            }
        };
        (number, &self.series[number].1)
    }

    /// How many series were met.
    pub fn len(&self) -> usize {
        self.series.len()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }
}

/// Rows counted per (group, bucket), fed a batch at a time. A run of counted rows with the same
/// group and bucket is counted with one lookup, so rows sorted by group cost a comparison or two
/// each.
#[derive(Debug, Default)]
pub struct GroupCounts {
    counts: HashMap<String, BTreeMap<Micros, u64>, foldhash::fast::FixedState>,
}

/// How [`GroupCounts::add_runs`] sees the rows of one batch.
pub trait RunRows {
    /// Whether the row counts at all.
    fn counted(&self, row: usize) -> bool;
    /// Whether two rows are in the same group; a cheap check first is what makes runs cheap.
    fn same_group(&self, a: usize, b: usize) -> bool;
    /// The row's group.
    fn group(&self, row: usize) -> &str;
    /// The row's bucket; `None` outside the window, where it is not counted.
    fn bucket(&self, row: usize) -> Option<Micros>;
}

impl GroupCounts {
    /// Counts the `rows` rows of a batch that [`RunRows::counted`] keeps, per group and bucket.
    pub fn add_runs(&mut self, rows: usize, batch: &impl RunRows) {
        // The current run: its first row, its bucket and how many rows it has.
        let mut run: Option<(usize, Option<Micros>, u64)> = None;
        for row in 0..rows {
            if !batch.counted(row) {
                continue;
            }
            let at = batch.bucket(row);
            match &mut run {
                Some((first, run_at, n)) if *run_at == at && batch.same_group(*first, row) => {
                    *n += 1;
                }
                _ => {
                    if let Some((first, run_at, n)) = run {
                        self.add(batch.group(first), run_at, n);
                    }
                    run = Some((row, at, 1));
                }
            }
        }
        if let Some((first, run_at, n)) = run {
            self.add(batch.group(first), run_at, n);
        }
    }

    fn add(&mut self, name: &str, at: Option<Micros>, n: u64) {
        let Some(at) = at else {
            return;
        };
        let buckets = match self.counts.get_mut(name) {
            Some(buckets) => buckets,
            None => self.counts.entry(name.to_owned()).or_default(),
        };
        *buckets.entry(at).or_insert(0) += n;
    }

    /// The counts by (group, bucket start).
    pub fn into_map(self) -> BTreeMap<(String, Micros), u64> {
        self.counts
            .into_iter()
            .flat_map(|(group, buckets)| {
                buckets
                    .into_iter()
                    .map(move |(at, count)| ((group.clone(), at), count))
            })
            .collect()
    }
}

/// How a window is cut into buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buckets {
    /// Window start, inclusive.
    pub since: Micros,
    /// Window end, exclusive.
    pub until: Micros,
    /// Bucket width; `None` for one bucket over the whole window.
    pub step: Option<Micros>,
}

impl Buckets {
    /// The start of the bucket holding `time`, when it is inside the window.
    pub fn bucket_of(&self, time: Micros) -> Option<Micros> {
        if time < self.since || time >= self.until {
            return None;
        }
        Some(match self.step {
            Some(step) if step > 0 => self.since + (time - self.since) / step * step,
            _ => self.since,
        })
    }

    /// The end of the bucket starting at `start`.
    pub fn bucket_end(&self, start: Micros) -> Micros {
        match self.step {
            Some(step) if step > 0 => start.saturating_add(step).min(self.until),
            _ => self.until,
        }
    }
}

/// Calls per class in one bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ClassCounts {
    /// Success calls.
    pub success: u64,
    /// Empty calls.
    pub empty: u64,
    /// Partial calls.
    pub partial: u64,
    /// AccessFailure calls.
    pub access_failure: u64,
    /// Derived calls without error: success, empty or partial, which their span cannot tell.
    pub unverified: u64,
    /// Derived calls their caller cancelled.
    pub cancelled: u64,
    /// Calls whose answer accepted an operation that had not ended: work accepted, not done.
    /// Not calls of any class, so not in [`ClassCounts::calls`].
    pub accepted: u64,
}

impl ClassCounts {
    /// All calls counted by class (acceptances are not).
    pub fn calls(&self) -> u64 {
        self.success
            + self.empty
            + self.partial
            + self.access_failure
            + self.unverified
            + self.cancelled
    }

    /// Calls that did not get a whole answer: access_failure + partial.
    pub fn silent_failures(&self) -> u64 {
        self.partial + self.access_failure
    }

    /// Whether the silent-failure rate is only a lower bound: some calls are unverified, and
    /// any of them may have been partial.
    pub fn lower_bound(&self) -> bool {
        self.unverified > 0
    }

    fn add(&mut self, class: CountClass, increase: u64) {
        let slot = match class {
            CountClass::Outcome(OutcomeClass::Success) => &mut self.success,
            CountClass::Outcome(OutcomeClass::Empty) => &mut self.empty,
            CountClass::Outcome(OutcomeClass::Partial) => &mut self.partial,
            CountClass::Outcome(OutcomeClass::AccessFailure) => &mut self.access_failure,
            CountClass::Unverified => &mut self.unverified,
            CountClass::Cancelled => &mut self.cancelled,
            CountClass::Accepted => &mut self.accepted,
        };
        *slot = slot.saturating_add(increase);
    }
}

/// Per-bucket increases of a set of series.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Increases {
    /// (group, bucket start) → calls per class. A key exists when the group has a point in the
    /// bucket, even one that added nothing.
    pub buckets: BTreeMap<(String, Micros), ClassCounts>,
    /// Series whose first point read is inside the window but whose counter started before it.
    pub series_without_baseline: u64,
}

/// Turns counter points into per-bucket increases, each series' points taken in the order of
/// [`series_order`]. A point read twice (a retried copy the tail and the table both hold, or one
/// the compactor kept past its dedupe window) counts once: its id comes from its content, so
/// the copies sort next to each other.
pub fn increases(points: &[Point], buckets: Buckets) -> Increases {
    let mut series_without_baseline = 0;
    let mut sums: HashMap<(Arc<str>, Micros), ClassCounts, foldhash::fast::FixedState> =
        HashMap::default();
    let mut previous: Option<&Point> = None;
    for point in series_order(points).into_iter().map(|index| &points[index]) {
        let prev = previous.filter(|prev| prev.series == point.series);
        if prev.is_some_and(|prev| prev.id == point.id) {
            continue;
        }
        previous = Some(point);
        let Some(bucket) = buckets.bucket_of(point.time) else {
            continue;
        };
        let increase = if point.cumulative {
            let previous = prev.map(|prev| (prev.start, prev.value));
            match cumulative_increase(previous, point.start, point.value, buckets.since) {
                Some(increase) => increase,
                None => {
                    series_without_baseline += 1;
                    continue;
                }
            }
        } else {
            u64::try_from(point.value).unwrap_or(0)
        };
        sums.entry((Arc::clone(&point.group), bucket))
            .or_default()
            .add(point.class, increase);
    }
    Increases {
        buckets: sums
            .into_iter()
            .map(|((group, bucket), counts)| ((group.to_string(), bucket), counts))
            .collect(),
        series_without_baseline,
    }
}

/// The indices of `points` series by series, each series' points ordered by (time, start,
/// id). The series are placed by a counting sort, which keeps each series' points in the order
/// read; a table sorted by time gives them already in order, and only a series whose points are
/// not (the tail's, or several files') is sorted. That moves indices instead of points, and
/// costs one pass where sorting every point by series and time did not.
pub fn series_order(points: &[Point]) -> Vec<usize> {
    let mut ranks: HashMap<u128, usize, foldhash::fast::FixedState> = HashMap::default();
    let rank: Vec<usize> = points
        .iter()
        .map(|point| {
            let next = ranks.len();
            *ranks.entry(point.series).or_insert(next)
        })
        .collect();
    // `starts[r]` is where series `r` begins in the order, `starts[r + 1]` where it ends.
    let mut starts = vec![0usize; ranks.len() + 1];
    for &r in &rank {
        starts[r + 1] += 1;
    }
    for r in 1..starts.len() {
        starts[r] += starts[r - 1];
    }
    let mut order = vec![0usize; points.len()];
    let mut next = starts.clone();
    for (index, &r) in rank.iter().enumerate() {
        order[next[r]] = index;
        next[r] += 1;
    }
    let key = |index: &usize| {
        let point = &points[*index];
        (point.time, point.start, point.id)
    };
    for bounds in starts.windows(2) {
        let series = &mut order[bounds[0]..bounds[1]];
        if !series.is_sorted_by_key(key) {
            series.sort_unstable_by_key(key);
        }
    }
    order
}

/// What a cumulative point adds to its series, given the series' previous point as
/// `(start, value)`: the difference to it, or the whole value after a reset (the start time
/// changed or the value went down). A series' first point counts whole only when its counter
/// started at or after `counted_from`; otherwise it is only a baseline, and `None` says so.
pub fn cumulative_increase(
    previous: Option<(Micros, i64)>,
    start: Micros,
    value: i64,
    counted_from: Micros,
) -> Option<u64> {
    let whole = u64::try_from(value).unwrap_or(0);
    match previous {
        Some((prev_start, prev_value)) if prev_start == start && value >= prev_value => {
            Some(u64::try_from(value - prev_value).unwrap_or(0))
        }
        Some(_) => Some(whole),
        None if start >= counted_from => Some(whole),
        None => None,
    }
}

/// Whether a rate has a denominator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Denominator {
    /// Calls were counted.
    Counted,
    /// Counter points exist but no call was made in the bucket.
    NoCalls,
    /// No counter points: calls are unknown (failure events alone give no rate).
    Missing,
}

/// One row of `candor rates`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateRow {
    /// The target, tool or service.
    pub group: String,
    /// Bucket start.
    #[serde(serialize_with = "serialize_micros")]
    pub bucket_start: Micros,
    /// Bucket end.
    #[serde(serialize_with = "serialize_micros")]
    pub bucket_end: Micros,
    /// Calls per class; `None` when the denominator is missing.
    pub counts: Option<ClassCounts>,
    /// Terminal failure events stored for the group in the bucket.
    pub failure_events: u64,
}

impl RateRow {
    /// Whether the rate has a denominator.
    pub fn denominator(&self) -> Denominator {
        match self.counts {
            None => Denominator::Missing,
            Some(counts) if counts.calls() == 0 => Denominator::NoCalls,
            Some(_) => Denominator::Counted,
        }
    }

    /// (access_failure + partial) / calls, when there were calls.
    pub fn rate(&self) -> Option<f64> {
        let counts = self.counts?;
        let calls = counts.calls();
        // u64 → f64 loses precision only past 2^53 calls.
        (calls > 0).then(|| counts.silent_failures() as f64 / calls as f64)
    }
}

/// Joins the counters' increases with the failure events per (group, bucket start).
pub fn rate_rows(
    increases: &Increases,
    failure_events: &BTreeMap<(String, Micros), u64>,
    buckets: Buckets,
) -> Vec<RateRow> {
    let mut keys: Vec<&(String, Micros)> = increases
        .buckets
        .keys()
        .chain(failure_events.keys())
        .collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|key| RateRow {
            group: key.0.clone(),
            bucket_start: key.1,
            bucket_end: buckets.bucket_end(key.1),
            counts: increases.buckets.get(key).copied(),
            failure_events: failure_events.get(key).copied().unwrap_or(0),
        })
        .collect()
}

/// A target whose AccessFailure rate rose.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spike {
    /// The target.
    pub target: String,
    /// AccessFailure calls in the window.
    pub window_failures: u64,
    /// All calls in the window.
    pub window_calls: u64,
    /// AccessFailure rate in the window.
    pub window_rate: f64,
    /// AccessFailure calls in the baseline.
    pub baseline_failures: u64,
    /// All calls in the baseline.
    pub baseline_calls: u64,
    /// AccessFailure rate in the baseline; `None` when the baseline had no calls.
    pub baseline_rate: Option<f64>,
    /// window rate / baseline rate; `None` when the baseline rate is zero or unknown (a new
    /// failure), which ranks first.
    pub factor: Option<f64>,
}

/// What the spike rule needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpikeRule {
    /// The window must exceed the baseline rate by this factor.
    pub factor: f64,
    /// And hold at least this many AccessFailure calls.
    pub min_events: u64,
}

/// Targets whose AccessFailure rate in `window` exceeds `baseline`'s by the rule's factor, with
/// at least its minimum of failures; the steepest first.
pub fn spikes(
    window: &BTreeMap<String, ClassCounts>,
    baseline: &BTreeMap<String, ClassCounts>,
    rule: SpikeRule,
) -> Vec<Spike> {
    let rate = |counts: &ClassCounts| {
        let calls = counts.calls();
        (calls > 0).then(|| counts.access_failure as f64 / calls as f64)
    };
    let mut found: Vec<Spike> = window
        .iter()
        .filter_map(|(target, now)| {
            let window_rate = rate(now)?;
            if now.access_failure < rule.min_events {
                return None;
            }
            let before = baseline.get(target).copied().unwrap_or_default();
            let baseline_rate = rate(&before);
            let factor = baseline_rate
                .filter(|rate| *rate > 0.0)
                .map(|rate| window_rate / rate);
            // Compared cross-multiplied, so that exactly `factor` times the baseline counts
            // (a quotient of floats can fall just short of it).
            let exceeds = now.access_failure as f64 * before.calls() as f64
                >= rule.factor * before.access_failure as f64 * now.calls() as f64;
            if !exceeds {
                return None;
            }
            Some(Spike {
                target: target.clone(),
                window_failures: now.access_failure,
                window_calls: now.calls(),
                window_rate,
                baseline_failures: before.access_failure,
                baseline_calls: before.calls(),
                baseline_rate,
                factor,
            })
        })
        .collect();
    found.sort_by(|a, b| {
        let steepness = |spike: &Spike| spike.factor.unwrap_or(f64::INFINITY);
        steepness(b)
            .total_cmp(&steepness(a))
            .then(b.window_failures.cmp(&a.window_failures))
            .then(a.target.cmp(&b.target))
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Micros = 60_000_000;

    fn point(series: &str, class: OutcomeClass, start: Micros, time: Micros, value: i64) -> Point {
        Point {
            series: key(&[series, class.as_str()]),
            group: Arc::from(series),
            class: CountClass::Outcome(class),
            cumulative: true,
            start,
            time,
            value,
            id: key(&[series, &time.to_string(), &start.to_string()]),
        }
    }

    /// Rows of a test batch: a group, a time and whether the row counts.
    struct TestRows<'a> {
        rows: &'a [(&'a str, Micros, bool)],
        buckets: Buckets,
    }

    impl RunRows for TestRows<'_> {
        fn counted(&self, row: usize) -> bool {
            self.rows[row].2
        }
        fn same_group(&self, a: usize, b: usize) -> bool {
            self.rows[a].0 == self.rows[b].0
        }
        fn group(&self, row: usize) -> &str {
            self.rows[row].0
        }
        fn bucket(&self, row: usize) -> Option<Micros> {
            self.buckets.bucket_of(self.rows[row].1)
        }
    }

    #[test]
    fn acceptances_are_counted_apart_and_are_not_calls() {
        let mut counts = ClassCounts::default();
        counts.add(CountClass::Outcome(OutcomeClass::Success), 2);
        counts.add(CountClass::Outcome(OutcomeClass::AccessFailure), 1);
        counts.add(CountClass::Accepted, 5);
        assert_eq!((counts.calls(), counts.accepted), (3, 5));
        assert_eq!(counts.silent_failures(), 1);
    }

    #[test]
    fn group_counts_add_runs_and_scattered_rows_alike() {
        let rows = [
            ("a", 1, true),
            ("a", 2, true),
            ("b", 3, true),
            ("b", 3, true),
            ("b", 9, true),
            ("a", 4, true),
            ("c", 5, true),
            ("a", 100, true),
        ];
        let buckets = Buckets {
            since: 0,
            until: 10,
            step: Some(5),
        };
        let mut counts = GroupCounts::default();
        // In two batches, the run of "b" cut between them.
        counts.add_runs(
            3,
            &TestRows {
                rows: &rows[..3],
                buckets,
            },
        );
        counts.add_runs(
            5,
            &TestRows {
                rows: &rows[3..],
                buckets,
            },
        );
        let expected: BTreeMap<(String, Micros), u64> = [
            (("a".to_owned(), 0), 3),
            (("b".to_owned(), 0), 2),
            (("b".to_owned(), 5), 1),
            (("c".to_owned(), 5), 1),
        ]
        .into_iter()
        .collect();
        // "a" at time 100 is outside the window and is not counted.
        assert_eq!(counts.into_map(), expected);
    }

    #[test]
    fn rows_that_do_not_count_neither_count_nor_end_a_run() {
        let rows = [
            ("a", 1, true),
            ("a", 1, false),
            ("a", 2, true),
            ("b", 2, false),
            ("a", 3, true),
            ("b", 3, true),
            ("b", 4, false),
        ];
        let buckets = Buckets {
            since: 0,
            until: 10,
            step: None,
        };
        let mut counts = GroupCounts::default();
        counts.add_runs(
            rows.len(),
            &TestRows {
                rows: &rows,
                buckets,
            },
        );
        let expected: BTreeMap<(String, Micros), u64> =
            [(("a".to_owned(), 0), 3), (("b".to_owned(), 0), 1)]
                .into_iter()
                .collect();
        assert_eq!(counts.into_map(), expected);
    }

    #[test]
    fn series_order_groups_series_in_time_order_and_sorts_only_when_needed() {
        let ok = OutcomeClass::Success;
        // Two series read interleaved; "b" arrives out of time order, as from two files.
        let points = vec![
            point("a", ok, 0, MIN, 1),
            point("b", ok, 0, 3 * MIN, 5),
            point("a", ok, 0, 2 * MIN, 2),
            point("b", ok, 0, MIN, 4),
            point("a", ok, 0, 3 * MIN, 3),
            point("b", ok, 0, 2 * MIN, 6),
        ];
        let order: Vec<(u128, Micros)> = series_order(&points)
            .into_iter()
            .map(|index| (points[index].series, points[index].time))
            .collect();
        let (a, b) = (points[0].series, points[1].series);
        assert_eq!(
            order,
            [
                (a, MIN),
                (a, 2 * MIN),
                (a, 3 * MIN),
                (b, MIN),
                (b, 2 * MIN),
                (b, 3 * MIN)
            ]
        );
    }

    #[test]
    fn a_point_read_twice_counts_once() {
        // Delta points, where a copy counted twice would add its value twice.
        let delta = |time, value| Point {
            cumulative: false,
            ..point("a", OutcomeClass::Success, time - MIN, time, value)
        };
        let once = vec![delta(11 * MIN, 5), delta(12 * MIN, 9)];
        let mut twice: Vec<Point> = once
            .iter()
            .chain(&once)
            .chain(&once[1..])
            .cloned()
            .collect();
        twice.reverse();
        let expected = increases(&once, one_bucket());
        assert_eq!(increases(&twice, one_bucket()), expected);
        assert_eq!(
            expected
                .buckets
                .values()
                .map(ClassCounts::calls)
                .sum::<u64>(),
            14
        );
    }

    #[test]
    fn the_series_table_numbers_equal_strings_alike_and_only_them() {
        let mut table: SeriesTable<String> = SeriesTable::default();
        let (first, made) = table.intern(&["checkout", "a", "search"], || "made once".into());
        assert_eq!((first, made.as_str()), (0, "made once"));
        let (again, kept) = table.intern(&["checkout", "a", "search"], || "made twice".into());
        assert_eq!((again, kept.as_str()), (0, "made once"));
        // The same characters split differently, and a prefix, are other series.
        let (split, _) = table.intern(&["checkou", "ta", "search"], String::new);
        let (shorter, _) = table.intern(&["checkout", "a"], String::new);
        assert_eq!((split, shorter), (1, 2));
        for n in 0..1000 {
            let name = n.to_string();
            assert_eq!(table.intern(&[&name], String::new).0, n + 3);
        }
        assert_eq!(table.intern(&["checkout", "a", "search"], String::new).0, 0);
        assert_eq!(table.len(), 1003);
    }

    #[test]
    fn ids_as_written_are_their_own_key_and_others_are_hashed() {
        let id = "00000000000000000000000000000a2f";
        assert_eq!(id_key(id), 0xa2f);
        // Upper case, a sign or another length is not the collector's form: hashed, not parsed.
        assert_eq!(id_key(&id.to_uppercase()), key(&[&id.to_uppercase()]));
        assert_eq!(
            id_key("+0000000000000000000000000000a2f"),
            key(&["+0000000000000000000000000000a2f"])
        );
        assert_eq!(id_key("a2f"), key(&["a2f"]));
        // Every digit, in both halves.
        let every = "0123456789abcdeffedcba9876543210";
        assert_eq!(id_key(every), 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210);
        // One byte that is no digit, in either half.
        for bad in [
            "0123456789abcdeffedcba987654321g",
            "0123456789abcde/fedcba9876543210",
        ] {
            assert_eq!(id_key(bad), key(&[bad]));
        }
    }

    fn one_bucket() -> Buckets {
        Buckets {
            since: 10 * MIN,
            until: 20 * MIN,
            step: None,
        }
    }

    #[test]
    fn cumulative_increases_survive_resets_and_restarts() {
        let af = OutcomeClass::AccessFailure;
        let points = vec![
            // Baseline before the window, then +5, then a restart (new start) at 3, then +2.
            point("a", af, 0, 9 * MIN, 10),
            point("a", af, 0, 11 * MIN, 15),
            point("a", af, 12 * MIN, 13 * MIN, 3),
            point("a", af, 12 * MIN, 14 * MIN, 5),
            // A reset with the same start time: the value went down, the new value counts.
            point("a", af, 0, 15 * MIN, 1),
        ];
        let out = increases(&points, one_bucket());
        let counts = out.buckets[&("a".to_owned(), 10 * MIN)];
        assert_eq!(counts.access_failure, 5 + 3 + 2 + 1);
        assert_eq!(out.series_without_baseline, 0);
    }

    #[test]
    fn first_points_count_only_when_the_counter_started_inside() {
        let ok = OutcomeClass::Success;
        let points = vec![
            // Started inside the window: its whole value counts.
            point("new", ok, 12 * MIN, 13 * MIN, 7),
            // Started before, first seen inside: a baseline only.
            point("old", ok, 0, 13 * MIN, 100),
            point("old", ok, 0, 14 * MIN, 104),
        ];
        let out = increases(&points, one_bucket());
        assert_eq!(out.buckets[&("new".to_owned(), 10 * MIN)].success, 7);
        assert_eq!(out.buckets[&("old".to_owned(), 10 * MIN)].success, 4);
        assert_eq!(out.series_without_baseline, 1);
        // A baseline alone makes no bucket: its calls are unknown, not zero.
        let alone = vec![point("alone", ok, 0, 13 * MIN, 100)];
        let out = increases(&alone, one_bucket());
        assert!(out.buckets.is_empty());
        assert_eq!(out.series_without_baseline, 1);
    }

    #[test]
    fn delta_points_are_summed_into_their_buckets() {
        let buckets = Buckets {
            since: 10 * MIN,
            until: 20 * MIN,
            step: Some(5 * MIN),
        };
        let points: Vec<Point> = [(11, 2), (14, 3), (16, 4), (9, 100), (20, 100)]
            .into_iter()
            .map(|(minute, value)| Point {
                cumulative: false,
                ..point(
                    "d",
                    OutcomeClass::Partial,
                    (minute - 1) * MIN,
                    minute * MIN,
                    value,
                )
            })
            .collect();
        let out = increases(&points, buckets);
        assert_eq!(out.buckets[&("d".to_owned(), 10 * MIN)].partial, 5);
        assert_eq!(out.buckets[&("d".to_owned(), 15 * MIN)].partial, 4);
        assert_eq!(out.buckets.len(), 2);
    }

    #[test]
    fn a_missing_denominator_is_said_not_zero() {
        let buckets = one_bucket();
        let events = BTreeMap::from([(("only-events".to_owned(), 10 * MIN), 4)]);
        let points = vec![
            point("idle", OutcomeClass::Success, 0, 9 * MIN, 5),
            point("idle", OutcomeClass::Success, 0, 11 * MIN, 5),
        ];
        let rows = rate_rows(&increases(&points, buckets), &events, buckets);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].group, "idle");
        assert_eq!(rows[0].denominator(), Denominator::NoCalls);
        assert_eq!(rows[0].rate(), None);
        assert_eq!(rows[1].group, "only-events");
        assert_eq!(rows[1].denominator(), Denominator::Missing);
        assert_eq!(rows[1].rate(), None);
        assert_eq!(rows[1].failure_events, 4);
    }

    #[test]
    fn spikes_rank_new_failures_first_and_respect_the_floor() {
        let counts = |success, access_failure| ClassCounts {
            success,
            access_failure,
            ..ClassCounts::default()
        };
        let window = BTreeMap::from([
            ("steady".to_owned(), counts(90, 10)),
            ("tripled".to_owned(), counts(70, 30)),
            ("new".to_owned(), counts(80, 20)),
            ("tiny".to_owned(), counts(1, 2)),
        ]);
        let baseline = BTreeMap::from([
            ("steady".to_owned(), counts(900, 100)),
            ("tripled".to_owned(), counts(900, 100)),
            ("new".to_owned(), counts(1000, 0)),
        ]);
        let rule = SpikeRule {
            factor: 3.0,
            min_events: 10,
        };
        let found = spikes(&window, &baseline, rule);
        let names: Vec<&str> = found.iter().map(|spike| spike.target.as_str()).collect();
        assert_eq!(names, ["new", "tripled"]);
        assert_eq!(found[0].factor, None);
        assert!((found[1].factor.unwrap_or(0.0) - 3.0).abs() < 1e-9);
    }
}
