//! The OTLP/gRPC receiver (port 4317 by default).
//!
//! The three export services (traces, metrics, logs) are served with a codec that hands the message over as bytes, so
//! that the collector decodes it itself: a message that cannot be decoded (invalid protobuf,
//! invalid UTF-8 in a string) is kept in the rejected topic and counted before the client is
//! told, as on OTLP/HTTP. The bearer token is checked by an interceptor before anything is read.

use std::marker::PhantomData;
use std::sync::Arc;

use bytes::{Buf as _, BufMut as _, Bytes};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use serde::de::DeserializeOwned;
use tonic::codec::{
    Codec, CompressionEncoding, DecodeBuf, Decoder, EnabledCompressionEncodings, EncodeBuf, Encoder,
};
use tonic::codegen::{Body, BoxFuture, Context, Poll, Service, StdError, http};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

use super::auth::BearerAuth;
use super::decode::{Encoding, decode_request};
use super::export::ExportRequest;
use super::extract::Signal;
use super::service::Ingest;
use crate::error::{ErrorCode, ServiceError};

/// The interceptor that checks the bearer token before the message is read.
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

/// One OTLP export service: what it is called and the request it takes.
pub trait Export: Send + Sync + 'static {
    /// The gRPC service name.
    const NAME: &'static str;
    /// The path of its `Export` method.
    const PATH: &'static str;
    /// The request its `Export` method takes.
    type Request: ExportRequest;
}

/// `opentelemetry.proto.collector.trace.v1.TraceService`.
pub struct Traces;

/// `opentelemetry.proto.collector.metrics.v1.MetricsService`.
pub struct Metrics;

/// `opentelemetry.proto.collector.logs.v1.LogsService`: the log-based form of `tool.outcome`.
pub struct Logs;

impl Export for Traces {
    const NAME: &'static str = "opentelemetry.proto.collector.trace.v1.TraceService";
    const PATH: &'static str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
    type Request = ExportTraceServiceRequest;
}

impl Export for Metrics {
    const NAME: &'static str = "opentelemetry.proto.collector.metrics.v1.MetricsService";
    const PATH: &'static str = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export";
    type Request = ExportMetricsServiceRequest;
}

impl Export for Logs {
    const NAME: &'static str = "opentelemetry.proto.collector.logs.v1.LogsService";
    const PATH: &'static str = "/opentelemetry.proto.collector.logs.v1.LogsService/Export";
    type Request = ExportLogsServiceRequest;
}

/// Decodes one message of `R`, ingests it and answers the encoded response.
async fn handle<R: ExportRequest>(ingest: Arc<Ingest>, message: Bytes) -> Result<Bytes, Status> {
    let export = async {
        let request: R = decode(&ingest, R::SIGNAL, &message).await?;
        request.export(&ingest).await
    };
    let ack = ingest.answered(R::SIGNAL.as_str(), "grpc", export).await?;
    Ok(Bytes::from(R::response(ack).encode_to_vec()))
}

/// Decodes a message off the reactor; one that cannot be decoded is kept in the rejected topic
/// first.
async fn decode<T: Message + Default + DeserializeOwned + Send + 'static>(
    ingest: &Ingest,
    signal: Signal,
    message: &Bytes,
) -> Result<T, ServiceError> {
    let bytes = message.clone();
    let decoded =
        tokio::task::spawn_blocking(move || decode_request::<T>(Encoding::Protobuf, &bytes))
            .await
            .map_err(|err| {
                ServiceError::new(ErrorCode::BadRequest, format!("decoding failed: {err}"))
            })?;
    match decoded {
        Ok(request) => Ok(request),
        Err(err) => {
            let error = err.to_string();
            ingest.reject_undecodable(signal, &error, message).await?;
            Err(ServiceError::new(
                ErrorCode::BadRequest,
                format!("undecodable {} request: {error}", signal.as_str()),
            ))
        }
    }
}

