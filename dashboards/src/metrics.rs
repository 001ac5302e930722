//! `/metrics` in the Prometheus text format: the outcome counters derived from the stream, the
//! failure events, the open operations, each hop's freshness, the reconciliation, the alert
//! states and the dashboards' own counters. The outcome, failure and refusal counters continue
//! across restarts ([`crate::model::StoredTotals`]) and are left out while a start reads the
//! history. Every value is read from the newest published snapshot ([`crate::snapshot`]), so a
//! scrape takes no lock of the model and every sample is of the snapshot's instant; every name
//! is a constant in [`names`]. The open operations are those of the newest rule evaluation's
//! judgement ([`crate::operations::Judgement`]).
//!
//! A hop with no evidence has no freshness sample at all, so that `absent()` rules see it as
//! missing rather than as a fresh zero. Likewise the reconciliation's figures come only from a
//! run that covered its whole window, and are absent until one did: a run that could not read
//! never exports "0 missing".

use std::collections::BTreeMap;

use candor_query::window::Micros;
use candor_records::proto::CountClass;
use candor_schema::OutcomeClass;
use candor_service::metrics::{Labels, Snapshot as Exposition, labels};

use crate::alerts::State;
use crate::model::Counters;
use crate::operations::Judgement;
use crate::reconcile::ReconcileState;
use crate::snapshot::{Outcomes, Snapshot};

pub use crate::metric_names as names;

/// `candor_tool_outcomes_total` and `candor_tool_operations_accepted_total`: the calls the model
/// counted, by class, and the acceptances apart from them.
fn call_counters(out: &mut Exposition, counters: &Counters) {
    // Every class of every call series seen, zeros included: `rate()` needs a counter's
    // sample before its first increase, or that increase is lost.
    // Every class a call's source counts has a series from its first point, zeros included,
    // so that a rate over it reads 0 rather than nothing.
    let mut totals: BTreeMap<_, BTreeMap<CountClass, u64>> = BTreeMap::new();
    let mut accepted: BTreeMap<_, u64> = BTreeMap::new();
    for (call, class, total) in counters.outcomes() {
        if class == CountClass::Accepted {
            *accepted.entry(call).or_default() += total;
            continue;
        }
        let classes = totals.entry(call).or_insert_with(|| {
            classes_of(call)
                .into_iter()
                .map(|class| (class, 0))
                .collect()
        });
        *classes.entry(class).or_default() += total;
    }
    let outcomes = totals.into_iter().flat_map(|(call, by_class)| {
        by_class.into_iter().map(move |(class, total)| {
            let series = labels(&[
                ("service", &call.service),
                ("tool", &call.tool),
                ("target", &call.target),
                ("class", class.as_str()),
                ("source", &call.source),
            ]);
            (series, total)
        })
    });
    out.counters(names::TOOL_OUTCOMES_TOTAL, outcomes);
    let accepted = accepted.into_iter().map(|(call, total)| {
        let series = labels(&[
            ("service", &call.service),
            ("tool", &call.tool),
            ("target", &call.target),
            ("source", &call.source),
        ]);
        (series, total)
    });
    out.counters(names::OPERATIONS_ACCEPTED_TOTAL, accepted);
}

/// The counters continuous across restarts ([`crate::model::StoredTotals`]): the calls, the
/// failure events and the refused records.
fn counted_totals(out: &mut Exposition, counters: &Counters) {
    call_counters(out, counters);
    let failures = counters.failures().map(|(key, total)| {
        let series = labels(&[
            ("service", &key.call.service),
            ("tool", &key.call.tool),
            ("target", &key.call.target),
            ("class", key.class.as_str()),
            ("kind", &key.kind),
            ("action", &key.action),
            ("source", &key.call.source),
        ]);
        (series, total)
    });
    out.counters(names::FAILURE_EVENTS_TOTAL, failures);
    let rejected = counters
        .rejected()
        .iter()
        .map(|(reason, count)| (labels(&[("reason", reason)]), *count));
    out.counters(names::REJECTED_RECORDS_TOTAL, rejected);
}

