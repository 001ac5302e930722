//! The alert rules file: parsed and validated at start, so that a mistake stops the service with
//! the rule and the field named, instead of an alert that silently never fires.
//!
//! A rules file is TOML with one `[[rule]]` table per rule:
//!
//! ```toml
//! [[rule]]
//! name = "AccessFailureSpike"
//! kind = "spike"          # spike | burn_rate | pipeline_stale | adapter_silent
//!                         # | reconcile_mismatch | watchdog
//! severity = "page"       # page | ticket | none
//! for = "1m"              # how long the condition must hold before it fires
//! window = "5m"
//! baseline = "1h"
//! factor = 3.0
//! min_events = 10
//! ```
//!
//! The fields each kind takes are listed on [`RuleKind`]; a field that does not apply to its
//! kind is an error, not ignored.
//!
//! The rules file is the one source of the alert rules: [`prometheus`] renders the same rules as
//! a Prometheus rules file (`candor-dashboards export-rules --prometheus`), and the shipped
//! `dashboards/prometheus/candor.rules.yml` is that rendering of `dashboards/rules.toml`.

pub mod prometheus;

use std::collections::BTreeSet;
use std::time::Duration;

use candor_query::window::Micros;
use serde::{Deserialize, Serialize};

use crate::keys::GroupBy;

/// The rules the service ships with: what `--rules` defaults to.
pub const DEFAULT_RULES: &str = include_str!("../rules.toml");

/// Why a rules file was refused.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// Not TOML, or a field of the wrong type or an unknown field.
    #[error("the rules file is not valid: {0}")]
    Syntax(#[from] toml::de::Error),
    /// A rule that parses but cannot work.
    #[error("rule {rule:?}: {problem}")]
    Invalid {
        /// The rule's name (or its position when it has none).
        rule: String,
        /// What is wrong and what to write instead.
        problem: String,
    },
}

/// How urgent a rule's alert is; sent as the `severity` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Wake someone.
    Page,
    /// Look at it during working hours.
    Ticket,
    /// Not for people (the watchdog).
    None,
}

impl Severity {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Page => "page",
            Self::Ticket => "ticket",
            Self::None => "none",
        }
    }
}

/// One window pair of a multi-window burn-rate rule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BurnWindow {
    /// The long window: the budget burn is real.
    pub long: Micros,
    /// The short window: it is still happening.
    pub short: Micros,
    /// How many times the allowed rate both windows must exceed.
    pub factor: f64,
}

/// What a rule watches.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RuleKind {
    /// A target's AccessFailure rate over `window` is at least `factor` times its rate over the
    /// `baseline` before it, with at least `min_events` AccessFailures in the window.
    Spike {
        /// The recent window.
        window: Micros,
        /// The baseline before it.
        baseline: Micros,
        /// The factor.
        factor: f64,
        /// The minimum AccessFailures in the window.
        min_events: u64,
    },
    /// The silent-failure rate ((partial + access_failure) / calls) of a group burns the error
    /// budget of `objective` (the share of calls that must not fail silently) `factor` times
    /// too fast over both windows of any pair.
    BurnRate {
        /// The objective, e.g. 0.99.
        objective: f64,
        /// What a burn is measured per.
        group_by: GroupBy,
        /// Calls the long window needs before a burn is judged.
        min_calls: u64,
        /// The window pairs.
        windows: Vec<BurnWindow>,
    },
    /// A hop of the pipeline has shown no evidence (heartbeat, Kafka contact, table watermark)
    /// for `after`.
    PipelineStale {
        /// How long without evidence.
        after: Micros,
    },
    /// An adapter instance that reported counters has not for `after`.
    AdapterSilent {
        /// How long without a counter point.
        after: Micros,
    },
    /// The newest reconciliation that covered its whole window found the adapter's two records
    /// of failed calls disagreeing: events missing (counted calls without their terminal event
    /// stored), extra (events of calls the counter did not count) or without any counter. One
    /// instance per kind of gap (label `gap`). Also holds, with `gap = "unknown"`, once no
    /// reconciliation has covered its whole window for `after`: a reconciliation that cannot
    /// read never passes as "nothing lost".
    ReconcileMismatch {
        /// How long reconciliation may go without covering its window.
        after: Micros,
    },
    /// An asynchronous operation of a target was accepted `after` ago or longer and has not
    /// ended, while the adapter instance that reported it still reports: it is stuck. One
    /// instance per target. An operation whose instance went silent is unknown, not stuck.
    StuckOperations {
        /// How long an operation may stay open.
        after: Micros,
    },
    /// Always firing: an external dead man's switch pages when it stops arriving.
    Watchdog,
}

