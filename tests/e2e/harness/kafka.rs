//! Making topics, and reading a topic back with explicit partition assignment (no consumer-group
//! join to wait for).

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message as _;
use rdkafka::{Offset, TopicPartitionList};

/// Creates `topics` with `partitions` each (replication 1) unless they exist. The result is per
/// topic and "already exists" is fine; a topic that could not be made shows up as failed sends.
pub async fn create_topics(
    bootstrap: &str,
    topics: &[&str],
    partitions: i32,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .context("admin client")?;
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|topic| NewTopic::new(topic, partitions, TopicReplication::Fixed(1)))
        .collect();
    let _per_topic = admin
        .create_topics(new.iter(), &AdminOptions::new())
        .await
        .context("creating topics")?;
    Ok(())
}

/// One record as read back.
#[derive(Debug, Clone)]
pub struct Record {
    /// The key.
    pub key: Vec<u8>,
    /// The payload.
    pub payload: Vec<u8>,
    /// The partition.
    pub partition: i32,
    /// The offset.
    pub offset: i64,
}

/// Reads every record of `topic` from the beginning until `at_least` have arrived (then keeps
/// reading until the topic is quiet for a moment, to see any extras), or panics at `timeout`.
pub fn read_topic(bootstrap: &str, topic: &str, at_least: usize, timeout: Duration) -> Vec<Record> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "candor-e2e-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create()
        .unwrap_or_else(|err| panic!("creating a consumer: {err}"));
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap_or_else(|err| panic!("metadata of {topic}: {err}"));
    let mut assignment = TopicPartitionList::new();
    for partition in metadata.topics().iter().flat_map(|t| t.partitions()) {
        assignment
            .add_partition_offset(topic, partition.id(), Offset::Beginning)
            .unwrap_or_else(|err| panic!("assigning {topic}/{}: {err}", partition.id()));
    }
    consumer
        .assign(&assignment)
        .unwrap_or_else(|err| panic!("assigning {topic}: {err}"));
    let deadline = Instant::now() + timeout;
    let mut records = Vec::new();
    let mut quiet_since: Option<Instant> = None;
    loop {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                quiet_since = None;
                records.push(Record {
                    key: message.key().unwrap_or_default().to_vec(),
                    payload: message.payload().unwrap_or_default().to_vec(),
                    partition: message.partition(),
                    offset: message.offset(),
                });
            }
            Some(Err(err)) => panic!("reading {topic}: {err}"),
            None => {
                if records.len() >= at_least {
                    let since = *quiet_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > Duration::from_millis(500) {
                        return records;
                    }
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "read {} of at least {at_least} records from {topic} before the deadline",
            records.len()
        );
    }
}

/// Decodes every record as `T`.
pub fn decode_all<T: prost::Message + Default>(records: &[Record]) -> Vec<T> {
    records
        .iter()
        .map(|r| {
            T::decode(r.payload.as_slice()).unwrap_or_else(|err| panic!("decoding a record: {err}"))
        })
        .collect()
}

/// The targets of the events in the outcome-events topic, sorted (duplicates kept), once at
/// least `at_least` have arrived.
pub fn event_targets(bootstrap: &str, at_least: usize, timeout: Duration) -> Vec<String> {
    let records = read_topic(
        bootstrap,
        candor_schema::names::topic::OUTCOME_EVENTS,
        at_least,
        timeout,
    );
    let mut targets: Vec<String> = decode_all::<candor_records::proto::OutcomeEvent>(&records)
        .into_iter()
        .map(|event| event.tool_target)
        .collect();
    targets.sort();
    targets
}
