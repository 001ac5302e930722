//! What a derived call's error says: the one table that maps the error identifiers of standard
//! telemetry (`error.type`, an `exception` event's `exception.type`, an HTTP status, a JSON-RPC
//! error code) onto failure kinds, and tells a call its caller cancelled from a failed one.
//!
//! Spans from GenAI, MCP and HTTP client instrumentations carry no Candor class. A span with
//! `error.type`, with status ERROR or with a failure signal of its convention, is a failed call
//! (a cancellation signal of its convention makes it a cancelled one); its identifier is
//! `error.type`, else the
//! `exception` event's type, else its status code. The identifier is matched on its last dotted
//! segment (`httpx.ConnectTimeout` → `ConnectTimeout`), case-insensitively, by the rules below
//! in order; an identifier no rule knows keeps its text and the kind [`DerivedKind::Unknown`].
//!
//! | identifier | kind |
//! |---|---|
//! | a cancellation: `CancelledError`, `OperationCanceledException`, `context canceled`, gRPC `CANCELLED`, … | not a failure of the tool |
//! | `tool_error` (an MCP result with `isError: true`) | `tool_error` |
//! | HTTP 401, 403; `Unauthorized`, `Forbidden`, `PermissionDenied`, `UNAUTHENTICATED` | `auth` |
//! | HTTP 429; `RateLimit…`, `TooManyRequests`, `RESOURCE_EXHAUSTED` | `rate_limited` |
//! | HTTP 408, 504; `…Timeout…`, `…TimedOut…`, `DEADLINE_EXCEEDED` | `timeout` |
//! | `UnknownHost…`, `host_not_found`, `try_again`, `no_recovery`, `…NameResolution…`, `gaierror` | `dns` |
//! | `…SSL…`, `…Tls…`, `…Certificate…`, `SecureConnectionError` | `tls` |
//! | `…Connect…`, `…ConnectionRefused…`, `…ConnectionReset…`, `ECONNREFUSED`, gRPC `UNAVAILABLE` | `connect` |
//! | other HTTP 5xx; JSON-RPC -32603 and -32000 to -32099 | `server_error` |
//! | other HTTP 4xx (404 included); JSON-RPC -32600, -32601, -32602 | `client_error` |
//! | JSON-RPC -32700 | `protocol` |
//! | `_OTHER`, anything else | `unknown`, with the identifier kept |
//!
//! Timeouts are matched before connections, so `ConnectTimeout` is a timeout.

/// A derived failure's kind: one of the contract's access failure kinds.
pub use candor_schema::AccessFailureKind as DerivedKind;

/// What a span says of its call's error, as standard telemetry records it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpanError<'a> {
    /// `error.type`, when set.
    pub error_type: Option<&'a str>,
    /// Whether the span is marked failed: its status is ERROR, or a failure signal of its
    /// convention holds (an attribute such as `gen_ai.task.status = failure`, or an `exception`
    /// event where the convention reads one as a failure).
    pub marked_failed: bool,
    /// The `exception` event's `exception.type`, when the span has one.
    pub exception_type: Option<&'a str>,
    /// `http.response.status_code` (or the older `http.status_code`), when set.
    pub http_status: Option<i64>,
    /// `rpc.response.status_code` (a JSON-RPC error code), when set.
    pub rpc_status: Option<i64>,
    /// The cancellation signal of the span's convention that holds, when one does (an
    /// attribute's key, an error type or the beginning of a message).
    pub cancelled_by: Option<&'a str>,
}

/// What a derived call came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DerivedOutcome {
    /// No error: contact was made. Whether the answer was whole, empty or cut off, the span
    /// cannot say, so this is never a success.
    Contact,
    /// The caller cancelled the call: not a failure of the tool.
    Cancelled {
        /// The identifier that said so.
        error_type: String,
    },
    /// The call failed.
    Failure {
        /// Its kind.
        kind: DerivedKind,
        /// The identifier the kind came from, as sent.
        error_type: String,
    },
}

/// Classifies a derived call by its span's error (see the module's table).
pub fn classify(span: SpanError<'_>) -> DerivedOutcome {
    if let Some(signal) = span.cancelled_by {
        return DerivedOutcome::Cancelled {
            error_type: signal.to_owned(),
        };
    }
    if span.error_type.is_none() && !span.marked_failed {
        return DerivedOutcome::Contact;
    }
    let error_type = span
        .error_type
        .or(span.exception_type)
        .map(str::to_owned)
        .or_else(|| span.http_status.map(|status| status.to_string()))
        .or_else(|| span.rpc_status.map(|code| code.to_string()))
        .unwrap_or_else(|| "_OTHER".to_owned());
    if is_cancellation(&error_type) {
        return DerivedOutcome::Cancelled { error_type };
    }
    let kind = match kind_of(&error_type) {
        // A type the table does not know may come with a status that it does.
        DerivedKind::Unknown => span
            .http_status
            .or(span.rpc_status)
            .map_or(DerivedKind::Unknown, |status| kind_of(&status.to_string())),
        kind => kind,
    };
    DerivedOutcome::Failure { kind, error_type }
}

