//! What a recognised span says: its standard attributes, its error, its `exception` event, and
//! the attribute values the conventions read, each read without a copy.

use candor_schema::names::{attr, semconv};
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::{Span, status};

use super::super::failure_type::SpanError;
use super::super::outcome::status_message;
use super::conventions::Convention;

/// The standard attributes of a recognised span, read in one pass.
#[derive(Default)]
pub(super) struct Facts<'a> {
    pub tool_name: Option<&'a str>,
    pub error_type: Option<&'a str>,
    pub http_method: Option<&'a str>,
    pub http_status: Option<i64>,
    pub rpc_status: Option<i64>,
    pub resend_count: Option<i64>,
    pub url: Option<&'a str>,
    pub url_scheme: Option<&'a str>,
    pub url_template: Option<&'a str>,
    pub server_address: Option<&'a str>,
    pub server_port: Option<i64>,
    pub network_transport: Option<&'a str>,
}

impl<'a> Facts<'a> {
    /// Reads `span`, whose tool `convention` names.
    pub fn read(span: &'a Span, convention: &Convention) -> Self {
        let mut facts = Facts::default();
        let mut tool_rank = usize::MAX;
        for kv in &span.attributes {
            let key = kv.key.as_str();
            match key {
                attr::ERROR_TYPE => facts.error_type = string(kv),
                semconv::HTTP_REQUEST_METHOD => facts.http_method = string(kv),
                semconv::HTTP_METHOD => facts.http_method = facts.http_method.or(string(kv)),
                attr::HTTP_STATUS_CODE => facts.http_status = integer(kv),
                semconv::HTTP_STATUS_CODE_OLD => {
                    facts.http_status = facts.http_status.or(integer(kv));
                }
                semconv::RPC_RESPONSE_STATUS_CODE => facts.rpc_status = integer(kv),
                semconv::HTTP_REQUEST_RESEND_COUNT => facts.resend_count = integer(kv),
                semconv::URL_FULL => facts.url = string(kv),
                semconv::HTTP_URL => facts.url = facts.url.or(string(kv)),
                semconv::URL_SCHEME => facts.url_scheme = string(kv),
                semconv::URL_TEMPLATE => facts.url_template = string(kv),
                semconv::SERVER_ADDRESS => facts.server_address = string(kv),
                semconv::SERVER_PORT => facts.server_port = integer(kv),
                semconv::NETWORK_TRANSPORT => facts.network_transport = string(kv),
                _ => {
                    if let Some(rank) = convention.tool_name.iter().position(|k| k == key)
                        && rank < tool_rank
                        && let Some(name) = string(kv).filter(|name| !name.is_empty())
                    {
                        tool_rank = rank;
                        facts.tool_name = Some(name);
                    }
                }
            }
        }
        facts
    }

    /// The attempt this span was: 1 plus how often the request was sent again.
    pub fn attempt(&self) -> u32 {
        self.resend_count
            .and_then(|n| u32::try_from(n).ok())
            .map_or(1, |n| n.saturating_add(1))
    }
}

/// What a span says of its error, read by its convention: its status and `exception` event,
/// the attributes [`Facts::read`] read, and the convention's own signals of a failure or a
/// cancellation.
pub(super) fn span_error<'a>(
    span: &'a Span,
    convention: &'a Convention,
    facts: &Facts<'a>,
) -> SpanError<'a> {
    let exception = exception_of(span);
    let status_error = span
        .status
        .as_ref()
        .is_some_and(|s| s.code == status::StatusCode::Error as i32);
    let signalled = convention
        .failure
        .iter()
        .any(|test| test.holds(&span.attributes));
    let marked_failed = status_error
        || signalled
        || (convention.exception_fails && exception.exception_type.is_some());
    let cancelled_by = convention
        .cancel
        .iter()
        .find(|test| test.holds(&span.attributes))
        .map(|test| test.key.as_str())
        .or_else(|| {
            if !(marked_failed || facts.error_type.is_some()) {
                return None;
            }
            let identifier = facts.error_type.or(exception.exception_type);
            identifier
                .filter(|identifier| convention.cancels_by_type(identifier))
                .or_else(|| {
                    [status_message(span), exception.message]
                        .into_iter()
                        .flatten()
                        .find_map(|message| convention.cancels_by_message(message))
                })
        });
    SpanError {
        error_type: facts.error_type,
        marked_failed,
        exception_type: exception.exception_type,
        http_status: facts.http_status,
        rpc_status: facts.rpc_status,
        cancelled_by,
    }
}

/// What a span's first `exception` event says.
#[derive(Default)]
pub(super) struct Exception<'a> {
    pub exception_type: Option<&'a str>,
    pub message: Option<&'a str>,
}

pub(super) fn exception_of(span: &Span) -> Exception<'_> {
    let Some(event) = span
        .events
        .iter()
        .find(|event| event.name == semconv::EXCEPTION_EVENT)
    else {
        return Exception::default();
    };
    let attribute = |key: &str| {
        event
            .attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(string)
            .filter(|text| !text.is_empty())
    };
    Exception {
        exception_type: attribute(semconv::EXCEPTION_TYPE),
        message: attribute(semconv::EXCEPTION_MESSAGE),
    }
}

pub(super) fn string(kv: &KeyValue) -> Option<&str> {
    match kv.value.as_ref()?.value.as_ref()? {
        any_value::Value::StringValue(text) => Some(text),
        _ => None,
    }
}

/// An integer attribute, also when sent as a decimal string (some emitters do).
fn integer(kv: &KeyValue) -> Option<i64> {
    integer_value(kv.value.as_ref()?.value.as_ref()?)
}

/// An integer value, also when sent as a decimal string.
pub(super) fn integer_value(value: &any_value::Value) -> Option<i64> {
    match value {
        any_value::Value::IntValue(n) => Some(*n),
        any_value::Value::StringValue(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// The first of `keys` that `attributes` hold as a non-empty string, or as an array whose first
/// value is one (how HTTP instrumentations record a captured header).
pub(super) fn first_text<'a>(attributes: &'a [KeyValue], keys: &[String]) -> Option<&'a str> {
    keys.iter().find_map(|key| {
        let value = attributes
            .iter()
            .find(|kv| kv.key == *key)?
            .value
            .as_ref()?;
        let text = match value.value.as_ref()? {
            any_value::Value::StringValue(text) => text.as_str(),
            any_value::Value::ArrayValue(array) => match array.values.first()?.value.as_ref()? {
                any_value::Value::StringValue(text) => text.as_str(),
                _ => return None,
            },
            _ => return None,
        };
        (!text.is_empty()).then_some(text)
    })
}

/// The first of `keys` that `attributes` hold as a non-empty string.
pub(super) fn first_string<'a>(attributes: &'a [KeyValue], keys: &[String]) -> Option<&'a str> {
    keys.iter().find_map(|key| {
        attributes
            .iter()
            .find(|kv| kv.key == *key)
            .and_then(string)
            .filter(|value| !value.is_empty())
    })
}
