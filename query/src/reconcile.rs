//! Reconciliation: the adapter's two records of a failed call must agree. Pure.
//!
//! The adapter records every call that ends as AccessFailure or Partial twice: one terminal
//! `tool.outcome` event (retry action `exhausted` or `permanent` for an AccessFailure,
//! `accept_partial` for a Partial) and one increment of the `tool.outcomes` counter with the same
//! class. So, per series — (service, instance, tool, target, class), class AccessFailure or
//! Partial — the counter's increase between two of its points equals the number of terminal
//! events between their times. ARCHITECTURE.md states the identity and why it holds.
//!
//! The two records are not written at the same instant. An event carries the time its call
//! finished; the counter is incremented just after; the SDK stamps a point when it collects. An
//! event within `slack` of a point's time may be on either side of it, so the check at each point
//! is a bracket. With `C` the counter's increase since the segment's baseline and `E(a, b]` the
//! events with a time in `(a, b]`:
//!
//! ```text
//! E(baseline + s_b, t - s]  ≤  C  ≤  E(baseline - s_b, t + s]
//! ```
//!
//! where `s` is the slack and `s_b` is 0 when the baseline is the counter's own start (nothing
//! came before it), else `s`. Past the right bound, events are **missing** (counted calls whose
//! event the table does not hold); below the left bound, events are **extra** (events of calls
//! the counter never counted, or copies). The check is cumulative, so a gap stays visible at every
//! later point of its segment; a window is reported once, where the gap grew.
//!
//! A segment is a run of points of one counter: a cumulative counter restarts a segment when its
//! start time changes or its value goes down; a delta series when an interval does not start
//! where the previous one ended. A segment's baseline is the counter's start when that lies
//! inside what was read (exact), else its first point read (that point only serves as the
//! baseline; the series is then counted as "without a baseline" when that point is inside the
//! window). Points before the window move the baseline to themselves, so a gap from before the
//! window is not charged to it.
//!
//! What can hide a gap: calls that keep ending within `slack` of each collection can absorb a
//! missing event at one point; the first point with no event that close shows it.

use std::collections::BTreeMap;

use candor_schema::OutcomeClass;
use serde::Serialize;

use crate::window::{Micros, Window};

/// One counter series: the adapter's identity of a tool and target in one process, and a class.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeriesKey {
    /// `service.name`.
    pub service: String,
    /// `service.instance.id`.
    pub instance: String,
    /// `tool.name`.
    pub tool: String,
    /// `tool.target`.
    pub target: String,
    /// AccessFailure or Partial.
    pub class: OutcomeClass,
}

/// One `tool.outcomes` point of a series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct CounterPoint {
    /// When the counter (cumulative) or the interval (delta) started.
    pub start: Micros,
    /// The point's time.
    pub time: Micros,
    /// The value as sent.
    pub value: i64,
    /// Cumulative (true) or delta (false).
    pub cumulative: bool,
}

/// How to reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Points with a time in this window are checked; earlier ones only serve as baselines.
    pub window: Window,
    /// The earliest time read: a counter that started at or after it has an exact baseline.
    pub read_from: Micros,
    /// How far an event's time may be from the point that counted its call.
    pub slack: Micros,
}

/// One checked window: the span between two points of a series (or the counter's start and its
/// first point).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowCheck {
    /// The previous point's time (or the baseline's), exclusive.
    pub from: Micros,
    /// This point's time, inclusive.
    pub to: Micros,
    /// The counter's increase over the window.
    pub counted: u64,
    /// Terminal events with a time in the window.
    pub events: u64,
    /// Events missing at `to`, over the segment so far.
    pub missing: u64,
    /// Extra events at `to`, over the segment so far.
    pub extra: u64,
    /// How much `missing` grew in this window.
    pub new_missing: u64,
    /// How much `extra` grew in this window.
    pub new_extra: u64,
}

impl WindowCheck {
    /// Whether the two records agree at the window's end.
    pub fn matched(&self) -> bool {
        self.missing == 0 && self.extra == 0
    }

