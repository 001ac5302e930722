//! The producer: every record of a request in flight at once, the request acknowledged only
//! when Kafka has acknowledged all of them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use candor_kafka::ProducerSettings;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message as _;
use rdkafka::producer::{
    BaseRecord, DeliveryResult, Producer as _, ProducerContext, PurgeConfig, ThreadedProducer,
};
use rdkafka::util::Timeout;

use super::encode::KafkaRecord;
use crate::ingest::metrics::CollectorMetrics;

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
    /// Their deliveries.
    tally: Arc<Tally>,
    /// How many records the producer took (the first ones).
    handed_over: usize,
    /// Why the producer refused the record after the last one handed over, if it did.
    refused: Option<DeliveryError>,
}

/// The deliveries of one request's records, tallied by librdkafka's delivery callback (on the
/// producer's polling thread): one shared counter per request instead of a channel per record.
#[derive(Default)]
struct Tally {
    /// Records whose delivery report has not come yet.
    remaining: AtomicUsize,
    /// Each failed record's topic and error.
    failures: Mutex<Vec<(String, KafkaError)>>,
    /// Signalled once, when `remaining` reaches zero.
    done: tokio::sync::Notify,
}

impl Tally {
    /// `n` records are settled: delivered, failed, or never handed over.
    fn settle(&self, n: usize) {
        if n > 0 && self.remaining.fetch_sub(n, Ordering::AcqRel) == n {
            // `notify_one` keeps the signal for a waiter that is not waiting yet.
            self.done.notify_one();
        }
    }

    /// Returns once every record is settled.
    async fn wait(&self) {
        if self.remaining.load(Ordering::Acquire) > 0 {
            self.done.notified().await;
        }
    }
}

/// The delivery callback: settles the record in its request's tally.
struct Deliveries;

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = Arc<Tally>;

    fn delivery(&self, result: &DeliveryResult<'_>, tally: Arc<Tally>) {
        if let Err((err, message)) = result {
            tally
                .failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((message.topic().to_owned(), err.clone()));
        }
        tally.settle(1);
    }
}

/// The librdkafka producer, with its polling thread running delivery callbacks.
type Inner = ThreadedProducer<Deliveries>;

/// The producer in use and how many times it was replaced.
struct Current {
    generation: u64,
    inner: Arc<Inner>,
}

impl Producer {
    /// Builds the producer; connects lazily.
    pub fn new(
        settings: ProducerSettings,
        metrics: Arc<CollectorMetrics>,
    ) -> Result<Self, ProducerError> {
        let inner = build_producer(&settings)?;
        let admin = settings.admin_config().create().map_err(config_error)?;
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
    fn current(&self) -> (u64, Arc<Inner>) {
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
            tally,
            handed_over,
            refused,
        } = self.send_all(records);
        tally.wait().await;
        let failures = std::mem::take(
            &mut *tally
                .failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        // Acknowledgements are tallied per topic and counted once per request: a labelled
        // counter lookup per record would cost more than the record.
        let mut produced: Vec<(&'static str, u64)> = Vec::new();
        for record in records.iter().take(handed_over) {
            match produced.iter_mut().find(|(t, _)| *t == record.topic) {
                Some((_, n)) => *n += 1,
                None => produced.push((record.topic, 1)),
            }
        }
        for (topic, err) in &failures {
            self.metrics.delivery_failed(topic, &error_label(err));
            if let Some((_, n)) = produced.iter_mut().find(|(t, _)| t == topic) {
                *n = n.saturating_sub(1);
            }
        }
        for (topic, n) in produced {
            self.metrics.records_produced(topic, n);
        }
        // A failed record, or one refused outright (other than for a full queue, which may
        // mean a fatal producer state), is only left behind by a fresh producer.
        if !failures.is_empty() || matches!(refused, Some(DeliveryError::Refused { .. })) {
            self.renew(generation);
        }
        if let Some(refused) = refused {
            return Err(refused);
        }
        match failures.first() {
            None => Ok(()),
            Some((_, first_error)) => Err(DeliveryError::NotAcknowledged {
                failed: failures.len(),
                total,
                first_error: first_error.to_string(),
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
        let tally = Arc::new(Tally {
            remaining: AtomicUsize::new(total),
            ..Tally::default()
        });
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        for (handed_over, record) in records.iter().enumerate() {
            let base_record = BaseRecord::with_opaque_to(record.topic, Arc::clone(&tally))
                .key(record.key.as_slice())
                .payload(record.payload.as_slice());
            if let Err((err, _record)) = current.inner.send(base_record) {
                self.metrics
                    .delivery_failed(record.topic, &error_label(&err));
                let refused = match err.rdkafka_error_code() {
                    Some(RDKafkaErrorCode::QueueFull) => DeliveryError::QueueFull {
                        enqueued: handed_over,
                        total,
                    },
                    _ => DeliveryError::Refused {
                        error: err.to_string(),
                    },
                };
                // The records not handed over will have no delivery report.
                tally.settle(total - handed_over);
                return Sent {
                    generation: current.generation,
                    tally,
                    handed_over,
                    refused: Some(refused),
                };
            }
        }
        Sent {
            generation: current.generation,
            tally,
            handed_over: total,
            refused: None,
        }
    }

    /// Waits up to `timeout` for everything queued to be delivered; returns how many records
    /// were still undelivered.
    pub fn flush(&self, timeout: Duration) -> i32 {
        let producer = self.current().1;
        let _ = producer.flush(Timeout::After(timeout));
        producer.in_flight_count()
    }
}

/// An idempotent, `acks=all` producer of `settings`.
fn build_producer(settings: &ProducerSettings) -> Result<Inner, ProducerError> {
    settings
        .producer_config()
        .create_with_context(Deliveries)
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

/// A short, bounded label for a delivery error (a metric label value).
fn error_label(err: &KafkaError) -> String {
    match err.rdkafka_error_code() {
        Some(code) => format!("{code:?}").to_lowercase(),
        None => "other".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    fn tally_of(n: usize) -> Tally {
        Tally {
            remaining: AtomicUsize::new(n),
            ..Tally::default()
        }
    }

    fn is_ready(wait: std::pin::Pin<&mut impl std::future::Future<Output = ()>>) -> bool {
        let mut context = Context::from_waker(Waker::noop());
        wait.poll(&mut context) == Poll::Ready(())
    }

    #[test]
    fn a_request_waits_until_its_last_record_is_settled() {
        let tally = tally_of(3);
        let mut wait = pin!(tally.wait());
        assert!(!is_ready(wait.as_mut()), "nothing settled yet");
        tally.settle(1);
        tally.settle(1);
        assert!(!is_ready(wait.as_mut()), "one record is still out");
        tally.settle(1);
        assert!(is_ready(wait.as_mut()));
    }

    #[test]
    fn a_tally_settled_before_anyone_waits_does_not_wait_and_records_never_sent_count() {
        let tally = tally_of(4);
        tally.settle(1);
        // The producer took one record and refused the second: three have no delivery report.
        tally.settle(3);
        assert!(is_ready(pin!(tally.wait())));
        let empty = tally_of(0);
        assert!(is_ready(pin!(empty.wait())), "a request of no records");
    }
}
