//! `rates` and `spikes`: the silent-failure rate of each group over a window, from the counter
//! and the terminal failure events.
//!
//! A group is also told apart by its source: what adapters declared (`adapter`) and what was
//! derived from standard spans (`genai`, `mcp`, `http`) are separate rows, unless the question
//! merges them (its source is then `all`). Internally a group's key is its source's label, a NUL
//! and its value ([`group_key`]); the label has no NUL, so the key splits back unambiguously.

use std::collections::BTreeMap;
use std::time::Duration;

use candor_records::proto::{OutcomeSource, Sampling};
use candor_schema::OutcomeClass;
use deltalake::datafusion::common::runtime::SpawnedTask;
use deltalake::datafusion::error::DataFusionError;

use crate::rates::{self, Buckets, ClassCounts, Point, SpikeRule};
use crate::reader::Reader;
use crate::window::{Micros, Window, micros_of, rfc3339};

use super::rows::{RateBound, RatesRow, SpikeRates, SpikeRow};
use super::{CommandError, Filters, GroupBy, read};

mod points;
mod terminal;

pub(super) use points::points;
use terminal::{count_failure_events, failure_events, failure_events_frame};

/// The parameters of `rates`.
#[derive(Debug, Clone)]
pub struct RatesQuery {
    /// The window.
    pub window: Window,
    /// Grouping.
    pub by: GroupBy,
    /// Bucket width; `None` for one bucket.
    pub step: Option<Duration>,
    /// How far before the window to look for a cumulative series' baseline point.
    pub lookback: Duration,
    /// Filters.
    pub filters: Filters,
    /// Count declared and derived calls of a group together.
    pub merge_sources: bool,
}

/// Rates and their notes.
#[derive(Debug, Clone, PartialEq)]
pub struct RatesAnswer {
    /// What the rows are grouped by, which names their group's column.
    pub by: GroupBy,
    /// One row per group and bucket.
    pub rows: Vec<RatesRow>,
    /// What the reader should know (series without a baseline, ignored points).
    pub notes: Vec<String>,
}

/// Spikes and their notes.
#[derive(Debug, Clone, PartialEq)]
pub struct SpikesAnswer {
    /// The targets whose rate rose, the steepest first, then those with many failure events but
    /// no call counts.
    pub rows: Vec<SpikeRow>,
    /// What the reader should know (short baselines, targets without call counts).
    pub notes: Vec<String>,
}

/// The label of a group's source in its key and in answers: `all` when sources are merged.
fn source_label(source: OutcomeSource, merge: bool) -> &'static str {
    if merge { MERGED } else { source.as_str() }
}

/// The source label of merged groups.
const MERGED: &str = "all";

/// The key of a group: its source's label, a NUL, its value.
pub(crate) fn group_key(label: &str, value: &str) -> String {
    format!("{label}\u{0}{value}")
}

/// A group key's (source label, value).
pub(crate) fn split_group(key: &str) -> (&str, &str) {
    key.split_once('\u{0}').unwrap_or(("", key))
}

/// The source a row names: `adapter` for a row written before sources were told apart (empty or
/// null); `None` for a name outside the closed set, which readers refuse before it is stored.
fn source_named(name: &str) -> Option<OutcomeSource> {
    if name.is_empty() {
        return Some(OutcomeSource::Adapter);
    }
    OutcomeSource::from_bytes(name.as_bytes())
}

