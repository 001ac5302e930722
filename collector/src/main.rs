//! `candor-collector`: the pipeline's OTLP ingest service and its Kafka → Delta compactor.
//!
//! ```text
//! candor-collector ingest [--config FILE] [--grpc-addr A] [--http-addr A] [--metrics-addr A]
//!                         [--kafka-brokers B] [--heartbeat-interval D] [--collector-id ID]
//!                         [--log-format text|json] [--check]
//! candor-collector compact [--config FILE] [--table-root DIR|URL] [--kafka-brokers B]
//!                          [--metrics-addr A] [--group-id G] [--max-age D] [--compactor-id ID]
//!                          [--log-format text|json] [--check]
//! candor-collector maintain [--config FILE] [--table-root DIR|URL] [--optimize] [--vacuum]
//!                           [--retention] [--check]
//! candor-collector read --topic T [--kafka-brokers B] [--limit N] [--idle D] [--config FILE]
//!
//! --check validates the configuration as a start would, prints it and exits (0 valid, 2 not).
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, bail};
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use candor_collector::compact;
use candor_collector::compact::config::{CompactConfig, RawCompactConfig};
use candor_collector::compact::metrics::CompactMetrics;
use candor_collector::config::{Config, RawConfig};
use candor_collector::ingest::auth::BearerAuth;
use candor_collector::ingest::extract::Limits;
use candor_collector::ingest::service::{Ingest, unix_nanos};
use candor_collector::ingest::{grpc, http};
use candor_collector::metrics::CollectorMetrics;
use candor_collector::sink::kafka::{Producer, ProducerSettings, encode};
use candor_records::proto::{Heartbeat, RECORD_SCHEMA_VERSION};
use candor_schema::names::topic;
use clap::{Parser, Subcommand, ValueEnum};
use tokio::net::TcpListener;
use tokio::sync::watch;

#[derive(Parser)]
#[command(
    name = "candor-collector",
    version,
    about = "Candor's OTLP ingest service, its Kafka → Delta Lake compactor and their tools"
)]
struct Cli {
    #[command(subcommand)]
    role: Role,
}

#[derive(Subcommand)]
enum Role {
    /// Receive OTLP, validate, produce typed records to Kafka.
    Ingest(IngestArgs),
    /// Consume the topics into Delta Lake tables, exactly once.
    Compact(CompactArgs),
    /// Run table maintenance once: optimize, vacuum, retention (all three when none is named).
    Maintain(MaintainArgs),
    /// Print the records of one of the pipeline's topics as JSON lines, from the beginning.
    Read(ReadArgs),
}

#[derive(Parser)]
struct CompactArgs {
    /// The TOML configuration file (see deploy/compactor.example.toml).
    #[arg(long, env = "CANDOR_COMPACTOR_CONFIG")]
    config: Option<PathBuf>,
    /// Overrides `table_root`.
    #[arg(long, env = "CANDOR_TABLE_ROOT")]
    table_root: Option<String>,
    /// Overrides `kafka.brokers`.
    #[arg(long, env = "CANDOR_COMPACTOR_KAFKA_BROKERS")]
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

#[derive(Parser)]
struct MaintainArgs {
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

#[derive(Parser)]
struct ReadArgs {
    /// The topic, e.g. candor.outcome-events.v1.
    #[arg(long)]
    topic: String,
    /// Bootstrap servers, host:port[,host:port].
    #[arg(
        long,
        env = "CANDOR_COLLECTOR_KAFKA_BROKERS",
        default_value = "127.0.0.1:9092"
    )]
    kafka_brokers: String,
    /// Stop after this many records.
    #[arg(long)]
    limit: Option<usize>,
    /// Stop when no record arrived for this long (e.g. 2s).
    #[arg(long, default_value = "2s")]
    idle: String,
    /// A collector or compactor configuration file whose `[kafka.extra]` and
    /// `[kafka.extra_env]` (TLS, SASL) this reader uses too; its other keys are not used.
    #[arg(long)]
    config: Option<PathBuf>,
}

