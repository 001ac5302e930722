//! The pages rendered from whole views: every outside value escaped in text and attribute
//! positions, and the markup the browser tests read.

use std::collections::BTreeMap;
use std::sync::Arc;

use candor_query::commands::{OpenStatus, OperationTotals};
use candor_query::rates::{ClassCounts, Spike};
use candor_query::window::Micros;
use candor_schema::OutcomeClass;
use serde_json::{Map, Value, json};

use super::{STYLE, events, overview, query_value};
use crate::alerts::{Alert, Delivery, State};
use crate::forensic::EventsQuery;
use crate::forensic::EventsView;
use crate::health::{Freshness, Hop, HopName, PanelCoverage};
use crate::instances::InstanceRow;
use crate::model::{Applied, FailureBreakdown, GroupBy, InstanceSeen, MINUTE};
use crate::operations::{self, OpenOperation, OperationsPanel};
use crate::reconcile::tests::{T0, answer, coverage, lost, window};
use crate::reconcile::{ReconcileState, Run};
use crate::view::{Chart, GroupRow, Overview};

/// A target name that is markup, with a quote to break out of an attribute.
const HOSTILE: &str = "<script>alert(1)</script>\"";
/// The same, escaped.
const HOSTILE_ESCAPED: &str = "&lt;script&gt;alert(1)&lt;/script&gt;&quot;";
const NOW: Micros = T0;
const SECOND: Micros = 1_000_000;

fn row(group: &str, counts: ClassCounts, terminal_events: u64) -> GroupRow {
    GroupRow {
        group: group.into(),
        silent_failure_rate: crate::view::rate(&counts),
        lower_bound: counts.lower_bound(),
        counts,
        terminal_events,
    }
}

fn alert(name: &str, state: State, delivery: Delivery) -> Alert {
    Alert {
        name: name.into(),
        severity: "warning",
        labels: BTreeMap::from([("target".to_owned(), HOSTILE.to_owned())]),
        description: format!("{HOSTILE} failed"),
        summary: "summary".into(),
        state,
        active_since: NOW - 5 * MINUTE,
        fired_at: (state != State::Pending).then_some(NOW - 4 * MINUTE),
        resolved_at: (state == State::Resolved).then_some(NOW - MINUTE),
        delivery,
        last_sent: None,
        acknowledged: None,
        escalated: None,
    }
}

