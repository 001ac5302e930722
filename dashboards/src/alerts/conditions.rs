//! Which alert instances hold now: each rule's kind read against the model, the hops, the
//! reconciliation and the operations' judgement of one evaluation. Pure.

use std::collections::BTreeMap;

use candor_query::rates::{ClassCounts, SpikeRule, spikes};
use candor_query::window::Micros;

use super::{Labels, humanize};
use crate::health::{Freshness, Hop, HopName, when};
use crate::model::Model;
use crate::operations::{self, Judged};
use crate::reconcile::ReconcileState;
use crate::rules::{Rule, RuleKind, stale_rule};

/// Said of a rate over calls derived from standard spans, whose span cannot show a partial
/// answer (the contract's section 10.7).
const LOWER_BOUND: &str = " (derived from standard spans: a lower bound, since a call without \
                           error may still have been partial)";

/// An alert instance whose condition holds now.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// The rule's index in the rule list.
    pub rule: usize,
    /// What tells this instance apart (a target, a hop, an instance).
    pub labels: Labels,
    /// What was measured, in words.
    pub description: String,
}

/// What the engine sees at one evaluation.
#[derive(Debug, Clone, Copy)]
pub struct Observation<'a> {
    /// The stream's model.
    pub model: &'a Model,
    /// The pipeline's hops.
    pub hops: &'a [Hop],
    /// What reconciliation found.
    pub reconcile: &'a ReconcileState,
    /// The model's operations judged at `now` ([`Judged::of`]).
    pub operations: &'a Judged<'a>,
    /// When the dashboards started: a hop never seen is missing since then.
    pub started: Micros,
    /// The clock.
    pub now: Micros,
}

/// The instances of every rule whose condition holds at `seen.now`.
pub fn conditions(rules: &[Rule], seen: Observation<'_>) -> Vec<Condition> {
    let mut out = Vec::new();
    for (index, rule) in rules.iter().enumerate() {
        let mut hold = |labels: Labels, description: String| {
            out.push(Condition {
                rule: index,
                labels,
                description,
            });
        };
        match &rule.kind {
            RuleKind::Spike {
                window,
                baseline,
                factor,
                min_events,
            } => {
                let model = seen.model;
                let step = model.settings().step;
                // Whole buckets: the window ends with the bucket that holds `now`.
                let until = model.bucket_of(seen.now) + step;
                let split = until - window;
                let recent = model.tallies().calls_by_target(split, until);
                let before = model.tallies().calls_by_target(split - baseline, split);
                let rule = SpikeRule {
                    factor: *factor,
                    min_events: *min_events,
                };
                for spike in spikes(&recent, &before, rule) {
                    let baseline_text = spike.baseline_rate.map_or_else(
                        || "no AccessFailure in the baseline".to_owned(),
                        |rate| format!("{:.1} % in the baseline", rate * 100.0),
                    );
                    let derived = recent
                        .get(&spike.target)
                        .is_some_and(ClassCounts::lower_bound);
                    hold(
                        label("target", &spike.target),
                        format!(
                            "{} AccessFailures of {} calls ({:.1} %) in the window, \
                             {baseline_text}{}",
                            spike.window_failures,
                            spike.window_calls,
                            spike.window_rate * 100.0,
                            if derived { LOWER_BOUND } else { "" }
                        ),
                    );
                }
            }
            RuleKind::BurnRate {
                objective,
                group_by,
                min_calls,
                windows,
            } => {
                let model = seen.model;
                let until = model.bucket_of(seen.now) + model.settings().step;
                let budget = 1.0 - objective;
                let mut burning: BTreeMap<String, Vec<String>> = BTreeMap::new();
                let mut lower_bound: std::collections::BTreeSet<String> = Default::default();
                for pair in windows {
                    let long = model.tallies().counts_by(*group_by, until - pair.long, until);
                    let short = model.tallies().counts_by(*group_by, until - pair.short, until);
                    for (group, counts) in &long {
                        let calls = counts.calls.calls();
                        if calls < *min_calls || calls == 0 {
                            continue;
                        }
                        let long_rate = counts.calls.silent_failures() as f64 / calls as f64;
                        let short_rate = short.get(group).map_or(0.0, |s| {
                            let calls = s.calls.calls();
                            if calls == 0 {
                                0.0
                            } else {
                                s.calls.silent_failures() as f64 / calls as f64
                            }
                        });
                        let limit = pair.factor * budget;
                        if long_rate >= limit && short_rate >= limit {
                            if counts.calls.lower_bound() {
                                lower_bound.insert(group.clone());
                            }
                            burning.entry(group.clone()).or_default().push(format!(
                                "{:.1} % over {} and {:.1} % over {} (limit {:.1} %)",
                                long_rate * 100.0,
                                humanize(pair.long),
                                short_rate * 100.0,
                                humanize(pair.short),
                                limit * 100.0
                            ));
                        }
                    }
                }
                let name = match group_by {
                    crate::model::GroupBy::Target => "target",
                    crate::model::GroupBy::Tool => "tool",
                    crate::model::GroupBy::Service => "service",
                };
                for (group, reasons) in burning {
                    let bound = if lower_bound.contains(&group) {
                        LOWER_BOUND
                    } else {
                        ""
                    };
                    hold(
                        label(name, &group),
                        format!("silent-failure rate {}{bound}", reasons.join("; ")),
                    );
                }
            }
            RuleKind::PipelineStale { after } => {
                for hop in seen.hops {
                    let since = hop.last_seen.unwrap_or(seen.started);
                    if seen.now.saturating_sub(since) < *after {
                        continue;
                    }
                    let what = match hop.freshness {
                        Freshness::Unknown => format!(
                            "no evidence at all since the dashboards started at {}",
                            when(seen.started)
                        ),
                        _ => format!("no evidence since {}", when(since)),
                    };
                    hold(
                        label("hop", hop.hop.as_str()),
                        format!("{}: {what} ({})", hop.hop.as_str(), hop.detail),
                    );
                }
            }
            RuleKind::AdapterSilent { after } => {
                for instance in seen.model.instances() {
                    // One that said it stopped, or that a new instance replaced, is not silent.
                    if instance.stopped
                        || instance.replaced
                        || seen.now.saturating_sub(instance.last) < *after
                    {
                        continue;
                    }
                    let mut labels = label("service", &instance.service);
                    labels.insert("instance".into(), instance.instance.to_string());
                    hold(
                        labels,
                        format!(
                            "no counter point from {} / {} since {}",
                            instance.service,
                            instance.instance,
                            when(instance.last)
                        ),
                    );
                }
            }
            RuleKind::ReconcileMismatch { after } => {
                reconcile_mismatch(seen, *after, &mut hold);
            }
            RuleKind::StuckOperations { after } => stuck_operations(rules, seen, *after, &mut hold),
            RuleKind::Watchdog => hold(
                Labels::new(),
                "always firing: if it stops arriving, the dashboards or their notifications are down"
                    .into(),
            ),
        }
    }
    out
}

