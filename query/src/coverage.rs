//! What an answer looked at, and therefore what it may claim. Pure.
//!
//! Every answer carries a [`Coverage`]: the sources it read (each table, each Kafka tail), how far
//! each reached, and what could not be read. Its class follows the contract:
//!
//! - **access_failure**: no source the question needs could be read, or the query itself failed;
//!   nothing can be concluded.
//! - **partial**: a needed source could not be read, or was read only in part, or the window
//!   reaches past `covered_until`.
//! - **empty**: every needed source was read across the whole window and nothing matched.
//! - **success**: rows were found and the whole window was covered.
//!
//! `covered_until` is how far the data provably reaches. The collector writes a heartbeat every
//! few seconds to every record's path (Kafka, then the tables), so the newest heartbeat read shows
//! the pipeline carried data up to then. A heartbeat read from the Kafka tail, which was read to
//! its end, extends the coverage by two heartbeat intervals (the next one may not be due yet); a
//! heartbeat from a table does not, since the table may end right after it. Never past now. With
//! no heartbeat read, how far the data reaches is unknown, and any window is partial. A question
//! without a window (SQL, a whole trace) asks about everything up to now.
//!
//! Inside the window, a stretch with no heartbeat for more than three of the intervals the last
//! heartbeat promised is a silence: the pipeline was not carrying data then, so an answer over it
//! is partial. A window that starts before the first heartbeat read (none in the hours before
//! it) is partial too: from its start to that heartbeat nothing vouches for the data, because the
//! pipeline was not running yet or retention removed its records. A question without a window
//! claims nothing about a stretch, so none of this applies to it.
//!
//! The heartbeats prove the pipeline, not the adapters in front of it. Each adapter instance's
//! periodic counter export is its own heartbeat: an instance a question concerns that sent no
//! counter point for more than three of its usual export intervals inside the window, while the
//! pipeline was live, makes the answer partial and is named ([`instance_silences`]).
//!
//! The heartbeats and the events are separate tables committed by the same compactor flush; with
//! several compactor members owning different partitions, a table's heartbeats can be ahead of a
//! lagging member's partitions (read the tail with `--live` to close that gap).

use candor_schema::OutcomeClass;
use candor_schema::time::silent_after;
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
    /// For a table, the rows it holds; for a tail, the rows it adds (after removing the copies the
    /// table already holds). `None` when unknown (a file without statistics, or nothing read).
    pub rows: Option<u64>,
    /// Whether the question needs it (the heartbeats are read for the coverage clock only,
    /// unless asked about).
    pub needed: bool,
    /// Where it was read: a table version and its positions, or the Kafka offsets read.
    pub detail: String,
}

impl SourceReport {
    /// A source read in full.
    pub fn read(
        name: impl Into<String>,
        newest: Option<Micros>,
        rows: Option<u64>,
        detail: String,
    ) -> Self {
        Self {
            name: name.into(),
            state: SourceState::Read,
            newest,
            rows,
            needed: true,
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
            rows: None,
            needed: true,
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
    /// Whether it was read from the Kafka tail (read to its end) rather than from a table.
    pub from_tail: bool,
}

/// An instance that sent nothing for longer than its own exports promise: the calls it made
/// then are unknown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstanceSilence {
    /// `service.name`.
    pub service: String,
    /// `service.instance.id` (for a sender seen by its spans, its host and process when it
    /// names no instance).
    pub instance: String,
    /// How the instance was seen.
    pub seen_by: SeenBy,
    /// Its last export before the silence.
    #[serde(serialize_with = "crate::window::serialize_micros")]
    pub from: Micros,
    /// Its next export, or how far the answer looked.
    #[serde(serialize_with = "crate::window::serialize_micros")]
    pub to: Micros,
    /// How often it exported before, in microseconds (its declared interval, else the median
    /// spacing of its exports).
    pub every: Micros,
}

/// How an instance's exports are seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SeenBy {
    /// An adapter's counter points.
    Adapter,
    /// The collector's senders' heartbeats: the instance sends standard spans (or other
    /// telemetry) and no adapter's counter, and its calls are derived from its spans.
    Spans,
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
    /// Stretches inside the window with no heartbeat: `(from, to)`.
    pub silences: Vec<(Micros, Micros)>,
    /// The start of the window before its first heartbeat, `(from, to)`, when no heartbeat
    /// precedes the window: the whole window when none was read in it either.
    pub before_first_heartbeat: Option<(Micros, Micros)>,
    /// Adapter instances that went silent inside the window while the pipeline was live.
    pub silent_instances: Vec<InstanceSilence>,
    /// Anything else the reader should know (series without a baseline, ignored points, …).
    pub notes: Vec<String>,
    /// What the question could not check with the data read (a reconciliation with no closed
    /// window, say); each makes the answer partial.
    pub unchecked: Vec<String>,
    /// Why the question itself failed while it ran, when it did.
    pub failure: Option<String>,
    /// When the answer was read.
    #[serde(skip)]
    pub now: Micros,
}

