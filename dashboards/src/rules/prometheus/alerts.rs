//! The group `candor.alerts`: one or more Prometheus alerts per rule, in the rules' order, each
//! with the rule's name, severity and `for`, and annotations that say what to check.

use candor_query::window::Micros;

use super::yaml::{Yaml, duration, either, number, percent, quoted, seconds};
use super::{
    GroupBy, Rule, RuleKind, SLO_DAYS, access_name, calls, increase_name, label, metric,
    silent_name,
};
use crate::health::HopName;
use crate::rules::{BurnWindow, stale_rule};

/// A day, in microseconds.
const DAY: Micros = 86_400 * 1_000_000;

/// The shortest lookback the advice's `candor incident` commands use.
const INCIDENT_SINCE: Micros = 30 * 60 * 1_000_000;

/// A duration that is one unit, as a word: `hour` for 1h.
fn unit_word(micros: Micros) -> Option<&'static str> {
    [
        (60_000_000, "minute"),
        (3_600_000_000, "hour"),
        (DAY, "day"),
    ]
    .into_iter()
    .find_map(|(size, word)| (micros == size).then_some(word))
}

/// A duration in prose: `hour` for 1h (as in "the hour before"), else `2h`.
pub(super) fn bare(micros: Micros) -> String {
    unit_word(micros).map_or_else(|| duration(micros), str::to_owned)
}

/// A duration in prose with `article` before a unit: `a day` for 1d, else `2d`.
pub(super) fn counted(micros: Micros, article: &str) -> String {
    unit_word(micros).map_or_else(|| duration(micros), |word| format!("{article} {word}"))
}

/// One Prometheus alert of a rule.
struct Alert<'a> {
    /// The rule it renders (name, severity, `for`, summary).
    rule: &'a Rule,
    /// The condition.
    expr: String,
    /// Labels besides `severity`.
    labels: Vec<(&'static str, String)>,
    /// What it says.
    annotations: Annotations,
}

/// An alert's summary and description, or a YAML alias of another alert's.
enum Annotations {
    /// Written out, with an anchor when other alerts repeat them.
    Text {
        /// The YAML anchor, if any.
        anchor: Option<String>,
        /// The summary, unless the rule sets its own.
        summary: String,
        /// The description (a Go template).
        description: String,
    },
    /// The annotations of the alert with this anchor.
    Alias(String),
}

impl Alert<'_> {
    fn write(&self, yaml: &mut Yaml) {
        yaml.line(6, &format!("- alert: {}", self.rule.name));
        yaml.value(8, "expr", &self.expr);
        if self.rule.for_micros > 0 {
            yaml.line(8, &format!("for: {}", duration(self.rule.for_micros)));
        }
        yaml.line(8, "labels:");
        yaml.line(10, &format!("severity: {}", self.rule.severity.as_str()));
        for (name, value) in &self.labels {
            yaml.line(10, &format!("{name}: {value}"));
        }
        match &self.annotations {
            Annotations::Alias(anchor) => yaml.line(8, &format!("annotations: *{anchor}")),
            Annotations::Text {
                anchor,
                summary,
                description,
            } => {
                match anchor {
                    Some(anchor) => yaml.line(8, &format!("annotations: &{anchor}")),
                    None => yaml.line(8, "annotations:"),
                }
                let summary = self
                    .rule
                    .summary
                    .as_deref()
                    .map_or_else(|| summary.clone(), literal);
                yaml.line(10, &format!("summary: {}", quoted(&summary)));
                yaml.folded(10, "description", description);
            }
        }
    }
}

/// `text` as a Go template that prints it unchanged: a summary set in the rules file is text,
/// as the built-in engine sends it, not a template.
fn literal(text: &str) -> String {
    text.replace("{{", "{{ \"{{\" }}")
}

/// Annotations written out, with no anchor.
fn text(summary: String, description: String) -> Annotations {
    Annotations::Text {
        anchor: None,
        summary,
        description,
    }
}

/// When a silent adapter instance is taken as retired: a day, or twice `after` when that is
/// longer, so that the alert always has time to fire.
pub(super) fn retired_after(after: Micros) -> Micros {
    DAY.max(after.saturating_mul(2))
}

