//! Faults under load: the collector killed -9 at seeded points, again and again; the broker
//! crashed. An acknowledged event is never lost.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use candor_e2e::collector::{Collector, Options};
use candor_e2e::compactor::{self, Compactor};
use candor_e2e::kafka::event_targets;
use candor_e2e::tansu::Tansu;
use candor_e2e::wait_for;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;

use crate::compact::{ROWS_WRITTEN, rows_by_id};
use crate::ingest::{outcome_event, trace_request};

/// Targets of the events in request `n` of client `client`.
pub(crate) fn targets(client: usize, n: usize, per_request: usize) -> Vec<String> {
    (0..per_request)
        .map(|i| format!("c{client}-r{n}-e{i}"))
        .collect()
}

pub(crate) fn request_of(
    targets: &[String],
) -> opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest {
    trace_request(
        targets
            .iter()
            .map(|t| outcome_event("access_failure", t))
            .collect(),
    )
}

/// Fails naming what is missing when an acknowledged event is not in the events topic.
pub(crate) fn assert_all_stored(bootstrap: &str, acknowledged: &BTreeSet<String>) {
    let stored: BTreeSet<String> =
        event_targets(bootstrap, acknowledged.len(), Duration::from_secs(60))
            .into_iter()
            .collect();
    let missing: Vec<&String> = acknowledged.difference(&stored).collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged events missing, e.g. {:?}",
        missing.len(),
        acknowledged.len(),
        &missing[..missing.len().min(5)]
    );
}

