//! `incident` and `trace`: the failure events themselves, in order, with what a person needs
//! during an incident.

use std::collections::BTreeMap;

use candor_records::proto::OutcomeSource;
use candor_records::tables::{Table, column};
use deltalake::datafusion::prelude::{Expr, col, lit};
use serde_json::Value;

use crate::answer::Rows;
use crate::reader::Reader;
use crate::window::Window;

use super::{CommandError, Filters, added_text_column, in_window, read};

/// The event columns `incident` and `trace` show, in order.
const EVENT_COLUMNS: &[&str] = &[
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
pub struct EventsAnswer {
    /// The events.
    pub rows: Rows,
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
    let rows = Rows::from_batches(&batches).map_err(|err| CommandError::Read(err.into()))?;
    let rows = if rows.columns.is_empty() {
        Rows::new(EVENT_COLUMNS)
    } else {
        rows
    };
    let summary = summarize(&rows);
    Ok(EventsAnswer { rows, summary })
}

/// Retry outcomes (exhausted, permanent, accepted partial, retried attempts), failures derived
/// from standard spans, and services of event rows.
pub fn summarize(rows: &Rows) -> Vec<String> {
    let mut actions: BTreeMap<String, u64> = BTreeMap::new();
    let mut derived: BTreeMap<String, u64> = BTreeMap::new();
    let mut services: BTreeMap<String, u64> = BTreeMap::new();
    let mut adapters: BTreeMap<String, u64> = BTreeMap::new();
    for row in &rows.rows {
        let text = |name: &str| {
            row.get(name)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let source = text(column::SOURCE);
        if source.is_empty() || source == OutcomeSource::Adapter.as_str() {
            *actions.entry(text(column::RETRY_ACTION)).or_default() += 1;
        } else {
            let convention = text(column::CONVENTION);
            let key = if convention.is_empty() {
                source
            } else {
                format!("{source} ({convention})")
            };
            *derived.entry(key).or_default() += 1;
        }
        *services.entry(text(column::SERVICE_NAME)).or_default() += 1;
        let adapter = text(column::ADAPTER);
        if !adapter.is_empty() {
            *adapters.entry(adapter).or_default() += 1;
        }
    }
    if rows.rows.is_empty() {
        return Vec::new();
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
