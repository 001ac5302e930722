//! The dashboards' own Kafka consumer: every partition of the pipeline's topics, read from where
//! the tables' history ends ([`crate::history::Starts`]; where no table holds a topic, from the
//! beginning the brokers still hold), decoded with the compactor's decoder and applied to the
//! model. Offsets the brokers deleted before the compactor stored them are counted as lost.
//!
//! It runs on its own thread with a blocking consumer. Its consumer group (`candor-dashboards`
//! by default) is its own: it never moves the compactor's offsets, and its committed offsets
//! show its lag to any Kafka tool. Every contact with the brokers (a record, an end of
//! partition, a metadata answer) is evidence for the Kafka hop; an error is kept until the next
//! contact, so the banner can show it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use candor_kafka::{OffsetReset, Reader};
use candor_query::kafka_client::KafkaClientSettings;
use candor_query::window::now;
use candor_records::rows::{self, SourceRecord, TimeBounds};
use candor_records::tables::Table;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer as _};
use rdkafka::error::KafkaError;
use rdkafka::message::Message as _;
use rdkafka::{Offset, TopicPartitionList};

use crate::history::Starts;
use crate::state::Shared;
use crate::sync::lock;

/// How the consumer connects.
#[derive(Debug, Clone)]
pub struct StreamSettings {
    /// Bootstrap brokers.
    pub brokers: String,
    /// The consumer group its offsets are committed under.
    pub group: String,
    /// TLS, SASL and other client settings.
    pub client: KafkaClientSettings,
}

/// Records applied per lock of the model.
const BATCH: usize = 2048;
/// How often the brokers are asked for metadata (contact evidence and new partitions).
const METADATA_EVERY: Duration = Duration::from_secs(5);
/// How often the read offsets are committed to the group.
const COMMIT_EVERY: Duration = Duration::from_secs(5);

