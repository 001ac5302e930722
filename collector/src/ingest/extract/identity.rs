//! The service identity of a resource: `service.name` and an instance, bounded.

use std::borrow::Cow;

use candor_schema::names::resource;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::resource::v1::Resource;

use super::bounded;

/// What `service.name` is recorded as when the resource does not say (the OpenTelemetry default).
pub const UNKNOWN_SERVICE: &str = "unknown_service";

/// The service identity from a resource's attributes, bounded, borrowed from the request when
/// it fits.
#[derive(Clone)]
pub(crate) struct Service<'a> {
    /// `service.name`, else `unknown_service`.
    pub name: Cow<'a, str>,
    /// `service.instance.id`; else `host.name` and `process.pid` joined by `/` (either alone
    /// when the other is missing); else empty.
    pub instance: Cow<'a, str>,
}

/// The service identity of a resource.
pub(crate) fn service_of(resource: Option<&Resource>) -> Service<'_> {
    let mut service = Service {
        name: Cow::Borrowed(UNKNOWN_SERVICE),
        instance: Cow::Borrowed(""),
    };
    let mut host: Option<&str> = None;
    let mut pid: Option<i64> = None;
    for kv in resource
        .map(|r| r.attributes.as_slice())
        .unwrap_or_default()
    {
        let Some(value) = kv.value.as_ref().and_then(|v| v.value.as_ref()) else {
            continue;
        };
        match (kv.key.as_str(), value) {
            (resource::SERVICE_NAME, any_value::Value::StringValue(value)) => {
                service.name = bounded(value, 256);
            }
            (resource::SERVICE_INSTANCE_ID, any_value::Value::StringValue(value)) => {
                service.instance = bounded(value, 256);
            }
            (resource::HOST_NAME, any_value::Value::StringValue(value)) => host = Some(value),
            (resource::PROCESS_PID, any_value::Value::IntValue(value)) => pid = Some(*value),
            _ => {}
        }
    }
    if service.instance.is_empty() {
        service.instance = match (host, pid) {
            (Some(host), Some(pid)) => Cow::Owned(format!("{}/{pid}", bounded(host, 200))),
            (Some(host), None) => bounded(host, 256),
            (None, Some(pid)) => Cow::Owned(pid.to_string()),
            (None, None) => Cow::Borrowed(""),
        };
    }
    service
}
