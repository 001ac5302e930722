//! The compact role: Kafka → Delta Lake tables of Parquet, exactly once across crashes.
//!
//! ```text
//! topics --[source: consumer thread]--> Engine (buffer, dedupe, late flags)
//!        --[table: commit rows + positions in one Delta transaction]--> tables
//!        --[source: commit Kafka offsets, a hint only]--> Kafka
//! ```
//!
//! The invariant: a table's application transaction for a source topic-partition is the next
//! offset to read, and it changes only in the commit that stores the rows before it. Reading
//! restarts there after a crash or a rebalance, and a commit leaves out rows the table already
//! holds, so no record is lost or stored twice (see `ARCHITECTURE.md`).
//!
//! Modules: [`config`] (the TOML configuration), [`candor_records::rows`] (records to rows to Arrow batches,
//! pure), [`engine`] (the buffer and the commit rule), [`table`] (Delta I/O), [`source`] (the
//! Kafka consumer), [`maintenance`] (optimize, vacuum, retention), [`metrics`] (self-telemetry)
//! and [`fault`] (crash points for the crash tests).

pub mod config;
pub mod engine;
pub mod fault;
pub mod maintenance;
pub mod metrics;
pub mod source;
pub mod table;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant, SystemTime};

use candor_kafka::GroupConsumerSettings;
use candor_records::tables::Table;
use deltalake::DeltaTable;
use tokio::sync::{mpsc, watch};

use self::config::CompactConfig;
use self::engine::{Due, Engine, EngineSettings};
use self::metrics::CompactMetrics;
use self::source::{Control, Input};
use self::table::{FileSettings, TableError};
use candor_records::rows::{self, TimeBounds};

/// How long a failed flush waits before it is tried again; fetching pauses meanwhile.
const RETRY_FLUSH_AFTER: Duration = Duration::from_secs(2);
/// How long the last commit at shutdown may take; past it, the records are read again at the
/// next start.
const SHUTDOWN_FLUSH_DEADLINE: Duration = Duration::from_secs(30);
/// How long shutdown waits for the consumer to leave its group.
const READER_CLOSE_DEADLINE: Duration = Duration::from_secs(10);
/// How often the consumer reports librdkafka's statistics, which the lag metric is read from.
const STATISTICS_EVERY: Duration = Duration::from_secs(5);

/// Why the compact role stopped.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    /// A table could not be opened or created at start.
    #[error(transparent)]
    Table(#[from] TableError),
    /// The consumer could not be created.
    #[error("kafka consumer: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    /// The consumer thread ended on its own.
    #[error("the kafka consumer thread stopped")]
    ReaderGone,
}

/// What [`run`] needs besides the configuration.
pub struct RunContext {
    /// Names this compactor.
    pub compactor_id: String,
    /// librdkafka settings from `kafka.extra` and the resolved `kafka.extra_env`.
    pub kafka_extra: candor_kafka::ClientSettings,
    /// Counts everything.
    pub metrics: Arc<CompactMetrics>,
    /// Set while the compactor can commit.
    pub ready: Arc<AtomicBool>,
    /// Becomes true to stop.
    pub stop: watch::Receiver<bool>,
}

/// Opens (or creates) every table under the root.
pub async fn open_tables(root: &str) -> Result<BTreeMap<Table, DeltaTable>, TableError> {
    let mut tables = BTreeMap::new();
    for table in Table::ALL {
        tables.insert(table, table::open_or_create(root, table).await?);
    }
    Ok(tables)
}

