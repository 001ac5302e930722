//! Reading `operation_events` (folded batch by batch) and the calls counted, or saying why not.

use std::time::Duration;

use candor_records::tables::{Table, column};
use candor_schema::LifecycleState;
use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::datatypes::DataType;
use deltalake::datafusion::logical_expr::cast as cast_expr;
use deltalake::datafusion::prelude::col;

use crate::coverage::{Coverage, SourceState};
use crate::rates::ClassCounts;
use crate::reader::{Reader, table_source};
use crate::window::micros_of;

use super::super::failure_rates;
use super::super::{CommandError, GroupBy, ints, read, texts, window_filter};
use super::OperationsQuery;
use super::figures::adapter_calls;
use super::lifecycle::{Folded, Operation, OperationEventRow};

/// Why nothing about operations could be read, when the `operation_events` table could not be
/// opened: a deployment whose compactor predates operation events has no such table, and its
/// answer is "unknown", never "no open operations".
pub(super) fn missing_table(coverage: &Coverage) -> Option<String> {
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
    let actor = texts(batch, column::ACTOR)?;
    let source_system = texts(batch, column::SOURCE_SYSTEM)?;
    let mut unknown = 0u64;
    for row in 0..batch.num_rows() {
        // Readers refuse such a state before it is stored; one that got past them is counted.
        let Ok(lifecycle) = state.value(row).parse::<LifecycleState>() else {
            unknown += 1;
            continue;
        };
        operations.fold(&OperationEventRow {
            service: service.value(row),
            tool: tool.value(row),
            target: target.value(row),
            operation_id: operation_id.value(row),
            instance: instance.value(row),
            state: lifecycle,
            at: time.value(row),
            actor: actor.get(row),
            source_system: source_system.value(row),
        });
    }
    Ok(unknown)
}

/// Every operation of the window's events that match the filters, in no order (each with its
/// latest state, as [`Folded::fold`] gives it), and how many events were left out for a state
/// this reader does not know. The events are folded batch by batch as they are read, never held
/// all at once.
pub(super) async fn read_operations(
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
pub(super) async fn counted_calls(
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use deltalake::arrow::array::{ArrayRef, Int64Array, StringArray};

    use super::super::fixtures::{MINUTE, only_of};
    use super::*;
    use crate::coverage::SourceReport;
    use crate::window::Window;

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
