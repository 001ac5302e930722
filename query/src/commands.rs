//! The ready-made questions: `rates`, `spikes`, `incident`, `trace`, `reconcile`,
//! `operations`, and free `sql`.
//!
//! Each ready-made question answers with typed rows ([`RatesRow`], [`SpikeRow`],
//! [`EventRow`], [`ReconcileRow`], [`OperationRow`]), which [`crate::answer::Rows::of`] turns
//! into the columns an answer shows; `sql` answers with the columns its statement returned.
//!
//! Each builds its query with DataFusion's DataFrame API, so filter values from the command line
//! are literals, never SQL text. Each filters on the `date` partition column as well as on the
//! time column, so a question about one day reads only that day's files.

use candor_records::tables::{Table, column};
use deltalake::arrow::array::{Array, Int64Array, RecordBatch, StringArray, StringViewArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::DataType;
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::execution::context::SQLOptions;
use deltalake::datafusion::prelude::{DataFrame, Expr, col, lit};
use deltalake::datafusion::scalar::ScalarValue;

use crate::answer::Rows;
use crate::reader::Reader;
use crate::window::Micros;
use candor_records::rows::day;

mod events;
mod failure_rates;
mod operations;
mod reconciliation;
mod rows;

pub use events::{EVENT_COLUMNS, EventsAnswer, incident, summarize, trace, trace_id};
pub use failure_rates::{RatesAnswer, RatesQuery, SpikesAnswer, SpikesQuery, rates, spikes};
pub use operations::{
    Folded, OPERATIONS_COLUMNS, OpenStatus, Operation, OperationEventRow, OperationKey,
    OperationTotals, OperationsAnswer, OperationsQuery, operations, status, totals,
};
pub use reconciliation::{RECONCILE_COLUMNS, ReconcileAnswer, ReconcileQuery, reconcile};
pub use rows::{EventRow, OperationRow, RateBound, RatesRow, ReconcileRow, SpikeRates, SpikeRow};

/// A question that could not be answered as asked.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The statement or a name in it is wrong: a usage error.
    #[error(
        "the SQL statement could not be run: {0}\n  the tables are outcome_events, \
         outcome_counts, rejected, heartbeats and operation_events; `candor sql \"DESCRIBE \
         outcome_events\"` lists a table's columns"
    )]
    Sql(DataFusionError),
    /// The statement would change something; this reader only reads.
    #[error(
        "the SQL statement would create or change data ({0}); candor only reads: use SELECT, \
         DESCRIBE, SHOW or EXPLAIN"
    )]
    NotReadOnly(DataFusionError),
    /// Reading failed while the question ran.
    #[error("reading the tables failed: {0}")]
    Read(DataFusionError),
    /// An argument is malformed.
    #[error("{0}")]
    Usage(String),
}

impl CommandError {
    /// Whether the person asked wrongly (exit 2) rather than the read failing (exit 4).
    pub fn is_usage(&self) -> bool {
        matches!(self, Self::Sql(_) | Self::NotReadOnly(_) | Self::Usage(_))
    }
}

fn read(err: DataFusionError) -> CommandError {
    CommandError::Read(err)
}

/// Exact-match filters every ready-made command takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    /// `service_name`.
    pub service: Option<String>,
    /// `tool_name`.
    pub tool: Option<String>,
    /// `tool_target`.
    pub target: Option<String>,
}

impl Filters {
    /// The filters as one predicate; `None` without any.
    pub(crate) fn expr(&self) -> Option<Expr> {
        [
            (column::SERVICE_NAME, &self.service),
            (column::TOOL_NAME, &self.tool),
            (column::TOOL_TARGET, &self.target),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.as_ref().map(|value| col(name).eq(lit(value.clone()))))
        .reduce(Expr::and)
    }

    /// `predicate` and the filters.
    fn and(&self, predicate: Expr) -> Expr {
        match self.expr() {
            Some(filters) => predicate.and(filters),
            None => predicate,
        }
    }
}

/// The `source` column, or nulls for a table written before it was added (whose rows are all an
/// adapter's, as a null source says).
fn source_column(frame: &DataFrame) -> Expr {
    added_text_column(frame, column::SOURCE)
}

/// A text column of [`candor_records::tables::Table::added_columns`], or nulls under its name
/// for a table written before it was added, which no compactor of this build has opened yet.
fn added_text_column(frame: &DataFrame, name: &'static str) -> Expr {
    if frame.schema().has_column_with_unqualified_name(name) {
        col(name)
    } else {
        lit(ScalarValue::Utf8(None)).alias(name)
    }
}

/// What `rates` groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    /// `tool_target`.
    Target,
    /// `tool_name`.
    Tool,
    /// `service_name`.
    Service,
    /// `convention`: the convention a derived call was recognised by (`adapter` for an
    /// adapter's calls, the layer for derived rows written before conventions were named).
    Convention,
}

impl GroupBy {
    fn column(self) -> &'static str {
        match self {
            Self::Target => column::TOOL_TARGET,
            Self::Tool => column::TOOL_NAME,
            Self::Service => column::SERVICE_NAME,
            Self::Convention => column::CONVENTION,
        }
    }

    /// The group's value in `frame`, named [`GroupBy::column`].
    fn expr(self, frame: &DataFrame) -> Result<Expr, CommandError> {
        match self {
            Self::Convention => convention_column(frame),
            other => Ok(col(other.column())),
        }
    }

    /// The name of the group's column in `rates`' answer.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Target => "target",
            Self::Tool => "tool",
            Self::Service => "service",
            Self::Convention => "convention",
        }
    }
}

