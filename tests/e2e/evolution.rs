//! Schema evolution of `outcome_events` against real processes: a table written before the
//! forensic columns were added stays readable by this build's `candor` and by independent
//! readers, and the real compactor adds those columns when it opens it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use candor_collector::compact::table::create_before_added_columns;
use candor_e2e::compactor::{self, Compactor, read_table};
use candor_e2e::kafka::create_topics;
use candor_e2e::process::succeeded;
use candor_e2e::query::candor;
use candor_e2e::tansu::Tansu;
use candor_e2e::{python, tempdir, wait_for};
use candor_records::proto::OutcomeEvent;
use candor_records::rows::{Event, Meta, Row};
use candor_records::tables::{Arrival, Table, column};
use candor_schema::names::topic;
use prost::Message as _;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::Value;

/// The target of the one row written before the forensic columns existed.
const OLD_TARGET: &str = "https://old.example/search";
/// The target of the event produced once the compactor runs.
const NEW_TARGET: &str = "https://new.example/search";
const OLD_EVENT_ID: &str = "0000000000000000000000000000a01d";
const NEW_EVENT_ID: &str = "0000000000000000000000000000b2e7";

/// The values the produced event carries in the added columns it has; its `exception_type` and
/// `rpc_status_code` are absent (an adapter's event, not a derived call's).
const PRODUCED: [(&str, &str); 8] = [
    (column::SOURCE, "adapter"),
    (column::ERROR_MESSAGE, "HTTP 504 upstream timed out"),
    (column::TOOL_CALL_ID, "call_7"),
    (column::EVIDENCE_KIND, "request_id"),
    (column::EVIDENCE_VALUE, "req-504"),
    (column::SOURCE_SYSTEM, "new.example"),
    (column::ACTOR, "nightly-reindex"),
    (column::ADAPTER, "candor-adapter/0.1.0"),
];

/// Unix nanoseconds `age` before now.
fn nanos_ago(age: Duration) -> u64 {
    let at = SystemTime::now() - age;
    u64::try_from(
        at.duration_since(UNIX_EPOCH)
            .expect("after the epoch")
            .as_nanos(),
    )
    .expect("a time in u64 nanoseconds")
}

/// A valid terminal AccessFailure event (one attempt, exhausted) of `target` at `nanos`, with
/// none of the added columns set.
fn event(event_id: &str, target: &str, nanos: u64, status: u32) -> OutcomeEvent {
    OutcomeEvent {
        schema_version: 1,
        event_id: event_id.into(),
        trace_id: format!("{nanos:032x}"),
        span_id: format!("{nanos:016x}"),
        event_time_unix_nano: nanos,
        service_name: "checkout".into(),
        service_instance_id: "checkout-1".into(),
        outcome_class: "access_failure".into(),
        tool_name: "search".into(),
        tool_target: target.into(),
        failure_kind: "server_error".into(),
        retry_action: "exhausted".into(),
        retry_attempt: 1,
        retry_max_attempts: 1,
        http_status_code: Some(status),
        error_type: Some(status.to_string()),
        received_time_unix_nano: nanos + 2_000_000,
        collector_id: "e2e-evolution".into(),
        ..OutcomeEvent::default()
    }
}

/// The event produced once the compactor runs: an adapter's, with its forensic columns.
fn produced_event() -> OutcomeEvent {
    let value = |name: &str| {
        PRODUCED
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, text)| (*text).to_owned())
    };
    OutcomeEvent {
        source: value(column::SOURCE),
        error_message: value(column::ERROR_MESSAGE),
        tool_call_id: value(column::TOOL_CALL_ID),
        evidence_kind: value(column::EVIDENCE_KIND),
        evidence_value: value(column::EVIDENCE_VALUE),
        source_system: value(column::SOURCE_SYSTEM),
        actor: value(column::ACTOR),
        adapter: value(column::ADAPTER),
        ..event(
            NEW_EVENT_ID,
            NEW_TARGET,
            nanos_ago(Duration::from_secs(5)),
            504,
        )
    }
}