#[derive(Parser)]
struct IngestArgs {
    /// The TOML configuration file (see deploy/collector.example.toml).
    #[arg(long, env = "CANDOR_COLLECTOR_CONFIG")]
    config: Option<PathBuf>,
    /// Overrides `otlp.grpc_addr`.
    #[arg(long, env = "CANDOR_COLLECTOR_GRPC_ADDR")]
    grpc_addr: Option<String>,
    /// Overrides `otlp.http_addr`.
    #[arg(long, env = "CANDOR_COLLECTOR_HTTP_ADDR")]
    http_addr: Option<String>,
    /// Overrides `metrics.addr`.
    #[arg(long, env = "CANDOR_COLLECTOR_METRICS_ADDR")]
    metrics_addr: Option<String>,
    /// Overrides `kafka.brokers`.
    #[arg(long, env = "CANDOR_COLLECTOR_KAFKA_BROKERS")]
    kafka_brokers: Option<String>,
    /// Overrides `heartbeat.interval`.
    #[arg(long, env = "CANDOR_COLLECTOR_HEARTBEAT_INTERVAL")]
    heartbeat_interval: Option<String>,
    /// Overrides `collector_id`.
    #[arg(long, env = "CANDOR_COLLECTOR_ID")]
    collector_id: Option<String>,
    /// Check the configuration as a start would (file, flags, variables, TLS files), print it
    /// and exit: 0 when it is valid, 2 when not. Connects to nothing.
    #[arg(long)]
    check: bool,
    /// Log format.
    #[arg(long, value_enum, default_value = "text", env = "CANDOR_LOG_FORMAT")]
    log_format: LogFormat,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// The certificate chain and private key of the OTLP listeners, as PEM.
struct TlsMaterial {
    cert: Vec<u8>,
    key: Vec<u8>,
}

/// How long a client is told to wait when the collector cannot hold its data.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How often Kafka's reachability is checked.
const PROBE_INTERVAL: Duration = Duration::from_secs(2);
/// How long shutdown waits for records still in flight.
const FLUSH_DEADLINE: Duration = Duration::from_secs(10);

fn main() -> anyhow::Result<()> {
    // The OTLP listeners use ring; the Delta Lake client brings aws-lc-rs as well, and rustls
    // refuses to pick between two providers on its own.
    if rustls::crypto::ring::default_provider()
        .install_default()
        .is_err()
    {
        bail!("a TLS crypto provider was installed before main");
    }
    let cli = Cli::parse();
    let args = match cli.role {
        Role::Ingest(args) => args,
        Role::Read(args) => return read_topic(&args),
        Role::Compact(args) => return compact(args),
        Role::Maintain(args) => return maintain(&args),
    };
    if args.check {
        return report_check(load_config(&args).and_then(|config| {
            ingest_secrets(&config)?;
            Ok(format!("{config:#?}"))
        }));
    }
    init_logs(args.log_format);
    let config = load_config(&args)?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?
        .block_on(run_ingest(config))
}

/// Our own logs at info; the Delta Lake libraries log every snapshot at info, so theirs start at
/// warn. `RUST_LOG` replaces both.
const DEFAULT_LOG_FILTER: &str = "info,deltalake_core=warn,buoyant_kernel=warn,delta_kernel=warn";

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn load_compact_config(
    path: Option<&PathBuf>,
    edit: impl FnOnce(&mut RawCompactConfig),
) -> anyhow::Result<CompactConfig> {
    let mut raw = match path {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            RawCompactConfig::from_toml_str(&text)
                .with_context(|| format!("in {}", path.display()))?
        }
        None => RawCompactConfig::default(),
    };
    edit(&mut raw);
    Ok(raw.validate()?)
}

/// `kafka.extra` plus the settings of `kafka.extra_env`, read from the environment.
fn kafka_settings(
    extra: &std::collections::BTreeMap<String, String>,
    extra_env: &std::collections::BTreeMap<String, String>,
) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let mut settings = extra.clone();
    for (key, var) in extra_env {
        let value = std::env::var(var)
            .ok()
            .filter(|value| !value.is_empty())
            .with_context(|| {
                format!("kafka.extra_env.{key:?} names {var}, which is unset or empty")
            })?;
        settings.insert(key.clone(), value);
    }
    Ok(settings)
}

/// Ends a `--check`: the configuration as the process would run with it and exit 0, or the
/// reason it would not start and exit 2.
fn report_check(checked: anyhow::Result<String>) -> anyhow::Result<()> {
    match checked {
        Ok(shown) => {
            println!("{shown}");
            println!("configuration OK");
            Ok(())
        }
        Err(err) => {
            eprintln!("configuration refused: {err:#}");
            std::process::exit(2)
        }
    }
}

