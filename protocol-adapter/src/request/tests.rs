use super::*;
use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest};
use kafka_protocol::protocol::Encodable;

fn table(key: ApiKey) -> Option<VersionRange> {
    match key {
        ApiKey::ApiVersions => Some(VersionRange { min: 0, max: 4 }),
        ApiKey::Metadata => Some(VersionRange { min: 0, max: 12 }),
        _ => None,
    }
}

fn frame(key: ApiKey, version: i16, body: &impl Encodable) -> Bytes {
    let mut buf = BytesMut::new();
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(42)
        .with_client_id(Some("test".into()));
    header
        .encode(&mut buf, key.request_header_version(version))
        .expect("encode header");
    body.encode(&mut buf, version).expect("encode body");
    buf.freeze()
}

// Every supported version of a request round-trips through the decoder with its header.
#[test]
fn decodes_each_supported_version() {
    for version in 0..=12 {
        let request = MetadataRequest::default();
        let decoded =
            decode_request(frame(ApiKey::Metadata, version, &request), &table).expect("decodes");
        assert_eq!(decoded.header.correlation_id, 42);
        assert_eq!(decoded.header.client_id.as_deref(), Some("test"));
        assert!(matches!(decoded.body, RequestKind::Metadata(_)));
    }
}

// A version above the table is rejected with its correlation id, so ApiVersions can answer.
#[test]
fn rejects_unsupported_version() {
    let err = decode_request(
        frame(ApiKey::ApiVersions, 4, &ApiVersionsRequest::default()),
        &|_| Some(VersionRange { min: 0, max: 3 }),
    )
    .expect_err("unsupported");
    match err {
        DecodeError::UnsupportedVersion { preamble, api_key } => {
            assert_eq!(api_key, ApiKey::ApiVersions);
            assert_eq!(preamble.correlation_id, 42);
        }
        other => panic!("unexpected {other:?}"),
    }
}

// Unknown keys and short frames are errors, never panics.
#[test]
fn rejects_unknown_key_and_short_frames() {
    let mut buf = BytesMut::new();
    buf.put_i16(9999);
    buf.put_i16(0);
    buf.put_i32(7);
    assert!(matches!(
        decode_request(buf.freeze(), &table),
        Err(DecodeError::UnknownApiKey(RequestPreamble {
            correlation_id: 7,
            ..
        }))
    ));
    assert!(matches!(
        decode_request(Bytes::from_static(&[0, 3, 0]), &table),
        Err(DecodeError::TooShort(3))
    ));
}

proptest::proptest! {
    // Arbitrary bytes after a valid preamble never panic the decoder.
    #[test]
    fn garbage_bodies_never_panic(body in proptest::collection::vec(proptest::num::u8::ANY, 0..256), version in 0i16..=12) {
        let mut buf = BytesMut::new();
        buf.put_i16(ApiKey::Metadata as i16);
        buf.put_i16(version);
        buf.put_i32(1);
        buf.put_slice(&body);
        let _ = decode_request(buf.freeze(), &table);
    }
}
