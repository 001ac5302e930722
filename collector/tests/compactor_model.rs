//! A model-based test of the compactor's exactly-once rule.
//!
//! Proptest draws a sequence of actions — records produced (some undecodable, some retried copies
//! of an earlier event), polls (some of records read before the latest assignment), flushes,
//! crashes at each step of a flush, kills between steps, restarts, and partitions moved between
//! two members — and runs them against the real engine writing real Delta tables in a temporary
//! directory. Kafka is modelled as one log per partition.
//!
//! The model is the durable position of each partition: what a completed flush committed, or,
//! after a crash inside a flush, either the old or the new position. After every action the
//! tables must agree with it: the events table's position is one the model allows, the table
//! holds exactly the events below it (each once, retried copies removed), and every undecodable
//! record below it is in `rejected` exactly once. At the end one member drains everything and
//! the tables must hold every record exactly once.

#![cfg(feature = "fault-injection")]
#![allow(clippy::unwrap_used)] // a panic is the test's failure report

use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use candor_collector::compact::engine::{Engine, EngineSettings};
use candor_collector::compact::fault::{self, Crashed, Point};
use candor_collector::compact::metrics::CompactMetrics;
use candor_collector::compact::open_tables;
use candor_collector::compact::table::{self, FileSettings};
use candor_records::proto::OutcomeEvent;
use candor_records::rows::{SourceRecord, TimeBounds};
use candor_records::tables::{Table, column};
use deltalake::DeltaTable;
use deltalake::arrow::array::{Int32Array, Int64Array};
use deltalake::datafusion::prelude::SessionContext;
use proptest::prelude::*;
use prost::Message as _;

const PARTITIONS: usize = 2;
const MEMBERS: usize = 2;

#[derive(Debug, Clone)]
enum Action {
    /// Records appended to a partition: valid events, a retried copy of its first event, or
    /// bytes that do not decode.
    Produce {
        partition: usize,
        count: usize,
        kind: Kind,
    },
    /// The member reads up to `max` records of a partition it owns; `stale` ones were read
    /// before its latest assignment and must be dropped.
    Poll {
        member: usize,
        partition: usize,
        max: usize,
        stale: bool,
    },
    /// A flush that completes.
    Flush { member: usize },
    /// A flush that crashes when it reaches `point`.
    CrashInFlush { member: usize, point: CrashPoint },
    /// The member dies between steps.
    Kill { member: usize },
    /// The member starts (when not running) and takes every partition nobody running owns.
    Start { member: usize },
    /// The partition moves to `to` (a rebalance): the old owner is told and drops what it read.
    Move { partition: usize, to: usize },
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Valid,
    Copy,
    Undecodable,
}

/// Where inside a flush it crashes. (A crash right after reading, before any flush, is a
/// [`Action::Kill`].)
#[derive(Debug, Clone, Copy)]
enum CrashPoint {
    FilesWritten(Table),
    TableCommitted(Table),
}

fn action() -> impl Strategy<Value = Action> {
    let member = 0..MEMBERS;
    let partition = 0..PARTITIONS;
    let kind = prop_oneof![
        6 => Just(Kind::Valid),
        1 => Just(Kind::Copy),
        1 => Just(Kind::Undecodable),
    ];
    let table = prop_oneof![3 => Just(Table::OutcomeEvents), 1 => Just(Table::Rejected)];
    let point = prop_oneof![
        table.clone().prop_map(CrashPoint::FilesWritten),
        table.prop_map(CrashPoint::TableCommitted),
    ];
    prop_oneof![
        4 => (partition.clone(), 1..8usize, kind)
            .prop_map(|(partition, count, kind)| Action::Produce { partition, count, kind }),
        6 => (member.clone(), partition.clone(), 1..8usize, proptest::bool::weighted(0.15))
            .prop_map(|(member, partition, max, stale)| Action::Poll { member, partition, max, stale }),
        3 => member.clone().prop_map(|member| Action::Flush { member }),
        4 => (member.clone(), point)
            .prop_map(|(member, point)| Action::CrashInFlush { member, point }),
        1 => member.clone().prop_map(|member| Action::Kill { member }),
        2 => member.clone().prop_map(|member| Action::Start { member }),
        2 => (partition, member).prop_map(|(partition, to)| Action::Move { partition, to }),
    ]
}

