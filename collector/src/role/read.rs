//! `candor-collector read`: every record of one of the pipeline's topics, from the beginning,
//! decoded, one JSON object per line. A record that cannot be decoded is printed as an error
//! line, never skipped.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use candor_collector::compact::config::RawCompactConfig;
use candor_collector::ingest::config::RawConfig;
use candor_collector::inspect::{self, InspectError};
use clap::Parser;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::error::KafkaError;
use rdkafka::message::Message as _;

/// The flags and variables of `read`.
#[derive(Parser)]
pub struct ReadArgs {
    /// The topic, e.g. candor.outcome-events.v1.
    #[arg(long)]
    topic: String,
    /// Bootstrap servers, host:port[,host:port].
    #[arg(
        long = "kafka",
        alias = "kafka-brokers",
        env = "CANDOR_COLLECTOR_KAFKA_BROKERS",
        default_value = "127.0.0.1:9092"
    )]
    kafka_brokers: String,
    /// Stop after this many records.
    #[arg(long)]
    limit: Option<usize>,
    /// Stop when no record arrived for this long (e.g. 2s).
    #[arg(long, default_value = "2s")]
    idle: String,
    /// A collector or compactor configuration file whose `[kafka.extra]` and
    /// `[kafka.extra_env]` (TLS, SASL) this reader uses too; its other keys are not used.
    #[arg(long)]
    config: Option<PathBuf>,
}

/// A validated read: the topic, when to stop and the Kafka client settings.
struct Read<'a> {
    topic: &'static str,
    brokers: &'a str,
    limit: Option<usize>,
    idle: Duration,
    client: rdkafka::ClientConfig,
}

/// `candor-collector read`: validate → build → run.
pub fn main(args: &ReadArgs) -> anyhow::Result<()> {
    let read = validate(args)?;
    let consumer = build(&read)?;
    run(&read, &consumer)
}

/// The topic, the durations and the settings file; connects to nothing.
fn validate(args: &ReadArgs) -> anyhow::Result<Read<'_>> {
    let topic = inspect::known_topic(&args.topic)?;
    let idle = candor_service::config::parse_duration("--idle", &args.idle)?;
    let extra = match &args.config {
        Some(path) => read_kafka_settings(path)?,
        None => candor_kafka::ClientSettings::default(),
    };
    let client = candor_kafka::Reader {
        bootstrap_servers: &args.kafka_brokers,
        id: "candor-read",
        reset: candor_kafka::OffsetReset::Earliest,
        stops_at_end: false,
    }
    .config(&extra);
    Ok(Read {
        topic,
        brokers: &args.kafka_brokers,
        limit: args.limit,
        idle,
        client,
    })
}

/// The Kafka client settings of a collector's or a compactor's configuration file, validated as
/// that service validates them, with the values of `[kafka.extra_env]` read.
fn read_kafka_settings(path: &Path) -> anyhow::Result<candor_kafka::ClientSettings> {
    let text = candor_service::config::read_file(path)?;
    let extra = match RawConfig::from_toml_str(&text).and_then(RawConfig::validate) {
        Ok(config) => config.kafka.extra,
        Err(as_collector) => {
            match RawCompactConfig::from_toml_str(&text).and_then(RawCompactConfig::validate) {
                Ok(config) => config.kafka.extra,
                Err(as_compactor) => bail!(
                    "{} is neither a collector's configuration ({as_collector}) nor a compactor's \
                 ({as_compactor})",
                    path.display()
                ),
            }
        }
    };
    Ok(extra.resolve()?)
}

/// A consumer assigned every partition of the topic from its beginning; no group, no commits.
fn build(read: &Read<'_>) -> anyhow::Result<BaseConsumer> {
    let Read { topic, brokers, .. } = *read;
    let consumer: BaseConsumer = read.client.create().context("creating a Kafka consumer")?;
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .with_context(|| format!("reading the metadata of {topic} from {brokers}"))?;
    let mut assignment = rdkafka::TopicPartitionList::new();
    for partition in metadata.topics().iter().flat_map(|t| t.partitions()) {
        assignment.add_partition_offset(topic, partition.id(), rdkafka::Offset::Beginning)?;
    }
    if assignment.count() == 0 {
        bail!("topic {topic} has no partitions on {brokers}");
    }
    consumer.assign(&assignment)?;
    Ok(consumer)
}

/// Prints the records until `--limit` or `--idle`, then a count on stderr.
fn run(read: &Read<'_>, consumer: &BaseConsumer) -> anyhow::Result<()> {
    let topic = read.topic;
    let mut out = std::io::stdout().lock();
    let (mut printed, mut undecodable) = (0usize, 0usize);
    let mut last = Instant::now();
    while read.limit.is_none_or(|limit| printed < limit) && last.elapsed() < read.idle {
        let message = match consumer.poll(Duration::from_millis(100)) {
            // A partition's end is no record: `--idle` says when the read stops.
            None | Some(Err(KafkaError::PartitionEOF(_))) => continue,
            Some(message) => message.context("reading a record")?,
        };
        last = Instant::now();
        // A record with no payload is not an empty record: it is shown as an error.
        let decoded = match message.payload() {
            Some(payload) => inspect::to_json(topic, payload),
            None => Err(InspectError::Undecodable(
                "the record has no payload".into(),
            )),
        };
        let line = match decoded {
            Ok(record) => record,
            Err(err) => {
                undecodable += 1;
                serde_json::json!({ "error": err.to_string() })
            }
        };
        let line = serde_json::json!({ "partition": message.partition(), "offset": message.offset(), "record": line });
        writeln!(out, "{line}")?;
        printed += 1;
    }
    eprintln!("{printed} record(s) from {topic}; {undecodable} undecodable");
    Ok(())
}
