//! The HTTP classifier: the rules of the contract for tools reached over HTTP.
//!
//! | what came back | outcome |
//! |---|---|
//! | no response (connect error, reset, malformed framing) | AccessFailure, transient |
//! | 5xx, 429, 408 | AccessFailure, transient (`Retry-After` read) |
//! | 401, 403 | AccessFailure `auth`, permanent |
//! | 404 | the tool's declaration: [`NotFound::ConfirmedAbsent`] → Empty, [`NotFound::Unreachable`] → AccessFailure |
//! | other 4xx | AccessFailure `client_error`, permanent |
//! | 1xx, 3xx | AccessFailure `protocol`, permanent |
//! | 2xx, body cut (size cap, broken stream, `Content-Length` mismatch, JSON ends early) | Partial |
//! | 2xx, body not JSON | AccessFailure `protocol`, transient |
//! | 2xx, declared collection missing or not a list | AccessFailure `protocol`, permanent |
//! | 2xx, declared total (body field or `X-Total-Count`) above the items returned | Partial `declared_total` |
//! | 2xx, truncation marker set, or `has_more` without a cursor | Partial `truncation_marker` |
//! | 202 | Success with [`Lifecycle::Accepted`]: accepted, never completed; its status URL from `Operation-Location`, else `Location` |
//! | 204, an empty body, `null`, or an empty collection | Empty |
//! | any other 2xx | Success |
//!
//! Where the collection sits in the body is the tool author's declaration
//! ([`HttpClassifier::items_at`]); without one, a top-level JSON array is the collection and any
//! other JSON value is a single answer.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use candor_schema::redact::redact_text;
use candor_schema::{
    AccessFailureKind, Evidence, EvidenceKind, Extent, Failure, Lifecycle, Operation, Outcome,
    PartialKind, Truncation,
};
use http::header::{CONTENT_LENGTH, HeaderName, LOCATION, RETRY_AFTER};
use http::{HeaderMap, StatusCode};
use serde_json::Value;

use super::{Classification, Classify};

/// The header of Azure's asynchronous request-reply pattern that names an operation's status
/// resource; preferred to `Location` on a 202.
pub const OPERATION_LOCATION: HeaderName = HeaderName::from_static("operation-location");

/// The most characters of a failing response's body repeated in a failure message.
const BODY_SNIPPET_CHARS: usize = 200;

/// One HTTP attempt's raw result: a response, or no response at all.
pub type HttpExchange = Result<HttpResponse, TransportError>;

/// A response as received, with how its body ended.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpResponse {
    /// The status line's code.
    pub status: StatusCode,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body bytes received.
    pub body: Bytes,
    /// Whether the body arrived whole.
    pub body_end: BodyEnd,
    /// When the response arrived (resolves an HTTP-date `Retry-After`).
    pub received_at: SystemTime,
}

impl HttpResponse {
    /// A response whose body arrived whole, received now.
    pub fn new(status: StatusCode, headers: HeaderMap, body: impl Into<Bytes>) -> Self {
        Self {
            status,
            headers,
            body: body.into(),
            body_end: BodyEnd::Complete,
            received_at: SystemTime::now(),
        }
    }
}

/// How the reading of a response body ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyEnd {
    /// The whole body arrived.
    Complete,
    /// Reading stopped at the client's size cap; the rest was not read.
    SizeCap {
        /// The cap, in bytes.
        limit: usize,
    },
    /// The connection broke while the body was arriving.
    Broken {
        /// What the client reported.
        error: String,
    },
    /// The attempt's time (its timeout, or what was left of the deadline) ran out while the body
    /// was arriving: a timeout that landed mid-response cut the answer off.
    TimedOut {
        /// The attempt's time.
        after: std::time::Duration,
    },
}

/// Why no response arrived.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind:?}: {message}")]
pub struct TransportError {
    /// What kind of transport failure.
    pub kind: TransportErrorKind,
    /// What the client reported.
    pub message: String,
}

/// The kinds of transport failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportErrorKind {
    /// The connection could not be made.
    Connect,
    /// The connection was reset or closed before a response.
    Reset,
    /// The client's own timeout fired before a status arrived.
    Timeout,
    /// The response could not be parsed as HTTP.
    Protocol,
}

impl TransportErrorKind {
    const fn error_type(self) -> &'static str {
        match self {
            TransportErrorKind::Connect => "connect_error",
            TransportErrorKind::Reset => "connection_reset",
            TransportErrorKind::Timeout => "timeout",
            TransportErrorKind::Protocol => "http_protocol_error",
        }
    }

    const fn failure_kind(self) -> AccessFailureKind {
        match self {
            TransportErrorKind::Connect | TransportErrorKind::Reset => AccessFailureKind::Connect,
            TransportErrorKind::Timeout => AccessFailureKind::Timeout,
            TransportErrorKind::Protocol => AccessFailureKind::Protocol,
        }
    }
}

