//! Snapshot files: the state machine's bytes and openraft's snapshot meta (last included
//! log id, membership), in `<log dir>/snapshots/`.
//!
//! File `<last index + 1, 20 digits>.snapshot` (0 for a snapshot of nothing): CRC32C (u32
//! BE) of the rest, meta length (u32 BE), meta (JSON), then the state. Written to a
//! temporary file, fsync'd, renamed, directory fsync'd, and only then are older snapshots
//! deleted, so the log is never purged past a snapshot that is not on disk. A damaged
//! newest snapshot is an error at startup rather than an empty state.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use openraft::SnapshotMeta;

use super::durable_file::sync_dir;
use super::types::ControllerNode;

/// Suffix of snapshot files.
const SNAPSHOT_SUFFIX: &str = ".snapshot";

/// openraft's snapshot meta for this type configuration.
pub type Meta = SnapshotMeta<u64, ControllerNode>;

fn file_name(meta: &Meta) -> String {
    let next = meta.last_log_id.map_or(0, |id| id.index + 1);
    format!("{next:020}{SNAPSHOT_SUFFIX}")
}

/// Durably writes a snapshot, then deletes older ones.
pub(crate) fn write(dir: &Path, meta: &Meta, data: &[u8]) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let meta_json = serde_json::to_vec(meta).map_err(io::Error::other)?;
    let meta_bytes = u32::try_from(meta_json.len()).map_err(io::Error::other)?;
    let mut body = Vec::with_capacity(4 + meta_json.len() + data.len());
    body.extend_from_slice(&meta_bytes.to_be_bytes());
    body.extend_from_slice(&meta_json);
    body.extend_from_slice(data);
    let name = file_name(meta);
    logbook_common::replace(&dir.join(&name), |out| {
        out.write_all(&crc32c::crc32c(&body).to_be_bytes())?;
        out.write_all(&body)
    })?;
    for old in list(dir)? {
        if old
            .file_name()
            .is_some_and(|n| *n.to_string_lossy() < *name.as_str())
        {
            fs::remove_file(old)?;
        }
    }
    sync_dir(dir)
}

/// Snapshot files in `dir`, oldest first.
fn list(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    match fs::read_dir(dir) {
        Ok(items) => {
            for item in items {
                let path = item?.path();
                if path.to_string_lossy().ends_with(SNAPSHOT_SUFFIX) {
                    out.push(path);
                }
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    out.sort();
    Ok(out)
}

/// The newest snapshot, if any.
///
/// # Errors
/// `InvalidData` if the newest snapshot fails its CRC or does not parse.
pub(crate) fn read_latest(dir: &Path) -> io::Result<Option<(Meta, Vec<u8>)>> {
    let Some(path) = list(dir)?.pop() else {
        return Ok(None);
    };
    let bytes = fs::read(&path)?;
    let invalid = |reason: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("snapshot {}: {reason}", path.display()),
        )
    };
    let (crc, body) = bytes
        .split_first_chunk::<4>()
        .ok_or_else(|| invalid("too short"))?;
    if u32::from_be_bytes(*crc) != crc32c::crc32c(body) {
        return Err(invalid("CRC mismatch"));
    }
    let (meta_bytes, rest) = body
        .split_first_chunk::<4>()
        .ok_or_else(|| invalid("too short"))?;
    let meta_bytes = u32::from_be_bytes(*meta_bytes) as usize;
    let meta_json = rest.get(..meta_bytes).ok_or_else(|| invalid("meta cut"))?;
    let data = rest.get(meta_bytes..).ok_or_else(|| invalid("meta cut"))?;
    let meta: Meta = serde_json::from_slice(meta_json).map_err(|e| invalid(&e.to_string()))?;
    Ok(Some((meta, data.to_vec())))
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, LogId};

    use super::*;

    fn meta(index: u64) -> Meta {
        Meta {
            last_log_id: Some(LogId::new(CommittedLeaderId::new(2, 1), index)),
            last_membership: openraft::StoredMembership::default(),
            snapshot_id: format!("2-{index}"),
        }
    }

    // The newest snapshot reads back and replaces older ones; a damaged newest snapshot is
    // an error, never an empty state.
    #[test]
    fn newest_snapshot_wins_and_damage_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(read_latest(dir.path()).expect("read").is_none());
        write(dir.path(), &meta(9), b"nine").expect("write");
        write(dir.path(), &meta(99), b"ninety-nine").expect("write");
        let (read_meta, data) = read_latest(dir.path()).expect("read").expect("present");
        assert_eq!((read_meta, data), (meta(99), b"ninety-nine".to_vec()));
        assert_eq!(
            list(dir.path()).expect("ls").len(),
            1,
            "older snapshot deleted"
        );
        let path = list(dir.path()).expect("ls").pop().expect("one");
        let mut bytes = fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x20;
        fs::write(&path, &bytes).expect("damage");
        let err = read_latest(dir.path()).expect_err("damaged snapshot");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
