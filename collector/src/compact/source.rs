//! Reading the pipeline's topics: a consumer-group member on its own thread, which hands owned
//! records to the async side and starts every assigned partition where the tables say.
//!
//! On assignment the rebalance callback reads each partition's position from its table and
//! assigns the partition there; Kafka's committed offset is never the start. Only when the
//! table cannot be read does a partition start from the beginning of the topic, which is safe
//! (a commit leaves out what the table holds) but slow, and is logged. On revocation the async
//! side is told first, so that it drops the unwritten rows of the partition.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use candor_kafka::GroupConsumerSettings;
use candor_records::tables::Table;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer as _, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Message as _};
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc;

use super::engine::Source;
use super::metrics::CompactMetrics;
use candor_records::rows::SourceRecord;

/// Records read per hand-over to the async side.
const CHUNK: usize = 4096;

/// What the reader thread tells the async side. Records read before a partition's latest
/// assignment or seek may arrive after the message announcing it; their older generation tells
/// them apart.
#[derive(Debug)]
pub enum Input {
    /// Records read.
    Records(Vec<SourceRecord>),
    /// Partitions assigned.
    Assigned(Vec<Assignment>),
    /// Partitions taken away.
    Revoked(Vec<Source>),
    /// Partitions sought back: the position and the new generation.
    Sought(Vec<(Source, i64, u64)>),
}

/// An id the table already holds: `(id, offset, kafka_micros)`.
pub type StoredId = (String, i64, i64);

/// One partition assigned here.
#[derive(Debug)]
pub struct Assignment {
    /// The partition.
    pub source: Source,
    /// Where reading starts: the table's position (0 when it has none).
    pub position: i64,
    /// The partition's new generation.
    pub generation: u64,
    /// Ids of the partition the table stored within the dedupe window, oldest first.
    pub stored_ids: Vec<StoredId>,
}

/// What the async side asks of the reader thread.
#[derive(Debug)]
pub enum Control {
    /// Commit these positions to Kafka, as a hint for lag tools (the tables hold the truth).
    CommitOffsets(Vec<(Source, i64)>),
    /// Read these partitions again from these positions.
    Seek(Vec<(Source, i64)>),
    /// Stop fetching (commits are failing; memory must not grow).
    Pause,
    /// Fetch again.
    Resume,
    /// Leave the group and end the thread.
    Stop,
}

/// Reads the tables' positions of partitions; blocking.
/// Reads from the tables, for partitions being assigned, their positions and the ids stored
/// within the dedupe window; blocking.
pub type PositionLookup = Box<
    dyn Fn(&[Source]) -> Result<HashMap<Source, (Option<i64>, Vec<StoredId>)>, String>
        + Send
        + Sync,
>;

struct Context {
    positions: PositionLookup,
    input: mpsc::Sender<Input>,
    metrics: Arc<CompactMetrics>,
    /// Per partition, bumped at every assignment and seek; only this thread touches it (the
    /// rebalance callback runs inside `poll`), the mutex just makes the context `Sync`.
    generations: std::sync::Mutex<HashMap<Source, u64>>,
    /// How many times `generations` changed: the reader's [`LastGeneration`] is good while it
    /// stays the same.
    changes: AtomicU64,
}

/// The generation of the partition whose record was read last, so that a run of records from
/// one partition looks it up once.
#[derive(Default)]
struct LastGeneration {
    source: Option<Source>,
    generation: u64,
    /// [`Context::changes`] when it was looked up.
    changes: u64,
}

impl Context {
    fn next_generation(&self, source: Source) -> u64 {
        let mut generations = self
            .generations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let generation = generations.entry(source).or_insert(0);
        *generation += 1;
        self.changes.fetch_add(1, Ordering::Relaxed);
        *generation
    }

    fn generation(&self, source: Source, last: &mut LastGeneration) -> u64 {
        // Relaxed: the generations change only on this thread (see `generations`).
        let changes = self.changes.load(Ordering::Relaxed);
        if last.source != Some(source) || last.changes != changes {
            let generation = self
                .generations
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&source)
                .copied()
                .unwrap_or(0);
            *last = LastGeneration {
                source: Some(source),
                generation,
                changes,
            };
        }
        last.generation
    }
}

impl ClientContext for Context {
    fn stats(&self, statistics: Statistics) {
        // Only partitions this member fetches ("none": not assigned here).
        for (topic, stats) in &statistics.topics {
            for (partition, p) in &stats.partitions {
                if *partition >= 0 && p.consumer_lag >= 0 && p.fetch_state != "none" {
                    self.metrics.set_lag(topic, *partition, p.consumer_lag);
                }
            }
        }
    }
}

