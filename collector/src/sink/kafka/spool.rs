//! The local spool: records Kafka cannot take yet, kept on disk until it can.
//!
//! With `spool.dir` set, a request whose records the producer could not deliver is appended to
//! the spool, made durable, and only then acknowledged. [`drain`] produces the spooled records to
//! Kafka in the order they were spooled and removes them only once Kafka acknowledged them. While
//! anything is spooled, new requests and heartbeats are spooled behind it, so that nothing
//! overtakes what waits: a heartbeat never reaches Kafka ahead of records acknowledged before it.
//!
//! The store is a [redb](https://docs.rs/redb) database, `spool.redb` in the directory: one table
//! from a sequence number to one record (the time it was spooled, its topic, key and payload).
//! A redb commit is atomic and durable (fsynced) when it returns, which gives the crash rules:
//!
//! - a crash before an append's commit loses a request that was never acknowledged: its client
//!   sends it again;
//! - a crash after the commit, before the answer, keeps a request its client sends again: a copy,
//!   which `event_id` removes downstream;
//! - a crash after the drainer produced records, before their removal was committed, produces
//!   them again after the restart: copies again, removed the same way.
//!
//! Appends of concurrent requests are committed together by one writer thread, so a burst of
//! requests shares one fsync. redb locks the file, so two collectors cannot share a directory.

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

use crate::sink::kafka::KafkaRecord;

/// The one table: sequence number → spooled record.
const RECORDS: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("records");

/// The topics a record may be spooled for, by the one-byte index stored with it: a new topic is
/// appended to [`Table::ALL`](candor_records::tables::Table::ALL), so that a spooled record keeps
/// its topic across an upgrade.
const TOPICS: [&str; 5] = candor_records::tables::TOPICS;

/// The most appends committed in one transaction.
const MAX_APPENDS_PER_COMMIT: usize = 256;

/// Validated `[spool]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolSettings {
    /// The directory holding `spool.redb`.
    pub dir: PathBuf,
    /// The most bytes of records kept; past it, requests are answered "retry later".
    pub max_bytes: u64,
    /// The oldest a spooled record may grow; older ones are dropped, counted and logged.
    pub max_age: Duration,
}

/// Why the spool could not do what was asked.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SpoolError {
    /// A record is for a topic the spool does not know, so it could not be read back.
    #[error("the spool keeps records of the four candor topics, not of {0:?}")]
    UnknownTopic(String),
    /// Keeping the records would pass `spool.max_bytes`.
    #[error("the spool is full: {held} bytes held, {asked} more asked, spool.max_bytes is {max}")]
    Full {
        /// Bytes held now.
        held: u64,
        /// Bytes the records need.
        asked: u64,
        /// The bound.
        max: u64,
    },
    /// The store failed (disk full, I/O error), or the writer thread is gone.
    #[error("the spool's store at {path}: {reason}")]
    Store {
        /// The database file.
        path: String,
        /// What failed.
        reason: String,
    },
}

/// A record read back from the spool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spooled {
    /// Its position: records are drained in this order.
    pub seq: u64,
    /// When it was spooled, in Unix milliseconds.
    pub spooled_at_ms: u64,
    /// The record, or why its stored bytes could not be read.
    pub record: Result<KafkaRecord, String>,
}

/// How much the spool holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Level {
    /// Records held.
    pub records: u64,
    /// Bytes of records held.
    pub bytes: u64,
}

struct Append {
    first_seq: u64,
    spooled_at_ms: u64,
    records: Vec<KafkaRecord>,
    done: tokio::sync::oneshot::Sender<Result<(), SpoolError>>,
}

struct State {
    level: Level,
    next_seq: u64,
}

/// The spool of one collector.
pub struct Spool {
    db: Arc<Database>,
    path: String,
    state: Mutex<State>,
    max_bytes: u64,
    max_age: Duration,
    writer: Mutex<Option<Sender<Append>>>,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Woken after every append, for the drainer.
    appended: tokio::sync::Notify,
}

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spool")
            .field("path", &self.path)
            .field("level", &self.level())
            .finish_non_exhaustive()
    }
}

/// The memory the store keeps pages in (redb's default is 1 GiB). Appends go to the end and the
/// drainer reads from the front, so a small cache holds what both touch.
const CACHE_BYTES: usize = 64 * 1024 * 1024;

