//! `candor`: silent-failure rates, spikes and incident forensics over Candor's tables, each answer
//! stating its own coverage.
//!
//! Exit codes: 0 rows found, 1 a confirmed empty answer, 3 partial (a source could not be read,
//! or the window reaches past the newest data any source holds), 4 access failure (no source
//! could be read), 2 usage error.

mod canary;
mod demo;
mod probe;

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use candor_query::answer::{Format, Layout, Report, Rows};
use candor_query::commands::{
    self, Filters, GroupBy, OperationsQuery, RatesQuery, ReconcileQuery, SpikesQuery,
};
use candor_query::kafka_client::KafkaClientSettings;
use candor_query::rates::SpikeRule;
use candor_query::reader::{ReadOptions, Reader};
use candor_query::store::TableRoot;
use candor_query::tail::TailSettings;
use candor_query::window::{self, TimeArg, Window, micros_of};
use candor_records::tables::Table;
use clap::{Args, Parser, Subcommand};

/// The process's allocator (see the workspace manifest for why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Windows that end within this of now read the Kafka tail unless `--no-live` is given.
const LIVE_REACH: Duration = Duration::from_secs(300);

/// Silent-failure rates, spikes and incident forensics over Candor's tables.
#[derive(Debug, Parser)]
#[command(name = "candor", version)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Where to read and how to show it; the same flags and variables as the dashboards
/// (`--kafka`/`CANDOR_KAFKA`, `--kafka-config`/`CANDOR_KAFKA_CONFIG`).
#[derive(Debug, Args)]
struct Global {
    /// The local stack's data directory; the tables are under DIR/tables.
    #[arg(long, global = true, env = "CANDOR_DATA_DIR", default_value = "data")]
    data_dir: PathBuf,
    /// The table root as a directory or object store URL (overrides --data-dir).
    #[arg(long, global = true, env = "CANDOR_TABLES")]
    tables: Option<String>,
    /// Kafka bootstrap servers, for the not-yet-compacted tail.
    #[arg(
        long,
        global = true,
        env = "CANDOR_KAFKA",
        default_value = "127.0.0.1:9092"
    )]
    kafka: String,
    /// A TOML file of extra Kafka client settings ([kafka.extra], [kafka.extra_env]: TLS, SASL).
    #[arg(long, global = true, env = "CANDOR_KAFKA_CONFIG")]
    kafka_config: Option<PathBuf>,
    /// Also read the Kafka tail (the default when the window reaches the last 5 minutes).
    #[arg(long, global = true, conflicts_with = "no_live")]
    live: bool,
    /// Read the tables only.
    #[arg(long, global = true)]
    no_live: bool,
    /// How long reading the Kafka tail may take.
    #[arg(long, global = true, default_value = "5s")]
    kafka_timeout: String,
    /// At most this many tail records (past it the answer is partial).
    #[arg(long, global = true, default_value_t = 1_000_000)]
    tail_limit: usize,
    /// How long after a stored record a tail record with its id is a client's retried copy,
    /// counted once: the compactor's `dedupe.window`.
    #[arg(
        long,
        global = true,
        env = "CANDOR_DEDUPE_WINDOW",
        default_value = candor_records::ids::DEDUPE_WINDOW_TEXT
    )]
    dedupe_window: String,
    /// table (default on a terminal), json (the contract envelope; the default otherwise), csv.
    #[arg(long, global = true, value_enum)]
    format: Option<FormatArg>,
    /// Show a table's every column and every value whole. Without it a table fits 120
    /// columns: rates as percentages, columns of zeros or of nothing named above it, times
    /// without the date they share, the widest text cut. CSV and JSON are always whole.
    #[arg(long, global = true)]
    wide: bool,
}

/// `--format`: [`Format`]'s values, named and explained as `candor --help` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FormatArg {
    /// Aligned columns for a person.
    Table,
    /// The contract envelope with the rows, plus the coverage.
    Json,
    /// Comma-separated values with a header.
    Csv,
}

