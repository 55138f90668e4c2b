//! Kafka framing for controller traffic: request header v1 and response header v0 over a
//! 4-byte length prefix (tokio-util's `LengthDelimitedCodec`, built with the frame limit,
//! so a huge claimed length closes the connection before anything is allocated).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::LengthDelimitedCodec;

/// Private api keys of Raft traffic, far above Kafka's (which end in the low hundreds), so
/// a Kafka client sending one gets an unknown-key answer from the client listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaftApiKey {
    /// openraft AppendEntries (also the leader's heartbeat).
    AppendEntries,
    /// openraft Vote (RequestVote).
    Vote,
    /// openraft InstallSnapshot, one chunk per request.
    InstallSnapshot,
}

impl RaftApiKey {
    /// The key on the wire (32003 is unused: MetadataFetch went onto the controller RPC).
    #[must_use]
    pub fn code(self) -> i16 {
        match self {
            RaftApiKey::AppendEntries => 32000,
            RaftApiKey::Vote => 32001,
            RaftApiKey::InstallSnapshot => 32002,
        }
    }

    /// The key for a wire code, if it is one of ours.
    #[must_use]
    pub fn from_code(code: i16) -> Option<Self> {
        match code {
            32000 => Some(RaftApiKey::AppendEntries),
            32001 => Some(RaftApiKey::Vote),
            32002 => Some(RaftApiKey::InstallSnapshot),
            _ => None,
        }
    }
}

/// The private api key of controller RPC, a broker's requests to the active controller
/// (`controller_rpc`), MetadataFetch included.
pub const CONTROLLER_RPC_API_KEY: i16 = 32004;

/// Version of the controller RPC bodies' JSON layout; bumped on an incompatible change.
pub const CONTROLLER_RPC_API_VERSION: i16 = 0;

/// Version of every private request's body (openraft 0.9's serde layout).
pub const RAFT_API_VERSION: i16 = 0;

/// A decoded request header v1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHeader {
    /// Kafka api key.
    pub api_key: i16,
    /// Version of the request body.
    pub api_version: i16,
    /// Echoed in the response so the sender can match it.
    pub correlation_id: i32,
    /// Sender's name (nullable in Kafka; empty here when null).
    pub client_id: String,
}

/// Why a frame does not parse.
#[derive(Debug, thiserror::Error)]
#[error("malformed controller frame: {0}")]
pub struct FrameError(pub &'static str);

/// The length-prefixed codec, refusing frames over `frame_bytes_max`.
#[must_use]
pub fn codec(frame_bytes_max: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .max_frame_length(frame_bytes_max)
        .new_codec()
}

/// Request header then body.
#[must_use]
pub fn encode_request(header: &RequestHeader, body: &[u8]) -> Bytes {
    let client_id = header.client_id.as_bytes();
    let mut out = BytesMut::with_capacity(10 + client_id.len() + body.len());
    out.put_i16(header.api_key);
    out.put_i16(header.api_version);
    out.put_i32(header.correlation_id);
    // Client ids are short names; one longer than i16::MAX is cut rather than mis-framed.
    let len = client_id.len().min(i16::MAX as usize);
    out.put_i16(i16::try_from(len).unwrap_or(i16::MAX));
    out.put_slice(client_id.get(..len).unwrap_or_default());
    out.put_slice(body);
    out.freeze()
}

/// Splits a request frame into its header and body.
///
/// # Errors
/// The header is cut short or its client id is not UTF-8.
pub fn decode_request(mut frame: Bytes) -> Result<(RequestHeader, Bytes), FrameError> {
    if frame.remaining() < 10 {
        return Err(FrameError("request header cut short"));
    }
    let api_key = frame.get_i16();
    let api_version = frame.get_i16();
    let correlation_id = frame.get_i32();
    let client_id_len = frame.get_i16();
    let client_id = if client_id_len < 0 {
        String::new()
    } else {
        let len = client_id_len as usize;
        if frame.remaining() < len {
            return Err(FrameError("client id cut short"));
        }
        String::from_utf8(frame.split_to(len).to_vec())
            .map_err(|_| FrameError("client id is not UTF-8"))?
    };
    let header = RequestHeader {
        api_key,
        api_version,
        correlation_id,
        client_id,
    };
    Ok((header, frame))
}

/// Response header then body.
#[must_use]
pub fn encode_response(correlation_id: i32, body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + body.len());
    out.put_i32(correlation_id);
    out.put_slice(body);
    out.freeze()
}

/// Splits a response frame into its correlation id and body.
///
/// # Errors
/// The frame is shorter than its header.
pub fn decode_response(mut frame: Bytes) -> Result<(i32, Bytes), FrameError> {
    if frame.remaining() < 4 {
        return Err(FrameError("response header cut short"));
    }
    let correlation_id = frame.get_i32();
    Ok((correlation_id, frame))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Headers round-trip; short or non-UTF-8 headers are errors, not panics.
    #[test]
    fn headers_round_trip_and_reject_short_frames() {
        let header = RequestHeader {
            api_key: RaftApiKey::Vote.code(),
            api_version: RAFT_API_VERSION,
            correlation_id: 7,
            client_id: "controller-2".to_string(),
        };
        let (decoded, body) = decode_request(encode_request(&header, b"{}")).expect("decode");
        assert_eq!((decoded, &body[..]), (header, &b"{}"[..]));
        assert_eq!(RaftApiKey::from_code(32001), Some(RaftApiKey::Vote));
        assert_eq!(RaftApiKey::from_code(18), None);
        assert!(decode_request(Bytes::from_static(&[0, 1, 0])).is_err());
        assert!(decode_request(Bytes::from_static(&[0, 1, 0, 0, 0, 0, 0, 1, 0, 9, b'a'])).is_err());
        assert!(decode_request(Bytes::from_static(&[0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0xff])).is_err());
        let (id, body) = decode_response(encode_response(9, b"x")).expect("decode");
        assert_eq!((id, &body[..]), (9, &b"x"[..]));
        assert!(decode_response(Bytes::from_static(&[0, 0])).is_err());
    }
}