/// What a 404 means for this tool: the author's declaration, never a default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotFound {
    /// A lookup by id: 404 is a verified absence (Empty).
    ConfirmedAbsent,
    /// 404 means the tool could not be reached where it was looked for (AccessFailure).
    Unreachable,
}

/// A JSON field whose value marks an answer as truncated, e.g. `/truncated` = `true`.
#[derive(Debug, Clone, PartialEq)]
struct Marker {
    pointer: String,
    value: Value,
}

/// A `has_more` flag that is only honest when a cursor to fetch the rest comes with it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HasMore {
    flag: String,
    cursor: String,
}

/// Classifies HTTP exchanges by the rules in the [module documentation](self).
#[derive(Debug, Clone, PartialEq)]
pub struct HttpClassifier {
    not_found: NotFound,
    items: Option<String>,
    total: Option<String>,
    total_header: Option<HeaderName>,
    markers: Vec<Marker>,
    has_more: Option<HasMore>,
    request_id_header: HeaderName,
    operation_id: Option<String>,
    scope: Option<String>,
}

impl HttpClassifier {
    /// A classifier for a tool whose 404 means what `not_found` says.
    pub fn new(not_found: NotFound) -> Self {
        Self {
            not_found,
            items: None,
            total: None,
            total_header: Some(HeaderName::from_static("x-total-count")),
            markers: Vec::new(),
            has_more: None,
            request_id_header: HeaderName::from_static("x-request-id"),
            operation_id: None,
            scope: None,
        }
    }

    /// Where the collection sits in the body, as a JSON pointer (`/items`, `/data/results`).
    pub fn items_at(mut self, pointer: impl Into<String>) -> Self {
        self.items = Some(pointer.into());
        self
    }

    /// Where the source declares the total number of matches, as a JSON pointer.
    pub fn total_at(mut self, pointer: impl Into<String>) -> Self {
        self.total = Some(pointer.into());
        self
    }

    /// The header that declares the total (default `X-Total-Count`; `None` to ignore headers).
    pub fn total_header(mut self, header: Option<HeaderName>) -> Self {
        self.total_header = header;
        self
    }

    /// A field whose value marks the answer as truncated, e.g. (`/truncated`, `true`).
    pub fn truncated_when(mut self, pointer: impl Into<String>, value: Value) -> Self {
        self.markers.push(Marker {
            pointer: pointer.into(),
            value,
        });
        self
    }

    /// A `has_more` flag: the answer is truncated when the flag is true and the cursor field
    /// is missing, null or empty.
    pub fn has_more_at(mut self, flag: impl Into<String>, cursor: impl Into<String>) -> Self {
        self.has_more = Some(HasMore {
            flag: flag.into(),
            cursor: cursor.into(),
        });
        self
    }

    /// Where a 202's body names the operation it started (default: the `Operation-Location`
    /// header, else `Location`).
    pub fn operation_id_at(mut self, pointer: impl Into<String>) -> Self {
        self.operation_id = Some(pointer.into());
        self
    }

    /// The header that carries the source's request id (default `X-Request-Id`).
    pub fn request_id_header(mut self, header: HeaderName) -> Self {
        self.request_id_header = header;
        self
    }

    /// The scope examined, recorded in every Success and Empty extent.
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    fn classify_response(&self, response: HttpResponse) -> Outcome<Value> {
        let status = response.status;
        if status.is_success() {
            return self.classify_success(response);
        }
        let code = status.as_u16();
        let (kind, retryable) = match code {
            404 if self.not_found == NotFound::ConfirmedAbsent => {
                return Outcome::Empty {
                    extent: self.extent(Some(0), None),
                };
            }
            408 => (AccessFailureKind::Timeout, true),
            429 => (AccessFailureKind::RateLimited, true),
            401 | 403 => (AccessFailureKind::Auth, false),
            400..=499 => (AccessFailureKind::ClientError, false),
            500..=599 => (AccessFailureKind::ServerError, true),
            _ => (AccessFailureKind::Protocol, false),
        };
        let retry_after_ms = retryable
            .then(|| retry_after(&response.headers, response.received_at))
            .flatten()
            .map(|wait| u64::try_from(wait.as_millis()).unwrap_or(u64::MAX));
        let reason = status.canonical_reason().unwrap_or("");
        let snippet = body_snippet(&response.body);
        let message = if snippet.is_empty() {
            format!("HTTP {code} {reason}")
        } else {
            format!("HTTP {code} {reason}: {snippet}")
        };
        Outcome::AccessFailure {
            failure: Failure {
                kind,
                retryable,
                message: message.trim_end().to_owned(),
                status: Some(code),
                error_type: Some(code.to_string()),
                retry_after_ms,
            },
        }
    }

