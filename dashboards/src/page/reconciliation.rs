//! The overview's reconciliation panel: the newest run of the counter against the stored events,
//! what it covered, its figures and every mismatch row it kept.
//!
//! The panel says "all matched" only for a run that covered its whole window (class success or
//! empty) and found no gap. A partial run is shown as covering only part of its window, with its
//! gaps; a run that could not read shows no figures at all; before the first run the panel says
//! it has not run.

use candor_query::reconcile::Totals;
use candor_schema::OutcomeClass;
use maud::{Markup, html};
use serde_json::Value;

use crate::health::when;
use crate::reconcile::{Covered, ReconcileState, Run, disagreements};

/// The panel's `data-state` and badge.
fn badge_of(run: Option<&Run>) -> (&'static str, &'static str) {
    match run.map(|run| run.class) {
        None => ("unknown", "NOT RUN"),
        Some(OutcomeClass::Success | OutcomeClass::Empty) => ("live", "COVERED"),
        Some(OutcomeClass::Partial) => ("stale", "PARTIAL"),
        Some(OutcomeClass::AccessFailure) => ("unknown", "FAILED"),
    }
}

fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    }
}

fn totals_table(totals: &Totals) -> Markup {
    html! {
        table id="reconcile-totals" {
            tr {
                th { "windows matched" } th { "windows mismatched" } th { "events missing" }
                th { "events extra" } th { "events without counter" } th { "series" }
            }
            tr {
                td class="n" data-col="matched" { (totals.matched) }
                td class="n" data-col="mismatched" { (totals.mismatched) }
                td class="n" data-col="missing" { (totals.missing) }
                td class="n" data-col="extra" { (totals.extra) }
                td class="n" data-col="without_counter" { (totals.events_without_counter) }
                td class="n" data-col="series" { (totals.series) }
            }
        }
    }
}

fn mismatch_table(run: &Run) -> Markup {
    html! {
        @if !run.mismatches.is_empty() {
            table id="reconcile-mismatches" {
                tr {
                    @for column in &run.columns {
                        th { (column) }
                    }
                }
                @for row in &run.mismatches {
                    tr class="mismatch" {
                        @for column in &run.columns {
                            td data-col=(column) { (cell(row.get(column))) }
                        }
                    }
                }
            }
            @if run.mismatch_rows > run.mismatches.len() as u64 {
                p class="coverage" {
                    "showing the first " (run.mismatches.len()) " of " (run.mismatch_rows)
                    " mismatch rows"
                }
            }
        }
    }
}

fn newest_covered(covered: &Covered) -> Markup {
    let totals = &covered.totals;
    html! {
        p class="coverage" id="reconcile-newest-covered" {
            "The newest run that covered its whole window ran at " (when(covered.ran_at))
            " over " (when(covered.window.since)) " to " (when(covered.window.until)) ": "
            (totals.matched) " window(s) matched, " (totals.mismatched) " mismatched; "
            (totals.missing) " event(s) missing, " (totals.extra) " extra, "
            (totals.events_without_counter) " without counter."
        }
    }
}

/// What the figures of a run that covered its whole window say: events lost, nothing to
/// reconcile, or every window matched.
fn verdict(totals: &Totals) -> Markup {
    let lost = disagreements(totals);
    html! {
        @if lost > 0 {
            p class="gap" data-lost=(lost) {
                "Events lost between adapter and table: " (totals.missing) " missing, "
                (totals.extra) " extra, " (totals.events_without_counter) " without counter."
            }
        } @else if totals.windows == 0 {
            p class="nothing" data-confirmed="true" {
                "No failed call was counted in this window, and no terminal event is stored \
                 without a counted call: nothing to reconcile."
            }
        } @else {
            p class="nothing" data-confirmed="true" {
                "All " (totals.windows) " windows matched: every counted failed call has its \
                 terminal event stored, and no event is extra."
            }
        }
    }
}

/// What an uncovered run leaves unknown, and its gaps.
fn uncovered(run: &Run) -> Markup {
    let what = if run.totals.is_some() {
        "This result covers only part of the window: its figures speak of the part read, no \
         window is confirmed to match, and a gap may hide in what was not read."
    } else {
        "This run could not read: it covers none of its window, and nothing is known about \
         events lost in it."
    };
    html! {
        p class="gap" data-covered="false" { (what) }
        ul class="gaps" {
            @for gap in &run.gaps {
                li class="gap" { (gap) }
            }
        }
    }
}

