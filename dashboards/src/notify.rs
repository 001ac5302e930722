//! Alert notifications: each firing or resolved alert is POSTed to every webhook as a list of
//! alerts in Alertmanager's API v2 format (`POST /api/v2/alerts` takes it as is), through the
//! adapter, so a notification that cannot be delivered is classified, retried by the adapter's
//! policy, emitted as an AccessFailure event and counted like any other tool call.
//!
//! A receiver acknowledges with any 2xx status, whatever the body; everything else is the
//! adapter's HTTP classification (5xx and 429 are retried, 4xx are permanent).
//!
//! Webhooks are `http://` or `https://`, verified against the system's CA certificates or the
//! configured ones (`alerts.webhook_ca_file`), and every notification carries the headers of
//! `alerts.webhook_headers_file` ([`read_headers`]), such as a receiver's `Authorization`.

use std::time::Duration;

use bytes::Bytes;
use candor_adapter::classify::http::HttpExchange;
use candor_adapter::http_client::HttpClient;
use candor_adapter::{Adapter, Classification, Classify, HttpClassifier, NotFound, RetryPolicy};
use candor_query::window::{Micros, now, rfc3339};
use candor_schema::{Extent, Outcome, OutcomeClass};
use http::{HeaderMap, HeaderValue, header};
use serde_json::{Value, json};

use crate::ack_link::{Link, LinkKey};
use crate::alerts::{Alert, Delivery, State};

/// A receiver of notifications.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// A name for the UI and the adapter's tool attribute.
    pub name: String,
    /// The URL alerts are POSTed to (`http://` or `https://`).
    pub url: String,
}

/// Accepts any 2xx; anything else is classified as the adapter classifies HTTP.
#[derive(Debug)]
struct Acknowledged(HttpClassifier);

impl Classify<HttpExchange> for Acknowledged {
    type Payload = Value;

    fn classify(&self, raw: HttpExchange) -> Classification<Value> {
        match &raw {
            Ok(response) if response.status.is_success() => Classification::new(Outcome::Success {
                extent: Extent::default(),
                payload: Value::Null,
            }),
            _ => self.0.classify(raw),
        }
    }
}

/// Sends notifications to the webhooks.
pub struct Notifier {
    receivers: Vec<(Webhook, Adapter<Acknowledged>)>,
    client: HttpClient,
    /// Sent with every notification: the content type and the configured headers.
    headers: HeaderMap,
    external_url: String,
    /// Signs each firing notification's acknowledgement link, when set.
    links: Option<std::sync::Arc<LinkKey>>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field(
                "receivers",
                &self.receivers.iter().map(|(w, _)| w).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Why the notifier could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("webhook {name:?}: {problem}")]
pub struct NotifierError {
    name: String,
    problem: String,
}

impl NotifierError {
    /// `problem` with the webhook `name`.
    pub fn new(name: &str, problem: String) -> Self {
        Self {
            name: name.to_owned(),
            problem,
        }
    }
}

impl Notifier {
    /// A notifier for `webhooks`: `attempts` tries each, `timeout` per attempt, through `client`
    /// (which holds the CA certificates an `https://` webhook is verified against), with
    /// `headers` on every notification. `external_url` is the dashboards' own address, sent as
    /// each alert's `generatorURL`.
    pub fn new(
        webhooks: &[Webhook],
        attempts: u32,
        timeout: Duration,
        client: HttpClient,
        headers: HeaderMap,
        external_url: String,
    ) -> Result<Self, NotifierError> {
        let mut receivers = Vec::new();
        for hook in webhooks {
            let fail = |problem: String| NotifierError {
                name: hook.name.clone(),
                problem,
            };
            let policy = RetryPolicy::default()
                .with_max_attempts(attempts)
                .map_err(|err| fail(err.to_string()))?;
            let adapter = Adapter::builder("alert-webhook", hook.url.clone())
                .classifier(Acknowledged(HttpClassifier::new(NotFound::Unreachable)))
                .retry(policy)
                .attempt_timeout(timeout)
                .deadline(
                    timeout
                        .saturating_mul(attempts)
                        .saturating_add(Duration::from_secs(10)),
                )
                .actor("candor-dashboards")
                // A webhook is a POST. A notification sent twice is a duplicate the receiver
                // can tell apart by its alert; one lost is a page nobody gets: repeat it.
                .method(http::Method::POST)
                .idempotent(true)
                .build()
                .map_err(|err| fail(err.to_string()))?;
            receivers.push((hook.clone(), adapter));
        }
        let mut all = headers;
        all.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Ok(Self {
            receivers,
            client,
            headers: all,
            external_url,
            links: None,
        })
    }