/// Runs the compact role until `stop`; on stop, commits what was read and leaves the group.
pub async fn run(config: CompactConfig, context: RunContext) -> Result<(), CompactError> {
    let RunContext {
        compactor_id,
        kafka_extra,
        metrics,
        ready,
        mut stop,
    } = context;
    let mut tables = open_tables(&config.table_root).await?;
    let micros = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
    let mut engine = Engine::new(
        EngineSettings {
            compactor_id: compactor_id.clone(),
            bounds: TimeBounds {
                late_after_micros: micros(config.late_after),
                future_after_micros: micros(config.future_after),
            },
            dedupe_window: config.dedupe_window,
            target_bytes: config.files.target_bytes.get(),
            max_age: config.files.max_age,
            max_rows: config.files.max_rows.get(),
            max_buffer_bytes: config.files.max_buffer_bytes.get(),
            files: file_settings(&config),
        },
        Arc::clone(&metrics),
    );
    let (input_tx, mut input_rx) = mpsc::channel(16);
    let (control_tx, control_rx) = std_mpsc::channel();
    let reader = source::start(
        &GroupConsumerSettings {
            bootstrap_servers: config.kafka.bootstrap_servers(),
            group_id: config.kafka.group_id.clone(),
            session_timeout: config.kafka.session_timeout,
            client_id: format!("candor-compactor-{compactor_id}"),
            statistics_interval: STATISTICS_EVERY,
            extra: kafka_extra,
        },
        position_lookup(config.table_root.clone(), config.dedupe_window),
        input_tx,
        control_rx,
        Arc::clone(&metrics),
    )?;
    let mut ticker = tokio::time::interval(Duration::from_millis(250));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut schedule = tokio::time::interval(config.maintenance.interval);
    schedule.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    schedule.tick().await;
    let mut failed_at: Option<Instant> = None;
    let mut maintenance: Option<tokio::task::JoinHandle<()>> = None;
    ready.store(true, Ordering::Relaxed);
    tracing::info!(
        root = %config.table_root,
        compactor_id = %compactor_id,
        scheduled_maintenance = config.maintenance.enabled,
        "compactor running"
    );
    let result = loop {
        let accepting = failed_at.is_none();
        tokio::select! {
            biased;
            _ = stop.wait_for(|stop| *stop) => break Ok(()),
            // Read on while commits fail: fetching is paused, and rebalances must get through.
            input = input_rx.recv() => match input {
                Some(Input::Records(records)) => engine.intake(records, Instant::now()),
                Some(Input::Assigned(assigned)) => {
                    for assignment in assigned {
                        let (table, partition) = assignment.source;
                        engine.assign(assignment.source, assignment.position, assignment.generation);
                        let ids = assignment.stored_ids.into_iter();
                        let ids = ids.map(|(id, offset, at)| (id, partition, offset, at)).collect();
                        engine.remember_stored(table, ids);
                    }
                }
                Some(Input::Sought(sought)) => {
                    for (source, position, generation) in sought {
                        engine.assign(source, position, generation);
                    }
                }
                Some(Input::Revoked(revoked)) => {
                    for source in revoked {
                        engine.revoke(source);
                    }
                }
                None => break Err(CompactError::ReaderGone),
            },
            _ = ticker.tick() => {}
            _ = schedule.tick(), if config.maintenance.enabled => {
                // One run at a time: a slow run makes the next tick wait, not overlap.
                if maintenance.as_ref().is_none_or(tokio::task::JoinHandle::is_finished) {
                    maintenance = Some(tokio::spawn(maintain(config.clone(), Arc::clone(&metrics))));
                }
            }
        }
        let now = Instant::now();
        let retry = failed_at.is_some_and(|at| now.duration_since(at) >= RETRY_FLUSH_AFTER);
        let due = if retry {
            Some("retry")
        } else if accepting {
            engine.due(now).map(Due::as_str)
        } else {
            None
        };
        if let Some(reason) = due {
            metrics.flush(reason);
            failed_at = flush(&mut engine, &mut tables, &control_tx)
                .await
                .err()
                .map(|()| now);
            ready.store(failed_at.is_none(), Ordering::Relaxed);
        }
    };
    ready.store(false, Ordering::Relaxed);
    if result.is_ok() && engine.has_pending() {
        tracing::info!("stopping: committing what was read");
        metrics.flush("stop");
        let last = flush(&mut engine, &mut tables, &control_tx);
        if !matches!(
            tokio::time::timeout(SHUTDOWN_FLUSH_DEADLINE, last).await,
            Ok(Ok(()))
        ) {
            tracing::error!(
                "stopping without committing the last records; they are read again at the next start"
            );
        }
    }
    let _ = control_tx.send(Control::Stop);
    drop(input_rx);
    // Closing the consumer leaves the group, which waits for a broker; with none reachable it
    // would hang. The tables hold the positions, so leaving without closing loses nothing.
    let joined = tokio::time::timeout(
        READER_CLOSE_DEADLINE,
        tokio::task::spawn_blocking(move || reader.join()),
    )
    .await;
    match joined {
        Ok(Ok(Ok(()))) => {}
        Ok(_) => metrics.error("reader", "the kafka consumer thread panicked"),
        Err(_) => tracing::warn!(
            deadline = ?READER_CLOSE_DEADLINE,
            "the kafka consumer did not close in time (brokers unreachable?); exiting without it"
        ),
    }
    tracing::info!("compactor stopped");
    result
}

/// One flush; on success Kafka is told the new positions (a hint) and gaps are re-read.
async fn flush(
    engine: &mut Engine,
    tables: &mut BTreeMap<Table, DeltaTable>,
    control: &std_mpsc::Sender<Control>,
) -> Result<(), ()> {
    match engine.flush(tables).await {
        Ok(report) => {
            if !report.reread.is_empty() {
                let _ = control.send(Control::Seek(report.reread));
            }
            let _ = control.send(Control::CommitOffsets(report.positions));
            Ok(())
        }
        // Counted and logged by the engine.
        Err(_) => Err(()),
    }
}

