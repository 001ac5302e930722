//! Reconciliation on a schedule: the adapter's two records of every failed call, checked against
//! each other the way `candor reconcile` checks them.
//!
//! The adapter records a call that ends as AccessFailure or Partial twice: one terminal
//! `tool.outcome` event and one increment of the `tool.outcomes` counter. Every `--reconcile-every`
//! [`crate::reconciler::run`] asks `candor-query`'s reconciliation over `[now − --reconcile-range,
//! now − --reconcile-settle)`, from the first collector heartbeat read when that is later,
//! reading the tables and the Kafka tail as the forensic view does, and
//! keeps the newest result in the shared state ([`ReconcileState`]): the overview's panel,
//! `/metrics` and the `reconcile_mismatch` rule read it.
//!
//! A run is judged by its coverage, with the CLI's classes. Only a run whose class is success or
//! empty covered its whole window; its figures are a verdict. A partial run's figures speak of
//! the part it read, and a run that could not read (access failure) has none: neither is ever
//! shown or exported as "0 mismatches". The verdict kept for the alert and the gauges is that of
//! the newest run that covered its window ([`Covered`]); how long ago that was is what tells that
//! reconciliation has stopped vouching for the pipeline.

use std::time::Duration;

use candor_query::answer::Rows;
use candor_query::commands::ReconcileAnswer;
use candor_query::coverage::Coverage;
use candor_query::reconcile::Totals;
use candor_query::window::{Micros, Window, micros_of, serialize_micros};
use candor_schema::OutcomeClass;
use serde::Serialize;
use serde_json::{Map, Value};

/// How far an event's time may be from the counter point that counted its call.
pub const SLACK: Duration = Duration::from_secs(1);
/// How far before the window counter points are read for each series' baseline.
pub const LOOKBACK: Duration = Duration::from_secs(15 * 60);
/// The mismatch rows a run keeps; the others are only counted.
pub const MAX_ROWS: usize = 50;

/// When and over what window reconciliation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// How often it runs.
    pub every: Duration,
    /// How far back each run reaches.
    pub range: Duration,
    /// How recent a counter point may be and still be left to a later run, while the events of
    /// its calls may still be on their way to Kafka.
    pub settle: Duration,
}

impl Schedule {
    /// Checks the durations, naming the flag at fault.
    pub fn check(&self) -> Result<(), String> {
        if self.every.is_zero() {
            return Err("--reconcile-every must be above zero".into());
        }
        if self.range <= self.settle {
            return Err(format!(
                "--reconcile-range ({}) must be longer than --reconcile-settle ({}): the window \
                 between them is what each run checks",
                humantime::format_duration(self.range),
                humantime::format_duration(self.settle)
            ));
        }
        Ok(())
    }

    /// The window a run at `now` checks: `[now − range, now − settle)`.
    pub fn window_at(&self, now: Micros) -> Window {
        Window {
            since: now.saturating_sub(micros_of(self.range)),
            until: now.saturating_sub(micros_of(self.settle)),
        }
    }
}

/// One run's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    /// When it ran.
    #[serde(serialize_with = "serialize_micros")]
    pub ran_at: Micros,
    /// The window whose counter points it checked.
    pub window: Window,
    /// Its coverage, as the CLI states it: success (gaps found) or empty (none) when the whole
    /// window was read; partial or access_failure when not.
    pub class: OutcomeClass,
    /// Whether it covered its whole window (class success or empty): only then are its figures
    /// a verdict.
    pub covered: bool,
    /// The figures; `None` when the run could not read (access failure).
    pub totals: Option<Totals>,
    /// What the run did not cover, in words; empty when it covered everything.
    pub gaps: Vec<String>,
    /// Why the reconciliation itself failed, when it did.
    pub error: Option<String>,
    /// The answer's lines for a person.
    pub summary: Vec<String>,
    /// Caveats of the answer and of its coverage (series without a baseline, …).
    pub notes: Vec<String>,
    /// The mismatch rows' columns.
    pub columns: Vec<String>,
    /// The first [`MAX_ROWS`] mismatch rows: one per window where a gap appeared.
    pub mismatches: Vec<Map<String, Value>>,
    /// Every mismatch row found, kept or not.
    pub mismatch_rows: u64,
}

impl Run {
    /// The result of a run at `ran_at` over `window`, from its reader's coverage and the
    /// reconciliation's answer (or why it failed); keeps the first `max_rows` mismatch rows.
    pub fn new(
        ran_at: Micros,
        window: Window,
        mut coverage: Coverage,
        answer: Result<ReconcileAnswer, String>,
        max_rows: usize,
    ) -> Self {
        // As the CLI does: the answer's notes and what it could not check join its coverage,
        // and what it could not check makes it partial.
        let answer = match answer {
            Ok(mut answer) => {
                coverage.notes.append(&mut answer.notes);
                coverage.unchecked.append(&mut answer.unchecked);
                Some(answer)
            }
            Err(err) => {
                coverage.failure = Some(err);
                None
            }
        };
        let found = answer.as_ref().map_or(0, |answer| answer.rows.len());
        let class = coverage.class(found);
        let gaps = coverage.gaps();
        let (totals, summary, rows) = match answer {
            // An answer over sources none of which could be read holds no figures, only zeros.
            Some(answer) if class != OutcomeClass::AccessFailure => {
                (Some(answer.totals), answer.summary, Rows::of(answer.rows))
            }
            _ => (None, Vec::new(), Rows::new(&[])),
        };
        let mismatch_rows = rows.rows.len() as u64;
        Self {
            ran_at,
            window,
            class,
            covered: matches!(class, OutcomeClass::Success | OutcomeClass::Empty),
            totals,
            gaps,
            error: coverage.failure,
            summary,
            notes: coverage.notes,
            columns: rows.columns,
            mismatches: rows.rows.into_iter().take(max_rows).collect(),
            mismatch_rows,
        }
    }

