//! The rules in Prometheus' form. [`prometheus_rules`] renders validated rules as a Prometheus
//! rules file: the recording rules the alerts read, then one or more alerts per rule, with the
//! rule's name, severity, `for` and thresholds. `dashboards/rules.toml` stays the one source;
//! `dashboards/prometheus/candor.rules.yml` is its rendering ([`REGENERATE`] writes it, and a
//! unit test fails while the committed file differs).
//!
//! The rules read only what candor-dashboards serves on `/metrics`, so they hold for teams that
//! run Prometheus and Alertmanager instead of (or beside) the built-in engine. Where PromQL
//! cannot say exactly what the built-in engine does, the generated header says how it differs.
//!
//! ```
//! use candor_dashboards::rules::{self, DEFAULT_RULES, Limits};
//! use candor_dashboards::rules::prometheus::prometheus_rules;
//!
//! let limits = Limits { step: 60_000_000, history: 6 * 3_600_000_000 };
//! let rules = rules::parse(DEFAULT_RULES, limits).expect("the shipped rules are valid");
//! let file = prometheus_rules(&rules);
//! assert!(file.contains("- alert: CandorAccessFailureSpike"));
//! ```

mod alerts;
mod header;
mod yaml;

use std::collections::BTreeSet;

use candor_query::window::Micros;
use candor_schema::OutcomeClass;

use self::yaml::{Yaml, duration, either};
use super::{Rule, RuleKind};
use crate::keys::GroupBy;

/// The command that writes the committed file, run from the workspace root.
pub const REGENERATE: &str = "cargo run -p candor-dashboards -- export-rules --prometheus \
                              --output dashboards/prometheus/candor.rules.yml";

/// The metrics the rules read, named as candor-dashboards' `/metrics` serves them
/// ([`crate::metric_names`]). A unit test renders `/metrics` and finds each of them there.
mod metric {
    pub(super) use crate::metric_names::{
        ADAPTER_LAST_SEEN, COMPACTOR_LAG, HOP_FRESHNESS as FRESHNESS,
        OPERATION_OLDEST_OPEN as OLDEST_OPEN, RECONCILE_EVENTS, RECONCILE_UNCOVERED,
        TOOL_OUTCOMES_TOTAL as OUTCOMES, UP,
    };

    /// Every metric above.
    #[cfg(test)]
    pub(super) const ALL: [&str; 8] = [
        OUTCOMES,
        FRESHNESS,
        ADAPTER_LAST_SEEN,
        RECONCILE_EVENTS,
        RECONCILE_UNCOVERED,
        UP,
        COMPACTOR_LAG,
        OLDEST_OPEN,
    ];
}

/// The labels the level-1 rules keep (scrape labels such as `job` and `instance` are summed
/// away). `source` keeps what adapters declared apart from the calls the collector derived from
/// standard spans, whose rates are lower bounds.
const KEPT: [&str; 4] = ["target", "tool", "class", "source"];

/// How long the burn-rate factors assume the error budget lasts (the Google SRE workbook's).
const SLO_DAYS: f64 = 30.0;

/// Renders `rules` as a Prometheus rules file: a header, the group `candor.recording` (the call
/// rates and ratios the alerts read, once for every rule that needs them) and the group
/// `candor.alerts` (the rules in their order).
pub fn prometheus_rules(rules: &[Rule]) -> String {
    let needs = Needs::of(rules);
    let mut yaml = Yaml::default();
    header::write(&mut yaml, rules);
    yaml.blank();
    if rules.is_empty() {
        yaml.line(0, "groups: []");
        return yaml.finish();
    }
    yaml.line(0, "groups:");
    if !needs.rates.is_empty() {
        recording(&mut yaml, &needs);
        yaml.blank();
    }
    alerts::group(&mut yaml, rules);
    yaml.finish()
}

/// The recording rules the alerts need, gathered over every rule: two rules with the same
/// windows share them.
#[derive(Debug, Default)]
struct Needs {
    /// Windows of the level-1 call rates (per target, tool and class).
    rates: BTreeSet<Micros>,
    /// `(baseline, window)` of every spike: rates over the baseline, ending where the window
    /// begins.
    baselines: BTreeSet<(Micros, Micros)>,
    /// Windows of the silent-failure ratios per target and per tool (every burn-rate window:
    /// the dashboards read both).
    silent: BTreeSet<Micros>,
    /// Windows of the silent-failure ratios per service (those of rules that group by it).
    by_service: BTreeSet<Micros>,
    /// Windows of the AccessFailure ratios per target (spike windows and baselines).
    access: BTreeSet<Micros>,
    /// Spike windows: AccessFailures per target.
    increases: BTreeSet<Micros>,
}

