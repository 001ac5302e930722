//! The state the stream, the table watcher, the reconciliation, the alert loop and the web server
//! share.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use candor_query::window::Micros;
use candor_records::tables::Table;

use crate::access::Access;
use crate::alerts::Alerts;
use crate::health::{Hop, HopName};
use crate::model::{CollectorSeen, MINUTE, Model, SECOND};
use crate::reconcile::ReconcileState;
use crate::rules::Rule;
use crate::sync::lock;

/// How old each hop's evidence may get before it is STALE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Staleness {
    /// Collector heartbeats; at least three of the interval the heartbeats promise.
    pub collector: Micros,
    /// The dashboards' own contact with Kafka.
    pub kafka: Micros,
    /// The tables' committed watermark (the compactor writes a file per minute by default).
    pub table: Micros,
}

impl Default for Staleness {
    fn default() -> Self {
        Self {
            collector: 30 * SECOND,
            kafka: 30 * SECOND,
            table: 5 * MINUTE,
        }
    }
}

/// What the Kafka consumer and the table watcher last saw.
#[derive(Debug, Default, Clone)]
pub struct PipelineInputs {
    /// The consumer's newest successful contact with the brokers.
    pub kafka_contact: Option<Micros>,
    /// The consumer's newest error, while it lasts.
    pub kafka_error: Option<String>,
    /// The Kafka timestamp of the newest record read.
    pub newest_record: Option<Micros>,
    /// The next offset the consumer will read, per topic and partition: everything before it
    /// was read.
    pub next_offsets: BTreeMap<(Table, i32), i64>,
    /// Records read per topic.
    pub records: BTreeMap<Table, u64>,
    /// The newest heartbeat the tables hold: how far the compactor has committed.
    pub table_watermark: Option<Micros>,
    /// The newest row time of each table, from its log.
    pub table_newest: BTreeMap<Table, Micros>,
    /// Records in Kafka the tables do not hold yet, per topic (the consumer's offsets minus
    /// the tables' stored positions).
    pub table_lag: BTreeMap<Table, u64>,
    /// Why the tables could not be read, while it lasts.
    pub table_error: Option<String>,
    /// Whether the stream has read every partition up to where it ended when the stream
    /// assigned it (the brokers' history replayed); set once, and stays.
    pub caught_up: bool,
    /// When the tables' part of the history was read into the model ([`crate::history`]);
    /// `None` while it is read. The stream starts after it.
    pub history_read: Option<Micros>,
    /// Records neither the tables nor the brokers hold, per topic: Kafka deleted them before the
    /// compactor stored them (the offsets between a table's position and the oldest the brokers
    /// keep).
    pub history_lost: BTreeMap<Table, u64>,
}

/// Notifications sent and failed since start.
#[derive(Debug, Default)]
pub struct NotificationCounts {
    /// Acknowledged by the receiver.
    pub delivered: AtomicU64,
    /// Not acknowledged after every retry.
    pub failed: AtomicU64,
}

