//! Every Kafka client of the pipeline against a broker that demands what a production cluster
//! does: TLS with a certificate from a private CA, and SASL/SCRAM-SHA-512 inside it.
//!
//! Tansu checks the SCRAM login (`--authentication`) but speaks plain TCP, so socat with OpenSSL
//! terminates TLS in front of it and Tansu advertises socat's address: every connection a client
//! makes, bootstrap or broker, goes through TLS. The CA and the server certificate are made for
//! the test with the `openssl` command. The settings are the `[kafka.extra]` /
//! `[kafka.extra_env]` of deploy/config/, with the password in an environment variable.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use candor_e2e::collector::{self, Collector};
use candor_e2e::compactor::{self, Compactor};
use candor_e2e::dashboards::{self, Dashboards};
use candor_e2e::pki::{Pki, make_pki};
use candor_e2e::process::Running;
use candor_e2e::query::{Answer, candor_with_env};
use candor_e2e::tansu::Tansu;
use candor_e2e::{free_port, rfc3339, tempdir, wait_for, wait_for_port};
use candor_schema::names::topic;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;

use crate::ingest::{outcome_event, trace_request};

const USER: &str = "candor-e2e";
const PASSWORD: &str = "scram-password-for-the-e2e-broker";
const PASSWORD_VAR: &str = "CANDOR_KAFKA_SASL_PASSWORD";
const TARGET: &str = "https://tls.example/search";

/// socat terminating TLS on `port` and forwarding each connection to `upstream`.
async fn tls_proxy(pki: &Pki, port: u16, upstream: &str) -> Running {
    let listen = format!(
        "OPENSSL-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,cert={},key={},verify=0",
        pki.cert.display(),
        pki.key.display()
    );
    let proxy = Running::spawn(
        &format!("socat-{port}"),
        Path::new("socat"),
        &[listen, format!("TCP:{upstream}")],
        &[],
    );
    let address = format!("127.0.0.1:{port}");
    wait_for_port("the TLS proxy to listen", &address, Duration::from_secs(10)).await;
    proxy
}

/// The clients' settings, as in deploy/config/.
fn security(pki: &Pki) -> String {
    format!(
        "[kafka.extra]\n\
         \"security.protocol\" = \"SASL_SSL\"\n\
         \"sasl.mechanism\" = \"SCRAM-SHA-512\"\n\
         \"sasl.username\" = \"{USER}\"\n\
         \"ssl.ca.location\" = \"{}\"\n\
         \"ssl.endpoint.identification.algorithm\" = \"https\"\n\
         [kafka.extra_env]\n\
         \"sasl.password\" = \"{PASSWORD_VAR}\"\n",
        pki.ca.display()
    )
}

async fn send(collector: &Collector, events: usize) -> Result<(), tonic::Status> {
    let mut client = TraceServiceClient::connect(collector.grpc_endpoint.clone())
        .await
        .unwrap();
    // Now, and each a nanosecond apart: distinct events (the event id covers the time).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let events = (0..events as u64)
        .map(|n| {
            let mut event = outcome_event("access_failure", TARGET);
            event.time_unix_nano = now + n;
            event
        })
        .collect();
    client.export(trace_request(events)).await.map(|_| ())
}

