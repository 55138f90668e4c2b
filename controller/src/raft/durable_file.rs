//! Small files that must survive a crash whole or not at all: the vote (`quorum-state`,
//! as KRaft names it), the committed log id and the last purged log id.
//!
//! Format: a 4-byte big-endian CRC32C of the body, then the body (JSON). Written as
//! every checkpoint is (`logbook_common::replace`: write a temporary file, fsync it,
//! rename it over the old one, fsync the directory), so a crash leaves the old or the new content. A body whose
//! CRC does not match is reported as `InvalidData`, never silently read as absent: a
//! forgotten vote could let this node vote twice in one term.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

pub(crate) use logbook_common::sync_dir;

/// Bytes of the CRC prefix.
const CRC_BYTES: usize = 4;

/// Durably replaces `dir/name` with `body`.
pub(crate) fn write(dir: &Path, name: &str, body: &[u8]) -> io::Result<()> {
    write_file(dir, name, body, true)
}

/// Replaces `dir/name` with `body` atomically but without fsync: for hints whose loss
/// costs only time (after a power loss the old content, a damaged file or none may be
/// found, and `read` tells a damaged one apart by its CRC).
pub(crate) fn write_unsynced(dir: &Path, name: &str, body: &[u8]) -> io::Result<()> {
    write_file(dir, name, body, false)
}

fn write_file(dir: &Path, name: &str, body: &[u8], sync: bool) -> io::Result<()> {
    let path = dir.join(name);
    let write = |out: &mut dyn Write| {
        out.write_all(&crc32c::crc32c(body).to_be_bytes())?;
        out.write_all(body)
    };
    if sync {
        logbook_common::replace(&path, write)
    } else {
        logbook_common::replace_unsynced(&path, write)
    }
}

/// Reads `dir/name`: `Ok(None)` if it does not exist, `InvalidData` if its CRC is wrong.
pub(crate) fn read(dir: &Path, name: &str) -> io::Result<Option<Vec<u8>>> {
    let bytes = match fs::read(dir.join(name)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some((crc, body)) = bytes.split_first_chunk::<CRC_BYTES>() else {
        return Err(invalid(dir, name, "shorter than its CRC"));
    };
    if u32::from_be_bytes(*crc) != crc32c::crc32c(body) {
        return Err(invalid(dir, name, "CRC mismatch"));
    }
    Ok(Some(body.to_vec()))
}

fn invalid(dir: &Path, name: &str, reason: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}/{name}: {reason}", dir.display()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    // A written file reads back; a missing one is None; a flipped bit is an error, not None.
    #[test]
    fn round_trip_missing_and_damaged() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(read(dir.path(), "vote").expect("read"), None);
        write(dir.path(), "vote", b"{\"term\":3}").expect("write");
        assert_eq!(
            read(dir.path(), "vote").expect("read"),
            Some(b"{\"term\":3}".to_vec())
        );
        let mut bytes = fs::read(dir.path().join("vote")).expect("raw");
        bytes[6] ^= 1;
        fs::write(dir.path().join("vote"), &bytes).expect("damage");
        let err = read(dir.path(), "vote").expect_err("damaged vote must not read as absent");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(!dir.path().join("vote.tmp").exists());
    }
}