/// Writes the group.
pub(super) fn group(yaml: &mut Yaml, rules: &[Rule]) {
    yaml.line(2, "- name: candor.alerts");
    yaml.line(4, "rules:");
    let stale = stale_rule(rules);
    let mut stale_rules = 0;
    for (index, rule) in rules.iter().enumerate() {
        if index > 0 {
            yaml.blank();
        }
        match &rule.kind {
            RuleKind::Spike {
                window,
                baseline,
                factor,
                min_events,
            } => spike(yaml, rule, *window, *baseline, *factor, *min_events),
            RuleKind::BurnRate {
                objective,
                group_by,
                min_calls,
                windows,
            } => burn_rate(yaml, rule, *objective, *group_by, *min_calls, windows),
            RuleKind::PipelineStale { after } => {
                stale_rules += 1;
                let anchor = match stale_rules {
                    1 => "hop_unknown".to_owned(),
                    n => format!("hop_unknown_{n}"),
                };
                pipeline_stale(yaml, rule, *after, &anchor);
            }
            RuleKind::AdapterSilent { after } => adapter_silent(yaml, rule, *after, stale),
            RuleKind::ReconcileMismatch { after } => {
                reconcile_mismatch(yaml, rule, *after, stale.map(|(name, _)| name));
            }
            RuleKind::StuckOperations { after } => stuck_operations(yaml, rule, *after, stale),
            RuleKind::Watchdog => watchdog(yaml, rule),
        }
    }
}

/// Said in an alert on calls the collector derived from standard spans: a Go template that
/// prints nothing for an adapter's series (or one without the `source` label).
const DERIVED: &str = "{{ if and $labels.source (ne $labels.source \"adapter\") }} These calls \
                       were derived from standard {{ $labels.source }} spans: a call without \
                       error may still have been partial, so the rate is a lower bound.{{ end }}";

fn spike(
    yaml: &mut Yaml,
    rule: &Rule,
    window: Micros,
    baseline: Micros,
    factor: f64,
    min_events: u64,
) {
    let (w, b, f) = (duration(window), bare(baseline), number(factor));
    yaml.comment(
        6,
        &format!(
            "The {w} AccessFailure ratio is at least {f}x the ratio of the {b} before it, with at \
             least {min_events} AccessFailures in the {w}.\n\
             Zero baseline: a target with no AccessFailure in the baseline {b} has a baseline of \
             0, so any {w} window that meets the minimum volume is a spike. A target with no calls \
             at all in the baseline {b} (new, or idle) has no baseline sample; it counts as a zero \
             baseline too (the `or on (target, source) 0 * ...` term), so the minimum volume alone \
             decides. Without that term, a target that starts failing right after an idle {b} \
             would never fire (a comparison with a missing series yields nothing)."
        ),
    );
    let recent = access_name(window, None);
    let before = access_name(baseline, Some(window));
    let expr = format!(
        "(\n    {recent}\n  >= on (target, source)\n    {f} * (\n        {before}\n      or on (target, source)\n        \
         0 * {recent}\n    )\n)\nand on (target, source)\n  ({} >= {min_events})",
        increase_name(window)
    );
    let since = duration(INCIDENT_SINCE.max(window));
    let baseline_value = format!(
        "{{{{ with printf \"{before}{{target=%q,source=%q}}\" $labels.target $labels.source | query \
         }}}}{{{{ . | first | value | humanizePercentage }}}}{{{{ else }}}}no calls, counted as \
         0{{{{ end }}}}"
    );
    let description = format!(
        "{{{{ $value | humanizePercentage }}}} of calls to {{{{ $labels.target }}}} ended in \
         AccessFailure over the last {w}, at least {f} times the {b} before ({baseline_value}) \
         with at least {min_events} such calls. Callers got no usable answer and may have \
         reported nothing found. Check `candor incident --target '{{{{ $labels.target }}}}' \
         --since {since}` for the failure kinds, status codes and retry actions; then whether \
         the target is down, rate-limiting or refusing our credentials, and what changed just \
         before.{DERIVED}"
    );
    Alert {
        rule,
        expr,
        labels: Vec::new(),
        annotations: text(
            "AccessFailure spike on {{ $labels.target }}".into(),
            description,
        ),
    }
    .write(yaml);
}