/// `candor rates`.
pub async fn rates(reader: &Reader, query: &RatesQuery) -> Result<RatesAnswer, CommandError> {
    let step = query.step.map(micros_of);
    let buckets = Buckets {
        since: query.window.since,
        until: query.window.until,
        step,
    };
    let lookback_since = query.window.since.saturating_sub(micros_of(query.lookback));
    // The failure events are counted on a task of their own while this one reads the counter
    // points: the two reads share nothing, and each leaves a core idle part of the time. The
    // task is aborted if this answer is dropped before it finishes.
    let merge = query.merge_sources;
    let events_frame =
        failure_events_frame(reader, buckets, query.by, &query.filters, None).await?;
    let events_task = SpawnedTask::spawn(count_failure_events(events_frame, buckets, merge));
    let (points, unspecified, sampling) = points(
        reader,
        lookback_since,
        query.window,
        query.by,
        &query.filters,
        merge,
    )
    .await?;
    let increases = rates::increases(&points, buckets);
    // A panic in the task resumes here, as it would have had the count run on this task.
    let events = events_task
        .join_unwind()
        .await
        .map_err(|err| read(DataFusionError::External(Box::new(err))))??;
    let found = rates::rate_rows(&increases, &events, buckets);
    let mut rows = Vec::with_capacity(found.len());
    let mut missing = 0usize;
    let mut lower_bounds = 0usize;
    let (mut weighted, mut sampling_unknown) = (0usize, 0usize);
    for row in &found {
        let (label, group) = split_group(&row.group);
        let denominator = row.denominator();
        if denominator == rates::Denominator::Missing {
            missing += 1;
        }
        let rate = row.rate();
        let bound = rate_bound(row.counts.as_ref(), rate.is_some());
        if bound == Some(RateBound::LowerBound) {
            lower_bounds += 1;
        }
        let sampled = sampling
            .get(row.group.as_str())
            .and_then(|seen| seen.state());
        match sampled {
            Some(Sampling::Unknown) => sampling_unknown += 1,
            Some(Sampling::Weighted) => weighted += 1,
            None => {}
        }
        rows.push(RatesRow {
            group: group.to_owned(),
            source: label.to_owned(),
            bucket_start: row.bucket_start,
            bucket_end: row.bucket_end,
            counts: row.counts,
            silent_failure_rate: rate,
            rate_bound: bound,
            sampling: sampled,
            denominator,
            failure_events: row.failure_events,
        });
    }
    let mut notes = Vec::new();
    if lower_bounds > 0 {
        notes.push(lower_bound_note(lower_bounds));
    }
    if sampling_unknown > 0 {
        notes.push(format!(
            "{sampling_unknown} row(s) count derived calls from spans whose sampling is unknown \
             (sampling = unknown): they count the spans the senders kept; a head sampler's \
             left-out calls are not in them, and a tail sampler that keeps failures makes their \
             failure share too high"
        ));
    }
    if weighted > 0 {
        notes.push(format!(
            "{weighted} row(s) count derived calls weighted by their spans' sampling thresholds \
             (sampling = weighted): estimates of the calls made, each kept span standing for the \
             inverse of its sampling probability"
        ));
    }
    if missing > 0 {
        notes.push(format!(
            "{missing} row(s) have failure events but no call counts (denominator missing): their \
             rate is unknown, not 0 %; the adapter's tool.outcomes counter did not reach the table \
             for them"
        ));
    }
    if increases.series_without_baseline > 0 {
        notes.push(format!(
            "{} counter series had no point before the window (lookback {}): their first point \
             only served as a baseline, so calls before it are not counted; a longer --lookback \
             may find one",
            increases.series_without_baseline,
            humantime::format_duration(query.lookback)
        ));
    }
    if unspecified > 0 {
        notes.push(format!(
            "{unspecified} counter point(s) were left out: their temporality is unspecified, or \
             their class or source is one this reader does not know"
        ));
    }
    Ok(RatesAnswer {
        by: query.by,
        rows,
        notes,
    })
}

/// What a rate is: exact, or a lower bound when some of its calls are unverified (derived calls
/// without error, any of which may have been partial); `None` without a rate.
fn rate_bound(counts: Option<&ClassCounts>, rated: bool) -> Option<RateBound> {
    let counts = counts.filter(|_| rated)?;
    Some(if counts.lower_bound() {
        RateBound::LowerBound
    } else {
        RateBound::Exact
    })
}

fn lower_bound_note(rows: usize) -> String {
    format!(
        "{rows} row(s) count calls derived from standard spans (GenAI, MCP, HTTP client): a call \
         without error is unverified, since its span cannot tell a whole answer from an empty or \
         a partial one, so their rate is a lower bound (rate_bound = lower_bound); only an \
         adapter declares partial answers"
    )
}

/// The parameters of `spikes`.
#[derive(Debug, Clone)]
pub struct SpikesQuery {
    /// The end of the window (now by default).
    pub until: Micros,
    /// The recent window.
    pub window: Duration,
    /// The baseline before it.
    pub baseline: Duration,
    /// Factor and floor.
    pub rule: SpikeRule,
    /// How far before the baseline to look for baseline points.
    pub lookback: Duration,
    /// Filters.
    pub filters: Filters,
    /// Count declared and derived calls of a target together.
    pub merge_sources: bool,
}