impl From<FormatArg> for Format {
    fn from(arg: FormatArg) -> Self {
        match arg {
            FormatArg::Table => Self::Table,
            FormatArg::Json => Self::Json,
            FormatArg::Csv => Self::Csv,
        }
    }
}

/// `rates --by`: [`GroupBy`]'s values, named and explained as `candor rates --help` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum GroupByArg {
    /// `tool_target`.
    Target,
    /// `tool_name`.
    Tool,
    /// `service_name`.
    Service,
    /// `convention`: the convention a derived call was recognised by (`adapter` for an
    /// adapter's calls, the layer for derived rows written before conventions were named).
    Convention,
}

impl From<GroupByArg> for GroupBy {
    fn from(arg: GroupByArg) -> Self {
        match arg {
            GroupByArg::Target => Self::Target,
            GroupByArg::Tool => Self::Tool,
            GroupByArg::Service => Self::Service,
            GroupByArg::Convention => Self::Convention,
        }
    }
}

#[derive(Debug, Args)]
struct WindowArgs {
    /// Start: a duration before now (1h, 30m) or an RFC 3339 time [default: 1h].
    #[arg(long, alias = "from")]
    since: Option<String>,
    /// End: a duration before now or an RFC 3339 time [default: now].
    #[arg(long, alias = "to")]
    until: Option<String>,
}

