//! `operations`: the asynchronous operations that were accepted and have not ended, from the
//! `tool.lifecycle` events of `operation_events`.
//!
//! An operation is one (service, tool, target, operation id). Its state is the one of its latest
//! event in the window ([`fold`]); it is open while that state is not terminal. An open
//! operation is `unknown` when the adapter instance that sent its latest event went silent after
//! it (nobody was left to report its end), else `stuck` once it has been open for `--stuck-after`,
//! else `pending` ([`status`]).
//!
//! Beside the share of operations that never completed, the answer gives the silent-failure rate
//! of the calls adapters counted over the same window and filters, (partial + access_failure) /
//! calls from the `tool.outcomes` counter points, as the `adapter` rows of `candor rates` give
//! it ([`adapter_calls`]); unknown, never 0 %, when no call was counted or the counts could not
//! be read.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::time::Duration;

use candor_records::proto::OutcomeSource;
use candor_records::tables::{Table, column};
use candor_schema::LifecycleState;
use deltalake::arrow::array::{Array as _, RecordBatch};
use deltalake::arrow::datatypes::DataType;
use deltalake::datafusion::logical_expr::cast as cast_expr;
use deltalake::datafusion::prelude::col;
use serde::Serialize;

use crate::coverage::{Coverage, InstanceSilence, SourceState};
use crate::rates::{self, Buckets, ClassCounts, Point};
use crate::reader::{Reader, table_source};
use crate::window::{Micros, Window, micros_of};

use super::failure_rates::{self, split_group};
use super::rows::OperationRow;
use super::{CommandError, Filters, GroupBy, ints, read, strings, texts, window_filter};

/// The parameters of `operations`.
#[derive(Debug, Clone)]
pub struct OperationsQuery {
    /// Operation events with a time in this window are read.
    pub window: Window,
    /// An open operation first seen at least this long before the window's end (or now) is stuck.
    pub stuck_after: Duration,
    /// Filters.
    pub filters: Filters,
}

/// The open operations, with the figures of every operation seen.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationsAnswer {
    /// One row per open operation, the oldest first.
    pub rows: Vec<OperationRow>,
    /// The figures, for a person.
    pub summary: Vec<String>,
    /// What the reader should know (events left out, operations that may be older than shown).
    pub notes: Vec<String>,
    /// Why nothing about operations could be read (the table is missing, say): the answer is
    /// an access failure, never "no open operations", when this is set.
    pub failure: Option<String>,
    /// The figures.
    pub totals: OperationTotals,
}

/// The columns of `operations`' rows: the fields of [`OperationRow`].
pub const OPERATIONS_COLUMNS: [&str; 12] = [
    "service",
    "instance",
    "tool",
    "target",
    column::OPERATION_ID,
    "state",
    "first_seen",
    "last_seen",
    "age",
    column::ACTOR,
    column::SOURCE_SYSTEM,
    "status",
];

/// One row of `operation_events`, as the judgement needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationEventRow {
    /// The operation it is an event of.
    pub key: OperationKey,
    /// `service_instance_id`.
    pub instance: String,
    /// `lifecycle_state`.
    pub state: LifecycleState,
    /// `event_time`.
    pub at: Micros,
    /// `actor`, when the event has one.
    pub actor: Option<String>,
    /// `source_system`.
    pub source_system: String,
}

/// What identifies an operation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OperationKey {
    /// `service_name`.
    pub service: String,
    /// `tool_name`.
    pub tool: String,
    /// `tool_target`.
    pub target: String,
    /// `operation_id`.
    pub operation_id: String,
}

/// One operation, folded from its events in the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// Which operation.
    pub key: OperationKey,
    /// The state of its latest event.
    pub state: LifecycleState,
    /// The state of its first event in the window.
    pub first_state: LifecycleState,
    /// The time of its first event in the window.
    pub first_seen: Micros,
    /// The time of its latest event.
    pub last_seen: Micros,
    /// The adapter instance that sent its latest event.
    pub instance: String,
    /// The actor of its latest event that names one.
    pub actor: Option<String>,
    /// The source system of its latest event.
    pub source_system: String,
    /// The time of the event `actor` came from.
    actor_at: Micros,
}

impl Operation {
    /// The operation of its first event.
    pub fn of(event: OperationEventRow) -> Self {
        Self {
            key: event.key,
            state: event.state,
            first_state: event.state,
            first_seen: event.at,
            last_seen: event.at,
            instance: event.instance,
            actor_at: event.at,
            actor: event.actor,
            source_system: event.source_system,
        }
    }

    /// Takes in one more of its events; of two, the state that wins is the one [`fold`]
    /// describes.
    pub fn add(&mut self, event: OperationEventRow) {
        if (event.at, event.state) < (self.first_seen, self.first_state) {
            self.first_seen = event.at;
            self.first_state = event.state;
        }
        if let Some(actor) = &event.actor {
            let later = match &self.actor {
                Some(known) => (event.at, actor) > (self.actor_at, known),
                None => true,
            };
            if later {
                self.actor_at = event.at;
                self.actor = Some(actor.clone());
            }
        }
        let newer = (
            event.at,
            event.state.is_terminal(),
            event.state,
            event.instance.as_str(),
            event.source_system.as_str(),
        ) > (
            self.last_seen,
            self.state.is_terminal(),
            self.state,
            self.instance.as_str(),
            self.source_system.as_str(),
        );
        if newer {
            self.last_seen = event.at;
            self.state = event.state;
            self.instance = event.instance;
            self.source_system = event.source_system;
        }
    }