/// One produced record.
#[derive(Debug, Clone)]
struct Record {
    /// The event id, for a valid event or a copy.
    id: Option<String>,
    payload: Vec<u8>,
}

/// A running member: its engine, its tables and where it reads each partition it owns.
struct Member {
    engine: Engine,
    tables: BTreeMap<Table, DeltaTable>,
    /// partition → (next offset to read, generation of its latest assignment).
    cursors: BTreeMap<usize, (i64, u64)>,
}

struct World {
    root: String,
    runtime: tokio::runtime::Runtime,
    log: [Vec<Record>; PARTITIONS],
    members: [Option<Member>; MEMBERS],
    owner: [Option<usize>; PARTITIONS],
    generation: u64,
    produced: u64,
    /// Flushes that crashed, for the figures the test prints.
    crashes: u64,
    /// The model: the position each partition's events table must hold…
    durable: [i64; PARTITIONS],
    /// …or one of these, written by a flush that crashed.
    possible: [BTreeSet<i64>; PARTITIONS],
}

fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

fn event(id: &str) -> Vec<u8> {
    let now = u64::try_from(now_ms()).unwrap() * 1_000_000;
    OutcomeEvent {
        schema_version: 1,
        event_id: id.to_owned(),
        trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
        span_id: "b7ad6b7169203331".into(),
        event_time_unix_nano: now,
        service_name: "orders".into(),
        service_instance_id: "orders-1".into(),
        outcome_class: "access_failure".into(),
        tool_name: "search".into(),
        tool_target: "https://search.test/q".into(),
        failure_kind: "server_error".into(),
        retry_action: "exhausted".into(),
        retry_attempt: 3,
        retry_max_attempts: 3,
        http_status_code: Some(503),
        received_time_unix_nano: now,
        collector_id: "model".into(),
        ..OutcomeEvent::default()
    }
    .encode_to_vec()
}

fn settings() -> EngineSettings {
    EngineSettings {
        compactor_id: "model".into(),
        bounds: TimeBounds {
            late_after_micros: 3_600_000_000,
            future_after_micros: 3_600_000_000,
        },
        dedupe_window: Duration::from_secs(3_600),
        target_bytes: 128 << 20,
        max_age: Duration::from_secs(3_600),
        max_rows: 1_000_000,
        max_buffer_bytes: 1 << 30,
        files: FileSettings {
            row_group_rows: 1_000,
            zstd_level: 1,
        },
    }
}

fn source(partition: usize) -> (Table, i32) {
    (Table::OutcomeEvents, i32::try_from(partition).unwrap())
}

impl World {
    fn new(root: &Path) -> Self {
        Self {
            root: root.to_string_lossy().into_owned(),
            // One thread: the in-process crash plan is per thread.
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
            log: Default::default(),
            members: Default::default(),
            owner: [None; PARTITIONS],
            generation: 0,
            produced: 0,
            crashes: 0,
            durable: [0; PARTITIONS],
            possible: Default::default(),
        }
    }

    fn running(&self, member: usize) -> bool {
        self.members[member].is_some()
    }