    fn classify_success(&self, response: HttpResponse) -> Outcome<Value> {
        let received = response.body.len();
        let cut = match &response.body_end {
            BodyEnd::Complete => declared_length(&response.headers)
                .filter(|declared| *declared != received)
                .map(|declared| {
                    (
                        PartialKind::MidStream,
                        format!("{declared} bytes declared by Content-Length"),
                    )
                }),
            BodyEnd::SizeCap { limit } => Some((
                PartialKind::SizeCap,
                format!("everything past the {limit}-byte size cap"),
            )),
            BodyEnd::Broken { error } => Some((
                PartialKind::MidStream,
                format!(
                    "the rest of the body (the stream broke: {})",
                    redact_text(error)
                ),
            )),
            BodyEnd::TimedOut { after } => Some((
                PartialKind::MidStream,
                format!(
                    "the rest of the body (the attempt's {after:?} ran out while it was arriving)"
                ),
            )),
        };
        if let Some((kind, dropped)) = cut {
            return body_partial(&response.body, kind, dropped);
        }
        if response.status == StatusCode::NO_CONTENT || response.body.trim_ascii().is_empty() {
            return Outcome::Empty {
                extent: self.extent(Some(0), None),
            };
        }
        let body: Value = match serde_json::from_slice(&response.body) {
            Ok(body) => body,
            Err(err) if err.is_eof() => {
                return body_partial(
                    &response.body,
                    PartialKind::MidStream,
                    format!("the rest of the JSON document ({err})"),
                );
            }
            Err(err) => {
                return protocol_failure(format!("2xx body is not JSON: {err}"), true);
            }
        };
        self.classify_body(&response.headers, body)
    }

    fn classify_body(&self, headers: &HeaderMap, body: Value) -> Outcome<Value> {
        let items = match &self.items {
            Some(pointer) => match body.pointer(pointer) {
                Some(Value::Array(items)) => Some(items.len()),
                Some(Value::Null) => Some(0),
                Some(other) => {
                    return protocol_failure(
                        format!(
                            "declared collection {pointer} is a {}, not a list",
                            json_type(other)
                        ),
                        false,
                    );
                }
                None => {
                    return protocol_failure(
                        format!("declared collection {pointer} is missing from the body"),
                        false,
                    );
                }
            },
            None => match &body {
                Value::Array(items) => Some(items.len()),
                Value::Null => Some(0),
                _ => None,
            },
        };
        let declared_total = self.declared_total(headers, &body);
        let returned = items.map(|n| n as u64);
        if let (Some(returned), Some(total)) = (returned, declared_total)
            && total > returned
        {
            return Outcome::Partial {
                payload: body,
                truncation: Truncation {
                    kind: PartialKind::DeclaredTotal,
                    covered: covered_items(returned, Some(total)),
                    dropped: format!("{} item(s)", total - returned),
                    returned: Some(returned),
                    expected: Some(total),
                },
            };
        }
        if let Some(marker) = self.truncation_marker(&body) {
            return Outcome::Partial {
                truncation: Truncation {
                    kind: PartialKind::TruncationMarker,
                    covered: returned
                        .map(|n| covered_items(n, declared_total))
                        .unwrap_or_else(|| "the answer up to the truncation".into()),
                    dropped: format!("an unknown remainder ({marker})"),
                    returned,
                    expected: declared_total,
                },
                payload: body,
            };
        }
        match returned {
            Some(0) => Outcome::Empty {
                extent: self.extent(Some(0), declared_total),
            },
            _ => Outcome::Success {
                extent: self.extent(returned, declared_total),
                payload: body,
            },
        }
    }

