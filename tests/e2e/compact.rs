//! The compact role against a real broker and collector: every event reaches the table exactly
//! once, field for field, also when the compactor crashes at any step of its commit.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use candor_e2e::collector::{Collector, Options};
use candor_e2e::compactor::{self, Compactor, read_table};
use candor_e2e::kafka::{decode_all, read_topic};
use candor_e2e::tansu::Tansu;
use candor_e2e::wait_for;
use candor_schema::names::{table, topic};
use candor_schema::proto::OutcomeEvent;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use prost::Message as _;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::Value;

use crate::ingest::{outcome_event, trace_request};

const ROWS_WRITTEN: &str = "candor_compactor_rows_written_total{table=\"outcome_events\"}";

/// Sends `n` events with distinct targets (so distinct event ids) prefixed by `prefix`, in
/// requests of 50, and returns the targets.
async fn send(collector: &Collector, prefix: &str, n: usize) -> Vec<String> {
    let mut client = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap();
    let targets: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    for chunk in targets.chunks(50) {
        let events = chunk
            .iter()
            .map(|t| outcome_event("access_failure", t))
            .collect();
        client.export(trace_request(events)).await.unwrap();
    }
    targets
}

fn text(row: &Value, column: &str) -> String {
    row[column].as_str().unwrap_or_default().to_owned()
}

/// The table's rows by event id; fails on a duplicated id.
fn rows_by_id(root: &Path) -> BTreeMap<String, Value> {
    let rows = read_table(root, table::OUTCOME_EVENTS);
    let mut by_id = BTreeMap::new();
    for row in rows {
        let id = text(&row, "event_id");
        assert!(
            by_id.insert(id.clone(), row).is_none(),
            "event {id} is stored twice"
        );
    }
    by_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_reaches_the_table_once_field_for_field() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("fields");
    let compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let targets = send(&collector, "field", 300).await;
    wait_for("300 rows committed", Duration::from_secs(60), || async {
        (compactor.sample(ROWS_WRITTEN).await >= Some(300.0)).then_some(())
    })
    .await;

    let rows = rows_by_id(&root);
    assert_eq!(rows.len(), 300, "{}", compactor.output());
    let records = read_topic(
        &tansu.bootstrap,
        topic::OUTCOME_EVENTS,
        300,
        Duration::from_secs(30),
    );
    let events: Vec<OutcomeEvent> = decode_all(&records);
    assert_eq!(events.len(), 300);
    for (record, event) in records.iter().zip(&events) {
        let row = &rows[&event.event_id];
        let micros = |nanos: u64| i64::try_from(nanos / 1000).unwrap();
        let expected = [
            ("trace_id", Value::from(event.trace_id.clone())),
            ("span_id", event.span_id.clone().into()),
            ("event_time", micros(event.event_time_unix_nano).into()),
            ("service_name", event.service_name.clone().into()),
            (
                "service_instance_id",
                event.service_instance_id.clone().into(),
            ),
            ("outcome_class", event.outcome_class.clone().into()),
            ("tool_name", event.tool_name.clone().into()),
            ("tool_target", event.tool_target.clone().into()),
            ("failure_kind", event.failure_kind.clone().into()),
            ("retry_action", event.retry_action.clone().into()),
            ("retry_attempt", event.retry_attempt.into()),
            ("retry_max_attempts", event.retry_max_attempts.into()),
            ("retry_backoff_ms", event.retry_backoff_ms.into()),
            ("http_status_code", event.http_status_code.into()),
            ("error_type", event.error_type.clone().into()),
            ("partial_returned", event.partial_returned.into()),
            ("partial_expected", event.partial_expected.into()),
            ("coverage", event.coverage.clone().into()),
            ("dropped", event.dropped.clone().into()),
            ("authority", event.authority.clone().into()),
            (
                "received_time",
                micros(event.received_time_unix_nano).into(),
            ),
            ("collector_id", event.collector_id.clone().into()),
            ("schema_version", event.schema_version.into()),
            ("kafka_partition", record.partition.into()),
            ("kafka_offset", record.offset.into()),
        ];
        for (column, value) in expected {
            assert_eq!(row[column], value, "{column} of {}", event.event_id);
        }
        // 2027-01-15 is the UTC date of the test events' time (1.8e18 ns).
        assert_eq!(row["date"], "2027-01-15");
        assert_eq!(row["arrival"], "future");
    }
    let stored: BTreeSet<String> = rows.values().map(|r| text(r, "tool_target")).collect();
    assert_eq!(stored, targets.into_iter().collect());
}