    /// Assigns `partition` to `member` at the position its table holds, with the ids the table
    /// stored (as the compactor's position lookup does).
    fn assign(&mut self, member: usize, partition: usize) {
        self.generation += 1;
        let generation = self.generation;
        let root = self.root.clone();
        let (position, ids) = self.runtime.block_on(async {
            let delta = table::open_or_create(&root, Table::OutcomeEvents)
                .await
                .unwrap();
            let (topic, index) = source(partition);
            let position = table::position(&delta, topic, topic, index)
                .await
                .unwrap()
                .unwrap_or(0);
            let ids: Vec<_> = table::recent_ids(&delta, topic, 0)
                .await
                .unwrap()
                .into_iter()
                .filter(|id| id.1 == index)
                .collect();
            (position, ids)
        });
        let target = self.members[member].as_mut().unwrap();
        target
            .engine
            .assign(source(partition), position, generation);
        target.engine.remember_stored(Table::OutcomeEvents, ids);
        target.cursors.insert(partition, (position, generation));
        self.owner[partition] = Some(member);
    }

    fn kill(&mut self, member: usize) {
        self.members[member] = None;
        for owner in &mut self.owner {
            if *owner == Some(member) {
                *owner = None;
            }
        }
    }

    fn apply(&mut self, action: &Action) {
        match *action {
            Action::Produce {
                partition,
                count,
                kind,
            } => {
                for _ in 0..count {
                    self.produced += 1;
                    let record = match kind {
                        Kind::Valid => {
                            let id = format!("{:032x}", self.produced);
                            Record {
                                payload: event(&id),
                                id: Some(id),
                            }
                        }
                        Kind::Copy => match self.log[partition].iter().find_map(|r| r.id.clone()) {
                            Some(id) => Record {
                                payload: event(&id),
                                id: Some(id),
                            },
                            None => continue,
                        },
                        Kind::Undecodable => Record {
                            id: None,
                            payload: vec![0xff, 0xfe, 0x00, 0x01],
                        },
                    };
                    self.log[partition].push(record);
                }
            }
            Action::Poll {
                member,
                partition,
                max,
                stale,
            } => {
                // The member asked for when it owns the partition, else its owner.
                let member = match self.owner[partition] {
                    Some(owner) if self.members[member].is_none() || owner != member => owner,
                    _ => member,
                };
                let Some(running) = self.members[member].as_mut() else {
                    return;
                };
                let Some(&(next, generation)) = running.cursors.get(&partition) else {
                    return;
                };
                let log = &self.log[partition];
                let from = usize::try_from(next).unwrap();
                let to = (from + max).min(log.len());
                let records: Vec<SourceRecord> = (from..to)
                    .map(|offset| SourceRecord {
                        topic: Table::OutcomeEvents,
                        partition: source(partition).1,
                        offset: i64::try_from(offset).unwrap(),
                        timestamp_ms: Some(now_ms()),
                        payload: Some(log[offset].payload.clone()),
                        generation: if stale { generation - 1 } else { generation },
                    })
                    .collect();
                if !stale {
                    running
                        .cursors
                        .insert(partition, (i64::try_from(to).unwrap(), generation));
                }
                running.engine.intake(records, Instant::now());
            }
            Action::Flush { member } => self.flush(member, None),
            Action::CrashInFlush { member, point } => {
                // The member asked for, or the other one when it is not running.
                let member = if self.running(member) {
                    member
                } else {
                    (member + 1) % MEMBERS
                };
                self.flush(member, Some(point));
            }
            Action::Kill { member } => self.kill(member),
            Action::Start { member } => {
                if !self.running(member) {
                    let tables = self.runtime.block_on(open_tables(&self.root)).unwrap();
                    self.members[member] = Some(Member {
                        engine: Engine::new(settings(), CompactMetrics::new()),
                        tables,
                        cursors: BTreeMap::new(),
                    });
                }
                for partition in 0..PARTITIONS {
                    if self.owner[partition].is_none_or(|owner| !self.running(owner)) {
                        self.assign(member, partition);
                    }
                }
            }
            Action::Move { partition, to } => {
                if !self.running(to) || self.owner[partition] == Some(to) {
                    return;
                }
                if let Some(from) = self.owner[partition]
                    && let Some(old) = self.members[from].as_mut()
                {
                    old.engine.revoke(source(partition));
                    old.cursors.remove(&partition);
                }
                self.assign(to, partition);
            }
        }
    }

