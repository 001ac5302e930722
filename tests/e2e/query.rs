//! The `candor` CLI over tables the real compactor wrote: golden answers checked against an
//! independent computation (DuckDB over the same Parquet files), coverage that says what it could
//! not read, and an incident that spans the table and the not-yet-compacted Kafka tail.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use candor_adapter::testing::ScriptedTool;
use candor_adapter::{Adapter, HttpClassifier, NotFound, RetryPolicy};
use candor_e2e::collector::{Collector, Options};
use candor_e2e::compactor::{self, Compactor};
use candor_e2e::kafka::{create_topics, read_topic};
use candor_e2e::query::{candor, explain_day_and_target};
use candor_e2e::tansu::Tansu;
use candor_e2e::{python, tempdir, wait_for};
use candor_records::proto::{Heartbeat, OutcomeCount, OutcomeEvent, Temporality};
use candor_records::tables::Table;
use candor_schema::names::topic;
use prost::Message as _;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::Value;

use crate::ingest::json;

const MINUTE: i64 = 60_000_000_000;

#[test]
fn probe_reports_an_unreachable_url_as_an_access_failure() {
    let port = candor_e2e::free_port();
    let url = format!("http://127.0.0.1:{port}/v1/items");
    let probe = candor(
        Path::new("/nonexistent"),
        &["probe", &url, "--max-attempts", "1", "--timeout-ms", "500"],
    );
    assert_eq!(probe.code, 4, "{}", probe.stderr);
    let envelope: Value = serde_json::from_str(&probe.stdout).unwrap();
    assert_eq!(envelope["outcome"]["class"], "access_failure");
    assert_eq!(envelope["outcome"]["failure"]["kind"], "connect");
    assert!(
        probe.stderr.contains("nothing can be concluded"),
        "{}",
        probe.stderr
    );
}

fn rows_written(table: &str) -> String {
    format!("candor_compactor_rows_written_total{{table=\"{table}\"}}")
}

/// The generated dataset: counter points, events and heartbeats around `t0`.
struct Golden {
    t0: i64,
    counts: Vec<OutcomeCount>,
    events: Vec<OutcomeEvent>,
    beats: Vec<Heartbeat>,
}

/// The trace whose three events `candor trace` must return in order.
const TRACE: &str = "0000000000000000000000000000feed";

struct Series<'a> {
    service: &'a str,
    instance: &'a str,
    tool: &'a str,
    target: &'a str,
    temporality: Temporality,
}

impl Series<'_> {
    fn point(&self, class: &str, start: i64, time: i64, value: u64) -> OutcomeCount {
        OutcomeCount {
            schema_version: 1,
            point_id: format!(
                "{}|{}|{class}|{}|{start}|{time}",
                self.instance, self.target, self.temporality as i32
            ),
            service_name: self.service.into(),
            service_instance_id: self.instance.into(),
            tool_name: self.tool.into(),
            tool_target: self.target.into(),
            outcome_class: class.into(),
            start_time_unix_nano: u64::try_from(start).unwrap(),
            time_unix_nano: u64::try_from(time).unwrap(),
            value,
            temporality: self.temporality as i32,
            received_time_unix_nano: u64::try_from(time).unwrap(),
            collector_id: "golden".into(),
            export_interval_ms: None,
            source: None,
            convention: None,
            sampling: None,
        }
    }
}

struct EventSpec<'a> {
    service: &'a str,
    tool: &'a str,
    target: &'a str,
    class: &'a str,
    kind: &'a str,
    action: &'a str,
    attempt: u32,
    time: i64,
    trace: String,
}