    fn declared_total(&self, headers: &HeaderMap, body: &Value) -> Option<u64> {
        let from_body = self
            .total
            .as_deref()
            .and_then(|pointer| body.pointer(pointer))
            .and_then(Value::as_u64);
        let from_header = self
            .total_header
            .as_ref()
            .and_then(|name| headers.get(name))
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok());
        from_body.or(from_header)
    }

    fn truncation_marker(&self, body: &Value) -> Option<String> {
        for marker in &self.markers {
            if body.pointer(&marker.pointer) == Some(&marker.value) {
                return Some(format!("{} is {}", marker.pointer, marker.value));
            }
        }
        let has_more = self.has_more.as_ref()?;
        let more = body.pointer(&has_more.flag) == Some(&Value::Bool(true));
        let cursor = match body.pointer(&has_more.cursor) {
            None | Some(Value::Null) => false,
            Some(Value::String(cursor)) => !cursor.is_empty(),
            Some(_) => true,
        };
        (more && !cursor).then(|| format!("{} is true with no {}", has_more.flag, has_more.cursor))
    }

    fn accepted(&self, response: &HttpResponse, body: Value) -> Classification<Value> {
        let from_body = self
            .operation_id
            .as_deref()
            .and_then(|pointer| body.pointer(pointer))
            .map(|id| match id {
                Value::String(id) => id.clone(),
                other => other.to_string(),
            });
        let location = header_str(&response.headers, &OPERATION_LOCATION)
            .or_else(|| header_str(&response.headers, &LOCATION))
            .map(str::to_owned);
        let named = from_body
            .or_else(|| location.clone())
            .or_else(|| header_str(&response.headers, &self.request_id_header).map(str::to_owned));
        // The source named no id: one made up here keeps this operation apart from every other,
        // and is no evidence of anything the source holds.
        let generated = named.is_none();
        let id = named.unwrap_or_else(generated_operation_id);
        Classification {
            outcome: Outcome::Success {
                payload: body,
                extent: self.extent(None, None),
            },
            evidence: (!generated).then(|| Evidence {
                kind: EvidenceKind::JobId,
                value: id.clone(),
            }),
            lifecycle: Some(Lifecycle::Accepted {
                operation: Operation {
                    id,
                    status_url: location,
                    generated,
                },
            }),
            poll_after: retry_after(&response.headers, response.received_at),
        }
    }

    fn extent(&self, items: Option<u64>, declared_total: Option<u64>) -> Extent {
        Extent {
            items,
            declared_total,
            scope: self.scope.clone(),
        }
    }
}

impl Classify<HttpExchange> for HttpClassifier {
    type Payload = Value;

    fn classify(&self, raw: HttpExchange) -> Classification<Value> {
        match raw {
            Err(error) => Classification::new(Outcome::AccessFailure {
                failure: Failure {
                    kind: error.kind.failure_kind(),
                    retryable: true,
                    message: redact_text(&error.message).into_owned(),
                    status: None,
                    error_type: Some(error.kind.error_type().into()),
                    retry_after_ms: None,
                },
            }),
            Ok(response) => {
                let evidence =
                    header_str(&response.headers, &self.request_id_header).map(|id| Evidence {
                        kind: EvidenceKind::RequestId,
                        value: id.to_owned(),
                    });
                if response.status == StatusCode::ACCEPTED && response.body_end == BodyEnd::Complete
                {
                    // Accepted for processing is not done: the body names the operation at
                    // best, and what it says is not the operation's result.
                    let body = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
                    return self.accepted(&response, body);
                }
                Classification {
                    outcome: self.classify_response(response),
                    evidence,
                    lifecycle: None,
                    poll_after: None,
                }
            }
        }
    }
}

/// An operation id for an acceptance whose source named none (rule `HTTP-202`): `candor-` and 32
/// lowercase hexadecimal digits, two SipHash values of a process-wide counter under keys the
/// standard library draws at random, so no two calls share one.
pub fn generated_operation_id() -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let half = || {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(n);
        hasher.finish()
    };
    format!("{GENERATED_ID_PREFIX}{:016x}{:016x}", half(), half())
}

/// What every operation id the adapter makes begins with.
pub const GENERATED_ID_PREFIX: &str = "candor-";

fn protocol_failure(message: String, retryable: bool) -> Outcome<Value> {
    Outcome::AccessFailure {
        failure: Failure {
            kind: AccessFailureKind::Protocol,
            retryable,
            message,
            status: None,
            error_type: Some("malformed_response".into()),
            retry_after_ms: None,
        },
    }
}

fn body_partial(body: &Bytes, kind: PartialKind, dropped: String) -> Outcome<Value> {
    Outcome::Partial {
        payload: Value::String(String::from_utf8_lossy(body).into_owned()),
        truncation: Truncation {
            kind,
            covered: format!("the first {} bytes of the body", body.len()),
            dropped,
            returned: None,
            expected: None,
        },
    }
}

fn covered_items(returned: u64, total: Option<u64>) -> String {
    match (returned, total) {
        (0, Some(total)) => format!("no items of {total}"),
        (n, Some(total)) => format!("items 1-{n} of {total}"),
        (n, None) => format!("{n} item(s)"),
    }
}

fn declared_length(headers: &HeaderMap) -> Option<usize> {
    header_str(headers, &CONTENT_LENGTH)?.trim().parse().ok()
}

pub(crate) fn header_str<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    headers.get(name)?.to_str().ok()
}

pub(crate) fn retry_after(headers: &HeaderMap, received_at: SystemTime) -> Option<Duration> {
    let value = header_str(headers, &RETRY_AFTER)?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(received_at).unwrap_or(Duration::ZERO))
}

pub(crate) fn body_snippet(body: &Bytes) -> String {
    let text = String::from_utf8_lossy(body);
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(BODY_SNIPPET_CHARS)
        .collect();
    redact_text(one_line.trim()).into_owned()
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}
