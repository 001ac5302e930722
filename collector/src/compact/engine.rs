//! The compactor's state between Kafka and the tables: what was read from each assigned
//! partition since the last commit, and the rule for committing it.
//!
//! For each assigned source partition the engine holds `from` (the position the open span
//! started at, which the table holds) and `next` (one past the last offset read). A record below
//! `next` was read before and is skipped; rows are buffered per table. [`Engine::flush`] commits
//! the `rejected` table first, then the others: a record's rejected row is thus stored no later
//! than the position of its own table moves past it, so a crash in between re-reads it and the
//! `rejected` table's own position filters the copy.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use candor_records::tables::{Arrival, Table};
use deltalake::DeltaTable;
use deltalake::parquet::file::properties::WriterProperties;

use super::metrics::CompactMetrics;
use super::table::{self, CommitReport, FileSettings, Span, TableError};
use candor_records::rows::{self, Meta, Row, SourceRecord, TimeBounds};

/// A source topic-partition.
pub type Source = (Table, i32);

/// Settings of the engine.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// Names the compactor in rejected rows and commit metadata.
    pub compactor_id: String,
    /// Late and future bounds.
    pub bounds: TimeBounds,
    /// How long an id is remembered to drop a retried copy (in Kafka time).
    pub dedupe_window: Duration,
    /// Parquet bytes a flush is due at.
    pub target_bytes: usize,
    /// Age of the oldest buffered record a flush is due at.
    pub max_age: Duration,
    /// Buffered rows a flush is due at.
    pub max_rows: usize,
    /// Memory of the buffered rows a flush is due at ([`row_memory`]): the memory bound.
    pub max_buffer_bytes: usize,
    /// Row group size and codec level.
    pub files: FileSettings,
}

#[derive(Debug, Default)]
struct PartitionState {
    from: i64,
    next: i64,
    /// Records of an older generation (read before the latest assignment or seek) are stale.
    generation: u64,
    /// A seek back was asked for and not yet confirmed: every record is stale until then.
    awaiting_seek: bool,
    rows: BTreeMap<Table, Vec<(Meta, Row)>>,
}

/// An id as a hash key: the contract's ids (32 lower-case hex digits) as the 128-bit number they
/// spell, exactly and without an allocation; anything else as its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdKey<'a> {
    Hex(u128),
    Text(&'a str),
}

impl<'a> IdKey<'a> {
    fn of(id: &'a str) -> Self {
        candor_records::ids::hex_128(id).map_or(Self::Text(id), Self::Hex)
    }
}

/// Where an id was read and its Kafka time: (source, offset, Kafka time in microseconds).
type Seen = (Source, i64, i64);

/// The ids of one kind (numbers or texts) remembered for one table, with their insertion order
/// for expiry.
#[derive(Debug)]
struct Recent<K> {
    seen: HashMap<K, Seen, foldhash::fast::RandomState>,
    /// (Kafka time, id), oldest first.
    order: VecDeque<(i64, K)>,
}

