//! `candor demo`: demo traffic for the local stack. Several simulated services call several
//! tools through the real adapter, against local tool servers that fail the way real APIs do:
//!
//! | tool path | behaves like |
//! |---|---|
//! | `/search` | a search API: results, a confirmed empty list, or a truncated page (total > items) |
//! | `/lookup` | a lookup API with rate limits (429 + `Retry-After`) and 5xx bursts |
//! | `/catalog` | a healthy API (the baseline a spike stands out from) |
//! | `/slow` | an endpoint that answers after 10 s, past any sane timeout |
//! | `/expired` | an endpoint whose credential has expired (401) |
//! | `/export` | an asynchronous export API: `POST` answers 202, the status is at `/export/{id}` |
//!
//! `/export` follows Azure's asynchronous request-reply: 202 with `Operation-Location` (an
//! absolute URL) and `Retry-After: 1`, then a status document that says `running` for a couple
//! of reads and then the export's fate, decided at its acceptance: `succeeded` (85 %), `failed`
//! (8 %) or `partiallySucceeded` (7 %); under `exports-stuck` most run for ever.
//!
//! Each service reports as itself (its own `service.name` and instance) to the collector.
//! `reporting` also starts an export every call period: it follows most of them to their end
//! with a status URL reader and an operation deadline of 20 s (so an export that never finishes
//! ends the call as a `deadline` AccessFailure while the operation stays open in
//! `candor operations`), and starts one in ten without waiting: the call returns the acceptance,
//! and the caller resumes following it a few seconds later, as a caller that polls later would.
//!
//! Scenarios switch at run time through the control address:
//!
//! - `POST /scenario/normal`: the mix above;
//! - `POST /scenario/spike`: `/catalog` answers 503 to every call (a failure spike on one target);
//! - `POST /scenario/exports-stuck`: three exports in four never finish, so stuck operations
//!   pile up (only exports accepted from then on; switching back leaves them stuck);
//! - `POST /scenario/collector-outage`: the collector process (`--collector-pid`) is paused for
//!   `--outage` (6 min by default), so it stops acknowledging and stops its heartbeats: the
//!   dashboards turn STALE and the pipeline-stale alert fires, then everything recovers.
//!
//! `GET /scenario` tells the current one.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use candor_adapter::http_client::HttpClient;
use candor_adapter::otlp::{OtlpConfig, OtlpGuard, providers};
use candor_adapter::{Adapter, AdapterBuilder, HttpClassifier, NotFound, RetryPolicy};
use candor_schema::{Envelope, OutcomeClass};

use self::exports::{Exports, export_adapter, export_start, export_status, run_tag, start_exports};

mod exports;

/// `candor demo` arguments.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// The collector's OTLP/gRPC endpoint.
    #[arg(
        long,
        env = "CANDOR_OTLP_ENDPOINT",
        default_value = "http://127.0.0.1:4317"
    )]
    pub otlp_endpoint: String,
    /// Where the flaky tool servers listen.
    #[arg(long, default_value = "127.0.0.1:8181")]
    pub tools_addr: std::net::SocketAddr,
    /// Where the scenario control listens.
    #[arg(long, default_value = "127.0.0.1:8182")]
    pub control_addr: std::net::SocketAddr,
    /// Calls per second of each service's each tool.
    #[arg(long, default_value_t = 1.0)]
    pub rate: f64,
    /// How often the services export their counters.
    #[arg(long, default_value = "10s", value_parser = candor_schema::duration::parse)]
    pub metric_interval: Duration,
    /// The collector process the `collector-outage` scenario pauses.
    #[arg(long)]
    pub collector_pid: Option<u32>,
    /// How long a collector outage lasts.
    #[arg(long, default_value = "6m", value_parser = candor_schema::duration::parse)]
    pub outage: Duration,
    /// Stop after this long (default: run until stopped).
    #[arg(long, value_parser = candor_schema::duration::parse)]
    pub duration: Option<Duration>,
}

