//! Acknowledgement read from Alertmanager. Where a receiver is Alertmanager (its webhook is
//! Alertmanager's `POST /api/v2/alerts`), the on-call engineer acknowledges there, with a silence:
//! a firing alert that Alertmanager holds silenced is acknowledged here too, by whoever created
//! the silence, and is then not escalated. Alertmanager's own matching decides what a silence
//! covers: the alerts it reports silenced (`GET /api/v2/alerts?silenced=true&active=false`) are
//! compared by their labels, which are the labels each notification sent.
//!
//! Every read goes through the adapter, like the notifications: a read that fails is classified,
//! retried, emitted as an AccessFailure event of the dashboards' own, and counted
//! (`candor_dashboards_silence_reads_total`); the alerts then stay unacknowledged, and escalate.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use candor_adapter::http_client::HttpClient;
use candor_adapter::{Adapter, HttpClassifier, NotFound, RetryPolicy};
use candor_query::window::now;
use http::HeaderMap;
use serde_json::Value;

use crate::alerts::{Alerts, State};
use crate::notify::{NotifierError, Webhook};
use crate::state::Shared;
use crate::sync::lock;

/// The path of Alertmanager's API that takes alerts, which marks a receiver as Alertmanager.
pub const ALERTMANAGER_ALERTS: &str = "/api/v2/alerts";

/// An alert an Alertmanager holds silenced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Silenced {
    /// Its labels, as the notification sent them.
    pub labels: BTreeMap<String, String>,
    /// Who acknowledged it: the silence's author, and which silence.
    pub by: String,
}

/// Reads the silences of every receiver that is Alertmanager.
pub struct SilenceReader {
    /// Each Alertmanager's API root (the webhook without `/api/v2/alerts`) and its reader.
    receivers: Vec<(String, Adapter<HttpClassifier>)>,
    client: HttpClient,
    headers: HeaderMap,
}

