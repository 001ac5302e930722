//! What an answer looked at, and therefore what it may claim. Pure.
//!
//! Every answer carries a [`Coverage`]: the sources it read (each table, each Kafka tail), how far
//! each reached, and what could not be read. Its class follows the contract:
//!
//! - **access_failure**: no source could be read; nothing can be concluded.
//! - **partial**: a source could not be read, or was read only in part, or the window reaches past
//!   the newest data any source holds (`covered_until`).
//! - **empty**: every source was read across the whole window and nothing matched.
//! - **success**: rows were found and the whole window was covered.
//!
//! `covered_until` is how far the data provably reaches. The collector writes a heartbeat every
//! few seconds, so the newest heartbeat read shows the pipeline was carrying data up to then. The
//! next heartbeat may not have arrived yet, so the coverage extends two heartbeat intervals past
//! it (never past now). Without any heartbeat, it is the newest row any source holds.

use candor_schema::OutcomeClass;
use serde::Serialize;

use crate::window::{Micros, Window, rfc3339, serialize_opt_micros};

/// Whether and how a source was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SourceState {
    /// Read in full.
    Read,
    /// Read, but not all of it: the reason says what is missing.
    Incomplete {
        /// What is missing and why.
        reason: String,
    },
    /// Could not be read at all.
    Unreachable {
        /// Why.
        reason: String,
    },
    /// Not asked for (for example the Kafka tail with `--live` off).
    Skipped {
        /// Why.
        reason: String,
    },
}

/// One source of an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceReport {
    /// `table outcome_events`, `kafka candor.outcome-events.v1`, …
    pub name: String,
    /// Whether it was read.
    #[serde(flatten)]
    pub state: SourceState,
    /// The newest row time it holds.
    #[serde(serialize_with = "serialize_opt_micros")]
    pub newest: Option<Micros>,
    /// Rows it contributed (after removing duplicates).
    pub rows: u64,
    /// Where it was read: a table version and its positions, or the Kafka offsets read.
    pub detail: String,
}

impl SourceReport {
    /// A source read in full.
    pub fn read(
        name: impl Into<String>,
        newest: Option<Micros>,
        rows: u64,
        detail: String,
    ) -> Self {
        Self {
            name: name.into(),
            state: SourceState::Read,
            newest,
            rows,
            detail,
        }
    }

    /// A source that could not be read.
    pub fn unreachable(name: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            state: SourceState::Unreachable {
                reason: reason.into(),
            },
            newest: None,
            rows: 0,
            detail: String::new(),
        }
    }

    /// Whether anything was read from it.
    pub fn was_read(&self) -> bool {
        matches!(
            self.state,
            SourceState::Read | SourceState::Incomplete { .. }
        )
    }

    /// Whether it failed to give everything it was asked for.
    pub fn is_short(&self) -> bool {
        matches!(
            self.state,
            SourceState::Incomplete { .. } | SourceState::Unreachable { .. }
        )
    }
}

/// The newest heartbeat read, with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// When it was sent.
    pub at: Micros,
    /// The interval its collector sends them at, in microseconds.
    pub interval: Micros,
}

/// What an answer covered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Coverage {
    /// The window asked about; `None` for SQL, whose window is in the statement.
    pub window: Option<Window>,
    /// How far the data provably reaches (see the module documentation).
    #[serde(serialize_with = "serialize_opt_micros")]
    pub covered_until: Option<Micros>,
    /// Every source, read or not.
    pub sources: Vec<SourceReport>,
    /// Anything else the reader should know (series without a baseline, ignored points, …).
    pub notes: Vec<String>,
}

impl Coverage {
    /// Coverage over `sources`, with `covered_until` derived from the newest heartbeat and the
    /// newest rows (see the module documentation).
    pub fn new(
        window: Option<Window>,
        sources: Vec<SourceReport>,
        heartbeat: Option<Heartbeat>,
        now: Micros,
    ) -> Self {
        let newest_row = sources.iter().filter_map(|source| source.newest).max();
        let from_heartbeat =
            heartbeat.map(|beat| beat.at.saturating_add(beat.interval.saturating_mul(2)));
        // A row dated in the future (a sender's clock ahead) proves nothing past now.
        let covered_until = match (from_heartbeat, newest_row) {
            (Some(beat), Some(row)) => Some(beat.max(row)),
            (beat, row) => beat.or(row),
        }
        .map(|until| until.min(now));
        Self {
            window,
            covered_until,
            sources,
            notes: Vec::new(),
        }
    }

