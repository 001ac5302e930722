//! The producer: every record of a request in flight at once, the request acknowledged only
//! when Kafka has acknowledged all of them.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer as _, PurgeConfig};

use super::encode::KafkaRecord;
use crate::metrics::CollectorMetrics;

/// What the producer needs to know.
#[derive(Clone)]
pub struct ProducerSettings {
    /// `host:port,host:port`.
    pub bootstrap_servers: String,
    /// How long a record may take to be acknowledged before its request fails.
    pub delivery_timeout: Duration,
    /// The most records waiting in the producer's queue.
    pub queue_max_messages: usize,
    /// `none`, `gzip`, `snappy`, `lz4` or `zstd`.
    pub compression: String,
    /// librdkafka `compression.level`; `None` leaves the codec's default.
    pub compression_level: Option<i32>,
    /// The client id reported to the brokers.
    pub client_id: String,
    /// Further librdkafka settings (SASL, TLS); may not override idempotence or acks.
    pub extra: BTreeMap<String, String>,
}

impl std::fmt::Debug for ProducerSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `extra` may hold SASL and TLS secrets: only its keys are shown.
        f.debug_struct("ProducerSettings")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("delivery_timeout", &self.delivery_timeout)
            .field("queue_max_messages", &self.queue_max_messages)
            .field("compression", &self.compression)
            .field("compression_level", &self.compression_level)
            .field("client_id", &self.client_id)
            .field("extra_keys", &self.extra.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Why a request's records were not all acknowledged. Every variant but `Refused` is
/// retryable: the client must send the request again, and record ids make the repeat harmless
/// downstream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// The producer's queue is full: the collector is overloaded.
    #[error("producer queue full after {enqueued} of {total} records")]
    QueueFull {
        /// Records enqueued before the queue filled.
        enqueued: usize,
        /// Records in the request.
        total: usize,
    },
    /// librdkafka refused a record outright (too large, a fatal producer state): asking again
    /// cannot help.
    #[error("kafka refused a record: {error}")]
    Refused {
        /// What librdkafka said.
        error: String,
    },
    /// Some records were not acknowledged in time (or were refused by the broker).
    #[error("{failed} of {total} records not acknowledged: {first_error}")]
    NotAcknowledged {
        /// Records that failed.
        failed: usize,
        /// Records in the request.
        total: usize,
        /// The first failure, for the log and the response.
        first_error: String,
    },
}

/// Why the producer could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ProducerError {
    /// librdkafka refused the configuration. Only the key is named: the value may be a secret.
    #[error("kafka client configuration refused at key {key:?}: {description}")]
    Config {
        /// The setting.
        key: String,
        /// Why, as librdkafka says it.
        description: String,
    },
    /// Creating the topics failed.
    #[error("creating topic {topic}: {error}")]
    CreateTopic {
        /// The topic.
        topic: String,
        /// What the broker said.
        error: String,
    },
}

/// An idempotent, `acks=all` producer.
///
/// After a record fails (it timed out, or the broker refused it), librdkafka raises the
/// producer's epoch by itself before it sends again. Kafka brokers accept that; Tansu 0.6 does
/// not know the raised epoch, panics in its storage and from then on answers no request at all.
/// So after a failed record the producer is replaced by a fresh one, which asks the broker for a
/// new producer id, and whatever the old one still held is purged (those requests are answered
/// as retryable). On any broker this costs a new client and, at worst, a repeated record that
/// `event_id` removes downstream.
pub struct Producer {
    current: RwLock<Current>,
    /// Made once: creating and dropping a librdkafka client blocks.
    admin: AdminClient<DefaultClientContext>,
    settings: ProducerSettings,
    metrics: Arc<CollectorMetrics>,
}

/// The records of one request handed to the producer.
struct Sent {
    /// The generation of the producer they went to.
    generation: u64,
    /// Each record's topic and its delivery.
    pending: Vec<(&'static str, DeliveryFuture)>,
    /// Why the producer refused the record after the last one handed over, if it did.
    refused: Option<DeliveryError>,
}

/// The producer in use and how many times it was replaced.
struct Current {
    generation: u64,
    inner: Arc<FutureProducer>,
}

impl Producer {
    /// Builds the producer; connects lazily.
    pub fn new(
        settings: ProducerSettings,
        metrics: Arc<CollectorMetrics>,
    ) -> Result<Self, ProducerError> {
        let inner = build_producer(&settings)?;
        let admin = client_config(&settings).create().map_err(config_error)?;
        Ok(Self {
            current: RwLock::new(Current {
                generation: 0,
                inner: Arc::new(inner),
            }),
            admin,
            settings,
            metrics,
        })
    }

