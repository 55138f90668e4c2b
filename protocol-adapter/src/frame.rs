//! Kafka framing: every request and response is a big-endian `i32` size followed by that many
//! bytes.
//!
//! The size is checked against `frame_bytes_max` *before* any buffer for the body is allocated:
//! a client (or an attacker) announcing 2 GiB costs us nothing but a closed connection.
//! A negative size reads as a huge unsigned one and is rejected the same way.

use tokio_util::codec::LengthDelimitedCodec;

/// The codec used on every connection, in both directions.
pub type FrameCodec = LengthDelimitedCodec;

/// Builds the frame codec with the given maximum frame size in bytes (excluding the 4-byte
/// prefix). Frames above the limit make the decoder fail, which closes the connection, as
/// Apache Kafka does for requests above `socket.request.max.bytes`.
#[must_use]
pub fn frame_codec(frame_bytes_max: usize) -> FrameCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .max_frame_length(frame_bytes_max)
        .new_codec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};
    use tokio_util::codec::Decoder;

    // A prefix above the limit is an error before the body arrives, so nothing is allocated.
    #[test]
    fn oversized_prefix_is_rejected_before_the_body() {
        let mut codec = frame_codec(1024);
        let mut buf = BytesMut::new();
        buf.put_i32(0x7fff_ffff);
        assert!(codec.decode(&mut buf).is_err());
    }

    // A negative prefix is treated as oversized.
    #[test]
    fn negative_prefix_is_rejected() {
        let mut codec = frame_codec(1024);
        let mut buf = BytesMut::new();
        buf.put_i32(-1);
        assert!(codec.decode(&mut buf).is_err());
    }

    // A frame at the limit is accepted whole.
    #[test]
    fn frame_at_the_limit_is_accepted() {
        let mut codec = frame_codec(8);
        let mut buf = BytesMut::new();
        buf.put_i32(8);
        buf.put_slice(&[7u8; 8]);
        let frame = codec
            .decode(&mut buf)
            .expect("valid frame")
            .expect("complete frame");
        assert_eq!(&frame[..], &[7u8; 8]);
    }
}