#[derive(Debug, Args)]
struct FilterArgs {
    /// Only this service (service.name).
    #[arg(long)]
    service: Option<String>,
    /// Only this tool.
    #[arg(long)]
    tool: Option<String>,
    /// Only this target.
    #[arg(long)]
    target: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a SQL query over outcome_events, outcome_counts, rejected, heartbeats and operation_events.
    Sql {
        /// The statement (SELECT, DESCRIBE, SHOW or EXPLAIN).
        statement: String,
        /// Start of the stretch the statement asks about, checked for coverage only (the
        /// statement's own WHERE selects the rows): a duration before now or an RFC 3339 time.
        /// Without --since and --until, the answer claims no stretch of time.
        #[arg(long, alias = "from")]
        since: Option<String>,
        /// End of that stretch [default with --since: now].
        #[arg(long, alias = "to", requires = "since")]
        until: Option<String>,
    },
    /// Silent-failure rate, (access_failure + partial) / all calls, per group.
    Rates {
        #[command(flatten)]
        window: WindowArgs,
        #[command(flatten)]
        filters: FilterArgs,
        /// Group by target, tool, service or convention (the one a derived call was
        /// recognised by; `adapter` for an adapter's calls).
        #[arg(long, value_enum, default_value_t = GroupByArg::Target)]
        by: GroupByArg,
        /// Bucket width (5m, 1h); one bucket over the whole window when absent.
        #[arg(long)]
        step: Option<String>,
        /// How far before the window to look for a counter's baseline point.
        #[arg(long, default_value = "15m")]
        lookback: String,
        /// Count what adapters declared and what was derived from standard spans (GenAI, MCP,
        /// HTTP client) together, instead of in rows of their own.
        #[arg(long)]
        merge_sources: bool,
    },
    /// Targets whose AccessFailure rate in the recent window exceeds their baseline.
    Spikes {
        /// The recent window.
        #[arg(long, default_value = "5m")]
        window: String,
        /// The baseline before the window.
        #[arg(long, default_value = "1h")]
        baseline: String,
        /// The window's rate must be at least this many times the baseline's.
        #[arg(long, default_value_t = 3.0)]
        factor: f64,
        /// And hold at least this many AccessFailure calls.
        #[arg(long, default_value_t = 10)]
        min_events: u64,
        /// End of the window: a duration before now or an RFC 3339 time [default: now].
        #[arg(long)]
        until: Option<String>,
        /// How far before the baseline to look for a counter's baseline point.
        #[arg(long, default_value = "15m")]
        lookback: String,
        #[command(flatten)]
        filters: FilterArgs,
        /// Count what adapters declared and what was derived from standard spans together.
        #[arg(long)]
        merge_sources: bool,
    },
    /// Every failure event of a target in a window, in order, with retry outcomes.
    Incident {
        #[command(flatten)]
        window: WindowArgs,
        /// The target.
        #[arg(long)]
        target: String,
        /// Only this service.
        #[arg(long)]
        service: Option<String>,
        /// Only this tool.
        #[arg(long)]
        tool: Option<String>,
    },
    /// Every failure event of one trace, in order.
    Trace {
        /// The trace id, 32 hex digits.
        trace_id: String,
        /// Only events after this (a duration before now or an RFC 3339 time).
        #[arg(long, alias = "from")]
        since: Option<String>,
        /// Only events before this.
        #[arg(long, alias = "to")]
        until: Option<String>,
    },
    /// Failed calls counted by the adapter's tool.outcomes counter against the terminal events
    /// stored, per service instance, tool, target and class, over closed counter windows: every
    /// window where events went missing (or appeared uncounted) between adapter and table.
    Reconcile {
        /// Start: a duration before now or an RFC 3339 time [default: 1h].
        #[arg(long, alias = "from")]
        since: Option<String>,
        /// End: a duration before now or an RFC 3339 time [default: now minus --settle].
        #[arg(long, alias = "to")]
        until: Option<String>,
        /// Without --until, the window ends this long before now, so that every record of its
        /// calls (exported in batches, the counter every export interval) has arrived.
        #[arg(long, default_value = "2m")]
        settle: String,
        /// How far an event's time may be from the counter point that counted its call.
        #[arg(long, default_value = "1s")]
        slack: String,
        /// How far before the window to look for each counter's baseline point.
        #[arg(long, default_value = "15m")]
        lookback: String,
        #[command(flatten)]
        filters: FilterArgs,
    },
    /// Asynchronous operations accepted and not ended, from their tool.lifecycle events in the
    /// window, the oldest first: each pending, stuck (open for --stuck-after or longer), or
    /// unknown (the adapter instance that reported it went silent after), with how many ended
    /// in each terminal state.
    Operations {
        #[command(flatten)]
        window: WindowArgs,
        /// An open operation first seen at least this long before the window's end is stuck.
        #[arg(long, default_value_t = format!("{}m", candor_schema::time::STUCK_AFTER_MINUTES))]
        stuck_after: String,
        #[command(flatten)]
        filters: FilterArgs,
    },
    /// GET one URL through the adapter and print its envelope.
    Probe(probe::ProbeArgs),
    /// Demo traffic: several services calling flaky local tools through the adapter, with
    /// scenarios switched at run time.
    Demo(demo::DemoArgs),
    /// One synthetic call of each class per interval through the adapter, so every hop's
    /// freshness is provable end to end.
    Canary(canary::CanaryArgs),
}

/// A usage error: exit 2 with the message.
struct Usage(String);

impl<E: std::fmt::Display> From<E> for Usage {
    fn from(err: E) -> Self {
        Self(err.to_string())
    }
}

fn time_arg(raw: Option<&String>) -> Result<Option<TimeArg>, Usage> {
    raw.map(|raw| TimeArg::parse(raw))
        .transpose()
        .map_err(Usage::from)
}

fn window_of(args: &WindowArgs, now: i64) -> Result<Window, Usage> {
    Ok(Window::resolve(
        time_arg(args.since.as_ref())?,
        time_arg(args.until.as_ref())?,
        now,
    )?)
}

fn filters(args: FilterArgs) -> Filters {
    Filters {
        service: args.service,
        tool: args.tool,
        target: args.target,
    }
}

/// A question with every argument parsed, before anything is read.
enum Question {
    Sql {
        statement: String,
        window: Option<Window>,
    },
    Rates(RatesQuery),
    Spikes(SpikesQuery),
    Incident {
        window: Window,
        filters: Filters,
    },
    Trace {
        id: String,
        window: Option<Window>,
    },
    Reconcile(ReconcileQuery),
    Operations(OperationsQuery),
}

