//! The spool's store on a real directory: appends are durable and kept in order across a reopen,
//! a full spool refuses without keeping part of a request, and removal takes only what it names.

#![allow(clippy::unwrap_used)] // a panic is the test's failure report

use std::path::PathBuf;
use std::time::Duration;

use candor_collector::sink::kafka::KafkaRecord;
use candor_collector::sink::kafka::spool::{Level, Spool, SpoolError, SpoolSettings};
use candor_schema::names::topic;

fn settings(name: &str, max_bytes: u64) -> SpoolSettings {
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "candor-spool-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    SpoolSettings {
        dir,
        max_bytes,
        max_age: Duration::from_secs(3600),
    }
}

fn request(n: usize, records: usize) -> Vec<KafkaRecord> {
    (0..records)
        .map(|r| KafkaRecord {
            topic: if r % 2 == 0 {
                topic::OUTCOME_EVENTS
            } else {
                topic::OUTCOME_COUNTS
            },
            key: format!("target-{n}").into_bytes(),
            payload: format!("request {n} record {r}").into_bytes(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_are_durable_and_read_back_in_order_after_a_reopen() {
    let settings = settings("reopen", 1 << 20);
    let spool = Spool::open(&settings).unwrap();
    assert!(spool.is_empty());
    let appends: Vec<_> = (0..40)
        .map(|n| {
            let spool = spool.clone();
            tokio::spawn(async move { spool.append(&request(n, 3)).await })
        })
        .collect();
    for append in appends {
        append.await.unwrap().unwrap();
    }
    let level = spool.level();
    assert_eq!(level.records, 120);
    drop(spool);

    let spool = Spool::open(&settings).unwrap();
    assert_eq!(
        spool.level(),
        level,
        "the reopened spool counts what was kept"
    );
    let kept = spool.oldest(1000, u64::MAX).unwrap();
    assert_eq!(kept.len(), 120);
    assert!(kept.windows(2).all(|pair| pair[0].seq < pair[1].seq));
    // Each request's records are kept together and in their order.
    for chunk in kept.chunks(3) {
        let records: Vec<KafkaRecord> = chunk.iter().map(|s| s.record.clone().unwrap()).collect();
        let n: usize = String::from_utf8(records[0].key.clone()).unwrap()["target-".len()..]
            .parse()
            .unwrap();
        assert_eq!(records, request(n, 3));
    }
    // A batch read stops at its bounds but always holds one record.
    assert_eq!(spool.oldest(5, u64::MAX).unwrap().len(), 5);
    assert_eq!(spool.oldest(1000, 1).unwrap().len(), 1);
    let _ = std::fs::remove_dir_all(&settings.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_spool_refuses_the_whole_request_and_keeps_none_of_it() {
    let one = request(0, 4);
    let per_request: u64 = {
        let settings = settings("measure", 1 << 20);
        let spool = Spool::open(&settings).unwrap();
        spool.append(&one).await.unwrap();
        let bytes = spool.level().bytes;
        drop(spool);
        let _ = std::fs::remove_dir_all(&settings.dir);
        bytes
    };
    let settings = settings("full", per_request * 2 + per_request / 2);
    let spool = Spool::open(&settings).unwrap();
    spool.append(&request(1, 4)).await.unwrap();
    spool.append(&request(2, 4)).await.unwrap();
    let full = spool.append(&request(3, 4)).await.unwrap_err();
    assert!(matches!(full, SpoolError::Full { .. }), "{full}");
    assert_eq!(
        spool.level(),
        Level {
            records: 8,
            bytes: per_request * 2
        }
    );
    drop(spool);
    let spool = Spool::open(&settings).unwrap();
    assert_eq!(
        spool.level().records,
        8,
        "nothing of the refused request was kept"
    );
    let _ = std::fs::remove_dir_all(&settings.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removal_takes_exactly_the_records_it_names_and_the_numbering_goes_on() {
    let settings = settings("remove", 1 << 20);
    let spool = Spool::open(&settings).unwrap();
    spool.append(&request(0, 5)).await.unwrap();
    let seqs: Vec<u64> = spool
        .oldest(10, u64::MAX)
        .unwrap()
        .iter()
        .map(|s| s.seq)
        .collect();
    spool.remove(&[seqs[0], seqs[2], seqs[4]]).unwrap();
    let left: Vec<u64> = spool
        .oldest(10, u64::MAX)
        .unwrap()
        .iter()
        .map(|s| s.seq)
        .collect();
    assert_eq!(left, vec![seqs[1], seqs[3]]);
    assert_eq!(spool.level().records, 2);
    spool.remove(&left).unwrap();
    assert!(spool.is_empty());
    assert_eq!(spool.level().bytes, 0);
    drop(spool);
    // Reopened empty, the spool takes new records and gives them back in their order.
    let spool = Spool::open(&settings).unwrap();
    spool.append(&request(7, 2)).await.unwrap();
    let kept = spool.oldest(10, u64::MAX).unwrap();
    assert_eq!(
        kept.into_iter()
            .map(|s| s.record.unwrap())
            .collect::<Vec<_>>(),
        request(7, 2)
    );
    let _ = std::fs::remove_dir_all(&settings.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_for_a_topic_the_spool_cannot_read_back_is_refused_before_anything_is_kept() {
    let settings = settings("topic", 1 << 20);
    let spool = Spool::open(&settings).unwrap();
    let mut records = request(0, 2);
    records.push(KafkaRecord {
        topic: "not.a.candor.topic",
        key: Vec::new(),
        payload: b"x".to_vec(),
    });
    let refused = spool.append(&records).await.unwrap_err();
    assert!(matches!(refused, SpoolError::UnknownTopic(_)), "{refused}");
    assert!(spool.is_empty());
    let _ = std::fs::remove_dir_all(&settings.dir);
}
