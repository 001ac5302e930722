//! A real Alertmanager (Debian's `prometheus-alertmanager` package, which the test command
//! installs) on a free loopback port, without clustering, routing every alert to a receiver that
//! sends nothing.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::collector::{get_status, post_json};
use crate::process::Running;
use crate::{free_port, tempdir, wait_for};

/// A running Alertmanager.
pub struct Alertmanager {
    /// `127.0.0.1:port` of its API.
    pub address: String,
    _process: Running,
}

impl Alertmanager {
    /// Starts Alertmanager and waits until it is ready.
    pub async fn start() -> Self {
        let dir = tempdir("alertmanager");
        let port = free_port();
        let config = dir.join("alertmanager.yml");
        std::fs::write(
            &config,
            "route:\n  receiver: nobody\nreceivers:\n  - name: nobody\n",
        )
        .expect("writing alertmanager.yml");
        let args = vec![
            format!("--config.file={}", config.display()),
            format!("--storage.path={}", dir.join("data").display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
            "--cluster.listen-address=".into(),
            "--log.level=warn".into(),
        ];
        let process = Running::spawn(
            "alertmanager",
            Path::new("prometheus-alertmanager"),
            &args,
            &[],
        );
        let address = format!("127.0.0.1:{port}");
        wait_for("Alertmanager ready", Duration::from_secs(60), || async {
            (get_status(&address, "/-/ready").await.0 == Some(200)).then_some(())
        })
        .await;
        Self {
            address,
            _process: process,
        }
    }

    /// The URL alerts are posted to, as a webhook.
    pub fn alerts_url(&self) -> String {
        format!("http://{}/api/v2/alerts", self.address)
    }

    /// The alerts it holds.
    pub async fn alerts(&self) -> Value {
        let (status, body) = get_status(&self.address, "/api/v2/alerts").await;
        assert_eq!(status, Some(200), "{body}");
        serde_json::from_str(&body).expect("a JSON list")
    }

    /// Creates a silence of the alerts named `alertname` for an hour, by `author`; its id.
    pub async fn silence(&self, alertname: &str, author: &str) -> String {
        let now = chrono::Utc::now();
        let body = json!({
            "matchers": [{"name": "alertname", "value": alertname, "isRegex": false, "isEqual": true}],
            "startsAt": now.to_rfc3339(),
            "endsAt": (now + chrono::Duration::hours(1)).to_rfc3339(),
            "createdBy": author,
            "comment": "on it",
        });
        let (status, answer) =
            post_json(&self.address, "/api/v2/silences", &body.to_string()).await;
        assert_eq!(status, Some(200), "{answer}");
        let answer: Value = serde_json::from_str(&answer).expect("a JSON answer");
        answer["silenceID"].as_str().expect("an id").to_owned()
    }
}
