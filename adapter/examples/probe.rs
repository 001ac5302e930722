//! `probe`: one HTTP GET through the adapter, the envelope printed as JSON.
//!
//! ```text
//! cargo run -p candor-adapter --example probe -- <url> [--items-field F] [--total-field F]
//!     [--timeout-ms N] [--max-attempts N] [--not-found absent|unreachable] [--otlp-endpoint URL]
//! ```
//!
//! Exit codes: 0 success, 1 empty, 3 partial, 4 access_failure, 2 usage error. The summary goes
//! to stderr, the envelope to stdout.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use candor_adapter::http_client::HttpClient;
use candor_adapter::otlp::{OtlpConfig, init};
use candor_adapter::{Adapter, HttpClassifier, NotFound, RetryPolicy};
use candor_schema::OutcomeClass;
use http::HeaderMap;

const USAGE: &str = "usage: probe <url> [--items-field F] [--total-field F] [--timeout-ms N] \
[--max-attempts N] [--not-found absent|unreachable] [--otlp-endpoint URL]

  --items-field F    where the result list sits (a field name or a JSON pointer)
  --total-field F    where the source declares the total number of matches
  --timeout-ms N     per-attempt timeout (default 5000)
  --max-attempts N   attempts in all, retries included (default 3)
  --not-found M      what a 404 means: `absent` (a verified absence) or `unreachable`
                     (could not reach the resource; the default, since a probe cannot know)
  --otlp-endpoint U  also export the span events and counters over OTLP/gRPC to U

exit: 0 success, 1 empty, 3 partial, 4 access_failure, 2 usage error";

struct Args {
    url: String,
    items: Option<String>,
    total: Option<String>,
    timeout: Duration,
    max_attempts: u32,
    not_found: NotFound,
    otlp_endpoint: Option<String>,
}

fn pointer(field: String) -> String {
    if field.starts_with('/') {
        field
    } else {
        format!("/{field}")
    }
}

fn parse_args(mut raw: impl Iterator<Item = String>) -> anyhow::Result<Args> {
    let mut args = Args {
        url: String::new(),
        items: None,
        total: None,
        timeout: Duration::from_secs(5),
        max_attempts: 3,
        not_found: NotFound::Unreachable,
        otlp_endpoint: None,
    };
    while let Some(arg) = raw.next() {
        let mut value = |name: &str| raw.next().with_context(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--items-field" => args.items = Some(pointer(value("--items-field")?)),
            "--total-field" => args.total = Some(pointer(value("--total-field")?)),
            "--timeout-ms" => {
                let raw = value("--timeout-ms")?;
                let ms: u64 = raw
                    .parse()
                    .with_context(|| format!("--timeout-ms {raw:?} is not a number"))?;
                if ms == 0 {
                    bail!("--timeout-ms must be positive");
                }
                args.timeout = Duration::from_millis(ms);
            }
            "--max-attempts" => {
                let raw = value("--max-attempts")?;
                args.max_attempts = raw
                    .parse()
                    .with_context(|| format!("--max-attempts {raw:?} is not a number"))?;
            }
            "--not-found" => {
                args.not_found = match value("--not-found")?.as_str() {
                    "absent" => NotFound::ConfirmedAbsent,
                    "unreachable" => NotFound::Unreachable,
                    other => bail!("--not-found {other:?}: expected absent or unreachable"),
                }
            }
            "--otlp-endpoint" => args.otlp_endpoint = Some(value("--otlp-endpoint")?),
            "-h" | "--help" => bail!("help"),
            flag if flag.starts_with('-') => bail!("unknown option {flag:?}"),
            url if args.url.is_empty() => args.url = url.to_owned(),
            extra => bail!("unexpected argument {extra:?}"),
        }
    }
    if args.url.is_empty() {
        bail!("missing <url>");
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(err) => {
            if err.to_string() != "help" {
                eprintln!("probe: {err:#}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(code) => code,
        Err(err) => {
            eprintln!("probe: {err:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let telemetry = match &args.otlp_endpoint {
        Some(endpoint) => Some(init(OtlpConfig::new(endpoint.clone(), "candor-probe"))?),
        None => None,
    };
    let mut classifier = HttpClassifier::new(args.not_found);
    if let Some(items) = args.items {
        classifier = classifier.items_at(items);
    }
    if let Some(total) = args.total {
        classifier = classifier.total_at(total);
    }
    let policy = RetryPolicy::default().with_max_attempts(args.max_attempts)?;
    let adapter = Adapter::builder("probe", args.url.clone())
        .classifier(classifier)
        .retry(policy)
        .attempt_timeout(args.timeout)
        .deadline(
            args.timeout
                .saturating_mul(args.max_attempts)
                .saturating_add(policy_slack()),
        )
        .actor("candor-probe")
        .build()?;
    let client = HttpClient::default();
    let headers = HeaderMap::new();
    let envelope = adapter.call(|_| client.get(&args.url, &headers)).await;
    println!("{}", serde_json::to_string_pretty(&envelope)?);
    eprintln!("{}", envelope.summary());
    if let Some(telemetry) = telemetry {
        let failed = telemetry.failed_span_exports();
        telemetry.shutdown()?;
        if failed > 0 {
            eprintln!("probe: {failed} span(s) could not be exported");
        }
    }
    Ok(ExitCode::from(match envelope.class() {
        OutcomeClass::Success => 0,
        OutcomeClass::Empty => 1,
        OutcomeClass::Partial => 3,
        OutcomeClass::AccessFailure => 4,
    }))
}

/// Room for backoffs between attempts on top of the attempts' own time.
fn policy_slack() -> Duration {
    Duration::from_secs(10)
}
