//! `candor-dashboards`: the web UI, the alert rules and `/metrics`, as their own process.
//!
//! The configuration is a TOML file (`--config`, see `deploy/dashboards.example.toml`; the
//! defaults without one) with each flag or variable given over its key; `--check` validates it
//! as a start would, prints it and exits (0 valid, 2 not).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use candor_adapter::http_client::HttpClient;
use candor_adapter::otlp::{OtlpConfig, init};
use candor_dashboards::access::{self, Access};
use candor_dashboards::ack_link::LinkKey;
use candor_dashboards::alerts::Alerts;
use candor_dashboards::config::{Config, RawConfig, kafka_settings_file};
use candor_dashboards::forensic::ForensicSettings;
use candor_dashboards::model::Model;
use candor_dashboards::notify::{self, Notifier};
use candor_dashboards::persist::{self, StateStore};
use candor_dashboards::reconciler::{self, ReconcileSettings};
use candor_dashboards::rules::{self, DEFAULT_RULES, Limits, Rule};
use candor_dashboards::silences::{self, SilenceReader};
use candor_dashboards::snapshot::{Published, Snapshot};
use candor_dashboards::state::Shared;
use candor_dashboards::stream::StreamSettings;
use candor_dashboards::web::App;
use candor_dashboards::{engine, history, stream, watch, web};
use candor_query::kafka_client::KafkaClientSettings;
use candor_query::store::TableRoot;
use candor_query::window::{micros_of, now};
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
    /// Prints a bcrypt hash of the password read from stdin (its first line), for a
    /// `[[web.users]]` entry's `password_hash_file` or `password_hash_env`.
    HashPassword {
        /// bcrypt's cost: each step doubles the time a check takes (4 to 31).
        #[arg(long, default_value_t = 10)]
        cost: u32,
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

/// The flags and variables of the service. Each one that names a key ("Overrides …") replaces
/// that key of the configuration file when given; the defaults live in the configuration
/// (`candor_dashboards::config::RawConfig`).
#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// The TOML configuration file (see deploy/dashboards.example.toml); every key's default
    /// without it.
    #[arg(long, env = "CANDOR_DASHBOARDS_CONFIG")]
    config: Option<PathBuf>,
    /// Overrides `listen`: where the web UI, the API and /metrics listen.
    #[arg(long, env = "CANDOR_DASHBOARDS_LISTEN")]
    listen: Option<String>,
    /// Overrides `kafka.brokers`: Kafka bootstrap brokers.
    #[arg(long, env = "CANDOR_KAFKA")]
    kafka: Option<String>,
    /// A TOML file of extra Kafka client settings ([kafka.extra], [kafka.extra_env]: TLS, SASL),
    /// the readers' file `candor` takes too; replaces those two tables of the configuration.
    #[arg(long, env = "CANDOR_KAFKA_CONFIG")]
    kafka_config: Option<PathBuf>,
    /// Overrides `kafka.group_id`: the consumer group the dashboards commit their offsets under
    /// (never the compactor's).
    #[arg(long, env = "CANDOR_DASHBOARDS_GROUP")]
    group: Option<String>,
    /// Overrides `tables`: the tables' root (a directory or an object store URL), read-only.
    #[arg(long, env = "CANDOR_TABLES")]
    tables: Option<String>,
    /// Overrides `state_dir`: the dashboards' own directory, where the alert instances are kept.
    #[arg(long, env = "CANDOR_DASHBOARDS_STATE_DIR")]
    state_dir: Option<String>,
    /// Overrides `rules`: the alert rules file (TOML).
    #[arg(long, env = "CANDOR_DASHBOARDS_RULES")]
    rules: Option<String>,
    /// Overrides `alerts.webhooks`: a webhook that receives alerts (Alertmanager API v2 format);
    /// repeat for several.
    #[arg(
        long = "webhook",
        env = "CANDOR_DASHBOARDS_WEBHOOKS",
        value_delimiter = ','
    )]
    webhooks: Vec<String>,
    /// Overrides `alerts.escalation_webhooks`: a receiver a firing alert also goes to when
    /// nobody acknowledged it within `alerts.escalate_after`; repeat for several.
    #[arg(long = "escalation-webhook", value_delimiter = ',')]
    escalation_webhooks: Vec<String>,
    /// Overrides `alerts.escalate_after`: how long a firing alert may go unacknowledged.
    #[arg(long)]
    escalate_after: Option<String>,
    /// Overrides `alerts.webhook_attempts`: attempts per notification, retries included.
    #[arg(long)]
    webhook_attempts: Option<u32>,
    /// Overrides `alerts.webhook_timeout`: time per notification attempt.
    #[arg(long)]
    webhook_timeout: Option<String>,
    /// Overrides `alerts.resend`: how often a firing alert is sent again.
    #[arg(long)]
    resend: Option<String>,
    /// Overrides `panels.history`: how far back the panels keep data.
    #[arg(long)]
    history: Option<String>,
    /// Overrides `panels.step`: the panels' bucket width.
    #[arg(long)]
    step: Option<String>,
    /// Overrides `dedupe.window`: how long after a record a copy with its id is a client's
    /// retried copy, counted once (the compactor's `dedupe.window`).
    #[arg(long, env = "CANDOR_DEDUPE_WINDOW")]
    dedupe_window: Option<String>,
    /// Overrides `alerts.evaluate_every`: how often the rules are evaluated.
    #[arg(long)]
    evaluate_every: Option<String>,
    /// Overrides `table_poll`: how often the tables' logs are read.
    #[arg(long)]
    table_poll: Option<String>,
    /// Overrides `staleness.collector`: the collector hop is STALE after this long without a
    /// heartbeat (at least three of the heartbeats' own interval).
    #[arg(long)]
    collector_stale_after: Option<String>,
    /// Overrides `staleness.kafka`: the Kafka hop is STALE after this long without contact.
    #[arg(long)]
    kafka_stale_after: Option<String>,
    /// Overrides `staleness.table`: the table hop is STALE after this long without the
    /// watermark moving.
    #[arg(long)]
    table_stale_after: Option<String>,
    /// Overrides `reconcile.every`: how often the adapters' counter is reconciled against the
    /// stored failure events.
    #[arg(long, env = "CANDOR_DASHBOARDS_RECONCILE_EVERY")]
    reconcile_every: Option<String>,
    /// Overrides `reconcile.range`: how far back each reconciliation reaches.
    #[arg(long, env = "CANDOR_DASHBOARDS_RECONCILE_RANGE")]
    reconcile_range: Option<String>,
    /// Overrides `reconcile.settle`: how recent a counter point may be and still be left to a
    /// later reconciliation, while the events of its calls may still be on their way.
    #[arg(long, env = "CANDOR_DASHBOARDS_RECONCILE_SETTLE")]
    reconcile_settle: Option<String>,
    /// Overrides `external_url`: the dashboards' own address, for links in notifications.
    #[arg(long, env = "CANDOR_DASHBOARDS_URL")]
    external_url: Option<String>,
    /// Overrides `otlp_endpoint`: export the adapter's telemetry (notification outcomes) over
    /// OTLP/gRPC to this endpoint.
    #[arg(long, env = "CANDOR_DASHBOARDS_OTLP")]
    otlp_endpoint: Option<String>,
    /// Check the configuration as a start would (file, flags, variables, the Kafka settings'
    /// variables, the rules), print it and exit: 0 when it is valid, 2 when not. Connects to
    /// nothing.
    #[arg(long)]
    check: bool,
    /// Log format.
    #[arg(long, value_enum, default_value = "text", env = "CANDOR_LOG_FORMAT")]
    log_format: LogFormat,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::CheckRules { file }) => {
            return check_rules(file, configuration(&cli.serve)?.limits());
        }
        Some(Command::HashPassword { cost }) => return hash_password(*cost),
        Some(Command::ExportRules { file, output, .. }) => {
            let limits = configuration(&cli.serve)?.limits();
            return export_rules(file.as_deref(), output.as_deref(), limits);
        }
        None => {}
    }
    if cli.serve.check {
        candor_service::config::report_check(check(&cli.serve));
        return Ok(());
    }
    candor_service::init_logs(cli.serve.log_format)?;
    let config = configuration(&cli.serve)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(serve(config))
}

