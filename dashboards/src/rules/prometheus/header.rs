//! The header of the generated file: where it comes from and how to regenerate it, the metrics
//! the rules read, the objective behind each burn-rate rule, and how these rules differ from
//! the built-in engine where PromQL cannot say the same thing.

use super::alerts::{counted, retired_after};
use super::yaml::{Yaml, duration, number, percent, rounded};
use super::{REGENERATE, Rule, RuleKind, SLO_DAYS, label, metric};
use crate::keys::GroupBy;
use crate::rules::{BurnWindow, Severity, stale_rule};

/// What the file is, where it comes from, what it reads, and how it differs from the built-in
/// engine.
pub(super) fn write(yaml: &mut Yaml, rules: &[Rule]) {
    let inputs = [
        (
            format!("{}{{service,tool,target,class,source}}", metric::OUTCOMES),
            "calls per outcome class and source",
        ),
        (
            format!("{}{{hop}}", metric::FRESHNESS),
            "evidence age per hop",
        ),
        (
            format!("{}{{service,instance}}", metric::ADAPTER_LAST_SEEN),
            "newest counter point",
        ),
        (
            format!("{}{{gap}}", metric::RECONCILE_EVENTS),
            "newest covered reconciliation",
        ),
        (
            metric::RECONCILE_UNCOVERED.to_owned(),
            "since one covered its window",
        ),
        (metric::UP.to_owned(), "1 while it serves"),
    ];
    let width = inputs.iter().map(|(name, _)| name.len()).max().unwrap_or(0) + 3;
    let table: Vec<String> = inputs
        .iter()
        .map(|(name, what)| format!("   {name:width$}{what}"))
        .collect();
    let about: &[&str] = &[
        "GENERATED from dashboards/rules.toml by `candor-dashboards export-rules --prometheus`: \
         do not edit. Change the rules there, then, from the workspace root:",
        &format!(
            "   {}",
            REGENERATE.replace(" --output", " \\\n     --output")
        ),
        "   promtool test rules dashboards/prometheus/candor.rules.test.yml",
        "A unit test of candor-dashboards fails while this file is not that rendering.",
        "",
        "Candor recording and alerting rules for Prometheus: the alerts of candor-dashboards' \
         built-in engine, with the same names, severities, `for` durations and thresholds, for \
         teams that already run Prometheus and Alertmanager. Tested by candor.rules.test.yml \
         (`promtool test rules`).",
        "",
        "Input: the metrics candor-dashboards serves on /metrics (port 3000). The rules read only",
        &table.join("\n"),
        "A hop that candor-dashboards has never seen has no freshness sample at all: its absence \
         is the UNKNOWN state, and the absent_over_time rules below turn it into an alert \
         instead of a silence.",
        "",
        "Naming: recording rules are level:metric:operations. The level lists the labels kept \
         (target, tool, class); scrape labels (job, instance) are summed away. Every alert \
         carries `severity` (page | ticket | none) and the labels that say where to look \
         (target, hop, service, instance, gap); a pipeline_stale alert also carries `reason` \
         (stale | unknown | exporter_absent).",
        "",
        "Silent failure: a call whose class is `partial` or `access_failure`. The silent-failure \
         ratio is (partial + access_failure) / all calls.",
    ];
    yaml.comment(0, &about.join("\n"));
    for rule in rules {
        if let RuleKind::BurnRate {
            objective,
            group_by,
            min_calls,
            windows,
        } = &rule.kind
        {
            yaml.comment(0, "");
            yaml.comment(
                0,
                &slo(rule, *objective, *group_by, *min_calls, windows.as_slice()),
            );
        }
    }
    let differences = differences(rules);
    if !differences.is_empty() {
        yaml.comment(0, "");
        yaml.comment(
            0,
            &format!(
                "Where PromQL says it differently from the built-in engine:\n{}",
                differences.join("\n")
            ),
        );
    }
}