impl<K> Default for Recent<K> {
    fn default() -> Self {
        Self {
            seen: HashMap::default(),
            order: VecDeque::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone> Recent<K> {
    /// True when `key` is remembered; otherwise remembers it.
    fn check_in(&mut self, key: K, seen: Seen) -> bool {
        match self.seen.entry(key) {
            Entry::Occupied(_) => true,
            Entry::Vacant(vacant) => {
                self.order.push_back((seen.2, vacant.key().clone()));
                vacant.insert(seen);
                false
            }
        }
    }

    fn insert(&mut self, key: K, seen: Seen) {
        self.order.push_back((seen.2, key.clone()));
        self.seen.insert(key, seen);
    }

    /// Drops the entries older than `oldest`. An entry re-inserted later (after a discard) is
    /// not dropped by its older queue entry: the times must match.
    fn expire(&mut self, oldest: i64) {
        while self.order.front().is_some_and(|(at, _)| *at < oldest) {
            if let Some((at, key)) = self.order.pop_front()
                && self.seen.get(&key).is_some_and(|entry| entry.2 == at)
            {
                self.seen.remove(&key);
            }
        }
    }

    /// Forgets `key` if it was remembered as read at `source` and `offset`.
    fn forget<Q>(&mut self, key: &Q, source: Source, offset: i64)
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        if self
            .seen
            .get(key)
            .is_some_and(|entry| (entry.0, entry.1) == (source, offset))
        {
            self.seen.remove(key);
        }
    }
}

/// One table's remembered ids: the contract's as numbers (48 bytes an entry, 32 in the order),
/// any other as its text.
#[derive(Debug, Default)]
struct TableIds {
    hex: Recent<u128>,
    text: Recent<Box<str>>,
}

/// Remembers recent ids per table to drop a client's retried copy.
///
/// Every record passes through it, so it hashes with foldhash (seeded per process) rather than
/// SipHash, whose cost showed in the compactor's profile. It holds every id of the window, so
/// its entries are kept small.
#[derive(Debug, Default)]
struct Dedupe {
    tables: BTreeMap<Table, TableIds>,
}

impl Dedupe {
    /// True when `id` was seen within the window; otherwise remembers it.
    fn is_duplicate(
        &mut self,
        table: Table,
        id: &str,
        source: Source,
        meta: &Meta,
        window_micros: i64,
    ) -> bool {
        self.expire(meta.kafka_micros.saturating_sub(window_micros));
        let ids = self.tables.entry(table).or_default();
        let seen = (source, meta.offset, meta.kafka_micros);
        match IdKey::of(id) {
            IdKey::Hex(value) => ids.hex.check_in(value, seen),
            IdKey::Text(text) => ids.text.check_in(text.into(), seen),
        }
    }

    /// Drops the entries older than `oldest`, in every table.
    fn expire(&mut self, oldest: i64) {
        for ids in self.tables.values_mut() {
            ids.hex.expire(oldest);
            ids.text.expire(oldest);
        }
    }

    /// Remembers an id already stored (read back from the table at start), oldest first.
    fn remember(&mut self, table: Table, id: &str, source: Source, offset: i64, kafka_micros: i64) {
        let ids = self.tables.entry(table).or_default();
        let seen = (source, offset, kafka_micros);
        match IdKey::of(id) {
            IdKey::Hex(value) => ids.hex.insert(value, seen),
            IdKey::Text(text) => ids.text.insert(text.into(), seen),
        }
    }

    /// Forgets the ids of rows that were discarded unwritten, so that their re-read is kept.
    fn forget(&mut self, source: Source, rows: &[(Meta, Row)], table: Table) {
        let Some(ids) = self.tables.get_mut(&table) else {
            return;
        };
        for (meta, row) in rows {
            match row.id().map(IdKey::of) {
                Some(IdKey::Hex(value)) => ids.hex.forget(&value, source, meta.offset),
                Some(IdKey::Text(text)) => ids.text.forget(text, source, meta.offset),
                None => {}
            }
        }
    }
}

/// The memory a buffered row takes, as the buffer's bound counts it: its fixed size and its
/// record's bytes. An event row keeps its record's bytes as read ([`rows::Event`]); the other
/// rows' texts come from theirs and take about as much.
pub fn row_memory(record_bytes: usize) -> usize {
    std::mem::size_of::<(Meta, Row)>() + record_bytes
}

/// Which bound made the buffer due ([`Engine::due`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// The rows would make about `files.target_bytes` of Parquet.
    Size,
    /// The rows take `files.max_buffer_bytes` of memory.
    Memory,
    /// `files.max_rows` rows are buffered.
    Rows,
    /// The oldest buffered record is `files.max_age` old.
    Age,
}

impl Due {
    /// The label of the flushes counter.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Size => "size",
            Self::Memory => "memory",
            Self::Rows => "rows",
            Self::Age => "age",
        }
    }
}

