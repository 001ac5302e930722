//! The log-based form of the adapter's events (contract rule `TELEMETRY-MOMENT`): each event a
//! call has before it ends is also emitted as a log record when it happens, so that it reaches
//! the pipeline even when the process dies before the call's span ends.
//!
//! The OpenTelemetry logs API has no global provider; the adapter keeps one of its own, which
//! [`crate::otlp::providers`] sets and a host that installs its own SDK sets with
//! [`set_logger_provider`]. An adapter built with [`crate::AdapterBuilder::logger_provider`]
//! uses that provider instead.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::SystemTime;

use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, LoggerProvider, Severity};
use opentelemetry::trace::SpanContext;
use opentelemetry::{KeyValue, Value};

use super::scope;

/// Emits one event as a log record in the call's span: its name, time and attributes.
pub(crate) type LogSink =
    Arc<dyn Fn(&'static str, SystemTime, &SpanContext, &[KeyValue]) + Send + Sync>;

/// The provider set by [`set_logger_provider`], for adapters built after it.
static GLOBAL: RwLock<Option<LogSink>> = RwLock::new(None);

/// Sets the logger provider that adapters built from now on emit their events' log-based form
/// through (contract rule `TELEMETRY-MOMENT`). [`crate::otlp::providers`] sets it; a host that
/// installs its own OpenTelemetry SDK sets its `SdkLoggerProvider` here, or the events of calls
/// that have not ended reach the pipeline only when the call's span ends.
pub fn set_logger_provider<P>(provider: &P)
where
    P: LoggerProvider,
    P::Logger: Send + Sync + 'static,
{
    let sink = sink(provider);
    *GLOBAL.write().unwrap_or_else(PoisonError::into_inner) = Some(sink);
}

/// The sink of the provider last set with [`set_logger_provider`], if any.
pub(crate) fn global() -> Option<LogSink> {
    GLOBAL
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// A sink that emits through a logger of `provider`, under the adapter's scope.
pub(crate) fn sink<P>(provider: &P) -> LogSink
where
    P: LoggerProvider,
    P::Logger: Send + Sync + 'static,
{
    let logger = provider.logger_with_scope(scope());
    Arc::new(move |name, at, span, attributes| {
        let mut record = logger.create_log_record();
        record.set_event_name(name);
        record.set_timestamp(at);
        record.set_severity_number(Severity::Warn);
        record.set_severity_text("WARN");
        record.set_trace_context(span.trace_id(), span.span_id(), Some(span.trace_flags()));
        record.add_attributes(
            attributes
                .iter()
                .map(|kv| (kv.key.clone(), any_value(&kv.value))),
        );
        logger.emit(record);
    })
}

/// The log form of an attribute value: the same type and value, so that the receiver computes
/// the same event id from either form.
fn any_value(value: &Value) -> AnyValue {
    match value {
        Value::Bool(value) => AnyValue::Boolean(*value),
        Value::I64(value) => AnyValue::Int(*value),
        Value::F64(value) => AnyValue::Double(*value),
        Value::String(value) => AnyValue::String(value.clone()),
        Value::Array(array) => AnyValue::String(array.to_string().into()),
        // `Value` is non-exhaustive; the adapter writes none of the other kinds.
        other => AnyValue::String(other.as_str().into_owned().into()),
    }
}
