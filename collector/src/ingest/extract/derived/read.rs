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

/// How a span was sampled, as its trace state says: OpenTelemetry's consistent probability
/// sampling writes the rejection threshold `th` (1 to 14 lower-case hex digits, the top of a
/// 56-bit number, trailing zeros left out) in the `ot` entry, and a span kept under threshold
/// `T` was kept with probability `(2^56 - T) / 2^56`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum SpanSampling {
    /// The threshold is known: the span stands for `adjusted_count` spans (the inverse of its
    /// probability; 1 for `th:0`, everything kept).
    Known {
        /// How many spans this one stands for.
        adjusted_count: f64,
    },
    /// No threshold, or one that is not well formed: how many spans like it were left out is
    /// unknown.
    Unknown,
}

/// 2^56, the range of consistent sampling's randomness and thresholds.
const SAMPLING_RANGE: f64 = 72_057_594_037_927_936.0;

/// What `trace_state` (a W3C `tracestate` header's value) says of the span's sampling.
pub(super) fn sampling_of(trace_state: &str) -> SpanSampling {
    let threshold = trace_state
        .split(',')
        .filter_map(|member| member.trim().split_once('='))
        .find(|(key, _)| *key == "ot")
        .and_then(|(_, value)| {
            value
                .split(';')
                .filter_map(|field| field.split_once(':'))
                .find(|(key, _)| *key == "th")
                .map(|(_, th)| th)
        });
    let Some(th) = threshold else {
        return SpanSampling::Unknown;
    };
    let well_formed = (1..=14).contains(&th.len())
        && th
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !well_formed {
        return SpanSampling::Unknown;
    }
    // The digits are the top of a 14-digit number: `th:8` is 0x80000000000000.
    let Ok(top) = u64::from_str_radix(th, 16) else {
        return SpanSampling::Unknown;
    };
    let threshold = top << (4 * (14 - th.len()));
    // A threshold is below 2^56 (14 hex digits), so the probability is above 0.
    let kept = SAMPLING_RANGE - threshold as f64;
    SpanSampling::Known {
        adjusted_count: SAMPLING_RANGE / kept,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sampling_threshold_gives_the_adjusted_count_of_its_span() {
        let count = |state: &str| match sampling_of(state) {
            SpanSampling::Known { adjusted_count } => Some(adjusted_count),
            SpanSampling::Unknown => None,
        };
        // Everything kept, half, a quarter, one in 2^12.
        assert_eq!(count("ot=th:0"), Some(1.0));
        assert_eq!(count("ot=th:8"), Some(2.0));
        assert_eq!(count("ot=th:c"), Some(4.0));
        assert_eq!(count("ot=th:fff"), Some(4096.0));
        // Among other entries and fields, with the spaces the header allows.
        assert_eq!(
            count("vendor=x, ot=rv:0123456789abcd;th:8 ,other=y"),
            Some(2.0)
        );
        // One in three: th = 2^56 * 2 / 3, written to 14 digits.
        let third = count("ot=th:aaaaaaaaaaaaab").unwrap();
        assert!((third - 3.0).abs() < 1e-9, "{third}");
    }

    #[test]
    fn a_span_without_a_well_formed_threshold_has_unknown_sampling() {
        for state in [
            "",
            "vendor=x",
            "ot=rv:0123456789abcd",
            "ot=th:",
            "ot=th:G",
            "ot=th:8A",
            "ot=th:123456789abcdef",
            "xot=th:8",
        ] {
            assert_eq!(sampling_of(state), SpanSampling::Unknown, "{state:?}");
        }
    }
}
