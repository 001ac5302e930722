//! The command line as clap parses it: the global flags and every subcommand with its arguments.

use std::path::PathBuf;

use candor_query::answer::Format;
use candor_query::commands::GroupBy;
use clap::{Args, Parser, Subcommand};

use crate::{canary, demo, probe};

/// Silent-failure rates, spikes and incident forensics over Candor's tables.
#[derive(Debug, Parser)]
#[command(name = "candor", version)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Where to read and how to show it; the same flags and variables as the dashboards
/// (`--kafka`/`CANDOR_KAFKA`, `--kafka-config`/`CANDOR_KAFKA_CONFIG`).
#[derive(Debug, Args)]
pub(crate) struct Global {
    /// The local stack's data directory; the tables are under DIR/tables.
    #[arg(long, global = true, env = "CANDOR_DATA_DIR", default_value = "data")]
    pub(crate) data_dir: PathBuf,
    /// The table root as a directory or object store URL (overrides --data-dir).
    #[arg(long, global = true, env = "CANDOR_TABLES")]
    pub(crate) tables: Option<String>,
    /// Kafka bootstrap servers, for the not-yet-compacted tail.
    #[arg(
        long,
        global = true,
        env = "CANDOR_KAFKA",
        default_value = "127.0.0.1:9092"
    )]
    pub(crate) kafka: String,
    /// A TOML file of extra Kafka client settings ([kafka.extra], [kafka.extra_env]: TLS, SASL).
    #[arg(long, global = true, env = "CANDOR_KAFKA_CONFIG")]
    pub(crate) kafka_config: Option<PathBuf>,
    /// Also read the Kafka tail (the default when the window reaches the last 5 minutes).
    #[arg(long, global = true, conflicts_with = "no_live")]
    pub(crate) live: bool,
    /// Read the tables only.
    #[arg(long, global = true)]
    pub(crate) no_live: bool,
    /// How long reading the Kafka tail may take.
    #[arg(long, global = true, default_value = "5s")]
    pub(crate) kafka_timeout: String,
    /// At most this many tail records (past it the answer is partial).
    #[arg(long, global = true, default_value_t = 1_000_000)]
    pub(crate) tail_limit: usize,
    /// How long after a stored record a tail record with its id is a client's retried copy,
    /// counted once: the compactor's `dedupe.window`.
    #[arg(
        long,
        global = true,
        env = "CANDOR_DEDUPE_WINDOW",
        default_value = candor_records::ids::DEDUPE_WINDOW_TEXT
    )]
    pub(crate) dedupe_window: String,
    /// table (default on a terminal), json (the contract envelope; the default otherwise), csv.
    #[arg(long, global = true, value_enum)]
    pub(crate) format: Option<FormatArg>,
    /// Show a table's every column and every value whole. Without it a table fits 120
    /// columns: rates as percentages, columns of zeros or of nothing named above it, times
    /// without the date they share, the widest text cut. CSV and JSON are always whole.
    #[arg(long, global = true)]
    pub(crate) wide: bool,
}

/// `--format`: [`Format`]'s values, named and explained as `candor --help` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FormatArg {
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
pub(crate) enum GroupByArg {
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
pub(crate) struct WindowArgs {
    /// Start: a duration before now (1h, 30m) or an RFC 3339 time [default: 1h].
    #[arg(long, alias = "from")]
    pub(crate) since: Option<String>,
    /// End: a duration before now or an RFC 3339 time [default: now].
    #[arg(long, alias = "to")]
    pub(crate) until: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct FilterArgs {
    /// Only this service (service.name).
    #[arg(long)]
    pub(crate) service: Option<String>,
    /// Only this tool.
    #[arg(long)]
    pub(crate) tool: Option<String>,
    /// Only this target.
    #[arg(long)]
    pub(crate) target: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
