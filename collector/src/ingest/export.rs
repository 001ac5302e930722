//! The three OTLP export requests as one kind: each one's signal, how the ingest core takes it,
//! and the response that acknowledges it. The gRPC and HTTP receivers serve every signal through
//! this one trait.

use std::future::Future;

use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsPartialSuccess, ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsPartialSuccess, ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::extract::Signal;
use super::service::{Acknowledged, Ingest};
use crate::error::ServiceError;

/// One OTLP export request the collector takes, decoded from protobuf or JSON.
pub trait ExportRequest: Message + Default + DeserializeOwned + Send + 'static {
    /// Its signal.
    const SIGNAL: Signal;

    /// The OTLP response that acknowledges it.
    type Response: Message + Serialize;

    /// Takes it into `ingest`: extracted, delivered to Kafka, acknowledged.
    fn export(
        self,
        ingest: &Ingest,
    ) -> impl Future<Output = Result<Acknowledged, ServiceError>> + Send;

    /// The response for `ack`, with a `partial_success` when anything was refused.
    fn response(ack: Acknowledged) -> Self::Response;
}

/// Implements [`ExportRequest`] for one signal's request: its [`Signal`], the [`Ingest`] method
/// that takes it, its response, and the response's partial success with the field that counts
/// what was refused.
macro_rules! export_request {
    ($request:ty, $signal:expr, $export:ident, $response:ident, $partial:ident, $refused:ident) => {
        impl ExportRequest for $request {
            const SIGNAL: Signal = $signal;

            type Response = $response;

            fn export(
                self,
                ingest: &Ingest,
            ) -> impl Future<Output = Result<Acknowledged, ServiceError>> + Send {
                ingest.$export(self)
            }

            fn response(ack: Acknowledged) -> Self::Response {
                $response {
                    partial_success: ack.refused().map(|(refused, error_message)| $partial {
                        $refused: refused,
                        error_message,
                    }),
                }
            }
        }
    };
}

export_request!(
    ExportTraceServiceRequest,
    Signal::Traces,
    export_traces,
    ExportTraceServiceResponse,
    ExportTracePartialSuccess,
    rejected_spans
);
export_request!(
    ExportMetricsServiceRequest,
    Signal::Metrics,
    export_metrics,
    ExportMetricsServiceResponse,
    ExportMetricsPartialSuccess,
    rejected_data_points
);
export_request!(
    ExportLogsServiceRequest,
    Signal::Logs,
    export_logs,
    ExportLogsServiceResponse,
    ExportLogsPartialSuccess,
    rejected_log_records
);
