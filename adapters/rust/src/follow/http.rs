//! Status readers for the two common HTTP protocols of asynchronous operations.
//!
//! **[`StatusUrl`]**: a 202 names a status resource (`Operation-Location`, else `Location`;
//! Azure's asynchronous request-reply). A read of it says:
//!
//! | status read | the operation |
//! |---|---|
//! | 202 | running (`Retry-After` honoured; `percentComplete` read when the body has it) |
//! | 303 with `Location` | completed: the result is at that location, which is the evidence and the resource |
//! | 2xx with a `status` field | by its value, below |
//! | 2xx without a `status` field | completed: the status URL answered with the resource itself, whose version is the `ETag` |
//! | any other answer, or none | unreadable, by the HTTP rules (5xx, 429 transient; 404 permanent) |
//!
//! The `status` value is read without regard to case, `_` or `-`: `notstarted`, `queued`,
//! `pending` and `accepted` are queued; `running`, `inprogress` and `started` are running;
//! `succeeded`, `completed` and `done` are completed, with the status URL as `query` evidence;
//! `partiallysucceeded` and `partial` are partial; `failed` is failed, with `error.message` (or
//! `error.code`) as the reason; `canceled` and `cancelled` are cancelled. Any other value is a
//! protocol failure: a status no one can interpret is not a completion. A completed or partial
//! status names its resource by `resourceLocation`, when the body has it.
//!
//! **[`LongRunning`]**: a long-running operation resource (Google AIP-151), returned by the start
//! request with a `name` and `done`. A read of it (`GET` on the name) says: `done` absent or
//! false, running (`metadata.progressPercent` read when present); `done` with `error`, failed with
//! its message, or cancelled when its `code` is 1 (`CANCELLED`); `done` with `response`,
//! completed with the result `response` and the operation's name as `job_id` evidence, the
//! resource being the response's `name` with its `etag` as the version (AIP-122, AIP-154) when
//! it has them. `done` with neither is refused as a protocol failure: a completion with nothing
//! to show for it.

use candor_schema::redact::{redact_text, redact_url};
use candor_schema::{
    AccessFailureKind, Evidence, EvidenceKind, Failure, Operation, Outcome, Resource,
};
use std::time::Duration;

use http::StatusCode;
use http::header::{ETAG, LOCATION};
use serde_json::Value;

use super::{OperationStatus, ReadStatus, StatusRead};
use crate::NotFound;
use crate::classify::http::{
    BodyEnd, HttpClassifier, HttpExchange, HttpResponse, body_snippet, header_str, retry_after,
};
use crate::classify::{Classification, Classify};

/// Reads the status resource of Azure's asynchronous request-reply pattern; see the
/// [module documentation](self).
#[derive(Debug, Clone, PartialEq)]
pub struct StatusUrl {
    status_at: String,
    percent_at: String,
    covered_at: String,
    resource_at: String,
}

impl Default for StatusUrl {
    fn default() -> Self {
        Self {
            status_at: "/status".into(),
            percent_at: "/percentComplete".into(),
            covered_at: "/covered".into(),
            resource_at: "/resourceLocation".into(),
        }
    }
}

impl StatusUrl {
    /// Where the status resource's state is, as a JSON pointer (default `/status`).
    pub fn status_at(mut self, pointer: impl Into<String>) -> Self {
        self.status_at = pointer.into();
        self
    }

    /// Where the progress in percent is, as a JSON pointer (default `/percentComplete`).
    pub fn percent_at(mut self, pointer: impl Into<String>) -> Self {
        self.percent_at = pointer.into();
        self
    }

    /// Where a partial operation says what it did, as a JSON pointer (default `/covered`).
    pub fn covered_at(mut self, pointer: impl Into<String>) -> Self {
        self.covered_at = pointer.into();
        self
    }

    /// Where a completed or partial operation names its resource, as a JSON pointer (default
    /// `/resourceLocation`).
    pub fn resource_at(mut self, pointer: impl Into<String>) -> Self {
        self.resource_at = pointer.into();
        self
    }

