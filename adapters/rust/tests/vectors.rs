//! The conformance vectors of `spec/vectors/`, run through this adapter: every case's envelope,
//! events, span and counter increment, compared with what the case expects. Every failing case
//! is reported, not just the first.

#![allow(clippy::unwrap_used)] // a panic in a test or a benchmark set-up is its failure report
#![allow(clippy::disallowed_methods)] // reads the committed vector files

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use candor_adapter::classify::http::{
    BodyEnd, HttpClassifier, HttpExchange, HttpResponse, NotFound, TransportError,
    TransportErrorKind,
};
use candor_adapter::clock::Clock;
use candor_adapter::testing::FakeClock;
use candor_adapter::{Adapter, Jitter, RetryPolicy};
use candor_schema::names::{self, attr};
use candor_schema::{Authority, Envelope, Timestamp};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use opentelemetry::KeyValue;
use opentelemetry::logs::AnyValue;
use opentelemetry::trace::{SpanKind, Status};
use opentelemetry_sdk::logs::{InMemoryLogExporter, SdkLoggerProvider};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};

/// The directory of the vector files.
fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec/vectors")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VectorFile {
    spec_version: u32,
    area: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Case {
    Call(Box<CallCase>),
    Envelope(EnvelopeCase),
}

impl Case {
    fn id(&self) -> &str {
        match self {
            Case::Call(case) => &case.id,
            Case::Envelope(case) => &case.id,
        }
    }