    /// Whether a gap appeared or grew in this window.
    pub fn gap_grew(&self) -> bool {
        self.new_missing > 0 || self.new_extra > 0
    }
}

/// The windows of one series and its gaps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeriesCheck {
    /// Every checked window, oldest first.
    pub windows: Vec<WindowCheck>,
    /// Events missing at the end of each segment, summed.
    pub missing: u64,
    /// Extra events at the end of each segment, summed.
    pub extra: u64,
    /// Segments whose first point read was inside the window and so only served as a baseline.
    pub without_baseline: u64,
}

/// Figures over every series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Counter series checked.
    pub series: u64,
    /// Windows checked.
    pub windows: u64,
    /// Windows with no gap at their end.
    pub matched: u64,
    /// Windows with a gap at their end.
    pub mismatched: u64,
    /// Events missing: calls the counter counted whose terminal event is not stored.
    pub missing: u64,
    /// Extra events: terminal events of calls the counter did not count.
    pub extra: u64,
    /// Terminal events inside the window of series that have no counter point at all.
    pub events_without_counter: u64,
}

impl Totals {
    /// Whether any of the two records disagreed anywhere.
    pub fn disagrees(&self) -> bool {
        self.missing > 0 || self.extra > 0 || self.events_without_counter > 0
    }
}

/// The result over every series.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reconciliation {
    /// Each series with counter points, and its check.
    pub series: BTreeMap<SeriesKey, SeriesCheck>,
    /// Series with terminal events inside the window but no counter point, and how many.
    pub without_counter: BTreeMap<SeriesKey, u64>,
}

impl Reconciliation {
    /// The figures.
    pub fn totals(&self) -> Totals {
        let mut totals = Totals {
            series: self.series.len() as u64,
            events_without_counter: self.without_counter.values().sum(),
            ..Totals::default()
        };
        for check in self.series.values() {
            totals.windows += check.windows.len() as u64;
            totals.matched += check.windows.iter().filter(|w| w.matched()).count() as u64;
            totals.missing += check.missing;
            totals.extra += check.extra;
        }
        totals.mismatched = totals.windows - totals.matched;
        totals
    }

    /// Segments that had no baseline before the window, over every series.
    pub fn without_baseline(&self) -> u64 {
        self.series
            .values()
            .map(|check| check.without_baseline)
            .sum()
    }
}

/// Reconciles every series. `events` holds each series' terminal event times; both maps may hold
/// keys the other lacks.
pub fn reconcile(
    mut points: BTreeMap<SeriesKey, Vec<CounterPoint>>,
    mut events: BTreeMap<SeriesKey, Vec<Micros>>,
    settings: Settings,
) -> Reconciliation {
    let mut out = Reconciliation::default();
    for (key, points) in &mut points {
        let times = events.remove(key).unwrap_or_default();
        out.series
            .insert(key.clone(), check_series(points, times, settings));
    }
    for (key, times) in events {
        let inside = times
            .iter()
            .filter(|&&time| settings.window.contains(time))
            .count() as u64;
        if inside > 0 {
            out.without_counter.insert(key, inside);
        }
    }
    out
}

/// Where a segment's count starts.
#[derive(Debug, Clone, Copy)]
struct Baseline {
    at: Micros,
    /// The counter's value at `at`, as this segment counts it.
    value: i64,
    /// Whether `at` is the counter's own start, so no call can precede it.
    exact: bool,
}

/// A run of points that continue one another.
#[derive(Debug, Clone, Copy)]
struct Segment {
    baseline: Baseline,
    /// The previous point: its time, start, value as sent and running value.
    last_time: Micros,
    last_start: Micros,
    last_sent: i64,
    last_value: i64,
    cumulative: bool,
    /// The gap at the previous checked point.
    missing: u64,
    extra: u64,
}

impl Segment {
    /// Whether `point` continues this segment (no reset, no hole between delta intervals).
    fn continued_by(&self, point: &CounterPoint) -> bool {
        if point.cumulative != self.cumulative {
            return false;
        }
        if point.cumulative {
            point.start == self.last_start && point.value >= self.last_sent
        } else {
            point.start == self.last_time && point.value >= 0
        }
    }
}