impl Needs {
    fn of(rules: &[Rule]) -> Self {
        let mut needs = Self::default();
        for rule in rules {
            match &rule.kind {
                RuleKind::Spike {
                    window, baseline, ..
                } => {
                    needs.rates.extend([*window, *baseline]);
                    needs.baselines.insert((*baseline, *window));
                    needs.access.extend([*window, *baseline]);
                    needs.increases.insert(*window);
                }
                RuleKind::BurnRate {
                    group_by, windows, ..
                } => {
                    for pair in windows {
                        needs.rates.extend([pair.long, pair.short]);
                        needs.silent.extend([pair.long, pair.short]);
                        if *group_by == GroupBy::Service {
                            needs.by_service.extend([pair.long, pair.short]);
                        }
                    }
                }
                RuleKind::PipelineStale { .. }
                | RuleKind::AdapterSilent { .. }
                | RuleKind::ReconcileMismatch { .. }
                | RuleKind::StuckOperations { .. }
                | RuleKind::Watchdog => {}
            }
        }
        needs
    }

    /// The groups silent-failure ratios are recorded per, with their windows: target and tool
    /// always, service when a rule needs it.
    fn silent_groups(&self) -> Vec<(GroupBy, &BTreeSet<Micros>)> {
        let mut groups = vec![
            (GroupBy::Target, &self.silent),
            (GroupBy::Tool, &self.silent),
        ];
        if !self.by_service.is_empty() {
            groups.push((GroupBy::Service, &self.by_service));
        }
        groups
    }
}

/// The labels a group's series are summed by: its own and `source`.
fn by(group: GroupBy) -> String {
    format!("{}, source", label(group))
}

/// The label a group is read from.
fn label(group: GroupBy) -> &'static str {
    match group {
        GroupBy::Target => "target",
        GroupBy::Tool => "tool",
        GroupBy::Service => "service",
    }
}

/// The counter's name without `_total`, as recording rule names use it.
fn outcomes_base() -> &'static str {
    metric::OUTCOMES
        .strip_suffix("_total")
        .unwrap_or(metric::OUTCOMES)
}

/// The matcher of the silent-failure classes: `class=~"partial|access_failure"`.
fn silent_classes() -> String {
    format!(
        "class=~\"{}|{}\"",
        OutcomeClass::Partial.as_str(),
        OutcomeClass::AccessFailure.as_str()
    )
}

/// The matcher of AccessFailure calls: `class="access_failure"`.
fn access_class() -> String {
    format!("class=\"{}\"", OutcomeClass::AccessFailure.as_str())
}

/// The level-1 rule of call rates over `window`, ending `offset` before now.
fn rates_name(window: Micros, offset: Option<Micros>) -> String {
    format!(
        "{}:{}:rate{}{}",
        KEPT.join("_"),
        outcomes_base(),
        duration(window),
        offset_suffix(offset)
    )
}

/// The silent-failure ratio of each `group` over `window`.
fn silent_name(group: GroupBy, window: Micros) -> String {
    format!(
        "{}:candor_silent_failure:ratio_rate{}",
        label(group),
        duration(window)
    )
}

/// The AccessFailure ratio per target over `window`, ending `offset` before now.
fn access_name(window: Micros, offset: Option<Micros>) -> String {
    format!(
        "target:candor_access_failure:ratio_rate{}{}",
        duration(window),
        offset_suffix(offset)
    )
}

/// AccessFailures per target over `window`.
fn increase_name(window: Micros) -> String {
    format!("target:candor_access_failures:increase{}", duration(window))
}

fn offset_suffix(offset: Option<Micros>) -> String {
    offset.map_or_else(String::new, |offset| format!("_offset{}", duration(offset)))
}

/// `{matcher}`, or nothing for an empty one.
fn braces(matcher: &str) -> String {
    if matcher.is_empty() {
        String::new()
    } else {
        format!("{{{matcher}}}")
    }
}

/// Per-second call rates over `window` of the classes `matcher` selects (every class when it
/// is empty): the level-1 rule, which keeps target and tool, or for the service (which the
/// level-1 rules sum away) the raw counter.
fn calls(group: GroupBy, window: Micros, matcher: &str) -> String {
    match group {
        GroupBy::Target | GroupBy::Tool => {
            format!("{}{}", rates_name(window, None), braces(matcher))
        }
        GroupBy::Service => format!(
            "rate({}{}[{}])",
            metric::OUTCOMES,
            braces(matcher),
            duration(window)
        ),
    }
}

/// The share the `selected` rates make of `all`, per `by`. The `or 0 * ...` term makes a group
/// with calls but none selected read 0; the `> 0` leaves a group without calls with no sample.
fn ratio(by: &str, selected: &str, all: &str) -> String {
    format!(
        "sum by ({by}) (\n    {selected}\n  or\n    0 * {all}\n)\n/\n(sum by ({by}) ({all}) > 0)"
    )
}