    /// The producer in use and its generation. A poisoned lock still holds a whole value: it
    /// is only ever replaced in one assignment.
    fn current(&self) -> (u64, Arc<FutureProducer>) {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        (current.generation, Arc::clone(&current.inner))
    }

    /// Replaces the producer of `generation` by a fresh one, unless another request already
    /// did; see [`Producer`] for why. Waits for sends in progress (they hold the read lock).
    fn renew(&self, generation: u64) {
        let old = {
            let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
            if current.generation != generation {
                return;
            }
            let fresh = match build_producer(&self.settings) {
                Ok(fresh) => fresh,
                Err(err) => {
                    // The settings built a producer once, so this is not expected; the old
                    // producer stays and the failure is in the log.
                    tracing::error!(error = %err, "could not build a fresh kafka producer");
                    return;
                }
            };
            current.generation += 1;
            std::mem::replace(&mut current.inner, Arc::new(fresh))
        };
        // Nothing left in the old producer may go out under its raised epoch. (Its purged
        // records fail the requests that still wait for them; those renew nothing, being of an
        // older generation.)
        old.purge(PurgeConfig::default().queue().inflight());
        self.metrics.producer_renewed();
        // Dropping a librdkafka client waits for its threads: not on a runtime thread.
        tokio::task::spawn_blocking(move || drop(old));
    }