impl ConsumerContext for Context {
    fn commit_callback(&self, result: rdkafka::error::KafkaResult<()>, _: &TopicPartitionList) {
        if let Err(err) = result {
            // Only a hint for lag tools, but a failing one is shown.
            self.metrics.error("offset_commit", err);
        }
    }

    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let sources: Vec<Source> = tpl
            .elements()
            .iter()
            .filter_map(|e| Some((Table::from_topic(e.topic())?, e.partition())))
            .collect();
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                let mut positions = (self.positions)(&sources).unwrap_or_else(|err| {
                    self.metrics.error(
                        "position_lookup",
                        format!(
                            "cannot read the tables' positions ({err}); reading from the beginning"
                        ),
                    );
                    HashMap::new()
                });
                let mut assigned = Vec::new();
                for source in &sources {
                    let (position, stored_ids) = positions.remove(source).unwrap_or_default();
                    let offset = position.map_or(Offset::Beginning, Offset::Offset);
                    if let Err(err) = tpl.set_partition_offset(source.0.topic(), source.1, offset) {
                        self.metrics.error("assign", err);
                    }
                    assigned.push(Assignment {
                        source: *source,
                        position: position.unwrap_or(0),
                        generation: self.next_generation(*source),
                        stored_ids,
                    });
                }
                let positions: Vec<(Source, i64)> =
                    assigned.iter().map(|a| (a.source, a.position)).collect();
                tracing::info!(assigned = ?positions, "partitions assigned at the tables' positions");
                // Told before the first record of these partitions can be read.
                let _ = self.input.blocking_send(Input::Assigned(assigned));
                if let Err(err) = consumer.assign(tpl) {
                    self.metrics.error("assign", err);
                }
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                tracing::info!(?sources, "partitions revoked");
                let _ = self.input.blocking_send(Input::Revoked(sources));
                if let Err(err) = consumer.unassign() {
                    self.metrics.error("assign", err);
                }
            }
            other => {
                self.metrics.error("rebalance", format!("{other:?}"));
                let _ = self.input.blocking_send(Input::Revoked(sources));
                if let Err(err) = consumer.unassign() {
                    self.metrics.error("assign", err);
                }
            }
        }
    }
}

/// Starts the reader thread; it ends on [`Control::Stop`] or when `input` closes.
pub fn start(
    settings: &GroupConsumerSettings,
    positions: PositionLookup,
    input: mpsc::Sender<Input>,
    control: std_mpsc::Receiver<Control>,
    metrics: Arc<CompactMetrics>,
) -> Result<std::thread::JoinHandle<()>, KafkaError> {
    let context = Context {
        positions,
        input: input.clone(),
        metrics: Arc::clone(&metrics),
        generations: std::sync::Mutex::new(HashMap::new()),
        changes: AtomicU64::new(0),
    };
    let consumer: BaseConsumer<Context> = settings.config().create_with_context(context)?;
    let topics: Vec<&str> = Table::ALL.iter().map(|t| t.topic()).collect();
    consumer.subscribe(&topics)?;
    let mut stranded = Stranded::new(&settings.group_id, 3 * settings.session_timeout);
    std::thread::Builder::new()
        .name("compactor-kafka".into())
        .spawn(move || read_loop(&consumer, &input, &control, &metrics, &mut stranded))
        .map_err(|err| KafkaError::ClientCreation(err.to_string()))
}

/// Watches for this member being left with no partitions while it is its group's only member
/// (or while the broker cannot say), which no broker should leave a group in. Tansu 0.6 does: when a member dies and another joins
/// before the dead one expired, it expires it later and keeps the group forming without telling
/// the live member to join again, so nothing would ever be read. A fresh join ends it; each is
/// counted (`errors_total{reason="stranded"}`) and logged.
struct Stranded {
    group: String,
    /// How long an empty assignment may last before the group is looked at.
    after: Duration,
    empty_since: Option<Instant>,
    checked: Instant,
}

impl Stranded {
    fn new(group: &str, after: Duration) -> Self {
        Self {
            group: group.to_owned(),
            after,
            empty_since: None,
            checked: Instant::now(),
        }
    }

    /// At most once a second: joins the group again when this member has held no partition for
    /// `after` and the group has no other member, or the broker cannot describe the group.
    fn check(&mut self, consumer: &BaseConsumer<Context>, metrics: &CompactMetrics) {
        if self.checked.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.checked = Instant::now();
        let empty = consumer.assignment().is_ok_and(|a| a.count() == 0);
        if !empty {
            self.empty_since = None;
            return;
        }
        let since = *self.empty_since.get_or_insert_with(Instant::now);
        if since.elapsed() < self.after {
            return;
        }
        // Looked at again only after another `after`.
        self.empty_since = None;
        // A broker that cannot describe the group (Tansu 0.6 closes the connection) gets the
        // fresh join too: with several members, each joins at most once per `after`.
        let why = match consumer.fetch_group_list(Some(&self.group), Duration::from_secs(5)) {
            Ok(list) => {
                let members = list
                    .groups()
                    .iter()
                    .find(|g| g.name() == self.group)
                    .map(|g| g.members().len());
                if members != Some(1) {
                    return;
                }
                "alone in the group".to_owned()
            }
            Err(err) => format!("the group could not be described ({err})"),
        };
        metrics.error(
            "stranded",
            format!(
                "no partition for {:?} in group {}, {why}; joining it again",
                self.after, self.group
            ),
        );
        consumer.unsubscribe();
        let topics: Vec<&str> = Table::ALL.iter().map(|t| t.topic()).collect();
        if let Err(err) = consumer.subscribe(&topics) {
            metrics.error("kafka", err);
        }
    }
}