/// What a flush did, per table.
#[derive(Debug, Default)]
pub struct FlushReport {
    /// Reports of the tables committed.
    pub committed: Vec<(Table, CommitReport)>,
    /// Positions to commit to Kafka as a hint: source → next offset.
    pub positions: Vec<(Source, i64)>,
    /// Sources whose rows were discarded to be re-read from this position.
    pub reread: Vec<(Source, i64)>,
}

/// The compactor's buffer and commit rule.
pub struct Engine {
    settings: EngineSettings,
    metrics: std::sync::Arc<CompactMetrics>,
    partitions: BTreeMap<Source, PartitionState>,
    dedupe: Dedupe,
    oldest: Option<Instant>,
    buffered_bytes: usize,
    buffered_rows: usize,
    /// The buffered rows' memory, by [`row_memory`].
    buffered_memory: usize,
    /// Parquet bytes per buffered record byte, learned from the files written.
    ratio: f64,
    /// Records turned into rejected rows since the last flush: (source, reason) → (count, last
    /// detail). Counted once committed; a discarded source's entries go with its rows.
    refused: BTreeMap<(Source, String), (u64, String)>,
    properties: HashMap<Table, WriterProperties>,
}

impl Engine {
    /// An engine with nothing assigned.
    pub fn new(settings: EngineSettings, metrics: std::sync::Arc<CompactMetrics>) -> Self {
        let properties = Table::ALL
            .into_iter()
            .map(|t| (t, table::writer_properties(t, settings.files)))
            .collect();
        Self {
            settings,
            metrics,
            partitions: BTreeMap::new(),
            dedupe: Dedupe::default(),
            oldest: None,
            buffered_bytes: 0,
            buffered_rows: 0,
            buffered_memory: 0,
            ratio: 0.25,
            refused: BTreeMap::new(),
            properties,
        }
    }

    /// Remembers ids the table already holds (from [`table::recent_ids`], oldest first), so that
    /// a retried copy arriving after a restart is still dropped.
    pub fn remember_stored(&mut self, table: Table, ids: Vec<(String, i32, i64, i64)>) {
        for (id, partition, offset, kafka_micros) in ids {
            self.dedupe
                .remember(table, &id, (table, partition), offset, kafka_micros);
        }
    }

    /// A partition was assigned (or sought back) under `generation`; reading starts at
    /// `position`, which the table holds. Rows buffered for it earlier are discarded (they are
    /// read again).
    pub fn assign(&mut self, source: Source, position: i64, generation: u64) {
        self.discard(source);
        self.partitions.insert(
            source,
            PartitionState {
                from: position,
                next: position,
                generation,
                awaiting_seek: false,
                rows: BTreeMap::new(),
            },
        );
        self.metrics.set_assigned(self.partitions.len());
    }

    /// Drops what was read of a partition and waits for the seek back to `position`
    /// ([`Engine::assign`] with the seek's generation ends the wait).
    fn reread(&mut self, source: Source, position: i64) {
        self.discard(source);
        if let Some(state) = self.partitions.get_mut(&source) {
            state.from = position;
            state.next = position;
            state.awaiting_seek = true;
        }
    }

    /// A partition was taken away: its unwritten rows are discarded; the new owner reads them
    /// from the table's position.
    pub fn revoke(&mut self, source: Source) {
        self.discard(source);
        self.partitions.remove(&source);
        self.metrics.set_assigned(self.partitions.len());
    }

    fn discard(&mut self, source: Source) {
        self.refused.retain(|(from, _), _| *from != source);
        if let Some(state) = self.partitions.get_mut(&source) {
            for (table, rows) in std::mem::take(&mut state.rows) {
                self.dedupe.forget(source, &rows, table);
            }
            state.next = state.from;
        }
    }

