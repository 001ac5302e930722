//! The answer's figures and rows: totals, the calls' silent-failure rate, summary, open rows.

use std::time::Duration;

use candor_records::proto::OutcomeSource;
use candor_schema::LifecycleState;
use serde::Serialize;

use crate::rates::{self, Buckets, ClassCounts, Point};
use crate::window::{Micros, Window};

use super::super::failure_rates;
use super::super::rows::OperationRow;
use super::lifecycle::{OpenStatus, Operation};

/// The figures of the operations seen, and the silent-failure rate of the calls counted beside
/// them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct OperationTotals {
    /// Operations seen in the window.
    pub seen: u64,
    /// Whose latest state is `completed`.
    pub completed: u64,
    /// Whose latest state is `partial`.
    pub partial: u64,
    /// Whose latest state is `cancelled`.
    pub cancelled: u64,
    /// Whose latest state is `failed`.
    pub failed: u64,
    /// Open and [`OpenStatus::Pending`].
    pub pending: u64,
    /// Open and [`OpenStatus::Stuck`].
    pub stuck: u64,
    /// Open and [`OpenStatus::Unknown`].
    pub unknown: u64,
    /// The silent-failure rate of the calls adapters counted over the window, with the same
    /// filters: (partial + access_failure) / calls from the `tool.outcomes` counter points (those
    /// of source `adapter`), as `candor rates` gives it. `None` when no call was counted or the
    /// counts could not be read: unknown, not 0.
    pub silent_failure_rate: Option<f64>,
    /// The calls [`OperationTotals::silent_failure_rate`] was computed over; 0 without a rate.
    pub counted_calls: u64,
}

impl OperationTotals {
    /// Operations not ended.
    pub fn open(&self) -> u64 {
        self.pending + self.stuck + self.unknown
    }

    /// Operations seen whose latest state is not `completed`: ended otherwise, or still open.
    pub fn not_completed(&self) -> u64 {
        self.seen.saturating_sub(self.completed)
    }

    /// [`OperationTotals::not_completed`] / [`OperationTotals::seen`], when any was seen.
    pub fn never_completed_rate(&self) -> Option<f64> {
        // u64 → f64 loses precision only past 2^53 operations.
        (self.seen > 0).then(|| self.not_completed() as f64 / self.seen as f64)
    }

    /// These totals with the silent-failure rate of `calls`, the calls adapters counted over the
    /// window; `None` when they could not be read.
    pub fn with_calls(self, calls: Option<&ClassCounts>) -> Self {
        let counted_calls = calls.map_or(0, ClassCounts::calls);
        Self {
            // u64 → f64 loses precision only past 2^53 calls.
            silent_failure_rate: calls
                .filter(|_| counted_calls > 0)
                .map(|calls| calls.silent_failures() as f64 / counted_calls as f64),
            counted_calls,
            ..self
        }
    }
}

/// The calls adapters counted (source `adapter`: the `tool.outcomes` counter) in `window`, every
/// service, tool and target summed, from `points` (those of [`failure_rates::points`], which may
/// begin before the window: a cumulative series' baseline); and how many of their series had
/// no point before the window, whose calls before their first point are not counted.
///
/// Calls derived from standard spans are left out: they are counted by the collector, not by
/// `tool.outcomes`, and can be neither partial nor the calls of an operation.
pub(super) fn adapter_calls(mut points: Vec<Point>, window: Window) -> (ClassCounts, u64) {
    let adapter = OutcomeSource::Adapter.as_str();
    points.retain(|point| failure_rates::split_group(&point.group).0 == adapter);
    let increases = rates::increases(
        &points,
        Buckets {
            since: window.since,
            until: window.until,
            step: None,
        },
    );
    let mut sum = ClassCounts::default();
    for counts in increases.buckets.values() {
        // Every field named, so that a class added to the counts is not left out of the sum.
        let ClassCounts {
            success,
            empty,
            partial,
            access_failure,
            unverified,
            cancelled,
            accepted,
        } = *counts;
        for (total, more) in [
            (&mut sum.success, success),
            (&mut sum.empty, empty),
            (&mut sum.partial, partial),
            (&mut sum.access_failure, access_failure),
            (&mut sum.unverified, unverified),
            (&mut sum.cancelled, cancelled),
            (&mut sum.accepted, accepted),
        ] {
            *total = total.saturating_add(more);
        }
    }
    (sum, increases.series_without_baseline)
}