    /// Whether the window reaches past what the data covers.
    pub fn reaches_past_data(&self) -> bool {
        match self.window {
            Some(window) => self.covered_until.is_none_or(|until| window.until > until),
            None => false,
        }
    }

    /// The answer's class, given how many rows it found.
    pub fn class(&self, rows: usize) -> OutcomeClass {
        if !self.sources.iter().any(SourceReport::was_read) {
            OutcomeClass::AccessFailure
        } else if self.sources.iter().any(SourceReport::is_short) || self.reaches_past_data() {
            OutcomeClass::Partial
        } else if rows == 0 {
            OutcomeClass::Empty
        } else {
            OutcomeClass::Success
        }
    }

    /// What was not covered, in words; empty when everything was.
    pub fn gaps(&self) -> Vec<String> {
        let mut gaps: Vec<String> = self
            .sources
            .iter()
            .filter_map(|source| match &source.state {
                SourceState::Unreachable { reason } => {
                    Some(format!("{} could not be read: {reason}", source.name))
                }
                SourceState::Incomplete { reason } => {
                    Some(format!("{} was read only in part: {reason}", source.name))
                }
                SourceState::Read | SourceState::Skipped { .. } => None,
            })
            .collect();
        if let Some(window) = self.window.filter(|_| self.reaches_past_data()) {
            gaps.push(match self.covered_until {
                Some(until) => format!(
                    "the window ends at {}, but the data read reaches only {}; nothing is known \
                     after that",
                    rfc3339(window.until),
                    rfc3339(until)
                ),
                None => "no source holds any data, so nothing is known about the window".into(),
            });
        }
        gaps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Micros = 10_000_000_000;

    fn window(until: Micros) -> Option<Window> {
        Some(Window {
            since: until - 3_600_000_000,
            until,
        })
    }

    fn read(newest: Micros) -> SourceReport {
        SourceReport::read("table outcome_events", Some(newest), 1, String::new())
    }

    #[test]
    fn class_follows_the_sources_and_the_window() {
        let beat = Some(Heartbeat {
            at: NOW - 5_000_000,
            interval: 10_000_000,
        });
        let full = Coverage::new(window(NOW), vec![read(NOW - 60_000_000)], beat, NOW);
        assert_eq!(full.covered_until, Some(NOW));
        assert_eq!(full.class(3), OutcomeClass::Success);
        assert_eq!(full.class(0), OutcomeClass::Empty);
        assert!(full.gaps().is_empty());

        let mut short = full.clone();
        short
            .sources
            .push(SourceReport::unreachable("kafka t", "broker down"));
        assert_eq!(short.class(3), OutcomeClass::Partial);
        assert_eq!(short.class(0), OutcomeClass::Partial);
        assert!(short.gaps()[0].contains("broker down"));

        let none = Coverage::new(
            window(NOW),
            vec![SourceReport::unreachable("table t", "missing")],
            None,
            NOW,
        );
        assert_eq!(none.class(0), OutcomeClass::AccessFailure);
    }

    #[test]
    fn a_window_past_the_data_is_partial() {
        // The newest heartbeat is a minute old with a 10 s interval: covered 20 s past it.
        let beat = Some(Heartbeat {
            at: NOW - 60_000_000,
            interval: 10_000_000,
        });
        let stale = Coverage::new(window(NOW), vec![read(NOW - 70_000_000)], beat, NOW);
        assert_eq!(stale.covered_until, Some(NOW - 40_000_000));
        assert_eq!(stale.class(0), OutcomeClass::Partial);
        assert!(
            stale.gaps()[0].contains("reaches only"),
            "{:?}",
            stale.gaps()
        );
        // The same data answers an older window in full.
        let older = Coverage::new(window(NOW - 50_000_000), stale.sources.clone(), beat, NOW);
        assert_eq!(older.class(0), OutcomeClass::Empty);
        // Without heartbeats, the newest row is the limit.
        let rows_only = Coverage::new(window(NOW), vec![read(NOW - 1)], None, NOW);
        assert_eq!(rows_only.class(1), OutcomeClass::Partial);
        // A row from the future does not cover the future.
        let ahead = Coverage::new(
            window(NOW + 60_000_000),
            vec![read(NOW + 3_600_000_000)],
            beat,
            NOW,
        );
        assert_eq!(ahead.covered_until, Some(NOW));
        assert_eq!(ahead.class(1), OutcomeClass::Partial);
        // SQL states no window and is judged by its sources only.
        let sql = Coverage::new(None, vec![read(0)], None, NOW);
        assert_eq!(sql.class(1), OutcomeClass::Success);
    }
}
