//! Hot timings of the read path as a library: the tables are opened once, then each question runs
//! `--runs` times on the warm session; prints the fastest and the median run of each, and the
//! process's peak memory.
//!
//! ```text
//! cargo run --release -p candor-query --example hot -- --tables DIR --since T --until T \
//!     --trace-id ID --target T --incident-from T [--runs 10]
//! ```
//!
//! `tests/bench/query.sh` runs it on 10 million events beside the same questions asked as a fresh
//! `candor` process and in DuckDB.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use candor_query::commands::{self, Filters, GroupBy, RatesQuery};
use candor_query::reader::{ReadOptions, Reader};
use candor_query::store::TableRoot;
use candor_query::window::{TimeArg, Window, now};
use candor_records::tables::Table;
use clap::Parser;

/// The same allocator as the `candor` binary, so that the figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Arguments.
#[derive(Debug, Parser)]
struct Args {
    /// Table root.
    #[arg(long)]
    tables: String,
    /// Rates window start (RFC 3339).
    #[arg(long)]
    since: String,
    /// Rates window end (RFC 3339).
    #[arg(long)]
    until: String,
    /// A trace to look up.
    #[arg(long)]
    trace_id: String,
    /// A target for the incident question.
    #[arg(long)]
    target: String,
    /// Start of the incident's hour (RFC 3339).
    #[arg(long)]
    incident_from: String,
    /// Runs per question.
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// Only the questions whose name contains this (to profile one of them).
    #[arg(long, default_value = "")]
    only: String,
}

fn window(since: &str, until: &str) -> anyhow::Result<Window> {
    Ok(Window::resolve(
        Some(TimeArg::parse(since)?),
        Some(TimeArg::parse(until)?),
        now(),
    )?)
}

async fn time<F, Fut>(name: &str, args: &Args, mut question: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<usize>>,
{
    if !name.contains(&args.only) {
        return Ok(());
    }
    let runs = args.runs;
    let mut times: Vec<Duration> = Vec::with_capacity(runs);
    let mut rows = 0;
    for _ in 0..runs {
        let started = Instant::now();
        rows = question().await?;
        times.push(started.elapsed());
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "hot {name}: rows {rows} min_ms {:.1} median_ms {:.1}",
        ms(times[0]),
        ms(times[times.len() / 2])
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.runs > 0, "--runs must be positive");
    let opened = Instant::now();
    let reader = Reader::open(ReadOptions {
        root: TableRoot::new(args.tables.clone()),
        tail: None,
        tables: vec![Table::OutcomeEvents, Table::OutcomeCounts],
    })
    .await;
    println!("open: {:.1} ms", opened.elapsed().as_secs_f64() * 1000.0);
    let rates = RatesQuery {
        window: window(&args.since, &args.until)?,
        by: GroupBy::Target,
        step: None,
        lookback: Duration::from_secs(900),
        filters: Filters::default(),
        merge_sources: false,
    };
    let id = commands::trace_id(&args.trace_id)?;
    let from = TimeArg::parse(&args.incident_from)?.resolve(now());
    let hour = Window {
        since: from,
        until: from + 3_600_000_000,
    };
    let target = Filters {
        target: Some(args.target.clone()),
        ..Filters::default()
    };
    time("sql group-by count per target", &args, || async {
        let statement = "SELECT tool_target, count(*) FROM outcome_events GROUP BY tool_target";
        Ok(commands::sql(&reader, statement).await?.rows.len())
    })
    .await?;
    time("rates --by target", &args, || async {
        Ok(commands::rates(&reader, &rates).await?.rows.len())
    })
    .await?;
    time("trace", &args, || async {
        Ok(commands::trace(&reader, &id, None).await?.rows.len())
    })
    .await?;
    time("incident (one target, one hour)", &args, || async {
        Ok(commands::incident(&reader, hour, &target).await?.rows.len())
    })
    .await?;
    // The Parquet footers and page indexes DataFusion keeps between questions: a cache too small
    // for the table reads them again on every question.
    let cache = reader
        .context
        .runtime_env()
        .cache_manager
        .get_file_metadata_cache();
    let entries = cache.list_entries();
    let with_page_index = entries
        .values()
        .filter(|entry| {
            entry.value.file_metadata.extra_info().get("page_index") == Some(&"true".to_owned())
        })
        .count();
    let bytes: usize = entries.values().map(|entry| entry.size_bytes).sum();
    println!(
        "hot metadata cache: {} files ({with_page_index} with page index), {:.1} MiB of {:.1} MiB",
        entries.len(),
        bytes as f64 / 1048576.0,
        cache.cache_limit() as f64 / 1048576.0
    );
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    if let Some(line) = status.lines().find(|line| line.starts_with("VmHWM")) {
        println!(
            "hot peak memory: {}",
            line.trim_start_matches("VmHWM:").trim()
        );
    }
    Ok(())
}