/// Whether the tables could be opened under `root`, without opening or creating them: an object
/// store URL needs a store this build knows; a local directory need not exist yet.
fn check_table_root(root: &str) -> anyhow::Result<()> {
    let url = match url::Url::parse(root) {
        Ok(url) if url.scheme() != "file" && url.scheme().len() > 1 => url,
        // A path (a one-letter "scheme" is a Windows drive).
        _ => return Ok(()),
    };
    candor_records::stores::register();
    deltalake::DeltaTableBuilder::from_url(url)
        .and_then(deltalake::DeltaTableBuilder::build)
        .with_context(|| format!("table_root {root}: no object store for it in this build"))?;
    Ok(())
}

/// A process's id when the configuration names none: host name and process id.
fn default_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    format!("{}-{}", host.trim(), std::process::id())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
}

/// The compactor's configuration: the file, then the flags and variables over it.
fn compact_config(args: &CompactArgs) -> anyhow::Result<CompactConfig> {
    load_compact_config(args.config.as_ref(), |raw| {
        if let Some(root) = &args.table_root {
            raw.table_root = Some(root.clone());
        }
        if let Some(brokers) = &args.kafka_brokers {
            raw.kafka.brokers = brokers.clone();
        }
        if let Some(addr) = &args.metrics_addr {
            raw.metrics.addr = addr.clone();
        }
        if let Some(group) = &args.group_id {
            raw.kafka.group_id = group.clone();
        }
        if let Some(age) = &args.max_age {
            raw.files.max_age = age.clone();
        }
        if let Some(id) = &args.compactor_id {
            raw.compactor_id = Some(id.clone());
        }
    })
}

/// `candor-collector compact`: the Kafka → Delta Lake role.
fn compact(args: CompactArgs) -> anyhow::Result<()> {
    if args.check {
        return report_check(compact_config(&args).and_then(|config| {
            kafka_settings(&config.kafka.extra, &config.kafka.extra_env)?;
            check_table_root(&config.table_root)?;
            Ok(format!("{config:#?}"))
        }));
    }
    init_logs(args.log_format);
    let config = compact_config(&args)?;
    let kafka_extra = kafka_settings(&config.kafka.extra, &config.kafka.extra_env)?;
    let compactor_id = config.compactor_id.clone().unwrap_or_else(default_id);
    let runtime = runtime()?;
    let result = runtime.block_on(async move {
        let metrics = CompactMetrics::new();
        let ready = Arc::new(AtomicBool::new(false));
        let listener = bind(config.metrics_addr, "metrics.addr").await?;
        let (stop, stopped) = watch::channel(false);
        let router = Router::new()
            .route(
                "/metrics",
                get(
                    |State((m, _)): State<(Arc<CompactMetrics>, Arc<AtomicBool>)>| async move {
                        m.render()
                    },
                ),
            )
            .route("/healthz", get(|| async { "ok" }))
            .route(
                "/readyz",
                get(
                    |State((_, r)): State<(Arc<CompactMetrics>, Arc<AtomicBool>)>| async move {
                        if r.load(Ordering::Relaxed) {
                            (StatusCode::OK, "ready")
                        } else {
                            (
                                StatusCode::SERVICE_UNAVAILABLE,
                                "tables not open, or the last commit failed",
                            )
                        }
                    },
                ),
            )
            .with_state((metrics.clone(), ready.clone()));
        let server = tokio::spawn({
            let stopped = stopped.clone();
            async move {
                axum::serve(listener, router)
                    .with_graceful_shutdown(wait(stopped))
                    .await
            }
        });
        tracing::info!(metrics = %config.metrics_addr, "compactor metrics listening");
        let mut run = tokio::spawn(compact::run(
            config,
            compact::RunContext {
                compactor_id,
                kafka_extra,
                metrics,
                ready,
                stop: stopped,
            },
        ));
        let result = tokio::select! {
            result = &mut run => result,
            () = shutdown_signal() => {
                tracing::info!("shutting down: committing what was read");
                let _ = stop.send(true);
                run.await
            }
        };
        let _ = stop.send(true);
        let _ = server.await;
        result.context("compactor task")?.context("compactor")
    });
    // A consumer that could not close (no broker) is left behind, not waited for.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// `candor-collector maintain`: one maintenance run over every table.
fn maintain(args: &MaintainArgs) -> anyhow::Result<()> {
    let config = load_compact_config(args.config.as_ref(), |raw| {
        if let Some(root) = &args.table_root {
            raw.table_root = Some(root.clone());
        }
    });
    if args.check {
        return report_check(config.and_then(|config| {
            check_table_root(&config.table_root)?;
            Ok(format!("{config:#?}"))
        }));
    }
    init_logs(LogFormat::Text);
    let config = config?;
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
    let metrics = CompactMetrics::new();
    let lines = runtime()?.block_on(async {
        let mut lines = Vec::new();
        for table in candor_records::tables::Table::ALL {
            lines.extend(compact::maintain_table(&config, table, jobs, &metrics).await);
        }
        lines
    });
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

fn load_config(args: &IngestArgs) -> anyhow::Result<Config> {
    let mut raw = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            RawConfig::from_toml_str(&text).with_context(|| format!("in {}", path.display()))?
        }
        None => RawConfig::default(),
    };
    if let Some(addr) = &args.grpc_addr {
        raw.otlp.grpc_addr = addr.clone();
    }
    if let Some(addr) = &args.http_addr {
        raw.otlp.http_addr = addr.clone();
    }
    if let Some(addr) = &args.metrics_addr {
        raw.metrics.addr = addr.clone();
    }
    if let Some(brokers) = &args.kafka_brokers {
        raw.kafka.brokers = brokers.clone();
    }
    if let Some(interval) = &args.heartbeat_interval {
        raw.heartbeat.interval = interval.clone();
    }
    if let Some(id) = &args.collector_id {
        raw.collector_id = Some(id.clone());
    }
    Ok(raw.validate()?)
}