/// Reads the positions of partitions from their tables, and the ids each stored within the
/// dedupe window (so that the window survives a restart and follows a partition to its new
/// owner), from the consumer thread.
fn position_lookup(root: String, window: Duration) -> source::PositionLookup {
    let handle = tokio::runtime::Handle::current();
    Box::new(move |sources| {
        handle.block_on(async {
            let since = SystemTime::now()
                .checked_sub(window)
                .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
            let mut found = HashMap::new();
            let mut stored: HashMap<Table, Vec<(String, i32, i64, i64)>> = HashMap::new();
            let mut opened: HashMap<Table, DeltaTable> = HashMap::new();
            for &(topic, partition) in sources {
                if let std::collections::hash_map::Entry::Vacant(slot) = opened.entry(topic) {
                    let delta = table::open_or_create(&root, topic)
                        .await
                        .map_err(|err| err.to_string())?;
                    slot.insert(delta);
                }
                let Some(delta) = opened.get(&topic) else {
                    continue;
                };
                let position = table::position(delta, topic, topic, partition)
                    .await
                    .map_err(|err| err.to_string())?;
                if let std::collections::hash_map::Entry::Vacant(slot) = stored.entry(topic) {
                    let ids = table::recent_ids(delta, topic, since)
                        .await
                        .map_err(|err| err.to_string())?;
                    if !ids.is_empty() {
                        tracing::info!(
                            table = topic.name(),
                            ids = ids.len(),
                            "dedupe window restored from the table"
                        );
                    }
                    slot.insert(ids);
                }
                let ids = stored
                    .get(&topic)
                    .into_iter()
                    .flatten()
                    .filter(|id| id.1 == partition)
                    .map(|(id, _, offset, at)| (id.clone(), *offset, *at))
                    .collect();
                found.insert((topic, partition), (position, ids));
            }
            Ok(found)
        })
    })
}

/// Which maintenance jobs to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jobs {
    /// Merge small files of closed partitions.
    pub optimize: bool,
    /// Delete unreferenced files older than the retention.
    pub vacuum: bool,
    /// Drop partitions older than `maintenance.retention_days`.
    pub retention: bool,
}

/// Runs the scheduled maintenance on every table; failures are counted and logged.
pub async fn maintain(config: CompactConfig, metrics: Arc<CompactMetrics>) {
    let jobs = Jobs {
        optimize: true,
        vacuum: true,
        retention: config.maintenance.retention_days.is_some(),
    };
    for table in Table::ALL {
        let _ = maintain_table(&config, table, jobs, &metrics).await;
    }
}

/// Runs `jobs` on one table, returning a line per job for a command's output.
pub async fn maintain_table(
    config: &CompactConfig,
    table: Table,
    jobs: Jobs,
    metrics: &CompactMetrics,
) -> Vec<String> {
    let mut lines = Vec::new();
    let today = rows::day(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
            .unwrap_or(0),
    );
    let mut delta = match table::open_or_create(&config.table_root, table).await {
        Ok(delta) => delta,
        Err(err) => {
            metrics.error("maintenance", &err);
            lines.push(format!("{}: cannot open: {err}", table.name()));
            return lines;
        }
    };
    let name = table.name();
    let target = u64::try_from(config.files.target_bytes.get()).unwrap_or(u64::MAX);
    let planned: [(&str, bool); 3] = [
        ("optimize", jobs.optimize),
        ("retention", jobs.retention),
        ("vacuum", jobs.vacuum),
    ];
    for (job, wanted) in planned {
        if !wanted {
            continue;
        }
        let result = match job {
            "optimize" => {
                let properties = table::writer_properties(table, file_settings(config));
                maintenance::optimize(delta.clone(), today, target, properties).await
            }
            "retention" => match config.maintenance.retention_days {
                Some(days) => maintenance::retention(delta.clone(), today, days).await,
                None => continue,
            },
            _ => maintenance::vacuum(delta.clone(), config.maintenance.vacuum_retention).await,
        };
        match result {
            Ok((updated, report)) => {
                metrics.maintenance(name, job, true);
                tracing::info!(
                    table = name,
                    job,
                    added = report.files_added,
                    removed = report.files_removed,
                    "maintenance done"
                );
                lines.push(format!(
                    "{name}: {job}: {} file(s) added, {} removed",
                    report.files_added, report.files_removed
                ));
                delta = updated;
            }
            Err(err) => {
                metrics.maintenance(name, job, false);
                metrics.error("maintenance", format!("{name} {job}: {err}"));
                lines.push(format!("{name}: {job} failed: {err}"));
            }
        }
    }
    lines
}

/// How the compactor and the optimize job write Parquet files.
fn file_settings(config: &CompactConfig) -> FileSettings {
    FileSettings {
        row_group_rows: config.files.row_group_rows.get(),
        zstd_level: config.files.zstd_level,
    }
}
