//! `candor-collector compact`: consume the topics into Delta Lake tables, exactly once
//! (`candor_collector::compact`), with `/metrics`, `/healthz` and `/readyz` on `metrics.addr`.

use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context as _;
use candor_collector::compact;
use candor_collector::compact::config::{CompactConfig, RawCompactConfig};
use candor_collector::compact::metrics::CompactMetrics;
use candor_service::LogFormat;
use candor_service::config::report_check;
use candor_service::ops::{self, Readiness};
use clap::Parser;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::{bind, check_table_root, default_id, runtime, wait};

/// The flags and variables of `compact`.
#[derive(Parser)]
pub struct CompactArgs {
    /// The TOML configuration file (see deploy/compactor.example.toml).
    #[arg(long, env = "CANDOR_COMPACTOR_CONFIG")]
    config: Option<PathBuf>,
    /// Overrides `table_root`.
    #[arg(long, env = "CANDOR_TABLE_ROOT")]
    table_root: Option<String>,
    /// Overrides `kafka.brokers`.
    #[arg(
        long = "kafka",
        alias = "kafka-brokers",
        env = "CANDOR_COMPACTOR_KAFKA_BROKERS"
    )]
    kafka_brokers: Option<String>,
    /// Overrides `metrics.addr`.
    #[arg(long, env = "CANDOR_COMPACTOR_METRICS_ADDR")]
    metrics_addr: Option<String>,
    /// Overrides `kafka.group_id`.
    #[arg(long, env = "CANDOR_COMPACTOR_GROUP_ID")]
    group_id: Option<String>,
    /// Overrides `files.max_age`.
    #[arg(long, env = "CANDOR_COMPACTOR_MAX_AGE")]
    max_age: Option<String>,
    /// Overrides `compactor_id`.
    #[arg(long, env = "CANDOR_COMPACTOR_ID")]
    compactor_id: Option<String>,
    /// Check the configuration as a start would (file, flags, variables, table root), print it
    /// and exit: 0 when it is valid, 2 when not. Connects to nothing and creates nothing.
    #[arg(long)]
    check: bool,
    /// Log format.
    #[arg(long, value_enum, default_value = "text", env = "CANDOR_LOG_FORMAT")]
    log_format: LogFormat,
}

/// What `/readyz` says while the compactor cannot commit.
const NOT_READY: &str = "tables not open, or the last commit failed";