    /// Takes records read from Kafka.
    pub fn intake(&mut self, records: Vec<SourceRecord>, now: Instant) {
        let window = i64::try_from(self.settings.dedupe_window.as_micros()).unwrap_or(i64::MAX);
        // Counted per run of records from one topic, not one metric update per record.
        let mut consumed: Option<(Table, u64)> = None;
        for record in records {
            let source = (record.topic, record.partition);
            match &mut consumed {
                Some((topic, count)) if *topic == record.topic => *count += 1,
                _ => {
                    if let Some((topic, count)) = consumed.replace((record.topic, 1)) {
                        self.metrics.consumed(topic.topic(), count);
                    }
                }
            }
            let Some(state) = self.partitions.get_mut(&source) else {
                // Read before the revocation reached us: the new owner reads it.
                self.metrics.not_assigned();
                continue;
            };
            if record.generation < state.generation || state.awaiting_seek {
                // Read before the latest assignment or seek: it is read again after it.
                self.metrics.read_again();
                continue;
            }
            if record.offset < state.next {
                self.metrics.read_again();
                continue;
            }
            if record.offset > state.next {
                // Kafka no longer holds what lies between (retention, a deleted topic): those
                // records never reach the tables. Not silent.
                let missing = record.offset - state.next;
                self.metrics.error(
                    "offsets_skipped",
                    format!(
                        "{}/{}: offsets {}..{} are not in Kafka; {missing} record(s) never stored",
                        record.topic.topic(),
                        record.partition,
                        state.next,
                        record.offset
                    ),
                );
            }
            state.next = record.offset + 1;
            // The position moved: even a record that adds no row (a duplicate) is due to be
            // committed within the age bound.
            self.oldest.get_or_insert(now);
            let bytes = record.payload.as_ref().map_or(0, Vec::len);
            let topic = record.topic;
            let (meta, row) =
                rows::decode_owned(record, &self.settings.bounds, &self.settings.compactor_id);
            let table = row.table();
            if let Row::Rejected(rejected) = &row
                && topic != Table::Rejected
            {
                let key = (source, rejected.reason.clone());
                let entry = self.refused.entry(key).or_default();
                entry.0 += 1;
                entry.1.clone_from(&rejected.detail);
            }
            if meta.arrival != Arrival::OnTime {
                self.metrics.off_time(table.name(), meta.arrival.as_str());
            }
            if let Some(id) = row.id()
                && self.dedupe.is_duplicate(table, id, source, &meta, window)
            {
                self.metrics.duplicate(table.name());
                continue;
            }
            state.rows.entry(table).or_default().push((meta, row));
            self.buffered_bytes += bytes;
            self.buffered_rows += 1;
            self.buffered_memory += row_memory(bytes);
        }
        if let Some((topic, count)) = consumed {
            self.metrics.consumed(topic.topic(), count);
        }
        self.metrics.set_buffered(self.buffered_memory);
        super::fault::reach(super::fault::Point::Read, None);
    }

    /// Why the buffer is due to be written, if it is: its estimated Parquet size, its rows, its
    /// memory or its age.
    pub fn due(&self, now: Instant) -> Option<Due> {
        let estimate = self.buffered_bytes as f64 * self.ratio;
        if estimate >= self.settings.target_bytes as f64 {
            Some(Due::Size)
        } else if self.buffered_memory >= self.settings.max_buffer_bytes {
            Some(Due::Memory)
        } else if self.buffered_rows >= self.settings.max_rows {
            Some(Due::Rows)
        } else if self
            .oldest
            .is_some_and(|oldest| now.duration_since(oldest) >= self.settings.max_age)
        {
            Some(Due::Age)
        } else {
            None
        }
    }

    /// Whether any source moved since the last flush.
    pub fn has_pending(&self) -> bool {
        self.partitions
            .values()
            .any(|state| state.next > state.from)
    }