fn event(spec: EventSpec<'_>) -> OutcomeEvent {
    let partial = spec.class == "partial";
    OutcomeEvent {
        schema_version: 1,
        event_id: format!("{}-{}-{}", spec.target, spec.time, spec.attempt),
        trace_id: spec.trace,
        span_id: format!("{:016x}", spec.time),
        event_time_unix_nano: u64::try_from(spec.time).unwrap(),
        service_name: spec.service.into(),
        service_instance_id: format!("{}-1", spec.service),
        outcome_class: spec.class.into(),
        tool_name: spec.tool.into(),
        tool_target: spec.target.into(),
        failure_kind: spec.kind.into(),
        retry_action: spec.action.into(),
        retry_attempt: spec.attempt,
        retry_max_attempts: 3,
        http_status_code: (!partial).then_some(503),
        partial_returned: partial.then_some(50),
        partial_expected: partial.then_some(80),
        coverage: partial.then(|| "items 1-50 of 80".into()),
        dropped: partial.then(|| "30 items".into()),
        received_time_unix_nano: u64::try_from(spec.time).unwrap(),
        collector_id: "golden".into(),
        ..OutcomeEvent::default()
    }
}

impl Golden {
    /// Known shapes: cumulative series with a restart and a reset, a delta series, a target with
    /// only Empty calls whose counter started inside the window, a target with failure events
    /// but no counters (missing denominator), and late rows a day before.
    fn generate(t0: i64) -> Self {
        let at = |minute: i64| t0 + minute * MINUTE;
        let mut counts = Vec::new();
        let classes = ["success", "empty", "partial", "access_failure"];
        // search-a, instance 1: +10 success and +1 access_failure a minute, from 10 minutes
        // before the window (the baselines).
        let a1 = Series {
            service: "checkout",
            instance: "i-1",
            tool: "search",
            target: "search-a",
            temporality: Temporality::Cumulative,
        };
        for m in -10..60 {
            let n = u64::try_from(m + 10).unwrap();
            for (class, value) in classes.iter().zip([100 + 10 * n, 0, 0, 5 + n]) {
                counts.push(a1.point(class, at(-60), at(m), value));
            }
        }
        // search-a, instance 2: restarts at minute 29.5 (new start time), and its counter goes
        // down at minute 45 under the same start time (a reset).
        let a2 = Series {
            instance: "i-2",
            ..a1
        };
        for m in -10..60 {
            let (start, success, failures) = match m {
                ..30 => (at(-60), 50 + 4 * (m + 10), 2 * (m + 10)),
                30..45 => (at(29) + MINUTE / 2, 4 * (m - 29), 2 * (m - 29)),
                _ => (at(29) + MINUTE / 2, 1 + 4 * (m - 45), m - 45),
            };
            let values = [success, 0, 0, failures].map(|v| u64::try_from(v).unwrap());
            for (class, value) in classes.iter().zip(values) {
                counts.push(a2.point(class, start, at(m), value));
            }
        }
        // lookup-b: delta points, 8 success and 2 partial a minute.
        let b = Series {
            service: "billing",
            instance: "i-3",
            tool: "lookup",
            target: "lookup-b",
            temporality: Temporality::Delta,
        };
        for m in -5..60 {
            for (class, value) in classes.iter().zip([8, 0, 2, 0]) {
                counts.push(b.point(class, at(m - 1), at(m), value));
            }
        }
        // empty-c: only Empty calls, +5 a minute, counter started at minute 5.
        let c = Series {
            service: "batch",
            instance: "i-4",
            tool: "index",
            target: "empty-c",
            temporality: Temporality::Cumulative,
        };
        for m in 6..60 {
            let n = u64::try_from(m - 5).unwrap();
            for (class, value) in classes.iter().zip([0, 5 * n, 0, 0]) {
                counts.push(c.point(class, at(5), at(m), value));
            }
        }
        // spiky-f: +10 success a minute all hour; AccessFailures only in the last 15 minutes.
        let f = Series {
            service: "checkout",
            instance: "i-6",
            tool: "fetch",
            target: "spiky-f",
            temporality: Temporality::Cumulative,
        };
        for m in -10..60 {
            let n = u64::try_from(m + 10).unwrap();
            let failures = u64::try_from((m - 44).max(0)).unwrap() * 10;
            for (class, value) in classes.iter().zip([10 * n, 0, 0, failures]) {
                counts.push(f.point(class, at(-60), at(m), value));
            }
        }
        // late-e: a day and more before the window (stored flagged late).
        let e = Series {
            service: "legacy",
            instance: "i-5",
            tool: "search",
            target: "late-e",
            temporality: Temporality::Cumulative,
        };
        for m in 0..10 {
            let n = u64::try_from(m).unwrap();
            for (class, value) in classes.iter().zip([10 * n, 0, 0, 3 * n]) {
                counts.push(e.point(class, at(-27 * 60), at(-26 * 60 + m), value));
            }
        }

        let mut events = Vec::new();
        let spec = |target, action, attempt, time, trace: String| EventSpec {
            service: "checkout",
            tool: "search",
            target,
            class: "access_failure",
            kind: "timeout",
            action,
            attempt,
            time,
            trace,
        };
        for k in 0..15 {
            let trace = format!("{:032x}", 0xa000 + k);
            events.push(event(spec(
                "search-a",
                "exhausted",
                2,
                at(2 + 4 * k),
                trace.clone(),
            )));
            if k < 5 {
                events.push(event(spec(
                    "search-a",
                    "retry",
                    1,
                    at(2 + 4 * k) - 1_000_000_000,
                    trace,
                )));
            }
        }
        for (attempt, action, offset) in [(1, "retry", 0), (2, "retry", 1), (3, "exhausted", 3)] {
            events.push(event(EventSpec {
                kind: "server_error",
                ..spec(
                    "search-a",
                    action,
                    attempt,
                    at(20) + offset * 1_000_000_000,
                    TRACE.into(),
                )
            }));
        }
        for k in 0..10 {
            events.push(event(EventSpec {
                service: "billing",
                tool: "lookup",
                class: "partial",
                kind: "declared_total",
                ..spec(
                    "lookup-b",
                    "accept_partial",
                    1,
                    at(5 * k + 1),
                    format!("{:032x}", 0xb000 + k),
                )
            }));
        }
        for (k, action) in [
            "exhausted",
            "exhausted",
            "exhausted",
            "permanent",
            "permanent",
            "retry",
            "retry",
            "retry",
        ]
        .into_iter()
        .enumerate()
        {
            let k = i64::try_from(k).unwrap();
            events.push(event(EventSpec {
                service: "reports",
                tool: "export",
                kind: if action == "permanent" {
                    "auth"
                } else {
                    "timeout"
                },
                ..spec(
                    "orphan-d",
                    action,
                    1,
                    at(10 + k),
                    format!("{:032x}", 0xd000 + k),
                )
            }));
        }
        for k in 1..3 {
            events.push(event(EventSpec {
                service: "legacy",
                ..spec(
                    "late-e",
                    "exhausted",
                    3,
                    at(-26 * 60 + k),
                    format!("{:032x}", 0xe000 + k),
                )
            }));
        }
        // The coverage clock: hourly heartbeats the day before, then one every 10 s from 11
        // minutes before the window to 2 minutes past its end, except for a 5-minute silence
        // just before the window.
        let started = at(-28 * 60);
        let beat = |time: i64, interval_ms: u64| Heartbeat {
            schema_version: 1,
            collector_id: "golden".into(),
            time_unix_nano: u64::try_from(time).unwrap(),
            started_time_unix_nano: u64::try_from(started).unwrap(),
            interval_ms,
            ..Heartbeat::default()
        };
        let mut beats: Vec<Heartbeat> = (-28..0).map(|h| beat(at(h * 60), 3_600_000)).collect();
        let ten_seconds: i64 = 10_000_000_000;
        beats.extend(
            (at(-11)..at(62))
                .step_by(usize::try_from(ten_seconds).unwrap())
                .filter(|t| !(at(-8)..at(-3)).contains(t))
                .map(|t| beat(t, 10_000)),
        );
        Self {
            t0,
            counts,
            events,
            beats,
        }
    }

