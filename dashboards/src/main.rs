//! `candor-dashboards`: the web UI, the alert rules and `/metrics`, as their own process.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, bail};
use candor_adapter::otlp::{OtlpConfig, init};
use candor_dashboards::forensic::ForensicSettings;
use candor_dashboards::model::{Model, ModelSettings};
use candor_dashboards::notify::{Notifier, Webhook};
use candor_dashboards::reconcile::{self, ReconcileSettings, Schedule};
use candor_dashboards::rules::{self, DEFAULT_RULES, Limits};
use candor_dashboards::state::{PipelineInputs, Shared, Staleness};
use candor_dashboards::stream::StreamSettings;
use candor_dashboards::web::App;
use candor_dashboards::{engine, stream, watch, web};
use candor_query::kafka_client::KafkaClientSettings;
use candor_query::store::TableRoot;
use candor_query::window::{Micros, micros_of, now};
use candor_service::LogFormat;
use clap::{Parser, Subcommand};

/// Candor's dashboards and alerting: a separate stack over the outcome stream.
#[derive(Debug, Parser)]
#[command(name = "candor-dashboards", version)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validates a rules file and prints the rules it holds.
    CheckRules {
        /// The rules file (TOML).
        file: PathBuf,
    },
    /// Renders a rules file for another engine: as a Prometheus rules file (recording rules and
    /// alerts) with --prometheus.
    ExportRules {
        /// Render a Prometheus rules file (the one form so far).
        #[arg(long, required = true)]
        prometheus: bool,
        /// The rules file (TOML); the shipped rules without it.
        file: Option<PathBuf>,
        /// Write the rendering here instead of to stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Where the web UI, the API and /metrics listen.
    #[arg(
        long,
        env = "CANDOR_DASHBOARDS_LISTEN",
        default_value = "127.0.0.1:3000"
    )]
    listen: SocketAddr,
    /// Kafka bootstrap brokers.
    #[arg(long, env = "CANDOR_KAFKA", default_value = "127.0.0.1:9092")]
    kafka: String,
    /// A TOML file of extra Kafka client settings ([kafka.extra], [kafka.extra_env]: TLS, SASL).
    #[arg(long, env = "CANDOR_KAFKA_CONFIG")]
    kafka_config: Option<PathBuf>,
    /// The consumer group the dashboards commit their offsets under (never the compactor's).
    #[arg(
        long,
        env = "CANDOR_DASHBOARDS_GROUP",
        default_value = "candor-dashboards"
    )]
    group: String,
    /// The tables' root (a directory or an object store URL), read-only.
    #[arg(long, env = "CANDOR_TABLES", default_value = "data/tables")]
    tables: String,
    /// The alert rules file (TOML); the shipped rules without it.
    #[arg(long, env = "CANDOR_DASHBOARDS_RULES")]
    rules: Option<PathBuf>,
    /// A webhook that receives alerts (Alertmanager API v2 format); repeat for several.
    #[arg(
        long = "webhook",
        env = "CANDOR_DASHBOARDS_WEBHOOKS",
        value_delimiter = ','
    )]
    webhooks: Vec<String>,
    /// Attempts per notification, retries included.
    #[arg(long, default_value_t = 3)]
    webhook_attempts: u32,
    /// Time per notification attempt.
    #[arg(long, default_value = "5s", value_parser = candor_schema::duration::parse)]
    webhook_timeout: Duration,
    /// How often a firing alert is sent again.
    #[arg(long, default_value = "1m", value_parser = candor_schema::duration::parse)]
    resend: Duration,
    /// How far back the panels keep data.
    #[arg(long, default_value = "6h", value_parser = candor_schema::duration::parse)]
    history: Duration,
    /// The panels' bucket width.
    #[arg(long, default_value = "1m", value_parser = candor_schema::duration::parse)]
    step: Duration,
    /// How long after a record a copy with its id is a client's retried copy, counted once: the
    /// compactor's `dedupe.window`.
    #[arg(
        long,
        env = "CANDOR_DEDUPE_WINDOW",
        default_value = candor_records::ids::DEDUPE_WINDOW_TEXT,
        value_parser = candor_schema::duration::parse_positive
    )]
    dedupe_window: Duration,
    /// How often the rules are evaluated.
    #[arg(long, default_value = "10s", value_parser = candor_schema::duration::parse)]
    evaluate_every: Duration,
    /// How often the tables' logs are read.
    #[arg(long, default_value = "15s", value_parser = candor_schema::duration::parse)]
    table_poll: Duration,
    /// The collector hop is STALE after this long without a heartbeat (at least three of the
    /// heartbeats' own interval).
    #[arg(long, default_value = "30s", value_parser = candor_schema::duration::parse)]
    collector_stale_after: Duration,
    /// The Kafka hop is STALE after this long without contact.
    #[arg(long, default_value = "30s", value_parser = candor_schema::duration::parse)]
    kafka_stale_after: Duration,
    /// The table hop is STALE after this long without the watermark moving.
    #[arg(long, default_value = "5m", value_parser = candor_schema::duration::parse)]
    table_stale_after: Duration,
    /// How often the adapter's counter is reconciled against the stored failure events.
    #[arg(
        long,
        env = "CANDOR_DASHBOARDS_RECONCILE_EVERY",
        default_value = "1m",
        value_parser = candor_schema::duration::parse
    )]
    reconcile_every: Duration,
    /// How far back each reconciliation reaches.
    #[arg(
        long,
        env = "CANDOR_DASHBOARDS_RECONCILE_RANGE",
        default_value = "1h",
        value_parser = candor_schema::duration::parse
    )]
    reconcile_range: Duration,
    /// How recent a counter point may be and still be left to a later reconciliation, while the
    /// events of its calls may still be on their way.
    #[arg(
        long,
        env = "CANDOR_DASHBOARDS_RECONCILE_SETTLE",
        default_value = "2m",
        value_parser = candor_schema::duration::parse
    )]
    reconcile_settle: Duration,
    /// The dashboards' own address, for links in notifications.
    #[arg(long, env = "CANDOR_DASHBOARDS_URL")]
    external_url: Option<String>,
    /// Export the adapter's telemetry (notification outcomes) over OTLP/gRPC to this endpoint.
    #[arg(long, env = "CANDOR_DASHBOARDS_OTLP")]
    otlp_endpoint: Option<String>,
    /// Log format.
    #[arg(long, value_enum, default_value = "text", env = "CANDOR_LOG_FORMAT")]
    log_format: LogFormat,
}