/// `candor-collector compact`: validate → build → run.
pub fn main(args: &CompactArgs) -> anyhow::Result<()> {
    if args.check {
        report_check(validate(args).and_then(|config| {
            config.kafka.extra.resolve()?;
            check_table_root(&config.table_root)?;
            Ok(format!("{config:#?}"))
        }));
        return Ok(());
    }
    candor_service::init_logs(args.log_format)?;
    allocator_settings();
    let config = validate(args)?;
    let runtime = runtime()?;
    let result = runtime.block_on(async move { build(config).await?.run().await });
    // A consumer that could not close (no broker) is left behind, not waited for.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// The allocator settings the compact role runs with, each unless the operator set it: one
/// glibc malloc arena, for what librdkafka allocates (glibc gives each thread that allocates an
/// arena of its own, up to eight per core, and keeps what is freed in each), and mimalloc
/// returning freed pages at once rather than after its delay (the compactor frees a whole
/// buffer's rows and batch at each write). With both its peak RSS is lower for the same CPU
/// time (`docs/adr/0007-allocators.md`).
const ALLOCATOR_SETTINGS: [(&str, &str); 2] =
    [("MALLOC_ARENA_MAX", "1"), ("MIMALLOC_PURGE_DELAY", "0")];

/// Starts this program again with [`ALLOCATOR_SETTINGS`], unless every variable is set already
/// (by an operator, or by this function before the `exec`): both allocators read them only as
/// the process starts. `exec` keeps the process id, the arguments and the other variables. When
/// the program cannot be started again (its file was replaced), it runs on as it is and says so.
fn allocator_settings() {
    let unset: Vec<(&str, &str)> = ALLOCATOR_SETTINGS
        .into_iter()
        .filter(|(name, _)| std::env::var_os(name).is_none())
        .collect();
    if unset.is_empty() {
        return;
    }
    let error = match std::env::current_exe() {
        Ok(program) => Command::new(program)
            .args(std::env::args_os().skip(1))
            .envs(unset.iter().copied())
            .exec(),
        Err(error) => error,
    };
    tracing::warn!(%error, settings = ?unset, "could not start again with the allocator settings; running without them");
}

/// A compactor's configuration file (the defaults without one), edited by `edit`, validated.
/// `maintain` reads the same file.
pub fn load_config(
    path: Option<&PathBuf>,
    edit: impl FnOnce(&mut RawCompactConfig),
) -> anyhow::Result<CompactConfig> {
    let mut raw = candor_service::config::load_or_default(
        path.map(PathBuf::as_path),
        RawCompactConfig::from_toml_str,
    )?;
    edit(&mut raw);
    Ok(raw.validate()?)
}

/// The compactor's configuration: the file, then the flags and variables over it.
fn validate(args: &CompactArgs) -> anyhow::Result<CompactConfig> {
    load_config(args.config.as_ref(), |raw| {
        if let Some(root) = &args.table_root {
            raw.table_root = Some(root.clone());
        }
        if let Some(brokers) = &args.kafka_brokers {
            raw.kafka.brokers = Some(brokers.clone());
        }
        if let Some(addr) = &args.metrics_addr {
            raw.metrics.addr = addr.clone();
        }
        if let Some(group) = &args.group_id {
            raw.kafka.group_id = Some(group.clone());
        }
        if let Some(age) = &args.max_age {
            raw.files.max_age = age.clone();
        }
        if let Some(id) = &args.compactor_id {
            raw.compactor_id = Some(id.clone());
        }
    })
}

/// A compactor ready to run: its Kafka settings read, its metrics listener bound.
struct Compactor {
    config: CompactConfig,
    context: compact::RunContext,
    metrics_addr: SocketAddr,
    listener: TcpListener,
    stop: watch::Sender<bool>,
}

/// Reads the Kafka settings' variables and binds `metrics.addr`.
async fn build(config: CompactConfig) -> anyhow::Result<Compactor> {
    let kafka_extra = config.kafka.extra.resolve()?;
    let compactor_id = config.compactor_id.clone().unwrap_or_else(default_id);
    let metrics = CompactMetrics::new();
    let ready = Arc::new(AtomicBool::new(false));
    let listener = bind(config.metrics_addr, "metrics.addr").await?;
    let (stop, stopped) = watch::channel(false);
    Ok(Compactor {
        metrics_addr: config.metrics_addr,
        config,
        context: compact::RunContext {
            compactor_id,
            kafka_extra,
            metrics,
            ready,
            stop: stopped,
        },
        listener,
        stop,
    })
}

impl Compactor {
    /// Serves the metrics and compacts until the shutdown signal; then commits what was read.
    async fn run(self) -> anyhow::Result<()> {
        let Compactor {
            config,
            context,
            metrics_addr,
            listener,
            stop,
        } = self;
        let router = ops::router(
            {
                let metrics = Arc::clone(&context.metrics);
                move || metrics.render()
            },
            {
                let ready = Arc::clone(&context.ready);
                move || Readiness::of_flag(&ready, NOT_READY)
            },
        );
        let server = tokio::spawn({
            let stopped = context.stop.clone();
            async move {
                axum::serve(listener, router)
                    .with_graceful_shutdown(wait(stopped))
                    .await
            }
        });
        tracing::info!(metrics = %metrics_addr, "compactor metrics listening");
        let mut run = tokio::spawn(compact::run(config, context));
        let result = tokio::select! {
            result = &mut run => result,
            () = candor_service::shutdown_signal() => {
                tracing::info!("shutting down: committing what was read");
                let _ = stop.send(true);
                run.await
            }
        };
        let _ = stop.send(true);
        let _ = server.await;
        result.context("compactor task")?.context("compactor")
    }
}