impl Spool {
    /// Opens (or creates) the spool in `settings.dir` and reads how much it holds: records a
    /// previous run spooled and did not drain are drained by this one.
    pub fn open(settings: &SpoolSettings) -> Result<Arc<Self>, SpoolError> {
        let path = settings.dir.join("spool.redb");
        let store_error = |reason: String| SpoolError::Store {
            path: path.display().to_string(),
            reason,
        };
        std::fs::create_dir_all(&settings.dir).map_err(|err| store_error(err.to_string()))?;
        let db = redb::Builder::new()
            .set_cache_size(CACHE_BYTES)
            .create(&path)
            .map_err(|err| store_error(err.to_string()))?;
        let (level, next_seq) = read_level(&db).map_err(store_error)?;
        let (writer, appends) = channel();
        let spool = Arc::new(Self {
            db: Arc::new(db),
            path: path.display().to_string(),
            state: Mutex::new(State { level, next_seq }),
            max_bytes: settings.max_bytes,
            max_age: settings.max_age,
            writer: Mutex::new(Some(writer)),
            writer_thread: Mutex::new(None),
            appended: tokio::sync::Notify::new(),
        });
        let db = spool.db.clone();
        let shown = spool.path.clone();
        let thread = std::thread::Builder::new()
            .name("candor-spool-writer".into())
            .spawn(move || commit_appends(&db, &shown, &appends))
            .map_err(|err| store_error(err.to_string()))?;
        *spool
            .writer_thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(thread);
        Ok(spool)
    }

    /// The database file.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// How much the spool holds now.
    pub fn level(&self) -> Level {
        self.lock().level
    }

    /// Whether nothing is spooled.
    pub fn is_empty(&self) -> bool {
        self.lock().level.records == 0
    }

    /// Appends `records` and returns once they are durable. Refused, with nothing kept, when they
    /// would pass `spool.max_bytes` or the store fails.
    pub async fn append(&self, records: &[KafkaRecord]) -> Result<(), SpoolError> {
        if let Some(record) = records.iter().find(|r| topic_index(r.topic).is_none()) {
            return Err(SpoolError::UnknownTopic(record.topic.to_owned()));
        }
        let spooled_at_ms = unix_millis(SystemTime::now());
        let bytes: u64 = records.iter().map(|r| stored_len(r) as u64).sum();
        let count = records.len() as u64;
        let (done, committed) = tokio::sync::oneshot::channel();
        {
            // The room and the sequence numbers are taken, and the append queued, under one lock:
            // appends reach the writer in sequence order and never overshoot the bound together.
            let mut state = self.lock();
            if state.level.bytes + bytes > self.max_bytes {
                return Err(SpoolError::Full {
                    held: state.level.bytes,
                    asked: bytes,
                    max: self.max_bytes,
                });
            }
            let append = Append {
                first_seq: state.next_seq,
                spooled_at_ms,
                records: records.to_vec(),
                done,
            };
            self.writer
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .ok_or_else(|| self.store_error("the spool is closed"))?
                .send(append)
                .map_err(|_| self.store_error("the spool's writer thread has ended"))?;
            state.next_seq += count;
            state.level.records += count;
            state.level.bytes += bytes;
        }
        let result = committed
            .await
            .unwrap_or_else(|_| Err(self.store_error("the spool's writer thread has ended")));
        match &result {
            Ok(()) => {
                self.appended.notify_one();
            }
            Err(_) => {
                // Nothing of this append was kept.
                let mut state = self.lock();
                state.level.records -= count;
                state.level.bytes -= bytes;
            }
        }
        result
    }

    /// The oldest spooled records, in order: at most `max_records`, and no more bytes than
    /// `max_bytes` (but at least one record).
    pub fn oldest(&self, max_records: usize, max_bytes: u64) -> Result<Vec<Spooled>, SpoolError> {
        let read = || -> Result<Vec<Spooled>, redb::Error> {
            let txn = self.db.begin_read()?;
            let table = match txn.open_table(RECORDS) {
                Ok(table) => table,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
                Err(err) => return Err(err.into()),
            };
            let mut out = Vec::new();
            let mut bytes = 0u64;
            for entry in table.iter()? {
                let (seq, value) = entry?;
                let value = value.value();
                if out.len() >= max_records
                    || (!out.is_empty() && bytes + value.len() as u64 > max_bytes)
                {
                    break;
                }
                bytes += value.len() as u64;
                out.push(decode(seq.value(), value));
            }
            Ok(out)
        };
        read().map_err(|err| self.store_error(&err.to_string()))
    }