fn micros(duration: Duration) -> Micros {
    micros_of(duration)
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let limits = |args: &ServeArgs| Limits {
        step: micros(args.step),
        history: micros(args.history),
    };
    if let Some(Command::CheckRules { file }) = &cli.command {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("reading the rules file {}", file.display()))?;
        let rules = rules::parse(&text, limits(&cli.serve))?;
        for rule in &rules {
            println!("{}", serde_json::to_string(rule)?);
        }
        eprintln!("{}: {} rule(s), valid", file.display(), rules.len());
        return Ok(());
    }
    if let Some(Command::ExportRules { file, output, .. }) = &cli.command {
        return export_rules(file.as_deref(), output.as_deref(), limits(&cli.serve));
    }
    candor_service::init_logs(cli.serve.log_format)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(serve(cli.serve, limits))
}

/// `export-rules --prometheus`: the rules (validated as at start) as a Prometheus rules file.
fn export_rules(
    file: Option<&std::path::Path>,
    output: Option<&std::path::Path>,
    limits: Limits,
) -> anyhow::Result<()> {
    let text = match file {
        Some(file) => std::fs::read_to_string(file)
            .with_context(|| format!("reading the rules file {}", file.display()))?,
        None => DEFAULT_RULES.to_owned(),
    };
    let rules = rules::parse(&text, limits)?;
    let rendered = rules::prometheus::prometheus_rules(&rules);
    match output {
        Some(path) => {
            std::fs::write(path, rendered).with_context(|| format!("writing {}", path.display()))?
        }
        None => print!("{rendered}"),
    }
    Ok(())
}