/// An overview with a value in every place the page shows one, the hostile target among them.
fn full_overview() -> Overview {
    let failing = ClassCounts {
        access_failure: 8,
        ..ClassCounts::default()
    };
    let mixed = ClassCounts {
        success: 20,
        empty: 1,
        partial: 2,
        access_failure: 0,
        ..ClassCounts::default()
    };
    let mut reconcile = ReconcileState::default();
    reconcile.record(Run::new(
        NOW,
        window(),
        coverage(NOW),
        Ok(answer(lost(3), 3)),
        2,
    ));
    Overview {
        now: NOW,
        range_micros: 15 * MINUTE,
        hops: vec![
            Hop {
                hop: HopName::Collector,
                freshness: Freshness::Live,
                last_seen: Some(NOW - 2 * SECOND),
                stale_after_micros: 3 * SECOND,
                detail: format!("heartbeat from {HOSTILE}"),
            },
            Hop {
                hop: HopName::Kafka,
                freshness: Freshness::Stale {
                    since: NOW - MINUTE,
                },
                last_seen: Some(NOW - MINUTE),
                stale_after_micros: 3 * SECOND,
                detail: "broker <gone>".into(),
            },
            Hop {
                hop: HopName::Table,
                freshness: Freshness::Unknown,
                last_seen: None,
                stale_after_micros: 4 * SECOND,
                detail: String::new(),
            },
        ],
        pipeline: Freshness::Stale {
            since: NOW - MINUTE,
        },
        coverage: live(),
        by_target: vec![
            row("http://lookup.test/v1/users?a=1&b=2", failing, 8),
            row(HOSTILE, mixed, 0),
            row("idle", ClassCounts::default(), 0),
        ],
        by_tool: vec![row("search", mixed, 2), row(HOSTILE, failing, 1)],
        chart_target: Chart {
            by: GroupBy::Target,
            buckets: (0..5).map(|i| NOW - (5 - i) * MINUTE).collect(),
            series: vec![
                (
                    "http://lookup.test/v1/users?a=1&b=2".into(),
                    vec![Some(1.0), Some(0.5), None, Some(0.25), None],
                ),
                (
                    HOSTILE.into(),
                    vec![None, Some(0.125), None, None, Some(2.0)],
                ),
            ],
        },
        chart_tool: Chart {
            by: GroupBy::Tool,
            buckets: vec![NOW],
            series: vec![(HOSTILE.into(), vec![Some(0.0)])],
        },
        spikes: vec![
            Spike {
                target: HOSTILE.into(),
                window_failures: 6,
                window_calls: 10,
                window_rate: 0.6,
                baseline_failures: 0,
                baseline_calls: 0,
                baseline_rate: None,
                factor: None,
            },
            Spike {
                target: "http://lookup.test/v1/users?a=1&b=2".into(),
                window_failures: 8,
                window_calls: 8,
                window_rate: 1.0,
                baseline_failures: 1,
                baseline_calls: 10,
                baseline_rate: Some(0.1),
                factor: Some(10.0),
            },
        ],
        spike_window_micros: 5 * MINUTE,
        spike_baseline_micros: 60 * MINUTE,
        alerts: vec![
            alert(
                "CandorAccessFailureSpike",
                State::Firing,
                Delivery::Delivered {
                    at: NOW - 3 * MINUTE,
                    sent: State::Firing,
                },
            ),
            alert(
                "CandorWatchdog",
                State::Firing,
                Delivery::Undelivered {
                    at: NOW - 2 * MINUTE,
                    sent: State::Firing,
                    reason: format!("connect to {HOSTILE} refused"),
                },
            ),
            alert(
                "CandorPipelineStale",
                State::Pending,
                Delivery::NotSent {
                    reason: format!("pending <{HOSTILE}>"),
                },
            ),
            alert("CandorAdapterSilent", State::Resolved, Delivery::Sending),
        ],
        reconcile,
        failures: FailureBreakdown {
            by_kind: BTreeMap::from([("timeout".to_owned(), 3), (HOSTILE.to_owned(), 5)]),
            by_action: BTreeMap::from([("exhausted".to_owned(), 8)]),
            by_target: BTreeMap::from([(HOSTILE.to_owned(), 8)]),
        },
        instances: vec![
            InstanceRow {
                seen: InstanceSeen {
                    service: Arc::from(HOSTILE),
                    instance: Arc::from(format!("{HOSTILE}-1")),
                    seen_by: candor_query::coverage::SeenBy::Adapter,
                    first: NOW - 10 * MINUTE,
                    last: NOW - SECOND,
                    interval_micros: Some(500_000),
                    stopped: false,
                    replaced: false,
                },
                silent: false,
            },
            InstanceRow {
                seen: InstanceSeen {
                    service: Arc::from("shop"),
                    instance: Arc::from("shop-2"),
                    seen_by: candor_query::coverage::SeenBy::Adapter,
                    first: NOW - 10 * MINUTE,
                    last: NOW - 9 * MINUTE,
                    interval_micros: None,
                    stopped: false,
                    replaced: false,
                },
                silent: true,
            },
        ],
        operations: operations_panel(),
        operations_coverage: live(),
        collectors: Vec::new(),
        applied: Applied {
            records: 100,
            duplicates: 2,
            before_history: 3,
            future: 1,
            rejected: 4,
            ..Applied::default()
        },
        rejected: BTreeMap::new(),
        has_receivers: false,
    }
}