fn burn_rate(
    yaml: &mut Yaml,
    rule: &Rule,
    objective: f64,
    group_by: GroupBy,
    min_calls: u64,
    windows: &[BurnWindow],
) {
    let by = super::by(group_by);
    let name = label(group_by);
    let budget = 1.0 - objective;
    let limit = |factor: f64| format!("({} * {})", number(factor), number(budget));
    let pairs: Vec<String> = windows
        .iter()
        .map(|pair| {
            format!(
                "(\n    ({} >= {limit})\n  and on ({by})\n    ({} >= {limit})\n  and on ({by})\n    \
                 (sum by ({by}) ({}) * {} >= {min_calls})\n)",
                silent_name(group_by, pair.long),
                silent_name(group_by, pair.short),
                calls(group_by, pair.long, ""),
                seconds(pair.long),
                limit = limit(pair.factor),
            )
        })
        .collect();
    let expr = pairs.join(&format!("\nor on ({by})\n"));
    let longs: Vec<String> = windows
        .iter()
        .map(|pair| format!("{} at {}x", duration(pair.long), number(pair.factor)))
        .collect();
    let shorts: Vec<String> = windows.iter().map(|pair| duration(pair.short)).collect();
    let lasts: Vec<String> = windows
        .iter()
        .enumerate()
        .map(|(index, pair)| {
            let lead = if index == 0 {
                format!("the {}-day budget lasts ", number(SLO_DAYS))
            } else {
                String::new()
            };
            format!("at {}x {lead}{}", number(pair.factor), lasting(pair.factor))
        })
        .collect();
    let whose = match group_by {
        GroupBy::Target => "to",
        GroupBy::Tool => "of tool",
        GroupBy::Service => "from service",
    };
    let description = format!(
        "{{{{ $value | humanizePercentage }}}} of calls {whose} {{{{ $labels.{name} }}}} were \
         Partial or AccessFailure over the long window ({} the {} budget) and the short window \
         ({}) agrees, so it is still happening: {}. {}{DERIVED}",
        either(&longs),
        percent(budget),
        either(&shorts),
        lasts.join(", "),
        burn_advice(group_by, windows)
    );
    Alert {
        rule,
        expr,
        labels: Vec::new(),
        annotations: text(
            format!(
                "Silent failures on {{{{ $labels.{name} }}}} are burning the {} SLO's error budget",
                percent(objective)
            ),
            description,
        ),
    }
    .write(yaml);
}

/// How long the budget lasts at `factor` times the allowed rate: `5 days`, `about 2 days`,
/// `about 10 hours`.
fn lasting(factor: f64) -> String {
    let days = SLO_DAYS / factor;
    let (amount, unit) = if days >= 1.0 {
        (days, "day")
    } else {
        (days * 24.0, "hour")
    };
    let whole = amount.round();
    let about = if (amount - whole).abs() < 1e-9 {
        ""
    } else {
        "about "
    };
    let plural = if whole == 1.0 { "" } else { "s" };
    format!("{about}{} {unit}{plural}", number(whole))
}

/// Where to look next for a group whose budget burns.
fn burn_advice(group_by: GroupBy, windows: &[BurnWindow]) -> String {
    let longest = windows.iter().map(|pair| pair.long).max().unwrap_or(0);
    let shortest = windows.iter().map(|pair| pair.long).min().unwrap_or(0);
    let (longest, shortest) = (duration(longest), duration(shortest));
    match group_by {
        GroupBy::Target => format!(
            "Check `candor rates --by tool --target '{{{{ $labels.target }}}}' --since {longest}` \
             for the tools involved and `candor incident --target '{{{{ $labels.target }}}}' \
             --since {shortest}` for failure kinds and retry actions."
        ),
        GroupBy::Tool | GroupBy::Service => {
            let by = label(group_by);
            format!(
                "Check `candor rates --by target --{by} '{{{{ $labels.{by} }}}}' --since \
                 {longest}` for the targets involved, then `candor incident --target TARGET \
                 --{by} '{{{{ $labels.{by} }}}}' --since {shortest}` for failure kinds and retry \
                 actions."
            )
        }
    }
}