    /// Whether it has not ended: its latest state is not terminal.
    pub fn is_open(&self) -> bool {
        !self.state.is_terminal()
    }
}

/// Operations folded from their events ([`fold`]), by key; the keys are strings written by the
/// collector, so a fast hasher suffices.
type Folded = HashMap<OperationKey, Operation, foldhash::fast::FixedState>;

/// Takes `event` into the operations folded so far: it starts its operation when it is the first
/// of it, else it is added to it ([`Operation::add`]).
///
/// Folded in any order, every operation ends with its latest state: that of its event with the
/// greatest time. Of two events at the same time a terminal state wins, and of two terminal ones
/// the later in the vocabulary's order (failed over cancelled over completed over partial), so
/// that a completion contradicted by a failure at the same instant is not taken for one; of two
/// open ones the further along (running over queued over accepted). Copies of an event count
/// once, as any event does: they agree.
pub fn fold<S: BuildHasher>(
    operations: &mut HashMap<OperationKey, Operation, S>,
    event: OperationEventRow,
) {
    match operations.get_mut(&event.key) {
        Some(operation) => operation.add(event),
        None => {
            operations.insert(event.key.clone(), Operation::of(event));
        }
    }
}

/// What is known of an open operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpenStatus {
    /// Open for less than `--stuck-after`.
    Pending,
    /// Open for `--stuck-after` or longer, while its adapter instance was reporting.
    Stuck,
    /// Its adapter instance went silent after its latest event: nobody was left to report its
    /// end, so whether it ended is unknown (it is not called stuck).
    Unknown,
}

impl OpenStatus {
    /// The spelling in answers.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Stuck => "stuck",
            Self::Unknown => "unknown",
        }
    }
}

/// The status of `operation`, `None` when it has ended.
///
/// It is [`OpenStatus::Unknown`] when one of `silences` is of the service and instance that sent
/// its latest event and starts at or after that event, or runs to `known_until` (the end of what
/// is known: the silence's end when the instance never came back). Otherwise it is
/// [`OpenStatus::Stuck`] when `end` (the window's end, or now) is at least `stuck_after` after it
/// was first seen, else [`OpenStatus::Pending`].
pub fn status(
    operation: &Operation,
    silences: &[InstanceSilence],
    known_until: Micros,
    end: Micros,
    stuck_after: Micros,
) -> Option<OpenStatus> {
    if !operation.is_open() {
        return None;
    }
    let silent_after = silences.iter().any(|silence| {
        silence.service == operation.key.service
            && silence.instance == operation.instance
            && (silence.from >= operation.last_seen || silence.to >= known_until)
    });
    Some(if silent_after {
        OpenStatus::Unknown
    } else if end.saturating_sub(operation.first_seen) >= stuck_after {
        OpenStatus::Stuck
    } else {
        OpenStatus::Pending
    })
}

/// The figures of the operations seen, and the silent-failure rate of the calls counted beside
/// them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct OperationTotals {
    /// Operations seen in the window.
    pub seen: u64,
    /// Whose latest state is `completed`.
    pub completed: u64,
    /// Whose latest state is `partial`.
    pub partial: u64,
    /// Whose latest state is `cancelled`.
    pub cancelled: u64,
    /// Whose latest state is `failed`.
    pub failed: u64,
    /// Open and [`OpenStatus::Pending`].
    pub pending: u64,
    /// Open and [`OpenStatus::Stuck`].
    pub stuck: u64,
    /// Open and [`OpenStatus::Unknown`].
    pub unknown: u64,
    /// The silent-failure rate of the calls adapters counted over the window, with the same
    /// filters: (partial + access_failure) / calls from the `tool.outcomes` counter points (those
    /// of source `adapter`), as `candor rates` gives it. `None` when no call was counted or the
    /// counts could not be read: unknown, not 0.
    pub silent_failure_rate: Option<f64>,
    /// The calls [`OperationTotals::silent_failure_rate`] was computed over; 0 without a rate.
    pub counted_calls: u64,
}

impl OperationTotals {
    /// Operations not ended.
    pub fn open(&self) -> u64 {
        self.pending + self.stuck + self.unknown
    }

    /// Operations seen whose latest state is not `completed`: ended otherwise, or still open.
    pub fn not_completed(&self) -> u64 {
        self.seen.saturating_sub(self.completed)
    }

    /// [`OperationTotals::not_completed`] / [`OperationTotals::seen`], when any was seen.
    pub fn never_completed_rate(&self) -> Option<f64> {
        // u64 → f64 loses precision only past 2^53 operations.
        (self.seen > 0).then(|| self.not_completed() as f64 / self.seen as f64)
    }

    /// These totals with the silent-failure rate of `calls`, the calls adapters counted over the
    /// window; `None` when they could not be read.
    pub fn with_calls(self, calls: Option<&ClassCounts>) -> Self {
        let counted_calls = calls.map_or(0, ClassCounts::calls);
        Self {
            // u64 → f64 loses precision only past 2^53 calls.
            silent_failure_rate: calls
                .filter(|_| counted_calls > 0)
                .map(|calls| calls.silent_failures() as f64 / counted_calls as f64),
            counted_calls,
            ..self
        }
    }
}