/// A validated rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rule {
    /// The alert name.
    pub name: String,
    /// The severity label.
    pub severity: Severity,
    /// How long the condition must hold before the alert fires.
    pub for_micros: Micros,
    /// A sentence for the notification; a default per kind otherwise.
    pub summary: Option<String>,
    /// What it watches.
    #[serde(flatten)]
    pub kind: RuleKind,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    rule: Vec<RawRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: Option<String>,
    kind: Option<String>,
    severity: Option<Severity>,
    #[serde(rename = "for")]
    for_: Option<String>,
    summary: Option<String>,
    window: Option<String>,
    baseline: Option<String>,
    factor: Option<f64>,
    min_events: Option<u64>,
    objective: Option<f64>,
    group_by: Option<String>,
    min_calls: Option<u64>,
    windows: Option<Vec<RawBurnWindow>>,
    after: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBurnWindow {
    long: String,
    short: String,
    factor: f64,
}

/// What a rule is checked against: the model's bucket width and history.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The model's bucket width.
    pub step: Micros,
    /// The model's history.
    pub history: Micros,
}

/// The first `pipeline_stale` rule's name and `after`. Rules that hold only while the stream is
/// live read it: the kafka hop counts as fresh while its newest evidence is at most that `after`
/// old (the built-in `stuck_operations` condition, and the Prometheus form of `adapter_silent`
/// and `stuck_operations`).
pub fn stale_rule(rules: &[Rule]) -> Option<(&str, Micros)> {
    rules.iter().find_map(|rule| match rule.kind {
        RuleKind::PipelineStale { after } => Some((rule.name.as_str(), after)),
        _ => None,
    })
}

/// Parses and validates a rules file.
pub fn parse(text: &str, limits: Limits) -> Result<Vec<Rule>, RulesError> {
    let raw: RawFile = toml::from_str(text)?;
    let mut names = BTreeSet::new();
    let mut rules = Vec::with_capacity(raw.rule.len());
    for (index, rule) in raw.rule.into_iter().enumerate() {
        let label = rule
            .name
            .clone()
            .unwrap_or_else(|| format!("#{} (no name)", index + 1));
        let invalid = |problem: String| RulesError::Invalid {
            rule: label.clone(),
            problem,
        };
        let rule = validate(rule, limits).map_err(invalid)?;
        if !names.insert(rule.name.clone()) {
            return Err(invalid(
                "two rules have this name; alert names must be unique".into(),
            ));
        }
        rules.push(rule);
    }
    Ok(rules)
}

fn duration(field: &str, raw: &str) -> Result<Micros, String> {
    let parsed: Duration =
        candor_schema::duration::parse(raw).map_err(|err| format!("{field} = {err}"))?;
    Micros::try_from(parsed.as_micros()).map_err(|_| format!("{field} = {raw:?} is too long"))
}

fn positive(field: &str, raw: &str) -> Result<Micros, String> {
    let micros = duration(field, raw)?;
    if micros <= 0 {
        return Err(format!("{field} must be longer than zero"));
    }
    Ok(micros)
}

