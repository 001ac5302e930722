//! The compact role against a real broker and collector: every event reaches the table exactly
//! once, field for field, also when the compactor crashes at any step of its commit.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use candor_e2e::collector::{Collector, Options};
use candor_e2e::compactor::{
    self, Compactor, maintain, read_table, start_reader_loop, table_files,
};
use candor_e2e::kafka::{decode_all, read_topic};
use candor_e2e::query::explain_day_and_target;
use candor_e2e::tansu::Tansu;
use candor_e2e::{tempdir, wait_for};
use candor_records::proto::OutcomeEvent;
use candor_records::tables::Table;
use candor_schema::names::{table, topic};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use prost::Message as _;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::Value;

use crate::ingest::{outcome_event, trace_request};

pub(crate) const ROWS_WRITTEN: &str =
    "candor_compactor_rows_written_total{table=\"outcome_events\"}";

/// Sends `n` events with distinct targets (so distinct event ids) prefixed by `prefix`, in
/// requests of 50, and returns the targets.
pub(crate) async fn send(collector: &Collector, prefix: &str, n: usize) -> Vec<String> {
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
pub(crate) fn rows_by_id(root: &Path) -> BTreeMap<String, Value> {
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
    let in_topic = read_topic(
        &tansu.bootstrap,
        topic::OUTCOME_EVENTS,
        sent,
        Duration::from_secs(30),
    );
    let expected: BTreeSet<String> = in_topic
        .iter()
        // The planted garbage is the only thing that does not decode.
        .filter_map(|record| OutcomeEvent::decode(record.payload.as_slice()).ok())
        .map(|event| event.event_id)
        .collect();
    // A garbage send cut short by a crash (its future dropped) may still have reached the topic:
    // the topic, not the list of completed sends, is the reference for the rejected table too.
    let planted_in_topic: BTreeSet<String> = in_topic
        .iter()
        .filter(|record| OutcomeEvent::decode(record.payload.as_slice()).is_err())
        .map(|record| hex(&record.payload))
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
    assert!(
        planted.is_subset(&planted_in_topic),
        "acknowledged garbage is missing from the topic"
    );
    assert_eq!(
        distinct.into_iter().cloned().collect::<BTreeSet<_>>(),
        planted_in_topic
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

/// Sends `n` events whose time is `age` before now, with targets `prefix-i`.
async fn send_aged(collector: &Collector, prefix: &str, n: usize, age: Duration) {
    let mut client = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap();
    let at = std::time::SystemTime::now() - age;
    let nanos =
        u64::try_from(at.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()).unwrap();
    let events = (0..n)
        .map(|i| {
            let mut event = outcome_event("access_failure", &format!("{prefix}-{i}"));
            event.time_unix_nano = nanos;
            event
        })
        .collect();
    client.export(trace_request(events)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_rows_are_flagged_optimize_and_vacuum_keep_readers_whole_retention_drops_old_days() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("maintenance");
    let compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let two_days = Duration::from_secs(2 * 86_400);
    // Three commits into the partition of two days ago (three small files), one into today's.
    for (round, total) in [(0, 100.0), (1, 200.0), (2, 300.0)] {
        send_aged(&collector, &format!("old{round}"), 100, two_days).await;
        wait_for("a commit", Duration::from_secs(30), || async {
            (compactor.sample(ROWS_WRITTEN).await >= Some(total)).then_some(())
        })
        .await;
    }
    send_aged(&collector, "today", 100, Duration::ZERO).await;
    wait_for("400 rows", Duration::from_secs(30), || async {
        (compactor.sample(ROWS_WRITTEN).await >= Some(400.0)).then_some(())
    })
    .await;

    // Two days old is past `time.late_after` (24h): stored, flagged and counted.
    let rows = read_table(&root, table::OUTCOME_EVENTS);
    let late = rows.iter().filter(|row| row["arrival"] == "late").count();
    assert_eq!((rows.len(), late), (400, 300));
    let late_metric =
        "candor_compactor_off_time_records_total{table=\"outcome_events\",arrival=\"late\"}";
    assert_eq!(compactor.sample(late_metric).await, Some(300.0));

    let old_files = |files: &[String]| files.iter().filter(|f| !f.contains(&partition(0))).count();
    let before = table_files(&root, table::OUTCOME_EVENTS);
    assert!(old_files(&before) >= 3, "{before:?}");
    // A file no commit refers to, older than the vacuum retention (168h): what a crashed commit
    // leaves.
    let orphan = root
        .join(table::OUTCOME_EVENTS)
        .join("orphan-from-a-crash.parquet");
    std::fs::write(&orphan, b"not referenced").unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(200 * 3600);
    std::fs::File::options()
        .write(true)
        .open(&orphan)
        .unwrap()
        .set_modified(old)
        .unwrap();

    // Optimize and vacuum while an independent reader reads the table again and again.
    let reader = start_reader_loop(&root, table::OUTCOME_EVENTS, 8);
    let (ok, report) = maintain(&root, "", &["--optimize", "--vacuum"]);
    assert!(ok, "{report}");
    let reads = reader.wait_with_output().unwrap();
    let reads = String::from_utf8_lossy(&reads.stdout).into_owned();
    let counts: Vec<(u64, u64)> = reads
        .lines()
        .map(|line| {
            let fields: Vec<u64> = line.split(' ').map(|f| f.parse().unwrap()).collect();
            (fields[1], fields[2])
        })
        .collect();
    assert!(
        counts.len() >= 2,
        "the reader read only {} times",
        counts.len()
    );
    assert!(
        counts
            .iter()
            .all(|&(rows, distinct)| rows == 400 && distinct == 400),
        "a read saw a row twice or missed one: {reads}"
    );
    let after = table_files(&root, table::OUTCOME_EVENTS);
    assert_eq!(
        old_files(&after),
        1,
        "optimize merges the closed day: {after:?}\n{report}"
    );
    assert!(!orphan.exists(), "vacuum deletes the orphan: {report}");
    // The merged file keeps the table's file settings: its bloom filter on the target rules out
    // a target within the file's min/max statistics that no row has.
    let old_day = &partition(2)["date=".len()..];
    let explain = explain_day_and_target(&root, old_day, "old1-50x", &["--no-live"]);
    assert!(
        explain
            .stdout
            .contains("row_groups_pruned_bloom_filter=1 total → 0 matched"),
        "{}\n{}",
        explain.stdout,
        explain.stderr
    );
    assert_eq!(read_table(&root, table::OUTCOME_EVENTS).len(), 400);

    // Retention of one day drops the partition of two days ago and keeps today's.
    let (ok, report) = maintain(
        &root,
        "[maintenance]\nretention_days = 1\n",
        &["--retention"],
    );
    assert!(ok, "{report}");
    let rows = read_table(&root, table::OUTCOME_EVENTS);
    assert_eq!(rows.len(), 100, "{report}");
    assert!(
        rows.iter()
            .all(|row| text(row, "tool_target").starts_with("today-"))
    );
    // Retention is refused when the configuration keeps everything.
    let (ok, report) = maintain(&root, "", &["--retention"]);
    assert!(!ok && report.contains("retention_days"), "{report}");
}

/// The partition path of the UTC day `days_ago` days before today.
fn partition(days_ago: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let day = chrono::DateTime::from_timestamp(i64::try_from(now).unwrap() - days_ago * 86_400, 0)
        .unwrap();
    format!("date={}", day.format("%Y-%m-%d"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_compactors_in_one_group_with_a_rebalance_mid_stream_store_each_event_once() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("rebalance");
    let options = compactor::Options {
        group_id: "rebalance".into(),
        ..compactor::Options::default()
    };
    const ASSIGNED: &str = "candor_compactor_assigned_partitions";
    // Three partitions of each table's topic.
    let all = (Table::ALL.len() * 3) as f64;
    let mut first = Compactor::start(&tansu.bootstrap, &root, options.clone()).await;
    wait_for(
        "the first member's assignment",
        Duration::from_secs(60),
        || async { (first.sample(ASSIGNED).await == Some(all)).then_some(()) },
    )
    .await;
    send(&collector, "before", 300).await;
    // A second member joins: the partitions are split between the two.
    let second = Compactor::start(&tansu.bootstrap, &root, options).await;
    wait_for(
        "the partitions split between two members",
        Duration::from_secs(60),
        || async {
            let (a, b) = (first.sample(ASSIGNED).await, second.sample(ASSIGNED).await);
            (a > Some(0.0) && b > Some(0.0) && a.zip(b).map(|(a, b)| a + b) == Some(all))
                .then_some(())
        },
    )
    .await;
    send(&collector, "during", 300).await;
    // The first leaves cleanly: the second takes every partition.
    first.process().terminate().await;
    wait_for(
        "the second member holding all partitions",
        Duration::from_secs(60),
        || async { (second.sample(ASSIGNED).await == Some(all)).then_some(()) },
    )
    .await;
    send(&collector, "after", 300).await;
    let rows = wait_for("900 events in the table", Duration::from_secs(90), || {
        let root = root.clone();
        async move {
            let rows = rows_by_id(&root);
            (rows.len() >= 900).then_some(rows)
        }
    })
    .await;
    assert_eq!(rows.len(), 900, "{}", second.output());
}

/// A small tmpfs, unmounted when dropped.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(name: &str, size: &str) -> Self {
        let dir = tempdir(name);
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(
            status.success(),
            "mounting a tmpfs at {} failed: the disk-full test needs root (CI runs as root)",
            dir.display()
        );
        Self(dir)
    }

    /// Fills the free space with a file; returns its path.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write as _;
        let path = self.0.join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let block = vec![0u8; 64 * 1024];
        while file.write_all(&block).is_ok() {}
        // The last partial block, byte by byte, until not even one fits.
        while file.write_all(&[0]).is_ok() {}
        path
    }

    /// Remounts the disk read-only (`true`) or writable: while read-only every write fails, for
    /// root too, as writes to an object store that refuses them do.
    fn read_only(&self, read_only: bool) {
        let mode = if read_only {
            "remount,ro"
        } else {
            "remount,rw"
        };
        let status = std::process::Command::new("mount")
            .args(["-o", mode])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(status.success(), "mount -o {mode} {}", self.0.display());
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_stops_commits_visibly_and_nothing_is_lost_when_space_returns() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let disk = SmallDisk::mount("full", "16m");
    let compactor =
        Compactor::start(&tansu.bootstrap, &disk.0, compactor::Options::default()).await;
    let filler = disk.fill();
    send(&collector, "full", 300).await;
    let delta_errors = "candor_compactor_errors_total{reason=\"delta\"}";
    // The error is counted inside the failed flush, and readiness drops just after it returns:
    // wait for both.
    wait_for(
        "a failed commit counted and /readyz 503",
        Duration::from_secs(30),
        || async {
            let counted = compactor.sample(delta_errors).await >= Some(1.0);
            let (status, _) =
                candor_e2e::collector::get_status(&compactor.metrics_endpoint, "/readyz").await;
            (counted && status == Some(503)).then_some(())
        },
    )
    .await;
    assert!(
        compactor.output().contains("compactor error"),
        "{}",
        compactor.output()
    );
    assert_eq!(compactor.sample(ROWS_WRITTEN).await.unwrap_or(0.0), 0.0);

    std::fs::remove_file(filler).unwrap();
    let rows = wait_for(
        "300 events once space returned",
        Duration::from_secs(60),
        || {
            let root = disk.0.clone();
            async move {
                let rows = rows_by_id(&root);
                (rows.len() >= 300).then_some(rows)
            }
        },
    )
    .await;
    assert_eq!(rows.len(), 300);
    let (status, _) =
        candor_e2e::collector::get_status(&compactor.metrics_endpoint, "/readyz").await;
    assert_eq!(status, Some(200), "ready again");
}

/// Waits until the events table holds at least `want` events.
async fn stored(root: &Path, want: usize) {
    let what = format!("{want} events stored");
    wait_for(&what, Duration::from_secs(60), || async move {
        (rows_by_id(root).len() >= want).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_that_refuses_writes_stops_commits_visibly_and_loses_nothing_when_it_recovers() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let disk = SmallDisk::mount("refusing", "64m");
    let compactor =
        Compactor::start(&tansu.bootstrap, &disk.0, compactor::Options::default()).await;
    let delta_errors = "candor_compactor_errors_total{reason=\"delta\"}";
    send(&collector, "before", 100).await;
    stored(&disk.0, 100).await;
    // Two outages, each with events arriving while no write can land.
    for (outage, prefix) in ["first", "second"].into_iter().enumerate() {
        let errors_before = compactor.sample(delta_errors).await.unwrap_or(0.0);
        disk.read_only(true);
        send(&collector, prefix, 100).await;
        // The error is counted inside the failed flush, and readiness drops just after it
        // returns: wait for both.
        wait_for(
            &format!(
                "a failed commit counted and /readyz 503 in outage {}",
                outage + 1
            ),
            Duration::from_secs(30),
            || async {
                let counted = compactor.sample(delta_errors).await.unwrap_or(0.0) > errors_before;
                let (status, _) =
                    candor_e2e::collector::get_status(&compactor.metrics_endpoint, "/readyz").await;
                (counted && status == Some(503)).then_some(())
            },
        )
        .await;
        disk.read_only(false);
        stored(&disk.0, 200 + 100 * outage).await;
    }
    let rows = rows_by_id(&disk.0);
    assert_eq!(rows.len(), 300, "each event once");
    let (status, _) =
        candor_e2e::collector::get_status(&compactor.metrics_endpoint, "/readyz").await;
    assert_eq!(status, Some(200), "ready again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_copy_is_dropped_also_after_the_compactor_restarts() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("dedupe");
    let mut first = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    send(&collector, "retried", 100).await;
    wait_for("100 rows", Duration::from_secs(30), || async {
        (first.sample(ROWS_WRITTEN).await >= Some(100.0)).then_some(())
    })
    .await;
    first.process().terminate().await;
    // The client sends the same export again (say its answer was lost): the same event ids.
    send(&collector, "retried", 100).await;
    let second = Compactor::start(
        &tansu.bootstrap,
        &root,
        compactor::Options {
            group_id: "dedupe-restarted".into(),
            ..compactor::Options::default()
        },
    )
    .await;
    let duplicates = "candor_compactor_duplicates_removed_total{table=\"outcome_events\"}";
    wait_for("100 copies dropped", Duration::from_secs(30), || async {
        (second.sample(duplicates).await >= Some(100.0)).then_some(())
    })
    .await;
    assert_eq!(rows_by_id(&root).len(), 100, "{}", second.output());
    assert!(
        second.output().contains("dedupe window restored"),
        "{}",
        second.output()
    );
}
