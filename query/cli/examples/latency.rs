//! End-to-end latency of a failure: from the moment an adapter call ends as AccessFailure to the
//! moment `candor incident` shows its row, through the running pipeline (adapter → OTLP →
//! collector → Kafka → [compactor → table] → `candor`).
//!
//! ```text
//! cargo run --release -p candor-query --example latency -- --candor target/release/candor \
//!     --otlp-endpoint http://127.0.0.1:4317 --tables data/tables --kafka 127.0.0.1:9092 \
//!     --mode live --samples 30 --every 1s
//! ```
//!
//! One call a period (`--every`) goes through the real adapter and its OTLP export, with the
//! adapter's default export settings; each is told apart by its `error_type` (`sample-N`). Meanwhile
//! `candor incident --target T` runs back to back, as a person refreshing it would, with `--live`
//! (the table and the Kafka tail) or `--no-live` (the table only, so the compactor's file age
//! counts). A sample's latency is the end of the first run that shows its row minus the end of
//! its call, so it includes the time of that `candor` run.
//!
//! Prints one JSON line per sample and one summary line (p50, p95, max); samples never seen within
//! `--give-up` after the last call are counted as missing, never left out silently.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};
use candor_adapter::otlp::{OtlpConfig, init};
use candor_adapter::{Adapter, FnClassifier, RetryPolicy};
use candor_schema::{AccessFailureKind, Failure, Outcome};
use clap::{Parser, ValueEnum};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    /// `candor incident --live`: the table and the Kafka tail.
    Live,
    /// `candor incident --no-live`: the table only.
    Table,
}

#[derive(Debug, Parser)]
struct Args {
    /// The `candor` binary.
    #[arg(long)]
    candor: PathBuf,
    /// The collector's OTLP/gRPC endpoint.
    #[arg(long, default_value = "http://127.0.0.1:4317")]
    otlp_endpoint: String,
    /// The tables' root.
    #[arg(long)]
    tables: String,
    /// Kafka bootstrap servers.
    #[arg(long, default_value = "127.0.0.1:9092")]
    kafka: String,
    /// Where `candor` looks.
    #[arg(long, value_enum)]
    mode: Mode,
    /// Calls to make.
    #[arg(long, default_value_t = 30)]
    samples: u64,
    /// Time between two calls.
    #[arg(long, default_value = "1s", value_parser = candor_schema::duration::parse)]
    every: Duration,
    /// How long after the last call a sample may still appear.
    #[arg(long, default_value = "180s", value_parser = candor_schema::duration::parse)]
    give_up: Duration,
}

fn failure(sample: u64) -> Outcome<u64> {
    Outcome::AccessFailure {
        failure: Failure {
            kind: AccessFailureKind::Connect,
            retryable: false,
            message: "synthetic failure for the latency benchmark".into(),
            status: None,
            error_type: Some(format!("sample-{sample}")),
            retry_after_ms: None,
        },
    }
}

/// The samples shown by one `candor incident` run.
fn shown(args: &Args, target: &str) -> anyhow::Result<Vec<u64>> {
    let live = match args.mode {
        Mode::Live => "--live",
        Mode::Table => "--no-live",
    };
    let output = Command::new(&args.candor)
        .args(["--tables", &args.tables, "--kafka", &args.kafka, live])
        .args(["--format", "json", "incident", "--target", target])
        .args(["--since", "30m"])
        .output()
        .context("running candor")?;
    // 0: rows; 1: none yet; 3: partial, which from the table alone is the rule (the window
    // reaches past the table's newest data) and still lists the rows it has. Anything else (a
    // source unreadable, a usage error) is a failure of the measurement.
    if !matches!(output.status.code(), Some(0 | 1 | 3)) {
        bail!(
            "candor incident answered {:?}: {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let answer: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("candor printed no JSON")?;
    let rows = answer["envelope"]["outcome"]["payload"]["rows"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Ok(rows
        .iter()
        .filter_map(|row| {
            row["error_type"]
                .as_str()?
                .strip_prefix("sample-")?
                .parse()
                .ok()
        })
        .collect())
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let run = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)?
        .as_nanos();
    let mode = format!("{:?}", args.mode).to_lowercase();
    let target = format!("latency://{mode}/{run}");
    let ended: Arc<Mutex<BTreeMap<u64, (SystemTime, Instant)>>> = Arc::default();

    let telemetry = {
        let _entered = runtime.enter();
        init(OtlpConfig::new(
            args.otlp_endpoint.clone(),
            "candor-latency",
        ))
        .context("setting up the OTLP export")?
    };
    let adapter = Adapter::builder("latency", target.clone())
        .classifier(FnClassifier::new(failure))
        .retry(RetryPolicy::default().with_max_attempts(1)?)
        .actor("candor-latency")
        .trace_every_call(true)
        .build()?;
    let calls = {
        let ended = Arc::clone(&ended);
        let (samples, every) = (args.samples, args.every);
        runtime.spawn(async move {
            let mut ticker = tokio::time::interval(every);
            for sample in 0..samples {
                ticker.tick().await;
                let envelope = adapter.call(|_| async move { sample }).await;
                let at = (SystemTime::now(), Instant::now());
                debug_assert_eq!(envelope.class().as_str(), "access_failure");
                if let Ok(mut ended) = ended.lock() {
                    ended.insert(sample, at);
                }
            }
        })
    };

    let mut latencies: BTreeMap<u64, f64> = BTreeMap::new();
    let mut polls: Vec<f64> = Vec::new();
    let mut last_call: Option<Instant> = None;
    while (latencies.len() as u64) < args.samples
        && last_call.is_none_or(|at| at.elapsed() < args.give_up)
    {
        let started = Instant::now();
        let seen = shown(&args, &target)?;
        let done = Instant::now();
        polls.push(done.duration_since(started).as_secs_f64() * 1e3);
        let ended = ended
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .clone();
        if ended.len() as u64 == args.samples {
            last_call = last_call.or(Some(done));
        }
        for sample in seen {
            if latencies.contains_key(&sample) {
                continue;
            }
            let Some((_, at)) = ended.get(&sample) else {
                continue;
            };
            let latency = done.duration_since(*at).as_secs_f64() * 1e3;
            latencies.insert(sample, latency);
            println!(
                "{}",
                serde_json::json!({"mode": mode, "sample": sample, "latency_ms": latency.round()})
            );
        }
    }
    runtime.block_on(calls)?;
    telemetry.shutdown().context("flushing the telemetry")?;
    let mut sorted: Vec<f64> = latencies.values().copied().collect();
    sorted.sort_by(f64::total_cmp);
    polls.sort_by(f64::total_cmp);
    println!(
        "{}",
        serde_json::json!({
            "summary": mode,
            "samples": args.samples,
            "seen": sorted.len(),
            "missing": args.samples - sorted.len() as u64,
            "p50_ms": percentile(&sorted, 0.5).round(),
            "p95_ms": percentile(&sorted, 0.95).round(),
            "max_ms": sorted.last().copied().unwrap_or(f64::NAN).round(),
            "polls": polls.len(),
            "poll_p50_ms": percentile(&polls, 0.5).round(),
        })
    );
    Ok(())
}