impl Coverage {
    /// Coverage over `sources`, with `covered_until` derived from the newest heartbeat (see the
    /// module documentation).
    pub fn new(
        window: Option<Window>,
        sources: Vec<SourceReport>,
        heartbeat: Option<Heartbeat>,
        now: Micros,
    ) -> Self {
        let covered_until = heartbeat.map(|beat| {
            let slack = if beat.from_tail {
                beat.interval
                    .saturating_mul(candor_schema::time::TAIL_SLACK_INTERVALS)
            } else {
                0
            };
            beat.at.saturating_add(slack).min(now)
        });
        Self {
            window,
            covered_until,
            sources,
            silences: Vec::new(),
            before_first_heartbeat: None,
            silent_instances: Vec::new(),
            notes: Vec::new(),
            unchecked: Vec::new(),
            failure: None,
            now,
        }
    }

    /// The end of what the question asks about: the window's end, or now without a window.
    fn asked_until(&self) -> Micros {
        self.window.map_or(self.now, |window| window.until)
    }

    /// Whether the question reaches past what the data covers.
    pub fn reaches_past_data(&self) -> bool {
        self.covered_until
            .is_none_or(|until| self.asked_until() > until)
    }

    /// The answer's class, given how many rows it found.
    pub fn class(&self, rows: usize) -> OutcomeClass {
        let needed = || self.sources.iter().filter(|source| source.needed);
        if self.failure.is_some() || !needed().any(|source| source.was_read()) {
            OutcomeClass::AccessFailure
        } else if needed().any(SourceReport::is_short)
            || self.reaches_past_data()
            || !self.silences.is_empty()
            || !self.silent_instances.is_empty()
            || self.before_first_heartbeat.is_some()
            || !self.unchecked.is_empty()
        {
            OutcomeClass::Partial
        } else if rows == 0 {
            OutcomeClass::Empty
        } else {
            OutcomeClass::Success
        }
    }