impl Question {
    fn parse(command: Command, now: i64) -> Result<Self, Usage> {
        let duration = |flag, raw: &str| window::parse_duration(flag, raw).map_err(Usage::from);
        Ok(match command {
            Command::Sql {
                statement,
                since,
                until,
            } => Self::Sql {
                statement,
                // --until requires --since: with neither, the answer claims no stretch.
                window: since
                    .map(|since| {
                        let args = WindowArgs {
                            since: Some(since),
                            until,
                        };
                        window_of(&args, now)
                    })
                    .transpose()?,
            },
            Command::Rates {
                window,
                filters: filter_args,
                by,
                step,
                lookback,
                merge_sources,
            } => Self::Rates(RatesQuery {
                window: window_of(&window, now)?,
                by: by.into(),
                step: step.map(|raw| duration("--step", &raw)).transpose()?,
                lookback: duration("--lookback", &lookback)?,
                filters: filters(filter_args),
                merge_sources,
            }),
            Command::Spikes {
                window,
                baseline,
                factor,
                min_events,
                until,
                lookback,
                filters: filter_args,
                merge_sources,
            } => {
                if !(factor.is_finite() && factor > 0.0) {
                    return Err(Usage(format!(
                        "--factor {factor}: expected a positive number like 3"
                    )));
                }
                let until = time_arg(until.as_ref())?.map_or(now, |arg| arg.resolve(now));
                Self::Spikes(SpikesQuery {
                    until,
                    window: duration("--window", &window)?,
                    baseline: duration("--baseline", &baseline)?,
                    rule: SpikeRule { factor, min_events },
                    lookback: duration("--lookback", &lookback)?,
                    filters: filters(filter_args),
                    merge_sources,
                })
            }
            Command::Incident {
                window,
                target,
                service,
                tool,
            } => Self::Incident {
                window: window_of(&window, now)?,
                filters: Filters {
                    service,
                    tool,
                    target: Some(target),
                },
            },
            Command::Trace {
                trace_id,
                since,
                until,
            } => Self::Trace {
                id: commands::trace_id(&trace_id)?,
                // A trace may be of any age: without --since it starts at the beginning.
                window: if since.is_some() || until.is_some() {
                    Some(Window::resolve(
                        Some(time_arg(since.as_ref())?.unwrap_or(TimeArg::At(0))),
                        time_arg(until.as_ref())?,
                        now,
                    )?)
                } else {
                    None
                },
            },
            Command::Reconcile {
                since,
                until,
                settle,
                slack,
                lookback,
                filters: filter_args,
            } => {
                let settle = duration("--settle", &settle)?;
                let until = match time_arg(until.as_ref())? {
                    Some(until) => until,
                    None => TimeArg::Ago(settle),
                };
                Self::Reconcile(ReconcileQuery {
                    window: Window::resolve(time_arg(since.as_ref())?, Some(until), now)?,
                    filters: filters(filter_args),
                    slack: duration("--slack", &slack)?,
                    lookback: duration("--lookback", &lookback)?,
                })
            }
            Command::Operations {
                window,
                stuck_after,
                filters: filter_args,
            } => Self::Operations(OperationsQuery {
                window: window_of(&window, now)?,
                stuck_after: duration("--stuck-after", &stuck_after)?,
                filters: filters(filter_args),
            }),
            Command::Probe(_) | Command::Demo(_) | Command::Canary(_) => {
                return Err(Usage("this command reads no tables".into()));
            }
        })
    }