fn read_loop(
    consumer: &BaseConsumer<Context>,
    input: &mpsc::Sender<Input>,
    control: &std_mpsc::Receiver<Control>,
    metrics: &CompactMetrics,
    stranded: &mut Stranded,
) {
    let mut chunk = Vec::with_capacity(CHUNK);
    let mut last = LastGeneration::default();
    let mut take = |chunk: &mut Vec<SourceRecord>, message: &BorrowedMessage<'_>| {
        let Some(topic) = Table::from_topic(message.topic()) else {
            return;
        };
        chunk.push(SourceRecord {
            topic,
            partition: message.partition(),
            offset: message.offset(),
            timestamp_ms: message.timestamp().to_millis(),
            payload: message.payload().map(<[u8]>::to_vec),
            generation: consumer
                .context()
                .generation((topic, message.partition()), &mut last),
        });
    };
    loop {
        stranded.check(consumer, metrics);
        loop {
            match control.try_recv() {
                Ok(Control::CommitOffsets(positions)) => {
                    commit_offsets(consumer, &positions, metrics);
                }
                Ok(Control::Seek(positions)) => {
                    let mut sought = Vec::new();
                    for ((topic, partition), offset) in positions {
                        let generation = consumer.context().next_generation((topic, partition));
                        let seek = consumer.seek(
                            topic.topic(),
                            partition,
                            Offset::Offset(offset),
                            Duration::from_secs(10),
                        );
                        match seek {
                            Ok(()) => sought.push(((topic, partition), offset, generation)),
                            // The partition stays stalled (its records are of an older
                            // generation) until the next assignment, and that is shown.
                            Err(err) => metrics.error("seek", err),
                        }
                    }
                    if input.blocking_send(Input::Sought(sought)).is_err() {
                        return;
                    }
                }
                Ok(Control::Pause) => set_paused(consumer, true, metrics),
                Ok(Control::Resume) => set_paused(consumer, false, metrics),
                Ok(Control::Stop) | Err(std_mpsc::TryRecvError::Disconnected) => {
                    consumer.unsubscribe();
                    return;
                }
                Err(std_mpsc::TryRecvError::Empty) => break,
            }
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                take(&mut chunk, &message);
                // What librdkafka already holds joins the chunk without a wait; the control
                // messages and the group check above wait for the chunk to be handed over.
                while chunk.len() < CHUNK {
                    match consumer.poll(Duration::ZERO) {
                        Some(Ok(message)) => take(&mut chunk, &message),
                        Some(Err(err)) => {
                            metrics.error("kafka", err);
                            break;
                        }
                        None => break,
                    }
                }
            }
            Some(Err(err)) => metrics.error("kafka", err),
            None => {}
        }
        if !chunk.is_empty() {
            let records = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
            if input.blocking_send(Input::Records(records)).is_err() {
                return;
            }
        }
    }
}

/// Pauses or resumes fetching on every assigned partition; polling goes on, so rebalances are
/// still answered.
fn set_paused(consumer: &BaseConsumer<Context>, paused: bool, metrics: &CompactMetrics) {
    let assignment = match consumer.assignment() {
        Ok(assignment) => assignment,
        Err(err) => return metrics.error("pause", err),
    };
    let result = if paused {
        consumer.pause(&assignment)
    } else {
        consumer.resume(&assignment)
    };
    if let Err(err) = result {
        metrics.error("pause", err);
    }
}

fn commit_offsets(
    consumer: &BaseConsumer<Context>,
    positions: &[(Source, i64)],
    metrics: &CompactMetrics,
) {
    let mut list = TopicPartitionList::new();
    for ((topic, partition), offset) in positions {
        if list
            .add_partition_offset(topic.topic(), *partition, Offset::Offset(*offset))
            .is_err()
        {
            return;
        }
    }
    super::fault::reach(super::fault::Point::BeforeOffsetCommit, None);
    if let Err(err) = consumer.commit(&list, CommitMode::Async) {
        // Only a hint for lag tools: the tables hold the positions.
        metrics.error("offset_commit", err);
    }
}
