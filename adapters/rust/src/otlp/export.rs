//! The SDK-facing span, log and metric exporters, and the OTLP/gRPC transport they send
//! through.
//!
//! The exporters encode what the SDK hands them into the OTLP request at once and give it to
//! the service's [`Resender`]; the transport sends it and says which refusals are worth sending
//! again, following the OTLP specification's list of retryable gRPC codes.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::logs::v1::logs_service_client::LogsServiceClient;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::logs::tonic::group_logs_by_resource_and_scope;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::logs::{LogBatch, LogExporter};
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use tonic::Code;
use tonic::transport::{Channel, Endpoint};
use tonic_types::StatusExt;

use super::resend::{Payload, Refusal, Resender, Transport};

/// Hands span batches from the batch span processor to the resender.
#[derive(Debug)]
pub(crate) struct QueueingSpanExporter {
    resender: Arc<Resender>,
    resource: ResourceAttributesWithSchema,
}

impl QueueingSpanExporter {
    pub(crate) fn new(resender: Arc<Resender>) -> Self {
        Self {
            resender,
            resource: ResourceAttributesWithSchema::default(),
        }
    }
}

impl SpanExporter for QueueingSpanExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len() as u64;
        let request = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(batch, &self.resource),
        };
        self.resender
            .submit(Payload::Spans { request, spans })
            .map_err(OTelSdkError::InternalFailure)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        drained(&self.resender, timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        drained(&self.resender, Duration::ZERO)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = resource.into();
    }
}

/// Hands log batches (the events recorded at the moment they happened) from the batch log
/// processor to the resender.
#[derive(Debug)]
pub(crate) struct QueueingLogExporter {
    resender: Arc<Resender>,
    resource: ResourceAttributesWithSchema,
}

impl QueueingLogExporter {
    pub(crate) fn new(resender: Arc<Resender>) -> Self {
        Self {
            resender,
            resource: ResourceAttributesWithSchema::default(),
        }
    }
}

impl LogExporter for QueueingLogExporter {
    async fn export(&self, batch: LogBatch<'_>) -> OTelSdkResult {
        let records = batch.iter().count() as u64;
        let request = ExportLogsServiceRequest {
            resource_logs: group_logs_by_resource_and_scope(&batch, &self.resource),
        };
        self.resender
            .submit(Payload::Logs { request, records })
            .map_err(OTelSdkError::InternalFailure)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        drained(&self.resender, timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = resource.into();
    }
}

/// Hands each collection of counters from the periodic reader to the resender.
#[derive(Debug)]
pub(crate) struct QueueingMetricExporter {
    resender: Arc<Resender>,
}

impl QueueingMetricExporter {
    pub(crate) fn new(resender: Arc<Resender>) -> Self {
        Self { resender }
    }
}

impl PushMetricExporter for QueueingMetricExporter {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        self.resender
            .submit(Payload::Metrics(ExportMetricsServiceRequest::from(metrics)))
            .map_err(OTelSdkError::InternalFailure)
    }

    fn force_flush(&self) -> OTelSdkResult {
        drained(&self.resender, Duration::ZERO)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        drained(&self.resender, timeout)
    }

    fn temporality(&self) -> Temporality {
        // Cumulative counters: a collection that arrives late, or not at all, leaves the next
        // one complete.
        Temporality::Cumulative
    }
}

fn drained(resender: &Resender, timeout: Duration) -> OTelSdkResult {
    if resender.drained(timeout) {
        return Ok(());
    }
    let stats = resender.stats();
    Err(OTelSdkError::InternalFailure(format!(
        "{} telemetry batch(es) ({} bytes) still queued to be sent to the collector",
        stats.queued_batches, stats.queued_bytes
    )))
}

/// OTLP/gRPC to one collector endpoint, over one lazily connected channel.
pub(crate) struct Grpc {
    traces: TraceServiceClient<Channel>,
    metrics: MetricsServiceClient<Channel>,
    logs: LogsServiceClient<Channel>,
}

