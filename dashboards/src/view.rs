//! The overview: one answer built from the newest published snapshot ([`crate::snapshot`]),
//! served as JSON by `/api/overview` and rendered as HTML by `/`, so that the page and scripts
//! read the same numbers, all of one instant.

use std::collections::BTreeMap;

use candor_query::coverage::SeenBy;
use candor_query::rates::{ClassCounts, Spike, spikes};
use candor_query::window::{Micros, serialize_micros};
use serde::Serialize;

use crate::alerts::{Alert, humanize};
use crate::health::{Freshness, Hop, HopName, PanelCoverage, when};
use crate::instances::{InstanceRow, instance_rows};
use crate::model::{Applied, CollectorSeen, FailureBreakdown, GroupBy, Tallies};
use crate::operations::{OperationsPanel, TOP_ROWS};
use crate::reconcile::ReconcileState;
use crate::snapshot::Snapshot;

/// Groups shown on a chart.
pub const CHART_GROUPS: usize = 8;

/// One group's counts over the range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupRow {
    /// The target, tool or service.
    pub group: String,
    /// Calls by class.
    pub counts: ClassCounts,
    /// (partial + access_failure) / calls; `None` without calls.
    pub silent_failure_rate: Option<f64>,
    /// Whether the rate is only a lower bound: some calls were derived from standard spans
    /// without error, and any of them may have been partial.
    pub lower_bound: bool,
    /// Failure events that ended a call.
    pub terminal_events: u64,
}

/// A chart: per group, the silent-failure rate of each bucket.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chart {
    /// What the series are grouped by.
    pub by: GroupBy,
    /// Bucket starts, oldest first.
    pub buckets: Vec<Micros>,
    /// Per group: the rate of each bucket (`None` for a bucket without calls).
    pub series: Vec<(String, Vec<Option<f64>>)>,
}

/// The overview answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overview {
    /// When it was built.
    #[serde(serialize_with = "serialize_micros")]
    pub now: Micros,
    /// The range the panels cover, ending now.
    pub range_micros: Micros,
    /// Every hop's freshness.
    pub hops: Vec<Hop>,
    /// The worst hop.
    pub pipeline: Freshness,
    /// What the stream panels cover (they depend on the collector and Kafka hops).
    pub coverage: PanelCoverage,
    /// Per target, most silent failures first.
    pub by_target: Vec<GroupRow>,
    /// Per tool, most silent failures first.
    pub by_tool: Vec<GroupRow>,
    /// Silent-failure rate over time per target.
    pub chart_target: Chart,
    /// Silent-failure rate over time per tool.
    pub chart_tool: Chart,
    /// AccessFailure spikes now, by the first spike rule's window and baseline.
    pub spikes: Vec<Spike>,
    /// The spike rule's window and baseline.
    pub spike_window_micros: Micros,
    /// The spike rule's baseline.
    pub spike_baseline_micros: Micros,
    /// Alert instances.
    pub alerts: Vec<Alert>,
    /// What reconciliation found: the newest run (its window, coverage, figures and mismatch
    /// rows) and the newest run that covered its whole window.
    pub reconcile: ReconcileState,
    /// Failure events by kind, action and target.
    pub failures: FailureBreakdown,
    /// Asynchronous operations: the open ones, stuck first, and the figures of all kept, as the
    /// newest rule evaluation judged them (every `alerts.evaluate_every`; judged when the
    /// snapshot was taken only before the first evaluation), so an operation that ended or
    /// turned stuck since shows so from the next evaluation on.
    pub operations: OperationsPanel,
    /// What the operations panel covers: everything the stream holds, judged by every hop (its
    /// "no operation is open" is a claim `candor operations` over the tables must agree with),
    /// with the silent instances as gaps.
    pub operations_coverage: PanelCoverage,
    /// Adapter instances.
    pub instances: Vec<InstanceRow>,
    /// Collectors by their heartbeats.
    pub collectors: Vec<CollectorSeen>,
    /// What the stream applied.
    pub applied: Applied,
    /// Records the decoder refused, by reason.
    pub rejected: BTreeMap<String, u64>,
    /// Whether any webhook is configured.
    pub has_receivers: bool,
}

fn rows(counts: BTreeMap<String, crate::model::GroupCounts>) -> Vec<GroupRow> {
    let mut rows: Vec<GroupRow> = counts
        .into_iter()
        .map(|(group, counts)| GroupRow {
            silent_failure_rate: rate(&counts.calls),
            lower_bound: counts.calls.lower_bound(),
            counts: counts.calls,
            terminal_events: counts.terminal_events,
            group,
        })
        .collect();
    rows.sort_by(|a, b| {
        (b.counts.silent_failures(), b.terminal_events)
            .cmp(&(a.counts.silent_failures(), a.terminal_events))
            .then_with(|| a.group.cmp(&b.group))
    });
    rows
}

/// (partial + access_failure) / calls.
pub fn rate(counts: &ClassCounts) -> Option<f64> {
    let calls = counts.calls();
    // u64 → f64 loses precision only past 2^53 calls.
    (calls > 0).then(|| counts.silent_failures() as f64 / calls as f64)
}

fn chart(
    tallies: &Tallies,
    step: Micros,
    by: GroupBy,
    since: Micros,
    until: Micros,
    order: &[GroupRow],
) -> Chart {
    let first = since.div_euclid(step) * step;
    let buckets: Vec<Micros> = (0..)
        .map(|i| first + i * step)
        .take_while(|at| *at < until)
        .collect();
    let shown: std::collections::BTreeSet<String> = order
        .iter()
        .take(CHART_GROUPS)
        .map(|row| row.group.clone())
        .collect();
    let all = tallies.series_by(by, since, until, Some(&shown));
    let series = order
        .iter()
        .take(CHART_GROUPS)
        .filter_map(|row| {
            let points = all.get(&row.group)?;
            let values = buckets
                .iter()
                .map(|at| points.get(at).and_then(rate))
                .collect();
            Some((row.group.clone(), values))
        })
        .collect();
    Chart {
        by,
        buckets,
        series,
    }
}

