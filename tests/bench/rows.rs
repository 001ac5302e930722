//! The compactor's CPU per event, stage by stage, on the load generator's realistic records (one
//! hour of events, fifty targets, three partitions): decoding a Kafka record into its row,
//! sorting a file's rows, building their Arrow batch, and writing it as Parquet with the
//! table's writer properties. Kafka's client and the Delta commit are not in these figures;
//! `tests/bench/compactor.sh` measures the whole process.
//!
//! `cargo bench -p candor-e2e --bench rows`

#![allow(clippy::unwrap_used)] // a panic in a benchmark set-up is its failure report

use std::hint::black_box;

use candor_collector::compact::table::{FileSettings, writer_properties};
use candor_e2e::records::realistic_event;
use candor_records::rows::{self, Meta, Row, SourceRecord, TimeBounds};
use candor_records::tables::Table;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use deltalake::parquet::arrow::ArrowWriter;

/// Rows of one file: a quarter of the compactor's default bound of a million.
const EVENTS: u64 = 250_000;
const HOUR_NANOS: u64 = 3_600_000_000_000;
/// 2027-01-01, so that every event falls on one day.
const START_NANOS: u64 = 1_798_761_600_000_000_000;

/// The records as the compactor reads them: keyed by target to one of three partitions, each
/// partition's offsets rising from 0.
fn records() -> Vec<SourceRecord> {
    let step = HOUR_NANOS / EVENTS;
    let mut next_offset = [0_i64; 3];
    (0..EVENTS)
        .map(|i| {
            let (target, payload) = realistic_event(i, START_NANOS + i * step, step);
            let partition = target.bytes().map(usize::from).sum::<usize>() % 3;
            let offset = next_offset[partition];
            next_offset[partition] += 1;
            SourceRecord {
                topic: Table::OutcomeEvents,
                partition: i32::try_from(partition).unwrap(),
                offset,
                timestamp_ms: Some(i64::try_from((START_NANOS + i * step) / 1_000_000).unwrap()),
                payload: Some(payload),
                generation: 0,
            }
        })
        .collect()
}

fn decode(records: Vec<SourceRecord>) -> Vec<(Meta, Row)> {
    let bounds = TimeBounds {
        late_after_micros: 86_400_000_000,
        future_after_micros: 300_000_000,
    };
    records
        .into_iter()
        .map(|record| rows::decode_owned(record, &bounds, "bench"))
        .collect()
}

/// The rows in the order the compactor gathers them: partition by partition, by offset.
fn gathered(decoded: &[(Meta, Row)]) -> Vec<&(Meta, Row)> {
    let mut refs: Vec<&(Meta, Row)> = decoded.iter().collect();
    refs.sort_by_key(|(meta, _)| (meta.partition, meta.offset));
    refs
}

fn stages(c: &mut Criterion) {
    let records = records();
    let decoded = decode(records.clone());
    assert!(decoded.iter().all(|(_, row)| matches!(row, Row::Event(_))));
    let mut sorted = gathered(&decoded);
    rows::sort(&mut sorted);
    let batch = rows::to_batch(Table::OutcomeEvents, &sorted).unwrap();
    // The Delta writer leaves the partition column out of the file.
    let mut file_batch = batch.clone();
    file_batch.remove_column(batch.schema().index_of("date").unwrap());
    let properties = writer_properties(
        Table::OutcomeEvents,
        FileSettings {
            row_group_rows: 128 * 1024,
            zstd_level: 3,
        },
    );
    let write = || {
        let mut file = Vec::with_capacity(16 << 20);
        let mut writer =
            ArrowWriter::try_new(&mut file, file_batch.schema(), Some(properties.clone())).unwrap();
        writer.write(&file_batch).unwrap();
        writer.close().unwrap();
        file.len()
    };
    let bytes = write();
    println!(
        "{EVENTS} events: {} Parquet bytes, {:.1} per event",
        bytes,
        bytes as f64 / EVENTS as f64
    );

    let mut group = c.benchmark_group("compact");
    group.throughput(Throughput::Elements(EVENTS));
    group.sample_size(10);
    group.bench_function("decode", |b| {
        b.iter_batched(
            || records.clone(),
            |records| black_box(decode(records)),
            BatchSize::PerIteration,
        );
    });
    group.bench_function("sort", |b| {
        b.iter_batched(
            || gathered(&decoded),
            |mut refs| {
                rows::sort(&mut refs);
                black_box(refs)
            },
            BatchSize::PerIteration,
        );
    });
    group.bench_function("to_batch", |b| {
        b.iter(|| black_box(rows::to_batch(Table::OutcomeEvents, &sorted).unwrap()));
    });
    // The same rows in the order they were read, their records side by side in memory: the
    // difference to `to_batch` is what reading them in the sorted order costs.
    let unsorted = gathered(&decoded);
    group.bench_function("to_batch_unsorted", |b| {
        b.iter(|| black_box(rows::to_batch(Table::OutcomeEvents, &unsorted).unwrap()));
    });
    group.bench_function("parquet", |b| b.iter(|| black_box(write())));
    group.finish();
}

criterion_group!(benches, stages);
criterion_main!(benches);