/// The newest run: when and over what it ran, its coverage, figures, verdict, summary, notes
/// and mismatch rows; after an uncovered run, the newest run that covered its window.
fn run_body(reconcile: &ReconcileState, run: &Run) -> Markup {
    html! {
        p class="coverage" {
            "last run " (when(run.ran_at)) " over " (when(run.window.since)) " to "
            (when(run.window.until)) " (" (run.class.as_str()) "); runs: " (reconcile.runs_ok)
            " answered, " (reconcile.runs_failed) " failed"
        }
        @if !run.covered {
            (uncovered(run))
        }
        @if let Some(totals) = &run.totals {
            (totals_table(totals))
            // Only a run that covered its whole window is a verdict.
            @if run.covered {
                (verdict(totals))
            }
        }
        @for line in &run.summary {
            p { (line) }
        }
        @if !run.notes.is_empty() {
            p class="coverage" {
                @for note in &run.notes {
                    (note) br;
                }
            }
        }
        (mismatch_table(run))
        @if !run.covered {
            @if let Some(covered) = &reconcile.newest_covered {
                (newest_covered(covered))
            }
        }
    }
}

/// Renders the panel.
pub(super) fn panel(reconcile: &ReconcileState) -> Markup {
    let latest = reconcile.latest.as_ref();
    let (state, badge) = badge_of(latest);
    let class = latest.map_or("not_run", |run| run.class.as_str());
    html! {
        section id="panel-reconcile" class={ "panel wide " (state) } data-state=(state)
            data-class=(class) {
            h2 {
                "Reconciliation: failed calls counted against events stored "
                span class={ "badge " (state) } { (badge) }
            }
            @if let Some(run) = latest {
                (run_body(reconcile, run))
            } @else {
                p class="nothing" data-confirmed="false" {
                    "Reconciliation has not run yet: nothing is known yet about events lost \
                     between the adapter and the table."
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MINUTE;
    use crate::reconcile::tests::{T0, answer, coverage, lost, window};

    fn render(state: &ReconcileState) -> String {
        panel(state).into_string()
    }

    #[test]
    fn before_the_first_run_the_panel_says_it_has_not_run() {
        let html = render(&ReconcileState::default());
        assert!(html.contains("data-class=\"not_run\""), "{html}");
        assert!(html.contains("has not run yet"), "{html}");
        assert!(html.contains("data-confirmed=\"false\""), "{html}");
        assert!(!html.contains("matched"), "{html}");
    }

    #[test]
    fn a_partial_run_covers_only_part_and_never_says_all_matched() {
        let mut state = ReconcileState::default();
        state.record(Run::new(
            T0,
            window(),
            coverage(T0 - 30 * MINUTE),
            Ok(answer(lost(0), 0)),
            50,
        ));
        let html = render(&state);
        assert!(html.contains("data-state=\"stale\""), "{html}");
        assert!(html.contains("covers only part of the window"), "{html}");
        assert!(html.contains("<li class=\"gap\">"), "{html}");
        assert!(!html.contains("All "), "{html}");
        assert!(!html.contains("data-confirmed=\"true\""), "{html}");
        // A failed run: no figures at all.
        state.record(Run::new(
            T0,
            window(),
            coverage(T0),
            Err("reading the tables failed: <gone>".into()),
            50,
        ));
        let html = render(&state);
        assert!(html.contains("data-class=\"access_failure\""), "{html}");
        assert!(html.contains("could not read"), "{html}");
        assert!(html.contains("&lt;gone&gt;"), "{html}");
        assert!(!html.contains("reconcile-totals"), "{html}");
        assert!(!html.contains("data-confirmed=\"true\""), "{html}");
    }

    #[test]
    fn a_covered_run_shows_its_figures_and_its_mismatch_rows_escaped() {
        let mut state = ReconcileState::default();
        state.record(Run::new(
            T0,
            window(),
            coverage(T0),
            Ok(answer(lost(3), 3)),
            2,
        ));
        let html = render(&state);
        assert!(html.contains("data-state=\"live\""), "{html}");
        assert!(
            html.contains("Events lost between adapter and table: 3 missing"),
            "{html}"
        );
        assert_eq!(html.matches("<tr class=\"mismatch\">").count(), 2, "{html}");
        assert!(html.contains("showing the first 2 of 3"), "{html}");
        assert!(html.contains("&lt;b&gt;t0&lt;/b&gt;"), "{html}");
        assert!(!html.contains("<b>t0</b>"), "{html}");
        assert!(!html.contains("All "), "{html}");
        // A later covered run with no gap says so; a partial one after it points back to it.
        state.record(Run::new(
            T0 + MINUTE,
            window(),
            coverage(T0),
            Ok(answer(lost(0), 0)),
            50,
        ));
        let html = render(&state);
        assert!(html.contains("All 10 windows matched"), "{html}");
        assert!(html.contains("data-confirmed=\"true\""), "{html}");
        state.record(Run::new(
            T0 + 2 * MINUTE,
            window(),
            coverage(T0 - 30 * MINUTE),
            Ok(answer(lost(0), 0)),
            50,
        ));
        let html = render(&state);
        assert!(html.contains("reconcile-newest-covered"), "{html}");
        assert!(!html.contains("All 10 windows matched"), "{html}");
    }
}
