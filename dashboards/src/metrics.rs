//! `/metrics` in the Prometheus text format: the outcome counters derived from the stream, the
//! failure events, each hop's freshness, the alert states and the dashboards' own counters.
//!
//! A hop with no evidence has no freshness sample at all, so that `absent()` rules see it as
//! missing rather than as a fresh zero.

use std::fmt::Write as _;

use candor_query::window::Micros;
use candor_schema::OutcomeClass;

use crate::alerts::State;
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
}