fn pipeline_stale(yaml: &mut Yaml, rule: &Rule, after: Micros, anchor: &str) {
    let a = duration(after);
    yaml.comment(
        6,
        &format!("Freshness over {a}: nothing from that hop is known after that point."),
    );
    let advice: Vec<String> = HopName::ALL
        .iter()
        .enumerate()
        .map(|(index, hop)| {
            let branch = if index == 0 { "if" } else { "else if" };
            format!(
                "{{{{ {branch} eq $labels.hop \"{}\" }}}}{}",
                hop.as_str(),
                hop_advice(*hop)
            )
        })
        .collect();
    Alert {
        rule,
        expr: format!("{} > {}", metric::FRESHNESS, seconds(after)),
        labels: vec![("reason", "stale".into())],
        annotations: text(
            "Candor pipeline hop {{ $labels.hop }} is STALE".into(),
            format!(
                "The newest evidence from the {{{{ $labels.hop }}}} hop is {{{{ $value | \
                 humanizeDuration }}}} old (limit {a}). Failures after that point have not \
                 reached Candor: quiet panels and silent rate alerts are not a sign of health. \
                 {}{{{{ end }}}}",
                advice.concat()
            ),
        ),
    }
    .write(yaml);
    yaml.blank();
    yaml.comment(
        6,
        &format!(
            "The hop's freshness has had no sample for {a} while candor-dashboards itself is \
             scraped: it has no evidence from that hop since it started (UNKNOWN). One rule per \
             hop, because absent_over_time can only label its result from equality matchers; the \
             static `hop` label repeats that value and keeps promtool's duplicate-rule lint \
             satisfied."
        ),
    );
    for (index, hop) in HopName::ALL.iter().enumerate() {
        let annotations = if index == 0 {
            Annotations::Text {
                anchor: Some(anchor.to_owned()),
                summary: "Candor pipeline hop {{ $labels.hop }} is UNKNOWN".into(),
                description: format!(
                    "candor-dashboards is up but has exported no freshness for the {{{{ \
                     $labels.hop }}}} hop for {a}: it has seen no evidence from that hop, so \
                     nobody can tell whether failures are flowing. Check the candor-dashboards \
                     log and its access to Kafka and to the tables, then the hop itself as for a \
                     stale hop."
                ),
            }
        } else {
            Annotations::Alias(anchor.to_owned())
        };
        Alert {
            rule,
            expr: format!(
                "absent_over_time({}{{hop=\"{}\"}}[{a}])\nand on () ({} == 1)",
                metric::FRESHNESS,
                hop.as_str(),
                metric::UP
            ),
            labels: vec![("reason", "unknown".into()), ("hop", hop.as_str().into())],
            annotations,
        }
        .write(yaml);
    }
    yaml.blank();
    yaml.comment(
        6,
        "candor-dashboards' metrics vanished entirely (process down, scrape failing, target \
         removed): every hop is unknown. One alert for this, instead of one per hop.",
    );
    Alert {
        rule,
        expr: format!("absent_over_time({}[{a}])", metric::UP),
        labels: vec![("reason", "exporter_absent".into())],
        annotations: text(
            "Candor pipeline state is UNKNOWN: candor-dashboards exports no metrics".into(),
            format!(
                "No {} sample for {a}. Every Candor panel and rule over its metrics is blind: no \
                 data here does not mean no failures. Check the `up` series of its scrape job, \
                 whether the candor-dashboards process runs and answers on :3000 /metrics, and \
                 the scrape configuration.",
                metric::UP
            ),
        ),
    }
    .write(yaml);
}