/// Creates `root/outcome_events` as a compactor that knew none of [`Table::added_columns`] made
/// it, holding `event` as its one row.
async fn create_unevolved_events_table(root: &Path, event: &OutcomeEvent) {
    let micros = i64::try_from(event.event_time_unix_nano / 1000).expect("a time in i64 micros");
    let row = (
        Meta {
            partition: 0,
            offset: 0,
            kafka_micros: micros + 1_000_000,
            arrival: Arrival::OnTime,
        },
        Row::Event(Event::from_record(event)),
    );
    create_before_added_columns(
        root.to_str().expect("a UTF-8 path"),
        Table::OutcomeEvents,
        &[&row],
    )
    .await
    .expect("the old-shape table");
}

/// The one row of `target` among `rows`, as `reader` read them.
fn row_of<'a>(rows: &'a [Value], target: &str, reader: &str) -> &'a Value {
    let found: Vec<&Value> = rows
        .iter()
        .filter(|row| row[column::TOOL_TARGET] == target)
        .collect();
    assert_eq!(found.len(), 1, "{reader}: one row of {target} in {rows:#?}");
    found[0]
}

/// `candor incident` of `target` over the last two hours, from the tables only: its rows. No
/// collector runs here, so no heartbeat says the pipeline covered the window: the answer may be
/// partial (3), but it has its rows.
fn incident(root: &Path, target: &str) -> Vec<Value> {
    let answer = candor(
        root,
        &["incident", "--target", target, "--since", "2h", "--no-live"],
    );
    assert!(
        matches!(answer.code, 0 | 3),
        "incident --target {target}: exit {}\n{}\n{}",
        answer.code,
        answer.stdout,
        answer.stderr
    );
    answer.rows()
}

/// Checks the rows of the old row's target in an answer of `candor incident`: the one old row,
/// every added column null.
fn assert_old_incident(rows: &[Value], when: &str) {
    let reader = format!("candor incident {when}");
    let old = row_of(rows, OLD_TARGET, &reader);
    assert_eq!(rows.len(), 1, "{reader}: {rows:#?}");
    assert_eq!(old[column::EVENT_ID], OLD_EVENT_ID, "{reader}: {old}");
    for name in Table::OutcomeEvents.added_columns() {
        assert!(
            old[*name].is_null(),
            "{reader}: {name} of the old row: {old}"
        );
    }
}

/// Checks both rows of the evolved table as `reader` read every row of it: the old row has each
/// added column, null (the table's schema has them now); the new row carries what was produced.
fn assert_evolved(rows: &[Value], reader: &str) {
    assert_eq!(rows.len(), 2, "{reader}: {rows:#?}");
    let old = row_of(rows, OLD_TARGET, reader);
    assert_eq!(old[column::EVENT_ID], OLD_EVENT_ID, "{reader}: {old}");
    assert_eq!(old[column::HTTP_STATUS_CODE], 503, "{reader}: {old}");
    for name in Table::OutcomeEvents.added_columns() {
        assert_eq!(
            old.get(*name),
            Some(&Value::Null),
            "{reader}: {name} of the old row: {old}"
        );
    }
    let new = row_of(rows, NEW_TARGET, reader);
    assert_eq!(new[column::EVENT_ID], NEW_EVENT_ID, "{reader}: {new}");
    assert_eq!(new[column::HTTP_STATUS_CODE], 504, "{reader}: {new}");
    for (name, value) in PRODUCED {
        assert_eq!(new[name], value, "{reader}: {name} of the new row: {new}");
    }
    for name in [column::EXCEPTION_TYPE, column::RPC_STATUS_CODE] {
        assert_eq!(
            new.get(name),
            Some(&Value::Null),
            "{reader}: {name} of the new row: {new}"
        );
    }
}

