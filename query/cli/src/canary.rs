//! `candor canary`: one synthetic call of each class per interval through the real adapter, so
//! that every hop (adapter → collector → Kafka → tables → dashboards) has fresh evidence even
//! when no real tool is being called.
//!
//! The calls touch no network: a scripted tool answers each with its class. The AccessFailure
//! and the Partial become `tool.outcome` span events; all four are counted on `tool.outcomes`.
//! Their target is `candor://canary`, so they are easy to tell from real traffic.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use candor_adapter::otlp::{OtlpConfig, init};
use candor_adapter::{Adapter, FnClassifier, RetryPolicy};
use candor_schema::{
    AccessFailureKind, Extent, Failure, Outcome, OutcomeClass, PartialKind, Truncation,
};

/// The canary's target.
pub const TARGET: &str = "candor://canary";

/// `candor canary` arguments.
#[derive(Debug, clap::Args)]
pub struct CanaryArgs {
    /// The collector's OTLP/gRPC endpoint.
    #[arg(
        long,
        env = "CANDOR_OTLP_ENDPOINT",
        default_value = "http://127.0.0.1:4317"
    )]
    pub otlp_endpoint: String,
    /// Time between two rounds of four calls.
    #[arg(long, default_value = "60s", value_parser = candor_schema::duration::parse)]
    pub interval: Duration,
    /// Stop after this many rounds (default: run until stopped).
    #[arg(long)]
    pub rounds: Option<u64>,
}

/// The outcome the scripted tool gives for `class`.
fn scripted(class: OutcomeClass) -> Outcome<u64> {
    match class {
        OutcomeClass::Success => Outcome::Success {
            payload: 1,
            extent: Extent {
                items: Some(1),
                declared_total: Some(1),
                scope: Some("canary".into()),
            },
        },
        OutcomeClass::Empty => Outcome::Empty {
            extent: Extent {
                items: Some(0),
                declared_total: Some(0),
                scope: Some("canary".into()),
            },
        },
        OutcomeClass::Partial => Outcome::Partial {
            payload: 1,
            truncation: Truncation {
                kind: PartialKind::DeclaredTotal,
                covered: "item 1 of 2".into(),
                dropped: "1 item (synthetic)".into(),
                returned: Some(1),
                expected: Some(2),
            },
        },
        OutcomeClass::AccessFailure => Outcome::AccessFailure {
            failure: Failure {
                kind: AccessFailureKind::Connect,
                retryable: false,
                message: "synthetic canary failure".into(),
                status: None,
                error_type: Some("canary".into()),
                retry_after_ms: None,
            },
        },
    }
}

/// Runs the canary.
pub async fn run(args: CanaryArgs) -> anyhow::Result<ExitCode> {
    let mut otlp = OtlpConfig::new(args.otlp_endpoint.clone(), "candor-canary");
    // Counters go out at least once per round.
    otlp.metric_interval = args.interval.min(Duration::from_secs(10));
    let telemetry = init(otlp).context("setting up the OTLP export")?;
    let adapter = Adapter::builder("canary", TARGET)
        .classifier(FnClassifier::new(scripted))
        .retry(RetryPolicy::default().with_max_attempts(1)?)
        .actor("candor-canary")
        .trace_every_call(true)
        .build()?;
    let mut ticker = tokio::time::interval(args.interval);
    let mut round = 0u64;
    loop {
        ticker.tick().await;
        round += 1;
        let mut seen = Vec::new();
        for &class in OutcomeClass::ALL {
            let envelope = adapter.call(|_| async move { class }).await;
            seen.push(envelope.class().as_str());
        }
        eprintln!("candor canary: round {round}: {}", seen.join(", "));
        if args.rounds.is_some_and(|rounds| round >= rounds) {
            break;
        }
    }
    let failed = match telemetry.shutdown() {
        Ok(stats) => stats.lost_spans,
        Err(err) => match err.stats() {
            Some(stats) => {
                eprintln!("candor canary: telemetry not flushed: {err}");
                stats.lost_spans.max(1)
            }
            None => return Err(err).context("flushing the canary's telemetry"),
        },
    };
    if failed > 0 {
        eprintln!("candor canary: {failed} span(s) could not be exported");
        return Ok(ExitCode::from(4));
    }
    Ok(ExitCode::SUCCESS)
}
