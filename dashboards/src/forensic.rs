//! The forensic view: every failure event of a target, class, service, tool, time range or
//! trace, read the way `candor incident` and `candor trace` read them (the tables, read-only,
//! plus the Kafka tail the compactor has not stored yet), with the same coverage statement.

use std::time::{Duration, SystemTime};

use candor_query::answer::{Format, Report, Rows};
use candor_query::commands::{self, Filters};
use candor_query::kafka_client::KafkaClientSettings;
use candor_query::reader::{ReadOptions, Reader};
use candor_query::store::TableRoot;
use candor_query::tail::TailSettings;
use candor_query::window::{Micros, TimeArg, Window};
use candor_records::tables::Table;
use candor_schema::OutcomeClass;
use serde_json::{Map, Value};

/// What the forensic form asked.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct EventsQuery {
    /// `tool_target`.
    pub target: Option<String>,
    /// `outcome_class`.
    pub class: Option<String>,
    /// `service_name`.
    pub service: Option<String>,
    /// `tool_name`.
    pub tool: Option<String>,
    /// Window start: relative (`1h`) or RFC 3339.
    pub since: Option<String>,
    /// Window end.
    pub until: Option<String>,
    /// A trace id.
    pub trace: Option<String>,
}

/// Where the forensic view reads.
#[derive(Debug, Clone)]
pub struct ForensicSettings {
    /// The tables.
    pub root: TableRoot,
    /// The brokers whose tail is read as well.
    pub brokers: String,
    /// How long the tail may take.
    pub timeout: Duration,
    /// The most tail records read per question.
    pub max_records: usize,
    /// TLS, SASL and other client settings of the tail's consumers.
    pub client: KafkaClientSettings,
    /// The compactor's dedupe window.
    pub dedupe_window: Duration,
}

/// An answer of the forensic view.
#[derive(Debug, Clone)]
pub struct EventsView {
    /// The answer's class: its coverage, as the CLI states it.
    pub class: OutcomeClass,
    /// Column names.
    pub columns: Vec<String>,
    /// The events, oldest first.
    pub rows: Vec<Map<String, Value>>,
    /// Retry outcomes, services, what was covered and every source, for a person.
    pub summary: Vec<String>,
    /// The coverage lines.
    pub coverage_lines: Vec<String>,
    /// The answer as `candor … --format json` prints it.
    pub json: String,
}

fn time(raw: Option<&String>) -> Result<Option<TimeArg>, String> {
    raw.filter(|text| !text.trim().is_empty())
        .map(|text| TimeArg::parse(text).map_err(|err| err.to_string()))
        .transpose()
}

fn given(raw: &Option<String>) -> Option<String> {
    raw.as_ref()
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
}

/// Answers one forensic question at `now`. `Err` is a question that cannot be asked (a bad
/// time, trace id or class), with what to write instead.
pub async fn events(
    settings: &ForensicSettings,
    asked: &EventsQuery,
    now: Micros,
) -> Result<EventsView, String> {
    let class = given(&asked.class)
        .map(|text| {
            text.parse::<OutcomeClass>()
                .map_err(|err| format!("class: {err}"))
        })
        .transpose()?;
    let since = time(asked.since.as_ref())?;
    let until = time(asked.until.as_ref())?;
    let trace = given(&asked.trace)
        .map(|raw| commands::trace_id(&raw).map_err(|err| err.to_string()))
        .transpose()?;
    let window = if trace.is_some() && since.is_none() && until.is_none() {
        None
    } else {
        Some(
            Window::resolve(
                Some(since.unwrap_or(TimeArg::Ago(Duration::from_secs(3600)))),
                until,
                now,
            )
            .map_err(|err| err.to_string())?,
        )
    };
    let reader = Reader::open(ReadOptions {
        root: settings.root.clone(),
        tail: Some(TailSettings {
            brokers: settings.brokers.clone(),
            timeout: settings.timeout,
            max_records: settings.max_records,
            client: settings.client.clone(),
            dedupe_window: settings.dedupe_window,
        }),
        tables: vec![Table::OutcomeEvents],
    })
    .await;
    let filters = Filters {
        service: given(&asked.service),
        tool: given(&asked.tool),
        target: given(&asked.target),
    };
    let answer = match (&trace, window) {
        (Some(id), window) => commands::trace(&reader, id, window).await,
        (None, Some(window)) => commands::incident(&reader, window, &filters).await,
        (None, None) => return Err("give a time range or a trace id".into()),
    };
    let mut coverage = reader.coverage(window).await;
    // The events, `None` when they could not be read (an answer without columns).
    let (mut events, summary) = match answer {
        Ok(answer) => (Some(answer.rows), answer.summary),
        Err(err) => {
            coverage.failure = Some(err.to_string());
            (None, Vec::new())
        }
    };
    let summary = match (class, events.as_mut()) {
        (Some(class), Some(events)) => {
            events.retain(|event| event.outcome_class == class.as_str());
            // The summary speaks of the rows shown, not of the classes filtered out.
            commands::summarize(events)
        }
        _ => summary,
    };
    let rows = match events {
        Some(events) => Rows::of(events),
        None => Rows::new(&[]),
    };
    let report = Report {
        command: if trace.is_some() {
            "candor trace".into()
        } else {
            "candor incident".into()
        },
        target: settings.root.as_str().to_owned(),
        rows,
        coverage,
        summary: summary.clone(),
        nothing: "No failure events".into(),
        started: SystemTime::now(),
    };
    let json = report.render(Format::Json).0;
    let coverage_lines = report
        .footer()
        .lines()
        .skip(summary.len())
        .map(str::to_owned)
        .collect();
    Ok(EventsView {
        class: report.class(),
        columns: report.rows.columns.clone(),
        rows: report.rows.rows,
        summary,
        coverage_lines,
        json,
    })
}