    /// A flush of `member`, crashing at `crash` when it is given and reached.
    fn flush(&mut self, member: usize, crash: Option<CrashPoint>) {
        let Some(mut running) = self.members[member].take() else {
            return;
        };
        match crash {
            Some(CrashPoint::FilesWritten(table)) => {
                fault::arm(Point::FilesWritten, Some(table.name()), 1);
            }
            Some(CrashPoint::TableCommitted(table)) => {
                fault::arm(Point::TableCommitted, Some(table.name()), 1);
            }
            None => {}
        }
        // What the flush would commit: each owned partition up to what was read.
        let reading: Vec<(usize, i64)> = running
            .cursors
            .iter()
            .map(|(&partition, &(next, _))| (partition, next))
            .collect();
        let Member { engine, tables, .. } = &mut running;
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            self.runtime.block_on(engine.flush(tables))
        }));
        fault::disarm();
        match result {
            Ok(Ok(report)) => {
                // A gap needs two members writing one partition, which this model never has.
                assert!(report.reread.is_empty(), "a gap: {:?}", report.reread);
                for (partition, next) in reading {
                    // The commit moves the table to what was read, unless it held more.
                    self.durable[partition] = self.durable[partition].max(next);
                }
                self.members[member] = Some(running);
            }
            Ok(Err(err)) => panic!("a flush failed without a fault: {err}"),
            Err(payload) => {
                if payload.downcast_ref::<Crashed>().is_none() {
                    std::panic::resume_unwind(payload);
                }
                self.crashes += 1;
                // Each table's commit is atomic: the position is the old one or the new one.
                for (partition, next) in reading {
                    self.possible[partition].insert(next);
                }
                drop(running);
                self.kill(member);
            }
        }
    }

    /// The tables against the model.
    #[allow(clippy::needless_range_loop)] // each partition indexes several arrays
    fn check(&mut self, after: &Action) {
        let (positions, events, rejected) = self.runtime.block_on(read_tables(&self.root));
        for partition in 0..PARTITIONS {
            let held = positions[partition];
            let durable = self.durable[partition];
            assert!(
                held == durable || (held > durable && self.possible[partition].contains(&held)),
                "after {after:?}: partition {partition} holds position {held}, the model allows \
                 {durable} or {:?}",
                self.possible[partition]
            );
            self.durable[partition] = held;
            self.possible[partition].retain(|&p| p > held);
            let log = &self.log[partition];
            let upto = usize::try_from(held).unwrap();
            let mut seen = BTreeSet::new();
            let expected: Vec<i64> = (0..upto)
                .filter(|&offset| {
                    log[offset]
                        .id
                        .as_ref()
                        .is_some_and(|id| seen.insert(id.clone()))
                })
                .map(|offset| i64::try_from(offset).unwrap())
                .collect();
            let stored: Vec<i64> = events
                .iter()
                .filter(|(p, _)| *p == partition)
                .map(|(_, offset)| *offset)
                .collect();
            assert_eq!(
                stored, expected,
                "after {after:?}: partition {partition} (position {held}) holds these event \
                 offsets"
            );
            let refused: Vec<i64> = rejected
                .iter()
                .filter(|(p, _)| *p == partition)
                .map(|(_, offset)| *offset)
                .collect();
            let unique: BTreeSet<i64> = refused.iter().copied().collect();
            assert_eq!(unique.len(), refused.len(), "after {after:?}: {refused:?}");
            for &offset in &refused {
                let record = &log[usize::try_from(offset).unwrap()];
                assert!(record.id.is_none(), "after {after:?}: {offset} was refused");
            }
            for (offset, record) in log.iter().enumerate().take(upto) {
                if record.id.is_none() {
                    let offset = i64::try_from(offset).unwrap();
                    assert!(
                        unique.contains(&offset),
                        "after {after:?}: undecodable record {offset} of partition {partition} \
                         is below the position {held} but not in rejected"
                    );
                }
            }
        }
    }

    /// Every member stops; one starts, reads everything and flushes.
    fn drain(&mut self) {
        for member in 0..MEMBERS {
            self.kill(member);
        }
        self.apply(&Action::Start { member: 0 });
        for partition in 0..PARTITIONS {
            let max = self.log[partition].len();
            self.apply(&Action::Poll {
                member: 0,
                partition,
                max,
                stale: false,
            });
        }
        self.apply(&Action::Flush { member: 0 });
        for partition in 0..PARTITIONS {
            let len = i64::try_from(self.log[partition].len()).unwrap();
            assert_eq!(self.durable[partition], len, "the drain read everything");
        }
        self.check(&Action::Flush { member: 0 });
    }
}