    /// Removes the given records (those Kafka acknowledged, or dropped), durably.
    pub fn remove(&self, seqs: &[u64]) -> Result<(), SpoolError> {
        let remove = || -> Result<(u64, u64), redb::Error> {
            let mut txn = self.db.begin_write()?;
            txn.set_durability(Durability::Immediate)?;
            let (mut records, mut bytes) = (0, 0);
            {
                let mut table = txn.open_table(RECORDS)?;
                for &seq in seqs {
                    if let Some(value) = table.remove(seq)? {
                        records += 1;
                        bytes += value.value().len() as u64;
                    }
                }
            }
            txn.commit()?;
            Ok((records, bytes))
        };
        let (records, bytes) = remove().map_err(|err| self.store_error(&err.to_string()))?;
        let mut state = self.lock();
        state.level.records -= records;
        state.level.bytes -= bytes;
        Ok(())
    }

    /// Waits until something is appended (or returns at once if something was appended since the
    /// last wait).
    pub async fn appended(&self) {
        self.appended.notified().await;
    }

    /// The longest a record may stay spooled.
    pub fn max_age(&self) -> Duration {
        self.max_age
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change to the state is one statement, so a panic elsewhere leaves it consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn store_error(&self, reason: &str) -> SpoolError {
        SpoolError::Store {
            path: self.path.clone(),
            reason: reason.to_owned(),
        }
    }
}

impl Drop for Spool {
    /// Commits what is queued and waits for the writer thread, so that the store is closed (and
    /// its file lock released) when the spool is gone.
    fn drop(&mut self) {
        self.writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let thread = self
            .writer_thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            // A writer that panicked has nothing left to commit.
            let _ = thread.join();
        }
    }
}

/// The writer thread: commits every queued append, many in one transaction, and tells each.
fn commit_appends(db: &Database, path: &str, appends: &Receiver<Append>) {
    while let Ok(first) = appends.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_APPENDS_PER_COMMIT {
            match appends.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let write = || -> Result<(), redb::Error> {
            let mut txn = db.begin_write()?;
            txn.set_durability(Durability::Immediate)?;
            {
                let mut table = txn.open_table(RECORDS)?;
                let mut value = Vec::new();
                for append in &batch {
                    for (seq, record) in (append.first_seq..).zip(&append.records) {
                        encode(append.spooled_at_ms, record, &mut value);
                        table.insert(seq, value.as_slice())?;
                    }
                }
            }
            fault::reach(fault::Point::Append);
            txn.commit()?;
            fault::reach(fault::Point::Committed);
            Ok(())
        };
        let result = write().map_err(|err| SpoolError::Store {
            path: path.to_owned(),
            reason: err.to_string(),
        });
        for append in batch {
            // A request that stopped waiting has nobody left to tell; its records are kept.
            let _ = append.done.send(result.clone());
        }
    }
}

/// Counts what a spool left by an earlier run holds, and the next free sequence number.
fn read_level(db: &Database) -> Result<(Level, u64), String> {
    let read = || -> Result<(Level, u64), redb::Error> {
        let txn = db.begin_read()?;
        let table = match txn.open_table(RECORDS) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok((Level::default(), 0)),
            Err(err) => return Err(err.into()),
        };
        let mut level = Level::default();
        for entry in table.iter()? {
            let (_, value) = entry?;
            level.records += 1;
            level.bytes += value.value().len() as u64;
        }
        let next = table.last()?.map_or(0, |(seq, _)| seq.value() + 1);
        Ok((level, next))
    };
    read().map_err(|err| err.to_string())
}

/// The stored form: spooled-at (u64 LE, Unix ms), topic index (u8), key length (u32 LE), key,
/// payload.
fn topic_index(topic: &str) -> Option<u8> {
    let index = TOPICS.iter().position(|name| *name == topic)?;
    u8::try_from(index).ok()
}