    /// Every firing notification carries a link that acknowledges it, signed with `key`
    /// ([`crate::ack_link`]).
    #[must_use]
    pub fn with_ack_links(mut self, key: std::sync::Arc<LinkKey>) -> Self {
        self.links = Some(key);
        self
    }

    /// Whether any receiver is configured.
    pub fn has_receivers(&self) -> bool {
        !self.receivers.is_empty()
    }

    /// Sends one alert to every receiver. Delivered only when every receiver acknowledged.
    pub async fn send(&self, alert: &Alert) -> Delivery {
        if self.receivers.is_empty() {
            return Delivery::NotSent {
                reason: "no webhook is configured".into(),
            };
        }
        let body =
            Bytes::from(payload(alert, &self.external_url, self.links.as_deref()).to_string());
        let headers = &self.headers;
        let mut failures = Vec::new();
        for (hook, adapter) in &self.receivers {
            let envelope = adapter
                .call(|context| self.client.post(context, &hook.url, headers, body.clone()))
                .await;
            match envelope.class() {
                OutcomeClass::Success | OutcomeClass::Empty => {}
                OutcomeClass::Partial | OutcomeClass::AccessFailure => {
                    failures.push(format!("{}: {}", hook.name, envelope.summary()));
                }
            }
        }
        let at = now();
        if failures.is_empty() {
            Delivery::Delivered {
                at,
                sent: alert.state,
            }
        } else {
            Delivery::Undelivered {
                at,
                sent: alert.state,
                reason: failures.join("; "),
            }
        }
    }
}

/// The alert as Alertmanager's API v2 takes it: a list of one postable alert. A firing alert
/// has no `endsAt`; a resolved one ends when it resolved. With `links`, a firing alert nobody
/// acknowledged carries the `acknowledge_url` annotation, signed with it.
pub fn payload(alert: &Alert, external_url: &str, links: Option<&LinkKey>) -> Value {
    let mut labels = serde_json::Map::new();
    labels.insert("alertname".into(), json!(alert.name));
    labels.insert("severity".into(), json!(alert.severity));
    for (name, value) in &alert.labels {
        labels.insert(name.clone(), json!(value));
    }
    let starts: Micros = alert.fired_at.unwrap_or(alert.active_since);
    let mut postable = json!({
        "labels": labels,
        "annotations": {
            "summary": alert.summary,
            "description": alert.description,
        },
        "startsAt": rfc3339(starts),
        "generatorURL": format!("{}/#alerts", external_url.trim_end_matches('/')),
    });
    if alert.state == State::Resolved
        && let (Some(object), Some(ended)) = (postable.as_object_mut(), alert.resolved_at)
    {
        object.insert("endsAt".into(), json!(rfc3339(ended)));
    }
    if alert.state == State::Firing
        && alert.acknowledged.is_none()
        && let (Some(key), Some(fired_at)) = (links, alert.fired_at)
    {
        let link = Link {
            name: alert.name.clone(),
            labels: alert.labels.clone(),
            fired_at,
        };
        postable["annotations"]["acknowledge_url"] = json!(format!(
            "{}/alerts/ack?{}",
            external_url.trim_end_matches('/'),
            link.query(key)
        ));
    }
    json!([postable])
}

/// The headers file could not be used. No message holds a header's value.
#[derive(Debug, thiserror::Error)]
pub enum HeadersError {
    /// A line is not `Name: value`, or its name or value is not a valid header's.
    #[error("line {line}: expected `Name: value` with a valid header name and value")]
    Line {
        /// The 1-based line.
        line: usize,
    },
    /// A header the notifier sets itself.
    #[error("line {line}: {name} is set by the notifier")]
    Reserved {
        /// The 1-based line.
        line: usize,
        /// The header's name.
        name: String,
    },
}

/// The headers of `alerts.webhook_headers_file`: one `Name: value` per line; blank lines and
/// lines starting with `#` are skipped. `Content-Type`, `Content-Length`, `Host` and
/// `Idempotency-Key` are the notifier's own and refused.
pub fn read_headers(text: &str) -> Result<HeaderMap, HeadersError> {
    let mut headers = HeaderMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let (name, value) = trimmed.split_once(':').ok_or(HeadersError::Line { line })?;
        let name = http::HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| HeadersError::Line { line })?;
        if [
            header::CONTENT_TYPE,
            header::CONTENT_LENGTH,
            header::HOST,
            candor_adapter::http_client::IDEMPOTENCY_KEY,
        ]
        .contains(&name)
        {
            return Err(HeadersError::Reserved {
                line,
                name: name.to_string(),
            });
        }
        let mut value =
            HeaderValue::from_str(value.trim()).map_err(|_| HeadersError::Line { line })?;
        value.set_sensitive(true);
        headers.append(name, value);
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerts::Labels;