    /// Creates the topics that do not exist yet.
    pub async fn ensure_topics(
        &self,
        topics: &[&str],
        partitions: i32,
        replication: i32,
    ) -> Result<(), ProducerError> {
        let new: Vec<NewTopic<'_>> = topics
            .iter()
            .map(|name| NewTopic::new(name, partitions, TopicReplication::Fixed(replication)))
            .collect();
        let options = AdminOptions::new().operation_timeout(Some(self.settings.delivery_timeout));
        let results = self
            .admin
            .create_topics(new.iter(), &options)
            .await
            .map_err(|err| ProducerError::CreateTopic {
                topic: topics.join(","),
                error: err.to_string(),
            })?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => {
                    return Err(ProducerError::CreateTopic {
                        topic,
                        error: code.to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    /// The topics the brokers know, if they answer a metadata request within `timeout`.
    /// Blocks: call it from `spawn_blocking`.
    pub fn probe(&self, timeout: Duration) -> Result<Vec<String>, String> {
        self.current()
            .1
            .client()
            .fetch_metadata(None, timeout)
            .map(|metadata| {
                metadata
                    .topics()
                    .iter()
                    .map(|t| t.name().to_owned())
                    .collect()
            })
            .map_err(|err| err.to_string())
    }

    /// The producer's fatal error, if it has one: from then on every record fails, until the
    /// first failure replaces the producer by a fresh one.
    pub fn fatal_error(&self) -> Option<String> {
        self.current()
            .1
            .client()
            .fatal_error()
            .map(|(code, reason)| format!("{code:?}: {reason}"))
    }

    /// Records waiting in the producer's queue or in flight.
    pub fn queue_depth(&self) -> i32 {
        self.current().1.in_flight_count()
    }

    /// Produces every record at once and waits for all acknowledgements.
    ///
    /// Returns only when each record is either acknowledged or failed: a success means Kafka
    /// holds every record.
    pub async fn deliver(&self, records: &[KafkaRecord]) -> Result<(), DeliveryError> {
        let total = records.len();
        let Sent {
            generation,
            pending,
            refused,
        } = self.send_all(records);
        let mut failed = 0;
        let mut renew = false;
        let mut first_error = None;
        // Acknowledgements are tallied per topic and counted once per request: a labelled
        // counter lookup per record would cost more than the record.
        let mut produced: Vec<(&'static str, u64)> = Vec::new();
        for (topic, delivery) in pending {
            match delivery.await {
                Ok(Ok(_)) => match produced.iter_mut().find(|(t, _)| *t == topic) {
                    Some((_, n)) => *n += 1,
                    None => produced.push((topic, 1)),
                },
                Ok(Err((err, _))) => {
                    failed += 1;
                    renew = true;
                    self.metrics.delivery_failed(topic, &error_label(&err));
                    first_error.get_or_insert_with(|| err.to_string());
                }
                Err(_canceled) => {
                    failed += 1;
                    self.metrics.delivery_failed(topic, "canceled");
                    first_error.get_or_insert_with(|| "the producer was dropped".to_owned());
                }
            }
        }
        for (topic, n) in produced {
            self.metrics.records_produced(topic, n);
        }
        // A record refused outright (other than for a full queue) may mean a fatal producer
        // state, which only a fresh producer leaves.
        if renew || matches!(refused, Some(DeliveryError::Refused { .. })) {
            self.renew(generation);
        }
        if let Some(refused) = refused {
            return Err(refused);
        }
        match first_error {
            None => Ok(()),
            Some(first_error) => Err(DeliveryError::NotAcknowledged {
                failed,
                total,
                first_error,
            }),
        }
    }

    /// Hands every record to the producer in use, stopping at the first it refuses; returns the
    /// producer's generation, the deliveries to await and the refusal.
    ///
    /// The read lock is held while sending (nothing here waits), so that a renewal waits for
    /// these sends and none reaches a producer after it was purged.
    fn send_all(&self, records: &[KafkaRecord]) -> Sent {
        let total = records.len();
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        let mut pending = Vec::with_capacity(total);
        for record in records {
            let future_record = FutureRecord::to(record.topic)
                .key(record.key.as_slice())
                .payload(record.payload.as_slice());
            match current.inner.send_result(future_record) {
                Ok(delivery) => pending.push((record.topic, delivery)),
                Err((err, _)) => {
                    self.metrics
                        .delivery_failed(record.topic, &error_label(&err));
                    let refused = match err.rdkafka_error_code() {
                        Some(RDKafkaErrorCode::QueueFull) => DeliveryError::QueueFull {
                            enqueued: pending.len(),
                            total,
                        },
                        _ => DeliveryError::Refused {
                            error: err.to_string(),
                        },
                    };
                    return Sent {
                        generation: current.generation,
                        pending,
                        refused: Some(refused),
                    };
                }
            }
        }
        Sent {
            generation: current.generation,
            pending,
            refused: None,
        }
    }

    /// Waits up to `timeout` for everything queued to be delivered; returns how many records
    /// were still undelivered.
    pub fn flush(&self, timeout: Duration) -> i32 {
        let producer = self.current().1;
        let _ = producer.flush(timeout);
        producer.in_flight_count()
    }
}

/// An idempotent, `acks=all` producer of `settings`.
fn build_producer(settings: &ProducerSettings) -> Result<FutureProducer, ProducerError> {
    let mut config = client_config(settings);
    if let Some(level) = settings.compression_level {
        config.set("compression.level", level.to_string());
    }
    config
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("compression.type", &settings.compression)
        .set("linger.ms", "5")
        .set(
            "queue.buffering.max.messages",
            settings.queue_max_messages.to_string(),
        )
        .set(
            "message.timeout.ms",
            settings.delivery_timeout.as_millis().to_string(),
        )
        .create()
        .map_err(config_error)
}

/// A configuration error that names the key but never the value (it may be a secret).
fn config_error(err: KafkaError) -> ProducerError {
    match err {
        KafkaError::ClientConfig(_, description, key, _value) => {
            ProducerError::Config { key, description }
        }
        other => ProducerError::Config {
            key: String::new(),
            description: other.to_string(),
        },
    }
}

fn client_config(settings: &ProducerSettings) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &settings.bootstrap_servers)
        .set("client.id", &settings.client_id);
    for (key, value) in &settings.extra {
        config.set(key, value);
    }
    config
}

/// A short, bounded label for a delivery error (a metric label value).
fn error_label(err: &KafkaError) -> String {
    match err.rdkafka_error_code() {
        Some(code) => format!("{code:?}").to_lowercase(),
        None => "other".to_owned(),
    }
}