    fn rules(&self) -> &[String] {
        match self {
            Case::Call(case) => &case.rules,
            Case::Envelope(case) => &case.rules,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallCase {
    id: String,
    rules: Vec<String>,
    #[allow(dead_code)] // read by people
    description: String,
    tool: String,
    target: String,
    classifier: Declarations,
    #[serde(default)]
    policy: PolicyDecl,
    #[serde(default = "ten_seconds")]
    attempt_timeout_ms: u64,
    #[serde(default = "thirty_seconds")]
    deadline_ms: u64,
    jitter: f64,
    #[serde(default)]
    authority: Option<AuthorityDecl>,
    #[serde(default)]
    actor: Option<String>,
    #[serde(default)]
    trace_every_call: bool,
    #[serde(default = "get")]
    method: String,
    #[serde(default)]
    idempotent: Option<bool>,
    #[serde(default)]
    idempotency_key: bool,
    start: String,
    attempts: Vec<Step>,
    expect: CallExpect,
}

fn get() -> String {
    "GET".into()
}

const fn ten_seconds() -> u64 {
    10_000
}

const fn thirty_seconds() -> u64 {
    30_000
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PolicyDecl {
    max_attempts: Option<u32>,
    initial_backoff_ms: Option<u64>,
    max_backoff_ms: Option<u64>,
    max_elapsed_ms: Option<u64>,
    retry_after_cap_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthorityDecl {
    principal: Option<String>,
    scope: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Declarations {
    not_found: String,
    items_at: Option<String>,
    total_at: Option<String>,
    /// Absent: the default header; `null`: none.
    #[serde(default, deserialize_with = "present")]
    total_header: Option<Option<String>>,
    #[serde(default)]
    truncated_when: Vec<(String, Value)>,
    has_more_at: Option<(String, String)>,
    operation_id_at: Option<String>,
    request_id_header: Option<String>,
    scope: Option<String>,
}

/// A field that is present, even as `null`.
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

#[derive(Deserialize, Clone)]
#[serde(untagged, deny_unknown_fields)]
enum Step {
    Response {
        after_ms: u64,
        response: ResponseDecl,
    },
    Transport {
        after_ms: u64,
        transport_error: TransportDecl,
    },
    Hang {
        #[allow(dead_code)] // its presence is the step
        hang: bool,
    },
    Stall {
        stall: StallDecl,
    },
}

/// A response whose status, headers and these body bytes arrive, then nothing more.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct StallDecl {
    status: u16,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default)]
    body: String,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct ResponseDecl {
    status: u16,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default)]
    body: String,
    #[serde(default)]
    body_end: BodyEndDecl,
}

#[derive(Deserialize, Clone, Default)]
#[serde(rename_all = "snake_case")]
enum BodyEndDecl {
    #[default]
    Complete,
    SizeCap(usize),
    Broken(String),
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct TransportDecl {
    kind: String,
    message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallExpect {
    envelope: Value,
    events: Vec<Value>,
    span: Option<Value>,
    counter: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvelopeCase {
    id: String,
    rules: Vec<String>,
    #[allow(dead_code)] // read by people
    description: String,
    json: Value,
    expect: EnvelopeExpect,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvelopeExpect {
    valid: bool,
    error: Option<String>,
}

/// Every case of every vector file, with the file it came from.
fn load() -> Vec<(String, Case)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(vectors_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no vector files in {:?}", vectors_dir());
    let mut cases = Vec::new();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let file: VectorFile =
            serde_json::from_str(&text).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_eq!(file.spec_version, 1, "{name}");
        assert_eq!(
            format!("{}.json", file.area),
            name,
            "a file is named by its area"
        );
        cases.extend(file.cases.into_iter().map(|case| (name.clone(), case)));
    }
    cases
}

#[test]
fn every_vector_passes() {
    let cases = load();
    let mut failures = Vec::new();
    for (file, case) in &cases {
        let errors = match case {
            Case::Call(case) => run_call(case),
            Case::Envelope(case) => run_envelope(case),
        };
        if !errors.is_empty() {
            failures.push(format!("{file} {}:\n  {}", case.id(), errors.join("\n  ")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} vector(s) failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn case_ids_are_unique_and_every_case_names_a_rule() {
    let mut seen = BTreeSet::new();
    for (file, case) in load() {
        assert!(
            seen.insert(case.id().to_owned()),
            "{file}: {} twice",
            case.id()
        );
        assert!(
            !case.rules().is_empty(),
            "{file}: {} names no rule",
            case.id()
        );
    }
}

/// The rule ids of `spec/v1/contract.md`: each written as `**[ID]**` where the rule starts.
fn contract_rules() -> BTreeSet<String> {
    let path = vectors_dir().join("../v1/contract.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path:?}: {err}"));
    text.split("**[")
        .skip(1)
        .filter_map(|rest| rest.split_once("]**").map(|(id, _)| id.to_owned()))
        .filter(|id| {
            !id.is_empty()
                && id
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-')
        })
        .collect()
}

#[test]
fn every_rule_of_the_contract_has_a_vector_and_every_vector_names_a_rule_of_it() {
    let rules = contract_rules();
    assert!(
        rules.len() > 20,
        "only {} rule ids in the contract",
        rules.len()
    );
    let mut covered = BTreeSet::new();
    for (file, case) in load() {
        for rule in case.rules() {
            assert!(
                rules.contains(rule),
                "{file}: {} names {rule}, which the contract does not define",
                case.id()
            );
            covered.insert(rule.clone());
        }
    }
    let uncovered: Vec<&String> = rules.difference(&covered).collect();
    assert!(
        uncovered.is_empty(),
        "rules without a vector: {uncovered:?}"
    );
}

fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn classifier(declared: &Declarations) -> Result<HttpClassifier, String> {
    let not_found = match declared.not_found.as_str() {
        "confirmed_absent" => NotFound::ConfirmedAbsent,
        "unreachable" => NotFound::Unreachable,
        other => return Err(format!("unknown not_found {other:?}")),
    };
    let header = |name: &str| HeaderName::from_bytes(name.as_bytes()).map_err(|e| e.to_string());
    let mut classifier = HttpClassifier::new(not_found);
    if let Some(pointer) = &declared.items_at {
        classifier = classifier.items_at(pointer);
    }
    if let Some(pointer) = &declared.total_at {
        classifier = classifier.total_at(pointer);
    }
    if let Some(name) = &declared.total_header {
        classifier = classifier.total_header(name.as_deref().map(header).transpose()?);
    }
    for (pointer, value) in &declared.truncated_when {
        classifier = classifier.truncated_when(pointer, value.clone());
    }
    if let Some((flag, cursor)) = &declared.has_more_at {
        classifier = classifier.has_more_at(flag, cursor);
    }
    if let Some(pointer) = &declared.operation_id_at {
        classifier = classifier.operation_id_at(pointer);
    }
    if let Some(name) = &declared.request_id_header {
        classifier = classifier.request_id_header(header(name)?);
    }
    if let Some(scope) = &declared.scope {
        classifier = classifier.scope(scope);
    }
    Ok(classifier)
}

fn policy(declared: &PolicyDecl) -> Result<RetryPolicy, String> {
    let policy = RetryPolicy::default()
        .with_max_attempts(declared.max_attempts.unwrap_or(3))
        .and_then(|policy| {
            policy.with_backoff(
                millis(declared.initial_backoff_ms.unwrap_or(100)),
                millis(declared.max_backoff_ms.unwrap_or(5_000)),
            )
        })
        .map_err(|err| err.to_string())?;
    Ok(policy
        .with_max_elapsed(millis(declared.max_elapsed_ms.unwrap_or(30_000)))
        .with_retry_after_cap(millis(declared.retry_after_cap_ms.unwrap_or(30_000))))
}

fn response(declared: &ResponseDecl, received_at: SystemTime) -> Result<HttpResponse, String> {
    let mut headers = HeaderMap::new();
    for (name, value) in &declared.headers {
        headers.append(
            HeaderName::from_bytes(name.as_bytes()).map_err(|e| e.to_string())?,
            HeaderValue::from_str(value).map_err(|e| e.to_string())?,
        );
    }
    Ok(HttpResponse {
        status: StatusCode::from_u16(declared.status).map_err(|e| e.to_string())?,
        headers,
        body: Bytes::from(declared.body.clone()),
        body_end: match &declared.body_end {
            BodyEndDecl::Complete => BodyEnd::Complete,
            BodyEndDecl::SizeCap(limit) => BodyEnd::SizeCap { limit: *limit },
            BodyEndDecl::Broken(error) => BodyEnd::Broken {
                error: error.clone(),
            },
        },
        received_at,
    })
}

fn transport(declared: &TransportDecl) -> Result<TransportError, String> {
    let kind = match declared.kind.as_str() {
        "connect" => TransportErrorKind::Connect,
        "reset" => TransportErrorKind::Reset,
        "timeout" => TransportErrorKind::Timeout,
        "protocol" => TransportErrorKind::Protocol,
        other => return Err(format!("unknown transport error kind {other:?}")),
    };
    Ok(TransportError {
        kind,
        message: declared.message.clone(),
    })
}

/// What the scripted tool saw: steps it could not play, and steps left over.
#[derive(Default)]
struct Script {
    steps: VecDeque<Step>,
    errors: Vec<String>,
}

fn run_call(case: &CallCase) -> Vec<String> {
    let setup = || -> Result<_, String> {
        let start = humantime::parse_rfc3339(&case.start).map_err(|e| e.to_string())?;
        Ok((start, classifier(&case.classifier)?, policy(&case.policy)?))
    };
    let (start, classifier, policy) = match setup() {
        Ok(parts) => parts,
        Err(err) => return vec![format!("the case cannot be set up: {err}")],
    };
    let spans = InMemorySpanExporter::default();
    let tracer_provider = SdkTracerProvider::builder()
        .with_simple_exporter(spans.clone())
        .build();
    let metrics = InMemoryMetricExporter::default();
    let meter_provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(metrics.clone()).build())
        .build();
    let logs = InMemoryLogExporter::default();
    let logger_provider = SdkLoggerProvider::builder()
        .with_simple_exporter(logs.clone())
        .build();
    let clock = FakeClock::new(start);
    let mut builder = Adapter::builder(&case.tool, &case.target)
        .classifier(classifier)
        .clock(clock.clone())
        .retry(policy)
        .attempt_timeout(millis(case.attempt_timeout_ms))
        .deadline(millis(case.deadline_ms))
        .jitter(Jitter::fixed(case.jitter))
        .trace_every_call(case.trace_every_call)
        .tracer_provider(&tracer_provider)
        .meter_provider(&meter_provider)
        .logger_provider(&logger_provider);
    if let Some(authority) = &case.authority {
        builder = builder.authority(Authority {
            principal: authority.principal.as_deref().map(Arc::from),
            scope: authority.scope.as_deref().map(Arc::from),
        });
    }
    if let Some(actor) = &case.actor {
        builder = builder.actor(actor);
    }
    match http::Method::from_bytes(case.method.as_bytes()) {
        Ok(method) => builder = builder.method(method),
        Err(err) => return vec![format!("the case's method {:?}: {err}", case.method)],
    }
    if let Some(idempotent) = case.idempotent {
        builder = builder.idempotent(idempotent);
    }
    builder = builder.idempotency_key(case.idempotency_key);
    let adapter = match builder.build() {
        Ok(adapter) => adapter,
        Err(err) => return vec![format!("the adapter refused the case's settings: {err}")],
    };
    let script = Arc::new(Mutex::new(Script {
        steps: case.attempts.iter().cloned().collect(),
        errors: Vec::new(),
    }));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let envelope = runtime.block_on(adapter.call(|context| {
        let script = script.clone();
        let clock = clock.clone();
        async move {
            let step = script.lock().unwrap().steps.pop_front();
            let played: Result<HttpExchange, String> = match step {
                None => Err(format!(
                    "the adapter made attempt {} but the case lists fewer",
                    context.number
                )),
                Some(Step::Hang { .. }) => std::future::pending().await,
                Some(Step::Stall { stall }) => {
                    // The tool's client reads the body against the attempt's time and reports
                    // what arrived when it runs out.
                    clock.advance(context.timeout);
                    let declared = ResponseDecl {
                        status: stall.status,
                        headers: stall.headers,
                        body: stall.body,
                        body_end: BodyEndDecl::Complete,
                    };
                    response(&declared, clock.wall()).map(|mut response| {
                        response.body_end = BodyEnd::TimedOut {
                            after: context.timeout,
                        };
                        Ok(response)
                    })
                }
                Some(Step::Response {
                    after_ms,
                    response: declared,
                }) => {
                    clock.advance(millis(after_ms));
                    response(&declared, clock.wall()).map(Ok)
                }
                Some(Step::Transport {
                    after_ms,
                    transport_error,
                }) => {
                    clock.advance(millis(after_ms));
                    transport(&transport_error).map(Err)
                }
            };
            played.unwrap_or_else(|error| {
                script.lock().unwrap().errors.push(error.clone());
                Err(TransportError {
                    kind: TransportErrorKind::Protocol,
                    message: error,
                })
            })
        }
    }));
    let mut errors = std::mem::take(&mut script.lock().unwrap().errors);
    let left = script.lock().unwrap().steps.len();
    if left > 0 {
        errors.push(format!("{left} listed attempt(s) were never made"));
    }
    GENERATED_IDS.with_borrow_mut(Vec::clear);
    compare_envelope(&envelope, &case.expect.envelope, &mut errors);
    compare_telemetry(case, &spans, &metrics, &meter_provider, &mut errors);
    compare_logs(case, &spans, &logs, &mut errors);
    let generated: BTreeSet<String> = GENERATED_IDS
        .with_borrow_mut(std::mem::take)
        .into_iter()
        .collect();
    if generated.len() > 1 {
        errors.push(format!(
            "the ids matched by $generated_id differ within the case: {generated:?}"
        ));
    }
    errors
}

thread_local! {
    /// The texts `$generated_id` matched in the case being compared (one case at a time on a
    /// thread), which must all be one id.
    static GENERATED_IDS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether `text` is an id an adapter made (rule `HTTP-202`): `candor-` and 32 lowercase
/// hexadecimal digits.
fn is_generated_id(text: &str) -> bool {
    text.strip_prefix("candor-").is_some_and(|hex| {
        hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

fn compare_envelope(envelope: &Envelope<Value>, expected: &Value, errors: &mut Vec<String>) {
    let mut actual = serde_json::to_value(envelope).unwrap();
    let adapter = actual
        .get_mut("provenance")
        .and_then(Value::as_object_mut)
        .and_then(|provenance| provenance.remove("adapter"));
    match adapter {
        Some(Value::String(name)) if !name.is_empty() => {}
        other => errors.push(format!(
            "provenance.adapter must name the adapter: {other:?}"
        )),
    }
    compare(expected, &actual, "envelope", errors);
}

/// Checks and removes a `tool.outcome` event's provenance attributes, which the cases do not
/// list (spec/vectors/README.md): they equal the expected envelope's provenance.
fn check_provenance(attributes: &mut Value, provenance: &Value, errors: &mut Vec<String>) {
    let Some(attributes) = attributes.as_object_mut() else {
        return;
    };
    let mut take = |name: &str| attributes.remove(name);
    let source_system = take(attr::PROVENANCE_SOURCE_SYSTEM);
    if source_system.as_ref() != provenance.get("source_system") {
        errors.push(format!(
            "{}: {source_system:?}, the envelope's source_system is {:?}",
            attr::PROVENANCE_SOURCE_SYSTEM,
            provenance.get("source_system")
        ));
    }
    let actor = take(attr::PROVENANCE_ACTOR);
    if actor.as_ref() != provenance.get("actor") {
        errors.push(format!(
            "{}: {actor:?}, the envelope's actor is {:?}",
            attr::PROVENANCE_ACTOR,
            provenance.get("actor")
        ));
    }
    match take(attr::PROVENANCE_ADAPTER) {
        Some(Value::String(name)) if !name.is_empty() => {}
        other => errors.push(format!(
            "{} must name the adapter: {other:?}",
            attr::PROVENANCE_ADAPTER
        )),
    }
}

/// The log records the call emitted (rule `TELEMETRY-MOMENT`): exactly the expected events
/// that happen before the call ends (`tool.outcome` with the action `retry`) and every
/// `tool.lifecycle` event, in order, each in the call's span.
fn compare_logs(
    case: &CallCase,
    spans: &InMemorySpanExporter,
    logs: &InMemoryLogExporter,
    errors: &mut Vec<String>,
) {
    let expected: Vec<Value> = case
        .expect
        .events
        .iter()
        .filter(|event| {
            event["name"] == names::LIFECYCLE_EVENT
                || event["attributes"][attr::RETRY_ACTION] == "retry"
        })
        .cloned()
        .collect();
    let span = spans
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .find(|span| span.name == names::TOOL_CALL_SPAN)
        .map(|span| span.span_context);
    let provenance = &case.expect.envelope["provenance"];
    let mut actual = Vec::new();
    for log in logs.get_emitted_logs().unwrap() {
        let record = &log.record;
        let ids = record
            .trace_context()
            .map(|context| (context.trace_id, context.span_id));
        if ids != span.as_ref().map(|span| (span.trace_id(), span.span_id())) {
            errors.push(format!(
                "a log record is not in the call's span: {ids:?}, the span {span:?}"
            ));
        }
        let mut attributes: Map<String, Value> = record
            .attributes_iter()
            .map(|(key, value)| {
                let value = match value {
                    AnyValue::String(text) => Value::String(text.to_string()),
                    AnyValue::Int(number) => json!(number),
                    AnyValue::Boolean(flag) => json!(flag),
                    AnyValue::Double(number) => json!(number),
                    other => json!(format!("{other:?}")),
                };
                (key.to_string(), value)
            })
            .collect();
        let name = record.event_name().unwrap_or_default();
        let mut attributes_value = Value::Object(std::mem::take(&mut attributes));
        if name == names::OUTCOME_EVENT {
            check_provenance(&mut attributes_value, provenance, errors);
        }
        actual.push(json!({
            "name": name,
            "time": record.timestamp().map(|at| Timestamp::new(at).to_string()),
            "attributes": attributes_value,
        }));
    }
    compare(
        &Value::Array(expected),
        &Value::Array(actual),
        "log records",
        errors,
    );
}

fn compare_telemetry(
    case: &CallCase,
    spans: &InMemorySpanExporter,
    metrics: &InMemoryMetricExporter,
    meter_provider: &SdkMeterProvider,
    errors: &mut Vec<String>,
) {
    let finished = spans.get_finished_spans().unwrap();
    let calls: Vec<&SpanData> = finished
        .iter()
        .filter(|span| span.name == names::TOOL_CALL_SPAN)
        .collect();
    if finished.len() != calls.len() {
        errors.push(format!(
            "{} span(s) other than {}",
            finished.len() - calls.len(),
            names::TOOL_CALL_SPAN
        ));
    }
    let provenance = &case.expect.envelope["provenance"];
    let events: Vec<Value> = calls
        .iter()
        .flat_map(|span| span.events.iter())
        .map(|event| {
            let mut attributes = attributes(&event.attributes);
            if event.name == names::OUTCOME_EVENT {
                check_provenance(&mut attributes, provenance, errors);
            }
            json!({
                "name": event.name,
                "time": Timestamp::new(event.timestamp).to_string(),
                "attributes": attributes,
            })
        })
        .collect();
    compare(
        &Value::Array(case.expect.events.clone()),
        &Value::Array(events),
        "events",
        errors,
    );
    let span = match calls.as_slice() {
        [] => Value::Null,
        [span] => span_json(span),
        more => {
            errors.push(format!("{} tool.call spans for one call", more.len()));
            Value::Null
        }
    };
    let expected_span = case.expect.span.clone().unwrap_or(Value::Null);
    compare(&expected_span, &span, "span", errors);
    compare(
        &case.expect.counter,
        &counter(metrics, meter_provider, errors),
        "counter",
        errors,
    );
}

fn span_json(span: &SpanData) -> Value {
    let kind = match span.span_kind {
        SpanKind::Client => "client",
        SpanKind::Server => "server",
        SpanKind::Producer => "producer",
        SpanKind::Consumer => "consumer",
        SpanKind::Internal => "internal",
    };
    let status = match &span.status {
        Status::Unset => json!({ "code": "unset" }),
        Status::Ok => json!({ "code": "ok" }),
        Status::Error { description } => json!({ "code": "error", "description": description }),
    };
    json!({
        "name": span.name,
        "kind": kind,
        "start": Timestamp::new(span.start_time).to_string(),
        "end": Timestamp::new(span.end_time).to_string(),
        "status": status,
        "attributes": attributes(&span.attributes),
    })
}

/// The call's one increment of `tool.outcomes`: the one attribute set whose count is not 0.
fn counter(
    metrics: &InMemoryMetricExporter,
    meter_provider: &SdkMeterProvider,
    errors: &mut Vec<String>,
) -> Value {
    meter_provider.force_flush().unwrap();
    let exported = metrics.get_finished_metrics().unwrap();
    let mut counted = Vec::new();
    for scope in exported.last().iter().flat_map(|m| m.scope_metrics()) {
        for metric in scope.metrics() {
            if metric.name() != names::OUTCOMES_COUNTER {
                continue;
            }
            let unit = metric.unit();
            let AggregatedMetrics::U64(MetricData::Sum(sum)) = metric.data() else {
                errors.push(format!("{} is not a u64 sum", names::OUTCOMES_COUNTER));
                continue;
            };
            if !sum.is_monotonic() {
                errors.push(format!("{} is not monotonic", names::OUTCOMES_COUNTER));
            }
            for point in sum.data_points().filter(|point| point.value() != 0) {
                let kvs: Vec<KeyValue> = point.attributes().cloned().collect();
                counted.push(json!({
                    "name": metric.name(),
                    "unit": unit,
                    "attributes": attributes(&kvs),
                    "value": point.value(),
                }));
            }
        }
    }
    match counted.len() {
        1 => counted.remove(0),
        0 => {
            errors.push(format!("nothing counted on {}", names::OUTCOMES_COUNTER));
            Value::Null
        }
        n => {
            errors.push(format!("{n} attribute sets counted: {counted:?}"));
            Value::Null
        }
    }
}

fn attributes(kvs: &[KeyValue]) -> Value {
    let map: BTreeMap<String, Value> = kvs
        .iter()
        .map(|kv| {
            let value = match &kv.value {
                opentelemetry::Value::String(text) => Value::String(text.to_string()),
                opentelemetry::Value::I64(number) => json!(number),
                opentelemetry::Value::Bool(flag) => json!(flag),
                opentelemetry::Value::F64(number) => json!(number),
                other => json!(other.to_string()),
            };
            (kv.key.to_string(), value)
        })
        .collect();
    Value::Object(map.into_iter().collect::<Map<String, Value>>())
}

fn run_envelope(case: &EnvelopeCase) -> Vec<String> {
    let mut errors = Vec::new();
    let read = serde_json::from_value::<Envelope<Value>>(case.json.clone());
    match (read, case.expect.valid) {
        (Ok(envelope), true) => {
            let written = serde_json::to_value(&envelope).unwrap();
            compare(&case.json, &written, "written again", &mut errors);
        }
        (Ok(_), false) => errors.push("read an envelope the contract refuses".into()),
        (Err(err), true) => errors.push(format!("refused a valid envelope: {err}")),
        (Err(err), false) => {
            let message = err.to_string();
            let rule = if message.starts_with("unsupported envelope schema_version") {
                "version"
            } else if message.starts_with("next_actions") {
                "next_actions"
            } else {
                "schema"
            };
            if case.expect.error.as_deref() != Some(rule) {
                errors.push(format!(
                    "refused as {rule} ({message}), expected {:?}",
                    case.expect.error
                ));
            }
        }
    }
    errors
}

/// Whether `value` is a text matcher: a non-empty object whose keys all start with `$`.
fn is_matcher(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|map| !map.is_empty() && map.keys().all(|key| key.starts_with('$')))
}

fn compare(expected: &Value, actual: &Value, path: &str, errors: &mut Vec<String>) {
    if is_matcher(expected) {
        match_text(expected, actual, path, errors);
        return;
    }
    match (expected, actual) {
        (Value::Object(want), Value::Object(got)) => {
            let keys: BTreeSet<&String> = want.keys().chain(got.keys()).collect();
            for key in keys {
                let at = format!("{path}.{key}");
                match (want.get(key), got.get(key)) {
                    (Some(want), Some(got)) => compare(want, got, &at, errors),
                    (Some(want), None) => errors.push(format!("{at}: missing, expected {want}")),
                    (None, Some(got)) => errors.push(format!("{at}: unexpected {got}")),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(want), Value::Array(got)) if want.len() == got.len() => {
            for (index, (want, got)) in want.iter().zip(got).enumerate() {
                compare(want, got, &format!("{path}[{index}]"), errors);
            }
        }
        _ if expected == actual => {}
        _ => errors.push(format!("{path}: expected {expected}, got {actual}")),
    }
}

fn match_text(matcher: &Value, actual: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(text) = actual.as_str() else {
        errors.push(format!("{path}: expected a text, got {actual}"));
        return;
    };
    let words = |key: &str| -> Vec<&str> {
        matcher[key]
            .as_array()
            .map(|list| list.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    };
    for key in matcher.as_object().into_iter().flat_map(|map| map.keys()) {
        if ![
            "$contains",
            "$excludes",
            "$max_chars",
            "$any",
            "$generated_id",
        ]
        .contains(&key.as_str())
        {
            errors.push(format!("{path}: unknown matcher {key}"));
        }
    }
    for word in words("$contains") {
        if !text.contains(word) {
            errors.push(format!("{path}: {text:?} does not contain {word:?}"));
        }
    }
    for word in words("$excludes") {
        if text.contains(word) {
            errors.push(format!("{path}: {text:?} contains {word:?}"));
        }
    }
    if matcher["$generated_id"] == Value::Bool(true) {
        if !is_generated_id(text) {
            errors.push(format!(
                "{path}: {text:?} is not an id the adapter made (candor- and 32 hex digits)"
            ));
        }
        GENERATED_IDS.with_borrow_mut(|ids| ids.push(text.to_owned()));
    }
    if let Some(max) = matcher["$max_chars"].as_u64()
        && text.chars().count() as u64 > max
    {
        errors.push(format!(
            "{path}: {} characters, at most {max} expected",
            text.chars().count()
        ));
    }
}
