//! `PartitionMetadataFile` (Kafka's `partition.metadata`): the topic id a partition
//! directory belongs to. Directories are named `<topic>-<partition>`, so a topic deleted and
//! created again under the same name would otherwise be indistinguishable on disk: a broker
//! that was down while that happened, or that replays the metadata log after a restart,
//! could take the old topic's records for the new one's or delete the new one's records
//! as the old one's. The file lets the replica manager tell the two apart.
//!
//! Layout, as Kafka writes it: the id as Kafka's `Uuid.toString` renders it (22 characters
//! of unpadded URL-safe base64), no newline after it, so Kafka and its tools can read a
//! Logbook partition directory and Logbook a Kafka one:
//! ```text
//! version: 0
//! topic_id: CyxvHko9S46cfy0eWmt8jQ
//! ```
//! Logbook before 2026-12 wrote the hyphenated form; both are read.

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
    parse_topic_id(id.trim())
        .map(Some)
        .ok_or_else(|| invalid("topic_id is not a Kafka (base64) or hyphenated uuid"))
}

/// A topic id in Kafka's base64 form, or in the hyphenated form older Logbook files have.
fn parse_topic_id(id: &str) -> Option<Uuid> {
    use base64::Engine as _;
    if id.len() == KAFKA_ID_LEN {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(id)
            .ok()?;
        return Uuid::from_slice(&bytes).ok();
    }
    Uuid::parse_str(id).ok()
}

/// Characters of a 16-byte id in unpadded base64.
const KAFKA_ID_LEN: usize = 22;

/// `id` as Kafka's `Uuid.toString` renders it.
fn kafka_topic_id(id: Uuid) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
}

/// Records `topic_id` in `dir`: written to a temporary file, fsynced, renamed over the old
/// one and the directory fsynced, so a crash leaves the old file or the new one, never a
/// torn one.
///
/// # Errors
/// Any write, fsync or rename.
pub fn write(dir: &Path, topic_id: Uuid) -> std::io::Result<()> {
    logbook_common::replace(&dir.join(PARTITION_METADATA_FILE), |out| {
        write!(out, "version: 0\ntopic_id: {}", kafka_topic_id(topic_id))
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

    // Written as Kafka writes it; Kafka's own file reads (Kafka 4.4 wrote exactly these
    // bytes for a topic kafka-topics describes as TopicId HnOjmnawR32WshP9OCZzIg); the
    // hyphenated form Logbook wrote before still reads.
    #[test]
    fn the_file_is_kafkas_and_the_old_form_still_reads() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join(PARTITION_METADATA_FILE),
            "version: 0\ntopic_id: HnOjmnawR32WshP9OCZzIg",
        )
        .expect("write Kafka's file");
        assert_eq!(
            read(dir.path()).expect("read"),
            Some(Uuid::parse_str(KAFKAS_ID).expect("uuid"))
        );
        let id = Uuid::parse_str("0b2c6f1e-4a3d-4b8e-9c7f-2d1e5a6b7c8d").expect("uuid");
        write(dir.path(), id).expect("write");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(PARTITION_METADATA_FILE)).expect("read"),
            "version: 0\ntopic_id: CyxvHko9S46cfy0eWmt8jQ"
        );
        std::fs::write(
            dir.path().join(PARTITION_METADATA_FILE),
            "version: 0\ntopic_id: 0b2c6f1e-4a3d-4b8e-9c7f-2d1e5a6b7c8d\n",
        )
        .expect("write the old form");
        assert_eq!(read(dir.path()).expect("read"), Some(id));
    }

    /// The id of Kafka's file above.
    const KAFKAS_ID: &str = "1e73a39a-76b0-477d-96b2-13fd38267322";

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
