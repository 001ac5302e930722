//! The first hop, from the adapter's exporter to the collector. Under steady adapter traffic the
//! collector is killed (SIGKILL) and started again where the adapter sends, or the broker is
//! frozen (SIGSTOP) for longer than the collector's delivery timeout: the batches the collector
//! could not take are sent again, and afterwards every closed counter window reconciles and the
//! table holds every event exactly once. An adapter cut off from the collector (a proxy between
//! them, cut) turns answers about its targets partial, naming it, until its held batches arrive;
//! one that shut down is not silent. A sender with no adapter, seen only by the standard tool
//! spans it sends, is judged silent the same way by the spacing of its spans.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use candor_adapter::otlp::{self, OtlpConfig, OtlpGuard, ResendConfig};
use candor_adapter::testing::ScriptedTool;
use candor_adapter::{Adapter, HttpClassifier};
use candor_e2e::collector::{Collector, Options};
use candor_e2e::compactor::{self, Compactor, read_table};
use candor_e2e::query::{Answer, candor};
use candor_e2e::tansu::Tansu;
use candor_e2e::{free_port, rfc3339, tempdir, wait_for};
use candor_schema::OutcomeClass;
use candor_schema::names::{semconv, table};

use crate::ingest::json;
use crate::reconcile::adapter;

const TARGET: &str = "http://inventory.test/v1/first-hop";

fn telemetry(endpoint: &str) -> OtlpGuard {
    let mut config = OtlpConfig::new(endpoint, "checkout");
    config.service_instance_id = Some("checkout-first-hop".into());
    config.metric_interval = Duration::from_millis(300);
    config.span_interval = Duration::from_millis(100);
    config.resend = ResendConfig {
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(500),
        attempt_timeout: Duration::from_secs(5),
        ..ResendConfig::default()
    };
    config.shutdown_timeout = Duration::from_secs(30);
    otlp::providers(config).unwrap()
}