fn validate(raw: RawRule, limits: Limits) -> Result<Rule, String> {
    let name = raw.name.clone().ok_or("every rule needs a `name`")?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(
            "`name` must be letters, digits and `_` (it becomes the alertname label)".into(),
        );
    }
    let kind_name = raw.kind.clone().ok_or(
        "every rule needs a `kind`: spike, burn_rate, pipeline_stale, adapter_silent, \
         reconcile_mismatch, stuck_operations or watchdog",
    )?;
    let for_micros = match &raw.for_ {
        Some(text) => duration("for", text)?,
        None => 0,
    };
    // Fields each kind takes; any other one set is a mistake worth stopping for.
    let allowed: &[&str] = match kind_name.as_str() {
        "spike" => &["window", "baseline", "factor", "min_events"],
        "burn_rate" => &["objective", "group_by", "min_calls", "windows"],
        "pipeline_stale" | "adapter_silent" | "reconcile_mismatch" | "stuck_operations" => {
            &["after"]
        }
        "watchdog" => &[],
        other => {
            return Err(format!(
                "unknown kind {other:?}; expected spike, burn_rate, pipeline_stale, \
                 adapter_silent, reconcile_mismatch, stuck_operations or watchdog"
            ));
        }
    };
    let set = [
        ("window", raw.window.is_some()),
        ("baseline", raw.baseline.is_some()),
        ("factor", raw.factor.is_some()),
        ("min_events", raw.min_events.is_some()),
        ("objective", raw.objective.is_some()),
        ("group_by", raw.group_by.is_some()),
        ("min_calls", raw.min_calls.is_some()),
        ("windows", raw.windows.is_some()),
        ("after", raw.after.is_some()),
    ];
    if let Some((field, _)) = set
        .iter()
        .find(|(field, present)| *present && !allowed.contains(field))
    {
        return Err(format!("`{field}` does not apply to a {kind_name} rule"));
    }
    let within_history = |field: &str, micros: Micros| {
        if micros < limits.step {
            Err(format!(
                "{field} is shorter than the dashboards' bucket ({} s)",
                limits.step / 1_000_000
            ))
        } else if micros > limits.history {
            Err(format!(
                "{field} reaches further back than the dashboards' history ({} s); raise \
                 `history` or shorten the rule",
                limits.history / 1_000_000
            ))
        } else {
            Ok(micros)
        }
    };
    let kind = match kind_name.as_str() {
        "spike" => {
            let window = positive("window", raw.window.as_deref().unwrap_or("5m"))?;
            let baseline = positive("baseline", raw.baseline.as_deref().unwrap_or("1h"))?;
            within_history("window + baseline", window + baseline)?;
            within_history("window", window)?;
            let factor = raw.factor.unwrap_or(3.0);
            if !(factor.is_finite() && factor > 1.0) {
                return Err(format!("factor = {factor} must be a number above 1"));
            }
            RuleKind::Spike {
                window,
                baseline,
                factor,
                min_events: raw.min_events.unwrap_or(10),
            }
        }
        "burn_rate" => {
            let objective = raw
                .objective
                .ok_or("a burn_rate rule needs `objective`, e.g. 0.99")?;
            if !(objective > 0.0 && objective < 1.0) {
                return Err(format!(
                    "objective = {objective} must be between 0 and 1 (exclusive)"
                ));
            }
            let group_by = match raw.group_by.as_deref().unwrap_or("target") {
                "target" => GroupBy::Target,
                "tool" => GroupBy::Tool,
                "service" => GroupBy::Service,
                other => {
                    return Err(format!(
                        "group_by = {other:?}; expected target, tool or service"
                    ));
                }
            };
            let raw_windows = raw
                .windows
                .ok_or("a burn_rate rule needs `windows`, e.g. [{ long = \"1h\", short = \"5m\", factor = 14.4 }]")?;
            if raw_windows.is_empty() {
                return Err("`windows` is empty".into());
            }
            let mut windows = Vec::new();
            for pair in raw_windows {
                let long = within_history("windows.long", positive("windows.long", &pair.long)?)?;
                let short =
                    within_history("windows.short", positive("windows.short", &pair.short)?)?;
                if short >= long {
                    return Err(format!(
                        "windows: short {:?} must be shorter than long {:?}",
                        pair.short, pair.long
                    ));
                }
                if !(pair.factor.is_finite() && pair.factor > 0.0) {
                    return Err(format!("windows: factor = {} must be above 0", pair.factor));
                }
                windows.push(BurnWindow {
                    long,
                    short,
                    factor: pair.factor,
                });
            }
            RuleKind::BurnRate {
                objective,
                group_by,
                min_calls: raw.min_calls.unwrap_or(10),
                windows,
            }
        }
        "pipeline_stale" => RuleKind::PipelineStale {
            after: positive("after", raw.after.as_deref().unwrap_or("5m"))?,
        },
        "adapter_silent" => RuleKind::AdapterSilent {
            after: positive("after", raw.after.as_deref().unwrap_or("10m"))?,
        },
        "reconcile_mismatch" => RuleKind::ReconcileMismatch {
            after: positive("after", raw.after.as_deref().unwrap_or("15m"))?,
        },
        "stuck_operations" => RuleKind::StuckOperations {
            after: positive("after", raw.after.as_deref().unwrap_or("15m"))?,
        },
        _ => RuleKind::Watchdog,
    };
    Ok(Rule {
        name,
        severity: raw.severity.unwrap_or(Severity::Page),
        for_micros,
        summary: raw.summary,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        step: 60_000_000,
        history: 6 * 3600 * 1_000_000,
    };

    fn problem(text: &str) -> String {
        parse(text, LIMITS).expect_err("refused").to_string()
    }

    #[test]
    fn the_shipped_rules_are_valid_and_cover_every_kind() {
        let rules = parse(DEFAULT_RULES, LIMITS).expect("valid");
        let kinds: BTreeSet<&str> = rules
            .iter()
            .map(|rule| match rule.kind {
                RuleKind::Spike { .. } => "spike",
                RuleKind::BurnRate { .. } => "burn_rate",
                RuleKind::PipelineStale { .. } => "pipeline_stale",
                RuleKind::AdapterSilent { .. } => "adapter_silent",
                RuleKind::ReconcileMismatch { .. } => "reconcile_mismatch",
                RuleKind::StuckOperations { .. } => "stuck_operations",
                RuleKind::Watchdog => "watchdog",
            })
            .collect();
        assert_eq!(kinds.len(), 7, "{kinds:?}");
    }

    #[test]
    fn mistakes_name_the_rule_and_the_field() {
        let unknown_kind = problem("[[rule]]\nname = \"A\"\nkind = \"spikes\"\n");
        assert!(
            unknown_kind.contains("\"A\"") && unknown_kind.contains("unknown kind"),
            "{unknown_kind}"
        );
        let wrong_field = problem("[[rule]]\nname = \"A\"\nkind = \"watchdog\"\nfactor = 2.0\n");
        assert!(
            wrong_field.contains("`factor` does not apply to a watchdog rule"),
            "{wrong_field}"
        );
        let typo = problem("[[rule]]\nname = \"A\"\nkind = \"spike\"\nfactr = 2.0\n");
        assert!(typo.contains("factr"), "{typo}");
        let bad_duration =
            problem("[[rule]]\nname = \"A\"\nkind = \"pipeline_stale\"\nafter = \"soon\"\n");
        assert!(
            bad_duration.contains("after = \"soon\" is not a duration"),
            "{bad_duration}"
        );
        let too_long = problem("[[rule]]\nname = \"A\"\nkind = \"spike\"\nbaseline = \"7d\"\n");
        assert!(too_long.contains("history"), "{too_long}");
        let twice = problem(
            "[[rule]]\nname = \"A\"\nkind = \"watchdog\"\n[[rule]]\nname = \"A\"\nkind = \"watchdog\"\n",
        );
        assert!(twice.contains("unique"), "{twice}");
        let pair = problem(
            "[[rule]]\nname = \"B\"\nkind = \"burn_rate\"\nobjective = 0.99\nwindows = [{ long = \"5m\", short = \"1h\", factor = 2.0 }]\n",
        );
        assert!(pair.contains("must be shorter than long"), "{pair}");
        let objective =
            problem("[[rule]]\nname = \"B\"\nkind = \"burn_rate\"\nobjective = 99\nwindows = []\n");
        assert!(objective.contains("between 0 and 1"), "{objective}");
    }

    #[test]
    fn a_reconcile_mismatch_rule_takes_only_after() {
        let rules = parse(
            "[[rule]]\nname = \"Lost\"\nkind = \"reconcile_mismatch\"\nfor = \"2m\"\n",
            LIMITS,
        )
        .expect("valid");
        assert_eq!(
            rules[0].kind,
            RuleKind::ReconcileMismatch {
                after: 15 * 60 * 1_000_000
            }
        );
        assert_eq!(rules[0].for_micros, 2 * 60 * 1_000_000);
        let set = parse(
            "[[rule]]\nname = \"Lost\"\nkind = \"reconcile_mismatch\"\nafter = \"30m\"\n",
            LIMITS,
        )
        .expect("valid");
        assert_eq!(
            set[0].kind,
            RuleKind::ReconcileMismatch {
                after: 30 * 60 * 1_000_000
            }
        );
        let window =
            problem("[[rule]]\nname = \"Lost\"\nkind = \"reconcile_mismatch\"\nwindow = \"5m\"\n");
        assert!(
            window.contains("`window` does not apply to a reconcile_mismatch rule"),
            "{window}"
        );
        let zero =
            problem("[[rule]]\nname = \"Lost\"\nkind = \"reconcile_mismatch\"\nafter = \"0s\"\n");
        assert!(zero.contains("after must be longer than zero"), "{zero}");
        let typo = problem("[[rule]]\nname = \"Lost\"\nkind = \"reconcile\"\n");
        assert!(typo.contains("reconcile_mismatch"), "{typo}");
    }
}