/// `candor spikes`: the window covered is baseline + window.
pub async fn spikes(reader: &Reader, query: &SpikesQuery) -> Result<SpikesAnswer, CommandError> {
    let window_start = query.until.saturating_sub(micros_of(query.window));
    let baseline_start = window_start.saturating_sub(micros_of(query.baseline));
    let whole = Window {
        since: baseline_start,
        until: query.until,
    };
    let lookback_since = baseline_start.saturating_sub(micros_of(query.lookback));
    let merge = query.merge_sources;
    let (points, _, _) = points(
        reader,
        lookback_since,
        whole,
        GroupBy::Target,
        &query.filters,
        merge,
    )
    .await?;
    let mut without_baseline = 0;
    let mut per_target = |points: &[Point], since, until| -> BTreeMap<String, ClassCounts> {
        let increases = rates::increases(
            points,
            Buckets {
                since,
                until,
                step: None,
            },
        );
        without_baseline += increases.series_without_baseline;
        increases
            .buckets
            .into_iter()
            .map(|((target, _), counts)| (target, counts))
            .collect()
    };
    let recent = per_target(&points, window_start, query.until);
    let before = per_target(&points, baseline_start, window_start);
    let found = rates::spikes(&recent, &before, query.rule);
    // A spike's baseline is only as long as the target's counter history.
    let mut first_point: BTreeMap<&str, Micros> = BTreeMap::new();
    for point in &points {
        let first = first_point.entry(&point.group).or_insert(point.time);
        *first = (*first).min(point.time);
    }
    let short_baselines: Vec<String> = found
        .iter()
        .filter_map(|spike| {
            let first = *first_point.get(spike.target.as_str())?;
            let (label, target) = split_group(&spike.target);
            (first > baseline_start)
                .then(|| format!("{target} [{label}] (from {})", rfc3339(first)))
        })
        .collect();
    let mut rows = Vec::with_capacity(found.len());
    let mut lower_bounds = 0usize;
    for spike in &found {
        let (label, target) = split_group(&spike.target);
        if recent
            .get(&spike.target)
            .is_some_and(ClassCounts::lower_bound)
        {
            lower_bounds += 1;
        }
        rows.push(SpikeRow {
            target: target.to_owned(),
            source: label.to_owned(),
            window_access_failures: spike.window_failures,
            rates: Some(SpikeRates {
                window_calls: spike.window_calls,
                window_rate: spike.window_rate,
                baseline_access_failures: spike.baseline_failures,
                baseline_calls: spike.baseline_calls,
                baseline_rate: spike.baseline_rate,
                factor: spike.factor,
            }),
        });
    }
    // A target that failed often but has no call counts cannot be given a rate; it is listed
    // with its failure events, never left out.
    let window_buckets = Buckets {
        since: window_start,
        until: query.until,
        step: None,
    };
    let events = failure_events(
        reader,
        window_buckets,
        GroupBy::Target,
        &query.filters,
        Some(OutcomeClass::AccessFailure),
        merge,
    )
    .await?;
    let mut uncounted = Vec::new();
    for ((key, _), failures) in events {
        if failures >= query.rule.min_events && !recent.contains_key(&key) {
            let (label, target) = split_group(&key);
            rows.push(SpikeRow {
                target: target.to_owned(),
                source: label.to_owned(),
                window_access_failures: failures,
                rates: None,
            });
            uncounted.push(format!("{target} [{label}]"));
        }
    }
    let mut notes = Vec::new();
    if lower_bounds > 0 {
        notes.push(lower_bound_note(lower_bounds));
    }
    if !uncounted.is_empty() {
        notes.push(format!(
            "{} target(s) had at least {} terminal AccessFailure events in the window but no call \
             counts, so their rate is unknown: {}",
            uncounted.len(),
            query.rule.min_events,
            uncounted.join(", ")
        ));
    }
    if !short_baselines.is_empty() {
        notes.push(format!(
            "the baseline of these spikes is shorter than asked, since their counters begin inside \
             it: {}",
            short_baselines.join(", ")
        ));
    }
    if without_baseline > 0 {
        notes.push(format!(
            "{without_baseline} counter series had no point before their window (lookback {}): \
             calls before their first point are not counted",
            humantime::format_duration(query.lookback)
        ));
    }
    Ok(SpikesAnswer { rows, notes })
}
