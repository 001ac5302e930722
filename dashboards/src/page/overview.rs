//! The overview page: the banner with every hop, the range chooser, and the panels (rates by
//! target and by tool, spikes, alerts, reconciliation, open operations, failures, adapter
//! instances).

use std::collections::BTreeMap;

use candor_query::commands::OpenStatus;
use candor_query::rates::Spike;
use candor_query::window::Micros;
use maud::{Markup, html};

use super::{chart::chart_svg, document, nothing, panel, percent, query_value, state_attr};
use crate::alerts::{Alert, Delivery, State, humanize};
use crate::health::{Freshness, PanelCoverage, when};
use crate::instances::InstanceRow;
use crate::operations::TOP_ROWS;
use crate::view::{GroupRow, Overview};

/// The banner: the pipeline's state, and each hop's with how old its evidence is.
fn banner(view: &Overview) -> Markup {
    let state = state_attr(view.pipeline);
    html! {
        header id="banner" class=(state) data-state=(state) {
            h1 { "Candor · pipeline " (view.pipeline.label()) }
            div class="hops" {
                @for hop in &view.hops {
                    @let age = match hop.freshness {
                        Freshness::Live => hop
                            .age_seconds(view.now)
                            .map_or_else(String::new, |age| format!(" ({age:.0} s ago)")),
                        Freshness::Stale { since } => format!(" since {}", when(since)),
                        Freshness::Unknown => String::new(),
                    };
                    span class="hop" data-hop=(hop.hop.as_str())
                        data-state=(state_attr(hop.freshness)) title=(hop.detail) {
                        (hop.hop.as_str()) " " b { (hop.freshness.label()) } (age)
                    }
                }
            }
        }
    }
}

/// The ranges offered, the current one in bold, and the other pages.
fn nav(range: Micros) -> Markup {
    html! {
        nav {
            "Range: "
            @for (label, minutes) in [("15m", 15), ("1h", 60), ("6h", 360), ("24h", 1440)] {
                @if minutes * 60_000_000 == range {
                    b { (label) }
                } @else {
                    a href={ "/?range=" (label) } { (label) }
                }
                " "
            }
            "| " a href="/events" { "Forensics" }
            " | " a href="/api/overview" { "JSON" }
            " | " a href="/metrics" { "metrics" }
        }
    }
}

/// What a rate marked `≥` means.
const LOWER_BOUND_TITLE: &str = "a lower bound: the group counts calls derived from standard \
                                 spans (GenAI, MCP, HTTP client), and a call without error may \
                                 still have been partial";

/// The forensic page's address for `target` over the last `range`. A derived group's name
/// ([`crate::model::GroupBy::of`]) links to its target's events.
fn events_link(target: &str, range: Micros) -> String {
    format!(
        "/events?target={}&since={}",
        query_value(crate::model::group_value(target)),
        humanize(range)
    )
}

/// The top groups with their calls by class, silent-failure rate and terminal events; each
/// group a link to its events when `link`.
fn group_table(rows: &[GroupRow], what: &str, range: Micros, link: bool) -> Markup {
    html! {
        table class="groups" {
            tr {
                th { (what) } th { "calls" } th { "success" } th { "empty" } th { "partial" }
                th { "access_failure" } th { "unverified" } th { "cancelled" }
                th { "silent-failure rate" } th { "terminal events" }
            }
            @for row in rows.iter().take(TOP_ROWS) {
                @let c = &row.counts;
                tr data-group=(row.group) {
                    td {
                        @if link {
                            a href=(events_link(&row.group, range)) { (row.group) }
                        } @else {
                            (row.group)
                        }
                    }
                    td class="n" data-col="calls" { (c.calls()) }
                    td class="n" data-col="success" { (c.success) }
                    td class="n" data-col="empty" { (c.empty) }
                    td class="n" data-col="partial" { (c.partial) }
                    td class="n" data-col="access_failure" { (c.access_failure) }
                    td class="n" data-col="unverified" { (c.unverified) }
                    td class="n" data-col="cancelled" { (c.cancelled) }
                    td class="n" data-col="rate" {
                        @if row.lower_bound {
                            span title=(LOWER_BOUND_TITLE) { "≥ " }
                        }
                        (percent(row.silent_failure_rate))
                    }
                    td class="n" data-col="terminal" { (row.terminal_events) }
                }
            }
        }
    }
}

/// A rates panel: its chart and table, or what an empty one means.
fn rates(view: &Overview, by: &str, rows: &[GroupRow], chart: &crate::view::Chart) -> Markup {
    let coverage = &view.coverage;
    let id = if by == "target" {
        "panel-rates-target"
    } else {
        "panel-rates-tool"
    };
    let title = format!(
        "Silent-failure rate by {by}, last {}",
        humanize(view.range_micros)
    );
    let body = html! {
        @if rows.is_empty() {
            (nothing(coverage, "No calls in this range."))
        } @else {
            (chart_svg(chart))
            (group_table(rows, by, view.range_micros, by == "target"))
        }
    };
    panel(id, &title, coverage, body)
}