/// The calls adapters counted (source `adapter`: the `tool.outcomes` counter) in `window`, every
/// service, tool and target summed, from `points` (those of [`failure_rates::points`], which may
/// begin before the window: a cumulative series' baseline); and how many of their series had
/// no point before the window, whose calls before their first point are not counted.
///
/// Calls derived from standard spans are left out: they are counted by the collector, not by
/// `tool.outcomes`, and can be neither partial nor the calls of an operation.
pub fn adapter_calls(mut points: Vec<Point>, window: Window) -> (ClassCounts, u64) {
    let adapter = OutcomeSource::Adapter.as_str();
    points.retain(|point| split_group(&point.group).0 == adapter);
    let increases = rates::increases(
        &points,
        Buckets {
            since: window.since,
            until: window.until,
            step: None,
        },
    );
    let mut sum = ClassCounts::default();
    for counts in increases.buckets.values() {
        // Every field named, so that a class added to the counts is not left out of the sum.
        let ClassCounts {
            success,
            empty,
            partial,
            access_failure,
            unverified,
            cancelled,
            accepted,
        } = *counts;
        for (total, more) in [
            (&mut sum.success, success),
            (&mut sum.empty, empty),
            (&mut sum.partial, partial),
            (&mut sum.access_failure, access_failure),
            (&mut sum.unverified, unverified),
            (&mut sum.cancelled, cancelled),
            (&mut sum.accepted, accepted),
        ] {
            *total = total.saturating_add(more);
        }
    }
    (sum, increases.series_without_baseline)
}

/// The totals of operations with their statuses ([`status`]).
pub fn totals<'a>(
    judged: impl IntoIterator<Item = (&'a Operation, Option<OpenStatus>)>,
) -> OperationTotals {
    let mut totals = OperationTotals::default();
    for (operation, status) in judged {
        totals.seen += 1;
        let slot = match (status, operation.state) {
            (Some(OpenStatus::Pending), _) => &mut totals.pending,
            (Some(OpenStatus::Stuck), _) => &mut totals.stuck,
            (Some(OpenStatus::Unknown), _) => &mut totals.unknown,
            (None, LifecycleState::Completed) => &mut totals.completed,
            (None, LifecycleState::Partial) => &mut totals.partial,
            (None, LifecycleState::Cancelled) => &mut totals.cancelled,
            (None, LifecycleState::Failed) => &mut totals.failed,
            // Not judged although open: counted as pending, never as ended.
            (None, LifecycleState::Accepted | LifecycleState::Queued | LifecycleState::Running) => {
                &mut totals.pending
            }
        };
        *slot += 1;
    }
    totals
}

/// The summary lines of `totals`; none when no operation was seen. `counts_read` says whether
/// the calls counted could be read: without a silent-failure rate, it tells "no call was
/// counted" from "unknown".
pub fn summary(totals: &OperationTotals, stuck_after: Duration, counts_read: bool) -> Vec<String> {
    let Some(rate) = totals.never_completed_rate() else {
        return Vec::new();
    };
    let calls = "silent-failure rate of the calls adapters counted (tool.outcomes)";
    let calls = match totals.silent_failure_rate {
        Some(calls_rate) => format!(
            "{calls}: {:.1} % of {} call(s), (partial + access_failure) / calls",
            calls_rate * 100.0,
            totals.counted_calls
        ),
        None if counts_read => {
            format!("{calls}: unknown, not 0 %: no call was counted in the window")
        }
        None => format!("{calls}: unknown, not 0 %: the counts could not be read (see the notes)"),
    };
    vec![
        format!(
            "operations seen: {}; ended: {} {}, {} {}, {} {}, {} {}; open: {} pending, {} stuck \
             (open for {} or longer), {} unknown (their adapter instance went silent after their \
             last event, so their end would not have been seen)",
            totals.seen,
            totals.completed,
            LifecycleState::Completed.as_str(),
            totals.partial,
            LifecycleState::Partial.as_str(),
            totals.cancelled,
            LifecycleState::Cancelled.as_str(),
            totals.failed,
            LifecycleState::Failed.as_str(),
            totals.pending,
            totals.stuck,
            humantime::format_duration(stuck_after),
            totals.unknown
        ),
        format!(
            "never completed: {} of {} operations ({:.1} %): ended {}, {} or {}, or still open; \
             {calls}",
            totals.not_completed(),
            totals.seen,
            rate * 100.0,
            LifecycleState::Partial.as_str(),
            LifecycleState::Cancelled.as_str(),
            LifecycleState::Failed.as_str()
        ),
    ]
}

/// Why nothing about operations could be read, when the `operation_events` table could not be
/// opened: a deployment whose compactor predates operation events has no such table, and its
/// answer is "unknown", never "no open operations".
pub fn missing_table(coverage: &Coverage) -> Option<String> {
    unreachable_reason(coverage, Table::OperationEvents).map(|reason| {
        format!(
            "the {} table could not be read ({reason}), so which operations are open is \
             unknown, not none; a deployment whose compactor predates operation events has no \
             such table",
            Table::OperationEvents.name()
        )
    })
}

/// Why `table` could not be read at all, when the coverage says so.
fn unreachable_reason(coverage: &Coverage, table: Table) -> Option<&str> {
    let name = table_source(table);
    coverage
        .sources
        .iter()
        .find_map(|source| match &source.state {
            SourceState::Unreachable { reason } if source.name == name => Some(reason.as_str()),
            _ => None,
        })
}

/// An age in whole seconds.
fn whole_seconds(age: Micros) -> Duration {
    Duration::from_secs(u64::try_from(age.max(0) / 1_000_000).unwrap_or(0))
}