    /// Commits what was read: the `rejected` table first, then the others, each with the
    /// positions of its sources. On a gap the source is reset to the table's position (in
    /// `reread`); on any other error the buffer stays and the next flush tries again.
    pub async fn flush(
        &mut self,
        tables: &mut BTreeMap<Table, DeltaTable>,
    ) -> Result<FlushReport, TableError> {
        let mut report = FlushReport::default();
        // `rejected` first; see the module documentation.
        let order = std::iter::once(Table::Rejected)
            .chain(Table::ALL.into_iter().filter(|t| *t != Table::Rejected));
        for table in order {
            let mut spans = self.take_spans(table);
            if spans.is_empty() {
                continue;
            }
            let delta = tables.get_mut(&table).ok_or_else(|| TableError::Delta {
                table: table.name(),
                source: deltalake::DeltaTableError::Generic("the table was not opened".into()),
            })?;
            let metadata = HashMap::from([(
                "candor.compactor_id".to_owned(),
                serde_json::Value::from(self.settings.compactor_id.clone()),
            )]);
            let properties = &self.properties[&table];
            let started = Instant::now();
            let result = table::commit(delta, table, &mut spans, properties, metadata).await;
            let home: Vec<Source> = spans.keys().copied().filter(|(t, _)| *t == table).collect();
            self.put_back(table, spans);
            match result {
                Ok(commit) => {
                    self.metrics
                        .committed(table.name(), &commit, started.elapsed());
                    super::fault::reach(super::fault::Point::TableCommitted, Some(table.name()));
                    report.committed.push((table, commit));
                }
                Err(gap @ TableError::Gap { .. }) => {
                    self.metrics.error(gap.code(), &gap);
                    // Re-read every source of this table from what the table holds.
                    for source in home {
                        let held = table::position(delta, table, source.0, source.1)
                            .await?
                            .unwrap_or(0);
                        self.reread(source, held);
                        report.reread.push((source, held));
                    }
                    return Ok(report);
                }
                Err(err) => {
                    self.metrics.error(err.code(), &err);
                    return Err(err);
                }
            }
        }
        let mut refused: BTreeMap<String, (u64, String)> = BTreeMap::new();
        for ((_, reason), (count, detail)) in std::mem::take(&mut self.refused) {
            let entry = refused.entry(reason).or_default();
            entry.0 += count;
            entry.1 = detail;
        }
        for (reason, (count, detail)) in refused {
            self.metrics.undecodable(&reason, count, &detail);
        }
        let written: u64 = report.committed.iter().map(|(_, c)| c.bytes).sum();
        if written > 0 && self.buffered_bytes > 0 {
            self.ratio = written as f64 / self.buffered_bytes as f64;
        }
        for (source, state) in &mut self.partitions {
            for rows in state.rows.values_mut() {
                // The vector is kept for the next file: growing it again would fault its memory
                // in again. Room past twice what this file needed (a burst's) goes.
                let used = rows.len();
                rows.clear();
                rows.shrink_to(2 * used);
            }
            state.from = state.next;
            report.positions.push((*source, state.next));
        }
        self.buffered_bytes = 0;
        self.buffered_rows = 0;
        self.buffered_memory = 0;
        self.metrics.set_buffered(0);
        self.oldest = None;
        Ok(report)
    }

    /// The spans of `table`: one per home source (even without rows, so that its position
    /// moves) and, for `rejected`, one per other source that has rejected rows. The rows move
    /// into the spans; [`Engine::put_back`] returns them.
    fn take_spans(&mut self, table: Table) -> BTreeMap<Source, Span> {
        self.partitions
            .iter_mut()
            .filter(|(source, state)| {
                (source.0 == table && state.next > state.from)
                    || state.rows.get(&table).is_some_and(|rows| !rows.is_empty())
            })
            .map(|(source, state)| {
                let span = Span {
                    from: state.from,
                    to: state.next,
                    rows: state
                        .rows
                        .get_mut(&table)
                        .map(std::mem::take)
                        .unwrap_or_default(),
                };
                (*source, span)
            })
            .collect()
    }