fn record(yaml: &mut Yaml, name: &str, expr: &str) {
    yaml.line(6, &format!("- record: {name}"));
    yaml.value(8, "expr", expr);
}

fn recording(yaml: &mut Yaml, needs: &Needs) {
    yaml.line(2, "- name: candor.recording");
    yaml.line(4, "rules:");
    level_one(yaml, needs);
    silent_ratios(yaml, needs);
    access_ratios(yaml, needs);
}

fn level_one(yaml: &mut Yaml, needs: &Needs) {
    yaml.comment(
        6,
        "Level 1: per-second call rates by target, tool and class, one rule per window the \
         ratios below need. The raw counters are read once per window; everything after this \
         reads these.",
    );
    let kept = KEPT.join(", ");
    for window in &needs.rates {
        let expr = format!(
            "sum by ({kept}) (rate({}[{}]))",
            metric::OUTCOMES,
            duration(*window)
        );
        record(yaml, &rates_name(*window, None), &expr);
    }
    if needs.baselines.is_empty() {
        return;
    }
    let stretches: Vec<String> = needs
        .baselines
        .iter()
        .map(|(baseline, window)| {
            format!(
                "the {} before the {} window",
                alerts::bare(*baseline),
                duration(*window)
            )
        })
        .collect();
    yaml.comment(
        6,
        &format!(
            "The AccessFailure spike baseline: {}, so a spike does not dilute its own baseline. \
             Read from the raw counters (not from a rule above with an offset) so that it is \
             right from the first evaluation after the rules are deployed.",
            either(&stretches)
        ),
    );
    for (baseline, window) in &needs.baselines {
        let expr = format!(
            "sum by ({kept}) (rate({}[{}] offset {}))",
            metric::OUTCOMES,
            duration(*baseline),
            duration(*window)
        );
        record(yaml, &rates_name(*baseline, Some(*window)), &expr);
    }
}

fn silent_ratios(yaml: &mut Yaml, needs: &Needs) {
    if needs.silent.is_empty() {
        return;
    }
    let groups = needs.silent_groups();
    let names: Vec<String> = groups
        .iter()
        .map(|(group, _)| label(*group).to_owned())
        .collect();
    let mut text = format!(
        "Level 2: silent-failure ratio per {}.\n\
         The `or 0 * ...` term makes a target that had calls but no partial/access_failure \
         series (every call succeeded) read 0 rather than have no sample. The `> 0` on the \
         denominator leaves a window without calls with no sample instead of NaN.",
        either(&names).replace(" or ", " and per ")
    );
    if !needs.by_service.is_empty() {
        text.push_str(
            " Per service they read the raw counters, since the level-1 rules sum the service \
             away.",
        );
    }
    yaml.blank();
    yaml.comment(6, &text);
    let matcher = silent_classes();
    for (index, (group, windows)) in groups.iter().enumerate() {
        if index > 0 {
            yaml.blank();
        }
        for window in *windows {
            let expr = ratio(
                &by(*group),
                &calls(*group, *window, &matcher),
                &calls(*group, *window, ""),
            );
            record(yaml, &silent_name(*group, *window), &expr);
        }
    }
}

fn access_ratios(yaml: &mut Yaml, needs: &Needs) {
    if needs.access.is_empty() {
        return;
    }
    yaml.blank();
    yaml.comment(
        6,
        "Level 2: AccessFailure ratio per target (same shape as above), and the baseline.",
    );
    let matcher = braces(&access_class());
    let access = |window: Micros, offset: Option<Micros>| {
        let rates = rates_name(window, offset);
        ratio(&by(GroupBy::Target), &format!("{rates}{matcher}"), &rates)
    };
    for window in &needs.access {
        record(yaml, &access_name(*window, None), &access(*window, None));
    }
    for (baseline, window) in &needs.baselines {
        yaml.comment(
            6,
            &format!(
                "From {} ago to {} ago. No sample when the target had no calls then.",
                duration(baseline + window),
                duration(*window)
            ),
        );
        record(
            yaml,
            &access_name(*baseline, Some(*window)),
            &access(*baseline, Some(*window)),
        );
    }
    for window in &needs.increases {
        yaml.comment(
            6,
            &format!(
                "AccessFailure calls in the last {} (the spike's minimum volume).",
                duration(*window)
            ),
        );
        let expr = format!(
            "sum by (target, source) (increase({}{matcher}[{}]))",
            metric::OUTCOMES,
            duration(*window)
        );
        record(yaml, &increase_name(*window), &expr);
    }
}

#[cfg(test)]
mod tests;