/// The scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    Normal,
    Spike,
    ExportsStuck,
    CollectorOutage,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::Spike => "spike",
            Self::ExportsStuck => "exports-stuck",
            Self::CollectorOutage => "collector-outage",
        }
    }
}

/// What the tool servers and the control share.
struct Shared {
    scenario: Mutex<Scenario>,
    collector_pid: Option<u32>,
    outage: Duration,
    /// A counter drives the tools' mix, so the demo is varied yet needs no random source.
    draws: AtomicU64,
    /// Where the tool servers are reached (`http://host:port`), for the status URLs they hand
    /// out.
    tools_url: String,
    /// The exports accepted, with their fates.
    exports: Mutex<Exports>,
}

impl Shared {
    fn scenario(&self) -> Scenario {
        *self
            .scenario
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn set(&self, scenario: Scenario) {
        *self
            .scenario
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = scenario;
    }

    /// A number in 0..100 that cycles through every value in a scrambled order.
    fn roll(&self) -> u64 {
        let n = self.draws.fetch_add(1, Ordering::Relaxed);
        (n.wrapping_mul(37) + n / 100) % 100
    }
}

fn json(status: StatusCode, body: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_owned(),
    )
        .into_response()
}

async fn search(State(shared): State<Arc<Shared>>) -> Response {
    match shared.roll() {
        0..60 => json(StatusCode::OK, r#"{"items":[1,2,3],"total":3}"#),
        60..80 => json(StatusCode::OK, r#"{"items":[],"total":0}"#),
        _ => json(StatusCode::OK, r#"{"items":[1,2,3],"total":40}"#),
    }
}

async fn lookup(State(shared): State<Arc<Shared>>) -> Response {
    match shared.roll() {
        0..70 => json(StatusCode::OK, r#"{"items":[{"id":7}],"total":1}"#),
        70..85 => {
            let mut response = json(StatusCode::TOO_MANY_REQUESTS, r#"{"error":"slow down"}"#);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("0"));
            response
        }
        _ => json(
            StatusCode::SERVICE_UNAVAILABLE,
            r#"{"error":"backend unavailable"}"#,
        ),
    }
}

async fn catalog(State(shared): State<Arc<Shared>>) -> Response {
    if shared.scenario() == Scenario::Spike {
        return json(
            StatusCode::SERVICE_UNAVAILABLE,
            r#"{"error":"catalog database down"}"#,
        );
    }
    json(
        StatusCode::OK,
        r#"{"items":[{"sku":"A-1"},{"sku":"B-2"}],"total":2}"#,
    )
}

async fn slow() -> Response {
    tokio::time::sleep(Duration::from_secs(10)).await;
    json(StatusCode::OK, r#"{"items":[1],"total":1}"#)
}

async fn expired() -> Response {
    json(StatusCode::UNAUTHORIZED, r#"{"error":"token expired"}"#)
}

fn tools(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/search", get(search))
        .route("/lookup", get(lookup))
        .route("/catalog", get(catalog))
        .route("/slow", get(slow))
        .route("/expired", get(expired))
        .route("/export", post(export_start))
        .route("/export/{id}", get(export_status))
        .with_state(shared)
}

async fn current(State(shared): State<Arc<Shared>>) -> String {
    format!("{}\n", shared.scenario().name())
}

async fn switch(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    let scenario = match name.as_str() {
        "normal" => Scenario::Normal,
        "spike" => Scenario::Spike,
        "exports-stuck" => Scenario::ExportsStuck,
        "collector-outage" => Scenario::CollectorOutage,
        other => {
            return (
                StatusCode::NOT_FOUND,
                format!(
                    "no scenario {other:?}; try normal, spike, exports-stuck or collector-outage\n"
                ),
            )
                .into_response();
        }
    };
    if scenario == Scenario::CollectorOutage {
        let Some(pid) = shared.collector_pid else {
            return (
                StatusCode::CONFLICT,
                "the demo was not given --collector-pid, so it cannot pause the collector\n",
            )
                .into_response();
        };
        if let Err(err) = signal(pid, "-STOP") {
            return (StatusCode::INTERNAL_SERVER_ERROR, format!("{err}\n")).into_response();
        }
        let outage = shared.outage;
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            tokio::time::sleep(outage).await;
            if let Err(err) = signal(pid, "-CONT") {
                eprintln!("candor demo: resuming the collector: {err}");
            }
            shared.set(Scenario::Normal);
            eprintln!("candor demo: the collector outage is over");
        });
    }
    shared.set(scenario);
    eprintln!("candor demo: scenario {}", scenario.name());
    (StatusCode::OK, format!("{}\n", scenario.name())).into_response()
}

/// Sends a signal with `kill`, so that the demo needs no unsafe code.
fn signal(pid: u32, which: &str) -> anyhow::Result<()> {
    let status = std::process::Command::new("kill")
        .args([which, &pid.to_string()])
        .status()
        .context("running kill")?;
    anyhow::ensure!(status.success(), "kill {which} {pid} failed: {status}");
    Ok(())
}

/// A simulated service: its name and the tools it calls (tool name, path).
const SERVICES: &[(&str, &[(&str, &str)])] = &[
    (
        "checkout",
        &[
            ("search", "/search"),
            ("lookup", "/lookup"),
            ("catalog", "/catalog"),
        ],
    ),
    (
        "support-bot",
        &[
            ("search", "/search"),
            ("crm", "/expired"),
            ("catalog", "/catalog"),
        ],
    ),
    (
        "reporting",
        &[
            ("render", "/slow"),
            ("lookup", "/lookup"),
            ("catalog", "/catalog"),
        ],
    ),
];

/// The service that also starts exports (`/export`) and follows them.
const EXPORTER: &str = "reporting";

/// The calls made so far, by service and by what each was counted as ([`counted_as`]).
type Tally = Arc<Mutex<BTreeMap<(String, &'static str), u64>>>;

/// What a call counts as: its class, or `accepted` for an acceptance returned without waiting,
/// which is work accepted, not done (rule `TELEMETRY-COUNTER`).
fn counted_as<P>(envelope: &Envelope<P>) -> &'static str {
    let class = envelope.class();
    match envelope.lifecycle() {
        Some(lifecycle) if class == OutcomeClass::Success && !lifecycle.state().is_terminal() => {
            "accepted"
        }
        _ => class.as_str(),
    }
}

/// Counts one call of `service` in the tally.
fn count<P>(tally: &Tally, service: &str, envelope: &Envelope<P>) {
    *tally
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry((service.to_owned(), counted_as(envelope)))
        .or_default() += 1;
}

/// `builder` with the settings every adapter of a demo service shares: at most three attempts
/// of 500 ms each within 5 s, the service as the actor, and the service's own telemetry.
fn service_settings<C, K, S>(
    builder: AdapterBuilder<C, K, S>,
    service: &str,
    telemetry: &OtlpGuard,
) -> anyhow::Result<AdapterBuilder<C, K, S>> {
    Ok(builder
        .retry(RetryPolicy::default().with_max_attempts(3)?)
        .attempt_timeout(Duration::from_millis(500))
        .deadline(Duration::from_secs(5))
        .actor(service)
        .otlp(telemetry))
}

/// Runs the demo until stopped (or for `--duration`).
pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.rate.is_finite() && args.rate > 0.0,
        "--rate {} must be a positive number of calls per second",
        args.rate
    );
    let shared = Arc::new(Shared {
        scenario: Mutex::new(Scenario::Normal),
        collector_pid: args.collector_pid,
        outage: args.outage,
        draws: AtomicU64::new(0),
        tools_url: format!("http://{}", args.tools_addr),
        exports: Mutex::new(Exports::new(run_tag())),
    });
    let bind = |addr: std::net::SocketAddr, what: &'static str| async move {
        tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("{what} cannot listen on {addr}: is the port taken?"))
    };
    let tools_listener = bind(args.tools_addr, "the tool servers").await?;
    let control_listener = bind(args.control_addr, "the scenario control").await?;
    let tools_app = tools(Arc::clone(&shared));
    tokio::spawn(async move { axum::serve(tools_listener, tools_app).await });
    let control = Router::new()
        .route("/scenario", get(current))
        .route("/scenario/{name}", post(switch))
        .with_state(Arc::clone(&shared));
    tokio::spawn(async move { axum::serve(control_listener, control).await });

    let mut guards: Vec<OtlpGuard> = Vec::new();
    let tally: Tally = Arc::default();
    let period = Duration::from_secs_f64(1.0 / args.rate);
    let client = HttpClient::new(1 << 20);
    for (index, (service, calls)) in SERVICES.iter().enumerate() {
        let mut otlp = OtlpConfig::new(args.otlp_endpoint.clone(), *service);
        otlp.service_instance_id = Some(format!("{service}-1"));
        otlp.metric_interval = args.metric_interval;
        let guard = providers(otlp).context("setting up the OTLP export")?;
        // Staggered starts, so the services do not call in lockstep.
        let offset = period.mul_f64((index as f64 + 0.5) / SERVICES.len() as f64);
        for (tool, path) in calls.iter() {
            let url = format!("http://{}{path}", args.tools_addr);
            let classifier = HttpClassifier::new(NotFound::Unreachable)
                .items_at("/items")
                .total_at("/total");
            let builder = Adapter::builder(*tool, url.clone()).classifier(classifier);
            let adapter = service_settings(builder, service, &guard)?.build()?;
            let client = client.clone();
            let tally = Arc::clone(&tally);
            let service = (*service).to_owned();
            tokio::spawn(async move {
                tokio::time::sleep(offset).await;
                let mut ticker = tokio::time::interval(period);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                let headers = HeaderMap::new();
                loop {
                    ticker.tick().await;
                    let envelope = adapter
                        .call(|context| client.get(context, &url, &headers))
                        .await;
                    count(&tally, &service, &envelope);
                }
            });
        }
        if *service == EXPORTER {
            let url = format!("http://{}/export", args.tools_addr);
            let adapter = export_adapter(&url, service, &guard)?;
            tokio::spawn(start_exports(
                Arc::new(adapter),
                client.clone(),
                Arc::from(url),
                period,
                offset,
                Arc::clone(&tally),
            ));
        }
        guards.push(guard);
    }
    eprintln!(
        "candor demo: {} services calling tools at http://{} ; scenarios: curl -X POST http://{}/scenario/{{normal,spike,exports-stuck,collector-outage}}",
        SERVICES.len(),
        args.tools_addr,
        args.control_addr
    );
    let report = {
        let tally = Arc::clone(&tally);
        let guards = &guards;
        move || {
            let tally = tally
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let line: Vec<String> = tally
                .iter()
                .map(|((service, counted), n)| format!("{service} {counted}={n}"))
                .collect();
            eprintln!("candor demo: calls so far: {}", line.join(", "));
            for ((service, _), guard) in SERVICES.iter().zip(guards) {
                eprintln!("candor demo: {service} telemetry: {}", guard.stats());
            }
        }
    };
    let mut every = tokio::time::interval(Duration::from_secs(30));
    every.tick().await;
    let stop = async {
        match args.duration {
            Some(duration) => tokio::time::sleep(duration).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = every.tick() => report(),
            _ = &mut stop => break,
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    report();
    let mut lost = 0;
    for guard in guards {
        match guard.shutdown() {
            Ok(stats) => lost += stats.lost_spans,
            Err(err) => {
                lost += err.stats().map_or(0, |stats| stats.lost_spans);
                eprintln!("candor demo: telemetry not flushed: {err}");
            }
        }
    }
    if lost > 0 {
        eprintln!("candor demo: {lost} span(s) could not be exported");
    }
    Ok(ExitCode::SUCCESS)
}
