//! `incident` and `trace`: the failure events themselves, in order, with what a person needs
//! during an incident.

use std::collections::BTreeMap;

use candor_records::proto::OutcomeSource;
use candor_records::tables::{Table, column};
use deltalake::arrow::array::{Array as _, Int64Array, RecordBatch};
use deltalake::arrow::datatypes::DataType;
use deltalake::arrow::util::display::{ArrayFormatter, FormatOptions};
use deltalake::datafusion::prelude::{Expr, col, lit};

use crate::reader::Reader;
use crate::window::Window;

use super::rows::EventRow;
use super::{
    CommandError, Filters, Texts, added_text_column, column_as, column_named, in_window, ints,
    read, texts,
};

/// The event columns `incident` and `trace` show, in order: the fields of [`EventRow`].
pub const EVENT_COLUMNS: &[&str] = &[
    column::EVENT_TIME,
    column::SERVICE_NAME,
    column::SERVICE_INSTANCE_ID,
    column::TOOL_NAME,
    column::TOOL_TARGET,
    column::SOURCE_SYSTEM,
    column::SOURCE,
    column::CONVENTION,
    column::ADAPTER,
    column::ACTOR,
    column::OUTCOME_CLASS,
    column::FAILURE_KIND,
    column::RETRY_ACTION,
    column::RETRY_ATTEMPT,
    column::RETRY_MAX_ATTEMPTS,
    column::HTTP_STATUS_CODE,
    column::ERROR_TYPE,
    column::ERROR_MESSAGE,
    column::EXCEPTION_TYPE,
    column::RPC_STATUS_CODE,
    column::COVERAGE,
    column::DROPPED,
    column::EVIDENCE_KIND,
    column::EVIDENCE_VALUE,
    column::TOOL_CALL_ID,
    column::TRACE_ID,
    column::SPAN_ID,
    column::EVENT_ID,
];

/// Events in order, with the summaries a person needs during an incident.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsAnswer {
    /// The events, oldest first.
    pub rows: Vec<EventRow>,
    /// Retry outcomes and services involved.
    pub summary: Vec<String>,
}

async fn events(reader: &Reader, filter: Expr) -> Result<EventsAnswer, CommandError> {
    let frame = reader
        .context
        .table(Table::OutcomeEvents.name())
        .await
        .map_err(read)?
        .filter(filter)
        .map_err(read)?
        .sort(vec![
            col(column::EVENT_TIME).sort(true, false),
            col(column::KAFKA_PARTITION).sort(true, false),
            col(column::KAFKA_OFFSET).sort(true, false),
        ])
        .map_err(read)?;
    let added = Table::OutcomeEvents.added_columns();
    let columns: Vec<Expr> = EVENT_COLUMNS
        .iter()
        .map(|&name| {
            if added.contains(&name) {
                added_text_column(&frame, name)
            } else {
                col(name)
            }
        })
        .collect();
    let frame = frame.select(columns).map_err(read)?;
    let batches = frame.collect().await.map_err(read)?;
    let mut rows = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
    for batch in &batches {
        read_events(batch, &mut rows)?;
    }
    let summary = summarize(&rows);
    Ok(EventsAnswer { rows, summary })
}

/// Appends the events of one batch of [`EVENT_COLUMNS`] to `rows`.
fn read_events(batch: &RecordBatch, rows: &mut Vec<EventRow>) -> Result<(), CommandError> {
    // The time as DataFusion shows a timestamp, as the answers of `sql` show it too.
    let options = FormatOptions::default().with_null("");
    let event_time =
        ArrayFormatter::try_new(column_named(batch, column::EVENT_TIME)?.as_ref(), &options)
            .map_err(|err| read(err.into()))?;
    let text = |name: &str| texts(batch, name);
    let service_name = text(column::SERVICE_NAME)?;
    let service_instance_id = text(column::SERVICE_INSTANCE_ID)?;
    let tool_name = text(column::TOOL_NAME)?;
    let tool_target = text(column::TOOL_TARGET)?;
    let source_system = text(column::SOURCE_SYSTEM)?;
    let source = text(column::SOURCE)?;
    let convention = text(column::CONVENTION)?;
    let adapter = text(column::ADAPTER)?;
    let actor = text(column::ACTOR)?;
    let outcome_class = text(column::OUTCOME_CLASS)?;
    let failure_kind = text(column::FAILURE_KIND)?;
    let retry_action = text(column::RETRY_ACTION)?;
    let retry_attempt = ints(batch, column::RETRY_ATTEMPT)?;
    let retry_max_attempts = ints(batch, column::RETRY_MAX_ATTEMPTS)?;
    let http_status_code: Int64Array =
        column_as(batch, column::HTTP_STATUS_CODE, &DataType::Int64)?;
    let error_type = text(column::ERROR_TYPE)?;
    let error_message = text(column::ERROR_MESSAGE)?;
    let exception_type = text(column::EXCEPTION_TYPE)?;
    let rpc_status_code = text(column::RPC_STATUS_CODE)?;
    let coverage = text(column::COVERAGE)?;
    let dropped = text(column::DROPPED)?;
    let evidence_kind = text(column::EVIDENCE_KIND)?;
    let evidence_value = text(column::EVIDENCE_VALUE)?;
    let tool_call_id = text(column::TOOL_CALL_ID)?;
    let trace_id = text(column::TRACE_ID)?;
    let span_id = text(column::SPAN_ID)?;
    let event_id = text(column::EVENT_ID)?;
    for row in 0..batch.num_rows() {
        let owned = |array: &Texts| array.value(row).to_owned();
        let optional = |array: &Texts| array.get(row).map(str::to_owned);
        rows.push(EventRow {
            event_time: event_time.value(row).to_string(),
            service_name: owned(&service_name),
            service_instance_id: owned(&service_instance_id),
            tool_name: owned(&tool_name),
            tool_target: owned(&tool_target),
            source_system: optional(&source_system),
            source: optional(&source),
            convention: optional(&convention),
            adapter: optional(&adapter),
            actor: optional(&actor),
            outcome_class: owned(&outcome_class),
            failure_kind: owned(&failure_kind),
            retry_action: owned(&retry_action),
            retry_attempt: retry_attempt.value(row),
            retry_max_attempts: retry_max_attempts.value(row),
            http_status_code: (!http_status_code.is_null(row)).then(|| http_status_code.value(row)),
            error_type: optional(&error_type),
            error_message: optional(&error_message),
            exception_type: optional(&exception_type),
            rpc_status_code: optional(&rpc_status_code),
            coverage: optional(&coverage),
            dropped: optional(&dropped),
            evidence_kind: optional(&evidence_kind),
            evidence_value: optional(&evidence_value),
            tool_call_id: optional(&tool_call_id),
            trace_id: owned(&trace_id),
            span_id: owned(&span_id),
            event_id: owned(&event_id),
        });
    }
    Ok(())
}