/// One stuck operation with a hostile id, one whose adapter went silent, and ended ones.
fn operations_panel() -> OperationsPanel {
    let open = |id: &str, status: OpenStatus, first_seen: Micros| OpenOperation {
        service: "reporting".into(),
        instance: "reporting-1".into(),
        tool: "export".into(),
        target: "exports.test".into(),
        operation_id: id.into(),
        state: "running",
        first_seen,
        last_seen: NOW - MINUTE,
        actor: None,
        source_system: "exports".into(),
        status,
    };
    OperationsPanel {
        stuck_after_micros: 15 * MINUTE,
        totals: OperationTotals {
            seen: 5,
            completed: 2,
            failed: 1,
            stuck: 1,
            unknown: 1,
            ..OperationTotals::default()
        },
        never_completed_rate: Some(0.6),
        open: vec![
            open(HOSTILE, OpenStatus::Stuck, NOW - 20 * MINUTE),
            open("op-2", OpenStatus::Unknown, NOW - 30 * MINUTE),
        ],
        limit: 20,
        evicted: 0,
    }
}

/// An overview with nothing in it, under `coverage`.
fn empty_overview(coverage: PanelCoverage) -> Overview {
    Overview {
        by_target: Vec::new(),
        by_tool: Vec::new(),
        chart_target: Chart {
            by: GroupBy::Target,
            buckets: Vec::new(),
            series: Vec::new(),
        },
        chart_tool: Chart {
            by: GroupBy::Tool,
            buckets: Vec::new(),
            series: Vec::new(),
        },
        spikes: Vec::new(),
        alerts: Vec::new(),
        reconcile: ReconcileState::default(),
        failures: FailureBreakdown::default(),
        instances: Vec::new(),
        operations: operations::panel(&[], 15 * MINUTE, 20, 0),
        operations_coverage: coverage.clone(),
        has_receivers: true,
        pipeline: coverage.freshness,
        coverage,
        ..full_overview()
    }
}

fn live() -> PanelCoverage {
    PanelCoverage {
        freshness: Freshness::Live,
        from: Some(NOW - 15 * MINUTE),
        until: Some(NOW),
        gaps: Vec::new(),
    }
}

fn stale() -> PanelCoverage {
    PanelCoverage {
        freshness: Freshness::Stale {
            since: NOW - MINUTE,
        },
        from: Some(NOW - 15 * MINUTE),
        until: None,
        gaps: vec![format!("collector STALE: <{HOSTILE}>")],
    }
}

fn asked() -> EventsQuery {
    EventsQuery {
        target: Some(HOSTILE.into()),
        class: Some("partial".into()),
        service: None,
        tool: Some("search".into()),
        since: Some("15m".into()),
        until: None,
        trace: Some("0af7651916cd43dd8448eb211c80319c".into()),
    }
}

fn events_view(class: OutcomeClass, rows: usize) -> EventsView {
    let columns: Vec<String> = ["time", "tool_target", "trace_id", "attempt", "note"]
        .map(str::to_owned)
        .into();
    let row = |i: usize| -> Map<String, Value> {
        let Value::Object(row) = json!({
            "time": "2023-11-14T22:14:00Z",
            "tool_target": if i == 0 { HOSTILE } else { "" },
            "trace_id": if i == 0 { "0af7651916cd43dd8448eb211c80319c" } else { "" },
            "attempt": i + 1,
            "note": if i == 0 { Value::Null } else { json!({ "why": HOSTILE }) },
        }) else {
            unreachable!("a JSON object")
        };
        row
    };
    EventsView {
        class,
        columns,
        rows: (0..rows).map(row).collect(),
        summary: vec![format!("{rows} exhausted at {HOSTILE}")],
        coverage_lines: vec!["kafka tail: read".into(), format!("table {HOSTILE}: read")],
        json: String::new(),
    }
}