    #[test]
    fn the_payload_is_a_list_of_postable_alerts() {
        let mut alert = Alert {
            name: "CandorAccessFailureSpike".into(),
            severity: "page",
            labels: Labels::from([("target".to_owned(), "<script>".to_owned())]),
            description: "20 AccessFailures".into(),
            summary: "spike".into(),
            state: State::Firing,
            active_since: 1_000_000,
            fired_at: Some(61_000_000),
            resolved_at: None,
            delivery: Delivery::Sending,
            last_sent: None,
            acknowledged: None,
            escalated: None,
        };
        let firing = payload(&alert, "http://127.0.0.1:3000/", None);
        assert_eq!(firing[0]["labels"]["alertname"], "CandorAccessFailureSpike");
        assert_eq!(firing[0]["labels"]["target"], "<script>");
        assert_eq!(firing[0]["startsAt"], "1970-01-01T00:01:01.000000Z");
        assert!(firing[0].get("endsAt").is_none());
        assert_eq!(firing[0]["generatorURL"], "http://127.0.0.1:3000/#alerts");
        alert.state = State::Resolved;
        alert.resolved_at = Some(121_000_000);
        assert_eq!(
            payload(&alert, "x", None)[0]["endsAt"],
            "1970-01-01T00:02:01.000000Z"
        );
    }

    #[test]
    fn the_headers_file_is_read_line_by_line_and_never_shows_a_value() {
        let headers = read_headers(
            "# the receiver's token\nAuthorization: Bearer s3cret-token\n\nX-Scope-OrgID: ops\n",
        )
        .unwrap();
        assert_eq!(headers["authorization"], "Bearer s3cret-token");
        assert!(headers["authorization"].is_sensitive());
        assert_eq!(headers["x-scope-orgid"], "ops");
        for (text, line) in [
            ("Authorization Bearer s3cret-token", 1),
            ("ok: 1\nBad Name: s3cret-token", 2),
            ("X: s3cret\r\u{0}token", 1),
        ] {
            let err = read_headers(text).unwrap_err();
            assert!(
                err.to_string().starts_with(&format!("line {line}:")),
                "{err}"
            );
            assert!(!err.to_string().contains("s3cret"), "{err}");
        }
        let err = read_headers("Content-Type: text/plain").unwrap_err();
        assert!(err.to_string().contains("content-type"), "{err}");
    }
}
