//! The OTLP/HTTP receiver (port 4318 by default): `/v1/traces`, `/v1/metrics` and `/v1/logs`
//! (the log-based form of `tool.outcome`), protobuf or JSON, optionally gzip-compressed.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http_body_util::BodyExt as _;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::auth::BearerAuth;
use super::decode::{self, Encoding, GunzipError};
use super::export::ExportRequest;
use super::extract::Signal;
use super::service::Ingest;
use crate::error::{ErrorCode, ServiceError};

/// The receiver's shared state.
#[derive(Clone)]
struct HttpState {
    ingest: Arc<Ingest>,
    auth: BearerAuth,
    max_request_bytes: usize,
}

/// The OTLP/HTTP routes, with authentication (before the body is read) and the size cap.
pub fn router(ingest: Arc<Ingest>, auth: BearerAuth, max_request_bytes: usize) -> Router {
    let state = HttpState {
        ingest,
        auth,
        max_request_bytes,
    };
    Router::new()
        .route("/v1/traces", post(export::<ExportTraceServiceRequest>))
        .route("/v1/metrics", post(export::<ExportMetricsServiceRequest>))
        .route("/v1/logs", post(export::<ExportLogsServiceRequest>))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        // The body is read by the handlers, up to the cap, so that a refusal is counted.
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
}

async fn authenticate(State(state): State<HttpState>, request: Request, next: Next) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    if state.auth.allows(header) {
        return next.run(request).await;
    }
    state.ingest.metrics().unauthenticated("http");
    let encoding = encoding_of(request.headers()).ok();
    let error = ServiceError::new(ErrorCode::Unauthenticated, "missing or wrong bearer token");
    error_response(error, encoding)
}

/// How the request body is encoded, from its `Content-Type`; the response uses the same.
fn encoding_of(headers: &HeaderMap) -> Result<Encoding, ServiceError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    Encoding::from_content_type(content_type)
        .map_err(|err| ServiceError::new(ErrorCode::UnsupportedMediaType, err.to_string()))
}

/// Decompresses a gzip body, every member of it, refusing to grow past `cap` bytes (a gzip bomb
/// stops at the cap; [`decode::gunzip_capped`]).
pub fn decompress(headers: &HeaderMap, body: Bytes, cap: usize) -> Result<Bytes, ServiceError> {
    let encoding = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity")
        .trim()
        .to_ascii_lowercase();
    match encoding.as_str() {
        "identity" | "" => Ok(body),
        "gzip" => decode::gunzip_capped(&body, cap)
            .map(Bytes::from)
            .map_err(|err| {
                let code = match err {
                    GunzipError::Malformed(_) => ErrorCode::BadRequest,
                    GunzipError::TooLarge { .. } => ErrorCode::PayloadTooLarge,
                };
                ServiceError::new(code, err.to_string())
            }),
        other => Err(ServiceError::new(
            ErrorCode::UnsupportedMediaType,
            format!("content-encoding {other:?}: expected gzip or identity"),
        )),
    }
}

fn encode<T: Message + Serialize>(encoding: Encoding, response: &T) -> Response {
    let body = match encoding {
        Encoding::Protobuf => response.encode_to_vec(),
        Encoding::Json => match serde_json::to_vec(response) {
            Ok(body) => body,
            // The data is in Kafka, but the client cannot be told so: never an empty 200.
            Err(err) => {
                return (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("encoding the response: {err}"),
                )
                    .into_response();
            }
        },
    };
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(encoding.content_type()),
    );
    response
}

/// Reads, decompresses and decodes a request body; an undecodable body is kept in the rejected
/// topic before the client is told.
async fn read<T: Message + Default + DeserializeOwned + Send + 'static>(
    state: &HttpState,
    signal: Signal,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<T, ServiceError> {
    let encoding = encoding_of(headers)?;
    let limit = state.max_request_bytes;
    let headers = headers.clone();
    let raw = body.clone();
    // Decompressing and decoding up to the cap is CPU work; keep it off the reactor.
    let decoded = tokio::task::spawn_blocking(move || {
        let body = decompress(&headers, body, limit)?;
        let decoded = decode::decode_request::<T>(encoding, &body);
        Ok::<_, ServiceError>(decoded.map_err(|error| (error.to_string(), body)))
    })
    .await
    .map_err(|err| ServiceError::new(ErrorCode::BadRequest, format!("decoding failed: {err}")));
    match decoded {
        Ok(Ok(Ok(request))) => Ok(request),
        Ok(Ok(Err((error, body)))) => {
            state
                .ingest
                .reject_undecodable(signal, &error, &body)
                .await?;
            Err(ServiceError::new(
                ErrorCode::BadRequest,
                format!("undecodable {} request: {error}", signal.as_str()),
            ))
        }
        Ok(Err(err)) if err.code == ErrorCode::PayloadTooLarge => {
            state.ingest.metrics().too_large("http", limit + 1, limit);
            Err(err)
        }
        Ok(Err(err)) if err.code == ErrorCode::BadRequest => {
            // A corrupt compressed body is kept like any other undecodable request.
            state
                .ingest
                .reject_undecodable(signal, &err.message, &raw)
                .await?;
            Err(err)
        }
        Ok(Err(err)) | Err(err) => Err(err),
    }
}