/// The events table's position per partition, and the (partition, offset) of every row of the
/// events and rejected tables, sorted.
async fn read_tables(root: &str) -> ([i64; PARTITIONS], Vec<(usize, i64)>, Vec<(usize, i64)>) {
    let mut positions = [0; PARTITIONS];
    let events = table::open_or_create(root, Table::OutcomeEvents)
        .await
        .unwrap();
    for (partition, position) in positions.iter_mut().enumerate() {
        let (topic, index) = source(partition);
        *position = table::position(&events, topic, topic, index)
            .await
            .unwrap()
            .unwrap_or(0);
    }
    let rejected = table::open_or_create(root, Table::Rejected).await.unwrap();
    (
        positions,
        offsets(&events, None).await,
        offsets(&rejected, Some(Table::OutcomeEvents)).await,
    )
}

/// (partition, offset) of every row, sorted; of rows from `topic` when given.
async fn offsets(delta: &DeltaTable, topic: Option<Table>) -> Vec<(usize, i64)> {
    let context = SessionContext::new();
    delta.update_datafusion_session(&context.state()).unwrap();
    context
        .register_table("t", delta.table_provider().await.unwrap())
        .unwrap();
    let filter = match topic {
        Some(topic) => format!("WHERE {} = '{}'", column::TOPIC, topic.topic()),
        None => String::new(),
    };
    let sql = format!(
        "SELECT {}, {} FROM t {filter} ORDER BY 1, 2",
        column::KAFKA_PARTITION,
        column::KAFKA_OFFSET
    );
    let batches = context.sql(&sql).await.unwrap().collect().await.unwrap();
    let mut out = Vec::new();
    for batch in batches {
        let partition = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int32Array>()
            .unwrap();
        let offset = batch
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        for row in 0..batch.num_rows() {
            out.push((
                usize::try_from(partition.value(row)).unwrap(),
                offset.value(row),
            ));
        }
    }
    out
}

/// Leaves the injected crashes out of the test's output; every other panic is reported as usual.
fn quiet_crashes() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<Crashed>().is_none() {
                report(info);
            }
        }));
    });
}

fn cases() -> u32 {
    std::env::var("CANDOR_MODEL_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(12)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        // Shrinking re-runs real Delta writes; a few hundred steps is plenty to find the core.
        max_shrink_iters: 200,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_tables_always_equal_the_model_of_durable_offsets(
        actions in proptest::collection::vec(action(), 10..50),
    ) {
        let dir = std::env::temp_dir().join(format!(
            "candor-model-{}-{}",
            std::process::id(),
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        quiet_crashes();
        let mut world = World::new(&dir);
        world.apply(&Action::Start { member: 0 });
        world.apply(&Action::Start { member: 1 });
        for action in &actions {
            world.apply(action);
            world.check(action);
        }
        world.drain();
        let kills = actions.iter().filter(|a| matches!(a, Action::Kill { .. })).count();
        eprintln!(
            "case: {} actions, {} records, {} crashes inside a flush, {kills} kills",
            actions.len(),
            world.log.iter().map(Vec::len).sum::<usize>(),
            world.crashes,
        );
        drop(world);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