/// Every page the tests render, by name.
fn pages() -> Vec<(&'static str, String)> {
    vec![
        ("overview-full", overview(&full_overview())),
        ("overview-empty-live", overview(&empty_overview(live()))),
        ("overview-empty-stale", overview(&empty_overview(stale()))),
        (
            "events-rows",
            events(&asked(), Ok(&events_view(OutcomeClass::Partial, 2))),
        ),
        (
            "events-empty",
            events(
                &EventsQuery::default(),
                Ok(&events_view(OutcomeClass::Empty, 0)),
            ),
        ),
        (
            "events-not-confirmed",
            events(&asked(), Ok(&events_view(OutcomeClass::AccessFailure, 0))),
        ),
        (
            "events-error",
            events(&asked(), Err(&format!("bad --since {HOSTILE}"))),
        ),
    ]
}

#[test]
fn markup_in_values_is_text() {
    assert_eq!(query_value("a b&c=/"), "a+b%26c%3D%2F");
    let page = overview(&full_overview());
    // Text positions: a table cell, a chart's tooltip, the legend, a spike's link text.
    for text in [
        format!(
            "<td><a href=\"/events?target=%3Cscript%3Ealert%281%29%3C%2Fscript%3E%22&amp;since=15m\">{HOSTILE_ESCAPED}</a></td>"
        ),
        format!("<title>{HOSTILE_ESCAPED}</title>"),
        format!("<title>{HOSTILE_ESCAPED}: 12.5 %</title>"),
        format!("</span> {HOSTILE_ESCAPED} "),
        format!("<td>target={HOSTILE_ESCAPED}</td>"),
        format!("<td>{HOSTILE_ESCAPED} failed</td>"),
        format!("<td>{HOSTILE_ESCAPED}-1</td>"),
    ] {
        assert!(page.contains(&text), "{text} not in {page}");
    }
    let stale = overview(&empty_overview(stale()));
    let gap = format!("<span class=\"gap\">collector STALE: &lt;{HOSTILE_ESCAPED}&gt;</span>");
    assert!(stale.contains(&gap), "{gap} not in {stale}");
    // Attribute positions: the quote does not end the attribute.
    for attribute in [
        format!("<tr data-group=\"{HOSTILE_ESCAPED}\">"),
        format!("<tr data-target=\"{HOSTILE_ESCAPED}\">"),
        format!("<tr data-key=\"{HOSTILE_ESCAPED}\">"),
        format!("<tr data-instance=\"{HOSTILE_ESCAPED}-1\" data-silent=\"false\">"),
        format!("<tr data-operation=\"{HOSTILE_ESCAPED}\" data-status=\"stuck\">"),
        format!("title=\"heartbeat from {HOSTILE_ESCAPED}\">"),
    ] {
        assert!(page.contains(&attribute), "{attribute} not in {page}");
    }
    let form = events(&asked(), Ok(&events_view(OutcomeClass::Partial, 2)));
    for text in [
        format!("<input name=\"target\" value=\"{HOSTILE_ESCAPED}\">"),
        format!(
            "<td data-col=\"tool_target\"><a href=\"/events?target=%3Cscript%3Ealert%281%29%3C%2Fscript%3E%22&amp;since=24h\">{HOSTILE_ESCAPED}</a></td>"
        ),
        format!("<p>2 exhausted at {HOSTILE_ESCAPED}</p>"),
        format!("table {HOSTILE_ESCAPED}: read<br>"),
    ] {
        assert!(form.contains(&text), "{text} not in {form}");
    }
    let error = events(&asked(), Err(&format!("bad --since {HOSTILE}")));
    assert!(
        error.contains(&format!("<p>bad --since {HOSTILE_ESCAPED}</p>")),
        "{error}"
    );
    for (name, html) in pages() {
        assert!(
            !html.contains(HOSTILE),
            "{name}: the hostile value unescaped:\n{html}"
        );
        assert!(
            !html.contains("<script"),
            "{name}: a script element:\n{html}"
        );
    }
    // An apostrophe needs no escape: every attribute value is in double quotes.
    let mut view = full_overview();
    view.by_target[0].group = "it's".into();
    assert!(overview(&view).contains("<tr data-group=\"it's\">"));
}

#[test]
fn the_stylesheet_cannot_end_its_element() {
    // The stylesheet is the one string the pages take unescaped.
    assert!(!STYLE.contains('<'), "{STYLE}");
}

