//! Server-rendered HTML: the overview and the forensic view. No script, no external resource;
//! charts are inline SVG; the page refreshes itself.
//!
//! The pages are [`maud`] templates, which escape every spliced value by default, so a target
//! named `<script>` is shown as text in element content and in attribute values alike. Nothing
//! reaches a page unescaped except markup maud itself produced and the fixed stylesheet
//! ([`PreEscaped`] is used once, for that stylesheet). Each panel carries its coverage in a
//! `data-state` attribute (`live`, `stale`, `unknown`) and in words, and a panel that is not LIVE
//! over its whole range never says "no failures". The reconciliation panel
//! (`page/reconciliation.rs`) says "all matched" only for a run that covered its whole window.
//!
//! | module | what it renders |
//! |---|---|
//! | `page.rs` | the document around a page and a panel's frame (title, badge, coverage) |
//! | `page/overview.rs` | the overview: the banner, the ranges, every panel but reconciliation |
//! | `page/chart.rs` | the inline SVG line chart of silent-failure rates |
//! | `page/reconciliation.rs` | the overview's reconciliation panel |
//! | `page/events.rs` | the forensic page |

mod chart;
mod events;
mod overview;
mod reconciliation;

use maud::{DOCTYPE, Markup, PreEscaped, html};

use crate::health::{Freshness, PanelCoverage, when};

pub use events::events;
pub use overview::overview;

/// The page a signed acknowledgement link opens: what it acknowledges, and a button that POSTs
/// the same link (`query`, the link's own query string) back. Opening it changes nothing.
pub fn acknowledge_link(alert: &crate::alerts::Alert, query: &str) -> String {
    let action = format!("/alerts/ack?{query}");
    document(
        "Candor · acknowledge",
        false,
        html! {
            h1 { "Acknowledge " (alert.name) }
            p {
                @for (i, (name, value)) in alert.labels.iter().enumerate() {
                    @if i > 0 { " " }
                    (name) "=" (value)
                }
            }
            p { (alert.summary) }
            p { (alert.description) }
            @if let Some(ack) = &alert.acknowledged {
                p { "Already acknowledged by " (ack.by) " " (crate::health::when(ack.at)) "." }
            } @else {
                form method="post" action=(action) {
                    button type="submit" { "Acknowledge" }
                }
            }
        },
    )
}

/// Encodes a query-string value.
pub fn query_value(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The `data-state` and CSS class of a freshness.
fn state_attr(freshness: Freshness) -> &'static str {
    match freshness {
        Freshness::Live => "live",
        Freshness::Stale { .. } => "stale",
        Freshness::Unknown => "unknown",
    }
}

/// The pages' only stylesheet, inlined (the pages load nothing from elsewhere).
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

/// A whole document: `title`, the stylesheet, a refresh every 15 s when `refresh`, and `body`.
fn document(title: &str, refresh: bool, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (title) }
                @if refresh {
                    meta http-equiv="refresh" content="15";
                }
                // PreEscaped: STYLE is a fixed literal of this module, and the content of a
                // <style> element is raw text in which an escape would not be decoded.
                style { (PreEscaped(STYLE)) }
            }
            body { (body) }
        }
    }
    .into_string()
}

/// A panel: its section (`data-state` and class from the coverage's freshness), its title and
/// badge, what its data covers with every gap in words, then `body`.
fn panel(id: &str, title: &str, coverage: &PanelCoverage, body: Markup) -> Markup {
    let state = state_attr(coverage.freshness);
    let wide = if id == "panel-alerts" { " wide" } else { "" };
    html! {
        section id=(id) class={ "panel" (wide) " " (state) } data-state=(state) {
            h2 { (title) " " span class={ "badge " (state) } { (coverage.freshness.label()) } }
            p class="coverage" {
                "covers "
                (coverage.from.map_or_else(|| "?".into(), when))
                " to "
                (coverage.until.map_or_else(|| "unknown".into(), when))
                @for gap in &coverage.gaps {
                    br;
                    span class="gap" { (gap) }
                }
            }
            (body)
        }
    }
}

/// What an empty panel says: a confirmed nothing only when LIVE over its whole range.
fn nothing(coverage: &PanelCoverage, confirmed: &str) -> Markup {
    html! {
        @if coverage.zero_is_confirmed() {
            p class="nothing" data-confirmed="true" { (confirmed) }
        } @else {
            p class="nothing" data-confirmed="false" {
                b { (coverage.freshness.label()) }
                ": nothing to show, and that is not a zero: the data does not cover the whole \
                 range."
            }
        }
    }
}

/// A rate as a percentage with one decimal; `n/a` without one.
fn percent(rate: Option<f64>) -> String {
    rate.map_or_else(|| "n/a".into(), |rate| format!("{:.1} %", rate * 100.0))
}

#[cfg(test)]
mod tests;
