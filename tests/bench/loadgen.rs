//! `candor-loadgen`: OTLP/gRPC load for the collector, with figures.
//!
//! Sends pre-built trace export requests of `--batch` `tool.outcome` events over `--connections`
//! connections for `--duration`, at full speed or at `--rate` events/s, then prints accepted
//! events/s, request latency percentiles, and the collector's CPU time and peak RSS (read from
//! `/proc/PID` when `--collector-pid` is given). With `--kafka` it checks that the
//! events topic holds every accepted event (a fresh topic: stored = high watermark − low).
//! With `--mix`, each request holds `--batch` spans of a realistic mix instead (80 % ordinary
//! spans, 20 % GenAI, MCP and HTTP client spans, `candor_e2e::load::mix_request`, its traces
//! renumbered in every request so that its calls are new calls), and the
//! figures count spans. With `--raw-kafka` and `--preload N` it produces N records straight to the
//! topics instead: outcome events, or with `--operations` the `tool.lifecycle` events of
//! asynchronous operations.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use candor_e2e::records::{mix, realistic_counts, realistic_event};
use candor_schema::names::topic;
use candor_schema::{EvidenceKind, LifecycleState};
use clap::Parser;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use rdkafka::consumer::{BaseConsumer, Consumer as _};

#[derive(Parser)]
#[command(about = "OTLP/gRPC load for the Candor collector")]
struct Args {
    /// The collector's OTLP/gRPC endpoint.
    #[arg(long, default_value = "http://127.0.0.1:4317")]
    endpoint: String,
    /// Concurrent connections, each with one request in flight.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Events per request.
    #[arg(long, default_value_t = 500)]
    batch: usize,
    /// How long to send, in seconds.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Target rate in events/s across all connections (default: as fast as acknowledged).
    #[arg(long)]
    rate: Option<u64>,
    /// The collector's process id, for its CPU time and peak RSS.
    #[arg(long)]
    collector_pid: Option<u32>,
    /// Check afterwards that the events topic holds every accepted event.
    #[arg(long = "kafka", alias = "kafka-brokers")]
    kafka_brokers: Option<String>,
    /// Instead of OTLP, produce the same records straight to Kafka at these brokers (idempotent,
    /// acks=all, zstd, 10,000 in flight): the ceiling the collector is measured against.
    #[arg(long)]
    raw_kafka: Option<String>,
    /// With `--raw-kafka`: produce this many distinct, realistic records (unique event ids,
    /// shaped as the adapter's events of failed calls, 50 targets, 8 services, every field the
    /// collector fills), each timed `--age-s` seconds ago,
    /// then stop; `--rate` paces them (records/s).
    #[arg(long)]
    preload: Option<u64>,
    /// With `--preload`: how old the records' event times are, in seconds.
    #[arg(long, default_value_t = 0)]
    age_s: u64,
    /// With `--preload`: spread the event times over this many seconds, ending `--age-s` ago
    /// (0: one microsecond apart on average).
    #[arg(long, default_value_t = 0)]
    spread_s: u64,
    /// With `--preload`: also produce the `tool.outcomes` counter points of the 50 targets
    /// (cumulative, the four classes, one point a minute across the spread).
    #[arg(long)]
    counts: bool,
    /// With `--preload`: produce `tool.lifecycle` records to the operation-events topic instead
    /// of outcome events: operations of the same 50 targets, each accepted, perhaps queued and
    /// running, nine in ten then ended, keyed by operation id as the collector keys them.
    #[arg(long, requires = "preload")]
    operations: bool,
    /// Send requests of `--batch` spans of the realistic mix instead of `tool.outcome` events.
    #[arg(long)]
    mix: bool,
}

/// Counts the records of the events topic by reading it from the beginning (Tansu's high
/// watermark can lag the last batch, so watermarks are not used), until `expected` have arrived
/// or nothing arrived for three seconds.
fn count_records(brokers: &str, expected: u64) -> anyhow::Result<u64> {
    use rdkafka::{Offset, TopicPartitionList};
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "candor-loadgen")
        .set("enable.auto.commit", "false")
        .create()
        .context("consumer")?;
    let metadata = consumer.fetch_metadata(Some(topic::OUTCOME_EVENTS), Duration::from_secs(10))?;
    let mut assignment = TopicPartitionList::new();
    for partition in metadata.topics().iter().flat_map(|t| t.partitions()) {
        assignment.add_partition_offset(
            topic::OUTCOME_EVENTS,
            partition.id(),
            Offset::Beginning,
        )?;
    }
    consumer.assign(&assignment)?;
    let mut stored = 0u64;
    let mut last = Instant::now();
    while last.elapsed() < Duration::from_secs(3) {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(_)) => {
                stored += 1;
                last = Instant::now();
            }
            Some(Err(err)) => bail!("reading {}: {err}", topic::OUTCOME_EVENTS),
            None if stored >= expected => break,
            None => {}
        }
    }
    Ok(stored)
}