    /// Returns the rows of [`Engine::take_spans`] to their sources: kept until the flush ends,
    /// and for the next one when it fails.
    fn put_back(&mut self, table: Table, spans: BTreeMap<Source, Span>) {
        for (source, span) in spans {
            if let Some(state) = self.partitions.get_mut(&source) {
                state.rows.insert(table, span.rows);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    fn meta(offset: i64, kafka_micros: i64) -> Meta {
        Meta {
            partition: 0,
            offset,
            kafka_micros,
            arrival: Arrival::OnTime,
        }
    }

    /// Ids of both kinds: texts, and the contract's hex ids kept as numbers.
    const IDS: [(&str, &str); 2] = [
        ("a", "b"),
        (
            "0123456789abcdef0123456789abcdef",
            "ffffffffffffffffffffffffffffffff",
        ),
    ];

    fn row_of(id: &str) -> Row {
        Row::Event(rows::Event::from_record(
            &candor_records::proto::OutcomeEvent {
                event_id: id.into(),
                ..Default::default()
            },
        ))
    }

    fn engine(max_rows: usize, max_buffer_bytes: usize) -> Engine {
        let settings = EngineSettings {
            compactor_id: "test".into(),
            bounds: TimeBounds {
                late_after_micros: i64::MAX,
                future_after_micros: i64::MAX,
            },
            dedupe_window: Duration::from_secs(600),
            target_bytes: usize::MAX,
            max_age: Duration::from_secs(3600),
            max_rows,
            max_buffer_bytes,
            files: FileSettings {
                row_group_rows: 1024,
                zstd_level: 1,
            },
        };
        Engine::new(settings, CompactMetrics::new())
    }

    /// `count` distinct event records of `source`, from offset 0, and their payload's size.
    fn records(source: Source, count: i64) -> (Vec<SourceRecord>, usize) {
        let records: Vec<SourceRecord> = (0..count)
            .map(|offset| SourceRecord {
                topic: source.0,
                partition: source.1,
                offset,
                timestamp_ms: Some(1_700_000_000_000),
                payload: Some(
                    candor_records::proto::OutcomeEvent {
                        event_id: format!("{offset:032x}"),
                        ..Default::default()
                    }
                    .encode_to_vec(),
                ),
                generation: 0,
            })
            .collect();
        let size = records[0].payload.as_ref().map_or(0, Vec::len);
        (records, size)
    }

    #[test]
    fn the_buffer_is_due_when_its_rows_take_the_memory_bound() {
        let source = (Table::OutcomeEvents, 0);
        let (mut records, size) = records(source, 10);
        let mut engine = engine(1_000, 10 * row_memory(size));
        engine.assign(source, 0, 0);
        let last = records.pop().into_iter().collect();
        let now = Instant::now();
        engine.intake(records, now);
        assert_eq!(engine.due(now), None, "nine rows are under the bound");
        engine.intake(last, now);
        assert_eq!(engine.due(now), Some(Due::Memory));
        let gauge = format!(
            "candor_compactor_buffered_bytes {}\n",
            10 * row_memory(size)
        );
        assert!(engine.metrics.render().contains(&gauge));
    }

    #[test]
    fn each_bound_names_itself() {
        let source = (Table::OutcomeEvents, 0);
        let (records_, _) = records(source, 4);
        let now = Instant::now();
        let mut by_rows = engine(4, usize::MAX);
        by_rows.assign(source, 0, 0);
        by_rows.intake(records_.clone(), now);
        assert_eq!(by_rows.due(now), Some(Due::Rows));
        let mut by_age = engine(1_000, usize::MAX);
        by_age.assign(source, 0, 0);
        by_age.intake(records_, now);
        assert_eq!(by_age.due(now), None);
        assert_eq!(by_age.due(now + Duration::from_secs(3600)), Some(Due::Age));
    }

    #[test]
    fn dedupe_drops_a_copy_within_the_window_and_keeps_one_after_it() {
        for (a, b) in IDS {
            let mut dedupe = Dedupe::default();
            let source = (Table::OutcomeEvents, 0);
            let t = Table::OutcomeEvents;
            assert!(!dedupe.is_duplicate(t, a, source, &meta(1, 0), 10));
            assert!(dedupe.is_duplicate(t, a, source, &meta(2, 5), 10));
            // The same id in another table is another row.
            assert!(!dedupe.is_duplicate(Table::OutcomeCounts, a, source, &meta(2, 5), 10));
            assert!(!dedupe.is_duplicate(t, b, source, &meta(3, 20), 10));
            // `a` left the window when time reached 20.
            assert!(!dedupe.is_duplicate(t, a, source, &meta(4, 21), 10));
        }
    }

    #[test]
    fn contract_ids_become_numbers_and_others_stay_text() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            IdKey::of(id),
            IdKey::Hex(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef)
        );
        assert_eq!(
            IdKey::of("ffffffffffffffffffffffffffffffff"),
            IdKey::Hex(u128::MAX)
        );
        for text in [
            "0123456789ABCDEF0123456789ABCDEF",
            "+123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdeg",
            "0123456789abcdef0123456789abcde",
            "abc",
            "",
        ] {
            assert_eq!(IdKey::of(text), IdKey::Text(text));
        }
    }

    proptest::proptest! {
        /// An id is a number exactly when it is 32 lower-case hex digits, and then the number
        /// they spell.
        #[test]
        fn ids_are_numbers_exactly_when_they_are_contract_ids(
            id in "[0-9a-fA-F]{31,33}|[0-9a-f+ -]{32}|[0-9a-f]{32}",
        ) {
            let contract = id.len() == 32
                && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
            let expected = if contract {
                IdKey::Hex(u128::from_str_radix(&id, 16).unwrap())
            } else {
                IdKey::Text(&id)
            };
            proptest::prop_assert_eq!(IdKey::of(&id), expected);
        }
    }

    #[test]
    fn an_old_queue_entry_does_not_expire_a_newer_insertion_of_the_same_id() {
        for (a, _) in IDS {
            let mut dedupe = Dedupe::default();
            let source = (Table::OutcomeEvents, 0);
            let t = Table::OutcomeEvents;
            assert!(!dedupe.is_duplicate(t, a, source, &meta(1, 0), 10));
            dedupe.forget(source, &[(meta(1, 0), row_of(a))], t);
            // Read again later: inserted anew at time 8.
            assert!(!dedupe.is_duplicate(t, a, source, &meta(1, 8), 10));
            // Time 15 expires the entry of time 0, not the one of time 8.
            assert!(dedupe.is_duplicate(t, a, source, &meta(2, 15), 10));
        }
    }

    #[test]
    fn forgetting_discarded_rows_lets_their_reread_through() {
        for (a, b) in IDS {
            let mut dedupe = Dedupe::default();
            let source = (Table::OutcomeEvents, 0);
            let t = Table::OutcomeEvents;
            assert!(!dedupe.is_duplicate(t, a, source, &meta(1, 0), 10));
            assert!(!dedupe.is_duplicate(t, b, source, &meta(2, 0), 10));
            // A row read elsewhere, or at another offset, forgets nothing.
            dedupe.forget((Table::OutcomeEvents, 1), &[(meta(1, 0), row_of(a))], t);
            dedupe.forget(source, &[(meta(3, 0), row_of(b))], t);
            assert!(dedupe.is_duplicate(t, a, source, &meta(4, 0), 10));
            assert!(dedupe.is_duplicate(t, b, source, &meta(4, 0), 10));
            dedupe.forget(source, &[(meta(1, 0), row_of(a))], t);
            assert!(!dedupe.is_duplicate(t, a, source, &meta(1, 0), 10));
        }
    }
}
