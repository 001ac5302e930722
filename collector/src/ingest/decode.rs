//! Decoding an OTLP request body: capped gzip decompression, and the export request from protobuf
//! or JSON.
//!
//! Pure functions over bytes, with one error type each. The receivers (`ingest::http`,
//! `ingest::grpc`) call them and map the errors onto the collector's error codes; the fuzz targets
//! in `collector/fuzz/` call them with arbitrary input.
//!
//! ```
//! use candor_collector::ingest::decode::{Encoding, decode_request, gunzip_capped};
//! use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
//!
//! let encoding = Encoding::from_content_type("application/json; charset=utf-8").unwrap();
//! let request: ExportTraceServiceRequest = decode_request(encoding, b"{}").unwrap();
//! assert!(request.resource_spans.is_empty());
//! assert!(gunzip_capped(b"not gzip", 1024).is_err());
//! ```

use std::io::Read as _;

use prost::Message;
use serde::de::DeserializeOwned;

/// How a request body is encoded; an OTLP/HTTP response uses the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// OTLP's protobuf messages (`application/x-protobuf`, and every gRPC message).
    Protobuf,
    /// OTLP's JSON mapping of the same messages (`application/json`).
    Json,
}

/// A content type that is neither protobuf nor JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("content-type {media_type:?}: expected application/x-protobuf or application/json")]
pub struct UnsupportedMediaType {
    /// The media type as read: lowercased, without its parameters.
    pub media_type: String,
}

impl Encoding {
    /// The encoding a `Content-Type` value names. Parameters (`; charset=utf-8`) and case do not
    /// matter; an absent header is the empty string, which names none.
    pub fn from_content_type(value: &str) -> Result<Self, UnsupportedMediaType> {
        let media_type = value
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match media_type.as_str() {
            "application/x-protobuf" | "application/protobuf" => Ok(Self::Protobuf),
            "application/json" => Ok(Self::Json),
            _ => Err(UnsupportedMediaType { media_type }),
        }
    }

    /// The `Content-Type` of a body in this encoding.
    pub const fn content_type(self) -> &'static str {
        match self {
            Self::Protobuf => "application/x-protobuf",
            Self::Json => "application/json",
        }
    }
}

/// Why a gzip body could not be decompressed.
#[derive(Debug, thiserror::Error)]
pub enum GunzipError {
    /// The body is not a gzip stream: a bad header, corrupt or cut data, a wrong checksum, or
    /// something other than another gzip member after one.
    #[error("gzip body: {0}")]
    Malformed(std::io::Error),
    /// The decompressed body is longer than the cap; decompression stopped one byte past it.
    #[error("the decompressed body exceeds {cap} bytes")]
    TooLarge {
        /// The cap, in bytes.
        cap: usize,
    },
}

/// Decompresses a gzip body, every member of it, refusing to grow past `cap` bytes: at most
/// `cap + 1` bytes are ever produced, so a gzip bomb stops at the cap.
pub fn gunzip_capped(body: &[u8], cap: usize) -> Result<Vec<u8>, GunzipError> {
    let mut out = Vec::new();
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    flate2::read::MultiGzDecoder::new(body)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(GunzipError::Malformed)?;
    if out.len() > cap {
        return Err(GunzipError::TooLarge { cap });
    }
    Ok(out)
}

/// Why a body is not the message its encoding says.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    /// Invalid protobuf, including invalid UTF-8 in a string field.
    #[error(transparent)]
    Protobuf(#[from] prost::DecodeError),
    /// Invalid or cut JSON, or JSON that is not the message's mapping.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// Decodes an OTLP export request (`ExportTraceServiceRequest`, `ExportMetricsServiceRequest`)
/// from a body that is already decompressed.
pub fn decode_request<T>(encoding: Encoding, body: &[u8]) -> Result<T, MessageError>
where
    T: Message + Default + DeserializeOwned,
{
    match encoding {
        Encoding::Protobuf => Ok(T::decode(body)?),
        Encoding::Json => Ok(serde_json::from_slice(body)?),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::ResourceSpans;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn gunzip_stops_one_byte_past_the_cap_and_says_which_cap() {
        let bomb = gzip(&vec![0u8; 1 << 20]);
        let err = gunzip_capped(&bomb, 1 << 16).unwrap_err();
        assert!(
            matches!(err, GunzipError::TooLarge { cap: 65_536 }),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "the decompressed body exceeds 65536 bytes");
        assert_eq!(gunzip_capped(&gzip(b"hello"), 5).unwrap(), b"hello");
        assert!(matches!(
            gunzip_capped(&gzip(b"hello"), 4),
            Err(GunzipError::TooLarge { cap: 4 })
        ));
    }

    #[test]
    fn a_corrupt_or_cut_gzip_body_is_malformed_not_too_large() {
        let good = gzip(b"hello world");
        let cut = &good[..good.len() - 4];
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0xff;
        let mut trailing = good.clone();
        trailing.extend_from_slice(b"garbage");
        for (case, body) in [
            ("cut", cut),
            ("wrong length", &flipped[..]),
            ("not gzip", &b"hello"[..]),
            ("trailing garbage", &trailing[..]),
        ] {
            let err = gunzip_capped(body, 1 << 20).unwrap_err();
            assert!(matches!(err, GunzipError::Malformed(_)), "{case}: {err:?}");
            assert!(err.to_string().starts_with("gzip body: "), "{case}: {err}");
        }
    }

    #[test]
    fn requests_decode_from_protobuf_and_json_alike() {
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource::default()),
                schema_url: "https://example.invalid/schema".to_owned(),
                ..Default::default()
            }],
        };
        let from_protobuf: ExportTraceServiceRequest =
            decode_request(Encoding::Protobuf, &request.encode_to_vec()).unwrap();
        assert_eq!(from_protobuf, request);
        let json = serde_json::to_vec(&request).unwrap();
        let from_json: ExportTraceServiceRequest = decode_request(Encoding::Json, &json).unwrap();
        assert_eq!(from_json, request);

        let cut = decode_request::<ExportMetricsServiceRequest>(Encoding::Json, b"{\"resourceM");
        assert!(matches!(cut, Err(MessageError::Json(_))), "{cut:?}");
        let invalid = decode_request::<ExportMetricsServiceRequest>(Encoding::Protobuf, &[0x0a]);
        assert!(
            matches!(invalid, Err(MessageError::Protobuf(_))),
            "{invalid:?}"
        );
    }

    #[test]
    fn content_types_are_read_without_parameters_or_case() {
        for (value, expected) in [
            ("application/x-protobuf", Encoding::Protobuf),
            ("application/protobuf", Encoding::Protobuf),
            ("Application/JSON; charset=utf-8", Encoding::Json),
            (" application/json ", Encoding::Json),
        ] {
            assert_eq!(
                Encoding::from_content_type(value),
                Ok(expected),
                "{value:?}"
            );
        }
        let err = Encoding::from_content_type("Text/Plain; charset=utf-8").unwrap_err();
        assert_eq!(err.media_type, "text/plain");
        assert_eq!(
            err.to_string(),
            "content-type \"text/plain\": expected application/x-protobuf or application/json"
        );
        assert!(Encoding::from_content_type("").is_err());
        assert_eq!(Encoding::Json.content_type(), "application/json");
    }
}