    /// The tables it needs and the window it covers.
    fn plan(&self) -> (Vec<Table>, Option<Window>) {
        match self {
            Self::Sql { window, .. } => (Table::ALL.to_vec(), *window),
            Self::Rates(query) => (
                vec![Table::OutcomeEvents, Table::OutcomeCounts],
                Some(query.window),
            ),
            Self::Spikes(query) => {
                let since = query
                    .until
                    .saturating_sub(micros_of(query.window))
                    .saturating_sub(micros_of(query.baseline));
                (
                    vec![Table::OutcomeEvents, Table::OutcomeCounts],
                    Some(Window {
                        since,
                        until: query.until,
                    }),
                )
            }
            // The counter points say which adapter instances went silent in the window.
            Self::Incident { window, .. } => (
                vec![Table::OutcomeEvents, Table::OutcomeCounts],
                Some(*window),
            ),
            Self::Trace { window, .. } => (vec![Table::OutcomeEvents], *window),
            Self::Reconcile(query) => (
                vec![Table::OutcomeEvents, Table::OutcomeCounts],
                Some(query.window),
            ),
            // The counter points say which adapter instances went silent after an operation's
            // last event.
            Self::Operations(query) => (
                vec![Table::OperationEvents, Table::OutcomeCounts],
                Some(query.window),
            ),
        }
    }

    /// The instances whose silence the answer must account for: those whose counter points
    /// match these filters (every instance for SQL); `None` for a trace, which is about one
    /// trace's records wherever they came from.
    fn instances(&self) -> Option<Option<&Filters>> {
        match self {
            Self::Sql { .. } => Some(None),
            Self::Rates(query) => Some(Some(&query.filters)),
            Self::Spikes(query) => Some(Some(&query.filters)),
            Self::Incident { filters, .. } => Some(Some(filters)),
            Self::Reconcile(query) => Some(Some(&query.filters)),
            Self::Operations(query) => Some(Some(&query.filters)),
            Self::Trace { .. } => None,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Self::Sql { .. } => "candor sql",
            Self::Rates(_) => "candor rates",
            Self::Spikes(_) => "candor spikes",
            Self::Incident { .. } => "candor incident",
            Self::Trace { .. } => "candor trace",
            Self::Reconcile(_) => "candor reconcile",
            Self::Operations(_) => "candor operations",
        }
    }

    /// What a confirmed empty answer found none of.
    fn nothing(&self) -> &'static str {
        match self {
            Self::Sql { .. } => "No rows",
            Self::Rates(_) => "No calls and no failures recorded",
            Self::Spikes(_) => "No spikes",
            Self::Incident { .. } | Self::Trace { .. } => "No failures",
            Self::Reconcile(_) => {
                "Every closed window matched: each failed call counted has its terminal event \
                 stored, and no event is uncounted"
            }
            Self::Operations(_) => "No open operations",
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // deltalake brings two TLS providers; name one so object stores do not panic choosing.
    let _already_installed = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("candor: could not start: {err}");
            return ExitCode::from(4);
        }
    };
    runtime.block_on(run(cli))
}