/// Reads the (compressed) body up to the cap; a longer one is counted and refused.
async fn read_body(state: &HttpState, body: Body) -> Result<Bytes, ServiceError> {
    let limit = state.max_request_bytes;
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err)
            if err
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            state.ingest.metrics().too_large("http", limit + 1, limit);
            Err(ServiceError::new(
                ErrorCode::PayloadTooLarge,
                format!("the request body exceeds {limit} bytes"),
            ))
        }
        Err(err) => Err(ServiceError::new(
            ErrorCode::BadRequest,
            format!("reading the request body: {err}"),
        )),
    }
}

/// An error answered as OTLP/HTTP asks: the status code (with `Retry-After` when retryable) and
/// a `google.rpc.Status` body in the request's encoding (protobuf when it is not known).
fn error_response(error: ServiceError, encoding: Option<Encoding>) -> Response {
    let status = tonic_types::pb::Status {
        code: error.code.grpc_code() as i32,
        message: error.message.clone(),
        details: Vec::new(),
    };
    let (content_type, body) = match encoding {
        Some(Encoding::Json) => (
            "application/json",
            serde_json::json!({ "code": status.code, "message": status.message })
                .to_string()
                .into_bytes(),
        ),
        _ => ("application/x-protobuf", status.encode_to_vec()),
    };
    let mut response = error.into_response();
    *response.body_mut() = Body::from(body);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// One OTLP/HTTP export of `R`: the body read up to the cap and decoded off the reactor, ingested,
/// and acknowledged in the request's encoding.
async fn export<R: ExportRequest>(
    State(state): State<HttpState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let encoding = encoding_of(&headers);
    let export = async {
        let body = read_body(&state, body).await?;
        let request: R = read(&state, R::SIGNAL, &headers, body).await?;
        request.export(&state.ingest).await
    };
    match (
        encoding,
        state
            .ingest
            .answered(R::SIGNAL.as_str(), "http", export)
            .await,
    ) {
        (Ok(encoding), Ok(ack)) => encode(encoding, &R::response(ack)),
        (encoding, Err(error)) => error_response(error, encoding.ok()),
        (Err(error), Ok(_)) => error_response(error, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn gzip(data: &[u8]) -> Bytes {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(data).unwrap();
        Bytes::from(encoder.finish().unwrap())
    }

    fn gzip_headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        headers
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_cap() {
        // 64 MiB of zeros compress to about 64 KiB.
        let bomb = gzip(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 1 << 20);
        let err = decompress(&gzip_headers(), bomb, 1 << 20).unwrap_err();
        assert_eq!(err.code, ErrorCode::PayloadTooLarge);
    }

    #[test]
    fn every_gzip_member_is_decompressed() {
        let mut two = gzip(b"hello ").to_vec();
        two.extend_from_slice(&gzip(b"world"));
        let body = decompress(&gzip_headers(), Bytes::from(two), 100).unwrap();
        assert_eq!(body.as_ref(), b"hello world");
    }

    #[test]
    fn gzip_within_the_cap_is_decompressed() {
        let body = decompress(&gzip_headers(), gzip(b"hello"), 5).unwrap();
        assert_eq!(body.as_ref(), b"hello");
    }

    #[test]
    fn unknown_encodings_and_types_are_refused_by_name() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("br"));
        let err = decompress(&headers, Bytes::from_static(b"x"), 10).unwrap_err();
        assert!(err.message.contains("br"), "{}", err.message);
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        let err = encoding_of(&headers).unwrap_err();
        assert_eq!(err.code, ErrorCode::UnsupportedMediaType);
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        assert_eq!(encoding_of(&headers).unwrap(), Encoding::Json);
    }
}