/// Whether `error_type` says the caller cancelled the call.
pub fn is_cancellation(error_type: &str) -> bool {
    let name = last_segment(error_type).to_ascii_lowercase();
    matches!(
        name.as_str(),
        "cancellederror"
            | "cancelederror"
            | "operationcanceledexception"
            | "operationcancelledexception"
            | "context canceled"
            | "cancelled"
            | "canceled"
    )
}

/// The kind `error_type` names (see the module's table).
pub fn kind_of(error_type: &str) -> DerivedKind {
    let text = error_type.trim();
    if let Ok(code) = text.parse::<i64>() {
        return kind_of_code(code);
    }
    let name = last_segment(text).to_ascii_lowercase();
    let has = |part: &str| name.contains(part);
    let is = |whole: &str| name == whole;
    if is("tool_error") {
        DerivedKind::ToolError
    } else if has("unauthorized")
        || has("unauthenticated")
        || has("forbidden")
        || has("permissiondenied")
        || has("permission_denied")
    {
        DerivedKind::Auth
    } else if has("ratelimit")
        || has("rate_limit")
        || has("toomanyrequests")
        || is("resource_exhausted")
    {
        DerivedKind::RateLimited
    } else if has("timeout") || has("timedout") || has("timed_out") || is("deadline_exceeded") {
        DerivedKind::Timeout
    } else if has("unknownhost")
        || has("nameresolution")
        || has("name_resolution")
        || is("host_not_found")
        || is("try_again")
        || is("no_recovery")
        || is("gaierror")
    {
        DerivedKind::Dns
    } else if has("ssl") || has("tls") || has("certificate") || is("secureconnectionerror") {
        DerivedKind::Tls
    } else if has("connect")
        || has("connectionrefused")
        || has("connectionreset")
        || is("econnrefused")
        || is("unavailable")
    {
        DerivedKind::Connect
    } else {
        DerivedKind::Unknown
    }
}

/// The kind of an HTTP status or a JSON-RPC error code.
fn kind_of_code(code: i64) -> DerivedKind {
    match code {
        401 | 403 => DerivedKind::Auth,
        429 => DerivedKind::RateLimited,
        408 | 504 => DerivedKind::Timeout,
        500..=599 => DerivedKind::ServerError,
        400..=499 => DerivedKind::ClientError,
        -32700 => DerivedKind::Protocol,
        -32602..=-32600 => DerivedKind::ClientError,
        -32603 | -32099..=-32000 => DerivedKind::ServerError,
        _ => DerivedKind::Unknown,
    }
}