/// The dashboards' configuration: the file (the defaults without one), the `--kafka-config`
/// settings over its Kafka tables, then each flag or variable given over its key; validated.
fn configuration(args: &ServeArgs) -> anyhow::Result<Config> {
    let mut raw =
        candor_service::config::load_or_default(args.config.as_deref(), RawConfig::from_toml_str)?;
    if let Some(path) = &args.kafka_config {
        let settings = candor_service::config::load(path, kafka_settings_file)?;
        raw.set_kafka_settings(settings);
    }
    override_keys(&mut raw, args);
    Ok(raw.validate()?)
}

/// Each flag or variable given replaces its key.
fn override_keys(raw: &mut RawConfig, args: &ServeArgs) {
    fn set(key: &mut String, flag: &Option<String>) {
        if let Some(value) = flag {
            key.clone_from(value);
        }
    }
    fn set_optional(key: &mut Option<String>, flag: &Option<String>) {
        if flag.is_some() {
            key.clone_from(flag);
        }
    }
    set(&mut raw.listen, &args.listen);
    set_optional(&mut raw.kafka.brokers, &args.kafka);
    set_optional(&mut raw.kafka.group_id, &args.group);
    set(&mut raw.tables, &args.tables);
    set(&mut raw.state_dir, &args.state_dir);
    set_optional(&mut raw.rules, &args.rules);
    if !args.webhooks.is_empty() {
        raw.alerts.webhooks.clone_from(&args.webhooks);
    }
    if !args.escalation_webhooks.is_empty() {
        raw.alerts
            .escalation_webhooks
            .clone_from(&args.escalation_webhooks);
    }
    set(&mut raw.alerts.escalate_after, &args.escalate_after);
    if let Some(attempts) = args.webhook_attempts {
        raw.alerts.webhook_attempts = i64::from(attempts);
    }
    set(&mut raw.alerts.webhook_timeout, &args.webhook_timeout);
    set(&mut raw.alerts.resend, &args.resend);
    set(&mut raw.alerts.evaluate_every, &args.evaluate_every);
    set(&mut raw.panels.history, &args.history);
    set(&mut raw.panels.step, &args.step);
    set(&mut raw.dedupe.window, &args.dedupe_window);
    set(&mut raw.table_poll, &args.table_poll);
    set(&mut raw.staleness.collector, &args.collector_stale_after);
    set(&mut raw.staleness.kafka, &args.kafka_stale_after);
    set(&mut raw.staleness.table, &args.table_stale_after);
    set(&mut raw.reconcile.every, &args.reconcile_every);
    set(&mut raw.reconcile.range, &args.reconcile_range);
    set(&mut raw.reconcile.settle, &args.reconcile_settle);
    set_optional(&mut raw.external_url, &args.external_url);
    set_optional(&mut raw.otlp_endpoint, &args.otlp_endpoint);
}

