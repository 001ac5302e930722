//! `candor-collector maintain`: one maintenance run over every table (optimize, vacuum,
//! retention), one line printed per table and job.

use std::path::PathBuf;

use anyhow::bail;
use candor_collector::compact;
use candor_collector::compact::config::CompactConfig;
use candor_collector::compact::metrics::CompactMetrics;
use candor_service::LogFormat;
use candor_service::config::report_check;
use clap::Parser;

use super::{check_table_root, runtime};

/// The flags and variables of `maintain`.
#[derive(Parser)]
pub struct MaintainArgs {
    /// The compactor's TOML configuration file.
    #[arg(long, env = "CANDOR_COMPACTOR_CONFIG")]
    config: Option<PathBuf>,
    /// Overrides `table_root`.
    #[arg(long, env = "CANDOR_TABLE_ROOT")]
    table_root: Option<String>,
    /// Merge the small files of closed date partitions.
    #[arg(long)]
    optimize: bool,
    /// Delete files unreferenced for longer than `maintenance.vacuum_retention`.
    #[arg(long)]
    vacuum: bool,
    /// Drop partitions older than `maintenance.retention_days` (refused when that is 0).
    #[arg(long)]
    retention: bool,
    /// Check the configuration and the table root, print them and exit: 0 when valid, 2 when
    /// not. Touches no table.
    #[arg(long)]
    check: bool,
}

/// A validated maintenance run: the compactor's configuration and the jobs to do.
struct Maintenance {
    config: CompactConfig,
    jobs: compact::Jobs,
}

/// `candor-collector maintain`: validate → run (nothing to build: each job opens its table).
pub fn main(args: &MaintainArgs) -> anyhow::Result<()> {
    let config = config(args);
    if args.check {
        report_check(config.and_then(|config| {
            check_table_root(&config.table_root)?;
            Ok(format!("{config:#?}"))
        }));
        return Ok(());
    }
    candor_service::init_logs(LogFormat::Text)?;
    let maintenance = validate(args, config?)?;
    let lines = runtime()?.block_on(run(&maintenance));
    let failed = lines
        .iter()
        .filter(|line| line.contains("failed") || line.contains("cannot"))
        .count();
    for line in &lines {
        println!("{line}");
    }
    if failed > 0 {
        bail!("{failed} maintenance job(s) failed");
    }
    Ok(())
}

/// The compactor's configuration file with `--table-root` over it.
fn config(args: &MaintainArgs) -> anyhow::Result<CompactConfig> {
    super::compact::load_config(args.config.as_ref(), |raw| {
        if let Some(root) = &args.table_root {
            raw.table_root = Some(root.clone());
        }
    })
}

/// The jobs named (all three when none is), refusing `--retention` without a retention.
fn validate(args: &MaintainArgs, config: CompactConfig) -> anyhow::Result<Maintenance> {
    let all = !(args.optimize || args.vacuum || args.retention);
    let jobs = compact::Jobs {
        optimize: all || args.optimize,
        vacuum: all || args.vacuum,
        retention: all || args.retention,
    };
    if args.retention && config.maintenance.retention_days.is_none() {
        bail!(
            "--retention needs maintenance.retention_days in the configuration (it is 0: keep everything)"
        );
    }
    Ok(Maintenance { config, jobs })
}

/// Runs the jobs on every table; one line per table and job.
async fn run(maintenance: &Maintenance) -> Vec<String> {
    let metrics = CompactMetrics::new();
    let mut lines = Vec::new();
    for table in candor_records::tables::Table::ALL {
        lines.extend(
            compact::maintain_table(&maintenance.config, table, maintenance.jobs, &metrics).await,
        );
    }
    lines
}
