//! The Kafka tail: records the compactor has not stored yet, read from each table's position to
//! the end of its partition as it was when reading began.
//!
//! The consumers only assign partitions and never commit, so they change no consumer group's
//! offsets. A partition's end is where the broker reports end-of-partition while reading (not a
//! separate offsets request, which a Kafka-API broker was seen to answer wrongly for batched
//! records). Records become rows with the compactor's own decoder ([`candor_records::rows`]), so
//! the tail and the table agree on every column. Whatever could not be read is said: a partition
//! whose records Kafka already deleted before the compactor stored them, a position past the
//! partition's end (an error from the broker), or a read that ran out of time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use candor_kafka::{OffsetReset, Reader};
use candor_records::rows::{self, Meta, Row, SourceRecord, TimeBounds};
use candor_records::tables::Table;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::error::KafkaError;
use rdkafka::message::Message as _;
use rdkafka::{Offset, TopicPartitionList};

use crate::kafka_client::KafkaClientSettings;

/// Who decoded a record the tail could not read, in its `rejected` row.
const READER_ID: &str = "candor-query";

/// Where and how long to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailSettings {
    /// Kafka bootstrap servers, `host:port[,host:port]`.
    pub brokers: String,
    /// How long reading the whole tail may take.
    pub timeout: Duration,
    /// At most this many records in all; past it the tail is incomplete.
    pub max_records: usize,
    /// TLS, SASL and other client settings.
    pub client: KafkaClientSettings,
    /// How long after a stored record a tail record with its id is a retried copy: the
    /// compactor's `dedupe.window`.
    pub dedupe_window: Duration,
}

impl TailSettings {
    /// How the tail's consumers read: never joining the group (partitions are assigned), never
    /// committing, to each partition's end and no further; a position past the end is an error
    /// to report, not a silent jump.
    fn reader(&self) -> Reader<'_> {
        Reader {
            bootstrap_servers: &self.brokers,
            id: READER_ID,
            reset: OffsetReset::Error,
            stops_at_end: true,
        }
    }
}

/// Why the tail could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum TailError {
    /// The client could not be made.
    #[error("kafka client: {0}")]
    Client(#[source] KafkaError),
    /// No metadata within the timeout: the brokers are unreachable.
    #[error("no answer from kafka at {brokers} within {timeout:?}: {source}")]
    Unreachable {
        /// The brokers.
        brokers: String,
        /// The timeout.
        timeout: Duration,
        /// The cause.
        source: KafkaError,
    },
    /// The topic does not exist.
    #[error("topic {0} does not exist on the brokers")]
    NoTopic(&'static str),
}

/// The range of one partition that was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PartitionRange {
    /// Partition.
    pub partition: i32,
    /// The table's position: where the tail should start.
    pub start: i64,
    /// First offset read (the table's position, or Kafka's oldest when that is later).
    pub from: i64,
    /// Offset after the last one read: the partition's end, once it was reached.
    pub to: i64,
}

/// The tail of one topic.
#[derive(Debug, Clone, Default)]
pub struct TopicTail {
    /// Decoded rows; a record that could not be decoded is a `rejected` row.
    pub rows: Vec<(Meta, Row)>,
    /// What was read, per partition.
    pub ranges: Vec<PartitionRange>,
    /// What could not be read, in words.
    pub problems: Vec<String>,
}

/// A connected tail reader.
pub struct Tail {
    consumer: BaseConsumer,
    settings: TailSettings,
    started: Instant,
}

impl Tail {
    /// Connects and fetches the partitions of `topics`. Blocking.
    pub fn connect(
        settings: TailSettings,
        topics: &[Table],
    ) -> Result<(Self, BTreeMap<Table, Vec<i32>>), TailError> {
        let started = Instant::now();
        let consumer: BaseConsumer = settings
            .client
            .reader_config(&settings.reader())
            .create()
            .map_err(TailError::Client)?;
        let mut partitions = BTreeMap::new();
        for &topic in topics {
            let left = settings.timeout.saturating_sub(started.elapsed());
            let metadata =
                consumer
                    .fetch_metadata(Some(topic.topic()), left)
                    .map_err(|source| TailError::Unreachable {
                        brokers: settings.brokers.clone(),
                        timeout: settings.timeout,
                        source,
                    })?;
            let ids: Vec<i32> = metadata
                .topics()
                .iter()
                .filter(|found| found.name() == topic.topic() && found.error().is_none())
                .flat_map(|found| found.partitions().iter().map(|p| p.id()))
                .collect();
            if ids.is_empty() {
                return Err(TailError::NoTopic(topic.topic()));
            }
            partitions.insert(topic, ids);
        }
        Ok((
            Self {
                consumer,
                settings,
                started,
            },
            partitions,
        ))
    }