/// `--check`: the configuration, the variables its Kafka settings name, the hashes and tokens of
/// `[web]` and the rules, as a start reads them; nothing is connected to or bound. What it
/// prints names files and variables, never a secret.
fn check(args: &ServeArgs) -> anyhow::Result<String> {
    let config = configuration(args)?;
    config.kafka.extra.resolve()?;
    let access = web_access(&config)?;
    webhook_transport(&config)?;
    if let Some(tls) = &config.web.tls {
        for file in [&tls.cert, &tls.key] {
            let pem = std::fs::read_to_string(file)
                .with_context(|| format!("reading the listener's TLS file {}", file.display()))?;
            anyhow::ensure!(
                pem.contains("-----BEGIN "),
                "the listener's TLS file {} holds no PEM block",
                file.display()
            );
        }
    }
    let rules = load_rules(&config)?;
    Ok(format!(
        "{config:#?}\n{access:?}\n{} alert rule(s)",
        rules.len()
    ))
}

/// The webhooks' HTTP client (with the CA certificates of `alerts.webhook_ca_file`, or the
/// system's) and the headers of `alerts.webhook_headers_file`.
fn webhook_transport(config: &Config) -> anyhow::Result<(HttpClient, http::HeaderMap)> {
    /// A notification's response body is read up to this; receivers answer with little.
    const MAX_RESPONSE_BYTES: usize = 64 << 10;
    let client = match &config.alerts.webhook_ca_file {
        Some(path) => {
            let pem = std::fs::read(path)
                .with_context(|| format!("reading alerts.webhook_ca_file {}", path.display()))?;
            HttpClient::trusting(MAX_RESPONSE_BYTES, &pem)
                .with_context(|| format!("in alerts.webhook_ca_file {}", path.display()))?
        }
        None => HttpClient::new(MAX_RESPONSE_BYTES),
    };
    let headers = match &config.alerts.webhook_headers_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| {
                format!("reading alerts.webhook_headers_file {}", path.display())
            })?;
            notify::read_headers(&text)
                .with_context(|| format!("in alerts.webhook_headers_file {}", path.display()))?
        }
        None => http::HeaderMap::new(),
    };
    Ok((client, headers))
}

/// Who may read, from the hashes and tokens `[web]` names.
fn web_access(config: &Config) -> anyhow::Result<Access> {
    config
        .web
        .access(&|name| std::env::var(name).ok())
        .context("reading the [web] credentials")
}