/// (user + system CPU seconds, peak RSS in KiB) of a process.
fn process_usage(pid: u32) -> anyhow::Result<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: u64 = fields.get(11).and_then(|f| f.parse().ok()).unwrap_or(0)
        + fields
            .get(12)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    // The kernel's USER_HZ is 100 on Linux.
    Ok((ticks as f64 / 100.0, hwm))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index]
}

/// Records the raw producer keeps in flight. A closed loop's rate is what it keeps in flight over
/// the time to acknowledge one: with 1,000 it measured that time (about 7 ms), not the broker,
/// and read 147,000 records/s on the same broker that took 830,000 with 10,000.
const RAW_IN_FLIGHT: usize = 10_000;

/// Produces encoded `OutcomeEvent` records straight to Kafka for `seconds`, with up to
/// [`RAW_IN_FLIGHT`] in flight, and prints acknowledged records/s.
async fn raw_kafka(brokers: &str, seconds: u64) -> anyhow::Result<()> {
    use candor_records::proto::OutcomeEvent;
    use prost::Message as _;
    use rdkafka::producer::FutureRecord;

    let producer = events_producer(brokers).await?;
    let payloads: Vec<(String, Vec<u8>)> = (0..50)
        .map(|i| {
            let target = format!("https://search-{i}.internal/v1/items");
            let event = OutcomeEvent {
                tool_target: target.clone(),
                tool_name: "search".into(),
                outcome_class: "access_failure".into(),
                failure_kind: "server_error".into(),
                retry_action: "retry".into(),
                event_id: format!("{i:032x}"),
                trace_id: "01".repeat(16),
                span_id: "07".repeat(8),
                service_name: "loadgen".into(),
                ..OutcomeEvent::default()
            };
            (target, event.encode_to_vec())
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    // Sent records that were not acknowledged, and sends the producer's queue refused, are
    // printed: a ceiling lowered by failures says so.
    let (mut sent, mut queue_refused, mut acknowledged) = (0u64, 0u64, 0u64);
    let mut in_flight = std::collections::VecDeque::new();
    let mut n = 0usize;
    while Instant::now() < deadline {
        while in_flight.len() < RAW_IN_FLIGHT {
            let (key, payload) = &payloads[n % payloads.len()];
            n += 1;
            match producer.send_result(
                FutureRecord::to(topic::OUTCOME_EVENTS)
                    .key(key)
                    .payload(payload),
            ) {
                Ok(delivery) => {
                    sent += 1;
                    in_flight.push_back(delivery);
                }
                Err(_) => {
                    queue_refused += 1;
                    break;
                }
            }
        }
        acknowledged += settle_oldest(&mut in_flight).await;
    }
    while !in_flight.is_empty() {
        acknowledged += settle_oldest(&mut in_flight).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!("raw_kafka_acknowledged {acknowledged} seconds {elapsed:.1}");
    println!(
        "raw_kafka_failed {} queue_refused {queue_refused}",
        sent - acknowledged
    );
    println!(
        "raw_kafka_records_per_s {:.0}",
        acknowledged as f64 / elapsed
    );
    Ok(())
}

/// Awaits the oldest delivery in flight: 1 when Kafka acknowledged it, 0 when it failed or
/// nothing was in flight.
async fn settle_oldest(
    in_flight: &mut std::collections::VecDeque<rdkafka::producer::DeliveryFuture>,
) -> u64 {
    match in_flight.pop_front() {
        Some(delivery) => u64::from(matches!(delivery.await, Ok(Ok(_)))),
        None => 0,
    }
}

/// Creates the events topic (3 partitions) unless it exists, and a producer like the
/// collector's: idempotent, acks=all, zstd.
async fn events_producer(brokers: &str) -> anyhow::Result<rdkafka::producer::FutureProducer> {
    candor_e2e::kafka::create_topics(brokers, &[topic::OUTCOME_EVENTS], 3).await?;
    rdkafka::ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("compression.type", "zstd")
        .set("linger.ms", "5")
        .create()
        .context("producer")
}

/// A record's key and payload.
type KeyedRecord = (String, Vec<u8>);

/// What `--preload` produces.
struct Preload {
    n: u64,
    age_s: u64,
    spread_s: u64,
    counts: bool,
    operations: bool,
    rate: Option<u64>,
}

/// Produces `n` distinct realistic records to the events topic (idempotent, acks=all, zstd), or
/// with `operations` to the operation-events topic, and with `counts` the counter points of the
/// same targets, and prints how long it took.
async fn preload(brokers: &str, plan: Preload) -> anyhow::Result<()> {
    use rdkafka::producer::FutureRecord;
    let Preload {
        n,
        age_s,
        spread_s,
        counts,
        operations,
        rate,
    } = plan;
    let producer = events_producer(brokers).await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("clock")?;
    let last_nanos = u64::try_from(now.as_nanos())?.saturating_sub(age_s * 1_000_000_000);
    let event_nanos = last_nanos.saturating_sub(spread_s * 1_000_000_000);
    let step = if spread_s == 0 {
        1000
    } else {
        (spread_s * 1_000_000_000 / n.max(1)).max(1)
    };
    let mut records: Box<dyn Iterator<Item = (&'static str, KeyedRecord)>> = if operations {
        candor_e2e::kafka::create_topics(brokers, &[topic::OPERATION_EVENTS], 3).await?;
        let (count, open) = operations_in(n);
        println!("with {count} operations, {open} never ending");
        Box::new(
            operation_records(n, event_nanos, step).map(|record| (topic::OPERATION_EVENTS, record)),
        )
    } else {
        Box::new((0..n).map(move |i| {
            (
                topic::OUTCOME_EVENTS,
                realistic_event(i, event_nanos + i * step, step),
            )
        }))
    };
    if counts {
        candor_e2e::kafka::create_topics(brokers, &[topic::OUTCOME_COUNTS], 3).await?;
        let points = realistic_counts(event_nanos, last_nanos);
        println!("with {} counter points", points.len());
        records = Box::new(records.chain(points.into_iter().map(|p| (topic::OUTCOME_COUNTS, p))));
    }
    let started = Instant::now();
    let mut in_flight = std::collections::VecDeque::new();
    let mut acknowledged = 0u64;
    let mut produced = 0u64;
    for (i, (topic, (key, payload))) in records.enumerate() {
        produced += 1;
        if let Some(rate) = rate {
            let due = started + Duration::from_secs_f64(i as f64 / rate as f64);
            tokio::time::sleep_until(due.into()).await;
        }
        loop {
            match producer.send_result(FutureRecord::to(topic).key(&key).payload(&payload)) {
                Ok(delivery) => {
                    in_flight.push_back(delivery);
                    break;
                }
                Err(_) => {
                    acknowledged += settle_oldest(&mut in_flight).await;
                }
            }
        }
        while in_flight.len() >= 10_000 {
            acknowledged += settle_oldest(&mut in_flight).await;
        }
    }
    while !in_flight.is_empty() {
        acknowledged += settle_oldest(&mut in_flight).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!("preloaded {acknowledged} of {produced} records in {elapsed:.1}s");
    anyhow::ensure!(
        acknowledged == produced,
        "only {acknowledged} of {produced} records were acknowledged"
    );
    Ok(())
}

/// The states operation `op` of [`operation_records`] goes through: accepted, then queued and
/// running or not (one in two each), then in nine of ten an end: completed (70 % of all),
/// failed (10 %), partial or cancelled (5 % each). The tenth is left open.
fn operation_states(op: u64) -> Vec<LifecycleState> {
    let path = mix(op ^ 0x3c3c);
    let mut states = vec![LifecycleState::Accepted];
    if path & 1 == 1 {
        states.push(LifecycleState::Queued);
    }
    if path & 2 == 2 {
        states.push(LifecycleState::Running);
    }
    let end = match mix(op ^ 0xa5a5) % 100 {
        0..10 => None,
        10..80 => Some(LifecycleState::Completed),
        80..90 => Some(LifecycleState::Failed),
        90..95 => Some(LifecycleState::Partial),
        _ => Some(LifecycleState::Cancelled),
    };
    states.extend(end);
    states
}

/// The record of operation `op` in `state` (its `index`-th), the operation accepted at
/// `accepted_nanos`: a queued state follows 1 to 5 s later, a running one 10 to 60 s, an end 1.5
/// to 11.5 minutes. Shaped as the collector writes an adapter's `tool.lifecycle` event, with what
/// the contract asks of each state: the evidence of a completion (and of the acceptance), the
/// reason of a failure, the coverage of a partial end. Target `op % 50`, its tool and service
/// those of its counter points ([`realistic_counts`]), one of three instances.
fn operation_event(
    op: u64,
    index: usize,
    state: LifecycleState,
    accepted_nanos: u64,
) -> KeyedRecord {
    use candor_records::proto::{OperationEvent, RECORD_SCHEMA_VERSION};
    use prost::Message as _;
    const SECOND: u64 = 1_000_000_000;
    // Distinct for every record: an operation has at most four.
    let record = (op << 2) | index as u64;
    let jitter = mix(record ^ 0x1f1f);
    let delay = match state {
        LifecycleState::Accepted => 0,
        LifecycleState::Queued => SECOND + jitter % (4 * SECOND),
        LifecycleState::Running => 10 * SECOND + jitter % (50 * SECOND),
        _ => 90 * SECOND + jitter % (600 * SECOND),
    };
    let at = accepted_nanos + delay;
    let (target, service) = (op % 50, op % 50 % 8);
    let operation_id = format!("op-{:016x}", mix(op ^ 0x6f70));
    let evidenced = matches!(state, LifecycleState::Accepted | LifecycleState::Completed);
    let event = OperationEvent {
        schema_version: RECORD_SCHEMA_VERSION,
        event_id: format!("{:016x}{:016x}", mix(record), mix(record ^ 0x5555)),
        trace_id: format!("{:016x}{:016x}", mix(record ^ 0x7777), mix(record ^ 0x9999)),
        span_id: format!("{:016x}", mix(record ^ 0xbbbb)),
        event_time_unix_nano: at,
        service_name: format!("service-{service}"),
        service_instance_id: format!("service-{service}-{}", op % 3),
        tool_name: ["search", "lookup", "fetch", "geocode"][(target % 4) as usize].into(),
        tool_target: format!("https://api-{target}.internal/v1/search"),
        operation_id: operation_id.clone(),
        lifecycle_state: state.as_str().into(),
        reason: (state == LifecycleState::Failed).then(|| "the export's source was dropped".into()),
        coverage: (state == LifecycleState::Partial).then(|| "rows 1-800 of 1000".into()),
        evidence_kind: evidenced.then(|| EvidenceKind::JobId.as_str().into()),
        evidence_value: evidenced.then(|| operation_id.clone()),
        resource_id: matches!(state, LifecycleState::Completed | LifecycleState::Partial)
            .then(|| format!("https://api-{target}.internal/v1/exports/{operation_id}")),
        resource_version: (state == LifecycleState::Completed)
            .then(|| format!("\"{}\"", mix(op ^ 0xe7a9) % 1000)),
        source_system: format!("api-{target}"),
        actor: op.is_multiple_of(2).then(|| format!("user-{}", op % 200)),
        adapter: "candor-adapter/0.1.0".into(),
        authority: None,
        received_time_unix_nano: at + 1_000_000 + mix(record ^ 0x7e7e) % 49_000_000,
        collector_id: "collector-1".into(),
    };
    (operation_id, event.encode_to_vec())
}

/// The `tool.lifecycle` records of `--operations`: operation after operation
/// ([`operation_states`]) until there are `n`, each accepted at the slot of its first record
/// (`first_nanos + record * step`), so that the acceptances spread like the events; the later
/// states follow within minutes, past the spread's end for the last operations. `n` may cut the
/// last operation before its end.
fn operation_records(n: u64, first_nanos: u64, step: u64) -> impl Iterator<Item = KeyedRecord> {
    (0u64..)
        .scan(0u64, move |records, op| {
            let accepted_nanos = first_nanos + *records * step;
            let states = operation_states(op);
            *records += states.len() as u64;
            Some(
                states
                    .into_iter()
                    .enumerate()
                    .map(move |(index, state)| operation_event(op, index, state, accepted_nanos)),
            )
        })
        .flatten()
        .take(usize::try_from(n).unwrap_or(usize::MAX))
}

/// How many operations the first `n` records of [`operation_records`] hold, and how many of them
/// are left open (the last one too when `n` cuts it before its end).
fn operations_in(n: u64) -> (u64, u64) {
    let (mut records, mut operations, mut open) = (0u64, 0u64, 0u64);
    while records < n {
        let states = operation_states(operations);
        let kept = states
            .len()
            .min(usize::try_from(n - records).unwrap_or(usize::MAX));
        open += u64::from(
            states[..kept]
                .last()
                .is_some_and(|state| !state.is_terminal()),
        );
        records += kept as u64;
        operations += 1;
    }
    (operations, open)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let (Some(brokers), Some(n)) = (&args.raw_kafka, args.preload) {
        let plan = Preload {
            n,
            age_s: args.age_s,
            spread_s: args.spread_s,
            counts: args.counts,
            operations: args.operations,
            rate: args.rate,
        };
        return preload(brokers, plan).await;
    }
    if let Some(brokers) = &args.raw_kafka {
        return raw_kafka(brokers, args.seconds).await;
    }
    let before = args.collector_pid.map(process_usage).transpose()?;
    let accepted = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for connection in 0..args.connections {
        let endpoint = args.endpoint.clone();
        let (accepted, refused) = (accepted.clone(), refused.clone());
        let request = if args.mix {
            candor_e2e::load::mix_request(connection, args.batch)
        } else {
            candor_e2e::load::request(connection, args.batch)
        };
        let per_connection_rate = args.rate.map(|r| r as f64 / args.connections as f64);
        let batch = args.batch;
        let mix = args.mix;
        tasks.push(tokio::spawn(async move {
            let mut client = TraceServiceClient::connect(endpoint)
                .await?
                .max_encoding_message_size(64 << 20);
            let mut latencies = Vec::new();
            let mut sent = 0u64;
            while Instant::now() < deadline {
                if let Some(rate) = per_connection_rate {
                    // Pace to the target rate: the n-th request leaves at n·batch/rate.
                    let due = started + Duration::from_secs_f64(sent as f64 * batch as f64 / rate);
                    tokio::time::sleep_until(due.into()).await;
                }
                let mut request = request.clone();
                if mix {
                    candor_e2e::load::renumber_traces(&mut request, sent);
                }
                let t0 = Instant::now();
                match client.export(request).await {
                    Ok(response) => {
                        let rejected = response
                            .into_inner()
                            .partial_success
                            .map_or(0, |p| p.rejected_spans);
                        accepted.fetch_add(batch as u64 - rejected as u64, Ordering::Relaxed);
                    }
                    Err(_) => {
                        refused.fetch_add(batch as u64, Ordering::Relaxed);
                    }
                }
                latencies.push(t0.elapsed());
                sent += 1;
            }
            Ok::<_, anyhow::Error>(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    let accepted = accepted.load(Ordering::Relaxed);
    println!(
        "connections {} batch {} seconds {:.1}{}",
        args.connections,
        args.batch,
        elapsed,
        if args.mix {
            " (mix: events are spans)"
        } else {
            ""
        }
    );
    println!(
        "accepted_events {accepted} refused_events {}",
        refused.load(Ordering::Relaxed)
    );
    println!("accepted_events_per_s {:.0}", accepted as f64 / elapsed);
    println!(
        "latency_ms p50 {:.2} p99 {:.2} max {:.2} (requests {})",
        percentile(&latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        latencies.len()
    );
    if let (Some(pid), Some((cpu_before, _))) = (args.collector_pid, before) {
        let (cpu_after, peak_kib) = process_usage(pid)?;
        let cpu = cpu_after - cpu_before;
        println!(
            "collector_cpu_s {cpu:.2} events_per_cpu_s {:.0} cpu_us_per_event {:.2}",
            accepted as f64 / cpu,
            cpu * 1e6 / accepted as f64
        );
        println!("collector_peak_rss_mib {:.1}", peak_kib as f64 / 1024.0);
    }
    if let Some(brokers) = args.kafka_brokers.as_ref().filter(|_| !args.mix) {
        let stored = count_records(brokers, accepted)?;
        println!("stored_events {stored}");
        if stored < accepted {
            bail!("the topic holds {stored} events but {accepted} were acknowledged");
        }
    }
    Ok(())
}
