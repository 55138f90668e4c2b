//! Bytes ⇄ typed Kafka requests and responses.
//!
//! This crate is the only place that knows how a Kafka frame is laid out: the 4-byte size
//! prefix (with a hard maximum checked before anything is allocated), the request and response
//! headers of each API version, and the encoding of bodies through the `kafka-protocol` crate.
//! It knows nothing of partitions, storage or tasks.

pub mod file_records;
pub mod frame;
pub mod request;
pub mod response;

pub use file_records::{Chunk, FileRecords, FileRegion, ResponseBuf, STAND_IN_BYTES};
pub use frame::{frame_codec, FrameCodec};
pub use kafka_protocol;
pub use request::{decode_request, DecodeError, DecodedRequest, RequestPreamble, VersionTable};
pub use response::{encode_api_versions_fallback, encode_response, encode_response_with_records};