/// The seed of a fault schedule: `CANDOR_FAULT_SEED` when set (to replay a failed run), else
/// a fixed default, so that every run is replayable from its message.
fn fault_seed() -> u64 {
    std::env::var("CANDOR_FAULT_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(0x00c0_ffee)
}

/// SplitMix64: the next draw of a seeded schedule.
fn draw(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_event_survives_a_kill_9_of_the_collector() {
    const CLIENTS: usize = 4;
    const PER_REQUEST: usize = 20;
    const KILLS: usize = 3;
    let seed = fault_seed();
    let mut schedule = seed;
    let replay = format!("replay with CANDOR_FAULT_SEED={seed}");
    let tansu = Tansu::start().await;
    let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
    for round in 0..KILLS {
        let mut collector = Collector::start(&tansu.bootstrap, Options::default()).await;
        let mut clients = Vec::new();
        for client in 0..CLIENTS {
            let endpoint = collector.grpc_endpoint.clone();
            let acknowledged = acknowledged.clone();
            clients.push(tokio::spawn(async move {
                let Ok(mut grpc) = TraceServiceClient::connect(endpoint).await else {
                    return;
                };
                for n in 0..10_000 {
                    let targets = targets(client + round * CLIENTS, n, PER_REQUEST);
                    match grpc.export(request_of(&targets)).await {
                        Ok(_) => acknowledged.lock().unwrap().extend(targets),
                        Err(_) => return,
                    }
                }
            }));
        }
        // Kill the collector mid-stream, after a seeded number of further acknowledgements.
        let before = acknowledged.lock().unwrap().len();
        let at = before + 100 + usize::try_from(draw(&mut schedule) % 400).unwrap();
        let counter = acknowledged.clone();
        wait_for(
            &format!("{at} acknowledged events ({replay})"),
            Duration::from_secs(60),
            || {
                let counter = counter.clone();
                async move { (counter.lock().unwrap().len() >= at).then_some(()) }
            },
        )
        .await;
        collector.process().kill().await;
        for client in clients {
            client.await.unwrap();
        }
        eprintln!(
            "kill {} of {KILLS} at {} acknowledged events ({replay})",
            round + 1,
            acknowledged.lock().unwrap().len()
        );
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert_all_stored(&tansu.bootstrap, &acknowledged);
}

/// What the clients of the broker-restart run saw.
#[derive(Debug, Default)]
struct Retried {
    acknowledged: BTreeSet<String>,
    /// UNAVAILABLE answers, each with RetryInfo.
    unavailable: u64,
    other: Vec<String>,
}

/// Sends requests of `per_request` events until `stop`, each again after UNAVAILABLE, waiting
/// as long as its RetryInfo says, until it is acknowledged.
async fn send_retrying(
    endpoint: String,
    client: usize,
    per_request: usize,
    seen: Arc<Mutex<Retried>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    use tonic_types::StatusExt as _;
    let mut grpc = TraceServiceClient::connect(endpoint).await.unwrap();
    for n in 0.. {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let targets = targets(client, n, per_request);
        loop {
            match grpc.export(request_of(&targets)).await {
                Ok(response) if response.get_ref().partial_success.is_none() => {
                    seen.lock().unwrap().acknowledged.extend(targets);
                    break;
                }
                Ok(response) => {
                    seen.lock()
                        .unwrap()
                        .other
                        .push(format!("{:?}", response.get_ref()));
                    return;
                }
                Err(status) => {
                    let retry = status.get_details_retry_info().and_then(|i| i.retry_delay);
                    match retry {
                        Some(delay) if status.code() == tonic::Code::Unavailable => {
                            seen.lock().unwrap().unavailable += 1;
                            tokio::time::sleep(delay).await;
                        }
                        _ => {
                            seen.lock().unwrap().other.push(format!("{status:?}"));
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// The broker stopped K times under load (SIGTERM or SIGKILL, seeded), each time long enough
/// for records to time out in the collector, then started again on the same SQLite store.
/// Clients retry as RetryInfo says. Every acknowledged event is in the topic, and the copies
/// that retries put there are removed by `event_id` on the way into the table.
///
/// Against a collector that keeps its producer after records time out, this fails: librdkafka
/// raises the producer epoch by itself, Tansu 0.6 panics on the unknown epoch, and from then
/// on answers nothing, so requests stay UNAVAILABLE until the deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_restarts_under_load_lose_no_acknowledged_event_and_copies_are_removed() {
    const CLIENTS: usize = 3;
    const PER_REQUEST: usize = 10;
    const RESTARTS: usize = 3;
    let seed = fault_seed();
    let mut schedule = seed;
    let replay = format!("replay with CANDOR_FAULT_SEED={seed}");
    let dir = candor_e2e::tempdir("broker-restarts");
    let mut tansu = Tansu::start_durable(&dir).await;
    let collector = Collector::start(
        &tansu.bootstrap,
        Options {
            config: Some("[kafka]\ndelivery_timeout = \"2s\"\n".into()),
            ..Options::default()
        },
    )
    .await;
    let seen = Arc::new(Mutex::new(Retried::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let endpoint = collector.grpc_endpoint.clone();
            tokio::spawn(send_retrying(
                endpoint,
                client,
                PER_REQUEST,
                seen.clone(),
                stop.clone(),
            ))
        })
        .collect();
    let acknowledged = |seen: &Arc<Mutex<Retried>>| seen.lock().unwrap().acknowledged.len();
    let unavailable = |seen: &Arc<Mutex<Retried>>| seen.lock().unwrap().unavailable;
    let deadline = Duration::from_secs(60);
    for round in 0..=RESTARTS {
        // A seeded number of further acknowledgements: the load goes on between outages.
        let at = acknowledged(&seen) + 50 + usize::try_from(draw(&mut schedule) % 250).unwrap();
        let what = format!("{at} acknowledged events after {round} restarts ({replay})");
        wait_for(&what, deadline, || {
            let reached = acknowledged(&seen) >= at;
            async move { reached.then_some(()) }
        })
        .await;
        if round == RESTARTS {
            break;
        }
        let refused = unavailable(&seen);
        let crash = draw(&mut schedule).is_multiple_of(2);
        if crash {
            tansu.kill().await;
        } else {
            tansu.stop().await;
        }
        // Down until a client has been told to retry: records timed out in the collector.
        let what = format!("an UNAVAILABLE answer in outage {} ({replay})", round + 1);
        wait_for(&what, deadline, || {
            let told = unavailable(&seen) > refused;
            async move { told.then_some(()) }
        })
        .await;
        tansu.start_again().await;
        eprintln!(
            "outage {} ({}) at {} acknowledged events",
            round + 1,
            if crash { "SIGKILL" } else { "SIGTERM" },
            acknowledged(&seen)
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    assert!(seen.other.is_empty(), "{:?} ({replay})", seen.other);
    let renewals = collector
        .sample("candor_collector_producer_renewals_total")
        .await
        .unwrap_or_default();
    assert!(renewals >= 1.0, "records never timed out ({replay})");

    let stored = event_targets(
        &tansu.bootstrap,
        seen.acknowledged.len(),
        Duration::from_secs(60),
    );
    let distinct: BTreeSet<String> = stored.iter().cloned().collect();
    let missing: Vec<&String> = seen.acknowledged.difference(&distinct).collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged events missing, e.g. {:?} ({replay})",
        missing.len(),
        seen.acknowledged.len(),
        &missing[..missing.len().min(5)]
    );
    // Every request was sent until acknowledged, so nothing else is in the topic.
    assert_eq!(distinct, seen.acknowledged, "({replay})");
    let copies = stored.len() - distinct.len();

    let root = candor_e2e::tempdir("broker-restarts-table");
    let compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let rows = distinct.len() as f64;
    wait_for("every event in the table", deadline, || async {
        (compactor.sample(ROWS_WRITTEN).await >= Some(rows)).then_some(())
    })
    .await;
    let table: BTreeSet<String> = rows_by_id(&root)
        .values()
        .map(|row| row["tool_target"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(table, distinct, "({replay})");
    let removed = compactor
        .sample("candor_compactor_duplicates_removed_total{table=\"outcome_events\"}")
        .await
        .unwrap_or_default();
    assert_eq!(removed, copies as f64, "({replay})");
    eprintln!(
        "{RESTARTS} outages: {} events acknowledged, {} UNAVAILABLE answers, {renewals} producer \
         renewals; {} records in the topic, {copies} copies removed by event_id; table {} rows \
         ({replay})",
        seen.acknowledged.len(),
        seen.unavailable,
        stored.len(),
        table.len(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_crash_mid_stream_gets_retryable_answers_and_loses_no_acknowledged_event() {
    const PER_REQUEST: usize = 10;
    let dir = std::env::temp_dir().join(format!("candor-e2e-tansu-crash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut tansu = Tansu::start_durable(&dir).await;
    let mut collector = Collector::start(
        &tansu.bootstrap,
        Options {
            config: Some("[kafka]\ndelivery_timeout = \"2s\"\n".into()),
            ..Options::default()
        },
    )
    .await;
    let mut grpc = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap();
    let mut acknowledged = BTreeSet::new();
    let mut unavailable = 0;
    for n in 0..200 {
        if n == 20 {
            tansu.kill().await;
        }
        let targets = targets(0, n, PER_REQUEST);
        match grpc.export(request_of(&targets)).await {
            Ok(_) => acknowledged.extend(targets),
            Err(status) => {
                assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
                use tonic_types::StatusExt as _;
                assert!(status.get_details_retry_info().is_some(), "{status:?}");
                unavailable += 1;
                if unavailable == 3 {
                    break;
                }
            }
        }
    }
    assert!(
        unavailable == 3,
        "the broker crash was never answered as unavailable"
    );
    assert!(acknowledged.len() >= 20 * PER_REQUEST);
    // The collector goes first, so that nothing is produced into the restarted broker.
    collector.process().kill().await;
    tansu.restart().await;
    assert_all_stored(&tansu.bootstrap, &acknowledged);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Kilobytes of a process's `field` in /proc (`VmRSS`, `VmHWM`).
fn memory_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().trim_end_matches(" kB").parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// How each request of the overload was answered.
#[derive(Debug, Default)]
struct Answers {
    acknowledged: BTreeSet<String>,
    unavailable: u64,
    exhausted: u64,
    other: Vec<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_at_twice_capacity_is_stored_or_told_to_retry_and_memory_stays_bounded() {
    // Request bodies are capped at 256 KiB and at most 8 are handled at once: 2 MiB of bodies.
    const MAX_REQUEST_BYTES: u64 = 256 * 1024;
    const IN_FLIGHT: u64 = 8;
    let seed = fault_seed();
    let mut schedule = seed;
    let replay = format!("replay with CANDOR_FAULT_SEED={seed}");
    let tansu = Tansu::start().await;
    let mut collector = Collector::start(
        &tansu.bootstrap,
        Options {
            config: Some(format!(
                "[otlp]\nmax_request_bytes = {MAX_REQUEST_BYTES}\nmax_in_flight_requests = \
                 {IN_FLIGHT}\n[limits]\nmax_events_per_request = 1000\n[kafka]\n\
                 queue_max_messages = 4000\ndelivery_timeout = \"5s\"\n"
            )),
            ..Options::default()
        },
    )
    .await;
    let pid = collector.process().pid().unwrap();
    let channel = tonic::transport::Endpoint::from_shared(collector.grpc_endpoint.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();

    // Capacity: what closed-loop clients get acknowledged in three seconds.
    let measured = Instant::now();
    let mut warmup = Vec::new();
    for client in 0..4 {
        let mut grpc = TraceServiceClient::new(channel.clone());
        warmup.push(tokio::spawn(async move {
            let mut events = 0u64;
            let mut n = 0;
            while measured.elapsed() < Duration::from_secs(3) {
                let targets = targets(100 + client, n, 100);
                n += 1;
                if grpc.export(request_of(&targets)).await.is_ok() {
                    events += 100;
                }
            }
            events
        }));
    }
    let mut capacity = 0;
    for client in warmup {
        capacity += client.await.unwrap();
    }
    let capacity = capacity as f64 / measured.elapsed().as_secs_f64();
    assert!(capacity > 0.0);
    let idle_kb = memory_kb(pid, "VmRSS");

    // Open loop at twice that: requests leave on a schedule, whatever the answers.
    let offered = 2.0 * capacity;
    let answers = Arc::new(Mutex::new(Answers::default()));
    let mut requests = Vec::new();
    let mut sent_events = 0u64;
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(5) {
        let size = 50 + usize::try_from(draw(&mut schedule) % 251).unwrap();
        let due = Duration::from_secs_f64((sent_events + size as u64) as f64 / offered);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        sent_events += size as u64;
        let targets = targets(0, n, size);
        n += 1;
        let mut grpc = TraceServiceClient::new(channel.clone());
        let answers = answers.clone();
        requests.push(tokio::spawn(async move {
            let answer = grpc.export(request_of(&targets)).await;
            let mut answers = answers.lock().unwrap();
            match answer {
                Ok(response) if response.get_ref().partial_success.is_none() => {
                    answers.acknowledged.extend(targets);
                }
                Ok(response) => answers.other.push(format!("{:?}", response.get_ref())),
                Err(status) if status.code() == tonic::Code::Unavailable => {
                    use tonic_types::StatusExt as _;
                    if status.get_details_retry_info().is_some() {
                        answers.unavailable += 1;
                    } else {
                        answers
                            .other
                            .push(format!("UNAVAILABLE without RetryInfo: {status:?}"));
                    }
                }
                Err(status) if status.code() == tonic::Code::ResourceExhausted => {
                    answers.exhausted += 1;
                }
                Err(status) => answers.other.push(format!("{status:?}")),
            }
        }));
    }
    for request in requests {
        request.await.unwrap();
    }
    let peak_kb = memory_kb(pid, "VmHWM");
    let answers = std::mem::take(&mut *answers.lock().unwrap());
    eprintln!(
        "capacity {capacity:.0} events/s; offered {offered:.0} events/s: {n} requests, \
         {sent_events} events; acknowledged {} events, {} UNAVAILABLE, {} RESOURCE_EXHAUSTED; \
         memory {idle_kb} kB idle, peak {peak_kb} kB ({replay})",
        answers.acknowledged.len(),
        answers.unavailable,
        answers.exhausted,
    );
    assert!(answers.other.is_empty(), "{:?} ({replay})", answers.other);
    assert!(
        answers.unavailable + answers.exhausted > 0,
        "twice the capacity was never refused: not an overload ({replay})"
    );
    assert!(
        !answers.acknowledged.is_empty(),
        "nothing got through ({replay})"
    );
    // The bodies in flight are bounded at 2 MiB, the producer's queue at 4,000 records; decoded
    // requests, their records and the transport's buffers take a few times that. 64 MiB over
    // the idle size is a bound the collector must stay under, far below what an unbounded queue
    // of twice the capacity for five seconds would take.
    assert!(
        peak_kb.saturating_sub(idle_kb) < 64 * 1024,
        "peak {peak_kb} kB against {idle_kb} kB idle ({replay})"
    );
    assert_all_stored(&tansu.bootstrap, &answers.acknowledged);
}
