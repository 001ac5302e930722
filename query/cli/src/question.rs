//! A question: a subcommand with every argument parsed and checked, before anything is read.

use candor_query::commands::{
    self, Filters, OperationsQuery, RatesQuery, ReconcileQuery, SpikesQuery,
};
use candor_query::rates::SpikeRule;
use candor_query::window::{self, TimeArg, Window, micros_of};
use candor_records::tables::Table;

use crate::args::{Command, FilterArgs, WindowArgs};

/// A usage error: exit 2 with the message.
pub(crate) struct Usage(pub(crate) String);

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
pub(crate) enum Question {
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
    pub(crate) fn parse(command: Command, now: i64) -> Result<Self, Usage> {
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
    pub(crate) fn plan(&self) -> (Vec<Table>, Option<Window>) {
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
    pub(crate) fn instances(&self) -> Option<Option<&Filters>> {
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

    pub(crate) fn name(&self) -> &'static str {
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
    pub(crate) fn nothing(&self) -> &'static str {
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
