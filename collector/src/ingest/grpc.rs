//! The OTLP/gRPC receiver (port 4317 by default).

use std::sync::Arc;
use std::time::Instant;

use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsPartialSuccess, ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tonic::codec::CompressionEncoding;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

use super::auth::BearerAuth;
use super::service::Ingest;
use crate::error::{ErrorCode, ServiceError};

/// Serves OTLP traces and metrics over gRPC.
#[derive(Clone)]
pub struct OtlpGrpc {
    ingest: Arc<Ingest>,
}

/// The interceptor that checks the bearer token before the message is decoded.
#[derive(Clone)]
pub struct AuthInterceptor {
    auth: BearerAuth,
    ingest: Arc<Ingest>,
}

impl tonic::service::Interceptor for AuthInterceptor {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let header = request
            .metadata()
            .get("authorization")
            .map(|v| v.as_bytes());
        if self.auth.allows(header) {
            Ok(request)
        } else {
            self.ingest.metrics().unauthenticated("grpc");
            Err(
                ServiceError::new(ErrorCode::Unauthenticated, "missing or wrong bearer token")
                    .into(),
            )
        }
    }
}

/// The two services, with authentication, gzip and the size cap applied.
pub fn services(
    ingest: Arc<Ingest>,
    auth: BearerAuth,
    max_request_bytes: usize,
) -> (
    InterceptedService<TraceServiceServer<OtlpGrpc>, AuthInterceptor>,
    InterceptedService<MetricsServiceServer<OtlpGrpc>, AuthInterceptor>,
) {
    let service = OtlpGrpc {
        ingest: ingest.clone(),
    };
    let interceptor = AuthInterceptor { auth, ingest };
    let traces = TraceServiceServer::new(service.clone())
        .accept_compressed(CompressionEncoding::Gzip)
        .max_decoding_message_size(max_request_bytes);
    let metrics = MetricsServiceServer::new(service)
        .accept_compressed(CompressionEncoding::Gzip)
        .max_decoding_message_size(max_request_bytes);
    (
        InterceptedService::new(traces, interceptor.clone()),
        InterceptedService::new(metrics, interceptor),
    )
}

#[tonic::async_trait]
impl TraceService for OtlpGrpc {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let started = Instant::now();
        let metrics = self.ingest.metrics().clone();
        let _in_flight = metrics.request_received("traces", "grpc");
        let result = self.ingest.export_traces(request.into_inner()).await;
        match result {
            Ok(ack) => {
                metrics.request_answered(
                    "traces",
                    "grpc",
                    if ack.rejected > 0 { "partial" } else { "ok" },
                    started.elapsed(),
                );
                Ok(Response::new(ExportTraceServiceResponse {
                    partial_success: (ack.rejected > 0).then(|| ExportTracePartialSuccess {
                        rejected_spans: i64::try_from(ack.rejected).unwrap_or(i64::MAX),
                        error_message: ack.message,
                    }),
                }))
            }
            Err(error) => {
                metrics.request_answered("traces", "grpc", error.code.label(), started.elapsed());
                Err(error.into())
            }
        }
    }
}

#[tonic::async_trait]
impl MetricsService for OtlpGrpc {
    async fn export(
        &self,
        request: Request<ExportMetricsServiceRequest>,
    ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
        let started = Instant::now();
        let metrics = self.ingest.metrics().clone();
        let _in_flight = metrics.request_received("metrics", "grpc");
        let result = self.ingest.export_metrics(request.into_inner()).await;
        match result {
            Ok(ack) => {
                metrics.request_answered(
                    "metrics",
                    "grpc",
                    if ack.rejected > 0 { "partial" } else { "ok" },
                    started.elapsed(),
                );
                Ok(Response::new(ExportMetricsServiceResponse {
                    partial_success: (ack.rejected > 0).then(|| ExportMetricsPartialSuccess {
                        rejected_data_points: i64::try_from(ack.rejected).unwrap_or(i64::MAX),
                        error_message: ack.message,
                    }),
                }))
            }
            Err(error) => {
                metrics.request_answered("metrics", "grpc", error.code.label(), started.elapsed());
                Err(error.into())
            }
        }
    }
}
