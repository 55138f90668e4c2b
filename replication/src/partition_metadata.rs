//! `PartitionMetadataFile` (Kafka's `partition.metadata`): the topic id a partition
//! directory belongs to. Directories are named `<topic>-<partition>`, so a topic deleted and
//! created again under the same name would otherwise be indistinguishable on disk: a broker
//! that was down while that happened, or that replays the metadata log after a restart,
//! could take the old topic's records for the new one's or delete the new one's records
//! as the old one's. The file lets the replica manager tell the two apart.
//!
//! Layout (as Kafka writes it, with the id in its usual hyphenated form):
//! ```text
//! version: 0
//! topic_id: 0b2c6f1e-4a3d-4b8e-9c7f-2d1e5a6b7c8d
//! ```

use std::path::Path;

use uuid::Uuid;

/// The file's name inside a partition directory.
pub const PARTITION_METADATA_FILE: &str = "partition.metadata";

/// The topic id recorded in `dir`, `None` when the directory has no such file (created
/// before the file existed, or never written because the broker died in between).
///
/// # Errors
/// Reading the file, or a file whose content is not the layout above.
pub fn read(dir: &Path) -> std::io::Result<Option<Uuid>> {
    let text = match std::fs::read_to_string(dir.join(PARTITION_METADATA_FILE)) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let invalid = |what: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {what}", dir.join(PARTITION_METADATA_FILE).display()),
        )
    };
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("version: 0") {
        return Err(invalid("not version 0"));
    }
    let id = lines
        .next()
        .and_then(|line| line.trim().strip_prefix("topic_id:"))
        .ok_or_else(|| invalid("no topic_id line"))?;
    Uuid::parse_str(id.trim())
        .map(Some)
        .map_err(|e| invalid(&e.to_string()))
}

/// Records `topic_id` in `dir`: written to a temporary file, fsynced, renamed over the old
/// one and the directory fsynced, so a crash leaves the old file or the new one, never a
/// torn one.
///
/// # Errors
/// Any write, fsync or rename.
pub fn write(dir: &Path, topic_id: Uuid) -> std::io::Result<()> {
    logbook_common::replace(&dir.join(PARTITION_METADATA_FILE), |out| {
        write!(out, "version: 0\ntopic_id: {topic_id}\n")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_topic_id_reads_back_and_a_missing_file_reads_as_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(read(dir.path()).expect("read"), None);
        let id = Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        write(dir.path(), id).expect("write");
        assert_eq!(read(dir.path()).expect("read"), Some(id));
        let other = Uuid::from_u128(7);
        write(dir.path(), other).expect("overwrite");
        assert_eq!(read(dir.path()).expect("read"), Some(other));
        assert!(!dir
            .path()
            .join(format!("{PARTITION_METADATA_FILE}.tmp"))
            .exists());
    }

    #[test]
    fn a_damaged_file_is_an_error_not_a_missing_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join(PARTITION_METADATA_FILE),
            "version: 0\ntopic_id: nope\n",
        )
        .expect("write");
        assert!(read(dir.path()).is_err());
        std::fs::write(dir.path().join(PARTITION_METADATA_FILE), "version: 9\n").expect("write");
        assert!(read(dir.path()).is_err());
    }
}
