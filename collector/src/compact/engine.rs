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

use candor_schema::tables::{Arrival, Table};
use deltalake::DeltaTable;
use deltalake::parquet::file::properties::WriterProperties;

use super::metrics::CompactMetrics;
use super::table::{self, CommitReport, FileSettings, Span, TableError};
use candor_schema::rows::{self, Meta, Row, SourceRecord, TimeBounds};

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
    /// Buffered rows a flush is due at (the memory bound).
    pub max_rows: usize,
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
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum IdKey {
    Hex(u128),
    Text(Box<str>),
}

impl IdKey {
    fn of(id: &str) -> Self {
        let hex = id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        match u128::from_str_radix(id, 16) {
            Ok(value) if hex => Self::Hex(value),
            _ => Self::Text(id.into()),
        }
    }
}

/// Remembers recent ids per table to drop a client's retried copy.
///
/// Every record passes through it, so it hashes with foldhash (seeded per process) rather than
/// SipHash: hashing and looking ids up in it were about 8 % of the compactor's time.
#[derive(Debug, Default)]
struct Dedupe {
    /// (table, id) → where it was read and its Kafka time.
    seen: HashMap<(Table, IdKey), (Source, i64, i64), foldhash::fast::RandomState>,
    /// Insertion order, oldest first, for expiry.
    order: VecDeque<(i64, Table, IdKey)>,
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
        match self.seen.entry((table, IdKey::of(id))) {
            Entry::Occupied(_) => true,
            Entry::Vacant(vacant) => {
                let key = vacant.key().clone();
                vacant.insert((source, meta.offset, meta.kafka_micros));
                self.order.push_back((meta.kafka_micros, key.0, key.1));
                false
            }
        }
    }

    /// Drops the entries older than `oldest`. An entry re-inserted later (after a discard) is
    /// not dropped by its older queue entry: the times must match.
    fn expire(&mut self, oldest: i64) {
        while let Some((at, _, _)) = self.order.front() {
            if *at >= oldest {
                break;
            }
            if let Some((at, table, id)) = self.order.pop_front() {
                let key = (table, id);
                if self.seen.get(&key).is_some_and(|entry| entry.2 == at) {
                    self.seen.remove(&key);
                }
            }
        }
    }

    fn insert(&mut self, key: (Table, IdKey), source: Source, offset: i64, kafka_micros: i64) {
        self.order.push_back((kafka_micros, key.0, key.1.clone()));
        self.seen.insert(key, (source, offset, kafka_micros));
    }

    /// Remembers an id already stored (read back from the table at start), oldest first.
    fn remember(&mut self, table: Table, id: &str, source: Source, offset: i64, kafka_micros: i64) {
        self.insert((table, IdKey::of(id)), source, offset, kafka_micros);
    }

    /// Forgets the ids of rows that were discarded unwritten, so that their re-read is kept.
    fn forget(&mut self, source: Source, rows: &[(Meta, Row)], table: Table) {
        for (meta, row) in rows {
            if let Some(id) = row.id() {
                let key = (table, IdKey::of(id));
                if self
                    .seen
                    .get(&key)
                    .is_some_and(|entry| (entry.0, entry.1) == (source, meta.offset))
                {
                    self.seen.remove(&key);
                }
            }
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
        for record in records {
            let source = (record.topic, record.partition);
            self.metrics.consumed(record.topic.topic());
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
        }
        super::fault::reach(super::fault::Point::Read, None);
    }

    /// Whether the buffer is due to be written: its estimated Parquet size or its age.
    pub fn due(&self, now: Instant) -> bool {
        let estimate = self.buffered_bytes as f64 * self.ratio;
        estimate >= self.settings.target_bytes as f64
            || self.buffered_rows >= self.settings.max_rows
            || self
                .oldest
                .is_some_and(|oldest| now.duration_since(oldest) >= self.settings.max_age)
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
            let spans = self.spans_for(table);
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
            let result = table::commit(delta, table, &spans, properties, metadata).await;
            let home: Vec<Source> = spans.keys().copied().filter(|(t, _)| *t == table).collect();
            drop(spans);
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
            state.rows.clear();
            state.from = state.next;
            report.positions.push((*source, state.next));
        }
        self.buffered_bytes = 0;
        self.buffered_rows = 0;
        self.oldest = None;
        Ok(report)
    }

    /// The spans of `table`: one per home source (even without rows, so that its position
    /// moves) and, for `rejected`, one per other source that has rejected rows.
    fn spans_for(&self, table: Table) -> BTreeMap<Source, Span<'_>> {
        self.partitions
            .iter()
            .filter(|(source, state)| {
                (source.0 == table && state.next > state.from) || state.rows.contains_key(&table)
            })
            .map(|(source, state)| {
                let span = Span {
                    from: state.from,
                    to: state.next,
                    rows: state.rows.get(&table).map_or(&[], Vec::as_slice),
                };
                (*source, span)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(offset: i64, kafka_micros: i64) -> Meta {
        Meta {
            partition: 0,
            offset,
            kafka_micros,
            arrival: Arrival::OnTime,
        }
    }

    #[test]
    fn dedupe_drops_a_copy_within_the_window_and_keeps_one_after_it() {
        let mut dedupe = Dedupe::default();
        let source = (Table::OutcomeEvents, 0);
        let t = Table::OutcomeEvents;
        assert!(!dedupe.is_duplicate(t, "a", source, &meta(1, 0), 10));
        assert!(dedupe.is_duplicate(t, "a", source, &meta(2, 5), 10));
        assert!(!dedupe.is_duplicate(t, "b", source, &meta(3, 20), 10));
        // "a" left the window when time reached 20.
        assert!(!dedupe.is_duplicate(t, "a", source, &meta(4, 21), 10));
    }

    #[test]
    fn contract_ids_become_numbers_and_others_stay_text() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            IdKey::of(id),
            IdKey::Hex(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef)
        );
        assert!(matches!(
            IdKey::of("0123456789ABCDEF0123456789ABCDEF"),
            IdKey::Text(_)
        ));
        assert!(matches!(
            IdKey::of("+123456789abcdef0123456789abcdef"),
            IdKey::Text(_)
        ));
        assert!(matches!(IdKey::of("abc"), IdKey::Text(_)));
    }

    #[test]
    fn an_old_queue_entry_does_not_expire_a_newer_insertion_of_the_same_id() {
        let mut dedupe = Dedupe::default();
        let source = (Table::OutcomeEvents, 0);
        let t = Table::OutcomeEvents;
        assert!(!dedupe.is_duplicate(t, "a", source, &meta(1, 0), 10));
        let row = Row::Event(rows::Event::from_record(
            &candor_schema::proto::OutcomeEvent {
                event_id: "a".into(),
                ..Default::default()
            },
        ));
        dedupe.forget(source, &[(meta(1, 0), row)], t);
        // Read again later: inserted anew at time 8.
        assert!(!dedupe.is_duplicate(t, "a", source, &meta(1, 8), 10));
        // Time 15 expires the entry of time 0, not the one of time 8.
        assert!(dedupe.is_duplicate(t, "a", source, &meta(2, 15), 10));
    }

    #[test]
    fn forgetting_discarded_rows_lets_their_reread_through() {
        let mut dedupe = Dedupe::default();
        let source = (Table::OutcomeEvents, 0);
        let t = Table::OutcomeEvents;
        assert!(!dedupe.is_duplicate(t, "a", source, &meta(1, 0), 10));
        let row = Row::Event(rows::Event::from_record(
            &candor_schema::proto::OutcomeEvent {
                event_id: "a".into(),
                ..Default::default()
            },
        ));
        dedupe.forget(source, &[(meta(1, 0), row)], t);
        assert!(!dedupe.is_duplicate(t, "a", source, &meta(1, 0), 10));
    }
}
