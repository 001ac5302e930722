//! Server-rendered HTML: the overview and the forensic view. No script, no external resource;
//! charts are inline SVG; the page refreshes itself.
//!
//! Every value that came from outside (targets, tools, services, messages, labels) goes through
//! [`esc`], so a target named `<script>` is shown as text. Each panel carries its coverage in a
//! `data-state` attribute (`live`, `stale`, `unknown`) and in words, and a panel that is not LIVE
//! over its whole range never says "no failures". The reconciliation panel
//! (`page/reconciliation.rs`) says "all matched" only for a run that covered its whole window.

mod reconciliation;

use std::fmt::Write as _;

use candor_query::window::Micros;
use serde_json::Value;

use crate::alerts::humanize;
use crate::alerts::{Alert, Delivery, State};
use crate::health::{Freshness, PanelCoverage, when};
use crate::view::{Chart, GroupRow, Overview};

/// Escapes text for HTML element content and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Encodes a query-string value.
pub fn query_value(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

fn state_attr(freshness: Freshness) -> &'static str {
    match freshness {
        Freshness::Live => "live",
        Freshness::Stale { .. } => "stale",
        Freshness::Unknown => "unknown",
    }
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d232b}\
header{padding:.8em 1.2em;color:#fff}header.live{background:#1f7a3d}header.stale{background:#b45309}\
header.unknown{background:#6b7280}header h1{margin:0;font-size:1.3em}.hops span{margin-right:1.5em}\
nav{padding:.5em 1.2em;background:#e5e7eb}nav a{margin-right:1em}\
main{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:1em;padding:1em}\
section{background:#fff;border:1px solid #d1d5db;border-radius:6px;padding:.8em;overflow-x:auto}\
section.wide{grid-column:1/-1}\
section.stale,section.unknown{border:3px solid #b45309}\
h2{font-size:1.05em;margin:.2em 0 .5em}.badge{font-weight:bold;padding:.1em .5em;border-radius:4px;color:#fff}\
.badge.live{background:#1f7a3d}.badge.stale{background:#b45309}.badge.unknown{background:#6b7280}\
.coverage{font-size:.85em;color:#4b5563}.gap{color:#b45309;font-weight:bold}\
table{border-collapse:collapse;width:100%;font-size:.85em}td,th{border-bottom:1px solid #e5e7eb;padding:.2em .4em;text-align:left}\
td.n{text-align:right;font-variant-numeric:tabular-nums}.undelivered{color:#b91c1c;font-weight:bold}\
form input{margin-right:.6em}";

fn head(out: &mut String, title: &str, refresh: bool) {
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>",
        esc(title)
    );
    if refresh {
        out.push_str("<meta http-equiv=\"refresh\" content=\"15\">");
    }
    let _ = write!(out, "<style>{STYLE}</style></head><body>");
}

fn banner(out: &mut String, view: &Overview) {
    let state = state_attr(view.pipeline);
    let _ = write!(
        out,
        "<header id=\"banner\" class=\"{state}\" data-state=\"{state}\"><h1>Candor · pipeline {}</h1><div class=\"hops\">",
        view.pipeline.label()
    );
    for hop in &view.hops {
        let hop_state = state_attr(hop.freshness);
        let when = match hop.freshness {
            Freshness::Live => hop
                .age_seconds(view.now)
                .map_or_else(String::new, |age| format!(" ({age:.0} s ago)")),
            Freshness::Stale { since } => format!(" since {}", when(since)),
            Freshness::Unknown => String::new(),
        };
        let _ = write!(
            out,
            "<span class=\"hop\" data-hop=\"{}\" data-state=\"{hop_state}\" title=\"{}\">{} <b>{}</b>{}</span>",
            hop.hop.as_str(),
            esc(&hop.detail),
            hop.hop.as_str(),
            hop.freshness.label(),
            esc(&when)
        );
    }
    out.push_str("</div></header>");
}

fn nav(out: &mut String, range: Micros) {
    out.push_str("<nav>Range: ");
    for (label, micros) in [("15m", 15), ("1h", 60), ("6h", 360), ("24h", 1440)] {
        let micros = micros * 60_000_000;
        if micros == range {
            let _ = write!(out, "<b>{label}</b> ");
        } else {
            let _ = write!(out, "<a href=\"/?range={label}\">{label}</a> ");
        }
    }
    out.push_str(
        "| <a href=\"/events\">Forensics</a> | <a href=\"/api/overview\">JSON</a> | <a href=\"/metrics\">metrics</a></nav>",
    );
}

fn panel_open(out: &mut String, id: &str, title: &str, coverage: &PanelCoverage) {
    let state = state_attr(coverage.freshness);
    let wide = if id == "panel-alerts" { " wide" } else { "" };
    let _ = write!(
        out,
        "<section id=\"{id}\" class=\"panel{wide} {state}\" data-state=\"{state}\"><h2>{} <span class=\"badge {state}\">{}</span></h2>",
        esc(title),
        coverage.freshness.label()
    );
    let _ = write!(
        out,
        "<p class=\"coverage\">covers {} to {}",
        coverage.from.map_or_else(|| "?".into(), when),
        coverage.until.map_or_else(|| "unknown".into(), when)
    );
    for gap in &coverage.gaps {
        let _ = write!(out, "<br><span class=\"gap\">{}</span>", esc(gap));
    }
    out.push_str("</p>");
}

/// What an empty panel says: a confirmed nothing only when LIVE over its whole range.
fn nothing(out: &mut String, coverage: &PanelCoverage, confirmed: &str) {
    if coverage.zero_is_confirmed() {
        let _ = write!(
            out,
            "<p class=\"nothing\" data-confirmed=\"true\">{}</p>",
            esc(confirmed)
        );
    } else {
        let _ = write!(
            out,
            "<p class=\"nothing\" data-confirmed=\"false\"><b>{}</b>: nothing to show, and that is not a zero: the data does not cover the whole range.</p>",
            coverage.freshness.label()
        );
    }
}

fn percent(rate: Option<f64>) -> String {
    rate.map_or_else(|| "n/a".into(), |rate| format!("{:.1} %", rate * 100.0))
}

fn events_link(target: &str, range: Micros) -> String {
    format!(
        "/events?target={}&since={}",
        query_value(target),
        humanize(range)
    )
}

fn group_table(out: &mut String, rows: &[GroupRow], what: &str, range: Micros, link: bool) {
    let _ = write!(
        out,
        "<table class=\"groups\"><tr><th>{what}</th><th>calls</th><th>success</th><th>empty</th><th>partial</th><th>access_failure</th><th>silent-failure rate</th><th>terminal events</th></tr>"
    );
    for row in rows.iter().take(crate::view::TOP_ROWS) {
        let name = if link {
            format!(
                "<a href=\"{}\">{}</a>",
                esc(&events_link(&row.group, range)),
                esc(&row.group)
            )
        } else {
            esc(&row.group)
        };
        let c = &row.counts;
        let _ = write!(
            out,
            "<tr data-group=\"{}\"><td>{name}</td><td class=\"n\" data-col=\"calls\">{}</td><td class=\"n\" data-col=\"success\">{}</td><td class=\"n\" data-col=\"empty\">{}</td><td class=\"n\" data-col=\"partial\">{}</td><td class=\"n\" data-col=\"access_failure\">{}</td><td class=\"n\" data-col=\"rate\">{}</td><td class=\"n\" data-col=\"terminal\">{}</td></tr>",
            esc(&row.group),
            c.calls(),
            c.success,
            c.empty,
            c.partial,
            c.access_failure,
            percent(row.silent_failure_rate),
            row.terminal_events
        );
    }
    out.push_str("</table>");
}

const PALETTE: [&str; 8] = [
    "#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4d7c0f", "#be185d",
];

/// A line chart of silent-failure rates, 0–100 %, as inline SVG.
fn chart_svg(out: &mut String, chart: &Chart) {
    const W: f64 = 540.0;
    const H: f64 = 160.0;
    let n = chart.buckets.len().max(2) as f64;
    let x = |i: usize| 30.0 + (W - 40.0) * (i as f64) / (n - 1.0);
    let y = |rate: f64| 10.0 + (H - 30.0) * (1.0 - rate.clamp(0.0, 1.0));
    let _ = write!(
        out,
        "<svg class=\"chart\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"silent-failure rate over time\">"
    );
    for (tick, label) in [(0.0, "0%"), (0.5, "50%"), (1.0, "100%")] {
        let _ = write!(
            out,
            "<line x1=\"30\" x2=\"{x1}\" y1=\"{y0:.1}\" y2=\"{y0:.1}\" stroke=\"#e5e7eb\"/><text x=\"0\" y=\"{ty:.1}\" font-size=\"10\">{label}</text>",
            x1 = W - 10.0,
            y0 = y(tick),
            ty = y(tick) + 3.0
        );
    }
    for (index, (group, values)) in chart.series.iter().enumerate() {
        let color = PALETTE[index % PALETTE.len()];
        let mut path = String::new();
        let mut pen_down = false;
        for (i, value) in values.iter().enumerate() {
            match value {
                Some(rate) => {
                    let _ = write!(
                        path,
                        "{}{:.1},{:.1} ",
                        if pen_down { "L" } else { "M" },
                        x(i),
                        y(*rate)
                    );
                    pen_down = true;
                }
                // A bucket without calls is a gap in the line, not a zero.
                None => pen_down = false,
            }
        }
        let _ = write!(
            out,
            "<path d=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\"><title>{}</title></path>",
            path.trim_end(),
            esc(group)
        );
        // A lone bucket (no neighbour with calls) draws no line: a dot shows it.
        for (i, value) in values.iter().enumerate() {
            let neighbour =
                |j: Option<usize>| j.and_then(|j| values.get(j)).is_some_and(Option::is_some);
            if neighbour(i.checked_sub(1)) || neighbour(i.checked_add(1)) {
                continue;
            }
            if let Some(rate) = value {
                let _ = write!(
                    out,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{color}\"><title>{}: {:.1} %</title></circle>",
                    x(i),
                    y(*rate),
                    esc(group),
                    rate * 100.0
                );
            }
        }
    }
    out.push_str("</svg><p class=\"legend\">");
    for (index, (group, _)) in chart.series.iter().enumerate() {
        let _ = write!(
            out,
            "<span style=\"color:{}\">■</span> {} ",
            PALETTE[index % PALETTE.len()],
            esc(group)
        );
    }
    out.push_str("</p>");
}

fn alerts_table(out: &mut String, alerts: &[Alert], has_receivers: bool) {
    out.push_str("<table id=\"alerts\"><tr><th>alert</th><th>labels</th><th>state</th><th>since</th><th>notification</th><th>what</th></tr>");
    for alert in alerts {
        let labels: Vec<String> = alert
            .labels
            .iter()
            .map(|(name, value)| format!("{}={}", esc(name), esc(value)))
            .collect();
        let state = match alert.state {
            State::Pending => "pending",
            State::Firing => "firing",
            State::Resolved => "resolved",
        };
        let since = match alert.state {
            State::Resolved => alert.resolved_at,
            State::Firing => alert.fired_at,
            State::Pending => Some(alert.active_since),
        };
        let delivery = match &alert.delivery {
            Delivery::NotSent { reason } => format!("not sent: {}", esc(reason)),
            Delivery::Sending => "sending…".into(),
            Delivery::Delivered { at, sent } => {
                let sent = match sent {
                    State::Pending => "pending",
                    State::Firing => "firing",
                    State::Resolved => "resolved",
                };
                format!("delivered ({sent}) at {}", when(*at))
            }
            Delivery::Undelivered { at, reason, .. } => format!(
                "<span class=\"undelivered\">UNDELIVERED</span> at {}: {}",
                when(*at),
                esc(reason)
            ),
        };
        let delivery_attr = match &alert.delivery {
            Delivery::NotSent { .. } => "not_sent",
            Delivery::Sending => "sending",
            Delivery::Delivered { .. } => "delivered",
            Delivery::Undelivered { .. } => "undelivered",
        };
        let _ = write!(
            out,
            "<tr class=\"alert\" data-alert=\"{}\" data-state=\"{state}\" data-delivery=\"{delivery_attr}\"><td>{}</td><td>{}</td><td>{state}</td><td>{}</td><td>{delivery}</td><td>{}</td></tr>",
            esc(&alert.name),
            esc(&alert.name),
            labels.join(" "),
            since.map_or_else(String::new, when),
            esc(&alert.description)
        );
    }
    out.push_str("</table>");
    if !has_receivers {
        out.push_str("<p class=\"gap\">No webhook is configured: alerts are shown here only and reach nobody.</p>");
    }
}

fn counts_list(out: &mut String, id: &str, title: &str, counts: &[(String, u64)]) {
    let _ = write!(out, "<h3>{}</h3><table id=\"{id}\">", esc(title));
    for (name, count) in counts.iter().take(crate::view::TOP_ROWS) {
        let _ = write!(
            out,
            "<tr data-key=\"{}\"><td>{}</td><td class=\"n\">{count}</td></tr>",
            esc(name),
            esc(name)
        );
    }
    out.push_str("</table>");
}

fn sorted(map: &std::collections::BTreeMap<String, u64>) -> Vec<(String, u64)> {
    let mut all: Vec<(String, u64)> = map.iter().map(|(k, v)| (k.clone(), *v)).collect();
    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    all
}

/// The overview page.
pub fn overview(view: &Overview) -> String {
    let mut out = String::with_capacity(64 << 10);
    head(&mut out, "Candor", true);
    banner(&mut out, view);
    nav(&mut out, view.range_micros);
    out.push_str("<main>");
    let range = view.range_micros;
    let coverage = &view.coverage;

    panel_open(
        &mut out,
        "panel-rates-target",
        &format!("Silent-failure rate by target, last {}", humanize(range)),
        coverage,
    );
    if view.by_target.is_empty() {
        nothing(&mut out, coverage, "No calls in this range.");
    } else {
        chart_svg(&mut out, &view.chart_target);
        group_table(&mut out, &view.by_target, "target", range, true);
    }
    out.push_str("</section>");

    panel_open(
        &mut out,
        "panel-rates-tool",
        &format!("Silent-failure rate by tool, last {}", humanize(range)),
        coverage,
    );
    if view.by_tool.is_empty() {
        nothing(&mut out, coverage, "No calls in this range.");
    } else {
        chart_svg(&mut out, &view.chart_tool);
        group_table(&mut out, &view.by_tool, "tool", range, false);
    }
    out.push_str("</section>");

    panel_open(
        &mut out,
        "panel-spikes",
        &format!(
            "AccessFailure spikes: last {} against the {} before",
            humanize(view.spike_window_micros),
            humanize(view.spike_baseline_micros)
        ),
        coverage,
    );
    if view.spikes.is_empty() {
        nothing(&mut out, coverage, "No spikes.");
    } else {
        out.push_str("<table id=\"spikes\"><tr><th>target</th><th>AccessFailures</th><th>calls</th><th>rate</th><th>baseline rate</th><th>factor</th></tr>");
        for spike in &view.spikes {
            let _ = write!(
                out,
                "<tr data-target=\"{}\"><td><a href=\"{}\">{}</a></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                esc(&spike.target),
                esc(&events_link(&spike.target, view.spike_window_micros)),
                esc(&spike.target),
                spike.window_failures,
                spike.window_calls,
                percent(Some(spike.window_rate)),
                percent(spike.baseline_rate),
                spike
                    .factor
                    .map_or_else(|| "new".into(), |f| format!("{f:.1}x"))
            );
        }
        out.push_str("</table>");
    }
    out.push_str("</section>");

    let alert_coverage = PanelCoverage {
        freshness: view.pipeline,
        ..coverage.clone()
    };
    panel_open(&mut out, "panel-alerts", "Alerts", &alert_coverage);
    alerts_table(&mut out, &view.alerts, view.has_receivers);
    out.push_str("</section>");

    reconciliation::panel(&mut out, &view.reconcile);

    panel_open(
        &mut out,
        "panel-failures",
        &format!("Failures, last {}", humanize(range)),
        coverage,
    );
    if view.failures.by_kind.is_empty() {
        nothing(&mut out, coverage, "No failure events in this range.");
    } else {
        counts_list(
            &mut out,
            "top-targets",
            "Top failing targets (calls that ended failed)",
            &sorted(&view.failures.by_target),
        );
        counts_list(
            &mut out,
            "failure-kinds",
            "Failure kinds (every failed attempt)",
            &sorted(&view.failures.by_kind),
        );
        counts_list(
            &mut out,
            "retry-actions",
            "Retry actions (exhausted: ran out of retries; permanent: not retryable)",
            &sorted(&view.failures.by_action),
        );
    }
    out.push_str("</section>");

    panel_open(&mut out, "panel-instances", "Adapter instances", coverage);
    if view.instances.is_empty() {
        nothing(
            &mut out,
            coverage,
            "No adapter instance has reported counters.",
        );
    } else {
        out.push_str("<table id=\"instances\"><tr><th>service</th><th>instance</th><th>last seen</th><th>export interval</th><th>state</th></tr>");
        for row in &view.instances {
            let _ = write!(
                out,
                "<tr data-instance=\"{}\" data-silent=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&row.seen.instance),
                row.silent,
                esc(&row.seen.service),
                esc(&row.seen.instance),
                when(row.seen.last),
                row.seen
                    .interval_micros
                    .map_or_else(|| "unknown".into(), humanize),
                if row.silent {
                    "<b>SILENT</b>"
                } else {
                    "reporting"
                }
            );
        }
        out.push_str("</table>");
    }
    let _ = write!(
        out,
        "<p class=\"coverage\">stream: {} records applied, {} duplicates removed, {} outside the history, {} rejected</p>",
        view.applied.records,
        view.applied.duplicates,
        view.applied.before_history + view.applied.future,
        view.applied.rejected
    );
    out.push_str("</section></main></body></html>");
    out
}

/// What the forensic form asked.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct EventsQuery {
    /// `tool_target`.
    pub target: Option<String>,
    /// `outcome_class`.
    pub class: Option<String>,
    /// `service_name`.
    pub service: Option<String>,
    /// `tool_name`.
    pub tool: Option<String>,
    /// Window start: relative (`1h`) or RFC 3339.
    pub since: Option<String>,
    /// Window end.
    pub until: Option<String>,
    /// A trace id.
    pub trace: Option<String>,
}

/// The forensic page: the form, the answer's coverage, the summary and every event.
pub fn events(asked: &EventsQuery, answer: Result<&crate::forensic::EventsView, &str>) -> String {
    let mut out = String::with_capacity(64 << 10);
    head(&mut out, "Candor · forensics", false);
    out.push_str("<nav><a href=\"/\">Overview</a> | Forensics</nav><main style=\"display:block\"><section><form method=\"get\" action=\"/events\">");
    for (name, value) in [
        ("target", &asked.target),
        ("class", &asked.class),
        ("service", &asked.service),
        ("tool", &asked.tool),
        ("since", &asked.since),
        ("until", &asked.until),
        ("trace", &asked.trace),
    ] {
        let _ = write!(
            out,
            "<label>{name} <input name=\"{name}\" value=\"{}\"></label>",
            esc(value.as_deref().unwrap_or(""))
        );
    }
    out.push_str("<button type=\"submit\">Search</button></form></section>");
    match answer {
        Err(problem) => {
            let _ = write!(
                out,
                "<section id=\"events-error\" class=\"panel unknown\" data-state=\"unknown\"><h2>Not answered</h2><p>{}</p></section>",
                esc(problem)
            );
        }
        Ok(view) => {
            let state = match view.class {
                candor_schema::OutcomeClass::Success | candor_schema::OutcomeClass::Empty => "live",
                candor_schema::OutcomeClass::Partial => "stale",
                candor_schema::OutcomeClass::AccessFailure => "unknown",
            };
            let _ = write!(
                out,
                "<section id=\"panel-events\" class=\"panel {state}\" data-state=\"{state}\" data-class=\"{}\"><h2>{} event(s) · {}</h2><p class=\"coverage\">",
                view.class.as_str(),
                view.rows.len(),
                view.class.as_str()
            );
            for line in &view.coverage_lines {
                let _ = write!(out, "{}<br>", esc(line));
            }
            out.push_str("</p>");
            for line in &view.summary {
                let _ = write!(out, "<p>{}</p>", esc(line));
            }
            if view.rows.is_empty() {
                if view.class == candor_schema::OutcomeClass::Empty {
                    out.push_str("<p class=\"nothing\" data-confirmed=\"true\">No failure events: every source was read over the whole window.</p>");
                } else {
                    out.push_str("<p class=\"nothing\" data-confirmed=\"false\"><b>Not a confirmed absence</b>: see the coverage above.</p>");
                }
            } else {
                out.push_str("<table id=\"events\"><tr>");
                for column in &view.columns {
                    let _ = write!(out, "<th>{}</th>", esc(column));
                }
                out.push_str("</tr>");
                for row in &view.rows {
                    out.push_str("<tr class=\"event\">");
                    for column in &view.columns {
                        let value = row.get(column).unwrap_or(&Value::Null);
                        let text = match value {
                            Value::Null => String::new(),
                            Value::String(text) => text.clone(),
                            other => other.to_string(),
                        };
                        let cell = match column.as_str() {
                            "tool_target" if !text.is_empty() => format!(
                                "<a href=\"/events?target={}&amp;since=24h\">{}</a>",
                                esc(&query_value(&text)),
                                esc(&text)
                            ),
                            "trace_id" if !text.is_empty() => format!(
                                "<a href=\"/events?trace={}\">{}</a>",
                                esc(&query_value(&text)),
                                esc(&text)
                            ),
                            _ => esc(&text),
                        };
                        let _ = write!(out, "<td data-col=\"{}\">{cell}</td>", esc(column));
                    }
                    out.push_str("</tr>");
                }
                out.push_str("</table>");
            }
            out.push_str("</section>");
        }
    }
    out.push_str("</main></body></html>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_values_is_text() {
        assert_eq!(
            esc("<script>alert('x')</script>&\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"
        );
        assert_eq!(query_value("a b&c=/"), "a+b%26c%3D%2F");
    }
}
