//! A small HTTP/1 client whose results feed [`HttpClassifier`](crate::HttpClassifier) directly:
//! it reports how a body ended (whole, cut by the size cap, broken mid-stream, or cut by the
//! attempt's time) instead of hiding it behind an error or a short read.
//!
//! Each request is one attempt of an adapter's call: the client reads the body against the
//! attempt's timeout, so that a timeout that lands mid-response returns the bytes that arrived
//! (a Partial, contract rule `RETRY-ATTEMPT-TIMEOUT`) rather than nothing, and it sends the
//! call's idempotency key, when the adapter made one, in the `Idempotency-Key` header.
//!
//! It speaks `http://` and `https://` (rustls, TLS 1.2 and 1.3): by default a server is verified
//! against the system's CA certificates ([`HttpClient::new`]), or against given ones
//! ([`HttpClient::trusting`], for a private CA).

use std::error::Error as _;
use std::time::SystemTime;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;

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
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    max_body_bytes: usize,
}

impl Default for HttpClient {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_BODY_BYTES)
    }
}

/// The CA certificates given to [`HttpClient::trusting`] could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The text holds no PEM certificate.
    #[error("no PEM certificate (-----BEGIN CERTIFICATE-----) in the CA certificates")]
    NoCertificate,
    /// A certificate could not be read or used as a trust anchor.
    #[error("a CA certificate could not be used: {0}")]
    Unusable(String),
}

impl HttpClient {
    /// A client that reads at most `max_body_bytes` of a body, and verifies an HTTPS server
    /// against the system's CA certificates. A certificate of the system's that cannot be read
    /// is left out; with none readable, every HTTPS request fails as a connection error that
    /// says the certificate is not trusted.
    pub fn new(max_body_bytes: usize) -> Self {
        let mut roots = RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for cert in native.certs {
            // One unusable certificate of the system's does not take the others down.
            let _ = roots.add(cert);
        }
        Self::with_roots(max_body_bytes, roots)
    }

    /// A client that verifies an HTTPS server against the CA certificates in `pem` only (a
    /// private CA), and reads at most `max_body_bytes` of a body.
    pub fn trusting(max_body_bytes: usize, pem: &[u8]) -> Result<Self, TrustError> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|err| TrustError::Unusable(err.to_string()))?;
            roots
                .add(cert)
                .map_err(|err| TrustError::Unusable(err.to_string()))?;
        }
        if roots.is_empty() {
            return Err(TrustError::NoCertificate);
        }
        Ok(Self::with_roots(max_body_bytes, roots))
    }

    fn with_roots(max_body_bytes: usize, roots: RootCertStore) -> Self {
        // The provider is named: with both of rustls' providers compiled into an application,
        // there is no process default to fall back on. Invariant: ring supports the safe default
        // protocol versions (TLS 1.2 and 1.3), so the builder cannot refuse them.
        let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("ring supports TLS 1.2 and 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
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