    /// Moves the window's start to its first heartbeat when it started before it (and that
    /// heartbeat lies inside the window), and returns that heartbeat's time: for a question that
    /// asks about "at most this far back", whose answer over the known stretch is whole. The
    /// silences need no change: each lies between two heartbeats, so after the first.
    pub fn start_at_first_heartbeat(&mut self) -> Option<Micros> {
        let (_, first) = self.before_first_heartbeat?;
        let window = self.window.as_mut()?;
        if first >= window.until {
            return None;
        }
        window.since = first;
        self.before_first_heartbeat = None;
        Some(first)
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
        if let Some(failure) = &self.failure {
            gaps.push(format!("the question failed while it ran: {failure}"));
        }
        gaps.extend(self.unchecked.iter().cloned());
        for (from, to) in &self.silences {
            gaps.push(format!(
                "no collector heartbeat between {} and {}: the pipeline was not carrying data \
                 then, so nothing is known about that stretch",
                rfc3339(*from),
                rfc3339(*to)
            ));
        }
        for silence in &self.silent_instances {
            let (what, sent) = match silence.seen_by {
                SeenBy::Adapter => ("adapter instance", "counter point"),
                SeenBy::Spans => ("instance", "span or other telemetry"),
            };
            gaps.push(format!(
                "{what} {} of service {} sent no {sent} between {} and {} (it exported every \
                 {:.1} s before): its calls then are unknown",
                silence.instance,
                silence.service,
                rfc3339(silence.from),
                rfc3339(silence.to),
                silence.every as f64 / 1e6
            ));
        }
        // Without any heartbeat, the line below already says that nothing is known.
        if let (Some((from, to)), Some(_)) = (self.before_first_heartbeat, self.covered_until) {
            gaps.push(format!(
                "nothing is known about {} to {}: no collector heartbeat was read before it (the \
                 pipeline was not running yet, or its records are past retention)",
                rfc3339(from),
                rfc3339(to)
            ));
        }
        if self.reaches_past_data() {
            let asked = match self.window {
                Some(window) => format!("the window ends at {}", rfc3339(window.until)),
                None => format!("the question reaches now ({})", rfc3339(self.now)),
            };
            gaps.push(match self.covered_until {
                Some(until) => format!(
                    "{asked}, but the data read reaches only {}; nothing is known after that",
                    rfc3339(until)
                ),
                None => format!(
                    "{asked}, but no collector heartbeat was read, so how far the data reaches is \
                     unknown"
                ),
            });
        }
        gaps
    }
}

/// The silences inside `window`: consecutive heartbeats `(at, interval)` (sorted by time) further
/// apart than three of the intervals the earlier one promised.
pub fn silences(heartbeats: &[(Micros, Micros)], window: Window) -> Vec<(Micros, Micros)> {
    heartbeats
        .windows(2)
        .filter_map(|pair| {
            let ((at, interval), (next, _)) = (pair[0], pair[1]);
            let silent = next.saturating_sub(at) > silent_after(interval);
            (silent && next > window.since && at < window.until)
                .then(|| (at.max(window.since), next.min(window.until)))
        })
        .collect()
}

/// How far before a window counter points are read to know which adapter instances were
/// reporting when it began.
pub const INSTANCE_LOOKBACK: Micros = 3_600_000_000;

/// One export of an instance: an adapter's, as its counter points show it, or a sender's, as
/// the collector's senders' heartbeats show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// `service.name`.
    pub service: String,
    /// `service.instance.id`.
    pub instance: String,
    /// What shows the export.
    pub seen_by: SeenBy,
    /// The points' time.
    pub at: Micros,
    /// The export heartbeat it carried (`candor.adapter.export_interval`), in microseconds: 0
    /// when it was the instance's final export; `None` when the instance does not send it.
    pub interval: Option<Micros>,
    /// Whether any of its points is about what the question asks (its service, tool, target).
    pub concerned: bool,
}

