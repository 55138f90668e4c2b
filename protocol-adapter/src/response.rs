//! Encoding of responses: size prefix, response header (v0 or flexible v1 by API version),
//! body. Tagged fields at their default value are not written (the crate only writes the
//! ones present), which old librdkafka releases depend on.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;

use crate::file_records::{FileRecords, ResponseBuf};

/// Encodes `body` as the response to a request of `api_key` at `api_version` with
/// `correlation_id`, appending the framed bytes (size prefix included) to `out`.
///
/// # Errors
/// Only if the body holds a value the version cannot express, which is a bug of ours.
pub fn encode_response(
    out: &mut BytesMut,
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<(), String> {
    encode_framed(out, api_key, api_version, correlation_id, |out| {
        body.encode(out, api_version)
    })
}

/// Size prefix, header, then `encode_body`; on error nothing stays in `out`.
fn encode_framed<B: ByteBufMut, E: std::fmt::Display>(
    out: &mut B,
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    encode_body: impl FnOnce(&mut B) -> Result<(), E>,
) -> Result<(), String> {
    let start = out.offset();
    out.put_i32(0);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_version = api_key.response_header_version(api_version);
    if let Err(e) = header.encode(out, header_version) {
        out.seek(start);
        return Err(format!("response header: {e}"));
    }
    if let Err(e) = encode_body(out) {
        out.seek(start);
        return Err(format!("{api_key:?} v{api_version} response: {e}"));
    }
    patch_size(out, start);
    Ok(())
}

/// Encodes the answer to an ApiVersions request at a version we do not know: Kafka answers
/// in the v0 layout (header v0, error code, API list) so any client can read it and retry
/// with a version from the list.
///
/// # Errors
/// Only on a bug of ours (the v0 layout can express every field we set).
pub fn encode_api_versions_fallback(
    out: &mut BytesMut,
    correlation_id: i32,
    body: &ApiVersionsResponse,
) -> Result<(), String> {
    let start = out.offset();
    out.put_i32(0);
    out.put_i32(correlation_id);
    body.encode(out, 0)
        .map_err(|e| format!("ApiVersions v0 response: {e}"))?;
    patch_size(out, start);
    Ok(())
}

fn patch_size<B: ByteBufMut>(out: &mut B, start: usize) {
    let size = out.offset() - start - 4;
    let size =
        i32::try_from(size).expect("a response is smaller than 2 GiB: fetch sizes are capped");
    out.range(start..start + 4)
        .copy_from_slice(&size.to_be_bytes());
}

/// [`encode_response`] for a response whose record sets are partly in files: the
/// stand-ins `records` handed out become file chunks of `out` (see `file_records`).
///
/// # Errors
/// As [`encode_response`], and if a stand-in did not end up where the encoder wrote
/// records (then nothing of this response stays in `out`).
pub fn encode_response_with_records(
    out: &mut ResponseBuf,
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &ResponseKind,
    records: FileRecords,
) -> Result<(), String> {
    let fetch = match body {
        ResponseKind::Fetch(fetch) if !records.is_empty() => fetch,
        // Everything in memory: encode straight into the current memory chunk.
        _ => return encode_response(out.tail(), api_key, api_version, correlation_id, body),
    };
    let start = out.offset();
    out.begin_records(records);
    let encoded = encode_framed(out, api_key, api_version, correlation_id, |out| {
        fetch.encode(out, api_version)
    });
    let spliced = out.end_records();
    if encoded.is_ok() && spliced.is_err() {
        out.seek(start);
    }
    encoded.and(spliced)
}