async fn run(cli: Cli) -> ExitCode {
    let Cli { global, command } = cli;
    let (name, result) = match command {
        Command::Probe(args) => ("probe", probe::run(args).await),
        Command::Demo(args) => ("demo", demo::run(args).await),
        Command::Canary(args) => ("canary", canary::run(args).await),
        command => return ask(global, command).await,
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("candor {name}: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// Answers a question over the tables.
async fn ask(global: Global, command: Command) -> ExitCode {
    let layout = if global.wide {
        Layout::Wide
    } else {
        Layout::default()
    };
    match answer(global, command).await {
        Ok((report, format)) => {
            let (out, err) = report.render_with(format, layout);
            let _ = std::io::stdout().write_all(out.as_bytes());
            let _ = std::io::stderr().write_all(err.as_bytes());
            ExitCode::from(report.exit_code())
        }
        Err(Usage(message)) => {
            eprintln!("candor: {message}");
            ExitCode::from(2)
        }
    }
}

/// Asks the question. Only a usage error is an `Err`: a read that failed is an answer (an access
/// failure) like any other.
async fn answer(global: Global, command: Command) -> Result<(Report, Format), Usage> {
    let started = SystemTime::now();
    let now = window::now();
    let format = global
        .format
        .map(Format::from)
        .unwrap_or(if std::io::stdout().is_terminal() {
            Format::Table
        } else {
            Format::Json
        });
    let question = Question::parse(command, now)?;
    // Loaded whether or not this question reads the tail, so that a mistake in the file (or an
    // unset variable) shows on the first run, not on the first live one.
    let kafka_client = match &global.kafka_config {
        Some(path) => KafkaClientSettings::load(path, &[]).map_err(Usage::from)?,
        None => KafkaClientSettings::default(),
    };
    let (tables, window) = question.plan();
    // Questions without a window (SQL without --since, a whole trace) may reach now, so they
    // read the tail.
    let recent = window.is_none_or(|w| w.until >= now.saturating_sub(micros_of(LIVE_REACH)));
    let live = global.live || (!global.no_live && recent);
    let tail = if live {
        Some(TailSettings {
            brokers: global.kafka.clone(),
            timeout: window::parse_duration("--kafka-timeout", &global.kafka_timeout)
                .map_err(Usage::from)?,
            max_records: global.tail_limit,
            client: kafka_client,
            dedupe_window: window::parse_duration("--dedupe-window", &global.dedupe_window)
                .map_err(Usage::from)?,
        })
    } else {
        None
    };
    let root = global.tables.clone().unwrap_or_else(|| {
        global
            .data_dir
            .join("tables")
            .to_string_lossy()
            .into_owned()
    });
    let reader = Reader::open(ReadOptions {
        root: TableRoot::new(root.clone()),
        tail,
        tables,
    })
    .await;
    let mut coverage = reader.coverage(window).await;
    if let Some(filters) = question.instances() {
        reader.add_instance_silences(&mut coverage, filters).await;
    }
    let name = question.name();
    let nothing = question.nothing();
    // Each typed answer becomes the rows the report shows here, at the edge.
    let answered = match question {
        Question::Sql { statement, .. } => commands::sql(&reader, &statement)
            .await
            .map(|rows| (rows, vec![])),
        Question::Rates(query) => commands::rates(&reader, &query).await.map(|answer| {
            coverage.notes.extend(answer.notes);
            (Rows::headed(answer.by, answer.rows), vec![])
        }),
        Question::Spikes(query) => commands::spikes(&reader, &query).await.map(|answer| {
            coverage.notes.extend(answer.notes);
            (Rows::of(answer.rows), vec![])
        }),
        Question::Incident { window, filters } => commands::incident(&reader, window, &filters)
            .await
            .map(|answer| (Rows::of(answer.rows), answer.summary)),
        Question::Trace { id, window } => commands::trace(&reader, &id, window)
            .await
            .map(|answer| (Rows::of(answer.rows), answer.summary)),
        Question::Reconcile(query) => commands::reconcile(&reader, &query).await.map(|answer| {
            coverage.notes.extend(answer.notes);
            coverage.unchecked.extend(answer.unchecked);
            (Rows::of(answer.rows), answer.summary)
        }),
        Question::Operations(query) => {
            // The command judges its operations by the silences already in the coverage.
            let answered = commands::operations(&reader, &query, &coverage).await;
            answered.map(|answer| {
                coverage.notes.extend(answer.notes);
                if let Some(failure) = answer.failure {
                    // The operations table could not be read: nothing about operations is
                    // known, which is no "No open operations".
                    coverage.failure = Some(failure);
                }
                (Rows::of(answer.rows), answer.summary)
            })
        }
    };
    let (rows, summary) = match answered {
        Ok(answer) => answer,
        Err(err) if err.is_usage() => return Err(Usage(err.to_string())),
        // Reading failed part way: an access failure, stated like any other answer.
        Err(err) => {
            coverage.failure = Some(err.to_string());
            (Rows::default(), vec![])
        }
    };
    Ok((
        Report {
            command: name.to_owned(),
            target: root,
            rows,
            coverage,
            summary,
            nothing: nothing.to_owned(),
            started,
        },
        format,
    ))
}