/// Runs the consumer until `stop` is set, starting each partition where `starts` says. Never
/// returns early: a broker that cannot be reached is retried, and the failure is visible as the
/// Kafka hop's error.
pub fn run(settings: StreamSettings, shared: Arc<Shared>, stop: Arc<AtomicBool>, starts: Starts) {
    let mut assigned: BTreeMap<(Table, i32), ()> = BTreeMap::new();
    // Where each partition ended when it was assigned: the stream has caught up once it has
    // read that far in every one.
    let mut catch_up_to: BTreeMap<(Table, i32), i64> = BTreeMap::new();
    let consumer = loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        match connect(&settings) {
            Ok(consumer) => break consumer,
            Err(err) => {
                note_error(&shared, format!("kafka client: {err}"));
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    };
    let bounds = TimeBounds {
        late_after_micros: 24 * 3_600_000_000,
        future_after_micros: 300_000_000,
    };
    let mut last_metadata: Option<Instant> = None;
    let mut last_commit = Instant::now();
    let mut batch = Vec::with_capacity(BATCH);
    // Ends of partition reported before the first record: each partition reports its end once
    // when it holds nothing.
    let mut ends = 0usize;
    let mut started = false;
    let mut caught_up = false;
    while !stop.load(Ordering::Relaxed) {
        if last_metadata.is_none_or(|at| at.elapsed() >= METADATA_EVERY) {
            last_metadata = Some(Instant::now());
            match assign_new(&consumer, &mut assigned, &mut catch_up_to, &starts, &shared) {
                Ok(()) => {
                    note_contact(&shared);
                    // The brokers hold none of the topics yet: there is nothing to catch up on.
                    if assigned.is_empty() && !caught_up {
                        caught_up = note_caught_up(&shared, &mut catch_up_to);
                    }
                }
                Err(err) => note_error(&shared, err),
            }
        }
        if assigned.is_empty() {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        batch.clear();
        let mut contact = false;
        while batch.len() < BATCH {
            let timeout = if batch.is_empty() {
                Duration::from_millis(200)
            } else {
                Duration::ZERO
            };
            match consumer.poll(timeout) {
                None => break,
                Some(Ok(message)) => {
                    contact = true;
                    let Some(table) = Table::from_topic(message.topic()) else {
                        continue;
                    };
                    batch.push(SourceRecord {
                        topic: table,
                        partition: message.partition(),
                        offset: message.offset(),
                        timestamp_ms: message.timestamp().to_millis(),
                        payload: message.payload().map(<[u8]>::to_vec),
                        generation: 0,
                    });
                }
                Some(Err(KafkaError::PartitionEOF(_))) => {
                    contact = true;
                    ends += 1;
                }
                Some(Err(err)) => {
                    note_error(&shared, err.to_string());
                    break;
                }
            }
        }
        if contact {
            note_contact(&shared);
        }
        if !started && batch.is_empty() && ends >= assigned.len() {
            started = true;
            note_empty_topics(&shared);
        }
        started |= !batch.is_empty();
        if !batch.is_empty() {
            apply(&shared, &batch, &bounds);
        }
        if !caught_up {
            caught_up = note_caught_up(&shared, &mut catch_up_to);
        }
        if last_commit.elapsed() >= COMMIT_EVERY {
            last_commit = Instant::now();
            commit(&consumer, &shared);
        }
    }
    commit(&consumer, &shared);
}

fn connect(settings: &StreamSettings) -> Result<BaseConsumer, KafkaError> {
    // Partitions are assigned, not subscribed, so every replica reads every partition; offsets
    // are committed by hand once applied. A start the brokers no longer hold (said and counted
    // at assignment) reads from the oldest they keep, never from the newest.
    let reader = Reader {
        bootstrap_servers: &settings.brokers,
        id: &settings.group,
        reset: OffsetReset::Earliest,
        stops_at_end: false,
    };
    settings.client.reader_config(&reader).create()
}

/// Assigns the partitions not assigned yet, each from where `starts` says, and notes where each
/// ends now (`catch_up_to`; a partition whose end cannot be read is left out, and so does not
/// hold the catch-up back).
fn assign_new(
    consumer: &BaseConsumer,
    assigned: &mut BTreeMap<(Table, i32), ()>,
    catch_up_to: &mut BTreeMap<(Table, i32), i64>,
    starts: &Starts,
    shared: &Shared,
) -> Result<(), String> {
    let metadata = consumer
        .fetch_metadata(None, Duration::from_secs(5))
        .map_err(|err| format!("metadata: {err}"))?;
    // The brokers answered: while the partitions' starts and ends are read, which may take a
    // while, the stream is not out of reach.
    note_contact(shared);
    let mut added = TopicPartitionList::new();
    let mut problem = None;
    for topic in metadata.topics() {
        let Some(table) = Table::from_topic(topic.name()) else {
            continue;
        };
        for partition in topic.partitions() {
            if assigned.contains_key(&(table, partition.id())) {
                continue;
            }
            // Where the table's records end; without it (a table that cannot be read now) the
            // partition waits for the next metadata round rather than reading it all again.
            let start = match starts.of(table, partition.id()) {
                Ok(start) => start,
                Err(err) => {
                    problem = Some(err);
                    continue;
                }
            };
            assigned.insert((table, partition.id()), ());
            let mut offset = start.map_or(Offset::Beginning, Offset::Offset);
            match consumer.fetch_watermarks(table.topic(), partition.id(), Duration::from_secs(5)) {
                Ok((low, high)) => {
                    if let Some(start) = start.filter(|&start| start < low) {
                        let lost = u64::try_from(low - start).unwrap_or(0);
                        tracing::warn!(
                            topic = table.topic(),
                            partition = partition.id(),
                            lost,
                            "offsets {start}..{low} were deleted from Kafka before the \
                             compactor stored them: neither the tables nor the brokers hold them"
                        );
                        *lock(&shared.pipeline)
                            .history_lost
                            .entry(table)
                            .or_default() += lost;
                        offset = Offset::Offset(low);
                    }
                    if high > start.unwrap_or(low).max(low) {
                        catch_up_to.insert((table, partition.id()), high);
                    }
                }
                Err(err) => tracing::warn!(
                    topic = table.topic(),
                    partition = partition.id(),
                    error = %err,
                    "the partition's end could not be read: the rules do not wait for it"
                ),
            }
            added
                .add_partition_offset(table.topic(), partition.id(), offset)
                .map_err(|err| err.to_string())?;
        }
    }
    if added.count() > 0 {
        consumer
            .incremental_assign(&added)
            .map_err(|err| format!("assign: {err}"))?;
    }
    problem.map_or(Ok(()), Err)
}

fn apply(shared: &Shared, batch: &[SourceRecord], bounds: &TimeBounds) {
    let at = now();
    let mut newest = None;
    let mut offsets = Vec::with_capacity(batch.len());
    {
        let mut model = lock(&shared.model);
        if model.holds_from(at).is_none() {
            // The first records read are the oldest the brokers hold: the model is complete
            // from their time on.
            let first = batch
                .iter()
                .filter_map(|record| record.timestamp_ms)
                .min()
                .map_or(at, |ms| ms.saturating_mul(1000));
            model.hold_from(first.min(at));
        }
        for record in batch {
            let (meta, row) = rows::decode(record, bounds, "candor-dashboards");
            model.apply(&meta, &row, at);
            newest = Some(newest.map_or(meta.kafka_micros, |n: i64| n.max(meta.kafka_micros)));
            offsets.push((record.topic, record.partition, record.offset));
        }
        model.prune(at);
    }
    let mut pipeline = lock(&shared.pipeline);
    for (table, partition, offset) in offsets {
        pipeline.next_offsets.insert((table, partition), offset + 1);
        *pipeline.records.entry(table).or_default() += 1;
    }
    if let Some(newest) = newest {
        pipeline.newest_record = Some(pipeline.newest_record.map_or(newest, |n| n.max(newest)));
    }
}

/// Drops from `catch_up_to` every partition read to its mark; when none is left, the stream has
/// caught up: said to the shared state, and returned.
fn note_caught_up(shared: &Shared, catch_up_to: &mut BTreeMap<(Table, i32), i64>) -> bool {
    let mut pipeline = lock(&shared.pipeline);
    catch_up_to.retain(|key, end| pipeline.next_offsets.get(key).is_none_or(|next| next < end));
    pipeline.caught_up = catch_up_to.is_empty();
    pipeline.caught_up
}

fn note_contact(shared: &Shared) {
    let mut pipeline = lock(&shared.pipeline);
    pipeline.kafka_contact = Some(now());
    pipeline.kafka_error = None;
}

/// Every assigned partition was read to its end without a record: the model is complete from
/// now on.
fn note_empty_topics(shared: &Shared) {
    let mut model = lock(&shared.model);
    let at = now();
    if model.holds_from(at).is_none() {
        model.hold_from(at);
    }
}

fn note_error(shared: &Shared, err: String) {
    lock(&shared.pipeline).kafka_error = Some(err);
}

fn commit(consumer: &BaseConsumer, shared: &Shared) {
    let offsets = lock(&shared.pipeline).next_offsets.clone();
    if offsets.is_empty() {
        return;
    }
    let mut list = TopicPartitionList::new();
    for ((table, partition), next) in offsets {
        if list
            .add_partition_offset(table.topic(), partition, Offset::Offset(next))
            .is_err()
        {
            continue;
        }
    }
    // A failed commit only makes the lag other tools show stale; the model is unaffected.
    if let Err(err) = consumer.commit(&list, CommitMode::Async) {
        note_error(shared, format!("commit: {err}"));
    }
}