/// Checks one series. `events` need not be sorted.
pub fn check_series(
    points: &mut [CounterPoint],
    mut events: Vec<Micros>,
    settings: Settings,
) -> SeriesCheck {
    points.sort_unstable_by_key(|point| (point.time, point.start, point.value));
    events.sort_unstable();
    let slack = settings.slack.max(0);
    let mut check = SeriesCheck::default();
    let mut segment: Option<Segment> = None;
    let mut previous: Option<CounterPoint> = None;
    for point in points.iter().copied() {
        if previous == Some(point) {
            continue; // the same point read twice
        }
        previous = Some(point);
        let before_window = point.time < settings.window.since;
        if point.time >= settings.window.until {
            break;
        }
        let continued = segment.filter(|seg| seg.continued_by(&point));
        let mut seg = match continued {
            Some(seg) => seg,
            None => {
                if let Some(ended) = segment {
                    check.missing += ended.missing;
                    check.extra += ended.extra;
                }
                let start_known = point.start >= settings.read_from && point.start <= point.time;
                let baseline = if !point.cumulative {
                    // A delta interval's start is the previous collection: not exact.
                    Baseline {
                        at: point.start,
                        value: 0,
                        exact: false,
                    }
                } else if start_known {
                    Baseline {
                        at: point.start,
                        value: 0,
                        exact: true,
                    }
                } else {
                    // The counter started before what was read: this point is the baseline.
                    if !before_window {
                        check.without_baseline += 1;
                    }
                    segment = Some(Segment {
                        baseline: Baseline {
                            at: point.time,
                            value: point.value,
                            exact: false,
                        },
                        last_time: point.time,
                        last_start: point.start,
                        last_sent: point.value,
                        last_value: point.value,
                        cumulative: true,
                        missing: 0,
                        extra: 0,
                    });
                    continue;
                };
                Segment {
                    baseline,
                    last_time: baseline.at,
                    last_start: point.start,
                    last_sent: 0,
                    last_value: 0,
                    cumulative: point.cumulative,
                    missing: 0,
                    extra: 0,
                }
            }
        };
        let value = if point.cumulative {
            point.value
        } else {
            seg.last_value.saturating_add(point.value)
        };
        if before_window {
            // Only a baseline for the window's points: whatever happened before is not charged
            // to the window.
            seg.baseline = Baseline {
                at: point.time,
                value,
                exact: false,
            };
            seg.missing = 0;
            seg.extra = 0;
        } else {
            let counted = u64::try_from(value.saturating_sub(seg.baseline.value)).unwrap_or(0);
            let band = if seg.baseline.exact { 0 } else { slack };
            let low = count_in(
                &events,
                seg.baseline.at.saturating_add(band),
                point.time.saturating_sub(slack),
            );
            let high = count_in(
                &events,
                seg.baseline.at.saturating_sub(band),
                point.time.saturating_add(slack),
            );
            let missing = counted.saturating_sub(high);
            let extra = low.saturating_sub(counted);
            check.windows.push(WindowCheck {
                from: seg.last_time,
                to: point.time,
                counted: u64::try_from(value.saturating_sub(seg.last_value)).unwrap_or(0),
                events: count_in(&events, seg.last_time, point.time),
                missing,
                extra,
                new_missing: missing.saturating_sub(seg.missing),
                new_extra: extra.saturating_sub(seg.extra),
            });
            seg.missing = missing;
            seg.extra = extra;
        }
        seg.last_time = point.time;
        seg.last_start = point.start;
        seg.last_sent = point.value;
        seg.last_value = value;
        segment = Some(seg);
    }
    if let Some(ended) = segment {
        check.missing += ended.missing;
        check.extra += ended.extra;
    }
    check
}

