//! The collector's closed set of error codes, with their HTTP and gRPC mappings.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// What went wrong with a request, as the client is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// No or a wrong bearer token.
    Unauthenticated,
    /// The request is larger than the cap (after decompression).
    PayloadTooLarge,
    /// The request could not be decoded.
    BadRequest,
    /// The content type is neither protobuf nor JSON.
    UnsupportedMediaType,
    /// The collector cannot hold the data now (Kafka unreachable, queue full); try again.
    Unavailable,
}

impl ErrorCode {
    /// The HTTP status.
    pub const fn http_status(self) -> StatusCode {
        match self {
            ErrorCode::Unauthenticated => StatusCode::UNAUTHORIZED,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::BadRequest => StatusCode::BAD_REQUEST,
            ErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The gRPC status code.
    pub const fn grpc_code(self) -> tonic::Code {
        match self {
            ErrorCode::Unauthenticated => tonic::Code::Unauthenticated,
            ErrorCode::PayloadTooLarge => tonic::Code::ResourceExhausted,
            ErrorCode::BadRequest | ErrorCode::UnsupportedMediaType => tonic::Code::InvalidArgument,
            ErrorCode::Unavailable => tonic::Code::Unavailable,
        }
    }

    /// Whether the client should send the same request again.
    pub const fn is_retryable(self) -> bool {
        matches!(self, ErrorCode::Unavailable)
    }

    /// The label of `requests_answered_total{status}`.
    pub const fn label(self) -> &'static str {
        match self {
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::PayloadTooLarge => "too_large",
            ErrorCode::BadRequest | ErrorCode::UnsupportedMediaType => "bad_request",
            ErrorCode::Unavailable => "unavailable",
        }
    }
}

/// An error answered to a client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ServiceError {
    /// The code.
    pub code: ErrorCode,
    /// What happened, for the client.
    pub message: String,
    /// When to try again, for retryable codes.
    pub retry_after: Option<Duration>,
}

impl ServiceError {
    /// An error with no retry hint.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// A retryable error: the client should try again after `after`.
    pub fn unavailable(message: impl Into<String>, after: Duration) -> Self {
        Self {
            code: ErrorCode::Unavailable,
            message: message.into(),
            retry_after: Some(after),
        }
    }
}

impl From<ServiceError> for tonic::Status {
    fn from(error: ServiceError) -> Self {
        use tonic_types::{ErrorDetails, StatusExt as _};
        match error.retry_after {
            Some(after) if error.code.is_retryable() => tonic::Status::with_error_details(
                error.code.grpc_code(),
                error.message,
                ErrorDetails::with_retry_info(Some(after)),
            ),
            _ => tonic::Status::new(error.code.grpc_code(), error.message),
        }
    }
}

impl IntoResponse for ServiceError {
    fn into_response(self) -> Response {
        let mut response = (self.code.http_status(), self.message).into_response();
        if let Some(after) = self.retry_after.filter(|_| self.code.is_retryable()) {
            let seconds = after.as_secs().max(1).to_string();
            if let Ok(value) = HeaderValue::from_str(&seconds) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unavailable_is_retryable_and_carries_retry_hints() {
        let codes = [
            ErrorCode::Unauthenticated,
            ErrorCode::PayloadTooLarge,
            ErrorCode::BadRequest,
            ErrorCode::UnsupportedMediaType,
            ErrorCode::Unavailable,
        ];
        for code in codes {
            assert_eq!(
                code.is_retryable(),
                code == ErrorCode::Unavailable,
                "{code:?}"
            );
        }
        let response =
            ServiceError::unavailable("kafka down", Duration::from_secs(2)).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "2");
        let status = tonic::Status::from(ServiceError::unavailable(
            "kafka down",
            Duration::from_secs(2),
        ));
        assert_eq!(status.code(), tonic::Code::Unavailable);
        use tonic_types::StatusExt as _;
        assert_eq!(
            status.get_details_retry_info().unwrap().retry_delay,
            Some(Duration::from_secs(2))
        );
        let too_large = tonic::Status::from(ServiceError::new(ErrorCode::PayloadTooLarge, "big"));
        assert_eq!(too_large.code(), tonic::Code::ResourceExhausted);
        assert!(too_large.get_details_retry_info().is_none());
    }
}