/// The part after the last `.` (a qualified class name's own name); the whole text when it has
/// none, or when what follows the dot is not a name (`context canceled` stays whole).
pub fn last_segment(text: &str) -> &str {
    match text.rsplit_once('.') {
        Some((_, name)) if !name.is_empty() && !name.contains(' ') => name,
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row of the table, with real identifiers from real emitters.
    #[test]
    fn every_row_of_the_table_maps_as_documented() {
        let rows: &[(&str, DerivedKind)] = &[
            ("tool_error", DerivedKind::ToolError),
            ("401", DerivedKind::Auth),
            ("403", DerivedKind::Auth),
            ("Unauthorized", DerivedKind::Auth),
            ("openai.PermissionDeniedError", DerivedKind::Auth),
            ("UNAUTHENTICATED", DerivedKind::Auth),
            ("429", DerivedKind::RateLimited),
            ("openai.RateLimitError", DerivedKind::RateLimited),
            ("RESOURCE_EXHAUSTED", DerivedKind::RateLimited),
            ("408", DerivedKind::Timeout),
            ("504", DerivedKind::Timeout),
            ("timeout", DerivedKind::Timeout),
            ("httpx.ConnectTimeout", DerivedKind::Timeout),
            ("ReadTimeout", DerivedKind::Timeout),
            ("asyncio.TimeoutError", DerivedKind::Timeout),
            ("java.net.SocketTimeoutException", DerivedKind::Timeout),
            ("DEADLINE_EXCEEDED", DerivedKind::Timeout),
            ("java.net.UnknownHostException", DerivedKind::Dns),
            ("host_not_found", DerivedKind::Dns),
            ("try_again", DerivedKind::Dns),
            ("no_recovery", DerivedKind::Dns),
            ("socket.gaierror", DerivedKind::Dns),
            ("NameResolutionError", DerivedKind::Dns),
            ("ssl.SSLCertVerificationError", DerivedKind::Tls),
            ("server_certificate_invalid", DerivedKind::Tls),
            ("TlsHandshakeError", DerivedKind::Tls),
            ("SecureConnectionError", DerivedKind::Tls),
            ("httpx.ConnectError", DerivedKind::Connect),
            ("ConnectionRefusedError", DerivedKind::Connect),
            ("ConnectionResetError", DerivedKind::Connect),
            ("ECONNREFUSED", DerivedKind::Connect),
            ("UNAVAILABLE", DerivedKind::Connect),
            ("500", DerivedKind::ServerError),
            ("502", DerivedKind::ServerError),
            ("-32603", DerivedKind::ServerError),
            ("-32001", DerivedKind::ServerError),
            ("400", DerivedKind::ClientError),
            ("404", DerivedKind::ClientError),
            ("-32600", DerivedKind::ClientError),
            ("-32601", DerivedKind::ClientError),
            ("-32602", DerivedKind::ClientError),
            ("-32700", DerivedKind::Protocol),
            ("_OTHER", DerivedKind::Unknown),
            ("ValueError", DerivedKind::Unknown),
            ("200", DerivedKind::Unknown),
        ];
        for (error_type, kind) in rows {
            assert_eq!(kind_of(error_type), *kind, "{error_type}");
        }
    }

    #[test]
    fn a_call_cancelled_by_its_caller_is_not_a_failure() {
        for error_type in [
            "asyncio.exceptions.CancelledError",
            "CancelledError",
            "System.OperationCanceledException",
            "context canceled",
            "CANCELLED",
        ] {
            let outcome = classify(SpanError {
                marked_failed: true,
                exception_type: Some(error_type),
                ..SpanError::default()
            });
            assert_eq!(
                outcome,
                DerivedOutcome::Cancelled {
                    error_type: error_type.to_owned()
                },
                "{error_type}"
            );
        }
    }

    #[test]
    fn the_identifier_is_error_type_then_the_exception_then_the_status() {
        let failure = |span| match classify(span) {
            DerivedOutcome::Failure { kind, error_type } => (kind, error_type),
            other => panic!("{span:?}: {other:?}"),
        };
        // pydantic-ai: status ERROR and an exception event, no error.type.
        assert_eq!(
            failure(SpanError {
                marked_failed: true,
                exception_type: Some("ConnectionError"),
                ..SpanError::default()
            }),
            (DerivedKind::Connect, "ConnectionError".to_owned())
        );
        // error.type wins over the exception.
        assert_eq!(
            failure(SpanError {
                error_type: Some("tool_error"),
                exception_type: Some("ValueError"),
                ..SpanError::default()
            }),
            (DerivedKind::ToolError, "tool_error".to_owned())
        );
        // httpx with the old names: status ERROR and a status code only.
        assert_eq!(
            failure(SpanError {
                marked_failed: true,
                http_status: Some(503),
                ..SpanError::default()
            }),
            (DerivedKind::ServerError, "503".to_owned())
        );
        // A JSON-RPC error with nothing else.
        assert_eq!(
            failure(SpanError {
                marked_failed: true,
                rpc_status: Some(-32602),
                ..SpanError::default()
            }),
            (DerivedKind::ClientError, "-32602".to_owned())
        );
        // An unknown type keeps its text; a status beside it still gives the kind.
        assert_eq!(
            failure(SpanError {
                error_type: Some("my.lib.Oops"),
                http_status: Some(401),
                ..SpanError::default()
            }),
            (DerivedKind::Auth, "my.lib.Oops".to_owned())
        );
        assert_eq!(
            failure(SpanError {
                error_type: Some("my.lib.Oops"),
                ..SpanError::default()
            }),
            (DerivedKind::Unknown, "my.lib.Oops".to_owned())
        );
        // Status ERROR and nothing else to go on.
        assert_eq!(
            failure(SpanError {
                marked_failed: true,
                ..SpanError::default()
            }),
            (DerivedKind::Unknown, "_OTHER".to_owned())
        );
    }

    #[test]
    fn a_span_without_an_error_made_contact_and_is_never_a_success() {
        assert_eq!(
            classify(SpanError {
                http_status: Some(200),
                ..SpanError::default()
            }),
            DerivedOutcome::Contact
        );
        // A 404 without status ERROR or error.type is contact too: the instrumentation did
        // not call it an error.
        assert_eq!(
            classify(SpanError {
                http_status: Some(404),
                ..SpanError::default()
            }),
            DerivedOutcome::Contact
        );
    }
}