#[test]
fn the_overview_carries_what_the_browser_checks_read() {
    let page = overview(&full_overview());
    for markup in [
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Candor</title>\
         <meta http-equiv=\"refresh\" content=\"15\"><style>body{",
        "<header id=\"banner\" class=\"stale\" data-state=\"stale\"><h1>Candor · pipeline STALE</h1>",
        "<span class=\"hop\" data-hop=\"collector\" data-state=\"live\" title=",
        ">collector <b>LIVE</b> (2 s ago)</span>",
        "<span class=\"hop\" data-hop=\"kafka\" data-state=\"stale\" title=\"broker &lt;gone&gt;\">kafka <b>STALE</b> since 2023-11-14 22:13:00Z</span>",
        "<span class=\"hop\" data-hop=\"table\" data-state=\"unknown\" title=\"\">table <b>UNKNOWN</b></span>",
        "<nav>Range: <b>15m</b> <a href=\"/?range=1h\">1h</a> ",
        "<section id=\"panel-rates-target\" class=\"panel live\" data-state=\"live\"><h2>Silent-failure rate by target, last 15m <span class=\"badge live\">LIVE</span></h2>",
        "<section id=\"panel-rates-tool\" class=\"panel live\" data-state=\"live\">",
        "<section id=\"panel-spikes\" class=\"panel live\" data-state=\"live\">",
        "<section id=\"panel-alerts\" class=\"panel wide stale\" data-state=\"stale\">",
        "<section id=\"panel-reconcile\" class=\"panel wide live\" data-state=\"live\" data-class=\"success\">",
        "<section id=\"panel-operations\" class=\"panel live\" data-state=\"live\"><h2>Operations accepted and not ended",
        "<p id=\"operations-summary\">open: <b>0</b> pending, <b>1</b> stuck (open for 15m or longer), <b>1</b> unknown",
        "never completed: 60.0 % of 5</p>",
        "<tr data-operation=\"op-2\" data-status=\"unknown\"><td>unknown</td><td>exports.test</td>",
        "<td><b>STUCK</b></td>",
        "<section id=\"panel-failures\" class=\"panel live\" data-state=\"live\">",
        "<section id=\"panel-instances\" class=\"panel live\" data-state=\"live\">",
        "<td class=\"n\" data-col=\"calls\">23</td><td class=\"n\" data-col=\"success\">20</td>\
         <td class=\"n\" data-col=\"empty\">1</td><td class=\"n\" data-col=\"partial\">2</td>\
         <td class=\"n\" data-col=\"access_failure\">0</td><td class=\"n\" data-col=\"unverified\">0</td>\
         <td class=\"n\" data-col=\"cancelled\">0</td><td class=\"n\" data-col=\"rate\">8.7 %</td>\
         <td class=\"n\" data-col=\"terminal\">0</td></tr>",
        "<tr class=\"alert\" data-alert=\"CandorWatchdog\" data-state=\"firing\" data-delivery=\"undelivered\">",
        "<td><span class=\"undelivered\">UNDELIVERED</span> at 2023-11-14 22:12:00Z: connect to ",
        "<tr class=\"alert\" data-alert=\"CandorAccessFailureSpike\" data-state=\"firing\" data-delivery=\"delivered\">",
        "<td>delivered (firing) at 2023-11-14 22:11:00Z</td>",
        "<td class=\"n\">new</td>",
        "<td class=\"n\">10.0x</td>",
        "<p class=\"gap\">No webhook is configured",
        "<td><b>SILENT</b></td>",
        "<p class=\"coverage\">stream: 100 records applied, 2 duplicates removed, 4 outside the history, 4 rejected</p></section></main></body></html>",
        // The chart: the grid, a line through two buckets, a lone bucket as a dot.
        "<svg class=\"chart\" width=\"540\" height=\"160\" viewBox=\"0 0 540 160\" role=\"img\" aria-label=\"silent-failure rate over time\">\
         <line x1=\"30\" x2=\"530\" y1=\"140.0\" y2=\"140.0\" stroke=\"#e5e7eb\"></line><text x=\"0\" y=\"143.0\" font-size=\"10\">0%</text>",
        "<path d=\"M30.0,10.0 L155.0,75.0 M405.0,107.5\" fill=\"none\" stroke=\"#2563eb\" stroke-width=\"1.5\">",
        "<circle cx=\"405.0\" cy=\"107.5\" r=\"2.5\" fill=\"#2563eb\">",
        "<span style=\"color:#dc2626\">■</span>",
    ] {
        assert!(page.contains(markup), "{markup} not in {page}");
    }
    assert_eq!(page.matches("</line>").count(), 6, "{page}");
}

