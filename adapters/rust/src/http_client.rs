//! A small HTTP/1 client whose results feed [`HttpClassifier`](crate::HttpClassifier) directly:
//! it reports how a body ended (whole, cut by the size cap, broken mid-stream, or cut by the
//! attempt's time) instead of hiding it behind an error or a short read.
//!
//! Each request is one attempt of an adapter's call: the client reads the body against the
//! attempt's timeout, so that a timeout that lands mid-response returns the bytes that arrived
//! (a Partial, contract rule `RETRY-ATTEMPT-TIMEOUT`) rather than nothing, and it sends the
//! call's idempotency key, when the adapter made one, in the `Idempotency-Key` header.
//!
//! Plain `http://` only; for TLS, use any client and build an
//! [`HttpResponse`] from what it returns.

use std::error::Error as _;
use std::time::SystemTime;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::adapter::AttemptContext;
use crate::classify::http::{
    BodyEnd, HttpExchange, HttpResponse, TransportError, TransportErrorKind,
};

/// The header that carries a call's idempotency key (IETF HTTPAPI `Idempotency-Key`).
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The default cap on a response body: 8 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 << 20;

/// An HTTP/1 client with a body size cap.
#[derive(Debug, Clone)]
pub struct HttpClient {
    client: Client<HttpConnector, Full<Bytes>>,
    max_body_bytes: usize,
}

impl Default for HttpClient {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_BODY_BYTES)
    }
}

impl HttpClient {
    /// A client that reads at most `max_body_bytes` of a body.
    pub fn new(max_body_bytes: usize) -> Self {
        Self {
            client: Client::builder(TokioExecutor::new()).build_http(),
            max_body_bytes,
        }
    }

    /// Sends a GET as `attempt` and reads the response, up to the size cap and the attempt's
    /// timeout.
    pub async fn get(
        &self,
        attempt: AttemptContext,
        uri: &str,
        headers: &HeaderMap,
    ) -> HttpExchange {
        self.send(attempt, Method::GET, uri, headers, Bytes::new())
            .await
    }

    /// Sends a POST with `body` as `attempt` and reads the response, up to the size cap and the
    /// attempt's timeout. The headers say what the body is (`content-type`).
    pub async fn post(
        &self,
        attempt: AttemptContext,
        uri: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> HttpExchange {
        self.send(attempt, Method::POST, uri, headers, body).await
    }

    async fn send(
        &self,
        attempt: AttemptContext,
        method: Method,
        uri: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> HttpExchange {
        // Measured from the attempt's first poll, which comes before the adapter starts its own
        // timer: a body cut by this time is returned no later than the adapter's timer fires,
        // and the adapter polls the attempt before its timer.
        let read_until = tokio::time::Instant::now() + attempt.timeout;
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .body(Full::new(body))
            .map_err(|err| TransportError {
                kind: TransportErrorKind::Connect,
                message: format!("invalid request: {err}"),
            })?;
        request.headers_mut().extend(headers.clone());
        if let Some(key) = attempt.idempotency_key {
            // A key is printable ASCII (`IdempotencyKey`), always a valid header value.
            if let Ok(value) = HeaderValue::from_str(key.as_str()) {
                request.headers_mut().insert(IDEMPOTENCY_KEY, value);
            }
        }
        let response = self.client.request(request).await.map_err(|err| {
            let kind = if err.is_connect() {
                TransportErrorKind::Connect
            } else if err
                .source()
                .and_then(|source| source.downcast_ref::<hyper::Error>())
                .is_some_and(hyper::Error::is_parse)
            {
                TransportErrorKind::Protocol
            } else {
                TransportErrorKind::Reset
            };
            TransportError {
                kind,
                message: error_chain(&err),
            }
        })?;
        let received_at = SystemTime::now();
        let (parts, mut body) = response.into_parts();
        let mut bytes = BytesMut::new();
        let body_end = loop {
            let Ok(frame) = tokio::time::timeout_at(read_until, body.frame()).await else {
                break BodyEnd::TimedOut {
                    after: attempt.timeout,
                };
            };
            match frame {
                None => break BodyEnd::Complete,
                Some(Err(err)) => {
                    break BodyEnd::Broken {
                        error: error_chain(&err),
                    };
                }
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    if bytes.len() + data.len() > self.max_body_bytes {
                        let room = self.max_body_bytes - bytes.len();
                        bytes.extend_from_slice(&data[..room]);
                        break BodyEnd::SizeCap {
                            limit: self.max_body_bytes,
                        };
                    }
                    bytes.extend_from_slice(&data);
                }
            }
        };
        Ok(HttpResponse {
            status: parts.status,
            headers: parts.headers,
            body: bytes.freeze(),
            body_end,
            received_at,
        })
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}