/// The Kafka client settings of a collector's or a compactor's configuration file, validated as
/// that service validates them, with the values of `[kafka.extra_env]` read.
fn read_kafka_settings(
    path: &PathBuf,
) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let (extra, extra_env) = match RawConfig::from_toml_str(&text).and_then(RawConfig::validate) {
        Ok(config) => (config.kafka.extra, config.kafka.extra_env),
        Err(as_collector) => {
            match RawCompactConfig::from_toml_str(&text).and_then(RawCompactConfig::validate) {
                Ok(config) => (config.kafka.extra, config.kafka.extra_env),
                Err(as_compactor) => bail!(
                    "{} is neither a collector's configuration ({as_collector}) nor a compactor's \
                 ({as_compactor})",
                    path.display()
                ),
            }
        }
    };
    kafka_settings(&extra, &extra_env)
}

/// `candor-collector read`: every record of a topic, decoded, one JSON object per line. A
/// record that cannot be decoded is printed as an error line, never skipped.
fn read_topic(args: &ReadArgs) -> anyhow::Result<()> {
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    use rdkafka::message::Message as _;
    use std::io::Write as _;

    let topic = candor_collector::inspect::known_topic(&args.topic)?;
    let idle = candor_collector::config::parse_duration("--idle", &args.idle)?;
    let mut client = rdkafka::ClientConfig::new();
    if let Some(path) = &args.config {
        for (name, value) in read_kafka_settings(path)? {
            client.set(name, value);
        }
    }
    let consumer: BaseConsumer = client
        .set("bootstrap.servers", &args.kafka_brokers)
        .set("group.id", "candor-read")
        .set("enable.auto.commit", "false")
        .create()
        .context("creating a Kafka consumer")?;
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .with_context(|| {
            format!(
                "reading the metadata of {topic} from {}",
                args.kafka_brokers
            )
        })?;
    let mut assignment = rdkafka::TopicPartitionList::new();
    for partition in metadata.topics().iter().flat_map(|t| t.partitions()) {
        assignment.add_partition_offset(topic, partition.id(), rdkafka::Offset::Beginning)?;
    }
    if assignment.count() == 0 {
        bail!("topic {topic} has no partitions on {}", args.kafka_brokers);
    }
    consumer.assign(&assignment)?;
    let mut out = std::io::stdout().lock();
    let (mut printed, mut undecodable) = (0usize, 0usize);
    let mut last = std::time::Instant::now();
    while args.limit.is_none_or(|limit| printed < limit) && last.elapsed() < idle {
        let Some(message) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let message = message.context("reading a record")?;
        last = std::time::Instant::now();
        // A record with no payload is not an empty record: it is shown as an error.
        let decoded = match message.payload() {
            Some(payload) => candor_collector::inspect::to_json(topic, payload),
            None => Err(candor_collector::inspect::InspectError::Undecodable(
                "the record has no payload".into(),
            )),
        };
        let line = match decoded {
            Ok(record) => record,
            Err(err) => {
                undecodable += 1;
                serde_json::json!({ "error": err.to_string() })
            }
        };
        let line = serde_json::json!({ "partition": message.partition(), "offset": message.offset(), "record": line });
        writeln!(out, "{line}")?;
        printed += 1;
    }
    eprintln!("{printed} record(s) from {topic}; {undecodable} undecodable");
    Ok(())
}