/// The rows of the open operations of `judged`, the oldest (first seen) first; `end` is what
/// their age runs to.
pub fn open_rows(judged: &[(Operation, Option<OpenStatus>)], end: Micros) -> Vec<OperationRow> {
    let mut open: Vec<(&Operation, OpenStatus)> = judged
        .iter()
        .filter_map(|(operation, status)| status.map(|status| (operation, status)))
        .collect();
    open.sort_by(|(a, _), (b, _)| (a.first_seen, &a.key).cmp(&(b.first_seen, &b.key)));
    open.into_iter()
        .map(|(operation, status)| OperationRow {
            service: operation.key.service.clone(),
            instance: operation.instance.clone(),
            tool: operation.key.tool.clone(),
            target: operation.key.target.clone(),
            operation_id: operation.key.operation_id.clone(),
            state: operation.state,
            first_seen: operation.first_seen,
            last_seen: operation.last_seen,
            age: whole_seconds(end.saturating_sub(operation.first_seen)),
            actor: operation.actor.clone(),
            source_system: operation.source_system.clone(),
            status,
        })
        .collect()
}

/// Folds the events of one batch of [`read_operations`]' columns into `operations`; returns how
/// many rows had a lifecycle state this reader does not know, which are left out.
fn fold_batch(batch: &RecordBatch, operations: &mut Folded) -> Result<u64, CommandError> {
    let service = texts(batch, column::SERVICE_NAME)?;
    let instance = texts(batch, column::SERVICE_INSTANCE_ID)?;
    let tool = texts(batch, column::TOOL_NAME)?;
    let target = texts(batch, column::TOOL_TARGET)?;
    let operation_id = texts(batch, column::OPERATION_ID)?;
    let state = texts(batch, column::LIFECYCLE_STATE)?;
    let time = ints(batch, column::EVENT_TIME)?;
    let actor = strings(batch, column::ACTOR)?;
    let source_system = texts(batch, column::SOURCE_SYSTEM)?;
    let mut unknown = 0u64;
    for row in 0..batch.num_rows() {
        // Readers refuse such a state before it is stored; one that got past them is counted.
        let Ok(lifecycle) = state.value(row).parse::<LifecycleState>() else {
            unknown += 1;
            continue;
        };
        let event = OperationEventRow {
            key: OperationKey {
                service: service.value(row).to_owned(),
                tool: tool.value(row).to_owned(),
                target: target.value(row).to_owned(),
                operation_id: operation_id.value(row).to_owned(),
            },
            instance: instance.value(row).to_owned(),
            state: lifecycle,
            at: time.value(row),
            actor: (!actor.is_null(row)).then(|| actor.value(row).to_owned()),
            source_system: source_system.value(row).to_owned(),
        };
        fold(operations, event);
    }
    Ok(unknown)
}

/// Every operation of the window's events that match the filters, in no order (each with its
/// latest state, as [`fold`] gives it), and how many events were left out for a state
/// this reader does not know. The events are folded batch by batch as they are read, never held
/// all at once.
async fn read_operations(
    reader: &Reader,
    query: &OperationsQuery,
) -> Result<(Vec<Operation>, u64), CommandError> {
    use futures_util::StreamExt as _;
    let table = Table::OperationEvents;
    let window = query.window;
    let mut stream = reader
        .context
        .table(table.name())
        .await
        .map_err(read)?
        .filter(
            query
                .filters
                .and(window_filter(reader, table, window.since, window.until)),
        )
        .map_err(read)?
        .select(vec![
            col(column::SERVICE_NAME),
            col(column::SERVICE_INSTANCE_ID),
            col(column::TOOL_NAME),
            col(column::TOOL_TARGET),
            col(column::OPERATION_ID),
            col(column::LIFECYCLE_STATE),
            cast_expr(col(column::EVENT_TIME), DataType::Int64).alias(column::EVENT_TIME),
            col(column::ACTOR),
            col(column::SOURCE_SYSTEM),
        ])
        .map_err(read)?
        .execute_stream()
        .await
        .map_err(read)?;
    let mut operations = Folded::default();
    let mut unknown = 0u64;
    while let Some(batch) = stream.next().await {
        unknown += fold_batch(&batch.map_err(read)?, &mut operations)?;
    }
    // The answer orders only the open ones, by age (`open_rows`); the totals need no order.
    Ok((operations.into_values().collect(), unknown))
}

/// How far before the window a counter series' baseline point is looked for: the default
/// `--lookback` of `candor rates`, whose rate the silent-failure rate here matches.
const COUNTER_LOOKBACK: Duration = Duration::from_secs(15 * 60);

/// The calls adapters counted in the query's window with its filters ([`adapter_calls`]), and
/// the notes on what they leave out; or why they could not be read.
async fn counted_calls(
    reader: &Reader,
    query: &OperationsQuery,
    coverage: &Coverage,
) -> Result<(ClassCounts, Vec<String>), String> {
    let table = Table::OutcomeCounts;
    // An unreachable table is read as an empty one: its calls are unknown, not none.
    if let Some(reason) = unreachable_reason(coverage, table) {
        return Err(format!(
            "the {} table could not be read ({reason})",
            table.name()
        ));
    }
    let since = query
        .window
        .since
        .saturating_sub(micros_of(COUNTER_LOOKBACK));
    let (points, unspecified, _) = failure_rates::points(
        reader,
        since,
        query.window,
        GroupBy::Target,
        &query.filters,
        false,
    )
    .await
    .map_err(|err| format!("the {} table could not be read ({err})", table.name()))?;
    let (calls, without_baseline) = adapter_calls(points, query.window);
    let mut notes = Vec::new();
    if without_baseline > 0 {
        notes.push(format!(
            "{without_baseline} counter series had no point in the {} before the window: their \
             first point only served as a baseline, so their calls before it are left out of \
             the silent-failure rate; `candor rates --lookback` can look further back",
            humantime::format_duration(COUNTER_LOOKBACK)
        ));
    }
    if unspecified > 0 {
        notes.push(format!(
            "{unspecified} counter point(s) were left out of the silent-failure rate: their \
             temporality is unspecified, or their class or source is one this reader does not \
             know"
        ));
    }
    Ok((calls, notes))
}

