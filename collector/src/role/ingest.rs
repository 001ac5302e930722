//! `candor-collector ingest`: receive OTLP (gRPC and HTTP), validate, produce typed records to
//! Kafka and answer only after delivery (`candor_collector::ingest`); `/metrics`, `/healthz` and
//! `/readyz` on `metrics.addr`; the Kafka watch behind `/readyz`; heartbeats; on shutdown, no new
//! requests and a flush of what is in flight.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, bail};
use candor_collector::ingest::auth::BearerAuth;
use candor_collector::ingest::config::{Config, RawConfig};
use candor_collector::ingest::extract::Limits;
use candor_collector::ingest::extract::derived::Derivation;
use candor_collector::ingest::metrics::CollectorMetrics;
use candor_collector::ingest::senders::Senders;
use candor_collector::ingest::service::{Delivered, Ingest, unix_nanos};
use candor_collector::ingest::{grpc, http};
use candor_collector::sink::kafka::spool::{Spool, drain};
use candor_collector::sink::kafka::{Producer, ProducerSettings, encode};
use candor_records::proto::{Heartbeat, RECORD_SCHEMA_VERSION};
use candor_service::LogFormat;
use candor_service::config::report_check;
use candor_service::ops::{self, Readiness};
use clap::Parser;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::{bind, default_id, runtime, wait};

/// The flags and variables of `ingest`.
#[derive(Parser)]
pub struct IngestArgs {
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
    #[arg(
        long = "kafka",
        alias = "kafka-brokers",
        env = "CANDOR_COLLECTOR_KAFKA_BROKERS"
    )]
    kafka_brokers: Option<String>,
    /// Overrides `heartbeat.interval`.
    #[arg(long, env = "CANDOR_COLLECTOR_HEARTBEAT_INTERVAL")]
    heartbeat_interval: Option<String>,
    /// Overrides `collector_id`.
    #[arg(long, env = "CANDOR_COLLECTOR_ID")]
    collector_id: Option<String>,
    /// Overrides `spool.dir`: keep what Kafka cannot take yet in this directory.
    #[arg(long, env = "CANDOR_COLLECTOR_SPOOL_DIR")]
    spool_dir: Option<String>,
    /// Check the configuration as a start would (file, flags, variables, TLS files), print it
    /// and exit: 0 when it is valid, 2 when not. Connects to nothing.
    #[arg(long)]
    check: bool,
    /// Log format.
    #[arg(long, value_enum, default_value = "text", env = "CANDOR_LOG_FORMAT")]
    log_format: LogFormat,
}

/// How long a client is told to wait when the collector cannot hold its data.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How often Kafka's reachability is checked.
const PROBE_INTERVAL: Duration = Duration::from_secs(2);
/// How long shutdown waits for records still in flight.
const FLUSH_DEADLINE: Duration = Duration::from_secs(10);
/// What `/readyz` says while the collector cannot deliver.
const NOT_READY: &str = "kafka unreachable or topics not created";

/// `candor-collector ingest`: validate → build → run.
pub fn main(args: &IngestArgs) -> anyhow::Result<()> {
    if args.check {
        report_check(validate(args).and_then(|config| {
            secrets(&config)?;
            Ok(format!("{config:#?}"))
        }));
        return Ok(());
    }
    candor_service::init_logs(args.log_format)?;
    let config = validate(args)?;
    runtime()?.block_on(async { build(config).await?.run().await })
}

/// The collector's configuration: the file, then the flags and variables over it.
fn validate(args: &IngestArgs) -> anyhow::Result<Config> {
    let mut raw =
        candor_service::config::load_or_default(args.config.as_deref(), RawConfig::from_toml_str)?;
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
        raw.kafka.brokers = Some(brokers.clone());
    }
    if let Some(interval) = &args.heartbeat_interval {
        raw.heartbeat.interval = interval.clone();
    }
    if let Some(id) = &args.collector_id {
        raw.collector_id = Some(id.clone());
    }
    if let Some(dir) = &args.spool_dir {
        raw.spool.dir = Some(dir.clone());
    }
    Ok(raw.validate()?)
}

/// The certificate chain and private key of the OTLP listeners, as PEM.
struct TlsMaterial {
    cert: Vec<u8>,
    key: Vec<u8>,
}

/// What a start reads besides the configuration: the TLS files, the bearer token and the Kafka
/// settings whose values are in environment variables.
struct Secrets {
    tls: Option<TlsMaterial>,
    token: Option<String>,
    kafka_extra: candor_kafka::ClientSettings,
}

fn secrets(config: &Config) -> anyhow::Result<Secrets> {
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
    let kafka_extra = config.kafka.extra.resolve()?;
    Ok(Secrets {
        tls,
        token,
        kafka_extra,
    })
}

/// An ingest role ready to serve: its producer made, its listeners bound, TLS loaded.
struct Collector {
    config: Config,
    collector_id: String,
    metrics: Arc<CollectorMetrics>,
    producer: Arc<Producer>,
    ingest: Arc<Ingest>,
    auth: BearerAuth,
    grpc: tonic::transport::Server,
    grpc_listener: TcpListener,
    /// The OTLP/HTTP listener's TLS, when configured.
    http_tls: Option<axum_server::tls_rustls::RustlsConfig>,
    http_listener: TcpListener,
    metrics_listener: TcpListener,
}