async fn bind(addr: SocketAddr, key: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} ({key}); is the port taken?"))
}

/// What a start reads besides the configuration: the TLS files, the bearer token and the Kafka
/// settings whose values are in environment variables.
struct IngestSecrets {
    tls: Option<TlsMaterial>,
    token: Option<String>,
    kafka_extra: std::collections::BTreeMap<String, String>,
}

fn ingest_secrets(config: &Config) -> anyhow::Result<IngestSecrets> {
    let tls = match &config.otlp.tls {
        Some(tls) => Some(TlsMaterial {
            cert: std::fs::read(&tls.cert_path).with_context(|| {
                format!("reading otlp.tls_cert_path {}", tls.cert_path.display())
            })?,
            key: std::fs::read(&tls.key_path)
                .with_context(|| format!("reading otlp.tls_key_path {}", tls.key_path.display()))?,
        }),
        None => None,
    };
    let token = match &config.otlp.auth_token_env {
        Some(var) => Some(
            std::env::var(var)
                .with_context(|| format!("otlp.auth_token_env names {var}, which is not set"))?,
        ),
        None => None,
    };
    if token
        .as_deref()
        .is_some_and(|token| token.trim().is_empty())
    {
        bail!(
            "otlp.auth_token_env names a variable that is empty; an empty token would let anyone in"
        );
    }
    let kafka_extra = kafka_settings(&config.kafka.extra, &config.kafka.extra_env)?;
    Ok(IngestSecrets {
        tls,
        token,
        kafka_extra,
    })
}