/// The instances of a `stuck_operations` rule: one per target with an operation open for `after`
/// or longer whose adapter instance still reports. Only while the kafka hop has shown evidence
/// within the first `pipeline_stale` rule's `after`: while the stream is stale no operation can
/// be seen to end, and that rule is the alert that says so.
fn stuck_operations(
    rules: &[Rule],
    seen: Observation<'_>,
    after: Micros,
    hold: &mut impl FnMut(Labels, String),
) {
    if let Some((_, stale_after)) = stale_rule(rules) {
        let kafka = seen.hops.iter().find(|hop| hop.hop == HopName::Kafka);
        let fresh = kafka
            .and_then(|hop| hop.last_seen)
            .is_some_and(|last| seen.now.saturating_sub(last) <= stale_after);
        if !fresh {
            return;
        }
    }
    let judged = &seen.operations.statuses;
    for (target, (count, oldest)) in operations::stuck_by_target(judged, seen.now, after) {
        let plural = if count == 1 { "" } else { "s" };
        hold(
            label("target", target),
            format!(
                "{count} operation{plural} open for {} or longer; the oldest, {} of tool {} by \
                 service {}, was accepted at {} and was last seen {}",
                humanize(after),
                oldest.key.operation_id,
                oldest.key.tool,
                oldest.key.service,
                when(oldest.first_seen),
                oldest.state.as_str()
            ),
        );
    }
}

/// The instances of a `reconcile_mismatch` rule: one per kind of gap the newest covered run
/// found, and `gap = "unknown"` once no run has covered its window for `after`.
fn reconcile_mismatch(seen: Observation<'_>, after: Micros, hold: &mut impl FnMut(Labels, String)) {
    let state = seen.reconcile;
    if let Some(covered) = &state.newest_covered {
        let totals = &covered.totals;
        let checked = format!(
            "in the reconciliation of {} to {} run at {}",
            when(covered.window.since),
            when(covered.window.until),
            when(covered.ran_at)
        );
        for (gap, count, what) in [
            (
                "missing",
                totals.missing,
                "counted failed call(s) whose terminal event is not stored",
            ),
            (
                "extra",
                totals.extra,
                "terminal event(s) stored for calls the counter did not count",
            ),
            (
                "without_counter",
                totals.events_without_counter,
                "terminal event(s) of series with no counter point at all",
            ),
        ] {
            if count > 0 {
                hold(label("gap", gap), format!("{count} {what}, {checked}"));
            }
        }
    }
    let since = state.uncovered_since(seen.started);
    if seen.now.saturating_sub(since) < after {
        return;
    }
    let since_text = match &state.newest_covered {
        Some(covered) => format!("since {}", when(covered.ran_at)),
        None => format!("since the dashboards started at {}", when(seen.started)),
    };
    let newest = match &state.latest {
        None => "it has not finished a run yet".to_owned(),
        Some(run) => {
            let figures = run.totals.map_or_else(String::new, |totals| {
                format!(
                    "; over the part it read: {} missing, {} extra, {} without counter",
                    totals.missing, totals.extra, totals.events_without_counter
                )
            });
            let shown: Vec<&str> = run.gaps.iter().take(3).map(String::as_str).collect();
            let gaps = if shown.is_empty() {
                String::new()
            } else {
                format!("; {}", shown.join("; "))
            };
            format!(
                "the newest run ({}) is {}{figures}{gaps}",
                when(run.ran_at),
                run.class.as_str()
            )
        }
    };
    hold(
        label("gap", "unknown"),
        format!(
            "no reconciliation has covered its whole window {since_text}, so whether events are \
             lost between adapter and table is unknown: {newest}"
        ),
    );
}

/// One label.
pub(super) fn label(name: &str, value: &str) -> Labels {
    Labels::from([(name.to_owned(), value.to_owned())])
}
