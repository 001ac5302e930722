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

impl ExportRequest for ExportTraceServiceRequest {
    const SIGNAL: Signal = Signal::Traces;

    type Response = ExportTraceServiceResponse;

    fn export(
        self,
        ingest: &Ingest,
    ) -> impl Future<Output = Result<Acknowledged, ServiceError>> + Send {
        ingest.export_traces(self)
    }

    fn response(ack: Acknowledged) -> Self::Response {
        let refused = ack.refused();
        ExportTraceServiceResponse {
            partial_success: refused.map(|(rejected_spans, error_message)| {
                ExportTracePartialSuccess {
                    rejected_spans,
                    error_message,
                }
            }),
        }
    }
}

impl ExportRequest for ExportMetricsServiceRequest {
    const SIGNAL: Signal = Signal::Metrics;

    type Response = ExportMetricsServiceResponse;

    fn export(
        self,
        ingest: &Ingest,
    ) -> impl Future<Output = Result<Acknowledged, ServiceError>> + Send {
        ingest.export_metrics(self)
    }

    fn response(ack: Acknowledged) -> Self::Response {
        let refused = ack.refused();
        ExportMetricsServiceResponse {
            partial_success: refused.map(|(rejected_data_points, error_message)| {
                ExportMetricsPartialSuccess {
                    rejected_data_points,
                    error_message,
                }
            }),
        }
    }
}

impl ExportRequest for ExportLogsServiceRequest {
    const SIGNAL: Signal = Signal::Logs;

    type Response = ExportLogsServiceResponse;

    fn export(
        self,
        ingest: &Ingest,
    ) -> impl Future<Output = Result<Acknowledged, ServiceError>> + Send {
        ingest.export_logs(self)
    }

    fn response(ack: Acknowledged) -> Self::Response {
        let refused = ack.refused();
        ExportLogsServiceResponse {
            partial_success: refused.map(|(rejected_log_records, error_message)| {
                ExportLogsPartialSuccess {
                    rejected_log_records,
                    error_message,
                }
            }),
        }
    }
}
