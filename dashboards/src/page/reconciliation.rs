//! The overview's reconciliation panel: the newest run of the counter against the stored events,
//! what it covered, its figures and every mismatch row it kept.
//!
//! The panel says "all matched" only for a run that covered its whole window (class success or
//! empty) and found no gap. A partial run is shown as covering only part of its window, with its
//! gaps; a run that could not read shows no figures at all; before the first run the panel says
//! it has not run.

use std::fmt::Write as _;

use candor_schema::OutcomeClass;
use serde_json::Value;

use super::esc;
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

fn totals_table(out: &mut String, totals: &candor_query::reconcile::Totals) {
    let _ = write!(
        out,
        "<table id=\"reconcile-totals\"><tr><th>windows matched</th><th>windows mismatched</th><th>events missing</th><th>events extra</th><th>events without counter</th><th>series</th></tr><tr><td class=\"n\" data-col=\"matched\">{}</td><td class=\"n\" data-col=\"mismatched\">{}</td><td class=\"n\" data-col=\"missing\">{}</td><td class=\"n\" data-col=\"extra\">{}</td><td class=\"n\" data-col=\"without_counter\">{}</td><td class=\"n\" data-col=\"series\">{}</td></tr></table>",
        totals.matched,
        totals.mismatched,
        totals.missing,
        totals.extra,
        totals.events_without_counter,
        totals.series
    );
}

fn mismatch_table(out: &mut String, run: &Run) {
    if run.mismatches.is_empty() {
        return;
    }
    out.push_str("<table id=\"reconcile-mismatches\"><tr>");
    for column in &run.columns {
        let _ = write!(out, "<th>{}</th>", esc(column));
    }
    out.push_str("</tr>");
    for row in &run.mismatches {
        out.push_str("<tr class=\"mismatch\">");
        for column in &run.columns {
            let _ = write!(
                out,
                "<td data-col=\"{}\">{}</td>",
                esc(column),
                esc(&cell(row.get(column)))
            );
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    if run.mismatch_rows > run.mismatches.len() as u64 {
        let _ = write!(
            out,
            "<p class=\"coverage\">showing the first {} of {} mismatch rows</p>",
            run.mismatches.len(),
            run.mismatch_rows
        );
    }
}

fn newest_covered(out: &mut String, covered: &Covered) {
    let totals = &covered.totals;
    let _ = write!(
        out,
        "<p class=\"coverage\" id=\"reconcile-newest-covered\">The newest run that covered its whole window ran at {} over {} to {}: {} window(s) matched, {} mismatched; {} event(s) missing, {} extra, {} without counter.</p>",
        when(covered.ran_at),
        when(covered.window.since),
        when(covered.window.until),
        totals.matched,
        totals.mismatched,
        totals.missing,
        totals.extra,
        totals.events_without_counter
    );
}

/// Renders the panel.
pub(super) fn panel(out: &mut String, reconcile: &ReconcileState) {
    let latest = reconcile.latest.as_ref();
    let (state, badge) = badge_of(latest);
    let class = latest.map_or("not_run", |run| run.class.as_str());
    let _ = write!(
        out,
        "<section id=\"panel-reconcile\" class=\"panel wide {state}\" data-state=\"{state}\" data-class=\"{class}\"><h2>Reconciliation: failed calls counted against events stored <span class=\"badge {state}\">{badge}</span></h2>"
    );
    let Some(run) = latest else {
        out.push_str(
            "<p class=\"nothing\" data-confirmed=\"false\">Reconciliation has not run yet: nothing is known yet about events lost between the adapter and the table.</p></section>",
        );
        return;
    };
    let _ = write!(
        out,
        "<p class=\"coverage\">last run {} over {} to {} ({}); runs: {} answered, {} failed</p>",
        when(run.ran_at),
        when(run.window.since),
        when(run.window.until),
        run.class.as_str(),
        reconcile.runs_ok,
        reconcile.runs_failed
    );
    if !run.covered {
        let what = if run.totals.is_some() {
            "This result covers only part of the window: its figures speak of the part read, no window is confirmed to match, and a gap may hide in what was not read."
        } else {
            "This run could not read: it covers none of its window, and nothing is known about events lost in it."
        };
        let _ = write!(
            out,
            "<p class=\"gap\" data-covered=\"false\">{what}</p><ul class=\"gaps\">"
        );
        for gap in &run.gaps {
            let _ = write!(out, "<li class=\"gap\">{}</li>", esc(gap));
        }
        out.push_str("</ul>");
    }
    if let Some(totals) = &run.totals {
        totals_table(out, totals);
        if run.covered {
            let lost = disagreements(totals);
            if lost > 0 {
                let _ = write!(
                    out,
                    "<p class=\"gap\" data-lost=\"{lost}\">Events lost between adapter and table: {} missing, {} extra, {} without counter.</p>",
                    totals.missing, totals.extra, totals.events_without_counter
                );
            } else if totals.windows == 0 {
                out.push_str(
                    "<p class=\"nothing\" data-confirmed=\"true\">No failed call was counted in this window, and no terminal event is stored without a counted call: nothing to reconcile.</p>",
                );
            } else {
                let _ = write!(
                    out,
                    "<p class=\"nothing\" data-confirmed=\"true\">All {} windows matched: every counted failed call has its terminal event stored, and no event is extra.</p>",
                    totals.windows
                );
            }
        }
    }
    for line in &run.summary {
        let _ = write!(out, "<p>{}</p>", esc(line));
    }
    if !run.notes.is_empty() {
        out.push_str("<p class=\"coverage\">");
        for note in &run.notes {
            let _ = write!(out, "{}<br>", esc(note));
        }
        out.push_str("</p>");
    }
    mismatch_table(out, run);
    if !run.covered
        && let Some(covered) = &reconcile.newest_covered
    {
        newest_covered(out, covered);
    }
    out.push_str("</section>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MINUTE;
    use crate::reconcile::tests::{T0, answer, coverage, lost, window};

    fn render(state: &ReconcileState) -> String {
        let mut out = String::new();
        panel(&mut out, state);
        out
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