fn incident(root: &Path, since: &str, kafka: &str, extra: &[&str], env: &[(&str, &str)]) -> Answer {
    let args = [
        &["--kafka", kafka, "--kafka-timeout", "5s"][..],
        extra,
        &["incident", "--target", TARGET, "--since", since][..],
    ]
    .concat();
    candor_with_env(root, &args, env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kafka_client_works_over_tls_with_scram_and_is_refused_without_them() {
    let dir = tempdir("kafka-security");
    let pki = make_pki(&dir);
    let tls_port = free_port();
    // The name the certificate carries, so the clients' hostname check has something to check.
    let kafka = format!("localhost:{tls_port}");
    let tansu = Tansu::start_secured(&dir, USER, PASSWORD, &kafka).await;
    let _proxy = tls_proxy(&pki, tls_port, &tansu.bootstrap).await;
    let settings = security(&pki);
    let settings_file = dir.join("kafka-client.toml");
    std::fs::write(&settings_file, &settings).unwrap();
    let settings_arg = settings_file.display().to_string();
    let env = vec![(PASSWORD_VAR.to_owned(), PASSWORD.to_owned())];
    let password = [(PASSWORD_VAR, PASSWORD)];

    // The collector logs in, creates its topics, and acknowledges only what the broker holds.
    let collector = Collector::start(
        &kafka,
        collector::Options {
            config: Some(settings.clone()),
            env: env.clone(),
            ..collector::Options::default()
        },
    )
    .await;
    let since = rfc3339(collector.covered_since().await);
    send(&collector, 3).await.unwrap();

    // The compactor reads them over the same kind of connection into the table.
    let root = dir.join("tables");
    let mut compactor = Compactor::start(
        &kafka,
        &root,
        compactor::Options {
            config: Some(settings.clone()),
            env: env.clone(),
            ..compactor::Options::default()
        },
    )
    .await;
    wait_for(
        "the compactor to store the 3 events",
        Duration::from_secs(60),
        || {
            let rows = incident(&root, &since, &kafka, &["--no-live"], &[])
                .rows()
                .len();
            async move { (rows == 3).then_some(()) }
        },
    )
    .await;
    compactor.process().terminate().await;

    // Two more, which only Kafka holds now.
    send(&collector, 2).await.unwrap();
    let live = incident(
        &root,
        &since,
        &kafka,
        &["--live", "--kafka-config", &settings_arg],
        &password,
    );
    assert_eq!(live.code, 0, "{}\n{}", live.stdout, live.stderr);
    assert_eq!(live.rows().len(), 5, "{}", live.stdout);
    let tail = live.source("kafka candor.outcome-events.v1");
    assert_eq!(tail["rows"], 2, "{tail}");

    // The topic reader takes a service's configuration file for the same settings.
    let read = Command::new(candor_e2e::target_dir().join("candor-collector"))
        .args(["read", "--topic", topic::OUTCOME_EVENTS, "--limit", "5"])
        .args([
            "--kafka",
            &kafka,
            "--idle",
            "10s",
            "--config",
            &settings_arg,
        ])
        .env(PASSWORD_VAR, PASSWORD)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&read.stdout);
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    assert_eq!(stdout.lines().count(), 5, "{stdout}");

    // Without the settings, the tail is unreachable and the answer says it is partial.
    let bare = incident(&root, &since, &kafka, &["--live"], &[]);
    assert_eq!(bare.code, 3, "{}\n{}", bare.stdout, bare.stderr);
    let tail = bare.source("kafka candor.outcome-events.v1");
    assert_eq!(tail["state"], "unreachable", "{tail}");
    // And without the password's variable, candor stops before reading, naming it.
    let unset = incident(
        &root,
        &since,
        &kafka,
        &["--live", "--kafka-config", &settings_arg],
        &[],
    );
    assert_eq!(unset.code, 2, "{}", unset.stderr);
    assert!(unset.stderr.contains(PASSWORD_VAR), "{}", unset.stderr);

    // The dashboards' own consumer streams all five events (over tables of their own, which
    // hold none of them: a start reads what its tables hold from them, and the rest from Kafka).
    let dashboards = Dashboards::start(
        &kafka,
        &tempdir("kafka-security-dashboards"),
        dashboards::Options {
            args: vec!["--kafka-config".into(), settings_arg.clone()],
            env: env.clone(),
            ..dashboards::Options::default()
        },
    )
    .await;
    let series = "candor_dashboards_records_total{topic=\"candor.outcome-events.v1\"}";
    wait_for(
        "the dashboards to stream the 5 events",
        Duration::from_secs(60),
        || {
            let sample = dashboards.sample(series);
            async move { sample.await.filter(|n| *n >= 5.0).map(|_| ()) }
        },
    )
    .await;

    // A collector with the wrong password is refused by the broker: its client is told to
    // retry, never told success.
    let wrong = Collector::start(
        &kafka,
        collector::Options {
            config: Some(format!("{settings}[kafka]\ndelivery_timeout = \"2s\"\n")),
            env: vec![(PASSWORD_VAR.to_owned(), "not-the-password".to_owned())],
            skip_ready: true,
            ..collector::Options::default()
        },
    )
    .await;
    let refused = send(&wrong, 1).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    drop(collector);
    let _ = std::fs::remove_dir_all(&dir);
}