/// Every row of a table as DuckDB reads the Parquet files of its current version, by column name
/// (`tests/e2e/clients/read_duckdb.py`), one JSON object per row.
fn read_with_duckdb(table_dir: &Path) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/clients/read_duckdb.py");
    let output = succeeded(
        Command::new(python()).arg(script).arg(table_dir),
        "the DuckDB reader",
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("DuckDB reader line {line:?}: {err}"))
        })
        .collect()
}

/// An `outcome_events` table written before the forensic columns (`source`, `error_message`,
/// `exception_type`, `rpc_status_code`, `tool_call_id`, `evidence_kind`, `evidence_value`)
/// existed stays readable: `candor incident` and the Python `deltalake` reader read its row,
/// those columns null or absent. A compactor of this build opening it adds the columns in place:
/// then the old row reads them as null and a newly produced event carries its values, alike for
/// `candor incident`, the Python `deltalake` reader and DuckDB over the table's Parquet files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_events_table_written_before_the_forensic_columns_stays_readable_and_gains_them() {
    let root = tempdir("evolution");
    let old_event = event(
        OLD_EVENT_ID,
        OLD_TARGET,
        nanos_ago(Duration::from_secs(10 * 60)),
        503,
    );
    create_unevolved_events_table(&root, &old_event).await;
    let events_dir = root.join(Table::OutcomeEvents.name());

    // This build's CLI reads the unevolved table: the row, with the missing columns as null.
    assert_old_incident(&incident(&root, OLD_TARGET), "before the compactor");

    // The independent reader sees the table as it was made: one row, no added column.
    let before = read_table(&root, Table::OutcomeEvents.name());
    assert_eq!(before.len(), 1, "{before:#?}");
    assert_eq!(before[0][column::TOOL_TARGET], OLD_TARGET);
    for name in Table::OutcomeEvents.added_columns() {
        assert!(
            before[0].get(*name).is_none(),
            "the old table has no {name}: {}",
            before[0]
        );
    }

    // A compactor of this build opens the table and stores a new event with forensic values.
    let tansu = Tansu::start().await;
    let topics = Table::ALL.map(Table::topic);
    create_topics(&tansu.bootstrap, &topics, 3)
        .await
        .expect("the topics");
    let compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &tansu.bootstrap)
        .create()
        .expect("a producer");
    let payload = produced_event().encode_to_vec();
    producer
        .send(
            FutureRecord::to(topic::OUTCOME_EVENTS)
                .key(NEW_TARGET)
                .payload(payload.as_slice()),
            Duration::from_secs(30),
        )
        .await
        .map_err(|(err, _)| err)
        .expect("producing the new event");
    let after = wait_for(
        "the new event in the table beside the old row",
        Duration::from_secs(60),
        || {
            let root = root.clone();
            async move {
                let rows = read_table(&root, Table::OutcomeEvents.name());
                (rows.len() >= 2).then_some(rows)
            }
        },
    )
    .await;
    assert_eq!(after.len(), 2, "{after:#?}\n{}", compactor.output());
    assert_evolved(&after, "the Python deltalake reader");

    // DuckDB over the Parquet files of the table's current version, by column name.
    assert_evolved(&read_with_duckdb(&events_dir), "DuckDB");

    // This build's CLI over the evolved table: the old row still null, the new one filled.
    assert_old_incident(&incident(&root, OLD_TARGET), "after the compactor");
    let answered = incident(&root, NEW_TARGET);
    let reader = "candor incident of the new target";
    let new = row_of(&answered, NEW_TARGET, reader);
    assert_eq!(answered.len(), 1, "{reader}: {answered:#?}");
    assert_eq!(new[column::EVENT_ID], NEW_EVENT_ID, "{reader}: {new}");
    for (name, value) in PRODUCED {
        assert_eq!(new[name], value, "{reader}: {name}: {new}");
    }
    for name in [column::EXCEPTION_TYPE, column::RPC_STATUS_CODE] {
        assert!(new[name].is_null(), "{reader}: {name}: {new}");
    }
    let _ = std::fs::remove_dir_all(&root);
}