    /// Reads a 2xx body; `etag` is the response's `ETag`, the version of a body that is the
    /// resource itself.
    fn read_body(
        &self,
        operation: &Operation,
        body: Value,
        etag: Option<&str>,
    ) -> Result<OperationStatus<Value>, Failure> {
        let Some(state) = body.pointer(&self.status_at) else {
            // The status URL answered with the resource itself.
            let resource = Resource {
                id: status_url_of(operation),
                version: etag.map(str::to_owned),
            };
            return Ok(completed_by_query(operation, body, Some(resource)));
        };
        let Some(state) = state.as_str() else {
            return Err(protocol_failure(format!(
                "the status field {} is not a string: {}",
                self.status_at,
                compact(state)
            )));
        };
        let normalised: String = state
            .chars()
            .filter(|c| !matches!(c, '_' | '-' | ' '))
            .flat_map(char::to_lowercase)
            .collect();
        Ok(match normalised.as_str() {
            "notstarted" | "queued" | "pending" | "accepted" => OperationStatus::Queued,
            "running" | "inprogress" | "started" => OperationStatus::Running {
                percent_complete: percent(body.pointer(&self.percent_at)),
            },
            "succeeded" | "completed" | "done" => {
                let resource = self.named_resource(&body);
                completed_by_query(operation, body, resource)
            }
            "partiallysucceeded" | "partial" => {
                let covered = body
                    .pointer(&self.covered_at)
                    .map(text_of)
                    .unwrap_or_else(|| "part of the operation's work".into());
                OperationStatus::Partial {
                    resource: self.named_resource(&body),
                    result: body,
                    covered,
                    dropped: "the rest of the operation's work".into(),
                }
            }
            "failed" | "error" => OperationStatus::Failed {
                reason: error_reason(body.pointer("/error")),
            },
            "canceled" | "cancelled" => OperationStatus::Cancelled,
            _ => {
                return Err(protocol_failure(format!(
                    "the status {:?} is not one this reader knows",
                    redact_text(state)
                )));
            }
        })
    }

    /// The resource a status body names at `resource_at`, when it names one.
    fn named_resource(&self, body: &Value) -> Option<Resource> {
        let location = body.pointer(&self.resource_at)?.as_str()?;
        Some(Resource {
            id: redact_url(location).into_owned(),
            version: None,
        })
    }
}

impl ReadStatus<HttpExchange> for StatusUrl {
    type Payload = Value;

    fn refuse(&self, operation: &Operation) -> Option<Failure> {
        operation.status_url.is_none().then(|| Failure {
            kind: AccessFailureKind::Protocol,
            retryable: false,
            message: format!(
                "operation {} was accepted without a status URL (no Operation-Location or \
                 Location header): it cannot be followed",
                redact_text(&operation.id)
            ),
            status: None,
            error_type: Some("no_status_url".into()),
            retry_after_ms: None,
        })
    }

    fn read(&self, operation: &Operation, raw: HttpExchange) -> StatusRead<Value> {
        let response = match answered(raw) {
            Ok(response) => response,
            Err(read) => return *read,
        };
        let wait = retry_after(&response.headers, response.received_at);
        let status = if response.status == StatusCode::ACCEPTED {
            let body = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
            Ok(OperationStatus::Running {
                percent_complete: percent(body.pointer(&self.percent_at)),
            })
        } else if response.status == StatusCode::SEE_OTHER {
            match header_str(&response.headers, &LOCATION) {
                Some(location) => {
                    let location = redact_url(location).into_owned();
                    Ok(OperationStatus::Completed {
                        result: Value::String(location.clone()),
                        verified_by: Evidence {
                            kind: EvidenceKind::Query,
                            value: location.clone(),
                        },
                        resource: Some(Resource {
                            id: location,
                            version: None,
                        }),
                    })
                }
                None => Err(protocol_failure(
                    "the status URL answered 303 without a Location".into(),
                )),
            }
        } else if response.status.is_success() {
            let etag = header_str(&response.headers, &ETAG);
            json_body(&response).and_then(|body| self.read_body(operation, body, etag))
        } else {
            return unreadable(Ok(response));
        };
        finish(status, wait)
    }
}

/// Reads a long-running operation resource (Google AIP-151); see the
/// [module documentation](self).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LongRunning;

impl ReadStatus<HttpExchange> for LongRunning {
    type Payload = Value;

    /// A start answer that is an operation resource (a JSON object with a string `name` and a
    /// `done` field) names the operation to follow, also when it is already done: the first
    /// status read then reports the end.
    fn accepted(&self, start: &Classification<Value>) -> Option<Operation> {
        if let Some(lifecycle) = &start.lifecycle {
            return (!lifecycle.state().is_terminal()).then(|| lifecycle.operation().clone());
        }
        let Outcome::Success { payload, .. } = &start.outcome else {
            return None;
        };
        let name = payload.get("name")?.as_str()?;
        payload.get("done")?;
        Some(Operation {
            id: name.to_owned(),
            status_url: None,
            generated: false,
        })
    }

    fn read(&self, operation: &Operation, raw: HttpExchange) -> StatusRead<Value> {
        let response = match answered(raw) {
            Ok(response) => response,
            Err(read) => return *read,
        };
        if !response.status.is_success() {
            return unreadable(Ok(response));
        }
        let wait = retry_after(&response.headers, response.received_at);
        let status = json_body(&response).and_then(|mut body| {
            if body.get("done") != Some(&Value::Bool(true)) {
                return Ok(OperationStatus::Running {
                    percent_complete: percent(body.pointer("/metadata/progressPercent")),
                });
            }
            if let Some(error) = body.get("error") {
                // google.rpc.Code 1 is CANCELLED.
                if error.get("code").and_then(Value::as_i64) == Some(1) {
                    return Ok(OperationStatus::Cancelled);
                }
                return Ok(OperationStatus::Failed {
                    reason: error_reason(Some(error)),
                });
            }
            match body.get_mut("response").map(Value::take) {
                Some(result) => Ok(OperationStatus::Completed {
                    resource: long_running_resource(&result),
                    result,
                    verified_by: Evidence {
                        kind: EvidenceKind::JobId,
                        value: operation.id.clone(),
                    },
                }),
                None => Err(protocol_failure(format!(
                    "operation {} says done with neither a response nor an error: its \
                     completion cannot be verified",
                    redact_text(&operation.id)
                ))),
            }
        });
        finish(status, wait)
    }
}

