use super::*;
use crate::rules::{DEFAULT_RULES, Limits, parse};

/// The file committed beside the rules, which Prometheus users load.
const COMMITTED: &str = include_str!("../../../prometheus/candor.rules.yml");

/// The service's default `--step` and `--history`.
const LIMITS: Limits = Limits {
    step: 60_000_000,
    history: 6 * 3_600_000_000,
};

fn render(text: &str) -> String {
    prometheus_rules(&parse(text, LIMITS).expect("valid rules"))
}

/// The shipped rules with `from` replaced by `to` (which must be there).
fn shipped_with(from: &str, to: &str) -> String {
    assert!(
        DEFAULT_RULES.contains(from),
        "{from:?} is not in rules.toml"
    );
    DEFAULT_RULES.replacen(from, to, 1)
}

#[test]
fn the_committed_prometheus_rules_are_the_rendering_of_the_shipped_rules() {
    let rendered = render(DEFAULT_RULES);
    if rendered != COMMITTED {
        let (line, (want, have)) = rendered
            .lines()
            .chain(std::iter::repeat(""))
            .zip(COMMITTED.lines().chain(std::iter::repeat("")))
            .enumerate()
            .find(|(_, (want, have))| want != have)
            .unwrap_or((0, ("", "")));
        panic!(
            "dashboards/prometheus/candor.rules.yml is not the rendering of dashboards/rules.toml \
             (first difference at line {}: {have:?}, rendered {want:?}). It is generated: \
             regenerate it from the workspace root with\n  {REGENERATE}\nthen run `promtool test \
             rules dashboards/prometheus/candor.rules.test.yml`",
            line + 1
        );
    }
}

#[test]
fn a_changed_threshold_changes_the_generated_rules() {
    let shipped = render(DEFAULT_RULES);
    for (from, to, before, after) in [
        (
            "factor = 3.0",
            "factor = 4.5",
            "    3 * (\n",
            "    4.5 * (\n",
        ),
        ("min_events = 10", "min_events = 25", ">= 10)\n", ">= 25)\n"),
        (
            "window = \"5m\"",
            "window = \"10m\"",
            "(target:candor_access_failures:increase5m >= 10)",
            "(target:candor_access_failures:increase10m >= 10)",
        ),
        (
            "factor = 14.4",
            "factor = 10.0",
            ">= (14.4 * 0.01)",
            ">= (10 * 0.01)",
        ),
        (
            "objective = 0.99",
            "objective = 0.995",
            "(6 * 0.01)",
            "(6 * 0.005)",
        ),
        (
            "min_calls = 20",
            "min_calls = 50",
            "* 21600 >= 20)",
            "* 21600 >= 50)",
        ),
        (
            "long = \"6h\", short = \"30m\"",
            "long = \"3h\", short = \"15m\"",
            "target:candor_silent_failure:ratio_rate30m >=",
            "target:candor_silent_failure:ratio_rate15m >=",
        ),
        (
            "group_by = \"target\"",
            "group_by = \"service\"",
            "(sum by (target, source) (target_tool_class_source:candor_tool_outcomes:rate1h) * 3600 >= 20)",
            "(sum by (service, source) (rate(candor_tool_outcomes_total[1h])) * 3600 >= 20)",
        ),
        (
            "after = \"5m\"",
            "after = \"7m\"",
            "expr: candor_hop_freshness_seconds > 300\n",
            "expr: candor_hop_freshness_seconds > 420\n",
        ),
        (
            "after = \"10m\"",
            "after = \"20m\"",
            "  ) > 600\n",
            "  ) > 1200\n",
        ),
        (
            "after = \"15m\"",
            "after = \"30m\"",
            "max(candor_reconcile_uncovered_seconds) >= 900",
            "max(candor_reconcile_uncovered_seconds) >= 1800",
        ),
        ("for = \"2m\"", "for = \"4m\"", "for: 2m\n", "for: 4m\n"),
        (
            "severity = \"ticket\"",
            "severity = \"page\"",
            "severity: ticket\n        annotations:\n          summary: \"Adapter",
            "severity: page\n        annotations:\n          summary: \"Adapter",
        ),
        (
            "name = \"CandorWatchdog\"",
            "name = \"Heartbeat\"",
            "- alert: CandorWatchdog\n",
            "- alert: Heartbeat\n",
        ),
    ] {
        assert!(
            shipped.contains(before),
            "{before:?} not in the shipped rendering"
        );
        let changed = render(&shipped_with(from, to));
        assert!(
            changed.contains(after),
            "{from} -> {to}: {after:?} not rendered:\n{changed}"
        );
        assert_ne!(changed, shipped, "{from} -> {to} changed nothing");
    }
}

#[test]
fn every_metric_the_rules_read_is_one_the_dashboards_serve() {
    use crate::model::{Model, ModelSettings};
    use crate::state::Shared;

    let shared = Shared::new(
        Model::new(ModelSettings::default()),
        Default::default(),
        Vec::new(),
        std::sync::Arc::new(crate::access::Access::open()),
        0,
    );
    // The history read: the outcome counters are served.
    *crate::sync::lock(&shared.pipeline) = crate::state::PipelineInputs {
        history_read: Some(0),
        caught_up: true,
        ..Default::default()
    };
    let served = crate::metrics::render(&crate::snapshot::Snapshot::take(&shared, 0));
    for name in metric::ALL {
        assert!(
            served.contains(&format!("# TYPE {name} ")),
            "{name} is not served on /metrics"
        );
    }
}

#[test]
fn rules_without_recording_needs_render_only_their_alerts() {
    let text = "[[rule]]\nname = \"Dog\"\nkind = \"watchdog\"\nseverity = \"none\"\n\
                [[rule]]\nname = \"Silent\"\nkind = \"adapter_silent\"\nseverity = \"ticket\"\n";
    let rendered = render(text);
    assert!(!rendered.contains("candor.recording"), "{rendered}");
    assert!(
        rendered.contains("- alert: Dog\n        expr: vector(1)\n"),
        "{rendered}"
    );
    // No pipeline_stale rule: no kafka freshness condition, and no `for` when none is set.
    assert!(!rendered.contains("hop=\"kafka\""), "{rendered}");
    assert!(!rendered.contains("for:"), "{rendered}");
    assert!(render("").ends_with("\n\ngroups: []\n"), "{}", render(""));
}

#[test]
fn a_summary_set_in_the_rules_is_sent_as_text() {
    let rendered = render(
        "[[rule]]\nname = \"Dog\"\nkind = \"watchdog\"\nsummary = \"say \\\"{{ hi }}\\\"\"\n",
    );
    assert!(
        rendered.contains("summary: \"say \\\"{{ \\\"{{\\\" }} hi }}\\\"\"\n"),
        "{rendered}"
    );
}

#[test]
fn rules_that_share_windows_share_recording_rules() {
    let twice = format!(
        "{DEFAULT_RULES}\n[[rule]]\nname = \"OtherSpike\"\nkind = \"spike\"\nfactor = 5.0\n"
    );
    let rendered = render(&twice);
    assert_eq!(
        rendered
            .matches("- record: target:candor_access_failures:increase5m\n")
            .count(),
        1
    );
    assert!(rendered.contains("- alert: OtherSpike\n"), "{rendered}");
    assert!(rendered.contains("    5 * (\n"), "{rendered}");
}