/// A count as a gauge's whole number.
fn whole(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// Renders every metric of `snapshot`.
pub fn render(snapshot: &Snapshot) -> String {
    let now = snapshot.at;
    let mut out = Exposition::new(names::help);
    // A half-read history counts less than the process before this one served: left out until
    // it is read, the counters never fall.
    let ready = snapshot.history_ready;
    out.gauges(names::HISTORY_READY, [(Labels::new(), i64::from(ready))]);
    if ready {
        counted_totals(&mut out, &snapshot.counters);
    }
    let instances = snapshot.instances.iter().map(|seen| {
        let series = labels(&[("service", &seen.service), ("instance", &seen.instance)]);
        (series, seconds(seen.last))
    });
    out.float_gauges(names::ADAPTER_LAST_SEEN, instances);
    let applied = snapshot.applied;
    out.counters(
        names::DUPLICATES_TOTAL,
        [(Labels::new(), applied.duplicates)],
    );
    out.counters(
        names::POINTS_SET_ASIDE_TOTAL,
        [
            (labels(&[("why", "baseline")]), applied.baselines),
            (labels(&[("why", "stale")]), applied.stale_points),
        ],
    );
    out.counters(
        names::OUTSIDE_HISTORY_TOTAL,
        [
            (labels(&[("when", "before")]), applied.before_history),
            (labels(&[("when", "future")]), applied.future),
        ],
    );
    operation_metrics(&mut out, &snapshot.operations, snapshot.operations_evicted);
    let hops = &snapshot.hops;
    let last_seen = hops.iter().filter_map(|hop| {
        let at = hop.last_seen?;
        Some((labels(&[("hop", hop.hop.as_str())]), seconds(at)))
    });
    out.float_gauges(names::HOP_LAST_SEEN, last_seen);
    let freshness = hops.iter().filter_map(|hop| {
        let age = hop.age_seconds(now)?;
        Some((labels(&[("hop", hop.hop.as_str())]), age))
    });
    out.float_gauges(names::HOP_FRESHNESS, freshness);
    let pipeline = &snapshot.pipeline;
    let lag = pipeline
        .table_lag
        .iter()
        .map(|(table, lag)| (labels(&[("topic", table.topic())]), whole(*lag)));
    out.gauges(names::COMPACTOR_LAG, lag);
    let records = pipeline
        .records
        .iter()
        .map(|(table, count)| (labels(&[("topic", table.topic())]), *count));
    out.counters(names::RECORDS_TOTAL, records);
    let lost = pipeline
        .history_lost
        .iter()
        .map(|(table, count)| (labels(&[("topic", table.topic())]), *count));
    out.counters(names::HISTORY_LOST_TOTAL, lost);
    reconcile_metrics(&mut out, &snapshot.reconcile, snapshot.started, now);
    let alerts: Vec<(Labels, i64)> = snapshot
        .alerts
        .iter()
        .filter_map(|alert| {
            let state = match alert.state {
                State::Pending => "pending",
                State::Firing => "firing",
                State::Resolved => return None,
            };
            let mut pairs: Vec<(&str, &str)> = vec![
                ("alertname", &alert.name),
                ("severity", alert.severity),
                ("state", state),
            ];
            for (name, value) in &alert.labels {
                if !matches!(name.as_str(), "alertname" | "severity" | "state") {
                    pairs.push((name, value));
                }
            }
            Some((labels(&pairs), 1))
        })
        .collect();
    out.gauges(names::ALERTS, alerts);
    let own = &snapshot.own;
    let refused = own
        .refusals
        .iter()
        .map(|(refusal, count)| (labels(&[("reason", refusal.as_str())]), *count));
    out.counters(names::HTTP_REFUSED_TOTAL, refused);
    let results = [
        (names::STATE_SAVES_TOTAL, "saved", own.state_saves),
        (names::COUNTER_SAVES_TOTAL, "saved", own.counter_saves),
        (names::SILENCE_READS_TOTAL, "read", own.silence_reads),
        (names::NOTIFICATIONS_TOTAL, "delivered", own.notifications),
    ];
    for (
        name,
        done,
        Outcomes {
            done: succeeded,
            failed,
        },
    ) in results
    {
        out.counters(
            name,
            [
                (labels(&[("result", done)]), succeeded),
                (labels(&[("result", "failed")]), failed),
            ],
        );
    }
    out.gauges(names::UP, [(Labels::new(), 1)]);
    out.encode()
}

/// The open operations per service, tool and target, as the newest rule evaluation judged them:
/// how many, by whether their adapter instance still reports, and when the oldest of those that
/// do was first seen. No operation is called stuck here: the alert rules compare the oldest
/// one's age.
fn operation_metrics(out: &mut Exposition, judgement: &Judgement, evicted: u64) {
    let open = judgement
        .open
        .iter()
        .flat_map(|((service, tool, target), figures)| {
            [("reporting", figures.reporting), ("silent", figures.silent)]
                .into_iter()
                .filter(|(_, count)| *count > 0)
                .map(move |(adapter, count)| {
                    let series = labels(&[
                        ("service", service.as_str()),
                        ("tool", tool.as_str()),
                        ("target", target.as_str()),
                        ("adapter", adapter),
                    ]);
                    (series, count)
                })
        });
    out.gauges(names::OPERATIONS_OPEN, open);
    let oldest = judgement
        .open
        .iter()
        .filter_map(|((service, tool, target), figures)| {
            let first = figures.oldest_reporting?;
            let series = labels(&[
                ("service", service.as_str()),
                ("tool", tool.as_str()),
                ("target", target.as_str()),
            ]);
            Some((series, seconds(first)))
        });
    out.float_gauges(names::OPERATION_OLDEST_OPEN, oldest);
    out.counters(names::OPERATIONS_EVICTED_TOTAL, [(Labels::new(), evicted)]);
}

/// The reconciliation's metrics: its runs, whether the newest covered its window, for how long
/// none has, and the figures of the newest run that did.
fn reconcile_metrics(out: &mut Exposition, state: &ReconcileState, started: Micros, now: Micros) {
    out.counters(
        names::RECONCILE_RUNS_TOTAL,
        [
            (labels(&[("result", "ok")]), state.runs_ok),
            (labels(&[("result", "failed")]), state.runs_failed),
        ],
    );
    let last_run = state
        .latest
        .as_ref()
        .map(|run| (Labels::new(), seconds(run.ran_at)));
    out.float_gauges(names::RECONCILE_LAST_RUN, last_run);
    let whole_window = state.latest.as_ref().is_some_and(|run| run.covered);
    out.gauges(
        names::RECONCILE_COVERED,
        [(Labels::new(), i64::from(whole_window))],
    );
    let since = state.uncovered_since(started);
    let uncovered = now.saturating_sub(since).max(0) as f64 / 1e6;
    out.float_gauges(names::RECONCILE_UNCOVERED, [(Labels::new(), uncovered)]);
    let covered = state.newest_covered.as_ref();
    let last_covered = covered.map(|run| (Labels::new(), seconds(run.ran_at)));
    out.float_gauges(names::RECONCILE_LAST_COVERED, last_covered);
    let windows = covered.into_iter().flat_map(|run| {
        [
            ("matched", run.totals.matched),
            ("mismatched", run.totals.mismatched),
        ]
        .map(|(result, count)| (labels(&[("result", result)]), whole(count)))
    });
    out.gauges(names::RECONCILE_WINDOWS, windows);
    let events = covered.into_iter().flat_map(|run| {
        [
            ("missing", run.totals.missing),
            ("extra", run.totals.extra),
            ("without_counter", run.totals.events_without_counter),
        ]
        .map(|(gap, count)| (labels(&[("gap", gap)]), whole(count)))
    });
    out.gauges(names::RECONCILE_EVENTS, events);
}

/// The classes a call's source counts: the contract's four for an adapter's, and what a span can
/// tell for a derived source's.
fn classes_of(call: &crate::model::CallKey) -> Vec<CountClass> {
    if call.derived() {
        vec![
            CountClass::Outcome(OutcomeClass::AccessFailure),
            CountClass::Unverified,
            CountClass::Cancelled,
        ]
    } else {
        OutcomeClass::ALL
            .iter()
            .copied()
            .map(CountClass::Outcome)
            .collect()
    }
}

fn seconds(at: Micros) -> f64 {
    at as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Work accepted is not work done: an adapter's acceptances have a counter of their own and
    /// are no class of `candor_tool_outcomes_total`, whose ratios would count them as calls.
    #[test]
    fn acceptances_are_a_counter_of_their_own_and_no_class_of_the_outcomes() {
        use candor_records::proto::{OutcomeCount, Temporality};
        use candor_records::rows::{Meta, Row};
        use candor_records::tables::Arrival;

        use crate::model::{Model, ModelSettings};

        let t0: Micros = 1_700_000_040_000_000;
        let mut model = Model::new(ModelSettings::default());
        model.hold_from(t0);
        for (offset, (class, value)) in [("success", 2), ("accepted", 3)].into_iter().enumerate() {
            let at = t0 + 10_000_000;
            let count = OutcomeCount {
                point_id: class.into(),
                service_name: "svc".into(),
                service_instance_id: "i-1".into(),
                tool_name: "export".into(),
                tool_target: "https://jobs.test".into(),
                outcome_class: class.into(),
                start_time_unix_nano: 1_000 * u64::try_from(t0).expect("positive"),
                time_unix_nano: 1_000 * u64::try_from(at).expect("positive"),
                value,
                temporality: Temporality::Delta as i32,
                ..OutcomeCount::default()
            };
            let meta = Meta {
                partition: 0,
                offset: i64::try_from(offset).expect("small"),
                kafka_micros: at,
                arrival: Arrival::OnTime,
            };
            model.apply(&meta, &Row::Count(Box::new(count)), at);
        }
        let mut out = Exposition::new(names::help);
        call_counters(&mut out, &model.counters());
        let text = out.encode();
        let samples = |family: &str| -> Vec<String> {
            text.lines()
                .filter(|line| line.starts_with(&format!("{family}{{")))
                .map(str::to_owned)
                .collect()
        };
        let accepted = samples("candor_tool_operations_accepted_total");
        assert_eq!(accepted.len(), 1, "{text}");
        assert!(
            accepted[0].contains("tool=\"export\"") && accepted[0].ends_with(" 3"),
            "{text}"
        );
        let outcomes = samples("candor_tool_outcomes_total");
        assert!(
            outcomes.iter().all(|line| !line.contains("accepted")),
            "{text}"
        );
        assert!(
            outcomes
                .iter()
                .any(|line| line.contains("class=\"success\"") && line.ends_with(" 2")),
            "{text}"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let mut out = Exposition::new(names::help);
        out.gauges(names::UP, [(labels(&[("target", "a\"b\\c\nd")]), 1)]);
        let text = out.encode();
        assert!(
            text.contains("candor_dashboards_up{target=\"a\\\"b\\\\c\\nd\"} 1\n"),
            "{text}"
        );
    }

    #[test]
    fn reconcile_metrics_export_figures_only_from_a_covered_run() {
        use crate::model::MINUTE;
        use crate::reconcile::Run;
        use crate::reconcile::tests::{T0, answer, coverage, lost, window};

        let render = |state: &ReconcileState, now: Micros| {
            let mut out = Exposition::new(names::help);
            reconcile_metrics(&mut out, state, T0 - 10 * MINUTE, now);
            out.encode()
        };
        let value = |text: &str, series: &str| candor_service::metrics::sample(text, series);
        let mut state = ReconcileState::default();
        let never = render(&state, T0);
        assert!(never.contains("candor_reconcile_covered 0\n"), "{never}");
        assert_eq!(
            value(&never, "candor_reconcile_uncovered_seconds"),
            Some(600.0),
            "{never}"
        );
        assert!(
            never.contains("candor_reconcile_runs_total{result=\"failed\"} 0\n"),
            "{never}"
        );
        // No sample line (a HELP line names the family too).
        for absent in [
            "\ncandor_reconcile_events{",
            "\ncandor_reconcile_windows{",
            "\ncandor_reconcile_last_run_timestamp_seconds ",
            "\ncandor_reconcile_last_covered_timestamp_seconds ",
        ] {
            assert!(!never.contains(absent), "{absent} in {never}");
        }
        // A partial run: an answer, but no figures exported.
        state.record(Run::new(
            T0,
            window(),
            coverage(T0 - 30 * MINUTE),
            Ok(answer(lost(4), 4)),
            50,
        ));
        let partial = render(&state, T0);
        assert!(
            partial.contains("candor_reconcile_covered 0\n"),
            "{partial}"
        );
        assert!(
            partial.contains("candor_reconcile_runs_total{result=\"ok\"} 1\n"),
            "{partial}"
        );
        assert!(!partial.contains("candor_reconcile_events{"), "{partial}");
        // A covered run with 3 missing.
        state.record(Run::new(
            T0 + MINUTE,
            window(),
            coverage(T0),
            Ok(answer(lost(3), 3)),
            50,
        ));
        let covered = render(&state, T0 + 2 * MINUTE);
        for line in [
            "candor_reconcile_covered 1\n",
            "candor_reconcile_windows{result=\"matched\"} 7\n",
            "candor_reconcile_windows{result=\"mismatched\"} 3\n",
            "candor_reconcile_events{gap=\"missing\"} 3\n",
            "candor_reconcile_events{gap=\"extra\"} 0\n",
            "candor_reconcile_events{gap=\"without_counter\"} 0\n",
            "# TYPE candor_reconcile_runs_total counter\n",
            "# TYPE candor_reconcile_events gauge\n",
        ] {
            assert!(covered.contains(line), "{line} not in {covered}");
        }
        for (series, seconds) in [
            ("candor_reconcile_uncovered_seconds", 60.0),
            (
                "candor_reconcile_last_run_timestamp_seconds",
                1_700_000_100.0,
            ),
            (
                "candor_reconcile_last_covered_timestamp_seconds",
                1_700_000_100.0,
            ),
        ] {
            assert_eq!(
                value(&covered, series),
                Some(seconds),
                "{series} in {covered}"
            );
        }
        // A failed run after it: covered 0, the covered run's figures stay.
        state.record(Run::failed(T0 + 2 * MINUTE, window(), "timeout".into()));
        let failed = render(&state, T0 + 2 * MINUTE);
        assert!(failed.contains("candor_reconcile_covered 0\n"), "{failed}");
        assert!(
            failed.contains("candor_reconcile_events{gap=\"missing\"} 3\n"),
            "{failed}"
        );
        assert!(
            failed.contains("candor_reconcile_runs_total{result=\"failed\"} 1\n"),
            "{failed}"
        );
    }
}