/// The spikes table.
fn spikes_table(spikes: &[Spike], window: Micros) -> Markup {
    html! {
        table id="spikes" {
            tr {
                th { "target" } th { "AccessFailures" } th { "calls" } th { "rate" }
                th { "baseline rate" } th { "factor" }
            }
            @for spike in spikes {
                tr data-target=(spike.target) {
                    td { a href=(events_link(&spike.target, window)) { (spike.target) } }
                    td class="n" { (spike.window_failures) }
                    td class="n" { (spike.window_calls) }
                    td class="n" { (percent(Some(spike.window_rate))) }
                    td class="n" { (percent(spike.baseline_rate)) }
                    td class="n" {
                        (spike.factor.map_or_else(|| "new".into(), |f| format!("{f:.1}x")))
                    }
                }
            }
        }
    }
}

fn state_name(state: State) -> &'static str {
    match state {
        State::Pending => "pending",
        State::Firing => "firing",
        State::Resolved => "resolved",
    }
}

/// What became of an alert's newest notification, in words.
fn delivery(delivery: &Delivery) -> Markup {
    html! {
        @match delivery {
            Delivery::NotSent { reason } => { "not sent: " (reason) }
            Delivery::Sending => "sending…",
            Delivery::Delivered { at, sent } => {
                "delivered (" (state_name(*sent)) ") at " (when(*at))
            }
            Delivery::Undelivered { at, reason, .. } => {
                span class="undelivered" { "UNDELIVERED" }
                " at " (when(*at)) ": " (reason)
            }
        }
    }
}

/// Every alert instance: its labels, state, since when, and its notification.
fn alerts_table(alerts: &[Alert], has_receivers: bool) -> Markup {
    html! {
        table id="alerts" {
            tr {
                th { "alert" } th { "labels" } th { "state" } th { "since" }
                th { "notification" } th { "what" } th { "taken on" }
            }
            @for alert in alerts {
                @let state = state_name(alert.state);
                @let since = match alert.state {
                    State::Resolved => alert.resolved_at,
                    State::Firing => alert.fired_at,
                    State::Pending => Some(alert.active_since),
                };
                @let delivery_attr = match &alert.delivery {
                    Delivery::NotSent { .. } => "not_sent",
                    Delivery::Sending => "sending",
                    Delivery::Delivered { .. } => "delivered",
                    Delivery::Undelivered { .. } => "undelivered",
                };
                tr class="alert" data-alert=(alert.name) data-state=(state)
                    data-delivery=(delivery_attr) {
                    td { (alert.name) }
                    td {
                        @for (i, (name, value)) in alert.labels.iter().enumerate() {
                            @if i > 0 { " " }
                            (name) "=" (value)
                        }
                    }
                    td { (state) }
                    td { (since.map_or_else(String::new, when)) }
                    td {
                        (delivery(&alert.delivery))
                        @if let Some(escalated) = &alert.escalated {
                            br;
                            span class="escalated" {
                                "escalated " (when(escalated.at)) ": "
                                (delivery(&escalated.delivery))
                            }
                        }
                    }
                    td { (alert.description) }
                    td class="ack" {
                        @if let Some(ack) = &alert.acknowledged {
                            "acknowledged by " (ack.by) " " (when(ack.at))
                        } @else if alert.state == State::Firing {
                            form method="post" action="/alerts/ack" {
                                input type="hidden" name="name" value=(alert.name);
                                input type="hidden" name="labels"
                                    value=(serde_json::to_string(&alert.labels).unwrap_or_default());
                                button type="submit" { "Acknowledge" }
                            }
                        } @else {
                            "not acknowledged"
                        }
                    }
                }
            }
        }
        @if !has_receivers {
            p class="gap" {
                "No webhook is configured: alerts are shown here only and reach nobody."
            }
        }
    }
}

/// A heading and the top names with their counts, most first.
fn counts_list(id: &str, title: &str, counts: &BTreeMap<String, u64>) -> Markup {
    let mut sorted: Vec<(&String, u64)> = counts.iter().map(|(k, v)| (k, *v)).collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    html! {
        h3 { (title) }
        table id=(id) {
            @for (name, count) in sorted.into_iter().take(TOP_ROWS) {
                tr data-key=(name) { td { (name) } td class="n" { (count) } }
            }
        }
    }
}

/// The adapter instances, and what the stream applied.
fn instances(view: &Overview) -> Markup {
    let coverage = &view.coverage;
    let applied = &view.applied;
    let body = html! {
        @if view.instances.is_empty() {
            (nothing(coverage, "No adapter instance has reported counters."))
        } @else {
            (instances_table(&view.instances))
        }
        p class="coverage" {
            "stream: " (applied.records) " records applied, " (applied.duplicates)
            " duplicates removed, " (applied.before_history + applied.future)
            " outside the history, " (applied.rejected) " rejected"
        }
    };
    panel("panel-instances", "Adapter instances", coverage, body)
}