#[test]
fn an_empty_panel_is_a_zero_only_when_live() {
    let live = overview(&empty_overview(live()));
    assert_eq!(
        live.matches("<p class=\"nothing\" data-confirmed=\"true\">")
            .count(),
        6,
        "{live}"
    );
    assert!(live.contains("No calls in this range."), "{live}");
    assert!(live.contains("No operation is open."), "{live}");
    assert!(!live.contains("No webhook is configured"), "{live}");
    let stale = overview(&empty_overview(stale()));
    assert!(!stale.contains("data-confirmed=\"true\""), "{stale}");
    assert!(
        stale.contains(
            "<p class=\"nothing\" data-confirmed=\"false\"><b>STALE</b>: nothing to show, and \
             that is not a zero: the data does not cover the whole range.</p>"
        ),
        "{stale}"
    );
    assert!(
        stale.contains(
            "<section id=\"panel-rates-target\" class=\"panel stale\" data-state=\"stale\">"
        ),
        "{stale}"
    );
}

#[test]
fn the_forensic_page_says_what_its_answer_covers() {
    let page = events(&asked(), Ok(&events_view(OutcomeClass::Partial, 2)));
    for markup in [
        "<nav><a href=\"/\">Overview</a> | Forensics</nav><main style=\"display:block\"><section>\
         <form method=\"get\" action=\"/events\"><label>target <input name=\"target\" value=",
        "<label>service <input name=\"service\" value=\"\"></label>",
        "<button type=\"submit\">Search</button></form></section>",
        "<section id=\"panel-events\" class=\"panel stale\" data-state=\"stale\" data-class=\"partial\"><h2>2 event(s) · partial</h2>",
        "<table id=\"events\"><tr><th>time</th><th>tool_target</th>",
        "<td data-col=\"trace_id\"><a href=\"/events?trace=0af7651916cd43dd8448eb211c80319c\">0af7651916cd43dd8448eb211c80319c</a></td>",
        "<td data-col=\"attempt\">2</td>",
        "<td data-col=\"note\">{&quot;why&quot;:&quot;",
        "<td data-col=\"tool_target\"></td>",
    ] {
        assert!(page.contains(markup), "{markup} not in {page}");
    }
    assert_eq!(page.matches("<tr class=\"event\">").count(), 2, "{page}");
    assert!(!page.contains("<meta http-equiv"), "{page}");
    let empty = events(
        &EventsQuery::default(),
        Ok(&events_view(OutcomeClass::Empty, 0)),
    );
    assert!(
        empty.contains("<p class=\"nothing\" data-confirmed=\"true\">No failure events"),
        "{empty}"
    );
    let partial = events(&asked(), Ok(&events_view(OutcomeClass::AccessFailure, 0)));
    assert!(partial.contains("data-state=\"unknown\""), "{partial}");
    assert!(
        partial.contains("<b>Not a confirmed absence</b>"),
        "{partial}"
    );
    assert!(!partial.contains("data-confirmed=\"true\""), "{partial}");
    let error = events(&asked(), Err("no"));
    assert!(
        error.contains("<section id=\"events-error\" class=\"panel unknown\" data-state=\"unknown\"><h2>Not answered</h2><p>no</p></section></main></body></html>"),
        "{error}"
    );
}