impl Grpc {
    /// A transport to `endpoint` (`http://host:port`); connects on the first send. Must be
    /// called inside a Tokio runtime, which drives the channel.
    pub(crate) fn connect_lazy(
        endpoint: &str,
        attempt_timeout: Duration,
    ) -> Result<Self, tonic::transport::Error> {
        let channel = Endpoint::from_shared(endpoint.to_owned())?
            .connect_timeout(attempt_timeout)
            .timeout(attempt_timeout)
            .connect_lazy();
        Ok(Self {
            traces: TraceServiceClient::new(channel.clone()),
            metrics: MetricsServiceClient::new(channel.clone()),
            logs: LogsServiceClient::new(channel),
        })
    }
}

impl Transport for Grpc {
    async fn send(&mut self, payload: &Payload) -> Result<(), Refusal> {
        let result = match payload {
            Payload::Spans { request, .. } => {
                self.traces.export(request.clone()).await.map(|response| {
                    response
                        .into_inner()
                        .partial_success
                        .map(|p| p.error_message)
                })
            }
            Payload::Metrics(request) => {
                self.metrics.export(request.clone()).await.map(|response| {
                    response
                        .into_inner()
                        .partial_success
                        .map(|p| p.error_message)
                })
            }
            Payload::Logs { request, .. } => {
                self.logs.export(request.clone()).await.map(|response| {
                    response
                        .into_inner()
                        .partial_success
                        .map(|p| p.error_message)
                })
            }
        };
        match result {
            Ok(partial) => {
                if let Some(message) = partial.filter(|message| !message.is_empty()) {
                    // Taken, though the collector refused part of it: it keeps and counts what it
                    // refused; sending it again would be refused again.
                    tracing::warn!(
                        message = message.as_str(),
                        "candor: the collector refused part of a telemetry batch"
                    );
                }
                Ok(())
            }
            Err(status) => Err(refusal(&status)),
        }
    }
}

/// Whether a refused export is worth sending again, by the OTLP specification's table of gRPC
/// codes (RESOURCE_EXHAUSTED only when the server says when to come back). A status the
/// transport made here, not the collector (a connection refused or broken mid-request, which
/// tonic reports with its cause attached and often as UNKNOWN), is a connection error: sent
/// again.
pub(crate) fn refusal(status: &tonic::Status) -> Refusal {
    let retry_after = status
        .get_details_retry_info()
        .and_then(|info| info.retry_delay);
    let from_transport = std::error::Error::source(status).is_some();
    let retryable = from_transport
        || match status.code() {
            Code::Cancelled
            | Code::DeadlineExceeded
            | Code::Aborted
            | Code::OutOfRange
            | Code::Unavailable
            | Code::DataLoss => true,
            Code::ResourceExhausted => retry_after.is_some(),
            _ => false,
        };
    Refusal {
        retryable,
        retry_after,
        reason: format!("gRPC {:?}: {}", status.code(), status.message()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_otlp_retryable_codes_are_sent_again_and_the_others_are_not() {
        let retryable = [
            Code::Cancelled,
            Code::DeadlineExceeded,
            Code::Aborted,
            Code::OutOfRange,
            Code::Unavailable,
            Code::DataLoss,
        ];
        for code in retryable {
            assert!(
                refusal(&tonic::Status::new(code, "x")).retryable,
                "{code:?}"
            );
        }
        for code in [
            Code::Unknown,
            Code::InvalidArgument,
            Code::NotFound,
            Code::AlreadyExists,
            Code::PermissionDenied,
            Code::FailedPrecondition,
            Code::Unimplemented,
            Code::Internal,
            Code::Unauthenticated,
            Code::ResourceExhausted,
        ] {
            assert!(
                !refusal(&tonic::Status::new(code, "x")).retryable,
                "{code:?}"
            );
        }
    }

    #[test]
    fn a_status_the_transport_made_is_a_connection_error_and_sent_again() {
        let broken = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
        let status = tonic::Status::from_error(Box::new(broken));
        assert_eq!(status.code(), Code::Unknown);
        assert!(refusal(&status).retryable);
    }

    #[test]
    fn resource_exhausted_with_retry_info_is_sent_again_after_the_delay_it_asks_for() {
        let status = tonic::Status::with_error_details(
            Code::ResourceExhausted,
            "slow down",
            tonic_types::ErrorDetails::with_retry_info(Some(Duration::from_millis(1500))),
        );
        let refusal = refusal(&status);
        assert!(refusal.retryable);
        assert_eq!(refusal.retry_after, Some(Duration::from_millis(1500)));
        assert_eq!(refusal.reason, "gRPC ResourceExhausted: slow down");
    }
}
