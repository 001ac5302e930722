use std::time::Duration;

use super::*;

mod names {
    crate::metric_names! {
        CALLS_TOTAL = "t_calls_total", "Calls, by route.";
        LATENCY_SECONDS = "t_latency_seconds", "Latency, by route.";
        DEPTH = "t_depth", "Queue depth.";
        AGE_SECONDS = "t_age_seconds", "Age.";
        OVERFLOW_TOTAL = "t_overflow_total", "Folds into \"other\".";
    }
}

#[test]
fn counters_keep_their_total_suffix_and_help_text() {
    let mut metrics = Metrics::new(names::help, names::OVERFLOW_TOTAL);
    let calls = metrics.counter(names::CALLS_TOTAL);
    calls.inc_by(3);
    let text = metrics.encode();
    for line in [
        "# HELP t_calls_total Calls, by route.\n",
        "# TYPE t_calls_total counter\n",
        "t_calls_total 3\n",
        "# TYPE t_overflow_total counter\n",
        "t_overflow_total 0\n",
    ] {
        assert!(text.contains(line), "{line:?} not in {text}");
    }
    assert_eq!(sample(&text, names::CALLS_TOTAL), Some(3.0));
}

#[test]
fn a_family_without_series_is_still_declared() {
    let mut metrics = Metrics::new(names::help, names::OVERFLOW_TOTAL);
    let _calls = metrics.counters(names::CALLS_TOTAL, &["route"]);
    let text = metrics.encode();
    assert!(text.contains("# TYPE t_calls_total counter\n"), "{text}");
    assert!(!text.contains("t_calls_total{"), "{text}");
}

#[test]
fn a_full_family_folds_into_other_and_counts_each_fold() {
    let mut metrics = Metrics::new(names::help, names::OVERFLOW_TOTAL);
    let calls = metrics
        .counters(names::CALLS_TOTAL, &["route"])
        .with_max_series(2);
    for route in ["a", "b", "c", "d", "a", "b"] {
        calls.with(&[route]).inc();
    }
    let text = metrics.encode();
    assert_eq!(sample(&text, "t_calls_total{route=\"a\"}"), Some(2.0));
    assert_eq!(sample(&text, "t_calls_total{route=\"b\"}"), Some(2.0));
    assert_eq!(sample(&text, "t_calls_total{route=\"other\"}"), Some(2.0));
    assert_eq!(sample(&text, "t_calls_total{route=\"c\"}"), None);
    assert_eq!(sample(&text, names::OVERFLOW_TOTAL), Some(2.0));
}

#[test]
fn histograms_are_cumulative_include_their_bound_and_end_at_the_count() {
    let mut metrics = Metrics::new(names::help, names::OVERFLOW_TOTAL);
    let latency = metrics.histograms(names::LATENCY_SECONDS, &["route"]);
    let series = latency.with(&["a"]);
    for micros in [500, 1_000, 3_000, 20_000, 20_000_000] {
        observe(&series, Duration::from_micros(micros));
    }
    let text = metrics.encode();
    let bucket = |le: &str| {
        sample(
            &text,
            &format!("t_latency_seconds_bucket{{route=\"a\",le=\"{le}\"}}"),
        )
    };
    assert_eq!(bucket("0.001"), Some(2.0), "{text}");
    assert_eq!(bucket("0.005"), Some(3.0), "{text}");
    assert_eq!(bucket("10"), Some(4.0), "{text}");
    assert_eq!(bucket("+Inf"), Some(5.0), "{text}");
    assert_eq!(
        sample(&text, "t_latency_seconds_count{route=\"a\"}"),
        Some(5.0)
    );
}

#[test]
fn label_values_are_escaped() {
    let mut metrics = Metrics::new(names::help, names::OVERFLOW_TOTAL);
    let depth = metrics.gauges(names::DEPTH, &["queue"]);
    depth.with(&["a\"b\nc\\d"]).set(4);
    let text = metrics.encode();
    assert!(
        text.contains("t_depth{queue=\"a\\\"b\\nc\\\\d\"} 4\n"),
        "{text}"
    );
}

#[test]
fn a_snapshot_writes_every_family_it_was_given_even_empty_ones() {
    let mut snapshot = Snapshot::new(names::help);
    snapshot.counters(names::CALLS_TOTAL, [(labels(&[("route", "a")]), 7)]);
    snapshot.gauges(names::DEPTH, []);
    snapshot.float_gauges(names::AGE_SECONDS, [(Labels::new(), 1.5)]);
    let text = snapshot.encode();
    assert_eq!(sample(&text, "t_calls_total{route=\"a\"}"), Some(7.0));
    assert!(text.contains("# TYPE t_depth gauge\n"), "{text}");
    assert_eq!(sample(&text, names::AGE_SECONDS), Some(1.5));
}

#[test]
fn every_declared_name_has_its_help_text_and_no_other_name_has_one() {
    for name in names::ALL {
        assert!(!names::help(name).is_empty(), "{name}");
    }
    assert_eq!(names::help("t_undeclared"), "");
}