async fn run_ingest(config: Config) -> anyhow::Result<()> {
    let IngestSecrets {
        tls,
        token,
        kafka_extra: extra,
    } = ingest_secrets(&config)?;
    let collector_id = config.collector_id.clone().unwrap_or_else(default_id);
    let metrics = CollectorMetrics::new();
    let producer = Arc::new(Producer::new(
        ProducerSettings {
            bootstrap_servers: config.kafka_bootstrap_servers(),
            delivery_timeout: config.kafka.delivery_timeout,
            queue_max_messages: config.kafka.queue_max_messages.get() as usize,
            compression: config.kafka.compression.as_str().to_owned(),
            compression_level: config.kafka.compression_level,
            client_id: format!("candor-collector-{collector_id}"),
            extra,
        },
        metrics.clone(),
    )?);
    let limits = Limits {
        max_value_bytes: config.limits.max_value_bytes.get(),
        max_attributes_per_event: config.limits.max_attributes_per_event.get(),
        max_events_per_request: config.limits.max_events_per_request.get(),
        max_rejected_copy_bytes: config.limits.max_rejected_copy_bytes.get(),
    };
    let ingest = Arc::new(Ingest::new(
        producer.clone(),
        metrics.clone(),
        limits,
        collector_id.clone(),
        RETRY_AFTER,
        config.otlp.max_in_flight_requests.get(),
    ));
    let max_request_bytes = config.otlp.max_request_bytes.get();
    let auth = BearerAuth::new(token);

    let grpc_listener = bind(config.otlp.grpc_addr, "otlp.grpc_addr").await?;
    let http_listener = bind(config.otlp.http_addr, "otlp.http_addr").await?;
    let metrics_listener = bind(config.metrics.addr, "metrics.addr").await?;
    let (stop, stopped) = watch::channel(false);
    let ready = Arc::new(AtomicBool::new(false));

    let (traces, metrics_service) = grpc::services(ingest.clone(), auth.clone(), max_request_bytes);
    let mut grpc_builder = tonic::transport::Server::builder();
    if let Some(tls) = &tls {
        let identity = tonic::transport::Identity::from_pem(&tls.cert, &tls.key);
        grpc_builder = grpc_builder
            .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
            .context("otlp TLS for gRPC")?;
    }
    let grpc_server = tokio::spawn({
        let stopped = stopped.clone();
        async move {
            grpc_builder
                .add_service(traces)
                .add_service(metrics_service)
                .serve_with_incoming_shutdown(
                    tonic::transport::server::TcpIncoming::from(grpc_listener),
                    wait(stopped),
                )
                .await
        }
    });
    let router = http::router(ingest.clone(), auth, max_request_bytes);
    let http_server = match &tls {
        None => {
            let stopped = stopped.clone();
            tokio::spawn(async move {
                axum::serve(http_listener, router)
                    .with_graceful_shutdown(wait(stopped))
                    .await
            })
        }
        Some(tls) => {
            let rustls =
                axum_server::tls_rustls::RustlsConfig::from_pem(tls.cert.clone(), tls.key.clone())
                    .await
                    .context("otlp TLS for HTTP")?;
            let handle = axum_server::Handle::new();
            tokio::spawn({
                let (handle, stopped) = (handle.clone(), stopped.clone());
                async move {
                    wait(stopped).await;
                    handle.graceful_shutdown(Some(FLUSH_DEADLINE));
                }
            });
            let listener = http_listener.into_std().context("the OTLP/HTTP listener")?;
            let server = axum_server::from_tcp_rustls(listener, rustls)
                .context("the OTLP/HTTP listener")?
                .handle(handle);
            tokio::spawn(async move { server.serve(router.into_make_service()).await })
        }
    };
    let metrics_server = tokio::spawn({
        let router = Router::new()
            .route("/metrics", get(render_metrics))
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(readyz))
            .with_state((metrics.clone(), ready.clone()));
        let stopped = stopped.clone();
        async move {
            axum::serve(metrics_listener, router)
                .with_graceful_shutdown(wait(stopped))
                .await
        }
    });
    tokio::spawn(watch_kafka(
        producer.clone(),
        metrics.clone(),
        ready.clone(),
        config.kafka.create_topics,
        config.kafka.partitions.get(),
        config.kafka.replication_factor.get(),
    ));
    let started = unix_nanos(SystemTime::now());
    tokio::spawn(heartbeats(
        ingest.clone(),
        started,
        config.heartbeat.interval,
        stopped.clone(),
    ));

    tracing::info!(
        collector_id = %collector_id,
        grpc = %config.otlp.grpc_addr,
        http = %config.otlp.http_addr,
        metrics = %config.metrics.addr,
        kafka = %config.kafka_bootstrap_servers(),
        "collector listening"
    );
    shutdown_signal().await;
    tracing::info!("shutting down: no new requests; flushing what is in flight");
    let _ = stop.send(true);
    let servers = async { tokio::join!(grpc_server, http_server, metrics_server) };
    let Ok((grpc_result, http_result, metrics_result)) =
        tokio::time::timeout(FLUSH_DEADLINE, servers).await
    else {
        tracing::error!(
            deadline = ?FLUSH_DEADLINE,
            "requests still open at the shutdown deadline; their clients get no answer"
        );
        let undelivered = tokio::task::spawn_blocking(move || producer.flush(FLUSH_DEADLINE))
            .await
            .context("flushing")?;
        tracing::error!(undelivered, "stopped with requests still open");
        return Ok(());
    };
    grpc_result
        .context("gRPC server task")?
        .context("gRPC server")?;
    http_result
        .context("HTTP server task")?
        .context("HTTP server")?;
    metrics_result
        .context("metrics server task")?
        .context("metrics server")?;
    // The last interval's counts, now that no request is open.
    send_heartbeat(&ingest, started, config.heartbeat.interval).await;
    let undelivered = tokio::task::spawn_blocking(move || producer.flush(FLUSH_DEADLINE))
        .await
        .context("flushing")?;
    if undelivered > 0 {
        tracing::error!(
            undelivered,
            "records still undelivered at shutdown; their requests were not acknowledged"
        );
    } else {
        tracing::info!("all records delivered; stopped");
    }
    Ok(())
}

async fn wait(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(
            tokio::signal::unix::SignalKind::terminate(),
        ) {
            Ok(signal) => signal,
            Err(err) => {
                tracing::error!(error = %err, "cannot listen for SIGTERM; only Ctrl-C stops the collector");
                let _ = interrupt.await;
                return;
            }
        };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

async fn render_metrics(
    State((metrics, _)): State<(Arc<CollectorMetrics>, Arc<AtomicBool>)>,
) -> String {
    metrics.render()
}

async fn readyz(
    State((_, ready)): State<(Arc<CollectorMetrics>, Arc<AtomicBool>)>,
) -> (StatusCode, &'static str) {
    if ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "kafka unreachable or topics not created",
        )
    }
}

