//! Decompression of a batch's records section for the four codecs Kafka defines, so the
//! validator (and later log compaction) can walk compressed records. Kafka pays this cost
//! on produce too. The output is bounded: a small "zip bomb" cannot make us allocate more
//! than the caller's `bytes_max`.
//!
//! Formats, as Kafka writes them: gzip (RFC 1952, concatenated members allowed), snappy
//! (xerial's framing `\x82SNAPPY\0` + version + compat + blocks of `u32 length` + raw
//! snappy, or a raw snappy block), lz4 (the LZ4 frame format), zstd (a zstd frame).

use std::io::Read;

/// Codec ids of the batch attributes' bits 0-2.
pub const CODEC_NONE: u8 = 0;
/// gzip.
pub const CODEC_GZIP: u8 = 1;
/// snappy.
pub const CODEC_SNAPPY: u8 = 2;
/// lz4.
pub const CODEC_LZ4: u8 = 3;
/// zstd.
pub const CODEC_ZSTD: u8 = 4;

/// Magic that opens xerial's snappy framing (what Java's `SnappyOutputStream` writes).
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
/// Magic, version (i32) and compatible version (i32).
const XERIAL_HEADER_BYTES: usize = 16;

/// Why a records section does not decompress.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum DecompressError {
    /// The bytes are not in the codec the attributes name.
    #[error("records are not valid {codec}: {reason}")]
    Invalid {
        /// Codec name.
        codec: &'static str,
        /// The decoder's message.
        reason: String,
    },
    /// The decompressed size exceeds the caller's bound.
    #[error("records decompress to more than {bytes_max} bytes")]
    TooLarge {
        /// The bound.
        bytes_max: usize,
    },
    /// Codec id 5..=7.
    #[error("unknown compression codec {0}")]
    UnknownCodec(u8),
}

/// Decompresses `compressed` (the bytes after a batch header) of codec `codec` (1..=4) into
/// a new buffer of at most `bytes_max` bytes.
///
/// # Errors
/// [`DecompressError::Invalid`] when the bytes are not in that codec, `TooLarge` past the
/// bound, `UnknownCodec` for ids that are not a compression codec (0 included: nothing to
/// decompress).
pub fn decompress(
    codec: u8,
    compressed: &[u8],
    bytes_max: usize,
) -> Result<Vec<u8>, DecompressError> {
    match codec {
        CODEC_GZIP => read_bounded(
            "gzip",
            flate2::read::MultiGzDecoder::new(compressed),
            bytes_max,
        ),
        CODEC_SNAPPY => snappy(compressed, bytes_max),
        CODEC_LZ4 => {
            let decoder = lz4::Decoder::new(compressed).map_err(|e| invalid("lz4", &e))?;
            read_bounded("lz4", decoder, bytes_max)
        }
        CODEC_ZSTD => {
            let decoder = zstd::stream::read::Decoder::with_buffer(compressed)
                .map_err(|e| invalid("zstd", &e))?;
            read_bounded("zstd", decoder, bytes_max)
        }
        other => Err(DecompressError::UnknownCodec(other)),
    }
}

fn invalid(codec: &'static str, e: &dyn std::fmt::Display) -> DecompressError {
    DecompressError::Invalid {
        codec,
        reason: e.to_string(),
    }
}

/// Reads a streaming decoder to its end, failing once more than `bytes_max` bytes come out.
fn read_bounded(
    codec: &'static str,
    decoder: impl Read,
    bytes_max: usize,
) -> Result<Vec<u8>, DecompressError> {
    let mut out = Vec::new();
    let limit = u64::try_from(bytes_max)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    decoder
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| invalid(codec, &e))?;
    if out.len() > bytes_max {
        return Err(DecompressError::TooLarge { bytes_max });
    }
    Ok(out)
}

/// Appends one raw snappy block to `out`, checking its announced size against the bound
/// before allocating it.
fn snappy_block(block: &[u8], out: &mut Vec<u8>, bytes_max: usize) -> Result<(), DecompressError> {
    let len = snap::raw::decompress_len(block).map_err(|e| invalid("snappy", &e))?;
    let start = out.len();
    if start.saturating_add(len) > bytes_max {
        return Err(DecompressError::TooLarge { bytes_max });
    }
    out.resize(start + len, 0);
    let target = out.get_mut(start..).unwrap_or_default();
    let written = snap::raw::Decoder::new()
        .decompress(block, target)
        .map_err(|e| invalid("snappy", &e))?;
    out.truncate(start + written);
    Ok(())
}

fn snappy(compressed: &[u8], bytes_max: usize) -> Result<Vec<u8>, DecompressError> {
    let mut out = Vec::new();
    if !compressed.starts_with(XERIAL_MAGIC) {
        snappy_block(compressed, &mut out, bytes_max)?;
        return Ok(out);
    }
    let mut rest = compressed
        .get(XERIAL_HEADER_BYTES..)
        .ok_or_else(|| invalid("snappy", &"truncated xerial header"))?;
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| invalid("snappy", &"truncated xerial block length"))?;
        let len = u32::from_be_bytes(*len) as usize;
        let block = tail
            .get(..len)
            .ok_or_else(|| invalid("snappy", &"xerial block runs past the records"))?;
        snappy_block(block, &mut out, bytes_max)?;
        rest = tail.get(len..).unwrap_or_default();
    }
    Ok(out)
}

/// Bytes of uncompressed input per xerial snappy block (what Java's `SnappyOutputStream`
/// uses).
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;

/// Compresses `raw` (back-to-back records) with `codec` (1..=4) in the format Kafka's
/// clients write, so that log compaction can recompress the records it keeps with the
/// batch's own codec: gzip, xerial-framed snappy, an LZ4 frame of independent 64 KiB
/// blocks, a zstd frame (level 3, zstd's default).
///
/// # Errors
/// The encoder's error, or `InvalidInput` for an id that is not a compression codec.
pub fn compress(codec: u8, raw: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::Write;
    match codec {
        CODEC_GZIP => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(raw)?;
            encoder.finish()
        }
        CODEC_SNAPPY => {
            let mut out = Vec::with_capacity(raw.len() / 2 + XERIAL_HEADER_BYTES);
            out.extend_from_slice(XERIAL_MAGIC);
            out.extend_from_slice(&1_i32.to_be_bytes());
            out.extend_from_slice(&1_i32.to_be_bytes());
            let mut encoder = snap::raw::Encoder::new();
            for chunk in raw.chunks(XERIAL_BLOCK_BYTES) {
                let block = encoder.compress_vec(chunk).map_err(std::io::Error::other)?;
                let len = u32::try_from(block.len()).map_err(std::io::Error::other)?;
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&block);
            }
            Ok(out)
        }
        CODEC_LZ4 => {
            let mut encoder = lz4::EncoderBuilder::new()
                .block_size(lz4::BlockSize::Max64KB)
                .block_mode(lz4::BlockMode::Independent)
                .build(Vec::new())?;
            encoder.write_all(raw)?;
            let (out, result) = encoder.finish();
            result.map(|()| out)
        }
        CODEC_ZSTD => zstd::stream::encode_all(raw, 3),
        other => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a compression codec: {other}"),
        )),
    }
}