fn encode(spooled_at_ms: u64, record: &KafkaRecord, out: &mut Vec<u8>) {
    out.clear();
    // `append` refuses a record whose topic has no index, so none reaches here.
    let topic = topic_index(record.topic).unwrap_or(u8::MAX);
    out.extend_from_slice(&spooled_at_ms.to_le_bytes());
    out.push(topic);
    out.extend_from_slice(
        &u32::try_from(record.key.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    out.extend_from_slice(&record.key);
    out.extend_from_slice(&record.payload);
}

fn stored_len(record: &KafkaRecord) -> usize {
    8 + 1 + 4 + record.key.len() + record.payload.len()
}

fn decode(seq: u64, value: &[u8]) -> Spooled {
    let spooled_at_ms = value
        .get(..8)
        .and_then(|bytes| bytes.try_into().ok())
        .map_or(0, u64::from_le_bytes);
    let record = decode_record(value);
    Spooled {
        seq,
        spooled_at_ms,
        record,
    }
}

fn decode_record(value: &[u8]) -> Result<KafkaRecord, String> {
    let short = |what: &str| format!("{} bytes: shorter than its {what}", value.len());
    let index = *value.get(8).ok_or_else(|| short("header"))?;
    let topic = *TOPICS
        .get(usize::from(index))
        .ok_or_else(|| format!("unknown topic index {index}"))?;
    let key_len = value
        .get(9..13)
        .and_then(|bytes| bytes.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| short("header"))?;
    let key_end = 13 + key_len as usize;
    let key = value.get(13..key_end).ok_or_else(|| short("key"))?;
    Ok(KafkaRecord {
        topic,
        key: key.to_vec(),
        payload: value[key_end..].to_vec(),
    })
}

/// Unix milliseconds, or zero before the epoch.
pub fn unix_millis(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Crash points for the spool's crash test.
///
/// Built with the `fault-injection` feature, `CANDOR_SPOOL_CRASH_AT=POINT[:N]` aborts the process
/// (like `kill -9`: no destructor, no flush) the N-th time it reaches POINT. Without the feature
/// [`reach`](fault::reach) does nothing and the variable is not read.
pub mod fault {
    /// A step of the spool where a crash is interesting.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Point {
        /// Records are written into the store's transaction, not committed (not fsynced).
        Append,
        /// The append is committed (durable); the request is not answered yet.
        Committed,
        /// The drainer read records; Kafka has not been asked to take them.
        Produce,
        /// Kafka acknowledged drained records; their removal is not committed.
        Delivered,
        /// The removal is committed.
        Removed,
    }

    impl Point {
        /// Every point, in the order a record meets them.
        pub const ALL: [Self; 5] = [
            Self::Append,
            Self::Committed,
            Self::Produce,
            Self::Delivered,
            Self::Removed,
        ];

        /// The spelling in `CANDOR_SPOOL_CRASH_AT`.
        pub fn as_str(self) -> &'static str {
            match self {
                Self::Append => "append",
                Self::Committed => "committed",
                Self::Produce => "produce",
                Self::Delivered => "delivered",
                Self::Removed => "removed",
            }
        }
    }

    /// Aborts the process the N-th time it reaches the configured point
    /// (`CANDOR_SPOOL_CRASH_AT=POINT[:N]`, N from 1, default 1).
    #[cfg(feature = "fault-injection")]
    pub fn reach(point: Point) {
        use std::sync::OnceLock;
        use std::sync::atomic::{AtomicU64, Ordering};
        static PLAN: OnceLock<Option<(String, u64)>> = OnceLock::new();
        static SEEN: AtomicU64 = AtomicU64::new(0);
        let plan = PLAN.get_or_init(|| {
            let value = std::env::var("CANDOR_SPOOL_CRASH_AT").ok()?;
            let (name, n) = value.split_once(':').unwrap_or((value.as_str(), "1"));
            // A plan that cannot be read must not pass as "no crash": the test would prove
            // nothing.
            let n = n.parse::<u64>().ok().filter(|&n| n >= 1);
            match n {
                Some(n) if Point::ALL.iter().any(|p| p.as_str() == name) => {
                    Some((name.to_owned(), n))
                }
                _ => panic!(
                    "CANDOR_SPOOL_CRASH_AT={value:?}: expected POINT[:N], POINT one of append, \
                     committed, produce, delivered, removed"
                ),
            }
        });
        let Some((name, n)) = plan else { return };
        if name == point.as_str() && SEEN.fetch_add(1, Ordering::SeqCst) + 1 == *n {
            eprintln!("candor-collector: crashing at spool point {name}:{n}");
            std::process::abort();
        }
    }

    /// Does nothing: crash points are built only with the `fault-injection` feature.
    #[cfg(not(feature = "fault-injection"))]
    pub fn reach(_point: Point) {}
}

/// Records produced to Kafka in one go by the drainer, at most.
const DRAIN_RECORDS: usize = 1000;
/// Bytes produced to Kafka in one go by the drainer, at most (one record may be larger).
const DRAIN_BYTES: u64 = 4 << 20;

/// Produces the spooled records to Kafka, oldest first, removing each batch once Kafka
/// acknowledged all of it; records older than `spool.max_age`, or whose stored bytes cannot be
/// read, are removed, counted and logged. Runs until the task is dropped; after a failure it
/// waits `retry_after` and tries the same records again.
pub async fn drain(
    spool: &Spool,
    producer: &crate::sink::kafka::Producer,
    metrics: &crate::ingest::metrics::CollectorMetrics,
    retry_after: Duration,
) {
    loop {
        let batch = match spool.oldest(DRAIN_RECORDS, DRAIN_BYTES) {
            Ok(batch) => batch,
            Err(err) => {
                metrics.spool_failed(&err);
                tokio::time::sleep(retry_after).await;
                continue;
            }
        };
        let now_ms = unix_millis(SystemTime::now());
        metrics.set_spool_level(
            spool.level(),
            batch.first().map_or(0, |oldest| {
                now_ms.saturating_sub(oldest.spooled_at_ms) / 1000
            }),
        );
        if batch.is_empty() {
            // Woken by the next append; the timeout only refreshes the gauges.
            let _ = tokio::time::timeout(Duration::from_secs(1), spool.appended()).await;
            continue;
        }
        let oldest_kept =
            now_ms.saturating_sub(u64::try_from(spool.max_age().as_millis()).unwrap_or(u64::MAX));
        let mut given_up = Vec::new();
        let mut records = Vec::new();
        let mut produced = Vec::new();
        for spooled in batch {
            match spooled.record {
                Err(reason) => {
                    metrics.spool_unreadable(spooled.seq, &reason);
                    given_up.push(spooled.seq);
                }
                Ok(_) if spooled.spooled_at_ms < oldest_kept => {
                    metrics.spool_expired(spooled.seq, spool.max_age());
                    given_up.push(spooled.seq);
                }
                Ok(record) => {
                    records.push(record);
                    produced.push(spooled.seq);
                }
            }
        }
        fault::reach(fault::Point::Produce);
        let delivered = if records.is_empty() {
            Ok(())
        } else {
            producer.deliver(&records).await
        };
        if delivered.is_ok() {
            fault::reach(fault::Point::Delivered);
        }
        let removed = match &delivered {
            Ok(()) => {
                given_up.extend(&produced);
                given_up
            }
            Err(_) => given_up,
        };
        let removal = spool.remove(&removed);
        if removal.is_ok() && delivered.is_ok() {
            fault::reach(fault::Point::Removed);
        }
        if let Err(err) = removal {
            metrics.spool_failed(&err);
        } else if delivered.is_ok() {
            metrics.spool_drained(produced.len() as u64);
        }
        if let Err(err) = delivered {
            tracing::debug!(error = %err, "spooled records not taken by Kafka yet");
            tokio::time::sleep(retry_after).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candor_schema::names::topic;

    fn record(topic: &'static str, key: &[u8], payload: &[u8]) -> KafkaRecord {
        KafkaRecord {
            topic,
            key: key.to_vec(),
            payload: payload.to_vec(),
        }
    }

    #[test]
    fn every_topic_round_trips_through_the_stored_form() {
        let mut stored = Vec::new();
        for topic in TOPICS {
            let original = record(topic, b"key", b"\x00payload\xff");
            encode(1_700_000_000_123, &original, &mut stored);
            assert_eq!(stored.len(), stored_len(&original));
            let read = decode(7, &stored);
            assert_eq!(read.seq, 7);
            assert_eq!(read.spooled_at_ms, 1_700_000_000_123);
            assert_eq!(read.record, Ok(original));
        }
    }

    #[test]
    fn stored_bytes_that_do_not_decode_say_why() {
        let mut stored = Vec::new();
        encode(5, &record(topic::HEARTBEATS, b"abc", b""), &mut stored);
        stored[8] = 9;
        assert_eq!(
            decode(0, &stored).record,
            Err("unknown topic index 9".into())
        );
        stored[8] = 0;
        assert!(
            decode(0, &stored[..10])
                .record
                .unwrap_err()
                .contains("header")
        );
        assert!(decode(0, &stored[..14]).record.unwrap_err().contains("key"));
    }
}
