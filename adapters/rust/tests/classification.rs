//! The HTTP classifier against the rules table in its module documentation: one row per rule,
//! each truncation signal on its own, and properties that hold for every exchange.

#![allow(clippy::unwrap_used)] // a panic in a test or a benchmark set-up is its failure report

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use candor_adapter::classify::http::{
    BodyEnd, HttpClassifier, HttpExchange, HttpResponse, NotFound, TransportError,
    TransportErrorKind,
};
use candor_adapter::classify::{Classification, Classify};
use candor_schema::{
    Evidence, EvidenceKind, Extent, Failure, FailureKind, Lifecycle, LifecycleState, Operation,
    Outcome, OutcomeClass, Truncation,
};
use http::header::CONTENT_LENGTH;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use proptest::prelude::*;
use serde_json::{Value, json};

const RETRYABLE: bool = true;
const PERMANENT: bool = false;

/// When every response in these tests arrived: whole seconds, so an HTTP-date round-trips.
fn received_at() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_790_000_000)
}

fn http(status: u16, headers: &[(&str, &str)], body: &str) -> HttpResponse {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).expect("a valid header name"),
            HeaderValue::from_str(value).expect("a valid header value"),
        );
    }
    HttpResponse {
        status: StatusCode::from_u16(status).expect("a valid status code"),
        headers: map,
        body: Bytes::from(body.to_owned()),
        body_end: BodyEnd::Complete,
        received_at: received_at(),
    }
}

/// A response whose body arrived whole.
fn response(status: u16, headers: &[(&str, &str)], body: &str) -> HttpExchange {
    Ok(http(status, headers, body))
}

/// A 200 whose body ended as `body_end` says.
fn cut(body: &str, body_end: BodyEnd) -> HttpExchange {
    Ok(HttpResponse {
        body_end,
        ..http(200, &[], body)
    })
}

fn transport(kind: TransportErrorKind, message: &str) -> HttpExchange {
    Err(TransportError {
        kind,
        message: message.to_owned(),
    })
}

/// A tool with no declarations beyond its 404.
fn plain() -> HttpClassifier {
    HttpClassifier::new(NotFound::Unreachable)
}

/// A tool whose collection sits at `/items`.
fn listed() -> HttpClassifier {
    plain().items_at("/items")
}

/// What a row expects of every classification: class, failure kind and retryability.
struct Want {
    class: OutcomeClass,
    kind: Option<FailureKind>,
    /// `Some` exactly for an AccessFailure.
    retryable: Option<bool>,
}

const SUCCESS: Want = Want {
    class: OutcomeClass::Success,
    kind: None,
    retryable: None,
};

const EMPTY: Want = Want {
    class: OutcomeClass::Empty,
    kind: None,
    retryable: None,
};

const fn failed(kind: FailureKind, retryable: bool) -> Want {
    Want {
        class: OutcomeClass::AccessFailure,
        kind: Some(kind),
        retryable: Some(retryable),
    }
}

const fn partial(kind: FailureKind) -> Want {
    Want {
        class: OutcomeClass::Partial,
        kind: Some(kind),
        retryable: None,
    }
}

/// Further assertions for one row; the first argument is the row's name.
type Check = fn(&str, &Classification<Value>);

fn nothing_more(_: &str, _: &Classification<Value>) {}

struct Case {
    name: &'static str,
    classifier: HttpClassifier,
    exchange: HttpExchange,
    want: Want,
    check: Check,
}

fn failure<'a>(name: &str, got: &'a Classification<Value>) -> &'a Failure {
    match &got.outcome {
        Outcome::AccessFailure { failure } => failure,
        other => panic!("{name}: expected an AccessFailure, got {other:?}"),
    }
}

fn truncation<'a>(name: &str, got: &'a Classification<Value>) -> &'a Truncation {
    match &got.outcome {
        Outcome::Partial { truncation, .. } => truncation,
        other => panic!("{name}: expected a Partial, got {other:?}"),
    }
}

