//! Decoding of one request frame: the header (whose layout depends on the API key and
//! version), then the body through `kafka-protocol`.
//!
//! The API key, version and correlation id are read by hand first, from fixed positions that
//! every header version shares, so that a request we cannot decode can still be answered
//! (ApiVersions) or at least logged with its correlation id before the connection closes.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::{Decodable, VersionRange};

/// The first 8 bytes of every request header: enough to route or reject it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestPreamble {
    /// Raw API key as sent; may be one we do not know.
    pub api_key: i16,
    /// Requested API version.
    pub api_version: i16,
    /// Echoed back in the response header.
    pub correlation_id: i32,
}

/// A fully decoded request.
#[derive(Debug)]
pub struct DecodedRequest {
    /// The API this request belongs to.
    pub api_key: ApiKey,
    /// The decoded header (client id, correlation id, tagged fields).
    pub header: RequestHeader,
    /// The decoded body.
    pub body: RequestKind,
}

/// Why a frame could not be turned into a request. Each variant decides what the
/// connection does next: answer (ApiVersions fallback) or close, as Apache Kafka does.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Fewer than the 8 bytes every header starts with.
    #[error("frame of {0} bytes is shorter than a request header")]
    TooShort(usize),
    /// An API key this broker does not know.
    #[error("unknown API key {} (version {}, correlation id {})", .0.api_key, .0.api_version, .0.correlation_id)]
    UnknownApiKey(RequestPreamble),
    /// A known API asked at a version outside the range we implement.
    #[error("unsupported version {} of {:?} (correlation id {})", .preamble.api_version, .api_key, .preamble.correlation_id)]
    UnsupportedVersion {
        /// The request's first bytes.
        preamble: RequestPreamble,
        /// The API that was asked for.
        api_key: ApiKey,
    },
    /// The header or body does not parse at the version it claims.
    #[error("malformed {api_key:?} v{} request (correlation id {}): {reason}", .preamble.api_version, .preamble.correlation_id)]
    Malformed {
        /// The request's first bytes.
        preamble: RequestPreamble,
        /// The API that was asked for.
        api_key: ApiKey,
        /// The decoder's complaint.
        reason: String,
    },
}

/// The versions this broker implements for each API; `None` for an API it does not serve.
pub trait VersionTable {
    /// The supported range of `api_key`, if it is served at all.
    fn supported(&self, api_key: ApiKey) -> Option<VersionRange>;
}

impl<F: Fn(ApiKey) -> Option<VersionRange>> VersionTable for F {
    fn supported(&self, api_key: ApiKey) -> Option<VersionRange> {
        self(api_key)
    }
}

/// Reads the API key, version and correlation id without consuming the frame.
///
/// # Errors
/// `TooShort` if the frame has fewer than 8 bytes.
pub fn preamble(frame: &[u8]) -> Result<RequestPreamble, DecodeError> {
    let mut head = frame.get(..8).ok_or(DecodeError::TooShort(frame.len()))?;
    Ok(RequestPreamble {
        api_key: head.get_i16(),
        api_version: head.get_i16(),
        correlation_id: head.get_i32(),
    })
}

/// Decodes one request frame (without its size prefix).
///
/// # Errors
/// See [`DecodeError`]: unknown keys, versions outside `table`, and bytes that do not parse.
pub fn decode_request(
    mut frame: Bytes,
    table: &impl VersionTable,
) -> Result<DecodedRequest, DecodeError> {
    let preamble = preamble(&frame)?;
    let api_key =
        ApiKey::try_from(preamble.api_key).map_err(|()| DecodeError::UnknownApiKey(preamble))?;
    let range = table
        .supported(api_key)
        .ok_or(DecodeError::UnknownApiKey(preamble))?;
    if preamble.api_version < range.min || preamble.api_version > range.max {
        return Err(DecodeError::UnsupportedVersion { preamble, api_key });
    }
    let malformed = |reason: String| DecodeError::Malformed {
        preamble,
        api_key,
        reason,
    };
    let header_version = api_key.request_header_version(preamble.api_version);
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|e| malformed(format!("header: {e}")))?;
    let body = RequestKind::decode(api_key, &mut frame, preamble.api_version)
        .map_err(|e| malformed(format!("body: {e}")))?;
    Ok(DecodedRequest {
        api_key,
        header,
        body,
    })
}

#[cfg(test)]
mod tests;