/// How many of the sorted `times` lie in `(after, upto]`.
fn count_in(times: &[Micros], after: Micros, upto: Micros) -> u64 {
    if upto <= after {
        return 0;
    }
    let from = times.partition_point(|&time| time <= after);
    let to = times.partition_point(|&time| time <= upto);
    to.saturating_sub(from) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Micros = 1_000_000;

    fn settings(since: Micros, until: Micros) -> Settings {
        Settings {
            window: Window { since, until },
            read_from: since - 60 * S,
            slack: S,
        }
    }

    fn cumulative(start: Micros, time: Micros, value: i64) -> CounterPoint {
        CounterPoint {
            start,
            time,
            value,
            cumulative: true,
        }
    }

    fn delta(start: Micros, time: Micros, value: i64) -> CounterPoint {
        CounterPoint {
            start,
            time,
            value,
            cumulative: false,
        }
    }

    /// A counter started at 1000 s, collected every 60 s, and events spread inside the windows.
    fn steady(calls_per_window: &[i64]) -> (Vec<CounterPoint>, Vec<Micros>) {
        let start = 1_000 * S;
        let mut points = Vec::new();
        let mut events = Vec::new();
        let mut total = 0;
        for (n, calls) in calls_per_window.iter().enumerate() {
            let from = start + n as i64 * 60 * S;
            for call in 0..*calls {
                events.push(from + 5 * S + call * S);
            }
            total += calls;
            points.push(cumulative(start, from + 60 * S, total));
        }
        (points, events)
    }

    #[test]
    fn agreeing_records_match_in_every_window() {
        let (mut points, events) = steady(&[3, 0, 5, 1]);
        let check = check_series(&mut points, events, settings(1_000 * S, 2_000 * S));
        assert_eq!(check.windows.len(), 4);
        assert!(check.windows.iter().all(WindowCheck::matched), "{check:?}");
        assert_eq!(
            check.windows.iter().map(|w| w.counted).collect::<Vec<_>>(),
            [3, 0, 5, 1]
        );
        assert_eq!(
            (check.missing, check.extra, check.without_baseline),
            (0, 0, 0)
        );
    }

    #[test]
    fn a_lost_event_is_reported_once_where_it_was_lost_and_stays_visible() {
        let (mut points, mut events) = steady(&[3, 2, 5, 1]);
        // The second window's first event never reached the table.
        events.remove(3);
        let check = check_series(&mut points, events, settings(1_000 * S, 2_000 * S));
        let grew: Vec<_> = check.windows.iter().filter(|w| w.gap_grew()).collect();
        assert_eq!(grew.len(), 1, "{check:?}");
        assert_eq!(grew[0].from, 1_060 * S);
        assert_eq!(
            (grew[0].counted, grew[0].events, grew[0].new_missing),
            (2, 1, 1)
        );
        assert!(check.windows[0].matched());
        assert!(check.windows[1..].iter().all(|w| w.missing == 1));
        assert_eq!((check.missing, check.extra), (1, 0));
    }

    #[test]
    fn an_event_without_a_counted_call_is_extra() {
        let (mut points, mut events) = steady(&[1, 1]);
        events.push(1_030 * S);
        let check = check_series(&mut points, events, settings(1_000 * S, 2_000 * S));
        assert_eq!((check.missing, check.extra), (0, 1), "{check:?}");
        assert_eq!(check.windows[0].new_extra, 1);
    }

    #[test]
    fn an_event_stamped_just_past_the_collection_is_not_a_gap() {
        // The call was counted before the point at 1060 s was taken, but its event's time is
        // half a second later (the clocks differ slightly): within the slack, no gap.
        let start = 1_000 * S;
        let mut points = vec![
            cumulative(start, 1_060 * S, 1),
            cumulative(start, 1_120 * S, 1),
        ];
        let events = vec![1_060 * S + S / 2];
        let check = check_series(&mut points, events, settings(start, 2_000 * S));
        assert!(check.windows.iter().all(WindowCheck::matched), "{check:?}");
        // Two seconds late is past the slack: a gap at that point, which the next one resolves.
        let events = vec![1_062 * S];
        let check = check_series(&mut points, events, settings(start, 2_000 * S));
        assert_eq!(check.windows[0].missing, 1);
    }

    #[test]
    fn a_restart_starts_a_new_segment_from_zero() {
        let first = 1_000 * S;
        let second = 1_130 * S;
        let mut points = vec![
            cumulative(first, 1_060 * S, 2),
            cumulative(first, 1_120 * S, 4),
            cumulative(second, 1_180 * S, 1),
        ];
        let events = vec![1_010 * S, 1_020 * S, 1_070 * S, 1_080 * S, 1_150 * S];
        let check = check_series(&mut points, events, settings(first, 2_000 * S));
        assert_eq!(check.windows.len(), 3);
        assert!(check.windows.iter().all(WindowCheck::matched), "{check:?}");
        assert_eq!(check.windows[2].from, second);
        assert_eq!(check.windows[2].counted, 1);
    }

    #[test]
    fn a_counter_older_than_what_was_read_uses_its_first_point_as_baseline() {
        let start = 10 * S; // long before read_from
        let mut points = vec![
            cumulative(start, 1_060 * S, 40),
            cumulative(start, 1_120 * S, 42),
        ];
        // Events of the calls before 1060 s are not read; the two after are.
        let events = vec![1_070 * S, 1_100 * S];
        let check = check_series(&mut points, events, settings(1_000 * S, 2_000 * S));
        assert_eq!(check.without_baseline, 1);
        assert_eq!(check.windows.len(), 1);
        assert!(check.windows[0].matched(), "{check:?}");
    }

    #[test]
    fn points_before_the_window_are_baselines_not_charged_gaps() {
        let start = 950 * S; // known: an exact baseline, then moved to the point at 960 s
        let mut points = vec![
            cumulative(start, 960 * S, 5), // its events are lost, before the window
            cumulative(start, 1_020 * S, 6),
        ];
        let events = vec![1_000 * S];
        let check = check_series(&mut points, events, settings(1_000 * S, 2_000 * S));
        assert_eq!(check.windows.len(), 1);
        assert!(check.windows[0].matched(), "{check:?}");
        assert_eq!(check.without_baseline, 0);
    }

    #[test]
    fn delta_points_chain_into_one_segment() {
        let mut points = vec![
            delta(1_000 * S, 1_060 * S, 2),
            delta(1_060 * S, 1_120 * S, 0),
            delta(1_120 * S, 1_180 * S, 1),
        ];
        let events = vec![1_010 * S, 1_020 * S, 1_150 * S];
        let check = check_series(&mut points, events.clone(), settings(1_000 * S, 2_000 * S));
        assert!(check.windows.iter().all(WindowCheck::matched), "{check:?}");
        assert_eq!(check.windows.len(), 3);
        // A delta point lost: the hole starts a new segment, which matches its own event.
        let mut points = vec![
            delta(1_000 * S, 1_060 * S, 2),
            delta(1_120 * S, 1_180 * S, 1),
        ];
        let check = check_series(&mut points, events, settings(1_000 * S, 2_000 * S));
        assert!(check.windows.iter().all(WindowCheck::matched), "{check:?}");
    }

    #[test]
    fn points_past_the_window_are_not_checked() {
        let (mut points, events) = steady(&[1, 1, 1]);
        let check = check_series(&mut points, events, settings(1_000 * S, 1_100 * S));
        assert_eq!(check.windows.len(), 1);
    }

    #[test]
    fn events_of_a_series_without_counter_points_are_reported() {
        let key = |class| SeriesKey {
            service: "svc".into(),
            instance: "i-1".into(),
            tool: "search".into(),
            target: "https://search.example/q".into(),
            class,
        };
        let (points, events) = steady(&[2, 1]);
        let mut counter = BTreeMap::new();
        counter.insert(key(OutcomeClass::AccessFailure), points);
        let mut stored = BTreeMap::new();
        stored.insert(key(OutcomeClass::AccessFailure), events);
        stored.insert(
            key(OutcomeClass::Partial),
            vec![1_010 * S, 1_020 * S, 5_000 * S],
        );
        let result = reconcile(counter, stored, settings(1_000 * S, 2_000 * S));
        let totals = result.totals();
        assert_eq!(totals.series, 1);
        assert_eq!(
            (totals.windows, totals.matched, totals.mismatched),
            (2, 2, 0)
        );
        assert_eq!(totals.events_without_counter, 2); // the one at 5000 s is outside
        assert!(totals.disagrees());
    }
}