    async fn produce(&self, bootstrap: &str) {
        let producer: FutureProducer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("enable.idempotence", "true")
            .create()
            .unwrap();
        // All in flight at once, every delivery awaited.
        let mut sends = tokio::task::JoinSet::new();
        let mut add = |topic: &'static str, key: String, payload: Vec<u8>| {
            let producer = producer.clone();
            sends.spawn(async move {
                producer
                    .send(
                        FutureRecord::to(topic).key(&key).payload(&payload),
                        Duration::from_secs(30),
                    )
                    .await
                    .map_err(|(err, _)| err)
                    .unwrap();
            });
        };
        for count in &self.counts {
            add(
                topic::OUTCOME_COUNTS,
                count.tool_target.clone(),
                count.encode_to_vec(),
            );
        }
        for event in &self.events {
            add(
                topic::OUTCOME_EVENTS,
                event.tool_target.clone(),
                event.encode_to_vec(),
            );
        }
        for beat in &self.beats {
            add(
                topic::HEARTBEATS,
                beat.collector_id.clone(),
                beat.encode_to_vec(),
            );
        }
        while let Some(sent) = sends.join_next().await {
            sent.unwrap();
        }
    }
}

/// RFC 3339 with microseconds, as the CLI prints it.
fn rfc3339(nanos: i64) -> String {
    chrono::DateTime::from_timestamp_micros(nanos / 1000)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// The independent computation: `tests/e2e/clients/rates_duckdb.py` over the same files.
fn duckdb_rates(root: &Path, args: &[&str]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/clients/rates_duckdb.py");
    let output = std::process::Command::new(python())
        .arg(script)
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "rates_duckdb.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Compares `candor rates` rows with DuckDB's, field by field.
fn assert_same_rates(candor_rows: &[Value], duck: &Value, by: &str) {
    let duck_rows = duck["rows"].as_array().unwrap();
    assert_eq!(
        candor_rows.len(),
        duck_rows.len(),
        "row counts differ\ncandor: {candor_rows:#?}\nduckdb: {duck_rows:#?}"
    );
    for (ours, theirs) in candor_rows.iter().zip(duck_rows) {
        let context = format!("candor {ours}\nduckdb {theirs}");
        assert_eq!(ours[by], theirs["group"], "{context}");
        assert_eq!(ours["bucket_start"], theirs["bucket_start"], "{context}");
        for field in [
            "calls",
            "success",
            "empty",
            "partial",
            "access_failure",
            "denominator",
            "failure_events",
        ] {
            assert_eq!(ours[field], theirs[field], "{field}: {context}");
        }
        match (
            ours["silent_failure_rate"].as_f64(),
            theirs["rate"].as_f64(),
        ) {
            (Some(a), Some(b)) => assert!((a - b).abs() < 1e-12, "rate: {context}"),
            (a, b) => assert_eq!(a, b, "rate: {context}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rates_trace_and_incident_match_an_independent_reader_and_state_their_coverage() {
    let now = i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    )
    .unwrap();
    let hour = 60 * MINUTE;
    let t0 = now.div_euclid(hour) * hour - 3 * hour;
    let golden = Golden::generate(t0);
    let mut tansu = Tansu::start().await;
    let topics = Table::ALL.map(Table::topic);
    create_topics(&tansu.bootstrap, &topics, 3).await.unwrap();
    let root = tempdir("query-golden");
    let compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    golden.produce(&tansu.bootstrap).await;
    for (table, n) in [
        ("outcome_counts", golden.counts.len()),
        ("outcome_events", golden.events.len()),
        ("heartbeats", golden.beats.len()),
    ] {
        let series = rows_written(table);
        wait_for(
            &format!("{n} rows in {table}"),
            Duration::from_secs(90),
            || async { (compactor.sample(&series).await >= Some(n as f64)).then_some(()) },
        )
        .await;
    }
    let since = rfc3339(golden.t0);
    let until = rfc3339(golden.t0 + hour);
    let window = [
        "--since",
        since.as_str(),
        "--until",
        until.as_str(),
        "--no-live",
    ];

    // Per target in 15-minute buckets, against DuckDB.
    let answer = candor(&root, &[&["rates", "--step", "15m"], &window[..]].concat());
    assert_eq!(answer.code, 0, "{}", answer.stderr);
    assert_eq!(answer.class(), "success");
    let duck = duckdb_rates(
        &root,
        &["--since", &since, "--until", &until, "--step", "900"],
    );
    assert_same_rates(&answer.rows(), &duck, "target");

    // Per tool over a window that holds the late rows of the day before, against DuckDB.
    let early = rfc3339(golden.t0 - 27 * hour);
    let wide = candor(
        &root,
        &[
            "rates",
            "--by",
            "tool",
            "--since",
            &early,
            "--until",
            &until,
            "--no-live",
        ],
    );
    // The window holds the 5-minute heartbeat silence: partial, and said, with its rows.
    assert_eq!(wide.code, 3, "{}", wide.stderr);
    let dropped = &wide.json()["envelope"]["outcome"]["truncation"]["dropped"];
    assert!(
        dropped
            .as_str()
            .unwrap()
            .contains("no collector heartbeat between"),
        "{dropped}"
    );
    let duck = duckdb_rates(
        &root,
        &["--since", &early, "--until", &until, "--by", "tool"],
    );
    assert_same_rates(&wide.rows(), &duck, "tool");

    // Known answers, by hand.
    let whole = candor(&root, &[&["rates"], &window[..]].concat());
    let by_target: BTreeMap<String, Value> = whole
        .rows()
        .into_iter()
        .map(|row| (row["target"].as_str().unwrap().to_owned(), row))
        .collect();
    let delta = &by_target["lookup-b"];
    assert_eq!(
        (delta["calls"].as_u64(), delta["partial"].as_u64()),
        (Some(600), Some(120))
    );
    assert_eq!(delta["silent_failure_rate"].as_f64(), Some(0.2));
    let empty_only = &by_target["empty-c"];
    assert_eq!(empty_only["empty"], empty_only["calls"]);
    assert_eq!(empty_only["calls"].as_u64(), Some(5 * 54));
    assert_eq!(empty_only["silent_failure_rate"].as_f64(), Some(0.0));
    let orphan = &by_target["orphan-d"];
    assert_eq!(orphan["denominator"], "missing");
    assert!(orphan["silent_failure_rate"].is_null() && orphan["calls"].is_null());
    assert_eq!(orphan["failure_events"].as_u64(), Some(5));
    assert!(whole.stderr.is_empty() || !whole.stderr.contains("No failures"));
    // The late rows of the day before lie outside the window: no row, not even a failure count
    // (the window's filter is only left out when every row lies inside it).
    assert!(!by_target.contains_key("late-e"), "{by_target:#?}");
    let restarted = &by_target["search-a"];
    // i-1: 600 success, 60 failures; i-2: 4 a minute to minute 29, a restart (4, then +4 to 60),
    // a reset (1, then +4): 4*30 + 4*15 + 1 + 4*14 = 237 success; 2*30 + 2*15 + 0 + 14 = 104.
    assert_eq!(restarted["success"].as_u64(), Some(600 + 237));
    assert_eq!(restarted["access_failure"].as_u64(), Some(60 + 104));

    // Spikes: spiky-f failed only in the last quarter hour; search-a fails at a steady rate.
    let end = rfc3339(golden.t0 + hour);
    let spikes = candor(
        &root,
        &[
            "spikes",
            "--until",
            &end,
            "--window",
            "15m",
            "--baseline",
            "45m",
            "--no-live",
        ],
    );
    assert_eq!(spikes.code, 0, "{}", spikes.stderr);
    let found: Vec<Value> = spikes.rows();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["target"], "spiky-f");
    assert_eq!(found[0]["factor"], "new");
    assert_eq!(found[0]["window_access_failures"].as_u64(), Some(150));
    // A baseline reaching back before the counters began is said to be shorter.
    let long = candor(
        &root,
        &[
            "spikes",
            "--until",
            &end,
            "--window",
            "15m",
            "--baseline",
            "2h",
            "--no-live",
        ],
    );
    let notes = long.json()["coverage"]["notes"].to_string();
    assert!(
        notes.contains("shorter than asked") && notes.contains("spiky-f"),
        "{notes}"
    );

    // Mistakes name the problem and the fix, with exit 2.
    for (args, says) in [
        (vec!["sql", "SELEC oops"], "SQL statement could not be run"),
        (
            vec!["sql", "SELECT no_such_column FROM outcome_events"],
            "no_such_column",
        ),
        (
            vec!["sql", "CREATE TABLE t AS SELECT 1"],
            "candor only reads",
        ),
        (vec!["rates", "--since", "yesterday"], "RFC 3339"),
        (vec!["rates", "--step", "0s"], "positive duration"),
        (vec!["trace", "not-a-trace"], "32 hex digits"),
    ] {
        let wrong = candor(&root, &[&args[..], &["--no-live"]].concat());
        assert_eq!(wrong.code, 2, "{args:?}: {}", wrong.stderr);
        assert!(wrong.stderr.contains(says), "{args:?}: {}", wrong.stderr);
    }

    // A trace, in order.
    let trace = candor(
        &root,
        &[
            "trace",
            TRACE,
            "--no-live",
            "--since",
            &since,
            "--until",
            &until,
        ],
    );
    assert_eq!(trace.code, 0, "{}", trace.stderr);
    let attempts: Vec<u64> = trace
        .rows()
        .iter()
        .map(|r| r["retry_attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, [1, 2, 3]);
    // Without a window a trace reaches now, which the tables alone do not: partial, and said.
    let summary = candor(&root, &["trace", TRACE, "--no-live", "--format", "table"]);
    assert_eq!(summary.code, 3, "{}", summary.stderr);
    assert!(summary.stderr.contains("1 exhausted"), "{}", summary.stderr);
    assert!(
        summary.stderr.contains("reaches only"),
        "{}",
        summary.stderr
    );

    // An incident: every event of one target, with the retry outcomes summed up.
    let incident = candor(
        &root,
        &[
            "incident",
            "--target",
            "orphan-d",
            "--from",
            &since,
            "--to",
            &until,
            "--no-live",
            "--format",
            "table",
        ],
    );
    assert_eq!(incident.code, 0, "{}", incident.stderr);
    // What every row shares is said once above the table (`name: value`); then a header and
    // the eight rows.
    assert!(
        incident.stdout.contains("target: orphan-d\n"),
        "{}",
        incident.stdout
    );
    let shared = |line: &&str| {
        line.split_once(':').is_some_and(|(name, _)| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
    };
    assert_eq!(
        incident.stdout.lines().skip_while(shared).count(),
        1 + 8,
        "{}",
        incident.stdout
    );
    assert!(
        incident.stderr.contains("3 exhausted")
            && incident.stderr.contains("2 permanent")
            && incident.stderr.contains("3 attempt(s) were retried")
            && incident.stderr.contains("reports (8)"),
        "{}",
        incident.stderr
    );

    // Pruning: one day and one target read only that day's files and skip the rest.
    let day = &since[..10];
    let explain = explain_day_and_target(&root, day, "orphan-d", &["--kafka", &tansu.bootstrap]);
    // SQL reaches now, and this dataset's newest heartbeat is two hours old: partial, and said.
    assert_eq!(explain.code, 3, "{}", explain.stderr);
    assert!(
        explain.stderr.contains("reaches only"),
        "{}",
        explain.stderr
    );
    let files = compactor::table_files(&root, "outcome_events");
    let that_day = files
        .iter()
        .filter(|f| f.contains(&format!("date={day}")))
        .count();
    assert!(that_day > 0 && that_day < files.len(), "{files:?}");
    // The plan names the files it reads: only that day's, each opened once.
    let named: Vec<&str> = explain
        .stdout
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']' || c == '"')
        .filter(|word| word.contains(".parquet"))
        .collect();
    assert!(
        !named.is_empty()
            && named
                .iter()
                .all(|path| path.contains(&format!("date={day}")))
            && explain.stdout.contains(&format!("files_opened={that_day}")),
        "only the day's {that_day} file(s) of {} should be read:\n{}",
        files.len(),
        explain.stdout
    );
    // Within them, the target's statistics and bloom filter leave only its rows.
    assert!(
        explain.stdout.contains("pushdown_rows_matched=8"),
        "{}",
        explain.stdout
    );

    // A confirmed empty answer is exit 1 and says so; a window past the data is partial.
    let nothing = candor(
        &root,
        &[&["incident", "--target", "no-such-target"], &window[..]].concat(),
    );
    assert_eq!(nothing.code, 1, "{}", nothing.stdout);
    assert_eq!(nothing.class(), "empty");
    let recent = candor(&root, &["rates", "--since", "10m", "--no-live"]);
    assert_eq!(recent.code, 3, "{}", recent.stdout);
    let truncation = &recent.json()["envelope"]["outcome"]["truncation"];
    assert!(
        truncation["dropped"]
            .as_str()
            .unwrap()
            .contains("reaches only"),
        "{truncation}"
    );

    // No table root: an access failure that names the fix, not an empty answer.
    let missing = candor(&root.join("nowhere"), &["rates", "--no-live"]);
    assert_eq!(missing.code, 4, "{}", missing.stdout);
    assert_eq!(missing.class(), "access_failure");
    assert!(
        missing.stdout.contains("does not exist"),
        "{}",
        missing.stdout
    );

    // Kafka stopped: the tail cannot be read, so the answer is partial and says why.
    tansu.stop().await;
    let stopped = candor(
        &root,
        &[
            &[
                "incident",
                "--target",
                "orphan-d",
                "--live",
                "--kafka",
                &tansu.bootstrap,
                "--kafka-timeout",
                "2s",
            ],
            &window[..4],
        ]
        .concat(),
    );
    assert_eq!(stopped.code, 3, "{}", stopped.stdout);
    assert_eq!(stopped.rows().len(), 8);
    let kafka = stopped.source("kafka candor.outcome-events.v1");
    assert_eq!(kafka["state"], "unreachable", "{kafka}");
    assert!(
        kafka["reason"].as_str().unwrap().contains(&tansu.bootstrap),
        "{kafka}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incident_joins_the_table_and_the_kafka_tail_without_duplicates() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let since = candor_e2e::rfc3339(collector.covered_since().await);
    let root = tempdir("query-tail");
    let mut compactor =
        Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;

    let mut otlp =
        candor_adapter::otlp::OtlpConfig::new(collector.grpc_endpoint.clone(), "e2e-orders");
    otlp.service_instance_id = Some("orders-1".into());
    let telemetry = candor_adapter::otlp::init(otlp).unwrap();
    let target = "http://orders.test/v1/lookup";
    let adapter = Adapter::builder("lookup", target)
        .classifier(HttpClassifier::new(NotFound::Unreachable))
        .retry(RetryPolicy::default().with_max_attempts(2).unwrap())
        .build()
        .unwrap();
    let failing = || ScriptedTool::returning([json(503, ""), json(503, "")]);

    // One failed call (two events) reaches the table.
    let tool = failing();
    adapter.call(|ctx| tool.attempt(ctx)).await;
    let provider = telemetry.tracer_provider().clone();
    tokio::task::spawn_blocking(move || provider.force_flush())
        .await
        .unwrap()
        .unwrap();
    let series = rows_written("outcome_events");
    wait_for("2 events in the table", Duration::from_secs(60), || async {
        (compactor.sample(&series).await >= Some(2.0)).then_some(())
    })
    .await;
    compactor.process().terminate().await;

    // Then the compactor is gone: the next call's events are only in Kafka, and a client's
    // retried copy of a stored event arrives again.
    let tool = failing();
    adapter.call(|ctx| tool.attempt(ctx)).await;
    let provider = telemetry.tracer_provider().clone();
    tokio::task::spawn_blocking(move || provider.force_flush())
        .await
        .unwrap()
        .unwrap();
    // Each call's first attempt arrives twice: as the log record emitted when it failed and as
    // its span event (contract rule `TELEMETRY-MOMENT`), one event with one id.
    let stored = read_topic(
        &tansu.bootstrap,
        topic::OUTCOME_EVENTS,
        6,
        Duration::from_secs(30),
    );
    assert_eq!(stored.len(), 6);
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &tansu.bootstrap)
        .create()
        .unwrap();
    let first = &stored[0];
    producer
        .send(
            FutureRecord::to(topic::OUTCOME_EVENTS)
                .key(target)
                .payload(first.payload.as_slice()),
            Duration::from_secs(30),
        )
        .await
        .map_err(|(err, _)| err)
        .unwrap();

    let answer = candor(
        &root,
        &[
            "incident",
            "--target",
            target,
            "--since",
            &since,
            "--kafka",
            &tansu.bootstrap,
        ],
    );
    assert_eq!(answer.code, 0, "{}\n{}", answer.stdout, answer.stderr);
    let rows = answer.rows();
    let ids: std::collections::BTreeSet<&str> = rows
        .iter()
        .map(|r| r["event_id"].as_str().unwrap())
        .collect();
    assert_eq!((rows.len(), ids.len()), (4, 4), "{rows:#?}");
    let table = answer.source("table outcome_events");
    let kafka = answer.source("kafka candor.outcome-events.v1");
    assert_eq!(table["rows"], 2, "{table}");
    assert_eq!(kafka["rows"], 2, "{kafka}");
    assert!(
        kafka["detail"]
            .as_str()
            .unwrap()
            .contains("2 retried copies removed"),
        "{kafka}"
    );
    let attempts: Vec<u64> = rows
        .iter()
        .map(|r| r["retry_attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, [1, 2, 1, 2]);

    // Without the tail, the same question cannot see the newest call and says it is partial.
    let table_only = candor(
        &root,
        &[
            "incident",
            "--target",
            target,
            "--since",
            &since,
            "--no-live",
        ],
    );
    assert_eq!(table_only.code, 3, "{}", table_only.stdout);
    assert_eq!(table_only.rows().len(), 2);
    telemetry.shutdown().unwrap();
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_pipeline_asked_about_the_last_hour_is_partial_and_never_says_no_failures() {
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("query-fresh");
    let compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let series = rows_written("heartbeats");
    wait_for(
        "a heartbeat in the table",
        Duration::from_secs(60),
        || async { (compactor.sample(&series).await >= Some(1.0)).then_some(()) },
    )
    .await;
    // From here on the pipeline provably runs; the hour before it, it did not.
    let started = rfc3339(
        i64::try_from(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos(),
        )
        .unwrap(),
    );
    collector.heartbeat_after_now().await;
    let target = "http://never.test/reported";
    let kafka = ["--kafka", tansu.bootstrap.as_str()];
    let last_hour: [&[&str]; 4] = [
        &["rates", "--target", target, "--since", "1h"],
        &["incident", "--target", target, "--since", "1h"],
        &["spikes", "--target", target],
        &[
            "sql",
            "SELECT count(*) AS n FROM outcome_events WHERE tool_target = 'x'",
            "--since",
            "1h",
        ],
    ];
    for question in last_hour {
        let answer = candor(&root, &[question, &kafka[..]].concat());
        let context = format!("{question:?}\n{}\n{}", answer.stdout, answer.stderr);
        assert_eq!(answer.code, 3, "{context}");
        let gaps = answer.json()["envelope"]["outcome"]["truncation"]["dropped"].to_string();
        assert!(
            gaps.contains("no collector heartbeat was read before it"),
            "{context}"
        );
        assert!(!answer.stderr.contains("No failures"), "{context}");
    }

    // Asked about the stretch the pipeline covers, the same question is a confirmed absence.
    let covered = candor(
        &root,
        &[
            &["incident", "--target", target, "--since", &started][..],
            &kafka[..],
        ]
        .concat(),
    );
    assert_eq!(covered.code, 1, "{}\n{}", covered.stdout, covered.stderr);
}