/// Retry outcomes (exhausted, permanent, accepted partial, retried attempts), failures derived
/// from standard spans, and services of events.
pub fn summarize(rows: &[EventRow]) -> Vec<String> {
    if rows.is_empty() {
        return Vec::new();
    }
    let mut actions: BTreeMap<&str, u64> = BTreeMap::new();
    let mut derived: BTreeMap<String, u64> = BTreeMap::new();
    let mut services: BTreeMap<&str, u64> = BTreeMap::new();
    let mut adapters: BTreeMap<&str, u64> = BTreeMap::new();
    for row in rows {
        let source = row.source.as_deref().unwrap_or("");
        if source.is_empty() || source == OutcomeSource::Adapter.as_str() {
            *actions.entry(row.retry_action.as_str()).or_default() += 1;
        } else {
            let key = match row.convention.as_deref() {
                None | Some("") => source.to_owned(),
                Some(convention) => format!("{source} ({convention})"),
            };
            *derived.entry(key).or_default() += 1;
        }
        *services.entry(row.service_name.as_str()).or_default() += 1;
        if let Some(adapter) = row.adapter.as_deref().filter(|adapter| !adapter.is_empty()) {
            *adapters.entry(adapter).or_default() += 1;
        }
    }
    let get = |name: &str| actions.get(name).copied().unwrap_or(0);
    let services: Vec<String> = services
        .iter()
        .map(|(name, events)| format!("{name} ({events})"))
        .collect();
    let mut summary = vec![format!(
        "calls that ended failed: {} exhausted (ran out of retries), {} permanent (not \
         retryable), {} partial answers accepted; {} attempt(s) were retried",
        get("exhausted"),
        get("permanent"),
        get("accept_partial"),
        get("retry")
    )];
    if !derived.is_empty() {
        let sources: Vec<String> = derived
            .iter()
            .map(|(source, n)| format!("{n} {source}"))
            .collect();
        summary.push(format!(
            "failures derived from standard spans, whose retries are not known: {}",
            sources.join(", ")
        ));
    }
    summary.push(format!("services involved: {}", services.join(", ")));
    if !adapters.is_empty() {
        let adapters: Vec<String> = adapters
            .iter()
            .map(|(adapter, events)| format!("{adapter} ({events})"))
            .collect();
        summary.push(format!("adapters that reported: {}", adapters.join(", ")));
    }
    summary
}

/// `candor incident`: every event of one target in the window.
pub async fn incident(
    reader: &Reader,
    window: Window,
    filters: &Filters,
) -> Result<EventsAnswer, CommandError> {
    events(
        reader,
        filters.and(in_window(column::EVENT_TIME, window.since, window.until)),
    )
    .await
}

/// Checks a trace id: 32 hex digits, any case; returns it in lower case as stored.
pub fn trace_id(raw: &str) -> Result<String, CommandError> {
    let id = raw.trim().to_ascii_lowercase();
    if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) && id != "0".repeat(32) {
        Ok(id)
    } else {
        Err(CommandError::Usage(format!(
            "{raw:?} is not a trace id: expected 32 hex digits, as in the trace_id column"
        )))
    }
}

/// `candor trace`: every event of one trace.
pub async fn trace(
    reader: &Reader,
    id: &str,
    window: Option<Window>,
) -> Result<EventsAnswer, CommandError> {
    let mut filter = col(column::TRACE_ID).eq(lit(id.to_owned()));
    if let Some(window) = window {
        filter = filter.and(in_window(column::EVENT_TIME, window.since, window.until));
    }
    events(reader, filter).await
}