/// The paragraph that explains a burn-rate rule's objective and windows.
fn slo(
    rule: &Rule,
    objective: f64,
    group_by: GroupBy,
    min_calls: u64,
    windows: &[BurnWindow],
) -> String {
    let budget = 1.0 - objective;
    let verb = act(rule.severity);
    let group = label(group_by);
    let conditions: Vec<(String, String)> = windows
        .iter()
        .enumerate()
        .map(|(index, pair)| {
            let lead = if index == 0 { verb } else { "  or" };
            let share = pair.factor * pair.long as f64 / (SLO_DAYS * 86_400e6);
            (
                format!(
                    "   {lead} when the {} ratio and the {} ratio are both >= {} x {}",
                    duration(pair.long),
                    duration(pair.short),
                    number(pair.factor),
                    number(budget)
                ),
                format!(
                    "({} of the budget in {})",
                    percent(rounded(share, 3)),
                    duration(pair.long)
                ),
            )
        })
        .collect();
    let width = conditions
        .iter()
        .map(|(when, _)| when.len())
        .max()
        .unwrap_or(0)
        + 1;
    let lines: Vec<String> = conditions
        .iter()
        .map(|(when, share)| format!("{when:width$}{share}"))
        .collect();
    format!(
        "SLO behind {}: {} of calls {} are not silent failures (neither Partial nor \
         AccessFailure), over {} days. Error budget: {} ({}). Burn-rate alerts follow the Google \
         SRE workbook (\"Alerting on SLOs\", multiwindow, multi-burn-rate):\n{}.\n\
         The long window proves the burn is significant, the short one that it is still going \
         on (so the alert resolves within minutes of a fix). A {group} with fewer than \
         {min_calls} calls in the long window does not {verb}: one failed call in three is not \
         an outage. A window with no calls has no ratio (it is not 0%), so it can neither fire \
         nor clear.",
        rule.name,
        percent(objective),
        per(group_by),
        number(SLO_DAYS),
        percent(budget),
        number(budget),
        lines.join("\n"),
    )
}

/// What an alert of `severity` does to people.
fn act(severity: Severity) -> &'static str {
    match severity {
        Severity::Page => "page",
        Severity::Ticket => "open a ticket",
        Severity::None => "fire",
    }
}

/// Whose calls a group is: `to a target`.
fn per(group: GroupBy) -> &'static str {
    match group {
        GroupBy::Target => "to a target",
        GroupBy::Tool => "of a tool",
        GroupBy::Service => "from a service",
    }
}

/// One bullet per way these rules cannot say exactly what the built-in engine does.
fn differences(rules: &[Rule]) -> Vec<String> {
    let mut out = Vec::new();
    if rules.iter().any(|rule| {
        matches!(
            rule.kind,
            RuleKind::Spike { .. } | RuleKind::BurnRate { .. }
        )
    }) {
        out.push(
            "- Rates and ratios come from rate() over the scraped counters, extrapolated to the \
             window's edges; the built-in engine counts the calls in whole buckets of its model \
             (--step). Near a threshold the two can disagree for a bucket or two."
                .to_owned(),
        );
    }
    let stale = stale_rule(rules);
    for rule in rules {
        match &rule.kind {
            RuleKind::PipelineStale { after } => out.push(format!(
                "- {}: also fires, with reason exporter_absent, when candor-dashboards' own \
                 metrics have been gone for {}: the built-in engine cannot see its own absence.",
                rule.name,
                duration(*after)
            )),
            RuleKind::AdapterSilent { after } => out.push(format!(
                "- {}: an instance is taken as retired {} after its last point (the built-in \
                 engine keeps every instance it saw since it started){}.",
                rule.name,
                counted(retired_after(*after), "one"),
                stale.map_or_else(String::new, |(name, after)| format!(
                    ", and the alert holds only while the kafka hop is fresher than {} (when \
                     it is not, every adapter looks silent and {name} says so)",
                    duration(after)
                ))
            )),
            _ => {}
        }
    }
    out
}