    /// Reads every `(topic, partition)` of `starts` from its start offset to the partition's
    /// end. Blocking.
    pub fn read(&self, starts: &BTreeMap<(Table, i32), i64>) -> BTreeMap<Table, TopicTail> {
        let mut by_topic: BTreeMap<Table, Vec<(i32, i64)>> = BTreeMap::new();
        for (&(topic, partition), &start) in starts {
            by_topic.entry(topic).or_default().push((partition, start));
        }
        let mut records = 0usize;
        by_topic
            .into_iter()
            .map(|(topic, partitions)| (topic, self.read_topic(topic, &partitions, &mut records)))
            .collect()
    }

    /// One topic with its own consumer, so that an end-of-partition names one partition.
    fn read_topic(
        &self,
        topic: Table,
        partitions: &[(i32, i64)],
        records: &mut usize,
    ) -> TopicTail {
        let mut tail = TopicTail::default();
        let consumer: BaseConsumer = match self
            .settings
            .client
            .reader_config(&self.settings.reader())
            .create()
        {
            Ok(consumer) => consumer,
            Err(err) => {
                tail.problems.push(format!("kafka client: {err}"));
                return tail;
            }
        };
        let mut assignment = TopicPartitionList::new();
        let mut pending: BTreeMap<i32, i64> = BTreeMap::new();
        for &(partition, start) in partitions {
            let mut from = start;
            match self
                .consumer
                .fetch_watermarks(topic.topic(), partition, self.time_left())
            {
                Ok((low, _)) if start < low => {
                    tail.problems.push(format!(
                        "partition {partition}: offsets {start}..{low} were deleted from Kafka \
                         before the compactor stored them"
                    ));
                    from = low;
                }
                Ok(_) => {}
                Err(err) => tail.problems.push(format!(
                    "partition {partition}: its oldest offset could not be read: {err}"
                )),
            }
            tail.ranges.push(PartitionRange {
                partition,
                start,
                from,
                to: from,
            });
            match assignment.add_partition_offset(topic.topic(), partition, Offset::Offset(from)) {
                Ok(()) => {
                    pending.insert(partition, from);
                }
                Err(err) => tail.problems.push(format!(
                    "partition {partition}: could not be assigned: {err}"
                )),
            }
        }
        if pending.is_empty() {
            return tail;
        }
        if let Err(err) = consumer.assign(&assignment) {
            tail.problems
                .push(format!("its partitions could not be assigned: {err}"));
            return tail;
        }
        let bounds = TimeBounds {
            late_after_micros: 24 * 3_600_000_000,
            future_after_micros: 300_000_000,
        };
        let mut last_error: Option<String> = None;
        while !pending.is_empty() {
            let left = self.time_left();
            if left.is_zero() || *records >= self.settings.max_records {
                break;
            }
            let Some(polled) = consumer.poll(left.min(Duration::from_millis(200))) else {
                continue;
            };
            let message = match polled {
                Ok(message) => message,
                Err(KafkaError::PartitionEOF(partition)) => {
                    pending.remove(&partition);
                    continue;
                }
                Err(err) => {
                    // librdkafka retries transient errors itself; the deadline ends the read,
                    // and the last error says why it did not finish (an offset past the end
                    // shows up here too).
                    last_error = Some(err.to_string());
                    continue;
                }
            };
            let partition = message.partition();
            if !pending.contains_key(&partition) {
                continue;
            }
            let record = SourceRecord {
                topic,
                partition,
                offset: message.offset(),
                timestamp_ms: message.timestamp().to_millis(),
                payload: message.payload().map(<[u8]>::to_vec),
                generation: 0,
            };
            *records += 1;
            tail.rows.push(rows::decode(&record, &bounds, READER_ID));
            if let Some(range) = tail.ranges.iter_mut().find(|r| r.partition == partition) {
                range.to = message.offset() + 1;
            }
            pending.insert(partition, message.offset() + 1);
        }
        let stopped_by = if *records >= self.settings.max_records {
            format!("limit of {} records", self.settings.max_records)
        } else {
            format!("timeout of {:?}", self.settings.timeout)
        };
        let cause = last_error.map_or_else(String::new, |err| format!(" (last error: {err})"));
        for (partition, next) in pending {
            tail.problems.push(format!(
                "partition {partition}: read up to offset {next} but not to its end before the \
                 {stopped_by}{cause}"
            ));
        }
        tail
    }

    fn time_left(&self) -> Duration {
        self.settings.timeout.saturating_sub(self.started.elapsed())
    }
}