    /// A run that could not produce an answer at all (it did not finish in time).
    pub fn failed(ran_at: Micros, window: Window, reason: String) -> Self {
        Self {
            ran_at,
            window,
            class: OutcomeClass::AccessFailure,
            covered: false,
            totals: None,
            gaps: vec![format!("the reconciliation failed: {reason}")],
            error: Some(reason),
            summary: Vec::new(),
            notes: Vec::new(),
            columns: Vec::new(),
            mismatches: Vec::new(),
            mismatch_rows: 0,
        }
    }
}

/// The verdict of a run that covered its whole window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Covered {
    /// When it ran.
    #[serde(serialize_with = "serialize_micros")]
    pub ran_at: Micros,
    /// The window it checked.
    pub window: Window,
    /// Its figures.
    pub totals: Totals,
}

/// Disagreements in a set of figures: events missing, extra, and without a counter.
pub fn disagreements(totals: &Totals) -> u64 {
    totals
        .missing
        .saturating_add(totals.extra)
        .saturating_add(totals.events_without_counter)
}

/// What reconciliation has found since the dashboards started.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReconcileState {
    /// The newest run, covered or not; `None` before the first one ended.
    pub latest: Option<Run>,
    /// The newest run that covered its whole window.
    pub newest_covered: Option<Covered>,
    /// Runs that produced an answer (covered or partial).
    pub runs_ok: u64,
    /// Runs that produced none: the reconciliation failed or nothing it needs could be read.
    pub runs_failed: u64,
}

impl ReconcileState {
    /// Keeps a run's result.
    pub fn record(&mut self, run: Run) {
        if run.class == OutcomeClass::AccessFailure {
            self.runs_failed += 1;
        } else {
            self.runs_ok += 1;
        }
        if run.covered
            && let Some(totals) = run.totals
        {
            self.newest_covered = Some(Covered {
                ran_at: run.ran_at,
                window: run.window,
                totals,
            });
        }
        self.latest = Some(run);
    }