/// The adapter instances silent inside `window` up to `known_until` (how far the pipeline is
/// known to have carried data), from `exports` read from [`INSTANCE_LOOKBACK`] before the window
/// to its end, in any order. Only instances with an export the question concerns are judged;
/// each is judged by all its exports.
///
/// An instance's interval is the one its newest export declared (the contract's export
/// heartbeat), else the median spacing of its exports (an instance with one export and no
/// declaration is not judged). It is silent where two exports are further apart than three
/// intervals, and after its last export when that lies more than three intervals before
/// `known_until`, unless that export said it was the final one. An instance that does not say
/// so may have been replaced: a new instance of its service that started after its last export
/// ends the silence at its first export.
pub fn instance_silences(
    exports: &[Export],
    window: Window,
    known_until: Micros,
) -> Vec<InstanceSilence> {
    use std::collections::BTreeMap;
    /// `(time, declared interval)` of each of an instance's exports, and whether any concerns
    /// the question.
    type Exports = (Vec<(Micros, Option<Micros>)>, bool);
    let mut instances: BTreeMap<(&str, &str), Exports> = BTreeMap::new();
    let mut seen_by: BTreeMap<(&str, &str), SeenBy> = BTreeMap::new();
    for export in exports {
        let key = (export.service.as_str(), export.instance.as_str());
        let entry = instances.entry(key).or_default();
        entry.0.push((export.at, export.interval));
        entry.1 |= export.concerned;
        // An adapter's exports say more than a sender's heartbeats.
        let by = seen_by.entry(key).or_insert(export.seen_by);
        *by = (*by).min(export.seen_by);
    }
    for (list, _) in instances.values_mut() {
        // The smallest declaration of a time first, so that a final export's 0 wins its time.
        list.sort_unstable_by_key(|&(at, interval)| (at, interval.map_or(Micros::MAX, |i| i)));
        list.dedup_by_key(|(at, _)| *at);
    }
    let known_until = known_until.min(window.until);
    let mut silent = Vec::new();
    for (&(service, instance), (list, concerned)) in &instances {
        if !concerned {
            continue;
        }
        let declared = list
            .iter()
            .rev()
            .find_map(|&(_, interval)| interval.filter(|&i| i > 0));
        let every = match declared {
            Some(every) => every,
            None => {
                let mut gaps: Vec<Micros> =
                    list.windows(2).map(|pair| pair[1].0 - pair[0].0).collect();
                if gaps.is_empty() {
                    continue;
                }
                gaps.sort_unstable();
                gaps[gaps.len() / 2]
            }
        }
        .max(1);
        let limit = silent_after(every);
        let mut push = |from: Micros, to: Micros| {
            let (from, to) = (from.max(window.since), to.min(known_until));
            if from < to {
                silent.push(InstanceSilence {
                    service: service.to_owned(),
                    instance: instance.to_owned(),
                    seen_by: seen_by
                        .get(&(service, instance))
                        .copied()
                        .unwrap_or(SeenBy::Adapter),
                    from,
                    to,
                    every,
                });
            }
        };
        for pair in list.windows(2) {
            let stopped = pair[0].1 == Some(0);
            if !stopped && pair[1].0 - pair[0].0 > limit {
                push(pair[0].0, pair[1].0);
            }
        }
        let (last, last_interval) = list[list.len() - 1];
        if last_interval == Some(0) {
            continue;
        }
        let replaced_at = instances
            .iter()
            .filter(|&(&(other_service, other), _)| other_service == service && other != instance)
            .map(|(_, (other_list, _))| other_list[0].0)
            .filter(|&first| first > last)
            .min();
        let until = replaced_at.map_or(known_until, |at| at.min(known_until));
        if until.saturating_sub(last) > limit {
            push(last, until);
        }
    }
    silent
}