/// `candor operations`: the open operations of the window, each with its status, and the figures
/// of every operation seen. `coverage` is the answer's, with the adapter instances that went
/// silent already in it ([`Reader::add_instance_silences`]).
pub async fn operations(
    reader: &Reader,
    query: &OperationsQuery,
    coverage: &Coverage,
) -> Result<OperationsAnswer, CommandError> {
    if let Some(failure) = missing_table(coverage) {
        return Ok(OperationsAnswer {
            rows: Vec::new(),
            summary: Vec::new(),
            notes: Vec::new(),
            failure: Some(failure),
            totals: OperationTotals::default(),
        });
    }
    let (operations, unknown_states) = read_operations(reader, query).await?;
    let now = reader.now();
    let end = query.window.until.min(now);
    // As far as the silences were judged: their end when the instance never came back.
    let known_until = coverage
        .covered_until
        .unwrap_or(now)
        .min(now)
        .min(query.window.until);
    let stuck_after = micros_of(query.stuck_after);
    let judged: Vec<(Operation, Option<OpenStatus>)> = operations
        .into_iter()
        .map(|operation| {
            let status = status(
                &operation,
                &coverage.silent_instances,
                known_until,
                end,
                stuck_after,
            );
            (operation, status)
        })
        .collect();
    let rows = open_rows(&judged, end);
    let (calls, calls_notes) = match counted_calls(reader, query, coverage).await {
        Ok((calls, notes)) => (Some(calls), notes),
        Err(reason) => (
            None,
            vec![format!(
                "the silent-failure rate of the calls adapters counted is unknown, not 0 %: \
                 {reason}"
            )],
        ),
    };
    let totals = totals(
        judged
            .iter()
            .map(|(operation, status)| (operation, *status)),
    )
    .with_calls(calls.as_ref());
    let mut notes = Vec::new();
    if unknown_states > 0 {
        notes.push(format!(
            "{unknown_states} operation event(s) with a lifecycle state this reader does not \
             know were left out"
        ));
    }
    let begun_before = judged
        .iter()
        .filter(|(operation, status)| {
            status.is_some() && operation.first_state != LifecycleState::Accepted
        })
        .count();
    if begun_before > 0 {
        notes.push(format!(
            "{begun_before} open operation(s) were first seen in the window in a state after {}: \
             they may have begun before it, so their first_seen and age are then only a lower \
             bound (one shown pending may be stuck); an earlier --since shows more",
            LifecycleState::Accepted.as_str()
        ));
    }
    notes.extend(calls_notes);
    Ok(OperationsAnswer {
        rows,
        summary: summary(&totals, query.stuck_after, calls.is_some()),
        notes,
        failure: None,
        totals,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use candor_records::proto::CountClass;
    use deltalake::arrow::array::{ArrayRef, Int64Array, StringArray};
    use serde_json::Value;

    use super::*;
    use crate::answer::Rows;
    use crate::coverage::SourceReport;

    const SECOND: Micros = 1_000_000;
    const MINUTE: Micros = 60 * SECOND;
    const STUCK_AFTER: Micros = 15 * MINUTE;

    fn event(
        operation_id: &str,
        instance: &str,
        state: LifecycleState,
        at: Micros,
    ) -> OperationEventRow {
        OperationEventRow {
            key: OperationKey {
                service: "shop".into(),
                tool: "export".into(),
                target: "https://reports.internal/v1/exports".into(),
                operation_id: operation_id.into(),
            },
            instance: instance.into(),
            state,
            at,
            actor: None,
            source_system: "reports".into(),
        }
    }

    fn silence(instance: &str, from: Micros, to: Micros) -> InstanceSilence {
        InstanceSilence {
            service: "shop".into(),
            instance: instance.into(),
            seen_by: crate::coverage::SeenBy::Adapter,
            from,
            to,
            every: 10 * SECOND,
        }
    }

    /// Every operation of `events` ([`fold`]), in key order.
    fn latest_states(events: impl IntoIterator<Item = OperationEventRow>) -> Vec<Operation> {
        let mut operations = Folded::default();
        for event in events {
            fold(&mut operations, event);
        }
        in_key_order(operations)
    }

    fn in_key_order(operations: Folded) -> Vec<Operation> {
        let mut operations: Vec<Operation> = operations.into_values().collect();
        operations.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        operations
    }

    fn only(events: Vec<OperationEventRow>) -> Operation {
        only_of(latest_states(events))
    }

    fn only_of(operations: impl IntoIterator<Item = Operation>) -> Operation {
        let mut operations: Vec<Operation> = operations.into_iter().collect();
        assert_eq!(operations.len(), 1, "{operations:?}");
        operations.remove(0)
    }

    #[test]
    fn the_latest_event_gives_the_state_and_the_first_gives_the_age() {
        use candor_schema::LifecycleState::{Accepted, Completed, Queued, Running};
        // Read out of order, from two instances: the latest event wins, whatever the order.
        let operation = only(vec![
            event("op-1", "b", Running, 30 * SECOND),
            event("op-1", "a", Accepted, 10 * SECOND),
            event("op-1", "a", Queued, 20 * SECOND),
        ]);
        assert_eq!(operation.state, Running);
        assert_eq!(operation.instance, "b");
        assert_eq!(
            (operation.first_seen, operation.last_seen),
            (10 * SECOND, 30 * SECOND)
        );
        assert_eq!(operation.first_state, Accepted);
        assert!(operation.is_open());
        // Operations are told apart by their id (and service, tool, target).
        let both = latest_states(vec![
            event("op-1", "a", Accepted, 10 * SECOND),
            event("op-2", "a", Completed, 10 * SECOND),
        ]);
        assert_eq!(both.len(), 2);
        assert_eq!(
            both.iter()
                .map(|op| (op.key.operation_id.as_str(), op.state))
                .collect::<Vec<_>>(),
            [("op-1", Accepted), ("op-2", Completed)]
        );
    }

    #[test]
    fn on_a_tie_a_terminal_state_wins_in_any_order() {
        use candor_schema::LifecycleState::{Accepted, Completed, Failed, Queued, Running};
        for events in [
            vec![
                event("op", "a", Running, 5 * SECOND),
                event("op", "a", Completed, 5 * SECOND),
            ],
            vec![
                event("op", "a", Completed, 5 * SECOND),
                event("op", "a", Running, 5 * SECOND),
            ],
        ] {
            let operation = only(events);
            assert_eq!(operation.state, Completed);
            assert!(!operation.is_open());
        }
        // Of two terminal states at one instant, the failure is believed over the completion.
        for events in [
            vec![
                event("op", "a", Completed, 5 * SECOND),
                event("op", "a", Failed, 5 * SECOND),
            ],
            vec![
                event("op", "a", Failed, 5 * SECOND),
                event("op", "a", Completed, 5 * SECOND),
            ],
        ] {
            assert_eq!(only(events).state, Failed);
        }
        // Of two open states, the further along; the first state is the earliest one.
        let operation = only(vec![
            event("op", "a", Queued, 5 * SECOND),
            event("op", "a", Accepted, 5 * SECOND),
        ]);
        assert_eq!((operation.state, operation.first_state), (Queued, Accepted));
        // A copy of an event changes nothing.
        let twice = only(vec![
            event("op", "a", Accepted, 5 * SECOND),
            event("op", "a", Accepted, 5 * SECOND),
        ]);
        assert_eq!(twice, only(vec![event("op", "a", Accepted, 5 * SECOND)]));
    }

    #[test]
    fn the_latest_actor_named_is_kept() {
        use candor_schema::LifecycleState::{Accepted, Running};
        let mut first = event("op", "a", Accepted, SECOND);
        first.actor = Some("alice".into());
        let later = event("op", "a", Running, 2 * SECOND);
        assert_eq!(
            only(vec![later.clone(), first.clone()]).actor.as_deref(),
            Some("alice")
        );
        let mut newer = later;
        newer.actor = Some("bob".into());
        assert_eq!(only(vec![newer, first]).actor.as_deref(), Some("bob"));
    }

    #[test]
    fn an_open_operation_is_pending_then_stuck_and_an_ended_one_has_no_status() {
        use candor_schema::LifecycleState::{Accepted, Completed, Running};
        let end = 60 * MINUTE;
        let known = end;
        let young = only(vec![event("young", "a", Accepted, end - 5 * MINUTE)]);
        assert_eq!(
            status(&young, &[], known, end, STUCK_AFTER),
            Some(OpenStatus::Pending)
        );
        // Its age runs from when it was first seen, not from its latest event.
        let old = only(vec![
            event("old", "a", Accepted, end - 20 * MINUTE),
            event("old", "a", Running, end - MINUTE),
        ]);
        assert_eq!(
            status(&old, &[], known, end, STUCK_AFTER),
            Some(OpenStatus::Stuck)
        );
        // Exactly at the threshold it is stuck.
        let edge = only(vec![event("edge", "a", Accepted, end - STUCK_AFTER)]);
        assert_eq!(
            status(&edge, &[], known, end, STUCK_AFTER),
            Some(OpenStatus::Stuck)
        );
        let done = only(vec![
            event("done", "a", Accepted, end - 50 * MINUTE),
            event("done", "a", Completed, end - 40 * MINUTE),
        ]);
        assert_eq!(status(&done, &[], known, end, STUCK_AFTER), None);
    }

    #[test]
    fn an_operation_whose_instance_went_silent_after_it_is_unknown_not_stuck() {
        use candor_schema::LifecycleState::Accepted;
        let end = 60 * MINUTE;
        let known = end - MINUTE;
        let operation = only(vec![event("op", "a", Accepted, 10 * MINUTE)]);
        // Silent from after its event, and back later: its end may have gone unreported.
        let after = [silence("a", 12 * MINUTE, 30 * MINUTE)];
        assert_eq!(
            status(&operation, &after, known, end, STUCK_AFTER),
            Some(OpenStatus::Unknown)
        );
        // Silent since before its event and never back: nobody is left to report its end.
        let to_the_end = [silence("a", 5 * MINUTE, known)];
        assert_eq!(
            status(&operation, &to_the_end, known, end, STUCK_AFTER),
            Some(OpenStatus::Unknown)
        );
        // A silence that ended before it was reported, or before it and back, changes nothing.
        let before = [
            silence("a", MINUTE, 8 * MINUTE),
            silence("a", 5 * MINUTE, 20 * MINUTE),
        ];
        assert_eq!(
            status(&operation, &before, known, end, STUCK_AFTER),
            Some(OpenStatus::Stuck)
        );
        // Nor does another instance's silence, or another service's instance of the same id.
        let mut elsewhere = silence("a", 12 * MINUTE, known);
        elsewhere.service = "billing".into();
        let others = [silence("b", 12 * MINUTE, known), elsewhere];
        assert_eq!(
            status(&operation, &others, known, end, STUCK_AFTER),
            Some(OpenStatus::Stuck)
        );
        // An ended operation has no status, whatever its instance did.
        let done = only(vec![
            event("done", "a", Accepted, 10 * MINUTE),
            event("done", "a", LifecycleState::Cancelled, 11 * MINUTE),
        ]);
        assert_eq!(status(&done, &after, known, end, STUCK_AFTER), None);
    }

    #[test]
    fn the_summary_counts_each_ending_and_each_open_status() {
        use candor_schema::LifecycleState::{Accepted, Completed, Failed, Partial, Running};
        let end = 60 * MINUTE;
        let operations = latest_states(vec![
            event("stuck", "a", Accepted, 10 * MINUTE),
            event("pending", "a", Accepted, 55 * MINUTE),
            event("unknown", "b", Running, 40 * MINUTE),
            event("done", "a", Accepted, 20 * MINUTE),
            event("done", "a", Completed, 21 * MINUTE),
            event("failed", "a", Failed, 30 * MINUTE),
            event("partial", "a", Partial, 31 * MINUTE),
        ]);
        let silences = [silence("b", 41 * MINUTE, end)];
        let judged: Vec<(Operation, Option<OpenStatus>)> = operations
            .into_iter()
            .map(|op| {
                let status = status(&op, &silences, end, end, STUCK_AFTER);
                (op, status)
            })
            .collect();
        let totals = totals(judged.iter().map(|(op, status)| (op, *status)));
        assert_eq!(
            totals,
            OperationTotals {
                seen: 6,
                completed: 1,
                partial: 1,
                cancelled: 0,
                failed: 1,
                pending: 1,
                stuck: 1,
                unknown: 1,
                silent_failure_rate: None,
                counted_calls: 0,
            }
        );
        assert_eq!(totals.open(), 3);
        assert_eq!(totals.not_completed(), 5);
        assert_eq!(totals.never_completed_rate(), Some(5.0 / 6.0));
        let lines = summary(&totals, Duration::from_secs(900), true);
        assert!(
            lines[0].starts_with("operations seen: 6; ended: 1 completed"),
            "{lines:?}"
        );
        assert!(
            lines[0].contains("1 stuck (open for 15m or longer)"),
            "{lines:?}"
        );
        assert!(lines[1].contains("5 of 6 operations (83.3 %)"), "{lines:?}");
        assert!(summary(&OperationTotals::default(), Duration::from_secs(900), true).is_empty());

        // Only the open ones are listed, the oldest first, the completed one not at all.
        let rows = Rows::of(open_rows(&judged, end));
        assert_eq!(rows.columns, OPERATIONS_COLUMNS);
        let listed: Vec<(&str, &str, &str)> = rows
            .rows
            .iter()
            .map(|row| {
                let text = |name: &str| row.get(name).and_then(Value::as_str).unwrap_or("");
                (text(column::OPERATION_ID), text("status"), text("age"))
            })
            .collect();
        assert_eq!(
            listed,
            [
                ("stuck", "stuck", "50m"),
                ("unknown", "unknown", "20m"),
                ("pending", "pending", "5m"),
            ]
        );
        assert_eq!(rows.rows[0].get(column::ACTOR), Some(&Value::Null));
    }

    /// A cumulative point of `class` counted for `target` by `source`, its start and time in
    /// minutes.
    fn counted(
        source: OutcomeSource,
        target: &str,
        class: &str,
        (start, time): (Micros, Micros),
        value: i64,
    ) -> Point {
        let group = failure_rates::group_key(source.as_str(), target);
        let (start, time) = (start * MINUTE, time * MINUTE);
        let (start_text, time_text) = (start.to_string(), time.to_string());
        Point {
            series: rates::key(&[&group, class]),
            group: Arc::from(group.as_str()),
            class: CountClass::parse(class, Some(source)).unwrap(),
            cumulative: true,
            start,
            time,
            value,
            id: rates::key(&[&group, class, &start_text, &time_text]),
        }
    }

    #[test]
    fn the_silent_failure_rate_is_of_the_calls_adapters_counted_in_the_window() {
        use candor_records::proto::OutcomeSource::{Adapter, Http};
        let window = Window {
            since: 10 * MINUTE,
            until: 60 * MINUTE,
        };
        let points = vec![
            // Started before the window, with a baseline point before it: +6 and +1.
            counted(Adapter, "a", "success", (0, 5), 10),
            counted(Adapter, "a", "success", (0, 20), 16),
            counted(Adapter, "a", "partial", (0, 5), 1),
            counted(Adapter, "a", "partial", (0, 20), 2),
            // After the window: not counted.
            counted(Adapter, "a", "success", (0, 70), 100),
            // Started inside the window: its whole value counts.
            counted(Adapter, "b", "access_failure", (12, 30), 3),
            // Acceptances are counted apart, and are no calls.
            counted(Adapter, "b", "accepted", (12, 30), 2),
            // Started before the window, first seen inside: a baseline only.
            counted(Adapter, "c", "success", (0, 20), 50),
            // Derived from standard spans: not the tool.outcomes counter.
            counted(Http, "a", "access_failure", (12, 30), 40),
            counted(Http, "a", "unverified", (12, 30), 40),
        ];
        let (calls, without_baseline) = adapter_calls(points, window);
        assert_eq!(
            calls,
            ClassCounts {
                success: 6,
                partial: 1,
                access_failure: 3,
                accepted: 2,
                ..ClassCounts::default()
            }
        );
        assert_eq!(without_baseline, 1);

        let operations = OperationTotals {
            seen: 2,
            completed: 1,
            failed: 1,
            ..OperationTotals::default()
        };
        let totals = operations.with_calls(Some(&calls));
        assert_eq!(totals.silent_failure_rate, Some(4.0 / 10.0));
        assert_eq!(totals.counted_calls, 10);
        let lines = summary(&totals, Duration::from_secs(900), true);
        assert!(
            lines[1].starts_with("never completed: 1 of 2 operations (50.0 %)"),
            "{lines:?}"
        );
        assert!(lines[1].contains("40.0 % of 10 call(s)"), "{lines:?}");
    }

    #[test]
    fn without_calls_counted_the_silent_failure_rate_is_unknown_not_zero() {
        let operations = OperationTotals {
            seen: 3,
            completed: 2,
            pending: 1,
            ..OperationTotals::default()
        };
        // Only acceptances counted: no call, so no rate.
        let accepted = ClassCounts {
            accepted: 3,
            ..ClassCounts::default()
        };
        let none_counted = operations.with_calls(Some(&accepted));
        assert_eq!(
            (none_counted.silent_failure_rate, none_counted.counted_calls),
            (None, 0)
        );
        let lines = summary(&none_counted, Duration::from_secs(900), true);
        assert!(
            lines[1].contains("unknown, not 0 %: no call was counted in the window"),
            "{lines:?}"
        );
        assert!(!lines[1].contains("0.0 %"), "{lines:?}");
        // Counts that could not be read are not "no calls".
        let unread = operations.with_calls(None);
        assert_eq!(
            (unread.silent_failure_rate, unread.counted_calls),
            (None, 0)
        );
        let lines = summary(&unread, Duration::from_secs(900), false);
        assert!(
            lines[1].contains("unknown, not 0 %: the counts could not be read"),
            "{lines:?}"
        );
        assert!(!lines[1].contains("no call was counted"), "{lines:?}");
    }

    #[test]
    fn batches_become_events_and_unknown_states_are_counted_not_taken() {
        let text = |values: &[&str]| Arc::new(StringArray::from(values.to_vec())) as ArrayRef;
        let batch = RecordBatch::try_from_iter([
            (column::SERVICE_NAME, text(&["shop", "shop", "shop"])),
            (column::SERVICE_INSTANCE_ID, text(&["a", "a", "a"])),
            (column::TOOL_NAME, text(&["export", "export", "export"])),
            (column::TOOL_TARGET, text(&["t", "t", "t"])),
            (column::OPERATION_ID, text(&["op", "op", "op"])),
            (
                column::LIFECYCLE_STATE,
                text(&[
                    LifecycleState::Accepted.as_str(),
                    "half-done",
                    LifecycleState::Running.as_str(),
                ]),
            ),
            (
                column::EVENT_TIME,
                Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef,
            ),
            (
                column::ACTOR,
                Arc::new(StringArray::from(vec![Some("alice"), None, None])) as ArrayRef,
            ),
            (
                column::SOURCE_SYSTEM,
                text(&["reports", "reports", "reports"]),
            ),
        ])
        .unwrap();
        let mut operations = Folded::default();
        assert_eq!(fold_batch(&batch, &mut operations).unwrap(), 1);
        let operation = only_of(operations.into_values());
        assert_eq!(
            (operation.state, operation.first_seen, operation.last_seen),
            (LifecycleState::Running, 1, 3)
        );
        assert_eq!(operation.actor.as_deref(), Some("alice"));
    }

    #[test]
    fn a_missing_table_is_said_not_taken_for_no_operations() {
        let window = Window {
            since: 0,
            until: 60 * MINUTE,
        };
        let mut coverage = Coverage::new(
            Some(window),
            vec![SourceReport::read(
                table_source(Table::OutcomeCounts),
                None,
                Some(1),
                String::new(),
            )],
            None,
            window.until,
        );
        assert_eq!(missing_table(&coverage), None);
        assert_eq!(unreachable_reason(&coverage, Table::OutcomeCounts), None);
        coverage.sources.push(SourceReport::unreachable(
            table_source(Table::OperationEvents),
            "no operation_events table under data/tables: the compactor has not created it yet",
        ));
        let said = missing_table(&coverage).unwrap();
        assert!(said.contains("could not be read"), "{said}");
        assert!(said.contains("unknown, not none"), "{said}");
        assert!(
            said.contains("the compactor has not created it yet"),
            "{said}"
        );
        // The answer is then an access failure, not an empty one.
        coverage.failure = Some(said);
        assert_eq!(
            coverage.class(0),
            candor_schema::OutcomeClass::AccessFailure
        );
        // Counts that could not be read are found the same way: their calls are unknown.
        coverage.sources.push(SourceReport::unreachable(
            table_source(Table::OutcomeCounts),
            "permission denied",
        ));
        assert_eq!(
            unreachable_reason(&coverage, Table::OutcomeCounts),
            Some("permission denied")
        );
    }
}
