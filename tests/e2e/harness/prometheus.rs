//! A real Prometheus server (Debian's `prometheus` package, which the test command installs),
//! scraping targets every second and evaluating rules files every second, on a free loopback
//! port with its own storage directory.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::collector::{get_status, post_with};
use crate::process::Running;
use crate::{free_port, tempdir, wait_for};

/// A running Prometheus.
pub struct Prometheus {
    /// `127.0.0.1:port` of its API.
    pub address: String,
    _process: Running,
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` (`host:port`, plain HTTP, `/metrics`, honouring the
    /// targets' labels) every second with `rules` loaded; waits until it is ready.
    pub async fn start(targets: &[&str], rules: &[&Path]) -> Self {
        let dir = tempdir("prometheus");
        let port = free_port();
        let rule_files: Vec<String> = rules
            .iter()
            .map(|path| format!("  - {}", path.display()))
            .collect();
        let targets: Vec<String> = targets.iter().map(|t| format!("\"{t}\"")).collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n\
             rule_files:\n{}\n\
             scrape_configs:\n  - job_name: candor\n    honor_labels: true\n    \
             static_configs:\n      - targets: [{}]\n",
            rule_files.join("\n"),
            targets.join(", ")
        );
        let config_path = dir.join("prometheus.yml");
        std::fs::write(&config_path, config).expect("writing prometheus.yml");
        let args = vec![
            format!("--config.file={}", config_path.display()),
            format!("--storage.tsdb.path={}", dir.join("data").display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
            "--log.level=warn".into(),
        ];
        let process = Running::spawn("prometheus", Path::new("prometheus"), &args, &[]);
        let address = format!("127.0.0.1:{port}");
        wait_for("Prometheus ready", Duration::from_secs(60), || async {
            (get_status(&address, "/-/ready").await.0 == Some(200)).then_some(())
        })
        .await;
        Self {
            address,
            _process: process,
        }
    }

    /// The `data.result` of an instant query, evaluated now.
    pub async fn query(&self, promql: &str) -> Value {
        let body = format!("query={}", form_encoded(promql));
        let (status, text) = post_with(
            &self.address,
            "/api/v1/query",
            "Content-Type: application/x-www-form-urlencoded\r\n",
            &body,
        )
        .await;
        assert_eq!(status, Some(200), "{promql}: {text}");
        let answer: Value = serde_json::from_str(&text).expect("a JSON answer");
        answer["data"]["result"].clone()
    }

    /// The value of an instant query that answers one sample; `None` when it answers none.
    pub async fn scalar(&self, promql: &str) -> Option<f64> {
        let result = self.query(promql).await;
        let samples = result.as_array()?;
        assert!(samples.len() <= 1, "{promql}: {result}");
        samples.first()?["value"][1].as_str()?.parse().ok()
    }
}

/// `text` as a form value: every byte but letters and digits percent-encoded.
fn form_encoded(text: &str) -> String {
    text.bytes()
        .map(|byte| {
            if byte.is_ascii_alphanumeric() {
                (byte as char).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect()
}