    /// Since when reconciliation has not covered its window: the newest covered run, or
    /// `started` when none ever did.
    pub fn uncovered_since(&self, started: Micros) -> Micros {
        self.newest_covered
            .map_or(started, |covered| covered.ran_at)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use candor_query::commands::ReconcileRow;
    use candor_query::coverage::{Heartbeat, SourceReport};
    use candor_query::reconcile::SeriesKey;

    use crate::model::{MINUTE, SECOND};

    /// A whole minute.
    pub(crate) const T0: Micros = 1_700_000_040 * SECOND;

    pub(crate) fn window() -> Window {
        Window {
            since: T0 - 60 * MINUTE,
            until: T0 - 2 * MINUTE,
        }
    }

    /// Coverage with both tables read and a heartbeat at `reaches`.
    pub(crate) fn coverage(reaches: Micros) -> Coverage {
        Coverage::new(
            Some(window()),
            vec![
                SourceReport::read("table outcome_events", None, Some(10), String::new()),
                SourceReport::read("table outcome_counts", None, Some(10), String::new()),
            ],
            Some(Heartbeat {
                at: reaches,
                interval: 5 * SECOND,
                from_tail: false,
            }),
            T0,
        )
    }

    pub(crate) fn answer(totals: Totals, rows: usize) -> ReconcileAnswer {
        let found = (0..rows)
            .map(|index| ReconcileRow {
                series: SeriesKey {
                    service: "svc".into(),
                    instance: "i-1".into(),
                    tool: "search".into(),
                    target: format!("<b>t{index}</b>"),
                    class: OutcomeClass::AccessFailure,
                },
                // 2023-11-14T22:00:00Z to 22:01:00Z.
                window_start: 1_699_999_200 * SECOND,
                window_end: 1_699_999_260 * SECOND,
                counted: Some(3),
                events: 2,
                missing: 1,
                extra: 0,
            })
            .collect();
        ReconcileAnswer {
            rows: found,
            summary: vec!["1 event missing".into()],
            notes: vec!["1 series without a baseline".into()],
            unchecked: Vec::new(),
            totals,
        }
    }

    pub(crate) fn lost(missing: u64) -> Totals {
        Totals {
            series: 2,
            windows: 10,
            matched: 10 - missing.min(10),
            mismatched: missing.min(10),
            missing,
            ..Totals::default()
        }
    }

    #[test]
    fn the_window_ends_settle_before_now_and_the_flags_are_checked() {
        let settings = Schedule {
            every: Duration::from_secs(60),
            range: Duration::from_secs(3600),
            settle: Duration::from_secs(120),
        };
        assert_eq!(settings.check(), Ok(()));
        assert_eq!(settings.window_at(T0), window());
        let inverted = Schedule {
            range: Duration::from_secs(60),
            ..settings
        };
        let problem = inverted.check().expect_err("refused");
        assert!(problem.contains("--reconcile-range"), "{problem}");
        let zero = Schedule {
            every: Duration::ZERO,
            ..settings
        };
        assert!(
            zero.check()
                .expect_err("refused")
                .contains("--reconcile-every")
        );
    }

    #[test]
    fn a_covered_run_is_a_verdict_and_keeps_the_first_rows() {
        let run = Run::new(T0, window(), coverage(T0), Ok(answer(lost(60), 60)), 50);
        assert_eq!(run.class, OutcomeClass::Success);
        assert!(run.covered);
        assert_eq!(run.mismatches.len(), 50);
        assert_eq!(run.mismatch_rows, 60);
        assert_eq!(run.columns.len(), 11);
        assert!(run.gaps.is_empty(), "{:?}", run.gaps);
        let mut state = ReconcileState::default();
        state.record(run);
        assert_eq!((state.runs_ok, state.runs_failed), (1, 0));
        let covered = state.newest_covered.expect("covered");
        assert_eq!(covered.totals.missing, 60);
        assert_eq!(state.uncovered_since(0), T0);
    }

    #[test]
    fn a_run_short_of_its_window_or_failed_is_never_a_verdict() {
        let mut state = ReconcileState::default();
        state.record(Run::new(
            T0,
            window(),
            coverage(T0),
            Ok(answer(Totals::default(), 0)),
            50,
        ));
        assert_eq!(
            state.latest.as_ref().map(|run| run.class),
            Some(OutcomeClass::Empty)
        );
        // The heartbeats stop ten minutes before the window ends: partial, figures kept but not
        // taken as the verdict.
        let short = Run::new(
            T0 + MINUTE,
            window(),
            coverage(T0 - 12 * MINUTE),
            Ok(answer(lost(3), 3)),
            50,
        );
        assert_eq!(short.class, OutcomeClass::Partial);
        assert!(!short.covered);
        assert!(!short.gaps.is_empty());
        assert_eq!(short.totals.map(|t| t.missing), Some(3));
        state.record(short);
        // The query failed: no figures at all, not zeros.
        let failed = Run::new(
            T0 + 2 * MINUTE,
            window(),
            coverage(T0),
            Err("reading the tables failed: gone".into()),
            50,
        );
        assert_eq!(failed.class, OutcomeClass::AccessFailure);
        assert_eq!(failed.totals, None);
        assert!(
            failed.gaps.iter().any(|gap| gap.contains("gone")),
            "{:?}",
            failed.gaps
        );
        state.record(failed);
        state.record(Run::failed(T0 + 3 * MINUTE, window(), "timeout".into()));
        assert_eq!((state.runs_ok, state.runs_failed), (2, 2));
        // The verdict is still the covered run's.
        assert_eq!(state.uncovered_since(0), T0);
        assert_eq!(
            state.newest_covered.map(|covered| covered.totals),
            Some(Totals::default())
        );
        assert_eq!(ReconcileState::default().uncovered_since(7), 7);
    }

    #[test]
    fn a_window_with_nothing_to_compare_is_not_covered() {
        let mut nothing = answer(Totals::default(), 0);
        nothing
            .unchecked
            .push("no closed counter window lies inside the window".into());
        let run = Run::new(T0, window(), coverage(T0), Ok(nothing), 50);
        assert_eq!(run.class, OutcomeClass::Partial);
        assert!(!run.covered);
        assert!(
            run.gaps
                .iter()
                .any(|gap| gap.contains("no closed counter window")),
            "{:?}",
            run.gaps
        );
        assert!(
            run.notes
                .iter()
                .any(|note| note.contains("without a baseline")),
            "{:?}",
            run.notes
        );
    }

    #[test]
    fn nothing_read_holds_no_figures_even_when_the_answer_came_back() {
        let mut nothing = coverage(T0);
        nothing.sources = vec![
            SourceReport::unreachable("table outcome_events", "no table"),
            SourceReport::unreachable("table outcome_counts", "no table"),
        ];
        let run = Run::new(T0, window(), nothing, Ok(answer(Totals::default(), 0)), 50);
        assert_eq!(run.class, OutcomeClass::AccessFailure);
        assert_eq!(run.totals, None);
        assert!(!run.covered);
    }

    #[test]
    fn disagreements_add_every_kind_of_gap() {
        let totals = Totals {
            missing: 1,
            extra: 2,
            events_without_counter: 4,
            ..Totals::default()
        };
        assert_eq!(disagreements(&totals), 7);
        assert_eq!(disagreements(&Totals::default()), 0);
    }
}