/// The totals of operations with their statuses ([`status`](super::status)).
pub fn totals<'a>(
    judged: impl IntoIterator<Item = (&'a Operation, Option<OpenStatus>)>,
) -> OperationTotals {
    let mut totals = OperationTotals::default();
    for (operation, status) in judged {
        totals.seen += 1;
        let slot = match (status, operation.state) {
            (Some(OpenStatus::Pending), _) => &mut totals.pending,
            (Some(OpenStatus::Stuck), _) => &mut totals.stuck,
            (Some(OpenStatus::Unknown), _) => &mut totals.unknown,
            (None, LifecycleState::Completed) => &mut totals.completed,
            (None, LifecycleState::Partial) => &mut totals.partial,
            (None, LifecycleState::Cancelled) => &mut totals.cancelled,
            (None, LifecycleState::Failed) => &mut totals.failed,
            // Not judged although open: counted as pending, never as ended.
            (None, LifecycleState::Accepted | LifecycleState::Queued | LifecycleState::Running) => {
                &mut totals.pending
            }
        };
        *slot += 1;
    }
    totals
}

/// The summary lines of `totals`; none when no operation was seen. `counts_read` says whether
/// the calls counted could be read: without a silent-failure rate, it tells "no call was
/// counted" from "unknown".
pub(super) fn summary(
    totals: &OperationTotals,
    stuck_after: Duration,
    counts_read: bool,
) -> Vec<String> {
    let Some(rate) = totals.never_completed_rate() else {
        return Vec::new();
    };
    let calls = "silent-failure rate of the calls adapters counted (tool.outcomes)";
    let calls = match totals.silent_failure_rate {
        Some(calls_rate) => format!(
            "{calls}: {:.1} % of {} call(s), (partial + access_failure) / calls",
            calls_rate * 100.0,
            totals.counted_calls
        ),
        None if counts_read => {
            format!("{calls}: unknown, not 0 %: no call was counted in the window")
        }
        None => format!("{calls}: unknown, not 0 %: the counts could not be read (see the notes)"),
    };
    vec![
        format!(
            "operations seen: {}; ended: {} {}, {} {}, {} {}, {} {}; open: {} pending, {} stuck \
             (open for {} or longer), {} unknown (their adapter instance went silent after their \
             last event, so their end would not have been seen)",
            totals.seen,
            totals.completed,
            LifecycleState::Completed.as_str(),
            totals.partial,
            LifecycleState::Partial.as_str(),
            totals.cancelled,
            LifecycleState::Cancelled.as_str(),
            totals.failed,
            LifecycleState::Failed.as_str(),
            totals.pending,
            totals.stuck,
            humantime::format_duration(stuck_after),
            totals.unknown
        ),
        format!(
            "never completed: {} of {} operations ({:.1} %): ended {}, {} or {}, or still open; \
             {calls}",
            totals.not_completed(),
            totals.seen,
            rate * 100.0,
            LifecycleState::Partial.as_str(),
            LifecycleState::Cancelled.as_str(),
            LifecycleState::Failed.as_str()
        ),
    ]
}

/// An age in whole seconds.
fn whole_seconds(age: Micros) -> Duration {
    Duration::from_secs(u64::try_from(age.max(0) / 1_000_000).unwrap_or(0))
}