/// The start of `window` that no heartbeat vouches for: from its start to its first heartbeat,
/// when `heartbeats` (sorted by time, read from some hours before the window to its end) hold
/// none at or before the start; the whole window when they hold none at all.
pub fn before_first_heartbeat(
    heartbeats: &[(Micros, Micros)],
    window: Window,
) -> Option<(Micros, Micros)> {
    match heartbeats.first() {
        Some(&(first, _)) if first <= window.since => None,
        Some(&(first, _)) => Some((window.since, first.min(window.until))),
        None => Some((window.since, window.until)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Micros = 10_000_000_000;
    const SECOND: Micros = 1_000_000;

    fn window(until: Micros) -> Option<Window> {
        Some(Window {
            since: until - 3_600 * SECOND,
            until,
        })
    }

    fn read(newest: Micros) -> SourceReport {
        SourceReport::read("table outcome_events", Some(newest), Some(1), String::new())
    }

    fn beat(at: Micros, from_tail: bool) -> Option<Heartbeat> {
        Some(Heartbeat {
            at,
            interval: 10 * SECOND,
            from_tail,
        })
    }

    #[test]
    fn class_follows_the_needed_sources_and_the_window() {
        let full = Coverage::new(
            window(NOW),
            vec![read(NOW - 60 * SECOND)],
            beat(NOW - 5 * SECOND, true),
            NOW,
        );
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

        // Only the heartbeats could be read: the question's own table could not.
        let mut beats = SourceReport::read("table heartbeats", Some(NOW), Some(9), String::new());
        beats.needed = false;
        let none = Coverage::new(
            window(NOW),
            vec![SourceReport::unreachable("table t", "missing"), beats],
            beat(NOW, false),
            NOW,
        );
        assert_eq!(none.class(0), OutcomeClass::AccessFailure);

        let mut failed = full.clone();
        failed.failure = Some("a file vanished".into());
        assert_eq!(failed.class(3), OutcomeClass::AccessFailure);
        assert!(failed.gaps()[0].contains("a file vanished"));
    }

    #[test]
    fn a_silence_inside_the_window_is_partial() {
        let window = Window {
            since: 100 * SECOND,
            until: 200 * SECOND,
        };
        let every_ten = |from: Micros, to: Micros| -> Vec<(Micros, Micros)> {
            (from..to)
                .step_by(10)
                .map(|s| (s * SECOND, 10 * SECOND))
                .collect()
        };
        // Steady heartbeats: no silence. Heartbeats only after the start: nothing is claimed.
        assert!(silences(&every_ten(50, 250), window).is_empty());
        assert!(silences(&every_ten(150, 250), window).is_empty());
        // Nothing between 120 s and 170 s (50 s > 3 × 10 s).
        let mut gap = every_ten(50, 121);
        gap.extend(every_ten(170, 250));
        assert_eq!(silences(&gap, window), [(120 * SECOND, 170 * SECOND)]);
        // A gap that straddles the start is cut at the start.
        let mut early = every_ten(0, 61);
        early.extend(every_ten(130, 250));
        assert_eq!(silences(&early, window), [(100 * SECOND, 130 * SECOND)]);
        // A longer promised interval allows a longer pause.
        let slow = vec![(90 * SECOND, 60 * SECOND), (180 * SECOND, 60 * SECOND)];
        assert!(silences(&slow, window).is_empty());

        let mut coverage =
            Coverage::new(Some(window), vec![read(0)], beat(200 * SECOND, false), NOW);
        assert_eq!(coverage.class(1), OutcomeClass::Success);
        coverage.silences = silences(&gap, window);
        assert_eq!(coverage.class(1), OutcomeClass::Partial);
        assert!(coverage.gaps()[0].contains("no collector heartbeat between"));
    }

    #[test]
    fn a_window_that_starts_before_the_first_heartbeat_is_partial() {
        let window = Window {
            since: 100 * SECOND,
            until: 200 * SECOND,
        };
        let beats = |from: Micros| -> Vec<(Micros, Micros)> {
            (from..250)
                .step_by(10)
                .map(|s| (s * SECOND, 10 * SECOND))
                .collect()
        };
        assert_eq!(before_first_heartbeat(&beats(50), window), None);
        assert_eq!(before_first_heartbeat(&beats(100), window), None);
        assert_eq!(
            before_first_heartbeat(&beats(150), window),
            Some((100 * SECOND, 150 * SECOND))
        );
        // Heartbeats only after the window, or none: nothing in it is vouched for.
        assert_eq!(
            before_first_heartbeat(&beats(210), window),
            Some((100 * SECOND, 200 * SECOND))
        );
        assert_eq!(
            before_first_heartbeat(&[], window),
            Some((100 * SECOND, 200 * SECOND))
        );

        let mut coverage =
            Coverage::new(Some(window), vec![read(0)], beat(200 * SECOND, false), NOW);
        assert_eq!(coverage.class(0), OutcomeClass::Empty);
        coverage.before_first_heartbeat = before_first_heartbeat(&beats(150), window);
        assert_eq!(coverage.class(0), OutcomeClass::Partial);
        assert_eq!(coverage.class(1), OutcomeClass::Partial);
        assert_eq!(
            coverage.gaps(),
            ["nothing is known about 1970-01-01T00:01:40.000000Z to \
                 1970-01-01T00:02:30.000000Z: no collector heartbeat was read before it (the \
                 pipeline was not running yet, or its records are past retention)"]
        );

        // Started at that heartbeat instead, the window is whole.
        let mut clipped = coverage.clone();
        assert_eq!(clipped.start_at_first_heartbeat(), Some(150 * SECOND));
        assert_eq!(clipped.window.map(|w| w.since), Some(150 * SECOND));
        assert_eq!(clipped.class(0), OutcomeClass::Empty);
        // A window with no heartbeat inside it cannot be started at one.
        coverage.before_first_heartbeat = before_first_heartbeat(&beats(210), window);
        assert_eq!(coverage.start_at_first_heartbeat(), None);
        assert_eq!(coverage.class(0), OutcomeClass::Partial);
    }

    #[test]
    fn a_question_past_the_data_is_partial() {
        // A tail heartbeat a minute old with a 10 s interval: covered 20 s past it.
        let stale = Coverage::new(
            window(NOW),
            vec![read(NOW - 70 * SECOND)],
            beat(NOW - 60 * SECOND, true),
            NOW,
        );
        assert_eq!(stale.covered_until, Some(NOW - 40 * SECOND));
        assert_eq!(stale.class(0), OutcomeClass::Partial);
        assert!(
            stale.gaps()[0].contains("reaches only"),
            "{:?}",
            stale.gaps()
        );
        // The same data answers an older window in full.
        let older = Coverage::new(
            window(NOW - 50 * SECOND),
            stale.sources.clone(),
            beat(NOW - 60 * SECOND, true),
            NOW,
        );
        assert_eq!(older.class(0), OutcomeClass::Empty);
        // A table's heartbeat gets no slack: the table may end right after it.
        let table = Coverage::new(
            window(NOW - 55 * SECOND),
            stale.sources.clone(),
            beat(NOW - 60 * SECOND, false),
            NOW,
        );
        assert_eq!(table.covered_until, Some(NOW - 60 * SECOND));
        assert_eq!(table.class(0), OutcomeClass::Partial);
        // Without a heartbeat nothing is known, however new the rows.
        let rows_only = Coverage::new(window(NOW - 3_600 * SECOND), vec![read(NOW)], None, NOW);
        assert_eq!(rows_only.class(1), OutcomeClass::Partial);
        assert!(rows_only.gaps()[0].contains("no collector heartbeat"));
        // A heartbeat dated in the future covers nothing past now.
        let ahead = Coverage::new(
            window(NOW + 60 * SECOND),
            vec![read(NOW)],
            beat(NOW + 3_600 * SECOND, true),
            NOW,
        );
        assert_eq!(ahead.covered_until, Some(NOW));
        assert_eq!(ahead.class(1), OutcomeClass::Partial);
        // Without a window the question reaches now: a table read alone falls short of it.
        let sql = Coverage::new(None, vec![read(0)], beat(NOW - 30 * SECOND, false), NOW);
        assert_eq!(sql.class(1), OutcomeClass::Partial);
        let live = Coverage::new(None, vec![read(0)], beat(NOW - 5 * SECOND, true), NOW);
        assert_eq!(live.class(1), OutcomeClass::Success);
    }

    /// Exports at `times` (seconds) without an export heartbeat, concerning the question.
    fn points(service: &str, instance: &str, times: &[Micros]) -> Vec<Export> {
        declaring(service, instance, times, None)
    }

    /// Exports at `times` (seconds), each declaring `interval` (seconds).
    fn declaring(
        service: &str,
        instance: &str,
        times: &[Micros],
        interval: Option<Micros>,
    ) -> Vec<Export> {
        times
            .iter()
            .map(|&at| Export {
                service: service.to_owned(),
                instance: instance.to_owned(),
                seen_by: SeenBy::Adapter,
                at: at * SECOND,
                interval: interval.map(|seconds| seconds * SECOND),
                concerned: true,
            })
            .collect()
    }

    #[test]
    fn a_declared_interval_is_believed_over_the_spacing() {
        // Four quick exports that declare 10 s: at 20 s the instance is not late yet.
        let quick = declaring("shop", "a", &[0, 1, 2, 3], Some(10));
        assert!(instance_silences(&quick, span(0, 60), 20 * SECOND).is_empty());
        let silent = instance_silences(&quick, span(0, 60), 40 * SECOND);
        assert_eq!(silent.len(), 1);
        assert_eq!((silent[0].from, silent[0].every), (3 * SECOND, 10 * SECOND));
        // Without the declaration the spacing (1 s) is all there is.
        let undeclared = points("shop", "a", &[0, 1, 2, 3]);
        assert_eq!(
            instance_silences(&undeclared, span(0, 60), 20 * SECOND).len(),
            1
        );
    }

    #[test]
    fn an_instance_whose_last_export_said_final_is_stopped_not_silent() {
        let mut exports = declaring("shop", "a", &[0, 10, 20, 30], Some(10));
        exports.extend(declaring("shop", "a", &[35], Some(0)));
        assert!(instance_silences(&exports, span(0, 600), 600 * SECOND).is_empty());
        // Started again under the same id later: the stopped stretch is not a silence, and
        // a silence after its new last export is.
        exports.extend(declaring("shop", "a", &[300, 310, 320], Some(10)));
        let silent = instance_silences(&exports, span(0, 600), 600 * SECOND);
        assert_eq!(
            silent
                .iter()
                .map(|s| (s.from / SECOND, s.to / SECOND))
                .collect::<Vec<_>>(),
            vec![(320, 600)]
        );
    }

    #[test]
    fn only_instances_the_question_concerns_are_judged() {
        let mut exports = points("shop", "a", &[0, 10, 20, 30]);
        for export in &mut exports {
            export.concerned = false;
        }
        assert!(instance_silences(&exports, span(0, 200), 200 * SECOND).is_empty());
        // One concerned point makes the whole instance judged, by all its exports.
        exports[0].concerned = true;
        assert_eq!(
            instance_silences(&exports, span(0, 200), 200 * SECOND).len(),
            1
        );
    }

    #[test]
    fn a_sender_seen_by_its_spans_is_judged_by_their_spacing_and_named_so() {
        // Senders' heartbeats every 10 s until 100 s: silent from then to what is known.
        let beats: Vec<Micros> = (0..=10).map(|n| n * 10).collect();
        let mut exports = points("agent", "web-1/4242", &beats);
        for export in &mut exports {
            export.seen_by = SeenBy::Spans;
        }
        let silent = instance_silences(&exports, span(50, 300), 200 * SECOND);
        assert_eq!(
            silent
                .iter()
                .map(|s| (s.seen_by, s.from / SECOND, s.to / SECOND, s.every / SECOND))
                .collect::<Vec<_>>(),
            vec![(SeenBy::Spans, 100, 200, 10)]
        );
        let mut coverage = Coverage::new(Some(span(50, 300)), Vec::new(), None, 300 * SECOND);
        coverage.silent_instances = silent;
        assert!(
            coverage.gaps().iter().any(|gap| gap.starts_with(
                "instance web-1/4242 of service agent sent no span or other telemetry"
            )),
            "{:?}",
            coverage.gaps()
        );
    }

    fn span(since: Micros, until: Micros) -> Window {
        Window {
            since: since * SECOND,
            until: until * SECOND,
        }
    }

    #[test]
    fn an_instance_that_stops_reporting_is_silent_from_its_last_point_to_what_is_known() {
        // Every 10 s until 100 s, then nothing; the pipeline is known up to 200 s.
        let beats: Vec<Micros> = (0..=10).map(|n| n * 10).collect();
        let silent = instance_silences(&points("shop", "a", &beats), span(50, 300), 200 * SECOND);
        assert_eq!(
            silent,
            vec![InstanceSilence {
                service: "shop".into(),
                instance: "a".into(),
                seen_by: SeenBy::Adapter,
                from: 100 * SECOND,
                to: 200 * SECOND,
                every: 10 * SECOND,
            }]
        );
        // Within three intervals of its last point it is not silent yet.
        assert!(
            instance_silences(&points("shop", "a", &beats), span(50, 300), 130 * SECOND).is_empty()
        );
    }

    #[test]
    fn a_gap_between_points_inside_the_window_is_a_silence_and_one_outside_is_not() {
        let beats = [0, 10, 20, 30, 90, 100, 110, 120];
        let all = points("shop", "a", &beats);
        let silent = instance_silences(&all, span(0, 120), 120 * SECOND);
        assert_eq!(
            silent
                .iter()
                .map(|s| (s.from / SECOND, s.to / SECOND))
                .collect::<Vec<_>>(),
            vec![(30, 90)]
        );
        assert!(instance_silences(&all, span(95, 120), 120 * SECOND).is_empty());
    }

    #[test]
    fn a_new_instance_of_the_service_ends_the_silence_of_the_one_it_replaced() {
        let mut all = points("shop", "old", &[0, 10, 20, 30]);
        all.extend(points("shop", "new", &[40, 50, 60, 70, 80]));
        assert!(instance_silences(&all, span(0, 80), 80 * SECOND).is_empty());
        // A replacement that came late leaves the stretch before it unknown.
        let mut all = points("shop", "old", &[0, 10, 20, 30]);
        all.extend(points("shop", "new", &[100, 110, 120, 130]));
        let silent = instance_silences(&all, span(0, 130), 130 * SECOND);
        assert_eq!(
            silent
                .iter()
                .map(|s| (s.instance.as_str(), s.from / SECOND, s.to / SECOND))
                .collect::<Vec<_>>(),
            vec![("old", 30, 100)]
        );
        // A sibling that was already running does not end it.
        let mut all = points("shop", "cut", &[0, 10, 20, 30]);
        all.extend(points(
            "shop",
            "sibling",
            &[0, 10, 20, 30, 40, 50, 60, 70, 80],
        ));
        let silent = instance_silences(&all, span(0, 80), 80 * SECOND);
        assert_eq!(silent.len(), 1);
        assert_eq!(silent[0].instance, "cut");
    }

    #[test]
    fn an_instance_with_one_point_has_no_interval_and_is_not_judged() {
        assert!(
            instance_silences(&points("shop", "a", &[5]), span(0, 3600), 3600 * SECOND).is_empty()
        );
    }

    #[test]
    fn a_silent_instance_makes_the_answer_partial_and_is_named() {
        let mut coverage = Coverage::new(
            window(NOW),
            vec![SourceReport::read(
                "table outcome_counts",
                None,
                Some(1),
                String::new(),
            )],
            Some(Heartbeat {
                at: NOW,
                interval: SECOND,
                from_tail: false,
            }),
            NOW,
        );
        assert_eq!(coverage.class(0), OutcomeClass::Empty);
        coverage.silent_instances.push(InstanceSilence {
            service: "shop".into(),
            instance: "shop-7".into(),
            seen_by: SeenBy::Adapter,
            from: NOW - 60 * SECOND,
            to: NOW,
            every: 10 * SECOND,
        });
        assert_eq!(coverage.class(0), OutcomeClass::Partial);
        assert!(
            coverage
                .gaps()
                .iter()
                .any(|gap| gap.contains("adapter instance shop-7 of service shop"))
        );
    }
}
