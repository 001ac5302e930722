//! `/metrics` in the Prometheus text format: the outcome counters derived from the stream, the
//! failure events, each hop's freshness, the reconciliation, the alert states and the dashboards'
//! own counters.
//!
//! A hop with no evidence has no freshness sample at all, so that `absent()` rules see it as
//! missing rather than as a fresh zero. Likewise the reconciliation's figures come only from a
//! run that covered its whole window, and are absent until one did: a run that could not read
//! never exports "0 missing".

use std::fmt::Write as _;

use candor_query::window::Micros;
use candor_schema::OutcomeClass;

use crate::alerts::State;
use crate::reconcile::ReconcileState;
use crate::state::{Shared, lock};

/// Escapes a label value: backslash, double quote and line feed.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn labels(pairs: &[(&str, &str)]) -> String {
    let inner: Vec<String> = pairs
        .iter()
        .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Renders every metric at `now`.
pub fn render(shared: &Shared, now: Micros) -> String {
    let mut out = String::new();
    let hops = shared.hops(now);
    {
        let model = lock(&shared.model);
        header(
            &mut out,
            "candor_tool_outcomes_total",
            "counter",
            "Tool calls per outcome class, from the adapters' tool.outcomes counters, since this process started.",
        );
        // Every class of every call series seen, zeros included: `rate()` needs a counter's
        // sample before its first increase, or that increase is lost.
        let mut totals: std::collections::BTreeMap<_, [u64; 4]> = std::collections::BTreeMap::new();
        for (call, class, total) in model.outcome_totals() {
            let slot = OutcomeClass::ALL
                .iter()
                .position(|c| *c == class)
                .unwrap_or(0);
            totals.entry(call).or_default()[slot] += total;
        }
        for (call, by_class) in totals {
            for (class, total) in OutcomeClass::ALL.iter().zip(by_class) {
                let _ = writeln!(
                    out,
                    "candor_tool_outcomes_total{} {total}",
                    labels(&[
                        ("service", &call.service),
                        ("tool", &call.tool),
                        ("target", &call.target),
                        ("class", class.as_str()),
                    ])
                );
            }
        }
        header(
            &mut out,
            "candor_failure_events_total",
            "counter",
            "tool.outcome failure events by kind and retry action, since this process started.",
        );
        let mut failures: Vec<_> = model.failure_totals().collect();
        failures.sort_by(|a, b| a.0.cmp(b.0));
        for (key, total) in failures {
            let _ = writeln!(
                out,
                "candor_failure_events_total{} {total}",
                labels(&[
                    ("service", &key.call.service),
                    ("tool", &key.call.tool),
                    ("target", &key.call.target),
                    ("class", key.class.as_str()),
                    ("kind", &key.kind),
                    ("action", &key.action),
                ])
            );
        }
        header(
            &mut out,
            "candor_adapter_last_seen_timestamp_seconds",
            "gauge",
            "Time of the newest counter point from each adapter instance.",
        );
        for seen in model.instances() {
            let _ = writeln!(
                out,
                "candor_adapter_last_seen_timestamp_seconds{} {}",
                labels(&[("service", &seen.service), ("instance", &seen.instance)]),
                seconds(seen.last)
            );
        }
        let applied = model.applied();
        header(
            &mut out,
            "candor_dashboards_duplicates_total",
            "counter",
            "Retried copies of records recognised by id and not counted twice.",
        );
        let _ = writeln!(
            out,
            "candor_dashboards_duplicates_total {}",
            applied.duplicates
        );
        header(
            &mut out,
            "candor_dashboards_outside_history_total",
            "counter",
            "Records whose time fell before the history or in the future, kept out of the panels' buckets.",
        );
        let _ = writeln!(
            out,
            "candor_dashboards_outside_history_total{} {}",
            labels(&[("when", "before")]),
            applied.before_history
        );
        let _ = writeln!(
            out,
            "candor_dashboards_outside_history_total{} {}",
            labels(&[("when", "future")]),
            applied.future
        );
        header(
            &mut out,
            "candor_dashboards_rejected_records_total",
            "counter",
            "Records the decoder refused, by reason.",
        );
        for (reason, count) in model.rejected() {
            let _ = writeln!(
                out,
                "candor_dashboards_rejected_records_total{} {count}",
                labels(&[("reason", reason)])
            );
        }
    }
    header(
        &mut out,
        "candor_hop_last_seen_timestamp_seconds",
        "gauge",
        "Time of the newest evidence from each pipeline hop; absent when there never was any.",
    );
    for hop in &hops {
        if let Some(at) = hop.last_seen {
            let _ = writeln!(
                out,
                "candor_hop_last_seen_timestamp_seconds{} {}",
                labels(&[("hop", hop.hop.as_str())]),
                seconds(at)
            );
        }
    }
    header(
        &mut out,
        "candor_hop_freshness_seconds",
        "gauge",
        "Seconds since the newest evidence from each pipeline hop; absent when there never was any.",
    );
    for hop in &hops {
        if let Some(age) = hop.age_seconds(now) {
            let _ = writeln!(
                out,
                "candor_hop_freshness_seconds{} {age}",
                labels(&[("hop", hop.hop.as_str())])
            );
        }
    }
    {
        let pipeline = lock(&shared.pipeline);
        header(
            &mut out,
            "candor_compactor_lag_records",
            "gauge",
            "Records read from Kafka that the tables do not hold yet.",
        );
        for (table, lag) in &pipeline.table_lag {
            let _ = writeln!(
                out,
                "candor_compactor_lag_records{} {lag}",
                labels(&[("topic", table.topic())])
            );
        }
        header(
            &mut out,
            "candor_dashboards_records_total",
            "counter",
            "Records the dashboards' consumer read, per topic.",
        );
        for (table, count) in &pipeline.records {
            let _ = writeln!(
                out,
                "candor_dashboards_records_total{} {count}",
                labels(&[("topic", table.topic())])
            );
        }
    }
    reconcile_metrics(&mut out, &lock(&shared.reconcile), shared.started, now);
    header(
        &mut out,
        "candor_alerts",
        "gauge",
        "Alert instances pending or firing in the built-in rule engine.",
    );
    for alert in lock(&shared.alerts).list() {
        let state = match alert.state {
            State::Pending => "pending",
            State::Firing => "firing",
            State::Resolved => continue,
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
        let _ = writeln!(out, "candor_alerts{} 1", labels(&pairs));
    }
    let (delivered, failed) = shared.notifications.get();
    header(
        &mut out,
        "candor_notifications_total",
        "counter",
        "Alert notifications by result: delivered (every webhook acknowledged) or failed.",
    );
    let _ = writeln!(
        out,
        "candor_notifications_total{} {delivered}",
        labels(&[("result", "delivered")])
    );
    let _ = writeln!(
        out,
        "candor_notifications_total{} {failed}",
        labels(&[("result", "failed")])
    );
    header(
        &mut out,
        "candor_dashboards_up",
        "gauge",
        "1 while the dashboards serve.",
    );
    let _ = writeln!(out, "candor_dashboards_up 1");
    out
}

/// The reconciliation's metrics: its runs, whether the newest covered its window, for how long
/// none has, and the figures of the newest run that did.
fn reconcile_metrics(out: &mut String, state: &ReconcileState, started: Micros, now: Micros) {
    header(
        out,
        "candor_reconcile_runs_total",
        "counter",
        "Reconciliation runs by result: ok (an answer, covering its window or part of it) or failed (the run could not read or did not finish).",
    );
    let _ = writeln!(
        out,
        "candor_reconcile_runs_total{} {}",
        labels(&[("result", "ok")]),
        state.runs_ok
    );
    let _ = writeln!(
        out,
        "candor_reconcile_runs_total{} {}",
        labels(&[("result", "failed")]),
        state.runs_failed
    );
    header(
        out,
        "candor_reconcile_last_run_timestamp_seconds",
        "gauge",
        "Time the newest reconciliation run ran; absent before the first one ended.",
    );
    if let Some(run) = &state.latest {
        let _ = writeln!(
            out,
            "candor_reconcile_last_run_timestamp_seconds {}",
            seconds(run.ran_at)
        );
    }
    header(
        out,
        "candor_reconcile_covered",
        "gauge",
        "1 when the newest reconciliation run covered its whole window, else 0 (partial, failed, or not run yet).",
    );
    let whole = state.latest.as_ref().is_some_and(|run| run.covered);
    let _ = writeln!(out, "candor_reconcile_covered {}", u8::from(whole));
    header(
        out,
        "candor_reconcile_uncovered_seconds",
        "gauge",
        "Seconds since the newest reconciliation run that covered its whole window (since the dashboards started when none did).",
    );
    let since = state.uncovered_since(started);
    let _ = writeln!(
        out,
        "candor_reconcile_uncovered_seconds {}",
        now.saturating_sub(since).max(0) as f64 / 1e6
    );
    let covered = state.newest_covered;
    header(
        out,
        "candor_reconcile_last_covered_timestamp_seconds",
        "gauge",
        "Time of the newest reconciliation run that covered its whole window; absent until one did.",
    );
    if let Some(covered) = &covered {
        let _ = writeln!(
            out,
            "candor_reconcile_last_covered_timestamp_seconds {}",
            seconds(covered.ran_at)
        );
    }
    header(
        out,
        "candor_reconcile_windows",
        "gauge",
        "Counter windows the newest covered reconciliation checked, by result: matched (events and counter agree at the window's end) or mismatched; absent until a run covered its window.",
    );
    if let Some(covered) = &covered {
        for (result, count) in [
            ("matched", covered.totals.matched),
            ("mismatched", covered.totals.mismatched),
        ] {
            let _ = writeln!(
                out,
                "candor_reconcile_windows{} {count}",
                labels(&[("result", result)])
            );
        }
    }
    header(
        out,
        "candor_reconcile_events",
        "gauge",
        "Events the newest covered reconciliation found out of line, by gap: missing (counted failed calls without their terminal event stored), extra (events of calls not counted) or without_counter (events of series with no counter point); absent until a run covered its window.",
    );
    if let Some(covered) = &covered {
        for (gap, count) in [
            ("missing", covered.totals.missing),
            ("extra", covered.totals.extra),
            ("without_counter", covered.totals.events_without_counter),
        ] {
            let _ = writeln!(
                out,
                "candor_reconcile_events{} {count}",
                labels(&[("gap", gap)])
            );
        }
    }
}

fn seconds(at: Micros) -> f64 {
    at as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(
            labels(&[("target", "a\"b\\c\nd")]),
            "{target=\"a\\\"b\\\\c\\nd\"}"
        );
    }

    #[test]
    fn reconcile_metrics_export_figures_only_from_a_covered_run() {
        use crate::model::MINUTE;
        use crate::reconcile::Run;
        use crate::reconcile::tests::{T0, answer, coverage, lost, window};

        let render = |state: &ReconcileState, now: Micros| {
            let mut out = String::new();
            reconcile_metrics(&mut out, state, T0 - 10 * MINUTE, now);
            out
        };
        let mut state = ReconcileState::default();
        let never = render(&state, T0);
        assert!(never.contains("candor_reconcile_covered 0\n"), "{never}");
        assert!(
            never.contains("candor_reconcile_uncovered_seconds 600\n"),
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
            "candor_reconcile_uncovered_seconds 60\n",
            "candor_reconcile_windows{result=\"matched\"} 7\n",
            "candor_reconcile_windows{result=\"mismatched\"} 3\n",
            "candor_reconcile_events{gap=\"missing\"} 3\n",
            "candor_reconcile_events{gap=\"extra\"} 0\n",
            "candor_reconcile_events{gap=\"without_counter\"} 0\n",
            "candor_reconcile_last_run_timestamp_seconds 1700000100\n",
            "candor_reconcile_last_covered_timestamp_seconds 1700000100\n",
            "# TYPE candor_reconcile_runs_total counter\n",
            "# TYPE candor_reconcile_events gauge\n",
        ] {
            assert!(covered.contains(line), "{line} not in {covered}");
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
