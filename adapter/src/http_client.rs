//! A small HTTP/1 client whose results feed [`HttpClassifier`](crate::HttpClassifier) directly:
//! it reports how a body ended (whole, cut by the size cap, or broken mid-stream) instead of
//! hiding it behind an error or a short read.
//!
//! Plain `http://` only; for TLS, use any client and build an
//! [`HttpResponse`] from what it returns.

use std::error::Error as _;
use std::time::SystemTime;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::classify::http::{
    BodyEnd, HttpExchange, HttpResponse, TransportError, TransportErrorKind,
};

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

    /// Sends a GET and reads the response, up to the size cap.
    pub async fn get(&self, uri: &str, headers: &HeaderMap) -> HttpExchange {
        self.send(Method::GET, uri, headers, Bytes::new()).await
    }

    /// Sends a POST with `body` and reads the response, up to the size cap. The headers say
    /// what the body is (`content-type`).
    pub async fn post(&self, uri: &str, headers: &HeaderMap, body: Bytes) -> HttpExchange {
        self.send(Method::POST, uri, headers, body).await
    }

    async fn send(
        &self,
        method: Method,
        uri: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> HttpExchange {
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .body(Full::new(body))
            .map_err(|err| TransportError {
                kind: TransportErrorKind::Connect,
                message: format!("invalid request: {err}"),
            })?;
        request.headers_mut().extend(headers.clone());
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
            match body.frame().await {
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