impl NotificationCounts {
    /// (delivered, failed).
    pub fn get(&self) -> (u64, u64) {
        (
            self.delivered.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

/// Writes to the state store since start.
#[derive(Debug, Default)]
pub struct SaveCounts {
    /// Written durably.
    pub saved: AtomicU64,
    /// Not written (the error is logged).
    pub failed: AtomicU64,
}

/// Reads of an Alertmanager receiver's silences since start ([`crate::silences`]).
#[derive(Debug, Default)]
pub struct ReadCounts {
    /// Answered.
    pub read: AtomicU64,
    /// Not answered after every retry.
    pub failed: AtomicU64,
}

/// Everything shared.
#[derive(Debug)]
pub struct Shared {
    /// The stream's model.
    pub model: Mutex<Model>,
    /// What the consumer and the watcher saw.
    pub pipeline: Mutex<PipelineInputs>,
    /// The alert instances.
    pub alerts: Mutex<Alerts>,
    /// What reconciliation found.
    pub reconcile: Mutex<ReconcileState>,
    /// The validated rules.
    pub rules: Vec<Rule>,
    /// The thresholds.
    pub staleness: Staleness,
    /// When the dashboards started.
    pub started: Micros,
    /// Notification results.
    pub notifications: NotificationCounts,
    /// Whether any webhook is configured.
    pub has_receivers: bool,
    /// Who may read the pages, the API and `/metrics`, and the refusals counted.
    pub access: Arc<Access>,
    /// Writes of the alert instances to the state store.
    pub state_saves: SaveCounts,
    /// Writes of the counters to the state store.
    pub counter_saves: SaveCounts,
    /// Reads of the Alertmanager receivers' silences.
    pub silence_reads: ReadCounts,
}

impl Shared {
    /// The state around `model`, `alerts` and `rules` of a process started at `started`, with
    /// the default staleness thresholds and no receiver, before anything of the pipeline is
    /// seen.
    pub fn new(
        model: Model,
        alerts: Alerts,
        rules: Vec<Rule>,
        access: Arc<Access>,
        started: Micros,
    ) -> Self {
        Self {
            model: Mutex::new(model),
            pipeline: Mutex::default(),
            alerts: Mutex::new(alerts),
            reconcile: Mutex::default(),
            rules,
            staleness: Staleness::default(),
            started,
            notifications: NotificationCounts::default(),
            has_receivers: false,
            access,
            state_saves: SaveCounts::default(),
            counter_saves: SaveCounts::default(),
            silence_reads: ReadCounts::default(),
        }
    }

    /// Whether the model holds its whole history: the tables' part read, and the stream caught
    /// up with what the brokers held when it started. Until then the rules wait and `/metrics`
    /// leaves the counters out, which a half-read history would show lower than the process
    /// before this one did (a reset, to Prometheus). When the brokers have not been reached for
    /// the Kafka hop's staleness threshold since the tables were read, the stream cannot catch
    /// up, and the history counts as ready: waiting longer would hide the pipeline's own
    /// staleness.
    pub fn history_ready(&self, now: Micros) -> bool {
        self.history_ready_in(&lock(&self.pipeline), now)
    }

    /// [`Self::history_ready`] judged from `pipeline`, a copy taken under its lock.
    pub fn history_ready_in(&self, pipeline: &PipelineInputs, now: Micros) -> bool {
        let Some(read) = pipeline.history_read else {
            return false;
        };
        if pipeline.caught_up {
            return true;
        }
        let contact = pipeline
            .kafka_contact
            .map_or(read, |contact| contact.max(read));
        now.saturating_sub(contact) >= self.staleness.kafka
    }
}

impl Shared {
    /// Every hop's freshness at `now`.
    pub fn hops(&self, now: Micros) -> Vec<Hop> {
        let pipeline = lock(&self.pipeline).clone();
        let newest_beat = lock(&self.model).newest_heartbeat().cloned();
        self.hops_in(&pipeline, newest_beat.as_ref(), now)
    }

    /// [`Self::hops`] judged from `pipeline` and the model's newest heartbeat, both taken under
    /// their locks.
    pub fn hops_in(
        &self,
        pipeline: &PipelineInputs,
        newest_beat: Option<&CollectorSeen>,
        now: Micros,
    ) -> Vec<Hop> {
        let collector_after = newest_beat.map_or(self.staleness.collector, |beat| {
            self.staleness
                .collector
                .max(candor_schema::time::silent_after(beat.interval_micros))
        });
        let collector_detail = match newest_beat {
            Some(beat) => format!(
                "newest heartbeat from {} (every {} s)",
                beat.id,
                beat.interval_micros / SECOND
            ),
            None => "no collector heartbeat read from Kafka".into(),
        };
        let kafka_detail = {
            let newest = pipeline.newest_record.map_or_else(
                || "no record read yet".to_owned(),
                |at| format!("newest record {}", crate::health::when(at)),
            );
            match &pipeline.kafka_error {
                Some(err) => format!("{newest}; error: {err}"),
                None => newest,
            }
        };
        let lag: u64 = pipeline.table_lag.values().sum();
        let table_detail = match &pipeline.table_error {
            Some(err) => format!("tables not readable: {err}"),
            None if pipeline.table_watermark.is_some() => {
                format!(
                    "committed watermark (newest stored heartbeat); {lag} record(s) in Kafka not yet stored"
                )
            }
            None => "no heartbeat stored in the tables yet".into(),
        };
        vec![
            Hop::judge(
                HopName::Collector,
                newest_beat.map(|beat| beat.time),
                collector_after,
                now,
                collector_detail,
            ),
            Hop::judge(
                HopName::Kafka,
                pipeline.kafka_contact,
                self.staleness.kafka,
                now,
                kafka_detail,
            ),
            Hop::judge(
                HopName::Table,
                pipeline.table_watermark,
                self.staleness.table,
                now,
                table_detail,
            ),
        ]
    }
}
