//! `candor probe`: one HTTP GET through the adapter, the envelope printed as JSON on stdout and
//! its summary on stderr. Exit codes follow the class: 0 success, 1 empty, 3 partial,
//! 4 access_failure (2 is a usage error). With `--follow`, an answer that accepted an
//! asynchronous operation (a 202 naming its status URL) is followed to the operation's end.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use candor_adapter::follow::http::StatusUrl;
use candor_adapter::http_client::HttpClient;
use candor_adapter::otlp::{OtlpConfig, init};
use candor_adapter::{Adapter, HttpClassifier, NotFound, RetryPolicy};
use candor_schema::Operation;
use http::HeaderMap;

/// What a 404 means for the probed URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NotFoundArg {
    /// A verified absence (a lookup by id): Empty.
    Absent,
    /// Could not reach the resource (for example a wrong base path): AccessFailure.
    Unreachable,
}

/// `candor probe` arguments.
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// The URL to GET (http:// or https://, verified against the system's CA certificates).
    pub url: String,
    /// Where the result list sits (a field name or a JSON pointer).
    #[arg(long)]
    pub items_field: Option<String>,
    /// Where the source declares the total number of matches.
    #[arg(long)]
    pub total_field: Option<String>,
    /// Per-attempt timeout in milliseconds.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
    /// Attempts in all, retries included.
    #[arg(long, default_value_t = 3)]
    pub max_attempts: u32,
    /// What a 404 means; a probe cannot know, so the default is `unreachable`.
    #[arg(long, value_enum, default_value_t = NotFoundArg::Unreachable)]
    pub not_found: NotFoundArg,
    /// Also export the span events and counters over OTLP/gRPC to this endpoint.
    #[arg(long)]
    pub otlp_endpoint: Option<String>,
    /// The service name the exported telemetry carries.
    #[arg(long, default_value = "candor-probe")]
    pub service_name: String,
    /// Follow an operation the answer accepted (a 202 with `Operation-Location` or `Location`)
    /// by reading its status URL until it ends.
    #[arg(long)]
    pub follow: bool,
    /// How long to follow an accepted operation, in milliseconds.
    #[arg(long, default_value_t = 600_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub operation_deadline_ms: u64,
}

fn pointer(field: String) -> String {
    if field.starts_with('/') {
        field
    } else {
        format!("/{field}")
    }
}

/// Runs one probe.
pub async fn run(args: ProbeArgs) -> anyhow::Result<ExitCode> {
    let telemetry = match &args.otlp_endpoint {
        Some(endpoint) => {
            let mut config = OtlpConfig::new(endpoint.clone(), args.service_name.clone());
            // The OpenTelemetry SDKs' variable for the metric reader's interval: a probe that
            // follows a long operation reports its heartbeat at it.
            if let Some(interval) = std::env::var("OTEL_METRIC_EXPORT_INTERVAL")
                .ok()
                .and_then(|ms| ms.trim().parse::<u64>().ok())
                .filter(|ms| *ms > 0)
            {
                config.metric_interval = Duration::from_millis(interval);
            }
            Some(init(config).context("setting up the OTLP export")?)
        }
        None => None,
    };
    let not_found = match args.not_found {
        NotFoundArg::Absent => NotFound::ConfirmedAbsent,
        NotFoundArg::Unreachable => NotFound::Unreachable,
    };
    let mut classifier = HttpClassifier::new(not_found);
    if let Some(items) = args.items_field {
        classifier = classifier.items_at(pointer(items));
    }
    if let Some(total) = args.total_field {
        classifier = classifier.total_at(pointer(total));
    }
    let timeout = Duration::from_millis(args.timeout_ms);
    let policy = RetryPolicy::default().with_max_attempts(args.max_attempts)?;
    // Room for backoffs between attempts on top of the attempts' own time.
    let slack = Duration::from_secs(10);
    let adapter = Adapter::builder("probe", args.url.clone())
        .classifier(classifier)
        .retry(policy)
        .attempt_timeout(timeout)
        .deadline(
            timeout
                .saturating_mul(args.max_attempts)
                .saturating_add(slack),
        )
        .actor("candor-probe");
    let client = HttpClient::default();
    let headers = HeaderMap::new();
    let start = |context| client.get(context, &args.url, &headers);
    let envelope = if args.follow {
        let read_status = |operation: &Operation, context| {
            // The status reader refuses an operation without a status URL before any read.
            let url = operation.status_url.clone().unwrap_or_default();
            let (client, headers) = (&client, &headers);
            async move { client.get(context, &url, headers).await }
        };
        adapter
            .follow(StatusUrl::default())
            .operation_deadline(Duration::from_millis(args.operation_deadline_ms))
            .build()?
            .call_and_follow(start, read_status)
            .await
    } else {
        adapter.build()?.call(start).await
    };
    println!("{}", serde_json::to_string_pretty(&envelope)?);
    eprintln!("{}", envelope.summary());
    // The probe's own answer stands whatever happens to its telemetry; a loss is said.
    if let Some(telemetry) = telemetry {
        let failed = match telemetry.shutdown() {
            Ok(stats) => stats.lost_spans,
            Err(err) => {
                eprintln!("candor probe: telemetry not flushed: {err}");
                err.stats().map_or(0, |stats| stats.lost_spans)
            }
        };
        if failed > 0 {
            eprintln!("candor probe: {failed} span(s) could not be exported");
        }
    }
    Ok(ExitCode::from(candor_query::exit_code(envelope.class())))
}