/// The `convention` column, with a name for every row: the source where it has none (an
/// adapter's row, or a derived one written before conventions were named), and `adapter` where
/// a row has neither.
fn convention_column(frame: &DataFrame) -> Result<Expr, CommandError> {
    use deltalake::datafusion::logical_expr::when;
    let convention = added_text_column(frame, column::CONVENTION);
    let source = source_column(frame);
    let adapter = candor_records::proto::OutcomeSource::Adapter.as_str();
    when(convention.clone().is_not_null(), convention)
        .when(source.clone().is_not_null(), source)
        .otherwise(lit(adapter))
        .map(|expr| expr.alias(column::CONVENTION))
        .map_err(read)
}

fn timestamp(at: Micros) -> Expr {
    lit(ScalarValue::TimestampMicrosecond(
        Some(at),
        Some("UTC".into()),
    ))
}

/// `time_column` in `[since, until)`, and the `date` partitions that can hold it.
fn in_window(time_column: &str, since: Micros, until: Micros) -> Expr {
    let (first, last) = (day(since), day(until.saturating_sub(1)));
    col(time_column)
        .gt_eq(timestamp(since))
        .and(col(time_column).lt(timestamp(until)))
        .and(col(column::DATE).gt_eq(lit(ScalarValue::Date32(Some(first)))))
        .and(col(column::DATE).lt_eq(lit(ScalarValue::Date32(Some(last)))))
}

/// [`in_window`] on `table`'s time column, or no filter at all when the reader knows every row
/// of the table lies inside the window (a whole-table question): the filter would keep every
/// row, after reading and comparing the time of each.
fn window_filter(reader: &Reader, table: Table, since: Micros, until: Micros) -> Expr {
    if reader.holds_only(table, since, until) {
        lit(true)
    } else {
        in_window(table.time_column(), since, until)
    }
}

/// Whether a DataFusion error is about the statement (a usage error) rather than the data.
fn is_statement_error(err: &DataFusionError) -> bool {
    matches!(
        err.find_root(),
        DataFusionError::SQL(..)
            | DataFusionError::Plan(_)
            | DataFusionError::SchemaError(..)
            | DataFusionError::NotImplemented(_)
    )
}

/// Runs a statement; anything but a query (DDL, DML, `SET`, `COPY`) is refused.
pub async fn sql(reader: &Reader, statement: &str) -> Result<Rows, CommandError> {
    let options = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    // The same statement parsed without those limits tells a refused write from a wrong query.
    let frame = match reader.context.sql_with_options(statement, options).await {
        Ok(frame) => frame,
        Err(err) => {
            let writes = reader
                .context
                .state()
                .create_logical_plan(statement)
                .await
                .is_ok();
            return Err(if writes {
                CommandError::NotReadOnly(err)
            } else if is_statement_error(&err) {
                CommandError::Sql(err)
            } else {
                CommandError::Read(err)
            });
        }
    };
    let batches = frame.collect().await.map_err(|err| {
        if is_statement_error(&err) {
            CommandError::Sql(err)
        } else {
            CommandError::Read(err)
        }
    })?;
    Rows::from_batches(&batches).map_err(|err| CommandError::Read(err.into()))
}

fn column_named<'a>(
    batch: &'a RecordBatch,
    name: &str,
) -> Result<&'a deltalake::arrow::array::ArrayRef, CommandError> {
    batch.column_by_name(name).ok_or_else(|| {
        read(DataFusionError::Internal(format!(
            "no column {name} in the result"
        )))
    })
}

/// A string column as read, plain or as views, without copying it into the other layout.
enum Texts {
    Plain(StringArray),
    Views(StringViewArray),
}

impl Texts {
    fn value(&self, row: usize) -> &str {
        match self {
            Texts::Plain(array) => array.value(row),
            Texts::Views(array) => array.value(row),
        }
    }

    /// A row's text, `None` when it is null.
    fn get(&self, row: usize) -> Option<&str> {
        match self {
            Texts::Plain(array) => (!array.is_null(row)).then(|| array.value(row)),
            Texts::Views(array) => (!array.is_null(row)).then(|| array.value(row)),
        }
    }
}

fn texts(batch: &RecordBatch, name: &str) -> Result<Texts, CommandError> {
    let array = column_named(batch, name)?;
    if let Some(views) = array.as_any().downcast_ref::<StringViewArray>() {
        return Ok(Texts::Views(views.clone()));
    }
    strings(batch, name).map(Texts::Plain)
}

/// A column cast to `to` (no copy when it already is) as the array type `A` of that type.
fn column_as<A: Array + Clone + 'static>(
    batch: &RecordBatch,
    name: &str,
    to: &DataType,
) -> Result<A, CommandError> {
    let array = cast(column_named(batch, name)?, to).map_err(|e| read(e.into()))?;
    array.as_any().downcast_ref::<A>().cloned().ok_or_else(|| {
        read(DataFusionError::Internal(format!(
            "{name}: expected {to} after the cast"
        )))
    })
}

/// A string column as views, cast when it was read as plain strings (the tail's rows).
fn views(batch: &RecordBatch, name: &str) -> Result<StringViewArray, CommandError> {
    column_as(batch, name, &DataType::Utf8View)
}

fn strings(batch: &RecordBatch, name: &str) -> Result<StringArray, CommandError> {
    column_as(batch, name, &DataType::Utf8)
}

fn ints(batch: &RecordBatch, name: &str) -> Result<Int64Array, CommandError> {
    let ints: Int64Array = column_as(batch, name, &DataType::Int64)?;
    if ints.null_count() > 0 {
        return Err(read(DataFusionError::Internal(format!(
            "{name}: unexpected null in a required column"
        ))));
    }
    Ok(ints)
}
