//! `operations`: the asynchronous operations that were accepted and have not ended, from the
//! `tool.lifecycle` events of `operation_events`.
//!
//! An operation is one (service, tool, target, operation id). Its state is the one of its latest
//! event in the window ([`Folded::fold`]); it is open while that state is not terminal. An open
//! operation is `unknown` when the adapter instance that sent its latest event went silent after
//! it (nobody was left to report its end), else `stuck` once it has been open for `--stuck-after`,
//! else `pending` ([`status`]).
//!
//! Beside the share of operations that never completed, the answer gives the silent-failure rate
//! of the calls adapters counted over the same window and filters, (partial + access_failure) /
//! calls from the `tool.outcomes` counter points, as the `adapter` rows of `candor rates` give
//! it ([`adapter_calls`](figures::adapter_calls)); unknown, never 0 %, when no call was counted
//! or the counts could not be read.

use std::time::Duration;

use candor_records::tables::column;
use candor_schema::LifecycleState;

use crate::coverage::Coverage;
use crate::reader::Reader;
use crate::window::{Window, micros_of};

use super::rows::OperationRow;
use super::{CommandError, Filters};

mod figures;
#[cfg(test)]
mod fixtures;
mod lifecycle;
mod scan;

pub use figures::{OperationTotals, totals};
use figures::{open_rows, summary};
pub use lifecycle::{Folded, OpenStatus, Operation, OperationEventRow, OperationKey, status};
use scan::{counted_calls, missing_table, read_operations};

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