/// Checks Kafka every few seconds: readiness, the reachability gauge, topic creation.
async fn watch_kafka(
    producer: Arc<Producer>,
    metrics: Arc<CollectorMetrics>,
    ready: Arc<AtomicBool>,
    create_topics: bool,
    partitions: u32,
    replication: u32,
) {
    const TOPICS: [&str; 4] = [
        topic::OUTCOME_EVENTS,
        topic::OUTCOME_COUNTS,
        topic::REJECTED,
        topic::HEARTBEATS,
    ];
    let mut announced = false;
    loop {
        let probe = producer.clone();
        let known = tokio::task::spawn_blocking(move || probe.probe(PROBE_INTERVAL))
            .await
            .map_err(|err| err.to_string())
            .and_then(|result| result);
        metrics.set_kafka_reachable(known.is_ok());
        metrics.set_producer_queue_depth(i64::from(producer.queue_depth()));
        // Checked on every probe: a topic deleted later makes the collector not ready again.
        let missing: Vec<&str> = match &known {
            Ok(names) => TOPICS
                .into_iter()
                .filter(|t| !names.iter().any(|n| n == t))
                .collect(),
            Err(_) => Vec::new(),
        };
        let mut topics_ready = known.is_ok() && missing.is_empty();
        if known.is_ok() && !missing.is_empty() {
            if create_topics {
                let partitions = i32::try_from(partitions).unwrap_or(i32::MAX);
                let replication = i32::try_from(replication).unwrap_or(i32::MAX);
                match producer
                    .ensure_topics(&missing, partitions, replication)
                    .await
                {
                    Ok(()) => topics_ready = true,
                    Err(err) => tracing::warn!(error = %err, "creating topics failed; retrying"),
                }
            } else {
                tracing::warn!(
                    ?missing,
                    "topics missing and kafka.create_topics is off; not ready"
                );
            }
        }
        if topics_ready && !announced {
            tracing::info!(topics = ?TOPICS, "topics ready");
            announced = true;
        }
        let reachable = known;
        let fatal = producer.fatal_error();
        if let Some(error) = &fatal {
            // Not ready, and loudly so: requests are answered 503 until the next failed record
            // replaces the producer (`Producer` renews itself after any failure).
            metrics.set_kafka_reachable(false);
            tracing::error!(error = %error, "the Kafka producer failed fatally; it is replaced at the next failed record");
        }
        ready.store(
            reachable.is_ok() && topics_ready && fatal.is_none(),
            Ordering::Relaxed,
        );
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}

/// Writes a heartbeat every `interval` so downstream can tell "no failures" from "no pipeline".
async fn heartbeats(
    ingest: Arc<Ingest>,
    started: u64,
    interval: Duration,
    mut stopped: watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stopped.wait_for(|stop| *stop) => return,
        }
        send_heartbeat(&ingest, started, interval).await;
    }
}

/// Sends one heartbeat with the counts since the last one; on failure the counts go back, so
/// that the next heartbeat still reports them.
async fn send_heartbeat(ingest: &Ingest, started: u64, interval: Duration) {
    let counts = ingest.since_heartbeat();
    let heartbeat = Heartbeat {
        schema_version: RECORD_SCHEMA_VERSION,
        collector_id: ingest.collector_id().to_owned(),
        time_unix_nano: unix_nanos(SystemTime::now()),
        started_time_unix_nano: started,
        interval_ms: u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
        accepted_events: counts.accepted_events.swap(0, Ordering::Relaxed),
        accepted_counts: counts.accepted_counts.swap(0, Ordering::Relaxed),
        rejected: counts.rejected.swap(0, Ordering::Relaxed),
    };
    match ingest
        .producer()
        .deliver(&[encode::heartbeat(&heartbeat)])
        .await
    {
        Ok(()) => ingest.metrics().heartbeat_sent(),
        Err(err) => {
            counts
                .accepted_events
                .fetch_add(heartbeat.accepted_events, Ordering::Relaxed);
            counts
                .accepted_counts
                .fetch_add(heartbeat.accepted_counts, Ordering::Relaxed);
            counts
                .rejected
                .fetch_add(heartbeat.rejected, Ordering::Relaxed);
            ingest.metrics().heartbeat_failed(&err);
        }
    }
}