/// What to check when a hop is stale.
fn hop_advice(hop: HopName) -> String {
    match hop {
        HopName::Collector => "Check that `candor-collector ingest` runs (self-metrics on :8888) \
                               and can produce to Kafka; its heartbeats travel through Kafka, so \
                               a Kafka outage stops them too."
            .into(),
        HopName::Kafka => "Check that Kafka is up and reachable from candor-dashboards, that its \
                           consumer group is not stuck rebalancing, and that the collectors are \
                           producing."
            .into(),
        HopName::Table => format!(
            "Check that `candor-collector compact` runs (self-metrics on :8889), its backlog \
             ({}), and that the table storage is writable.",
            metric::COMPACTOR_LAG
        ),
    }
}

/// The clause that keeps an alert to the times the kafka hop is fresher than `fresh`.
fn kafka_fresh(fresh: Micros) -> String {
    format!(
        "and on ()\n  ({}{{hop=\"{}\"}} <= {})",
        metric::FRESHNESS,
        HopName::Kafka.as_str(),
        seconds(fresh)
    )
}

fn adapter_silent(yaml: &mut Yaml, rule: &Rule, after: Micros, stale: Option<(&str, Micros)>) {
    let (a, retired) = (duration(after), retired_after(after));
    let (r, about) = (duration(retired), counted(retired, "a"));
    let mut comment = format!(
        "An adapter instance whose newest counter point is more than {a} old, but less than \
         {about} old (after {about} the instance is taken as retired and the alert resolves). \
         max_over_time over {r} keeps the instance visible after candor-dashboards stops \
         exporting it."
    );
    let mut expr = format!(
        "(\n  (\n    time()\n    - max by (service, instance) (\n        max_over_time({}[{r}])\n      \
         )\n  ) > {}\n) < {}",
        metric::ADAPTER_LAST_SEEN,
        seconds(after),
        seconds(retired)
    );
    let mut live = "";
    if let Some((name, fresh)) = stale {
        comment.push_str(&format!(
            " Only while the kafka hop is fresh: when the pipeline is stale or unknown every \
             adapter looks silent, and {name} is the alert that says so."
        ));
        expr.push_str(&format!("\n{}", kafka_fresh(fresh)));
        live = ", while the pipeline is live";
    }
    yaml.comment(6, &comment);
    Alert {
        rule,
        expr,
        labels: Vec::new(),
        annotations: text(
            "Adapter {{ $labels.service }}/{{ $labels.instance }} stopped reporting".into(),
            format!(
                "No tool.outcomes counter point from service {{{{ $labels.service }}}}, instance \
                 {{{{ $labels.instance }}}} for {{{{ $value | humanizeDuration }}}}{live}. Its \
                 tool failures are invisible to Candor until it reports again. Check that the \
                 instance still runs, that its OTLP exporter reaches the collector (endpoint, \
                 TLS, export errors in its log), and whether it was retired on purpose (the \
                 alert resolves {} after its last point).",
                counted(retired, "one")
            ),
        ),
    }
    .write(yaml);
}

