//! The OTLP/gRPC receiver (port 4317 by default).

use std::sync::Arc;

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
        let export = self.ingest.export_traces(request.into_inner());
        let ack = self.ingest.answered("traces", "grpc", export).await?;
        Ok(Response::new(ExportTraceServiceResponse {
            partial_success: ack
                .refused()
                .map(|(rejected, message)| ExportTracePartialSuccess {
                    rejected_spans: rejected,
                    error_message: message,
                }),
        }))
    }
}

#[tonic::async_trait]
impl MetricsService for OtlpGrpc {
    async fn export(
        &self,
        request: Request<ExportMetricsServiceRequest>,
    ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
        let export = self.ingest.export_metrics(request.into_inner());
        let ack = self.ingest.answered("metrics", "grpc", export).await?;
        Ok(Response::new(ExportMetricsServiceResponse {
            partial_success: ack
                .refused()
                .map(|(rejected, message)| ExportMetricsPartialSuccess {
                    rejected_data_points: rejected,
                    error_message: message,
                }),
        }))
    }
}
