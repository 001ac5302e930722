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
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use candor_adapter::classify::http::OPERATION_LOCATION;
use candor_adapter::clock::TokioClock;
use candor_adapter::follow::http::StatusUrl;
use candor_adapter::http_client::HttpClient;
use candor_adapter::otlp::{OtlpConfig, OtlpGuard, providers};
use candor_adapter::{Adapter, AttemptContext, HttpClassifier, NotFound, RetryPolicy};
use candor_schema::{Envelope, Operation, OutcomeClass};

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

/// What becomes of an export, decided when it is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// It ends, after a couple of status reads that say `running`.
    Ends(Ending),
    /// Its status says `running` for ever.
    NeverFinishes,
}

/// How an export that ends, ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// `succeeded`, with the export's result.
    Succeeded,
    /// `failed`, with an error.
    Failed,
    /// `partiallySucceeded`, saying what was covered.
    Partial,
}

impl Fate {
    /// The fate of an export accepted under `scenario`, from a roll in 0..100.
    fn choose(scenario: Scenario, roll: u64) -> Self {
        // Out of 100: how many succeed, fail and end partial; the rest never finish. Outside
        // `exports-stuck` every export ends, so that the stuck-operations alert stays quiet.
        let (succeeded, failed, partial) = match scenario {
            Scenario::ExportsStuck => (15, 5, 5),
            Scenario::Normal | Scenario::Spike | Scenario::CollectorOutage => (85, 8, 7),
        };
        if roll < succeeded {
            Self::Ends(Ending::Succeeded)
        } else if roll < succeeded + failed {
            Self::Ends(Ending::Failed)
        } else if roll < succeeded + failed + partial {
            Self::Ends(Ending::Partial)
        } else {
            Self::NeverFinishes
        }
    }
}

/// How many status reads of an export say `running` before it ends.
const RUNNING_READS: u8 = 2;

/// How many exports the tool server remembers; past it, the oldest is forgotten.
const EXPORTS_KEPT: usize = 10_000;

/// What one status read of an export says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExportRead {
    /// Still running, this much done in percent.
    Running { percent: u8 },
    /// Ended.
    Ended(Ending),
}

/// One export the tool server accepted.
#[derive(Debug)]
struct Export {
    fate: Fate,
    /// Status reads so far (saturating: only the first few matter).
    reads: u8,
}

/// The exports the tool server accepted, by number, the oldest first.
#[derive(Debug)]
struct Exports {
    /// Starts every export id, so that a later run of the demo never hands out the same id
    /// (`candor operations` tells operations apart by their id).
    run: String,
    next: u64,
    known: BTreeMap<u64, Export>,
}

impl Exports {
    fn new(run: String) -> Self {
        Self {
            run,
            next: 0,
            known: BTreeMap::new(),
        }
    }

    /// Accepts an export with its fate; returns its id.
    fn accept(&mut self, fate: Fate) -> String {
        let number = self.next;
        self.next += 1;
        self.known.insert(number, Export { fate, reads: 0 });
        // Forgetting the oldest is safe: `reporting` follows an export for at most the start's
        // deadline plus EXPORT_DEADLINE (25 s), so unless exports are started at more than
        // EXPORTS_KEPT / 25 s = 400 a second, none of the forgotten ones is still followed. And
        // nothing is lost without a word: a status read of a forgotten export answers 404, which
        // the follower reports as an AccessFailure.
        while self.known.len() > EXPORTS_KEPT {
            self.known.pop_first();
        }
        format!("{}-{number}", self.run)
    }