/// The state store under `dir`, and the alert instances it kept.
fn open_state(dir: &Path, rules: &[Rule]) -> anyhow::Result<(StateStore, Alerts)> {
    let store = StateStore::open(dir)?;
    let (stored, unreadable) = store.load()?;
    let (alerts, dropped) = persist::restore(stored, rules);
    if unreadable > 0 || dropped > 0 {
        tracing::warn!(
            unreadable,
            dropped,
            "alert instances in the state store not restored: unreadable, or of a rule no longer \
             in the rules file"
        );
    }
    tracing::info!(
        restored = alerts.len(),
        store = %dir.display(),
        "alert instances restored"
    );
    Ok((store, Alerts::restored(alerts)))
}

/// Restores the counters the state store kept into `model`; when they were saved. A store
/// without them (a first start) or whose counters cannot be read starts them from the history
/// alone, which Prometheus reads as a reset of each series: said in the log.
fn restore_totals(store: &StateStore, model: &mut Model) -> Option<i64> {
    match store.load_totals() {
        Ok(Some(stored)) => {
            let saved_at = stored.saved_at;
            let unknown = model.restore_totals(stored);
            if unknown > 0 {
                tracing::warn!(
                    unknown,
                    "stored counter series of an unknown class or source left out"
                );
            }
            tracing::info!("counters restored: they continue from what the last process served");
            saved_at
        }
        Ok(None) => {
            tracing::info!("no stored counters: they start from the history read");
            None
        }
        Err(err) => {
            tracing::error!(
                error = %err,
                "the stored counters could not be read: they start from the history read, a \
                 reset to Prometheus"
            );
            None
        }
    }
}

/// `hash-password`: the first line of stdin, hashed.
fn hash_password(cost: u32) -> anyhow::Result<()> {
    let mut password = String::new();
    std::io::stdin()
        .read_line(&mut password)
        .context("reading the password from stdin")?;
    let password = password.trim_end_matches(['\r', '\n']);
    anyhow::ensure!(!password.is_empty(), "no password on stdin");
    println!("{}", access::hash_password(password, cost)?);
    Ok(())
}

/// The alert rules of the configuration's `rules` file (the shipped ones when unset).
fn load_rules(config: &Config) -> anyhow::Result<Vec<Rule>> {
    rules_of(config.rules.as_deref(), config.limits())
}

/// The rules of `file` (the shipped ones without it), checked against the panels' `limits`.
fn rules_of(file: Option<&Path>, limits: Limits) -> anyhow::Result<Vec<Rule>> {
    match file {
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading the rules file {}", file.display()))?;
            rules::parse(&text, limits).with_context(|| format!("in {}", file.display()))
        }
        None => rules::parse(DEFAULT_RULES, limits).context("in the shipped rules"),
    }
}

/// `check-rules`: a rules file validated as at start, its rules printed as JSON lines.
fn check_rules(file: &Path, limits: Limits) -> anyhow::Result<()> {
    let rules = rules_of(Some(file), limits)?;
    for rule in &rules {
        println!("{}", serde_json::to_string(rule)?);
    }
    eprintln!("{}: {} rule(s), valid", file.display(), rules.len());
    Ok(())
}

/// `export-rules --prometheus`: the rules (validated as at start) as a Prometheus rules file.
fn export_rules(file: Option<&Path>, output: Option<&Path>, limits: Limits) -> anyhow::Result<()> {
    let rules = rules_of(file, limits)?;
    let rendered = rules::prometheus::prometheus_rules(&rules);
    match output {
        Some(path) => {
            std::fs::write(path, rendered).with_context(|| format!("writing {}", path.display()))?
        }
        None => print!("{rendered}"),
    }
    Ok(())
}