fn extent<'a>(name: &str, got: &'a Classification<Value>) -> &'a Extent {
    match &got.outcome {
        Outcome::Success { extent, .. } | Outcome::Empty { extent } => extent,
        other => panic!("{name}: expected a Success or an Empty, got {other:?}"),
    }
}

fn accepted_operation<'a>(name: &str, got: &'a Classification<Value>) -> &'a Operation {
    let lifecycle = got
        .lifecycle
        .as_ref()
        .unwrap_or_else(|| panic!("{name}: a 202 must carry a lifecycle"));
    assert_eq!(lifecycle.state(), LifecycleState::Accepted, "{name}");
    lifecycle.operation()
}

fn cases() -> Vec<Case> {
    use FailureKind::*;

    let in_30s = httpdate::fmt_http_date(received_at() + Duration::from_secs(30));
    vec![
        // No response at all.
        Case {
            name: "transport connect error",
            classifier: plain(),
            exchange: transport(TransportErrorKind::Connect, "connection refused"),
            want: failed(Connect, RETRYABLE),
            check: nothing_more,
        },
        Case {
            name: "transport reset",
            classifier: plain(),
            exchange: transport(TransportErrorKind::Reset, "connection reset by peer"),
            want: failed(Connect, RETRYABLE),
            check: nothing_more,
        },
        Case {
            name: "transport timeout",
            classifier: plain(),
            exchange: transport(TransportErrorKind::Timeout, "no status within 2s"),
            want: failed(Timeout, RETRYABLE),
            check: nothing_more,
        },
        Case {
            name: "transport protocol error",
            classifier: plain(),
            exchange: transport(TransportErrorKind::Protocol, "invalid HTTP version"),
            want: failed(Protocol, RETRYABLE),
            check: nothing_more,
        },
        Case {
            name: "transport failure is AccessFailure whatever the body",
            classifier: listed(),
            exchange: transport(
                TransportErrorKind::Reset,
                r#"connection reset after {"items":[]}"#,
            ),
            want: failed(Connect, RETRYABLE),
            check: nothing_more,
        },
        // Error statuses.
        Case {
            name: "500",
            classifier: plain(),
            exchange: response(500, &[], ""),
            want: failed(ServerError, RETRYABLE),
            check: |name, got| assert_eq!(failure(name, got).status, Some(500), "{name}"),
        },
        Case {
            name: "502",
            classifier: plain(),
            exchange: response(502, &[], "bad gateway"),
            want: failed(ServerError, RETRYABLE),
            check: nothing_more,
        },
        Case {
            name: "503 with Retry-After in seconds",
            classifier: plain(),
            exchange: response(503, &[("Retry-After", "7")], ""),
            want: failed(ServerError, RETRYABLE),
            check: |name, got| assert_eq!(failure(name, got).retry_after_ms, Some(7000), "{name}"),
        },
        Case {
            name: "408",
            classifier: plain(),
            exchange: response(408, &[], ""),
            want: failed(Timeout, RETRYABLE),
            check: nothing_more,
        },
        Case {
            name: "429 with Retry-After as an HTTP-date",
            classifier: plain(),
            exchange: response(429, &[("Retry-After", in_30s.as_str())], ""),
            want: failed(RateLimited, RETRYABLE),
            check: |name, got| {
                assert_eq!(failure(name, got).retry_after_ms, Some(30_000), "{name}");
            },
        },
        Case {
            name: "401",
            classifier: plain(),
            exchange: response(401, &[], ""),
            want: failed(Auth, PERMANENT),
            check: nothing_more,
        },
        Case {
            name: "403",
            classifier: plain(),
            exchange: response(403, &[], "forbidden"),
            want: failed(Auth, PERMANENT),
            check: nothing_more,
        },
        Case {
            name: "400",
            classifier: plain(),
            exchange: response(400, &[], r#"{"error":"bad query"}"#),
            want: failed(ClientError, PERMANENT),
            check: nothing_more,
        },
        Case {
            name: "422",
            classifier: plain(),
            exchange: response(422, &[], ""),
            want: failed(ClientError, PERMANENT),
            check: nothing_more,
        },
        Case {
            name: "404 declared unreachable",
            classifier: HttpClassifier::new(NotFound::Unreachable),
            exchange: response(404, &[], ""),
            want: failed(ClientError, PERMANENT),
            check: nothing_more,
        },
        Case {
            name: "404 declared a confirmed absence",
            classifier: HttpClassifier::new(NotFound::ConfirmedAbsent),
            exchange: response(404, &[], ""),
            want: EMPTY,
            check: nothing_more,
        },
        Case {
            name: "301",
            classifier: plain(),
            exchange: response(301, &[("Location", "/v2/items")], ""),
            want: failed(Protocol, PERMANENT),
            check: nothing_more,
        },
        Case {
            name: "status wins over body shape: 500 with []",
            classifier: plain(),
            exchange: response(500, &[], "[]"),
            want: failed(ServerError, RETRYABLE),
            check: nothing_more,
        },
        // Whole answers and verified absences.
        Case {
            name: "200 []",
            classifier: plain(),
            exchange: response(200, &[], "[]"),
            want: EMPTY,
            check: nothing_more,
        },
        Case {
            name: "200 null",
            classifier: plain(),
            exchange: response(200, &[], "null"),
            want: EMPTY,
            check: nothing_more,
        },
        Case {
            name: "204 with an empty body",
            classifier: plain(),
            exchange: response(204, &[], ""),
            want: EMPTY,
            check: nothing_more,
        },
        Case {
            name: "200 with an empty body",
            classifier: plain(),
            exchange: response(200, &[], ""),
            want: EMPTY,
            check: nothing_more,
        },
        Case {
            name: "200 with an empty declared collection",
            classifier: listed(),
            exchange: response(200, &[], r#"{"items":[]}"#),
            want: EMPTY,
            check: nothing_more,
        },
        Case {
            name: "200 [1,2]",
            classifier: plain(),
            exchange: response(200, &[], "[1,2]"),
            want: SUCCESS,
            check: |name, got| assert_eq!(extent(name, got).items, Some(2), "{name}"),
        },
        Case {
            name: "200 single object without a declared collection",
            classifier: plain(),
            exchange: response(200, &[], r#"{"id":1}"#),
            want: SUCCESS,
            check: |name, got| assert_eq!(extent(name, got).items, None, "{name}"),
        },
        // Declared totals.
        Case {
            name: "declared total in the body above the items returned",
            classifier: listed().total_at("/total"),
            exchange: response(200, &[], r#"{"items":[1,2,3],"total":10}"#),
            want: partial(DeclaredTotal),
            check: |name, got| {
                let truncation = truncation(name, got);
                assert_eq!(truncation.returned, Some(3), "{name}");
                assert_eq!(truncation.expected, Some(10), "{name}");
                assert!(
                    truncation.covered.contains("1-3 of 10"),
                    "{name}: {truncation:?}"
                );
                assert!(truncation.dropped.contains('7'), "{name}: {truncation:?}");
            },
        },
        Case {
            name: "declared total in X-Total-Count above the items returned",
            classifier: plain(),
            exchange: response(200, &[("X-Total-Count", "5")], "[1,2]"),
            want: partial(DeclaredTotal),
            check: |name, got| {
                let truncation = truncation(name, got);
                assert_eq!(truncation.returned, Some(2), "{name}");
                assert_eq!(truncation.expected, Some(5), "{name}");
            },
        },
        Case {
            name: "declared total equal to the items returned",
            classifier: listed().total_at("/total"),
            exchange: response(200, &[], r#"{"items":[1,2,3],"total":3}"#),
            want: SUCCESS,
            check: |name, got| {
                let extent = extent(name, got);
                assert_eq!(extent.items, Some(3), "{name}");
                assert_eq!(extent.declared_total, Some(3), "{name}");
            },
        },
        Case {
            name: "a declared total with nothing returned is a cut, not an absence",
            classifier: listed().total_at("/total"),
            exchange: response(200, &[], r#"{"items":[] ,"total":4}"#),
            want: partial(DeclaredTotal),
            check: |name, got| {
                let truncation = truncation(name, got);
                assert_eq!(truncation.returned, Some(0), "{name}");
                assert_eq!(truncation.expected, Some(4), "{name}");
            },
        },
        // Truncation markers.
        Case {
            name: "truncation marker set",
            classifier: listed().truncated_when("/truncated", json!(true)),
            exchange: response(200, &[], r#"{"items":[1],"truncated":true}"#),
            want: partial(TruncationMarker),
            check: nothing_more,
        },
        Case {
            name: "truncation marker cleared",
            classifier: listed().truncated_when("/truncated", json!(true)),
            exchange: response(200, &[], r#"{"items":[1],"truncated":false}"#),
            want: SUCCESS,
            check: nothing_more,
        },
        Case {
            name: "has_more without a cursor",
            classifier: listed().has_more_at("/has_more", "/next_cursor"),
            exchange: response(200, &[], r#"{"items":[1],"has_more":true}"#),
            want: partial(TruncationMarker),
            check: nothing_more,
        },
        Case {
            name: "has_more with a cursor",
            classifier: listed().has_more_at("/has_more", "/next_cursor"),
            exchange: response(
                200,
                &[],
                r#"{"items":[1],"has_more":true,"next_cursor":"abc"}"#,
            ),
            want: SUCCESS,
            check: nothing_more,
        },
        Case {
            name: "has_more with a null cursor",
            classifier: listed().has_more_at("/has_more", "/next_cursor"),
            exchange: response(
                200,
                &[],
                r#"{"items":[1],"has_more":true,"next_cursor":null}"#,
            ),
            want: partial(TruncationMarker),
            check: nothing_more,
        },
        Case {
            name: "has_more with an empty cursor",
            classifier: listed().has_more_at("/has_more", "/next_cursor"),
            exchange: response(
                200,
                &[],
                r#"{"items":[1],"has_more":true,"next_cursor":""}"#,
            ),
            want: partial(TruncationMarker),
            check: nothing_more,
        },
        // Bodies cut short.
        Case {
            name: "body stopped at the size cap",
            classifier: plain(),
            exchange: cut("[1,2", BodyEnd::SizeCap { limit: 4 }),
            want: partial(SizeCap),
            check: nothing_more,
        },
        Case {
            name: "stream broke mid-body",
            classifier: plain(),
            exchange: cut(
                "[1,2,",
                BodyEnd::Broken {
                    error: "connection reset".into(),
                },
            ),
            want: partial(MidStream),
            check: nothing_more,
        },
        Case {
            name: "body shorter than its Content-Length",
            classifier: plain(),
            exchange: response(200, &[("Content-Length", "100")], r#"{"id":123}"#),
            want: partial(MidStream),
            check: nothing_more,
        },
        Case {
            name: "JSON that ends early",
            classifier: listed(),
            exchange: response(200, &[], r#"{"items":[1,2"#),
            want: partial(MidStream),
            check: nothing_more,
        },
        // Bodies that cannot be read as the tool declared.
        Case {
            name: "2xx body that is not JSON",
            classifier: plain(),
            exchange: response(200, &[], "<html>oops</html>"),
            want: failed(Protocol, RETRYABLE),
            check: nothing_more,
        },
        Case {
            name: "declared collection missing",
            classifier: listed(),
            exchange: response(200, &[], r#"{"data":[]}"#),
            want: failed(Protocol, PERMANENT),
            check: nothing_more,
        },
        Case {
            name: "declared collection not a list",
            classifier: listed(),
            exchange: response(200, &[], r#"{"items":{"a":1}}"#),
            want: failed(Protocol, PERMANENT),
            check: nothing_more,
        },
        // Accepted, never completed.
        Case {
            name: "202 with Location",
            classifier: plain(),
            exchange: response(202, &[("Location", "/jobs/7")], ""),
            want: SUCCESS,
            check: |name, got| {
                let operation = accepted_operation(name, got);
                assert_eq!(operation.id, "/jobs/7", "{name}");
                assert_eq!(operation.status_url.as_deref(), Some("/jobs/7"), "{name}");
            },
        },
        Case {
            name: "202 naming its operation in the body",
            classifier: plain().operation_id_at("/job_id"),
            exchange: response(202, &[], r#"{"job_id":"j-9"}"#),
            want: SUCCESS,
            check: |name, got| assert_eq!(accepted_operation(name, got).id, "j-9", "{name}"),
        },
        // Evidence.
        Case {
            name: "X-Request-Id on a 200",
            classifier: plain(),
            exchange: response(200, &[("X-Request-Id", "r-1")], "[1]"),
            want: SUCCESS,
            check: |name, got| {
                let want = Evidence {
                    kind: EvidenceKind::RequestId,
                    value: "r-1".into(),
                };
                assert_eq!(got.evidence, Some(want), "{name}");
            },
        },
    ]
}

#[test]
fn acceptances_whose_source_names_no_operation_never_share_an_id() {
    let classifier = plain();
    let ids: BTreeSet<String> = (0..1000)
        .map(|n| {
            let got = classifier.classify(response(202, &[], ""));
            let operation = accepted_operation("nameless 202", &got);
            assert!(operation.generated, "{operation:?}");
            assert!(operation.id.starts_with("candor-"), "{operation:?}");
            assert_eq!(operation.id.len(), "candor-".len() + 32, "{operation:?}");
            assert_eq!(got.evidence, None, "a made-up id is no evidence");
            if n == 0 {
                // One the source named is not generated.
                let named = classifier.classify(response(202, &[("X-Request-Id", "r-1")], ""));
                assert!(!accepted_operation("named", &named).generated);
            }
            operation.id.clone()
        })
        .collect();
    assert_eq!(ids.len(), 1000);
}

#[test]
fn every_rule_of_the_http_table_classifies_as_documented() {
    for case in cases() {
        let name = case.name;
        let got = case.classifier.classify(case.exchange);
        assert_eq!(got.outcome.class(), case.want.class, "{name}: {got:?}");
        assert_eq!(
            got.outcome.failure_kind(),
            case.want.kind,
            "{name}: {got:?}"
        );
        let retryable = match &got.outcome {
            Outcome::AccessFailure { failure } => Some(failure.retryable),
            _ => None,
        };
        assert_eq!(
            retryable, case.want.retryable,
            "{name}: retryability of {got:?}"
        );
        assert_ne!(
            got.lifecycle.as_ref().map(Lifecycle::state),
            Some(LifecycleState::Completed),
            "{name}: a single response never proves completion",
        );
        (case.check)(name, &got);
    }
}

#[test]
fn a_failure_message_never_echoes_a_secret() {
    let cases = [
        (
            "401 body echoing the bearer token",
            response(
                401,
                &[],
                r#"{"error":"bad token","echo":"Bearer abc.def.ghi"}"#,
            ),
        ),
        (
            "500 plain-text body echoing the bearer token",
            response(500, &[], "upstream refused Bearer abc.def.ghi"),
        ),
        (
            "transport error quoting the bearer token",
            transport(
                TransportErrorKind::Reset,
                "reset while sending Authorization: Bearer abc.def.ghi",
            ),
        ),
    ];
    let leaks: Vec<String> = cases
        .into_iter()
        .map(|(name, exchange)| (name, plain().classify(exchange)))
        .filter_map(|(name, got)| {
            let message = &failure(name, &got).message;
            message
                .contains("abc.def.ghi")
                .then(|| format!("{name}: {message}"))
        })
        .collect();
    assert!(leaks.is_empty(), "secrets echoed: {leaks:#?}");
}

/// Bodies shaped like what the classifiers under test look for, mixed into arbitrary bytes.
const JSON_BODIES: &[&str] = &[
    "",
    "null",
    "[]",
    "[1,2]",
    r#"{"id":1}"#,
    r#"{"items":[]}"#,
    r#"{"items":[1,2,3],"total":10}"#,
    r#"{"items":[],"total":4}"#,
    r#"{"items":[1],"truncated":true}"#,
    r#"{"items":[1],"has_more":true,"next_cursor":""}"#,
    r#"{"items":{"a":1}}"#,
    r#"{"job_id":"j-9"}"#,
    r#"{"items":[1,2"#,
    "<html>oops</html>",
];

fn classifiers() -> impl Strategy<Value = HttpClassifier> {
    prop::sample::select(vec![
        plain(),
        HttpClassifier::new(NotFound::ConfirmedAbsent),
        listed().total_at("/total"),
        listed()
            .truncated_when("/truncated", json!(true))
            .has_more_at("/has_more", "/next_cursor"),
        plain().operation_id_at("/job_id"),
    ])
}

fn bodies() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        prop::sample::select(JSON_BODIES).prop_map(|body| body.as_bytes().to_vec()),
    ]
}

fn body_ends() -> impl Strategy<Value = BodyEnd> {
    prop_oneof![
        Just(BodyEnd::Complete),
        (0usize..128).prop_map(|limit| BodyEnd::SizeCap { limit }),
        "[ -~]{0,24}".prop_map(|error| BodyEnd::Broken { error }),
    ]
}

/// Responses with a status from `status`, any body, any `Content-Length` and any body end.
fn responses(status: impl Strategy<Value = u16>) -> impl Strategy<Value = HttpExchange> {
    (status, bodies(), prop::option::of(0usize..128), body_ends()).prop_map(
        |(status, body, content_length, body_end)| -> HttpExchange {
            let mut headers = HeaderMap::new();
            if let Some(length) = content_length {
                headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
            }
            Ok(HttpResponse {
                status: StatusCode::from_u16(status).expect("a status in 100..600"),
                headers,
                body: Bytes::from(body),
                body_end,
                received_at: received_at(),
            })
        },
    )
}

fn transport_errors() -> impl Strategy<Value = HttpExchange> {
    let kinds = vec![
        TransportErrorKind::Connect,
        TransportErrorKind::Reset,
        TransportErrorKind::Timeout,
        TransportErrorKind::Protocol,
    ];
    (prop::sample::select(kinds), "[ -~]{0,32}")
        .prop_map(|(kind, message)| -> HttpExchange { Err(TransportError { kind, message }) })
}

proptest! {
    #[test]
    fn classification_is_total_and_deterministic(
        classifier in classifiers(),
        exchange in prop_oneof![4 => responses(100u16..600), 1 => transport_errors()],
    ) {
        let mut first = classifier.classify(exchange.clone());
        let mut second = classifier.classify(exchange);
        // An operation id made up for a nameless acceptance is new each time, by design.
        let generated = |c: &Classification<Value>| {
            c.lifecycle.as_ref().is_some_and(|l| l.operation().generated)
        };
        if generated(&first) {
            prop_assert!(generated(&second));
            prop_assert_ne!(first.lifecycle.take(), second.lifecycle.take());
        }
        prop_assert_eq!(first, second);
    }

    #[test]
    fn server_errors_rate_limits_and_timeouts_are_retryable_access_failures(
        classifier in classifiers(),
        exchange in responses(prop_oneof![500u16..600, Just(429u16), Just(408u16)]),
    ) {
        let got = classifier.classify(exchange);
        prop_assert!(
            matches!(&got.outcome, Outcome::AccessFailure { failure } if failure.retryable),
            "{got:?}",
        );
    }

    #[test]
    fn a_complete_json_array_is_empty_exactly_when_it_has_no_items(
        status in (200u16..300).prop_filter("202 is an acceptance, not an answer", |s| *s != 202),
        items in prop::collection::vec(any::<i64>(), 0..20),
    ) {
        let body = serde_json::to_string(&items).expect("a list of numbers serializes");
        let got = plain().classify(response(status, &[], &body));
        // A 204 declares that there is no content, so its body is never read.
        if items.is_empty() || status == 204 {
            prop_assert_eq!(got.outcome.class(), OutcomeClass::Empty, "{:?}", got);
        } else {
            prop_assert_eq!(got.outcome.class(), OutcomeClass::Success, "{:?}", got);
            prop_assert_eq!(extent("array", &got).items, Some(items.len() as u64));
        }
    }
}