/// Builds the overview of `snapshot` over the `range` ending at the snapshot's instant.
pub fn overview(snapshot: &Snapshot, range: Micros) -> Overview {
    let now = snapshot.at;
    let hops = snapshot.hops.clone();
    let pipeline = hops
        .iter()
        .fold(Freshness::Live, |worst, hop| worst.worst(hop.freshness));
    let spike = snapshot.spike;
    let tallies = &snapshot.tallies;
    let step = snapshot.settings.step;
    let since = now - range;
    let stream_hops: Vec<&Hop> = hops
        .iter()
        .filter(|hop| matches!(hop.hop, HopName::Collector | HopName::Kafka))
        .collect();
    let held = snapshot.holds_from;
    let mut coverage = PanelCoverage::of(&stream_hops, held, since, now);
    let until = now + 1;
    let by_target = rows(tallies.counts_by(GroupBy::Target, since, until));
    let by_tool = rows(tallies.counts_by(GroupBy::Tool, since, until));
    let chart_target = chart(tallies, step, GroupBy::Target, since, until, &by_target);
    let chart_tool = chart(tallies, step, GroupBy::Tool, since, until, &by_tool);
    let split = now.div_euclid(step) * step + step - spike.window;
    let found = spikes(
        &tallies.calls_by_target(split, split + spike.window),
        &tallies.calls_by_target(split - spike.baseline, split),
        spike.rule,
    );
    let instances = instance_rows(snapshot.instances.clone(), now, snapshot.silent_after);
    coverage.gaps.extend(silent_instance_gaps(&instances));
    let every_hop: Vec<&Hop> = hops.iter().collect();
    let mut operations_coverage = PanelCoverage::of(&every_hop, held, held.unwrap_or(since), now);
    operations_coverage
        .gaps
        .extend(silent_instance_gaps(&instances));
    Overview {
        now,
        range_micros: range,
        hops,
        pipeline,
        coverage,
        by_target: by_target.into_iter().take(TOP_ROWS * 5).collect(),
        by_tool: by_tool.into_iter().take(TOP_ROWS * 5).collect(),
        chart_target,
        chart_tool,
        spikes: found,
        spike_window_micros: spike.window,
        spike_baseline_micros: spike.baseline,
        alerts: snapshot.alerts.clone(),
        reconcile: snapshot.reconcile.clone(),
        failures: tallies.failures(since, until),
        operations: snapshot.operations.panel.clone(),
        operations_coverage,
        instances,
        collectors: snapshot.collectors.clone(),
        applied: snapshot.applied,
        rejected: snapshot.rejected().clone(),
        has_receivers: snapshot.has_receivers,
    }
}

/// What the stream panels miss because of silent instances: their calls since their last
/// export, each instance named.
fn silent_instance_gaps(rows: &[InstanceRow]) -> Vec<String> {
    rows.iter()
        .filter(|row| row.silent)
        .map(|row| {
            let (what, sent) = match row.seen.seen_by {
                SeenBy::Adapter => ("adapter instance", "counter point"),
                SeenBy::Spans => ("instance", "span or other telemetry"),
            };
            format!(
                "{what} {} of service {} has sent no {sent} since {}{}: its calls since are \
                 unknown",
                row.seen.instance,
                row.seen.service,
                when(row.seen.last),
                row.seen
                    .interval_micros
                    .map(|every| format!(" (it exported every {})", humanize(every)))
                    .unwrap_or_default()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{InstanceSeen, MINUTE, SECOND};

    const NOW: Micros = 1_700_000_000 * SECOND;

    fn seen(instance: &str, last: Micros, stopped: bool, replaced: bool) -> InstanceSeen {
        InstanceSeen {
            service: Arc::from("shop"),
            instance: Arc::from(instance),
            seen_by: SeenBy::Adapter,
            first: NOW - 30 * MINUTE,
            last,
            interval_micros: Some(10 * SECOND),
            stopped,
            replaced,
        }
    }

    #[test]
    fn a_silent_instance_is_a_named_gap_and_a_stopped_or_replaced_one_is_not() {
        let rows = instance_rows(
            vec![
                seen("live", NOW - 5 * SECOND, false, false),
                seen("cut", NOW - 2 * MINUTE, false, false),
                seen("done", NOW - 2 * MINUTE, true, false),
                seen("old", NOW - 2 * MINUTE, false, true),
            ],
            NOW,
            10 * MINUTE,
        );
        let silent: Vec<&str> = rows
            .iter()
            .filter(|row| row.silent)
            .map(|row| &*row.seen.instance)
            .collect();
        assert_eq!(silent, ["cut"]);
        let gaps = silent_instance_gaps(&rows);
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(
            gaps[0].starts_with("adapter instance cut of service shop has sent no counter point"),
            "{gaps:?}"
        );
        // A gap makes every stream panel's zero unconfirmed.
        let mut coverage = PanelCoverage {
            freshness: Freshness::Live,
            from: Some(NOW - 5 * MINUTE),
            until: Some(NOW),
            gaps: Vec::new(),
        };
        assert!(coverage.zero_is_confirmed());
        coverage.gaps.extend(gaps);
        assert!(!coverage.zero_is_confirmed());
    }
}
