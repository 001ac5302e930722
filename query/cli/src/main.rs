//! `candor`: silent-failure rates, spikes and incident forensics over Candor's tables, each answer
//! stating its own coverage.
//!
//! Exit codes: 0 rows found, 1 a confirmed empty answer, 3 partial (a source could not be read,
//! or the window reaches past the newest data any source holds), 4 access failure (no source
//! could be read), 2 usage error.

mod args;
mod canary;
mod demo;
mod probe;
mod question;

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use candor_query::answer::{Format, Layout, Report, Rows};
use candor_query::commands;
use candor_query::kafka_client::KafkaClientSettings;
use candor_query::reader::{ReadOptions, Reader};
use candor_query::store::TableRoot;
use candor_query::tail::TailSettings;
use candor_query::window::{self, micros_of};
use clap::Parser;

use args::{Cli, Command, Global};
use question::{Question, Usage};

/// The process's allocator (see the workspace manifest for why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Windows that end within this of now read the Kafka tail unless `--no-live` is given.
const LIVE_REACH: Duration = Duration::from_secs(300);

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