    /// One status read of the export `id`: `None` when no such export is known.
    fn read(&mut self, id: &str) -> Option<ExportRead> {
        let number: u64 = id
            .strip_prefix(self.run.as_str())?
            .strip_prefix('-')?
            .parse()
            .ok()?;
        let export = self.known.get_mut(&number)?;
        export.reads = export.reads.saturating_add(1);
        match export.fate {
            Fate::Ends(ending) if export.reads > RUNNING_READS => Some(ExportRead::Ended(ending)),
            // 30 % a read, never 100 %: an export that never finishes stalls at 90 %.
            _ => Some(ExportRead::Running {
                percent: export.reads.saturating_mul(30).min(90),
            }),
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

/// Accepts an export: 202, with where to read its status and when.
async fn export_start(State(shared): State<Arc<Shared>>) -> Response {
    let fate = Fate::choose(shared.scenario(), shared.roll());
    let id = shared
        .exports
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .accept(fate);
    let location = format!("{}/export/{id}", shared.tools_url);
    let Ok(location) = HeaderValue::try_from(location) else {
        // Not reached: the URL is a socket address, a hex number and a number.
        return json(
            StatusCode::INTERNAL_SERVER_ERROR,
            r#"{"error":"no status URL for the export"}"#,
        );
    };
    let body = serde_json::json!({ "id": id, "status": "accepted" });
    let mut response = json(StatusCode::ACCEPTED, &body.to_string());
    let headers = response.headers_mut();
    headers.insert(OPERATION_LOCATION, location);
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// Reads an export's status document.
async fn export_status(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let read = shared
        .exports
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .read(&id);
    let body = match read {
        None => return json(StatusCode::NOT_FOUND, r#"{"error":"no such export"}"#),
        Some(ExportRead::Running { percent }) => {
            let body =
                serde_json::json!({ "id": id, "status": "running", "percentComplete": percent });
            let mut response = json(StatusCode::OK, &body.to_string());
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return response;
        }
        Some(ExportRead::Ended(Ending::Succeeded)) => {
            serde_json::json!({ "id": id, "status": "succeeded", "rows": 1200 })
        }
        Some(ExportRead::Ended(Ending::Failed)) => serde_json::json!({
            "id": id,
            "status": "failed",
            "error": { "code": "ExportFailed", "message": "the export ran out of scratch space" },
        }),
        Some(ExportRead::Ended(Ending::Partial)) => serde_json::json!({
            "id": id,
            "status": "partiallySucceeded",
            "covered": "2 of 3 regions",
            "rows": 800,
        }),
    };
    json(StatusCode::OK, &body.to_string())
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

/// A tag for this run of the demo: the seconds since the epoch at its start, in hex.
fn run_tag() -> String {
    let since_epoch = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{:x}", since_epoch.as_secs())
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

/// How long the exporter follows an export from its acceptance: short, so that an export that
/// never finishes ends its call as a `deadline` AccessFailure while the demo is watched.
const EXPORT_DEADLINE: Duration = Duration::from_secs(20);

/// One export in this many is started by a caller that does not wait for it: the call returns
/// the acceptance, and the caller resumes following it [`RESUME_AFTER`] later.
const UNWAITED_EXPORT_EVERY: u64 = 10;

/// How long a caller that did not wait lets an export run before it follows it again.
const RESUME_AFTER: Duration = Duration::from_secs(5);

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

/// The exporter's adapter: it follows an accepted export through its status URL.
type ExportAdapter = Adapter<HttpClassifier, TokioClock, StatusUrl>;

/// Starts an export every `period`, from `offset` on. Each export runs in its own task, so that
/// one followed to its deadline never holds back the next; there are at most about
/// (5 s + EXPORT_DEADLINE) / `period` of them at once. One in [`UNWAITED_EXPORT_EVERY`] is not
/// waited for.
async fn start_exports(
    adapter: Arc<ExportAdapter>,
    client: HttpClient,
    url: Arc<str>,
    period: Duration,
    offset: Duration,
    tally: Tally,
) {
    tokio::time::sleep(offset).await;
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut started: u64 = 0;
    loop {
        ticker.tick().await;
        let waits = !started.is_multiple_of(UNWAITED_EXPORT_EVERY);
        started = started.wrapping_add(1);
        let (adapter, client, url, tally) = (
            Arc::clone(&adapter),
            client.clone(),
            Arc::clone(&url),
            Arc::clone(&tally),
        );
        tokio::spawn(async move {
            let headers = HeaderMap::new();
            let start = |_: AttemptContext| client.post(&url, &headers, Bytes::new());
            let read_status = |operation: &Operation, _: AttemptContext| {
                // The reader refuses an operation without a status URL before any read, so
                // the empty default is never requested.
                let status_url = operation.status_url.clone().unwrap_or_default();
                let (client, headers) = (&client, &headers);
                async move { client.get(&status_url, headers).await }
            };
            if waits {
                let envelope = adapter.call_and_follow(start, read_status).await;
                count(&tally, EXPORTER, &envelope);
                return;
            }
            let accepted = adapter.call(start).await;
            count(&tally, EXPORTER, &accepted);
            let Some(operation) = accepted
                .lifecycle()
                .filter(|lifecycle| !lifecycle.state().is_terminal())
                .map(|lifecycle| lifecycle.operation().clone())
            else {
                return;
            };
            tokio::time::sleep(RESUME_AFTER).await;
            let envelope = adapter.resume(operation, read_status).await;
            count(&tally, EXPORTER, &envelope);
        });
    }
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
            let adapter = Adapter::builder(*tool, url.clone())
                .classifier(classifier)
                .retry(RetryPolicy::default().with_max_attempts(3)?)
                .attempt_timeout(Duration::from_millis(500))
                .deadline(Duration::from_secs(5))
                .actor(*service)
                .tracer_provider(guard.tracer_provider())
                .meter_provider(guard.meter_provider())
                .build()?;
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
                    let envelope = adapter.call(|_| client.get(&url, &headers)).await;
                    count(&tally, &service, &envelope);
                }
            });
        }
        if *service == EXPORTER {
            let url = format!("http://{}/export", args.tools_addr);
            let adapter = Adapter::builder("export", url.clone())
                .classifier(HttpClassifier::new(NotFound::Unreachable).operation_id_at("/id"))
                .follow(StatusUrl::default())
                .operation_deadline(EXPORT_DEADLINE)
                .retry(RetryPolicy::default().with_max_attempts(3)?)
                .attempt_timeout(Duration::from_millis(500))
                .deadline(Duration::from_secs(5))
                .actor(*service)
                .tracer_provider(guard.tracer_provider())
                .meter_provider(guard.meter_provider())
                .build()?;
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

#[cfg(test)]
mod tests {
    use super::{EXPORTS_KEPT, Ending, ExportRead, Exports, Fate, RUNNING_READS, Scenario};

    /// How many of the 100 rolls give `fate` under `scenario`.
    fn share(scenario: Scenario, fate: Fate) -> usize {
        (0..100)
            .filter(|&roll| Fate::choose(scenario, roll) == fate)
            .count()
    }

    #[test]
    fn the_scenario_sets_the_share_of_each_fate() {
        let fates = [
            Fate::Ends(Ending::Succeeded),
            Fate::Ends(Ending::Failed),
            Fate::Ends(Ending::Partial),
            Fate::NeverFinishes,
        ];
        for scenario in [Scenario::Normal, Scenario::Spike, Scenario::CollectorOutage] {
            let shares = fates.map(|fate| share(scenario, fate));
            assert_eq!(shares, [85, 8, 7, 0], "{}", scenario.name());
        }
        let stuck = fates.map(|fate| share(Scenario::ExportsStuck, fate));
        assert_eq!(stuck, [15, 5, 5, 75]);
    }

    #[test]
    fn an_export_runs_for_a_couple_of_reads_then_meets_its_fate() {
        let mut exports = Exports::new("run".into());
        let failing = exports.accept(Fate::Ends(Ending::Failed));
        let stuck = exports.accept(Fate::NeverFinishes);
        for _ in 0..RUNNING_READS {
            assert!(matches!(
                exports.read(&failing),
                Some(ExportRead::Running { .. })
            ));
        }
        assert_eq!(
            exports.read(&failing),
            Some(ExportRead::Ended(Ending::Failed))
        );
        for _ in 0..300 {
            assert!(matches!(
                exports.read(&stuck),
                Some(ExportRead::Running { percent }) if percent < 100
            ));
        }
        assert_eq!(exports.read("run-99"), None);
        assert_eq!(exports.read("other-0"), None);
    }

    #[test]
    fn the_oldest_export_is_forgotten_past_the_bound() {
        let mut exports = Exports::new("run".into());
        let first = exports.accept(Fate::NeverFinishes);
        let second = exports.accept(Fate::NeverFinishes);
        for _ in 2..=EXPORTS_KEPT {
            exports.accept(Fate::NeverFinishes);
        }
        assert_eq!(exports.known.len(), EXPORTS_KEPT);
        assert_eq!(exports.read(&first), None);
        assert!(exports.read(&second).is_some());
    }
}