async fn serve(config: Config) -> anyhow::Result<()> {
    let rules = load_rules(&config)?;
    let kafka_client = KafkaClientSettings::from(config.kafka.extra.resolve()?);
    let telemetry = match &config.otlp_endpoint {
        Some(endpoint) => Some(
            init(OtlpConfig::new(endpoint.clone(), "candor-dashboards"))
                .context("setting up the OTLP export")?,
        ),
        None => None,
    };
    let (client, headers) = webhook_transport(&config)?;
    let links = Arc::new(
        LinkKey::load_or_create(&config.state_dir).context("the acknowledgement links' key")?,
    );
    let notifier = Notifier::new(
        &config.alerts.webhooks,
        config.alerts.webhook_attempts.get(),
        config.alerts.webhook_timeout,
        client.clone(),
        headers.clone(),
        config.external_url.clone(),
    )?
    .with_ack_links(Arc::clone(&links));
    let silences = Arc::new(SilenceReader::new(
        &config.alerts.webhooks,
        config.alerts.webhook_timeout,
        client.clone(),
        headers.clone(),
    )?);
    let escalation = Notifier::new(
        &config.alerts.escalation_webhooks,
        config.alerts.webhook_attempts.get(),
        config.alerts.webhook_timeout,
        client,
        headers,
        config.external_url.clone(),
    )?
    .with_ack_links(Arc::clone(&links));
    let access = Arc::new(web_access(&config)?);
    let tls = match &config.web.tls {
        Some(files) => Some(
            axum_server::tls_rustls::RustlsConfig::from_pem_file(&files.cert, &files.key)
                .await
                .with_context(|| {
                    format!(
                        "reading the listener's TLS files {} and {}",
                        files.cert.display(),
                        files.key.display()
                    )
                })?,
        ),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} (port {}): is the port taken? choose another with --listen",
                config.listen,
                config.listen.port()
            )
        })?;
    let brokers = config.kafka.bootstrap_servers();
    let (store, alerts) = open_state(&config.state_dir, &rules)?;
    let mut model = Model::new(config.model_settings());
    let counted_since = restore_totals(&store, &mut model);
    let store = Arc::new(store);
    let shared = Arc::new(Shared {
        staleness: config.staleness(),
        has_receivers: notifier.has_receivers(),
        ..Shared::new(model, alerts, rules, Arc::clone(&access), now())
    });
    let published = Published::new(Snapshot::take(&shared, now()));
    tokio::spawn(engine::publish(Arc::clone(&shared), published.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = {
        let settings = StreamSettings {
            brokers: brokers.clone(),
            group: config.kafka.group_id.clone(),
            client: kafka_client.clone(),
        };
        let shared = Arc::clone(&shared);
        let stop = Arc::clone(&stop);
        let root = TableRoot::new(config.tables.clone());
        let runtime = tokio::runtime::Handle::current();
        // The history from the tables first, then the stream from where they end.
        std::thread::Builder::new()
            .name("kafka-stream".into())
            .spawn(move || {
                let starts = runtime.block_on(history::load(&root, &shared, counted_since));
                stream::run(settings, shared, stop, starts)
            })
            .context("starting the Kafka consumer thread")?
    };
    tokio::spawn(persist::save_totals(
        Arc::clone(&store),
        Arc::clone(&shared),
    ));
    tokio::spawn(silences::run(
        silences,
        Arc::clone(&shared),
        config.alerts.evaluate_every,
    ));
    let root = TableRoot::new(config.tables.clone());
    tokio::spawn(watch::run(
        root.clone(),
        config.table_poll,
        Arc::clone(&shared),
    ));
    tokio::spawn(engine::run(
        Arc::clone(&shared),
        published.clone(),
        engine::Receivers {
            first: Arc::new(notifier),
            escalation: Arc::new(escalation),
            escalate_after: micros_of(config.alerts.escalate_after),
        },
        config.alerts.evaluate_every,
        micros_of(config.alerts.resend),
        Some(store),
    ));
    let forensic = ForensicSettings {
        root,
        brokers: brokers.clone(),
        timeout: Duration::from_secs(5),
        max_records: 200_000,
        client: kafka_client,
        dedupe_window: config.dedupe_window,
    };
    tokio::spawn(reconciler::run(
        ReconcileSettings {
            read: forensic.clone(),
            schedule: config.reconcile,
        },
        Arc::clone(&shared),
    ));
    let app = Arc::new(App {
        shared: Arc::clone(&shared),
        published,
        forensic,
        links,
    });
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(
        url = %format!("{scheme}://{}", config.listen),
        kafka = %brokers,
        group = %config.kafka.group_id,
        tables = %config.tables,
        access = ?access,
        "dashboards listening"
    );
    if access.is_open() {
        tracing::warn!(
            listen = %config.listen,
            "no [web] user or token: anyone who can reach the listener reads the pages, the \
             events' messages and targets, and /metrics"
        );
    }
    let router = web::router(app);
    match tls {
        None => axum::serve(listener, router)
            .with_graceful_shutdown(candor_service::shutdown_signal())
            .await
            .context("serving HTTP")?,
        Some(tls) => {
            let handle = axum_server::Handle::new();
            tokio::spawn({
                let handle = handle.clone();
                async move {
                    candor_service::shutdown_signal().await;
                    handle.graceful_shutdown(Some(Duration::from_secs(10)));
                }
            });
            let listener = listener.into_std().context("the listener")?;
            axum_server::from_tcp_rustls(listener, tls)
                .context("the TLS listener")?
                .handle(handle)
                .serve(router.into_make_service())
                .await
                .context("serving HTTPS")?;
        }
    }
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
