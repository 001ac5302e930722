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
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use candor_schema::tables::Table;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer as _, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::Message as _;
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc;

use super::engine::Source;
use super::metrics::CompactMetrics;
use super::rows::SourceRecord;

/// Records read per hand-over to the async side.
const CHUNK: usize = 4096;

/// What the reader thread tells the async side, in the order it happened.
#[derive(Debug)]
pub enum Input {
    /// Records read.
    Records(Vec<SourceRecord>),
    /// Partitions assigned, with the position each starts at.
    Assigned(Vec<(Source, i64)>),
    /// Partitions taken away.
    Revoked(Vec<Source>),
}

/// What the async side asks of the reader thread.
#[derive(Debug)]
pub enum Control {
    /// Commit these positions to Kafka, as a hint for lag tools (the tables hold the truth).
    CommitOffsets(Vec<(Source, i64)>),
    /// Read these partitions again from these positions.
    Seek(Vec<(Source, i64)>),
    /// Leave the group and end the thread.
    Stop,
}

/// Reads the tables' positions of partitions; blocking.
pub type PositionLookup =
    Box<dyn Fn(&[Source]) -> Result<HashMap<Source, Option<i64>>, String> + Send + Sync>;

struct Context {
    positions: PositionLookup,
    input: mpsc::Sender<Input>,
    metrics: Arc<CompactMetrics>,
}

impl ClientContext for Context {
    fn stats(&self, statistics: Statistics) {
        for (topic, stats) in &statistics.topics {
            for (partition, p) in &stats.partitions {
                if *partition >= 0 && p.consumer_lag >= 0 {
                    self.metrics.set_lag(topic, *partition, p.consumer_lag);
                }
            }
        }
    }
}

impl ConsumerContext for Context {
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
                let positions = (self.positions)(&sources).unwrap_or_else(|err| {
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
                    let position = positions.get(source).copied().flatten();
                    let offset = position.map_or(Offset::Beginning, Offset::Offset);
                    if let Err(err) = tpl.set_partition_offset(source.0.topic(), source.1, offset) {
                        self.metrics.error("assign", err);
                    }
                    assigned.push((*source, position.unwrap_or(0)));
                }
                tracing::info!(?assigned, "partitions assigned at the tables' positions");
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
                let _ = consumer.unassign();
            }
        }
    }
}

/// Settings of the consumer.
#[derive(Debug, Clone)]
pub struct SourceSettings {
    /// `bootstrap.servers`.
    pub bootstrap_servers: String,
    /// `group.id`.
    pub group_id: String,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
    /// `client.id`.
    pub client_id: String,
    /// Further librdkafka settings (values of `extra_env` resolved).
    pub extra: std::collections::BTreeMap<String, String>,
}

/// Starts the reader thread; it ends on [`Control::Stop`] or when `input` closes.
pub fn start(
    settings: &SourceSettings,
    positions: PositionLookup,
    input: mpsc::Sender<Input>,
    control: std_mpsc::Receiver<Control>,
    metrics: Arc<CompactMetrics>,
) -> Result<std::thread::JoinHandle<()>, KafkaError> {
    let mut config = rdkafka::ClientConfig::new();
    for (key, value) in &settings.extra {
        config.set(key, value);
    }
    let session_ms = settings.session_timeout.as_millis().to_string();
    config
        .set("bootstrap.servers", &settings.bootstrap_servers)
        .set("group.id", &settings.group_id)
        .set("client.id", &settings.client_id)
        .set("session.timeout.ms", &session_ms)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .set("statistics.interval.ms", "5000");
    let context = Context {
        positions,
        input: input.clone(),
        metrics: Arc::clone(&metrics),
    };
    let consumer: BaseConsumer<Context> = config.create_with_context(context)?;
    let topics: Vec<&str> = Table::ALL.iter().map(|t| t.topic()).collect();
    consumer.subscribe(&topics)?;
    std::thread::Builder::new()
        .name("compactor-kafka".into())
        .spawn(move || read_loop(&consumer, &input, &control, &metrics))
        .map_err(|err| KafkaError::ClientCreation(err.to_string()))
}

fn read_loop(
    consumer: &BaseConsumer<Context>,
    input: &mpsc::Sender<Input>,
    control: &std_mpsc::Receiver<Control>,
    metrics: &CompactMetrics,
) {
    let mut chunk = Vec::with_capacity(CHUNK);
    loop {
        loop {
            match control.try_recv() {
                Ok(Control::CommitOffsets(positions)) => {
                    commit_offsets(consumer, &positions, metrics)
                }
                Ok(Control::Seek(positions)) => {
                    for ((topic, partition), offset) in positions {
                        let seek = consumer.seek(
                            topic.topic(),
                            partition,
                            Offset::Offset(offset),
                            Duration::from_secs(10),
                        );
                        if let Err(err) = seek {
                            metrics.error("seek", err);
                        }
                    }
                }
                Ok(Control::Stop) | Err(std_mpsc::TryRecvError::Disconnected) => {
                    consumer.unsubscribe();
                    return;
                }
                Err(std_mpsc::TryRecvError::Empty) => break,
            }
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                let Some(topic) = Table::from_topic(message.topic()) else {
                    continue;
                };
                chunk.push(SourceRecord {
                    topic,
                    partition: message.partition(),
                    offset: message.offset(),
                    timestamp_ms: message.timestamp().to_millis(),
                    payload: message.payload().map(<[u8]>::to_vec),
                });
                if chunk.len() < CHUNK {
                    continue;
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