fn instances_table(rows: &[InstanceRow]) -> Markup {
    html! {
        table id="instances" {
            tr {
                th { "service" } th { "instance" } th { "last seen" } th { "export interval" }
                th { "state" }
            }
            @for row in rows {
                @let silent = if row.silent { "true" } else { "false" };
                tr data-instance=(row.seen.instance) data-silent=(silent) {
                    td { (row.seen.service) }
                    td { (row.seen.instance) }
                    td { (when(row.seen.last)) }
                    td { (row.seen.interval_micros.map_or_else(|| "unknown".into(), humanize)) }
                    td {
                        @if row.silent {
                            b { "SILENT" }
                        } @else if row.seen.stopped {
                            "stopped"
                        } @else if row.seen.replaced {
                            "replaced"
                        } @else {
                            "reporting"
                        }
                    }
                }
            }
        }
    }
}

/// The asynchronous operations: the figures, and the open ones, stuck first.
fn operations(view: &Overview) -> Markup {
    let coverage = &view.operations_coverage;
    let panel_data = &view.operations;
    let totals = &panel_data.totals;
    let after = humanize(panel_data.stuck_after_micros);
    let body = html! {
        p id="operations-summary" {
            "open: " b { (totals.pending) } " pending, " b { (totals.stuck) } " stuck (open for "
            (after) " or longer), " b { (totals.unknown) } " unknown (their adapter instance went             silent, so their end would not have been seen); ended: " (totals.completed)
            " completed, " (totals.partial) " partial, " (totals.cancelled) " cancelled, "
            (totals.failed) " failed; never completed: " (percent(panel_data.never_completed_rate))
            " of " (totals.seen)
        }
        @if panel_data.open.is_empty() {
            (nothing(coverage, "No operation is open."))
        } @else {
            table id="operations" {
                tr {
                    th { "status" } th { "target" } th { "tool" } th { "service" }
                    th { "operation" } th { "state" } th { "accepted" } th { "open for" }
                    th { "last seen" }
                }
                @for row in &panel_data.open {
                    tr data-operation=(row.operation_id) data-status=(row.status.as_str()) {
                        td {
                            @match row.status {
                                OpenStatus::Stuck => b { "STUCK" },
                                OpenStatus::Unknown => "unknown",
                                OpenStatus::Pending => "pending",
                            }
                        }
                        td { (row.target) }
                        td { (row.tool) }
                        td { (row.service) }
                        td { (row.operation_id) }
                        td { (row.state) }
                        td { (when(row.first_seen)) }
                        td { (humanize(view.now.saturating_sub(row.first_seen))) }
                        td { (when(row.last_seen)) }
                    }
                }
            }
            @if totals.open() > u64::try_from(panel_data.open.len()).unwrap_or(u64::MAX) {
                p class="coverage" {
                    "showing " (panel_data.open.len()) " of " (totals.open())
                    " open operations; `candor operations` lists every one"
                }
            }
        }
        @if panel_data.evicted > 0 {
            p class="gap" {
                (panel_data.evicted) " operations were let go to stay within the dashboards'                 limit and are not counted; `candor operations` reads them from the tables"
            }
        }
    };
    panel(
        "panel-operations",
        "Operations accepted and not ended",
        coverage,
        body,
    )
}

/// The failure events of the range: top targets, kinds and retry actions.
fn failures(view: &Overview) -> Markup {
    let coverage = &view.coverage;
    let failures = &view.failures;
    let body = html! {
        @if failures.by_kind.is_empty() {
            (nothing(coverage, "No failure events in this range."))
        } @else {
            (counts_list(
                "top-targets",
                "Top failing targets (calls that ended failed)",
                &failures.by_target,
            ))
            (counts_list(
                "failure-kinds",
                "Failure kinds (every failed attempt)",
                &failures.by_kind,
            ))
            (counts_list(
                "retry-actions",
                "Retry actions (exhausted: ran out of retries; permanent: not retryable)",
                &failures.by_action,
            ))
        }
    };
    let title = format!("Failures, last {}", humanize(view.range_micros));
    panel("panel-failures", &title, coverage, body)
}

/// The overview page.
pub fn overview(view: &Overview) -> String {
    let coverage = &view.coverage;
    let spikes_title = format!(
        "AccessFailure spikes: last {} against the {} before",
        humanize(view.spike_window_micros),
        humanize(view.spike_baseline_micros)
    );
    let spikes = html! {
        @if view.spikes.is_empty() {
            (nothing(coverage, "No spikes."))
        } @else {
            (spikes_table(&view.spikes, view.spike_window_micros))
        }
    };
    // The alerts depend on every hop, not only on the stream's.
    let alert_coverage = PanelCoverage {
        freshness: view.pipeline,
        ..coverage.clone()
    };
    let body = html! {
        (banner(view))
        (nav(view.range_micros))
        main {
            (rates(view, "target", &view.by_target, &view.chart_target))
            (rates(view, "tool", &view.by_tool, &view.chart_tool))
            (panel("panel-spikes", &spikes_title, coverage, spikes))
            (panel(
                "panel-alerts",
                "Alerts",
                &alert_coverage,
                alerts_table(&view.alerts, view.has_receivers),
            ))
            (super::reconciliation::panel(&view.reconcile))
            (operations(view))
            (failures(view))
            (instances(view))
        }
    };
    document("Candor", true, body)
}
