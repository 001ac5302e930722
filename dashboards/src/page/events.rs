//! The forensic page: the form, the answer's coverage, the summary and every event, each target
//! and trace a link to its own events.

use candor_schema::OutcomeClass;
use maud::{Markup, html};
use serde_json::Value;

use super::{document, query_value};
use crate::forensic::{EventsQuery, EventsView};

/// The search form, filled with what was asked.
fn form(asked: &EventsQuery) -> Markup {
    let fields = [
        ("target", &asked.target),
        ("class", &asked.class),
        ("service", &asked.service),
        ("tool", &asked.tool),
        ("since", &asked.since),
        ("until", &asked.until),
        ("trace", &asked.trace),
    ];
    html! {
        section {
            form method="get" action="/events" {
                @for (name, value) in fields {
                    label { (name) " " input name=(name) value=(value.as_deref().unwrap_or("")); }
                }
                button type="submit" { "Search" }
            }
        }
    }
}

/// One cell of an event: its text, a target or a trace as a link to its own events.
fn cell(column: &str, value: Option<&Value>) -> Markup {
    let text = match value.unwrap_or(&Value::Null) {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    html! {
        @match column {
            "tool_target" if !text.is_empty() => {
                a href={ "/events?target=" (query_value(&text)) "&since=24h" } { (text) }
            }
            "trace_id" if !text.is_empty() => {
                a href={ "/events?trace=" (query_value(&text)) } { (text) }
            }
            _ => (text),
        }
    }
}

/// The answer: its class and coverage, its summary, and every event.
fn answer_panel(view: &EventsView) -> Markup {
    let state = match view.class {
        OutcomeClass::Success | OutcomeClass::Empty => "live",
        OutcomeClass::Partial => "stale",
        OutcomeClass::AccessFailure => "unknown",
    };
    let class = view.class.as_str();
    html! {
        section id="panel-events" class={ "panel " (state) } data-state=(state) data-class=(class) {
            h2 { (view.rows.len()) " event(s) · " (class) }
            p class="coverage" {
                @for line in &view.coverage_lines {
                    (line) br;
                }
            }
            @for line in &view.summary {
                p { (line) }
            }
            @if view.rows.is_empty() {
                @if view.class == OutcomeClass::Empty {
                    p class="nothing" data-confirmed="true" {
                        "No failure events: every source was read over the whole window."
                    }
                } @else {
                    p class="nothing" data-confirmed="false" {
                        b { "Not a confirmed absence" } ": see the coverage above."
                    }
                }
            } @else {
                table id="events" {
                    tr {
                        @for column in &view.columns {
                            th { (column) }
                        }
                    }
                    @for row in &view.rows {
                        tr class="event" {
                            @for column in &view.columns {
                                td data-col=(column) { (cell(column, row.get(column))) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The forensic page: the form, the answer's coverage, the summary and every event.
pub fn events(asked: &EventsQuery, answer: Result<&EventsView, &str>) -> String {
    let body = html! {
        nav { a href="/" { "Overview" } " | Forensics" }
        main style="display:block" {
            (form(asked))
            @match answer {
                Err(problem) => {
                    section id="events-error" class="panel unknown" data-state="unknown" {
                        h2 { "Not answered" }
                        p { (problem) }
                    }
                }
                Ok(view) => (answer_panel(view)),
            }
        }
    };
    document("Candor · forensics", false, body)
}