impl std::fmt::Debug for SilenceReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SilenceReader")
            .field(
                "alertmanagers",
                &self
                    .receivers
                    .iter()
                    .map(|(url, _)| url)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl SilenceReader {
    /// A reader of the receivers among `webhooks` that are Alertmanager, `timeout` per attempt,
    /// through `client` with `headers` (the notifications' TLS and authentication). A reader that
    /// cannot be built is an error, never a receiver left unread.
    pub fn new(
        webhooks: &[Webhook],
        timeout: Duration,
        client: HttpClient,
        headers: HeaderMap,
    ) -> Result<Self, NotifierError> {
        let mut receivers = Vec::new();
        for hook in webhooks {
            let Some(root) = hook
                .url
                .trim_end_matches('/')
                .strip_suffix(ALERTMANAGER_ALERTS)
            else {
                continue;
            };
            let adapter = Adapter::builder("alertmanager-silences", root.to_owned())
                .classifier(HttpClassifier::new(NotFound::Unreachable))
                .retry(RetryPolicy::default())
                .attempt_timeout(timeout)
                .actor("candor-dashboards")
                .build()
                .map_err(|err| NotifierError::new(&hook.name, format!("its silences: {err}")))?;
            receivers.push((root.to_owned(), adapter));
        }
        Ok(Self {
            receivers,
            client,
            headers,
        })
    }

    /// Whether any receiver is Alertmanager.
    pub fn is_empty(&self) -> bool {
        self.receivers.is_empty()
    }

    /// The alerts every Alertmanager holds silenced, and the receivers that could not be read.
    pub async fn read(&self) -> (Vec<Silenced>, Vec<String>) {
        let mut silenced = Vec::new();
        let mut failed = Vec::new();
        for (root, adapter) in &self.receivers {
            match self.read_one(root, adapter).await {
                Ok(found) => silenced.extend(found),
                Err(problem) => failed.push(format!("{root}: {problem}")),
            }
        }
        (silenced, failed)
    }

    async fn get(&self, adapter: &Adapter<HttpClassifier>, url: &str) -> Result<Value, String> {
        let envelope = adapter
            .call(|context| self.client.get(context, url, &self.headers))
            .await;
        match envelope.outcome().payload() {
            Some(value) => Ok(value.clone()),
            // An empty answer is an empty list: nothing is silenced.
            None if envelope.class() == candor_schema::OutcomeClass::Empty => {
                Ok(Value::Array(Vec::new()))
            }
            None => Err(envelope.summary()),
        }
    }

    async fn read_one(
        &self,
        root: &str,
        adapter: &Adapter<HttpClassifier>,
    ) -> Result<Vec<Silenced>, String> {
        let alerts = self
            .get(
                adapter,
                &format!(
                    "{root}{ALERTMANAGER_ALERTS}?active=false&silenced=true&inhibited=false&unprocessed=false"
                ),
            )
            .await?;
        let mut authors: BTreeMap<String, String> = BTreeMap::new();
        let mut found = Vec::new();
        for alert in alerts.as_array().map(Vec::as_slice).unwrap_or_default() {
            let Some(silence) = alert["status"]["silencedBy"]
                .as_array()
                .and_then(|ids| ids.first())
                .and_then(Value::as_str)
            else {
                continue;
            };
            if !authors.contains_key(silence) {
                let read = self
                    .get(adapter, &format!("{root}/api/v2/silence/{silence}"))
                    .await?;
                let author = read["createdBy"].as_str().unwrap_or("someone").to_owned();
                authors.insert(silence.to_owned(), author);
            }
            let labels = alert["labels"]
                .as_object()
                .map(|labels| {
                    labels
                        .iter()
                        .filter_map(|(name, value)| {
                            Some((name.clone(), value.as_str()?.to_owned()))
                        })
                        .collect()
                })
                .unwrap_or_default();
            found.push(Silenced {
                labels,
                by: format!(
                    "{} (Alertmanager silence {silence})",
                    authors.get(silence).map_or("someone", String::as_str)
                ),
            });
        }
        Ok(found)
    }
}

/// Acknowledges every firing alert nobody acknowledged whose labels (as its notification sent
/// them: `alertname`, `severity` and the rule's) are a silenced alert's; the number acknowledged.
pub fn acknowledge(alerts: &mut Alerts, silenced: &[Silenced], at: i64) -> usize {
    let mut acknowledged = 0;
    let firing: Vec<_> = alerts
        .list()
        .into_iter()
        .filter(|alert| alert.state == State::Firing && alert.acknowledged.is_none())
        .collect();
    for alert in firing {
        let mut sent: BTreeMap<String, String> = alert.labels.clone().into_iter().collect();
        sent.insert("alertname".into(), alert.name.clone());
        sent.insert("severity".into(), alert.severity.to_owned());
        if let Some(silence) = silenced.iter().find(|silenced| silenced.labels == sent)
            && alerts.acknowledge(&alert.key(), &silence.by, at).is_ok()
        {
            tracing::info!(alert = %alert.name, by = %silence.by, "acknowledged by a silence");
            acknowledged += 1;
        }
    }
    acknowledged
}

/// Reads the silences every `every` while any alert fires unacknowledged, and acknowledges what
/// they cover (the alert loop saves it with its next evaluation).
pub async fn run(reader: Arc<SilenceReader>, shared: Arc<Shared>, every: Duration) {
    if reader.is_empty() {
        return;
    }
    let mut ticker = tokio::time::interval(every);
    loop {
        ticker.tick().await;
        let waiting = lock(&shared.alerts)
            .firing()
            .any(|alert| alert.acknowledged.is_none());
        if !waiting {
            continue;
        }
        let (silenced, failed) = reader.read().await;
        let counts = &shared.silence_reads;
        counts
            .failed
            .fetch_add(failed.len() as u64, Ordering::Relaxed);
        counts.read.fetch_add(
            (reader.receivers.len() - failed.len()) as u64,
            Ordering::Relaxed,
        );
        for problem in failed {
            tracing::warn!(problem = %problem, "Alertmanager's silences could not be read");
        }
        acknowledge(&mut lock(&shared.alerts), &silenced, now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerts::Delivery;
    use crate::persist::tests::alert;

    #[test]
    fn a_silenced_alert_with_the_labels_sent_is_acknowledged_by_the_silences_author() {
        let delivered = Delivery::Delivered {
            at: 2_600,
            sent: State::Firing,
        };
        let mut alerts = Alerts::restored(vec![
            alert("Stale", State::Firing, delivered.clone()),
            alert("Other", State::Firing, delivered),
        ]);
        let labels = |name: &str| -> BTreeMap<String, String> {
            [
                ("alertname", name),
                ("severity", "page"),
                ("hop", "collector"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
        };
        let mut partial = labels("Other");
        partial.remove("hop");
        let silenced = [
            Silenced {
                labels: labels("Stale"),
                by: "sre (Alertmanager silence s-1)".into(),
            },
            // Labels other than those sent: another alert, not this one.
            Silenced {
                labels: partial,
                by: "someone".into(),
            },
        ];
        assert_eq!(acknowledge(&mut alerts, &silenced, 3_000), 1);
        let list = alerts.list();
        let by_name = |name: &str| list.iter().find(|a| a.name == name).cloned().unwrap();
        let stale = by_name("Stale").acknowledged.expect("acknowledged");
        assert_eq!(
            (stale.by.as_str(), stale.at),
            ("sre (Alertmanager silence s-1)", 3_000)
        );
        assert!(by_name("Other").acknowledged.is_none());
        // Read again, nothing changes: the first acknowledgement stays.
        assert_eq!(acknowledge(&mut alerts, &silenced, 4_000), 0);
    }

    #[test]
    fn only_receivers_at_alertmanagers_alerts_api_are_read() {
        let hook = |url: &str| Webhook {
            name: url.into(),
            url: url.into(),
        };
        let reader = SilenceReader::new(
            &[
                hook("http://am.test:9093/api/v2/alerts"),
                hook("https://am2.test/prefix/api/v2/alerts/"),
                hook("http://hooks.test/candor"),
            ],
            Duration::from_secs(1),
            HttpClient::new(1 << 20),
            HeaderMap::new(),
        )
        .unwrap();
        let roots: Vec<&str> = reader
            .receivers
            .iter()
            .map(|(root, _)| root.as_str())
            .collect();
        assert_eq!(roots, ["http://am.test:9093", "https://am2.test/prefix"]);
    }
}