/// The rows of the open operations of `judged`, the oldest (first seen) first; `end` is what
/// their age runs to.
pub(super) fn open_rows(
    judged: &[(Operation, Option<OpenStatus>)],
    end: Micros,
) -> Vec<OperationRow> {
    let mut open: Vec<(&Operation, OpenStatus)> = judged
        .iter()
        .filter_map(|(operation, status)| status.map(|status| (operation, status)))
        .collect();
    open.sort_by(|(a, _), (b, _)| (a.first_seen, &a.key).cmp(&(b.first_seen, &b.key)));
    open.into_iter()
        .map(|(operation, status)| OperationRow {
            service: operation.key.service.to_string(),
            instance: operation.instance.to_string(),
            tool: operation.key.tool.to_string(),
            target: operation.key.target.to_string(),
            operation_id: operation.key.operation_id.to_string(),
            state: operation.state,
            first_seen: operation.first_seen,
            last_seen: operation.last_seen,
            age: whole_seconds(end.saturating_sub(operation.first_seen)),
            actor: operation.actor.as_deref().map(str::to_owned),
            source_system: operation.source_system.to_string(),
            status,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use candor_records::proto::CountClass;
    use candor_records::tables::column;
    use serde_json::Value;

    use super::super::OPERATIONS_COLUMNS;
    use super::super::fixtures::{MINUTE, STUCK_AFTER, event, latest_states, silence};
    use super::super::lifecycle::status;
    use super::*;
    use crate::answer::Rows;

    #[test]
    fn the_summary_counts_each_ending_and_each_open_status() {
        use candor_schema::LifecycleState::{Accepted, Completed, Failed, Partial, Running};
        let end = 60 * MINUTE;
        let operations = latest_states(vec![
            event("stuck", "a", Accepted, 10 * MINUTE),
            event("pending", "a", Accepted, 55 * MINUTE),
            event("unknown", "b", Running, 40 * MINUTE),
            event("done", "a", Accepted, 20 * MINUTE),
            event("done", "a", Completed, 21 * MINUTE),
            event("failed", "a", Failed, 30 * MINUTE),
            event("partial", "a", Partial, 31 * MINUTE),
        ]);
        let silences = [silence("b", 41 * MINUTE, end)];
        let judged: Vec<(Operation, Option<OpenStatus>)> = operations
            .into_iter()
            .map(|op| {
                let status = status(&op, &silences, end, end, STUCK_AFTER);
                (op, status)
            })
            .collect();
        let totals = totals(judged.iter().map(|(op, status)| (op, *status)));
        assert_eq!(
            totals,
            OperationTotals {
                seen: 6,
                completed: 1,
                partial: 1,
                cancelled: 0,
                failed: 1,
                pending: 1,
                stuck: 1,
                unknown: 1,
                silent_failure_rate: None,
                counted_calls: 0,
            }
        );
        assert_eq!(totals.open(), 3);
        assert_eq!(totals.not_completed(), 5);
        assert_eq!(totals.never_completed_rate(), Some(5.0 / 6.0));
        let lines = summary(&totals, Duration::from_secs(900), true);
        assert!(
            lines[0].starts_with("operations seen: 6; ended: 1 completed"),
            "{lines:?}"
        );
        assert!(
            lines[0].contains("1 stuck (open for 15m or longer)"),
            "{lines:?}"
        );
        assert!(lines[1].contains("5 of 6 operations (83.3 %)"), "{lines:?}");
        assert!(summary(&OperationTotals::default(), Duration::from_secs(900), true).is_empty());

        // Only the open ones are listed, the oldest first, the completed one not at all.
        let rows = Rows::of(open_rows(&judged, end));
        assert_eq!(rows.columns, OPERATIONS_COLUMNS);
        let listed: Vec<(&str, &str, &str)> = rows
            .rows
            .iter()
            .map(|row| {
                let text = |name: &str| row.get(name).and_then(Value::as_str).unwrap_or("");
                (text(column::OPERATION_ID), text("status"), text("age"))
            })
            .collect();
        assert_eq!(
            listed,
            [
                ("stuck", "stuck", "50m"),
                ("unknown", "unknown", "20m"),
                ("pending", "pending", "5m"),
            ]
        );
        assert_eq!(rows.rows[0].get(column::ACTOR), Some(&Value::Null));
    }

    /// A cumulative point of `class` counted for `target` by `source`, its start and time in
    /// minutes.
    fn counted(
        source: OutcomeSource,
        target: &str,
        class: &str,
        (start, time): (Micros, Micros),
        value: i64,
    ) -> Point {
        let group = failure_rates::group_key(source.as_str(), target);
        let (start, time) = (start * MINUTE, time * MINUTE);
        let (start_text, time_text) = (start.to_string(), time.to_string());
        Point {
            series: rates::key(&[&group, class]),
            group: Arc::from(group.as_str()),
            class: CountClass::parse(class, Some(source)).unwrap(),
            cumulative: true,
            start,
            time,
            value,
            id: rates::key(&[&group, class, &start_text, &time_text]),
        }
    }

    #[test]
    fn the_silent_failure_rate_is_of_the_calls_adapters_counted_in_the_window() {
        use candor_records::proto::OutcomeSource::{Adapter, Http};
        let window = Window {
            since: 10 * MINUTE,
            until: 60 * MINUTE,
        };
        let points = vec![
            // Started before the window, with a baseline point before it: +6 and +1.
            counted(Adapter, "a", "success", (0, 5), 10),
            counted(Adapter, "a", "success", (0, 20), 16),
            counted(Adapter, "a", "partial", (0, 5), 1),
            counted(Adapter, "a", "partial", (0, 20), 2),
            // After the window: not counted.
            counted(Adapter, "a", "success", (0, 70), 100),
            // Started inside the window: its whole value counts.
            counted(Adapter, "b", "access_failure", (12, 30), 3),
            // Acceptances are counted apart, and are no calls.
            counted(Adapter, "b", "accepted", (12, 30), 2),
            // Started before the window, first seen inside: a baseline only.
            counted(Adapter, "c", "success", (0, 20), 50),
            // Derived from standard spans: not the tool.outcomes counter.
            counted(Http, "a", "access_failure", (12, 30), 40),
            counted(Http, "a", "unverified", (12, 30), 40),
        ];
        let (calls, without_baseline) = adapter_calls(points, window);
        assert_eq!(
            calls,
            ClassCounts {
                success: 6,
                partial: 1,
                access_failure: 3,
                accepted: 2,
                ..ClassCounts::default()
            }
        );
        assert_eq!(without_baseline, 1);

        let operations = OperationTotals {
            seen: 2,
            completed: 1,
            failed: 1,
            ..OperationTotals::default()
        };
        let totals = operations.with_calls(Some(&calls));
        assert_eq!(totals.silent_failure_rate, Some(4.0 / 10.0));
        assert_eq!(totals.counted_calls, 10);
        let lines = summary(&totals, Duration::from_secs(900), true);
        assert!(
            lines[1].starts_with("never completed: 1 of 2 operations (50.0 %)"),
            "{lines:?}"
        );
        assert!(lines[1].contains("40.0 % of 10 call(s)"), "{lines:?}");
    }

    #[test]
    fn without_calls_counted_the_silent_failure_rate_is_unknown_not_zero() {
        let operations = OperationTotals {
            seen: 3,
            completed: 2,
            pending: 1,
            ..OperationTotals::default()
        };
        // Only acceptances counted: no call, so no rate.
        let accepted = ClassCounts {
            accepted: 3,
            ..ClassCounts::default()
        };
        let none_counted = operations.with_calls(Some(&accepted));
        assert_eq!(
            (none_counted.silent_failure_rate, none_counted.counted_calls),
            (None, 0)
        );
        let lines = summary(&none_counted, Duration::from_secs(900), true);
        assert!(
            lines[1].contains("unknown, not 0 %: no call was counted in the window"),
            "{lines:?}"
        );
        assert!(!lines[1].contains("0.0 %"), "{lines:?}");
        // Counts that could not be read are not "no calls".
        let unread = operations.with_calls(None);
        assert_eq!(
            (unread.silent_failure_rate, unread.counted_calls),
            (None, 0)
        );
        let lines = summary(&unread, Duration::from_secs(900), false);
        assert!(
            lines[1].contains("unknown, not 0 %: the counts could not be read"),
            "{lines:?}"
        );
        assert!(!lines[1].contains("no call was counted"), "{lines:?}");
    }
}