/// Reads the secrets, makes the producer and binds the three listeners.
async fn build(config: Config) -> anyhow::Result<Collector> {
    let Secrets {
        tls,
        token,
        kafka_extra: extra,
    } = secrets(&config)?;
    let collector_id = config.collector_id.clone().unwrap_or_else(default_id);
    let metrics = CollectorMetrics::new();
    let producer = Arc::new(Producer::new(
        ProducerSettings {
            bootstrap_servers: config.kafka_bootstrap_servers(),
            delivery_timeout: config.kafka.delivery_timeout,
            queue_max_messages: config.kafka.queue_max_messages.get() as usize,
            compression: config.kafka.compression,
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
    let mut ingest = Ingest::new(
        producer.clone(),
        metrics.clone(),
        limits,
        collector_id.clone(),
        RETRY_AFTER,
        config.otlp.max_in_flight_requests.get(),
    )
    .with_derivation(Derivation::new(config.derived.clone()))
    .with_senders(Senders::new(
        config.heartbeat.interval,
        config.heartbeat.max_sender_intervals.get(),
    ));
    if let Some(settings) = &config.spool {
        let spool = Spool::open(settings).context("spool.dir")?;
        let level = spool.level();
        tracing::info!(
            path = spool.path(),
            records = level.records,
            bytes = level.bytes,
            "spool open; what it holds is drained to Kafka"
        );
        ingest = ingest.with_spool(spool);
    }
    let ingest = Arc::new(ingest);
    let auth = BearerAuth::new(token);

    let grpc_listener = bind(config.otlp.grpc_addr, "otlp.grpc_addr").await?;
    let http_listener = bind(config.otlp.http_addr, "otlp.http_addr").await?;
    let metrics_listener = bind(config.metrics.addr, "metrics.addr").await?;
    let mut grpc = tonic::transport::Server::builder();
    let mut http_tls = None;
    if let Some(tls) = &tls {
        let identity = tonic::transport::Identity::from_pem(&tls.cert, &tls.key);
        grpc = grpc
            .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
            .context("otlp TLS for gRPC")?;
        http_tls = Some(
            axum_server::tls_rustls::RustlsConfig::from_pem(tls.cert.clone(), tls.key.clone())
                .await
                .context("otlp TLS for HTTP")?,
        );
    }
    Ok(Collector {
        config,
        collector_id,
        metrics,
        producer,
        ingest,
        auth,
        grpc,
        grpc_listener,
        http_tls,
        http_listener,
        metrics_listener,
    })
}

impl Collector {
    /// Serves both OTLP receivers and the operational endpoints, watches Kafka and sends
    /// heartbeats until the shutdown signal; then takes no new request, waits for the open ones
    /// (at most [`FLUSH_DEADLINE`]), sends the last heartbeat and flushes the producer.
    async fn run(self) -> anyhow::Result<()> {
        let Collector {
            config,
            collector_id,
            metrics,
            producer,
            ingest,
            auth,
            mut grpc,
            grpc_listener,
            http_tls,
            http_listener,
            metrics_listener,
        } = self;
        let (stop, stopped) = watch::channel(false);
        let ready = Arc::new(AtomicBool::new(false));
        let max_request_bytes = config.otlp.max_request_bytes.get();

        let (traces, metrics_service, logs) =
            grpc::services(ingest.clone(), auth.clone(), max_request_bytes);
        let grpc_server = tokio::spawn({
            let stopped = stopped.clone();
            async move {
                grpc.add_service(traces)
                    .add_service(metrics_service)
                    .add_service(logs)
                    .serve_with_incoming_shutdown(
                        tonic::transport::server::TcpIncoming::from(grpc_listener),
                        wait(stopped),
                    )
                    .await
            }
        });
        let router = http::router(ingest.clone(), auth, max_request_bytes);
        let http_server = match http_tls {
            None => {
                let stopped = stopped.clone();
                tokio::spawn(async move {
                    axum::serve(http_listener, router)
                        .with_graceful_shutdown(wait(stopped))
                        .await
                })
            }
            Some(rustls) => {
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
            let router = ops::router(
                {
                    let metrics = metrics.clone();
                    move || metrics.render()
                },
                {
                    let ready = ready.clone();
                    move || Readiness::of_flag(&ready, NOT_READY)
                },
            );
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
        if let Some(spool) = ingest.spool().cloned() {
            let (producer, metrics) = (producer.clone(), metrics.clone());
            let retry_after = ingest.retry_after();
            tokio::spawn(async move { drain(&spool, &producer, &metrics, retry_after).await });
        }
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
        candor_service::shutdown_signal().await;
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
    use candor_records::tables::TOPICS;
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

/// Sends one heartbeat with the counts since the last one, and the senders' heartbeats of
/// what was heard since; on failure the counts and the senders go back, so that the next
/// heartbeat still reports them.
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
        ..Heartbeat::default()
    };
    let senders = ingest.senders().take(ingest.collector_id(), started);
    let sent = senders.len() as u64;
    let records: Vec<_> = std::iter::once(&heartbeat)
        .chain(&senders)
        .map(encode::heartbeat)
        .collect();
    match ingest.deliver_heartbeats(&records).await {
        Ok(Delivered::Kafka) => ingest.metrics().heartbeat_sent(sent),
        Ok(Delivered::Spooled) => ingest.metrics().heartbeat_spooled(sent),
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
            let dropped = ingest.senders().restore(senders);
            ingest.metrics().sender_intervals_dropped(dropped);
            ingest.metrics().heartbeat_failed(&err.message);
        }
    }
}