/// The n-th call's script: successes, partials, exhausted and permanent AccessFailures.
fn script(n: usize) -> Vec<candor_adapter::classify::http::HttpExchange> {
    match n % 4 {
        0 => vec![json(200, r#"{"items":[1]}"#)],
        1 => vec![json(200, r#"{"items":[1],"total":3}"#)],
        2 => vec![json(503, ""), json(503, "")],
        _ => vec![json(400, "")],
    }
}

/// Makes `calls` calls 20 ms apart; returns how many events they emitted: one for each call
/// that ended AccessFailure or Partial, and one for each attempt that was retried.
async fn traffic(adapter: &Adapter<HttpClassifier>, from: usize, calls: usize) -> usize {
    let mut events = 0;
    for n in from..from + calls {
        let tool = ScriptedTool::returning(script(n));
        match adapter.call(|ctx| tool.attempt(ctx)).await.class() {
            OutcomeClass::AccessFailure | OutcomeClass::Partial => events += 1,
            OutcomeClass::Success | OutcomeClass::Empty => {}
        }
        events += tool.attempts() as usize - 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    events
}

/// Shuts the exporter down (sending what is queued) and checks that it lost nothing after it
/// noticed the outage.
async fn shut_down_having_lost_nothing(guard: OtlpGuard, refused_during_outage: u64) {
    let stats = tokio::task::spawn_blocking(move || guard.shutdown())
        .await
        .unwrap()
        .expect("every batch is sent once the outage is over");
    assert!(
        refused_during_outage > 0,
        "the outage was never noticed: {stats:?}"
    );
    assert_eq!(
        (
            stats.lost_spans,
            stats.dropped_span_batches,
            stats.dropped_metric_batches
        ),
        (0, 0, 0),
        "{stats:?}"
    );
}

/// The table holds each of the `events` for the target exactly once (a batch that reached Kafka
/// but whose acknowledgement was lost is sent again, and its copy removed by `event_id`), and
/// every counter window closed between `since` and `until` matches its events.
async fn assert_every_event_once_and_reconciled(
    root: &Path,
    bootstrap: &str,
    window: (SystemTime, SystemTime),
    events: usize,
) {
    let rows = wait_for(
        &format!("the table to hold the {events} events"),
        Duration::from_secs(60),
        || async {
            let rows: Vec<_> = read_table(root, table::OUTCOME_EVENTS)
                .into_iter()
                .filter(|row| row["tool_target"] == TARGET)
                .collect();
            (rows.len() >= events).then_some(rows)
        },
    )
    .await;
    let ids: BTreeSet<&str> = rows.iter().filter_map(|r| r["event_id"].as_str()).collect();
    assert_eq!((rows.len(), ids.len()), (events, events));

    let args = [
        "reconcile".to_owned(),
        "--since".into(),
        rfc3339(window.0),
        "--until".into(),
        rfc3339(window.1),
        "--slack".into(),
        "50ms".into(),
        "--target".into(),
        TARGET.to_owned(),
        "--kafka".into(),
        bootstrap.to_owned(),
        "--live".into(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let answer = candor(root, &args);
    assert!(
        answer.rows().is_empty(),
        "windows with a gap:\n{}\n{}",
        answer.stdout,
        answer.stderr
    );
    let summary = answer.json()["summary"][0].as_str().unwrap().to_owned();
    assert!(
        summary.contains(" 0 with a gap; 0 event(s) missing"),
        "{summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_killed_under_traffic_and_started_again_loses_no_event() {
    let tansu = Tansu::start().await;
    let options = Options {
        grpc_port: Some(free_port()),
        ..Options::default()
    };
    let mut collector = Collector::start(&tansu.bootstrap, options.clone()).await;
    let root = tempdir("first-hop-collector");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let since = collector.covered_since().await;
    let guard = telemetry(&collector.grpc_endpoint);
    let adapter = adapter(TARGET, &guard, &guard);

    let mut events = traffic(&adapter, 0, 40).await;
    collector.process().kill().await;
    events += traffic(&adapter, 40, 40).await;
    let refused = guard.stats().refused_sends;
    let collector = Collector::start(&tansu.bootstrap, options).await;
    events += traffic(&adapter, 80, 40).await;
    assert_eq!(events, 120, "the scripts' classes changed");

    shut_down_having_lost_nothing(guard, refused).await;
    let until = SystemTime::now();
    collector.heartbeat_after_now().await;
    assert_every_event_once_and_reconciled(&root, &tansu.bootstrap, (since, until), events).await;
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_frozen_past_the_delivery_timeout_under_traffic_loses_no_event() {
    let tansu = Tansu::start().await;
    let options = Options {
        config: Some("[kafka]\ndelivery_timeout = \"1s\"\n".into()),
        ..Options::default()
    };
    let collector = Collector::start(&tansu.bootstrap, options).await;
    let root = tempdir("first-hop-broker");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let since = collector.covered_since().await;
    let guard = telemetry(&collector.grpc_endpoint);
    let adapter = adapter(TARGET, &guard, &guard);

    let mut events = traffic(&adapter, 0, 40).await;
    tansu.freeze().await;
    // The traffic goes on for about 2 s, twice the delivery timeout, and the broker stays frozen
    // until the collector has answered UNAVAILABLE.
    events += traffic(&adapter, 40, 80).await;
    wait_for(
        "the collector to refuse a batch",
        Duration::from_secs(30),
        || async { (guard.stats().refused_sends > 0).then_some(()) },
    )
    .await;
    let refused = guard.stats().refused_sends;
    tansu.thaw().await;
    events += traffic(&adapter, 120, 40).await;
    assert_eq!(events, 160, "the scripts' classes changed");

    shut_down_having_lost_nothing(guard, refused).await;
    let until = SystemTime::now();
    collector.heartbeat_after_now().await;
    assert_every_event_once_and_reconciled(&root, &tansu.bootstrap, (since, until), events).await;
    let _ = std::fs::remove_dir_all(&root);
}

/// Makes `calls` successful calls, then waits for an export that carries their counts.
async fn succeed(adapter: &Adapter<HttpClassifier>, guard: &OtlpGuard, calls: usize) {
    for _ in 0..calls {
        let tool = ScriptedTool::returning(script(0));
        let class = adapter.call(|ctx| tool.attempt(ctx)).await.class();
        assert_eq!(class, OutcomeClass::Success);
    }
    let sent = guard.stats().sent_batches;
    wait_for(
        "an export after the calls",
        Duration::from_secs(30),
        || async { (guard.stats().sent_batches > sent).then_some(()) },
    )
    .await;
}

/// Asserts an answer's exit code and class.
fn assert_answered(answer: &Answer, code: i32, class: &str, why: &str) {
    assert_eq!(
        (answer.code, answer.class().as_str()),
        (code, class),
        "{why}:\n{}\n{}",
        answer.stdout,
        answer.stderr
    );
}

/// A TCP proxy on a loopback port to `upstream`, which the test can cut (every open connection
/// closed, new ones refused) and restore on the same port.
struct Proxy {
    address: std::net::SocketAddr,
    upstream: String,
    endpoint: String,
    accepting: Option<tokio::task::JoinHandle<()>>,
    connections: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(upstream: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut proxy = Self {
            address,
            upstream: upstream.trim_start_matches("http://").to_owned(),
            endpoint: format!("http://{address}"),
            accepting: None,
            connections: Arc::new(Mutex::new(Vec::new())),
        };
        proxy.serve(listener);
        proxy
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let upstream = self.upstream.clone();
        let open = self.connections.clone();
        self.accepting = Some(tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let upstream = upstream.clone();
                open.lock().unwrap().push(tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                }));
            }
        }));
    }

    /// Closes the listener and every connection through it.
    async fn cut(&mut self) {
        if let Some(accepting) = self.accepting.take() {
            accepting.abort();
            let _ = accepting.await;
        }
        let connections: Vec<_> = self.connections.lock().unwrap().drain(..).collect();
        for connection in connections {
            connection.abort();
            let _ = connection.await;
        }
    }

    /// Listens on the same port again.
    async fn restore(&mut self) {
        let listener = tokio::net::TcpListener::bind(self.address)
            .await
            .unwrap_or_else(|err| panic!("binding {} again: {err}", self.address));
        self.serve(listener);
    }
}

fn incident(root: &Path, bootstrap: &str, target: &str, since: SystemTime) -> Answer {
    let args = [
        "incident",
        "--target",
        target,
        "--since",
        &rfc3339(since),
        "--kafka",
        bootstrap,
        "--live",
    ]
    .map(str::to_owned);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    candor(root, &args)
}

/// Waits until `candor incident` about `target` is partial and names one silent instance, and
/// returns the silent instances.
async fn judged_silent(
    collector: &Collector,
    root: &Path,
    bootstrap: &str,
    target: &str,
    since: SystemTime,
) -> serde_json::Value {
    let answer = wait_for(
        "the cut-off instance to be judged silent",
        Duration::from_secs(30),
        || async {
            collector.heartbeat_after_now().await;
            let answer = incident(root, bootstrap, target, since);
            // An answer asked just past the newest heartbeat is partial too; the one looked
            // for names the silent instance.
            let names_one = answer.json()["coverage"]["silent_instances"]
                .as_array()
                .is_some_and(|silent| !silent.is_empty());
            (answer.class() == "partial" && names_one).then_some(answer)
        },
    )
    .await;
    assert_answered(&answer, 3, "partial", "cut off");
    let silent = answer.json()["coverage"]["silent_instances"].clone();
    assert_eq!(silent.as_array().map(Vec::len), Some(1), "{silent:#}");
    silent
}

/// Waits until `candor incident` about `target` answers "No failures": every instance it
/// concerns was heard from across the window.
async fn answered_empty(
    collector: &Collector,
    root: &Path,
    bootstrap: &str,
    target: &str,
    since: SystemTime,
) {
    wait_for(
        "every instance to be heard from across the window",
        Duration::from_secs(60),
        || async {
            collector.heartbeat_after_now().await;
            let answer = incident(root, bootstrap, target, since);
            (answer.class() == "empty").then_some(())
        },
    )
    .await;
}

fn telemetry_as(endpoint: &str, service: &str, instance: &str) -> OtlpGuard {
    let mut config = OtlpConfig::new(endpoint, service);
    config.service_instance_id = Some(instance.into());
    config.metric_interval = Duration::from_millis(500);
    config.span_interval = Duration::from_millis(100);
    config.resend = ResendConfig {
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(500),
        ..ResendConfig::default()
    };
    otlp::providers(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_cut_off_from_the_collector_makes_answers_about_its_targets_partial() {
    const CUT: &str = "http://inventory.test/v1/cut-off";
    const DONE: &str = "http://billing.test/v1/shut-down";
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("first-hop-cut");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let since = collector.covered_since().await;
    let mut proxy = Proxy::start(&collector.grpc_endpoint).await;
    let cut_guard = telemetry_as(&proxy.endpoint, "checkout", "checkout-cut");
    let cut_adapter = adapter(CUT, &cut_guard, &cut_guard);
    let done_guard = telemetry_as(&collector.grpc_endpoint, "billing", "billing-done");
    let done_adapter = adapter(DONE, &done_guard, &done_guard);

    // Both report, and only succeed; then one shuts down, saying so in its last export.
    succeed(&done_adapter, &done_guard, 20).await;
    succeed(&cut_adapter, &cut_guard, 20).await;
    tokio::task::spawn_blocking(move || done_guard.shutdown())
        .await
        .unwrap()
        .expect("the shut-down instance sent everything");
    collector.heartbeat_after_now().await;
    let before = incident(&root, &tansu.bootstrap, CUT, since);
    assert_answered(&before, 1, "empty", "reporting");

    // Cut off: no export reaches the collector. Once three of its intervals have passed
    // without one, the answer about its target is partial.
    proxy.cut().await;
    let silent = judged_silent(&collector, &root, &tansu.bootstrap, CUT, since).await;
    assert_eq!(silent[0]["instance"], "checkout-cut", "{silent:#}");
    assert_eq!(silent[0]["service"], "checkout", "{silent:#}");
    assert_eq!(silent[0]["seen_by"], "adapter", "{silent:#}");

    // The instance that shut down has not exported for as long, and is not silent.
    let stopped = incident(&root, &tansu.bootstrap, DONE, since);
    assert_answered(&stopped, 1, "empty", "shut down");
    let intervals: BTreeSet<Option<u64>> = read_table(&root, table::OUTCOME_COUNTS)
        .iter()
        .filter(|row| row["tool_target"] == DONE)
        .map(|row| row["export_interval_ms"].as_u64())
        .collect();
    assert_eq!(
        intervals,
        BTreeSet::from([Some(0), Some(500)]),
        "the shut-down instance's exports said 500 ms, and 0 in the last"
    );

    // Connected again: the batches it held arrive, and fill the stretch in.
    proxy.restore().await;
    answered_empty(&collector, &root, &tansu.bootstrap, CUT, since).await;
    drop(cut_guard);
    let _ = std::fs::remove_dir_all(&root);
}

/// Ends a GenAI `execute_tool` span of `tool` every 100 ms through `tracer` until `stop` is set:
/// a sender with no adapter, whose calls are derived from its spans.
fn standard_tool_spans<T>(
    tracer: T,
    tool: &'static str,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<u64>
where
    T: opentelemetry::trace::Tracer + Send + 'static,
{
    use opentelemetry::KeyValue;
    use opentelemetry::trace::Span as _;
    tokio::spawn(async move {
        let mut ended = 0u64;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            {
                let mut span = tracer.start(format!("{} {tool}", semconv::EXECUTE_TOOL));
                span.set_attributes([
                    KeyValue::new(semconv::GEN_AI_OPERATION_NAME, semconv::EXECUTE_TOOL),
                    KeyValue::new(semconv::GEN_AI_TOOL_NAME, tool),
                    KeyValue::new(semconv::GEN_AI_TOOL_CALL_ID, format!("call-{ended}")),
                ]);
                span.end();
            }
            ended += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        ended
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_seen_only_by_its_spans_cut_off_makes_answers_about_its_tools_partial() {
    const TOOL: &str = "lookup";
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let root = tempdir("first-hop-spans-cut");
    let _compactor = Compactor::start(&tansu.bootstrap, &root, compactor::Options::default()).await;
    let since = collector.covered_since().await;
    let mut proxy = Proxy::start(&collector.grpc_endpoint).await;
    // The adapter's exporter only carries the spans (it keeps batches it could not send, as a
    // host's exporter with a retry queue does); no adapter is built on it, so no counter is.
    let guard = telemetry_as(&proxy.endpoint, "agent", "agent-cut");
    let tracer = opentelemetry::trace::TracerProvider::tracer(guard.tracer_provider(), "agent");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sending = standard_tool_spans(tracer, TOOL, stop.clone());

    // Its calls are derived, and answers about its tool see them.
    answered_empty(&collector, &root, &tansu.bootstrap, TOOL, since).await;

    // Cut off while the collector stays healthy: three of its heartbeats' spacing without one
    // of its spans, and the answer about its tool is partial, naming it as seen by its spans.
    proxy.cut().await;
    let silent = judged_silent(&collector, &root, &tansu.bootstrap, TOOL, since).await;
    assert_eq!(silent[0]["service"], "agent", "{silent:#}");
    assert_eq!(silent[0]["instance"], "agent-cut", "{silent:#}");
    assert_eq!(silent[0]["seen_by"], "spans", "{silent:#}");

    // Connected again: the spans it held arrive with their own end times and fill the
    // stretch in.
    proxy.restore().await;
    answered_empty(&collector, &root, &tansu.bootstrap, TOOL, since).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(sending.await.unwrap() > 0);
    drop(guard);
    let _ = std::fs::remove_dir_all(&root);
}