fn reconcile_mismatch(yaml: &mut Yaml, rule: &Rule, after: Micros, stale: Option<&str>) {
    let events = metric::RECONCILE_EVENTS;
    yaml.comment(
        6,
        &format!(
            "The adapter records every call that ends as AccessFailure or Partial twice: one \
             terminal tool.outcome event and one increment of the tool.outcomes counter. \
             candor-dashboards reconciles the two on a schedule (by default every minute, \
             `candor reconcile` over the hour ending 2m ago, tables plus the Kafka tail). {events} \
             holds the figures of the newest run that covered its whole window, and is absent \
             until one did, so a run that could not read never exports \"0 missing\". One alert \
             per kind of gap: missing (counted failed calls whose event the tables do not hold), \
             extra (events of calls the counter did not count), without_counter (events of \
             series with no counter point at all). A gap stays in the figures while its window is \
             inside the reconciled range."
        ),
    );
    Alert {
        rule,
        expr: format!("max by (gap) ({events}) > 0"),
        labels: Vec::new(),
        annotations: text(
            "Events lost between adapter and table ({{ $labels.gap }})".into(),
            "{{ $value }} {{ if eq $labels.gap \"missing\" }}failed call(s) counted by the \
             adapters' tool.outcomes counter have no terminal tool.outcome event in the tables: \
             the events were lost between the adapter and the table (a sampler that drops \
             failure spans, a span export that failed, a refused record).{{ else if eq \
             $labels.gap \"extra\" }}terminal tool.outcome event(s) are stored for calls the \
             adapters' counter did not count (copies not removed, or counter points lost).{{ \
             else }}terminal tool.outcome event(s) are stored for series with no counter point \
             at all (the counter is not exported, or its points were lost).{{ end }} Check the \
             reconciliation panel of candor-dashboards and `candor reconcile --since 1h` for the \
             series and windows."
                .into(),
        ),
    }
    .write(yaml);
    yaml.blank();
    let a = duration(after);
    yaml.comment(
        6,
        &format!(
            "No reconciliation has covered its whole window for {a} (since candor-dashboards \
             started, when none ever did): the tables or the Kafka tail could not be read, or the \
             window holds a collector silence, or nothing could be compared. Whether events are \
             lost is then unknown, and {} above cannot fire; this says so instead of passing.",
            rule.name
        ),
    );
    Alert {
        rule,
        expr: format!("max({}) >= {}", metric::RECONCILE_UNCOVERED, seconds(after)),
        labels: vec![("gap", "unknown".into())],
        annotations: text(
            "Candor cannot tell whether events are lost between adapter and table".into(),
            format!(
                "No reconciliation has covered its whole window for {{{{ $value | \
                 humanizeDuration }}}}: failed calls counted and failure events stored were not \
                 compared over a whole window, so events lost between the adapter and the table \
                 would go unseen. Check the reconciliation panel of candor-dashboards for what \
                 the newest run could not read, and {} for a hop that is down.",
                stale.unwrap_or(metric::FRESHNESS)
            ),
        ),
    }
    .write(yaml);
}

fn stuck_operations(yaml: &mut Yaml, rule: &Rule, after: Micros, stale: Option<(&str, Micros)>) {
    let mut comment = format!(
        "A target with an asynchronous operation open for {} or longer (accepted, queued or \
         running still) whose adapter instance still reports. An operation whose instance went \
         silent has no {} sample: whether it ended is unknown, and the operations panel shows it \
         as unknown, not stuck.",
        duration(after),
        metric::OLDEST_OPEN
    );
    let mut expr = format!(
        "time() - min by (target) ({}) >= {}",
        metric::OLDEST_OPEN,
        seconds(after)
    );
    let mut live = "";
    if let Some((name, fresh)) = stale {
        comment.push_str(&format!(
            " Only while the kafka hop is fresh: while the pipeline is stale no operation can be \
             seen to end, and {name} is the alert that says so."
        ));
        expr = format!("(\n  {expr}\n)\n{}", kafka_fresh(fresh));
        live = ", while the pipeline is live";
    }
    yaml.comment(6, &comment);
    Alert {
        rule,
        expr,
        labels: Vec::new(),
        annotations: text(
            "Operations on {{ $labels.target }} were accepted and have not ended".into(),
            format!(
                "The oldest open operation on {{{{ $labels.target }}}} was accepted {{{{ $value | \
                 humanizeDuration }}}} ago and has not completed, failed or been cancelled{live}; \
                 its adapter instance still reports, so its end would have been seen. List them \
                 with `candor operations --target {{{{ $labels.target }}}} --stuck-after {}` \
                 and check the tool's status endpoint for the operation ids.",
                duration(after)
            ),
        ),
    }
    .write(yaml);
}

fn watchdog(yaml: &mut Yaml, rule: &Rule) {
    yaml.comment(
        6,
        "Always firing. Route it to an external dead man's switch, which pages when it stops \
         arriving: then Prometheus, these rules or the notification path are broken.",
    );
    Alert {
        rule,
        expr: "vector(1)".into(),
        labels: Vec::new(),
        annotations: text(
            "Candor alerting is alive (always firing)".into(),
            "This alert always fires so that an external dead man's switch can tell when it stops \
             arriving. Route it only to that switch; never silence or inhibit it."
                .into(),
        ),
    }
    .write(yaml);
}