/// An OTLP export service over gRPC.
pub struct ExportService<E> {
    ingest: Arc<Ingest>,
    max_request_bytes: usize,
    export: PhantomData<fn() -> E>,
}

impl<E> Clone for ExportService<E> {
    fn clone(&self) -> Self {
        Self {
            ingest: self.ingest.clone(),
            max_request_bytes: self.max_request_bytes,
            export: PhantomData,
        }
    }
}

impl<E: Export> NamedService for ExportService<E> {
    const NAME: &'static str = E::NAME;
}

/// One export service behind the interceptor.
type Served<E> = InterceptedService<ExportService<E>, AuthInterceptor>;

/// The three services, with authentication, gzip and the size cap (applied after
/// decompression).
pub fn services(
    ingest: Arc<Ingest>,
    auth: BearerAuth,
    max_request_bytes: usize,
) -> (Served<Traces>, Served<Metrics>, Served<Logs>) {
    let interceptor = AuthInterceptor {
        auth,
        ingest: ingest.clone(),
    };
    (
        served(ingest.clone(), max_request_bytes, interceptor.clone()),
        served(ingest.clone(), max_request_bytes, interceptor.clone()),
        served(ingest, max_request_bytes, interceptor),
    )
}

fn served<E: Export>(
    ingest: Arc<Ingest>,
    max_request_bytes: usize,
    interceptor: AuthInterceptor,
) -> Served<E> {
    let service = ExportService {
        ingest,
        max_request_bytes,
        export: PhantomData,
    };
    InterceptedService::new(service, interceptor)
}

impl<E: Export, B> Service<http::Request<B>> for ExportService<E>
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if request.uri().path() != E::PATH {
            return Box::pin(async { Ok(Status::unimplemented("no such method").into_http()) });
        }
        let handler = Handler::<E> {
            ingest: self.ingest.clone(),
            export: PhantomData,
        };
        let max_request_bytes = self.max_request_bytes;
        let ingest = self.ingest.clone();
        Box::pin(async move {
            let mut accept = EnabledCompressionEncodings::default();
            accept.enable(CompressionEncoding::Gzip);
            let mut grpc = Grpc::new(RawCodec)
                .apply_compression_config(accept, EnabledCompressionEncodings::default())
                .apply_max_message_size_config(Some(max_request_bytes), None);
            let response = grpc.unary(handler, request).await;
            Ok(count_size_refusal(response, &ingest, max_request_bytes))
        })
    }
}

/// The gRPC library refuses a message over the cap before the handler runs: OUT_OF_RANGE for a
/// plain one, RESOURCE_EXHAUSTED when decompression passed the cap. The refusal is counted here
/// and answered as RESOURCE_EXHAUSTED, the code OTLP clients treat as "too large, do not retry".
/// (The handler itself never answers either code.)
fn count_size_refusal(
    response: http::Response<tonic::body::Body>,
    ingest: &Ingest,
    limit: usize,
) -> http::Response<tonic::body::Body> {
    let too_large = response
        .headers()
        .get(Status::GRPC_STATUS)
        .is_some_and(|code| matches!(code.as_bytes(), b"11" | b"8"));
    if !too_large {
        return response;
    }
    ingest.metrics().too_large("grpc", limit + 1, limit);
    tonic::Status::from(ServiceError::new(
        ErrorCode::PayloadTooLarge,
        format!("the request exceeds {limit} bytes (after decompression)"),
    ))
    .into_http()
}

struct Handler<E> {
    ingest: Arc<Ingest>,
    export: PhantomData<fn() -> E>,
}

impl<E: Export> UnaryService<Bytes> for Handler<E> {
    type Response = Bytes;
    type Future = BoxFuture<Response<Bytes>, Status>;

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        let response = handle::<E::Request>(self.ingest.clone(), request.into_inner());
        Box::pin(async move { response.await.map(Response::new) })
    }
}

/// Hands messages over as bytes, and sends bytes already encoded.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}
