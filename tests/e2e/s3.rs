//! Tables in an S3-compatible object store (moto's server): the compactor writes them through
//! the same code path as a local root, and an independent reader (the Python `deltalake`
//! package) and `candor` read them back. Cut off mid-stream, twice, the store stops the commits
//! visibly (errors counted, `/readyz` 503), and once it is back every event is stored once.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use candor_e2e::collector::{Collector, Options, get_status};
use candor_e2e::compactor::{self, Compactor, read_table_at};
use candor_e2e::query::candor_with_env;
use candor_e2e::s3::S3;
use candor_e2e::tansu::Tansu;
use candor_e2e::wait_for;
use candor_schema::names::table;

use crate::compact::{ROWS_WRITTEN, send};

/// The targets of the `outcome_events` rows under `root`, read by the independent reader;
/// fails on an event id stored twice.
fn stored_targets(s3: &S3, root: &str) -> BTreeSet<String> {
    let rows = read_table_at(&format!("{root}/{}", table::OUTCOME_EVENTS), &s3.env());
    let ids: BTreeSet<&str> = rows.iter().filter_map(|r| r["event_id"].as_str()).collect();
    assert_eq!(ids.len(), rows.len(), "an event id is stored twice");
    rows.iter()
        .filter_map(|r| r["tool_target"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_in_s3_are_written_read_back_and_survive_the_store_going_away() {
    let s3 = S3::start("candor-tables").await;
    let root = s3.root("candor/tables");
    let tansu = Tansu::start().await;
    let collector = Collector::start(&tansu.bootstrap, Options::default()).await;
    let compactor = Compactor::start_at(
        &tansu.bootstrap,
        &root,
        compactor::Options {
            env: s3.env(),
            ..compactor::Options::default()
        },
    )
    .await;
    let mut sent: BTreeSet<String> = send(&collector, "s3", 200).await.into_iter().collect();
    wait_for("200 rows committed", Duration::from_secs(60), || async {
        (compactor.sample(ROWS_WRITTEN).await >= Some(200.0)).then_some(())
    })
    .await;
    assert_eq!(stored_targets(&s3, &root), sent);

    // `candor` reads the same tables through the same store.
    let answer = candor_with_env(
        Path::new(&root),
        &[
            "sql",
            "select count(distinct event_id) as n from outcome_events",
            "--format",
            "csv",
            "--kafka",
            &tansu.bootstrap,
        ],
        &s3.env()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect::<Vec<_>>(),
    );
    assert_eq!(answer.code, 0, "{}\n{}", answer.stdout, answer.stderr);
    assert!(
        answer.stdout.lines().any(|line| line.trim() == "200"),
        "{}",
        answer.stdout
    );

    // The store goes away twice while events keep coming.
    let errors = "candor_compactor_errors_total{reason=\"delta\"}";
    for outage in ["first", "second"] {
        let before = compactor.sample(errors).await.unwrap_or(0.0);
        s3.proxy.set_cut(true);
        sent.extend(send(&collector, outage, 100).await);
        wait_for(
            &format!("a failed commit counted and /readyz 503 in the {outage} outage"),
            Duration::from_secs(60),
            || async {
                let counted = compactor.sample(errors).await.unwrap_or(0.0) > before;
                let (status, _) = get_status(&compactor.metrics_endpoint, "/readyz").await;
                (counted && status == Some(503)).then_some(())
            },
        )
        .await;
        s3.proxy.set_cut(false);
        let want = sent.len() as f64;
        wait_for(
            &format!("every event stored after the {outage} outage"),
            Duration::from_secs(60),
            || async { (compactor.sample(ROWS_WRITTEN).await >= Some(want)).then_some(()) },
        )
        .await;
    }
    assert_eq!(stored_targets(&s3, &root), sent, "{}", compactor.output());
    let (status, _) = get_status(&compactor.metrics_endpoint, "/readyz").await;
    assert_eq!(status, Some(200), "ready again");
}
