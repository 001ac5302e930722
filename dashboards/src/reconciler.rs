//! The reconciliation loop: every `reconcile.every`, `candor reconcile` over the schedule's window
//! ([`crate::reconcile`]), reading the tables and the Kafka tail as the forensic view does; the
//! newest result is kept in the shared state, where the panel, `/metrics` and the
//! `reconcile_mismatch` rule read it.

use std::sync::Arc;
use std::time::Duration;

use candor_query::commands::{self, Filters, ReconcileQuery};
use candor_query::reader::{ReadOptions, Reader};
use candor_query::tail::TailSettings;
use candor_query::window::{Micros, Window, now, rfc3339};
use candor_records::tables::Table;

use crate::forensic::ForensicSettings;
use crate::reconcile::{LOOKBACK, MAX_ROWS, Run, SLACK, Schedule};
use crate::state::Shared;
use crate::sync::lock;

/// How long one run may take before it is recorded as failed.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// Where and when reconciliation runs.
#[derive(Debug, Clone)]
pub struct ReconcileSettings {
    /// Where it reads: the forensic view's tables, brokers, tail limits and client settings.
    pub read: ForensicSettings,
    /// When, and over what window.
    pub schedule: Schedule,
}

/// Runs the reconciliation every `settings.schedule.every` until the process ends. The
/// schedule must have passed [`Schedule::check`].
pub async fn run(settings: ReconcileSettings, shared: Arc<Shared>) {
    let mut ticker = tokio::time::interval(settings.schedule.every);
    // A run longer than the period delays the next one instead of starting a burst.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let at = now();
        let window = settings.schedule.window_at(at);
        let result = match tokio::time::timeout(RUN_TIMEOUT, once(&settings, at, window)).await {
            Ok(result) => result,
            Err(_) => Run::failed(
                at,
                window,
                format!(
                    "it did not finish within {}",
                    humantime::format_duration(RUN_TIMEOUT)
                ),
            ),
        };
        lock(&shared.reconcile).record(result);
    }
}

/// One run at `at` over `window`: the counts and the events tables with their Kafka tail.
async fn once(settings: &ReconcileSettings, at: Micros, window: Window) -> Run {
    let read = &settings.read;
    let reader = Reader::open(ReadOptions {
        root: read.root.clone(),
        tail: Some(TailSettings {
            brokers: read.brokers.clone(),
            timeout: read.timeout,
            max_records: read.max_records,
            client: read.client.clone(),
            dedupe_window: read.dedupe_window,
        }),
        tables: vec![Table::OutcomeEvents, Table::OutcomeCounts],
    })
    .await;
    // A window that starts before the first heartbeat read (a pipeline younger than the range,
    // or history past retention) is checked from that heartbeat on: before it nothing can be
    // reconciled, and the run says where it started.
    let mut coverage = reader.coverage(Some(window)).await;
    if let Some(first) = coverage.start_at_first_heartbeat() {
        coverage.notes.push(format!(
            "the first collector heartbeat read is at {}: the run checks from there, as nothing \
             is known before it",
            rfc3339(first)
        ));
    }
    let checked = coverage.window.unwrap_or(window);
    let query = ReconcileQuery {
        window: checked,
        filters: Filters::default(),
        slack: SLACK,
        lookback: LOOKBACK,
    };
    let answer = commands::reconcile(&reader, &query)
        .await
        .map_err(|err| err.to_string());
    Run::new(at, checked, coverage, answer, MAX_ROWS)
}