async fn serve(args: ServeArgs, limits: impl Fn(&ServeArgs) -> Limits) -> anyhow::Result<()> {
    if args.step.is_zero() || args.history < args.step {
        bail!("--step must be above zero and --history at least one step");
    }
    let schedule = Schedule {
        every: args.reconcile_every,
        range: args.reconcile_range,
        settle: args.reconcile_settle,
    };
    if let Err(problem) = schedule.check() {
        bail!("{problem}");
    }
    let text = match &args.rules {
        Some(file) => std::fs::read_to_string(file)
            .with_context(|| format!("reading the rules file {}", file.display()))?,
        None => DEFAULT_RULES.to_owned(),
    };
    let rules = rules::parse(&text, limits(&args)).with_context(|| match &args.rules {
        Some(file) => format!("in {}", file.display()),
        None => "in the shipped rules".into(),
    })?;
    let kafka_client = match &args.kafka_config {
        Some(path) => KafkaClientSettings::load(path, &[("group.id", "set by --group")])?,
        None => KafkaClientSettings::default(),
    };
    let telemetry = match &args.otlp_endpoint {
        Some(endpoint) => Some(
            init(OtlpConfig::new(endpoint.clone(), "candor-dashboards"))
                .context("setting up the OTLP export")?,
        ),
        None => None,
    };
    let external_url = args
        .external_url
        .clone()
        .unwrap_or_else(|| format!("http://{}", args.listen));
    let webhooks: Vec<Webhook> = args
        .webhooks
        .iter()
        .enumerate()
        .map(|(index, url)| Webhook {
            name: format!("webhook-{}", index + 1),
            url: url.clone(),
        })
        .collect();
    let notifier = Notifier::new(
        &webhooks,
        args.webhook_attempts,
        args.webhook_timeout,
        external_url,
    )?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} (port {}): is the port taken? choose another with --listen",
                args.listen,
                args.listen.port()
            )
        })?;
    let shared = Arc::new(Shared {
        model: std::sync::Mutex::new(Model::new(ModelSettings {
            history: micros(args.history),
            step: micros(args.step),
            dedupe_window: micros(args.dedupe_window),
        })),
        pipeline: std::sync::Mutex::new(PipelineInputs::default()),
        alerts: std::sync::Mutex::new(Default::default()),
        reconcile: std::sync::Mutex::new(Default::default()),
        rules,
        staleness: Staleness {
            collector: micros(args.collector_stale_after),
            kafka: micros(args.kafka_stale_after),
            table: micros(args.table_stale_after),
        },
        started: now(),
        notifications: Default::default(),
        has_receivers: notifier.has_receivers(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = {
        let settings = StreamSettings {
            brokers: args.kafka.clone(),
            group: args.group.clone(),
            client: kafka_client.clone(),
        };
        let shared = Arc::clone(&shared);
        let stop = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("kafka-stream".into())
            .spawn(move || stream::run(settings, shared, stop))
            .context("starting the Kafka consumer thread")?
    };
    let root = TableRoot::new(args.tables.clone());
    tokio::spawn(watch::run(
        root.clone(),
        args.table_poll,
        Arc::clone(&shared),
    ));
    tokio::spawn(engine::run(
        Arc::clone(&shared),
        Arc::new(notifier),
        args.evaluate_every,
        micros(args.resend),
    ));
    let forensic = ForensicSettings {
        root,
        brokers: args.kafka.clone(),
        timeout: Duration::from_secs(5),
        max_records: 200_000,
        client: kafka_client,
        dedupe_window: args.dedupe_window,
    };
    tokio::spawn(reconcile::run(
        ReconcileSettings {
            read: forensic.clone(),
            schedule,
        },
        Arc::clone(&shared),
    ));
    let app = Arc::new(App {
        shared: Arc::clone(&shared),
        forensic,
    });
    tracing::info!(
        url = %format!("http://{}", args.listen),
        kafka = %args.kafka,
        group = %args.group,
        tables = %args.tables,
        "dashboards listening"
    );
    axum::serve(listener, web::router(app))
        .with_graceful_shutdown(candor_service::shutdown_signal())
        .await
        .context("serving HTTP")?;
    stop.store(true, Ordering::Relaxed);
    if consumer.join().is_err() {
        tracing::error!("the Kafka consumer thread panicked");
    }
    if let Some(telemetry) = telemetry
        && let Err(err) = telemetry.shutdown()
    {
        tracing::error!(error = %err, "telemetry not flushed");
    }
    Ok(())
}