fn finish(
    status: Result<OperationStatus<Value>, Failure>,
    retry_after: Option<Duration>,
) -> StatusRead<Value> {
    StatusRead {
        status,
        retry_after,
    }
}

/// The response of a read, or the read's failure when nothing usable came back (boxed: a read
/// is much larger than a response's handle).
fn answered(raw: HttpExchange) -> Result<HttpResponse, Box<StatusRead<Value>>> {
    match raw {
        Ok(response) if response.body_end == BodyEnd::Complete => Ok(response),
        Ok(response) => Err(Box::new(StatusRead::unreadable(Failure {
            kind: AccessFailureKind::Protocol,
            retryable: true,
            message: format!(
                "the status response's body was cut ({:?}); its state cannot be read",
                response.body_end
            ),
            status: Some(response.status.as_u16()),
            error_type: Some("malformed_response".into()),
            retry_after_ms: None,
        }))),
        Err(error) => Err(Box::new(unreadable(Err(error)))),
    }
}

/// The failure of a read that did not answer, or answered with a status the HTTP rules count as
/// a failure.
fn unreadable(
    raw: Result<HttpResponse, crate::classify::http::TransportError>,
) -> StatusRead<Value> {
    let raw = match raw {
        Ok(response)
            if !response.status.is_success()
                && !response.status.is_informational()
                && !response.status.is_redirection() =>
        {
            Ok(response)
        }
        Ok(response) => {
            return StatusRead::unreadable(protocol_failure(format!(
                "the status URL answered {}, which says nothing about the operation",
                response.status.as_u16()
            )));
        }
        Err(error) => Err(error),
    };
    match HttpClassifier::new(NotFound::Unreachable)
        .classify(raw)
        .outcome
    {
        Outcome::AccessFailure { failure } => StatusRead {
            retry_after: failure.retry_after_ms.map(Duration::from_millis),
            status: Err(failure),
        },
        // Not reached: a failing status or no response is always an AccessFailure.
        _ => StatusRead::unreadable(protocol_failure("the status read was not a failure".into())),
    }
}

fn json_body(response: &HttpResponse) -> Result<Value, Failure> {
    serde_json::from_slice(&response.body).map_err(|err| {
        let mut failure = protocol_failure(format!(
            "the status response is not JSON ({err}): {}",
            body_snippet(&response.body)
        ));
        failure.status = Some(response.status.as_u16());
        failure.retryable = true;
        failure
    })
}

fn protocol_failure(message: String) -> Failure {
    Failure {
        kind: AccessFailureKind::Protocol,
        retryable: false,
        message,
        status: None,
        error_type: Some("malformed_response".into()),
        retry_after_ms: None,
    }
}

fn completed_by_query(
    operation: &Operation,
    result: Value,
    resource: Option<Resource>,
) -> OperationStatus<Value> {
    OperationStatus::Completed {
        result,
        verified_by: Evidence {
            kind: EvidenceKind::Query,
            value: status_url_of(operation),
        },
        resource,
    }
}

/// The operation's status URL (its id when it has none), credentials redacted.
fn status_url_of(operation: &Operation) -> String {
    redact_url(operation.status_url.as_deref().unwrap_or(&operation.id)).into_owned()
}

/// The resource a long-running operation's `response` is: its `name` (AIP-122), with its
/// `etag` (AIP-154) as the version.
fn long_running_resource(response: &Value) -> Option<Resource> {
    let name = response.get("name")?.as_str()?;
    Some(Resource {
        id: redact_text(name).into_owned(),
        version: response
            .get("etag")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

fn percent(value: Option<&Value>) -> Option<u8> {
    value
        .and_then(Value::as_f64)
        .filter(|percent| (0.0..=100.0).contains(percent))
        // In 0..=100 by the filter, so the cast neither wraps nor saturates.
        .map(|percent| percent as u8)
}

fn error_reason(error: Option<&Value>) -> String {
    let Some(error) = error else {
        return "the operation reported failure without an error".into();
    };
    let reason = match (error.get("message"), error.get("code")) {
        (Some(Value::String(message)), _) if !message.is_empty() => message.clone(),
        (_, Some(code)) => format!("error code {}", text_of(code)),
        _ => compact(error),
    };
    redact_text(&reason).into_owned()
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => compact(other),
    }
}

fn compact(value: &Value) -> String {
    let text = value.to_string();
    text.chars().take(200).collect()
}
