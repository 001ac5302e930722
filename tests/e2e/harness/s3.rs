//! An S3-compatible object store on a free loopback port (moto's server, installed into the
//! test venv from PyPI), behind a proxy the test can cut, as a network or a store outage would.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::process::Running;
use crate::{free_port, python, wait_for_port};

/// A running S3-compatible server with one bucket, reached through a [`Proxy`].
pub struct S3 {
    /// The bucket made at start.
    pub bucket: String,
    /// What the clients connect to.
    pub proxy: Proxy,
    _server: Running,
}

fn moto_server() -> PathBuf {
    python().with_file_name("moto_server")
}

impl S3 {
    /// Starts the server, makes `bucket`, and puts a proxy in front of it.
    pub async fn start(bucket: &str) -> Self {
        let port = free_port();
        let address = format!("127.0.0.1:{port}");
        let args = [
            "-H".to_owned(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
        ];
        let server = Running::spawn("moto", &moto_server(), &args, &[]);
        wait_for_port("the S3 server", &address, Duration::from_secs(30)).await;
        let proxy = Proxy::start(&address).await;
        let s3 = Self {
            bucket: bucket.to_owned(),
            proxy,
            _server: server,
        };
        let make = format!("import boto3\nboto3.client('s3').create_bucket(Bucket={bucket:?})\n");
        crate::process::succeeded(
            std::process::Command::new(python())
                .args(["-c", &make])
                .envs(s3.env()),
            "making the bucket",
        );
        s3
    }

    /// The `AWS_*` variables that reach the store (through the proxy) with its test credentials.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", format!("http://{}", self.proxy.address)),
            ("AWS_ACCESS_KEY_ID", "candor-test".into()),
            ("AWS_SECRET_ACCESS_KEY", "candor-test-secret".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_DEFAULT_REGION", "us-east-1".into()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// `s3://bucket/prefix`.
    pub fn root(&self, prefix: &str) -> String {
        format!("s3://{}/{prefix}", self.bucket)
    }
}

/// A TCP proxy on a free loopback port. While cut, it closes every connection it holds and
/// every new one at once: the store is unreachable.
pub struct Proxy {
    /// `127.0.0.1:port`.
    pub address: String,
    cut: Arc<AtomicBool>,
    /// Tells the open connections that the proxy was cut.
    cuts: watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|err| panic!("binding the proxy: {err}"));
        let address = listener
            .local_addr()
            .unwrap_or_else(|err| panic!("the proxy's address: {err}"))
            .to_string();
        let cut = Arc::new(AtomicBool::new(false));
        let (cuts, _) = watch::channel(0);
        let task = {
            let (cut, cuts, upstream) = (cut.clone(), cuts.clone(), upstream.to_owned());
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    if cut.load(Ordering::SeqCst) {
                        drop(client);
                        continue;
                    }
                    let mut cut_signal = cuts.subscribe();
                    let upstream = upstream.clone();
                    tokio::spawn(async move {
                        let Ok(server) = TcpStream::connect(&upstream).await else {
                            return;
                        };
                        let (mut client, mut server) = (client, server);
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                            _ = cut_signal.changed() => {}
                        }
                    });
                }
            })
        };
        Self {
            address,
            cut,
            cuts,
            task,
        }
    }

    /// Cuts the store off (`true`) or restores it (`false`).
    pub fn set_cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
        if cut {
            self.cuts.send_modify(|n| *n += 1);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