/// A small deterministic generator, so a failing schedule can be replayed from its seed.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compactor_crashing_at_every_step_loses_and_duplicates_nothing() {
    let seed: u64 = std::env::var("CANDOR_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_130);
    let mut random = Lcg(seed);
    // Every step of a commit, for the events table and for the rejected table committed before
    // it, each at a seeded occurrence, in a seeded order.
    let points = [
        "read",
        "files_written@outcome_events",
        "table_committed@outcome_events",
        "files_written@rejected",
        "table_committed@rejected",
        "before_offset_commit",
    ];
    let mut schedule: Vec<(&str, u64)> = points.iter().map(|p| (*p, 1 + random.next(3))).collect();
    for i in (1..schedule.len()).rev() {
        let j = usize::try_from(random.next(u64::try_from(i + 1).unwrap())).unwrap();
        schedule.swap(i, j);
    }
    eprintln!("crash schedule (seed {seed}): {schedule:?}");

    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("crash");
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &tansu.bootstrap)
        .create()
        .unwrap();
    let mut garbage = Vec::new();
    let mut sent = 0;
    for (round, (point, occurrence)) in schedule.iter().enumerate() {
        let options = compactor::Options {
            // A fresh group per start: Tansu does not move a crashed member's partitions to a
            // newcomer of the same group (seen here: none within 60 s). The positions come from
            // the table, so a fresh group resumes exactly where a restarted member would.
            group_id: format!("crash-{round}"),
            env: vec![(
                "CANDOR_COMPACT_CRASH_AT".into(),
                format!("{point}:{occurrence}"),
            )],
            ..compactor::Options::default()
        };
        let mut compactor = Compactor::start(&tansu.bootstrap, &root, options).await;
        // Keep sending until the crash point is reached.
        let what = format!("a crash at {point}:{occurrence}");
        let crashed = wait_for(&what, Duration::from_secs(60), || {
            let exited = compactor.process().exited();
            async move { exited.then_some(()) }
        });
        let sender = async {
            for batch in 0.. {
                send(&collector, &format!("crash{round}-b{batch}"), 50).await;
                sent += 50;
                garbage.push(produce_garbage(&producer, &format!("{round}-{batch}")).await);
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        };
        tokio::select! {
            () = crashed => {}
            () = sender => unreachable!(),
        }
        assert!(
            compactor.output().contains("fault injection: aborting"),
            "round {round} ended without the planned crash:\n{}",
            compactor.output()
        );
    }
    // One more crash, by kill -9 from outside, at a seeded time under load.
    let mut compactor = Compactor::start(
        &tansu.bootstrap,
        &root,
        compactor::Options {
            group_id: "crash-kill".into(),
            ..compactor::Options::default()
        },
    )
    .await;
    send(&collector, "kill", 200).await;
    sent += 200;
    tokio::time::sleep(Duration::from_millis(200 + random.next(800))).await;
    compactor.process().kill().await;

    // A clean compactor drains the rest.
    let compactor = Compactor::start(
        &tansu.bootstrap,
        &root,
        compactor::Options {
            group_id: "crash-drain".into(),
            ..compactor::Options::default()
        },
    )
    .await;
    let expected: BTreeSet<String> = read_topic(
        &tansu.bootstrap,
        topic::OUTCOME_EVENTS,
        sent,
        Duration::from_secs(30),
    )
    .iter()
    // The planted garbage is the only thing that does not decode.
    .filter_map(|record| OutcomeEvent::decode(record.payload.as_slice()).ok())
    .map(|event| event.event_id)
    .collect();
    // A send cut short by a crash may have been acknowledged in part, so the topic (everything
    // the collector acknowledged) is the reference, not the count of completed sends.
    assert!(
        expected.len() >= sent,
        "the topic lacks acknowledged events"
    );
    // Poll until the table holds as many events as the topic, or a deadline: then report what
    // is missing rather than only that time ran out.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let rows = loop {
        let rows = rows_by_id(&root);
        if rows.len() >= expected.len() || std::time::Instant::now() > deadline {
            break rows;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let stored: BTreeSet<String> = rows.keys().cloned().collect();
    let missing: Vec<_> = expected.difference(&stored).collect();
    let extra: Vec<_> = stored.difference(&expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "seed {seed}: {} missing, {} unexpected\n{}",
        missing.len(),
        extra.len(),
        compactor.output()
    );
    assert_eq!(rows.len(), expected.len());

    // The undecodable records are in the rejected table, each once, with their bytes.
    let rejected: Vec<String> = read_table(&root, table::REJECTED)
        .iter()
        .filter(|row| row["reason"] == "undecodable")
        .map(|row| text(row, "input"))
        .collect();
    let distinct: BTreeSet<&String> = rejected.iter().collect();
    assert_eq!(
        distinct.len(),
        rejected.len(),
        "an undecodable record is stored twice"
    );
    let planted: BTreeSet<String> = garbage.iter().map(|g| hex(g)).collect();
    assert_eq!(
        distinct.into_iter().cloned().collect::<BTreeSet<_>>(),
        planted
    );
}

/// Produces a record no protobuf decoder accepts (an over-long varint) to the events topic.
async fn produce_garbage(producer: &FutureProducer, tag: &str) -> Vec<u8> {
    let mut payload = vec![0xff; 11];
    payload.extend_from_slice(tag.as_bytes());
    producer
        .send(
            FutureRecord::<(), [u8]>::to(topic::OUTCOME_EVENTS).payload(&payload),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    payload
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "candor-e2e-tables-{name}-{}-{}",
        std::process::id(),
        candor_e2e::free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
